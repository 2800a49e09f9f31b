//! Tool output in the API: decoded text under the call it answers (or once
//! under its step), the same hits as the CLI on realistic terminal output,
//! and media served only from inside the Dataset.

use std::path::Path;

use serde_json::Value;

use crate::serve::browser::{terminal_doc, PNG};
use crate::serve::harness::{cli, copy_dir, enc, Served};

fn harbor() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/harbor")
}

/// Harbor's golden runs, a generated corpus of terminal-agent output and the
/// screenshot trajectory.
fn start(t: &tempfile::TempDir) -> Served {
    let data = t.path().join("data");
    copy_dir(&harbor(), &data.join("harbor"));
    std::fs::remove_file(data.join("harbor/SOURCES.md")).unwrap();
    pchronicle::corpus::generate(&pchronicle::corpus::Options {
        out: data.join("gen"),
        runs: 24,
        steps: 14,
        seed: 17,
        format: "atif".into(),
        subagent_every: 6,
        files_per_dir: 100,
    })
    .unwrap();
    let outside = t.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    terminal_doc(&data, &outside);
    Served::start(t.path(), "[[datasets]]\nname = \"evals\"\nuri = \"data\"\n")
}

fn keys(v: &Value) -> Vec<(Value, Value, Value)> {
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
}

#[test]
fn find_in_tool_output_matches_the_cli() {
    let t = tempfile::tempdir().unwrap();
    let s = start(&t);
    for q in [
        "Traceback",
        "ModuleNotFoundError",
        "#observation(collected)",
        "#observation(\"New Terminal Output\")",
        "#observation(Hello) AND NOT #observation(sleep)",
        "#observation(ERROR) OR #observation(FAILED)",
        "root AND 超时",
    ] {
        let api = s.json(&format!(
            "/api/v1/datasets/evals/find?q={}&limit=1000",
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
                "1000",
            ],
        );
        let out: Value = serde_json::from_str(&out).unwrap();
        assert!(
            !out["matches"].as_array().unwrap().is_empty(),
            "{q}: no hits in the corpus"
        );
        assert_eq!(keys(&api["matches"]), keys(&out["matches"]), "{q}");
        // The full fields are the decoded text, with the word in it.
        for m in api["matches"].as_array().unwrap() {
            let f = &m["fields"];
            assert!(f.get("observation").is_none(), "{q}: raw JSON in fields");
            if q.starts_with("Traceback") {
                let text = f["observation_text"].as_str().unwrap_or_default();
                // Decoded: a real line break (CRLF in some outputs), not `\n`.
                assert!(
                    text.contains("Traceback (most recent call last):\n")
                        || text.contains("Traceback (most recent call last):\r\n"),
                    "{text}"
                );
            }
        }
    }
}

