//! The client's error type, [`S3Error`], with its stable codes, and how an
//! S3 error answer (status and XML body) becomes one.
//!
//! One place decides what a 403, a 404 or a 412 means to the caller, so the
//! operations only add the cases where an answer means something else to
//! them (a missing key that is fine to delete, a lost conditional write).

use crate::s3::policy::PolicyError;
use crate::util::redact::redact;

use super::transport::Response;

/// Why an S3 request failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum S3Error {
    /// The outbound policy refused the endpoint, a peer or a redirect.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// No credentials in the standard chain.
    #[error("no S3 credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, use a profile (AWS_PROFILE, ~/.aws/credentials), or run with an instance role")]
    NoCredentials,
    /// The bucket does not exist.
    #[error("S3 bucket `{bucket}` does not exist")]
    NoSuchBucket {
        /// The bucket.
        bucket: String,
    },
    /// 401/403.
    #[error("S3 access denied for {what} (HTTP {status} {code}): check the credentials and the bucket policy")]
    AccessDenied {
        /// What was requested (`list s3://b/p/`, `read s3://b/k`).
        what: String,
        /// HTTP status.
        status: u16,
        /// S3 error code.
        code: String,
    },
    /// Throttling or server errors that persisted through every retry.
    #[error("S3 kept failing for {what} after {attempts} attempts (last: {last}); try again later or raise PCHRONICLE_S3_RETRIES")]
    Unavailable {
        /// What was requested.
        what: String,
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last: String,
    },
    /// The object changed since it was pinned (412 on a conditional read).
    #[error("S3 object `{key}` changed since it was listed (precondition failed)")]
    Changed {
        /// The key.
        key: String,
    },
    /// The object (or version) is gone.
    #[error("S3 object `{key}` no longer exists")]
    Gone {
        /// The key.
        key: String,
    },
    /// A write lost a compare-and-swap or a create-only race.
    #[error("S3 object `{key}` was written by someone else first (conditional write refused)")]
    Conflict {
        /// The key.
        key: String,
    },
    /// Any other refusal.
    #[error("S3 refused {what}: HTTP {status} {code}: {message}")]
    Http {
        /// What was requested.
        what: String,
        /// HTTP status.
        status: u16,
        /// S3 error code.
        code: String,
        /// S3's message, redacted.
        message: String,
    },
    /// A configuration value from the environment is refused.
    #[error("invalid {name}: {reason}")]
    Config {
        /// The variable.
        name: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// The response could not be understood.
    #[error("unexpected S3 response for {what}: {reason}")]
    BadResponse {
        /// What was requested.
        what: String,
        /// Why.
        reason: String,
    },
}

impl S3Error {
    /// Stable error code.
    pub fn code(&self) -> &'static str {
        match self {
            S3Error::Policy(p) => p.code(),
            S3Error::NoCredentials => "PC-S3-010",
            S3Error::NoSuchBucket { .. } => "PC-S3-011",
            S3Error::AccessDenied { .. } => "PC-S3-012",
            S3Error::Unavailable { .. } => "PC-S3-013",
            S3Error::Changed { .. } => "PC-S3-014",
            S3Error::Gone { .. } => "PC-S3-015",
            S3Error::Conflict { .. } => "PC-S3-016",
            S3Error::Http { .. } => "PC-S3-017",
            S3Error::BadResponse { .. } => "PC-S3-018",
            S3Error::Config { .. } => "PC-S3-020",
        }
    }
}

/// `Ok` for a 2xx answer; otherwise the error it stands for.
pub(super) fn check_status(
    resp: &Response,
    what: &str,
    bucket: &str,
    key: &str,
) -> Result<(), S3Error> {
    if (200..300).contains(&resp.status) {
        return Ok(());
    }
    let code = error_code(&resp.body);
    match resp.status {
        401 | 403 => Err(S3Error::AccessDenied {
            what: redact(what),
            status: resp.status,
            code,
        }),
        404 if code == "NoSuchBucket" => Err(S3Error::NoSuchBucket {
            bucket: bucket.to_string(),
        }),
        404 if !key.is_empty() => Err(S3Error::Gone { key: key.into() }),
        412 => Err(S3Error::Changed { key: key.into() }),
        _ => Err(http_error(resp, what)),
    }
}

/// The S3 error code (`<Code>`) of an error body, or empty.
pub(super) fn error_code(body: &[u8]) -> String {
    xml_text(body, "Code").unwrap_or_default()
}

/// The text of the first `<tag>…</tag>` in an XML error body (entities are
/// left as they are: the text only goes into messages).
pub(super) fn xml_text(body: &[u8], tag: &str) -> Option<String> {
    let s = std::str::from_utf8(body).ok()?;
    let open = format!("<{tag}>");
    let start = s.find(&open)? + open.len();
    let end = s[start..].find(&format!("</{tag}>"))? + start;
    let text: String = s[start..end].chars().take(200).collect();
    Some(crate::util::text::escape_control(&text).into_owned())
}

/// An error answer that is none of the kinds above: its status, S3 error
/// code and message, redacted.
pub(super) fn http_error(resp: &Response, what: &str) -> S3Error {
    S3Error::Http {
        what: redact(what),
        status: resp.status,
        code: error_code(&resp.body),
        message: redact(&xml_text(&resp.body, "Message").unwrap_or_default()),
    }
}
