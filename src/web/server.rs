//! The HTTP side: loopback listener, worker pool, request ids, trusted-proxy
//! identity, bounds, access log, signals and WarehouseView refresh.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::config::WarehouseConfig;
use super::{api, assets, WebError};
use crate::dataset::{DecodedSources, Mounts};
use crate::error::Error;
use crate::http::{
    host_name, loopback_host, Handler, HttpLimits, HttpRequest, HttpResponse, HttpServer, Refusal,
};

/// Default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8765";

/// How `serve` was asked to run.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The configuration.
    pub config: WarehouseConfig,
    /// `--listen`, overriding the file's `listen`.
    pub listen: Option<String>,
    /// Open the UI in the user's browser.
    pub open: bool,
    /// No progress lines (the access log still prints).
    pub quiet: bool,
}

/// One pinned view of every mounted Dataset.
pub struct WarehouseView {
    /// The mounts, named as configured.
    pub mounts: Mounts,
    /// Increases with every successful refresh.
    pub generation: u64,
    /// When it was built (RFC 3339).
    pub created_at: String,
}

/// Memory for large files kept decoded (estimated by
/// [`crate::dataset::decoded_bytes`]): a file of up to about 200 MB.
const DECODED_BUDGET: u64 = 1 << 30;

/// Files smaller than this decode in a few milliseconds: they are read
/// again when asked for instead of being kept.
const DECODED_MIN_FILE: u64 = 4 << 20;

/// Shared server state.
pub struct State {
    /// The configuration.
    pub config: WarehouseConfig,
    catalog: RwLock<Arc<WarehouseView>>,
    generation: AtomicU64,
    /// Decoded trajectories, by (generation, dataset, source, document).
    pub docs: api::DocCache,
    /// Large files kept decoded across requests and refreshes (keyed by
    /// their pinned identity, so a changed file is read again).
    decoded: Arc<DecodedSources>,
    /// Serialises index builds per Dataset.
    pub index_locks: Mutex<HashMap<String, Arc<Mutex<()>>>>,
    started: Instant,
    request_seq: AtomicU64,
    /// Requests being worked on now, and started so far: a request whose
    /// counts are its own ran alone (see [`Ctx::stats`]).
    in_flight: AtomicU64,
    begun: AtomicU64,
}

impl State {
    /// The current Catalog Snapshot set.
    pub fn catalog(&self) -> Arc<WarehouseView> {
        match self.catalog.read() {
            Ok(g) => Arc::clone(&g),
            Err(p) => Arc::clone(&p.into_inner()),
        }
    }

