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
