//! Canonical events → Storyline: the deterministic projection of captured
//! LLM traffic (RFC-0002 `http.request` / `http.response[.stream]` pairs)
//! onto runs, steps and tool calls.
//!
//! Events group by `session_id` (one trajectory per session, its run the
//! events' `run_id`); calls (a request and its response, paired by
//! `call_id`) are taken in `seq` order. Each request body is read in its
//! protocol (OpenAI chat completions, OpenAI responses, Anthropic messages)
//! as a list of chat messages; the messages a call adds to the history the
//! previous call sent (and the reply it got) become steps, and the call's
//! response becomes an agent step with its model, usage and timing. Tool
//! results attach to the step whose call they answer. The projection reads
//! the wire bodies (or, for streams, the response assembled from the wire),
//! so it can be rebuilt from the events alone; duplicates of an event (the
//! same `event_id` stored twice) are read once.
//!
//! This module also assembles a streamed (SSE) response into the body the
//! same call would have returned without streaming.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Map, Value};

use super::text;

/// `origin.format` of projected trajectories.
pub const SOURCE: &str = "events";

/// The wire protocol of a captured call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OpenAI `/v1/chat/completions`.
    ChatCompletions,
    /// OpenAI `/v1/responses`.
    Responses,
    /// Anthropic `/v1/messages`.
    AnthropicMessages,
}

impl Protocol {
    /// The protocol served at `path`.
    pub fn from_path(path: &str) -> Option<Self> {
        match path {
            "/v1/chat/completions" => Some(Protocol::ChatCompletions),
            "/v1/responses" => Some(Protocol::Responses),
            "/v1/messages" => Some(Protocol::AnthropicMessages),
            _ => None,
        }
    }

    /// The name recorded in `payload.protocol`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::ChatCompletions => "chat.completions",
            Protocol::Responses => "responses",
            Protocol::AnthropicMessages => "anthropic.messages",
        }
    }

    /// Parse a recorded name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "chat.completions" => Some(Protocol::ChatCompletions),
            "responses" => Some(Protocol::Responses),
            "anthropic.messages" => Some(Protocol::AnthropicMessages),
            _ => None,
        }
    }
}

/// The text parts of a content value, as the Gateway hashes them into a
/// derived session id. Kept apart from [`crate::formats::text::content_text`]
/// (what a person reads, with media placeholders) so that ids of sessions
/// already captured never change.
pub fn session_key_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            let mut out = String::new();
            for p in parts {
                let t = match p {
                    Value::String(s) => Some(s.as_str()),
                    Value::Object(o) => match o.get("type").and_then(Value::as_str) {
                        Some("text" | "input_text" | "output_text") | None => {
                            o.get("text").and_then(Value::as_str)
                        }
                        _ => None,
                    },
                    _ => None,
                };
                if let Some(t) = t {
                    if !out.is_empty() {
                        out.push('\n');
                    }
                    out.push_str(t);
                }
            }
            out
        }
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The chat messages a request body carries, in OpenAI chat shape.
pub fn request_messages(protocol: Protocol, body: &Value) -> Vec<Value> {
    match protocol {
        Protocol::ChatCompletions => match body.get("messages") {
            Some(Value::Array(m)) => m.clone(),
            _ => Vec::new(),
        },
        Protocol::AnthropicMessages => {
            let mut out = Vec::new();
            if let Some(sys @ (Value::String(_) | Value::Array(_))) = body.get("system") {
                out.push(json!({"role": "system", "content": text::content_text(sys)}));
            }
            if let Some(Value::Array(msgs)) = body.get("messages") {
                for m in msgs {
                    let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
                    anthropic_message(role, m.get("content").unwrap_or(&Value::Null), &mut out);
                }
            }
            out
        }
        Protocol::Responses => {
            let mut out = Vec::new();
            if let Some(Value::String(s)) = body.get("instructions") {
                out.push(json!({"role": "system", "content": s}));
            }
            match body.get("input") {
                Some(Value::String(s)) => out.push(json!({"role": "user", "content": s})),
                Some(Value::Array(items)) => responses_items(items, &mut out),
                _ => {}
            }
            out
        }
    }
}

