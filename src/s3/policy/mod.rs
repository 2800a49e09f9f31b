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
//!    enabled, every hop is re-validated and the headers
//!    [`is_origin_bound_header`] names are dropped
//!    when the origin changes.
//! 4. Plain HTTP only to an allowlisted loopback address, unless enabled.
//! 5. Only ports 443 and 80 unless the host is allowlisted ("未允许端口").
//! 6. Metadata services ([`METADATA_IPS`]) need their exact IP on the
//!    allowlist: a CIDR or a host name never unlocks them.
//!
//! Errors carry stable `PC-S3-*` codes and never echo credentials: refused
//! text goes through `util::redact`, and an [`Endpoint`] holds nothing secret.
//!
//! # Files
//!
//! - `error`: [`PolicyError`] and its codes.
//! - `address`: address classes ([`classify`], [`canonical_ip`]).
//! - `uri`: `s3://` Dataset URIs ([`S3Uri`]) and signed-query detection.
//! - `endpoint`: endpoint origins ([`Endpoint`]) and URL splitting.
//! - `allowlist`: the `--s3-allow` entries ([`Allowlist`]).
//! - `check`: the [`Policy`] and its endpoint, peer and resolution checks.
//! - `redirect`: redirect decisions and the headers bound to an origin.

mod address;
mod allowlist;
mod check;
mod endpoint;
mod error;
mod redirect;
#[cfg(test)]
mod testutil;
mod uri;

pub use address::{canonical_ip, classify, AddressClass, METADATA_IPS};
pub use allowlist::{AllowEntry, Allowlist};
pub use check::{system_resolver, Policy, Resolver};
pub use endpoint::{Endpoint, Host, Scheme};
pub use error::PolicyError;
pub use redirect::{is_origin_bound_header, RedirectDecision, MAX_REDIRECTS};
pub use uri::{is_signed_query, S3Uri};