    /// Seconds since start.
    pub fn uptime(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Build a new WarehouseView beside the current one and swap it in; on failure
    /// the current one stays.
    pub fn refresh(&self) -> Result<Arc<WarehouseView>, Error> {
        let c = Arc::new(open_catalog(
            &self.config,
            self.generation.fetch_add(1, Ordering::SeqCst) + 1,
            &self.decoded,
        )?);
        match self.catalog.write() {
            Ok(mut g) => *g = Arc::clone(&c),
            Err(p) => *p.into_inner() = Arc::clone(&c),
        }
        self.docs.retain_generation(c.generation);
        self.decoded.retain(
            c.mounts
                .mounts()
                .iter()
                .flat_map(|m| m.snapshot.sources.iter()),
        );
        Ok(c)
    }

    /// The lock serialising index builds of one Dataset.
    pub fn index_lock(&self, dataset: &str) -> Arc<Mutex<()>> {
        let mut g = self
            .index_locks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(g.entry(dataset.to_string()).or_default())
    }
}

fn open_catalog(
    config: &WarehouseConfig,
    generation: u64,
    decoded: &Arc<DecodedSources>,
) -> Result<WarehouseView, Error> {
    let specs: Vec<_> = config
        .datasets
        .iter()
        .map(|d| (d.name.clone(), d.uri.clone()))
        .collect();
    let mounts = Mounts::open(
        &specs,
        crate::catalog::DiscoveryLimits::default(),
        false,
        config.limits.max_document_bytes,
    )?
    .with_decoded(Arc::clone(decoded));
    Ok(WarehouseView {
        mounts,
        generation,
        created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    })
}

/// Resolve `--listen` (or the file's `listen`) to one loopback address.
pub fn listen_addr(given: &str) -> Result<SocketAddr, WebError> {
    crate::http::listen_addr(given).map_err(|reason| WebError::Listen {
        given: crate::util::text::escape_control(given).into_owned(),
        reason,
    })
}

/// A running Warehouse: the HTTP server and the state it serves.
pub struct Warehouse {
    state: Arc<State>,
    server: HttpServer,
    quiet: bool,
}

impl Warehouse {
    /// Open every mount, bind the listen address and start serving.
    pub fn start(opts: &ServeOptions) -> Result<Warehouse, Error> {
        let listen = opts
            .listen
            .clone()
            .or_else(|| opts.config.listen.clone())
            .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
        let addr = listen_addr(&listen)?;
        let info = |m: &str| {
            if !opts.quiet {
                eprintln!("{m}");
            }
        };
        info(&format!(
            "opening {} dataset{}…",
            opts.config.datasets.len(),
            if opts.config.datasets.len() == 1 {
                ""
            } else {
                "s"
            }
        ));
        let decoded = Arc::new(DecodedSources::new(DECODED_BUDGET, DECODED_MIN_FILE));
        let catalog = Arc::new(open_catalog(&opts.config, 1, &decoded)?);
        report(opts.quiet, "dataset", &catalog);
        let listener = std::net::TcpListener::bind(addr).map_err(|e| WebError::Bind {
            addr: addr.to_string(),
            reason: e.to_string(),
        })?;
        let local = listener.local_addr().map_err(|e| WebError::Bind {
            addr: addr.to_string(),
            reason: e.to_string(),
        })?;
        let state = Arc::new(State {
            config: opts.config.clone(),
            catalog: RwLock::new(catalog),
            generation: AtomicU64::new(1),
            docs: api::DocCache::new(256 << 20),
            decoded,
            index_locks: Mutex::new(HashMap::new()),
            started: Instant::now(),
            request_seq: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            begun: AtomicU64::new(0),
        });
        let url = match local {
            SocketAddr::V4(a) => format!("http://{a}/"),
            SocketAddr::V6(a) => format!("http://[{}]:{}/", a.ip(), a.port()),
        };
        // Always printed: scripts and tests read the port from it.
        eprintln!("listening: {url}");
        if let Some(p) = &opts.config.proxy {
            info(&format!(
                "trusted proxy mode: identity from `{}` accepted only from {}",
                p.principal_header,
                p.trusted_text.join(", ")
            ));
        }
        if opts.open {
            open_browser(&url);
        }
        let l = state.config.limits;
        let server = HttpServer::start(
            listener,
            HttpLimits {
                head_timeout: Duration::from_secs(10),
                body_timeout: l.request_timeout,
                idle_timeout: Duration::from_secs(15),
                write_timeout: l.request_timeout,
                max_head_bytes: (l.max_url_bytes as usize).saturating_add(32 << 10),
                max_headers: 100,
                max_body_bytes: l.max_body_bytes,
                max_connections: l.max_connections,
                workers: l.workers,
            },
            Arc::new(App {
                state: Arc::clone(&state),
            }),
        )
        .map_err(|e| WebError::Bind {
            addr: addr.to_string(),
            reason: e.to_string(),
        })?;
        Ok(Warehouse {
            state,
            server,
            quiet: opts.quiet,
        })
    }

    /// Pin every mount again (new files, new store versions); on failure
    /// the previous snapshot stays served.
    pub fn refresh(&self) {
        match self.state.refresh() {
            Ok(c) => report(self.quiet, "refreshed dataset", &c),
            Err(e) => eprintln!(
                "warning[{}]: catalog refresh failed; still serving the previous snapshot: {}",
                e.code(),
                public_message(&self.state.config, &e.to_string())
            ),
        }
    }

