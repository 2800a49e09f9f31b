//! The JSON API: every route, against the CLI's own answers where both
//! exist, and the bad inputs the server must refuse.

use std::io::Write as _;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::serve::harness::{cli, copy_dir, enc, example_dataset, request, Served};

/// An ATIF document whose text is hostile HTML, with one tool call.
pub fn html_doc() -> Value {
    json!({
        "schema_version": "ATIF-v1.7",
        "session_id": "html-session",
        "agent": {"name": "probe", "version": "1", "model_name": "m-html"},
        "steps": [
            {"step_id": 1, "source": "user",
             "message": "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned=2\"> 请检查数据库连接"},
            {"step_id": 2, "source": "agent", "model_name": "m-html",
             "message": "<b>bold?</b> <iframe src=\"javascript:window.__pwned=3\"></iframe> 数据库连接正常",
             "reasoning_content": "thinking <style>body{display:none}</style>",
             "tool_calls": [{"tool_call_id": "c1", "function_name": "run_sql",
                             "arguments": {"q": "<script>window.__pwned=4</script>"}}],
             "observation": {"results": [{"source_call_id": "c1", "content": "<svg onload=\"window.__pwned=5\"></svg> ok"}]},
             "metrics": {"prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.001}}
        ]
    })
}

/// A Dataset: the shipped examples plus the HTML document.
pub fn dataset(root: &std::path::Path) -> std::path::PathBuf {
    let d = root.join("data");
    copy_dir(&example_dataset(), &d);
    std::fs::write(
        d.join("html.json"),
        serde_json::to_vec_pretty(&html_doc()).unwrap(),
    )
    .unwrap();
    d
}

fn serve_examples(t: &tempfile::TempDir) -> Served {
    dataset(t.path());
    Served::start(
        t.path(),
        "[[datasets]]\nname = \"evals\"\nuri = \"data\"\n\n[[datasets]]\nname = \"local-copy\"\nuri = \"data\"\n",
    )
}

#[test]
fn catalog_and_health_match_the_cli() {
    let t = tempfile::tempdir().unwrap();
    let s = serve_examples(&t);
    let h = s.json("/api/v1/health");
    assert_eq!(h["status"], "ok");
    assert_eq!(h["mode"], "read_only");
    let c = s.json("/api/v1/catalog");
    let names: Vec<&str> = c["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["evals", "local-copy"]);
    // Same URI, same identity: the CLI reports the same snapshot_id.
    let ls = cli(t.path(), &["ls", "data", "--format", "json"]);
    let ls: Value = serde_json::from_str(&ls).unwrap();
    assert_eq!(c["datasets"][0]["snapshot_id"], ls["snapshot_id"]);
    assert_eq!(
        c["datasets"][0]["snapshot_id"],
        c["datasets"][1]["snapshot_id"]
    );
    assert_eq!(
        c["datasets"][0]["source_count"],
        ls["sources"].as_array().unwrap().len()
    );
    // No path, URI or endpoint of a Dataset is ever exposed.
    let text = serde_json::to_string(&c).unwrap();
    assert!(!text.contains(t.path().to_str().unwrap()), "{text}");
    let src = s.json("/api/v1/datasets/evals/sources");
    let text = serde_json::to_string(&src).unwrap();
    assert!(!text.contains(t.path().to_str().unwrap()), "{text}");
    assert!(src["sources"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["source_path"] == "html.json"));
    // OpenAPI document served and valid JSON naming our routes.
    let api = s.json("/api/v1/openapi.json");
    assert!(
        api["paths"]["/api/v1/datasets/{dataset}/runs"].is_object(),
        "{api}"
    );
    // Every answer has a request id; one sent by the client is kept.
    let r = s.send(
        "GET",
        "/api/v1/health",
        &[("X-Request-Id", "abc-123")],
        None,
    );
    assert_eq!(r.header("x-request-id"), Some("abc-123"));
    let r = s.send(
        "GET",
        "/api/v1/health",
        &[("X-Request-Id", "bad id with spaces")],
        None,
    );
    assert_eq!(r.header("x-request-id").unwrap().len(), 16);
    assert!(r
        .header("content-security-policy")
        .unwrap()
        .contains("script-src 'self'"));
}

#[test]
fn trajectories_page_sort_and_filter() {
    let t = tempfile::tempdir().unwrap();
    let s = serve_examples(&t);
    let all = s.json("/api/v1/datasets/evals/trajectories?limit=500");
    let total = all["total"].as_u64().unwrap();
    let cli_count = cli(
        t.path(),
        &[
            "query",
            "data",
            "SELECT count(*) AS n FROM trajectories",
            "--format",
            "jsonl",
        ],
    );
    let n: Value = serde_json::from_str(cli_count.trim()).unwrap();
    assert_eq!(total, n["n"].as_u64().unwrap());
    assert_eq!(all["trajectories"].as_array().unwrap().len() as u64, total);
    // Pages of 3 cover the list once, in order.
    let mut seen = Vec::new();
    let mut offset = Some(0u64);
    while let Some(o) = offset {
        let p = s.json(&format!(
            "/api/v1/datasets/evals/trajectories?limit=3&offset={o}"
        ));
        for r in p["trajectories"].as_array().unwrap() {
            seen.push((r["source_path"].clone(), r["document_id"].clone()));
        }
        offset = p["next_offset"].as_u64();
    }
    let whole: Vec<_> = all["trajectories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["source_path"].clone(), r["document_id"].clone()))
        .collect();
    assert_eq!(seen, whole);
    // Sorted by step_count descending.
    let p = s.json("/api/v1/datasets/evals/trajectories?sort=step_count&order=desc&limit=500");
    let counts: Vec<i64> = p["trajectories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["step_count"].as_i64().unwrap())
        .collect();
    let mut sorted = counts.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(counts, sorted);
    // Filters.
    let p = s.json("/api/v1/datasets/evals/trajectories?model_name=m-html");
    assert_eq!(p["total"], 1);
    assert_eq!(p["trajectories"][0]["source_path"], "html.json");
    let p = s.json(&format!(
        "/api/v1/datasets/evals/trajectories?q={}",
        enc("数据库连接")
    ));
    assert_eq!(p["total"], 1);
    // Bad parameters.
    for bad in ["sort=nope", "order=sideways", "limit=-1", "offset=x"] {
        let r = s.get(&format!("/api/v1/datasets/evals/trajectories?{bad}"));
        assert_eq!((r.status, r.code().as_str()), (400, "PC-WEB-006"), "{bad}");
    }
}

/// issue 18: the runs list has one entry per Run (a main trajectory with its
/// subagents), like the `runs` relation, and opens at the main trajectory.
#[test]
fn runs_page_lists_runs() {
    let t = tempfile::tempdir().unwrap();
    let s = serve_examples(&t);
    let all = s.json("/api/v1/datasets/evals/runs?limit=500");
    let rows = cli(
        t.path(),
        &[
            "query",
            "data",
            "SELECT source_path, run_id, root_document_id, trajectory_count FROM runs",
            "--format",
            "jsonl",
        ],
    );
    let want: Vec<Value> = rows
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(all["total"].as_u64().unwrap() as usize, want.len());
    let docs = s.json("/api/v1/datasets/evals/trajectories?limit=500");
    assert!(
        all["total"].as_u64() < docs["total"].as_u64(),
        "the examples have subagents"
    );
    for w in &want {
        let got = all["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["source_path"] == w["source_path"] && r["run_id"] == w["run_id"])
            .unwrap_or_else(|| panic!("{w} missing"));
        assert_eq!(got["root_document_id"], w["root_document_id"]);
        assert_eq!(got["trajectory_count"], w["trajectory_count"]);
        // The main trajectory opens at its position.
        let tr = s.json(&format!(
            "/api/v1/datasets/evals/trajectories/{}?source={}&ordinal={}",
            enc(got["root_document_id"].as_str().unwrap()),
            enc(got["source_path"].as_str().unwrap()),
            got["storage_ordinal"]
        ));
        assert_eq!(tr["document_id"], got["root_document_id"]);
    }
    let with_subagents = all["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["subagent_count"].as_i64() > Some(0))
        .expect("a run with subagents");
    let tr = s.json(&format!(
        "/api/v1/datasets/evals/trajectories/{}?source={}&ordinal={}",
        enc(with_subagents["root_document_id"].as_str().unwrap()),
        enc(with_subagents["source_path"].as_str().unwrap()),
        with_subagents["storage_ordinal"]
    ));
    let children = tr["children"].as_array().unwrap().len() as i64;
    assert!(children > 0 && children <= with_subagents["subagent_count"].as_i64().unwrap());
}

#[test]
fn trajectory_steps_and_export() {
    let t = tempfile::tempdir().unwrap();
    let s = serve_examples(&t);
    let runs = s.json("/api/v1/datasets/evals/trajectories?source_path=html.json");
    let doc = runs["trajectories"][0]["document_id"]
        .as_str()
        .unwrap()
        .to_string();
    let base = format!("/api/v1/datasets/evals/trajectories/{}", enc(&doc));
    let tr = s.json(&format!("{base}?source=html.json"));
    assert_eq!(tr["step_count"], 2);
    assert_eq!(tr["tool_call_count"], 1);
    assert_eq!(tr["source_path"], "html.json");
    // Without `source`, the only Source holding the id answers.
    assert_eq!(s.json(&base)["source_path"], "html.json");
    let page = s.json(&format!("{base}/steps?source=html.json&limit=1"));
    assert_eq!(page["total"], 2);
    assert_eq!(page["next_offset"], 1);
    assert_eq!(page["steps"][0]["step_source"], "user");
    let page = s.json(&format!(
        "{base}/steps?source=html.json&offset=1&limit=1&text_chars=10"
    ));
    let step = &page["steps"][0];
    assert_eq!(step["step_source"], "agent");
    assert_eq!(step["tool_calls"][0]["function_name"], "run_sql");
    assert!(step["truncated"]
        .as_array()
        .unwrap()
        .contains(&json!("message_value")));
    // The step route returns the full text.
    let full = s.json(&format!("{base}/steps/1?source=html.json"));
    assert!(full["message_value"]
        .as_str()
        .unwrap()
        .contains("<iframe src=\"javascript:window.__pwned=3\"></iframe>"));
    assert_eq!(
        full["tool_calls"][0]["arguments"]["q"],
        "<script>window.__pwned=4</script>"
    );
    assert_eq!(full["truncated"], json!([]));
    assert_eq!(
        s.get(&format!("{base}/steps/2?source=html.json")).code(),
        "PC-WEB-005"
    );
    // Export equals the CLI's export of the same trajectory.
    for fmt in ["atif", "openai-messages", "storyline"] {
        let r = s.get(&format!("{base}/export?source=html.json&format={fmt}"));
        assert_eq!(r.status, 200, "{fmt}: {}", r.text());
        assert!(r
            .header("content-disposition")
            .unwrap()
            .starts_with("attachment;"));
        let ours: Value = serde_json::from_slice(&r.body).unwrap();
        let theirs = cli(
            t.path(),
            &[
                "export",
                "--from",
                "data",
                "--source",
                "html.json",
                "--format",
                fmt,
                "--output",
                "-",
            ],
        );
        let theirs: Value = serde_json::from_str(&theirs).unwrap();
        assert_eq!(ours, theirs, "{fmt}");
    }
    assert_eq!(
        s.get(&format!("{base}/export?format=pdf")).code(),
        "PC-WEB-006"
    );
    // Unknown trajectory.
    let r = s.get("/api/v1/datasets/evals/trajectories/no-such-doc");
    assert_eq!((r.status, r.code().as_str()), (404, "PC-WEB-005"));
}

#[test]
fn find_matches_the_cli_and_carries_full_fields() {
    let t = tempfile::tempdir().unwrap();
    let s = serve_examples(&t);
    for q in [
        "数据库",
        "#assistant(数据库)",
        "无损存储 OR 数据库",
        "$.cost_usd > 0",
    ] {
        let api = s.json(&format!(
            "/api/v1/datasets/evals/find?q={}&limit=100",
            enc(q)
        ));
        let out = cli(
            t.path(),
            &[
                "find",
                "data",
                "--match",
                q,
                "--format",
                "json",
                "--max-results",
                "100",
            ],
        );
        let out: Value = serde_json::from_str(&out).unwrap();
        let key = |v: &Value| -> Vec<(Value, Value, Value)> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|h| {
                    (
                        h["source_path"].clone(),
                        h["document_id"].clone(),
                        h["step_id"].clone(),
                    )
                })
                .collect()
        };
        assert_eq!(key(&api["matches"]), key(&out["matches"]), "{q}");
        assert_eq!(api["search"]["scope"], out["search"]["scope"], "{q}");
        assert_eq!(api["snapshot_id"], out["snapshot_id"], "{q}");
    }
    let r = s.json(&format!(
        "/api/v1/datasets/evals/find?q={}",
        enc("#assistant(数据库)")
    ));
    assert_eq!(r["total"], 1);
    let hit = &r["matches"][0];
    assert_eq!(hit["index"], 1);
    assert!(hit["fields"]["message_value"]
        .as_str()
        .unwrap()
        .contains("数据库连接正常"));
    assert!(
        r["highlight_terms"]
            .as_array()
            .unwrap()
            .contains(&json!("数据库")),
        "{r}"
    );
    // Parse status without running the search.
    let e = s.json(&format!(
        "/api/v1/datasets/evals/find?explain=1&q={}",
        enc("a AND (b OR #user(c))")
    ));
    assert_eq!(e["search"]["scope"], "steps");
    assert!(e["query"]["expression"].is_string());
    let bad = s.get(&format!("/api/v1/datasets/evals/find?q={}", enc("a AND (")));
    assert_eq!((bad.status, bad.code().as_str()), (400, "PC-FND-001"));
    assert_eq!(bad.json()["error"]["dataset"], "evals");
}

#[test]
fn sql_results_and_downloads_match_the_cli() {
    let t = tempfile::tempdir().unwrap();
    let s = serve_examples(&t);
    let sql = "SELECT source_path, step_source, count(*) AS n FROM evals.steps GROUP BY 1, 2 ORDER BY 1, 2";
    let cli_sql = sql.replace("evals.", "");
    for fmt in ["csv", "jsonl"] {
        let r = s.get(&format!("/api/v1/query?format={fmt}&sql={}", enc(sql)));
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(r
            .header("content-disposition")
            .unwrap()
            .contains(&format!("query.{fmt}")));
        let theirs = cli(t.path(), &["query", "data", &cli_sql, "--format", fmt]);
        assert_eq!(r.text(), theirs, "{fmt}");
    }
    let j = s.json(&format!("/api/v1/query?sql={}", enc(sql)));
    assert_eq!(j["columns"][2]["name"], "n");
    assert!(j["row_count"].as_u64().unwrap() > 3);
    assert!(j["snapshot_ids"]["evals"].is_string());
    // Two mounts are two schemas.
    let a = s.json(&format!(
        "/api/v1/query?sql={}",
        enc("SELECT count(*) FROM evals.runs")
    ));
    let b = s.json(&format!(
        "/api/v1/query?sql={}",
        enc("SELECT count(*) FROM \"local-copy\".runs")
    ));
    assert_eq!(a["rows"], b["rows"]);
    assert_eq!(b["snapshot_ids"]["local-copy"], a["snapshot_ids"]["evals"]);
    // POST with a JSON body, and the row cap.
    let body =
        serde_json::to_vec(&json!({"sql": "SELECT step_id FROM evals.steps", "max_rows": 2}))
            .unwrap();
    let r = s.send(
        "POST",
        "/api/v1/query",
        &[("Content-Type", "application/json")],
        Some(&body),
    );
    let j = r.json();
    assert_eq!(j["rows"].as_array().unwrap().len(), 2);
    assert_eq!(j["truncated"], true);
    let body = serde_json::to_vec(
        &json!({"sql": "SELECT step_id FROM evals.steps", "format": "csv", "max_rows": 2}),
    )
    .unwrap();
    let r = s.send("POST", "/api/v1/query", &[], Some(&body));
    assert_eq!((r.status, r.code().as_str()), (422, "PC-SQL-015"));
    // SQL cannot write or read files.
    for bad in [
        "DELETE FROM evals.runs",
        "COPY evals.runs TO '/tmp/x'",
        "SELECT * FROM read_csv('/etc/passwd')",
    ] {
        let r = s.get(&format!("/api/v1/query?sql={}", enc(bad)));
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
        assert!(r.code().starts_with("PC-SQL-"), "{bad}");
    }
    // Summary charts.
    let sum = s.json("/api/v1/datasets/evals/summary");
    assert!(sum["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["function_name"] == "run_sql"));
}

#[test]
fn bad_requests_are_refused_with_codes() {
    let t = tempfile::tempdir().unwrap();
    let s = serve_examples(&t);
    let data = t.path().join("data");
    let cases: Vec<(String, u16, &str)> = vec![
        ("/api/v1/datasets/nope/runs".into(), 404, "PC-WEB-004"),
        (
            "/api/v1/datasets/..%2F..%2Fetc/runs".into(),
            404,
            "PC-WEB-004",
        ),
        (
            format!("/api/v1/datasets/{}/runs", enc(data.to_str().unwrap())),
            404,
            "PC-WEB-004",
        ),
        (
            "/api/v1/datasets/s3%3A%2F%2Fbucket%2Fx/runs".into(),
            404,
            "PC-WEB-004",
        ),
        ("/api/v1/nope".into(), 404, "PC-WEB-005"),
        (
            "/api/v1/datasets/evals/trajectories/%FF%FE".into(),
            400,
            "PC-WEB-006",
        ),
        (
            format!("/api/v1/query?sql={}", "x".repeat(20_000)),
            414,
            "PC-WEB-009",
        ),
        ("/no-such-page".into(), 404, "PC-WEB-005"),
    ];
    for (path, status, code) in &cases {
        let r = s.get(path);
        assert_eq!(
            (r.status, r.code().as_str()),
            (*status, *code),
            "{path}: {}",
            r.text()
        );
        let e = &r.json()["error"];
        assert_eq!(e["request_id"].as_str(), r.header("x-request-id"));
        assert!(
            !r.text().contains(t.path().to_str().unwrap()),
            "{}",
            r.text()
        );
    }
    // Methods: read-only.
    for (m, p) in [
        ("DELETE", "/api/v1/datasets/evals/runs"),
        ("PUT", "/api/v1/catalog"),
        ("POST", "/api/v1/catalog"),
        ("POST", "/"),
    ] {
        let r = s.send(m, p, &[], Some(b"{}"));
        assert_eq!(
            (r.status, r.code().as_str()),
            (405, "PC-WEB-011"),
            "{m} {p}"
        );
    }
    // Bodies.
    let r = s.send("POST", "/api/v1/query", &[], Some(b"{not json"));
    assert_eq!((r.status, r.code().as_str()), (400, "PC-WEB-014"));
    let r = s.send("POST", "/api/v1/query", &[], Some(b"[1,2]"));
    assert_eq!((r.status, r.code().as_str()), (400, "PC-WEB-014"));
    let big = vec![b' '; (1 << 20) + 10];
    let r = s.send("POST", "/api/v1/query", &[], Some(&big));
    assert_eq!((r.status, r.code().as_str()), (413, "PC-WEB-009"));
    // A page of another site reaching the server through a rebinding name.
    let r = s.send(
        "GET",
        "/api/v1/catalog",
        &[("Host", "attacker.example:8765")],
        None,
    );
    assert_eq!((r.status, r.code().as_str()), (421, "PC-WEB-015"));
    // A page of another site may not use the API.
    let r = s.send(
        "GET",
        "/api/v1/catalog",
        &[("Sec-Fetch-Site", "cross-site")],
        None,
    );
    assert_eq!((r.status, r.code().as_str()), (403, "PC-WEB-019"));
    assert_eq!(
        s.send(
            "GET",
            "/api/v1/catalog",
            &[("Sec-Fetch-Site", "same-origin")],
            None
        )
        .status,
        200
    );
    // Ambiguous body framing.
    for cl in ["+5", "5, 5", "-1"] {
        let r = s.send("POST", "/api/v1/query", &[("Content-Length", cl)], None);
        assert_eq!(r.status, 400, "{cl}");
    }
    // Proxy headers from an untrusted peer (no [proxy]) are dropped.
    let r = s.send(
        "GET",
        "/api/v1/datasets/evals/runs",
        &[("X-Pchronicle-Dataset", "local-copy")],
        None,
    );
    assert_eq!(r.status, 200);
}

#[test]
fn bursts_of_keep_alive_connections_are_all_served() {
    let t = tempfile::tempdir().unwrap();
    let s = serve_examples(&t);
    // 32 connections opened at once and kept open, then one request on each.
    let mut conns: Vec<std::net::TcpStream> = (0..32)
        .map(|_| std::net::TcpStream::connect(&s.addr).unwrap())
        .collect();
    for c in &mut conns {
        c.set_read_timeout(Some(Duration::from_mins(1))).unwrap();
        c.write_all(format!("GET /api/v1/health HTTP/1.1\r\nHost: {}\r\n\r\n", s.addr).as_bytes())
            .unwrap();
    }
    for c in &mut conns {
        let mut buf = [0u8; 12];
        std::io::Read::read_exact(c, &mut buf).unwrap();
        assert_eq!(&buf, b"HTTP/1.1 200");
    }
}

#[test]
fn slow_clients_do_not_block_others() {
    let t = tempfile::tempdir().unwrap();
    let s = serve_examples(&t);
    // Eight connections that send half a request line and stall, one that
    // stalls in its body.
    let mut stalled = Vec::new();
    for _ in 0..8 {
        let mut c = std::net::TcpStream::connect(&s.addr).unwrap();
        c.write_all(b"GET /api/v1/cata").unwrap();
        stalled.push(c);
    }
    let mut c = std::net::TcpStream::connect(&s.addr).unwrap();
    c.write_all(
        format!(
            "POST /api/v1/query HTTP/1.1\r\nHost: {}\r\nContent-Length: 100\r\n\r\n{{",
            s.addr
        )
        .as_bytes(),
    )
    .unwrap();
    stalled.push(c);
    let started = Instant::now();
    for _ in 0..10 {
        let r = request(&s.addr, "GET", "/api/v1/health", &[], None);
        assert_eq!(r.status, 200);
    }
    assert!(started.elapsed() < Duration::from_secs(30));
    // A client that never finishes its head is answered 408 and closed.
    let mut first = stalled.remove(0);
    first
        .set_read_timeout(Some(Duration::from_mins(1)))
        .unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut first, &mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("PC-WEB-016"), "{answer}");
    drop(stalled);
}

#[test]
fn large_trajectories_page() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("big");
    std::fs::create_dir_all(&d).unwrap();
    let n = 100_000;
    let mut f = std::io::BufWriter::new(std::fs::File::create(d.join("big.json")).unwrap());
    write!(f, "{{\"schema_version\":\"ATIF-v1.7\",\"session_id\":\"big\",\"agent\":{{\"name\":\"a\",\"version\":\"1\",\"model_name\":\"m\"}},\"steps\":[").unwrap();
    for i in 1..=n {
        let src = if i % 2 == 1 { "user" } else { "agent" };
        write!(
            f,
            "{}{{\"step_id\":{i},\"source\":\"{src}\",\"message\":\"step number {i}\"}}",
            if i > 1 { "," } else { "" }
        )
        .unwrap();
    }
    write!(f, "]}}").unwrap();
    drop(f);
    let s = Served::start(t.path(), "[[datasets]]\nname = \"big\"\nuri = \"big\"\n");
    let runs = s.json("/api/v1/datasets/big/trajectories");
    let doc = runs["trajectories"][0]["document_id"]
        .as_str()
        .unwrap()
        .to_string();
    let base = format!("/api/v1/datasets/big/trajectories/{}", enc(&doc));
    let first = s.json(&format!("{base}/steps?limit=100"));
    assert_eq!(first["total"], n);
    assert_eq!(first["steps"].as_array().unwrap().len(), 100);
    assert_eq!(first["next_offset"], 100);
    let last = s.json(&format!("{base}/steps?offset={}&limit=500", n - 3));
    assert_eq!(last["steps"].as_array().unwrap().len(), 3);
    assert_eq!(
        last["steps"][2]["message_value"],
        format!("step number {n}")
    );
    assert_eq!(last["next_offset"], Value::Null);
    // The page size is capped.
    let capped = s.json(&format!("{base}/steps?limit=100000"));
    assert_eq!(capped["steps"].as_array().unwrap().len(), 500);
}

#[test]
fn store_trajectories_match_the_files_they_came_from() {
    let t = tempfile::tempdir().unwrap();
    let files = t.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    // A document id with a quote reaches the store's filter intact.
    let mut doc = html_doc();
    doc["session_id"] = json!("it's a 'quoted' id");
    std::fs::write(files.join("quoted.json"), serde_json::to_vec(&doc).unwrap()).unwrap();
    std::fs::write(
        files.join("html.json"),
        serde_json::to_vec(&html_doc()).unwrap(),
    )
    .unwrap();
    cli(
        t.path(),
        &["import", "--from", "files", "--output", "store", "-q"],
    );
    let s = Served::start(
        t.path(),
        "[[datasets]]\nname = \"files\"\nuri = \"files\"\n[[datasets]]\nname = \"store\"\nuri = \"store\"\n",
    );
    // The trajectories list of a store comes from its runs table: same
    // documents, same sort, same counts.
    let ids = |ds: &str| -> Vec<(Value, Value, Value)> {
        s.json(&format!(
            "/api/v1/datasets/{ds}/trajectories?sort=document_id&order=desc"
        ))["trajectories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["document_id"].clone(),
                    r["step_count"].clone(),
                    r["model_name"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(ids("files"), ids("store"));
    assert_eq!(ids("store").len(), 2);
    for id in ["it's a 'quoted' id", "html-session"] {
        let path = |ds: &str| {
            format!(
                "/api/v1/datasets/{ds}/trajectories/{}/steps?limit=10",
                enc(id)
            )
        };
        let a = s.json(&path("files"));
        let b = s.json(&path("store"));
        assert_eq!(a["total"], 2, "{id}");
        let strip = |v: &Value| -> Vec<Value> {
            v["steps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|st| {
                    json!([
                        st["step_id"],
                        st["step_source"],
                        st["message_value"],
                        st["tool_calls"].as_array().unwrap().len()
                    ])
                })
                .collect()
        };
        assert_eq!(strip(&a), strip(&b), "{id}");
    }
}

#[test]
fn every_documented_route_exists() {
    let t = tempfile::tempdir().unwrap();
    let s = serve_examples(&t);
    let api = s.json("/api/v1/openapi.json");
    let paths = api["paths"].as_object().unwrap();
    assert!(paths.len() >= 13, "{}", paths.len());
    for (path, ops) in paths {
        let concrete = path
            .replace("{dataset}", "evals")
            .replace("{document_id}", "html-session")
            .replace("{index}", "0");
        let q = if concrete.ends_with("/query") {
            "?sql=SELECT%201"
        } else if concrete.ends_with("/find") {
            "?q=x"
        } else {
            ""
        };
        if ops.get("get").is_some() {
            let r = s.get(&format!("{concrete}{q}"));
            // Media need a file a trajectory names; without one the route
            // answers its documented refusal.
            let want = if concrete.ends_with("/media") {
                403
            } else {
                200
            };
            assert_eq!(r.status, want, "{path}: {}", r.text());
        }
    }
}

/// A client that closes its connection while its query runs cancels the
/// query at the next batch: its only worker is free for the next request at
/// once, and the access log records the request as cancelled (499) with the
/// time it took.
#[test]
fn a_client_that_goes_away_frees_its_worker() {
    let t = tempfile::tempdir().unwrap();
    pchronicle::corpus::generate(&pchronicle::corpus::Options {
        out: t.path().join("data"),
        // Every pair of steps of a file: 400 × 100² rows, seconds of work.
        runs: 400,
        steps: 100,
        seed: 3,
        format: "atif".into(),
        subagent_every: 0,
        files_per_dir: 100,
    })
    .unwrap();
    let s = Served::start(
        t.path(),
        "[[datasets]]\nname = \"evals\"\nuri = \"data\"\n\n[limits]\nworkers = 1\n",
    );
    // A query that runs for seconds: every pair of steps of a file.
    let body = json!({
        "sql": "SELECT count(*), sum(length(a.observation_text || b.observation_text)) \
                FROM evals.steps a JOIN evals.steps b ON a.source_path = b.source_path",
    })
    .to_string();
    let mut c = std::net::TcpStream::connect(&s.addr).unwrap();
    c.write_all(
        format!(
            "POST /api/v1/query HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            s.addr,
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    // Started (it holds the only worker), then the client goes away.
    std::thread::sleep(Duration::from_millis(600));
    drop(c);
    let started = Instant::now();
    let r = s.get("/api/v1/health");
    let waited = started.elapsed();
    assert_eq!(r.status, 200);
    assert!(
        s.wait_log(
            |l| l.contains("\"path\":\"/api/v1/query\"") && l.contains("\"cancelled\":true"),
            Duration::from_secs(30)
        ),
        "{:?}",
        s.log()
    );
    let line: Value = s
        .log()
        .iter()
        .find(|l| l.contains("\"path\":\"/api/v1/query\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .unwrap();
    assert_eq!(line["status"], 499, "{line}");
    // The same query run to its end, for scale: the health check waited
    // far less than it takes.
    let full = Instant::now();
    let done = s.send(
        "POST",
        "/api/v1/query",
        &[("Content-Type", "application/json")],
        Some(body.as_bytes()),
    );
    let full = full.elapsed();
    assert_eq!(done.status, 200, "{}", done.text());
    assert!(
        waited * 2 < full,
        "health waited {waited:?}; the whole query takes {full:?}"
    );
}

/// The SQL and find answers carry the statistics of the request, from the
/// same counters as `--stats`: a request alone on the server reads exactly
/// the Dataset's files.
#[test]
fn sql_and_find_answers_carry_their_statistics() {
    let t = tempfile::tempdir().unwrap();
    let s = serve_examples(&t);
    let status: Value = serde_json::from_str(&cli(
        t.path(),
        &["status", "data", "--format", "json", "-q"],
    ))
    .unwrap();
    let files: Vec<&Value> = status["sources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["kind"] == "file" && x["counts"].is_object())
        .collect();
    let bytes: u64 = files
        .iter()
        .map(|x| x["size_bytes"].as_u64().unwrap())
        .sum();
    let steps = status["totals"]["steps"].as_u64().unwrap();
    let r = s.send(
        "POST",
        "/api/v1/query",
        &[("Content-Type", "application/json")],
        Some(br#"{"sql": "SELECT count(*) AS n FROM evals.steps"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let st = &v["stats"];
    assert_eq!(v["rows"][0][0], steps, "{v}");
    assert_eq!(st["overlapped"], false, "{st}");
    assert_eq!(st["rows_scanned"], steps, "{st}");
    assert_eq!(st["rows_produced"], 1, "{st}");
    assert_eq!(st["sources_read"], files.len(), "{st}");
    assert_eq!(st["bytes_read_local"], bytes, "{st}");
    assert!(st["wall_ms"].as_f64().unwrap() > 0.0 && st["peak_rss_bytes"].as_u64().unwrap() > 0);
    let f = s.json("/api/v1/datasets/evals/find?q=timeout");
    let st = &f["stats"];
    assert_eq!(st["rows_produced"], f["total"], "{st}");
    assert!(st["index_segments"].as_u64().unwrap() >= 1, "{st}");
}
