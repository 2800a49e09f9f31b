//! What every suite shares: the built binary, the shipped example Dataset,
//! directory copies, the Python interpreter of the test oracles, and the
//! rule for suites that need something the machine may not have.
//!
//! A plain `cargo test` runs every test whose tools are present. A test that
//! needs Python modules, the S3 test server or a browser and finds them
//! missing returns at once, and the suite prints one `skipped` line on the
//! terminal saying why. `.ci/test` sets `PCHRONICLE_REQUIRE_PYTHON`,
//! `PCHRONICLE_REQUIRE_S3` and `PCHRONICLE_REQUIRE_BROWSER`, so there a
//! missing tool fails the test instead: CI skips nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The `pchronicle` binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_pchronicle")
}

/// The checkout's root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The shipped example Dataset.
pub fn example_dataset() -> PathBuf {
    root().join("examples/dataset")
}

/// `export --from FROM --format FORMAT --output - -q`: a quiet export to
/// stdout.
pub fn export_args<'a>(from: &'a Path, format: &'a str) -> Vec<&'a str> {
    vec![
        "export",
        "--from",
        from.to_str().unwrap(),
        "--format",
        format,
        "--output",
        "-",
        "-q",
    ]
}

/// The `.json` files under `dir`, at any depth, in path order.
pub fn json_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(json_files(&p));
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// Copy a directory tree (files and directories only).
pub fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

/// The interpreter with the test oracles (`bash .ci/setup` makes it).
pub fn python() -> String {
    std::env::var("PCHRONICLE_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Something a suite needs from the machine.
#[derive(Clone, Copy)]
pub enum Need {
    /// The oracle interpreter with these modules importable.
    Python(&'static str),
    /// An S3-protocol server: `PCHRONICLE_TEST_S3`, or moto to start one.
    S3,
}

impl Need {
    fn variable(self) -> &'static str {
        match self {
            Need::Python(_) => "PCHRONICLE_REQUIRE_PYTHON",
            Need::S3 => "PCHRONICLE_REQUIRE_S3",
        }
    }

    fn key(self) -> String {
        match self {
            Need::Python(m) => format!("python:{m}"),
            Need::S3 => "s3".into(),
        }
    }

    /// Why it is missing, or `None` when it is there.
    fn missing(self) -> Option<String> {
        let imports = |modules: &str| {
            let ok = Command::new(python())
                .args(["-c", &format!("import {modules}")])
                .output()
                .is_ok_and(|o| o.status.success());
            (!ok).then(|| {
                format!(
                    "`{} -c 'import {modules}'` failed (run `bash .ci/setup` and set PCHRONICLE_PYTHON)",
                    python()
                )
            })
        };
        match self {
            Need::Python(modules) => imports(modules),
            Need::S3 if std::env::var("PCHRONICLE_TEST_S3").is_ok_and(|e| !e.is_empty()) => None,
            Need::S3 => imports("moto.server, boto3"),
        }
    }
}

/// Whether `need` is met. When it is not: under its `PCHRONICLE_REQUIRE_*`
/// variable the test fails; otherwise `suite` is reported as skipped once,
/// on the terminal (not the captured output), and the caller returns.
pub fn available(suite: &str, need: Need) -> bool {
    static SEEN: OnceLock<Mutex<BTreeMap<String, Option<String>>>> = OnceLock::new();
    static REPORTED: OnceLock<Mutex<BTreeSet<String>>> = OnceLock::new();
    let missing = SEEN
        .get_or_init(Mutex::default)
        .lock()
        .unwrap()
        .entry(need.key())
        .or_insert_with(|| need.missing())
        .clone();
    let Some(why) = missing else {
        return true;
    };
    assert!(
        std::env::var_os(need.variable()).is_none(),
        "{suite}: required by {} but unavailable: {why}",
        need.variable()
    );
    let first = REPORTED
        .get_or_init(Mutex::default)
        .lock()
        .unwrap()
        .insert(suite.to_string());
    if first {
        // Straight to the terminal: the harness captures `eprintln!`.
        let _ = writeln!(std::io::stderr(), "skipped suite `{suite}`: {why}");
    }
    false
}

/// Return from the test unless `$need` is met (see [`available`]).
macro_rules! need {
    ($suite:expr, $need:expr) => {
        if !$crate::support::available($suite, $need) {
            return;
        }
    };
}

/// Run `args` and sample the process's resident high-water mark
/// (`VmHWM`) until it exits; returns the output and the peak in MiB.
pub fn run_measured(home: &Path, args: &[&str]) -> (Output, u64) {
    run_measured_with(home, &[], args)
}

/// [`run_measured`] with `envs` set.
pub fn run_measured_with(home: &Path, envs: &[(&str, &str)], args: &[&str]) -> (Output, u64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pchronicle"))
        .envs(envs.iter().copied())
        .env_remove("PCHRONICLE_SETTINGS")
        .env("HOME", home)
        .env("PCHRONICLE_CACHE_DIR", home.join("cache"))
        .env("NO_COLOR", "1")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let readers = (
        std::thread::spawn(move || {
            let mut b = Vec::new();
            std::io::Read::read_to_end(&mut out, &mut b).unwrap();
            b
        }),
        std::thread::spawn(move || {
            let mut b = Vec::new();
            std::io::Read::read_to_end(&mut err, &mut b).unwrap();
            b
        }),
    );
    let mut peak_kib = 0u64;
    loop {
        if let Ok(text) = std::fs::read_to_string(&status) {
            if let Some(kib) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            {
                peak_kib = peak_kib.max(kib);
            }
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let status = child.wait().unwrap();
    let o = Output {
        status,
        stdout: readers.0.join().unwrap(),
        stderr: readers.1.join().unwrap(),
    };
    (o, peak_kib / 1024)
}
