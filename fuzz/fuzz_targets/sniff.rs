//! The sniffer never panics; two feeds give the shape of one.
//! The property is `pchronicle::fuzzing::sniff`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pchronicle::fuzzing::sniff(data));
