//! The outbound-connection policy for S3 Datasets (seed §5.2).
//!
//! # Threat model
//!
//! An `s3://bucket/prefix` Dataset URI and an optional endpoint URL (as from
//! `AWS_ENDPOINT_URL`) come from configuration that a shared Warehouse loads
//! for other people. Unchecked, they are a server-side request forgery (SSRF)
//! primitive: the endpoint `http://169.254.169.254` reads the instance's cloud
//! credentials, and `http://10.0.0.7:6379` probes the private network. Naive
//! checks are also bypassed by:
//!
//! - **DNS**: a public-looking name that resolves to a private address, or
//!   whose answer changes between the check and the connection (rebinding);
//! - **redirects**: a public endpoint answering `307` with a private
//!   `Location`, while the client re-sends its signed `Authorization` header;
//! - **spelling**: `127.1`, `2130706433`, `[::ffff:10.0.0.1]`, `user:pass@`.
//!
//! # Rules
//!
//! 1. Configuration time ([`S3Uri::parse`], [`Endpoint::parse`],
//!    [`Policy::check_endpoint`]): only `s3://` URIs and `http(s)://`
//!    endpoints; no user information, query strings or fragments; an IP
//!    literal must be public or allowlisted.
//! 2. Connect time ([`Policy::resolve_and_check`], [`Policy::check_peer`]):
//!    every resolved address must be public or allowlisted (by IP, CIDR or the
//!    endpoint's host name); connect only to the addresses returned.
//! 3. Redirects ([`Policy::check_redirect`]) are refused unless enabled; if
//!    enabled, every hop is re-validated and [`SENSITIVE_HEADERS`] are dropped
//!    when the origin changes.
//! 4. Plain HTTP only to an allowlisted loopback address, unless enabled.
//! 5. Only ports 443 and 80 unless the host is allowlisted ("未允许端口").
//! 6. Metadata services ([`METADATA_IPS`]) need their exact IP on the
//!    allowlist: a CIDR or a host name never unlocks them.
//!
//! Errors carry stable `PC-S3-*` codes and never echo credentials: refused
//! text goes through [`redact`], and an [`Endpoint`] holds nothing secret.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::str::FromStr;

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

const ALLOW_HINT: &str =
    "if this endpoint is trusted (a private MinIO, say), allow it with `--s3-allow <ip|cidr|host>`";
const METADATA_HINT: &str =
    "a metadata service is allowed only by its exact IP in `--s3-allow`, never by a CIDR or host name";
const USERINFO_PART: &str = "user information (`user:password@`)";
const SIGNED_PART: &str = "a signed query string (`X-Amz-Signature`, `X-Amz-Credential`, …)";

/// Query parameter names that mark a pre-signed or credential-bearing URL.
const SIGNED_QUERY_KEYS: &[&str] = &[
    "x-amz-signature",
    "x-amz-credential",
    "x-amz-security-token",
    "awsaccesskeyid",
    "signature",
    "sig",
    "token",
    "access_token",
    "x-goog-signature",
    "x-goog-credential",
];

/// True when a query string (without `?`) carries a signature or token.
pub fn is_signed_query(query: &str) -> bool {
    query.split('&').any(|pair| {
        let key = pair.split('=').next().unwrap_or("").to_ascii_lowercase();
        SIGNED_QUERY_KEYS.contains(&key.as_str())
    })
}

// ------------------------------------------------------------ address classes

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

// ---------------------------------------------------------------- S3 URIs

/// A parsed `s3://bucket/prefix` Dataset URI.
///
/// The canonical form has the scheme `s3`, the bucket (which must already be
/// lowercase), and a prefix with no leading `/`, empty segments collapsed and,
/// when not empty, exactly one trailing `/`. A Dataset is a directory, so
/// `s3://b/runs` and `s3://b/runs/` are the same Dataset, and listing with
/// the prefix `runs/` never picks up `runs-old/`. The prefix is used as
/// written, without percent-decoding (like the AWS CLI). `Display` prints the
/// canonical form, which parses back to the same value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct S3Uri {
    bucket: String,
    prefix: String,
}