/// One Anthropic message as chat messages (tool results become `tool`
/// messages; tool uses become `tool_calls`; thinking becomes reasoning).
fn anthropic_message(role: &str, content: &Value, out: &mut Vec<Value>) {
    let Value::Array(blocks) = content else {
        out.push(json!({"role": role, "content": text::content_text(content)}));
        return;
    };
    let mut text = Vec::new();
    let mut thinking = Vec::new();
    let mut calls = Vec::new();
    for b in blocks {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(t) = b.get("text").and_then(Value::as_str) {
                    text.push(t.to_string());
                }
            }
            Some("thinking") => {
                if let Some(t) = b.get("thinking").and_then(Value::as_str) {
                    thinking.push(t.to_string());
                }
            }
            Some("tool_use") => calls.push(json!({
                "id": b.get("id").cloned().unwrap_or(Value::Null),
                "type": "function",
                "function": {
                    "name": b.get("name").cloned().unwrap_or(Value::Null),
                    "arguments": b.get("input").cloned().unwrap_or(Value::Null),
                },
            })),
            Some("tool_result") => out.push(json!({
                "role": "tool",
                "tool_call_id": b.get("tool_use_id").cloned().unwrap_or(Value::Null),
                "content": text::content_text(b.get("content").unwrap_or(&Value::Null)),
            })),
            _ => {}
        }
    }
    if text.is_empty() && thinking.is_empty() && calls.is_empty() {
        return;
    }
    let mut m = Map::new();
    m.insert("role".into(), Value::String(role.to_string()));
    m.insert("content".into(), Value::String(text.join("\n")));
    if !thinking.is_empty() {
        m.insert(
            "reasoning_content".into(),
            Value::String(thinking.join("\n")),
        );
    }
    if !calls.is_empty() {
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    out.push(Value::Object(m));
}

/// Responses API input or output items as chat messages.
fn responses_items(items: &[Value], out: &mut Vec<Value>) {
    let mut calls: Vec<Value> = Vec::new();
    let mut reasoning: Vec<String> = Vec::new();
    let flush = |calls: &mut Vec<Value>, reasoning: &mut Vec<String>, out: &mut Vec<Value>| {
        if calls.is_empty() && reasoning.is_empty() {
            return;
        }
        let mut m = Map::new();
        m.insert("role".into(), json!("assistant"));
        m.insert("content".into(), json!(""));
        if !reasoning.is_empty() {
            m.insert("reasoning_content".into(), json!(reasoning.join("\n")));
        }
        if !calls.is_empty() {
            m.insert("tool_calls".into(), Value::Array(std::mem::take(calls)));
        }
        reasoning.clear();
        out.push(Value::Object(m));
    };
    for it in items {
        let ty = it.get("type").and_then(Value::as_str);
        match ty {
            Some("function_call") => calls.push(json!({
                "id": it.get("call_id").cloned().unwrap_or(Value::Null),
                "type": "function",
                "function": {
                    "name": it.get("name").cloned().unwrap_or(Value::Null),
                    "arguments": it.get("arguments").cloned().unwrap_or(Value::Null),
                },
            })),
            Some("reasoning") => {
                let s = it
                    .get("summary")
                    .map(content_text_of_summary)
                    .unwrap_or_default();
                if !s.is_empty() {
                    reasoning.push(s);
                }
            }
            Some("function_call_output") => {
                flush(&mut calls, &mut reasoning, out);
                out.push(json!({
                    "role": "tool",
                    "tool_call_id": it.get("call_id").cloned().unwrap_or(Value::Null),
                    "content": text::content_text(it.get("output").unwrap_or(&Value::Null)),
                }));
            }
            Some("message") | None => {
                let Some(role) = it.get("role").and_then(Value::as_str) else {
                    continue;
                };
                let text = text::content_text(it.get("content").unwrap_or(&Value::Null));
                if role == "assistant" && (!calls.is_empty() || !reasoning.is_empty()) {
                    let mut m = Map::new();
                    m.insert("role".into(), json!("assistant"));
                    m.insert("content".into(), json!(text));
                    if !reasoning.is_empty() {
                        m.insert("reasoning_content".into(), json!(reasoning.join("\n")));
                        reasoning.clear();
                    }
                    if !calls.is_empty() {
                        m.insert(
                            "tool_calls".into(),
                            Value::Array(std::mem::take(&mut calls)),
                        );
                    }
                    out.push(Value::Object(m));
                    continue;
                }
                flush(&mut calls, &mut reasoning, out);
                out.push(json!({"role": role, "content": text}));
            }
            _ => {}
        }
    }
    flush(&mut calls, &mut reasoning, out);
}

