//! Client configuration: where S3 is and how to reach it ([`ClientConfig`],
//! read from the environment), the credentials from the standard AWS chain,
//! and the process's one client built from both and the configured policy.
//!
//! Everything the environment decides is read here, so the transport and
//! the operations see plain values.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::s3::policy::{Endpoint, Policy, S3Uri};

use super::error::S3Error;
use super::transport::Client;

/// Process-wide S3 options set by the command line before any S3 use.
static POLICY: OnceLock<Policy> = OnceLock::new();
static CLIENT: OnceLock<Result<Arc<Client>, S3Error>> = OnceLock::new();

/// Set the outbound policy (`--s3-allow`, settings). The first call wins;
/// without one the strict default applies.
pub fn configure(policy: Policy) {
    let _ = POLICY.set(policy);
}

/// The process's S3 client, built on first use from the environment and the
/// configured policy. Endpoint checks happen here, once.
pub fn client() -> Result<Arc<Client>, S3Error> {
    CLIENT
        .get_or_init(|| {
            let policy = POLICY.get().cloned().unwrap_or_default();
            Client::from_env(policy).map(Arc::new)
        })
        .clone()
}

/// What local caches of an S3 Dataset are keyed by: the Dataset URI and the
/// endpoint serving it (one bucket name on two endpoints is two Datasets'
/// worth of objects).
pub fn cache_identity(uri: &S3Uri) -> String {
    let endpoint = ClientConfig::from_env()
        .ok()
        .and_then(|c| c.endpoint.map(|e| e.to_string()))
        .unwrap_or_else(|| "aws".to_string());
    format!("{uri} at {endpoint}")
}

/// Bytes and requests sent through the process's client, for reports.
pub fn traffic() -> Option<(u64, u64)> {
    match CLIENT.get() {
        Some(Ok(c)) => Some((
            c.requests.load(Ordering::Relaxed),
            c.bytes.load(Ordering::Relaxed),
        )),
        _ => None,
    }
}

/// Where and how to reach S3 (see [`ClientConfig::from_env`]).
#[derive(Clone)]
pub struct ClientConfig {
    /// A custom endpoint origin; `None` is AWS's regional endpoint.
    pub endpoint: Option<Endpoint>,
    /// The signing region.
    pub region: String,
    /// `https://host/bucket/key` rather than `https://bucket.host/key`.
    pub path_style: bool,
    /// Timeout of one request.
    pub timeout: Duration,
    /// Retries after a throttled, failed or timed-out attempt.
    pub retries: u32,
    /// Fixed credentials (access key, secret, session token); `None` reads
    /// the standard chain on first use.
    pub credentials: Option<(String, String, Option<String>)>,
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("endpoint", &self.endpoint.as_ref().map(ToString::to_string))
            .field("region", &self.region)
            .field("path_style", &self.path_style)
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .finish_non_exhaustive()
    }
}

impl ClientConfig {
    /// Read the configuration from the environment (module documentation).
    pub fn from_env() -> Result<Self, S3Error> {
        let endpoint = match env_var("AWS_ENDPOINT_URL_S3").or_else(|| env_var("AWS_ENDPOINT_URL"))
        {
            Some(url) => Some(Endpoint::parse(url.trim())?),
            None => None,
        };
        let region = env_var("AWS_REGION")
            .or_else(|| env_var("AWS_DEFAULT_REGION"))
            .unwrap_or_else(|| "us-east-1".to_string());
        if !region
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(S3Error::Config {
                name: "AWS_REGION",
                reason: "a region name has only letters, digits, `-` and `_`",
            });
        }
        let path_style = match env_var("AWS_S3_FORCE_PATH_STYLE").as_deref() {
            Some("1" | "true" | "TRUE" | "True") => true,
            Some(_) => false,
            None => endpoint.is_some(),
        };
        let timeout = env_var("PCHRONICLE_S3_TIMEOUT")
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| *v > 0.0 && *v < 86_400.0)
            .unwrap_or(30.0);
        let retries = env_var("PCHRONICLE_S3_RETRIES")
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(4)
            .min(20);
        Ok(ClientConfig {
            endpoint,
            region,
            path_style,
            timeout: Duration::from_secs_f64(timeout),
            retries,
            credentials: None,
        })
    }
}

/// Credentials for signing: access key, secret and session token.
#[derive(Clone)]
pub(super) struct Creds {
    pub(super) access_key: String,
    pub(super) secret_key: String,
    pub(super) token: Option<String>,
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Client {
    /// The credentials already read, if any (no lock is held afterwards).
    pub(super) fn cached_credentials(&self) -> Option<Creds> {
        self.creds.lock().ok().and_then(|c| c.clone())
    }

    /// The credentials: fixed ones, or the standard chain read on first use.
    pub(super) fn credentials(&self) -> Result<Creds, S3Error> {
        let mut slot = self.creds.lock().map_err(|_| S3Error::NoCredentials)?;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let profile = env_var("AWS_PROFILE");
        let c = s3::creds::Credentials::new(None, None, None, None, profile.as_deref())
            .map_err(|_| S3Error::NoCredentials)?;
        let (Some(access_key), Some(secret_key)) = (c.access_key, c.secret_key) else {
            return Err(S3Error::NoCredentials);
        };
        let creds = Creds {
            access_key,
            secret_key,
            token: c.session_token.or(c.security_token),
        };
        *slot = Some(creds.clone());
        Ok(creds)
    }
}
