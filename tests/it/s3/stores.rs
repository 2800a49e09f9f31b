//! Storyline stores on S3: import, pins that follow `CURRENT`, large cells,
//! racing and interrupted imports.

use super::*;

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
    // Two large outputs in one document and one in another file: one take
    // resolves several objects, and they come from more than one file.
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
