//! S3 Datasets: `s3://bucket/prefix` URIs and the outbound-connection policy
//! every S3 connection must pass (seed §5.2).
//!
//! What it does: parses S3 Dataset URIs and endpoint URLs, holds the
//! `--s3-allow` allowlist, classifies addresses, and decides — in one place —
//! whether a configured endpoint, a resolved peer or a redirect may be used.
//! It also redacts credentials from text meant for errors and logs.
//!
//! What it doesn't: open connections, sign requests or read credentials. The
//! client that does must call [`Policy::check_endpoint`] at configuration
//! time, connect only to the addresses [`Policy::resolve_and_check`] returns,
//! and pass every redirect through [`Policy::check_redirect`].
//!
//! May call: `std` only. Everything else in the crate may call it.

pub mod policy;

pub use policy::{
    canonical_ip, classify, is_sensitive_header, redact, system_resolver, AddressClass, AllowEntry,
    Allowlist, Endpoint, Host, Policy, PolicyError, RedirectDecision, Resolver, S3Uri, Scheme,
    MAX_REDIRECTS, METADATA_IPS, SENSITIVE_HEADERS,
};