    /// Stop accepting requests and finish the ones in progress.
    pub fn shutdown(self) {
        self.server
            .shutdown(self.state.config.limits.request_timeout);
    }
}

fn report(quiet: bool, verb: &str, c: &WarehouseView) {
    if quiet {
        return;
    }
    for m in c.mounts.mounts() {
        eprintln!(
            "{verb} {}: {} Sources, snapshot_id {}",
            m.name,
            m.snapshot.sources.len(),
            m.snapshot.snapshot_id
        );
    }
}

fn open_browser(url: &str) {
    let cmd = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let r = std::process::Command::new(cmd)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if r.is_err() {
        eprintln!("warning[PC-WEB-002]: could not start `{cmd}`; open {url} yourself");
    }
}

/// The Warehouse as an HTTP handler.
struct App {
    state: Arc<State>,
}

impl Handler for App {
    fn handle(&self, req: HttpRequest) -> HttpResponse {
        handle(req, &self.state)
    }

    fn refuse(&self, why: Refusal, peer: SocketAddr) -> HttpResponse {
        let l = self.state.config.limits;
        let e: WebError = match why {
            Refusal::Malformed => WebError::BadRequest {
                message: "the request is not valid HTTP/1.1".into(),
            },
            Refusal::HeadTooLarge => WebError::RequestTooLarge {
                what: "head",
                limit: (l.max_url_bytes).saturating_add(32 << 10),
            },
            Refusal::BodyTooLarge => WebError::RequestTooLarge {
                what: "body",
                limit: l.max_body_bytes,
            },
            Refusal::LengthRequired => WebError::LengthRequired,
            Refusal::Timeout => WebError::ClientTimeout {
                seconds: l.request_timeout.as_secs_f64(),
            },
            Refusal::Busy => WebError::Busy {
                limit: l.max_connections,
            },
        };
        let seq = self.state.request_seq.fetch_add(1, Ordering::Relaxed);
        let rid = new_request_id(seq);
        let body = json!({
            "error": {
                "code": e.code(),
                "status": e.status(),
                "message": e.to_string(),
                "request_id": rid,
                "dataset": null,
                "source_path": null,
                "snapshot_id": null,
            }
        });
        access_log(&AccessLine {
            request_id: &rid,
            peer: Some(peer.ip()),
            principal: None,
            method: "-",
            path: "-",
            dataset: None,
            snapshot_id: None,
            status: e.status(),
            bytes: 0,
            ms: 0.0,
            cancelled: false,
        });
        let mut b = serde_json::to_vec(&body).unwrap_or_default();
        b.push(b'\n');
        HttpResponse {
            status: e.status(),
            headers: vec![
                ("Content-Type".into(), "application/json".into()),
                ("X-Request-Id".into(), rid),
                ("Cache-Control".into(), "no-store".into()),
            ],
            body: b,
            stream: None,
        }
    }
}

/// What the handlers see of a request.
pub struct Ctx<'a> {
    /// The request id (echoed in `x-request-id`).
    pub request_id: String,
    /// Method, upper case.
    pub method: String,
    /// The raw path (no query string).
    pub path: String,
    /// Percent-decoded path segments (None: the path does not decode).
    pub segments: Option<Vec<String>>,
    /// Decoded query parameters (first value wins).
    pub query: HashMap<String, String>,
    /// The body (POST only), bounded.
    pub body: Vec<u8>,
    /// The Dataset the trusted proxy restricted this request to.
    pub dataset_restriction: Option<String>,
    /// The server state.
    pub state: &'a State,
    /// When the work must be done by.
    pub deadline: Instant,
    /// Filled by handlers for the log and error bodies.
    pub dataset: Option<String>,
    /// Filled by handlers for the log and error bodies.
    pub snapshot_id: Option<String>,
    /// Filled by handlers: the Source an error concerns.
    pub source_path: Option<String>,
    /// Set once the client has closed its connection: long work stops at
    /// its next check.
    pub gone: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Where this request's statistics count from, and whether it was the
    /// only request at work then (with the number of requests begun).
    stats_from: (crate::util::stats::Mark, bool, u64),
}

