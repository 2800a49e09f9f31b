//! gateway.toml is accepted (loopback only, keys never in Debug) or refused with a code.
//! The property is `pchronicle::fuzzing::gateway_config`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pchronicle::fuzzing::gateway_config(data));
