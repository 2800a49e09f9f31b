//! Redaction, decided once for the whole program: [`redact`] removes
//! credentials (URL user information and queries, `Authorization`-style
//! header values, signature parameters, AWS access key ids) from text meant
//! for errors and logs; [`is_credential_header`] names the headers whose
//! values are credentials, in any case; [`redact_query`] hides the values of
//! credential-like query parameters in a query kept for a capture.
//!
//! The S3 policy and client, the catalog's URI messages, the explorer's
//! errors and the Gateway's captured headers all pass their text through
//! here, so no two places disagree on what a secret looks like.

/// The placeholder written instead of a credential that is kept in place
/// (a captured header or query value).
pub const REDACTED: &str = "<redacted>";

/// Headers whose values are credentials, lower case.
const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "openai-api-key",
    "anthropic-api-key",
    "x-amz-security-token",
    "x-amz-server-side-encryption-customer-key",
    "x-amz-server-side-encryption-customer-key-md5",
    "x-amz-copy-source-server-side-encryption-customer-key",
    "x-amz-copy-source-server-side-encryption-customer-key-md5",
];

/// Whether a header (any case, surrounding blanks ignored) carries a
/// credential.
pub fn is_credential_header(name: &str) -> bool {
    let name = name.trim().to_ascii_lowercase();
    CREDENTIAL_HEADERS.contains(&name.as_str())
}

/// Parts of a query parameter's name that mark its value as a credential.
const CREDENTIAL_PARAMS: &[&str] = &[
    "key",
    "token",
    "secret",
    "sig",
    "password",
    "auth",
    "credential",
];

/// A query string with the values of credential-like parameters replaced by
/// [`REDACTED`]; names, order and other values are kept.
pub fn redact_query(q: &str) -> String {
    q.split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, _)) => {
                let low = k.to_ascii_lowercase();
                if CREDENTIAL_PARAMS.iter().any(|w| low.contains(w)) {
                    format!("{k}={REDACTED}")
                } else {
                    pair.to_string()
                }
            }
            None => pair.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// Header-like keys whose value runs to the end of the line.
const LINE_KEYS: &[&str] = &[
    "proxy-authorization",
    "authorization",
    "set-cookie",
    "cookie",
];
/// Parameter-like keys whose value runs to the next delimiter.
const PARAM_KEYS: &[&str] = &[
    "x-amz-signature",
    "x-amz-credential",
    "x-amz-security-token",
    "aws_secret_access_key",
    "aws_session_token",
    "awsaccesskeyid",
    "signature",
    "credential",
];

/// Remove credentials from text meant for errors and logs: user information
/// in URLs (`***@`), URL queries and fragments (`?…`, `#…`), the values of
/// `Authorization:`-style headers and of `X-Amz-Signature=`-style parameters
/// (`***`), and AWS access key ids (`AKIA…`). Idempotent; other text is kept.
pub fn redact(text: &str) -> String {
    redact_access_key_ids(&redact_key_values(&redact_urls(text)))
}

