//! issue 18: the contract of the seeds, point by point — one row per Run in
//! `runs`, external ids never rewritten or invented, stores that remember
//! where each document came from.

use serde_json::{json, Value};

use crate::common::{json, TestEnv};

fn ok(o: &std::process::Output) {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Rows of a query as JSON values.
fn rows(env: &TestEnv, ds: &str, sql: &str) -> Vec<Value> {
    let o = env
        .cmd()
        .args(["query", ds, sql, "--format", "jsonl"])
        .output()
        .unwrap();
    ok(&o);
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn import(env: &TestEnv, from: &str, to: &str) -> std::process::Output {
    let o = env
        .cmd()
        .args(["import", "--from", from, "--output", to])
        .output()
        .unwrap();
    ok(&o);
    o
}

/// An ATIF run with an embedded subagent; `session` is written as given
/// (None: the key is absent, as ATIF v1.7 allows).
fn atif(session: Option<&str>, trajectory: &str, words: &str) -> Value {
    let mut v = json!({
        "schema_version": "ATIF-v1.6",
        "trajectory_id": trajectory,
        "agent": {"name": "a", "version": "1"},
        "steps": [
            {"step_id": 1, "source": "user", "message": format!("start {words}")},
            {"step_id": 2, "source": "agent", "message": "delegating",
             "tool_calls": [{"tool_call_id": "c1", "function_name": "spawn", "arguments": {}}],
             "observation": {"results": [{"source_call_id": "c1",
                "subagent_trajectory_ref": [{"trajectory_id": format!("{trajectory}-child")}]}]}}
        ],
        "subagent_trajectories": [{
            "schema_version": "ATIF-v1.6",
            "trajectory_id": format!("{trajectory}-child"),
            "agent": {"name": "helper", "version": "1"},
            "steps": [{"step_id": 1, "source": "agent", "message": format!("child {words}")}]
        }]
    });
    if let Some(s) = session {
        v["session_id"] = json!(s);
    }
    v
}

/// Point 1: `runs` has one row per Run, and every consumer counts the same
/// Runs (status, analysis, the runs relation).
#[test]
fn issue_18_runs_have_one_row_per_run() {
    let env = TestEnv::new();
    env.example("data");
    let runs = rows(
        &env,
        "data",
        "SELECT source_path, origin_path, run_id, trajectory_count FROM runs",
    );
    let distinct = rows(
        &env,
        "data",
        "SELECT DISTINCT source_path, origin_path, run_id FROM trajectories",
    );
    let docs = rows(&env, "data", "SELECT count(*) AS n FROM trajectories");
    assert_eq!(runs.len(), distinct.len());
    let total: i64 = runs
        .iter()
        .map(|r| r["trajectory_count"].as_i64().unwrap())
        .sum();
    assert_eq!(total, docs[0]["n"].as_i64().unwrap());
    assert!(runs.len() < total as usize, "the example has subagents");
    let status = json(&env.cmd().args(["status", "data"]).output().unwrap());
    assert_eq!(
        status["totals"]["runs"].as_u64().unwrap() as usize,
        runs.len()
    );
    let o = env
        .cmd()
        .args(["analysis", "overview", "data", "--format", "jsonl"])
        .output()
        .unwrap();
    ok(&o);
    let overview: i64 = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["runs"]
                .as_i64()
                .unwrap()
        })
        .sum();
    assert_eq!(overview as usize, runs.len());
    // The same through a store made of some of these files (one format:
    // four of them share a session id).
    let files = rows(
        &env,
        "data/golang__exp",
        "SELECT source_path AS origin_path, run_id, trajectory_count FROM runs ORDER BY 1, 2",
    );
    import(&env, "data/golang__exp", "store");
    let stored = rows(
        &env,
        "store",
        "SELECT origin_path, run_id, trajectory_count FROM runs ORDER BY 1, 2",
    );
    assert_eq!(stored, files);
    let status = json(&env.cmd().args(["status", "store"]).output().unwrap());
    assert_eq!(
        status["totals"]["runs"].as_u64().unwrap() as usize,
        files.len()
    );
}

