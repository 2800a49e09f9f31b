//! Crash points for fault-injection tests.
//!
//! `PCHRONICLE_FAILPOINT=NAME` makes the process abort — no destructor, no
//! cleanup, as under `kill -9` — when it reaches the point `NAME`. The
//! points sit on the boundaries that decide what a crash leaves behind (see
//! `docs/reliability.md`). Unset, a point costs one load of a cached value.
//! Only builds with the `failpoints` feature (the tests') have them; in the
//! shipped binary [`hit`] does nothing.

/// Abort here when `PCHRONICLE_FAILPOINT` names `point`.
#[cfg(feature = "failpoints")]
pub fn hit(point: &str) {
    use std::sync::OnceLock;
    static ARMED: OnceLock<Option<String>> = OnceLock::new();
    let armed = ARMED.get_or_init(|| std::env::var("PCHRONICLE_FAILPOINT").ok());
    if armed.as_deref() == Some(point) {
        eprintln!("failpoint {point}: aborting");
        std::process::abort();
    }
}

/// Crash points are compiled out of the shipped binary.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn hit(_point: &str) {}
