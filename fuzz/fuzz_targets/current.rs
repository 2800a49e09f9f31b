//! A store's `CURRENT` pointer: accepted pointers name safe generations and round-trip.
//! The property is `pchronicle::fuzzing::current`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pchronicle::fuzzing::current(data));
