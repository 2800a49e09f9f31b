//! Regression tests named after the issue that introduced them.

use crate::cli::common::{import_leftovers, json, TestEnv};

/// issue 2: a file that changes while it is read fails the command instead of
/// mixing contents. (The deterministic in-process version lives in
/// `tests/read_consistency.rs`; this one checks a file replaced between
/// discovery and reading cannot be read silently either.)
#[test]
fn issue_2_status_is_consistent_across_runs() {
    let env = TestEnv::new();
    env.example("data");
    let a = json(&env.cmd().args(["status", "data"]).output().unwrap());
    let b = json(&env.cmd().args(["status", "data"]).output().unwrap());
    assert_eq!(a["snapshot_id"], b["snapshot_id"]);
    assert_eq!(a["totals"], b["totals"]);
}

/// An ATIF run whose tool output is what a terminal agent records: a
/// traceback after a prompt, a colour code before a word, a tab, CRLF, JSON
/// printed by the tool; one result linked to its call, one not.
fn terminal_run() -> serde_json::Value {
    serde_json::json!({
        "schema_version": "ATIF-v1.6", "session_id": "term-1",
        "agent": {"name": "terminus-2", "version": "1", "model_name": "m"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "fix it"},
            {"step_id": 2, "source": "agent", "message": "running",
             "tool_calls": [{"tool_call_id": "c1", "function_name": "bash", "arguments": {"cmd": "python x.py"}}],
             "observation": {"results": [
                {"source_call_id": "c1", "content": "root@host:/app# python x.py\r\nTraceback (most recent call last):\r\n  File \"x.py\", line 1\r\nModuleNotFoundError: No module named 'yaml'\r\n"},
                {"content": [{"type": "text", "text": "\u{1b}[31mFAILED\u{1b}[0m\ttests/test_x.py\n{\"status\": \"collected\"}"}]}
             ]}}
        ]
    })
}

