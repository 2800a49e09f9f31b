//! The `--s3-allow` allowlist ([`Allowlist`], [`AllowEntry`]): host names,
//! `*.suffix` wildcards, IPs and CIDRs that may be reached although they
//! are not public, and how an address or host is matched against them.
//!
//! Parsing and matching live together so that what an entry means is
//! decided in one place; the policy checks only ask it questions.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use super::address::canonical_ip;
use super::endpoint::normalize_host_name;
use super::error::PolicyError;
use crate::util::redact::redact;

/// An IP literal, IPv6 optionally in brackets.
fn parse_ip_literal(s: &str) -> Option<IpAddr> {
    match s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        Some(v6) => v6.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
        None => s.parse().ok(),
    }
}

/// One `--s3-allow` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AllowEntry {
    /// An exact host name, lowercase, without a trailing dot.
    Host(String),
    /// Written `*.corp.example`: any name strictly below `corp.example`
    /// (`a.corp.example`, `a.b.corp.example`), not `corp.example` itself.
    Suffix(String),
    /// One address, IPv4-mapped forms stored as IPv4. `a.b.c.d/32` and
    /// `x::y/128` become this too.
    Ip(IpAddr),
    /// A network; host bits given in the entry are cleared.
    Cidr {
        /// The network address.
        network: IpAddr,
        /// The prefix length (0–32 or 0–128).
        prefix: u8,
    },
}

impl AllowEntry {
    /// Parse one entry: a host name, `*.suffix`, an IP (IPv6 with or without
    /// brackets) or a CIDR. Surrounding whitespace is ignored; ports are not.
    pub fn parse(text: &str) -> Result<Self, PolicyError> {
        let t = text.trim();
        let err = |reason: &'static str| PolicyError::InvalidAllowEntry {
            entry: redact(t),
            reason,
        };
        if t.is_empty() {
            return Err(err("the entry is empty (look for a stray comma)"));
        }
        if t.contains("://") || t.contains('@') {
            return Err(err("give a host name, an IP address or a CIDR, not a URL"));
        }
        if let Some((addr, len)) = t.split_once('/') {
            let network = parse_ip_literal(addr)
                .ok_or_else(|| err("the part before `/` is not an IP address"))?;
            let max = if network.is_ipv4() { 32 } else { 128 };
            let prefix = Some(len)
                .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|l| l.parse::<u8>().ok())
                .filter(|&p| p <= max)
                .ok_or_else(|| err("the prefix length is 0–32 for IPv4 and 0–128 for IPv6"))?;
            return Ok(if prefix == max {
                AllowEntry::Ip(canonical_ip(network))
            } else {
                AllowEntry::Cidr {
                    network: mask(network, prefix),
                    prefix,
                }
            });
        }
        if let Some(ip) = parse_ip_literal(t) {
            return Ok(AllowEntry::Ip(canonical_ip(ip)));
        }
        if t.contains(':') {
            return Err(err("not an IP address, and entries take no port"));
        }
        let (wildcard, name) = match t.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, t),
        };
        if name.contains('*') {
            return Err(err(
                "only a leading `*.` wildcard is supported, like `*.corp.example`",
            ));
        }
        let name = normalize_host_name(name).map_err(err)?;
        Ok(if wildcard {
            AllowEntry::Suffix(name)
        } else {
            AllowEntry::Host(name)
        })
    }
}

impl fmt::Display for AllowEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllowEntry::Host(h) => f.write_str(h),
            AllowEntry::Suffix(s) => write!(f, "*.{s}"),
            AllowEntry::Ip(ip) => write!(f, "{ip}"),
            AllowEntry::Cidr { network, prefix } => write!(f, "{network}/{prefix}"),
        }
    }
}

impl FromStr for AllowEntry {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AllowEntry::parse(s)
    }
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    let p = u32::from(prefix);
    match ip {
        IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(
            u32::from(a) & u32::MAX.checked_shl(32 - p).unwrap_or(0),
        )),
        IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(
            u128::from(a) & u128::MAX.checked_shl(128 - p).unwrap_or(0),
        )),
    }
}

fn in_cidr(network: IpAddr, prefix: u8, ip: IpAddr) -> bool {
    network.is_ipv4() == ip.is_ipv4() && mask(ip, prefix) == network
}

/// The hosts, IPs and networks that may be reached although they are not
/// public (`--s3-allow`, the settings file, the server config). An empty
/// allowlist allows nothing beyond public addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist {
    entries: Vec<AllowEntry>,
}

