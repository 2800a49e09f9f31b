//! Crash points for fault-injection tests.
//!
//! `PCHRONICLE_FAILPOINT=NAME` makes the process abort — no destructor, no
//! cleanup, as under `kill -9` — when it reaches the point `NAME`. The
//! points sit on the boundaries that decide what a crash leaves behind (see
//! `docs/reliability.md`). Unset, a point costs one load of a cached value.

use std::sync::OnceLock;

/// Abort here when `PCHRONICLE_FAILPOINT` names `point`.
pub fn hit(point: &str) {
    static ARMED: OnceLock<Option<String>> = OnceLock::new();
    let armed = ARMED.get_or_init(|| std::env::var("PCHRONICLE_FAILPOINT").ok());
    if armed.as_deref() == Some(point) {
        eprintln!("failpoint {point}: aborting");
        std::process::abort();
    }
}
