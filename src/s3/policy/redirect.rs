//! Redirects: [`Policy::check_redirect`] decides whether a `Location` may be
//! followed and whether the request must lose its signature and sensitive
//! headers ([`is_origin_bound_header`]) on the way.
//!
//! A public endpoint answering `307` with a private `Location` is an SSRF
//! path of its own, so every hop is parsed and checked like a configured
//! endpoint, and the client counts hops against [`MAX_REDIRECTS`].

use std::fmt;

use super::check::Policy;
use super::endpoint::{split_url, Endpoint};
use super::error::{PolicyError, USERINFO_PART};
use crate::util::redact::redact;

/// Whether a header (any case) must be dropped on a cross-origin redirect:
/// every credential header (`util::redact`), and every `x-amz-*` header,
/// which belongs to the SigV4 signature that the new origin needs afresh.
pub fn is_origin_bound_header(name: &str) -> bool {
    crate::util::redact::is_credential_header(name)
        || name.trim().to_ascii_lowercase().starts_with("x-amz-")
}

/// The most redirects a client should follow for one request, when enabled.
pub const MAX_REDIRECTS: usize = 5;

/// The decision for a redirect the policy accepted.
#[derive(Clone, PartialEq, Eq)]
pub struct RedirectDecision {
    /// Where to go next. Connect only through [`Policy::resolve_and_check`].
    pub endpoint: Endpoint,
    /// The path and query to request there. It may hold a signature: never
    /// log it; `Display` and `Debug` show it with the query redacted.
    pub path_and_query: String,
    /// The origin changed: remove every header [`is_origin_bound_header`] names
    /// and sign the request again for the new origin.
    pub drop_sensitive_headers: bool,
}

impl fmt::Display for RedirectDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path_and_query.split('?').next().unwrap_or("");
        let query = if self.path_and_query.contains('?') {
            "?…"
        } else {
            ""
        };
        write!(f, "{}{path}{query}", self.endpoint)
    }
}

impl fmt::Debug for RedirectDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedirectDecision")
            .field("target", &self.to_string())
            .field("drop_sensitive_headers", &self.drop_sensitive_headers)
            .finish_non_exhaustive()
    }
}

impl Policy {
    /// Decide on a redirect from `from` to `location` (the `Location` header).
    ///
    /// Refused unless `follow_redirects`. Otherwise the target (absolute,
    /// scheme-relative `//host/…` or a path `/…`) must be `http(s)` without
    /// user information and pass [`Self::check_endpoint`] — a refusal there
    /// returns that check's error (`PC-S3-004`, `005` or `009`). A host name
    /// target is checked again when resolved. The caller counts hops against
    /// [`MAX_REDIRECTS`].
    pub fn check_redirect(
        &self,
        from: &Endpoint,
        location: &str,
    ) -> Result<RedirectDecision, PolicyError> {
        let refused = |reason: &'static str| PolicyError::RedirectRefused {
            from: from.to_string(),
            to: redact(location),
            reason,
        };
        if !self.follow_redirects {
            return Err(refused(
                "redirects are not followed (S3 endpoints do not need them)",
            ));
        }
        if location.starts_with('/') && !location.starts_with("//") {
            if location
                .chars()
                .any(|c| c.is_control() || c.is_whitespace() || c == '\\')
            {
                return Err(refused("the Location header is malformed"));
            }
            return Ok(RedirectDecision {
                endpoint: from.clone(),
                path_and_query: location.split('#').next().unwrap_or("/").to_string(),
                drop_sensitive_headers: false,
            });
        }
        let absolute = match location.strip_prefix("//") {
            Some(rest) => format!("{}://{rest}", from.scheme),
            None => location.to_string(),
        };
        let url = split_url(&absolute).map_err(refused)?;
        if url.authority.contains('@') {
            return Err(PolicyError::CredentialsInUri {
                what: "a redirect target",
                part: USERINFO_PART,
            });
        }
        let endpoint = url.origin().map_err(refused)?;
        self.check_endpoint(&endpoint)?;
        let mut path_and_query = if url.path.is_empty() { "/" } else { url.path }.to_string();
        if let Some(query) = url.query {
            path_and_query.push('?');
            path_and_query.push_str(query);
        }
        let drop_sensitive_headers = endpoint != *from;
        Ok(RedirectDecision {
            endpoint,
            path_and_query,
            drop_sensitive_headers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{code, dns, ep, refused_class};
    use super::super::AddressClass as C;
    use super::*;

    #[test]
    fn redirects() {
        let from = ep("https://s3.amazonaws.com");
        let r =
            Policy::default().check_redirect(&from, "https://x.example/k?X-Amz-Signature=deadbeef");
        let msg = r.clone().unwrap_err().to_string();
        assert_eq!(code(r), "PC-S3-006");
        assert!(!msg.contains("deadbeef"), "{msg}");

        let p = Policy {
            follow_redirects: true,
            ..Policy::default()
        };
        assert_eq!(
            refused_class(p.check_redirect(&from, "https://10.0.0.1/k")),
            C::Private
        );
        assert_eq!(
            refused_class(p.check_redirect(&from, "https://169.254.169.254/")),
            C::Metadata
        );
        assert_eq!(
            refused_class(p.check_redirect(&from, "//[::1]/k")),
            C::Loopback
        );
        assert_eq!(
            code(p.check_redirect(&from, "http://s3.amazonaws.com/k")),
            "PC-S3-005"
        );
        assert_eq!(
            code(p.check_redirect(&from, "https://u:pw@x.example/k")),
            "PC-S3-003"
        );
        assert_eq!(
            code(p.check_redirect(&from, "ftp://x.example/k")),
            "PC-S3-006"
        );
        assert_eq!(code(p.check_redirect(&from, "relative/key")), "PC-S3-006");

        let same = p
            .check_redirect(&from, "/bucket/key?partNumber=1#f")
            .unwrap();
        assert_eq!(
            (same.endpoint.clone(), same.path_and_query.as_str()),
            (from.clone(), "/bucket/key?partNumber=1")
        );
        assert!(!same.drop_sensitive_headers);
        let cross = p
            .check_redirect(
                &from,
                "https://bucket.s3.amazonaws.com/key?X-Amz-Signature=ab",
            )
            .unwrap();
        assert!(cross.drop_sensitive_headers);
        assert_eq!(cross.to_string(), "https://bucket.s3.amazonaws.com/key?…");
        assert!(!format!("{cross:?}").contains("X-Amz-Signature"));
        assert!(p
            .check_redirect(&from, "https://s3.amazonaws.com:443/k")
            .is_ok_and(|d| !d.drop_sensitive_headers));
        assert!(p
            .check_redirect(&from, "//s3.amazonaws.com:8443/k")
            .is_err());

        // A name target passes now and is checked again when resolved.
        let next = p
            .check_redirect(&from, "https://internal.example/k")
            .unwrap();
        let rebound = dns("internal.example", &["192.168.0.10"]);
        assert_eq!(
            refused_class(p.resolve_and_check(&next.endpoint, &rebound)),
            C::Private
        );

        for h in [
            "Authorization",
            "x-amz-security-token",
            "X-Amz-Date",
            "Cookie",
            "x-amz-meta-a",
        ] {
            assert!(is_origin_bound_header(h), "{h}");
        }
        assert!(!is_origin_bound_header("Range") && !is_origin_bound_header("Host"));
    }
}
