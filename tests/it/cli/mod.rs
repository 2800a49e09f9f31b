//! CLI tests: run the real binary in temporary directories and snapshot exit
//! code, stdout and stderr (temp paths, snapshot ids and file fingerprints
//! filtered).

mod analysis;
mod common;
mod contract;
mod default_cmd;
mod errors;
mod export_digests;
mod find;
mod help;
mod import_export;
mod ls;
mod mirrors;
mod regression;
mod stats;
mod status;
mod streaming;
mod strict;
