//! AWS Signature Version 4 for S3 requests: the signed headers, the
//! canonical query string the signature covers, and the payload hash.
//!
//! rust-s3 supplies the canonical request and the signing key; this file
//! puts them together for our own transport, so it can be checked against
//! AWS's published example without a network.

use hmac::{Hmac, Mac as _};
use http::{HeaderMap, HeaderValue};
use sha2::{Digest as _, Sha256};

use crate::s3::policy::{Endpoint, Scheme};

use super::config::Creds;
use super::error::S3Error;

/// SHA-256 of the empty payload.
const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// The `x-amz-content-sha256` value of a body: its SHA-256, in hex.
pub(super) fn payload_hash(body: &[u8]) -> String {
    if body.is_empty() {
        EMPTY_SHA256.to_string()
    } else {
        hex(&Sha256::digest(body))
    }
}

/// Add the SigV4 headers (`host`, `x-amz-date`, `x-amz-content-sha256`,
/// the session token, `authorization`) to `headers`, signing every header
/// already present as well.
#[allow(clippy::too_many_arguments)]
pub(super) fn sign_headers(
    headers: &mut HeaderMap,
    method: &str,
    url: &url::Url,
    origin: &Endpoint,
    region: &str,
    payload_hash: &str,
    creds: &Creds,
    now: time::OffsetDateTime,
) -> Result<(), S3Error> {
    let bad = |what: &str| S3Error::BadResponse {
        what: "request signing".into(),
        reason: what.to_string(),
    };
    let host = match (origin.scheme(), origin.port()) {
        (Scheme::Https, 443) | (Scheme::Http, 80) => origin.host().to_string(),
        (_, port) => format!("{}:{port}", origin.host()),
    };
    let date = format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    );
    let hv = |v: &str| HeaderValue::from_str(v).map_err(|_| bad("a header value is not ASCII"));
    headers.insert(http::header::HOST, hv(&host)?);
    headers.insert("x-amz-date", hv(&date)?);
    headers.insert("x-amz-content-sha256", hv(payload_hash)?);
    if let Some(t) = &creds.token {
        headers.insert("x-amz-security-token", hv(t)?);
    }
    let region = s3::Region::Custom {
        region: region.to_string(),
        endpoint: String::new(),
    };
    let canonical = s3::signing::canonical_request(method, url, headers, payload_hash)
        .map_err(|_| bad("cannot build the canonical request"))?;
    let to_sign = s3::signing::string_to_sign(&now, &region, &canonical)
        .map_err(|_| bad("cannot build the string to sign"))?;
    let key = s3::signing::signing_key(&now, &creds.secret_key, &region, "s3")
        .map_err(|_| bad("cannot derive the signing key"))?;
    let mut mac =
        Hmac::<Sha256>::new_from_slice(&key).map_err(|_| bad("bad signing key length"))?;
    mac.update(to_sign.as_bytes());
    let signature = hex(&mac.finalize().into_bytes());
    let signed = s3::signing::signed_header_string(headers);
    let auth =
        s3::signing::authorization_header(&creds.access_key, &now, &region, &signed, &signature)
            .map_err(|_| bad("cannot build the authorization header"))?;
    headers.insert(http::header::AUTHORIZATION, hv(&auth)?);
    Ok(())
}

/// `k=v&…` sorted by key, AWS-encoded (the same form the signature uses).
pub(super) fn canonical_query(query: &[(String, String)]) -> String {
    let mut pairs: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| {
            (
                s3::signing::uri_encode(k, true),
                s3::signing::uri_encode(v, true),
            )
        })
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// Lowercase hexadecimal, as SigV4 writes hashes and signatures.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The "GET Object" example of AWS's Signature Version 4 documentation
    /// for S3 (header-based authentication).
    #[test]
    fn signature_matches_the_aws_example() {
        let mut headers = HeaderMap::new();
        headers.insert("range", HeaderValue::from_static("bytes=0-9"));
        let origin = Endpoint::parse("https://examplebucket.s3.amazonaws.com").unwrap();
        let url = url::Url::parse("https://examplebucket.s3.amazonaws.com/test.txt").unwrap();
        let creds = Creds {
            access_key: "AKIAIOSFODNN7EXAMPLE".into(),
            secret_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
            token: None,
        };
        let now = time::OffsetDateTime::from_unix_timestamp(1_369_353_600).unwrap();
        sign_headers(
            &mut headers,
            "GET",
            &url,
            &origin,
            "us-east-1",
            EMPTY_SHA256,
            &creds,
            now,
        )
        .unwrap();
        assert_eq!(
            headers["authorization"].to_str().unwrap(),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,\
             SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,\
             Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    #[test]
    fn query_is_sorted_and_encoded() {
        let q = canonical_query(&[
            ("prefix".into(), "a b/c".into()),
            ("list-type".into(), "2".into()),
        ]);
        assert_eq!(q, "list-type=2&prefix=a%20b%2Fc");
    }
}