impl Ctx<'_> {
    /// A query parameter.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.get(name).map(String::as_str)
    }

    /// What this request did so far, as the CLI's `--stats` object (less
    /// CPU time and phases). The counters are the process's: they are this
    /// request's own when no other request was at work meanwhile;
    /// otherwise `overlapped` is true.
    pub fn stats(&self) -> serde_json::Value {
        let (mark, alone_at_start, begun) = &self.stats_from;
        let alone = *alone_at_start
            && self.state.begun.load(Ordering::SeqCst) == *begun
            && self.state.in_flight.load(Ordering::SeqCst) == 1;
        mark.since(crate::s3::traffic().unwrap_or((0, 0)), alone)
    }

    /// Time left for this request.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Fail when past the deadline, or when the client has gone.
    pub fn check(&self) -> Result<(), WebError> {
        if self.gone.load(Ordering::Relaxed) {
            return Err(WebError::ClientGone);
        }
        if Instant::now() > self.deadline {
            Err(WebError::Timeout {
                seconds: self.state.config.limits.request_timeout.as_secs_f64(),
            })
        } else {
            Ok(())
        }
    }
}

/// A response body and its type.
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Content type.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
    /// Extra headers.
    pub headers: Vec<(&'static str, String)>,
}

impl Reply {
    /// 200 with a JSON body.
    pub fn json(v: &Value) -> Self {
        let mut body = serde_json::to_vec(v).unwrap_or_default();
        body.push(b'\n');
        Reply {
            status: 200,
            content_type: "application/json",
            body,
            headers: Vec::new(),
        }
    }
}

fn header<'r>(req: &'r HttpRequest, name: &str) -> Option<&'r str> {
    req.header(name)
}

fn request_id(req: &HttpRequest, seq: u64) -> String {
    if let Some(v) = header(req, "x-request-id") {
        if (1..=64).contains(&v.len()) && v.bytes().all(|c| c.is_ascii_graphic()) {
            return v.to_string();
        }
    }
    new_request_id(seq)
}

fn new_request_id(seq: u64) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let h = blake3::hash(
        &[
            nanos.to_le_bytes(),
            seq.to_le_bytes(),
            u64::from(std::process::id()).to_le_bytes(),
        ]
        .concat(),
    );
    h.to_hex()[..16].to_string()
}

/// A printable header value of at most 256 bytes.
fn clean_header(v: &str) -> Option<String> {
    let v = v.trim();
    (!v.is_empty() && v.len() <= 256 && v.bytes().all(|c| (0x20..0x7f).contains(&c)))
        .then(|| v.to_string())
}

