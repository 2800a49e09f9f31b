//! Helpers shared by the policy's unit tests: address and endpoint
//! literals, a policy from allowlist entries, a fake DNS, and the code or
//! address class a refusal carries.

use std::fmt;
use std::io;
use std::net::IpAddr;

use super::{AddressClass, Allowlist, Endpoint, Policy, PolicyError};

pub(super) fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

pub(super) fn ep(s: &str) -> Endpoint {
    Endpoint::parse(s).unwrap()
}

pub(super) fn policy(allow: &[&str]) -> Policy {
    Policy {
        allow: Allowlist::parse_entries(allow.iter().copied()).unwrap(),
        ..Policy::default()
    }
}

/// The class named by a `PC-S3-004` error.
pub(super) fn refused_class(r: Result<impl fmt::Debug, PolicyError>) -> AddressClass {
    match r {
        Err(PolicyError::AddressNotAllowed { class, .. }) => class,
        other => panic!("expected PC-S3-004, got {other:?}"),
    }
}

pub(super) fn code<T: fmt::Debug>(r: Result<T, PolicyError>) -> &'static str {
    r.unwrap_err().code()
}

/// A fake DNS that knows one name.
pub(super) fn dns(
    name: &'static str,
    answers: &[&str],
) -> impl Fn(&str, u16) -> io::Result<Vec<IpAddr>> {
    let ips: Vec<IpAddr> = answers.iter().map(|s| ip(s)).collect();
    move |host: &str, _port: u16| {
        if host == name {
            Ok(ips.clone())
        } else {
            Err(io::Error::new(io::ErrorKind::NotFound, "no such host"))
        }
    }
}