fn content_text_of_summary(v: &Value) -> String {
    match v {
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        other => text::content_text(other),
    }
}

/// What a response body says: the assistant message (chat shape), usage and model.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    /// The assistant message, when the body has one.
    pub message: Option<Value>,
    /// Token usage as reported.
    pub usage: Option<Value>,
    /// The model that answered.
    pub model: Option<String>,
}

/// Read a (non-streamed or assembled) response body.
pub fn response_reply(protocol: Protocol, body: &Value) -> Reply {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .map(str::to_string);
    let usage = body.get("usage").filter(|u| u.is_object()).cloned();
    let message = match protocol {
        Protocol::ChatCompletions => body
            .get("choices")
            .and_then(|c| c.get(0))
            .and_then(|c| c.get("message"))
            .cloned(),
        Protocol::AnthropicMessages => {
            let mut out = Vec::new();
            anthropic_message(
                "assistant",
                body.get("content").unwrap_or(&Value::Null),
                &mut out,
            );
            out.into_iter().next()
        }
        Protocol::Responses => {
            let mut out = Vec::new();
            if let Some(Value::Array(items)) = body.get("output") {
                let items: Vec<Value> = items
                    .iter()
                    .map(|i| {
                        let mut i = i.clone();
                        if i.get("type").and_then(Value::as_str) == Some("message") {
                            i["role"] = json!("assistant");
                        }
                        i
                    })
                    .collect();
                responses_items(&items, &mut out);
            }
            merge_assistant(out)
        }
    };
    Reply {
        message,
        usage,
        model,
    }
}

/// Several assistant messages (text, calls, reasoning) as one.
fn merge_assistant(msgs: Vec<Value>) -> Option<Value> {
    if msgs.len() <= 1 {
        return msgs.into_iter().next();
    }
    let mut text = Vec::new();
    let mut reasoning = Vec::new();
    let mut calls = Vec::new();
    for m in msgs {
        let t = text::content_text(m.get("content").unwrap_or(&Value::Null));
        if !t.is_empty() {
            text.push(t);
        }
        if let Some(Value::String(r)) = m.get("reasoning_content") {
            reasoning.push(r.clone());
        }
        if let Some(Value::Array(c)) = m.get("tool_calls") {
            calls.extend(c.iter().cloned());
        }
    }
    let mut m = Map::new();
    m.insert("role".into(), json!("assistant"));
    m.insert("content".into(), json!(text.join("\n")));
    if !reasoning.is_empty() {
        m.insert("reasoning_content".into(), json!(reasoning.join("\n")));
    }
    if !calls.is_empty() {
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    Some(Value::Object(m))
}

/// The `data:` payloads of an SSE stream, in order (`[DONE]` dropped).
pub fn sse_data(wire: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut data = String::new();
    let emit = |data: &mut String, out: &mut Vec<Value>| {
        if !data.is_empty() && data.trim() != "[DONE]" {
            if let Ok(v) = serde_json::from_str(data) {
                out.push(v);
            }
        }
        data.clear();
    };
    for line in wire.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            emit(&mut data, &mut out);
        } else if let Some(d) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(d.strip_prefix(' ').unwrap_or(d));
        }
    }
    emit(&mut data, &mut out);
    out
}

