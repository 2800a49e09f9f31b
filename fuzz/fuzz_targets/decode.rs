//! Every decoder: never panics on any input; a document it produces survives
//! a Storyline JSON round trip unchanged.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pchronicle::formats::model::Storyline;
use pchronicle::formats::{decode_bytes, DecodeCtx, DecodeOptions};

fuzz_target!(|data: &[u8]| {
    let mut ctx = DecodeCtx::new("fuzz.json");
    let mut docs = Vec::new();
    let _ = decode_bytes(data, DecodeOptions::full(1 << 20), &mut ctx, &mut |d| docs.push(d));
    for d in docs {
        let text = serde_json::to_string(&d).expect("a decoded document serialises");
        let back: Storyline = serde_json::from_str(&text).expect("and parses back as Storyline");
        assert_eq!(back, d);
    }
});
