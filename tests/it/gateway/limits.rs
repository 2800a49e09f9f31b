//! Bounds and edges of the proxy: transport limits, upstream timeouts,
//! captures cut at `max_capture_bytes`, HTTP/1.0 clients, a stop while a
//! stream is relayed, damaged state, Markdown file names, and host names
//! that resolve to refused addresses.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{json, Value};

use crate::gateway::{query, Gateway, Setup, Upstream};

/// Write `bytes` on a fresh connection and read until the server closes it;
/// returns the status code and the whole answer.
fn raw(addr: &str, bytes: &[u8]) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_mins(1))).unwrap();
    let _ = s.write_all(bytes);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let head = String::from_utf8_lossy(&out);
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {head:?}"));
    (status, out)
}

fn chat(content: &str, stream: bool) -> Value {
    json!({"model": "m", "stream": stream,
        "messages": [{"role": "user", "content": content}]})
}

/// The payloads of the captured events of `kind`, in order.
fn payloads(s: &Setup, kind: &str) -> Vec<Value> {
    query(
        s.path(),
        &s.ds(),
        &format!("SELECT payload_json FROM dataset.events WHERE kind = '{kind}' ORDER BY seq"),
    )
    .iter()
    .map(|r| serde_json::from_str(r["payload_json"].as_str().unwrap()).unwrap())
    .collect()
}

#[test]
fn transport_bounds_answer_with_their_status_and_forward_nothing() {
    let up = Upstream::start(0);
    let s = Setup::new();
    let wh = s.warehouse("");
    let cfg = s.gateway(&up, "max_body_bytes = 1024\nmax_connections = 3\n");
    let gw = Gateway::serve(&s, &wh, &cfg, &[]);
    // A body over max_body_bytes.
    let r = gw.post("/v1/chat/completions", &[], &chat(&"x".repeat(2000), false));
    assert_eq!(r.status, 413, "{}", r.text());
    // A head over 64 KiB.
    let big = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(70 << 10)
    );
    assert_eq!(raw(&gw.proxy, big.as_bytes()).0, 431);
    // A body without Content-Length.
    let chunked = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
    assert_eq!(raw(&gw.proxy, chunked.as_bytes()).0, 411);
    // Connections past max_connections are turned away at once.
    // Connections of the refusals above may still be closing: an idle
    // connection counts once no 503 arrives on it.
    let mut idle: Vec<TcpStream> = Vec::new();
    while idle.len() < 3 {
        let mut c = TcpStream::connect(&gw.proxy).unwrap();
        c.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut b = [0u8; 64];
        match c.read(&mut b) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => idle.push(c),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => idle.push(c),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    let r = gw.post("/v1/chat/completions", &[], &chat("hello", false));
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(
        up.seen().is_null(),
        "a refused request reached the upstream"
    );
    drop(idle);
    std::thread::sleep(Duration::from_millis(300));
    let r = gw.post("/v1/chat/completions", &[], &chat("hello", false));
    assert_eq!(r.status, 200, "{}", r.text());
    gw.wait_flushed();
    assert_eq!(gw.admin("/admin/status")["captured_events"], 2);
}

#[test]
fn an_upstream_that_does_not_answer_in_time_is_a_recorded_504() {
    let up = Upstream::start(0);
    let s = Setup::new();
    let wh = s.warehouse("");
    let cfg = s.gateway(&up, "upstream_timeout_seconds = 1\n");
    let gw = Gateway::serve(&s, &wh, &cfg, &[]);
    let r = gw.post("/v1/chat/completions", &[], &chat("hang up", false));
    assert_eq!(
        (r.status, r.code().as_str()),
        (504, "PC-GW-008"),
        "{}",
        r.text()
    );
    gw.wait_flushed();
    let resp = payloads(&s, "http.response");
    assert_eq!(resp.len(), 1, "{resp:?}");
    assert_eq!(resp[0]["payload"]["gateway_error"]["code"], "PC-GW-008");
    assert_eq!(payloads(&s, "http.request").len(), 1);
}

#[test]
fn captures_past_max_capture_bytes_keep_a_marked_prefix() {
    let up = Upstream::start(0);
    let s = Setup::new();
    let wh = s.warehouse("");
    let cfg = s.gateway(&up, "max_capture_bytes = 1024\n");
    let gw = Gateway::serve(&s, &wh, &cfg, &[]);
    let long = "long ".repeat(600);
    // Whole bodies: the client gets everything, the capture a cut prefix.
    let r = gw.post("/v1/chat/completions", &[], &chat(&long, false));
    assert_eq!(r.status, 200);
    let answer = r.text();
    assert!(answer.len() > 3000);
    // Streams: the same, with the kept wire a prefix of what was relayed.
    let r = gw.post("/v1/chat/completions", &[], &chat(&long, true));
    assert_eq!(r.status, 200);
    let relayed = r.text();
    assert!(relayed.ends_with("data: [DONE]\n\n"), "{relayed}");
    gw.wait_flushed();
    for req in payloads(&s, "http.request") {
        let http = &req["payload"]["http"];
        assert_eq!(http["body_truncated"], true, "{http}");
        assert_eq!(http["body_encoding"], "utf8");
        assert!(http["request_body"].as_str().unwrap().len() <= 1024);
    }
    let whole = &payloads(&s, "http.response")[0]["payload"]["http"];
    assert_eq!(whole["body_truncated"], true, "{whole}");
    let kept = whole["response_body"].as_str().unwrap();
    assert!(kept.len() <= 1024 && answer.starts_with(kept), "{kept}");
    let stream = &payloads(&s, "http.response.stream")[0]["payload"];
    assert_eq!(stream["http"]["body_truncated"], true, "{stream}");
    assert_eq!(stream["degraded"], true, "{stream}");
    let wire = stream["http"]["response_body"].as_str().unwrap();
    assert!(!wire.is_empty() && wire.len() <= 1024, "{}", wire.len());
    assert!(relayed.starts_with(wire), "the kept wire is not a prefix");
    assert_eq!(stream["stream_bytes"], relayed.len());
}

