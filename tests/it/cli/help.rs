//! `--help` of every command is part of the interface.

use crate::cli::common::TestEnv;
use crate::pc_snapshot;

#[test]
fn top_level_help() {
    let env = TestEnv::new();
    pc_snapshot!(env, env.cmd().arg("--help"));
}

#[test]
fn ls_help() {
    let env = TestEnv::new();
    pc_snapshot!(env, env.cmd().args(["ls", "--help"]));
}

#[test]
fn status_help() {
    let env = TestEnv::new();
    pc_snapshot!(env, env.cmd().args(["status", "--help"]));
}

#[test]
fn default_help() {
    let env = TestEnv::new();
    pc_snapshot!(env, env.cmd().args(["default", "--help"]));
}

#[test]
fn only_implemented_commands_are_listed() {
    let env = TestEnv::new();
    let out = env.cmd().arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let commands: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        commands,
        [
            "default", "ls", "status", "query", "import", "export", "find", "analysis", "serve",
            "help"
        ]
    );
}
