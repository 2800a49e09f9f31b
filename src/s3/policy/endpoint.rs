//! S3 endpoint origins ([`Endpoint`]: scheme, host, port), as from
//! `AWS_ENDPOINT_URL`, and the URL splitting and host-name rules that
//! endpoint parsing and redirect targets share.
//!
//! An endpoint holds nothing secret, so its `Display` is always safe to log;
//! the spellings that a resolver would read as another address (`127.1`,
//! `2130706433`) are refused here, before any check sees them.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use super::error::{PolicyError, SIGNED_PART, USERINFO_PART};
use super::uri::is_signed_query;
use crate::util::redact::redact;

/// The transport of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// TLS; the default and, off loopback, the only choice unless HTTP is enabled.
    Https,
    /// Plain HTTP.
    Http,
}

impl Scheme {
    /// `https` or `http`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Https => "https",
            Scheme::Http => "http",
        }
    }

    /// 443 or 80.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Https => 443,
            Scheme::Http => 80,
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An endpoint's host: a validated, lowercase DNS name or an IP literal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    /// A DNS name, checked when it is resolved.
    Name(String),
    /// An IP literal, checked at configuration time.
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// An S3 endpoint origin, as from `AWS_ENDPOINT_URL`: scheme, host and port,
/// with no path, query, fragment or credentials, so its `Display` is always
/// safe to log. Two endpoints are equal exactly when they are the same origin.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    pub(super) scheme: Scheme,
    pub(super) host: Host,
    pub(super) port: u16,
}

impl Endpoint {
    /// Parse `http(s)://host[:port][/]`. IPv6 literals go in brackets; the
    /// port defaults to 443 or 80. Host names must be ASCII (punycode for
    /// IDNs), and numeric spellings a resolver would read as IPv4 (`127.1`,
    /// `2130706433`, `0x7f.1`) are refused.
    pub fn parse(input: &str) -> Result<Self, PolicyError> {
        let invalid = |reason: &'static str| PolicyError::InvalidEndpoint {
            endpoint: redact(input),
            reason,
        };
        let url = split_url(input).map_err(invalid)?;
        let what = "an S3 endpoint URL";
        if url.authority.contains('@') {
            return Err(PolicyError::CredentialsInUri {
                what,
                part: USERINFO_PART,
            });
        }
        if let Some(query) = url.query {
            if is_signed_query(query) {
                return Err(PolicyError::CredentialsInUri {
                    what,
                    part: SIGNED_PART,
                });
            }
            return Err(invalid("an endpoint URL has no query string"));
        }
        if url.fragment.is_some() {
            return Err(invalid("an endpoint URL has no fragment (`#…`)"));
        }
        if !(url.path.is_empty() || url.path == "/") {
            return Err(invalid(
                "an endpoint URL has no path; the bucket and prefix go in the `s3://` URI",
            ));
        }
        url.origin().map_err(invalid)
    }

    /// `https` or `http`.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The host.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The port (defaults already applied).
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, self.host)?;
        if self.port != self.scheme.default_port() {
            write!(f, ":{}", self.port)?;
        }
        Ok(())
    }
}

impl FromStr for Endpoint {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Endpoint::parse(s)
    }
}

/// An absolute URL split into its parts (no decoding).
pub(super) struct Url<'a> {
    pub(super) scheme: &'a str,
    pub(super) authority: &'a str,
    pub(super) path: &'a str,
    pub(super) query: Option<&'a str>,
    pub(super) fragment: Option<&'a str>,
}

pub(super) fn split_url(input: &str) -> Result<Url<'_>, &'static str> {
    if input
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || c == '\\')
    {
        return Err("the URL contains whitespace, control characters or `\\`");
    }
    let (scheme, rest) = input
        .split_once("://")
        .ok_or("expected a URL like `https://host:port`")?;
    let (rest, fragment) = match rest.split_once('#') {
        Some((r, f)) => (r, Some(f)),
        None => (rest, None),
    };
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    Ok(Url {
        scheme,
        authority,
        path,
        query,
        fragment,
    })
}

impl Url<'_> {
    /// Scheme, host and port; the caller has refused user information.
    pub(super) fn origin(&self) -> Result<Endpoint, &'static str> {
        let scheme = if self.scheme.eq_ignore_ascii_case("https") {
            Scheme::Https
        } else if self.scheme.eq_ignore_ascii_case("http") {
            Scheme::Http
        } else {
            return Err("only https:// (or, where allowed, http://) endpoints are supported");
        };
        let (host, port) = parse_authority(self.authority, scheme.default_port())?;
        Ok(Endpoint { scheme, host, port })
    }
}

