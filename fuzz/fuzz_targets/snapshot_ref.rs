//! `SnapshotRef`: whatever parses prints back to the same text and re-parses equal.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pchronicle::catalog::SnapshotRef;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(r) = s.parse::<SnapshotRef>() {
        let printed = r.to_string();
        assert_eq!(printed, s, "Display is the canonical form of an accepted reference");
        assert_eq!(printed.parse::<SnapshotRef>().unwrap(), r);
    }
});
