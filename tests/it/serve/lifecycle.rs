//! Start-up checks, trusted proxy mode, the access log, Catalog refresh and
//! shutdown.

use std::time::{Duration, Instant};

use crate::serve::harness::{command, copy_dir, enc, example_dataset, Served};

fn refused(config: &str, extra: &[&str]) -> (i32, String) {
    let t = tempfile::tempdir().unwrap();
    copy_dir(&example_dataset(), &t.path().join("data"));
    let cfg = t.path().join("warehouse.toml");
    std::fs::write(&cfg, config).unwrap();
    let o = command(t.path())
        .args(["serve", "--config"])
        .arg(&cfg)
        .args(extra)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn bad_configs_and_addresses_are_refused_before_listening() {
    let ok = "[[datasets]]\nname = \"evals\"\nuri = \"data\"\n";
    for addr in ["0.0.0.0:0", "192.168.0.1:80", "[::]:0", "example.com:80"] {
        let (code, err) = refused(ok, &["--listen", addr]);
        assert_eq!(code, 2, "{addr}");
        assert!(err.contains("PC-WEB-002"), "{addr}: {err}");
    }
    let (code, err) = refused(&format!("listen = \"0.0.0.0:8080\"\n{ok}"), &[]);
    assert_eq!(code, 2);
    assert!(err.contains("PC-WEB-002"), "{err}");
    for (cfg, what) in [
        ("[[datasets]]\nname = \"evals\"\nuri = \"data\"\nsecret = 1\n", "unknown field"),
        ("[[datasets]]\nname = \"../evals\"\nuri = \"data\"\n", "not valid"),
        ("[[datasets]]\nname = \"a\"\nuri = \"data\"\n[[datasets]]\nname = \"a\"\nuri = \"data\"\n", "used twice"),
        ("[[datasets]]\nname = \"a\"\nuri = \"s3://key:secret@bucket/x\"\n", "dataset `a`"),
        ("[[datasets]]\nname = \"a\"\nuri = \"missing-dir\"\n", "PC-CAT"),
    ] {
        let (code, err) = refused(cfg, &["--listen", "127.0.0.1:0"]);
        assert_eq!(code, 2, "{cfg}");
        assert!(err.contains(what), "{cfg}: {err}");
        assert!(!err.contains("secret@"), "{err}");
    }
}

#[test]
fn trusted_proxy_headers_and_access_log() {
    let t = tempfile::tempdir().unwrap();
    copy_dir(&example_dataset(), &t.path().join("data"));
    let two =
        "[[datasets]]\nname = \"a\"\nuri = \"data\"\n[[datasets]]\nname = \"b\"\nuri = \"data\"\n";
    // The proxy is elsewhere: our loopback peer is not trusted, so its
    // identity headers are dropped and the request fails closed.
    let s = Served::start(
        t.path(),
        &format!("{two}[proxy]\ntrusted = [\"127.0.0.2\"]\n"),
    );
    let r = s.send(
        "GET",
        "/api/v1/catalog",
        &[("X-Pchronicle-Principal", "alice")],
        None,
    );
    assert_eq!((r.status, r.code().as_str()), (401, "PC-WEB-007"));
    assert_eq!(s.get("/api/v1/health").status, 200);
    assert_eq!(s.get("/").status, 200);
    drop(s);

    let s = Served::start(
        t.path(),
        &format!("{two}[proxy]\ntrusted = [\"127.0.0.1\"]\nprincipal_header = \"X-Auth-User\"\nhosts = [\"warehouse.example.org\"]\n"),
    );
    let r = s.get("/api/v1/catalog");
    assert_eq!((r.status, r.code().as_str()), (401, "PC-WEB-007"));
    let alice = [("X-Auth-User", "alice@example.org")];
    let c = s.send("GET", "/api/v1/catalog", &alice, None).json();
    assert_eq!(c["datasets"].as_array().unwrap().len(), 2);
    let only_a = [
        ("X-Auth-User", "alice@example.org"),
        ("X-Pchronicle-Dataset", "a"),
    ];
    let c = s.send("GET", "/api/v1/catalog", &only_a, None).json();
    assert_eq!(c["datasets"].as_array().unwrap().len(), 1);
    let r = s.send("GET", "/api/v1/datasets/b/runs", &only_a, None);
    assert_eq!((r.status, r.code().as_str()), (403, "PC-WEB-008"));
    assert_eq!(
        s.send("GET", "/api/v1/datasets/a/runs", &only_a, None)
            .status,
        200
    );
    let r = s.send(
        "GET",
        &format!("/api/v1/query?sql={}", enc("SELECT count(*) FROM b.runs")),
        &only_a,
        None,
    );
    assert_eq!(r.status, 400, "{}", r.text());
    // A Dataset header naming nothing readable permits nothing; one with a
    // control character does not even pass the transport.
    let r = s.send(
        "GET",
        "/api/v1/datasets/a/runs",
        &[("X-Auth-User", "alice"), ("X-Pchronicle-Dataset", "é?")],
        None,
    );
    assert_eq!(r.status, 403);
    let r = s.send(
        "GET",
        "/api/v1/datasets/a/runs",
        &[("X-Auth-User", "alice"), ("X-Pchronicle-Dataset", "\u{1}")],
        None,
    );
    assert_eq!(r.status, 400);
    // A secret in the query string or a credential header never reaches the log.
    let r = s.send(
        "GET",
        &format!("/api/v1/query?sql={}", enc("SELECT 'hunter2-secret' AS x")),
        &[
            ("X-Auth-User", "bob"),
            ("Authorization", "Bearer tok-sekrit"),
        ],
        None,
    );
    assert_eq!(r.status, 200);
    let rid = r.header("x-request-id").unwrap().to_string();
    assert!(s.wait_log(|l| l.contains(&rid), Duration::from_secs(10)));
    let log = s.log();
    let line = log.iter().find(|l| l.contains(&rid)).unwrap();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["principal"], "bob");
    assert_eq!(v["status"], 200);
    assert_eq!(v["path"], "/api/v1/query");
    for l in &log {
        assert!(!l.contains("hunter2") && !l.contains("sekrit"), "{l}");
    }
    // The proxy's public name is accepted as Host; other names are not, even
    // from the trusted peer.
    let bob_at = |host| [("X-Auth-User", "bob"), ("Host", host)];
    let r = s.send(
        "GET",
        "/api/v1/catalog",
        &bob_at("warehouse.example.org:443"),
        None,
    );
    assert_eq!(r.status, 200);
    let r = s.send("GET", "/api/v1/catalog", &bob_at("rebound.example"), None);
    assert_eq!((r.status, r.code().as_str()), (421, "PC-WEB-015"));
    // A repeated identity header (a proxy that appends) is refused.
    let r = s.send(
        "GET",
        "/api/v1/catalog",
        &[("X-Auth-User", "mallory"), ("X-Auth-User", "bob")],
        None,
    );
    assert_eq!((r.status, r.code().as_str()), (400, "PC-WEB-006"));
}

