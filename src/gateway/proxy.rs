//! The proxy and admin listeners, and the capture of each exchange.

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::config::{CaptureLevel, GatewayConfig, Provider, Route};
use super::sink::{Checkpoint, SessionIndex, Sink};
use super::wal::Wal;
use super::GatewayError;
use crate::formats::events::{assemble_stream, request_messages, response_reply, Protocol};
use crate::http::{
    BodyStream, Handler, HttpLimits, HttpRequest, HttpResponse, HttpServer, Refusal,
};

/// `source` of every event written here.
const SOURCE: &str = "pchronicle-gateway";
/// Largest body excerpt a `--debug` line shows.
const DEBUG_BODY_BYTES: usize = 2048;
/// Request headers never sent upstream (hop-by-hop, framing, ours).
const NOT_FORWARDED: &[&str] = &[
    "host",
    "content-length",
    "connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "accept-encoding",
    "expect",
];
/// Response headers not passed back (framing is ours).
const NOT_RETURNED: &[&str] = &[
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "date",
    "trailer",
    "upgrade",
    "proxy-connection",
    "access-control-allow-origin",
    "access-control-allow-credentials",
    "access-control-allow-headers",
    "access-control-allow-methods",
    "access-control-expose-headers",
    "access-control-max-age",
];
/// Header names whose values are credentials.
const SENSITIVE: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "openai-api-key",
    "anthropic-api-key",
];
/// Whether `name` (lower case) carries credentials.
pub fn is_sensitive_header(name: &str) -> bool {
    SENSITIVE.contains(&name)
}

/// The placeholder written instead of a credential.
pub const REDACTED: &str = "<redacted>";

/// How the Gateway runs.
pub struct GatewayOptions {
    /// The parsed `gateway.toml`.
    pub config: GatewayConfig,
    /// The target Dataset's name (reported by the admin API).
    pub dataset: String,
    /// Where events go: `<dataset>/events.lance` (a path or an `s3://` URL).
    pub events_path: String,
    /// The WAL / checkpoint directory.
    pub state_dir: PathBuf,
    /// Maintain `markdown/<session>.md` views in the state directory.
    pub stream_markdown: bool,
    /// Mirror dispatch and capture diagnostics to stderr.
    pub debug: bool,
    /// No progress lines.
    pub quiet: bool,
    /// Called after each append to events.lance.
    pub on_flush: Option<Arc<dyn Fn() + Send + Sync>>,
}

/// A running Gateway.
pub struct GatewayHandle {
    proxy: HttpServer,
    admin: Option<HttpServer>,
    sink: Arc<Sink>,
    sink_thread: Option<std::thread::JoinHandle<()>>,
    wal: Arc<Wal>,
    core: Arc<Core>,
    _lock: std::fs::File,
    /// The proxy's address.
    pub proxy_addr: SocketAddr,
    /// The admin API's address.
    pub admin_addr: Option<SocketAddr>,
}

