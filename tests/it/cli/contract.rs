//! issue 18: the contract of the seeds, point by point — one row per Run in
//! `runs`, external ids never rewritten or invented, stores that remember
//! where each document came from.

use serde_json::{json, Value};

use crate::cli::common::{json, TestEnv};

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

/// A Dataset with a good file, a truncated one, a degraded one (a tool call
/// id used twice) and a `.json` file that is not JSON to its end.
fn mixed_health(env: &TestEnv) {
    let good = atif(Some("good"), "t-good", "fine");
    env.write("ds/good.json", serde_json::to_vec(&good).unwrap());
    let text = serde_json::to_string(&atif(Some("cut"), "t-cut", "cut")).unwrap();
    env.write("ds/truncated.json", &text[..text.len() / 2]);
    let mut dup = atif(Some("dup"), "t-dup", "twice");
    dup["steps"][1]["tool_calls"] = json!([
        {"tool_call_id": "c1", "function_name": "a", "arguments": {}},
        {"tool_call_id": "c1", "function_name": "b", "arguments": {}}
    ]);
    env.write("ds/degraded.json", serde_json::to_vec(&dup).unwrap());
    env.write("ds/notes.json", r#"[{"note": "not a trajectory"}, garbage"#);
}

fn status_of(v: &Value, path: &str) -> (String, String) {
    let s = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source_path"] == path)
        .unwrap_or_else(|| panic!("{path} not listed: {v}"));
    (
        s["status"].as_str().unwrap().to_string(),
        s["reason"]["code"].as_str().unwrap_or_default().to_string(),
    )
}

/// Point 6: one rule for a Source that cannot be read completely. `ls` and
/// `status` agree on it; report mode warns and goes on; `--errors strict`
/// fails naming the Source in every command, whatever is cached.
#[test]
fn issue_18_one_strictness_rule() {
    let env = TestEnv::new();
    mixed_health(&env);
    let ls = json(
        &env.cmd()
            .args(["ls", "ds", "--format", "json"])
            .output()
            .unwrap(),
    );
    let st = json(
        &env.cmd()
            .args(["status", "ds", "--format", "json"])
            .output()
            .unwrap(),
    );
    for p in ["good.json", "truncated.json", "degraded.json", "notes.json"] {
        assert_eq!(status_of(&ls, p), status_of(&st, p), "{p}");
    }
    assert_eq!(status_of(&st, "good.json").0, "ready");
    assert_eq!(status_of(&st, "truncated.json").0, "error");
    assert_eq!(status_of(&st, "degraded.json").0, "degraded");
    assert_eq!(status_of(&st, "notes.json").0, "error");
    // A second `ls` reuses what the first found.
    let again = json(
        &env.cmd()
            .args(["ls", "ds", "--format", "json"])
            .output()
            .unwrap(),
    );
    assert_eq!(
        status_of(&again, "truncated.json"),
        status_of(&ls, "truncated.json")
    );

    let strict_fails = |args: &[&str]| {
        let o = env
            .cmd()
            .args(args)
            .args(["--errors", "strict"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            ["truncated.json", "degraded.json", "notes.json"]
                .iter()
                .any(|p| err.contains(p)),
            "{args:?} names no Source: {err}"
        );
    };
    let report_warns = |args: &[&str]| {
        let o = env.cmd().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        assert!(err.contains("truncated.json"), "{args:?}: {err}");
        assert!(err.contains("degraded.json"), "{args:?}: {err}");
    };
    let q = ["query", "ds", "SELECT count(*) FROM steps"];
    report_warns(&q);
    strict_fails(&q);
    strict_fails(&["analysis", "overview", "ds"]);
    strict_fails(&["status", "ds"]);
    strict_fails(&["ls", "ds"]);
    strict_fails(&[
        "export", "--from", "ds", "--format", "atif", "--output", "-",
    ]);
    let f = ["find", "ds", "--match", "fine", "--format", "json"];
    report_warns(&f); // builds the index
    report_warns(&f); // served by the cached index: the same warnings
    strict_fails(&f); // and the same refusal
}

/// Point 7: `query --timeout` ends the command within 10% + 100 ms of its
/// limit, even inside one long operator.
#[test]
fn issue_18_query_timeout_is_prompt() {
    let env = TestEnv::new();
    pchronicle_corpus(&env.path().join("big"), 60, 40);
    let started = std::time::Instant::now();
    let o = env
        .cmd()
        .args([
            "query",
            "big",
            "SELECT count(*) FROM steps a, steps b, steps c WHERE a.step_id + b.step_id + c.step_id > 0",
            "--timeout",
            "1",
        ])
        .output()
        .unwrap();
    let took = started.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("PC-SQL-014"), "{err}");
    assert!(took < 1.0 * 1.1 + 0.1 + 0.3, "took {took:.2}s");
}

fn pchronicle_corpus(dir: &std::path::Path, runs: u64, steps: u64) {
    pchronicle::corpus::generate(&pchronicle::corpus::Options {
        out: dir.to_path_buf(),
        runs,
        steps,
        seed: 3,
        format: "atif".into(),
        subagent_every: 0,
        files_per_dir: 50,
    })
    .unwrap();
}

/// Point 8: an exact id lookup needs no full-text index.
#[test]
fn issue_18_id_lookups_need_no_index() {
    let env = TestEnv::new();
    env.example("data");
    let o = env
        .cmd()
        .args([
            "find",
            "data",
            "--session-id",
            "cyber-a",
            "--step-id",
            "1",
            "--no-build-index",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    ok(&o);
    let v = json(&o);
    assert_eq!(v["search"]["fts_available"], true, "{v}");
    let m = v["matches"].as_array().unwrap();
    assert_eq!(m.len(), 1, "{v}");
    assert_eq!(m[0]["step_id"], 1);
    assert_eq!(m[0]["session_id"], "cyber-a");
    assert!(!m[0]["preview"].as_str().unwrap().is_empty());
}

/// Point 6: a search served by a cached index reports a Source that was
/// read incompletely when it was indexed, and refuses it under strict.
#[test]
fn issue_18_cached_index_keeps_reporting_a_broken_source() {
    let env = TestEnv::new();
    let good = atif(Some("good"), "t-good", "fine");
    env.write("ds/good.json", serde_json::to_vec(&good).unwrap());
    let text = serde_json::to_string(&atif(Some("cut"), "t-cut", "cut")).unwrap();
    env.write("ds/truncated.json", &text[..text.len() / 2]);
    let find = |strict: bool| {
        let mut c = env.cmd();
        c.args(["find", "ds", "--match", "fine", "--format", "json"]);
        if strict {
            c.args(["--errors", "strict"]);
        }
        c.output().unwrap()
    };
    for round in ["cold", "warm"] {
        let o = find(false);
        ok(&o);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("warning[PC-FMT-002]") && err.contains("truncated.json"),
            "{round}: {err}"
        );
    }
    let o = find(true);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("error[PC-CAT-010]")
            && err.contains("[PC-FMT-002]")
            && err.contains("Source `truncated.json`"),
        "{err}"
    );
}
