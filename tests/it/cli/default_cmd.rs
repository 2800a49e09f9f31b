//! `default`: set, print, and use the default Warehouse.

use crate::cli::common::{json, TestEnv};
use crate::pc_snapshot;

#[test]
fn set_creates_and_normalises() {
    let env = TestEnv::new();
    pc_snapshot!(
        env,
        env.cmd()
            .args(["default", "./wh/../warehouse/", "--format", "table"])
    );
    assert!(env.path().join("warehouse").is_dir());
    let settings = std::fs::read_to_string(env.path().join("settings.toml")).unwrap();
    let canon = std::fs::canonicalize(env.path().join("warehouse")).unwrap();
    assert!(
        settings.contains(&format!("default_warehouse = \"{}\"", canon.display())),
        "{settings}"
    );
    pc_snapshot!(env, env.cmd().args(["default", "--format", "table"]));
}

#[test]
fn print_without_setting_exits_one() {
    let env = TestEnv::new();
    pc_snapshot!(env, env.cmd().args(["default", "--format", "table"]));
}

#[test]
fn commands_use_the_default_and_explicit_uri_wins() {
    let env = TestEnv::new();
    env.example("wh");
    env.cmd().args(["default", "wh"]).output().unwrap();
    let out = env.cmd().args(["status"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(json(&out)["totals"]["sources"], 12);
    std::fs::create_dir(env.path().join("other")).unwrap();
    let out = env.cmd().args(["ls", "other"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)["sources"].as_array().unwrap().len(), 0);
}

#[test]
fn settings_flag_and_env_are_honoured() {
    let env = TestEnv::new();
    std::fs::create_dir(env.path().join("a")).unwrap();
    let custom = env.path().join("custom.toml");
    env.cmd()
        .args(["--settings", custom.to_str().unwrap(), "default", "a"])
        .output()
        .unwrap();
    assert!(custom.exists());
    assert!(!env.path().join("settings.toml").exists());
}
