//! Large exchange files in the explorer: decoded once for the listings and
//! every page, held decoded while unchanged, read again once changed.

use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::serve::harness::{cli, enc, Served};

/// One ATIF trajectory of `n` steps, each with a tool call and its output,
/// about 230 bytes a step (so 24,000 steps pass the 4 MiB a file must have
/// to be kept decoded).
fn write_trajectory(path: &Path, n: usize, tag: &str) -> u64 {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    write!(
        f,
        "{{\"schema_version\":\"ATIF-v1.7\",\"session_id\":\"big\",\"agent\":{{\"name\":\"a\",\"version\":\"1\",\"model_name\":\"m\"}},\"steps\":["
    )
    .unwrap();
    for i in 1..=n {
        let sep = if i > 1 { "," } else { "" };
        if i % 2 == 1 {
            write!(
                f,
                "{sep}{{\"step_id\":{i},\"source\":\"user\",\"message\":\"{tag} step {i}\"}}"
            )
            .unwrap();
        } else {
            write!(
                f,
                "{sep}{{\"step_id\":{i},\"source\":\"agent\",\"message\":\"running ls\",\
                 \"tool_calls\":[{{\"tool_call_id\":\"c{i}\",\"function_name\":\"bash\",\"arguments\":{{\"command\":\"ls -la /app\"}}}}],\
                 \"observation\":{{\"results\":[{{\"source_call_id\":\"c{i}\",\"content\":\"root@host:/app# ls -la\\r\\ntotal 8\\r\\n-rw-r--r-- 1 root root 120 main.py\\r\\n\\u001b[32mok\\u001b[0m {tag} {i}\\r\\n\"}}]}},\
                 \"metrics\":{{\"prompt_tokens\":{i},\"completion_tokens\":7}}}}"
            )
            .unwrap();
        }
    }
    write!(f, "]}}").unwrap();
    drop(f);
    std::fs::metadata(path).unwrap().len()
}

fn steps_count(s: &Served) -> (u64, Value) {
    let r = s.send(
        "POST",
        "/api/v1/query",
        &[("Content-Type", "application/json")],
        Some(br#"{"sql": "SELECT count(*) AS n, sum(prompt_tokens) AS p FROM big.steps"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["stats"]["overlapped"], false, "{v}");
    (v["rows"][0][0].as_u64().unwrap(), v["stats"].clone())
}

/// The explorer's first clicks on a large file (runs list, trajectories
/// list, first and last page, one step, a query) read the file once; the
/// pages equal those the file gives when read afresh; a changed file is read
/// again after a refresh, never answered from the old decode.
#[test]
fn a_large_file_is_decoded_once_until_it_changes() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let file = data.join("big.json");
    let n = 24_000;
    let size = write_trajectory(&file, n, "first");
    assert!(size > 4 << 20, "{size}");
    let s = Served::start(t.path(), "[[datasets]]\nname = \"big\"\nuri = \"data\"\n");

    // The first question reads the file.
    let (count, st) = steps_count(&s);
    assert_eq!(count, n as u64);
    assert_eq!(st["bytes_read_local"], size, "{st}");
    assert_eq!(st["sources_read"], 1, "{st}");

    // Every later one is answered from the decoded file, as the file
    // gives it when read afresh (the CLI keeps nothing): the lists come
    // from rows made while the document was whole, pages from its steps
    // kept as JSON.
    for sql in [
        "SELECT * FROM big.trajectories",
        "SELECT * FROM big.runs",
        "SELECT * FROM big.steps WHERE step_id % 997 = 3 ORDER BY step_id",
        "SELECT * FROM big.tool_calls WHERE step_id % 997 = 4 ORDER BY step_id",
    ] {
        let r = s.get(&format!("/api/v1/query?format=jsonl&sql={}", enc(sql)));
        assert_eq!(r.status, 200, "{}", r.text());
        let theirs = cli(
            t.path(),
            &[
                "query",
                "data",
                &sql.replace("big.", ""),
                "--format",
                "jsonl",
            ],
        );
        assert_eq!(r.text(), theirs, "{sql}");
    }
    let runs = s.json("/api/v1/datasets/big/runs");
    assert_eq!(runs["runs"][0]["step_count"], n);
    let trajs = s.json("/api/v1/datasets/big/trajectories");
    let doc = trajs["trajectories"][0]["document_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        trajs["trajectories"][0]["first_user_message"],
        "first step 1"
    );
    let base = format!("/api/v1/datasets/big/trajectories/{}", enc(&doc));
    let summary = s.json(&base);
    assert_eq!(summary["step_count"], n);
    assert_eq!(summary["tool_call_count"], n / 2);
    let first = s.json(&format!("{base}/steps?limit=100"));
    assert_eq!(first["steps"].as_array().unwrap().len(), 100);
    assert_eq!(first["steps"][0]["message_value"], "first step 1");
    let last = s.json(&format!("{base}/steps?offset={}&limit=4", n - 4));
    let steps = last["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 4);
    // The page's calls are those of its own steps, with their outputs.
    let call = &steps[3]["tool_calls"][0];
    assert_eq!(call["tool_call_id"], format!("c{n}"));
    assert_eq!(call["function_name"], "bash");
    let out = call["output"].to_string();
    assert!(out.contains(&format!("first {n}")), "{out}");
    assert_eq!(steps[2]["tool_calls"].as_array().unwrap().len(), 0);
    let one = s.json(&format!("{base}/steps/{}", n - 1));
    assert_eq!(one["step_id"], n);
    assert_eq!(one["tool_calls"][0]["tool_call_id"], format!("c{n}"));
    let (again, st) = steps_count(&s);
    assert_eq!(again, count);
    assert_eq!(st["bytes_read_local"], 0, "{st}");
    assert_eq!(st["sources_read"], 0, "{st}");

    // A changed file is read again once the server refreshes.
    let before = s.json("/api/v1/catalog")["generation"].clone();
    let size2 = write_trajectory(&file, n + 2000, "second");
    s.signal("HUP");
    let t0 = Instant::now();
    while s.json("/api/v1/catalog")["generation"] == before {
        assert!(t0.elapsed() < Duration::from_mins(1), "no refresh");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (count, st) = steps_count(&s);
    assert_eq!(count, n as u64 + 2000);
    assert_eq!(st["bytes_read_local"], size2, "{st}");
    let first = s.json(&format!("{base}/steps?limit=1"));
    assert_eq!(first["steps"][0]["message_value"], "second step 1");
    assert_eq!(first["total"], n + 2000);
}
