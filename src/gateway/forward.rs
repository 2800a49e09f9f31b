//! The proxy listener's handler: check the request, pick the route, record
//! the request event, forward it upstream and answer, capturing the
//! response (streams go through [`super::relay`]).

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use super::capture::{captured_body, captured_headers, response_payload, timing, CallCtx};
use super::config::Provider;
use super::listen::{error_response, now_ms, Core};
use super::relay::relay_stream;
use super::GatewayError;
use crate::formats::events::{request_messages, response_reply, Protocol};
use crate::http::{BodyStream, Handler, HttpRequest, HttpResponse, Refusal};

/// Request headers never sent upstream (hop-by-hop, framing, ours).
pub(super) const NOT_FORWARDED: &[&str] = &[
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
pub(super) const NOT_RETURNED: &[&str] = &[
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

pub(super) struct Proxy {
    pub(super) core: Arc<Core>,
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

pub(super) fn check_host(req: &HttpRequest) -> Result<(), GatewayError> {
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
pub(super) fn session_of(
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
pub(super) fn exchange(core: &Arc<Core>, req: HttpRequest) -> Result<HttpResponse, GatewayError> {
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
        Some(q) => format!(
            "{}{}?{}",
            ctx.route.upstream,
            path,
            crate::util::redact::redact_query(q)
        ),
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
pub(super) const MAX_UPSTREAM_BODY: u64 = 256 << 20;

/// An error with its causes, one line.
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
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