#[test]
fn refresh_swaps_the_catalog_and_keeps_it_on_failure() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("data");
    copy_dir(&example_dataset(), &data);
    let s = Served::start(t.path(), "[[datasets]]\nname = \"evals\"\nuri = \"data\"\n");
    let before = s.json("/api/v1/catalog");
    let n0 = before["datasets"][0]["source_count"].as_u64().unwrap();
    let runs0 = s.json("/api/v1/datasets/evals/runs")["total"]
        .as_u64()
        .unwrap();
    std::fs::copy(
        data.join("golang__exp/hello-world-context-summarization.trajectory.json"),
        data.join("copy.json"),
    )
    .unwrap();
    s.signal("HUP");
    let t0 = Instant::now();
    let after = loop {
        let c = s.json("/api/v1/catalog");
        if c["generation"] != before["generation"] || t0.elapsed() > Duration::from_mins(1) {
            break c;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        after["datasets"][0]["source_count"].as_u64().unwrap(),
        n0 + 1
    );
    assert_ne!(
        after["datasets"][0]["snapshot_id"],
        before["datasets"][0]["snapshot_id"]
    );
    // Cached run lists belong to the old generation.
    assert_eq!(
        s.json("/api/v1/datasets/evals/runs")["total"]
            .as_u64()
            .unwrap(),
        runs0 + 1
    );
    // A refresh that fails keeps serving the last snapshot.
    std::fs::rename(&data, t.path().join("gone")).unwrap();
    s.signal("HUP");
    assert!(
        s.wait_log(
            |l| l.contains("catalog refresh failed"),
            Duration::from_mins(1)
        ),
        "{:?}",
        s.log()
    );
    let still = s.json("/api/v1/catalog");
    assert_eq!(still["generation"], after["generation"]);
    assert_eq!(
        still["datasets"][0]["snapshot_id"],
        after["datasets"][0]["snapshot_id"]
    );
    // The warning names the Dataset, not its path.
    let log = s.log();
    let w = log
        .iter()
        .find(|l| l.contains("catalog refresh failed"))
        .unwrap();
    assert!(!w.contains(t.path().to_str().unwrap()), "{w}");
}

