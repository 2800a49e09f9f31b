//! The sink: moves durable WAL records into `events.lance` in the
//! background, then records the WAL position reached (with the session
//! index as of that position) in `checkpoint.json`. A crash between the
//! Lance append and the checkpoint replays those records on restart: they
//! are stored twice and read once (`duplicate_count`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::wal::{Position, Wal};
use super::GatewayError;

/// Most sessions the index keeps (the least recently active are dropped).
const MAX_SESSIONS: usize = 10_000;
/// Most events in one Lance append.
const MAX_BATCH_EVENTS: usize = 20_000;

/// What the Gateway knows about one session.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SessionInfo {
    /// Run id of its events.
    pub run_id: Option<String>,
    /// Agent id.
    pub agent_id: Option<String>,
    /// First event time.
    pub first_unix_ms: i64,
    /// Last event time.
    pub last_unix_ms: i64,
    /// Requests seen.
    pub calls: u64,
    /// Responses recorded.
    pub responses: u64,
    /// Responses with a status of 400 or more, a gateway error, or a
    /// client that left mid-response.
    pub failed: u64,
    /// Model of the last request.
    pub last_model: Option<String>,
    /// Status of the last response.
    pub last_status: Option<i64>,
    /// Events recorded.
    pub events: u64,
    /// Calls left unanswered when a previous Gateway process stopped.
    #[serde(default)]
    pub interrupted: u64,
}

/// Sessions by id.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SessionIndex {
    /// The sessions.
    pub sessions: HashMap<String, SessionInfo>,
}

impl SessionIndex {
    /// Count one event.
    pub fn apply(&mut self, ev: &Value) {
        let sid = ev
            .get("session_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let ts = ev
            .get("timestamp_unix_ms")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let kind = ev.get("kind").and_then(Value::as_str).unwrap_or("");
        let payload = ev.get("payload").unwrap_or(&Value::Null);
        let s = self.sessions.entry(sid).or_insert_with(|| SessionInfo {
            first_unix_ms: ts,
            ..Default::default()
        });
        s.events += 1;
        s.first_unix_ms = s.first_unix_ms.min(ts);
        s.last_unix_ms = s.last_unix_ms.max(ts);
        if s.run_id.is_none() {
            s.run_id = ev.get("run_id").and_then(Value::as_str).map(str::to_string);
        }
        if s.agent_id.is_none() {
            s.agent_id = ev
                .get("agent_id")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        match kind {
            "http.request" => {
                s.calls += 1;
                s.last_model = payload
                    .get("model")
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
            "http.response" | "http.response.stream" => {
                s.responses += 1;
                let status = payload
                    .get("http")
                    .and_then(|h| h.get("status"))
                    .and_then(Value::as_i64);
                s.last_status = status;
                let left = payload.get("client_disconnected") == Some(&Value::Bool(true));
                if status.is_none_or(|c| c >= 400) || left || payload.get("gateway_error").is_some()
                {
                    s.failed += 1;
                }
            }
            _ => {}
        }
        if self.sessions.len() > MAX_SESSIONS {
            self.evict();
        }
    }

    fn evict(&mut self) {
        let mut by_age: Vec<(i64, String)> = self
            .sessions
            .iter()
            .map(|(k, v)| (v.last_unix_ms, k.clone()))
            .collect();
        by_age.sort();
        let drop = self.sessions.len() - MAX_SESSIONS * 9 / 10;
        for (_, k) in by_age.into_iter().take(drop) {
            self.sessions.remove(&k);
        }
    }

    /// Mark every call still unanswered as interrupted (at start: the
    /// process that forwarded them is gone).
    pub fn close_open_calls(&mut self) {
        for s in self.sessions.values_mut() {
            s.interrupted = s.calls.saturating_sub(s.responses);
        }
    }

    /// Calls of `s` still waiting for their response.
    pub fn in_flight(s: &SessionInfo) -> u64 {
        s.calls.saturating_sub(s.responses + s.interrupted)
    }

    /// The most recently active sessions, newest first, as JSON.
    pub fn list(&self, limit: usize) -> Vec<Value> {
        let mut all: Vec<(&String, &SessionInfo)> = self.sessions.iter().collect();
        all.sort_by(|a, b| b.1.last_unix_ms.cmp(&a.1.last_unix_ms).then(a.0.cmp(b.0)));
        all.into_iter()
            .take(limit)
            .map(|(id, s)| {
                let mut v = serde_json::to_value(s).unwrap_or(Value::Null);
                v["session_id"] = json!(id);
                v["in_flight"] = json!(Self::in_flight(s));
                v
            })
            .collect()
    }
}

/// `checkpoint.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Format version.
    pub version: u32,
    /// WAL position already appended to events.lance.
    pub position: Position,
    /// The next event sequence number.
    pub next_seq: i64,
    /// events.lance version after the last append.
    pub lance_version: Option<u64>,
    /// Events appended by this state directory.
    pub flushed_events: u64,
    /// Sessions as of `position`.
    pub index: SessionIndex,
}

impl Checkpoint {
    /// Read `dir/checkpoint.json` (absent: a fresh state).
    pub fn load(dir: &Path) -> Result<Option<Checkpoint>, GatewayError> {
        let path = dir.join("checkpoint.json");
        match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| GatewayError::State {
                    path: path.display().to_string(),
                    reason: format!("not a valid checkpoint: {e}"),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(GatewayError::State {
                path: path.display().to_string(),
                reason: e.to_string(),
            }),
        }
    }

    /// Write atomically (temporary file, sync, rename, sync directory).
    fn save(&self, dir: &Path) -> std::io::Result<()> {
        use std::io::Write;
        let tmp = dir.join(".checkpoint.json.tmp");
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&serde_json::to_vec(self).map_err(std::io::Error::other)?)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, dir.join("checkpoint.json"))?;
        crate::store::current::sync_dir(dir);
        Ok(())
    }
}

