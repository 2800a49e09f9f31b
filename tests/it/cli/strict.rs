//! Issue 18, points 4 and 5: OpenAI messages round trip losslessly through a
//! store, in the shape they came in; `export --strict` refuses every
//! conversion that would lose a field, and without it each such field is a
//! named `PC-EXP-005` warning.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::cli::common::{example_dataset, json, TestEnv};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn run(env: &TestEnv, args: &[&str]) -> std::process::Output {
    env.cmd().args(args).output().unwrap()
}

fn ok(o: &std::process::Output) {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn import(env: &TestEnv, from: &Path, out: &str) {
    let o = run(
        env,
        &["import", "--from", from.to_str().unwrap(), "--output", out],
    );
    ok(&o);
}

/// Export `from` as OpenAI messages to stdout (`--strict`: nothing may be
/// lost on the way).
fn export_openai(env: &TestEnv, from: &str) -> Vec<Value> {
    let o = run(
        env,
        &[
            "export",
            "--from",
            from,
            "--format",
            "openai-messages",
            "--output",
            "-",
            "--strict",
        ],
    );
    ok(&o);
    records(&String::from_utf8(o.stdout).unwrap())
}

/// One JSON document, an array of records, or JSON Lines, as records.
fn records(text: &str) -> Vec<Value> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(a)) => a,
        Ok(v) => vec![v],
        Err(_) => text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
    }
}

/// Every `function.arguments` string of a list of OpenAI records, in order.
fn argument_strings(records: &[Value]) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                if let Some(Value::String(a)) = o.get("function").and_then(|f| f.get("arguments")) {
                    out.push(a.clone());
                }
                o.values().for_each(|x| walk(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for r in records {
        walk(r, &mut out);
    }
    out
}

#[test]
fn issue_18_openhands_jsonl_round_trips_through_a_store() {
    let env = TestEnv::new();
    // A Dataset is a directory: the file alone in one.
    let text = std::fs::read_to_string(fixture("openai/openhands_sft.jsonl")).unwrap();
    env.write("in/openhands_sft.jsonl", &text);
    let original = records(&text);
    assert_eq!(original.len(), 2);
    import(&env, &env.path().join("in"), "store");
    for from in ["in", "store"] {
        let back = export_openai(&env, from);
        // Same JSON values: the record fields beside the messages
        // (`instance_id`, `resolved`, `test_result`, …), `index`,
        // `"tool_calls": null` and `[]`, `name`, `weight`, `developer`.
        assert_eq!(back, original, "exported from {from}");
        // The training text is unchanged: argument strings byte for byte
        // (spacing, key order, `\u00e9` escapes, one that is not JSON).
        let (a, b) = (argument_strings(&back), argument_strings(&original));
        assert_eq!(a.len(), 5);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.as_bytes(), y.as_bytes(), "exported from {from}");
        }
    }
    // The store keeps the argument text as its `arguments` column, where
    // JSON operators still read it.
    let o = run(
        &env,
        &[
            "query",
            "store",
            "SELECT arguments, arguments->>'command' AS command FROM tool_calls WHERE tool_call_id = 'toolu_02'",
            "--format",
            "jsonl",
        ],
    );
    ok(&o);
    let row: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        row["arguments"],
        r#"{"path": "/workspace/calc/calc.py", "command": "view", "security_risk": "LOW"}"#
    );
    assert_eq!(row["command"], "view");
}

#[test]
fn issue_18_rows_shaped_input_exports_rows() {
    let env = TestEnv::new();
    let files = [
        fixture("openai/rows_history.jsonl"),
        example_dataset().join("DeepLink-org__Persisting/cybergym_0729001_trimmed.json"),
        example_dataset().join("DeepLink-org__Persisting/cybergym_07270003_trimmed.json"),
    ];
    for (i, src) in files.iter().enumerate() {
        let text = std::fs::read_to_string(src).unwrap();
        let original = records(&text);
        let dir = format!("in{i}");
        env.write(
            &format!("{dir}/{}", src.file_name().unwrap().to_string_lossy()),
            &text,
        );
        let store = format!("rows{i}");
        import(&env, &env.path().join(&dir), &store);
        for from in [dir.as_str(), store.as_str()] {
            // Rows again, in file order, with `session_id`, `id`,
            // `agent_model` and every other row field as they were.
            let back = export_openai(&env, from);
            assert_eq!(back, original, "{} exported from {from}", src.display());
            assert_eq!(argument_strings(&back), argument_strings(&original));
        }
    }
}