fn parse_authority(authority: &str, default_port: u16) -> Result<(Host, u16), &'static str> {
    if authority.is_empty() {
        return Err("the host is missing");
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or("an IPv6 address lacks its closing `]`")?;
        if inside.contains('%') {
            return Err("IPv6 zone identifiers (`%…`) are not supported");
        }
        let v6: Ipv6Addr = inside
            .parse()
            .map_err(|_| "the text in `[…]` is not an IPv6 address")?;
        let port = if after.is_empty() {
            None
        } else {
            Some(after.strip_prefix(':').ok_or("unexpected text after `]`")?)
        };
        (Host::Ip(IpAddr::V6(v6)), port)
    } else {
        let (name, port) = match authority.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (authority, None),
        };
        if port.is_some_and(|p| p.contains(':')) {
            return Err("write IPv6 addresses in brackets, like `https://[2001:db8::1]:9000`");
        }
        let host = match name.parse::<Ipv4Addr>() {
            Ok(v4) => Host::Ip(IpAddr::V4(v4)),
            Err(_) => Host::Name(normalize_host_name(name)?),
        };
        (host, port)
    };
    let port = match port {
        None => default_port,
        Some(p) => Some(p)
            .filter(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse::<u16>().ok())
            .filter(|&n| n != 0)
            .ok_or("the port is a number from 1 to 65535")?,
    };
    Ok((host, port))
}

/// Lowercase a DNS name, drop one trailing `.`, and check its syntax.
pub(super) fn normalize_host_name(name: &str) -> Result<String, &'static str> {
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    if name.is_empty() || name.len() > 253 {
        return Err("a host name has 1 to 253 characters");
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err("each dot-separated part of a host name has 1 to 63 characters");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err("a host name has only ASCII letters, digits, `-` and `_` (use punycode)");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err("a host-name part does not start or end with `-`");
        }
    }
    // inet_aton reads `127.1`, `2130706433` and `0x7f.0.0.1` as IPv4.
    let last = name.rsplit('.').next().unwrap_or("");
    let numeric = last.bytes().all(|b| b.is_ascii_digit())
        || last
            .strip_prefix("0x")
            .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
    if numeric {
        return Err("not a valid IPv4 address (write four decimal parts without leading zeros)");
    }
    Ok(name)
}

pub(super) fn is_localhost_name(name: &str) -> bool {
    name == "localhost" || name.ends_with(".localhost")
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{code, ep, ip};
    use super::*;

    #[test]
    fn endpoints_parse_and_round_trip() {
        for (given, canonical) in [
            (
                "https://s3.us-east-1.amazonaws.com",
                "https://s3.us-east-1.amazonaws.com",
            ),
            (
                "HTTPS://MinIO.Example.com:443/",
                "https://minio.example.com",
            ),
            ("http://127.0.0.1:9000", "http://127.0.0.1:9000"),
            ("https://[::1]:9000/", "https://[::1]:9000"),
            ("http://localhost.:80", "http://localhost"),
        ] {
            let e = ep(given);
            assert_eq!(e.to_string(), canonical, "{given}");
            assert_eq!(ep(canonical), e, "{given}");
        }
        let e = ep("https://[::ffff:10.0.0.1]:9000");
        assert_eq!(
            (e.scheme(), e.host().clone(), e.port()),
            (Scheme::Https, Host::Ip(ip("::ffff:10.0.0.1")), 9000)
        );
    }

    #[test]
    fn endpoints_refused() {
        for bad in [
            "ftp://host",
            "s3://bucket",
            "host:9000",
            "https://",
            "https://host/bucket",
            "https://host?versionId=1",
            "https://host#f",
            "https://::1",
            "https://[::1",
            "https://[fe80::1%25eth0]",
            "https://host:0",
            "https://host:65536",
            "https://host:",
            "https://host:x",
            "https://127.1",
            "https://2130706433",
            "https://0x7f000001",
            "https://0177.0.0.1",
            "https://exa mple.com",
            "https://evil.example\\@good.example",
            "https://-bad.example",
            "https://bücher.example",
        ] {
            assert_eq!(code(Endpoint::parse(bad)), "PC-S3-002", "{bad:?}");
        }
    }
}
