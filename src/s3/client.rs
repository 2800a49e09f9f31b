//! The S3 client: every request pChronicle sends to an S3 endpoint goes
//! through [`Client::send`], which applies the outbound [`Policy`].
//!
//! rust-s3 supplies the AWS pieces — the credential chain (environment,
//! shared profile, web identity, container and instance role), the region
//! type, SigV4 signing and the ListObjectsV2 response types. The transport is
//! ours, because the policy needs control rust-s3's own transport does not
//! give: the HTTP client resolves names only through [`PolicyResolver`]
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

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use hmac::{Hmac, Mac as _};
use http::{HeaderMap, HeaderName, HeaderValue};
use sha2::{Digest as _, Sha256};

use super::policy::{redact, Endpoint, Host, Policy, PolicyError, Scheme, MAX_REDIRECTS};
use crate::util::rt::runtime;

/// SHA-256 of the empty payload.
const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// Why an S3 request failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum S3Error {
    /// The outbound policy refused the endpoint, a peer or a redirect.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// No credentials in the standard chain.
    #[error("no S3 credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, use a profile (AWS_PROFILE, ~/.aws/credentials), or run with an instance role")]
    NoCredentials,
    /// The bucket does not exist.
    #[error("S3 bucket `{bucket}` does not exist")]
    NoSuchBucket {
        /// The bucket.
        bucket: String,
    },
    /// 401/403.
    #[error("S3 access denied for {what} (HTTP {status} {code}): check the credentials and the bucket policy")]
    AccessDenied {
        /// What was requested (`list s3://b/p/`, `read s3://b/k`).
        what: String,
        /// HTTP status.
        status: u16,
        /// S3 error code.
        code: String,
    },
    /// Throttling or server errors that persisted through every retry.
    #[error("S3 kept failing for {what} after {attempts} attempts (last: {last}); try again later or raise PCHRONICLE_S3_RETRIES")]
    Unavailable {
        /// What was requested.
        what: String,
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last: String,
    },
    /// The object changed since it was pinned (412 on a conditional read).
    #[error("S3 object `{key}` changed since it was listed (precondition failed)")]
    Changed {
        /// The key.
        key: String,
    },
    /// The object (or version) is gone.
    #[error("S3 object `{key}` no longer exists")]
    Gone {
        /// The key.
        key: String,
    },
    /// A write lost a compare-and-swap or a create-only race.
    #[error("S3 object `{key}` was written by someone else first (conditional write refused)")]
    Conflict {
        /// The key.
        key: String,
    },
    /// Any other refusal.
    #[error("S3 refused {what}: HTTP {status} {code}: {message}")]
    Http {
        /// What was requested.
        what: String,
        /// HTTP status.
        status: u16,
        /// S3 error code.
        code: String,
        /// S3's message, redacted.
        message: String,
    },
    /// A configuration value from the environment is refused.
    #[error("invalid {name}: {reason}")]
    Config {
        /// The variable.
        name: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// The response could not be understood.
    #[error("unexpected S3 response for {what}: {reason}")]
    BadResponse {
        /// What was requested.
        what: String,
        /// Why.
        reason: String,
    },
}

impl S3Error {
    /// Stable error code.
    pub fn code(&self) -> &'static str {
        match self {
            S3Error::Policy(p) => p.code(),
            S3Error::NoCredentials => "PC-S3-010",
            S3Error::NoSuchBucket { .. } => "PC-S3-011",
            S3Error::AccessDenied { .. } => "PC-S3-012",
            S3Error::Unavailable { .. } => "PC-S3-013",
            S3Error::Changed { .. } => "PC-S3-014",
            S3Error::Gone { .. } => "PC-S3-015",
            S3Error::Conflict { .. } => "PC-S3-016",
            S3Error::Http { .. } => "PC-S3-017",
            S3Error::BadResponse { .. } => "PC-S3-018",
            S3Error::Config { .. } => "PC-S3-020",
        }
    }
}

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
pub fn cache_identity(uri: &super::S3Uri) -> String {
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

/// One object from a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedObject {
    /// The full key.
    pub key: String,
    /// Size in bytes.
    pub size: u64,
    /// ETag without quotes.
    pub etag: String,
    /// Last modification, as the listing gives it (RFC 3339).
    pub last_modified: String,
}

/// What a conditional read is pinned to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectPin {
    /// ETag without quotes (sent as `If-Match`).
    pub etag: String,
    /// Version id, on versioned buckets.
    pub version: Option<String>,
}

