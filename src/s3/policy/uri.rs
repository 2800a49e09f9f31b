//! `s3://bucket/prefix` Dataset URIs ([`S3Uri`]): parsing, bucket-name
//! rules and the canonical form, and the test for signed query strings that
//! URIs, endpoints and redirect targets share.
//!
//! A Dataset URI comes from shared configuration, so parsing refuses
//! anything that could carry a credential (user information, a signed
//! query) and prints nothing it refuses without [`redact`].

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use super::error::{PolicyError, SIGNED_PART, USERINFO_PART};
use crate::util::redact::redact;

/// Query parameter names that mark a pre-signed or credential-bearing URL.
const SIGNED_QUERY_KEYS: &[&str] = &[
    "x-amz-signature",
    "x-amz-credential",
    "x-amz-security-token",
    "awsaccesskeyid",
    "signature",
    "sig",
    "token",
    "access_token",
    "x-goog-signature",
    "x-goog-credential",
];

/// True when a query string (without `?`) carries a signature or token.
pub fn is_signed_query(query: &str) -> bool {
    query.split('&').any(|pair| {
        let key = pair.split('=').next().unwrap_or("").to_ascii_lowercase();
        SIGNED_QUERY_KEYS.contains(&key.as_str())
    })
}

/// A parsed `s3://bucket/prefix` Dataset URI.
///
/// The canonical form has the scheme `s3`, the bucket (which must already be
/// lowercase), and a prefix with no leading `/`, empty segments collapsed and,
/// when not empty, exactly one trailing `/`. A Dataset is a directory, so
/// `s3://b/runs` and `s3://b/runs/` are the same Dataset, and listing with
/// the prefix `runs/` never picks up `runs-old/`. The prefix is used as
/// written, without percent-decoding (like the AWS CLI). `Display` prints the
/// canonical form, which parses back to the same value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct S3Uri {
    bucket: String,
    prefix: String,
}

impl S3Uri {
    /// Parse `s3://bucket[/prefix]`. Refuses other schemes, user information,
    /// query strings (signed URLs with `X-Amz-Signature` among them),
    /// fragments, invalid bucket names and `.`/`..` prefix segments.
    pub fn parse(input: &str) -> Result<Self, PolicyError> {
        let invalid = |reason: &'static str| PolicyError::InvalidS3Uri {
            uri: redact(input),
            reason,
        };
        if input.chars().any(char::is_control) {
            return Err(invalid("the URI contains control characters"));
        }
        let Some((scheme, rest)) = input.split_once("://") else {
            return Err(invalid("expected `s3://bucket/prefix`"));
        };
        if !scheme.eq_ignore_ascii_case("s3") {
            return Err(invalid("only `s3://bucket/prefix` URIs name S3 Datasets"));
        }
        let (bucket, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
        if bucket.contains('@') {
            return Err(PolicyError::CredentialsInUri {
                what: "an S3 URI",
                part: USERINFO_PART,
            });
        }
        if let Some((_, query)) = tail.split_once('?') {
            if is_signed_query(query) {
                return Err(PolicyError::CredentialsInUri {
                    what: "an S3 URI",
                    part: SIGNED_PART,
                });
            }
            return Err(invalid(
                "an S3 URI has no query string (signed URLs are refused too)",
            ));
        }
        if tail.contains('#') {
            return Err(invalid("an S3 URI has no fragment (`#…`)"));
        }
        check_bucket(bucket).map_err(invalid)?;
        let mut prefix = String::new();
        for segment in tail.split('/').filter(|s| !s.is_empty()) {
            if segment == "." || segment == ".." {
                return Err(invalid(
                    "`.` and `..` segments are not allowed in the prefix",
                ));
            }
            prefix.push_str(segment);
            prefix.push('/');
        }
        if prefix.len() > 1024 {
            return Err(invalid(
                "the prefix is longer than S3's 1024-byte key limit",
            ));
        }
        Ok(S3Uri {
            bucket: bucket.to_string(),
            prefix,
        })
    }

