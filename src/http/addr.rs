//! Loopback addresses: where pChronicle's servers may listen, and which
//! Host headers name this machine.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

/// Resolve a listen address (`HOST:PORT`, an IP or `localhost`) to one
/// loopback address; the error is the reason, for the caller's code. Servers
/// of pChronicle have no authentication: they never listen elsewhere.
pub fn listen_addr(given: &str) -> Result<SocketAddr, String> {
    let bad = |reason: &str| reason.to_string();
    let addrs: Vec<SocketAddr> = if let Ok(a) = given.parse::<SocketAddr>() {
        vec![a]
    } else {
        let (host, port) = given
            .rsplit_once(':')
            .ok_or_else(|| bad("give HOST:PORT, e.g. 127.0.0.1:8765"))?;
        if host != "localhost" {
            return Err(bad(
                "give an IP address (127.0.0.1 or [::1]) or `localhost`, not a host name",
            ));
        }
        let port: u16 = port.parse().map_err(|_| bad("the port is not a number"))?;
        (host, port)
            .to_socket_addrs()
            .map_err(|e| bad(&e.to_string()))?
            .collect()
    };
    let addr = addrs
        .into_iter()
        .find(|a| is_loopback(a.ip()))
        .ok_or_else(|| {
            bad("pChronicle servers have no authentication and listen on loopback only (127.0.0.0/8 or ::1); put a reverse proxy in front to share them")
        })?;
    Ok(addr)
}

/// True for loopback addresses, IPv4-mapped ones included.
pub fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// The name part of a Host header, lower case, without port or brackets.
pub fn host_name(host: &str) -> String {
    let h = host.trim();
    let name = if let Some(rest) = h.strip_prefix('[') {
        rest.split_once(']').map_or(rest, |(ip, _)| ip)
    } else {
        h.rsplit_once(':').map_or(h, |(n, _)| n)
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// True when a Host header names a loopback address or `localhost`.
pub fn loopback_host(host: &str) -> bool {
    let h = host.trim();
    let name = if let Some(rest) = h.strip_prefix('[') {
        match rest.split_once(']') {
            Some((ip, _)) => ip,
            None => return false,
        }
    } else {
        h.rsplit_once(':').map_or(h, |(n, port)| {
            if port.bytes().all(|c| c.is_ascii_digit()) {
                n
            } else {
                h
            }
        })
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<IpAddr>().is_ok_and(is_loopback)
}