/// A ranged read's result.
#[derive(Debug, Clone)]
pub struct RangeRead {
    /// The bytes.
    pub bytes: Bytes,
    /// The version id the server reported, if any.
    pub version: Option<String>,
}

/// How a write is conditioned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutMode {
    /// Only if no object exists at the key (`If-None-Match: *`).
    Create,
    /// Only if the object still has this ETag (`If-Match`).
    Replace(String),
    /// Unconditionally.
    Overwrite,
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

/// The S3 client (see the module documentation).
pub struct Client {
    endpoint: Option<Endpoint>,
    region: String,
    path_style: bool,
    policy: Arc<Policy>,
    http: reqwest::Client,
    creds: Mutex<Option<Creds>>,
    retries: u32,
    requests: AtomicU64,
    bytes: AtomicU64,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("endpoint", &self.endpoint.as_ref().map(ToString::to_string))
            .field("region", &self.region)
            .field("path_style", &self.path_style)
            .finish_non_exhaustive()
    }
}

#[derive(Clone)]
struct Creds {
    access_key: String,
    secret_key: String,
    token: Option<String>,
}

/// Resolves host names for the HTTP client: every answer is checked by the
/// policy, and only checked addresses are handed back to connect to.
struct PolicyResolver {
    policy: Arc<Policy>,
    scheme: Scheme,
    port: u16,
}

