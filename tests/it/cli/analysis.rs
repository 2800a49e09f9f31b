//! `analysis`: the fixed reports on the example dataset, and their options.

use crate::cli::common::TestEnv;
use crate::pc_snapshot;

#[test]
fn overview_table() {
    let env = TestEnv::new();
    env.example("ds");
    pc_snapshot!(
        env,
        env.cmd()
            .args(["analysis", "overview", "ds", "--format", "table"])
    );
}

#[test]
fn agents_models_tools_jsonl() {
    let env = TestEnv::new();
    env.example("ds");
    pc_snapshot!(
        env,
        env.cmd()
            .args(["analysis", "agents", "ds", "--format", "jsonl"])
    );
    pc_snapshot!(
        env,
        env.cmd()
            .args(["analysis", "models", "ds", "--format", "jsonl"])
    );
    pc_snapshot!(
        env,
        env.cmd()
            .args(["analysis", "tools", "ds", "--format", "csv"])
    );
}

#[test]
fn limit_and_default_warehouse() {
    let env = TestEnv::new();
    let ds = env.example("ds");
    assert_eq!(
        env.cmd()
            .args(["default", ds.to_str().unwrap()])
            .output()
            .unwrap()
            .status
            .code(),
        Some(0)
    );
    let o = env
        .cmd()
        .args(["analysis", "tools", "--limit", "2", "--format", "jsonl"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 2);
    let o = env
        .cmd()
        .args(["analysis", "tools", "--limit", "0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("PC-CLI-003"));
    let o = env.cmd().args(["analysis", "nope"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}