/// An ATIF run whose agent name, version and model, trajectory id, step
/// model and step `extra` OpenAI messages cannot hold.
const ATIF_RUN: &str = r#"{"schema_version":"ATIF-v1.7","session_id":"run-1","trajectory_id":"traj-1",
  "agent":{"name":"coder","version":"2.1.0","model_name":"gpt-test"},
  "steps":[
    {"step_id":1,"source":"user","message":"say hi"},
    {"step_id":2,"source":"agent","model_name":"gpt-test","message":"hi","extra":{"tags":["greeting"]}}
  ]}"#;

#[test]
fn issue_18_strict_openai_export_refuses_what_it_would_drop() {
    let env = TestEnv::new();
    env.write("in/run.json", ATIF_RUN);
    let dir = env.path().join("in");
    let from = dir.to_str().unwrap();
    let base = [
        "export",
        "--from",
        from,
        "--format",
        "openai-messages",
        "--output",
        "-",
    ];
    let mut strict = base.to_vec();
    strict.push("--strict");
    let o = run(&env, &strict);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(json(&o)["error"]["code"], "PC-EXP-002");
    // Without --strict: written, and every dropped field named.
    let o = run(&env, &base);
    ok(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    for field in [
        "/agent/name",
        "/agent/ver",
        "/agent/model",
        "/trajectory",
        "/turns/1/model",
        "/turns/1/extra",
    ] {
        assert!(
            stderr.contains(&format!("warning[PC-EXP-005]: dropped {field}:")),
            "{field} not reported:\n{stderr}"
        );
    }
}

/// A root whose embedded subagent has a session id of its own.
const ATIF_WITH_SUBAGENT: &str = r#"{"schema_version":"ATIF-v1.7","session_id":"root-s","trajectory_id":"root-t",
  "agent":{"name":"lead","version":"1"},
  "steps":[
    {"step_id":1,"source":"user","message":"split the work"},
    {"step_id":2,"source":"agent","message":"delegating",
     "tool_calls":[{"tool_call_id":"spawn-1","function_name":"delegate","arguments":{"task":"sub"}}],
     "observation":{"results":[{"source_call_id":"spawn-1","subagent_trajectory_ref":[{"trajectory_id":"child-t"}]}]}}
  ],
  "subagent_trajectories":[
    {"schema_version":"ATIF-v1.7","session_id":"child-s","trajectory_id":"child-t",
     "agent":{"name":"worker","version":"1"},
     "steps":[{"step_id":1,"source":"agent","message":"done"}]}
  ]}"#;

#[test]
fn issue_18_subagent_exported_alone_loses_its_parent_link() {
    let env = TestEnv::new();
    env.write("in/run.json", ATIF_WITH_SUBAGENT);
    let dir = env.path().join("in");
    let from = dir.to_str().unwrap();
    // The whole run converts without loss: the child is embedded again.
    let o = run(
        &env,
        &[
            "export", "--from", from, "--format", "atif", "--output", "-", "--strict",
        ],
    );
    ok(&o);
    let back = records(&String::from_utf8(o.stdout).unwrap());
    let original: Value = serde_json::from_str(ATIF_WITH_SUBAGENT).unwrap();
    assert_eq!(back, vec![original]);
    // The subagent alone: its parent is not exported, so ATIF cannot link
    // it. Refused under --strict …
    let alone = [
        "export",
        "--from",
        from,
        "--format",
        "atif",
        "--output",
        "-",
        "--session-id",
        "child-s",
    ];
    let mut strict = alone.to_vec();
    strict.push("--strict");
    let o = run(&env, &strict);
    assert_eq!(o.status.code(), Some(2));
    let err = json(&o);
    assert_eq!(err["error"]["code"], "PC-EXP-002");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/parent"),
        "{err}"
    );
    // … and a named warning without it.
    let o = run(&env, &alone);
    ok(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("warning[PC-EXP-005]: dropped /parent:"),
        "{stderr}"
    );
    assert_eq!(records(&String::from_utf8(o.stdout).unwrap()).len(), 1);
}
