//! S3 Datasets end to end: a real S3-protocol server (moto) on loopback for
//! reads, pins and listings, and a scripted HTTP server for what moto cannot
//! be made to do (redirects, throttling, stalls, denials, objects changing
//! between discovery and read). Every test allowlists 127.0.0.1 explicitly.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::support::{example_dataset, python};
use pchronicle::s3::{Client, ClientConfig, Endpoint, ObjectPin, Policy, S3Error};

// ------------------------------------------------------------------ moto

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(name)
}

/// The S3 server: `PCHRONICLE_TEST_S3` (started by `.ci/test`), else one
/// started here that lives as long as this process.
fn endpoint() -> &'static str {
    static EP: OnceLock<String> = OnceLock::new();
    EP.get_or_init(|| {
        if let Ok(e) = std::env::var("PCHRONICLE_TEST_S3") {
            if !e.is_empty() {
                return e;
            }
        }
        let mut child = Command::new(python())
            .arg(script("s3_server.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the moto S3 server (PCHRONICLE_PYTHON with moto[server])");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("http://127.0.0.1:"), "moto said {line:?}");
        // The server exits when its stdin closes, i.e. with this process.
        std::mem::forget(child.stdin.take());
        std::mem::forget(child);
        line.trim().to_string()
    })
}

fn admin(args: &[&str]) -> String {
    let out = Command::new(python())
        .arg(script("s3_admin.py"))
        .arg(endpoint())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "s3_admin {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A bucket name unique to this test and process.
fn bucket(tag: &str) -> String {
    format!("pc-{tag}-{}", std::process::id())
}

struct Env {
    dir: tempfile::TempDir,
    endpoint: String,
}

impl Env {
    fn moto() -> Self {
        Self::at(endpoint())
    }

    fn at(endpoint: &str) -> Self {
        Env {
            dir: tempfile::tempdir().unwrap(),
            endpoint: endpoint.to_string(),
        }
    }

    /// The binary with test credentials, the endpoint and nothing else from
    /// the caller's environment (no allowlist: tests pass `--s3-allow`).
    fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_pchronicle"));
        c.current_dir(self.dir.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("PCHRONICLE_SETTINGS", self.dir.path().join("settings.toml"))
            .env("PCHRONICLE_CACHE_DIR", self.dir.path().join("cache"))
            .env("AWS_CONFIG_FILE", self.dir.path().join("no-aws-config"))
            .env(
                "AWS_SHARED_CREDENTIALS_FILE",
                self.dir.path().join("no-aws-credentials"),
            )
            .env("AWS_ENDPOINT_URL", &self.endpoint)
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "pchronicle-test")
            .env("AWS_SECRET_ACCESS_KEY", "pchronicle-test-secret")
            .env("PCHRONICLE_S3_RETRIES", "2")
            .env("NO_COLOR", "1");
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }
}

fn json(o: &Output) -> serde_json::Value {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn assert_code(o: &Output, code: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {e}");
    assert!(e.contains(&format!("[{code}]")), "expected {code}: {e}");
}

const ALLOW: [&str; 2] = ["--s3-allow", "127.0.0.1"];

fn with_allow<'a>(args: &[&'a str]) -> Vec<&'a str> {
    args.iter().copied().chain(ALLOW).collect()
}

/// Run `args` with `DS` standing for the S3 Dataset (allowlisted) and for
/// the local copy; both must succeed; returns (S3 output, local output).
fn both(env: &Env, uri: &str, local: &str, args: &[&str]) -> (Output, Output) {
    let with = |ds: &str| -> Vec<String> {
        args.iter()
            .map(|a| {
                if *a == "DS" {
                    ds.to_string()
                } else {
                    (*a).to_string()
                }
            })
            .collect()
    };
    let remote_args = with(uri);
    let mut remote_args: Vec<&str> = remote_args.iter().map(String::as_str).collect();
    remote_args.extend(ALLOW);
    let remote = env.run(&remote_args);
    let local_args = with(local);
    let local_args: Vec<&str> = local_args.iter().map(String::as_str).collect();
    let here = env.run(&local_args);
    for o in [&remote, &here] {
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(o));
    }
    (remote, here)
}

/// The same stdout from `args` on S3 and locally.
fn same_stdout(env: &Env, uri: &str, local: &str, args: &[&str]) -> Vec<u8> {
    let (remote, here) = both(env, uri, local, args);
    assert_eq!(remote.stdout, here.stdout, "{args:?}");
    remote.stdout
}

/// The same `status` totals for `keys` on S3 and locally.
fn same_totals(env: &Env, uri: &str, local: &str, keys: &[&str]) {
    let (remote, here) = both(env, uri, local, &["status", "DS", "--format", "json"]);
    let (remote, here) = (json(&remote), json(&here));
    for k in keys {
        assert_eq!(remote["totals"][k], here["totals"][k], "{k}");
    }
}

/// Upload the example Dataset under `runs/` of a new bucket.
fn example_bucket(tag: &str, mode: &str) -> String {
    let b = bucket(tag);
    admin(&["bucket", &b, mode]);
    admin(&["upload", &b, "runs/", example_dataset().to_str().unwrap()]);
    b
}

mod gateway;
mod policy;
mod reads;
mod scripted;
mod stores;