impl Allowlist {
    /// Parse entries; each value may hold several, separated by commas.
    /// Every piece must be a valid entry (an empty piece is an error).
    pub fn parse_entries<I, S>(values: I) -> Result<Self, PolicyError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut entries = Vec::new();
        for value in values {
            for piece in value.as_ref().split(',') {
                let entry = AllowEntry::parse(piece)?;
                if !entries.contains(&entry) {
                    entries.push(entry);
                }
            }
        }
        Ok(Allowlist { entries })
    }

    /// The entries, in the order given, without duplicates.
    pub fn entries(&self) -> &[AllowEntry] {
        &self.entries
    }

    /// True when nothing is allowlisted.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `host` (case-insensitive, trailing dot ignored) matches a host
    /// or `*.suffix` entry; an IP literal is checked with [`Self::allows_ip`].
    pub fn allows_host(&self, host: &str) -> bool {
        if let Some(ip) = parse_ip_literal(host) {
            return self.allows_ip(ip);
        }
        let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        self.entries.iter().any(|e| match e {
            AllowEntry::Host(h) => *h == name,
            AllowEntry::Suffix(s) => name
                .strip_suffix(s.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            _ => false,
        })
    }

    /// Whether `ip` (or the IPv4 address it wraps) matches an IP or CIDR entry.
    pub fn allows_ip(&self, ip: IpAddr) -> bool {
        let canon = canonical_ip(ip);
        self.entries.iter().any(|e| match *e {
            AllowEntry::Ip(a) => a == canon,
            AllowEntry::Cidr { network, prefix } => {
                in_cidr(network, prefix, ip) || in_cidr(network, prefix, canon)
            }
            _ => false,
        })
    }

    /// Whether `ip` is allowlisted as a single address (needed for metadata).
    pub(super) fn allows_exact_ip(&self, ip: IpAddr) -> bool {
        self.entries.contains(&AllowEntry::Ip(canonical_ip(ip)))
    }

    pub(super) fn has_ip_entries(&self) -> bool {
        self.entries
            .iter()
            .any(|e| matches!(e, AllowEntry::Ip(_) | AllowEntry::Cidr { .. }))
    }
}

impl fmt::Display for Allowlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl FromStr for Allowlist {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Allowlist::parse_entries([s])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{code, ip};
    use super::*;

    #[test]
    fn allowlist_entries() {
        let a = Allowlist::parse_entries([
            "10.0.0.0/8, MinIO.Internal.",
            "*.corp.example",
            "192.168.1.7/24",
        ])
        .unwrap();
        assert_eq!(
            a.to_string(),
            "10.0.0.0/8,minio.internal,*.corp.example,192.168.1.0/24"
        );
        assert_eq!(a.to_string().parse::<Allowlist>().unwrap(), a);
        assert!(a.allows_host("minio.internal") && a.allows_host("MINIO.internal."));
        assert!(a.allows_host("a.corp.example") && a.allows_host("a.b.corp.example"));
        assert!(!a.allows_host("corp.example") && !a.allows_host("xcorp.example"));
        assert!(!a.allows_host("minio.internal.evil.example"));
        assert!(a.allows_ip(ip("10.1.2.3")) && a.allows_ip(ip("::ffff:10.1.2.3")));
        assert!(a.allows_ip(ip("192.168.1.255")) && !a.allows_ip(ip("192.168.2.1")));
        assert!(a.allows_host("10.9.9.9") && !a.allows_ip(ip("11.0.0.1")));
        let v6 = Allowlist::parse_entries(["fd00::/8", "[::1]", "127.0.0.1/32"]).unwrap();
        assert!(
            v6.allows_ip(ip("fd12::5")) && v6.allows_ip(ip("::1")) && !v6.allows_ip(ip("fe80::1"))
        );
        assert_eq!(v6.entries()[2], AllowEntry::Ip(ip("127.0.0.1")));
        for bad in [
            "",
            "a,,b",
            "a,",
            "10.0.0.0/33",
            "::/129",
            "10.0.0.0/x",
            "10.0.0.0/+8",
            "host:9000",
            "a*.b",
            "*",
            "https://x",
            "u@x",
            "10.0.0.256",
            "-x.example",
        ] {
            let r = Allowlist::parse_entries([bad]);
            assert_eq!(code(r), "PC-S3-007", "{bad:?}");
        }
    }
}