fn handle(mut req: HttpRequest, state: &State) -> HttpResponse {
    let started = Instant::now();
    let seq = state.request_seq.fetch_add(1, Ordering::Relaxed);
    let limits = state.config.limits;
    let method = req.method.to_ascii_uppercase();
    let url = req.target.clone();
    let (raw_path, raw_query) = url.split_once('?').unwrap_or((url.as_str(), ""));
    let peer = Some(req.peer.ip());
    let rid = request_id(&req, seq);

    // Proxy identity: honoured only from trusted peers, dropped otherwise.
    let trusted = match (&state.config.proxy, peer) {
        (Some(p), Some(ip)) => p.trusted.allows_ip(ip),
        _ => false,
    };
    let (principal, restriction, bad_restriction) = match &state.config.proxy {
        Some(p) if trusted => {
            let raw = header(&req, &p.dataset_header);
            let clean = raw.and_then(clean_header);
            (
                header(&req, &p.principal_header).and_then(clean_header),
                clean.clone(),
                raw.is_some() && clean.is_none(),
            )
        }
        _ => (None, None, false),
    };
    // Every request, a trusted proxy's too, must name this server: a
    // loopback name, or one of `proxy.hosts` (DNS rebinding guard).
    let host_ok = header(&req, "host").is_none_or(|h| {
        loopback_host(h)
            || state
                .config
                .proxy
                .as_ref()
                .is_some_and(|p| p.hosts.iter().any(|x| *x == host_name(h)))
    });
    // A proxy that appends rather than replaces its headers would let the
    // client's copy through: more than one copy is refused.
    let repeated = state.config.proxy.as_ref().is_some_and(|p| {
        [&p.principal_header, &p.dataset_header].iter().any(|name| {
            req.headers
                .iter()
                .filter(|(k, _)| k.eq_ignore_ascii_case(name))
                .count()
                > 1
        })
    });
    // Browsers say where a request comes from; pages of other sites may not
    // use the API (they could not read the answer, but could load the server).
    let cross_site =
        header(&req, "sec-fetch-site").is_some_and(|v| !matches!(v.trim(), "same-origin" | "none"));
    let mut ctx = Ctx {
        request_id: rid.clone(),
        method: method.clone(),
        path: raw_path.to_string(),
        segments: raw_path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(crate::util::text::percent_decode)
            .collect(),
        query: parse_query(raw_query),
        body: Vec::new(),
        dataset_restriction: restriction,
        state,
        deadline: started + limits.request_timeout,
        dataset: None,
        snapshot_id: None,
        source_path: None,
        gone: std::sync::Arc::clone(&req.gone),
        stats_from: {
            let begun = state.begun.fetch_add(1, Ordering::SeqCst) + 1;
            let alone = state.in_flight.fetch_add(1, Ordering::SeqCst) == 0;
            let mark = crate::util::stats::Mark::now(crate::s3::traffic().unwrap_or((0, 0)));
            (mark, alone, begun)
        },
    };
    let result = (|| -> Result<Reply, Error> {
        if url.len() as u64 > limits.max_url_bytes {
            return Err(WebError::RequestTooLarge {
                what: "URL",
                limit: limits.max_url_bytes,
            }
            .into());
        }
        if !host_ok {
            return Err(WebError::BadHost {
                host: crate::util::text::escape_control(header(&req, "host").unwrap_or(""))
                    .chars()
                    .take(100)
                    .collect(),
            }
            .into());
        }
        if repeated {
            return Err(WebError::BadRequest {
                message: "an identity or dataset header is repeated".into(),
            }
            .into());
        }
        if cross_site && raw_path.starts_with("/api/") {
            return Err(WebError::CrossSite.into());
        }
        if bad_restriction {
            // A restriction that cannot be read restricts to nothing.
            return Err(WebError::Forbidden {
                name: "(unreadable dataset header)".into(),
            }
            .into());
        }
        let is_api = ctx.path.starts_with("/api/");
        if is_api
            && state.config.proxy.is_some()
            && principal.is_none()
            && ctx.path != "/api/v1/health"
        {
            return Err(WebError::Unauthenticated {
                header: state
                    .config
                    .proxy
                    .as_ref()
                    .map(|p| p.principal_header.clone())
                    .unwrap_or_default(),
            }
            .into());
        }
        if method == "POST" {
            ctx.body = std::mem::take(&mut req.body);
        }
        if is_api {
            api::route(&mut ctx)
        } else {
            assets::route(&ctx)
        }
    })();
    let mut reply = match result {
        Ok(r) if r.body.len() as u64 > limits.max_response_bytes => error_reply(
            &ctx,
            &WebError::ResponseTooLarge {
                limit: limits.max_response_bytes,
            }
            .into(),
        ),
        Ok(r) => r,
        Err(e) => error_reply(&ctx, &e),
    };
    reply.headers.push(("X-Request-Id", rid.clone()));
    let status = reply.status;
    let bytes = reply.body.len();
    let mut headers: Vec<(String, String)> = vec![
        ("Content-Type".into(), reply.content_type.into()),
        ("Cache-Control".into(), "no-store".into()),
        ("X-Content-Type-Options".into(), "nosniff".into()),
        ("Referrer-Policy".into(), "no-referrer".into()),
        ("X-Frame-Options".into(), "DENY".into()),
        ("Content-Security-Policy".into(), assets::CSP.into()),
    ];
    headers.extend(
        reply
            .headers
            .iter()
            .map(|(k, v)| ((*k).to_string(), v.clone())),
    );
    let resp = HttpResponse::new(status, headers, reply.body);
    access_log(&AccessLine {
        request_id: &rid,
        peer,
        principal: principal.as_deref(),
        method: &method,
        path: raw_path,
        dataset: ctx.dataset.as_deref(),
        snapshot_id: ctx.snapshot_id.as_deref(),
        status,
        bytes,
        ms: started.elapsed().as_secs_f64() * 1000.0,
        cancelled: ctx.gone.load(Ordering::SeqCst),
    });
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
    resp
}