/// What `/admin/status` reports about the sink.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SinkStatus {
    /// events.lance version after the last append.
    pub lance_version: Option<u64>,
    /// Events appended since start.
    pub flushed_events: u64,
    /// Lance appends since start.
    pub appends: u64,
    /// Time of the last append.
    pub last_flush_unix_ms: Option<i64>,
    /// The last append error, when the last attempt failed.
    pub last_error: Option<String>,
    /// WAL position in events.lance.
    pub position: Position,
    /// Compactions of events.lance since start.
    pub compactions: u64,
    /// Time of the last compaction.
    pub last_compaction_unix_ms: Option<i64>,
    /// Old versions of events.lance removed since start.
    pub versions_removed: u64,
}

/// The background mover.
pub struct Sink {
    events_path: String,
    state_dir: PathBuf,
    wal: Arc<Wal>,
    checkpoint: Mutex<Checkpoint>,
    status: Mutex<SinkStatus>,
    exists: AtomicBool,
    stop: Mutex<bool>,
    wake: Condvar,
    interval: Duration,
    compact_every: Option<Duration>,
    retention: Duration,
    on_flush: Option<Arc<dyn Fn() + Send + Sync>>,
    quiet: bool,
}

/// How the sink appends and tidies.
pub struct SinkTiming {
    /// Between appends.
    pub interval: Duration,
    /// Between compactions (None: never).
    pub compact_every: Option<Duration>,
    /// How long replaced versions stay readable.
    pub retention: Duration,
}

