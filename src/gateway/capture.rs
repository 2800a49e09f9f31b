//! What one exchange leaves behind: the event envelope, the scrubbing of
//! configured key values, the durable commit to the WAL, and the captured
//! form of headers and bodies.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::config::{CaptureLevel, Route};
use super::listen::{now_ms, rfc3339, Core};
use super::GatewayError;
use crate::formats::events::Protocol;
use crate::util::redact::{is_credential_header, REDACTED};

/// `source` of every event written here.
pub(super) const SOURCE: &str = "pchronicle-gateway";

/// Largest body excerpt a `--debug` line shows.
pub(super) const DEBUG_BODY_BYTES: usize = 2048;

/// Everything one exchange's events share.
pub(super) struct CallCtx {
    pub(super) session_id: String,
    pub(super) run_id: String,
    pub(super) call_id: String,
    pub(super) protocol: Protocol,
    pub(super) route: Route,
    pub(super) requested_model: String,
    pub(super) upstream_model: String,
    pub(super) stream_requested: bool,
    pub(super) started_ms: i64,
    pub(super) started: Instant,
}

impl Core {
    pub(super) fn new_id(&self, prefix: &str) -> String {
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
    pub(super) fn event(&self, kind: &str, ctx: &CallCtx, payload: Value) -> Value {
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
    pub(super) fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in self.config.secrets() {
            if out.contains(s) {
                out = out.replace(s, REDACTED);
            }
        }
        out
    }

    /// Replace every configured key value in the strings of `v`.
    pub(super) fn scrub_value(&self, v: &mut Value) {
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
    pub(super) fn commit(&self, mut ev: Value) -> Result<(), GatewayError> {
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

    pub(super) fn debug_line(&self, what: &str, ctx: &CallCtx, detail: &str, body: Option<&[u8]>) {
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
    pub(super) fn log_call(&self, ctx: &CallCtx, status: u16, bytes: u64, outcome: &str) {
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

    pub(super) fn keep_bodies(&self) -> bool {
        self.config.capture_level != CaptureLevel::Summary
    }
}

/// Header list → JSON object (repeated names joined with `, `), credentials
/// replaced by [`REDACTED`] (the name stays).
pub(super) fn captured_headers(headers: &[(String, String)], secrets: &[String]) -> Value {
    let mut m: Map<String, Value> = Map::new();
    for (k, v) in headers {
        let name = k.to_ascii_lowercase();
        let sensitive = is_credential_header(&name) || secrets.iter().any(|s| v.contains(s));
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

/// A body as captured: JSON when it parses, else text; cut past `cap`.
pub(super) fn captured_body(bytes: &[u8], cap: u64) -> (Value, &'static str, bool) {
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

pub(super) fn timing(ctx: &CallCtx, ttft: Option<Duration>) -> Value {
    json!({
        "started_at": rfc3339(ctx.started_ms),
        "duration_ms": (ctx.started.elapsed().as_secs_f64() * 1e4).round() / 10.0,
        "ttft_ms": ttft.map(|t| (t.as_secs_f64() * 1e4).round() / 10.0),
    })
}

/// The payload of a response event around its `http` block.
pub(super) fn response_payload(
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
