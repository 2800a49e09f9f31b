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

/// The Python recipe of docs/scale-out.md (`tests/python/scale_out.py`):
/// opened at the versions `CURRENT` pins, the tables answer the same
/// questions through DuckDB as `pchronicle query` does, and every step's
/// observation, large cells resolved from `objects.lance`, is the same text.
#[test]
fn the_scale_out_recipe_answers_like_pchronicle() {
    use sha2::Digest as _;
    need!("lance_interop", crate::support::Need::Python("duckdb"));
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    pchronicle::corpus::generate(&pchronicle::corpus::Options {
        out: data.clone(),
        runs: 24,
        steps: 20,
        seed: 17,
        format: "atif".into(),
        subagent_every: 4,
        files_per_dir: 8,
    })
    .unwrap();
    // One observation above the 64 KiB inline limit: stored as an object.
    let file = std::fs::read_dir(data.join("part-0000"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .unwrap();
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let big = format!("{}终\n", "line of tool output\n".repeat(5000));
    doc["steps"][1]["observation"] = serde_json::json!({"results": [{"content": big}]});
    std::fs::write(&file, serde_json::to_vec(&doc).unwrap()).unwrap();
    let store = dir.path().join("store");
    let o = Command::new(bin())
        .args(["import", "--from"])
        .arg(&data)
        .arg("--output")
        .arg(&store)
        .arg("-q")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/scale_out.py");
    let py = Command::new(python())
        .arg(&script)
        .arg(&store)
        .output()
        .unwrap();
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&py.stdout).unwrap();
    assert!(
        v["versions"]["objects"].is_u64(),
        "no objects table: {}",
        v["versions"]
    );
    let rows = |sql: &str| -> serde_json::Value {
        serde_json::Value::Array(
            query_keys(&store, sql)
                .into_iter()
                .map(|r| serde_json::json!([r["k"], r["n"]]))
                .collect(),
        )
    };
    for (key, sql) in [
        ("steps_by_role", "SELECT step_source AS k, count(*) AS n FROM steps GROUP BY 1 ORDER BY 1"),
        (
            "prompt_tokens_by_model",
            "SELECT model_name AS k, sum(prompt_tokens) AS n FROM steps WHERE model_name IS NOT NULL GROUP BY 1 ORDER BY 1",
        ),
        ("documents_by_agent", "SELECT agent_name AS k, count(*) AS n FROM trajectories GROUP BY 1 ORDER BY 1"),
        ("calls_by_function", "SELECT function_name AS k, count(*) AS n FROM tool_calls GROUP BY 1 ORDER BY 1"),
    ] {
        assert_eq!(v[key], rows(sql), "{key}");
    }
    let mut ours: Vec<serde_json::Value> = query_keys(
        &store,
        "SELECT document_id, turn_ordinal, observation FROM steps",
    )
    .into_iter()
    .map(|r| {
        let obs = r["observation"].as_str();
        let digest = obs.map(|t| {
            sha2::Sha256::digest(t.as_bytes())
                .iter()
                .fold(String::new(), |mut s, b| {
                    use std::fmt::Write as _;
                    let _ = write!(s, "{b:02x}");
                    s
                })
        });
        serde_json::json!([
            r["document_id"],
            r["turn_ordinal"],
            obs.map(str::len),
            digest
        ])
    })
    .collect();
    ours.sort_by_key(std::string::ToString::to_string);
    let mut theirs = v["observations"].as_array().unwrap().clone();
    theirs.sort_by_key(std::string::ToString::to_string);
    assert_eq!(theirs.len(), ours.len());
    assert!(
        theirs
            .iter()
            .any(|x| x[2].as_u64().is_some_and(|n| n > 64 * 1024)),
        "the large observation is missing"
    );
    assert_eq!(theirs, ours);
}
