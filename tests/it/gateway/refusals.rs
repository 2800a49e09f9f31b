//! Configuration and request refusals, each with its code.

use serde_json::json;

use crate::gateway::{request, Gateway, Setup, Upstream};

fn serve_fails(s: &Setup, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut c = crate::gateway::command(s.path());
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.arg("serve").args(args).output().unwrap();
    assert!(!o.status.success(), "{args:?} should fail");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn configurations_outside_the_policy_are_refused() {
    let up = Upstream::start(0);
    let s = Setup::new();
    let wh = s.warehouse("");
    let cfg = s.gateway(&up, "");
    let base = std::fs::read_to_string(&cfg).unwrap();
    let args = [
        "--config",
        wh.to_str().unwrap(),
        "--gateway",
        cfg.to_str().unwrap(),
    ];
    let key = [("ROUTE_KEY", crate::gateway::ROUTE_KEY)];
    let cases: Vec<(String, &str)> = vec![
        (
            base.replace(
                "listen = \"127.0.0.1:0\"\nadmin",
                "listen = \"0.0.0.0:0\"\nadmin",
            ),
            "PC-GW-002",
        ),
        (
            base.replace(
                "admin_listen = \"127.0.0.1:0\"",
                "admin_listen = \"192.168.1.10:9000\"",
            ),
            "PC-GW-002",
        ),
        (
            base.replace(
                "allow_hosts = [\"127.0.0.1\"]",
                "allow_hosts = [\"api.example.com\"]",
            ),
            "PC-GW-003",
        ),
        (
            base.replace("allow_http = true", "allow_http = false"),
            "PC-GW-003",
        ),
        (
            base.replace(&up.url(), "http://169.254.169.254")
                .replace("[\"127.0.0.1\"]", "[\"169.254.169.254\"]"),
            "PC-GW-003",
        ),
        (
            base.replace(&up.url(), &up.url().replace("http://", "http://u:p@")),
            "PC-GW-003",
        ),
        (format!("{base}\nunknown_field = 1\n"), "PC-GW-001"),
        (
            base.replace("capture_level", "x")
                .replace("agent_id", "capture_level = \"everything\"\nagent_id"),
            "PC-GW-001",
        ),
        (
            base.replace("provider = \"anthropic\"", "provider = \"gemini\""),
            "PC-GW-001",
        ),
        (
            base.replace("agent_id", "session_header = \"authorization\"\nagent_id"),
            "PC-GW-001",
        ),
        (
            base.replace("agent_id", "max_capture_bytes = 999999999\nagent_id"),
            "PC-GW-001",
        ),
    ];
    for (text, code) in cases {
        std::fs::write(&cfg, &text).unwrap();
        let err = serve_fails(&s, &args, &key);
        assert!(err.contains(code), "expected {code}: {err}");
        assert!(!err.contains(crate::gateway::ROUTE_KEY));
    }
    std::fs::write(&cfg, &base).unwrap();
    // The key variable must be set.
    let err = serve_fails(&s, &args, &[]);
    assert!(
        err.contains("PC-GW-004") && err.contains("ROUTE_KEY"),
        "{err}"
    );
    // Several Datasets and no default: name the target.
    let multi = s.path().join("multi.toml");
    std::fs::create_dir_all(s.path().join("other")).unwrap();
    std::fs::write(
        &multi,
        "[[datasets]]\nname = \"a\"\nuri = \"./ds\"\n[[datasets]]\nname = \"b\"\nuri = \"./other\"\n",
    )
    .unwrap();
    let err = serve_fails(
        &s,
        &[
            "--config",
            multi.to_str().unwrap(),
            "--gateway",
            cfg.to_str().unwrap(),
        ],
        &key,
    );
    assert!(
        err.contains("PC-GW-010") && err.contains("--gateway-dataset"),
        "{err}"
    );
    let err = serve_fails(
        &s,
        &[
            "--config",
            multi.to_str().unwrap(),
            "--gateway",
            cfg.to_str().unwrap(),
            "--gateway-dataset",
            "nope",
        ],
        &key,
    );
    assert!(err.contains("PC-GW-010"), "{err}");
    // An S3 target needs a local state directory.
    let s3 = s.path().join("s3.toml");
    std::fs::write(
        &s3,
        "[[datasets]]\nname = \"prod\"\nuri = \"s3://bucket-name/prefix/\"\n",
    )
    .unwrap();
    let err = serve_fails(
        &s,
        &[
            "--config",
            s3.to_str().unwrap(),
            "--gateway",
            cfg.to_str().unwrap(),
        ],
        &key,
    );
    assert!(
        err.contains("PC-GW-010") && err.contains("--gateway-state"),
        "{err}"
    );
}

#[test]
fn requests_the_gateway_does_not_forward_are_refused() {
    let up = Upstream::start(0);
    let s = Setup::new();
    let wh = s.warehouse("");
    let cfg = s.gateway(&up, "");
    let gw = Gateway::serve(&s, &wh, &cfg, &[]);
    let r = request(&gw.proxy, "GET", "/v1/models", &[], None);
    assert_eq!((r.status, r.code().as_str()), (404, "PC-GW-013"));
    let r = request(&gw.proxy, "GET", "/v1/chat/completions", &[], None);
    assert_eq!((r.status, r.code().as_str()), (400, "PC-GW-006"));
    let r = request(
        &gw.proxy,
        "POST",
        "/v1/chat/completions",
        &[],
        Some(b"not json"),
    );
    assert_eq!((r.status, r.code().as_str()), (400, "PC-GW-006"));
    let r = gw.post("/v1/chat/completions", &[], &json!({"messages": []}));
    assert_eq!((r.status, r.code().as_str()), (400, "PC-GW-006"));
    let r = gw.post(
        "/v1/chat/completions",
        &[("Host", "evil.example.com")],
        &json!({"model": "m", "messages": []}),
    );
    assert_eq!((r.status, r.code().as_str()), (421, "PC-GW-014"));
    let r = gw.post(
        "/v1/chat/completions",
        &[("x-pchronicle-session-id", &"s".repeat(300))],
        &json!({"model": "m", "messages": []}),
    );
    assert_eq!((r.status, r.code().as_str()), (400, "PC-GW-006"));
    let r = gw.post(
        "/v1/chat/completions",
        &[],
        &json!({"model": "m".repeat(300), "messages": []}),
    );
    assert_eq!((r.status, r.code().as_str()), (400, "PC-GW-006"));
    // Pages in a browser cannot spend the routes' keys.
    for h in [
        ("Origin", "https://evil.example"),
        ("Sec-Fetch-Site", "cross-site"),
    ] {
        let r = gw.post(
            "/v1/chat/completions",
            &[h],
            &json!({"model": "m", "messages": []}),
        );
        assert_eq!((r.status, r.code().as_str()), (403, "PC-GW-015"), "{h:?}");
    }
    // No route for a protocol the routes do not serve: drop the anthropic route.
    drop(gw);
    let text = std::fs::read_to_string(&cfg).unwrap();
    let cut = text.rfind("[[models]]").unwrap();
    std::fs::write(&cfg, &text[..cut]).unwrap();
    let gw = Gateway::serve(&s, &wh, &cfg, &[]);
    let r = gw.post(
        "/v1/messages",
        &[],
        &json!({"model": "claude", "messages": []}),
    );
    assert_eq!((r.status, r.code().as_str()), (404, "PC-GW-005"));
    // Refused requests are not forwarded and not captured.
    gw.wait_flushed();
    assert_eq!(gw.admin("/admin/status")["captured_events"], 0);
    assert!(up.seen().is_null());
}
