//! Faults moto cannot be made to show, from a scripted server on loopback.

use super::*;

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
    include_str!("../../../examples/dataset/DeepLink-org__Persisting/unicode_zh_15.json");

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
