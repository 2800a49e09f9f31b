//! The Gateway appending its events to an S3 Dataset.

use super::*;

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
    // Serve the Gateway, ask `questions` in `session`, wait until the
    // events flushed reach `flushed`, stop it.
    let capture = |session: &str, questions: &[&str], flushed: usize| {
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
                "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nx-pchronicle-session-id: {session}\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).unwrap();
            out
        };
        for text in questions {
            let body =
                serde_json::json!({"model": "m", "messages": [{"role": "user", "content": text}]});
            let r = http(&proxy, "POST", "/v1/chat/completions", &body.to_string());
            assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        }
        let t = std::time::Instant::now();
        let want = format!("\"flushed_events\": {flushed}");
        loop {
            let r = http(&admin_addr, "GET", "/admin/status", "");
            if r.contains("\"pending\": false") && r.contains(&want) {
                break;
            }
            assert!(t.elapsed() < Duration::from_mins(1), "{r}");
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        assert!(child.wait().unwrap().success());
    };
    capture("s3-session", &["first question", "second question"], 4);
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

    // A second capture appends a version: its first read extends the
    // projection of the first, and reads as the same store on local disk.
    capture("s3-later", &["a later question"], 2);
    let again = dir.join("copy-2");
    admin(&["download", &b, "live/", again.to_str().unwrap()]);
    let again = again.to_str().unwrap();
    let sql = "SELECT storage_ordinal, session_id, step_count FROM trajectories";
    let on_s3 = out(&["query", &uri, sql, "--format", "csv"]);
    assert!(on_s3.contains("s3-later"), "{on_s3}");
    let extended = std::fs::read_dir(dir.join("cache/projections"))
        .unwrap()
        .flatten()
        .flat_map(|k| std::fs::read_dir(k.path()).unwrap().flatten())
        .filter(|v| v.path().join("generations").is_symlink())
        .count();
    assert_eq!(extended, 1);
    assert_eq!(on_s3, out(&["query", again, sql, "--format", "csv"]));
}