struct AccessLine<'a> {
    request_id: &'a str,
    peer: Option<IpAddr>,
    principal: Option<&'a str>,
    method: &'a str,
    path: &'a str,
    dataset: Option<&'a str>,
    snapshot_id: Option<&'a str>,
    status: u16,
    bytes: usize,
    ms: f64,
    /// The client closed the connection before the answer was ready.
    cancelled: bool,
}

/// One JSON line per request on stderr: never the query string, a body or a
/// header other than the principal.
fn access_log(l: &AccessLine<'_>) {
    let path: String = l.path.chars().take(512).collect();
    let line = json!({
        "log": "access",
        "ts": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "request_id": l.request_id,
        "peer": l.peer.map(|p| p.to_string()),
        "principal": l.principal,
        "method": l.method,
        "path": path,
        "dataset": l.dataset,
        "snapshot_id": l.snapshot_id,
        "status": l.status,
        "bytes": l.bytes,
        "ms": (l.ms * 10.0).round() / 10.0,
    });
    let mut line = line;
    if l.cancelled {
        line["cancelled"] = json!(true);
    }
    eprintln!("{line}");
}

/// `text` as the explorer may show it to a browser: every configured
/// Dataset URI replaced with its mount name (the server's paths stay on the
/// server), credentials removed (`util::redact`), control characters
/// escaped, and cut at 2,000 characters.
pub fn public_message(config: &WarehouseConfig, text: &str) -> String {
    let mut out = text.to_string();
    let mut uris: Vec<(String, &str)> = config
        .datasets
        .iter()
        .map(|d| (d.uri.to_string(), d.name.as_str()))
        .collect();
    uris.sort_by_key(|(u, _)| std::cmp::Reverse(u.len()));
    for (u, name) in uris {
        let trimmed = u.trim_end_matches('/');
        if !trimmed.is_empty() {
            out = out.replace(trimmed, &format!("<dataset:{name}>"));
        }
    }
    let out = crate::util::redact::redact(&out);
    let out = crate::util::text::escape_control(&out).into_owned();
    if out.chars().count() > 2000 {
        let mut s: String = out.chars().take(2000).collect();
        s.push('…');
        s
    } else {
        out
    }
}

