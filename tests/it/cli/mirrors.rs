//! A store names the typed columns that mirror a JSON member on every row
//! (`store::mirrors`), and a query over such stores reads `->>` and
//! `json_extract_string` of that member from the typed column. The answers
//! must be those of the same query over the exchange files, where the JSON
//! is parsed, whether a store names the mirror or not.

use super::common::TestEnv;
use serde_json::Value;
use std::path::Path;

const QUERIES: [&str; 3] = [
    "SELECT model_name, sum(CAST(json_extract_string(metrics, '$.prompt_tokens') AS BIGINT)) AS p, count(metrics ->> 'cached_tokens') AS c FROM steps GROUP BY model_name ORDER BY model_name",
    "SELECT metrics ->> 'completion_tokens' AS t, count(*) AS n FROM steps WHERE CAST(metrics ->> 'prompt_tokens' AS BIGINT) > 1000 GROUP BY t ORDER BY n DESC, t LIMIT 20",
    "SELECT json_extract_string(metrics, 'prompt_tokens') AS p, metrics ->> '$.cached_tokens' AS c FROM steps ORDER BY p, c LIMIT 40",
];

fn import(env: &TestEnv, from: &Path, out: &str) -> Value {
    env.succeed(&[
        "import",
        "--from",
        from.to_str().unwrap(),
        "--output",
        out,
        "-q",
    ]);
    let current = std::fs::read(env.path().join(out).join("CURRENT")).unwrap();
    serde_json::from_slice::<Value>(&current).unwrap()["committed"]["mirrors"].clone()
}

fn query(env: &TestEnv, dataset: &str, sql: &str) -> String {
    let o = env.succeed(&["query", dataset, sql, "--format", "jsonl", "-q"]);
    String::from_utf8(o.stdout).unwrap()
}

fn explain(env: &TestEnv, dataset: &str, sql: &str) -> String {
    query(env, dataset, &format!("EXPLAIN {sql}"))
}

/// Generated ATIF runs: every `metrics` member is an integer.
fn generated(env: &TestEnv, name: &str) -> std::path::PathBuf {
    let out = env.path().join(name);
    pchronicle::corpus::generate(&pchronicle::corpus::Options {
        out: out.clone(),
        runs: 12,
        steps: 20,
        seed: 5,
        format: "atif".into(),
        subagent_every: 4,
        files_per_dir: 8,
    })
    .unwrap();
    out
}

/// Rename the first `prompt_tokens` member found in `v` to `input_tokens`,
/// as Anthropic's usage names it.
fn rename_first_prompt_tokens(v: &mut Value) -> bool {
    match v {
        Value::Object(m) => {
            if let Some(p) = m.remove("prompt_tokens") {
                m.insert("input_tokens".into(), p);
                return true;
            }
            m.values_mut().any(rename_first_prompt_tokens)
        }
        Value::Array(a) => a.iter_mut().any(rename_first_prompt_tokens),
        _ => false,
    }
}

#[test]
fn json_members_come_from_typed_columns_only_where_every_row_agrees() {
    let env = TestEnv::new();
    let all = [
        "steps.metrics.prompt_tokens",
        "steps.metrics.completion_tokens",
        "steps.metrics.cached_tokens",
    ];

    // Every row agrees: the store names all three, and no JSON is read.
    let gen = generated(&env, "gen");
    assert_eq!(import(&env, &gen, "s-gen"), serde_json::json!(all));
    for sql in QUERIES {
        assert_eq!(query(&env, "s-gen", sql), query(&env, "gen", sql), "{sql}");
        // Output names keep the text of the query; what runs is read
        // from the typed columns.
        let plan = explain(&env, "s-gen", sql);
        let ran: Vec<&str> = plan.lines().filter(|l| !l.contains("Project:")).collect();
        assert!(
            ran.iter()
                .all(|l| !l.contains("json_extract") && !l.contains("->>")),
            "{plan}"
        );
        let scan = ran.iter().find(|l| l.contains("Scan:")).unwrap();
        assert!(
            !scan.contains("metrics"),
            "the scan should not read metrics: {plan}"
        );
        assert!(
            explain(&env, "gen", sql).contains("metrics"),
            "files parse the JSON"
        );
    }

    // One step that counts its prompt as `input_tokens` ends that mirror
    // only: the typed column has the count, `metrics ->> 'prompt_tokens'`
    // has nothing.
    let bad = generated(&env, "bad");
    let file = crate::support::json_files(&bad).into_iter().next().unwrap();
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert!(rename_first_prompt_tokens(&mut doc));
    std::fs::write(&file, serde_json::to_vec(&doc).unwrap()).unwrap();
    assert_eq!(import(&env, &bad, "s-bad"), serde_json::json!(all[1..]));
    for sql in QUERIES {
        assert_eq!(query(&env, "s-bad", sql), query(&env, "bad", sql), "{sql}");
    }
    let plan = explain(&env, "s-bad", QUERIES[0]);
    let agg = plan.lines().find(|l| l.contains("HashAggregate:")).unwrap();
    assert!(
        agg.contains("sum(CAST(json_extract_string(metrics, '$.prompt_tokens') AS BIGINT))")
            && agg.contains("count(CAST(cached_tokens AS TEXT))"),
        "{plan}"
    );

    // Real ACTF runs count tokens as `prompt_tokens_len`: the typed
    // column has them, `metrics ->> 'prompt_tokens'` has not, and only the
    // cached tokens (absent on both sides) mirror.
    let actf = env.path().join("actf");
    std::fs::create_dir_all(&actf).unwrap();
    let persisting = crate::support::example_dataset().join("DeepLink-org__Persisting");
    for name in [
        "make-doom-for-mips_trimmed.actf.json",
        "protein-assembly_trimmed.actf.json",
    ] {
        std::fs::copy(persisting.join(name), actf.join(name)).unwrap();
    }
    assert_eq!(import(&env, &actf, "s-actf"), serde_json::json!([all[2]]));
    for sql in QUERIES {
        assert_eq!(
            query(&env, "s-actf", sql),
            query(&env, "actf", sql),
            "{sql}"
        );
    }
}
