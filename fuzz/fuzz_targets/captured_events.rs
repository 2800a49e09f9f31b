//! SSE assembly and the projection of captured events never panic; projections round-trip.
//! The property is `pchronicle::fuzzing::captured_events`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pchronicle::fuzzing::captured_events(data));
