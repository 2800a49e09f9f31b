//! `import` and `export`: create-only atomic stores, exact same-format round
//! trips, cross-format conversions, and the refusals.

use std::path::Path;

use crate::cli::common::{example_dataset, import_leftovers, json, TestEnv};
use crate::pc_snapshot;

fn import(env: &TestEnv, from: &Path, out: &str) -> serde_json::Value {
    json(&env.succeed(&["import", "--from", from.to_str().unwrap(), "--output", out]))
}

fn export(env: &TestEnv, from: &str, format: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "export", "--from", from, "--format", format, "--output", "-",
    ];
    args.extend_from_slice(extra);
    let o = env.cmd().args(&args).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Parse one JSON document or JSON Lines into a list of values.
fn records(text: &str) -> Vec<serde_json::Value> {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        return vec![v];
    }
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn same_format_round_trip_is_exact_for_every_fixture() {
    let env = TestEnv::new();
    let fixtures = [
        (
            "golang__exp/hello-world-context-summarization.trajectory.json",
            "atif",
        ),
        (
            "golang__exp/hello-world-context-summarization-linear-history.trajectory.json",
            "atif",
        ),
        (
            "golang__exp/hello-world-context-summarization-linear-history.trajectory.cont-1.json",
            "atif",
        ),
        (
            "golang__exp/hello-world-context-summarization.trajectory.summarization-1-summary.json",
            "atif",
        ),
        (
            "golang__exp/hello-world-invalid-json.trajectory.json",
            "atif",
        ),
        ("evalstate__fast-agent/harbor_multiagent_v1_7.json", "atif"),
        ("DeepLink-org__Persisting/unicode_zh_15.json", "atif"),
        ("DeepLink-org__Persisting/multimodal_18.json", "atif"),
        (
            "DeepLink-org__Persisting/make-doom-for-mips_trimmed.actf.json",
            "actf",
        ),
        (
            "DeepLink-org__Persisting/protein-assembly_trimmed.actf.json",
            "actf",
        ),
    ];
    for (i, (rel, format)) in fixtures.iter().enumerate() {
        let src = example_dataset().join(rel);
        let out = format!("ds{i}");
        let report = import(&env, &src, &out);
        assert_eq!(report["format"], *format, "{rel}");
        let text = export(
            &env,
            &out,
            if *format == "atif" { "atif" } else { "actf" },
            &[],
        );
        let original: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&src).unwrap()).unwrap();
        assert_eq!(records(&text), vec![original], "{rel} did not round-trip");
    }
}

