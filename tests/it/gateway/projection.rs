//! Captured sessions projected once per events version and kept in the
//! cache directory: the same rows as projecting in memory, rebuilt for a
//! new version (appends, repeats after a crash), never read for another,
//! and rebuilt when broken.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::gateway::{command, query, Gateway, Setup, Upstream};

/// The questions whose answers must not depend on the projection cache.
const QUESTIONS: [&str; 4] = [
    "SELECT * FROM dataset.steps ORDER BY session_id, step_id",
    "SELECT * FROM dataset.trajectories ORDER BY session_id",
    "SELECT * FROM dataset.tool_calls ORDER BY session_id, step_id, call_index",
    "SELECT * FROM dataset.runs ORDER BY run_id",
];

/// `query` answers and `status` counts, with the cache directory at
/// `cache` (a path that cannot be a directory turns the cache off).
fn answers(s: &Setup, cache: &Path) -> Vec<Value> {
    let run = |args: &[&str]| -> String {
        let o = command(s.path())
            .env("PCHRONICLE_CACHE_DIR", cache)
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    let ds = s.ds();
    let ds = ds.to_str().unwrap();
    let mut out: Vec<Value> = QUESTIONS
        .iter()
        .map(|q| {
            let text = run(&["query", "--format", "jsonl", ds, q, "-q"]);
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Value>()
        })
        .collect();
    let mut status: Value =
        serde_json::from_str(&run(&["status", ds, "--format", "json", "-q"])).unwrap();
    let events = status["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["format"] == "events-lance")
        .cloned()
        .unwrap_or_else(|| panic!("no events store: {status}"));
    out.push(events["counts"].clone());
    let mut summary = events["events"].clone();
    summary["lag_seconds"] = Value::Null;
    out.push(summary);
    status["totals"]["snapshot_id"] = Value::Null;
    out.push(status["totals"].clone());
    out
}

/// The projection directories (`v<version>`) in the cache.
fn projections(cache: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(keys) = std::fs::read_dir(cache.join("projections")) else {
        return out;
    };
    for k in keys.flatten() {
        for v in std::fs::read_dir(k.path()).unwrap().flatten() {
            out.push(v.path());
        }
    }
    out.sort();
    out
}

fn chat(gw: &Gateway, session: &str, text: &str) {
    let r = gw.post(
        "/v1/chat/completions",
        &[("x-pchronicle-session-id", session)],
        &json!({"model": "m", "messages": [{"role": "user", "content": text}]}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn captured_sessions_are_projected_once_per_events_version() {
    let up = Upstream::start(0);
    let s = Setup::new();
    let wh = s.warehouse("");
    let cfg = s.gateway(&up, "");
    let gw = Gateway::serve(&s, &wh, &cfg, &[]);
    for i in 0..3 {
        chat(&gw, "alpha", &format!("first question {i}"));
    }
    chat(&gw, "beta", "another session");
    gw.wait_flushed();
    assert_eq!(gw.stop(), Some(0));

    let cache = s.path().join("cache");
    // A file where the cache directory would be: no cache, projected in
    // memory each time, as before there was one.
    let off = s.path().join("no-cache");
    std::fs::write(&off, "").unwrap();
    let fresh = answers(&s, &off);
    assert!(fresh[0].as_array().unwrap().len() >= 8, "{}", fresh[0]);
    let cached = answers(&s, &cache);
    assert_eq!(cached, fresh);
    let built = projections(&cache);
    assert_eq!(built.len(), 1, "{built:?}");
    assert!(built[0].join("projection.json").is_file());
    // Read again, it is not rebuilt.
    let stamp = std::fs::metadata(built[0].join("projection.json"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(answers(&s, &cache), fresh);
    assert_eq!(projections(&cache), built);
    assert_eq!(
        std::fs::metadata(built[0].join("projection.json"))
            .unwrap()
            .modified()
            .unwrap(),
        stamp
    );

    // New events in an old session and a new one: a new version, a new
    // projection, the same answers as projecting in memory.
    let gw = Gateway::serve(&s, &wh, &cfg, &[]);
    chat(&gw, "alpha", "a later question");
    chat(&gw, "gamma", "a third session");
    gw.wait_flushed();
    assert_eq!(gw.stop(), Some(0));
    let fresh2 = answers(&s, &off);
    assert_ne!(fresh2, fresh);
    assert_eq!(answers(&s, &cache), fresh2);
    let now = projections(&cache);
    assert!(now.len() == 2 && now.contains(&built[0]), "{now:?}");

    // The `events` relation reads its envelope columns without parsing a
    // payload unless `payload_json` is asked for: both give the same rows.
    let cols = "source_path, seq, event_id, timestamp, kind, source, agent_id, run_id, \
                session_id, call_id, trace_id, parent_call_id, model, duplicate_count";
    let envelopes = query(
        s.path(),
        &s.ds(),
        &format!("SELECT {cols} FROM dataset.events ORDER BY seq"),
    );
    let parsed: Vec<Value> = query(
        s.path(),
        &s.ds(),
        &format!("SELECT {cols}, payload_json FROM dataset.events ORDER BY seq"),
    )
    .into_iter()
    .map(|mut r| {
        r.as_object_mut().unwrap().remove("payload_json");
        r
    })
    .collect();
    assert!(envelopes.len() >= 12, "{envelopes:?}");
    assert_eq!(envelopes, parsed);

    // A projection left broken (its manifest lost) is built again.
    let newest = now.iter().find(|p| **p != built[0]).unwrap().clone();
    std::fs::remove_file(newest.join("projection.json")).unwrap();
    assert_eq!(answers(&s, &cache), fresh2);
    assert!(newest.join("projection.json").is_file());
    // Nothing half-built stays behind.
    for k in std::fs::read_dir(cache.join("projections"))
        .unwrap()
        .flatten()
    {
        for e in std::fs::read_dir(k.path()).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(!name.starts_with(".build-"), "{name}");
        }
    }
}

/// Append `calls` chat calls of each of `sessions` (a request and a
/// response each, `seq` going on from `seq`) to the events store of `s`,
/// as the Gateway writes them; `again` stores the events of these `seq`
/// values of a call of s2 a second time (a Gateway restarted after a
/// crash).
fn append_calls(s: &Setup, sessions: &[&str], calls: usize, seq: &mut i64, again: &[i64]) {
    let path = s.ds().join("events.lance");
    let exists = path.exists();
    let mut batch = Vec::new();
    let record = |seq: i64, sid: &str, call: &str, kind: &str| {
        let payload = if kind == "http.request" {
            json!({"protocol": "chat.completions", "http": {"request_body": {"model": "m",
                "messages": [{"role": "user", "content": format!("question {call}")}]}}})
        } else {
            json!({"http": {"status": 200, "response_body": {"model": "m", "choices":
                [{"message": {"role": "assistant",
                  "content": format!("\u{1b}[32mok\u{1b}[0m {call}")}}]}}})
        };
        json!({"seq": seq, "event_id": format!("e{seq}"), "run_id": sid, "session_id": sid,
            "call_id": call, "kind": kind, "source": "gateway", "producer": "test",
            "model": "m", "timestamp_unix_ms": 1_700_000_000_000i64 + seq, "payload": payload})
    };
    for c in 0..calls {
        for sid in sessions {
            let call = format!("{sid}-{}-{c}", *seq);
            for kind in ["http.request", "http.response"] {
                *seq += 1;
                batch.push(record(*seq, sid, &call, kind));
            }
        }
    }
    for &again in again {
        // Events of the call of s2 that follows the first two rounds (its
        // `seq` 21 and 22), stored again as they were.
        let kind = if again % 2 == 1 {
            "http.request"
        } else {
            "http.response"
        };
        batch.push(record(again, "s2", "s2-20-0", kind));
    }
    pchronicle::store::events::append(path.to_str().unwrap(), &batch, exists).unwrap();
}

/// The answers of [`answers`], and the trajectories in the order the
/// projection stores them, with the cache directory at `cache`.
fn stored_order(s: &Setup, cache: &Path) -> (Vec<Value>, String) {
    let o = command(s.path())
        .env("PCHRONICLE_CACHE_DIR", cache)
        .args([
            "query",
            "--format",
            "jsonl",
            s.ds().to_str().unwrap(),
            "SELECT storage_ordinal, session_id, step_count FROM dataset.trajectories",
            "-q",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (answers(s, cache), String::from_utf8(o.stdout).unwrap())
}

/// Whether the projection at `dir` extends another's tables.
fn is_extension(dir: &Path) -> bool {
    dir.join("generations").is_symlink()
}

#[test]
fn an_appended_version_extends_the_projection_of_the_one_before() {
    let s = Setup::new();
    let cache = s.path().join("cache");
    let off = s.path().join("no-cache");
    std::fs::write(&off, "").unwrap();
    let mut seq = 0;
    // Five sessions, then more calls of s2 and s4: the projection orders
    // sessions by their last event, so s0, s1, s3 lead it.
    append_calls(&s, &["s0", "s1", "s2", "s3", "s4"], 2, &mut seq, &[]);
    append_calls(&s, &["s2", "s4"], 1, &mut seq, &[]);
    let first = stored_order(&s, &cache);
    assert_eq!(first, stored_order(&s, &off));
    let built = projections(&cache);
    assert_eq!(built.len(), 1, "{built:?}");
    assert!(!is_extension(&built[0]));

    // One more call of s4 (the last trajectory) and a new session: the
    // first four trajectories stay, the rest are projected again.
    append_calls(&s, &["s4", "s5"], 1, &mut seq, &[]);
    let second = stored_order(&s, &cache);
    assert_eq!(second, stored_order(&s, &off));
    assert_ne!(second, first);
    let order: Vec<Value> = second
        .1
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["session_id"].clone())
        .collect();
    assert_eq!(order, ["s0", "s1", "s3", "s2", "s4", "s5"]);
    let now = projections(&cache);
    let extension = now.iter().find(|p| !built.contains(p)).unwrap().clone();
    assert!(is_extension(&extension), "{now:?}");

    // A Gateway restarted after a crash stores the events of s2's last
    // call again: the copies move s2 after the others.
    append_calls(&s, &[], 0, &mut seq, &[21, 22]);
    let third = stored_order(&s, &cache);
    assert_eq!(third, stored_order(&s, &off));
    assert_ne!(third, second);
    let latest = projections(&cache);
    assert_eq!(latest.len(), 3, "{latest:?}");
    assert!(latest.iter().filter(|p| is_extension(p)).count() == 2);

    // The earlier versions' projections still read as they were.
    for p in &latest {
        let m: Value =
            serde_json::from_slice(&std::fs::read(p.join("projection.json")).unwrap()).unwrap();
        let o = command(s.path())
            .args([
                "query",
                "--format",
                "jsonl",
                p.to_str().unwrap(),
                "SELECT count(*) AS n FROM trajectories",
                "-q",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let n: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(n["n"], m["summary"]["sessions"], "{}", p.display());
    }

    // An extension that stopped half-way (its directory never published)
    // leaves table versions no projection pins: the next version is built
    // whole, with the same answers.
    std::fs::remove_dir_all(latest.iter().max().unwrap()).unwrap();
    append_calls(&s, &["s0"], 1, &mut seq, &[]);
    let fourth = stored_order(&s, &cache);
    assert_eq!(fourth, stored_order(&s, &off));
    let rebuilt = projections(&cache);
    let newest = rebuilt.iter().max().unwrap().clone();
    assert!(!is_extension(&newest), "{rebuilt:?}");

    // An extension whose tables went away (its base removed) is built
    // again, whole, in its place.
    append_calls(&s, &["s6"], 1, &mut seq, &[]);
    let fifth = stored_order(&s, &cache);
    let extension = projections(&cache).into_iter().max().unwrap();
    assert!(is_extension(&extension));
    std::fs::remove_dir_all(&newest).unwrap();
    assert_eq!(stored_order(&s, &cache), fifth);
    assert_eq!(fifth, stored_order(&s, &off));
    assert!(!is_extension(&extension), "rebuilt whole in its place");

    // A call in every session: fewer than half the trajectories would stay,
    // so the new version is built whole rather than extended.
    append_calls(
        &s,
        &["s0", "s1", "s2", "s3", "s4", "s5", "s6"],
        1,
        &mut seq,
        &[],
    );
    let sixth = stored_order(&s, &cache);
    assert_eq!(sixth, stored_order(&s, &off));
    let newest = projections(&cache).into_iter().max().unwrap();
    assert!(!is_extension(&newest));
}
