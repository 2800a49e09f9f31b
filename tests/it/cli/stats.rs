//! `--stats`: what a command did, counted exactly on a generated corpus.

use std::path::Path;

use super::common::{json, TestEnv};

fn corpus(dir: &Path) -> (u64, u64) {
    pchronicle::corpus::generate(&pchronicle::corpus::Options {
        out: dir.to_path_buf(),
        runs: 30,
        steps: 12,
        seed: 5,
        format: "atif".into(),
        subagent_every: 4,
        files_per_dir: 10,
    })
    .unwrap();
    // (files, bytes)
    let mut t = (0, 0);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                t = (t.0 + 1, t.1 + m.len());
            }
        }
    }
    t
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The phases a `stats` object names, and that they add up to its wall time.
fn phases(s: &serde_json::Value) -> Vec<String> {
    let p = s["phases"].as_object().expect("phases");
    let sum: f64 = p.values().map(|v| v["wall_ms"].as_f64().unwrap()).sum();
    let wall = s["wall_ms"].as_f64().unwrap();
    assert!((sum - wall).abs() < 0.1, "phases {sum} vs wall {wall}: {s}");
    assert!(s["peak_rss_bytes"].as_u64().unwrap() > 1 << 20, "{s}");
    p.keys().cloned().collect()
}

#[test]
fn stats_count_what_each_command_read_and_produced() {
    let env = TestEnv::new();
    let data = env.path().join("data");
    let (files, bytes) = corpus(&data);
    let d = data.to_str().unwrap();

    // status: every file read once, whole.
    let o = env
        .cmd()
        .args(["status", d, "--stats", "--format", "json", "-q"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    let steps = v["totals"]["steps"].as_u64().unwrap();
    let s = &v["stats"];
    assert_eq!(s["sources_read"], files, "{s}");
    assert_eq!(s["files_opened"], files, "{s}");
    assert_eq!(s["bytes_read_local"], bytes, "{s}");
    assert_eq!(
        (s["s3_requests"].as_u64(), s["bytes_read_s3"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(s["spill_bytes"], 0);
    let p = phases(s);
    assert!(
        p.contains(&"discover".into()) && p.contains(&"read".into()),
        "{p:?}"
    );
    // Asked for, the stderr line prints even with --quiet.
    assert!(
        stderr(&o).starts_with(&format!(
            "stats: {files} sources, {files} files opened, {bytes} bytes read locally"
        )),
        "{}",
        stderr(&o)
    );

    // query: an unfiltered scan hands every step to the engine; one row out.
    let o = env
        .cmd()
        .args([
            "query",
            d,
            "SELECT count(*) AS n FROM steps",
            "--stats",
            "--format",
            "jsonl",
            "-q",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout.clone()).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["n"], steps);
    let s = &lines[1]["stats"];
    assert_eq!(s["rows_scanned"], steps, "{s}");
    assert_eq!(s["rows_produced"], 1, "{s}");
    assert_eq!(s["bytes_read_local"], bytes, "{s}");
    assert!(phases(s).contains(&"execute".into()));
    // A filter runs after the scan: the same rows are scanned.
    let o = env
        .cmd()
        .args([
            "query",
            d,
            "SELECT step_id FROM steps WHERE step_source = 'user'",
            "--stats",
            "--format",
            "jsonl",
            "-q",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(o.stdout.clone()).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["stats"]["rows_scanned"], steps, "{last}");
    assert_eq!(
        last["stats"]["rows_produced"].as_u64().unwrap() as usize,
        text.lines().count() - 1
    );

    // find: the matches counted, the index's segments searched.
    let o = env
        .cmd()
        .args([
            "find",
            d,
            "--match",
            "timeout",
            "--max-results",
            "100000",
            "--stats",
            "--format",
            "json",
            "-q",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    let s = &v["stats"];
    assert_eq!(
        s["rows_produced"].as_u64().unwrap() as usize,
        v["matches"].as_array().unwrap().len(),
        "{s}"
    );
    assert!(s["index_segments"].as_u64().unwrap() >= 1, "{s}");

    // export: the documents written.
    let o = env
        .cmd()
        .args([
            "export", "--from", d, "--format", "atif", "--output", "-", "--stats", "-q",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // One ATIF record per file came in, one goes out.
    assert!(
        stderr(&o).contains(&format!(", {files} produced")),
        "{}",
        stderr(&o)
    );

    // Without --stats: no line, no object, no extra JSON Lines row.
    let o = env
        .cmd()
        .args(["status", d, "--format", "json", "-q"])
        .output()
        .unwrap();
    assert!(json(&o).get("stats").is_none());
    assert!(!stderr(&o).contains("stats:"), "{}", stderr(&o));
}
