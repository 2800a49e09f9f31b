//! Shared helpers: a per-test environment and the `pc_snapshot!` macro.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub use crate::support::{copy_dir, example_dataset};

/// A test environment: a temp dir with its own settings file location.
pub struct TestEnv {
    pub dir: tempfile::TempDir,
}

impl TestEnv {
    pub fn new() -> Self {
        TestEnv {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A command with a clean environment pointing settings into the temp dir.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_pchronicle"));
        c.current_dir(self.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.path())
            .env("PCHRONICLE_SETTINGS", self.path().join("settings.toml"))
            .env("NO_COLOR", "1");
        c
    }

    /// Copy the shipped example dataset into `name` and return its path.
    pub fn example(&self, name: &str) -> PathBuf {
        let dst = self.path().join(name);
        copy_dir(&example_dataset(), &dst);
        dst
    }

    /// Run the binary with `args`; it must exit 0.
    pub fn succeed(&self, args: &[&str]) -> Output {
        let o = self.cmd().args(args).output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        o
    }

    /// Write a file (creating parents) and return its path.
    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        p
    }
}

/// Render an output as the snapshot text.
pub fn render(out: &Output, temp: &Path) -> String {
    let code = out.status.code().unwrap_or(-1);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let text =
        format!("exit_code: {code}\n----- stdout -----\n{stdout}\n----- stderr -----\n{stderr}");
    filter(&text, temp)
}

pub fn filter(text: &str, temp: &Path) -> String {
    let mut s = text.replace(&temp.display().to_string(), "[TEMP]");
    if let Ok(canon) = std::fs::canonicalize(temp) {
        s = s.replace(&canon.display().to_string(), "[TEMP]");
    }
    let rules: &[(&str, &str)] = &[
        (r"\b[0-9a-f]{32}\b", "[SNAPSHOT_ID]"),
        (r"file:size=\d+,mtime=-?\d+,ino=\d+", "[FILE_REF]"),
        (r"pchronicle \d+\.\d+\.\d+", "pchronicle [VERSION]"),
        (r"in \d+\.\d+s\b", "in [SECONDS]"),
        (r"in \d+ ms\b", "in [MS]"),
    ];
    for (re, rep) in rules {
        s = regex::Regex::new(re)
            .unwrap()
            .replace_all(&s, *rep)
            .into_owned();
    }
    s
}

/// Snapshot a command's exit code, stdout and stderr.
#[macro_export]
macro_rules! pc_snapshot {
    ($env:expr, $cmd:expr) => {{
        let out = $cmd.output().expect("run pchronicle");
        let text = $crate::cli::common::render(&out, $env.path());
        insta::assert_snapshot!(text);
        out
    }};
    ($env:expr, $cmd:expr, @$snap:literal) => {{
        let out = $cmd.output().expect("run pchronicle");
        let text = $crate::cli::common::render(&out, $env.path());
        insta::assert_snapshot!(text, @$snap);
        out
    }};
}

/// Parse stdout as JSON.
/// Hidden import leftovers (lock file, staging, spooled input) in `dir`.
pub fn import_leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".pchronicle-"))
        .collect()
}

pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}