#[test]
fn http_1_0_clients_get_unframed_streams_that_end_with_the_connection() {
    let up = Upstream::start(0);
    let s = Setup::new();
    let wh = s.warehouse("");
    let cfg = s.gateway(&up, "");
    let gw = Gateway::serve(&s, &wh, &cfg, &[]);
    let send = |stream: bool| {
        let body = chat("over one point oh", stream).to_string();
        let req = format!(
            "POST /v1/chat/completions HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nx-pchronicle-session-id: old-client\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let (status, out) = raw(&gw.proxy, req.as_bytes());
        assert_eq!(status, 200);
        let text = String::from_utf8(out).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.to_ascii_lowercase().contains("connection: close"),
            "{head}"
        );
        assert!(
            !head.to_ascii_lowercase().contains("transfer-encoding"),
            "{head}"
        );
        (head.to_ascii_lowercase(), body.to_string())
    };
    let (head, stream_body) = send(true);
    assert!(!head.contains("content-length"), "{head}");
    assert!(
        stream_body.starts_with("data: ") && stream_body.ends_with("data: [DONE]\n\n"),
        "{stream_body}"
    );
    let (head, body) = send(false);
    assert!(
        head.contains(&format!("content-length: {}", body.len())),
        "{head}"
    );
    gw.wait_flushed();
    for p in payloads(&s, "http.request") {
        assert_eq!(
            p["payload"]["connection"]["http_version"], "HTTP/1.0",
            "{p}"
        );
        assert_eq!(p["payload"]["connection"]["persistent"], false, "{p}");
    }
    let stream = &payloads(&s, "http.response.stream")[0]["payload"];
    assert_eq!(stream["stream_bytes"], stream_body.len(), "{stream}");
}

#[test]
fn a_stop_while_a_stream_is_relayed_lets_it_finish_and_keeps_it() {
    let up = Upstream::start(0);
    let s = Setup::new();
    let wh = s.warehouse("");
    let cfg = s.gateway(&up, "");
    let gw = Gateway::serve(&s, &wh, &cfg, &[]);
    let addr = gw.proxy.clone();
    let client = std::thread::spawn(move || {
        let body = chat("slow stream please", true).to_string();
        let req = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        raw(&addr, req.as_bytes())
    });
    // The stream takes about 2 s; stop half-way.
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(gw.stop(), Some(0));
    let (status, out) = client.join().unwrap();
    assert_eq!(status, 200);
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.contains("39 ") && text.contains("data: [DONE]"),
        "{text}"
    );
    // After the stop, the stream's events are in events.lance.
    let stream = payloads(&s, "http.response.stream");
    assert_eq!(stream.len(), 1, "{stream:?}");
    let wire = stream[0]["payload"]["http"]["response_body"]
        .as_str()
        .unwrap();
    assert!(wire.ends_with("data: [DONE]\n\n"), "{wire}");
    assert!(stream[0]["payload"].get("client_disconnected").is_none());
    assert!(stream[0]["payload"].get("upstream_error").is_none());
}

/// `serve --config WH --gateway GW`, which must stop with exit 2; its stderr.
fn serve_refused(s: &Setup, wh: &std::path::Path, gw: &std::path::Path) -> String {
    let o = crate::gateway::command(s.path())
        .env("ROUTE_KEY", crate::gateway::ROUTE_KEY)
        .args(["serve", "--config"])
        .arg(wh)
        .arg("--gateway")
        .arg(gw)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    err
}