fn redact_urls(text: &str) -> String {
    let is_scheme_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.');
    let ends_url = |c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let start = rest[..i]
            .char_indices()
            .rev()
            .find(|&(_, c)| !is_scheme_char(c))
            .map_or(0, |(j, c)| j + c.len_utf8());
        let end = rest[i + 3..]
            .find(ends_url)
            .map_or(rest.len(), |j| i + 3 + j);
        out.push_str(&rest[..start]);
        let url = &rest[start..end];
        let (scheme, after) = url.split_at(i - start + 3);
        let (authority, tail) = after.split_at(after.find(['/', '?', '#']).unwrap_or(after.len()));
        out.push_str(scheme);
        match authority.rfind('@') {
            Some(j) => {
                out.push_str("***@");
                out.push_str(&authority[j + 1..]);
            }
            None => out.push_str(authority),
        }
        match tail.find(['?', '#']) {
            Some(j) => {
                out.push_str(&tail[..j]);
                out.push_str(if tail[j..].starts_with('?') {
                    "?…"
                } else {
                    "#…"
                });
            }
            None => out.push_str(tail),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn redact_key_values(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let is_key_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    let mut out = String::with_capacity(text.len());
    let (mut copied, mut i) = (0, 0);
    while i < bytes.len() {
        if i > 0 && is_key_byte(bytes[i - 1]) {
            i += 1;
            continue;
        }
        let hit = LINE_KEYS
            .iter()
            .map(|k| (k, true))
            .chain(PARAM_KEYS.iter().map(|k| (k, false)))
            .find(|(k, _)| bytes[i..].starts_with(k.as_bytes()));
        let Some((key, whole_line)) = hit else {
            i += 1;
            continue;
        };
        let mut j = i + key.len();
        if matches!(bytes.get(j), Some(b'"' | b'\'')) {
            j += 1;
        }
        while bytes.get(j) == Some(&b' ') {
            j += 1;
        }
        if !matches!(bytes.get(j), Some(b':' | b'=')) {
            i += 1;
            continue;
        }
        j += 1;
        while bytes.get(j) == Some(&b' ') {
            j += 1;
        }
        let quote = match bytes.get(j) {
            Some(&q @ (b'"' | b'\'')) => {
                j += 1;
                Some(q)
            }
            _ => None,
        };
        let end = bytes[j..]
            .iter()
            .position(|&b| match quote {
                Some(q) => b == q,
                None if whole_line => b == b'\n' || b == b'\r',
                None => {
                    b.is_ascii_whitespace()
                        || matches!(
                            b,
                            b'&' | b',' | b';' | b'"' | b'\'' | b'`' | b'<' | b'>' | b')'
                        )
                }
            })
            .map_or(bytes.len(), |p| j + p);
        if end > j {
            out.push_str(&text[copied..j]);
            out.push_str("***");
            copied = end;
        }
        i = end.max(i + 1);
    }
    out.push_str(&text[copied..]);
    out
}

fn redact_access_key_ids(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut copied, mut i) = (0, 0);
    while i + 20 <= b.len() {
        let is_id = (i == 0 || !b[i - 1].is_ascii_alphanumeric())
            && (b[i..].starts_with(b"AKIA") || b[i..].starts_with(b"ASIA"))
            && b[i + 4..i + 20]
                .iter()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            && b.get(i + 20).is_none_or(|c| !c.is_ascii_alphanumeric());
        if is_id {
            out.push_str(&text[copied..i + 4]);
            out.push('…');
            i += 20;
            copied = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction() {
        for (text, want) in [
            ("GET https://AKIAIOSFODNN7EXAMPLE:secret@h.example/b/k?X-Amz-Signature=abc failed", "GET https://***@h.example/b/k?… failed"),
            ("uri `s3://bucket/x?X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F2024`", "uri `s3://bucket/x?…`"),
            ("Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/x, Signature=ff\nnext", "Authorization: ***\nnext"),
            ("{\"authorization\": \"Bearer t0ken\", \"host\": \"h\"}", "{\"authorization\": \"***\", \"host\": \"h\"}"),
            ("x-amz-security-token=FQoGZXIvYXdz&foo=1", "x-amz-security-token=***&foo=1"),
            ("X-Amz-Signature: 0123abcd", "X-Amz-Signature: ***"),
            ("key AKIAIOSFODNN7EXAMPLE and ASIAIOSFODNN7EXAMPLE.", "key AKIA… and ASIA…."),
            ("路径 https://u:p@h/x?q=1 完成", "路径 https://***@h/x?… 完成"),
            ("see http://h/x#access_token=abc", "see http://h/x#…"),
            ("s3://bucket/prefix/ is fine", "s3://bucket/prefix/ is fine"),
            ("no credentials here; XAKIAIOSFODNN7EXAMPLE", "no credentials here; XAKIAIOSFODNN7EXAMPLE"),
        ] {
            let got = redact(text);
            assert_eq!(got, want, "{text}");
            assert_eq!(redact(&got), got, "idempotent: {text}");
        }
    }

    #[test]
    fn credential_headers_in_any_case() {
        for h in [
            "Authorization",
            " x-API-key",
            "Cookie",
            "X-Amz-Security-Token",
        ] {
            assert!(is_credential_header(h), "{h}");
        }
        assert!(!is_credential_header("Range") && !is_credential_header("Host"));
    }

    #[test]
    fn query_values_of_credentials_are_replaced() {
        assert_eq!(
            redact_query("api_key=abc&model=m&X-Amz-Signature=ff&flag"),
            "api_key=<redacted>&model=m&X-Amz-Signature=<redacted>&flag"
        );
    }

    mod prop {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn redact_is_idempotent(text in "\\PC{0,60}") {
                let once = redact(&text);
                prop_assert_eq!(redact(&once), once);
            }
        }
    }
}