impl GatewayHandle {
    /// Stop accepting, wait up to `grace` for exchanges in progress, append
    /// what the WAL holds to events.lance and stop.
    pub fn shutdown(mut self, grace: Duration) {
        let t = Instant::now();
        self.proxy.shutdown(grace);
        // Streams are still being relayed after their handler returned.
        while self.core.stats.in_flight.load(Ordering::SeqCst) > 0 && t.elapsed() < grace {
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(a) = self.admin.take() {
            a.shutdown(Duration::from_secs(1));
        }
        self.sink.stop();
        if let Some(t) = self.sink_thread.take() {
            let _ = t.join();
        }
        self.wal.stop();
    }
}

/// Counters for `/admin/status`.
#[derive(Default)]
struct Stats {
    requests: AtomicU64,
    in_flight: AtomicI64,
    upstream_errors: AtomicU64,
    client_disconnects: AtomicU64,
    captured_events: AtomicU64,
    capture_failures: AtomicU64,
}

/// State shared by the proxy's connections.
struct Core {
    config: GatewayConfig,
    dataset: String,
    state_dir: PathBuf,
    wal: Arc<Wal>,
    sink: Arc<Sink>,
    client: reqwest::Client,
    seq: AtomicI64,
    ids: AtomicU64,
    live: Mutex<SessionIndex>,
    stats: Stats,
    debug: bool,
    quiet: bool,
    markdown: Option<Mutex<std::sync::mpsc::SyncSender<Value>>>,
    started: Instant,
    replayed: u64,
}

/// Start the Gateway: open the state directory (recovering the WAL), start
/// the sink, and listen.
pub fn start(opts: GatewayOptions) -> Result<GatewayHandle, GatewayError> {
    let cfg = opts.config;
    let state_err = |path: &std::path::Path, e: std::io::Error| GatewayError::State {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    std::fs::create_dir_all(&opts.state_dir).map_err(|e| state_err(&opts.state_dir, e))?;
    let lock_path = opts.state_dir.join("gateway.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| state_err(&lock_path, e))?;
    if lock.try_lock().is_err() {
        return Err(GatewayError::State {
            path: opts.state_dir.display().to_string(),
            reason: "another Gateway is using this state directory".into(),
        });
    }
    let checkpoint = Checkpoint::load(&opts.state_dir)?;
    let fresh = checkpoint.is_none();
    let mut checkpoint = checkpoint.unwrap_or_default();
    if checkpoint.position.segment == 0 {
        // A fresh state: the log starts at the beginning of segment 1.
        checkpoint.position = super::wal::Position {
            segment: 1,
            offset: 0,
        };
    }
    let store_version = crate::store::events::latest_version(&opts.events_path)
        .map_err(|e| GatewayError::Sink(e.to_string()))?;
    if fresh {
        // A new state directory beside an existing store: continue its sequence.
        if let Some(v) = store_version {
            let max = crate::store::events::max_seq(&opts.events_path, v)
                .map_err(|e| GatewayError::Sink(e.to_string()))?;
            checkpoint.next_seq = max.map_or(0, |m| m + 1);
        }
    }
    let mut next_seq = checkpoint.next_seq;
    let mut live = checkpoint.index.clone();
    // Records after the checkpoint are counted as they are read, not kept.
    let (wal, replayed) = Wal::open(&opts.state_dir.join("wal"), checkpoint.position, &mut |v| {
        live.apply(&v);
        if let Some(s) = v.get("seq").and_then(Value::as_i64) {
            next_seq = next_seq.max(s + 1);
        }
    })?;
    // Calls the previous run did not answer will never be answered.
    live.close_open_calls();
    let sink = Sink::new(
        opts.events_path.clone(),
        opts.state_dir.clone(),
        Arc::clone(&wal),
        checkpoint,
        store_version.is_some(),
        super::sink::SinkTiming {
            interval: cfg.flush_interval,
            compact_every: cfg.compact_interval,
            retention: cfg.version_retention,
        },
        opts.on_flush.clone(),
        opts.quiet,
    );
    let client = reqwest::Client::builder()
        .dns_resolver(Arc::new(super::config::PolicyResolver {
            allow: cfg.allow.clone(),
        }))
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(cfg.upstream_timeout.min(Duration::from_secs(30)))
        .read_timeout(cfg.upstream_timeout)
        .pool_idle_timeout(Duration::from_mins(1))
        .build()
        .map_err(|e| GatewayError::Config {
            path: cfg.path.clone(),
            reason: format!("cannot build the HTTP client: {e}"),
        })?;
    let markdown = opts.stream_markdown.then(|| {
        // Bounded: a slow disk drops Markdown lines, never holds events.
        let (tx, rx) = std::sync::mpsc::sync_channel::<Value>(1024);
        let dir = opts.state_dir.join("markdown");
        std::thread::Builder::new()
            .name("pchronicle-markdown".into())
            .spawn(move || markdown_writer(&dir, &rx))
            .ok();
        Mutex::new(tx)
    });
    let bind = |addr: SocketAddr, what: &str| {
        TcpListener::bind(addr).map_err(|e| GatewayError::Listen {
            given: format!("{what} = {addr}"),
            reason: e.to_string(),
        })
    };
    let proxy_listener = bind(cfg.listen, "listen")?;
    let admin_listener = cfg
        .admin_listen
        .map(|a| bind(a, "admin_listen"))
        .transpose()?;
    let proxy_addr = proxy_listener
        .local_addr()
        .map_err(|e| GatewayError::Listen {
            given: cfg.listen.to_string(),
            reason: e.to_string(),
        })?;
    let admin_addr = admin_listener.as_ref().and_then(|l| l.local_addr().ok());
    let limits = HttpLimits {
        head_timeout: Duration::from_secs(10),
        body_timeout: Duration::from_mins(2),
        idle_timeout: Duration::from_secs(75),
        write_timeout: cfg.upstream_timeout,
        max_head_bytes: 64 << 10,
        max_headers: 200,
        max_body_bytes: cfg.max_body_bytes,
        max_connections: cfg.max_connections,
        workers: cfg.max_connections,
    };
    let core = Arc::new(Core {
        dataset: opts.dataset,
        state_dir: opts.state_dir.clone(),
        wal: Arc::clone(&wal),
        sink: Arc::clone(&sink),
        client,
        seq: AtomicI64::new(next_seq),
        ids: AtomicU64::new(0),
        live: Mutex::new(live),
        stats: Stats::default(),
        debug: opts.debug,
        quiet: opts.quiet,
        markdown,
        started: Instant::now(),
        replayed,
        config: cfg,
    });
    let s2 = Arc::clone(&sink);
    let sink_thread = std::thread::Builder::new()
        .name("pchronicle-sink".into())
        .spawn(move || s2.run())
        .map_err(|e| state_err(&opts.state_dir, e))?;
    let proxy = HttpServer::start(
        proxy_listener,
        limits,
        Arc::new(Proxy {
            core: Arc::clone(&core),
        }),
    )
    .map_err(|e| GatewayError::Listen {
        given: proxy_addr.to_string(),
        reason: e.to_string(),
    })?;
    let admin = match admin_listener {
        Some(l) => Some(
            HttpServer::start(
                l,
                HttpLimits {
                    max_body_bytes: 0,
                    max_connections: 64,
                    workers: 4,
                    write_timeout: Duration::from_secs(10),
                    ..limits
                },
                Arc::new(Admin {
                    core: Arc::clone(&core),
                }),
            )
            .map_err(|e| GatewayError::Listen {
                given: "admin_listen".into(),
                reason: e.to_string(),
            })?,
        ),
        None => None,
    };
    // Always printed: scripts and tests read the ports from these lines.
    eprintln!("gateway listening: http://{proxy_addr}/");
    if let Some(a) = admin_addr {
        eprintln!("gateway admin: http://{a}/admin/status");
    }
    if !opts.quiet && replayed > 0 {
        eprintln!("gateway: {replayed} events recovered from the WAL are appended to events.lance");
    }
    Ok(GatewayHandle {
        proxy,
        admin,
        sink,
        sink_thread: Some(sink_thread),
        wal,
        core,
        _lock: lock,
        proxy_addr,
        admin_addr,
    })
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A JSON error answer in the shape OpenAI- and Anthropic-style clients read.
fn error_response(e: &GatewayError) -> HttpResponse {
    let body = json!({
        "type": "error",
        "error": {
            "type": "gateway_error",
            "code": e.code(),
            "message": e.to_string(),
        }
    });
    let mut b = serde_json::to_vec(&body).unwrap_or_default();
    b.push(b'\n');
    HttpResponse::new(
        e.status(),
        vec![
            ("Content-Type".into(), "application/json".into()),
            ("X-Pchronicle-Error-Code".into(), e.code().into()),
        ],
        b,
    )
}

/// Everything one exchange's events share.
struct CallCtx {
    session_id: String,
    run_id: String,
    call_id: String,
    protocol: Protocol,
    route: Route,
    requested_model: String,
    upstream_model: String,
    stream_requested: bool,
    started_ms: i64,
    started: Instant,
}

impl Core {
    fn new_id(&self, prefix: &str) -> String {
        let n = self.ids.fetch_add(1, Ordering::Relaxed);
        let mut h = blake3::Hasher::new();
        h.update(&std::process::id().to_le_bytes());
        h.update(&n.to_le_bytes());
        h.update(
            &std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
                .to_le_bytes(),
        );
        format!("{prefix}{}", &h.finalize().to_hex()[..20])
    }

    /// A new event with the envelope filled in.
    fn event(&self, kind: &str, ctx: &CallCtx, payload: Value) -> Value {
        let ts = now_ms();
        json!({
            "schema_version": 1,
            "event_id": self.new_id("ev-"),
            "run_id": ctx.run_id,
            "session_id": ctx.session_id,
            "agent_id": self.config.agent_id,
            "call_id": ctx.call_id,
            "seq": self.seq.fetch_add(1, Ordering::SeqCst),
            "timestamp_unix_ms": ts,
            "timestamp": rfc3339(ts),
            "producer": concat!("pchronicle/", env!("CARGO_PKG_VERSION")),
            "source": SOURCE,
            "kind": kind,
            "payload": payload,
        })
    }

    /// Replace every configured key value in `text`.
    fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in self.config.secrets() {
            if out.contains(s) {
                out = out.replace(s, REDACTED);
            }
        }
        out
    }

    /// Replace every configured key value in the strings of `v`.
    fn scrub_value(&self, v: &mut Value) {
        match v {
            Value::String(s) if self.config.secrets().iter().any(|k| s.contains(k)) => {
                *s = self.scrub(s);
            }
            Value::Array(a) => a.iter_mut().for_each(|x| self.scrub_value(x)),
            Value::Object(o) => {
                let renamed: Vec<String> = o
                    .keys()
                    .filter(|k| self.config.secrets().iter().any(|s| k.contains(s)))
                    .cloned()
                    .collect();
                for k in renamed {
                    if let Some(x) = o.remove(&k) {
                        o.insert(self.scrub(&k), x);
                    }
                }
                o.values_mut().for_each(|x| self.scrub_value(x));
            }
            _ => {}
        }
    }

    /// Make `ev` durable; then count it.
    fn commit(&self, mut ev: Value) -> Result<(), GatewayError> {
        self.scrub_value(&mut ev);
        let text = serde_json::to_string(&ev).map_err(|e| GatewayError::Capture {
            reason: e.to_string(),
        })?;
        if let Err(e) = self.wal.append(&[text.into_bytes()]) {
            self.stats.capture_failures.fetch_add(1, Ordering::Relaxed);
            return Err(e);
        }
        self.stats.captured_events.fetch_add(1, Ordering::Relaxed);
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .apply(&ev);
        if let Some(m) = &self.markdown {
            let _ = m
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .try_send(ev);
        }
        Ok(())
    }

    fn debug_line(&self, what: &str, ctx: &CallCtx, detail: &str, body: Option<&[u8]>) {
        if !self.debug {
            return;
        }
        let mut line = format!(
            "gateway debug: {what} call={} session={} route={} {detail}",
            ctx.call_id, ctx.session_id, ctx.route.name
        );
        if let Some(b) = body {
            let cut = b.len().min(DEBUG_BODY_BYTES);
            let text = String::from_utf8_lossy(&b[..cut]);
            line.push_str(&format!(
                " body[{}{}]={}",
                b.len(),
                if cut < b.len() { ", cut" } else { "" },
                crate::util::text::escape_control(&text)
            ));
        }
        eprintln!("{}", self.scrub(&line));
    }

    /// One JSON line per finished call on stderr (unless quiet): ids,
    /// route, models, status, size and time; never bodies or headers.
    fn log_call(&self, ctx: &CallCtx, status: u16, bytes: u64, outcome: &str) {
        if self.quiet {
            return;
        }
        let line = json!({
            "gateway": "call",
            "call_id": ctx.call_id,
            "session_id": ctx.session_id,
            "route": ctx.route.name,
            "model": ctx.requested_model,
            "upstream_model": ctx.upstream_model,
            "status": status,
            "stream": ctx.stream_requested,
            "bytes": bytes,
            "ms": (ctx.started.elapsed().as_secs_f64() * 1e4).round() / 10.0,
            "outcome": outcome,
        });
        eprintln!("{line}");
    }

    fn keep_bodies(&self) -> bool {
        self.config.capture_level != CaptureLevel::Summary
    }
}

/// Header list → JSON object (repeated names joined with `, `), credentials
/// replaced by [`REDACTED`] (the name stays).
fn captured_headers(headers: &[(String, String)], secrets: &[String]) -> Value {
    let mut m: Map<String, Value> = Map::new();
    for (k, v) in headers {
        let name = k.to_ascii_lowercase();
        let sensitive = SENSITIVE.contains(&name.as_str()) || secrets.iter().any(|s| v.contains(s));
        let value = if sensitive {
            REDACTED.to_string()
        } else {
            v.clone()
        };
        match m.get_mut(&name) {
            Some(Value::String(prev)) => {
                prev.push_str(", ");
                prev.push_str(&value);
            }
            _ => {
                m.insert(name, Value::String(value));
            }
        }
    }
    Value::Object(m)
}

/// A query string with the values of credential-like parameters replaced.
fn redact_query(q: &str) -> String {
    q.split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, _)) => {
                let low = k.to_ascii_lowercase();
                if [
                    "key",
                    "token",
                    "secret",
                    "sig",
                    "password",
                    "auth",
                    "credential",
                ]
                .iter()
                .any(|w| low.contains(w))
                {
                    format!("{k}={REDACTED}")
                } else {
                    pair.to_string()
                }
            }
            None => pair.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// A body as captured: JSON when it parses, else text; cut past `cap`.
fn captured_body(bytes: &[u8], cap: u64) -> (Value, &'static str, bool) {
    if bytes.len() as u64 > cap {
        let cut = String::from_utf8_lossy(&bytes[..cap as usize]).into_owned();
        return (Value::String(cut), "utf8", true);
    }
    if let Ok(v) = serde_json::from_slice::<Value>(bytes) {
        return (v, "json", false);
    }
    match std::str::from_utf8(bytes) {
        Ok(s) => (Value::String(s.to_string()), "utf8", false),
        Err(_) => (
            Value::String(String::from_utf8_lossy(bytes).into_owned()),
            "utf8-lossy",
            false,
        ),
    }
}

struct Proxy {
    core: Arc<Core>,
}

impl Handler for Proxy {
    fn handle(&self, req: HttpRequest) -> HttpResponse {
        let core = &self.core;
        core.stats.requests.fetch_add(1, Ordering::Relaxed);
        core.stats.in_flight.fetch_add(1, Ordering::SeqCst);
        let r = match exchange(core, req) {
            Ok(r) => r,
            Err(e) => error_response(&e),
        };
        if r.stream.is_none() {
            core.stats.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
        r
    }

    fn refuse(&self, why: Refusal, _peer: SocketAddr) -> HttpResponse {
        let (status, msg) = match why {
            Refusal::Malformed => (400, "the request is not valid HTTP/1.1"),
            Refusal::HeadTooLarge => (431, "request head too large"),
            Refusal::BodyTooLarge => (413, "request body larger than max_body_bytes"),
            Refusal::LengthRequired => (411, "a Content-Length body is required"),
            Refusal::Timeout => (408, "the request did not arrive in time"),
            Refusal::Busy => (503, "too many open connections (max_connections)"),
        };
        let body = json!({"type": "error", "error": {"type": "gateway_error", "code": "PC-GW-006", "message": msg}});
        HttpResponse::new(
            status,
            vec![("Content-Type".into(), "application/json".into())],
            serde_json::to_vec(&body).unwrap_or_default(),
        )
    }
}

fn check_host(req: &HttpRequest) -> Result<(), GatewayError> {
    // A page in a browser must not spend the routes' keys: requests that a
    // browser marks as coming from a page (Origin, or a Sec-Fetch-Site
    // other than none/same-origin) are refused. Programs send neither.
    let site = req.header("sec-fetch-site").map(str::to_ascii_lowercase);
    if req.header("origin").is_some() || site.is_some_and(|s| s != "none" && s != "same-origin") {
        return Err(GatewayError::CrossSite);
    }
    match req.header("host") {
        Some(h) if !crate::http::loopback_host(h) => Err(GatewayError::Host(
            crate::util::text::escape_control(h).into_owned(),
        )),
        _ => Ok(()),
    }
}

/// A session id from the client's header, or one derived from the
/// conversation's opening (its system and first user message), so the
/// calls of one conversation share it.
fn session_of(
    core: &Core,
    req: &HttpRequest,
    protocol: Protocol,
    body: &Value,
) -> Result<String, GatewayError> {
    if let Some(s) = req.header(&core.config.session_header) {
        let s = s.trim();
        if s.is_empty() || s.len() > 256 || s.chars().any(char::is_control) {
            return Err(GatewayError::BadRequest(format!(
                "header {} must be 1 to 256 printable characters",
                core.config.session_header
            )));
        }
        return Ok(s.to_string());
    }
    let msgs = request_messages(protocol, body);
    let mut h = blake3::Hasher::new();
    h.update(core.config.agent_id.as_bytes());
    for role in ["system", "user"] {
        if let Some(m) = msgs
            .iter()
            .find(|m| m.get("role").and_then(Value::as_str) == Some(role))
        {
            h.update(role.as_bytes());
            h.update(
                crate::formats::events::session_key_text(m.get("content").unwrap_or(&Value::Null))
                    .as_bytes(),
            );
        }
    }
    Ok(format!("gw-{}", &h.finalize().to_hex()[..16]))
}

/// Handle one proxied request.
fn exchange(core: &Arc<Core>, req: HttpRequest) -> Result<HttpResponse, GatewayError> {
    check_host(&req)?;
    let (path, query) = match req.target.split_once('?') {
        Some((p, q)) => (p.to_string(), Some(q.to_string())),
        None => (req.target.clone(), None),
    };
    let Some(protocol) = Protocol::from_path(&path) else {
        return Err(GatewayError::NotFound(format!(
            "the gateway forwards POST /v1/chat/completions, /v1/responses and /v1/messages; not {}",
            crate::util::text::escape_control(&path)
        )));
    };
    if req.method != "POST" {
        return Err(GatewayError::BadRequest(format!(
            "{path} takes POST, not {}",
            crate::util::text::escape_control(&req.method)
        )));
    }
    let mut body: Value = serde_json::from_slice(&req.body)
        .map_err(|e| GatewayError::BadRequest(format!("the request body is not JSON: {e}")))?;
    let Some(model) = body
        .get("model")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return Err(GatewayError::BadRequest(
            "the request body has no string `model`".into(),
        ));
    };
    if model.is_empty() || model.len() > 256 || model.chars().any(char::is_control) {
        return Err(GatewayError::BadRequest(
            "`model` must be 1 to 256 printable characters".into(),
        ));
    }
    let provider = match protocol {
        Protocol::AnthropicMessages => Provider::Anthropic,
        _ => Provider::OpenAi,
    };
    let route = core
        .config
        .route(&model, provider)
        .cloned()
        .ok_or_else(|| GatewayError::NoRoute {
            model: crate::util::text::escape_control(&model).into_owned(),
            provider: provider.name(),
        })?;
    let stream_requested = body.get("stream") == Some(&Value::Bool(true));
    let session_id = session_of(core, &req, protocol, &body)?;
    let upstream_model = route.forward.clone().unwrap_or_else(|| model.clone());
    let rewritten = upstream_model != model;
    let upstream_body = if rewritten {
        body["model"] = Value::String(upstream_model.clone());
        serde_json::to_vec(&body).map_err(|e| GatewayError::BadRequest(e.to_string()))?
    } else {
        req.body.clone()
    };
    let ctx = CallCtx {
        run_id: session_id.clone(),
        session_id,
        call_id: core.new_id("call-"),
        protocol,
        requested_model: model.clone(),
        upstream_model: upstream_model.clone(),
        stream_requested,
        started_ms: now_ms(),
        started: Instant::now(),
        route,
    };
    let mut url = format!("{}{}", ctx.route.upstream, path);
    if let Some(q) = &query {
        url.push('?');
        url.push_str(q);
    }
    let captured_url = match &query {
        Some(q) => format!("{}{}?{}", ctx.route.upstream, path, redact_query(q)),
        None => url.clone(),
    };
    let secrets = core.config.secrets();
    // The request event: durable before anything goes upstream.
    let mut http = json!({
        "method": req.method,
        "url": captured_url,
        "path": path,
        "headers": captured_headers(&req.headers, secrets),
        "headers_redacted": true,
        "content_type": req.header("content-type"),
    });
    let mut degraded = !core.keep_bodies();
    if core.keep_bodies() {
        let (b, enc, cut) = captured_body(&req.body, core.config.max_capture_bytes);
        http["request_body"] = b;
        http["body_encoding"] = json!(enc);
        if cut {
            http["body_truncated"] = json!(true);
            degraded = true;
        }
    }
    let conn_header = req.header("connection").map(str::to_string);
    let persistent = req.keep_alive;
    let mut payload = json!({
        "http": http,
        "connection": {
            "http_version": req.version,
            "persistent": persistent,
            "connection_header": conn_header,
            "keep_alive": req.header("keep-alive"),
        },
        "client": {
            "peer": req.peer.to_string(),
            "peer_ip": req.peer.ip().to_string(),
            "peer_port": req.peer.port(),
            "user_agent": req.header("user-agent"),
        },
        "model": model,
        "requested_model": model,
        "upstream_model": upstream_model,
        "model_rewritten": rewritten,
        "protocol": protocol.name(),
        "provider": ctx.route.provider.name(),
        "route": ctx.route.name,
        "stream": stream_requested,
        "capture_level": core.config.capture_level.name(),
    });
    if degraded {
        payload["degraded"] = json!(true);
    }
    let ev = core.event("http.request", &ctx, payload);
    core.commit(ev)?;
    core.debug_line(
        "dispatch",
        &ctx,
        &format!(
            "model={}{} upstream={} stream={}",
            ctx.requested_model,
            if rewritten {
                format!("->{}", ctx.upstream_model)
            } else {
                String::new()
            },
            ctx.route.upstream_host,
            stream_requested
        ),
        Some(&upstream_body),
    );

    // Forward.
    let mut rb = core.client.post(&url).body(upstream_body);
    let mut has_type = false;
    for (k, v) in &req.headers {
        let name = k.to_ascii_lowercase();
        if NOT_FORWARDED.contains(&name.as_str())
            || name == core.config.session_header
            || name.starts_with("x-pchronicle-")
        {
            continue;
        }
        if ctx.route.api_key.is_some() && (name == "authorization" || name == "x-api-key") {
            continue;
        }
        has_type |= name == "content-type";
        rb = rb.header(k.as_str(), v.as_str());
    }
    if !has_type {
        rb = rb.header("content-type", "application/json");
    }
    if let Some(key) = &ctx.route.api_key {
        rb = match ctx.route.provider {
            Provider::OpenAi => rb.header("authorization", format!("Bearer {key}")),
            Provider::Anthropic => rb.header("x-api-key", key.as_str()),
        };
    }
    let sent = crate::util::rt::runtime().block_on(async move { rb.send().await });
    let resp = match sent {
        Ok(r) => r,
        Err(e) => {
            let err = if e.is_timeout() {
                GatewayError::UpstreamTimeout {
                    host: ctx.route.upstream_host.clone(),
                    seconds: core.config.upstream_timeout.as_secs_f64(),
                }
            } else {
                GatewayError::Upstream {
                    host: ctx.route.upstream_host.clone(),
                    reason: core.scrub(&error_chain(&e)),
                }
            };
            core.stats.upstream_errors.fetch_add(1, Ordering::Relaxed);
            let payload = json!({
                "http": {"status": err.status(), "headers": {}, "headers_redacted": true},
                "timing": timing(&ctx, None),
                "gateway_error": {"code": err.code(), "message": err.to_string()},
                "requested_model": ctx.requested_model,
                "upstream_model": ctx.upstream_model,
                "protocol": ctx.protocol.name(),
                "route": ctx.route.name,
                "degraded": true,
            });
            let ev = core.event("http.response", &ctx, payload);
            core.commit(ev)?;
            core.debug_line("capture", &ctx, &format!("error={}", err.code()), None);
            core.log_call(&ctx, err.status(), 0, err.code());
            return Err(err);
        }
    };
    let status = resp.status().as_u16();
    let headers: Vec<(String, String)> = resp
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let is_sse = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("content-type")
            && v.to_ascii_lowercase().contains("text/event-stream")
    });
    let mut out_headers: Vec<(String, String)> = headers
        .iter()
        .filter(|(k, _)| !NOT_RETURNED.contains(&k.to_ascii_lowercase().as_str()))
        .cloned()
        .collect();
    out_headers.push(("X-Pchronicle-Call-Id".into(), ctx.call_id.clone()));
    out_headers.push(("X-Pchronicle-Session-Id".into(), ctx.session_id.clone()));
    let captured_resp_headers = captured_headers(&headers, secrets);
    if is_sse {
        let core2 = Arc::clone(core);
        let stream = BodyStream(Box::new(move |w: &mut dyn Write| {
            let r = relay_stream(&core2, &ctx, resp, status, captured_resp_headers, w);
            core2.stats.in_flight.fetch_sub(1, Ordering::SeqCst);
            r
        }));
        let mut r = HttpResponse::new(status, out_headers, Vec::new());
        r.stream = Some(stream);
        return Ok(r);
    }
    // Whole body: read, capture, then answer.
    let mut resp = resp;
    let mut body_bytes: Vec<u8> = Vec::new();
    let mut upstream_error: Option<String> = None;
    let rt = crate::util::rt::runtime();
    loop {
        match rt.block_on(resp.chunk()) {
            Ok(Some(c)) => {
                if (body_bytes.len() + c.len()) as u64 > MAX_UPSTREAM_BODY {
                    upstream_error = Some(format!(
                        "the response is larger than {MAX_UPSTREAM_BODY} bytes"
                    ));
                    break;
                }
                body_bytes.extend_from_slice(&c);
            }
            Ok(None) => break,
            Err(e) => {
                upstream_error = Some(core.scrub(&error_chain(&e)));
                break;
            }
        }
    }
    drop(resp);
    let content_type = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| v.clone());
    let mut http = json!({
        "status": status,
        "headers": captured_resp_headers,
        "headers_redacted": true,
        "content_type": content_type,
        "truncated": false,
    });
    let parsed: Option<Value> = serde_json::from_slice(&body_bytes).ok();
    let reply = parsed
        .as_ref()
        .map(|v| response_reply(ctx.protocol, v))
        .unwrap_or_default();
    let mut degraded = !core.keep_bodies();
    if core.keep_bodies() {
        let (b, enc, cut) = captured_body(&body_bytes, core.config.max_capture_bytes);
        http["response_body"] = b;
        http["body_encoding"] = json!(enc);
        if cut {
            http["body_truncated"] = json!(true);
            degraded = true;
        }
    }
    let mut payload = response_payload(&ctx, http, None, &reply, core);
    if let Some(e) = &upstream_error {
        payload["upstream_error"] = json!(e);
        degraded = true;
    }
    if degraded {
        payload["degraded"] = json!(true);
    }
    let ev = core.event("http.response", &ctx, payload);
    core.commit(ev)?;
    core.debug_line(
        "capture",
        &ctx,
        &format!(
            "status={status} bytes={} ms={:.1}",
            body_bytes.len(),
            ctx.started.elapsed().as_secs_f64() * 1e3
        ),
        Some(&body_bytes),
    );
    core.log_call(
        &ctx,
        status,
        body_bytes.len() as u64,
        if upstream_error.is_some() {
            "upstream_error"
        } else {
            "ok"
        },
    );
    if let Some(reason) = upstream_error {
        core.stats.upstream_errors.fetch_add(1, Ordering::Relaxed);
        return Err(GatewayError::Upstream {
            host: ctx.route.upstream_host.clone(),
            reason,
        });
    }
    Ok(HttpResponse::new(status, out_headers, body_bytes))
}

