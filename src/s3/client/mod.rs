//! The S3 client: every request pChronicle sends to an S3 endpoint goes
//! through [`Client::send`], which applies the outbound
//! [`Policy`](crate::s3::Policy).
//!
//! rust-s3 supplies the AWS pieces — the credential chain (environment,
//! shared profile, web identity, container and instance role), the region
//! type, SigV4 signing and the ListObjectsV2 response types. The transport is
//! ours, because the policy needs control rust-s3's own transport does not
//! give: the HTTP client resolves names only through the policy's resolver
//! (every address checked, connections made only to checked addresses),
//! ignores proxy variables, never follows redirects by itself, and checks
//! the peer address of every response again.
//!
//! Configuration comes from the environment: `AWS_ENDPOINT_URL_S3` or
//! `AWS_ENDPOINT_URL` (default: AWS's regional endpoint), `AWS_REGION` or
//! `AWS_DEFAULT_REGION` (default `us-east-1`), `AWS_S3_FORCE_PATH_STYLE`
//! (default: path style for a custom endpoint, virtual-hosted for AWS), and
//! `PCHRONICLE_S3_TIMEOUT` / `PCHRONICLE_S3_RETRIES` for the request
//! timeout (seconds, default 30) and retry count (default 4).
//!
//! # Files
//!
//! - `config`: [`ClientConfig`], credentials, and the process's client.
//! - `transport`: [`Client`], sending, retries, the resolver and peer checks.
//! - `sign`: SigV4 signing.
//! - `ops`: list, get, put, copy and delete, each implemented once (async)
//!   with blocking wrappers for synchronous callers.
//! - `reader`: [`ObjectReader`], a ranged `std::io::Read` over one object.
//! - `error`: [`S3Error`] and how an error answer becomes one.

mod config;
mod error;
mod ops;
mod reader;
mod sign;
mod transport;

pub use config::{cache_identity, client, configure, traffic, ClientConfig};
pub use error::S3Error;
pub use ops::{GetRequest, ListPage, ListedObject, ObjectPin, PutMode, RangeRead};
pub use reader::{s3_error_of, ObjectReadError, ObjectReader};
pub use transport::{Client, Response};
