//! The policy's error type, [`PolicyError`], with its stable `PC-S3-001`…`009`
//! codes, and the message parts that name a credential without echoing it.
//!
//! Kept apart so every check (URIs, endpoints, the allowlist, connections,
//! redirects) reports through one enum, and a code is defined in one place.

use super::address::AddressClass;

/// Why an S3 URI, endpoint, allowlist entry, connection or redirect was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The `s3://` URI is malformed.
    #[error("invalid S3 URI `{uri}`: {reason}")]
    InvalidS3Uri {
        /// The URI as given, redacted.
        uri: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// The endpoint URL is malformed or uses another scheme.
    #[error("invalid S3 endpoint `{endpoint}`: {reason}")]
    InvalidEndpoint {
        /// The URL as given, redacted.
        endpoint: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A URI embeds user information or a signed query string.
    #[error("{what} must not carry {part}; S3 credentials come from the standard AWS credential chain (environment, profile or instance role)")]
    CredentialsInUri {
        /// Which kind of URI (never its text).
        what: &'static str,
        /// Which part looked like a credential (never its value).
        part: &'static str,
    },
    /// The address belongs to a class that needs an allowlist entry.
    #[error("refusing to connect to {target}: {class} addresses are not allowed; {hint}")]
    AddressNotAllowed {
        /// The endpoint and, for a host name, the address it resolved to.
        target: String,
        /// The class of the refused address.
        class: AddressClass,
        /// How to allow it.
        hint: &'static str,
    },
    /// Plain HTTP to something other than an allowlisted loopback address.
    #[error("refusing plain HTTP to `{endpoint}`: use https://, or enable plain HTTP for S3 explicitly (without that, only an allowlisted loopback endpoint may use http://)")]
    HttpNotAllowed {
        /// The endpoint.
        endpoint: String,
    },
    /// A redirect was not followed.
    #[error("refusing redirect from `{from}` to `{to}`: {reason}")]
    RedirectRefused {
        /// The endpoint that answered with the redirect.
        from: String,
        /// The `Location`, redacted.
        to: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// An `--s3-allow` entry is malformed.
    #[error("invalid --s3-allow entry `{entry}`: {reason}")]
    InvalidAllowEntry {
        /// The entry as given, redacted.
        entry: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// The endpoint's host name did not resolve.
    #[error("cannot resolve S3 endpoint host `{host}`: {reason}")]
    Resolve {
        /// The host name.
        host: String,
        /// The resolver's reason, redacted.
        reason: String,
    },
    /// A port other than 443 or 80 on a host that is not allowlisted.
    #[error("refusing to connect to `{endpoint}`: port {port} is open only to allowlisted hosts (443 and 80 are open to all); allow the host with `--s3-allow <ip|cidr|host>`")]
    PortNotAllowed {
        /// The endpoint.
        endpoint: String,
        /// The refused port.
        port: u16,
    },
}

impl PolicyError {
    /// Stable error code.
    pub fn code(&self) -> &'static str {
        match self {
            PolicyError::InvalidS3Uri { .. } => "PC-S3-001",
            PolicyError::InvalidEndpoint { .. } => "PC-S3-002",
            PolicyError::CredentialsInUri { .. } => "PC-S3-003",
            PolicyError::AddressNotAllowed { .. } => "PC-S3-004",
            PolicyError::HttpNotAllowed { .. } => "PC-S3-005",
            PolicyError::RedirectRefused { .. } => "PC-S3-006",
            PolicyError::InvalidAllowEntry { .. } => "PC-S3-007",
            PolicyError::Resolve { .. } => "PC-S3-008",
            PolicyError::PortNotAllowed { .. } => "PC-S3-009",
        }
    }
}

/// How a refusal names user information, never its value.
pub(super) const USERINFO_PART: &str = "user information (`user:password@`)";
/// How a refusal names a signed query string, never its value.
pub(super) const SIGNED_PART: &str =
    "a signed query string (`X-Amz-Signature`, `X-Amz-Credential`, …)";

#[cfg(test)]
mod tests {
    use super::*;
    use AddressClass as C;

    #[test]
    fn codes_are_distinct() {
        let s = String::new;
        let all = [
            PolicyError::InvalidS3Uri {
                uri: s(),
                reason: "",
            },
            PolicyError::InvalidEndpoint {
                endpoint: s(),
                reason: "",
            },
            PolicyError::CredentialsInUri { what: "", part: "" },
            PolicyError::AddressNotAllowed {
                target: s(),
                class: C::Private,
                hint: "",
            },
            PolicyError::HttpNotAllowed { endpoint: s() },
            PolicyError::RedirectRefused {
                from: s(),
                to: s(),
                reason: "",
            },
            PolicyError::InvalidAllowEntry {
                entry: s(),
                reason: "",
            },
            PolicyError::Resolve {
                host: s(),
                reason: s(),
            },
            PolicyError::PortNotAllowed {
                endpoint: s(),
                port: 1,
            },
        ];
        let codes: std::collections::BTreeSet<_> = all.iter().map(PolicyError::code).collect();
        assert_eq!(codes.len(), all.len());
    }
}
