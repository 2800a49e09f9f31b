//! Clean-up on SIGINT and SIGTERM for commands that leave files behind
//! while they run: `import` its lock file, staging directory and spooled
//! stdin; `query --output`, `export` and `find` their temporary files and
//! index directories.
//!
//! Paths are registered while they exist. On the first SIGINT or SIGTERM a
//! thread removes every registered path, says what was cancelled, then
//! exits with 128 + the signal number (130, 143), as a shell reports a
//! process killed by it. The work stops at once: nothing of it runs after
//! the exit. Without the handlers the default action would kill the process
//! and leave the paths behind. Once installed, the handlers stay: a signal
//! after the command has unregistered everything still exits at once.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

/// Paths to remove on an interrupt.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Install the handlers for `command` (once per process; the first name
/// given is the one reported). False when they cannot be installed: an
/// interrupt then kills the process as usual.
pub fn install(command: &'static str) -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
            return false;
        };
        std::thread::Builder::new()
            .name("pchronicle-interrupt".into())
            .spawn(move || {
                if let Some(sig) = signals.forever().next() {
                    // Held until the exit: registration and critical
                    // sections of the command wait, so nothing is added or
                    // published while the paths are removed.
                    let pending = hold();
                    for p in &*pending.0 {
                        remove(p);
                    }
                    let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
                    let removed = match pending.0.len() {
                        0 => String::new(),
                        1 => " (1 temporary path)".into(),
                        n => format!(" ({n} temporary paths)"),
                    };
                    eprintln!(
                        "interrupted ({name}): `{command}` cancelled, the unfinished work was removed{removed}"
                    );
                    std::process::exit(128 + sig);
                }
            })
            .is_ok()
    })
}

/// The registered paths, held: an interrupt that arrives meanwhile waits
/// until this is dropped. Hold it around a step that must not be cut in
/// the middle (publishing), and never across a call that registers or
/// forgets a path by the free functions.
pub struct Held(MutexGuard<'static, Vec<PathBuf>>);

impl Held {
    /// Remove `path` on an interrupt.
    pub fn add(&mut self, path: &Path) {
        self.0.push(path.to_path_buf());
    }

    /// No longer remove `path` (it is gone, or published).
    pub fn forget(&mut self, path: &Path) {
        self.0.retain(|p| p != path);
    }
}

/// Hold the registered paths (see [`Held`]).
pub fn hold() -> Held {
    Held(PENDING.lock().unwrap_or_else(PoisonError::into_inner))
}

/// Remove `path` on an interrupt.
pub fn remove_on_interrupt(path: &Path) {
    hold().add(path);
}

/// Run `settle` (which publishes or removes the registered `path`) with the
/// paths held, then stop removing `path` on an interrupt: an interrupt
/// either comes first and removes it, or waits and finds it settled.
pub fn settle<R>(path: &Path, settle: impl FnOnce() -> R) -> R {
    let mut held = hold();
    let r = settle();
    held.forget(path);
    r
}

/// Remove a file or a directory tree. A directory still being written to by
/// another thread can gain entries while it is removed: try a few times.
fn remove(path: &Path) {
    for _ in 0..5 {
        let r = match std::fs::symlink_metadata(path) {
            Err(_) => return,
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
            Ok(_) => std::fs::remove_file(path),
        };
        if r.is_ok() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
