//! S3 Datasets: `s3://bucket/prefix` URIs, the outbound-connection policy
//! every S3 connection must pass (seed §5.2), and the client that applies it.
//!
//! `policy` parses S3 Dataset URIs and endpoint URLs, holds the `--s3-allow`
//! allowlist, classifies addresses, and decides — in one place — whether a
//! configured endpoint, a resolved peer or a redirect may be used. Text it
//! echoes in errors goes through `util::redact`.
//!
//! `client` is the only code that talks to S3: it checks the endpoint at
//! configuration time, connects only to addresses the policy accepted, checks
//! every response's peer again, and passes every redirect through the policy.
//! `lance` puts Lance's object-store access on that same client.
//!
//! Not here: what the objects mean (Sources, Storyline stores and their
//! publication are `catalog` and `store`), local caches of S3 Datasets, and
//! any other outbound HTTP (the gateway's upstreams).
//!
//! May call: `util` and external crates. Everything else in the crate may
//! call it.

pub mod client;
pub mod lance;
pub mod policy;

pub use client::{
    cache_identity, client, configure, traffic, Client, ClientConfig, ListedObject, ObjectPin,
    ObjectReader, PutMode, S3Error,
};
pub use policy::{
    canonical_ip, classify, is_origin_bound_header, system_resolver, AddressClass, AllowEntry,
    Allowlist, Endpoint, Host, Policy, PolicyError, RedirectDecision, Resolver, S3Uri, Scheme,
    MAX_REDIRECTS, METADATA_IPS,
};
