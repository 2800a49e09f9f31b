//! The outbound policy: which endpoints need the allowlist.

use super::*;

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