impl reqwest::dns::Resolve for PolicyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy.clone();
        let origin = format!("{}://{}:{}", self.scheme, name.as_str(), self.port);
        Box::pin(async move {
            let endpoint = Endpoint::parse(&origin)?;
            let addrs = tokio::task::spawn_blocking(move || {
                policy.resolve_and_check(&endpoint, &super::policy::system_resolver)
            })
            .await
            .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)??;
            let addrs: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Client {
    /// Build from the environment under `policy`.
    pub fn from_env(policy: Policy) -> Result<Self, S3Error> {
        Self::new(ClientConfig::from_env()?, policy)
    }

    /// Build from `config` under `policy`; the endpoint is checked now.
    pub fn new(config: ClientConfig, policy: Policy) -> Result<Self, S3Error> {
        let ClientConfig {
            endpoint,
            region,
            path_style,
            timeout,
            retries,
            credentials,
        } = config;
        if let Some(e) = &endpoint {
            policy.check_endpoint(e)?;
        }
        let (scheme, port) = match &endpoint {
            Some(e) => (e.scheme(), e.port()),
            None => (Scheme::Https, 443),
        };
        let policy = Arc::new(policy);
        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(PolicyResolver {
                policy: policy.clone(),
                scheme,
                port,
            }))
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .timeout(timeout)
            .build()
            .map_err(|e| S3Error::BadResponse {
                what: "the HTTP client".into(),
                reason: redact(&e.to_string()),
            })?;
        Ok(Client {
            endpoint,
            region,
            path_style,
            policy,
            http,
            creds: Mutex::new(credentials.map(|(access_key, secret_key, token)| Creds {
                access_key,
                secret_key,
                token,
            })),
            retries,
            requests: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        })
    }

    /// The endpoint serving `bucket`.
    fn origin(&self, bucket: &str) -> Result<Endpoint, S3Error> {
        let text = match (&self.endpoint, self.path_style) {
            (Some(e), true) => return Ok(e.clone()),
            (Some(e), false) => match e.host() {
                Host::Name(n) => format!("{}://{bucket}.{n}:{}", e.scheme(), e.port()),
                Host::Ip(_) => return Ok(e.clone()),
            },
            (None, true) => format!("https://s3.{}.amazonaws.com", self.region),
            (None, false) => format!("https://{bucket}.s3.{}.amazonaws.com", self.region),
        };
        let e = Endpoint::parse(&text)?;
        self.policy.check_endpoint(&e)?;
        Ok(e)
    }

    fn path(&self, bucket: &str, key: &str, origin: &Endpoint) -> String {
        let vhost = !self.path_style && matches!(origin.host(), Host::Name(_));
        let key = s3::signing::uri_encode(key, false);
        if vhost {
            format!("/{key}")
        } else {
            format!("/{bucket}/{key}")
        }
    }

    fn cached_credentials(&self) -> Option<Creds> {
        self.creds.lock().ok().and_then(|c| c.clone())
    }

    fn credentials(&self) -> Result<Creds, S3Error> {
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

    /// List every object under `prefix` (ListObjectsV2, all pages), at most
    /// `max` of them (more is an error the caller reports).
    pub fn list(&self, bucket: &str, prefix: &str, max: u64) -> Result<Vec<ListedObject>, S3Error> {
        runtime()
            .block_on(self.list_all(bucket, prefix, None, max))
            .map(|l| l.objects)
    }

    /// Every page of a listing, merged; stops once more than `max` objects
    /// are in. A server that repeats a continuation token is an error, not
    /// an endless loop.
    pub async fn list_all(
        &self,
        bucket: &str,
        prefix: &str,
        delimiter: Option<&str>,
        max: u64,
    ) -> Result<ListPage, S3Error> {
        let mut out = ListPage::default();
        let mut token: Option<String> = None;
        loop {
            let page = self
                .list_page(bucket, prefix, delimiter, token.as_deref())
                .await?;
            out.objects.extend(page.objects);
            out.prefixes.extend(page.prefixes);
            if out.objects.len() as u64 > max {
                return Ok(out);
            }
            match page.next {
                Some(t) if token.as_deref() == Some(t.as_str()) => {
                    return Err(S3Error::BadResponse {
                        what: format!("list s3://{bucket}/{prefix}"),
                        reason: "the server repeated a continuation token".into(),
                    })
                }
                Some(t) => token = Some(t),
                None => return Ok(out),
            }
        }
    }

    /// One page of a ListObjectsV2 listing, grouped by `delimiter` if given.
    pub async fn list_page(
        &self,
        bucket: &str,
        prefix: &str,
        delimiter: Option<&str>,
        token: Option<&str>,
    ) -> Result<ListPage, S3Error> {
        let what = format!("list s3://{bucket}/{prefix}");
        let mut query = vec![
            ("list-type".to_string(), "2".to_string()),
            ("prefix".to_string(), prefix.to_string()),
        ];
        if let Some(d) = delimiter {
            query.push(("delimiter".to_string(), d.to_string()));
        }
        if let Some(t) = token {
            query.push(("continuation-token".to_string(), t.to_string()));
        }
        let resp = self
            .send(&Request {
                method: reqwest::Method::GET,
                bucket,
                key: "",
                query,
                headers: Vec::new(),
                body: Bytes::new(),
                what: &what,
            })
            .await?;
        if resp.status == 404 {
            return Err(S3Error::NoSuchBucket {
                bucket: bucket.to_string(),
            });
        }
        check_status(&resp, &what, bucket, "")?;
        let text = std::str::from_utf8(&resp.body).map_err(|_| S3Error::BadResponse {
            what: what.clone(),
            reason: "the listing is not UTF-8".into(),
        })?;
        let page: s3::serde_types::ListBucketResult =
            quick_xml::de::from_str(text).map_err(|e| S3Error::BadResponse {
                what: what.clone(),
                reason: format!("the listing is not a ListBucketResult: {e}"),
            })?;
        Ok(ListPage {
            objects: page
                .contents
                .into_iter()
                .map(|o| ListedObject {
                    key: o.key,
                    size: o.size,
                    etag: o.e_tag.map(|e| unquote(&e)).unwrap_or_default(),
                    last_modified: o.last_modified,
                })
                .collect(),
            prefixes: page
                .common_prefixes
                .unwrap_or_default()
                .into_iter()
                .map(|p| p.prefix)
                .collect(),
            next: page
                .next_continuation_token
                .filter(|t| page.is_truncated && !t.is_empty()),
        })
    }

    /// Read `range` of an object, conditional on `pin`. A changed object is
    /// [`S3Error::Changed`], a deleted one [`S3Error::Gone`].
    pub fn get_range(
        &self,
        bucket: &str,
        key: &str,
        pin: &ObjectPin,
        range: std::ops::Range<u64>,
    ) -> Result<RangeRead, S3Error> {
        let resp = runtime().block_on(self.get(
            bucket,
            key,
            &GetRequest {
                range: Some(format!(
                    "bytes={}-{}",
                    range.start,
                    range.end.saturating_sub(1)
                )),
                if_match: (!pin.etag.is_empty()).then(|| pin.etag.clone()),
                version: pin.version.clone(),
                head: false,
            },
        ))?;
        let expected = range.end - range.start;
        // A 200 is the whole object (the server ignored `Range`): cut the
        // range out of it. Either way exactly `expected` bytes are used; a
        // shorter answer means the object is not the one pinned.
        let body = if resp.status == 200 {
            if (resp.body.len() as u64) < range.end {
                return Err(S3Error::Changed { key: key.into() });
            }
            resp.body.slice(range.start as usize..range.end as usize)
        } else {
            if (resp.body.len() as u64) < expected {
                return Err(S3Error::Changed { key: key.into() });
            }
            resp.body.slice(..expected as usize)
        };
        Ok(RangeRead {
            bytes: body,
            version: resp.version,
        })
    }

    /// The first `limit` bytes of an object (or `None` when there is none),
    /// with its ETag.
    pub fn get_object(
        &self,
        bucket: &str,
        key: &str,
        limit: u64,
    ) -> Result<Option<(Bytes, String)>, S3Error> {
        let req = GetRequest {
            range: Some(format!("bytes=0-{}", limit.saturating_sub(1))),
            ..GetRequest::default()
        };
        match runtime().block_on(self.get(bucket, key, &req)) {
            // An empty object has no byte 0.
            Err(S3Error::Http { status: 416, .. }) => Ok(Some((Bytes::new(), String::new()))),
            Ok(r) => Ok(Some((r.body, r.etag.unwrap_or_default()))),
            Err(S3Error::Gone { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// GET (or HEAD) an object. 404 is [`S3Error::Gone`], 412
    /// [`S3Error::Changed`]; the response carries its headers.
    pub async fn get(&self, bucket: &str, key: &str, g: &GetRequest) -> Result<Response, S3Error> {
        let what = format!("read s3://{bucket}/{key}");
        let mut query = Vec::new();
        if let Some(v) = &g.version {
            query.push(("versionId".to_string(), v.clone()));
        }
        let mut headers = Vec::new();
        if let Some(r) = &g.range {
            headers.push(("range".to_string(), r.clone()));
        }
        if let Some(e) = &g.if_match {
            headers.push(("if-match".to_string(), quote(e)));
        }
        let resp = self
            .send(&Request {
                method: if g.head {
                    reqwest::Method::HEAD
                } else {
                    reqwest::Method::GET
                },
                bucket,
                key,
                query,
                headers,
                body: Bytes::new(),
                what: &what,
            })
            .await?;
        match resp.status {
            200 | 206 => Ok(resp),
            412 => Err(S3Error::Changed { key: key.into() }),
            404 if g.head => Err(S3Error::Gone { key: key.into() }),
            _ => check_status(&resp, &what, bucket, key).map(|()| resp),
        }
    }

    /// Write an object under `mode`; returns its new ETag.
    pub fn put(
        &self,
        bucket: &str,
        key: &str,
        body: Bytes,
        mode: &PutMode,
    ) -> Result<String, S3Error> {
        runtime()
            .block_on(self.put_async(bucket, key, body, mode))
            .map(|(etag, _)| etag)
    }

    /// Write an object under `mode`; returns its new ETag and version.
    pub async fn put_async(
        &self,
        bucket: &str,
        key: &str,
        body: Bytes,
        mode: &PutMode,
    ) -> Result<(String, Option<String>), S3Error> {
        let what = format!("write s3://{bucket}/{key}");
        let mut headers = Vec::new();
        match mode {
            PutMode::Create => headers.push(("if-none-match".to_string(), "*".to_string())),
            PutMode::Replace(etag) => headers.push(("if-match".to_string(), quote(etag))),
            PutMode::Overwrite => {}
        }
        let resp = self
            .send(&Request {
                method: reqwest::Method::PUT,
                bucket,
                key,
                query: Vec::new(),
                headers,
                body,
                what: &what,
            })
            .await?;
        match resp.status {
            200 | 201 => Ok((resp.etag.unwrap_or_default(), resp.version)),
            412 | 409 => Err(S3Error::Conflict { key: key.into() }),
            _ => {
                check_status(&resp, &what, bucket, key)?;
                Ok((resp.etag.unwrap_or_default(), resp.version))
            }
        }
    }

    /// Server-side copy of `from` to `to` in one bucket.
    pub async fn copy_async(&self, bucket: &str, from: &str, to: &str) -> Result<(), S3Error> {
        let what = format!("copy s3://{bucket}/{from}");
        let source = format!("/{bucket}/{}", s3::signing::uri_encode(from, false));
        let resp = self
            .send(&Request {
                method: reqwest::Method::PUT,
                bucket,
                key: to,
                query: Vec::new(),
                headers: vec![("x-amz-copy-source".to_string(), source)],
                body: Bytes::new(),
                what: &what,
            })
            .await?;
        if resp.status == 404 {
            return Err(S3Error::Gone { key: from.into() });
        }
        check_status(&resp, &what, bucket, to)?;
        // A copy can fail after the 200 status line: the error is in the body.
        if xml_text(&resp.body, "Code").is_some() {
            return Err(S3Error::Http {
                what: redact(&what),
                status: resp.status,
                code: error_code(&resp.body),
                message: redact(&xml_text(&resp.body, "Message").unwrap_or_default()),
            });
        }
        Ok(())
    }

    /// Delete an object (missing is fine).
    pub fn delete(&self, bucket: &str, key: &str) -> Result<(), S3Error> {
        runtime().block_on(self.delete_async(bucket, key))
    }

    /// Delete an object (missing is fine).
    pub async fn delete_async(&self, bucket: &str, key: &str) -> Result<(), S3Error> {
        let what = format!("delete s3://{bucket}/{key}");
        let resp = self
            .send(&Request {
                method: reqwest::Method::DELETE,
                bucket,
                key,
                query: Vec::new(),
                headers: Vec::new(),
                body: Bytes::new(),
                what: &what,
            })
            .await?;
        if resp.status == 404 && error_code(&resp.body) != "NoSuchBucket" {
            return Ok(());
        }
        check_status(&resp, &what, bucket, key)
    }

    /// Send one request with bounded retries, following redirects only as
    /// the policy allows.
    async fn send(&self, req: &Request<'_>) -> Result<Response, S3Error> {
        let creds = match self.cached_credentials() {
            Some(c) => c,
            None => tokio::task::block_in_place(|| self.credentials())?,
        };
        let mut origin = self.origin(req.bucket)?;
        let mut path_and_query = {
            let mut p = self.path(req.bucket, req.key, &origin);
            let q = canonical_query(&req.query);
            if !q.is_empty() {
                p.push('?');
                p.push_str(&q);
            }
            p
        };
        let mut sign = true;
        let mut hops = 0;
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let outcome = self
                .attempt(req, &origin, &path_and_query, &creds, sign)
                .await;
            match outcome {
                Ok(Attempt::Done(resp)) => {
                    let retryable = matches!(resp.status, 429 | 500 | 502 | 503 | 504);
                    if retryable && attempt <= self.retries {
                        backoff(attempt).await;
                        continue;
                    }
                    if retryable {
                        return Err(S3Error::Unavailable {
                            what: redact(req.what),
                            attempts: attempt,
                            last: format!("HTTP {} {}", resp.status, error_code(&resp.body)),
                        });
                    }
                    return Ok(resp);
                }
                Ok(Attempt::Redirect(location)) => {
                    let decision = self.policy.check_redirect(&origin, &location)?;
                    hops += 1;
                    if hops > MAX_REDIRECTS {
                        return Err(PolicyError::RedirectRefused {
                            from: origin.to_string(),
                            to: redact(&location),
                            reason: "too many redirects",
                        }
                        .into());
                    }
                    if decision.drop_sensitive_headers {
                        // Another origin gets neither a signature nor any
                        // header the policy calls sensitive.
                        sign = false;
                    }
                    origin = decision.endpoint;
                    path_and_query = decision.path_and_query;
                }
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Transient(reason)) => {
                    if attempt <= self.retries {
                        backoff(attempt).await;
                        continue;
                    }
                    return Err(S3Error::Unavailable {
                        what: redact(req.what),
                        attempts: attempt,
                        last: reason,
                    });
                }
            }
        }
    }

    async fn attempt(
        &self,
        req: &Request<'_>,
        origin: &Endpoint,
        path_and_query: &str,
        creds: &Creds,
        sign: bool,
    ) -> Result<Attempt, Failure> {
        let url_text = format!("{origin}{path_and_query}");
        let url = url::Url::parse(&url_text).map_err(|e| {
            Failure::Fatal(S3Error::BadResponse {
                what: redact(req.what),
                reason: format!("bad request URL: {e}"),
            })
        })?;
        let payload_hash = if req.body.is_empty() {
            EMPTY_SHA256.to_string()
        } else {
            hex(&Sha256::digest(&req.body))
        };
        let mut headers = HeaderMap::new();
        for (k, v) in &req.headers {
            if !sign && super::policy::is_sensitive_header(k) {
                continue;
            }
            if let (Ok(k), Ok(v)) = (
                HeaderName::from_bytes(k.as_bytes()),
                HeaderValue::from_str(v),
            ) {
                headers.insert(k, v);
            }
        }
        if sign {
            sign_headers(
                &mut headers,
                req.method.as_str(),
                &url,
                origin,
                &self.region,
                &payload_hash,
                creds,
                time::OffsetDateTime::now_utc(),
            )
            .map_err(Failure::Fatal)?;
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        let sent = self
            .http
            .request(req.method.clone(), url)
            .headers(headers)
            .body(req.body.clone())
            .send()
            .await;
        let resp = match sent {
            Ok(r) => r,
            Err(e) => return Err(transport_failure(&e)),
        };
        if let Some(peer) = resp.remote_addr() {
            self.policy
                .check_peer(origin, peer.ip())
                .map_err(|e| Failure::Fatal(e.into()))?;
        }
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        if (300..400).contains(&status) && status != 304 {
            // Without a Location (S3's 301 for a bucket in another region)
            // it is an error answer, reported as such.
            if let Some(location) = header("location") {
                return Ok(Attempt::Redirect(location));
            }
        }
        let version = header("x-amz-version-id").filter(|v| v != "null");
        let etag = header("etag").map(|e| unquote(&e));
        let content_range = header("content-range");
        let last_modified = header("last-modified");
        let content_length = header("content-length").and_then(|v| v.parse().ok());
        let body = match resp.bytes().await {
            Ok(b) => b,
            Err(e) => return Err(transport_failure(&e)),
        };
        self.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
        Ok(Attempt::Done(Response {
            status,
            body,
            version,
            etag,
            content_range,
            last_modified,
            content_length,
        }))
    }
}

/// Add the SigV4 headers (`host`, `x-amz-date`, `x-amz-content-sha256`,
/// the session token, `authorization`) to `headers`, signing every header
/// already present as well.
#[allow(clippy::too_many_arguments)]
fn sign_headers(
    headers: &mut HeaderMap,
    method: &str,
    url: &url::Url,
    origin: &Endpoint,
    region: &str,
    payload_hash: &str,
    creds: &Creds,
    now: time::OffsetDateTime,
) -> Result<(), S3Error> {
    let bad = |what: &str| S3Error::BadResponse {
        what: "request signing".into(),
        reason: what.to_string(),
    };
    let host = match (origin.scheme(), origin.port()) {
        (Scheme::Https, 443) | (Scheme::Http, 80) => origin.host().to_string(),
        (_, port) => format!("{}:{port}", origin.host()),
    };
    let date = format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    );
    let hv = |v: &str| HeaderValue::from_str(v).map_err(|_| bad("a header value is not ASCII"));
    headers.insert(http::header::HOST, hv(&host)?);
    headers.insert("x-amz-date", hv(&date)?);
    headers.insert("x-amz-content-sha256", hv(payload_hash)?);
    if let Some(t) = &creds.token {
        headers.insert("x-amz-security-token", hv(t)?);
    }
    let region = s3::Region::Custom {
        region: region.to_string(),
        endpoint: String::new(),
    };
    let canonical = s3::signing::canonical_request(method, url, headers, payload_hash)
        .map_err(|_| bad("cannot build the canonical request"))?;
    let to_sign = s3::signing::string_to_sign(&now, &region, &canonical)
        .map_err(|_| bad("cannot build the string to sign"))?;
    let key = s3::signing::signing_key(&now, &creds.secret_key, &region, "s3")
        .map_err(|_| bad("cannot derive the signing key"))?;
    let mut mac =
        Hmac::<Sha256>::new_from_slice(&key).map_err(|_| bad("bad signing key length"))?;
    mac.update(to_sign.as_bytes());
    let signature = hex(&mac.finalize().into_bytes());
    let signed = s3::signing::signed_header_string(headers);
    let auth =
        s3::signing::authorization_header(&creds.access_key, &now, &region, &signed, &signature)
            .map_err(|_| bad("cannot build the authorization header"))?;
    headers.insert(http::header::AUTHORIZATION, hv(&auth)?);
    Ok(())
}

struct Request<'a> {
    method: reqwest::Method,
    bucket: &'a str,
    key: &'a str,
    query: Vec<(String, String)>,
    headers: Vec<(String, String)>,
    body: Bytes,
    what: &'a str,
}

/// An S3 answer: status, body and the headers callers use.
#[derive(Debug)]
pub struct Response {
    /// HTTP status.
    pub status: u16,
    /// The body.
    pub body: Bytes,
    /// `x-amz-version-id`, when not `null`.
    pub version: Option<String>,
    /// `ETag` without quotes.
    pub etag: Option<String>,
    /// `Content-Range`.
    pub content_range: Option<String>,
    /// `Last-Modified`.
    pub last_modified: Option<String>,
    /// `Content-Length`.
    pub content_length: Option<u64>,
}

/// What a GET asks for.
#[derive(Debug, Clone, Default)]
pub struct GetRequest {
    /// A `Range` header value (`bytes=a-b`, `bytes=a-`, `bytes=-n`).
    pub range: Option<String>,
    /// ETag the object must still have.
    pub if_match: Option<String>,
    /// The version to read.
    pub version: Option<String>,
    /// HEAD instead of GET.
    pub head: bool,
}

/// One page of a listing.
#[derive(Debug, Clone, Default)]
pub struct ListPage {
    /// Objects.
    pub objects: Vec<ListedObject>,
    /// Common prefixes (with a delimiter).
    pub prefixes: Vec<String>,
    /// The continuation token of the next page.
    pub next: Option<String>,
}

enum Attempt {
    Done(Response),
    Redirect(String),
}

enum Failure {
    Fatal(S3Error),
    Transient(String),
}

/// A transport error: a policy refusal inside name resolution is fatal;
/// connection failures and timeouts are retried.
fn transport_failure(e: &reqwest::Error) -> Failure {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(p) = err.downcast_ref::<PolicyError>() {
            return Failure::Fatal(S3Error::Policy(p.clone()));
        }
        cur = err.source();
    }
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else {
        "transport error"
    };
    let mut detail = String::new();
    let mut cur = std::error::Error::source(e);
    while let Some(err) = cur {
        detail = err.to_string();
        cur = err.source();
    }
    if detail.is_empty() {
        Failure::Transient(kind.to_string())
    } else {
        Failure::Transient(format!("{kind}: {}", redact(&detail)))
    }
}

async fn backoff(attempt: u32) {
    let base = 100u64 << attempt.min(6);
    let jitter = u64::from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos()),
    ) % (base / 2 + 1);
    tokio::time::sleep(Duration::from_millis(base + jitter)).await;
}

