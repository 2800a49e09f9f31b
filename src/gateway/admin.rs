//! The admin listener: `/admin/status` and `/admin/sessions`, read-only.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::{json, Value};

use super::forward::{check_host, Proxy};
use super::listen::{error_response, Core};
use super::sink::SessionIndex;
use super::GatewayError;
use crate::http::{Handler, HttpRequest, HttpResponse, Refusal};

pub(super) struct Admin {
    pub(super) core: Arc<Core>,
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

pub(super) fn admin(core: &Core, req: &HttpRequest) -> Result<Value, GatewayError> {
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