#[test]
fn damaged_state_and_missing_targets_fail_with_codes() {
    let up = Upstream::start(0);
    let s = Setup::new();
    let cfg = s.gateway(&up, "");
    // A local target that does not exist.
    let missing = s.path().join("missing.toml");
    std::fs::write(
        &missing,
        "[[datasets]]\nname = \"gone\"\nuri = \"./not-there\"\n",
    )
    .unwrap();
    let err = serve_refused(&s, &missing, &cfg);
    assert!(
        err.contains("PC-GW-010") && err.contains("create it first"),
        "{err}"
    );
    assert!(!s.path().join("not-there").exists());

    // A damaged checkpoint stops the start; deleting it replays the log.
    let wh = s.warehouse("");
    let gw = Gateway::serve(&s, &wh, &cfg, &[]);
    assert_eq!(
        gw.post("/v1/chat/completions", &[], &chat("keep me", false))
            .status,
        200
    );
    assert_eq!(gw.stop(), Some(0));
    let checkpoint = s.ds().join(".pchronicle-gateway/checkpoint.json");
    std::fs::write(&checkpoint, b"{\"position\": [garbage").unwrap();
    let err = serve_refused(&s, &wh, &cfg);
    assert!(
        err.contains("PC-GW-011") && err.contains("checkpoint.json"),
        "{err}"
    );
    std::fs::remove_file(&checkpoint).unwrap();
    let gw = Gateway::serve(&s, &wh, &cfg, &[]);
    gw.wait_flushed();
    assert_eq!(gw.stop(), Some(0));
    let rows = query(
        s.path(),
        &s.ds(),
        "SELECT kind, duplicate_count FROM dataset.events ORDER BY seq",
    );
    let kinds: Vec<&str> = rows.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["http.request", "http.response"], "{rows:?}");
    assert!(
        rows.iter()
            .all(|r| r["duplicate_count"].as_i64() == Some(1)),
        "the replayed log is stored again and counted: {rows:?}"
    );
}

#[test]
fn markdown_names_that_must_change_get_a_hash_suffix() {
    let up = Upstream::start(0);
    let s = Setup::new();
    let wh = s.warehouse("");
    let cfg = s.gateway(&up, "");
    let gw = Gateway::serve(&s, &wh, &cfg, &["--gateway-stream-markdown"]);
    for (sid, text) in [
        ("ticket 4711/b", "first"),
        ("ticket_4711_b", "second"),
        ("../../escape", "third"),
    ] {
        let r = gw.post(
            "/v1/chat/completions",
            &[("x-pchronicle-session-id", sid)],
            &chat(text, false),
        );
        assert_eq!(r.status, 200);
    }
    gw.wait_flushed();
    assert_eq!(gw.stop(), Some(0));
    let dir = s.ds().join(".pchronicle-gateway/markdown");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let hash = |sid: &str| blake3::hash(sid.as_bytes()).to_hex()[..12].to_string();
    let mut want = vec![
        format!("______escape-{}.md", hash("../../escape")),
        format!("ticket_4711_b-{}.md", hash("ticket 4711/b")),
        "ticket_4711_b.md".to_string(),
    ];
    want.sort();
    assert_eq!(names, want);
    let changed = std::fs::read_to_string(dir.join(&want[1])).unwrap();
    assert!(changed.contains("first") && !changed.contains("second"));
    let kept = std::fs::read_to_string(dir.join("ticket_4711_b.md")).unwrap();
    assert!(kept.contains("second") && !kept.contains("first"));
    assert!(!s.path().join("escape.md").exists());
}

/// A name other than `localhost` that the hosts file maps to a loopback
/// address, if there is one.
fn loopback_alias() -> Option<String> {
    let hosts = std::fs::read_to_string("/etc/hosts").ok()?;
    hosts.lines().find_map(|l| {
        let mut f = l.split('#').next()?.split_whitespace();
        let addr: std::net::IpAddr = f.next()?.parse().ok()?;
        if !addr.is_loopback() {
            return None;
        }
        f.find(|n| !n.starts_with("localhost") && !n.contains("localhost"))
            .map(str::to_string)
    })
}

#[test]
fn a_host_name_that_resolves_to_a_refused_address_is_not_reached() {
    let Some(name) = loopback_alias() else {
        eprintln!("skipped: /etc/hosts maps no name but localhost to loopback");
        return;
    };
    let up = Upstream::start(0);
    let s = Setup::new();
    let wh = s.warehouse("");
    let cfg = s.gateway(&up, "");
    let base = std::fs::read_to_string(&cfg).unwrap();
    let port = up.addr.port();
    // The name is allowed, but it resolves to loopback, which is not listed.
    let by_name = base
        .replace(&up.url(), &format!("http://{name}:{port}"))
        .replace("[\"127.0.0.1\"]", &format!("[\"{name}\"]"));
    std::fs::write(&cfg, &by_name).unwrap();
    let gw = Gateway::serve(&s, &wh, &cfg, &[]);
    let r = gw.post("/v1/chat/completions", &[], &chat("hello", false));
    assert_eq!(
        (r.status, r.code().as_str()),
        (502, "PC-GW-007"),
        "{}",
        r.text()
    );
    assert!(up.seen().is_null(), "the refused address was reached");
    drop(gw);
    // Listing the address as well lets the same name through.
    std::fs::write(
        &cfg,
        by_name.replace(
            &format!("[\"{name}\"]"),
            &format!("[\"{name}\", \"127.0.0.1\"]"),
        ),
    )
    .unwrap();
    let gw = Gateway::serve(&s, &wh, &cfg, &[]);
    let r = gw.post("/v1/chat/completions", &[], &chat("hello", false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(!up.seen().is_null());
}