    /// The bucket name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The key prefix: empty (the whole bucket) or ending in `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

/// S3 bucket naming rules (general-purpose buckets).
fn check_bucket(b: &str) -> Result<(), &'static str> {
    if b.is_empty() {
        return Err("the bucket name is missing");
    }
    if !(3..=63).contains(&b.len()) {
        return Err("a bucket name has 3 to 63 characters");
    }
    if b.bytes().any(|c| c.is_ascii_uppercase()) {
        return Err("bucket names are lowercase");
    }
    if !b
        .bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'-')
    {
        return Err("a bucket name has only lowercase letters, digits, `.` and `-`");
    }
    let bytes = b.as_bytes();
    if !bytes[0].is_ascii_alphanumeric() || !bytes[b.len() - 1].is_ascii_alphanumeric() {
        return Err("a bucket name starts and ends with a letter or digit");
    }
    if b.contains("..") {
        return Err("a bucket name has no two adjacent `.`");
    }
    if b.parse::<Ipv4Addr>().is_ok() {
        return Err("a bucket name is not an IP address");
    }
    if b.starts_with("xn--") || b.ends_with("-s3alias") || b.ends_with("--ol-s3") {
        return Err("the bucket name uses a prefix or suffix that S3 reserves");
    }
    Ok(())
}

impl fmt::Display for S3Uri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.prefix)
    }
}

impl FromStr for S3Uri {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        S3Uri::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::code;
    use super::super::Endpoint;
    use super::*;

    #[test]
    fn s3_uris_normalise_and_round_trip() {
        for (given, canonical) in [
            ("s3://bucket", "s3://bucket/"),
            ("s3://bucket/", "s3://bucket/"),
            ("S3://bucket/runs", "s3://bucket/runs/"),
            ("s3://bucket//runs///2024/", "s3://bucket/runs/2024/"),
            ("s3://my.bucket-1/a b/c", "s3://my.bucket-1/a b/c/"),
        ] {
            let uri = S3Uri::parse(given).unwrap();
            assert_eq!(uri.to_string(), canonical, "{given}");
            assert_eq!(S3Uri::parse(canonical).unwrap(), uri, "{given}");
        }
        let uri = S3Uri::parse("s3://bucket/runs").unwrap();
        assert_eq!((uri.bucket(), uri.prefix()), ("bucket", "runs/"));
    }

    #[test]
    fn s3_uris_refused() {
        let long = format!("s3://{}", "a".repeat(64));
        for bad in [
            "https://bucket/x",
            "s3a://bucket/x",
            "s3:/bucket",
            "bucket/x",
            "s3://",
            "s3://ab",
            long.as_str(),
            "s3://Bucket",
            "s3://-bucket",
            "s3://bucket-",
            "s3://b_ucket",
            "s3://my..bucket",
            "s3://192.168.0.1",
            "s3://xn--bucket",
            "s3://bucket/a/../b",
            "s3://bucket/./a",
            "s3://bucket/x#frag",
            "s3://bucket/x?versionId=3",
            "s3://bucket/x\n",
        ] {
            assert_eq!(code(S3Uri::parse(bad)), "PC-S3-001", "{bad:?}");
        }
        assert!(S3Uri::parse(&format!("s3://{}", "a".repeat(63))).is_ok());
    }

    #[test]
    fn embedded_credentials_are_refused_without_echo() {
        for bad in [
            "s3://AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMIsecret@bucket/x",
            "s3://bucket/x?X-Amz-Credential=AKIAIOSFODNN7EXAMPLE&X-Amz-Signature=deadbeef",
            "https://AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMIsecret@minio.example",
            "https://minio.example/?X-Amz-Signature=deadbeef",
        ] {
            let err = match S3Uri::parse(bad) {
                Err(e) if bad.starts_with("s3") => e,
                _ => Endpoint::parse(bad).unwrap_err(),
            };
            let msg = err.to_string();
            assert_eq!(err.code(), "PC-S3-003", "{bad}");
            for secret in ["wJalr", "deadbeef", "AKIAIOSFODNN7EXAMPLE"] {
                assert!(!msg.contains(secret), "{msg}");
            }
        }
    }

    mod prop {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn s3_uri_round_trips(bucket in "[a-z0-9][a-z0-9-]{1,20}[a-z0-9]", path in "[a-zA-Z0-9_/ .-]{0,30}") {
                if let Ok(uri) = S3Uri::parse(&format!("s3://{bucket}/{path}")) {
                    prop_assert_eq!(S3Uri::parse(&uri.to_string()).unwrap(), uri);
                }
            }
        }
    }
}