#[test]
fn import_reports_and_publishes_a_store() {
    let env = TestEnv::new();
    let report = import(&env, &example_dataset().join("golang__exp"), "store");
    assert_eq!(report["trajectories"], 5);
    assert_eq!(report["steps"], 33);
    // Four files share one session id: kept as given (issue 18), nothing
    // renamed.
    assert!(report.get("renamed_ids").is_none(), "{report}");
    let q = env
        .cmd()
        .args([
            "query",
            "store",
            "SELECT count(*) AS n, count(DISTINCT session_id) AS sessions, count(DISTINCT origin_path) AS files FROM trajectories",
            "--format",
            "jsonl",
        ])
        .output()
        .unwrap();
    let counts: serde_json::Value = serde_json::from_slice(&q.stdout).unwrap();
    assert_eq!(counts["n"], 5, "{counts}");
    assert_eq!(counts["files"], 5, "{counts}");
    assert!(counts["sessions"].as_i64().unwrap() < 5, "{counts}");
    // The store is one Source at the Dataset root.
    let ls = json(&env.cmd().args(["ls", "store"]).output().unwrap());
    assert_eq!(ls["sources"][0]["source_path"], ".");
    assert_eq!(ls["sources"][0]["format"], "storyline-lance");
    assert_eq!(ls["sources"][0]["read_consistency"], "native");
    let st = json(&env.cmd().args(["status", "store"]).output().unwrap());
    assert_eq!(st["totals"]["steps"], 33);
    assert_eq!(st["totals"]["trajectories"], 5);
    // SQL reads the store natively.
    let q = env
        .cmd()
        .args([
            "query",
            "store",
            "SELECT count(*) AS n, count(DISTINCT storage_ordinal) AS d FROM steps",
            "--format",
            "jsonl",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&q.stdout).trim(),
        r#"{"n":33,"d":5}"#
    );
    // Nothing else is left beside the target.
    let leftovers: Vec<String> = std::fs::read_dir(env.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("pchronicle"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn query_results_are_the_same_in_place_and_imported() {
    let env = TestEnv::new();
    let data = env.example("data");
    import(&env, &data.join("golang__exp"), "s1");
    let sql = "SELECT step_source, count(*) AS n, sum(length(message_value)) AS chars FROM steps GROUP BY 1 ORDER BY 1";
    let a = env
        .cmd()
        .args([
            "query",
            data.join("golang__exp").to_str().unwrap(),
            sql,
            "--format",
            "csv",
        ])
        .output()
        .unwrap();
    let b = env
        .cmd()
        .args(["query", "s1", sql, "--format", "csv"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&a.stdout),
        String::from_utf8_lossy(&b.stdout)
    );
}

/// Tool output searched with `LIKE` in a store, where it is kept as bytes
/// and checked as text only in the rows kept, gives what the files give:
/// searches on the bytes (contains, starts, ends, NOT), patterns that need
/// text (`_`, ILIKE), a search beside other conditions, a cell large
/// enough to be stored as an object, and the text itself as output.
#[test]
fn like_over_tool_output_is_the_same_in_place_and_imported() {
    let env = TestEnv::new();
    let fixture = crate::support::root()
        .join("tests/fixtures/harbor/terminus_2_hello-world-timeout.trajectory.json");
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    // Past the store's 64 KiB inline limit, the match at its very end.
    let big = format!(
        "{}\n\u{1b}[31mERROR\u{1b}[0m: 请求超时 (timeout after 30s)\n",
        "$ pytest -q\n.......F..\n".repeat(6000)
    );
    let outputs = [
        big.as_str(),
        "Traceback (most recent call last):\n  File \"app.py\", line 3\nTimeoutError: 连接超时",
        "{\"status\": \"ok\", \"rows\": 3}",
        "a_b literally",
    ];
    let steps = doc["steps"].as_array_mut().unwrap();
    let last = steps.last().unwrap()["step_id"].as_i64().unwrap();
    for (k, out) in outputs.iter().enumerate() {
        steps.push(serde_json::json!({
            "step_id": last + 1 + k as i64,
            "source": "agent",
            "message": format!("run {k}"),
            "tool_calls": [{"tool_call_id": format!("c{k}"), "function_name": "bash", "arguments": {"cmd": "pytest"}}],
            "observation": {"results": [{"source_call_id": format!("c{k}"), "content": out}]},
        }));
    }
    let dir = env.path().join("files");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("run.json"), serde_json::to_vec(&doc).unwrap()).unwrap();
    import(&env, &dir, "s1");
    let count = "SELECT count(*) FROM steps WHERE";
    let cases = [
        (format!("{count} observation_text LIKE '%超时%'"), "2"),
        (format!("{count} observation_text LIKE '%请求超时 (timeout%'"), "1"),
        (format!("{count} observation_text LIKE 'Traceback%'"), "1"),
        (format!("{count} observation_text LIKE '%连接超时'"), "1"),
        (format!("{count} observation_text LIKE 'a_b literally'"), "1"),
        (format!("{count} observation_text NOT LIKE '%超时%'"), "+"),
        (format!("{count} observation_text LIKE '%超_%'"), "2"),
        (format!("{count} observation_text ILIKE '%TRACEBACK%'"), "1"),
        (format!("{count} observation_text LIKE '%超时%' AND step_id > {}", last + 1), "1"),
        (format!("{count} observation_text LIKE '%超时%' OR message_value LIKE 'run 2'"), "3"),
        (
            "SELECT step_id, length(observation_text) AS n, substr(observation_text, length(observation_text) - 20) AS tail \
             FROM steps WHERE observation_text LIKE '%超时%' ORDER BY step_id".to_string(),
            "",
        ),
        (
            "SELECT count(*), sum(length(results_text)) FROM tool_calls WHERE results_text LIKE '%超时%'".to_string(),
            "",
        ),
    ];
    same_in_place_and_imported(&env, &dir, "s1", &cases);
}

/// Each query of `cases` prints the same over the files at `dir` and the
/// store `store` imported from them, and its first value is `want`: any
/// count above 0 for `+`, anything for an empty `want`.
fn same_in_place_and_imported(env: &TestEnv, dir: &Path, store: &str, cases: &[(String, &str)]) {
    let csv = |from: &str, sql: &str| {
        let o = env.succeed(&["query", from, sql, "--format", "csv"]);
        String::from_utf8(o.stdout).unwrap()
    };
    for (sql, want) in cases {
        let (a, b) = (csv(dir.to_str().unwrap(), sql), csv(store, sql));
        assert_eq!(a, b, "{sql}");
        assert!(a.lines().count() > 1, "{sql}: {a}");
        let first = a.lines().nth(1);
        match *want {
            "" => {}
            // Some rows, however many the fixture has.
            "+" => assert!(
                first.and_then(|n| n.parse::<u64>().ok()) > Some(0),
                "{sql}: {a}"
            ),
            _ => assert_eq!(first, Some(*want), "{sql}: {a}"),
        }
    }
}

/// Filters on labels (a step's source and model, a tool's name, an
/// agent's name) give the same rows from an imported store, which keeps
/// those columns as dictionaries and answers such filters on their
/// values, as from the files in place.
#[test]
fn label_filters_are_the_same_in_place_and_imported() {
    let env = TestEnv::new();
    let dir = env.path().join("files");
    std::fs::create_dir(&dir).unwrap();
    for f in [
        "openhands_hello-world.trajectory.json",
        "terminus_2_hello-world-timeout.trajectory.json",
    ] {
        let from = crate::support::root().join("tests/fixtures/harbor").join(f);
        std::fs::copy(from, dir.join(f)).unwrap();
    }
    import(&env, &dir, "s1");
    let count = "SELECT count(*) FROM steps WHERE";
    let rows = "SELECT session_id, step_id, step_source, model_name FROM steps WHERE";
    let order = "ORDER BY session_id, step_id";
    let cases = [
        (format!("{count} step_source = 'agent'"), "+"),
        (format!("{count} step_source = 'agent' AND model_name LIKE 'openai/%'"), "+"),
        (format!("{count} model_name IS NULL"), "+"),
        (format!("{count} model_name IS NOT NULL AND step_source <> 'agent'"), "0"),
        (format!("{count} step_source IN ('user', 'system')"), "+"),
        (format!("{count} NOT (step_source = 'agent')"), "+"),
        (format!("{count} upper(step_source) = 'USER' AND step_id > 0"), "+"),
        (format!("{count} coalesce(model_name, 'none') = 'none'"), "+"),
        (format!("{count} step_source = 'agent' OR step_id = 1"), "+"),
        (format!("{count} model_name = 'no such model'"), "0"),
        (format!("{rows} step_source = 'agent' AND model_name LIKE '%gpt%' {order}"), ""),
        (format!("{rows} step_source <> 'agent' {order}"), ""),
        (
            "SELECT model_name, step_source, count(*) AS n FROM steps GROUP BY model_name, step_source ORDER BY model_name, step_source".to_string(),
            "",
        ),
        (
            "SELECT function_name, count(*) AS n FROM tool_calls WHERE function_name LIKE 'b%' OR function_name = 'finish' GROUP BY function_name ORDER BY function_name".to_string(),
            "",
        ),
        (
            "SELECT agent_name, agent_version, step_count FROM trajectories WHERE agent_name = 'terminus-2'".to_string(),
            "",
        ),
    ];
    same_in_place_and_imported(&env, &dir, "s1", &cases);
}

#[test]
fn refusals_have_codes() {
    let env = TestEnv::new();
    let ex = example_dataset();
    // Mixed formats under auto.
    let o = env
        .cmd()
        .args([
            "import",
            "--from",
            ex.join("DeepLink-org__Persisting").to_str().unwrap(),
            "--output",
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(json(&o)["error"]["code"], "PC-IMP-004");
    assert!(!env.path().join("x").exists());
    // Wrong declared format.
    let o = env
        .cmd()
        .args([
            "import",
            "--from",
            ex.join("golang__exp").to_str().unwrap(),
            "--output",
            "x",
            "--format",
            "actf",
        ])
        .output()
        .unwrap();
    assert_eq!(json(&o)["error"]["code"], "PC-IMP-005");
    // Target exists.
    std::fs::create_dir(env.path().join("exists")).unwrap();
    let o = env
        .cmd()
        .args([
            "import",
            "--from",
            ex.join("golang__exp").to_str().unwrap(),
            "--output",
            "exists",
        ])
        .output()
        .unwrap();
    assert_eq!(json(&o)["error"]["code"], "PC-IMP-001");
    // stdin without --stream / without a format.
    let o = env
        .cmd()
        .args(["import", "--from", "-", "--output", "y"])
        .output()
        .unwrap();
    assert_eq!(json(&o)["error"]["code"], "PC-CLI-003");
    let o = env
        .cmd()
        .args(["import", "--from", "-", "--stream", "--output", "y"])
        .output()
        .unwrap();
    assert_eq!(json(&o)["error"]["code"], "PC-CLI-003");
}

#[test]
fn malformed_record_in_the_middle_publishes_nothing() {
    let env = TestEnv::new();
    let mut lines = String::new();
    for i in 0..50 {
        lines.push_str(&format!(
            r#"{{"schema_version":"ATIF-v1.7","session_id":"s{i}","agent":{{"name":"a","version":"1"}},"steps":[{{"step_id":1,"source":"user","message":"hi"}}]}}"#
        ));
        lines.push('\n');
        if i == 25 {
            lines.push_str("{\"schema_version\":\"ATIF-v1.7\",\"steps\":[\n");
        }
    }
    env.write("in/bad.jsonl", lines);
    let o = env
        .cmd()
        .args(["import", "--from", "in", "--output", "out"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(!env.path().join("out").exists());
    let hidden: Vec<_> = std::fs::read_dir(env.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().contains("staging"))
        .collect();
    assert!(hidden.is_empty(), "{hidden:?}");
}

#[test]
fn stdin_import_reads_to_eof() {
    let env = TestEnv::new();
    let doc =
        std::fs::read(example_dataset().join("evalstate__fast-agent/harbor_multiagent_v1_7.json"))
            .unwrap();
    let mut child = env
        .cmd()
        .args([
            "import", "--from", "-", "--stream", "--format", "atif", "--output", "s",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(&doc).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(json(&o)["trajectories"], 2);
}

#[test]
fn racing_imports_exactly_one_wins() {
    let env = TestEnv::new();
    let from = example_dataset().join("golang__exp");
    let spawn = || {
        env.cmd()
            .args([
                "import",
                "--from",
                from.to_str().unwrap(),
                "--output",
                "race",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let codes = [a.status.code(), b.status.code()];
    assert_eq!(
        codes.iter().filter(|c| **c == Some(0)).count(),
        1,
        "{codes:?}"
    );
    let loser = if a.status.code() == Some(0) { &b } else { &a };
    let code = json(loser)["error"]["code"].as_str().unwrap().to_string();
    assert!(code == "PC-IMP-001" || code == "PC-IMP-002", "{code}");
    let st = json(&env.cmd().args(["status", "race"]).output().unwrap());
    assert_eq!(st["totals"]["steps"], 33);
}

#[test]
fn cross_format_conversions_report_losses_and_strict_refuses() {
    let env = TestEnv::new();
    import(
        &env,
        &example_dataset().join("DeepLink-org__Persisting/make-doom-for-mips_trimmed.actf.json"),
        "a",
    );
    // ACTF → ATIF drops the task result; reported on stderr.
    let o = env
        .cmd()
        .args(["export", "--from", "a", "--format", "atif", "--output", "-"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("PC-EXP-005"));
    // --strict refuses instead.
    let o = env
        .cmd()
        .args([
            "export", "--from", "a", "--format", "atif", "--output", "-", "--strict",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("PC-EXP-002"));
    // Storyline keeps everything and reads back.
    let text = export(&env, "a", "storyline", &[]);
    env.write("sl/doc.storyline.json", &text);
    import(&env, &env.path().join("sl"), "b");
    let back = export(&env, "b", "actf", &[]);
    let original: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            example_dataset().join("DeepLink-org__Persisting/make-doom-for-mips_trimmed.actf.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(records(&back), vec![original]);
}

#[test]
fn export_outputs_are_create_only() {
    let env = TestEnv::new();
    import(&env, &example_dataset().join("golang__exp"), "s");
    env.write("out.jsonl", "x");
    pc_snapshot!(
        env,
        env.cmd().args([
            "export",
            "--from",
            "s",
            "--format",
            "storyline",
            "--output",
            "out.jsonl"
        ])
    );
    let o = env
        .cmd()
        .args([
            "export",
            "--from",
            "s",
            "--format",
            "storyline",
            "--output",
            "out.jsonl",
            "--overwrite",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(env.path().join("out.jsonl"))
            .unwrap()
            .lines()
            .count(),
        5
    );
}

#[test]
fn export_selects_by_session_source_and_where() {
    let env = TestEnv::new();
    let d = env.example("d");
    let by_session = export(
        &env,
        d.to_str().unwrap(),
        "storyline",
        &["--session-id", "harbor-golden-run"],
    );
    assert_eq!(records(&by_session).len(), 2);
    let by_where = export(
        &env,
        d.to_str().unwrap(),
        "storyline",
        &["--where", "agent_name = 'terminus-2' AND step_count > 6"],
    );
    assert_eq!(records(&by_where).len(), 2, "{by_where}");
    let o = env
        .cmd()
        .args([
            "export",
            "--from",
            "d",
            "--format",
            "atif",
            "--output",
            "-",
            "--source",
            "../etc/passwd",
        ])
        .output()
        .unwrap();
    assert_eq!(json(&o)["error"]["code"], "PC-CAT-013");
    let o = env
        .cmd()
        .args([
            "export",
            "--from",
            "d",
            "--format",
            "atif",
            "--output",
            "-",
            "--where",
            "1=1; DROP TABLE runs",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// A selection is worked out by a query that reads every Source; the export
/// then reads only the Sources it picked something from.
#[test]
fn export_reads_again_only_the_sources_a_selection_picked_from() {
    let env = TestEnv::new();
    let d = env.example("d");
    let sources_read = |extra: &[&str]| -> u64 {
        let mut args = vec![
            "export",
            "--from",
            d.to_str().unwrap(),
            "--format",
            "storyline",
            "--output",
            "-",
            "--stats",
        ];
        args.extend_from_slice(extra);
        let o = env.cmd().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{err}");
        let line = err.lines().find(|l| l.starts_with("stats: ")).unwrap();
        line["stats: ".len()..]
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let all = sources_read(&[]);
    assert!(all > 4, "{all}");
    let picked = sources_read(&["--where", "agent_name = 'terminus-2' AND step_count > 6"]);
    assert!(
        picked < all + all / 2,
        "{picked} sources read, {all} in the Dataset"
    );
}

#[test]
fn openai_export_links_or_relabels_results_without_call_ids() {
    let env = TestEnv::new();
    // Step 2 has one call and two results without `source_call_id`: the
    // first answers the call, the second has no call left to answer.
    env.write(
        "in/t.json",
        r#"{"schema_version":"ATIF-v1.6","session_id":"s1",
            "agent":{"name":"a","version":"1"},
            "steps":[
              {"step_id":1,"source":"user","message":"list files"},
              {"step_id":2,"source":"agent","message":"running ls",
               "tool_calls":[{"tool_call_id":"c1","function_name":"ls","arguments":{}}],
               "observation":{"results":[{"content":"a.txt"},{"content":"disk almost full"}]}}
            ]}"#,
    );
    let dir = env.path().join("in");
    let o = env
        .cmd()
        .args([
            "export",
            "--from",
            dir.to_str().unwrap(),
            "--format",
            "openai-messages",
            "--output",
            "-",
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("linked to the next unanswered call"),
        "{stderr}"
    );
    assert!(stderr.contains("written as a user message"), "{stderr}");
    let ex = &records(&String::from_utf8(o.stdout).unwrap())[0];
    let msgs = ex["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "user"]);
    assert_eq!(msgs[2]["tool_call_id"], "c1");
    assert_eq!(msgs[2]["content"], "a.txt");
    assert_eq!(msgs[3]["content"], "disk almost full");
    // The export reads back as a valid OpenAI messages Source.
    env.write("back/x.jsonl", format!("{ex}\n"));
    let back = env.path().join("back");
    let o = env
        .cmd()
        .args(["status", back.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let st = json(&o);
    assert_eq!(st["totals"]["error"], 0, "{st}");
    assert_eq!(st["totals"]["steps"], 3, "{st}");
}

/// Files are decoded a round ahead while the round before is written: the
/// store keeps the files' order across rounds, and a file that fails in any
/// round fails the import with its own error and leaves nothing behind.
#[test]
fn imports_keep_file_order_across_decoding_rounds_and_stop_at_a_broken_file() {
    let env = TestEnv::new();
    let original = std::fs::read_to_string(
        example_dataset().join("golang__exp/hello-world-context-summarization.trajectory.json"),
    )
    .unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&original).unwrap();
    let write_files = |dir: &Path, doc: &mut serde_json::Value| {
        std::fs::create_dir_all(dir).unwrap();
        // 150 files: five rounds of at most 32.
        for i in 0..150 {
            doc["session_id"] = format!("s{i:03}").into();
            std::fs::write(dir.join(format!("run-{i:03}.json")), doc.to_string()).unwrap();
        }
    };
    let input = env.path().join("in");
    write_files(&input, &mut doc);
    import(&env, &input, "ok");
    let o = env.succeed(&[
        "query",
        "ok",
        "SELECT session_id FROM trajectories ORDER BY storage_ordinal",
        "--format",
        "jsonl",
    ]);
    let ids: Vec<String> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["session_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let want: Vec<String> = (0..150).map(|i| format!("s{i:03}")).collect();
    assert_eq!(ids, want);
    // A file cut in half, in the first round and in the last.
    for broken in [10, 140] {
        let dir = env.path().join(format!("in-{broken}"));
        write_files(&dir, &mut doc);
        let name = format!("run-{broken:03}.json");
        std::fs::write(dir.join(&name), &original[..original.len() / 2]).unwrap();
        let out = format!("bad-{broken}");
        let o = env
            .cmd()
            .args(["import", "--from", dir.to_str().unwrap(), "--output", &out])
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let e = &json(&o)["error"];
        assert_eq!(e["code"], "PC-FMT-002", "{e}");
        assert_eq!(e["source_path"], name.as_str(), "{e}");
        assert!(!env.path().join(&out).exists());
        let leftovers = import_leftovers(env.path());
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}

/// Members written in `text` (each `:` outside a string), and members of
/// every object of its parsed `value`: fewer in the value when a member
/// is named twice in one object.
fn members(text: &str, value: &serde_json::Value) -> (usize, usize) {
    let (mut written, mut in_string, mut escaped) = (0, false, false);
    for b in text.bytes() {
        match (in_string, escaped, b) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (_, false, b'"') => in_string = !in_string,
            (false, _, b':') => written += 1,
            _ => {}
        }
    }
    fn parsed(v: &serde_json::Value) -> usize {
        match v {
            serde_json::Value::Object(m) => m.len() + m.values().map(parsed).sum::<usize>(),
            serde_json::Value::Array(a) => a.iter().map(parsed).sum(),
            _ => 0,
        }
    }
    (written, parsed(value))
}

/// Every JSON column of every table but `tool_calls.arguments` (kept as
/// written, see the next test) holds valid JSON text in which each member
/// is named once in its object, over real ATIF, ACTF, OpenAI messages and
/// Harbor files and a Storyline export of some of them, in place and
/// imported: SQL reads a JSON path over these columns only up to where it
/// ends, which is exact only for such text (`DataLayer::canonical_json`).
#[test]
fn json_columns_hold_json_with_each_member_named_once() {
    let env = TestEnv::new();
    let dir = env.path().join("files");
    crate::support::copy_dir(&example_dataset(), &dir);
    for sub in ["harbor", "openai"] {
        let fixtures = crate::support::root().join("tests/fixtures").join(sub);
        crate::support::copy_dir(&fixtures, &dir.join(sub));
    }
    let storyline = dir.join("storyline/golang.jsonl");
    std::fs::create_dir(storyline.parent().unwrap()).unwrap();
    let golang = example_dataset().join("golang__exp");
    env.succeed(&[
        "export",
        "--from",
        golang.to_str().unwrap(),
        "--format",
        "storyline",
        "--output",
        storyline.to_str().unwrap(),
    ]);
    // One store per format, as an import takes one.
    let formats = ["atif", "openai-messages", "actf", "storyline"];
    for f in formats {
        let args = [
            "import",
            "--from",
            dir.to_str().unwrap(),
            "--output",
            f,
            "--format",
            f,
        ];
        env.succeed(&args);
    }
    let lines = |from: &str, sql: &str| -> Vec<serde_json::Value> {
        let o = env.succeed(&["query", from, sql, "--format", "jsonl"]);
        String::from_utf8(o.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let mut checked = 0;
    for table in ["runs", "trajectories", "steps", "tool_calls", "judgments"] {
        let json_columns: Vec<String> = lines(dir.to_str().unwrap(), &format!("DESCRIBE {table}"))
            .iter()
            .filter(|c| c["column_type"] == "JSON")
            .map(|c| c["column_name"].as_str().unwrap().to_string())
            .collect();
        assert!(!json_columns.is_empty(), "{table}");
        let sql = format!("SELECT {} FROM {table}", json_columns.join(", "));
        for from in std::iter::once(dir.to_str().unwrap()).chain(formats) {
            for row in lines(from, &sql) {
                for c in json_columns.iter().filter(|c| *c != "arguments") {
                    match &row[c] {
                        serde_json::Value::Null => {}
                        serde_json::Value::String(text) => {
                            let parsed: serde_json::Value = serde_json::from_str(text)
                                .unwrap_or_else(|e| panic!("{table}.{c} in {from}: {e}: {text}"));
                            let (written, kept) = members(text, &parsed);
                            assert_eq!(written, kept, "{table}.{c} in {from}: {text}");
                            checked += 1;
                        }
                        other => panic!("{table}.{c} in {from}: {other}"),
                    }
                }
            }
        }
    }
    // The files give each kind of JSON column values to check, and a
    // member named twice would be seen.
    assert!(checked > 500, "{checked}");
    let twice = r#"{"a":1,"a":{"b":"x:\"y"}}"#;
    assert_eq!(
        members(twice, &serde_json::from_str(twice).unwrap()),
        (3, 2)
    );
}

/// OpenAI argument strings are kept as written, so `tool_calls.arguments`
/// may name a member twice. A JSON path over it answers with the last
/// value, as over any other text, whether the scan evaluates it (`WHERE`)
/// or the projection above does; in place and imported.
#[test]
fn arguments_kept_as_written_are_read_whole() {
    let env = TestEnv::new();
    let dir = env.path().join("files");
    std::fs::create_dir(&dir).unwrap();
    let record = serde_json::json!({"messages": [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": null, "tool_calls": [{
            "id": "c1", "type": "function",
            "function": {"name": "bash", "arguments": r#"{"cmd":"ls","cmd":"pwd"}"#}
        }]},
        {"role": "tool", "tool_call_id": "c1", "content": "/work"},
        {"role": "assistant", "content": "done"}
    ]});
    std::fs::write(dir.join("calls.jsonl"), format!("{record}\n")).unwrap();
    import(&env, &dir, "s1");
    let sql = "SELECT arguments ->> 'cmd' AS cmd, CAST(arguments -> 'cmd' AS TEXT) AS j \
               FROM tool_calls WHERE arguments ->> 'cmd' = 'pwd'";
    for from in [dir.to_str().unwrap(), "s1"] {
        let o = env.succeed(&["query", from, sql, "--format", "csv"]);
        assert_eq!(
            String::from_utf8(o.stdout).unwrap(),
            "cmd,j\npwd,\"\"\"pwd\"\"\"\n",
            "{from}"
        );
    }
}
