//! Stores are plain Lance: the `pylance` package reads every table at the
//! versions `CURRENT` pins and sees the same rows pChronicle does.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{bin, python};

fn query_keys(store: &Path, sql: &str) -> Vec<serde_json::Value> {
    let o = Command::new(bin())
        .args(["query", store.to_str().unwrap(), sql, "--format", "jsonl"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn pylance_reads_the_same_rows() {
    need!("lance_interop", crate::support::Need::Python("lance"));
    let dir = tempfile::tempdir().unwrap();
    let store: PathBuf = dir.path().join("store");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/dataset/golang__exp");
    let o = Command::new(bin())
        .args([
            "import",
            "--from",
            src.to_str().unwrap(),
            "--output",
            store.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/lance_read.py");
    let py = Command::new(python())
        .arg(&script)
        .arg(&store)
        .output()
        .expect("run python (bash .ci/setup installs pylance)");
    assert!(
        py.status.success(),
        "pylance failed (run `bash .ci/setup`): {}",
        String::from_utf8_lossy(&py.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&py.stdout).unwrap();
    let current: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.join("CURRENT")).unwrap()).unwrap();
    for (table, sql, cols) in [
        (
            "runs",
            "SELECT document_id FROM trajectories ORDER BY document_id",
            vec!["document_id"],
        ),
        (
            "steps",
            "SELECT document_id, turn_ordinal FROM steps ORDER BY 1, 2",
            vec!["document_id", "turn_ordinal"],
        ),
        (
            "tool_calls",
            "SELECT document_id, turn_ordinal, call_index FROM tool_calls ORDER BY 1, 2, 3",
            vec!["document_id", "turn_ordinal", "call_index"],
        ),
    ] {
        assert_eq!(
            v[table]["version"],
            current["committed"][format!("{table}_version")],
            "{table}"
        );
        let ours: Vec<serde_json::Value> = query_keys(&store, sql)
            .into_iter()
            .map(|row| serde_json::Value::Array(cols.iter().map(|c| row[*c].clone()).collect()))
            .collect();
        assert_eq!(
            v[table]["rows"].as_u64().unwrap() as usize,
            ours.len(),
            "{table}"
        );
        assert_eq!(v[table]["keys"].as_array().unwrap(), &ours, "{table}");
    }
}