/// Largest upstream response read whole.
const MAX_UPSTREAM_BODY: u64 = 256 << 20;

/// An error with its causes, one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        cur = c.source();
    }
    out
}

fn timing(ctx: &CallCtx, ttft: Option<Duration>) -> Value {
    json!({
        "started_at": rfc3339(ctx.started_ms),
        "duration_ms": (ctx.started.elapsed().as_secs_f64() * 1e4).round() / 10.0,
        "ttft_ms": ttft.map(|t| (t.as_secs_f64() * 1e4).round() / 10.0),
    })
}

/// The payload of a response event around its `http` block.
fn response_payload(
    ctx: &CallCtx,
    http: Value,
    ttft: Option<Duration>,
    reply: &crate::formats::events::Reply,
    core: &Core,
) -> Value {
    json!({
        "http": http,
        "timing": timing(ctx, ttft),
        "model": reply.model.clone().unwrap_or_else(|| ctx.upstream_model.clone()),
        "requested_model": ctx.requested_model,
        "upstream_model": ctx.upstream_model,
        "model_rewritten": ctx.upstream_model != ctx.requested_model,
        "usage": reply.usage,
        "protocol": ctx.protocol.name(),
        "provider": ctx.route.provider.name(),
        "route": ctx.route.name,
        "stream": ctx.stream_requested,
        "capture_level": core.config.capture_level.name(),
    })
}

