//! pChronicle: a path-first data layer for AI-agent trajectories.
//!
//! Crate map (dependencies point downward only):
//!
//! - [`cli`] — clap types, resolved settings, one module per command, output writers.
//! - [`analysis`] — the fixed reports, as SQL for the engine.
//! - [`find`] — the RFC-0012 expression language, index preparation and search.
//! - [`sql`] — the read-only SQL engine: parser allow-list, binder, plans, operators.
//! - [`dataset`] — the relations of mounted Datasets (the engine's data provider).
//! - [`store`] — the Storyline Lance store: write, read, maintain.
//! - [`catalog`] — Dataset URI normalisation, Source discovery, Catalog Snapshot.
//! - [`fts`] — the step full-text index (the only tantivy and jieba user).
//! - [`table`] — relation schemas and row builders from the canonical model.
//! - [`formats`] — the canonical model and one codec per exchange format.
//! - [`error`] — the top-level error with stable codes and exit classes.
//!
//! Nothing below `cli` prints; library code returns values and errors.

#![forbid(unsafe_code)]

pub mod analysis;
pub mod catalog;
pub mod cli;
#[cfg(feature = "synthetic-corpus")]
pub mod corpus;
pub mod dataset;
pub(crate) mod error;
pub mod find;
pub mod formats;
pub mod fts;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub(crate) mod gateway;
pub(crate) mod http;
pub mod ingest;
pub mod render;
pub mod s3;
pub mod sql;
pub mod store;
pub mod table;
pub(crate) mod util;
pub(crate) mod web;

pub use error::{Error, Result};
