//! The SQL front end never panics or overflows its stack: any text is either
//! parsed into a supported read-only statement or refused with a coded error.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pchronicle::sql::parse::parse;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = parse(text) {
        assert!(e.code().starts_with("PC-SQL-"), "{}", e.code());
    }
});
