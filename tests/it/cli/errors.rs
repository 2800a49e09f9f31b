//! Every error carries a stable code, on stderr and (in JSON mode) on stdout.

use crate::cli::common::{json, TestEnv};
use crate::pc_snapshot;

#[test]
fn missing_dataset() {
    let env = TestEnv::new();
    pc_snapshot!(env, env.cmd().args(["ls", "nope", "--format", "table"]));
}

#[test]
fn missing_dataset_json_error() {
    let env = TestEnv::new();
    let out = env.cmd().args(["ls", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v = json(&out);
    assert_eq!(v["error"]["code"], "PC-CAT-004");
}

#[test]
fn dataset_is_a_file() {
    let env = TestEnv::new();
    env.write("f.json", "{}");
    pc_snapshot!(
        env,
        env.cmd().args(["status", "f.json", "--format", "table"])
    );
}

#[test]
fn credentials_in_uri_are_refused_and_redacted() {
    let env = TestEnv::new();
    let out = pc_snapshot!(
        env,
        env.cmd().args([
            "ls",
            "s3://AKIAEXAMPLE:topsecret@bucket/p",
            "--format",
            "table"
        ])
    );
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains("topsecret") && !all.contains("AKIAEXAMPLE"));
    pc_snapshot!(
        env,
        env.cmd().args([
            "ls",
            "s3://bucket/p?X-Amz-Signature=abc",
            "--format",
            "table"
        ])
    );
}

#[test]
fn unsupported_scheme() {
    let env = TestEnv::new();
    pc_snapshot!(
        env,
        env.cmd()
            .args(["ls", "http://example.invalid/x", "--format", "table"])
    );
}

#[test]
fn no_dataset_and_no_default() {
    let env = TestEnv::new();
    pc_snapshot!(env, env.cmd().args(["status", "--format", "table"]));
}

#[test]
fn usage_error_has_code() {
    let env = TestEnv::new();
    pc_snapshot!(env, env.cmd().args(["ls", "--format", "yaml"]));
}

#[test]
fn invalid_settings_file() {
    let env = TestEnv::new();
    env.write("settings.toml", "default_warehouse = 3\n");
    pc_snapshot!(env, env.cmd().args(["status", "--format", "table"]));
}

#[test]
fn broken_pipe_exits_quietly() {
    let env = TestEnv::new();
    env.example("data");
    // Close stdout before the command writes: the listing is larger than a pipe read of 1 byte.
    let mut child = env
        .cmd()
        .args(["ls", "data", "--physical"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("error"));
}

#[test]
fn early_errors_have_json_objects_too() {
    let env = TestEnv::new();
    for (args, code) in [
        (vec!["ls", "s3://k:s@bucket/p"], "PC-CAT-003"),
        (vec!["status"], "PC-CLI-002"),
        (vec!["ls", ".", "--max-files", "0"], "PC-CLI-003"),
        (
            vec!["default", "http://x/y", "--format", "json"],
            "PC-CAT-002",
        ),
    ] {
        let out = env.cmd().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(json(&out)["error"]["code"], code, "{args:?}");
    }
}