/// The body a streamed call would have returned unstreamed, assembled from
/// its SSE wire; `None` when the stream holds nothing usable.
pub fn assemble_stream(protocol: Protocol, wire: &str) -> Option<Value> {
    let events = sse_data(wire);
    if events.is_empty() {
        return None;
    }
    match protocol {
        Protocol::ChatCompletions => Some(assemble_chat(&events)),
        Protocol::AnthropicMessages => assemble_anthropic(&events),
        Protocol::Responses => assemble_responses(&events),
    }
}

fn append_str(m: &mut Map<String, Value>, key: &str, add: &str) {
    match m.get_mut(key) {
        Some(Value::String(s)) => s.push_str(add),
        _ => {
            m.insert(key.to_string(), Value::String(add.to_string()));
        }
    }
}

fn assemble_chat(events: &[Value]) -> Value {
    let mut id = Value::Null;
    let mut model = Value::Null;
    let mut usage = Value::Null;
    let mut finish = Value::Null;
    let mut msg = Map::new();
    msg.insert("role".into(), json!("assistant"));
    let mut calls: BTreeMap<i64, Map<String, Value>> = BTreeMap::new();
    for e in events {
        if id.is_null() {
            id = e.get("id").cloned().unwrap_or(Value::Null);
        }
        if let Some(m) = e.get("model").filter(|m| m.is_string()) {
            model = m.clone();
        }
        if let Some(u) = e.get("usage").filter(|u| u.is_object()) {
            usage = u.clone();
        }
        let Some(choice) = e.get("choices").and_then(|c| c.get(0)) else {
            continue;
        };
        if let Some(f) = choice.get("finish_reason").filter(|f| !f.is_null()) {
            finish = f.clone();
        }
        let Some(delta) = choice.get("delta") else {
            continue;
        };
        for key in ["content", "reasoning_content", "reasoning"] {
            if let Some(Value::String(s)) = delta.get(key) {
                append_str(&mut msg, key, s);
            }
        }
        if let Some(Value::Array(tcs)) = delta.get("tool_calls") {
            for (n, tc) in tcs.iter().enumerate() {
                let idx = tc.get("index").and_then(Value::as_i64).unwrap_or(n as i64);
                let c = calls.entry(idx).or_default();
                if let Some(v) = tc.get("id").filter(|v| v.is_string()) {
                    c.insert("id".into(), v.clone());
                }
                c.insert("type".into(), json!("function"));
                let f = c
                    .entry("function")
                    .or_insert_with(|| json!({"name": "", "arguments": ""}));
                if let (Some(fo), Some(d)) = (f.as_object_mut(), tc.get("function")) {
                    if let Some(Value::String(n)) = d.get("name") {
                        append_str(fo, "name", n);
                    }
                    if let Some(Value::String(a)) = d.get("arguments") {
                        append_str(fo, "arguments", a);
                    }
                }
            }
        }
    }
    msg.entry("content").or_insert(Value::Null);
    if !calls.is_empty() {
        msg.insert(
            "tool_calls".into(),
            Value::Array(calls.into_values().map(Value::Object).collect()),
        );
    }
    json!({
        "id": id,
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": Value::Object(msg), "finish_reason": finish}],
        "usage": usage,
    })
}

