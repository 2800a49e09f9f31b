//! The sniffer never panics, and feeding the same bytes in two chunks gives
//! the same shape as feeding them at once.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pchronicle::formats::sniff::{sniff_bytes, Sniffer};

fuzz_target!(|data: &[u8]| {
    let whole = sniff_bytes(data);
    let cut = data.len() / 2;
    let mut s = Sniffer::new();
    s.feed(&data[..cut]);
    s.feed(&data[cut..]);
    assert_eq!(s.finish(), whole);
});
