//! The outbound [`Policy`] and its endpoint and connection checks: the
//! configuration-time check of an endpoint, the connect-time check of every
//! resolved or connected peer address, and name resolution that hands back
//! only checked addresses.
//!
//! Rules 1, 2 and 4–6 of the module documentation are applied here; the
//! redirect rule (3) is in `redirect`.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

use super::address::{classify, AddressClass};
use super::allowlist::Allowlist;
use super::endpoint::{is_localhost_name, Endpoint, Host, Scheme};
use super::error::PolicyError;
use crate::util::redact::redact;

const ALLOW_HINT: &str =
    "if this endpoint is trusted (a private MinIO, say), allow it with `--s3-allow <ip|cidr|host>`";
const METADATA_HINT: &str =
    "a metadata service is allowed only by its exact IP in `--s3-allow`, never by a CIDR or host name";

/// A resolver: host name and port to addresses. Injected so tests can fake DNS.
pub type Resolver<'a> = &'a dyn Fn(&str, u16) -> io::Result<Vec<IpAddr>>;

/// Resolve with the operating system (`getaddrinfo` through [`ToSocketAddrs`]).
pub fn system_resolver(host: &str, port: u16) -> io::Result<Vec<IpAddr>> {
    Ok((host, port).to_socket_addrs()?.map(|a| a.ip()).collect())
}

/// The outbound policy. `Policy::default()` is the strict one: an empty
/// allowlist, HTTPS only, no redirects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// What may be reached although not public (`--s3-allow`).
    pub allow: Allowlist,
    /// Allow plain HTTP to any allowed address, not only allowlisted loopback.
    pub allow_http: bool,
    /// Follow redirects, re-validating every hop.
    pub follow_redirects: bool,
}

impl Policy {
    /// Configuration-time check. An IP-literal host gets the full
    /// [`Self::check_peer`] check now; a host name gets the scheme and port
    /// checks now and its addresses at [`Self::resolve_and_check`], except
    /// `localhost` names (RFC 6761), which are loopback by definition.
    pub fn check_endpoint(&self, endpoint: &Endpoint) -> Result<(), PolicyError> {
        let name = match &endpoint.host {
            Host::Ip(ip) => return self.check_peer(endpoint, *ip),
            Host::Name(name) => name,
        };
        if is_localhost_name(name) {
            let listed = self.allow.allows_host(name)
                || self.allow.allows_ip(IpAddr::V4(Ipv4Addr::LOCALHOST))
                || self.allow.allows_ip(IpAddr::V6(Ipv6Addr::LOCALHOST));
            if !listed {
                return Err(PolicyError::AddressNotAllowed {
                    target: format!("`{endpoint}`"),
                    class: AddressClass::Loopback,
                    hint: ALLOW_HINT,
                });
            }
            return Ok(());
        }
        if endpoint.scheme == Scheme::Http && !self.allow_http {
            return Err(PolicyError::HttpNotAllowed {
                endpoint: endpoint.to_string(),
            });
        }
        let standard = endpoint.port == 443 || endpoint.port == 80;
        if !standard && !self.allow.allows_host(name) && !self.allow.has_ip_entries() {
            return Err(PolicyError::PortNotAllowed {
                endpoint: endpoint.to_string(),
                port: endpoint.port,
            });
        }
        Ok(())
    }

    /// Connect-time check of one peer address of `endpoint`: public, or
    /// allowlisted by IP/CIDR or by the endpoint's host name. A metadata
    /// address needs its exact IP on the allowlist. Non-standard ports need an
    /// allowlisted host; plain HTTP needs `allow_http` or an allowlisted
    /// loopback peer. Also call it with the connected socket's `peer_addr()`.
    pub fn check_peer(&self, endpoint: &Endpoint, peer: IpAddr) -> Result<(), PolicyError> {
        let class = classify(peer);
        let listed = self.allow.allows_ip(peer)
            || matches!(&endpoint.host, Host::Name(n) if self.allow.allows_host(n));
        let target = || match endpoint.host {
            Host::Name(_) => format!("`{endpoint}` (resolved to {peer})"),
            Host::Ip(_) => format!("`{endpoint}`"),
        };
        if class == AddressClass::Metadata && !self.allow.allows_exact_ip(peer) {
            return Err(PolicyError::AddressNotAllowed {
                target: target(),
                class,
                hint: METADATA_HINT,
            });
        }
        if class != AddressClass::Public && !listed {
            return Err(PolicyError::AddressNotAllowed {
                target: target(),
                class,
                hint: ALLOW_HINT,
            });
        }
        if endpoint.port != 443 && endpoint.port != 80 && !listed {
            return Err(PolicyError::PortNotAllowed {
                endpoint: endpoint.to_string(),
                port: endpoint.port,
            });
        }
        let loopback_ok = class == AddressClass::Loopback && listed;
        if endpoint.scheme == Scheme::Http && !self.allow_http && !loopback_ok {
            return Err(PolicyError::HttpNotAllowed {
                endpoint: endpoint.to_string(),
            });
        }
        Ok(())
    }

