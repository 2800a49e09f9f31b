//! An accepted snapshot reference prints back to the same text.
//! The property is `pchronicle::fuzzing::snapshot_ref`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pchronicle::fuzzing::snapshot_ref(data));
