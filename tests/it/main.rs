//! The integration tests, one binary: each suite is a module, the helpers
//! they share are in [`support`]. One binary links the library (and Lance)
//! once per test build.
//!
//! Every suite runs the real `pchronicle` binary or the library against real
//! components (files, Lance stores, loopback servers). Suites that need
//! Python oracles, the S3 test server or a browser skip themselves, and say
//! so, when those are missing; `.ci/test` requires them all.

#![allow(missing_docs)]

#[macro_use]
mod support;

mod bounds;
mod cli;
mod docs;
mod faults;
mod find;
mod find_cold;
mod formats;
mod fuzz_corpus;
mod gateway;
mod lance_interop;
mod layers;
mod memory;
mod read_consistency;
mod s3;
mod serve;
mod sql_diff;
mod sql_props;
mod uri_props;