    /// Resolve `endpoint` (an IP literal is not resolved) and check every
    /// address; return them as socket addresses, deduplicated, in order.
    ///
    /// Every address must pass, not just one: a client may try any of them,
    /// and an attacker controlling DNS can answer with a public address next
    /// to a private one (or change the answer between two lookups, DNS
    /// rebinding). For the same reason the client must connect only to the
    /// addresses returned here, never hand the host name to code that
    /// resolves it again, and must not send S3 traffic through a proxy that
    /// resolves names itself.
    pub fn resolve_and_check(
        &self,
        endpoint: &Endpoint,
        resolver: Resolver<'_>,
    ) -> Result<Vec<SocketAddr>, PolicyError> {
        self.check_endpoint(endpoint)?;
        let ips = match &endpoint.host {
            Host::Ip(ip) => vec![*ip],
            Host::Name(name) => {
                let ips =
                    resolver(name.as_str(), endpoint.port).map_err(|e| PolicyError::Resolve {
                        host: name.clone(),
                        reason: redact(&e.to_string()),
                    })?;
                if ips.is_empty() {
                    return Err(PolicyError::Resolve {
                        host: name.clone(),
                        reason: "the name has no addresses".to_string(),
                    });
                }
                ips
            }
        };
        let mut out = Vec::with_capacity(ips.len());
        for ip in ips {
            self.check_peer(endpoint, ip)?;
            let addr = SocketAddr::new(ip, endpoint.port);
            if !out.contains(&addr) {
                out.push(addr);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{code, dns, ep, ip, policy, refused_class};
    use super::*;
    use AddressClass as C;

    #[test]
    fn empty_allowlist_allows_nothing() {
        let p = Policy::default();
        assert!(p.allow.is_empty());
        for host in ["localhost", "minio", "10.0.0.1", "::1", "x.example"] {
            assert!(!p.allow.allows_host(host), "{host}");
        }
        for (url, class) in [
            ("https://127.0.0.1", C::Loopback),
            ("https://[::1]", C::Loopback),
            ("https://localhost", C::Loopback),
            ("http://169.254.169.254", C::Metadata),
            ("https://[fd00:ec2::254]", C::Metadata),
            ("https://169.254.10.10", C::LinkLocal),
            ("https://[fe80::1]", C::LinkLocal),
            ("https://10.0.0.1", C::Private),
            ("https://172.16.0.1", C::Private),
            ("https://192.168.1.1", C::Private),
            ("https://[fd12::1]", C::UniqueLocal),
            ("https://[::ffff:192.168.1.1]", C::Private),
            ("https://0.0.0.0", C::Unspecified),
            ("https://100.64.0.1", C::SharedCgnat),
        ] {
            let r = p.check_endpoint(&ep(url));
            assert_eq!(refused_class(r.clone()), class, "{url}");
            assert!(r.unwrap_err().to_string().contains("--s3-allow"), "{url}");
        }
        assert!(p.check_endpoint(&ep("https://s3.amazonaws.com")).is_ok());
        assert!(p.check_endpoint(&ep("https://8.8.8.8")).is_ok());
        assert_eq!(
            code(p.check_endpoint(&ep("http://s3.amazonaws.com"))),
            "PC-S3-005"
        );
        assert_eq!(code(p.check_endpoint(&ep("http://8.8.8.8"))), "PC-S3-005");
        assert_eq!(
            code(p.check_endpoint(&ep("https://s3.example:8443"))),
            "PC-S3-009"
        );
        assert_eq!(
            code(p.check_endpoint(&ep("https://8.8.8.8:22"))),
            "PC-S3-009"
        );
    }

    #[test]
    fn allowlisted_loopback_may_use_http() {
        let p = policy(&["127.0.0.1"]);
        assert!(p.check_endpoint(&ep("http://127.0.0.1:9000")).is_ok());
        assert!(p.check_endpoint(&ep("http://localhost:9000")).is_ok());
        assert_eq!(
            refused_class(p.check_endpoint(&ep("http://[::1]:9000"))),
            C::Loopback
        );
        // localhost usually answers ::1 too; every answer must be allowed.
        let both = dns("localhost", &["::1", "127.0.0.1"]);
        assert_eq!(
            refused_class(p.resolve_and_check(&ep("http://localhost:9000"), &both)),
            C::Loopback
        );
        let p = policy(&["localhost"]);
        let addrs = p
            .resolve_and_check(&ep("http://localhost:9000"), &both)
            .unwrap();
        assert_eq!(addrs.len(), 2);
        // Plain HTTP off loopback needs allow_http even when allowlisted.
        let mut p = policy(&["10.0.0.0/8"]);
        assert_eq!(
            code(p.check_endpoint(&ep("http://10.0.0.5:9000"))),
            "PC-S3-005"
        );
        assert!(p.check_endpoint(&ep("https://10.0.0.5:9000")).is_ok());
        p.allow_http = true;
        assert!(p.check_endpoint(&ep("http://10.0.0.5:9000")).is_ok());
    }

    #[test]
    fn metadata_needs_its_exact_ip() {
        let p = policy(&["169.254.0.0/16", "fd00:ec2::/32", "meta.example"]);
        assert_eq!(
            refused_class(p.check_endpoint(&ep("https://169.254.169.254"))),
            C::Metadata
        );
        assert_eq!(
            refused_class(p.check_endpoint(&ep("https://[fd00:ec2::254]"))),
            C::Metadata
        );
        assert!(p.check_endpoint(&ep("https://169.254.1.1")).is_ok());
        let rebound = dns("meta.example", &["169.254.169.254"]);
        assert_eq!(
            refused_class(p.resolve_and_check(&ep("https://meta.example"), &rebound)),
            C::Metadata
        );
        let p = Policy {
            allow_http: true,
            ..policy(&["169.254.169.254"])
        };
        assert!(p.check_endpoint(&ep("http://169.254.169.254")).is_ok());
        assert!(p
            .check_endpoint(&ep("http://[::ffff:169.254.169.254]"))
            .is_ok());
    }

    #[test]
    fn resolved_addresses_are_all_checked() {
        let p = Policy::default();
        let e = ep("https://data.example");
        let private = dns("data.example", &["10.0.0.5"]);
        let r = p.resolve_and_check(&e, &private);
        assert_eq!(refused_class(r.clone()), C::Private);
        assert!(r.unwrap_err().to_string().contains("10.0.0.5"));
        let mixed = dns("data.example", &["52.216.8.1", "10.0.0.5"]);
        assert_eq!(refused_class(p.resolve_and_check(&e, &mixed)), C::Private);
        let mapped = dns("data.example", &["::ffff:127.0.0.1"]);
        assert_eq!(refused_class(p.resolve_and_check(&e, &mapped)), C::Loopback);
        let public = dns("data.example", &["52.216.8.1", "52.216.8.2", "52.216.8.1"]);
        let addrs = p.resolve_and_check(&e, &public).unwrap();
        assert_eq!(
            addrs,
            vec![
                SocketAddr::new(ip("52.216.8.1"), 443),
                SocketAddr::new(ip("52.216.8.2"), 443)
            ]
        );
        // Allowed by host name or by CIDR.
        let e = ep("https://minio.internal:9000");
        let minio = dns("minio.internal", &["10.0.0.5"]);
        assert!(policy(&["minio.internal"])
            .resolve_and_check(&e, &minio)
            .is_ok());
        assert!(policy(&["10.0.0.0/8"])
            .resolve_and_check(&e, &minio)
            .is_ok());
        assert_eq!(
            refused_class(policy(&["192.168.0.0/16"]).resolve_and_check(&e, &minio)),
            C::Private
        );
        // Resolution failures.
        assert_eq!(
            code(p.resolve_and_check(&ep("https://other.example"), &private)),
            "PC-S3-008"
        );
        let none = dns("data.example", &[]);
        assert_eq!(
            code(p.resolve_and_check(&ep("https://data.example"), &none)),
            "PC-S3-008"
        );
        // IP literals are never resolved.
        let no_dns =
            |_: &str, _: u16| -> io::Result<Vec<IpAddr>> { panic!("resolved an IP literal") };
        assert_eq!(
            p.resolve_and_check(&ep("https://8.8.8.8"), &no_dns)
                .unwrap()
                .len(),
            1
        );
    }
}
