//! A Source that changes while it is read fails the read instead of mixing
//! contents (issue 2).

use std::io::Write as _;
use std::path::Path;

use pchronicle::catalog::read::{read_source, ReadFailure};
use pchronicle::catalog::{CatalogSnapshot, DatasetUri, DiscoveryLimits};
use pchronicle::formats::DecodeOptions;

fn doc(s: &str) -> String {
    format!(
        r#"{{"schema_version":"ATIF-v1.7","session_id":"{s}","agent":{{"name":"a","version":"1"}},"steps":[{{"step_id":1,"source":"user","message":"hi"}}]}}"#
    )
}

#[test]
fn file_modified_during_read_fails_with_code() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    std::fs::write(&path, format!("{}\n{}\n", doc("a"), doc("b"))).unwrap();
    let uri = DatasetUri::local(dir.path(), Path::new("/"));
    let snap = CatalogSnapshot::open(&uri, DiscoveryLimits::default(), false).unwrap();
    let src = &snap.sources[0];
    let mut first = true;
    let r = read_source(src, DecodeOptions::full(1 << 20), &mut |_| {
        if first {
            first = false;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            writeln!(f, "{}", doc("c")).unwrap();
        }
    });
    match r {
        Err(ReadFailure::Fatal(e)) => assert_eq!(e.code(), "PC-CAT-008"),
        other => panic!("expected a changed-during-read failure, got {other:?}"),
    }
}

#[test]
fn file_replaced_after_discovery_fails() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    std::fs::write(&path, doc("a")).unwrap();
    let uri = DatasetUri::local(dir.path(), Path::new("/"));
    let snap = CatalogSnapshot::open(&uri, DiscoveryLimits::default(), false).unwrap();
    // Replace by rename: a new inode under the same name.
    let tmp = dir.path().join("t.json.new");
    std::fs::write(&tmp, doc("zzz")).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    let r = read_source(&snap.sources[0], DecodeOptions::full(1 << 20), &mut |_| {});
    assert!(
        matches!(r, Err(ReadFailure::Fatal(ref e)) if e.code() == "PC-CAT-008"),
        "{r:?}"
    );
}

#[test]
fn file_deleted_after_discovery_fails() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    std::fs::write(&path, doc("a")).unwrap();
    let uri = DatasetUri::local(dir.path(), Path::new("/"));
    let snap = CatalogSnapshot::open(&uri, DiscoveryLimits::default(), false).unwrap();
    std::fs::remove_file(&path).unwrap();
    let r = read_source(&snap.sources[0], DecodeOptions::full(1 << 20), &mut |_| {});
    assert!(
        matches!(r, Err(ReadFailure::Fatal(ref e)) if e.code() == "PC-CAT-008"),
        "{r:?}"
    );
}

/// A JSON Lines Source of `n` records, large enough that reading it takes
/// several buffer fills.
fn many_records(path: &Path, n: usize) {
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&doc(&format!("session-{i:05}-{}", "x".repeat(200))));
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

/// Read a 2,000-record JSON Lines Source, running `change` on its file once
/// the first record is decoded; the read must fail with `PC-CAT-008`.
fn changed_mid_read_fails(change: impl FnOnce(&Path)) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    many_records(&path, 2000);
    let uri = DatasetUri::local(dir.path(), Path::new("/"));
    let snap = CatalogSnapshot::open(&uri, DiscoveryLimits::default(), false).unwrap();
    let mut change = Some(change);
    let r = read_source(&snap.sources[0], DecodeOptions::full(1 << 20), &mut |_| {
        if let Some(c) = change.take() {
            c(&path);
        }
    });
    assert!(
        matches!(r, Err(ReadFailure::Fatal(ref e)) if e.code() == "PC-CAT-008"),
        "{r:?}"
    );
}

#[test]
fn file_truncated_during_read_fails_with_code() {
    changed_mid_read_fails(|path| {
        let full = std::fs::metadata(path).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.set_len(full / 3).unwrap();
    });
}

#[test]
fn file_deleted_during_read_fails_with_code() {
    changed_mid_read_fails(|path| std::fs::remove_file(path).unwrap());
}

#[test]
fn file_rewritten_in_place_during_read_fails_with_code() {
    // Same size, same inode, different bytes: caught by the modification time.
    changed_mid_read_fails(|path| {
        let before = std::fs::read_to_string(path).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let swapped = before.replace("session-01999", "session-99999");
        let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.write_all(swapped.as_bytes()).unwrap();
    });
}
