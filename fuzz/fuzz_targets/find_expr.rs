//! The `--match` parser never panics, and whatever it accepts prints back to
//! a canonical form that parses to the same expression.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pchronicle::find::parse_match_expression;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(e) = parse_match_expression(text) {
        let printed = e.to_string();
        let again = parse_match_expression(&printed)
            .unwrap_or_else(|err| panic!("canonical form {printed:?} does not parse: {err}"));
        assert_eq!(again, e, "{printed:?}");
        assert_eq!(again.to_string(), printed);
    }
});
