//! Sniffing and every exchange decoder never panic; decoded documents round-trip through Storyline JSON.
//! The property is `pchronicle::fuzzing::decode`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pchronicle::fuzzing::decode(data));
