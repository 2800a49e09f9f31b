//! The transport: the [`Client`] itself, its HTTP client, and how one
//! request is sent — resolving names only through the policy, checking the
//! peer of every response, retrying with backoff, and following redirects
//! only as the policy allows.
//!
//! Every byte pChronicle sends to S3 passes [`Client::send`]; keeping it in
//! one file keeps the connection rules (seed §5.2) in one place.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::s3::policy::{
    is_origin_bound_header, system_resolver, Endpoint, Host, Policy, PolicyError, Scheme,
    MAX_REDIRECTS,
};

use super::config::{ClientConfig, Creds};
use super::error::{error_code, S3Error};
use super::sign::{canonical_query, payload_hash, sign_headers};
use crate::util::redact::redact;

/// The S3 client (see the module documentation).
pub struct Client {
    endpoint: Option<Endpoint>,
    region: String,
    path_style: bool,
    policy: Arc<Policy>,
    http: reqwest::Client,
    pub(super) creds: Mutex<Option<Creds>>,
    retries: u32,
    pub(super) requests: AtomicU64,
    pub(super) bytes: AtomicU64,
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
                policy.resolve_and_check(&endpoint, &system_resolver)
            })
            .await
            .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)??;
            let addrs: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
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

    /// Send one request with bounded retries, following redirects only as
    /// the policy allows.
    pub(super) async fn send(&self, req: &Request<'_>) -> Result<Response, S3Error> {
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
        let payload_hash = payload_hash(&req.body);
        let mut headers = HeaderMap::new();
        for (k, v) in &req.headers {
            if !sign && is_origin_bound_header(k) {
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

/// One S3 request, before it is signed and sent.
pub(super) struct Request<'a> {
    pub(super) method: reqwest::Method,
    pub(super) bucket: &'a str,
    pub(super) key: &'a str,
    pub(super) query: Vec<(String, String)>,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Bytes,
    pub(super) what: &'a str,
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

/// An ETag as a conditional header wants it: quoted, unless it already is.
pub(super) fn quote(etag: &str) -> String {
    if etag.starts_with('"') || etag.starts_with("W/") {
        etag.to_string()
    } else {
        format!("\"{etag}\"")
    }
}

/// An ETag header's value without quotes or the weak marker.
pub(super) fn unquote(etag: &str) -> String {
    let e = etag.trim();
    let e = e.strip_prefix("W/").unwrap_or(e);
    e.trim_matches('"').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

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