fn assemble_anthropic(events: &[Value]) -> Option<Value> {
    let mut message: Map<String, Value> = Map::new();
    let mut blocks: BTreeMap<i64, Map<String, Value>> = BTreeMap::new();
    let mut partial: HashMap<i64, String> = HashMap::new();
    for e in events {
        match e.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                if let Some(Value::Object(m)) = e.get("message") {
                    message.clone_from(m);
                }
            }
            Some("content_block_start") => {
                let i = e.get("index").and_then(Value::as_i64).unwrap_or(0);
                if let Some(Value::Object(b)) = e.get("content_block") {
                    blocks.insert(i, b.clone());
                }
            }
            Some("content_block_delta") => {
                let i = e.get("index").and_then(Value::as_i64).unwrap_or(0);
                let b = blocks.entry(i).or_default();
                let Some(d) = e.get("delta") else { continue };
                match d.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        if let Some(Value::String(t)) = d.get("text") {
                            append_str(b, "text", t);
                        }
                    }
                    Some("thinking_delta") => {
                        if let Some(Value::String(t)) = d.get("thinking") {
                            append_str(b, "thinking", t);
                        }
                    }
                    Some("input_json_delta") => {
                        if let Some(Value::String(t)) = d.get("partial_json") {
                            partial.entry(i).or_default().push_str(t);
                        }
                    }
                    _ => {}
                }
            }
            Some("message_delta") => {
                if let Some(Value::Object(d)) = e.get("delta") {
                    for (k, v) in d {
                        message.insert(k.clone(), v.clone());
                    }
                }
                if let Some(Value::Object(u)) = e.get("usage") {
                    let mu = message
                        .entry("usage")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Some(mu) = mu.as_object_mut() {
                        for (k, v) in u {
                            mu.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            _ => {}
        }
    }
    if message.is_empty() && blocks.is_empty() {
        return None;
    }
    for (i, text) in partial {
        if let Some(b) = blocks.get_mut(&i) {
            let input = serde_json::from_str(&text).unwrap_or(Value::String(text));
            b.insert("input".into(), input);
        }
    }
    message.insert(
        "content".into(),
        Value::Array(blocks.into_values().map(Value::Object).collect()),
    );
    Some(Value::Object(message))
}

fn assemble_responses(events: &[Value]) -> Option<Value> {
    for e in events.iter().rev() {
        let ty = e.get("type").and_then(Value::as_str).unwrap_or("");
        if matches!(
            ty,
            "response.completed" | "response.incomplete" | "response.failed"
        ) {
            return e.get("response").cloned();
        }
    }
    // No final event: the text deltas.
    let mut text = String::new();
    for e in events {
        if e.get("type").and_then(Value::as_str) == Some("response.output_text.delta") {
            if let Some(Value::String(d)) = e.get("delta") {
                text.push_str(d);
            }
        }
    }
    Some(json!({
        "output": [{"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": text}]}],
    }))
}

mod project;
mod pruned;
pub use project::{
    project, project_each, project_records, sessions, unchanged_sessions, BadRecord, ProjectError,
    RecordTexts, Session, StoredEvent, TextList,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_stream_assembles_text_and_tool_calls() {
        let wire = concat!(
            "data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"你\"}}]}\n\n",
            "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"好\",\"tool_calls\":[{\"index\":0,\"id\":\"t1\",\"function\":{\"name\":\"ls\",\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\n",
            "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n",
            "data: [DONE]\n\n"
        );
        let v = assemble_stream(Protocol::ChatCompletions, wire).unwrap();
        let r = response_reply(Protocol::ChatCompletions, &v);
        let m = r.message.unwrap();
        assert_eq!(m["content"], "你好");
        assert_eq!(m["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
        assert_eq!(r.usage.unwrap()["completion_tokens"], 2);
        assert_eq!(r.model.as_deref(), Some("m"));
    }

    #[test]
    fn anthropic_stream_assembles_blocks() {
        let wire = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"model\":\"claude\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":5}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"tu\",\"name\":\"bash\",\"input\":{}}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"cmd\\\":\\\"ls\\\"}\"}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":7}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
        );
        let v = assemble_stream(Protocol::AnthropicMessages, wire).unwrap();
        assert_eq!(v["usage"]["input_tokens"], 5);
        assert_eq!(v["usage"]["output_tokens"], 7);
        let r = response_reply(Protocol::AnthropicMessages, &v);
        let m = r.message.unwrap();
        assert_eq!(m["content"], "hi");
        assert_eq!(m["tool_calls"][0]["function"]["arguments"]["cmd"], "ls");
    }
}
