//! `ls`: logical and physical listings, table and JSON.

use crate::cli::common::{json, TestEnv};
use crate::pc_snapshot;

#[test]
fn lists_example_dataset_as_table() {
    let env = TestEnv::new();
    env.example("data");
    pc_snapshot!(env, env.cmd().args(["ls", "data", "--format", "table"]));
}

#[test]
fn json_output_is_stable() {
    let env = TestEnv::new();
    let d = env.example("data");
    let out = env.cmd().args(["ls", "data"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    assert_eq!(
        v["dataset_uri"],
        std::fs::canonicalize(&d).unwrap().display().to_string()
    );
    let sources = v["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 12);
    let formats: Vec<&str> = sources
        .iter()
        .map(|s| s["format"].as_str().unwrap())
        .collect();
    assert_eq!(formats.iter().filter(|f| **f == "atif").count(), 8);
    assert_eq!(formats.iter().filter(|f| **f == "actf").count(), 2);
    assert_eq!(
        formats.iter().filter(|f| **f == "openai-messages").count(),
        2
    );
    for s in sources {
        for key in [
            "source_path",
            "format",
            "kind",
            "snapshot_ref",
            "read_consistency",
            "capabilities",
            "status",
            "size_bytes",
        ] {
            assert!(s.get(key).is_some(), "missing {key} in {s}");
        }
        assert_eq!(s["read_consistency"], "fingerprint");
        assert_eq!(s["status"], "ready");
    }
    // Source order is deterministic (byte order of paths).
    let paths: Vec<&str> = sources
        .iter()
        .map(|s| s["source_path"].as_str().unwrap())
        .collect();
    let mut sorted = paths.clone();
    sorted.sort_unstable();
    assert_eq!(paths, sorted);
    // The snapshot id is on stderr too.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "snapshot_id: {}",
            v["snapshot_id"].as_str().unwrap()
        )),
        "{stderr}"
    );
}

#[test]
fn physical_listing_explains_skips() {
    let env = TestEnv::new();
    env.write("d/a.json", r#"{"schema_version":"ATIF-v1.7","session_id":"s","agent":{"name":"a","version":"1"},"steps":[]}"#);
    env.write("d/package.json", r#"{"name":"not-a-trajectory"}"#);
    env.write("d/notes.txt", "hello");
    env.write("d/.hidden/x.json", "{}");
    env.write("d/empty.jsonl", "");
    std::os::unix::fs::symlink("/etc", env.path().join("d/link")).unwrap();
    pc_snapshot!(
        env,
        env.cmd()
            .args(["ls", "d", "--physical", "--format", "table"])
    );
}

#[test]
fn empty_dataset_exits_one() {
    let env = TestEnv::new();
    std::fs::create_dir(env.path().join("empty")).unwrap();
    pc_snapshot!(env, env.cmd().args(["ls", "empty", "--format", "table"]));
}

#[test]
fn equivalent_spellings_have_one_snapshot_id() {
    let env = TestEnv::new();
    env.example("data");
    let ids: Vec<String> = [
        "data",
        "./data/",
        "data/../data",
        &format!("file://{}/data", env.path().display()),
    ]
    .iter()
    .map(|spelling| {
        let out = env.cmd().args(["ls", spelling]).output().unwrap();
        json(&out)["snapshot_id"].as_str().unwrap().to_string()
    })
    .collect();
    assert!(ids.windows(2).all(|w| w[0] == w[1]), "{ids:?}");
}

#[test]
fn snapshot_id_changes_with_data() {
    let env = TestEnv::new();
    let d = env.example("data");
    let id = |env: &TestEnv| {
        json(&env.cmd().args(["ls", "data"]).output().unwrap())["snapshot_id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let a = id(&env);
    assert_eq!(a, id(&env), "same data, same id");
    std::fs::write(d.join("golang__exp/extra.json"), r#"{"schema_version":"ATIF-v1.7","session_id":"x","agent":{"name":"a","version":"1"},"steps":[]}"#).unwrap();
    let b = id(&env);
    assert_ne!(a, b, "a new Source changes the id");
    std::fs::remove_file(d.join("golang__exp/extra.json")).unwrap();
    assert_eq!(a, id(&env), "removing it restores the id");
}

#[test]
fn discovery_bounds_fail_clearly() {
    let env = TestEnv::new();
    env.example("data");
    pc_snapshot!(env, env.cmd().args(["ls", "data", "--max-files", "3"]));
    pc_snapshot!(env, env.cmd().args(["ls", "data", "--max-entries", "2"]));
}