/// HTTP status of any error.
fn status_of(e: &Error) -> u16 {
    use crate::sql::SqlError as S;
    match e {
        e if e.surface::<WebError>().is_some() => {
            e.surface::<WebError>().map_or(500, WebError::status)
        }
        Error::Sql(S::Timeout { .. }) => 504,
        // As nginx logs a request whose client closed the connection.
        Error::Sql(S::Cancelled) => 499,
        Error::Sql(
            S::TooManyRows { .. }
            | S::OutputTooLarge { .. }
            | S::MemoryBudget { .. }
            | S::SpillLimit { .. },
        ) => 422,
        Error::Sql(S::Source { .. } | S::Spill { .. } | S::Internal(_)) => 500,
        Error::Sql(_) => 400,
        Error::Find(crate::find::FindError::Resource { .. }) => 422,
        Error::Find(crate::find::FindError::IndexUnavailable { .. }) => 503,
        Error::Find(_) => 400,
        Error::Ingest(crate::ingest::IngestError::Export(e))
            if matches!(**e, crate::ingest::ExportError::Lossy { .. }) =>
        {
            422
        }
        _ => 500,
    }
}

/// The JSON error body: code, message (URIs redacted), request id, and the
/// Dataset, Source and snapshot the request concerned.
pub fn error_reply(ctx: &Ctx<'_>, e: &Error) -> Reply {
    let status = status_of(e);
    let message = if matches!(e, Error::Internal(_)) {
        "internal error (see the server log)".to_string()
    } else {
        // The CLI's bounds are flags; here they are the request's limits.
        public_message(&ctx.state.config, &e.to_string())
            .replace(" (--timeout)", " (limits.request_timeout_seconds)")
            .replace(
                "longer than --timeout",
                "longer than the request's time limit,",
            )
    };
    if status >= 500 {
        eprintln!(
            "error[{}] request {}: {}",
            e.code(),
            ctx.request_id,
            public_message(&ctx.state.config, &e.to_string())
        );
    }
    let source = e
        .source_path()
        .map(str::to_string)
        .or_else(|| ctx.source_path.clone());
    let mut r = Reply::json(&json!({
        "error": {
            "code": e.code(),
            "status": status,
            "message": message,
            "request_id": ctx.request_id,
            "dataset": ctx.dataset,
            "source_path": source.map(|s| crate::util::text::escape_control(&s).into_owned()),
            "snapshot_id": ctx.snapshot_id,
        }
    }));
    r.status = status;
    if let Some(WebError::MethodNotAllowed { .. }) = e.surface::<WebError>() {
        let allow = if ctx.path.trim_end_matches('/') == "/api/v1/query" {
            "GET, HEAD, POST"
        } else {
            "GET, HEAD"
        };
        r.headers.push(("Allow", allow.into()));
    }
    r
}

fn parse_query(q: &str) -> HashMap<String, String> {
    let mut m = HashMap::new();
    for part in q.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').unwrap_or((part, ""));
        let dec = |s: &str| {
            let s = s.replace('+', " ");
            crate::util::text::percent_decode(&s).unwrap_or(s)
        };
        m.entry(dec(k)).or_insert_with(|| dec(v));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_headers() {
        for ok in [
            "127.0.0.1:8765",
            "localhost",
            "LOCALHOST:80",
            "[::1]:9",
            "127.1.2.3",
            "app.localhost:1",
        ] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.example:8765",
            "10.0.0.1",
            "[fe80::1]:80",
            "localhost.evil.example",
            "",
            "[::1",
        ] {
            assert!(!loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn only_loopback_listens() {
        assert!(listen_addr("127.0.0.1:0").is_ok());
        assert!(listen_addr("[::1]:0").is_ok());
        assert!(listen_addr("localhost:0").is_ok());
        for bad in [
            "0.0.0.0:80",
            "192.168.1.2:80",
            "[::]:80",
            "example.com:80",
            "8080",
            "[::ffff:10.0.0.1]:80",
        ] {
            let e = listen_addr(bad).unwrap_err();
            assert_eq!(e.code(), "PC-WEB-002", "{bad}");
        }
    }

    #[test]
    fn query_strings_decode() {
        let q = parse_query("q=%E4%B8%AD+x&limit=5&q=second");
        assert_eq!(q["q"], "中 x");
        assert_eq!(q["limit"], "5");
    }
}
