//! The Gateway end to end: a client talks to `pchronicle serve --gateway`
//! over loopback, which forwards to a deterministic upstream (also on
//! loopback) and captures the exchanges into the target Dataset.

#![allow(missing_docs)]

use crate::serve::harness;
pub mod upstream;

mod capture;
mod durability;
mod limits;
mod projection;
mod refusals;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

pub use harness::{command, request, Response};
pub use upstream::Upstream;

/// The route key the Gateway injects (tests check it never leaks).
pub const ROUTE_KEY: &str = "sk-route-key-7f3a9c";
/// A credential a client sends (also never captured).
pub const CLIENT_KEY: &str = "client-secret-b81d44";

/// A test directory with a Dataset `ds/` and config files.
pub struct Setup {
    /// The directory.
    pub dir: tempfile::TempDir,
}

impl Default for Setup {
    fn default() -> Self {
        Self::new()
    }
}

impl Setup {
    pub fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ds")).unwrap();
        Setup { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn ds(&self) -> PathBuf {
        self.dir.path().join("ds")
    }

    /// Write warehouse.toml (one Dataset `live` at ./ds).
    pub fn warehouse(&self, extra: &str) -> PathBuf {
        let p = self.path().join("warehouse.toml");
        std::fs::write(
            &p,
            format!("{extra}\n[[datasets]]\nname = \"live\"\nuri = \"./ds\"\n"),
        )
        .unwrap();
        p
    }

    /// Write gateway.toml routing every model to `up`; `extra` is added at the top.
    pub fn gateway(&self, up: &Upstream, extra: &str) -> PathBuf {
        let p = self.path().join("gateway.toml");
        std::fs::write(
            &p,
            format!(
                r#"listen = "127.0.0.1:0"
admin_listen = "127.0.0.1:0"
agent_id = "test-agent"
flush_interval_ms = 100
{extra}
[network]
allow_hosts = ["127.0.0.1"]
allow_http = true

[[models]]
name = "alias-*"
provider = "openai"
upstream = "{u}"
api_key_env = "ROUTE_KEY"
forward = "real-model"

[[models]]
name = "*"
provider = "openai"
upstream = "{u}"
api_key_env = "ROUTE_KEY"

[[models]]
name = "*"
provider = "anthropic"
upstream = "{u}"
api_key_env = "ROUTE_KEY"
"#,
                u = up.url()
            ),
        )
        .unwrap();
        p
    }
}

/// A running `pchronicle serve --gateway`.
pub struct Gateway {
    pub child: Child,
    pub proxy: String,
    pub admin: String,
    pub warehouse: Option<String>,
    pub stderr: Arc<Mutex<Vec<String>>>,
}

impl Gateway {
    /// Start with `args` after `serve`; waits for the proxy line.
    pub fn start(home: &Path, args: &[&str]) -> Gateway {
        Gateway::start_with_env(home, args, &[])
    }

    /// As [`Gateway::start`], with extra environment variables.
    pub fn start_with_env(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Gateway {
        let mut child = command(home)
            .env("ROUTE_KEY", ROUTE_KEY)
            .envs(env.iter().copied())
            .arg("serve")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        let t = Instant::now();
        let find = |prefix: &str, lines: &Arc<Mutex<Vec<String>>>| -> Option<String> {
            lines.lock().unwrap().iter().find_map(|l| {
                l.strip_prefix(prefix).map(|u| {
                    u.trim_start_matches("http://")
                        .split('/')
                        .next()
                        .unwrap()
                        .to_string()
                })
            })
        };
        loop {
            if let (Some(p), Some(a)) = (
                find("gateway listening: ", &lines),
                find("gateway admin: ", &lines),
            ) {
                return Gateway {
                    child,
                    proxy: p,
                    admin: a,
                    warehouse: find("listening: ", &lines),
                    stderr: lines,
                };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("gateway exited {status}: {:?}", lines.lock().unwrap());
            }
            assert!(
                t.elapsed() < Duration::from_mins(2),
                "gateway did not start: {:?}",
                lines.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `serve --config WH --gateway GW EXTRA…` in the Setup's directory.
    pub fn serve(s: &Setup, wh: &Path, gw: &Path, extra: &[&str]) -> Gateway {
        let mut args = vec![
            "--config",
            wh.to_str().unwrap(),
            "--gateway",
            gw.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        Gateway::start(s.path(), &args)
    }

    /// POST `body` to `path` on the proxy.
    pub fn post(&self, path: &str, headers: &[(&str, &str)], body: &Value) -> Response {
        let mut h = vec![("Content-Type", "application/json")];
        h.extend_from_slice(headers);
        request(
            &self.proxy,
            "POST",
            path,
            &h,
            Some(body.to_string().as_bytes()),
        )
    }

    /// GET an admin route as JSON.
    pub fn admin(&self, path: &str) -> Value {
        let r = request(&self.admin, "GET", path, &[], None);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        r.json()
    }

    /// Wait until everything durable is in events.lance.
    pub fn wait_flushed(&self) {
        let t = Instant::now();
        loop {
            let s = self.admin("/admin/status");
            if s["wal"]["pending"] == Value::Bool(false) && s["in_flight_requests"] == 0 {
                return;
            }
            assert!(t.elapsed() < Duration::from_mins(1), "not flushed: {s}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// SIGKILL.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait for exit; returns the exit code.
    pub fn stop(mut self) -> Option<i32> {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let t = Instant::now();
        loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                return s.code();
            }
            assert!(t.elapsed() < Duration::from_mins(1), "did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `pchronicle query` over the Dataset, as JSON rows.
pub fn query(home: &Path, ds: &Path, sql: &str) -> Vec<Value> {
    let o = command(home)
        .args(["query", "--format", "jsonl"])
        .arg(ds)
        .arg(sql)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Every file under `dir`, concatenated (to search for secrets).
pub fn all_bytes(dir: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(b) = std::fs::read(&p) {
                out.extend_from_slice(&b);
            }
        }
    }
    out
}

pub fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}