fn check_status(resp: &Response, what: &str, bucket: &str, key: &str) -> Result<(), S3Error> {
    if (200..300).contains(&resp.status) {
        return Ok(());
    }
    let code = error_code(&resp.body);
    match resp.status {
        401 | 403 => Err(S3Error::AccessDenied {
            what: redact(what),
            status: resp.status,
            code,
        }),
        404 if code == "NoSuchBucket" => Err(S3Error::NoSuchBucket {
            bucket: bucket.to_string(),
        }),
        404 if !key.is_empty() => Err(S3Error::Gone { key: key.into() }),
        412 => Err(S3Error::Changed { key: key.into() }),
        status => Err(S3Error::Http {
            what: redact(what),
            status,
            code,
            message: redact(&xml_text(&resp.body, "Message").unwrap_or_default()),
        }),
    }
}

fn error_code(body: &[u8]) -> String {
    xml_text(body, "Code").unwrap_or_default()
}

/// The text of the first `<tag>…</tag>` in an XML error body (entities are
/// left as they are: the text only goes into messages).
fn xml_text(body: &[u8], tag: &str) -> Option<String> {
    let s = std::str::from_utf8(body).ok()?;
    let open = format!("<{tag}>");
    let start = s.find(&open)? + open.len();
    let end = s[start..].find(&format!("</{tag}>"))? + start;
    let text: String = s[start..end].chars().take(200).collect();
    Some(crate::util::text::escape_control(&text).into_owned())
}

