//! Address classes: which kind of network an IP address belongs to
//! (public, loopback, private, link-local, cloud metadata, …), after
//! unwrapping the IPv6 spellings of IPv4 addresses.
//!
//! Only a public address is reachable without an allowlist entry, so this
//! is the table every connection check ([`super::Policy::check_peer`])
//! starts from.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What kind of network an address belongs to. Only [`AddressClass::Public`]
/// is reachable without an allowlist entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressClass {
    /// Globally routable unicast.
    Public,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `169.254.0.0/16`, `fe80::/10`.
    LinkLocal,
    /// A cloud metadata or credential service ([`METADATA_IPS`]).
    Metadata,
    /// RFC 1918: `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`.
    Private,
    /// IPv6 unique local `fc00::/7` (and the deprecated site-local `fec0::/10`).
    UniqueLocal,
    /// `0.0.0.0/8` ("this network", which Linux connects to itself) and `::`.
    Unspecified,
    /// RFC 6598 shared address space `100.64.0.0/10` (carrier-grade NAT).
    SharedCgnat,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `240.0.0.0/4` with the broadcast address, `192.0.0.0/24`,
    /// `198.18.0.0/15`, and IPv6 outside global unicast `2000::/3`.
    Reserved,
    /// `192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24`, `2001:db8::/32`.
    Documentation,
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddressClass::Public => "public",
            AddressClass::Loopback => "loopback",
            AddressClass::LinkLocal => "link-local",
            AddressClass::Metadata => "cloud metadata",
            AddressClass::Private => "private (RFC 1918)",
            AddressClass::UniqueLocal => "unique local (IPv6 ULA)",
            AddressClass::Unspecified => "unspecified",
            AddressClass::SharedCgnat => "shared (carrier-grade NAT)",
            AddressClass::Multicast => "multicast",
            AddressClass::Reserved => "reserved",
            AddressClass::Documentation => "documentation",
        })
    }
}

/// Instance-metadata and credential services: AWS/GCP/Azure/OpenStack IMDS,
/// the ECS task-credential and EKS Pod Identity agents, AWS IMDS over IPv6,
/// and Alibaba Cloud's metadata service.
pub const METADATA_IPS: &[IpAddr] = &[
    IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
    IpAddr::V4(Ipv4Addr::new(169, 254, 170, 2)),
    IpAddr::V4(Ipv4Addr::new(169, 254, 170, 23)),
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23)),
];

/// Unwrap an IPv6 address that stands for an IPv4 one: IPv4-mapped
/// `::ffff:a.b.c.d`, the deprecated IPv4-compatible `::a.b.c.d`, and NAT64
/// `64:ff9b::a.b.c.d` (a translator forwards it to `a.b.c.d`). Other
/// addresses are returned unchanged.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else { return ip };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return IpAddr::V4(v4);
    }
    let s = v6.segments();
    let [.., a, b, c, d] = v6.octets();
    let compatible = s[..6].iter().all(|&x| x == 0) && !v6.is_unspecified() && !v6.is_loopback();
    let nat64 = s[0] == 0x64 && s[1] == 0xff9b && s[2..6].iter().all(|&x| x == 0);
    if compatible || nat64 {
        IpAddr::V4(Ipv4Addr::new(a, b, c, d))
    } else {
        ip
    }
}

/// Classify an address, after [`canonical_ip`]. Metadata services are
/// recognised before the link-local and unique-local ranges that hold them.
pub fn classify(ip: IpAddr) -> AddressClass {
    let ip = canonical_ip(ip);
    if METADATA_IPS.contains(&ip) {
        return AddressClass::Metadata;
    }
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    use AddressClass as C;
    match ip.octets() {
        [0, ..] => C::Unspecified,
        [127, ..] => C::Loopback,
        [169, 254, ..] => C::LinkLocal,
        [10, ..] | [172, 16..=31, ..] | [192, 168, ..] => C::Private,
        [100, 64..=127, ..] => C::SharedCgnat,
        [224..=239, ..] => C::Multicast,
        [240..=255, ..] => C::Reserved,
        [192, 0, 2, _] | [198, 51, 100, _] | [203, 0, 113, _] => C::Documentation,
        [192, 0, 0, _] | [198, 18..=19, ..] => C::Reserved,
        _ => C::Public,
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    use AddressClass as C;
    let [s0, s1, ..] = ip.segments();
    if ip.is_unspecified() {
        C::Unspecified
    } else if ip.is_loopback() {
        C::Loopback
    } else if (s0 & 0xffc0) == 0xfe80 {
        C::LinkLocal
    } else if (s0 & 0xfe00) == 0xfc00 || (s0 & 0xffc0) == 0xfec0 {
        C::UniqueLocal
    } else if (s0 & 0xff00) == 0xff00 {
        C::Multicast
    } else if s0 == 0x2001 && s1 == 0x0db8 {
        C::Documentation
    } else if (s0 & 0xe000) == 0x2000 {
        C::Public
    } else {
        C::Reserved
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::ip;
    use super::*;
    use AddressClass as C;

    #[test]
    fn classify_table() {
        for (addr, class) in [
            ("8.8.8.8", C::Public),
            ("52.216.8.1", C::Public),
            ("2606:4700::1111", C::Public),
            ("127.0.0.1", C::Loopback),
            ("127.255.255.254", C::Loopback),
            ("::1", C::Loopback),
            ("169.254.0.1", C::LinkLocal),
            ("fe80::1", C::LinkLocal),
            ("169.254.169.254", C::Metadata),
            ("169.254.170.2", C::Metadata),
            ("fd00:ec2::254", C::Metadata),
            ("100.100.100.200", C::Metadata),
            ("9.255.255.255", C::Public),
            ("10.0.0.0", C::Private),
            ("10.255.255.255", C::Private),
            ("11.0.0.0", C::Public),
            ("172.15.255.255", C::Public),
            ("172.16.0.0", C::Private),
            ("172.31.255.255", C::Private),
            ("172.32.0.0", C::Public),
            ("192.167.255.255", C::Public),
            ("192.168.0.0", C::Private),
            ("192.168.255.255", C::Private),
            ("192.169.0.0", C::Public),
            ("fc00::1", C::UniqueLocal),
            ("fd12:3456::1", C::UniqueLocal),
            ("0.0.0.0", C::Unspecified),
            ("::", C::Unspecified),
            ("100.64.0.1", C::SharedCgnat),
            ("224.0.0.1", C::Multicast),
            ("ff02::1", C::Multicast),
            ("240.0.0.1", C::Reserved),
            ("255.255.255.255", C::Reserved),
            ("192.0.2.1", C::Documentation),
            ("2001:db8::1", C::Documentation),
            ("::ffff:10.0.0.1", C::Private),
            ("::ffff:127.0.0.1", C::Loopback),
            ("::ffff:169.254.169.254", C::Metadata),
            ("::10.0.0.1", C::Private),
            ("64:ff9b::10.0.0.1", C::Private),
            ("64:ff9b::8.8.8.8", C::Public),
        ] {
            assert_eq!(classify(ip(addr)), class, "{addr}");
        }
    }
}
