//! Starting and stopping the Gateway: the state directory and its lock,
//! WAL recovery, the sink thread, the upstream client and the two
//! listeners (proxy and admin). [`Core`] is the state every connection
//! shares.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::admin::Admin;
use super::config::GatewayConfig;
use super::forward::Proxy;
use super::markdown::markdown_writer;
use super::sink::{Checkpoint, SessionIndex, Sink};
use super::wal::Wal;
use super::GatewayError;
use crate::http::{HttpLimits, HttpResponse, HttpServer};

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
pub(super) struct Stats {
    pub(super) requests: AtomicU64,
    pub(super) in_flight: AtomicI64,
    pub(super) upstream_errors: AtomicU64,
    pub(super) client_disconnects: AtomicU64,
    pub(super) captured_events: AtomicU64,
    pub(super) capture_failures: AtomicU64,
}

/// State shared by the proxy's connections.
pub(super) struct Core {
    pub(super) config: GatewayConfig,
    pub(super) dataset: String,
    pub(super) state_dir: PathBuf,
    pub(super) wal: Arc<Wal>,
    pub(super) sink: Arc<Sink>,
    pub(super) client: reqwest::Client,
    pub(super) seq: AtomicI64,
    pub(super) ids: AtomicU64,
    pub(super) live: Mutex<SessionIndex>,
    pub(super) stats: Stats,
    pub(super) debug: bool,
    pub(super) quiet: bool,
    pub(super) markdown: Option<Mutex<std::sync::mpsc::SyncSender<Value>>>,
    pub(super) started: Instant,
    pub(super) replayed: u64,
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
    })
}

pub(super) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

pub(super) fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A JSON error answer in the shape OpenAI- and Anthropic-style clients read.
pub(super) fn error_response(e: &GatewayError) -> HttpResponse {
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
