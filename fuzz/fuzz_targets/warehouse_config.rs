//! warehouse.toml is accepted with valid unique names or refused with a code.
//! The property is `pchronicle::fuzzing::warehouse_config`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pchronicle::fuzzing::warehouse_config(data));
