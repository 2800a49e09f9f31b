//! Proxying and capture: byte-identical answers, events, sessions,
//! projection, admin API, Warehouse view, markdown, credentials.

use serde_json::{json, Value};

use crate::gateway::{
    all_bytes, contains, query, request, Gateway, Setup, Upstream, CLIENT_KEY, ROUTE_KEY,
};

/// One request per protocol, streamed and not.
fn cases() -> Vec<(&'static str, Value)> {
    let chat = json!({"model": "gpt-test", "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "今天天气如何 use tool"}]});
    let responses = json!({"model": "gpt-test", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "summarise 日志"}]}]});
    let messages = json!({"model": "claude-test", "max_tokens": 64, "system": "sys",
        "messages": [{"role": "user", "content": "hello claude use tool"}]});
    let mut out = Vec::new();
    for (path, body) in [
        ("/v1/chat/completions", chat),
        ("/v1/responses", responses),
        ("/v1/messages", messages),
    ] {
        out.push((path, body.clone()));
        let mut s = body;
        s["stream"] = json!(true);
        out.push((path, s));
    }
    out
}

#[test]
fn three_protocols_pass_through_byte_identical_and_are_captured() {
    let up = Upstream::start(0);
    let s = Setup::new();
    let wh = s.warehouse("");
    let gw_cfg = s.gateway(&up, "");
    let gw = Gateway::serve(&s, &wh, &gw_cfg, &[]);
    assert!(gw.warehouse.is_none(), "no --listen: only the Gateway runs");
    let mut call_ids = Vec::new();
    for (i, (path, body)) in cases().iter().enumerate() {
        let session = format!("sess-{}", i / 2);
        let direct = request(
            &up.addr.to_string(),
            "POST",
            path,
            &[("Content-Type", "application/json")],
            Some(body.to_string().as_bytes()),
        );
        let via = gw.post(
            path,
            &[
                ("x-pchronicle-session-id", &session),
                ("Authorization", &format!("Bearer {CLIENT_KEY}")),
            ],
            body,
        );
        assert_eq!(via.status, direct.status, "{path}");
        assert_eq!(via.body, direct.body, "{path} stream={}", body["stream"]);
        assert_eq!(via.header("content-type"), direct.header("content-type"));
        // The route's key replaced the client's.
        let seen = up.seen();
        if *path == "/v1/messages" {
            assert_eq!(seen["x-api-key"], ROUTE_KEY);
            assert!(
                seen["authorization"].is_null(),
                "client key dropped: {seen}"
            );
        } else {
            assert_eq!(seen["authorization"], format!("Bearer {ROUTE_KEY}"));
        }
        assert_ne!(
            seen["session_header"],
            json!(session),
            "session header not forwarded"
        );
        call_ids.push(via.header("x-pchronicle-call-id").unwrap().to_string());
    }
    gw.wait_flushed();

    let events = query(
        s.path(),
        &s.ds(),
        "SELECT kind, session_id, call_id, model, duplicate_count, payload_json FROM dataset.events ORDER BY seq",
    );
    assert_eq!(events.len(), 12, "a request and a response per call");
    for id in &call_ids {
        let kinds: Vec<&str> = events
            .iter()
            .filter(|e| e["call_id"] == json!(id))
            .map(|e| e["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds.len(), 2, "{id}: {kinds:?}");
        assert_eq!(kinds[0], "http.request");
        assert!(kinds[1].starts_with("http.response"), "{kinds:?}");
    }
    let streamed = events
        .iter()
        .filter(|e| e["kind"] == "http.response.stream")
        .count();
    assert_eq!(streamed, 3);
    for e in &events {
        assert_eq!(e["duplicate_count"], 0);
        let p: Value = serde_json::from_str(e["payload_json"].as_str().unwrap()).unwrap();
        assert_eq!(p["schema_version"], 1);
        assert_eq!(p["source"], "pchronicle-gateway");
        assert!(p["event_id"].as_str().unwrap().starts_with("ev-"));
        assert!(p["timestamp_unix_ms"].as_i64().unwrap() > 0);
        assert_eq!(p["agent_id"], "test-agent");
        let h = &p["payload"]["http"];
        assert_eq!(h["headers_redacted"], true);
        if p["kind"] == "http.request" {
            assert_eq!(h["method"], "POST");
            assert_eq!(h["headers"]["authorization"], "<redacted>");
            assert!(h["request_body"].is_object());
            assert_eq!(p["payload"]["client"]["peer_ip"], "127.0.0.1");
        } else {
            assert_eq!(h["status"], 200);
            assert!(p["payload"]["timing"]["duration_ms"].as_f64().is_some());
        }
    }
    // Full capture keeps the SSE wire and the assembled body.
    let stream_ev: Value = serde_json::from_str(
        events
            .iter()
            .find(|e| e["kind"] == "http.response.stream")
            .unwrap()["payload_json"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(stream_ev["payload"]["http"]["body_encoding"], "sse-wire");
    assert!(stream_ev["payload"]["assembled"].is_object());
    assert!(stream_ev["payload"]["timing"]["ttft_ms"].as_f64().is_some());

    // Sessions group by header; the projection gives runs, steps and tool calls.
    let runs = query(
        s.path(),
        &s.ds(),
        "SELECT session_id, step_count, tool_call_count, total_prompt_tokens FROM dataset.trajectories ORDER BY session_id",
    );
    let ids: Vec<&str> = runs
        .iter()
        .map(|r| r["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["sess-0", "sess-1", "sess-2"]);
    let steps = query(
        s.path(),
        &s.ds(),
        "SELECT session_id, step_source AS source, message_value AS text FROM dataset.steps WHERE session_id = 'sess-0' ORDER BY step_id",
    );
    let texts: Vec<(&str, &str)> = steps
        .iter()
        .map(|r| {
            (
                r["source"].as_str().unwrap(),
                r["text"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(texts[0], ("system", "be brief"));
    assert_eq!(texts[1], ("user", "今天天气如何 use tool"));
    assert!(
        texts[2].0 == "agent" && texts[2].1.starts_with("echo: "),
        "{texts:?}"
    );
    let calls = query(
        s.path(),
        &s.ds(),
        "SELECT session_id, function_name FROM dataset.tool_calls ORDER BY session_id",
    );
    assert!(calls
        .iter()
        .any(|c| c["session_id"] == "sess-0" && c["function_name"] == "lookup"));
    assert!(calls
        .iter()
        .any(|c| c["session_id"] == "sess-2" && c["function_name"] == "lookup"));

    // find works on captured Chinese text.
    let o = crate::gateway::command(s.path())
        .args(["find", "--format", "json"])
        .arg(s.ds())
        .args(["--match", "天气"])
        .output()
        .unwrap();
    let found: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(!found["matches"].as_array().unwrap().is_empty(), "{found}");

    // Admin API.
    let st = gw.admin("/admin/status");
    assert_eq!(st["requests"], 6);
    assert_eq!(st["captured_events"], 12);
    assert_eq!(st["sink"]["flushed_events"], 12);
    assert_eq!(st["routes"][0]["api_key_env"], "ROUTE_KEY");
    let sessions = gw.admin("/admin/sessions");
    assert_eq!(sessions["count"], 3);
    for sess in sessions["sessions"].as_array().unwrap() {
        assert_eq!(sess["calls"], 2);
        assert_eq!(sess["responses"], 2);
        assert_eq!(sess["in_flight"], 0);
    }
    let bad = request(&gw.admin, "GET", "/admin/sessions?limit=0", &[], None);
    assert_eq!(bad.status, 400);
    let missing = request(&gw.admin, "GET", "/admin/nope", &[], None);
    assert_eq!(missing.status, 404);

    // No credential anywhere: Dataset, state, logs.
    let log = gw.log();
    assert_eq!(gw.stop(), Some(0));
    let bytes = all_bytes(s.path());
    for secret in [ROUTE_KEY, CLIENT_KEY] {
        assert!(!contains(&bytes, secret), "{secret} written to disk");
        assert!(!log.contains(secret), "{secret} in the log");
    }
}

#[test]
fn aliases_rewrite_the_model_and_sessions_without_header_follow_the_conversation() {
    let up = Upstream::start(0);
    let s = Setup::new();
    let wh = s.warehouse("");
    let gw_cfg = s.gateway(&up, "");
    let gw = Gateway::serve(&s, &wh, &gw_cfg, &[]);
    let first = json!({"model": "alias-fast", "messages": [{"role": "user", "content": "q1"}]});
    let r1 = gw.post("/v1/chat/completions", &[], &first);
    assert_eq!(r1.status, 200);
    assert_eq!(up.seen()["model"], "real-model");
    let second = json!({"model": "alias-fast", "messages": [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "echo: q1"},
        {"role": "user", "content": "q2"}]});
    let r2 = gw.post("/v1/chat/completions", &[], &second);
    let other =
        json!({"model": "alias-fast", "messages": [{"role": "user", "content": "another"}]});
    let r3 = gw.post("/v1/chat/completions", &[], &other);
    // Credential-like query parameters are not stored.
    let r4 = gw.post(
        "/v1/chat/completions?api-key=qs-secret-77&debug=1",
        &[],
        &json!({"model": "plain", "messages": [{"role": "user", "content": "q"}]}),
    );
    assert_eq!(r4.status, 200, "{}", r4.text());
    let sid =
        |r: &crate::gateway::Response| r.header("x-pchronicle-session-id").unwrap().to_string();
    assert_eq!(sid(&r1), sid(&r2), "one conversation, one session");
    assert_ne!(sid(&r1), sid(&r3));
    gw.wait_flushed();
    let req = query(
        s.path(),
        &s.ds(),
        "SELECT payload_json FROM dataset.events WHERE kind = 'http.request' ORDER BY seq LIMIT 1",
    );
    let p: Value = serde_json::from_str(req[0]["payload_json"].as_str().unwrap()).unwrap();
    assert_eq!(p["payload"]["requested_model"], "alias-fast");
    assert_eq!(p["payload"]["upstream_model"], "real-model");
    assert_eq!(p["payload"]["model_rewritten"], true);
    let qs = query(
        s.path(),
        &s.ds(),
        "SELECT payload_json FROM dataset.events WHERE model = 'plain' AND kind = 'http.request'",
    );
    let text = qs[0]["payload_json"].as_str().unwrap();
    assert!(!text.contains("qs-secret-77"), "{text}");
    let p: Value = serde_json::from_str(text).unwrap();
    assert!(p["payload"]["http"]["url"]
        .as_str()
        .unwrap()
        .ends_with("?api-key=<redacted>&debug=1"));
    let steps = query(
        s.path(),
        &s.ds(),
        &format!(
            "SELECT step_source AS source, message_value AS text FROM dataset.steps WHERE session_id = '{}' ORDER BY step_id",
            sid(&r1)
        ),
    );
    let texts: Vec<&str> = steps.iter().map(|r| r["text"].as_str().unwrap()).collect();
    assert_eq!(
        texts,
        ["q1", "echo: q1", "q2", "echo: q2"],
        "history is not repeated"
    );
}

#[test]
fn upstream_errors_and_disconnects_are_returned_and_recorded() {
    let up = Upstream::start(0);
    let s = Setup::new();
    let wh = s.warehouse("");
    let gw_cfg = s.gateway(&up, "");
    let gw = Gateway::serve(&s, &wh, &gw_cfg, &["--debug"]);
    // Upstream errors come back unchanged.
    let body = json!({"model": "fail-429", "messages": []});
    let direct = request(
        &up.addr.to_string(),
        "POST",
        "/v1/chat/completions",
        &[],
        Some(body.to_string().as_bytes()),
    );
    let via = gw.post("/v1/chat/completions", &[], &body);
    assert_eq!(via.status, 429);
    assert_eq!(via.body, direct.body);
    let via = gw.post(
        "/v1/messages",
        &[],
        &json!({"model": "fail-500", "messages": []}),
    );
    assert_eq!(via.status, 500);
    assert_eq!(via.text(), "upstream broke");

    // A client that leaves mid-stream.
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(&gw.proxy).unwrap();
    let b = json!({"model": "gpt-test", "stream": true,
        "messages": [{"role": "user", "content": "slow stream please"}]})
    .to_string();
    write!(
        c,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nx-pchronicle-session-id: leaver\r\nContent-Length: {}\r\n\r\n{b}",
        gw.proxy,
        b.len()
    )
    .unwrap();
    let mut first = [0u8; 256];
    let n = c.read(&mut first).unwrap();
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
    drop(c);

    // An upstream that is down: 502, recorded.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_port = dead.local_addr().unwrap().port();
    drop(dead);
    let t = std::time::Instant::now();
    loop {
        let st = gw.admin("/admin/status");
        if st["client_disconnects"] == 1 {
            break;
        }
        assert!(t.elapsed() < std::time::Duration::from_secs(20), "{st}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    gw.wait_flushed();
    let ev = query(
        s.path(),
        &s.ds(),
        "SELECT payload_json FROM dataset.events WHERE session_id = 'leaver' AND kind = 'http.response.stream'",
    );
    assert_eq!(ev.len(), 1);
    let p: Value = serde_json::from_str(ev[0]["payload_json"].as_str().unwrap()).unwrap();
    assert_eq!(p["payload"]["client_disconnected"], true);
    assert_eq!(p["payload"]["degraded"], true);
    let statuses = query(
        s.path(),
        &s.ds(),
        "SELECT model, payload_json FROM dataset.events WHERE kind = 'http.response' ORDER BY seq",
    );
    let codes: Vec<i64> = statuses
        .iter()
        .map(|r| {
            let p: Value = serde_json::from_str(r["payload_json"].as_str().unwrap()).unwrap();
            p["payload"]["http"]["status"].as_i64().unwrap()
        })
        .collect();
    assert_eq!(codes, [429, 500]);
    // --debug mirrors dispatch and capture lines, never the key.
    let log = gw.log();
    assert!(log.contains("gateway debug: dispatch"), "{log}");
    assert!(log.contains("gateway debug: capture"), "{log}");
    assert!(!log.contains(ROUTE_KEY));
    drop(gw);

    // Restart against an upstream that is gone.
    std::fs::write(
        s.path().join("gateway.toml"),
        std::fs::read_to_string(s.path().join("gateway.toml"))
            .unwrap()
            .replace(&up.addr.port().to_string(), &dead_port.to_string()),
    )
    .unwrap();
    let gw = Gateway::serve(&s, &wh, &gw_cfg, &[]);
    let r = gw.post(
        "/v1/chat/completions",
        &[],
        &json!({"model": "x", "messages": []}),
    );
    assert_eq!(r.status, 502, "{}", r.text());
    assert_eq!(r.code(), "PC-GW-007");
    gw.wait_flushed();
    let last = query(
        s.path(),
        &s.ds(),
        "SELECT payload_json FROM dataset.events ORDER BY seq DESC LIMIT 1",
    );
    let p: Value = serde_json::from_str(last[0]["payload_json"].as_str().unwrap()).unwrap();
    assert_eq!(p["payload"]["gateway_error"]["code"], "PC-GW-007");
}

#[test]
fn the_warehouse_shows_captured_traffic_and_markdown_is_kept() {
    let up = Upstream::start(0);
    let s = Setup::new();
    let wh = s.warehouse("");
    let gw_cfg = s.gateway(&up, "capture_level = \"dialogue\"");
    let gw = Gateway::serve(
        &s,
        &wh,
        &gw_cfg,
        &["--listen", "127.0.0.1:0", "--gateway-stream-markdown"],
    );
    let web = gw.warehouse.clone().expect("the Warehouse listens too");
    let body = json!({"model": "gpt-test", "stream": true,
        "messages": [{"role": "user", "content": "浏览器里能看到吗"}]});
    let r = gw.post(
        "/v1/chat/completions",
        &[("x-pchronicle-session-id", "web-1")],
        &body,
    );
    assert_eq!(r.status, 200);
    gw.wait_flushed();
    // The Warehouse refreshes after an append.
    let t = std::time::Instant::now();
    let runs = loop {
        let r = request(&web, "GET", "/api/v1/datasets/live/runs", &[], None);
        let v = r.json();
        if v["total"].as_u64() == Some(1) {
            break v;
        }
        assert!(t.elapsed() < std::time::Duration::from_secs(30), "{v}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(runs["runs"][0]["session_id"], "web-1");
    // The explorer's trajectory and steps routes read the projection.
    let doc = runs["runs"][0]["root_document_id"].as_str().unwrap();
    let base = format!("/api/v1/datasets/live/trajectories/{doc}");
    let tr = request(&web, "GET", &base, &[], None).json();
    assert_eq!(tr["source_path"], "events.lance");
    assert_eq!(tr["step_count"], 2);
    let steps = request(&web, "GET", &format!("{base}/steps?limit=10"), &[], None).json();
    assert_eq!(steps["steps"][0]["step_source"], "user");
    assert_eq!(steps["steps"][1]["step_source"], "agent");
    assert_eq!(steps["steps"][1]["message_value"], "echo: 浏览器里能看到吗");
    // Dialogue capture: no SSE wire, the assembled answer only.
    let ev = query(
        s.path(),
        &s.ds(),
        "SELECT payload_json FROM dataset.events WHERE kind = 'http.response.stream'",
    );
    let p: Value = serde_json::from_str(ev[0]["payload_json"].as_str().unwrap()).unwrap();
    assert!(p["payload"]["http"].get("response_body").is_none());
    assert_eq!(
        p["payload"]["assembled"]["choices"][0]["message"]["content"],
        "echo: 浏览器里能看到吗"
    );
    let md = std::fs::read_to_string(s.ds().join(".pchronicle-gateway/markdown/web-1.md")).unwrap();
    assert!(
        md.contains("浏览器里能看到吗") && md.contains("echo: 浏览器里能看到吗"),
        "{md}"
    );
    // The state directory is hidden: not a Source.
    let sources = query(s.path(), &s.ds(), "SELECT source_path FROM dataset.sources");
    assert_eq!(sources, [json!({"source_path": "events.lance"})]);
}

#[test]
fn summary_capture_keeps_no_bodies() {
    let up = Upstream::start(0);
    let s = Setup::new();
    let wh = s.warehouse("");
    let gw_cfg = s.gateway(&up, "capture_level = \"summary\"");
    let gw = Gateway::serve(&s, &wh, &gw_cfg, &[]);
    for stream in [false, true] {
        let r = gw.post(
            "/v1/chat/completions",
            &[("x-pchronicle-session-id", "quiet")],
            &json!({"model": "m", "stream": stream,
                "messages": [{"role": "user", "content": "private words"}]}),
        );
        assert_eq!(r.status, 200);
    }
    gw.wait_flushed();
    let rows = query(
        s.path(),
        &s.ds(),
        "SELECT kind, payload_json FROM dataset.events ORDER BY seq",
    );
    assert_eq!(rows.len(), 4);
    for r in &rows {
        let text = r["payload_json"].as_str().unwrap();
        assert!(!text.contains("private words"), "{text}");
        let p: Value = serde_json::from_str(text).unwrap();
        assert_eq!(p["payload"]["degraded"], true);
        assert_eq!(p["payload"]["capture_level"], "summary");
        if p["kind"] != "http.request" {
            assert_eq!(
                p["payload"]["usage"]["completion_tokens"], 5,
                "usage is kept"
            );
        }
    }
    let t = query(
        s.path(),
        &s.ds(),
        "SELECT step_count FROM dataset.trajectories",
    );
    assert_eq!(t[0]["step_count"], 0);
    let o = crate::gateway::command(s.path())
        .args(["export", "--format", "storyline", "--output", "-", "--from"])
        .arg(s.ds())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value = serde_json::from_slice(&o.stdout)
        .or_else(|_| {
            serde_json::from_str(String::from_utf8_lossy(&o.stdout).lines().next().unwrap())
        })
        .unwrap();
    let doc = if doc.is_array() { doc[0].clone() } else { doc };
    assert_eq!(doc["extra"]["gateway"]["answers_not_captured"], 2, "{doc}");
    assert_eq!(doc["extra"]["gateway"]["failed_calls"], 0);
}
