//! kill -9 during streams: nothing acknowledged is lost, repeats are
//! counted, the projection converges.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::gateway::{query, Gateway, Setup, Upstream};

/// Start a slow stream and read its first bytes; the connection stays open.
fn start_slow_stream(gw: &Gateway, session: &str) -> std::net::TcpStream {
    let mut c = std::net::TcpStream::connect(&gw.proxy).unwrap();
    let b = json!({"model": "gpt-test", "stream": true,
        "messages": [{"role": "user", "content": "slow stream now"}]})
    .to_string();
    write!(
        c,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nx-pchronicle-session-id: {session}\r\nContent-Length: {}\r\n\r\n{b}",
        gw.proxy,
        b.len()
    )
    .unwrap();
    let mut first = [0u8; 64];
    let n = c.read(&mut first).unwrap();
    assert!(n > 0);
    c
}

/// The call ids stored with a request and with a response event.
fn stored_calls(s: &Setup) -> (Vec<String>, Vec<String>, i64) {
    let rows = query(
        s.path(),
        &s.ds(),
        "SELECT kind, call_id, duplicate_count FROM dataset.events",
    );
    let mut req = Vec::new();
    let mut resp = Vec::new();
    let mut dups = 0;
    for r in rows {
        let id = r["call_id"].as_str().unwrap().to_string();
        dups += r["duplicate_count"].as_i64().unwrap();
        if r["kind"] == "http.request" {
            req.push(id);
        } else {
            resp.push(id);
        }
    }
    (req, resp, dups)
}

fn steps_of(s: &Setup) -> Vec<Value> {
    query(
        s.path(),
        &s.ds(),
        "SELECT session_id, step_id, step_source AS source, message_value AS text FROM dataset.steps ORDER BY session_id, step_id",
    )
}