impl S3Uri {
    /// Parse `s3://bucket[/prefix]`. Refuses other schemes, user information,
    /// query strings (signed URLs with `X-Amz-Signature` among them),
    /// fragments, invalid bucket names and `.`/`..` prefix segments.
    pub fn parse(input: &str) -> Result<Self, PolicyError> {
        let invalid = |reason: &'static str| PolicyError::InvalidS3Uri {
            uri: redact(input),
            reason,
        };
        if input.chars().any(char::is_control) {
            return Err(invalid("the URI contains control characters"));
        }
        let Some((scheme, rest)) = input.split_once("://") else {
            return Err(invalid("expected `s3://bucket/prefix`"));
        };
        if !scheme.eq_ignore_ascii_case("s3") {
            return Err(invalid("only `s3://bucket/prefix` URIs name S3 Datasets"));
        }
        let (bucket, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
        if bucket.contains('@') {
            return Err(PolicyError::CredentialsInUri {
                what: "an S3 URI",
                part: USERINFO_PART,
            });
        }
        if let Some((_, query)) = tail.split_once('?') {
            if is_signed_query(query) {
                return Err(PolicyError::CredentialsInUri {
                    what: "an S3 URI",
                    part: SIGNED_PART,
                });
            }
            return Err(invalid(
                "an S3 URI has no query string (signed URLs are refused too)",
            ));
        }
        if tail.contains('#') {
            return Err(invalid("an S3 URI has no fragment (`#…`)"));
        }
        check_bucket(bucket).map_err(invalid)?;
        let mut prefix = String::new();
        for segment in tail.split('/').filter(|s| !s.is_empty()) {
            if segment == "." || segment == ".." {
                return Err(invalid(
                    "`.` and `..` segments are not allowed in the prefix",
                ));
            }
            prefix.push_str(segment);
            prefix.push('/');
        }
        if prefix.len() > 1024 {
            return Err(invalid(
                "the prefix is longer than S3's 1024-byte key limit",
            ));
        }
        Ok(S3Uri {
            bucket: bucket.to_string(),
            prefix,
        })
    }

    /// The bucket name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The key prefix: empty (the whole bucket) or ending in `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

/// S3 bucket naming rules (general-purpose buckets).
fn check_bucket(b: &str) -> Result<(), &'static str> {
    if b.is_empty() {
        return Err("the bucket name is missing");
    }
    if !(3..=63).contains(&b.len()) {
        return Err("a bucket name has 3 to 63 characters");
    }
    if b.bytes().any(|c| c.is_ascii_uppercase()) {
        return Err("bucket names are lowercase");
    }
    if !b
        .bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'-')
    {
        return Err("a bucket name has only lowercase letters, digits, `.` and `-`");
    }
    let bytes = b.as_bytes();
    if !bytes[0].is_ascii_alphanumeric() || !bytes[b.len() - 1].is_ascii_alphanumeric() {
        return Err("a bucket name starts and ends with a letter or digit");
    }
    if b.contains("..") {
        return Err("a bucket name has no two adjacent `.`");
    }
    if b.parse::<Ipv4Addr>().is_ok() {
        return Err("a bucket name is not an IP address");
    }
    if b.starts_with("xn--") || b.ends_with("-s3alias") || b.ends_with("--ol-s3") {
        return Err("the bucket name uses a prefix or suffix that S3 reserves");
    }
    Ok(())
}

impl fmt::Display for S3Uri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.prefix)
    }
}

impl FromStr for S3Uri {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        S3Uri::parse(s)
    }
}

// ---------------------------------------------------------------- endpoints

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
    scheme: Scheme,
    host: Host,
    port: u16,
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
struct Url<'a> {
    scheme: &'a str,
    authority: &'a str,
    path: &'a str,
    query: Option<&'a str>,
    fragment: Option<&'a str>,
}

fn split_url(input: &str) -> Result<Url<'_>, &'static str> {
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
    fn origin(&self) -> Result<Endpoint, &'static str> {
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
fn normalize_host_name(name: &str) -> Result<String, &'static str> {
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

fn is_localhost_name(name: &str) -> bool {
    name == "localhost" || name.ends_with(".localhost")
}

/// An IP literal, IPv6 optionally in brackets.
fn parse_ip_literal(s: &str) -> Option<IpAddr> {
    match s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        Some(v6) => v6.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
        None => s.parse().ok(),
    }
}

// ---------------------------------------------------------------- allowlist

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
    fn allows_exact_ip(&self, ip: IpAddr) -> bool {
        self.entries.contains(&AllowEntry::Ip(canonical_ip(ip)))
    }

    fn has_ip_entries(&self) -> bool {
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

// ---------------------------------------------------------------- the policy

/// Headers that must not cross to another origin on a redirect. Every other
/// `x-amz-*` header goes too ([`is_sensitive_header`]): they belong to the
/// SigV4 signature, which must be recomputed for the new origin anyway, and
/// the SSE-C headers carry the customer's encryption key.
pub const SENSITIVE_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-amz-security-token",
    "x-amz-date",
    "x-amz-content-sha256",
    "x-amz-server-side-encryption-customer-key",
    "x-amz-server-side-encryption-customer-key-md5",
    "x-amz-copy-source-server-side-encryption-customer-key",
    "x-amz-copy-source-server-side-encryption-customer-key-md5",
];