#[test]
fn results_go_under_their_call_or_once_under_their_step() {
    let t = tempfile::tempdir().unwrap();
    let s = start(&t);
    // terminus-2: multi-line terminal output that names no call.
    let src = "harbor/terminus_2_hello-world-timeout.trajectory.json";
    let runs = s.json(&format!(
        "/api/v1/datasets/evals/trajectories?source_path={}",
        enc(src)
    ));
    let doc = runs["trajectories"][0]["document_id"]
        .as_str()
        .unwrap()
        .to_string();
    let page = s.json(&format!(
        "/api/v1/datasets/evals/trajectories/{}/steps?source={}&limit=100",
        enc(&doc),
        enc(src)
    ));
    let step = page["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|st| st["tool_calls"].as_array().is_some_and(|c| !c.is_empty()))
        .unwrap();
    let out = step["output"].as_array().unwrap();
    assert_eq!(out.len(), 1, "{step}");
    assert!(out[0]["call_id"].is_null());
    let text = out[0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("New Terminal Output:\n\nroot@CONTAINER_ID:/app# echo 'Hello, world!'\n"),
        "{text:?}"
    );
    assert!(step["tool_calls"][0]["output"]
        .as_array()
        .unwrap()
        .is_empty());
    assert!(step["tool_calls"][0]["results_text"].is_null());
    // OpenHands: the result names its call and is shown under it only.
    let src = "harbor/openhands_hello-world.trajectory.json";
    let runs = s.json(&format!(
        "/api/v1/datasets/evals/trajectories?source_path={}",
        enc(src)
    ));
    let doc = runs["trajectories"][0]["document_id"]
        .as_str()
        .unwrap()
        .to_string();
    let page = s.json(&format!(
        "/api/v1/datasets/evals/trajectories/{}/steps?source={}&limit=100",
        enc(&doc),
        enc(src)
    ));
    let linked: Vec<&Value> = page["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|st| st["tool_calls"].as_array().unwrap().iter())
        .filter(|c| !c["output"].as_array().unwrap().is_empty())
        .collect();
    assert!(!linked.is_empty());
    for c in &linked {
        let o = &c["output"][0];
        assert_eq!(o["call_id"], c["tool_call_id"]);
        assert_eq!(o["text"], c["results_text"]);
    }
    for st in page["steps"].as_array().unwrap() {
        assert!(st["output"].as_array().unwrap().is_empty(), "{st}");
    }
}

#[test]
fn long_output_is_cut_to_head_and_tail_in_pages_only() {
    let t = tempfile::tempdir().unwrap();
    let s = start(&t);
    let base = "/api/v1/datasets/evals/trajectories/term-session";
    let page = s.json(&format!("{base}/steps?source=shots%2Fterm.json&limit=10"));
    let e = &page["steps"][2]["output"][0];
    assert_eq!(e["cut"], true, "{e}");
    assert_eq!(e["lines"], 120);
    assert!(e["text"].as_str().unwrap().starts_with("row 0 of"));
    assert!(e["tail"]
        .as_str()
        .unwrap()
        .ends_with("row 119 of the long output\n"));
    let full = s.json(&format!("{base}/steps/2?source=shots%2Fterm.json"));
    let e = &full["output"][0];
    assert_eq!(e["cut"], false);
    assert_eq!(e["text"].as_str().unwrap().lines().count(), 120);
    // ANSI and CRLF are kept in the decoded text (the explorer renders them).
    let first = &page["steps"][1]["tool_calls"][0]["output"][0]["text"];
    assert!(first.as_str().unwrap().contains("\u{1b}[31mError\u{1b}[0m"));
}

#[test]
fn media_are_served_only_from_inside_the_dataset() {
    let t = tempfile::tempdir().unwrap();
    let s = start(&t);
    let media = |source: &str, path: &str| {
        s.get(&format!(
            "/api/v1/datasets/evals/media?source={}&path={}",
            enc(source),
            enc(path)
        ))
    };
    let r = media("shots/term.json", "images/inside.png");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("image/png"));
    assert_eq!(r.body, PNG);
    // The step names both screenshots.
    let full =
        s.json("/api/v1/datasets/evals/trajectories/term-session/steps/3?source=shots%2Fterm.json");
    let m = &full["tool_calls"][0]["output"][0]["media"];
    assert_eq!(m[0]["path"], "images/inside.png");
    assert_eq!(m[1]["label"], "[image: images/outside.png]");
    for (source, path, status) in [
        ("shots/term.json", "images/outside.png", 403), // a symlink out of the Dataset
        ("shots/term.json", "../outside/secret.png", 403),
        ("shots/term.json", "/etc/passwd", 403),
        ("shots/term.json", "images/./inside.png", 403),
        ("shots/term.json", "term.json", 403), // not an image
        ("shots/term.json", "images/missing.png", 404),
        ("no/such/source.json", "images/inside.png", 404),
    ] {
        let r = media(source, path);
        assert_eq!(r.status, status, "{source} {path}: {}", r.text());
        if status == 403 {
            assert_eq!(r.code(), "PC-WEB-020", "{path}");
        }
    }
    let r = s.get("/api/v1/datasets/evals/media?source=shots%2Fterm.json");
    assert_eq!(r.status, 403);
}