/// Pass an SSE response through chunk by chunk, then capture it. The
/// response event is durable before the final chunk is sent; if it cannot
/// be, the client gets an incomplete response.
fn relay_stream(
    core: &Core,
    ctx: &CallCtx,
    mut resp: reqwest::Response,
    status: u16,
    headers: Value,
    w: &mut dyn Write,
) -> std::io::Result<()> {
    let rt = crate::util::rt::runtime();
    let cap = core.config.max_capture_bytes as usize;
    let mut wire: Vec<u8> = Vec::new();
    let mut wire_cut = false;
    let mut ttft = None;
    let mut total = 0u64;
    let mut client_gone: Option<std::io::Error> = None;
    let mut upstream_error: Option<String> = None;
    // Chunks are relayed as they arrive, except one that carries a stream's
    // final SSE event (`[DONE]`, `message_stop`, `response.completed`…): it
    // waits until more arrives or, at the end, until the response event is
    // durable. A client never holds the final event before the capture.
    let mut held: Option<bytes::Bytes> = None;
    loop {
        match rt.block_on(resp.chunk()) {
            Ok(Some(c)) => {
                if ttft.is_none() {
                    ttft = Some(ctx.started.elapsed());
                }
                total += c.len() as u64;
                // Past the capture bound nothing more is kept, so the stored
                // wire is a prefix of what was sent, never one with holes.
                if !wire_cut && wire.len() + c.len() <= cap {
                    wire.extend_from_slice(&c);
                } else {
                    wire_cut = true;
                }
                let mut out = Vec::with_capacity(2);
                if let Some(prev) = held.take() {
                    out.push(prev);
                }
                if is_final_chunk(&c) {
                    held = Some(c);
                } else {
                    out.push(c);
                }
                if let Err(e) = out
                    .iter()
                    .try_for_each(|b| w.write_all(b))
                    .and_then(|()| w.flush())
                {
                    client_gone = Some(e);
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => {
                upstream_error = Some(core.scrub(&error_chain(&e)));
                break;
            }
        }
    }
    // Dropping the response closes the upstream connection when unfinished.
    drop(resp);
    let text = String::from_utf8_lossy(&wire).into_owned();
    let assembled = assemble_stream(ctx.protocol, &text);
    let reply = assembled
        .as_ref()
        .map(|a| response_reply(ctx.protocol, a))
        .unwrap_or_default();
    let mut http = json!({
        "status": status,
        "headers": headers,
        "headers_redacted": true,
        "content_type": "text/event-stream",
        "truncated": true,
    });
    let mut degraded = core.config.capture_level != CaptureLevel::Full;
    if core.config.capture_level == CaptureLevel::Full {
        http["response_body"] = Value::String(text);
        http["body_encoding"] = json!("sse-wire");
    }
    if wire_cut {
        http["body_truncated"] = json!(true);
        degraded = true;
    }
    let mut payload = response_payload(ctx, http, ttft, &reply, core);
    payload["stream_bytes"] = json!(total);
    if core.keep_bodies() {
        if let Some(a) = assembled {
            payload["assembled"] = a;
        }
    }
    if client_gone.is_some() {
        payload["client_disconnected"] = json!(true);
        degraded = true;
    }
    if let Some(e) = &upstream_error {
        payload["upstream_error"] = json!(e);
        degraded = true;
    }
    if degraded {
        payload["degraded"] = json!(true);
    }
    let ev = core.event("http.response.stream", ctx, payload);
    let committed = core.commit(ev);
    core.debug_line(
        "capture",
        ctx,
        &format!(
            "status={status} stream_bytes={total} ms={:.1}{}{}",
            ctx.started.elapsed().as_secs_f64() * 1e3,
            if client_gone.is_some() {
                " client_disconnected"
            } else {
                ""
            },
            if upstream_error.is_some() {
                " upstream_error"
            } else {
                ""
            }
        ),
        Some(&wire),
    );
    core.log_call(
        ctx,
        status,
        total,
        if client_gone.is_some() {
            "client_disconnected"
        } else if committed.is_err() {
            "capture_failed"
        } else if upstream_error.is_some() {
            "upstream_error"
        } else {
            "ok"
        },
    );
    if let Some(e) = client_gone {
        core.stats
            .client_disconnects
            .fetch_add(1, Ordering::Relaxed);
        return Err(e);
    }
    if let Err(e) = committed {
        eprintln!(
            "warning[{}]: {e}; the stream was cut before its end",
            e.code()
        );
        return Err(std::io::Error::other(e.to_string()));
    }
    if let Some(e) = upstream_error {
        core.stats.upstream_errors.fetch_add(1, Ordering::Relaxed);
        return Err(std::io::Error::other(e));
    }
    if let Some(last) = held {
        w.write_all(&last)?;
        w.flush()?;
    }
    Ok(())
}

/// Whether an SSE chunk carries a stream's final event in one of the three
/// protocols.
fn is_final_chunk(c: &[u8]) -> bool {
    const MARKERS: [&[u8]; 5] = [
        b"[DONE]",
        b"\"message_stop\"",
        b"\"response.completed\"",
        b"\"response.incomplete\"",
        b"\"response.failed\"",
    ];
    MARKERS.iter().any(|m| c.windows(m.len()).any(|w| w == *m))
}

/// Append each committed event to `dir/<session>.md`: a diagnostic
/// AgenticMD view (headings per call, the new user turn, the reply), never
/// read back.
fn markdown_writer(dir: &std::path::Path, rx: &std::sync::mpsc::Receiver<Value>) {
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for ev in rx {
        if seen.len() > 10_000 {
            seen.clear();
        }
        let sid = ev
            .get("session_id")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        let safe: String = sid
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(128)
            .collect();
        // Names that had to be changed get a hash of the original, so two
        // session ids never share a file.
        let name = if safe == sid {
            safe
        } else {
            format!("{safe}-{}", &blake3::hash(sid.as_bytes()).to_hex()[..12])
        };
        let path = dir.join(format!("{name}.md"));
        let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
        else {
            continue;
        };
        let text = markdown_of(&ev, seen.entry(sid.to_string()).or_insert(0));
        let _ = f.write_all(text.as_bytes());
    }
}

fn markdown_of(ev: &Value, history: &mut usize) -> String {
    let kind = ev.get("kind").and_then(Value::as_str).unwrap_or("");
    let payload = ev.get("payload").unwrap_or(&Value::Null);
    let call = ev.get("call_id").and_then(Value::as_str).unwrap_or("");
    let ts = ev.get("timestamp").and_then(Value::as_str).unwrap_or("");
    let mut out = String::new();
    let protocol = payload
        .get("protocol")
        .and_then(Value::as_str)
        .and_then(Protocol::from_name)
        .unwrap_or(Protocol::ChatCompletions);
    if kind == "http.request" {
        let model = payload.get("model").and_then(Value::as_str).unwrap_or("");
        out.push_str(&format!("\n## call {call} · {model} · {ts}\n"));
        if let Some(b) = payload.get("http").and_then(|h| h.get("request_body")) {
            let msgs = request_messages(protocol, b);
            let start = (*history).min(msgs.len());
            for m in &msgs[start..] {
                let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
                let text =
                    crate::formats::text::content_text(m.get("content").unwrap_or(&Value::Null));
                out.push_str(&format!("\n### {role}\n\n{text}\n"));
            }
            *history = msgs.len() + 1;
        }
    } else {
        let status = payload
            .get("http")
            .and_then(|h| h.get("status"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let body = payload
            .get("assembled")
            .or_else(|| payload.get("http").and_then(|h| h.get("response_body")));
        let reply = body
            .map(|b| response_reply(protocol, b))
            .unwrap_or_default();
        out.push_str(&format!("\n### assistant (status {status})\n\n"));
        if let Some(m) = reply.message {
            out.push_str(&crate::formats::text::content_text(
                m.get("content").unwrap_or(&Value::Null),
            ));
            out.push('\n');
            if let Some(Value::Array(calls)) = m.get("tool_calls") {
                for c in calls {
                    let f = c.get("function").unwrap_or(&Value::Null);
                    out.push_str(&format!(
                        "\n- tool call `{}`: `{}`\n",
                        f.get("name").and_then(Value::as_str).unwrap_or("?"),
                        f.get("arguments").map(Value::to_string).unwrap_or_default()
                    ));
                }
            }
        }
    }
    out
}

struct Admin {
    core: Arc<Core>,
}

impl Handler for Admin {
    fn handle(&self, req: HttpRequest) -> HttpResponse {
        match admin(&self.core, &req) {
            Ok(v) => {
                let mut b = serde_json::to_vec_pretty(&v).unwrap_or_default();
                b.push(b'\n');
                HttpResponse::new(
                    200,
                    vec![
                        ("Content-Type".into(), "application/json".into()),
                        ("Cache-Control".into(), "no-store".into()),
                    ],
                    b,
                )
            }
            Err(e) => error_response(&e),
        }
    }

    fn refuse(&self, why: Refusal, peer: SocketAddr) -> HttpResponse {
        Proxy {
            core: Arc::clone(&self.core),
        }
        .refuse(why, peer)
    }
}

fn admin(core: &Core, req: &HttpRequest) -> Result<Value, GatewayError> {
    check_host(req)?;
    let (path, query) = req.target.split_once('?').unwrap_or((&req.target, ""));
    if req.method != "GET" {
        return Err(GatewayError::BadRequest("the admin API takes GET".into()));
    }
    match path {
        "/admin/status" => {
            let sink = core.sink.status();
            let wal_end = core.wal.end();
            let live = core
                .live
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let in_flight: u64 = live.sessions.values().map(SessionIndex::in_flight).sum();
            let sessions = live.sessions.len();
            drop(live);
            let cfg = &core.config;
            Ok(json!({
                "status": "ok",
                "version": env!("CARGO_PKG_VERSION"),
                "uptime_seconds": core.started.elapsed().as_secs_f64(),
                "dataset": core.dataset,
                "state_dir": core.state_dir.display().to_string(),
                "agent_id": cfg.agent_id,
                "capture_level": cfg.capture_level.name(),
                "session_header": cfg.session_header,
                "routes": cfg.routes.iter().map(|r| json!({
                    "name": r.name,
                    "provider": r.provider.name(),
                    "upstream_host": r.upstream_host,
                    "forward": r.forward,
                    "api_key_env": r.api_key_env,
                })).collect::<Vec<_>>(),
                "requests": core.stats.requests.load(Ordering::Relaxed),
                "in_flight_requests": core.stats.in_flight.load(Ordering::SeqCst).max(0),
                "in_flight_calls": in_flight,
                "upstream_errors": core.stats.upstream_errors.load(Ordering::Relaxed),
                "client_disconnects": core.stats.client_disconnects.load(Ordering::Relaxed),
                "captured_events": core.stats.captured_events.load(Ordering::Relaxed),
                "capture_failures": core.stats.capture_failures.load(Ordering::Relaxed),
                "recovered_events": core.replayed,
                "sessions": sessions,
                "wal": {"end": wal_end, "flushed": sink.position, "pending": wal_end > sink.position},
                "sink": sink,
            }))
        }
        "/admin/sessions" => {
            let mut limit = 100usize;
            for pair in query.split('&').filter(|p| !p.is_empty()) {
                match pair.split_once('=') {
                    Some(("limit", v)) => {
                        limit = v
                            .parse::<usize>()
                            .ok()
                            .filter(|n| (1..=10_000).contains(n))
                            .ok_or_else(|| {
                                GatewayError::BadRequest("limit must be 1 to 10000".into())
                            })?;
                    }
                    _ => {
                        return Err(GatewayError::BadRequest(format!(
                            "unknown parameter `{}`",
                            crate::util::text::escape_control(pair)
                        )))
                    }
                }
            }
            let live = core
                .live
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Ok(json!({
                "count": live.sessions.len(),
                "sessions": live.list(limit),
            }))
        }
        other => Err(GatewayError::NotFound(format!(
            "no admin route {}: use /admin/status or /admin/sessions",
            crate::util::text::escape_control(other)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_sse_events_are_recognised() {
        assert!(is_final_chunk(b"data: [DONE]\n\n"));
        assert!(is_final_chunk(
            b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
        ));
        assert!(is_final_chunk(
            b"event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n"
        ));
        assert!(!is_final_chunk(
            b"data: {\"choices\":[{\"delta\":{\"content\":\"DONE\"}}]}\n\n"
        ));
    }

    #[test]
    fn credential_query_values_are_redacted() {
        assert_eq!(
            redact_query("api-key=abc&debug=1&access_token=x&x"),
            "api-key=<redacted>&debug=1&access_token=<redacted>&x"
        );
    }
}