/// Point 2: ids are kept verbatim. Two files with the same ids are two
/// documents (and two Runs) in the store, told apart by where they came
/// from; nothing is renamed, and export writes the ids that existed.
#[test]
fn issue_18_colliding_ids_are_kept_and_told_apart() {
    let env = TestEnv::new();
    let a = atif(Some("same"), "t-same", "alpha");
    let b = atif(Some("same"), "t-same", "beta");
    env.write("in/a.json", serde_json::to_vec(&a).unwrap());
    env.write("in/b.json", serde_json::to_vec(&b).unwrap());
    let o = import(&env, "in", "store");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("PC-IMP-009"), "{stderr}");
    assert!(!stderr.contains("#2"), "{stderr}");
    let docs = rows(
        &env,
        "store",
        "SELECT origin_path, document_id, trajectory_id FROM trajectories ORDER BY storage_ordinal",
    );
    let ids: Vec<(&str, &str)> = docs
        .iter()
        .map(|r| {
            (
                r["origin_path"].as_str().unwrap(),
                r["document_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ids,
        [
            ("a.json", "t-same"),
            ("a.json", "t-same-child"),
            ("b.json", "t-same"),
            ("b.json", "t-same-child")
        ]
    );
    let runs = rows(
        &env,
        "store",
        "SELECT origin_path, run_id, trajectory_count FROM runs ORDER BY origin_path",
    );
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert!(runs.iter().all(|r| r["trajectory_count"] == 2));
    // Steps follow their own document, not the first one with the id.
    let steps = rows(
        &env,
        "store",
        "SELECT origin_path, message_value FROM steps WHERE document_id = 't-same-child' ORDER BY origin_path",
    );
    assert_eq!(steps[0]["message_value"], "child alpha");
    assert_eq!(steps[1]["message_value"], "child beta");
    // Export writes back the two records as they were.
    let out = env.path().join("out.jsonl");
    let o = env
        .cmd()
        .args(["export", "--from", "store", "--format", "atif", "--output"])
        .arg(&out)
        .output()
        .unwrap();
    ok(&o);
    let records: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records, [a, b]);
}

/// Point 2: ATIF → ATIF does not add a `session_id` the source lacked (a
/// root with only a trajectory id, an embedded child that inherits).
#[test]
fn issue_18_atif_export_invents_no_session_id() {
    let env = TestEnv::new();
    let doc = atif(None, "t-1", "gamma");
    env.write("in/run.json", serde_json::to_vec(&doc).unwrap());
    for from in ["in/run.json", "store"] {
        if from == "store" {
            import(&env, "in", "store");
        }
        let o = env
            .cmd()
            .args([
                "export",
                "--from",
                if from == "store" { "store" } else { "in" },
                "--format",
                "atif",
                "--output",
                "-",
            ])
            .output()
            .unwrap();
        ok(&o);
        assert_eq!(json(&o), doc, "through {from}");
    }
}

/// Point 3: a store keeps where each document came from, on every relation,
/// in find results and in the explorer's API.
#[test]
fn issue_18_stores_keep_origin_paths() {
    let env = TestEnv::new();
    env.example("data");
    let want = rows(
        &env,
        "data/golang__exp",
        "SELECT source_path AS origin_path, count(*) AS steps FROM steps GROUP BY 1 ORDER BY 1",
    );
    import(&env, "data/golang__exp", "store");
    for rel in ["steps", "tool_calls", "trajectories", "runs"] {
        let got = rows(
            &env,
            "store",
            &format!("SELECT DISTINCT source_path, origin_path FROM {rel} ORDER BY 2"),
        );
        assert!(
            got.iter().all(|r| r["source_path"] == "."),
            "{rel}: {got:?}"
        );
        assert!(
            got.iter()
                .all(|r| want.iter().any(|w| w["origin_path"] == r["origin_path"])),
            "{rel}: {got:?}"
        );
    }
    let got = rows(
        &env,
        "store",
        "SELECT origin_path, count(*) AS steps FROM steps GROUP BY 1 ORDER BY 1",
    );
    assert_eq!(got, want);
    let found = json(
        &env.cmd()
            .args(["find", "store", "--match", "the", "--format", "json"])
            .output()
            .unwrap(),
    );
    let hits = found["matches"].as_array().unwrap();
    assert!(!hits.is_empty());
    for h in hits {
        assert_eq!(h["source_path"], ".");
        assert!(
            want.iter().any(|w| w["origin_path"] == h["origin_path"]),
            "{h}"
        );
    }
}