fn quote(etag: &str) -> String {
    if etag.starts_with('"') || etag.starts_with("W/") {
        etag.to_string()
    } else {
        format!("\"{etag}\"")
    }
}

fn unquote(etag: &str) -> String {
    let e = etag.trim();
    let e = e.strip_prefix("W/").unwrap_or(e);
    e.trim_matches('"').to_string()
}

/// `k=v&…` sorted by key, AWS-encoded (the same form the signature uses).
fn canonical_query(query: &[(String, String)]) -> String {
    let mut pairs: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| {
            (
                s3::signing::uri_encode(k, true),
                s3::signing::uri_encode(v, true),
            )
        })
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// A `std::io::Read` over one pinned object, fetched in growing ranges
/// (64 KiB first, doubling to 8 MiB) so a sniff reads little and a full
/// decode makes few requests. Every range is conditional on the pin.
pub struct ObjectReader {
    client: Arc<Client>,
    bucket: String,
    key: String,
    pin: ObjectPin,
    size: u64,
    pos: u64,
    chunk: u64,
    buf: Bytes,
    /// The version the server reported for the first range.
    pub version: Option<String>,
    /// The S3 failure that ended the read, if one did.
    pub failure: Option<S3Error>,
}

impl ObjectReader {
    /// A reader of `size` bytes of `bucket/key` pinned to `pin`.
    pub fn new(client: Arc<Client>, bucket: &str, key: &str, pin: ObjectPin, size: u64) -> Self {
        ObjectReader {
            client,
            bucket: bucket.to_string(),
            key: key.to_string(),
            pin,
            size,
            pos: 0,
            chunk: 64 << 10,
            buf: Bytes::new(),
            version: None,
            failure: None,
        }
    }
}

