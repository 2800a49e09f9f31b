//! Reads of S3 Datasets through moto: the same answers as local copies,
//! listings, pins, and the requests `--stats` counts.

use super::*;

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