#[test]
fn sigterm_and_sigint_stop_cleanly() {
    for sig in ["TERM", "INT"] {
        let t = tempfile::tempdir().unwrap();
        copy_dir(&example_dataset(), &t.path().join("data"));
        let mut s = Served::start(t.path(), "[[datasets]]\nname = \"evals\"\nuri = \"data\"\n");
        assert_eq!(s.get("/api/v1/health").status, 200);
        s.signal(sig);
        let t0 = Instant::now();
        let status = loop {
            if let Some(st) = s.child.try_wait().unwrap() {
                break st;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "still running after SIG{sig}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(status.code(), Some(0), "SIG{sig}");
        assert!(std::net::TcpStream::connect(&s.addr).is_err());
    }
}

/// The binary runs without transparent huge pages (a 2 MiB page is resident
/// as soon as one byte of it is touched), unless `MIMALLOC_ALLOW_THP` asks
/// for them; either way it is the same process that was started.
#[test]
fn huge_pages_are_off_unless_asked_for() {
    let thp = |pid: u32| {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("THP_enabled:"))?;
        line.split_whitespace().nth(1).map(str::to_string)
    };
    let system =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    // Only a kernel that reports the flag, with huge pages possible at all.
    if thp(std::process::id()).is_none() || system.contains("[never]") {
        return;
    }
    for (asked, want) in [(None, "0"), (Some("1"), "1")] {
        let t = tempfile::tempdir().unwrap();
        copy_dir(&example_dataset(), &t.path().join("data"));
        let mut cmd = command(t.path());
        cmd.env_remove("MIMALLOC_PURGE_DELAY");
        if let Some(v) = asked {
            cmd.env("MIMALLOC_ALLOW_THP", v);
        }
        let config = "[[datasets]]\nname = \"evals\"\nuri = \"data\"\n";
        let s = Served::start_command(cmd, t.path(), config, &[]);
        assert_eq!(s.get("/api/v1/health").status, 200);
        assert_eq!(thp(s.child.id()).as_deref(), Some(want), "{asked:?}");
        // A server returns freed memory sooner than mimalloc's default, as
        // export does (import returns it at once, tests/it/memory.rs): a
        // large file's decoding must not stay resident beside its packed form.
        let environ = std::fs::read(format!("/proc/{}/environ", s.child.id())).unwrap();
        assert!(
            environ
                .split(|&b| b == 0)
                .any(|v| v == b"MIMALLOC_PURGE_DELAY=10"),
            "a server returns freed memory after 10 ms"
        );
    }
}