/// issue 17: words in tool output are found (they were indexed as raw JSON,
/// so `\nTraceback` was the word `ntraceback`), and the preview is decoded
/// text, not escaped JSON.
#[test]
fn issue_17_words_in_tool_output_are_found_and_previewed_as_text() {
    let env = TestEnv::new();
    env.write("ds/term.json", serde_json::to_vec(&terminal_run()).unwrap());
    for q in [
        "Traceback",
        "ModuleNotFoundError",
        "#observation(FAILED)",
        "#observation(tests)",
        "#observation(collected)",
        "#all(\"most recent call last\")",
    ] {
        let o = env
            .cmd()
            .args(["find", "ds", "--match", q, "--format", "json"])
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{q}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v = json(&o);
        let m = v["matches"].as_array().unwrap();
        assert_eq!(m.len(), 1, "{q}: {v}");
        assert_eq!(m[0]["step_id"], 2);
        let preview = m[0]["preview"].as_str().unwrap();
        assert!(
            !preview.contains("\\n") && !preview.contains("results") && !preview.contains('\u{1b}'),
            "{q}: preview is not decoded text: {preview}"
        );
    }
    // The glued token of the raw JSON is gone.
    let o = env
        .cmd()
        .args(["find", "ds", "--match", "ntraceback", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    // A colour code does not glue to the word after it.
    let o = env
        .cmd()
        .args(["find", "ds", "--match", "31mfailed", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
}

/// issue 17: the decoded text is a documented column, the same for a store
/// and for the file it was imported from; the raw JSON stays as it was.
#[test]
fn issue_17_decoded_text_columns_in_files_and_stores() {
    let env = TestEnv::new();
    env.write("ds/term.json", serde_json::to_vec(&terminal_run()).unwrap());
    let o = env
        .cmd()
        .args(["import", "--from", "ds", "--output", "store"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let sql = "SELECT step_id, observation, observation_text FROM steps ORDER BY turn_ordinal";
    let calls = "SELECT tool_call_id, results_text FROM tool_calls";
    let q = |ds: &str, sql: &str| {
        let o = env
            .cmd()
            .args(["query", ds, sql, "--format", "jsonl"])
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::Value::Array(
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
        )
    };
    let files = q("ds", sql);
    let store = q("store", sql);
    assert_eq!(files, store);
    let rows = files.as_array().unwrap();
    assert_eq!(rows[0]["observation_text"], serde_json::Value::Null);
    assert_eq!(
        rows[1]["observation_text"],
        "root@host:/app# python x.py\r\nTraceback (most recent call last):\r\n  File \"x.py\", line 1\r\nModuleNotFoundError: No module named 'yaml'\r\n\n\u{1b}[31mFAILED\u{1b}[0m\ttests/test_x.py\n{\"status\": \"collected\"}"
    );
    // The raw column is the JSON as given.
    let raw: serde_json::Value =
        serde_json::from_str(rows[1]["observation"].as_str().unwrap()).unwrap();
    assert_eq!(raw, terminal_run()["steps"][1]["observation"]);
    // Only the linked result answers the call.
    let c = q("ds", calls);
    assert_eq!(c, q("store", calls));
    assert_eq!(
        c[0]["results_text"],
        "root@host:/app# python x.py\r\nTraceback (most recent call last):\r\n  File \"x.py\", line 1\r\nModuleNotFoundError: No module named 'yaml'\r\n"
    );
    // The store answers find like the files.
    let o = env
        .cmd()
        .args([
            "find",
            "store",
            "--match",
            "ModuleNotFoundError",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(json(&o)["matches"].as_array().unwrap().len(), 1);
}

/// issue 17: a lower-case operator word is noted on stderr, under the table
/// and in `search.notes`, with the quoted alternative; capitals give no note.
#[test]
fn issue_17_lower_case_operators_are_noted() {
    let env = TestEnv::new();
    env.write("ds/term.json", serde_json::to_vec(&terminal_run()).unwrap());
    let o = env
        .cmd()
        .args([
            "find",
            "ds",
            "--match",
            "No such file or directory",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let note = stderr
        .lines()
        .find(|l| l.starts_with("note: "))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(note.contains(r#""No such file" OR "directory""#), "{note}");
    assert!(
        note.contains(r#"--match '"No such file or directory"'"#),
        "{note}"
    );
    let v = json(&o);
    assert_eq!(v["search"]["notes"].as_array().unwrap().len(), 1, "{v}");
    let o = env
        .cmd()
        .args(["find", "ds", "--match", "not found", "--format", "table"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("note: lower-case `not`"), "{stdout}");
    let o = env
        .cmd()
        .args([
            "find",
            "ds",
            "--match",
            "Traceback OR yaml",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&o.stderr).contains("note:"));
    assert!(json(&o)["search"].get("notes").is_none());
}

/// issue 17: a word longer than the tokenizer's limit is cut the same way in
/// the index and in the query, never dropped from a phrase or refused.
#[test]
fn issue_17_long_words_are_searchable() {
    let env = TestEnv::new();
    let long = format!("sha256-{}", "ab12".repeat(80));
    let doc = serde_json::json!({
        "schema_version": "ATIF-v1.6", "session_id": "long-1",
        "agent": {"name": "a", "version": "1"},
        "steps": [{"step_id": 1, "source": "user", "message": format!("digest {long} verified")}]
    });
    env.write("ds/long.json", serde_json::to_vec(&doc).unwrap());
    for q in [long.clone(), format!("\"digest {long} verified\"")] {
        let o = env
            .cmd()
            .args(["find", "ds", "--match", &q, "--format", "json"])
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(json(&o)["matches"].as_array().unwrap().len(), 1);
    }
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// issue 18 (7): `find --max-output-bytes` bounds the bytes actually printed
/// (the JSON is pretty-printed, the table has its own layout), cutting the
/// match list until the output fits.
#[test]
fn issue_18_find_output_bound_counts_printed_bytes() {
    let env = TestEnv::new();
    env.example("data");
    for format in ["json", "table"] {
        let full = env
            .cmd()
            .args(["find", "data", "--match", "the", "--format", format])
            .output()
            .unwrap();
        assert_eq!(full.status.code(), Some(0), "{}", stderr(&full));
        let bound = full.stdout.len() / 2;
        assert!(bound > 1000, "{format}: {} bytes", full.stdout.len());
        let o = env
            .cmd()
            .args([
                "find",
                "data",
                "--match",
                "the",
                "--format",
                format,
                "--max-output-bytes",
                &bound.to_string(),
            ])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(
            o.stdout.len() <= bound,
            "{format}: {} bytes printed under --max-output-bytes {bound}",
            o.stdout.len()
        );
        // As many matches as fit are kept: the cut is not far below the bound.
        assert!(o.stdout.len() * 3 > bound, "{format}: {}", o.stdout.len());
        let e = stderr(&o);
        assert!(
            e.contains("warning[PC-FND-004]: output limit reached")
                && e.contains("truncated: true"),
            "{e}"
        );
        if format == "json" {
            let v = json(&o);
            assert_eq!(v["truncated"], true);
            assert!(!v["matches"].as_array().unwrap().is_empty(), "{v}");
        } else {
            let text = String::from_utf8_lossy(&o.stdout);
            assert!(text.trim_end().ends_with("(truncated)"), "{text}");
        }
    }
}

/// issue 18 (7): `ls` and `status` take `--timeout` (the range of `query`),
/// and fail with PC-CAT-015, printing nothing but the error, once it is over.
#[test]
fn issue_18_ls_and_status_take_a_timeout() {
    let env = TestEnv::new();
    env.example("data");
    for cmd in ["ls", "status"] {
        let o = env
            .cmd()
            .args([cmd, "data", "--timeout", "1e-9", "--format", "json"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", stderr(&o));
        let v = json(&o);
        assert_eq!(v["error"]["code"], "PC-CAT-015", "{cmd}: {v}");
        assert!(v.get("sources").is_none(), "{cmd}: {v}");
        assert!(
            stderr(&o).contains("error[PC-CAT-015]: resource limit:"),
            "{cmd}: {}",
            stderr(&o)
        );
        for bad in ["0", "nan", "31536001"] {
            let o = env
                .cmd()
                .args([cmd, "data", "--timeout", bad, "--format", "json"])
                .output()
                .unwrap();
            assert_eq!(json(&o)["error"]["code"], "PC-CLI-003", "{cmd} {bad}");
        }
        let o = env
            .cmd()
            .args([cmd, "data", "--timeout", "600", "--format", "json"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{cmd}: {}", stderr(&o));
    }
}

/// issue 18 (7): CLI JSON error objects carry `dataset_uri` and
/// `snapshot_id` once the command knows them (as the REST errors do), and
/// `null` before.
#[test]
fn issue_18_json_errors_name_dataset_and_snapshot() {
    let env = TestEnv::new();
    env.example("data");
    // A truncated file: `status --errors strict` fails on it.
    env.write("data/bad.json", "{\"schema_version\": ");
    let ls = json(
        &env.cmd()
            .args(["ls", "data", "--format", "json"])
            .output()
            .unwrap(),
    );
    let (uri, snap) = (&ls["dataset_uri"], &ls["snapshot_id"]);
    assert!(uri.is_string() && snap.is_string(), "{ls}");
    // Failures after the snapshot was pinned name it.
    env.write("out.jsonl", "x");
    for args in [
        &[
            "export",
            "--from",
            "data",
            "--format",
            "storyline",
            "--output",
            "out.jsonl",
        ][..],
        &[
            "query",
            "data",
            "SELECT no_such_column FROM runs",
            "--format",
            "jsonl",
        ][..],
        &["status", "data", "--errors", "strict", "--format", "json"][..],
    ] {
        let o = env.cmd().args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = &json(&o)["error"];
        assert_eq!(&e["dataset_uri"], uri, "{args:?}: {e}");
        assert_eq!(&e["snapshot_id"], snap, "{args:?}: {e}");
    }
    // Discovery failed: the Dataset is known, no snapshot.
    let o = env
        .cmd()
        .args(["ls", "data", "--max-files", "1", "--format", "json"])
        .output()
        .unwrap();
    let e = &json(&o)["error"];
    assert_eq!(e["code"], "PC-CAT-006");
    assert_eq!(&e["dataset_uri"], uri, "{e}");
    assert!(e["snapshot_id"].is_null(), "{e}");
    // Refused while the command line is resolved: neither.
    let o = env
        .cmd()
        .args(["ls", "data", "--max-files", "0", "--format", "json"])
        .output()
        .unwrap();
    let e = &json(&o)["error"];
    assert_eq!(e["code"], "PC-CLI-003");
    assert!(
        e["dataset_uri"].is_null() && e["snapshot_id"].is_null(),
        "{e}"
    );
}

/// issue 18 (7): the `sources` relation has `capabilities` (JSON text, the
/// same object `ls` prints), and DESCRIBE calls it JSON.
#[test]
fn issue_18_sources_relation_has_capabilities() {
    let env = TestEnv::new();
    env.example("data");
    let o = env
        .cmd()
        .args([
            "query",
            "data",
            "SELECT source_path, capabilities FROM sources ORDER BY source_path",
            "--format",
            "jsonl",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ls = json(
        &env.cmd()
            .args(["ls", "data", "--format", "json"])
            .output()
            .unwrap(),
    );
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let sources = ls["sources"].as_array().unwrap();
    assert_eq!(rows.len(), sources.len());
    for (row, src) in rows.iter().zip(sources) {
        assert_eq!(row["source_path"], src["source_path"]);
        let caps: serde_json::Value =
            serde_json::from_str(row["capabilities"].as_str().unwrap()).unwrap();
        assert_eq!(caps, src["capabilities"], "{row}");
    }
    let o = env
        .cmd()
        .args(["query", "data", "DESCRIBE sources", "--format", "jsonl"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("\"capabilities\""))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("\"JSON\""), "{line}");
}

/// issue 18 (8): the flags of the search before `--match` are refused with a
/// find error that names `--match`, not clap's "use -- --fts".
#[test]
fn issue_18_legacy_find_flags_name_match() {
    let env = TestEnv::new();
    env.example("data");
    for args in [
        &["--fts", "timeout"][..],
        &["--fts"][..],
        &["--jsonb", "$.priority >= 2"][..],
        &["--query", "timeout"][..],
    ] {
        let o = env
            .cmd()
            .args(["find", "data", "--format", "json"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = &json(&o)["error"];
        assert_eq!(e["code"], "PC-FND-002", "{args:?}: {e}");
        let msg = e["message"].as_str().unwrap();
        assert!(
            msg.contains(args[0]) && msg.contains("--match") && !msg.contains("-- --"),
            "{msg}"
        );
        assert!(stderr(&o).contains("error[PC-FND-002]"), "{}", stderr(&o));
    }
}

/// issue 18 (8): `--match` is the first option of `find --help`, and
/// `serve --help` lists `--gateway-debug`.
#[test]
fn issue_18_help_lists_match_first_and_gateway_debug() {
    let env = TestEnv::new();
    let o = env.cmd().args(["find", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let first = text
        .lines()
        .skip_while(|l| !l.starts_with("Options:"))
        .find(|l| l.trim_start().starts_with('-'))
        .unwrap_or_default();
    assert!(first.contains("--match <EXPRESSION>"), "{text}");
    assert!(
        !text.contains("--fts") && !text.contains("--jsonb"),
        "{text}"
    );
    let o = env.cmd().args(["serve", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("--gateway-debug"), "{text}");
}

/// issue 18 (8): the find table for an unavailable full-text index says so
/// instead of `(0 matches)`.
#[test]
fn issue_18_find_table_names_an_unavailable_index() {
    let env = TestEnv::new();
    env.example("data");
    let o = env
        .cmd()
        .env("PCHRONICLE_CACHE_DIR", env.path().join("cache"))
        .args([
            "find",
            "data",
            "--match",
            "timeout",
            "--no-build-index",
            "--format",
            "table",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    let last = text.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("(full-text index unavailable: ") && last.ends_with(')'),
        "{text}"
    );
    assert!(!text.contains("(0 matches)"), "{text}");
    assert!(stderr(&o).contains("error[PC-FND-003]"), "{}", stderr(&o));
}

/// issue 18 (8): query and analysis tables print floats at a readable
/// precision (`0.3`, not `0.30000000000000004`); JSON Lines and CSV keep
/// every digit.
#[test]
fn issue_18_table_floats_are_rounded_for_display() {
    let env = TestEnv::new();
    env.example("data");
    let sql =
        "SELECT CAST(0.1 AS DOUBLE) + CAST(0.2 AS DOUBLE) AS x, CAST(0.013 AS DOUBLE) / 4 AS y";
    let run = |format: &str| {
        let o = env
            .cmd()
            .args(["query", "data", sql, "--format", format])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{format}: {}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let table = run("table");
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["0.3", "0.00325"]),
        "{table}"
    );
    let jsonl = run("jsonl");
    let row: serde_json::Value = serde_json::from_str(jsonl.trim()).unwrap();
    assert_eq!(row["x"].as_f64(), Some(0.1_f64 + 0.2_f64), "{jsonl}");
    let csv = run("csv");
    assert!(csv.contains("0.30000000000000004"), "{csv}");
}

/// A `pchronicle serve` of the Dataset `data` in the test directory, killed
/// when dropped.
struct Served {
    child: std::process::Child,
    addr: String,
}

impl Served {
    fn start(env: &TestEnv) -> Served {
        use std::io::BufRead as _;
        env.write(
            "warehouse.toml",
            "[[datasets]]\nname = \"evals\"\nuri = \"data\"\n",
        );
        let mut child = env
            .cmd()
            .args([
                "serve",
                "--config",
                "warehouse.toml",
                "--listen",
                "127.0.0.1:0",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.strip_prefix("listening: ") {
                    let addr = url.trim_start_matches("http://").trim_end_matches('/');
                    let _ = tx.send(addr.to_string());
                }
            }
        });
        let served = |addr| Served { child, addr };
        match rx.recv_timeout(std::time::Duration::from_mins(2)) {
            Ok(addr) => served(addr),
            Err(_) => {
                drop(served(String::new()));
                panic!("the server did not start");
            }
        }
    }

    /// GET `path` over HTTP/1.0 (no chunked body): (status, JSON body).
    fn get(&self, path: &str) -> (u16, serde_json::Value) {
        use std::io::{Read as _, Write as _};
        let mut s = std::net::TcpStream::connect(&self.addr).unwrap();
        write!(s, "GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr).unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&raw[..end]).into_owned();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        let body = serde_json::from_slice(&raw[end + 4..])
            .unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {head}"));
        (status, body)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Percent-encoding of a query parameter value.
fn pct(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// issue 18 (8): the web find route honours `step_id`, and needs
/// `session_id` with it, as the command does.
#[test]
fn issue_18_web_find_honours_step_id() {
    let env = TestEnv::new();
    env.example("data");
    // A step to look up, and the steps of its session, from the command.
    let hits = json(
        &env.cmd()
            .args(["find", "data", "--match", "the", "--format", "json"])
            .output()
            .unwrap(),
    );
    let hit = hits["matches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["session_id"].is_string() && m["step_id"].is_i64())
        .unwrap_or_else(|| panic!("{hits}"))
        .clone();
    let (source, session) = (
        hit["source_path"].as_str().unwrap(),
        hit["session_id"].as_str().unwrap(),
    );
    let step = hit["step_id"].as_i64().unwrap();
    let served = Served::start(&env);
    let base = format!(
        "/api/v1/datasets/evals/find?scope=steps&source={}&session_id={}",
        pct(source),
        pct(session)
    );
    let (status, all) = served.get(&base);
    assert_eq!(status, 200, "{all}");
    let (status, one) = served.get(&format!("{base}&step_id={step}"));
    assert_eq!(status, 200, "{one}");
    let matches = one["matches"].as_array().unwrap();
    assert!(!matches.is_empty(), "{one}");
    assert!(matches.iter().all(|m| m["step_id"] == step), "{one}");
    assert!(
        all["total"].as_u64().unwrap() > one["total"].as_u64().unwrap(),
        "the session has one step only: {all}"
    );
    let (status, e) = served.get(&format!("/api/v1/datasets/evals/find?step_id={step}"));
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (400, Some("PC-FND-002")),
        "{e}"
    );
    let (status, e) = served.get(&format!("{base}&step_id=seven"));
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (400, Some("PC-WEB-006")),
        "{e}"
    );
}

/// issue 18 (8): a broken stdin import fails with its own import error that
/// names stdin, not with a suggestion of `--errors strict` (import has none).
#[test]
fn issue_18_broken_stdin_import_names_stdin() {
    use std::io::Write as _;
    let env = TestEnv::new();
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
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"<html>not a trajectory</html>\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = &json(&o)["error"];
    assert_eq!(e["code"], "PC-IMP-010", "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(msg.starts_with("stdin "), "{msg}");
    assert!(!msg.contains("--errors"), "{msg}");
    assert!(!stderr(&o).contains("--errors"), "{}", stderr(&o));
    assert!(!env.path().join("s").exists());
    assert!(import_leftovers(env.path()).is_empty());
}

/// issue 18 (9): with an explicit `--format`, a mixed folder imports the
/// files of that format and lists the others (a warning each, exit 0); with
/// `--format auto` it is still refused, with a hint naming the formats found.
#[test]
fn issue_18_mixed_folder_imports_the_declared_format() {
    let env = TestEnv::new();
    let data = env.example("data");
    let mixed = data.join("DeepLink-org__Persisting");
    let mixed = mixed.to_str().unwrap();
    let o = env
        .cmd()
        .args(["import", "--from", mixed, "--output", "auto"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = &json(&o)["error"];
    assert_eq!(e["code"], "PC-IMP-004", "{e}");
    let msg = e["message"].as_str().unwrap();
    for part in [
        "2 atif files",
        "2 actf files",
        "2 openai-messages files",
        "`--format atif`",
        "`--format actf`",
        "`--format openai-messages`",
    ] {
        assert!(msg.contains(part), "{part}: {msg}");
    }
    assert!(!env.path().join("auto").exists());

    let o = env
        .cmd()
        .args([
            "import", "--from", mixed, "--output", "actf", "--format", "actf",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = json(&o);
    assert_eq!(r["format"], "actf");
    assert_eq!(r["imported_files"], 2, "{r}");
    assert_eq!(r["skipped_files"], 4, "{r}");
    let skipped = r["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 4, "{r}");
    for x in skipped {
        assert!(
            x["path"].is_string()
                && ["atif", "openai-messages"].contains(&x["format"].as_str().unwrap()),
            "{x}"
        );
    }
    let e = stderr(&o);
    let lines: Vec<&str> = e
        .lines()
        .filter(|l| l.starts_with("warning[PC-IMP-005]: skipped "))
        .collect();
    assert_eq!(lines.len(), 4, "{e}");
    let st = json(
        &env.cmd()
            .args(["status", "actf", "--format", "json"])
            .output()
            .unwrap(),
    );
    assert_eq!(st["totals"]["trajectories"], 2, "{st}");
    assert!(import_leftovers(env.path()).is_empty());
}

/// issue 18 (9): SIGINT or SIGTERM during an import (here while stdin is
/// still being read) removes the lock file and the staged copy, then exits
/// 130 or 143.
#[test]
fn issue_18_interrupted_import_cleans_up() {
    use std::io::Write as _;
    let env = TestEnv::new();
    for (sig, code) in [("-INT", 130), ("-TERM", 143)] {
        let mut child = env
            .cmd()
            .args([
                "import", "--from", "-", "--stream", "--format", "atif", "--output", "out",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The start of a document, and the pipe kept open: the import waits
        // for the rest with its lock taken and stdin half spooled.
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(br#"{"schema_version": "ATIF-v1.6", "session_id": "s", "steps": ["#)
            .unwrap();
        stdin.flush().unwrap();
        let lock = env.path().join(".out.pchronicle-import.lock");
        let started = std::time::Instant::now();
        while !(lock.exists() && import_leftovers(env.path()).len() >= 2) {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the import ended before it was interrupted"
            );
            assert!(
                started.elapsed() < std::time::Duration::from_mins(1),
                "no lock file: {:?}",
                import_leftovers(env.path())
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let killed = std::process::Command::new("kill")
            .args([sig, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let o = child.wait_with_output().unwrap();
        drop(stdin);
        assert_eq!(o.status.code(), Some(code), "{sig}: {}", stderr(&o));
        assert!(stderr(&o).contains("interrupted"), "{}", stderr(&o));
        assert!(
            import_leftovers(env.path()).is_empty(),
            "{sig}: {:?}",
            import_leftovers(env.path())
        );
        assert!(!env.path().join("out").exists());
    }
}

/// Run `cmd` to its end, killing it after `secs` seconds (a command that
/// opened a FIFO for writing would wait for a reader for ever).
fn output_within(mut cmd: std::process::Command, secs: u64) -> std::process::Output {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(secs) {
            let _ = child.kill();
            panic!("the command did not end within {secs}s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// issue 18 (10): `export --overwrite` replaces only regular files: a FIFO,
/// a directory or a symlink at the output path is refused with PC-EXP-006
/// and left as it was.
#[test]
fn issue_18_export_overwrite_replaces_only_regular_files() {
    use std::os::unix::fs::FileTypeExt as _;
    let env = TestEnv::new();
    env.example("data");
    let fifo = env.path().join("pipe.jsonl");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    std::fs::create_dir(env.path().join("dir.jsonl")).unwrap();
    env.write("real.jsonl", "keep");
    std::os::unix::fs::symlink(env.path().join("real.jsonl"), env.path().join("link.jsonl"))
        .unwrap();
    for out in ["pipe.jsonl", "dir.jsonl", "link.jsonl"] {
        for stream in [false, true] {
            let mut cmd = env.cmd();
            cmd.args([
                "export",
                "--from",
                "data",
                "--source",
                "evalstate__fast-agent/harbor_multiagent_v1_7.json",
                "--format",
                "storyline",
                "--output",
                out,
                "--overwrite",
            ]);
            if stream {
                cmd.arg("--stream");
            }
            let o = output_within(cmd, 60);
            assert_eq!(o.status.code(), Some(2), "{out} {stream}: {}", stderr(&o));
            assert!(
                stderr(&o).contains("error[PC-EXP-006]"),
                "{out} {stream}: {}",
                stderr(&o)
            );
        }
    }
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    assert!(env.path().join("dir.jsonl").is_dir());
    assert!(std::fs::symlink_metadata(env.path().join("link.jsonl"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read_to_string(env.path().join("real.jsonl")).unwrap(),
        "keep"
    );
    // A regular file is still replaced.
    let o = env
        .cmd()
        .args([
            "export",
            "--from",
            "data",
            "--source",
            "evalstate__fast-agent/harbor_multiagent_v1_7.json",
            "--format",
            "storyline",
            "--output",
            "real.jsonl",
            "--overwrite",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_ne!(
        std::fs::read_to_string(env.path().join("real.jsonl")).unwrap(),
        "keep"
    );
    // No temporary file is left beside the refused outputs.
    let tmp: Vec<_> = std::fs::read_dir(env.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(tmp.is_empty(), "{tmp:?}");
}
