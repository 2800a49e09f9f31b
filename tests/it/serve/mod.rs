//! `serve`: the read-only Warehouse API and the web explorer, tested over
//! real HTTP on loopback against the built binary.

mod api;
mod browser;
pub(crate) mod harness;
mod large;
mod lifecycle;
mod output;
