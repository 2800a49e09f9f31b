//! The user settings file loads or is refused with a code; what loads prints and reloads equal.
//! The property is `pchronicle::fuzzing::settings`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pchronicle::fuzzing::settings(data));
