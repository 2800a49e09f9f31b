//! The HTTP request head parser never panics; what it accepts is well formed.
//! The property is `pchronicle::fuzzing::http_head`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pchronicle::fuzzing::http_head(data));
