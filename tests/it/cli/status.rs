//! `status`: counts per Source and in total, problems reported with codes.

use crate::cli::common::{json, TestEnv};
use crate::pc_snapshot;

#[test]
fn example_dataset_table() {
    let env = TestEnv::new();
    env.example("data");
    pc_snapshot!(env, env.cmd().args(["status", "data", "--format", "table"]));
}

#[test]
fn example_dataset_counts() {
    let env = TestEnv::new();
    env.example("data");
    let out = env
        .cmd()
        .args(["status", "data", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    let t = &v["totals"];
    assert_eq!(t["sources"], 12);
    assert_eq!(t["ready"], 12);
    assert_eq!(t["trajectories"], 14);
    assert_eq!(t["steps"], 84);
    assert_eq!(t["tool_calls"], 20);
}

fn status_of(env: &TestEnv, dir: &str) -> serde_json::Value {
    let out = env
        .cmd()
        .args(["status", dir, "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out)
}

const ATIF_HEAD: &str = r#"{"schema_version":"ATIF-v1.7","session_id":"s1","agent":{"name":"a","version":"1"},"steps":"#;

#[test]
fn bad_inputs_are_reported_with_codes() {
    let env = TestEnv::new();
    env.write(
        "d/invalid.json",
        format!("{ATIF_HEAD}[{{\"step_id\":1,\"source\":\"user\",\"message\":\"hi\",}}]}}"),
    );
    env.write(
        "d/truncated.json",
        format!("{ATIF_HEAD}[{{\"step_id\":1,\"source\":\"user\",\"mess"),
    );
    env.write("d/nan.json", format!("{ATIF_HEAD}[{{\"step_id\":1,\"source\":\"agent\",\"message\":\"x\",\"metrics\":{{\"cost_usd\":NaN}}}}]}}"));
    env.write("d/version.json", r#"{"schema_version":"ATIF-v2.0","session_id":"s","agent":{"name":"a","version":"1"},"steps":[]}"#);
    env.write(
        "d/dup_calls.json",
        format!(
            "{ATIF_HEAD}[{{\"step_id\":1,\"source\":\"agent\",\"message\":\"\",\"tool_calls\":[{{\"tool_call_id\":\"c1\",\"function_name\":\"f\",\"arguments\":{{}}}},{{\"tool_call_id\":\"c1\",\"function_name\":\"g\",\"arguments\":{{}}}}]}}]}}"
        ),
    );
    env.write(
        "d/order.json",
        format!("{ATIF_HEAD}[{{\"step_id\":2,\"source\":\"user\",\"message\":\"a\"}},{{\"step_id\":1,\"source\":\"agent\",\"message\":\"b\"}}]}}"),
    );
    env.write(
        "d/orphan.json",
        format!("{ATIF_HEAD}[{{\"step_id\":1,\"source\":\"agent\",\"message\":\"\",\"observation\":{{\"results\":[{{\"source_call_id\":\"nope\",\"content\":\"x\"}}]}}}}]}}"),
    );
    env.write(
        "d/deep.json",
        format!(
            "{ATIF_HEAD}[], \"extra\": {}{}}}",
            "[".repeat(5000),
            "]".repeat(5000)
        ),
    );
    let v = status_of(&env, "d");
    let by_path = |p: &str| {
        v["sources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["source_path"] == p)
            .cloned()
            .unwrap()
    };
    for (path, status, code) in [
        ("invalid.json", "error", "PC-FMT-001"),
        ("truncated.json", "error", "PC-FMT-002"),
        ("nan.json", "error", "PC-FMT-003"),
        ("version.json", "error", "PC-FMT-004"),
        ("dup_calls.json", "degraded", "PC-FMT-006"),
        ("order.json", "degraded", "PC-FMT-007"),
        ("orphan.json", "degraded", "PC-FMT-008"),
        ("deep.json", "error", "PC-FMT-010"),
    ] {
        let s = by_path(path);
        assert_eq!(s["status"], status, "{path}: {s}");
        assert_eq!(s["reason"]["code"], code, "{path}: {s}");
    }
    // Degraded Sources are still counted; nothing is dropped silently.
    assert_eq!(by_path("order.json")["counts"]["steps"], 2);
    assert_eq!(v["totals"]["error"], 5);
    assert_eq!(v["totals"]["degraded"], 3);
}

#[test]
fn strict_fails_on_the_first_bad_source() {
    let env = TestEnv::new();
    env.write(
        "d/a.json",
        format!("{ATIF_HEAD}[{{\"step_id\":1,\"source\":\"user\",\"message\":\"hi\"}}]}}"),
    );
    env.write("d/b.json", format!("{ATIF_HEAD}[{{\"step_id\":1,"));
    pc_snapshot!(
        env,
        env.cmd()
            .args(["status", "d", "--errors", "strict", "--format", "table"])
    );
}

#[test]
fn oversized_line_is_bounded() {
    let env = TestEnv::new();
    // A 1 GiB line: the header of a record, then a sparse run of zero bytes.
    let p = env.write(
        "d/huge.jsonl",
        format!("{ATIF_HEAD}[{{\"step_id\":1,\"source\":\"user\",\"message\":\""),
    );
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(1 << 30).unwrap();
    let v = status_of(&env, "d");
    let s = &v["sources"][0];
    assert_eq!(s["status"], "error", "{s}");
    assert_eq!(s["reason"]["code"], "PC-FMT-009", "{s}");
}

#[test]
fn jsonl_and_arrays_of_atif_are_read() {
    let env = TestEnv::new();
    let doc = |s: &str| {
        format!(
            r#"{{"schema_version":"ATIF-v1.6","session_id":"{s}","agent":{{"name":"a","version":"1"}},"steps":[{{"step_id":1,"source":"user","message":"hi"}}]}}"#
        )
    };
    env.write(
        "d/lines.jsonl",
        format!("{}\n{}\n\n{}\n", doc("a"), doc("b"), doc("c")),
    );
    env.write("d/array.json", format!("[{},{}]", doc("x"), doc("y")));
    let v = status_of(&env, "d");
    let counts: Vec<u64> = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["counts"]["trajectories"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [2, 3]);
}

#[test]
fn openai_sft_examples_generate_ids_and_report_them() {
    let env = TestEnv::new();
    env.write(
        "d/sft.jsonl",
        concat!(
            r#"{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"2+2?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"calc","arguments":"{\"x\":\"2+2\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"4"},{"role":"assistant","content":"4","reasoning_content":"easy"}],"tools":[{"type":"function","function":{"name":"calc"}}]}"#,
            "\n",
            r#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}"#,
            "\n"
        ),
    );
    let v = status_of(&env, "d");
    let s = &v["sources"][0];
    assert_eq!(s["format"], "openai-messages");
    assert_eq!(s["status"], "ready", "{s}");
    assert_eq!(s["counts"]["trajectories"], 2);
    assert_eq!(s["counts"]["steps"], 6);
    assert_eq!(s["counts"]["tool_calls"], 1);
    assert_eq!(s["generated_ids"], 2);
}

#[test]
fn storyline_documents_are_read() {
    let env = TestEnv::new();
    env.write(
        "d/story.storyline.json",
        r#"{"schema_version":"storyline/v1","session":"s","agent":{"id":"a"},"turns":[{"id":1,"src":"user","msg":"hi"},{"id":2,"src":"agent","msg":"ok","tool_calls":[{"tcid":"t1","fn":"ls","args":{}}]}]}"#,
    );
    env.write("d/bad.storyline.json", r#"{"schema_version":"storyline/v1","session":"s","agent":{"id":"a"},"turns":[],"bogus":1}"#);
    let v = status_of(&env, "d");
    let srcs = v["sources"].as_array().unwrap();
    assert_eq!(srcs[0]["source_path"], "bad.storyline.json");
    assert_eq!(srcs[0]["reason"]["code"], "PC-FMT-005");
    assert_eq!(srcs[1]["counts"]["steps"], 2);
    assert_eq!(srcs[1]["counts"]["tool_calls"], 1);
}

#[test]
fn mixed_formats_in_one_file_are_refused() {
    let env = TestEnv::new();
    let atif = format!("{ATIF_HEAD}[{{\"step_id\":1,\"source\":\"user\",\"message\":\"hi\"}}]}}");
    let sft = r#"{"messages":[{"role":"user","content":"hi"}]}"#;
    env.write("d/mixed.jsonl", format!("{atif}\n{sft}\n"));
    env.write("d/mixed2.jsonl", format!("{sft}\n{atif}\n"));
    let v = status_of(&env, "d");
    for s in v["sources"].as_array().unwrap() {
        assert_eq!(s["status"], "error", "{s}");
        assert_eq!(s["reason"]["code"], "PC-FMT-012", "{s}");
    }
}

#[test]
fn byte_order_mark_is_accepted() {
    let env = TestEnv::new();
    env.write(
        "d/bom.json",
        format!("\u{feff}{ATIF_HEAD}[{{\"step_id\":1,\"source\":\"user\",\"message\":\"hi\"}}]}}"),
    );
    let v = status_of(&env, "d");
    assert_eq!(v["sources"][0]["status"], "ready", "{}", v["sources"][0]);
    assert_eq!(v["sources"][0]["counts"]["steps"], 1);
}

#[test]
fn openai_rows_with_huge_step_ids_do_not_crash() {
    let env = TestEnv::new();
    env.write(
        "d/rows.json",
        format!(r#"[{{"session_id":"s","step_id":{},"messages":[{{"role":"user","content":"hi"}}],"response":{{"role":"assistant","content":"yo"}}}}]"#, i64::MAX),
    );
    let v = status_of(&env, "d");
    assert_eq!(v["sources"][0]["counts"]["steps"], 2, "{}", v["sources"][0]);
}

/// A store is counted from its tables, without building its documents; the
/// counts equal those of the files it was imported from: real fixtures
/// (subagents, Harbor runs) and generated corpora whose run ids repeat
/// across files.
#[test]
fn a_store_counts_like_the_files_it_came_from() {
    let env = TestEnv::new();
    env.example("data");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut inputs: Vec<(String, std::path::PathBuf)> = std::fs::read_dir(env.path().join("data"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), p))
        .collect();
    inputs.push(("harbor".into(), root.join("tests/fixtures/harbor")));
    for (i, format) in ["atif", "actf", "openai"].iter().enumerate() {
        let dir = env.path().join(format!("gen-{format}"));
        pchronicle::corpus::generate(&pchronicle::corpus::Options {
            out: dir.clone(),
            runs: 12,
            steps: 9,
            seed: 40 + i as u64,
            format: (*format).into(),
            subagent_every: 3,
            files_per_dir: 4,
        })
        .unwrap();
        inputs.push((format!("gen-{format}"), dir));
    }
    let totals = |path: &std::path::Path| -> serde_json::Value {
        let o = env
            .cmd()
            .args(["status", "--format", "json", "-q", "--stats"])
            .arg(path)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        json(&o)
    };
    let mut checked = 0;
    for (name, input) in inputs {
        let store = env.path().join(format!("store-{name}"));
        let o = env
            .cmd()
            .args(["import", "--from"])
            .arg(&input)
            .arg("--output")
            .arg(&store)
            .arg("-q")
            .output()
            .unwrap();
        if o.status.code() != Some(0) {
            // Inputs of mixed formats are not one import; skip them.
            continue;
        }
        let files = totals(&input);
        let stored = totals(&store);
        for k in ["runs", "trajectories", "steps", "tool_calls"] {
            assert_eq!(stored["totals"][k], files["totals"][k], "{name}: {k}");
        }
        assert_eq!(stored["totals"]["ready"], 1, "{name}");
        // One Source read: the store.
        assert_eq!(stored["stats"]["sources_read"], 1, "{name}");
        // Rows counted with no column read (from the tables' metadata in a
        // store) equal the rows the files give, and so do rows whose only
        // column is the Source path.
        let count = |path: &std::path::Path, sql: &str| -> String {
            let path = path.to_str().unwrap();
            let o = env.succeed(&["query", path, sql, "--format", "csv", "-q"]);
            String::from_utf8(o.stdout).unwrap()
        };
        for sql in [
            "SELECT count(*) FROM steps",
            "SELECT count(*), count(*) + 1 FROM tool_calls",
            "SELECT count(*) FROM trajectories",
            "SELECT count(*) FROM (SELECT source_path FROM steps)",
            "SELECT count(DISTINCT source_path) > 0, count(*) FROM steps",
        ] {
            assert_eq!(count(&store, sql), count(&input, sql), "{name}: {sql}");
        }
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} inputs imported");
}