/// Whether a header (any case) must be dropped on a cross-origin redirect.
pub fn is_sensitive_header(name: &str) -> bool {
    let name = name.trim().to_ascii_lowercase();
    SENSITIVE_HEADERS.contains(&name.as_str()) || name.starts_with("x-amz-")
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
    /// The origin changed: remove every header [`is_sensitive_header`] names
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

// ---------------------------------------------------------------- redaction

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
    use AddressClass as C;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn ep(s: &str) -> Endpoint {
        Endpoint::parse(s).unwrap()
    }

    fn policy(allow: &[&str]) -> Policy {
        Policy {
            allow: Allowlist::parse_entries(allow.iter().copied()).unwrap(),
            ..Policy::default()
        }
    }

    /// The class named by a `PC-S3-004` error.
    fn refused_class(r: Result<impl fmt::Debug, PolicyError>) -> AddressClass {
        match r {
            Err(PolicyError::AddressNotAllowed { class, .. }) => class,
            other => panic!("expected PC-S3-004, got {other:?}"),
        }
    }

    fn code<T: fmt::Debug>(r: Result<T, PolicyError>) -> &'static str {
        r.unwrap_err().code()
    }

    /// A fake DNS that knows one name.
    fn dns(name: &'static str, answers: &[&str]) -> impl Fn(&str, u16) -> io::Result<Vec<IpAddr>> {
        let ips: Vec<IpAddr> = answers.iter().map(|s| ip(s)).collect();
        move |host: &str, _port: u16| {
            if host == name {
                Ok(ips.clone())
            } else {
                Err(io::Error::new(io::ErrorKind::NotFound, "no such host"))
            }
        }
    }

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

    #[test]
    fn s3_uris_normalise_and_round_trip() {
        for (given, canonical) in [
            ("s3://bucket", "s3://bucket/"),
            ("s3://bucket/", "s3://bucket/"),
            ("S3://bucket/runs", "s3://bucket/runs/"),
            ("s3://bucket//runs///2024/", "s3://bucket/runs/2024/"),
            ("s3://my.bucket-1/a b/c", "s3://my.bucket-1/a b/c/"),
        ] {
            let uri = S3Uri::parse(given).unwrap();
            assert_eq!(uri.to_string(), canonical, "{given}");
            assert_eq!(S3Uri::parse(canonical).unwrap(), uri, "{given}");
        }
        let uri = S3Uri::parse("s3://bucket/runs").unwrap();
        assert_eq!((uri.bucket(), uri.prefix()), ("bucket", "runs/"));
    }

    #[test]
    fn s3_uris_refused() {
        let long = format!("s3://{}", "a".repeat(64));
        for bad in [
            "https://bucket/x",
            "s3a://bucket/x",
            "s3:/bucket",
            "bucket/x",
            "s3://",
            "s3://ab",
            long.as_str(),
            "s3://Bucket",
            "s3://-bucket",
            "s3://bucket-",
            "s3://b_ucket",
            "s3://my..bucket",
            "s3://192.168.0.1",
            "s3://xn--bucket",
            "s3://bucket/a/../b",
            "s3://bucket/./a",
            "s3://bucket/x#frag",
            "s3://bucket/x?versionId=3",
            "s3://bucket/x\n",
        ] {
            assert_eq!(code(S3Uri::parse(bad)), "PC-S3-001", "{bad:?}");
        }
        assert!(S3Uri::parse(&format!("s3://{}", "a".repeat(63))).is_ok());
    }

    #[test]
    fn embedded_credentials_are_refused_without_echo() {
        for bad in [
            "s3://AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMIsecret@bucket/x",
            "s3://bucket/x?X-Amz-Credential=AKIAIOSFODNN7EXAMPLE&X-Amz-Signature=deadbeef",
            "https://AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMIsecret@minio.example",
            "https://minio.example/?X-Amz-Signature=deadbeef",
        ] {
            let err = match S3Uri::parse(bad) {
                Err(e) if bad.starts_with("s3") => e,
                _ => Endpoint::parse(bad).unwrap_err(),
            };
            let msg = err.to_string();
            assert_eq!(err.code(), "PC-S3-003", "{bad}");
            for secret in ["wJalr", "deadbeef", "AKIAIOSFODNN7EXAMPLE"] {
                assert!(!msg.contains(secret), "{msg}");
            }
        }
    }

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
            assert!(is_sensitive_header(h), "{h}");
        }
        assert!(!is_sensitive_header("Range") && !is_sensitive_header("Host"));
    }

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

    mod prop {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn s3_uri_round_trips(bucket in "[a-z0-9][a-z0-9-]{1,20}[a-z0-9]", path in "[a-zA-Z0-9_/ .-]{0,30}") {
                if let Ok(uri) = S3Uri::parse(&format!("s3://{bucket}/{path}")) {
                    prop_assert_eq!(S3Uri::parse(&uri.to_string()).unwrap(), uri);
                }
            }

            #[test]
            fn redact_is_idempotent(text in "\\PC{0,60}") {
                let once = redact(&text);
                prop_assert_eq!(redact(&once), once);
            }
        }
    }
}
