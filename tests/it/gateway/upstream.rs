//! A deterministic LLM upstream on loopback for the Gateway's tests and
//! benchmarks. It speaks OpenAI chat completions, OpenAI responses and
//! Anthropic messages, streamed (SSE, chunked transfer coding, one chunk
//! per event) or not. Answers depend only on the request:
//!
//! - the reply text is `echo: <last user text>`;
//! - a last user text containing `use tool` gets a tool call `lookup`;
//! - a last user text containing `slow stream` streams 40 pieces 50 ms apart;
//! - a last user text containing `hang up` waits 3 s before answering;
//! - model `fail-429` gets a 429 error body; `fail-500` a 500;
//! - `GET /_seen` returns the credential headers of the last request
//!   (`authorization`, `x-api-key`) and its model.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};

/// A running upstream.
pub struct Upstream {
    /// Its address.
    pub addr: SocketAddr,
    seen: Arc<Mutex<Value>>,
}

impl Upstream {
    /// Listen on `127.0.0.1:port` (0: a free port) and serve in the background.
    pub fn start(port: u16) -> Upstream {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind upstream");
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Value::Null));
        let s = Arc::clone(&seen);
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(stream) = conn else { continue };
                let s = Arc::clone(&s);
                thread::spawn(move || serve(stream, &s));
            }
        });
        Upstream { addr, seen }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What the last request carried (credential headers, model).
    pub fn seen(&self) -> Value {
        self.seen.lock().unwrap().clone()
    }
}

fn serve(stream: TcpStream, seen: &Mutex<Value>) {
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("");
        let path = target.split('?').next().unwrap_or("").to_string();
        let mut headers: Vec<(String, String)> = Vec::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let header = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        let len: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if method == "GET" && path == "/_seen" {
            let b = seen.lock().unwrap().to_string();
            if write_whole(&mut out, 200, "application/json", b.as_bytes()).is_err()
                || header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"))
            {
                return;
            }
            continue;
        }
        let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let model = req
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        *seen.lock().unwrap() = json!({
            "authorization": header("authorization"),
            "x-api-key": header("x-api-key"),
            "model": model,
            "path": path,
            "session_header": header("x-pchronicle-session-id"),
        });
        let ok = match model.as_str() {
            "fail-429" => write_whole(
                &mut out,
                429,
                "application/json",
                br#"{"error":{"message":"rate limited","type":"rate_limit_error"}}"#,
            ),
            "fail-500" => write_whole(&mut out, 500, "text/plain", b"upstream broke"),
            _ => answer(&mut out, &path, &req),
        };
        let close = header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        if ok.is_err() || close {
            return;
        }
    }
}

fn write_whole(out: &mut TcpStream, status: u16, ctype: &str, body: &[u8]) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nX-Upstream: mock\r\n\r\n",
        body.len()
    );
    let mut all = head.into_bytes();
    all.extend_from_slice(body);
    out.write_all(&all)
}

/// The last user text of a request in any of the three protocols.
fn last_user(path: &str, req: &Value) -> String {
    let text_of = |c: &Value| -> String {
        match c {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            _ => String::new(),
        }
    };
    if path == "/v1/responses" {
        return match req.get("input") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(items)) => items
                .iter()
                .rev()
                .find(|i| i.get("role").and_then(Value::as_str) == Some("user"))
                .map(|i| text_of(i.get("content").unwrap_or(&Value::Null)))
                .unwrap_or_default(),
            _ => String::new(),
        };
    }
    req.get("messages")
        .and_then(Value::as_array)
        .and_then(|m| {
            m.iter()
                .rev()
                .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        })
        .map(|m| text_of(m.get("content").unwrap_or(&Value::Null)))
        .unwrap_or_default()
}