impl std::io::Read for ObjectReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.buf.is_empty() {
            if self.pos >= self.size || out.is_empty() {
                return Ok(0);
            }
            let want = self.chunk.max(out.len() as u64);
            let end = (self.pos + want).min(self.size);
            let r = self
                .client
                .get_range(&self.bucket, &self.key, &self.pin, self.pos..end)
                .map_err(|e| {
                    self.failure = Some(e.clone());
                    std::io::Error::other(ObjectReadError(e))
                })?;
            if self.version.is_none() {
                self.version.clone_from(&r.version);
                if self.pin.version.is_none() {
                    self.pin.version.clone_from(&r.version);
                }
            }
            self.pos = end;
            self.buf = r.bytes;
            self.chunk = (self.chunk * 2).min(8 << 20);
        }
        let n = out.len().min(self.buf.len());
        out[..n].copy_from_slice(&self.buf[..n]);
        self.buf = self.buf.slice(n..);
        Ok(n)
    }
}

/// An S3 failure carried through `std::io::Error` by [`ObjectReader`].
#[derive(Debug)]
pub struct ObjectReadError(pub S3Error);

impl fmt::Display for ObjectReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.0.code(), self.0)
    }
}

impl std::error::Error for ObjectReadError {}

/// The S3 failure inside an I/O error from an [`ObjectReader`], if any.
pub fn s3_error_of(e: &std::io::Error) -> Option<&S3Error> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<ObjectReadError>())
        .map(|o| &o.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The "GET Object" example of AWS's Signature Version 4 documentation
    /// for S3 (header-based authentication).
    #[test]
    fn signature_matches_the_aws_example() {
        let mut headers = HeaderMap::new();
        headers.insert("range", HeaderValue::from_static("bytes=0-9"));
        let origin = Endpoint::parse("https://examplebucket.s3.amazonaws.com").unwrap();
        let url = url::Url::parse("https://examplebucket.s3.amazonaws.com/test.txt").unwrap();
        let creds = Creds {
            access_key: "AKIAIOSFODNN7EXAMPLE".into(),
            secret_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
            token: None,
        };
        let now = time::OffsetDateTime::from_unix_timestamp(1_369_353_600).unwrap();
        sign_headers(
            &mut headers,
            "GET",
            &url,
            &origin,
            "us-east-1",
            EMPTY_SHA256,
            &creds,
            now,
        )
        .unwrap();
        assert_eq!(
            headers["authorization"].to_str().unwrap(),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,\
             SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,\
             Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    #[test]
    fn query_is_sorted_and_encoded() {
        let q = canonical_query(&[
            ("prefix".into(), "a b/c".into()),
            ("list-type".into(), "2".into()),
        ]);
        assert_eq!(q, "list-type=2&prefix=a%20b%2Fc");
    }

    #[test]
    fn etags_lose_quotes_and_weakness() {
        assert_eq!(unquote("\"abc\""), "abc");
        assert_eq!(unquote("W/\"abc\""), "abc");
    }

    #[test]
    fn loopback_endpoint_needs_the_allowlist() {
        let config = ClientConfig {
            endpoint: Some(Endpoint::parse("http://127.0.0.1:9000").unwrap()),
            region: "us-east-1".into(),
            path_style: true,
            timeout: Duration::from_secs(1),
            retries: 0,
            credentials: Some(("k".into(), "s".into(), None)),
        };
        let err = Client::new(config.clone(), Policy::default()).unwrap_err();
        assert_eq!(err.code(), "PC-S3-004");
        let policy = Policy {
            allow: "127.0.0.1".parse().unwrap(),
            ..Policy::default()
        };
        assert!(Client::new(config, policy).is_ok());
    }
}
