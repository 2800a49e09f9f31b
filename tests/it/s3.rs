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

// ------------------------------------------------------- reads via moto

fn same_results_as_local(mode: &str) {
    let b = example_bucket(&format!("same-{mode}"), mode);
    let uri = format!("s3://{b}/runs");
    let local = example_dataset();
    let local = local.to_str().unwrap();
    let env = Env::moto();

    // ls: the same Sources, pinned by object version or ETag.
    let remote = json(&env.run(&with_allow(&["ls", &uri, "--format", "json"])));
    let here = json(&env.run(&["ls", local, "--format", "json"]));
    assert_eq!(remote["dataset_uri"], format!("s3://{b}/runs/"));
    let paths = |v: &serde_json::Value| -> Vec<(String, String, String)> {
        v["sources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["source_path"].as_str().unwrap().to_string(),
                    s["format"].as_str().unwrap().to_string(),
                    s["status"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(paths(&remote), paths(&here));
    for s in remote["sources"].as_array().unwrap() {
        assert_eq!(s["read_consistency"], "conditional");
        let r = s["snapshot_ref"].as_str().unwrap();
        assert!(r.starts_with("s3:etag="), "{r}");
        assert_eq!(r.contains(",version="), mode == "versioned", "{r}");
    }

    // Listed again with unchanged ETags, nothing is read but the listing.
    let again = env.run(&with_allow(&["ls", &uri, "--format", "json"]));
    assert!(
        stderr(&again).contains("S3: 1 request,"),
        "{}",
        stderr(&again)
    );
    assert_eq!(json(&again)["snapshot_id"], remote["snapshot_id"]);

    // status: the same counts.
    same_totals(
        &env,
        &uri,
        local,
        &[
            "sources",
            "ready",
            "error",
            "trajectories",
            "steps",
            "tool_calls",
        ],
    );

    // query: the same rows.
    let sql = "SELECT step_source, count(*) AS n, sum(length(message_value)) AS chars, sum(tool_call_count) AS calls FROM steps GROUP BY 1 ORDER BY 1";
    same_stdout(&env, &uri, local, &["query", "DS", sql, "--format", "csv"]);

    // find: the same hits, Chinese included.
    for q in ["存储", "#system(无损存储)", "error", "file"] {
        let (remote, here) = both(
            &env,
            &uri,
            local,
            &["find", "DS", "--match", q, "--format", "json"],
        );
        let hits = |o: &Output| -> Vec<(String, String)> {
            json(o)["matches"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| {
                    (
                        h["source_path"].to_string(),
                        h["document_id"].to_string() + &h["step_id"].to_string(),
                    )
                })
                .collect()
        };
        assert_eq!(hits(&remote), hits(&here), "{q}");
    }

    // export: the same bytes.
    let src = "DeepLink-org__Persisting/unicode_zh_15.json";
    let bytes = same_stdout(
        &env,
        &uri,
        local,
        &[
            "export", "--from", "DS", "--source", src, "--format", "atif", "--output", "-",
        ],
    );
    assert!(!bytes.is_empty());
}

#[test]
fn unversioned_bucket_reads_like_a_local_directory() {
    need!("s3", crate::support::Need::S3);
    same_results_as_local("unversioned");
}

#[test]
fn versioned_bucket_reads_like_a_local_directory() {
    need!("s3", crate::support::Need::S3);
    same_results_as_local("versioned");
}

#[test]
fn listing_follows_local_discovery_rules() {
    need!("s3", crate::support::Need::S3);
    let b = bucket("rules");
    admin(&["bucket", &b, "unversioned"]);
    let f = example_dataset().join("DeepLink-org__Persisting/unicode_zh_15.json");
    let f = f.to_str().unwrap();
    for key in [
        "d/a.json",
        "d/.staging/b.json",
        "d/sub/c.json",
        "d-old/x.json",
        "d/notes.txt",
        "d/t.lance/data/a.lance",
        "d/events.lance/_versions/1.manifest",
    ] {
        admin(&["put", &b, key, f]);
    }
    let env = Env::moto();
    let v = json(&env.run(&with_allow(&[
        "ls",
        &format!("s3://{b}/d/"),
        "--physical",
        "--format",
        "json",
    ])));
    let entries: Vec<(String, String)> = v["physical"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_string(),
                e["role"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            (".staging/b.json".to_string(), "skipped".to_string()),
            ("a.json".into(), "source".into()),
            ("events.lance/_versions/1.manifest".into(), "member".into()),
            ("notes.txt".into(), "skipped".into()),
            ("sub/c.json".into(), "source".into()),
            ("t.lance/data/a.lance".into(), "skipped".into()),
        ]
    );
    let sources: Vec<(String, String)> = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["source_path"].as_str().unwrap().to_string(),
                s["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        sources,
        [
            ("a.json".to_string(), "ready".to_string()),
            ("events.lance".into(), "ready".into()),
            ("sub/c.json".into(), "ready".into()),
        ]
    );
    // An events store is pinned at the newest manifest its listing shows.
    assert_eq!(v["sources"][1]["format"], "events-lance");
    assert_eq!(v["sources"][1]["snapshot_ref"], "lance:version=1");
    // An empty prefix has no Sources: the same exit as an empty directory.
    let o = env.run(&with_allow(&["ls", &format!("s3://{b}/nothing-here/")]));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}

#[test]
fn missing_bucket_is_a_clear_error() {
    need!("s3", crate::support::Need::S3);
    let env = Env::moto();
    let o = env.run(&with_allow(&["ls", "s3://pc-no-such-bucket-here/x"]));
    assert_code(&o, "PC-S3-011");
}

#[test]
fn missing_credentials_are_a_clear_error() {
    need!("s3", crate::support::Need::S3);
    let env = Env::moto();
    let o = env
        .cmd()
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .args(with_allow(&["ls", "s3://pc-any-bucket/x"]))
        .output()
        .unwrap();
    assert_code(&o, "PC-S3-010");
}

#[test]
fn pins_hold_while_objects_change() {
    need!("s3", crate::support::Need::S3);
    let allow = Policy {
        allow: "127.0.0.1".parse().unwrap(),
        ..Policy::default()
    };
    let config = ClientConfig {
        endpoint: Some(Endpoint::parse(endpoint()).unwrap()),
        region: "us-east-1".into(),
        path_style: true,
        timeout: Duration::from_secs(10),
        retries: 1,
        credentials: Some(("pchronicle-test".into(), "secret".into(), None)),
    };
    let client = Client::new(config, allow).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let v1 = dir.path().join("v1");
    let v2 = dir.path().join("v2");
    std::fs::write(&v1, b"first contents").unwrap();
    std::fs::write(&v2, b"second, longer contents").unwrap();
    for mode in ["versioned", "unversioned"] {
        let b = bucket(&format!("pin-{mode}"));
        admin(&["bucket", &b, mode]);
        admin(&["put", &b, "k.json", v1.to_str().unwrap()]);
        let listed = client.list(&b, "", 100).unwrap();
        assert_eq!(listed.len(), 1);
        let pin = ObjectPin {
            etag: listed[0].etag.clone(),
            version: None,
        };
        let first = client.get_range(&b, "k.json", &pin, 0..5).unwrap();
        assert_eq!(&first.bytes[..], b"first");
        assert_eq!(first.version.is_some(), mode == "versioned");
        let pinned = ObjectPin {
            version: first.version.clone(),
            ..pin.clone()
        };
        // Overwritten: a versioned pin still reads the old bytes; an ETag
        // pin fails instead of mixing contents.
        admin(&["put", &b, "k.json", v2.to_str().unwrap()]);
        match client.get_range(&b, "k.json", &pinned, 6..14) {
            Ok(r) => {
                assert_eq!(mode, "versioned");
                assert_eq!(&r.bytes[..], b"contents");
            }
            Err(e) => {
                assert_eq!(mode, "unversioned");
                assert!(matches!(e, S3Error::Changed { .. }), "{e:?}");
            }
        }
        // Deleted: the unversioned object is gone.
        admin(&["delete", &b, "k.json"]);
        if mode == "unversioned" {
            let e = client.get_range(&b, "k.json", &pin, 0..5).unwrap_err();
            assert!(
                matches!(e, S3Error::Gone { .. } | S3Error::Changed { .. }),
                "{e:?}"
            );
        }
    }
}

#[test]
fn conditional_writes_refuse_stale_writers() {
    need!("s3", crate::support::Need::S3);
    let allow = Policy {
        allow: "127.0.0.1".parse().unwrap(),
        ..Policy::default()
    };
    let config = ClientConfig {
        endpoint: Some(Endpoint::parse(endpoint()).unwrap()),
        region: "us-east-1".into(),
        path_style: true,
        timeout: Duration::from_secs(10),
        retries: 1,
        credentials: Some(("pchronicle-test".into(), "secret".into(), None)),
    };
    let client = Client::new(config, allow).unwrap();
    let b = bucket("cas");
    admin(&["bucket", &b, "unversioned"]);
    use pchronicle::s3::PutMode;
    let e1 = client
        .put(&b, "CURRENT", b"one".to_vec().into(), &PutMode::Create)
        .unwrap();
    let again = client.put(&b, "CURRENT", b"two".to_vec().into(), &PutMode::Create);
    assert!(matches!(again, Err(S3Error::Conflict { .. })), "{again:?}");
    let e2 = client
        .put(
            &b,
            "CURRENT",
            b"two".to_vec().into(),
            &PutMode::Replace(e1.clone()),
        )
        .unwrap();
    assert_ne!(e1, e2);
    let stale = client.put(
        &b,
        "CURRENT",
        b"three".to_vec().into(),
        &PutMode::Replace(e1),
    );
    assert!(matches!(stale, Err(S3Error::Conflict { .. })), "{stale:?}");
}

// ------------------------------------------------ stores and import

#[test]
fn import_to_s3_is_create_only_and_reads_like_a_local_store() {
    need!("s3", crate::support::Need::S3);
    let b = bucket("import");
    admin(&["bucket", &b, "versioned"]);
    let env = Env::moto();
    let input = example_dataset().join("golang__exp");
    let input = input.to_str().unwrap();
    let uri = format!("s3://{b}/stores/golang");
    let local = env.dir.path().join("local-store");
    let local = local.to_str().unwrap();
    let v = json(&env.run(&with_allow(&["import", "--from", input, "--output", &uri])));
    assert_eq!(v["dataset_uri"], format!("{uri}/"));
    json(&env.run(&["import", "--from", input, "--output", local]));

    // The store reads through Lance on S3 exactly as the local one.
    let ls = json(&env.run(&with_allow(&["ls", &uri, "--format", "json"])));
    assert_eq!(ls["sources"][0]["format"], "storyline-lance");
    assert_eq!(ls["sources"][0]["status"], "ready");
    same_totals(
        &env,
        &uri,
        local,
        &[
            "sources",
            "ready",
            "runs",
            "trajectories",
            "steps",
            "tool_calls",
        ],
    );
    let sql = "SELECT step_source, count(*), sum(tool_call_count) FROM steps GROUP BY 1 ORDER BY 1";
    same_stdout(&env, &uri, local, &["query", "DS", sql, "--format", "csv"]);
    let (remote, here) = both(
        &env,
        &uri,
        local,
        &["find", "DS", "--match", "hello", "--format", "json"],
    );
    let count = |o: &Output| json(o)["matches"].as_array().unwrap().len();
    assert_eq!(count(&remote), count(&here));
    same_stdout(
        &env,
        &uri,
        local,
        &[
            "export", "--from", "DS", "--format", "atif", "--output", "-",
        ],
    );

    // Create-only: a second import to the same target is refused.
    let o = env.run(&with_allow(&["import", "--from", input, "--output", &uri]));
    assert_code(&o, "PC-IMP-001");
    // Nothing is left behind: no staging objects, no lock.
    let keys = admin(&["keys", &b]);
    assert!(
        !keys.contains("pchronicle-staging") && !keys.contains("pchronicle-import.lock"),
        "{keys}"
    );
    assert!(keys.lines().any(|k| k == "stores/golang/CURRENT"), "{keys}");

    // A held lock makes another import of that target wait its turn.
    let lock = env.dir.path().join("lock");
    std::fs::write(&lock, b"{}").unwrap();
    admin(&[
        "put",
        &b,
        "stores/.other.pchronicle-import.lock",
        lock.to_str().unwrap(),
    ]);
    let o = env.run(&with_allow(&[
        "import",
        "--from",
        input,
        "--output",
        &format!("s3://{b}/stores/other"),
    ]));
    assert_code(&o, "PC-IMP-002");
    assert!(!admin(&["keys", &b]).contains("stores/other/"));
}

/// A store on S3 whose tool output holds cells above the 64 KiB inline
/// limit: the cells are taken from `objects.lance` through the same client
/// and give the same text, query and export, as the store on local disk.
#[test]
fn large_cells_of_an_s3_store_read_like_local_ones() {
    need!("s3", crate::support::Need::S3);
    let b = bucket("objects");
    admin(&["bucket", &b, "unversioned"]);
    let env = Env::moto();
    let data = env.dir.path().join("data");
    pchronicle::corpus::generate(&pchronicle::corpus::Options {
        out: data.clone(),
        runs: 6,
        steps: 12,
        seed: 5,
        format: "atif".into(),
        subagent_every: 0,
        files_per_dir: 8,
    })
    .unwrap();
    let mut files: Vec<_> = std::fs::read_dir(data.join("part-0000"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    // Two large outputs in one file and one in another: two objects in a
    // batch and objects in more than one batch of a scan.
    for (file, steps) in [(&files[0], &[1, 3][..]), (&files[1], &[2][..])] {
        let mut doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
        for &i in steps {
            let big = format!(
                "{i}: {}超时\n",
                "Traceback line of tool output\n".repeat(4000)
            );
            doc["steps"][i]["observation"] = serde_json::json!({"results": [{"content": big}]});
        }
        std::fs::write(file, serde_json::to_vec(&doc).unwrap()).unwrap();
    }
    let input = data.to_str().unwrap();
    let uri = format!("s3://{b}/stores/big");
    let local = env.dir.path().join("local-store");
    let local = local.to_str().unwrap();
    json(&env.run(&with_allow(&["import", "--from", input, "--output", &uri])));
    json(&env.run(&["import", "--from", input, "--output", local]));
    assert!(
        admin(&["keys", &b]).contains("/objects.lance/"),
        "the large cells were not stored as objects"
    );

    let sql = "SELECT source_path, step_id, length(observation_text) AS n, \
               observation_text LIKE '%超时%' AS hit FROM steps ORDER BY n DESC, source_path, step_id LIMIT 5";
    let out = same_stdout(&env, &uri, local, &["query", "DS", sql, "--format", "csv"]);
    let text = String::from_utf8(out).unwrap();
    let long = text
        .lines()
        .skip(1)
        .filter(|l| l.split(',').nth(2).and_then(|n| n.parse::<usize>().ok()) > Some(65_536))
        .count();
    assert_eq!(long, 3, "{text}");
    same_stdout(
        &env,
        &uri,
        local,
        &[
            "export", "--from", "DS", "--format", "atif", "--output", "-",
        ],
    );
}

#[test]
fn store_pins_follow_the_pointer() {
    need!("s3", crate::support::Need::S3);
    // CURRENT replaced between discovery and read: the pinned snapshot is gone.
    let b = bucket("repoint");
    admin(&["bucket", &b, "unversioned"]);
    let env = Env::moto();
    let input = example_dataset().join("golang__exp");
    let uri = format!("s3://{b}/s");
    json(&env.run(&with_allow(&[
        "import",
        "--from",
        input.to_str().unwrap(),
        "--output",
        &uri,
    ])));
    let pinned = json(&env.run(&with_allow(&["ls", &uri, "--format", "json"])));
    let before = pinned["sources"][0]["snapshot_ref"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(before.starts_with("store:gen-"), "{before}");
    // A different CURRENT (another generation name) makes the store read as
    // changed; a garbled one makes it an error Source.
    let current = admin(&["get", &b, "s/CURRENT"]);
    let changed = current.replace("\"generation\":\"gen-", "\"generation\":\"gen-9");
    assert_ne!(current, changed);
    let f = env.dir.path().join("CURRENT");
    std::fs::write(&f, &changed).unwrap();
    admin(&["put", &b, "s/CURRENT", f.to_str().unwrap()]);
    let after = json(&env.run(&with_allow(&["ls", &uri, "--format", "json"])));
    assert_ne!(
        after["sources"][0]["snapshot_ref"].as_str().unwrap(),
        before
    );
    std::fs::write(&f, b"not json").unwrap();
    admin(&["put", &b, "s/CURRENT", f.to_str().unwrap()]);
    let bad = json(&env.run(&with_allow(&["ls", &uri, "--format", "json"])));
    assert_eq!(bad["sources"][0]["status"], "error");
}

// -------------------------------------------------- outbound policy

#[test]
fn endpoints_off_the_public_internet_need_the_allowlist() {
    for (endpoint, code, words) in [
        ("http://127.0.0.1:9", "PC-S3-004", "loopback"),
        ("http://169.254.169.254", "PC-S3-004", "metadata"),
        ("http://[fd00:ec2::254]", "PC-S3-004", "metadata"),
        ("http://10.20.30.40:9000", "PC-S3-004", "private"),
        ("http://192.168.1.1", "PC-S3-004", "private"),
        ("http://[fd12:3456::1]:9000", "PC-S3-004", "unique local"),
        ("http://localhost:9000", "PC-S3-004", "loopback"),
        (
            "https://AKIAEXAMPLEKEY:hunter2@127.0.0.1:9000",
            "PC-S3-003",
            "credential",
        ),
        (
            "https://s3.example.com/?X-Amz-Signature=abc",
            "PC-S3-003",
            "signed",
        ),
        ("ftp://s3.example.com", "PC-S3-002", "endpoint"),
        ("http://s3.example.com", "PC-S3-005", "HTTP"),
    ] {
        let env = Env::at(endpoint);
        let o = env.run(&["ls", "s3://pc-bucket/x"]);
        assert_code(&o, code);
        let e = stderr(&o);
        assert!(
            e.to_lowercase().contains(&words.to_lowercase()),
            "{endpoint}: {e}"
        );
        assert!(
            !e.contains("hunter2") && !e.contains("AKIAEXAMPLEKEY") && !e.contains("abc"),
            "secret leaked: {e}"
        );
    }
    // A CIDR does not open the metadata address; its exact IP would.
    let env = Env::at("http://169.254.169.254");
    let o = env.run(&["ls", "s3://pc-bucket/x", "--s3-allow", "169.254.0.0/16"]);
    assert_code(&o, "PC-S3-004");
    // Credentials never come from URIs.
    let o = env.run(&["ls", "s3://AKIAEXAMPLEKEY:hunter2@pc-bucket/x"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!stderr(&o).contains("hunter2"), "{}", stderr(&o));
}

#[test]
fn a_host_name_is_checked_when_it_is_resolved() {
    need!("s3", crate::support::Need::S3);
    // `localhost` is allowed by name, and every address it resolves to is
    // checked at connect time against the same allowlist.
    let b = example_bucket("byname", "unversioned");
    let port = endpoint().rsplit(':').next().unwrap().to_string();
    let env = Env::at(&format!("http://localhost:{port}"));
    let o = env.run(&[
        "ls",
        &format!("s3://{b}/runs/"),
        "--s3-allow",
        "localhost",
        "--format",
        "json",
    ]);
    let v = json(&o);
    assert!(!v["sources"].as_array().unwrap().is_empty());
}

// ------------------------------------------- scripted faults on loopback

type Reply = Option<(u16, Vec<(&'static str, String)>, Vec<u8>)>;

/// A one-thread HTTP/1.1 server on 127.0.0.1 answering each request with
/// `reply(method, target, request_number)`; `None` never answers.
struct Scripted {
    url: String,
    hits: Arc<AtomicUsize>,
}

fn scripted(reply: impl Fn(&str, &str, usize) -> Reply + Send + 'static) -> Scripted {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match stream.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            let text = String::from_utf8_lossy(&head).into_owned();
            let mut parts = text.split_whitespace();
            let method = parts.next().unwrap_or("").to_string();
            let target = parts.next().unwrap_or("").to_string();
            let n = counter.fetch_add(1, Ordering::SeqCst);
            match reply(&method, &target, n) {
                None => {
                    std::thread::sleep(Duration::from_secs(30));
                }
                Some((status, headers, body)) => {
                    let mut resp = format!(
                        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                        body.len()
                    );
                    for (k, v) in headers {
                        resp.push_str(&format!("{k}: {v}\r\n"));
                    }
                    resp.push_str("\r\n");
                    let _ = stream.write_all(resp.as_bytes());
                    let _ = stream.write_all(&body);
                }
            }
        }
    });
    Scripted { url, hits }
}

fn listing(keys: &[(&str, usize)]) -> Vec<u8> {
    let mut s = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult><Name>b</Name><Prefix></Prefix><KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>",
    );
    for (k, size) in keys {
        s.push_str(&format!(
            "<Contents><Key>{k}</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified><ETag>&quot;e1&quot;</ETag><Size>{size}</Size><StorageClass>STANDARD</StorageClass></Contents>"
        ));
    }
    s.push_str("</ListBucketResult>");
    s.into_bytes()
}

fn error_body(code: &str) -> Vec<u8> {
    format!("<?xml version=\"1.0\"?><Error><Code>{code}</Code><Message>nope</Message></Error>")
        .into_bytes()
}

const DOC: &str =
    include_str!("../../examples/dataset/DeepLink-org__Persisting/unicode_zh_15.json");

#[test]
fn redirects_are_refused_and_revalidated() {
    let server = scripted(|_, _, _| {
        Some((
            307,
            vec![("Location", "http://10.9.8.7/pc-bucket/?list-type=2".into())],
            Vec::new(),
        ))
    });
    let env = Env::at(&server.url);
    let o = env.run(&with_allow(&["ls", "s3://pc-bucket/x"]));
    assert_code(&o, "PC-S3-006");
    // Following redirects is opt-in, and every hop passes the policy again.
    std::fs::write(
        env.dir.path().join("settings.toml"),
        "s3_follow_redirects = true\n",
    )
    .unwrap();
    let o = env.run(&with_allow(&["ls", "s3://pc-bucket/x"]));
    assert_code(&o, "PC-S3-004");
    assert!(stderr(&o).contains("10.9.8.7"), "{}", stderr(&o));
}

#[test]
fn access_denied_is_not_retried() {
    let server = scripted(|_, _, _| Some((403, vec![], error_body("AccessDenied"))));
    let env = Env::at(&server.url);
    let o = env.run(&with_allow(&["ls", "s3://pc-bucket/x"]));
    assert_code(&o, "PC-S3-012");
    assert_eq!(server.hits.load(Ordering::SeqCst), 1);
}

#[test]
fn throttling_is_retried_then_reported() {
    let server = scripted(|_, _, _| Some((503, vec![], error_body("SlowDown"))));
    let env = Env::at(&server.url);
    let o = env.run(&with_allow(&["ls", "s3://pc-bucket/x"]));
    assert_code(&o, "PC-S3-013");
    assert!(stderr(&o).contains("SlowDown"), "{}", stderr(&o));
    // PCHRONICLE_S3_RETRIES=2: three attempts in all.
    assert_eq!(server.hits.load(Ordering::SeqCst), 3);
}

#[test]
fn throttling_that_clears_is_invisible() {
    let server = scripted(|method, target, n| {
        if n == 0 {
            return Some((503, vec![], error_body("SlowDown")));
        }
        if method == "GET" && target.contains("list-type=2") {
            return Some((200, vec![], listing(&[("x/a.json", DOC.len())])));
        }
        Some((
            206,
            vec![("ETag", "\"e1\"".into())],
            DOC.as_bytes().to_vec(),
        ))
    });
    let env = Env::at(&server.url);
    let v = json(&env.run(&with_allow(&["ls", "s3://pc-bucket/x", "--format", "json"])));
    assert_eq!(v["sources"][0]["source_path"], "a.json");
    assert_eq!(v["sources"][0]["format"], "atif");
}

#[test]
fn a_stalled_server_times_out() {
    let server = scripted(|_, _, _| None);
    let env = Env::at(&server.url);
    let o = env
        .cmd()
        .env("PCHRONICLE_S3_TIMEOUT", "0.5")
        .env("PCHRONICLE_S3_RETRIES", "1")
        .args(with_allow(&["ls", "s3://pc-bucket/x"]))
        .output()
        .unwrap();
    assert_code(&o, "PC-S3-013");
    assert!(stderr(&o).contains("timed out"), "{}", stderr(&o));
}

/// Discovery sees the object; the full read then finds it changed (412) or
/// deleted (404): the command fails, nothing from the object is used.
fn changed_between_listing_and_read(status: u16, words: &str) {
    let reads = AtomicUsize::new(0);
    let server = scripted(move |method, target, _| {
        if method == "GET" && target.contains("list-type=2") {
            return Some((200, vec![], listing(&[("x/a.json", DOC.len())])));
        }
        // The sniff reads the first 64 KiB (the whole document); the next
        // read of the object is the decode.
        if reads.fetch_add(1, Ordering::SeqCst) == 0 {
            Some((
                206,
                vec![("ETag", "\"e1\"".into())],
                DOC.as_bytes().to_vec(),
            ))
        } else {
            Some((status, vec![], error_body("Changed")))
        }
    });
    let env = Env::at(&server.url);
    let o = env.run(&with_allow(&["status", "s3://pc-bucket/x"]));
    assert_code(&o, "PC-CAT-008");
    assert!(stderr(&o).contains(words), "{}", stderr(&o));
}

#[test]
fn an_object_overwritten_mid_read_fails_the_command() {
    changed_between_listing_and_read(412, "a different object");
}

#[test]
fn an_object_deleted_mid_read_fails_the_command() {
    changed_between_listing_and_read(404, "deleted");
}

#[test]
fn credentials_from_the_environment_never_reach_the_output() {
    // Whatever fails — a refusal, a denial, a timeout — the secret key, the
    // session token and the signature stay out of stdout and stderr.
    let secret = "pcSECRETmarker0123456789";
    let token = "pcTOKENmarker0123456789";
    let denied = scripted(|_, _, _| Some((403, vec![], error_body("SignatureDoesNotMatch"))));
    for (endpoint, extra) in [
        (denied.url.as_str(), vec!["--s3-allow", "127.0.0.1"]),
        ("http://10.1.1.1:9000", vec![]),
    ] {
        let env = Env::at(endpoint);
        let o = env
            .cmd()
            .env("AWS_SECRET_ACCESS_KEY", secret)
            .env("AWS_SESSION_TOKEN", token)
            .args(["status", "s3://pc-bucket/x"])
            .args(&extra)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2));
        let all = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
        for needle in [secret, token, "Signature=", "X-Amz-Signature"] {
            assert!(!all.contains(needle), "{needle} leaked: {all}");
        }
    }
}

#[test]
fn a_server_that_ignores_range_is_read_correctly() {
    // Every GET answers 200 with the whole object: the client cuts out the
    // range it asked for.
    let server = scripted(|method, target, _| {
        if method == "GET" && target.contains("list-type=2") {
            return Some((200, vec![], listing(&[("x/a.json", DOC.len())])));
        }
        Some((
            200,
            vec![("ETag", "\"e1\"".into())],
            DOC.as_bytes().to_vec(),
        ))
    });
    let env = Env::at(&server.url);
    let remote = json(&env.run(&with_allow(&[
        "status",
        "s3://pc-bucket/x",
        "--format",
        "json",
    ])));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.json"), DOC).unwrap();
    let here = json(&env.run(&["status", dir.path().to_str().unwrap(), "--format", "json"]));
    for k in ["ready", "trajectories", "steps", "tool_calls"] {
        assert_eq!(remote["totals"][k], here["totals"][k], "{k}");
    }
}

#[test]
fn a_redirect_without_location_is_reported_as_an_s3_error() {
    let server = scripted(|_, _, _| Some((301, vec![], error_body("PermanentRedirect"))));
    let env = Env::at(&server.url);
    let o = env.run(&with_allow(&["ls", "s3://pc-bucket/x"]));
    assert_code(&o, "PC-S3-017");
    assert!(stderr(&o).contains("PermanentRedirect"), "{}", stderr(&o));
}

// ---------------------------------------------------------- gateway target

use crate::gateway::upstream;

#[test]
fn the_gateway_appends_events_to_an_s3_dataset_that_reads_them_back() {
    need!("s3", crate::support::Need::S3);
    let b = bucket("gateway");
    admin(&["bucket", &b, "unversioned"]);
    let env = Env::moto();
    let up = upstream::Upstream::start(0);
    let dir = env.dir.path();
    let uri = format!("s3://{b}/live/");
    std::fs::write(
        dir.join("warehouse.toml"),
        format!("[[datasets]]\nname = \"live\"\nuri = \"{uri}\"\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("gateway.toml"),
        format!(
            "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\nflush_interval_ms = 100\n\
             [network]\nallow_hosts = [\"127.0.0.1\"]\nallow_http = true\n\
             [[models]]\nname = \"*\"\nprovider = \"openai\"\nupstream = \"{}\"\n",
            up.url()
        ),
    )
    .unwrap();
    // Without a local state directory the S3 target is refused.
    let o = env.run(&with_allow(&[
        "serve",
        "--config",
        "warehouse.toml",
        "--gateway",
        "gateway.toml",
    ]));
    assert_code(&o, "PC-GW-010");
    let mut child = env
        .cmd()
        .args(with_allow(&[
            "serve",
            "--config",
            "warehouse.toml",
            "--gateway",
            "gateway.toml",
            "--gateway-state",
            "state",
        ]))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let (mut proxy, mut admin_addr) = (String::new(), String::new());
    while proxy.is_empty() || admin_addr.is_empty() {
        let line = lines.next().expect("gateway output").unwrap();
        if let Some(u) = line.strip_prefix("gateway listening: http://") {
            proxy = u.trim_end_matches('/').to_string();
        }
        if let Some(u) = line.strip_prefix("gateway admin: http://") {
            admin_addr = u.trim_end_matches("/admin/status").to_string();
        }
    }
    std::thread::spawn(move || for _ in lines {});
    let http = |addr: &str, method: &str, path: &str, body: &str| -> String {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nx-pchronicle-session-id: s3-session\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    for text in ["first question", "second question"] {
        let body =
            serde_json::json!({"model": "m", "messages": [{"role": "user", "content": text}]});
        let r = http(&proxy, "POST", "/v1/chat/completions", &body.to_string());
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    }
    let t = std::time::Instant::now();
    loop {
        let r = http(&admin_addr, "GET", "/admin/status", "");
        if r.contains("\"pending\": false") && r.contains("\"flushed_events\": 4") {
            break;
        }
        assert!(t.elapsed() < Duration::from_mins(1), "{r}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(child.wait().unwrap().success());
    // The WAL stays local; events.lance is in the bucket and reads back.
    assert!(dir.join("state/wal").is_dir());
    let ls = json(&env.run(&with_allow(&["ls", &uri, "--format", "json"])));
    assert_eq!(ls["sources"][0]["source_path"], "events.lance");
    assert_eq!(ls["sources"][0]["status"], "ready", "{ls}");
    let o = env.run(&with_allow(&[
        "query",
        &uri,
        "SELECT session_id, message_value FROM steps ORDER BY step_id",
        "--format",
        "csv",
    ]));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("s3-session,first question"),
        "{text}{}",
        stderr(&o)
    );
    assert!(text.contains("s3-session,echo: second question"), "{text}");
    let o = env.run(&with_allow(&[
        "query",
        &uri,
        "SELECT count(*) FROM events",
        "--format",
        "csv",
    ]));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains('4'),
        "{}",
        stderr(&o)
    );
    // The same store copied to local disk reads the same in every command.
    let local = dir.join("copy");
    admin(&["download", &b, "live/", local.to_str().unwrap()]);
    let local = local.to_str().unwrap();
    let out = |args: &[&str]| -> String {
        let o = env.run(&with_allow(args));
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        String::from_utf8(o.stdout).unwrap()
    };
    for sql in [
        "SELECT * FROM steps ORDER BY session_id, step_id",
        "SELECT * FROM trajectories",
        "SELECT * FROM tool_calls",
        "SELECT * FROM events",
    ] {
        assert_eq!(
            out(&["query", &uri, sql, "--format", "csv"]),
            out(&["query", local, sql, "--format", "csv"]),
            "{sql}"
        );
    }
    for format in ["storyline", "atif", "openai-messages"] {
        let export = |from: &str| out(&["export", "--from", from, "--format", format, "-o", "-"]);
        assert_eq!(export(&uri), export(local), "export {format}");
    }
    let find = |from: &str| -> Vec<serde_json::Value> {
        let v: serde_json::Value = serde_json::from_str(&out(&[
            "find", from, "--match", "question", "--format", "json",
        ]))
        .unwrap();
        let hits = v["matches"].as_array().expect("find matches").clone();
        assert!(!hits.is_empty(), "{v}");
        hits
    };
    assert_eq!(find(&uri), find(local));
    let counts = |from: &str| -> serde_json::Value {
        let v: serde_json::Value =
            serde_json::from_str(&out(&["status", from, "--format", "json"])).unwrap();
        let s = &v["sources"][0];
        assert_eq!(s["events"]["events"], 4, "{v}");
        serde_json::json!([
            s["status"],
            s["counts"],
            s["events"]["stored_rows"],
            s["events"]["sessions"]
        ])
    };
    assert_eq!(counts(&uri), counts(local));
    // And the explorer's API lists the same trajectories with the same steps.
    let web = dir.join("web");
    std::fs::create_dir_all(&web).unwrap();
    let config = format!(
        "[[datasets]]\nname = \"s3\"\nuri = \"{uri}\"\n\
         [[datasets]]\nname = \"disk\"\nuri = \"{local}\"\n"
    );
    let served = crate::serve::harness::Served::start_command(env.cmd(), &web, &config, &ALLOW);
    let api = |name: &str, rest: &str| served.json(&format!("/api/v1/datasets/{name}/{rest}"));
    let listed = |name: &str| api(name, "trajectories")["trajectories"].clone();
    let on_s3 = listed("s3");
    assert!(on_s3.as_array().is_some_and(|a| !a.is_empty()), "{on_s3}");
    assert_eq!(on_s3, listed("disk"));
    for t in on_s3.as_array().unwrap() {
        let doc = crate::serve::harness::enc(t["document_id"].as_str().unwrap());
        let steps = |name: &str| api(name, &format!("trajectories/{doc}/steps"))["steps"].clone();
        assert!(steps("s3").as_array().is_some_and(|a| !a.is_empty()));
        assert_eq!(steps("s3"), steps("disk"));
    }
}

#[test]
fn s3_stores_survive_racing_imports_and_damage_and_keep_secrets() {
    need!("s3", crate::support::Need::S3);
    let b = bucket("harden");
    admin(&["bucket", &b, "unversioned"]);
    let env = Env::moto();
    let secret = "pcSECRETmarker9876543210";
    let token = "pcTOKENmarker9876543210";
    let input = example_dataset().join("golang__exp");
    let input = input.to_str().unwrap();
    let uri = format!("s3://{b}/stores/race");
    let cmd = |args: &[&str]| {
        let mut c = env.cmd();
        c.env("AWS_SECRET_ACCESS_KEY", secret)
            .env("AWS_SESSION_TOKEN", token)
            .args(args)
            .args(ALLOW);
        c
    };
    let leaks = |o: &Output| {
        let all = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(o));
        for needle in [secret, token, "Signature=", "X-Amz-Signature"] {
            assert!(!all.contains(needle), "{needle} leaked: {all}");
        }
    };

    // Two processes import to one S3 target at once: exactly one publishes.
    let racers: Vec<_> = (0..2)
        .map(|_| {
            cmd(&["import", "--from", input, "--output", &uri])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<Output> = racers
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let winners = outs.iter().filter(|o| o.status.success()).count();
    assert_eq!(
        winners,
        1,
        "{:?}",
        outs.iter().map(stderr).collect::<Vec<_>>()
    );
    for o in &outs {
        leaks(o);
        if !o.status.success() {
            let e = stderr(o);
            assert!(
                e.contains("[PC-IMP-001]") || e.contains("[PC-IMP-002]"),
                "{e}"
            );
        }
    }
    let count = cmd(&[
        "query",
        &uri,
        "SELECT count(*) AS n FROM steps",
        "--format",
        "csv",
        "--errors",
        "strict",
    ])
    .output()
    .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&count.stdout),
        "n\n33\n",
        "{}",
        stderr(&count)
    );
    leaks(&count);
    let keys = admin(&["keys", &b]);
    assert!(
        !keys.contains("pchronicle-staging") && !keys.contains("pchronicle-import.lock"),
        "{keys}"
    );
    // Reports and exports carry no credential either.
    for args in [
        vec!["status", uri.as_str(), "--format", "json"],
        vec![
            "export",
            "--from",
            uri.as_str(),
            "--format",
            "atif",
            "--output",
            "-",
        ],
        vec!["find", uri.as_str(), "--match", "hello", "--format", "json"],
    ] {
        let o = cmd(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        leaks(&o);
    }

    // Damage every data file of the store: report mode skips it with a
    // warning, strict fails, nothing panics.
    let junk = env.dir.path().join("junk");
    let mut damaged = 0;
    for key in keys
        .lines()
        .filter(|k| k.starts_with("stores/race/generations/") && k.ends_with(".lance"))
    {
        std::fs::write(&junk, vec![0xA5u8; 4096]).unwrap();
        admin(&["put", &b, key, junk.to_str().unwrap()]);
        damaged += 1;
    }
    assert!(damaged > 0, "{keys}");
    let status = cmd(&["status", &uri, "--format", "json", "-q"])
        .output()
        .unwrap();
    assert!(!stderr(&status).contains("panicked"), "{}", stderr(&status));
    let v: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(v["totals"]["ready"], 0, "{v}");
    let q = |strict: bool| {
        let mut args = vec![
            "query",
            uri.as_str(),
            "SELECT count(*) AS n FROM steps",
            "--format",
            "csv",
        ];
        if strict {
            args.extend(["--errors", "strict"]);
        }
        cmd(&args).output().unwrap()
    };
    let report = q(false);
    assert_eq!(report.status.code(), Some(0), "{}", stderr(&report));
    assert_eq!(String::from_utf8_lossy(&report.stdout), "n\n0\n");
    assert!(
        stderr(&report).contains("warning[PC-"),
        "{}",
        stderr(&report)
    );
    let strict = q(true);
    assert_eq!(strict.status.code(), Some(2), "{}", stderr(&strict));
    assert!(!stderr(&strict).contains("panicked"), "{}", stderr(&strict));
    leaks(&strict);
}

#[test]
fn an_s3_import_that_dies_around_its_current_leaves_no_half_store() {
    need!("s3", crate::support::Need::S3);
    // PCHRONICLE_FAILPOINT aborts the process (no cleanup, as kill -9)
    // just before and just after the create-only write of CURRENT.
    let b = bucket("diecur");
    admin(&["bucket", &b, "unversioned"]);
    let env = Env::moto();
    let input = example_dataset().join("golang__exp");
    let input = input.to_str().unwrap();
    for (point, published) in [
        ("s3-publish-before-current", false),
        ("s3-publish-after-current", true),
    ] {
        let uri = format!("s3://{b}/{point}/t");
        let o = env
            .cmd()
            .env("PCHRONICLE_FAILPOINT", point)
            .args(with_allow(&["import", "--from", input, "--output", &uri]))
            .output()
            .unwrap();
        assert!(!o.status.success(), "{point}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("failpoint {point}")),
            "{}",
            stderr(&o)
        );
        // The parent prefix as a Dataset: copied tables without CURRENT are
        // not a Source; with CURRENT the store is complete.
        let parent = format!("s3://{b}/{point}/");
        let v = json(&env.run(&with_allow(&[
            "status", &parent, "--errors", "strict", "--format", "json", "-q",
        ])));
        assert_eq!(
            v["totals"]["steps"],
            if published { 33 } else { 0 },
            "{point}: {v}"
        );
        // What it left is reported with the sizes the server lists: the
        // lock object and the staging prefix.
        let lock = format!("{point}/.t.pchronicle-import.lock");
        let mut want: Vec<(String, u64, u64)> = Vec::new();
        for line in admin(&["sizes", &b]).lines() {
            let (key, size) = line.split_once('\t').unwrap();
            let size: u64 = size.parse().unwrap();
            let Some(rel) = key.strip_prefix(&format!("{point}/")) else {
                continue;
            };
            let Some(first) = rel.split('/').next().filter(|s| s.starts_with('.')) else {
                continue;
            };
            let path = if first == rel {
                rel.to_string()
            } else {
                format!("{first}/")
            };
            match want.iter_mut().find(|w| w.0 == path) {
                Some(w) => (w.1, w.2) = (w.1 + size, w.2 + 1),
                None => want.push((path, size, 1)),
            }
        }
        want.sort();
        assert_eq!(want.len(), 2, "{point}: {want:?}");
        let mut got: Vec<(String, u64, u64)> = v["orphans"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                assert_eq!(o["target"], "t", "{o}");
                assert_eq!(o["held"], serde_json::Value::Null, "{o}");
                let at = format!("s3://{b}/{point}/{}", o["path"].as_str().unwrap());
                assert!(o["remove_with"].as_str().unwrap().contains(&at), "{o}");
                (
                    o["path"].as_str().unwrap().to_string(),
                    o["bytes"].as_u64().unwrap(),
                    o["files"].as_u64().unwrap(),
                )
            })
            .collect();
        got.sort();
        assert_eq!(got, want, "{point}: {v}");
        assert_eq!(
            v["totals"]["orphans"]["bytes"],
            want.iter().map(|w| w.1).sum::<u64>()
        );
        // Another target beside the leftovers imports as usual.
        let beside = format!("s3://{b}/{point}/u");
        let o = env.run(&with_allow(&[
            "import", "--from", input, "--output", &beside, "-q",
        ]));
        assert_eq!(o.status.code(), Some(0), "{point}: {}", stderr(&o));
        // The killed import's lock object stays and names itself.
        let again = env.run(&with_allow(&["import", "--from", input, "--output", &uri]));
        assert_code(&again, "PC-IMP-002");
        assert!(
            stderr(&again).contains(".t.pchronicle-import.lock"),
            "{}",
            stderr(&again)
        );
        // Once the lock is removed with ordinary tools, as the report says,
        // an unpublished target can be imported.
        if !published {
            admin(&["delete", &b, &lock]);
            let o = env.run(&with_allow(&[
                "import", "--from", input, "--output", &uri, "-q",
            ]));
            assert_eq!(o.status.code(), Some(0), "{point}: {}", stderr(&o));
        }
    }
}

/// `--stats` counts the S3 requests a command makes exactly as the server
/// counts the requests it serves, and the rows a scan of objects hands to
/// the engine as a local scan of the same files does.
#[test]
fn stats_count_s3_requests_as_the_server_serves_them() {
    need!("s3", crate::support::Need::S3);
    let b = example_bucket("stats", "unversioned");
    let uri = format!("s3://{b}/runs");
    let env = Env::moto();
    let served = || -> u64 { admin(&["requests", &b]).trim().parse().unwrap() };
    for args in [
        vec!["status", &uri, "--stats", "--format", "json", "-q"],
        vec!["ls", &uri, "--stats", "--format", "json", "-q"],
    ] {
        let before = served();
        let o = env.run(&with_allow(&args));
        let after = served();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        let v = json(&o);
        let s = &v["stats"];
        assert_eq!(s["s3_requests"], after - before, "{args:?}: {s}");
        assert!(s["bytes_read_s3"].as_u64().unwrap() > 0, "{s}");
        assert_eq!(s["bytes_read_local"], 0, "{s}");
        // Objects are pinned by reads of their own.
        assert!(s["phases"]["pin"]["wall_ms"].as_f64().unwrap() > 0.0, "{s}");
        if args[0] == "status" {
            assert_eq!(
                s["sources_read"].as_u64().unwrap() as usize,
                v["sources"].as_array().unwrap().len(),
                "{s}"
            );
        }
    }
    let sql = "SELECT count(*) AS n FROM steps";
    let local = example_dataset();
    let scanned = |o: &Output| -> (u64, u64) {
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (
            lines[0]["n"].as_u64().unwrap(),
            lines[1]["stats"]["rows_scanned"].as_u64().unwrap(),
        )
    };
    let remote = env.run(&with_allow(&[
        "query", &uri, sql, "--stats", "--format", "jsonl", "-q",
    ]));
    let here = env.run(&[
        "query",
        local.to_str().unwrap(),
        sql,
        "--stats",
        "--format",
        "jsonl",
        "-q",
    ]);
    let (n, rows) = scanned(&remote);
    assert_eq!((n, rows), scanned(&here), "{}", stderr(&remote));
    assert_eq!(n, rows);
}
