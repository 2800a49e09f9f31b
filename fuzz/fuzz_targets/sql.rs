//! The SQL front end never panics or overflows its stack; text is accepted or refused with a code.
//! The property is `pchronicle::fuzzing::sql`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pchronicle::fuzzing::sql(data));