impl Sink {
    /// A sink for `events_path` resuming at `checkpoint`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        events_path: String,
        state_dir: PathBuf,
        wal: Arc<Wal>,
        checkpoint: Checkpoint,
        exists: bool,
        timing: SinkTiming,
        on_flush: Option<Arc<dyn Fn() + Send + Sync>>,
        quiet: bool,
    ) -> Arc<Sink> {
        let status = SinkStatus {
            lance_version: checkpoint.lance_version,
            position: checkpoint.position,
            ..Default::default()
        };
        Arc::new(Sink {
            events_path,
            state_dir,
            wal,
            checkpoint: Mutex::new(checkpoint),
            status: Mutex::new(status),
            exists: AtomicBool::new(exists),
            stop: Mutex::new(false),
            wake: Condvar::new(),
            interval: timing.interval,
            compact_every: timing.compact_every,
            retention: timing.retention,
            on_flush,
            quiet,
        })
    }

    /// The sink's status.
    pub fn status(&self) -> SinkStatus {
        self.status
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Run until [`Sink::stop`], appending every `interval`.
    pub fn run(self: Arc<Self>) {
        let mut backoff = self.interval;
        let mut warned: Option<Instant> = None;
        let mut last_compaction = Instant::now();
        loop {
            {
                let g = self
                    .stop
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if *g {
                    break;
                }
                let (g, _) = self
                    .wake
                    .wait_timeout(g, backoff)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if *g {
                    break;
                }
            }
            match self.flush() {
                Ok(_) => {
                    backoff = self.interval;
                    if self
                        .compact_every
                        .is_some_and(|every| last_compaction.elapsed() >= every)
                    {
                        last_compaction = Instant::now();
                        self.compact();
                    }
                }
                Err(e) => {
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                    if warned.is_none_or(|w| w.elapsed() > Duration::from_secs(30)) && !self.quiet {
                        eprintln!(
                            "warning[{}]: {e}; events stay in the WAL and are retried",
                            e.code()
                        );
                        warned = Some(Instant::now());
                    }
                }
            }
        }
        if let Err(e) = self.flush() {
            eprintln!(
                "warning[{}]: {e}; events stay in the WAL and are appended at the next start",
                e.code()
            );
        }
    }

    /// Merge the small fragments appends leave and drop versions older than
    /// the retention. Failures are reported and tried again next time.
    fn compact(&self) {
        if !self.exists.load(Ordering::SeqCst) {
            return;
        }
        match crate::store::events::maintain(&self.events_path, self.retention) {
            Ok((_, _, versions)) => {
                let mut st = self
                    .status
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                st.compactions += 1;
                st.last_compaction_unix_ms = Some(chrono::Utc::now().timestamp_millis());
                st.versions_removed += versions;
                if let Ok(Some(v)) = crate::store::events::latest_version(&self.events_path) {
                    st.lance_version = Some(v);
                }
            }
            Err(e) => {
                if !self.quiet {
                    eprintln!("warning[PC-GW-012]: compacting events.lance failed: {e}");
                }
            }
        }
    }

    /// Ask the loop to append what is left and stop.
    pub fn stop(&self) {
        *self
            .stop
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        self.wake.notify_all();
    }

    /// Append every durable record not yet in events.lance. Returns how
    /// many were appended.
    pub fn flush(&self) -> Result<u64, GatewayError> {
        let mut total = 0u64;
        loop {
            let end = self.wal.end();
            let from = self
                .checkpoint
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .position;
            if end <= from {
                break;
            }
            let records = self.wal.read(from, end, MAX_BATCH_EVENTS)?;
            if records.is_empty() {
                break;
            }
            // A full batch means more is waiting: append again at once;
            // otherwise the next append waits for the interval, so appends
            // stay few and their fragments large.
            let more = records.len() == MAX_BATCH_EVENTS;
            let last = records.last().map_or(from, |r| r.1);
            let events: Vec<Value> = records.into_iter().map(|r| r.0).collect();
            let result = crate::store::events::append(
                &self.events_path,
                &events,
                self.exists.load(Ordering::SeqCst),
            );
            let version = match result {
                Ok(v) => v,
                Err(e) => {
                    // A create that committed but reported an error (or a
                    // table made meanwhile): append from now on.
                    if !self.exists.load(Ordering::SeqCst)
                        && matches!(
                            crate::store::events::latest_version(&self.events_path),
                            Ok(Some(_))
                        )
                    {
                        self.exists.store(true, Ordering::SeqCst);
                    }
                    let msg = e.to_string();
                    self.status
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .last_error = Some(msg.clone());
                    return Err(GatewayError::Sink(msg));
                }
            };
            self.exists.store(true, Ordering::SeqCst);
            crate::util::failpoint::hit("gateway-after-append");
            let mut cp = self
                .checkpoint
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for e in &events {
                cp.index.apply(e);
                if let Some(s) = e.get("seq").and_then(Value::as_i64) {
                    cp.next_seq = cp.next_seq.max(s + 1);
                }
            }
            cp.position = last;
            cp.lance_version = Some(version);
            cp.flushed_events += events.len() as u64;
            cp.version = 1;
            cp.save(&self.state_dir).map_err(|e| GatewayError::State {
                path: self.state_dir.display().to_string(),
                reason: format!("cannot write checkpoint.json: {e}"),
            })?;
            drop(cp);
            self.wal.release(last);
            total += events.len() as u64;
            let mut st = self
                .status
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            st.lance_version = Some(version);
            st.flushed_events += events.len() as u64;
            st.appends += 1;
            st.last_flush_unix_ms = Some(chrono::Utc::now().timestamp_millis());
            st.last_error = None;
            st.position = last;
            drop(st);
            if !more {
                break;
            }
        }
        if total > 0 {
            if let Some(f) = &self.on_flush {
                f();
            }
        }
        Ok(total)
    }
}

/// Events durable in the write-ahead log under `state_dir` but not yet in
/// events.lance (read only; `None` when there is no Gateway state there).
pub fn wal_pending(state_dir: &Path) -> Option<u64> {
    let wal = state_dir.join("wal");
    if !wal.is_dir() {
        return None;
    }
    let from = Checkpoint::load(state_dir)
        .ok()?
        .map_or(Position::default(), |c| c.position);
    super::wal::count_after(&wal, from).ok()
}