#[test]
fn kill_9_loses_no_acknowledged_event_and_repeats_are_counted() {
    let up = Upstream::start(0);
    let s = Setup::new();
    let wh = s.warehouse("");
    let start = |cfg: &std::path::Path| Gateway::serve(&s, &wh, cfg, &[]);
    // Round 1: calls flushed to events.lance; keep that checkpoint.
    let cfg = s.gateway(&up, "");
    let gw = start(&cfg);
    let mut acknowledged: Vec<String> = Vec::new();
    let mut ask = |gw: &Gateway, session: &str, text: &str, stream: bool| {
        let r = gw.post(
            "/v1/chat/completions",
            &[("x-pchronicle-session-id", session)],
            &json!({"model": "gpt-test", "stream": stream,
                "messages": [{"role": "user", "content": text}]}),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        acknowledged.push(r.header("x-pchronicle-call-id").unwrap().to_string());
    };
    ask(&gw, "a", "one", false);
    ask(&gw, "a", "one", true);
    gw.wait_flushed();
    let state = s.ds().join(".pchronicle-gateway");
    let old_checkpoint = std::fs::read(state.join("checkpoint.json")).unwrap();
    ask(&gw, "b", "two", true);
    gw.wait_flushed();
    // A stream in flight when the process dies.
    let open = start_slow_stream(&gw, "cut");
    gw.kill9();
    drop(open);
    // The old checkpoint stands for a crash between an append and its
    // checkpoint: the records after it are appended again on restart.
    std::fs::write(state.join("checkpoint.json"), &old_checkpoint).unwrap();

    // Round 2: the sink is slow (events stay in the WAL), then kill -9 in
    // the middle of several streams, repeatedly.
    let slow = s.path().join("slow.toml");
    std::fs::write(
        &slow,
        std::fs::read_to_string(&cfg)
            .unwrap()
            .replace("flush_interval_ms = 100", "flush_interval_ms = 60000"),
    )
    .unwrap();
    for round in 0..3 {
        let gw = start(&slow);
        ask(&gw, &format!("r{round}"), "before the crash", true);
        ask(&gw, &format!("r{round}"), "and again", false);
        let streams: Vec<_> = (0..3)
            .map(|i| start_slow_stream(&gw, &format!("cut-{round}-{i}")))
            .collect();
        std::thread::sleep(Duration::from_millis(100 + 150 * round as u64));
        gw.kill9();
        drop(streams);
    }
    // Restart normally: the WAL is replayed into events.lance.
    let gw = start(&cfg);
    let st = gw.admin("/admin/status");
    assert!(st["recovered_events"].as_u64().unwrap() > 0, "{st}");
    assert_eq!(
        st["in_flight_calls"], 0,
        "calls cut by the crash are not in flight: {st}"
    );
    gw.wait_flushed();
    let steps_before_stop = steps_of(&s);
    assert_eq!(gw.stop(), Some(0));

    let (req, resp, dups) = stored_calls(&s);
    for id in &acknowledged {
        assert!(req.contains(id), "request of acknowledged call {id} lost");
        assert!(resp.contains(id), "response of acknowledged call {id} lost");
    }
    assert!(
        dups > 0,
        "replaying from the old checkpoint stores repeats, counted"
    );
    // Cut streams: their requests are there; never a response without a request.
    for id in &resp {
        assert!(req.contains(id), "response {id} without its request");
    }
    // Distinct events: every event id once in the relation.
    let ids = query(
        s.path(),
        &s.ds(),
        "SELECT count(*) AS n, count(DISTINCT event_id) AS d FROM dataset.events",
    );
    assert_eq!(ids[0]["n"], ids[0]["d"]);
    // The projection is the same whatever the repeats, and reading twice gives the same answer.
    let steps = steps_of(&s);
    assert_eq!(steps, steps_before_stop);
    assert!(steps
        .iter()
        .any(|r| r["session_id"] == "b" && r["text"] == "echo: two"));
    let a: Vec<&Value> = steps.iter().filter(|r| r["session_id"] == "a").collect();
    assert_eq!(a.len(), 4, "two calls of session a, once each: {a:?}");
    // Status shows freshness.
    let o = crate::gateway::command(s.path())
        .args(["status", "--format", "json"])
        .arg(s.ds())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let ev = &v["sources"][0]["events"];
    assert_eq!(ev["wal_pending_events"], 0, "{v}");
    assert!(ev["duplicates"].as_u64().unwrap() > 0);
    assert!(ev["newest_event_at"].is_string());
}

#[test]
fn a_second_gateway_on_the_same_state_is_refused_and_sigterm_flushes() {
    let up = Upstream::start(0);
    let s = Setup::new();
    let wh = s.warehouse("");
    let cfg = s.gateway(&up, "");
    std::fs::write(
        &cfg,
        std::fs::read_to_string(&cfg)
            .unwrap()
            .replace("flush_interval_ms = 100", "flush_interval_ms = 60000"),
    )
    .unwrap();
    let args = [
        "--config",
        wh.to_str().unwrap(),
        "--gateway",
        cfg.to_str().unwrap(),
    ];
    let gw = Gateway::start(s.path(), &args);
    let o = crate::gateway::command(s.path())
        .env("ROUTE_KEY", crate::gateway::ROUTE_KEY)
        .arg("serve")
        .args(args)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("PC-GW-011") && err.contains("another Gateway"),
        "{err}"
    );
    let r = gw.post(
        "/v1/messages",
        &[],
        &json!({"model": "claude", "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(r.status, 200);
    // Nothing appended yet (60 s interval); SIGTERM appends before exiting.
    let t = Instant::now();
    assert_eq!(gw.stop(), Some(0));
    assert!(t.elapsed() < Duration::from_secs(30));
    let (req, resp, _) = stored_calls(&s);
    assert_eq!((req.len(), resp.len()), (1, 1));
}

#[test]
fn the_sink_compacts_events_lance_without_changing_what_it_holds() {
    let up = Upstream::start(0);
    let s = Setup::new();
    let wh = s.warehouse("");
    let cfg = s.gateway(&up, "compact_interval_seconds = 1");
    let gw = Gateway::serve(&s, &wh, &cfg, &[]);
    for i in 0..6 {
        let r = gw.post(
            "/v1/chat/completions",
            &[("x-pchronicle-session-id", "compact")],
            &json!({"model": "m", "messages": [{"role": "user", "content": format!("q{i}")}]}),
        );
        assert_eq!(r.status, 200);
        gw.wait_flushed();
    }
    let t = Instant::now();
    loop {
        let st = gw.admin("/admin/status");
        if st["sink"]["compactions"].as_u64().unwrap_or(0) >= 1 {
            assert!(st["sink"]["appends"].as_u64().unwrap() >= 2, "{st}");
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "{st}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(gw.stop(), Some(0));
    let fragments = std::fs::read_dir(s.ds().join("events.lance/data"))
        .unwrap()
        .count();
    let rows = query(
        s.path(),
        &s.ds(),
        "SELECT count(*) AS n FROM dataset.events",
    );
    assert_eq!(rows[0]["n"], 12);
    let steps = steps_of(&s);
    assert_eq!(steps.len(), 12, "six questions and six answers");
    assert!(fragments >= 1);
}

#[test]
fn a_crash_between_the_append_and_its_checkpoint_repeats_and_counts() {
    // The process aborts right after its first append to events.lance,
    // before checkpoint.json records it: the restart appends those records
    // again, and they are read once with duplicate_count.
    let up = Upstream::start(0);
    let s = Setup::new();
    let wh = s.warehouse("");
    let cfg = s.gateway(&up, "");
    let mut gw = Gateway::start_with_env(
        s.path(),
        &[
            "--config",
            wh.to_str().unwrap(),
            "--gateway",
            cfg.to_str().unwrap(),
        ],
        &[("PCHRONICLE_FAILPOINT", "gateway-after-append")],
    );
    let r = crate::gateway::request(
        &gw.proxy,
        "POST",
        "/v1/chat/completions",
        &[
            ("Content-Type", "application/json"),
            ("x-pchronicle-session-id", "crash"),
        ],
        Some(
            json!({"model": "m", "messages": [{"role": "user", "content": "before the crash"}]})
                .to_string()
                .as_bytes(),
        ),
    );
    let acknowledged = r.status == 200;
    let t = Instant::now();
    let status = loop {
        if let Some(st) = gw.child.try_wait().unwrap() {
            break st;
        }
        assert!(
            t.elapsed() < Duration::from_mins(1),
            "the failpoint was not hit"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success(), "{status}");
    assert!(
        gw.log().contains("failpoint gateway-after-append"),
        "{}",
        gw.log()
    );
    let gw = Gateway::serve(&s, &wh, &cfg, &[]);
    gw.wait_flushed();
    assert_eq!(gw.stop(), Some(0));
    let (req, resp, dups) = stored_calls(&s);
    assert_eq!(req.len(), 1, "{req:?}");
    assert!(dups >= 1, "the repeated append is not counted");
    if acknowledged {
        assert_eq!(resp, req, "an acknowledged answer was lost");
    }
}
