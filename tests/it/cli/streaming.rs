//! The engine streams: a satisfied LIMIT stops the scan, rows come in a
//! stable order without ORDER BY, and a top-N holds its LIMIT, not its
//! input.

use std::path::Path;

use super::common::TestEnv;

/// A corpus of `runs` files of `steps` steps each; its step count.
fn corpus(dir: &Path, runs: u64, steps: u64) -> u64 {
    pchronicle::corpus::generate(&pchronicle::corpus::Options {
        out: dir.to_path_buf(),
        runs,
        steps,
        seed: 11,
        format: "atif".into(),
        subagent_every: 0,
        files_per_dir: 50,
    })
    .unwrap();
    let env = TestEnv::new();
    let o = env
        .cmd()
        .args([
            "query",
            dir.to_str().unwrap(),
            "SELECT count(*) AS n FROM steps",
        ])
        .args(["--format", "jsonl", "-q"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["n"].as_u64().unwrap()
}

fn query(env: &TestEnv, d: &str, sql: &str, more: &[&str]) -> std::process::Output {
    env.cmd()
        .args(["query", d, sql, "--format", "jsonl", "-q"])
        .args(more)
        .output()
        .unwrap()
}

fn lines(o: &std::process::Output) -> Vec<serde_json::Value> {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_satisfied_limit_stops_the_scan_and_rows_keep_their_order() {
    let env = TestEnv::new();
    let data = env.path().join("data");
    let steps = corpus(&data, 400, 20);
    let d = data.to_str().unwrap();

    // Without ORDER BY, rows come in Source order and in order within a
    // Source, the same on every run.
    let sql = "SELECT source_path, document_id, step_id FROM steps";
    let all = lines(&query(&env, d, sql, &[]));
    assert_eq!(all.len() as u64, steps);
    assert_eq!(all, lines(&query(&env, d, sql, &[])));
    let paths: Vec<&str> = all
        .iter()
        .map(|r| r["source_path"].as_str().unwrap())
        .collect();
    let mut runs = paths.clone();
    runs.dedup();
    let mut sorted = runs.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(runs, sorted, "each Source once, in order");

    // LIMIT: the first rows of the same order, and the scan stopped long
    // before the end (a few rounds of files decoded ahead at most).
    let o = query(
        &env,
        d,
        &format!("{sql} LIMIT 5"),
        &["--stats", "--max-rows", "1000"],
    );
    let got = lines(&o);
    assert_eq!(&got[..5], &all[..5]);
    let scanned = got[5]["stats"]["rows_scanned"].as_u64().unwrap();
    assert!(scanned < steps / 4, "scanned {scanned} of {steps} steps");

    // Past a filter that keeps few rows, too.
    let o = query(
        &env,
        d,
        "SELECT step_id FROM steps WHERE step_id = 3 LIMIT 2",
        &["--stats"],
    );
    let got = lines(&o);
    assert_eq!(got.len(), 3);
    let scanned = got[2]["stats"]["rows_scanned"].as_u64().unwrap();
    assert!(scanned < steps / 4, "scanned {scanned} of {steps} steps");
}

#[test]
fn a_top_n_holds_its_limit_not_its_input() {
    let env = TestEnv::new();
    let data = env.path().join("data");
    let steps = corpus(&data, 1000, 50);
    assert!(steps >= 40_000, "{steps}");
    let d = data.to_str().unwrap();
    // About 60 bytes a row: the whole input is over 2 MB; a top-N of 3
    // holds two batches of rows at most.
    let budget = ["--memory-budget", "1500000"];
    let sorted = "SELECT source_path, step_id FROM steps ORDER BY source_path DESC, step_id";
    let o = query(
        &env,
        d,
        sorted,
        &["--memory-budget", "1500000", "--spill-limit", "0"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("PC-SQL-017"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let top = lines(&query(&env, d, &format!("{sorted} LIMIT 3"), &budget));
    let whole = lines(&query(&env, d, &format!("{sorted} LIMIT 3"), &[]));
    assert_eq!(top, whole);
    assert_eq!(top.len(), 3);
    let last = whole[0]["source_path"].as_str().unwrap().to_string();
    assert!(top.iter().all(|r| r["source_path"] == last.as_str()));
    let ids: Vec<i64> = top.iter().map(|r| r["step_id"].as_i64().unwrap()).collect();
    assert_eq!(ids, vec![1, 2, 3]);
}

#[test]
fn a_sort_past_the_budget_spills_the_same_rows_and_leaves_nothing() {
    let env = TestEnv::new();
    let data = env.path().join("data");
    let steps = corpus(&data, 1000, 40);
    let d = data.to_str().unwrap();
    let tmp = env.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    // What a process killed while spilling leaves: removed by the next
    // query, while another live process's directory stays.
    let dead = tmp.join("pchronicle-spill-4000000000-1f");
    std::fs::create_dir(&dead).unwrap();
    std::fs::write(dead.join("0.arrow"), b"partial").unwrap();
    let live = tmp.join(format!("pchronicle-spill-{}-2e", std::process::id()));
    std::fs::create_dir(&live).unwrap();
    let run = |more: &[&str]| {
        env.cmd()
            .env("TMPDIR", &tmp)
            .args([
                "query",
                d,
                "SELECT source_path, document_id, step_id FROM steps \
                 ORDER BY step_id DESC, source_path, document_id",
                "--format",
                "jsonl",
                "-q",
            ])
            .args(more)
            .output()
            .unwrap()
    };
    let whole = lines(&run(&[]));
    assert_eq!(whole.len() as u64, steps);
    let mut spilled = lines(&run(&["--memory-budget", "2000000", "--stats"]));
    let stats = spilled.pop().unwrap()["stats"].clone();
    assert!(stats["spill_files"].as_u64().unwrap() >= 3, "{stats}");
    assert!(stats["spill_bytes"].as_u64().unwrap() > 100_000, "{stats}");
    assert_eq!(spilled, whole);
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![live.file_name().unwrap().to_owned()]);

    // `sql` past a 2 MB budget, spilling under `tmpdir`.
    let spilling = |tmpdir: &Path, sql: &str| {
        env.cmd()
            .env("TMPDIR", tmpdir)
            .args(["query", d, sql, "--format", "jsonl", "-q"])
            .args(["--memory-budget", "2000000"])
            .output()
            .unwrap()
    };
    // A LIMIT too large to hold spills the same way.
    let o = spilling(
        &tmp,
        "SELECT source_path, document_id, step_id FROM steps \
         ORDER BY step_id DESC, source_path, document_id LIMIT 5 OFFSET 30000",
    );
    assert_eq!(lines(&o), &whole[30_000..30_005]);

    // Past both limits: PC-SQL-017, and still nothing left behind.
    for limit in ["0", "100000"] {
        let o = run(&["--memory-budget", "2000000", "--spill-limit", limit]);
        assert_eq!(o.status.code(), Some(2));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("PC-SQL-017"), "{err}");
        assert_eq!(err.contains("spill limit"), limit != "0", "{err}");
        // Nothing but the error object.
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(out.lines().count(), 1, "{out}");
        assert!(out.starts_with("{\"error\""), "{out}");
        assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 1);
    }

    // Nowhere to spill (TMPDIR is a file): its own code, the path named.
    let not_dir = env.path().join("not-a-dir");
    std::fs::write(&not_dir, b"").unwrap();
    let o = spilling(
        &not_dir,
        "SELECT step_id FROM steps ORDER BY step_id DESC, source_path",
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("PC-SQL-020") && err.contains("not-a-dir"),
        "{err}"
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.lines().count(), 1, "{out}");
}

#[test]
fn a_group_by_past_the_budget_reads_again_into_partitions_with_the_same_groups() {
    let env = TestEnv::new();
    let data = env.path().join("data");
    corpus(&data, 1000, 40);
    let d = data.to_str().unwrap();
    let tmp = env.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let run = |more: &[&str]| {
        env.cmd()
            .env("TMPDIR", &tmp)
            .args([
                "query",
                d,
                "SELECT source_path, step_id, count(*) AS n, min(step_source) AS s, \
                 count(DISTINCT document_id) AS docs FROM steps \
                 GROUP BY source_path, step_id ORDER BY source_path, step_id",
                "--format",
                "jsonl",
                "-q",
                "--max-rows",
                "10000000",
            ])
            .args(more)
            .output()
            .unwrap()
    };
    let whole = lines(&run(&[]));
    assert!(whole.len() > 30_000, "{}", whole.len());
    let mut spilled = lines(&run(&["--memory-budget", "4000000", "--stats"]));
    let stats = spilled.pop().unwrap()["stats"].clone();
    assert!(stats["spill_files"].as_u64().unwrap() >= 32, "{stats}");
    assert_eq!(spilled, whole);
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
    // Without spilling the same budget is not enough.
    let o = run(&["--memory-budget", "4000000", "--spill-limit", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("PC-SQL-017"));
}

/// Import `data` into a store beside it.
fn import(env: &TestEnv, data: &Path) -> String {
    let store = data.with_extension("store");
    let o = env
        .cmd()
        .args(["import", "--from", data.to_str().unwrap(), "--output"])
        .arg(&store)
        .arg("-q")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    store.to_str().unwrap().to_string()
}

#[test]
fn a_store_scan_filters_and_computes_on_several_threads_and_keeps_storage_order() {
    // Enough steps for dozens of Lance batches, so that the scan's workers
    // finish out of order.
    let env = TestEnv::new();
    let data = env.path().join("data");
    let steps = corpus(&data, 300, 100);
    let store = import(&env, &data);
    let s = store.as_str();

    // A filtered scan gives the rows of the unfiltered one that pass, in
    // the same (storage) order.
    let all = lines(&query(
        &env,
        s,
        "SELECT document_id, step_id, extra FROM steps",
        &["--max-rows", "10000000"],
    ));
    assert_eq!(all.len() as u64, steps);
    let high = |r: &serde_json::Value| {
        r["extra"]
            .as_str()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
            .and_then(|v| {
                v["priority"]
                    .as_i64()
                    .or_else(|| v["priority"].as_str()?.parse().ok())
            })
            .is_some_and(|p| p >= 2)
    };
    let want: Vec<_> = all
        .iter()
        .filter(|r| high(r))
        .map(|r| (r["document_id"].clone(), r["step_id"].clone()))
        .collect();
    let got: Vec<_> = lines(&query(
        &env,
        s,
        "SELECT document_id, step_id FROM steps WHERE CAST(extra ->> 'priority' AS BIGINT) >= 2",
        &["--max-rows", "10000000"],
    ))
    .into_iter()
    .map(|r| (r["document_id"].clone(), r["step_id"].clone()))
    .collect();
    assert!(
        want.len() > 1000 && want.len() < all.len(),
        "{}",
        want.len()
    );
    let first_difference = got.iter().zip(&want).position(|(g, w)| g != w);
    assert!(
        got.len() == want.len() && first_difference.is_none(),
        "{} rows against {}; first difference at row {first_difference:?}",
        got.len(),
        want.len()
    );

    // Expressions of a GROUP BY over a scan are computed by the scan's
    // workers; over a subquery they are not. Both give the same groups,
    // within the budget and past it (the aggregate then reads again).
    let direct =
        "SELECT CAST(json_extract_string(metrics, '$.prompt_tokens') AS BIGINT) % 7 AS k, \
                  count(*) AS n, sum(CAST(extra ->> 'priority' AS BIGINT)) AS p, \
                  count(DISTINCT lower(model_name)) AS m \
                  FROM steps WHERE step_source = 'agent' GROUP BY k ORDER BY k";
    let nested = "SELECT k, count(*) AS n, sum(p) AS p, count(DISTINCT m) AS m FROM \
                  (SELECT CAST(json_extract_string(metrics, '$.prompt_tokens') AS BIGINT) % 7 AS k, \
                  CAST(extra ->> 'priority' AS BIGINT) AS p, lower(model_name) AS m \
                  FROM steps WHERE step_source = 'agent') AS t GROUP BY k ORDER BY k";
    let want = lines(&query(&env, s, nested, &[]));
    assert!(want.len() >= 7, "{want:?}");
    assert_eq!(lines(&query(&env, s, direct, &[])), want);
    let explain = lines(&query(&env, s, &format!("EXPLAIN ANALYZE {direct}"), &[]));
    let plan: Vec<&str> = explain.iter().filter_map(|r| r["plan"].as_str()).collect();
    assert!(
        plan.iter()
            .any(|l| l.contains("HashAggregate:") && l.contains("computed in the scan workers")),
        "{plan:#?}"
    );
    // The plan says on how many workers the scan runs: one per core, or as
    // many as RAYON_NUM_THREADS says.
    for workers in ["1 worker;", "3 workers;"] {
        let n = &workers[..1];
        let o = env
            .cmd()
            .env("RAYON_NUM_THREADS", n)
            .args([
                "query",
                s,
                &format!("EXPLAIN {direct}"),
                "--format",
                "jsonl",
                "-q",
            ])
            .output()
            .unwrap();
        let plan = lines(&o);
        assert!(
            plan.iter().any(|r| r["plan"]
                .as_str()
                .is_some_and(|l| l.contains("Scan: dataset.steps")
                    && l.contains(&format!("(streamed on {workers}")))),
            "{plan:#?}"
        );
    }
    // Aggregates that merge are first computed on each batch by the
    // workers, then merged.
    for (direct, nested) in [
        (
            "SELECT model_name, count(*) AS n, count(prompt_tokens) AS c, sum(prompt_tokens) AS p, \
             min(step_id) AS lo, max(timestamp) AS hi, sum(cost_usd) AS usd \
             FROM steps GROUP BY model_name ORDER BY model_name",
            "SELECT m AS model_name, count(*) AS n, count(t) AS c, sum(t) AS p, min(i) AS lo, \
             max(ts) AS hi, sum(u) AS usd FROM (SELECT model_name AS m, prompt_tokens AS t, \
             step_id AS i, timestamp AS ts, cost_usd AS u, 1 AS one FROM steps) AS x \
             GROUP BY m ORDER BY m",
        ),
        (
            "SELECT count(DISTINCT session_id) AS n FROM steps WHERE step_source = 'agent'",
            "SELECT count(DISTINCT s) AS n FROM (SELECT session_id AS s, 1 AS one FROM steps \
             WHERE step_source = 'agent') AS x",
        ),
    ] {
        let want = lines(&query(&env, s, nested, &[]));
        let got = lines(&query(&env, s, direct, &[]));
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            for (k, v) in w.as_object().unwrap() {
                match (v.as_f64(), g[k].as_f64()) {
                    // Sums of doubles add in another order.
                    (Some(a), Some(b)) => assert!((a - b).abs() <= 1e-9 * a.abs().max(1.0), "{k}"),
                    _ => assert_eq!(&g[k], v, "{k}"),
                }
            }
        }
        let explain = lines(&query(&env, s, &format!("EXPLAIN {direct}"), &[]));
        let plan: Vec<&str> = explain.iter().filter_map(|r| r["plan"].as_str()).collect();
        assert!(
            plan.iter().any(|l| l.contains("each batch grouped first in the scan workers")),
            "{plan:#?}"
        );
    }
    let tmp = env.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let grouped = "SELECT document_id, step_id % 1000 + 1 AS k, count(*) AS n, \
                   sum(CAST(json_extract_string(metrics, '$.prompt_tokens') AS BIGINT)) AS p \
                   FROM steps GROUP BY document_id, k ORDER BY document_id, k";
    let whole = lines(&query(&env, s, grouped, &["--max-rows", "10000000"]));
    let o = env
        .cmd()
        .env("TMPDIR", &tmp)
        .args(["query", s, grouped, "--format", "jsonl", "-q", "--stats"])
        .args(["--max-rows", "10000000", "--memory-budget", "4000000"])
        .output()
        .unwrap();
    let mut spilled = lines(&o);
    let stats = spilled.pop().unwrap()["stats"].clone();
    assert!(stats["spill_files"].as_u64().unwrap() > 0, "{stats}");
    assert!(whole.len() as u64 >= steps / 2, "{}", whole.len());
    assert_eq!(spilled, whole);
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
}

#[test]
fn a_join_whose_keys_match_many_rows_streams_its_output() {
    // Every step of a source joined with every other of the same kind:
    // tens of millions of joined rows, tens of thousands per left batch.
    // The probe workers hand back what is past a bound, so memory holds a
    // few batches, not a left batch's whole output.
    let env = TestEnv::new();
    let data = env.path().join("data");
    corpus(&data, 300, 20);
    let d = data.to_str().unwrap();
    let want = lines(&query(
        &env,
        d,
        "SELECT sum(n * n) AS pairs FROM (SELECT step_source, count(*) AS n FROM steps \
         GROUP BY step_source) AS k",
        &[],
    ))[0]["pairs"]
        .as_u64()
        .unwrap();
    assert!(want > 10_000_000, "{want}");
    let (o, peak_mib) = crate::support::run_measured(
        env.path(),
        &[
            "query",
            d,
            "SELECT count(*) AS pairs, max(a.step_id + b.step_id) AS m \
             FROM steps a JOIN steps b ON a.step_source = b.step_source",
            "--format",
            "jsonl",
            "-q",
            "--timeout",
            "600",
        ],
    );
    let got = lines(&o)[0]["pairs"].as_u64().unwrap();
    assert_eq!(got, want);
    assert!(
        peak_mib < 300,
        "joining {want} rows peaked at {peak_mib} MiB"
    );
}
