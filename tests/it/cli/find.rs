//! `find`: output contract, identity lookups, refusals and the index cache.

use crate::cli::common::{json, TestEnv};
use crate::pc_snapshot;

fn find(env: &TestEnv, args: &[&str]) -> std::process::Output {
    let mut a = vec!["find"];
    a.extend_from_slice(args);
    env.cmd().args(&a).output().unwrap()
}

#[test]
fn json_output_follows_the_contract() {
    let env = TestEnv::new();
    env.example("ds");
    let o = find(
        &env,
        &[
            "ds",
            "--match",
            "存储",
            "--match",
            "#user(验证)",
            "--format",
            "json",
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = json(&o);
    assert_eq!(
        v["query"]["matches"],
        serde_json::json!(["存储", "#user(验证)"])
    );
    assert_eq!(v["query"]["expression"], "\"存储\" AND #user(\"验证\")");
    assert_eq!(
        v["search"],
        serde_json::json!({"mode": "fts", "scope": "steps", "fts_available": true, "tokenizer": "jieba"})
    );
    assert_eq!(v["snapshot_id"].as_str().unwrap().len(), 32);
    let m = v["matches"].as_array().unwrap();
    assert!(!m.is_empty());
    for hit in m {
        assert_eq!(
            hit["source_path"],
            "DeepLink-org__Persisting/unicode_zh_15.json"
        );
        assert_eq!(hit["step_source"], "user");
        assert!(hit["preview"].as_str().unwrap().contains("存储"));
        for k in [
            "document_id",
            "run_id",
            "session_id",
            "step_id",
            "effective_kind",
            "timestamp",
        ] {
            assert!(hit.get(k).is_some(), "{k} missing in {hit}");
        }
    }
    // stderr carries snapshot id, count and truncation.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("snapshot_id: ") && err.contains("truncated: false"),
        "{err}"
    );
    // Hits are in stable order: the same search twice gives the same list.
    let again = json(&find(
        &env,
        &[
            "ds",
            "--match",
            "存储",
            "--match",
            "#user(验证)",
            "--format",
            "json",
        ],
    ));
    assert_eq!(again["matches"], v["matches"]);
}

#[test]
fn table_output_and_no_match() {
    let env = TestEnv::new();
    env.example("ds");
    let o = find(
        &env,
        &["ds", "--match", "#system(无损存储)", "--format", "table"],
    );
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    for h in [
        "Source",
        "Document ID",
        "Run ID",
        "Session ID",
        "Step ID",
        "Step Source",
        "Kind",
        "Timestamp",
        "Preview",
    ] {
        assert!(text.contains(h), "{h} not in\n{text}");
    }
    pc_snapshot!(env, env.cmd().args(["find", "ds", "--match", "zzzqqq", "--format", "table"]), @r"
    exit_code: 1
    ----- stdout -----
    Source  Document ID  Run ID  Session ID  Step ID  Step Source  Kind  Timestamp  Preview
    (0 matches)

    ----- stderr -----
    snapshot_id: [SNAPSHOT_ID]
    0 matches
    truncated: false
    ");
}

#[test]
fn truncation_is_reported() {
    let env = TestEnv::new();
    env.example("ds");
    let v = json(&find(
        &env,
        &[
            "ds",
            "--match",
            "验证",
            "--max-results",
            "2",
            "--format",
            "json",
        ],
    ));
    assert_eq!(v["truncated"], true);
    assert_eq!(v["matches"].as_array().unwrap().len(), 2);
    let all = json(&find(&env, &["ds", "--match", "验证", "--format", "json"]));
    assert_eq!(all["truncated"], false);
    // The first two of the full list are the truncated list.
    assert_eq!(
        all["matches"].as_array().unwrap()[..2],
        v["matches"].as_array().unwrap()[..]
    );
}

#[test]
fn json_predicates_pick_the_scope() {
    let env = TestEnv::new();
    env.example("ds");
    let v = json(&find(
        &env,
        &["ds", "--match", "$.total_steps >= 1", "--format", "json"],
    ));
    assert_eq!(v["search"]["scope"], "runs");
    assert_eq!(v["search"]["mode"], "json");
    for hit in v["matches"].as_array().unwrap() {
        assert!(
            hit.get("step_id").is_none(),
            "run hits carry no step fields: {hit}"
        );
    }
    let v = json(&find(
        &env,
        &[
            "ds",
            "--match",
            "#json.metrics(\"$.prompt_tokens\") > 0",
            "--format",
            "json",
        ],
    ));
    assert_eq!(
        (v["search"]["scope"].as_str(), v["search"]["mode"].as_str()),
        (Some("steps"), Some("json"))
    );
    assert!(!v["matches"].as_array().unwrap().is_empty());
    // A column the scope does not have is an error, not zero results.
    let o = find(
        &env,
        &[
            "ds",
            "--match",
            "#json.final_metrics(\"$.x\") = 1",
            "--scope",
            "steps",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("PC-FND-002"));
}

#[test]
fn identity_lookups() {
    let env = TestEnv::new();
    env.example("ds");
    let v = json(&find(
        &env,
        &[
            "ds",
            "--match",
            "验证",
            "--max-results",
            "1",
            "--format",
            "json",
        ],
    ));
    let hit = &v["matches"][0];
    let (src, session, step) = (
        hit["source_path"].as_str().unwrap(),
        hit["session_id"].as_str().unwrap(),
        hit["step_id"].as_i64().unwrap().to_string(),
    );
    let w = json(&find(
        &env,
        &[
            "ds",
            "--source",
            src,
            "--session-id",
            session,
            "--step-id",
            &step,
            "--format",
            "json",
        ],
    ));
    assert_eq!(w["search"]["mode"], "identity");
    assert_eq!(w["search"]["scope"], "steps");
    assert_eq!(w["matches"].as_array().unwrap().len(), 1);
    assert_eq!(w["matches"][0], *hit);
    // A session id alone finds the run.
    let r = json(&find(
        &env,
        &["ds", "--session-id", session, "--format", "json"],
    ));
    assert_eq!(r["search"]["scope"], "runs");
    assert_eq!(r["matches"][0]["source_path"], src);
}

#[test]
fn candidate_discovery_hints_at_source() {
    let env = TestEnv::new();
    let ds = env.example("ds");
    // The same file twice: one session id, two Sources.
    let f = ds.join("DeepLink-org__Persisting/unicode_zh_15.json");
    std::fs::copy(&f, ds.join("copy.json")).unwrap();
    let session = serde_json::from_slice::<serde_json::Value>(&std::fs::read(&f).unwrap()).unwrap()
        ["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let o = find(&env, &["ds", "--session-id", &session, "--format", "json"]);
    let v = json(&o);
    assert_eq!(v["matches"].as_array().unwrap().len(), 2);
    assert!(v["hint"].as_str().unwrap().contains("--source"));
    assert!(String::from_utf8_lossy(&o.stderr).contains("hint: "));
    let v = json(&find(
        &env,
        &[
            "ds",
            "--session-id",
            &session,
            "--source",
            "copy.json",
            "--format",
            "json",
        ],
    ));
    assert_eq!(v["matches"].as_array().unwrap().len(), 1);
    assert!(v.get("hint").is_none());
}

#[test]
fn refusals_have_distinct_codes() {
    let env = TestEnv::new();
    env.example("ds");
    let cases: &[(&[&str], &str)] = &[
        (&["--match", "a AND"], "PC-FND-001"),
        (&["--match", "(timeout"], "PC-FND-001"),
        (&["--match", "$.p > abc"], "PC-FND-002"),
        (
            &["--session-id", "s", "--step-id", "1", "--scope", "runs"],
            "PC-FND-002",
        ),
        (&["--step-id", "1", "--match", "x"], "PC-FND-002"),
        (&["--match", "timeout", "--scope", "runs"], "PC-FND-002"),
        (&["--match", "#json.nope(\"$.x\") = 1"], "PC-FND-002"),
        (&["--match", ",;"], "PC-FND-002"),
        (&["--source", "../etc/passwd", "--match", "x"], "PC-CAT-013"),
        (&["--source", "/etc/passwd", "--match", "x"], "PC-CAT-013"),
        (
            &["--source", "file:///etc/passwd", "--match", "x"],
            "PC-CAT-013",
        ),
        (&["--source", "a/./b.json", "--match", "x"], "PC-CAT-013"),
        (&["--source", "nope.json", "--match", "x"], "PC-CAT-014"),
        (&["--max-results", "0", "--match", "x"], "PC-CLI-003"),
        (&["--timeout", "0", "--match", "x"], "PC-CLI-003"),
        (&[], "PC-FND-002"),
        (&["--source", "x.json"], "PC-FND-002"),
    ];
    for (args, code) in cases {
        let mut a = vec!["ds"];
        a.extend_from_slice(args);
        let o = find(&env, &a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("error[{code}]")),
            "{args:?}: expected {code}, got {err}"
        );
    }
    let long = "a".repeat(4097);
    let o = find(&env, &["ds", "--match", &long]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("error[PC-FND-004]"));
    // Parse errors carry the byte position.
    let o = find(&env, &["ds", "--match", "a AND", "--format", "json"]);
    let v = json(&o);
    assert_eq!(v["error"]["code"], "PC-FND-001");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("byte 5"),
        "{v}"
    );
}

#[test]
fn unavailable_full_text_is_never_a_silent_zero() {
    let env = TestEnv::new();
    env.example("ds");
    let o = find(
        &env,
        &[
            "ds",
            "--match",
            "存储",
            "--no-build-index",
            "--format",
            "json",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    let v = json(&o);
    assert_eq!(v["search"]["fts_available"], false);
    assert!(v["search"]["fts_unavailable_reason"]
        .as_str()
        .unwrap()
        .contains("--no-build-index"));
    assert!(String::from_utf8_lossy(&o.stderr).contains("error[PC-FND-003]"));
    // Once built, --no-build-index reuses it.
    assert_eq!(
        find(&env, &["ds", "--match", "存储"]).status.code(),
        Some(0)
    );
    let o = find(
        &env,
        &[
            "ds",
            "--match",
            "存储",
            "--no-build-index",
            "--format",
            "json",
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(json(&o)["search"]["fts_available"], true);
}

#[test]
fn imported_stores_carry_their_own_index() {
    let env = TestEnv::new();
    let ex = crate::cli::common::example_dataset().join("DeepLink-org__Persisting");
    for f in ["unicode_zh_15.json", "multimodal_18.json"] {
        env.write(&format!("zh/{f}"), std::fs::read(ex.join(f)).unwrap());
    }
    let o = env
        .cmd()
        .args(["import", "--from", "zh", "--output", "store"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report = json(&o);
    assert!(
        report["fts_index"]["steps"].as_u64().unwrap() > 0,
        "{report}"
    );
    assert!(env
        .path()
        .join("store/_pchronicle/find-v1/pchronicle-index.json")
        .is_file());
    // find uses it without building anything.
    let o = find(
        &env,
        &[
            "store",
            "--match",
            "存储",
            "--no-build-index",
            "--format",
            "json",
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = json(&o);
    assert_eq!(v["matches"][0]["source_path"], ".");
    assert!(!String::from_utf8_lossy(&o.stderr).contains("indexed "));
    // The same hits as searching the files in place.
    let files = json(&find(&env, &["zh", "--match", "存储", "--format", "json"]));
    let strip = |v: &serde_json::Value| {
        v["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["session_id"].clone(),
                    m["step_id"].clone(),
                    m["preview"].clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    let (mut a, mut b) = (strip(&v), strip(&files));
    a.sort_by_key(|x| x.0.to_string() + &x.1.to_string());
    b.sort_by_key(|x| x.0.to_string() + &x.1.to_string());
    assert_eq!(a, b);
}

#[test]
fn json_predicates_read_large_cells_from_the_document_store() {
    // Cells above the fast-column cap (16 KiB) are evaluated from the stored
    // document; small ones through the column. Both must match alike.
    let env = TestEnv::new();
    let big = "x".repeat(20_000);
    env.write(
        "ds/t.json",
        format!(
            r#"{{"schema_version":"ATIF-v1.6","session_id":"s1","agent":{{"name":"a","version":"1"}},
            "steps":[
              {{"step_id":1,"source":"user","message":"deploy the cache","extra":{{"priority":3,"blob":"{big}"}}}},
              {{"step_id":2,"source":"agent","message":"deploy done","extra":{{"priority":3}}}},
              {{"step_id":3,"source":"agent","message":"deploy later","extra":{{"priority":1,"blob":"{big}"}}}}
            ]}}"#
        ),
    );
    let o = find(
        &env,
        &[
            "ds",
            "--match",
            "deploy AND $.priority >= 2",
            "--format",
            "json",
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = json(&o);
    let ids: Vec<i64> = v["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["step_id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1, 2], "{v}");
    let o = find(
        &env,
        &[
            "ds",
            "--match",
            "deploy AND NOT $.priority = 3",
            "--format",
            "json",
        ],
    );
    let v = json(&o);
    let ids: Vec<i64> = v["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["step_id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [3], "{v}");
}
