//! The `--match` parser never panics; accepted expressions print to a canonical form that re-parses equal.
//! The property is `pchronicle::fuzzing::find_expr`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pchronicle::fuzzing::find_expr(data));