fn answer(out: &mut TcpStream, path: &str, req: &Value) -> std::io::Result<()> {
    let model = req.get("model").and_then(Value::as_str).unwrap_or("");
    let user = last_user(path, req);
    let text = format!("echo: {user}");
    let tool = user.contains("use tool");
    let slow = user.contains("slow stream");
    if user.contains("hang up") {
        thread::sleep(Duration::from_secs(3));
    }
    let n_msgs = req
        .get("messages")
        .and_then(Value::as_array)
        .map_or(1, Vec::len) as i64;
    let stream = req.get("stream") == Some(&Value::Bool(true));
    let pieces: Vec<String> = if slow {
        (0..40).map(|i| format!("{i} ")).collect()
    } else {
        text.chars()
            .collect::<Vec<_>>()
            .chunks(4)
            .map(|c| c.iter().collect())
            .collect()
    };
    let full: String = pieces.concat();
    let delay = if slow {
        Duration::from_millis(50)
    } else {
        Duration::ZERO
    };
    match path {
        "/v1/chat/completions" => {
            let mut msg = json!({"role": "assistant", "content": full});
            if tool {
                msg["tool_calls"] = json!([{"id": "call_1", "type": "function",
                    "function": {"name": "lookup", "arguments": "{\"q\":\"weather\"}"}}]);
            }
            let usage = json!({"prompt_tokens": n_msgs * 10, "completion_tokens": 5, "total_tokens": n_msgs * 10 + 5});
            if !stream {
                let b = json!({"id": "chatcmpl-1", "object": "chat.completion", "model": model,
                    "choices": [{"index": 0, "message": msg, "finish_reason": if tool {"tool_calls"} else {"stop"}}],
                    "usage": usage});
                return write_whole(out, 200, "application/json", b.to_string().as_bytes());
            }
            let mut events = vec![
                json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": model,
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]}),
            ];
            for p in &pieces {
                events.push(
                    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": model,
                    "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": null}]}),
                );
            }
            if tool {
                events.push(json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": model,
                    "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                        "function": {"name": "lookup", "arguments": "{\"q\":"}}]}, "finish_reason": null}]}));
                events.push(json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": model,
                    "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "\"weather\"}"}}]}, "finish_reason": null}]}));
            }
            events.push(json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": model,
                "choices": [{"index": 0, "delta": {}, "finish_reason": if tool {"tool_calls"} else {"stop"}}], "usage": usage}));
            let frames: Vec<String> = events
                .iter()
                .map(|e| format!("data: {e}\n\n"))
                .chain(std::iter::once("data: [DONE]\n\n".to_string()))
                .collect();
            write_sse(out, &frames, delay)
        }
        "/v1/responses" => {
            let mut output = vec![
                json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": full, "annotations": []}]}),
            ];
            if tool {
                output.push(
                    json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
                    "name": "lookup", "arguments": "{\"q\":\"weather\"}", "status": "completed"}),
                );
            }
            let resp = json!({"id": "resp_1", "object": "response", "status": "completed", "model": model,
                "output": output, "usage": {"input_tokens": 12, "output_tokens": 5, "total_tokens": 17}});
            if !stream {
                return write_whole(out, 200, "application/json", resp.to_string().as_bytes());
            }
            let mut frames = vec![format!(
                "event: response.created\ndata: {}\n\n",
                json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "model": model}})
            )];
            for p in &pieces {
                frames.push(format!(
                    "event: response.output_text.delta\ndata: {}\n\n",
                    json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": p})
                ));
            }
            frames.push(format!(
                "event: response.completed\ndata: {}\n\n",
                json!({"type": "response.completed", "response": resp})
            ));
            write_sse(out, &frames, delay)
        }
        "/v1/messages" => {
            let mut content = vec![json!({"type": "text", "text": full})];
            if tool {
                content.push(json!({"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "weather"}}));
            }
            if !stream {
                let b = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": model,
                    "content": content, "stop_reason": if tool {"tool_use"} else {"end_turn"},
                    "usage": {"input_tokens": n_msgs * 10, "output_tokens": 5}});
                return write_whole(out, 200, "application/json", b.to_string().as_bytes());
            }
            let ev = |name: &str, v: Value| format!("event: {name}\ndata: {v}\n\n");
            let mut frames = vec![
                ev(
                    "message_start",
                    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                    "role": "assistant", "model": model, "content": [], "stop_reason": null,
                    "usage": {"input_tokens": n_msgs * 10, "output_tokens": 1}}}),
                ),
                ev(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}}),
                ),
            ];
            for p in &pieces {
                frames.push(ev(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": p}}),
                ));
            }
            frames.push(ev(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ));
            if tool {
                frames.push(ev("content_block_start", json!({"type": "content_block_start", "index": 1,
                    "content_block": {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}})));
                frames.push(ev(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 1,
                    "delta": {"type": "input_json_delta", "partial_json": "{\"q\": \"weather\"}"}}),
                ));
                frames.push(ev(
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": 1}),
                ));
            }
            frames.push(ev("message_delta", json!({"type": "message_delta",
                "delta": {"stop_reason": if tool {"tool_use"} else {"end_turn"}}, "usage": {"output_tokens": 5}})));
            frames.push(ev("message_stop", json!({"type": "message_stop"})));
            write_sse(out, &frames, delay)
        }
        _ => write_whole(out, 404, "application/json", br#"{"error":"no such path"}"#),
    }
}

/// Send `frames` as an SSE response, one chunk per frame, `delay` apart.
fn write_sse(out: &mut TcpStream, frames: &[String], delay: Duration) -> std::io::Result<()> {
    out.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\nX-Upstream: mock\r\n\r\n",
    )?;
    for f in frames {
        if !delay.is_zero() {
            thread::sleep(delay);
        }
        out.write_all(format!("{:x}\r\n{f}\r\n", f.len()).as_bytes())?;
        out.flush()?;
    }
    out.write_all(b"0\r\n\r\n")
}

/// The full SSE body a streamed request gets (for byte comparisons).
pub fn expected_stream_body(frames: &[String]) -> String {
    frames.concat()
}
