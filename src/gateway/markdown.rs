//! The optional Markdown view of captured sessions (`--stream-markdown`):
//! diagnostic only, written beside the WAL and never read back.

use std::io::Write;

use serde_json::Value;

use crate::formats::events::{request_messages, response_reply, Protocol};

/// Append each committed event to `dir/<session>.md`: a diagnostic
/// AgenticMD view (headings per call, the new user turn, the reply), never
/// read back.
pub(super) fn markdown_writer(dir: &std::path::Path, rx: &std::sync::mpsc::Receiver<Value>) {
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

pub(super) fn markdown_of(ev: &Value, history: &mut usize) -> String {
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
