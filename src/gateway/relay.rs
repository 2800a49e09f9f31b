//! Relaying a streamed (SSE) response chunk by chunk while keeping a copy,
//! and capturing it once the stream ends.

use std::io::Write;
use std::sync::atomic::Ordering;

use serde_json::{json, Value};

use super::capture::{response_payload, CallCtx};
use super::config::CaptureLevel;
use super::forward::error_chain;
use super::listen::Core;
use crate::formats::events::{assemble_stream, response_reply};

/// Pass an SSE response through chunk by chunk, then capture it. The
/// response event is durable before the final chunk is sent; if it cannot
/// be, the client gets an incomplete response.
pub(super) fn relay_stream(
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
pub(super) fn is_final_chunk(c: &[u8]) -> bool {
    const MARKERS: [&[u8]; 5] = [
        b"[DONE]",
        b"\"message_stop\"",
        b"\"response.completed\"",
        b"\"response.incomplete\"",
        b"\"response.failed\"",
    ];
    MARKERS.iter().any(|m| c.windows(m.len()).any(|w| w == *m))
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
}
