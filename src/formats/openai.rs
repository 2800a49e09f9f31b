//! OpenAI chat messages → Storyline, in both shapes:
//!
//! - **SFT examples** `{"messages":[…],"tools":[…]}` (one per line or in an
//!   array): one example is one trajectory, one message one turn. There are
//!   no ids in this shape, so the session id is generated Source-locally
//!   (`<record>`), and reported.
//! - **Row-per-LLM-call corpora** (`session_id`, `step_id`, `messages`,
//!   `response`, …): rows group by `session_id` and sort by `step_id`; the
//!   first row's history becomes copied context turns, each row adds its last
//!   user message (when new) and its output. Tool results attach to the turn
//!   whose call they answer (by `tool_call_id`), once.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Map, Value};

use super::json::RecordPos;
use super::model::{Agent, Env, Origin, Storyline, Task, ToolCall, Turn};
use super::openai_encode::{
    history_index, history_len, history_messages, row_built, row_spans, RowInfo, RowPlan,
    ROW_DERIVED,
};
use super::residual::{diff_into, diff_object, join, Residual};
use super::{locator, DecodeCtx, Diagnostic, FormatError};

/// Source name in `unknown_fields`.
pub const SOURCE: &str = "openai-msg";
/// The recorded shape (`unknown_fields.sources.openai-msg.shape`) of a
/// document decoded from an SFT example.
pub const SHAPE_SFT: &str = "sft";
/// The recorded shape of a document decoded from row-per-call rows.
pub const SHAPE_ROWS: &str = "rows";
const ARRAYS: &[&str] = &["session_steps", "messages", "tool_calls"];

/// Reasoning spellings, in order of preference.
const REASONING_KEYS: &[&str] = &["reasoning_content", "reasoning", "thinking"];

pub(crate) fn role_src(role: &str) -> &'static str {
    match role {
        "system" | "developer" => "system",
        "user" => "user",
        "assistant" => "agent",
        "tool" | "function" => "tool",
        _ => "unknown",
    }
}

/// Reasoning text of a message: the first reasoning key with a string, or
/// `thinking` content parts.
pub(crate) fn reasoning_of(m: &Map<String, Value>) -> Option<String> {
    for k in REASONING_KEYS {
        if let Some(Value::String(s)) = m.get(*k) {
            if !s.is_empty() {
                return Some(s.clone());
            }
        }
    }
    if let Some(Value::Array(parts)) = m.get("content") {
        let t: Vec<&str> = parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("thinking"))
            .filter_map(|p| {
                p.get("thinking")
                    .or_else(|| p.get("text"))
                    .and_then(Value::as_str)
            })
            .collect();
        if !t.is_empty() {
            return Some(t.join("\n"));
        }
    }
    None
}

/// The arguments of an OpenAI call as Storyline `args`, with the original
/// text when it must be kept: a JSON string holding a JSON object, array,
/// number, boolean or null is read as that value (and its text kept when it
/// is not the value's canonical JSON); any other string (not JSON, or a
/// quoted JSON string) stays the string itself; arguments given as JSON
/// rather than as a string are taken as they are.
pub(crate) fn read_arguments(raw: Value) -> (Value, Option<String>) {
    match raw {
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(v) if !v.is_string() => {
                // The text is kept unless it is exactly the value's canonical JSON.
                let keep = serde_json::to_string(&v).map_or(true, |t| t != s);
                (v, keep.then_some(s))
            }
            _ => (Value::String(s), None),
        },
        other => (other, None),
    }
}

/// Map OpenAI `tool_calls` to Storyline calls. Arguments given as a JSON
/// string are parsed (see [`read_arguments`]); other strings are kept as
/// strings.
pub(crate) fn convert_calls(
    calls: &[Value],
    step: i64,
    ctx: &mut DecodeCtx,
    at: &str,
) -> Vec<ToolCall> {
    let mut out = Vec::with_capacity(calls.len());
    for (c, call) in calls.iter().enumerate() {
        let Some(o) = call.as_object() else {
            ctx.diag(
                Diagnostic::LENIENT_VALUE,
                format!("{at}/tool_calls/{c}"),
                "a tool call that is not an object was skipped",
            );
            continue;
        };
        let f = o.get("function").and_then(Value::as_object);
        let func = match f
            .and_then(|f| f.get("name"))
            .or_else(|| o.get("name"))
            .and_then(Value::as_str)
        {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => {
                ctx.diag(
                    Diagnostic::LENIENT_VALUE,
                    format!("{at}/tool_calls/{c}"),
                    "tool call without a function name; using `unknown`",
                );
                "unknown".to_string()
            }
        };
        let tcid = if let Some(id) = o
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            id.to_string()
        } else {
            let g = format!("step-{step}-tool-{c}");
            ctx.diag(
                Diagnostic::GENERATED_ID,
                format!("{at}/tool_calls/{c}/id"),
                format!("tool call without id; using `{g}`"),
            );
            g
        };
        let raw = f
            .and_then(|f| f.get("arguments"))
            .or_else(|| o.get("arguments"))
            .cloned()
            .unwrap_or(Value::Null);
        let (args, args_raw) = read_arguments(raw);
        out.push(ToolCall {
            tcid,
            func,
            args,
            result: None,
            duration_ms: None,
            extra: None,
            kind: None,
            response: None,
            args_raw,
        });
    }
    out
}

pub(crate) fn attach_result(
    turns: &mut [Turn],
    owner: &HashMap<String, usize>,
    fallback: Option<usize>,
    tcid: &str,
    content: Value,
) -> bool {
    attach_result_content(turns, owner, fallback, tcid, Some(content))
}

/// [`attach_result`] of a tool message that may have no `content` (the
/// result then has none either, so the message is written back the same).
pub(crate) fn attach_result_content(
    turns: &mut [Turn],
    owner: &HashMap<String, usize>,
    fallback: Option<usize>,
    tcid: &str,
    content: Option<Value>,
) -> bool {
    let (idx, linked) = match owner.get(tcid) {
        Some(&i) => (i, true),
        None => match fallback {
            Some(i) => (i, false),
            None => return false,
        },
    };
    let t = &mut turns[idx];
    let obs = t
        .observation
        .get_or_insert_with(|| json!({ "results": [] }));
    if let Some(Value::Array(r)) = obs.get_mut("results") {
        let mut item = Map::new();
        if !tcid.is_empty() {
            item.insert("source_call_id".into(), json!(tcid));
        }
        if let Some(c) = content {
            item.insert("content".into(), c);
        }
        r.push(Value::Object(item));
    }
    linked
}

/// Decode one SFT example.
///
/// Everything the encoder would write differently from the example is kept
/// as the residual: the example's own keys beside `messages` and `tools`
/// (`instance_id`, `resolved`, …), message and call keys without a Storyline
/// field (`name`, `index`, `"tool_calls": null`, …), the original text of
/// arguments, the order of tool messages. It is the difference between the
/// example and what [`super::openai_encode::sft_record`] writes from the
/// decoded document, so an export gives the example back; the shape is
/// recorded with it, so the encoder knows the document is an SFT example.
pub fn decode_sft(
    v: Value,
    pos: RecordPos,
    ctx: &mut DecodeCtx,
    sink: &mut dyn FnMut(Storyline),
) -> Result<(), FormatError> {
    let at = locator(pos);
    let Value::Object(o) = &v else {
        return Err(ctx.schema(at, "an OpenAI example must be a JSON object"));
    };
    let Some(Value::Array(messages)) = o.get("messages") else {
        return Err(FormatError::NotThisFormat {
            source_path: ctx.source_path.clone(),
            record: pos.index + 1,
            expected: "OpenAI messages",
        });
    };
    let session = format!("{}", pos.index + 1);
    ctx.diag(
        Diagnostic::GENERATED_ID,
        format!("{at} /session"),
        format!("OpenAI examples carry no ids; session `{session}` generated"),
    );
    let mut doc = Storyline::new(session, "openai-import");
    doc.origin = Some(Origin {
        format: SOURCE.into(),
        schema_version: None,
        document_id: None,
    });
    doc.agent.tools = o.get("tools").or_else(|| o.get("functions")).cloned();
    let mut owner: HashMap<String, usize> = HashMap::new();
    let mut seen = HashSet::new();
    for (i, m) in messages.iter().enumerate() {
        let mp = format!("/messages/{i}");
        let Value::Object(mo) = m else {
            return Err(ctx.schema(format!("{at} {mp}"), "a message must be an object"));
        };
        let role = mo.get("role").and_then(Value::as_str).unwrap_or("");
        if role == "tool" || role == "function" {
            let tcid = mo.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
            let fallback = doc.turns.len().checked_sub(1);
            let linked = attach_result_content(
                &mut doc.turns,
                &owner,
                fallback,
                tcid,
                mo.get("content").cloned(),
            );
            if !linked {
                ctx.diag(
                    Diagnostic::ORPHAN_RESULT,
                    format!("{at} {mp}"),
                    format!("tool message names no earlier call (`{tcid}`)"),
                );
            }
            continue;
        }
        let id = i as i64 + 1;
        let mut turn = Turn::new(
            id,
            role_src(role),
            mo.get("content").cloned().unwrap_or(Value::Null),
        );
        turn.reason = reasoning_of(mo);
        if let Some(Value::Array(calls)) = mo.get("tool_calls") {
            let c = convert_calls(calls, id, ctx, &format!("{at} {mp}"));
            for call in &c {
                if !seen.insert(call.tcid.clone()) {
                    ctx.diag(
                        Diagnostic::DUPLICATE_TOOL_CALL_ID,
                        format!("{at} {mp}/tool_calls"),
                        format!("tool call id `{}` is used more than once", call.tcid),
                    );
                }
                owner.insert(call.tcid.clone(), doc.turns.len());
            }
            turn.tool_calls = Some(c);
        }
        doc.turns.push(turn);
    }
    let built = super::openai_encode::sft_record(&doc);
    let mut res = Residual::default();
    diff_into(&mut res, "", &v, &built);
    res.note("shape", json!(SHAPE_SFT));
    let d = format!("{}#{}", ctx.source_path, pos.index + 1);
    res.apply(&mut doc, SOURCE, &d, ARRAYS);
    sink(doc);
    Ok(())
}

/// Collects rows of a row-per-call corpus; sessions are built at the end.
#[derive(Debug, Default)]
pub struct RowCollector {
    rows: Vec<(usize, Map<String, Value>)>,
    envelope: Map<String, Value>,
    /// The rows came in a `session_steps` envelope (written back as one).
    enveloped: bool,
}

impl RowCollector {
    /// Add one record: a row, or an envelope with `session_steps`.
    pub fn push(
        &mut self,
        v: Value,
        pos: RecordPos,
        ctx: &mut DecodeCtx,
    ) -> Result<(), FormatError> {
        match v {
            Value::Object(mut o) if o.contains_key("session_steps") => {
                if let Some(Value::Array(rows)) = o.remove("session_steps") {
                    for r in rows {
                        self.push(r, pos, ctx)?;
                    }
                }
                self.enveloped = true;
                self.envelope.extend(o);
                Ok(())
            }
            Value::Object(o) => {
                if !o.contains_key("session_id") {
                    return Err(ctx.schema(
                        format!("{} /session_id", locator(pos)),
                        "an OpenAI row needs session_id",
                    ));
                }
                self.rows.push((self.rows.len(), o));
                Ok(())
            }
            _ => Err(ctx.schema(locator(pos), "an OpenAI row must be a JSON object")),
        }
    }

    /// Build one Storyline per session, in order of first appearance.
    pub fn finish(
        self,
        ctx: &mut DecodeCtx,
        sink: &mut dyn FnMut(Storyline),
    ) -> Result<(), FormatError> {
        let mut order: Vec<String> = Vec::new();
        let mut groups: HashMap<String, Vec<(usize, Map<String, Value>)>> = HashMap::new();
        for (r, row) in self.rows {
            let sid = match row.get("session_id") {
                Some(Value::String(s)) if !s.is_empty() => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => {
                    return Err(ctx.schema(
                        format!("/session_steps/{r}/session_id"),
                        "must be a non-empty string",
                    ))
                }
            };
            if !groups.contains_key(&sid) {
                order.push(sid.clone());
            }
            groups.entry(sid).or_default().push((r, row));
        }
        for sid in order {
            let mut rows = groups.remove(&sid).unwrap_or_default();
            rows.sort_by_key(|(r, row)| {
                (
                    row.get("step_id")
                        .and_then(Value::as_i64)
                        .unwrap_or(i64::MAX),
                    *r,
                )
            });
            let doc = build_session(&sid, rows, &self.envelope, self.enveloped, ctx)?;
            sink(doc);
        }
        Ok(())
    }
}

const ROW_METRICS: &[&str] = &[
    "reward",
    "step_reward",
    "is_terminal",
    "is_truncated",
    "is_session_completed",
    "is_trainable",
];
const ENV_METRICS: &[&str] = &[
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "request_bytes",
    "response_bytes",
    "output_bytes",
    "output_chunk_count",
    "finish_reason",
    "status_code",
    "retry_count",
    "upstream_latency_ms",
    "gateway_overhead_ms",
    "total_latency_ms",
    "ttft_ms",
    "truncate_reason",
    "error_type",
    "error_text",
    "client_cancelled",
    "upstream_cancelled",
    "synthetic_stop",
    "is_truncated",
    "is_session_completed",
    "max_steps",
    "is_stream",
    "payload_sampled",
    "created_at",
    "completed_at",
];

fn decode_json_string(v: Value) -> Value {
    match v {
        Value::String(s) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
        other => other,
    }
}

fn usable(m: &Map<String, Value>) -> bool {
    let content_ok = match m.get("content") {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(parts)) => parts.iter().any(|p| {
            p.get("text")
                .and_then(Value::as_str)
                .is_some_and(|t| !t.is_empty())
        }),
        _ => false,
    };
    let calls_ok = m
        .get("tool_calls")
        .and_then(Value::as_array)
        .is_some_and(|c| !c.is_empty());
    content_ok || calls_ok
}

/// Build the document of session `sid` from its rows (in step order).
///
/// The turns, run, agent, task and metrics are read from the rows as
/// documented; everything else of each row is kept as the residual: the
/// difference between the row and what the rows encoder
/// ([`super::openai_encode::row_built`]) writes from the document, so that
/// an export gives the rows back. How rows map to turns (file position, step
/// id, context count, which row keys the encoder writes) is recorded with it.
fn build_session(
    sid: &str,
    rows: Vec<(usize, Map<String, Value>)>,
    envelope: &Map<String, Value>,
    enveloped: bool,
    ctx: &mut DecodeCtx,
) -> Result<Storyline, FormatError> {
    let mut doc = Storyline::new(sid, "openai-import");
    doc.origin = Some(Origin {
        format: SOURCE.into(),
        schema_version: None,
        document_id: Some(ctx.source_path.clone()),
    });
    let mut res = Residual::default();
    for (k, v) in envelope {
        res.put(join("", k), v.clone());
    }
    let mut owner: HashMap<String, usize> = HashMap::new();
    let mut seen_results: HashSet<String> = HashSet::new();
    let mut seen_calls: HashSet<String> = HashSet::new();
    let mut step_ids = HashSet::new();
    let mut agent_id: Option<String> = None;
    let mut meta_source: Option<String> = None;
    let mut last_request: Option<Value> = None;
    let mut context_count = 0i64;
    let mut env = Env::default();
    let mut state = Map::new();
    let mut infos: Vec<RowInfo> = Vec::with_capacity(rows.len());
    for (n, (r, original)) in rows.iter().enumerate() {
        let r = *r;
        // The row is read from a copy: the original stays for the residual.
        let mut row = original.clone();
        let rp = format!("/session_steps/{r}");
        let step_id = match row.remove("step_id").and_then(|v| v.as_i64()) {
            // Turn ids are derived as 2 × step_id; keep them far from overflow.
            Some(s) if (0..=1 << 40).contains(&s) => s,
            Some(s) => {
                ctx.diag(
                    Diagnostic::LENIENT_VALUE,
                    format!("{rp}/step_id"),
                    format!("step_id {s} is out of range; using {}", n + 1),
                );
                n as i64 + 1
            }
            None => {
                ctx.diag(
                    Diagnostic::GENERATED_ID,
                    format!("{rp}/step_id"),
                    format!("row without step_id; using {}", n + 1),
                );
                n as i64 + 1
            }
        };
        infos.push(RowInfo {
            at: r as u64,
            step: step_id,
            with_output: false,
        });
        if !step_ids.insert(step_id) {
            ctx.diag(
                Diagnostic::STEP_ORDER,
                format!("{rp}/step_id"),
                format!("step_id {step_id} appears twice in session `{sid}`"),
            );
        }
        for key in ["run_id", "run_bucket", "job_id"] {
            if let Some(Value::String(v)) = row.remove(key) {
                match &doc.run {
                    None if !v.is_empty() => doc.run = Some(v),
                    Some(existing) if *existing != v && !v.is_empty() => {
                        ctx.diag(
                            Diagnostic::LENIENT_VALUE,
                            format!("{rp}/{key}"),
                            format!("run `{v}` differs from `{existing}` earlier in the session"),
                        );
                    }
                    _ => {}
                }
            }
        }
        let meta = row.remove("meta_json").map(decode_json_string);
        let mut env_state = Map::new();
        if let Some(Value::Object(mut mo)) = meta {
            if let Some(Value::String(s)) = mo.remove("source") {
                meta_source.get_or_insert(s);
            }
            if let Some(Value::Object(es)) = mo.remove("env_state").map(decode_json_string) {
                env_state = es;
            }
            if let Some(g) = mo.remove("group_id") {
                state.entry("group_id").or_insert(g);
            }
        }
        if let Some(Value::String(a)) = row.remove("agent_id") {
            if !a.is_empty() {
                agent_id.get_or_insert(a);
            }
        }
        let model = row
            .remove("agent_model")
            .or_else(|| row.remove("llm_model"))
            .and_then(|v| v.as_str().map(str::to_string));
        if doc.agent.model.is_none() {
            doc.agent.model.clone_from(&model);
        }
        if let Some(Value::String(e)) = row.remove("env_name") {
            env.name.get_or_insert(e);
        }
        for key in ["dataset_type", "dt"] {
            if let Some(v) = row.remove(key) {
                state.entry(key).or_insert(v);
            }
        }
        let created_at = row.remove("created_at").filter(|v| !v.is_null());
        let event_id = row.remove("id");
        let messages: Vec<Value> = match row
            .remove("messages")
            .or_else(|| row.remove("messages_json").map(decode_json_string))
        {
            Some(Value::Array(m)) => m,
            _ => Vec::new(),
        };
        let response = row
            .remove("response")
            .or_else(|| row.remove("response_json").map(decode_json_string));
        let mut metrics = Map::new();
        for k in ENV_METRICS {
            if let Some(v) = env_state.remove(*k) {
                metrics.insert((*k).to_string(), v);
            }
        }
        for k in ROW_METRICS {
            if let Some(v) = row.remove(*k) {
                metrics.insert((*k).to_string(), v);
            }
        }
        if let Some(Value::String(e)) = env_state.remove("endpoint") {
            env.endpoint.get_or_insert(e);
        }
        for k in ["redaction_policy", "upstream_base_url", "weight_version"] {
            if let Some(v) = env_state.remove(k) {
                state.entry(k).or_insert(v);
            }
        }
        let mut turn_env = Env::default();
        if let Some(Value::String(e)) = event_id {
            turn_env.id = Some(e);
        }
        if let Some(Value::String(e)) = env_state.remove("event_type") {
            turn_env.event_type = Some(e);
        }
        if let Some(Value::String(e)) = env_state.remove("request_id") {
            turn_env.request_id = Some(e);
        }

        let last_user = messages
            .iter()
            .rposition(|m| m.get("role").and_then(Value::as_str) == Some("user"));
        if n == 0 {
            for m in messages.iter().take(last_user.unwrap_or(0)) {
                let Some(mo) = m.as_object() else { continue };
                let role = mo.get("role").and_then(Value::as_str).unwrap_or("");
                if !matches!(role, "system" | "developer" | "user" | "assistant") {
                    continue;
                }
                context_count += 1;
                let mut t = Turn::new(
                    context_count,
                    role_src(role),
                    mo.get("content").cloned().unwrap_or(Value::Null),
                );
                t.copied = Some(true);
                if role == "assistant" {
                    if let Some(Value::Array(calls)) = mo.get("tool_calls") {
                        let c = convert_calls(calls, context_count, ctx, &rp);
                        for call in &c {
                            seen_calls.insert(call.tcid.clone());
                            owner.insert(call.tcid.clone(), doc.turns.len());
                        }
                        if !c.is_empty() {
                            t.tool_calls = Some(c);
                        }
                    }
                    t.kind = Some(
                        if t.tool_calls.is_some() {
                            "autonomous"
                        } else {
                            "llm.response"
                        }
                        .into(),
                    );
                } else {
                    t.kind = Some(
                        if role == "user" {
                            "llm.request"
                        } else {
                            "context"
                        }
                        .into(),
                    );
                }
                doc.turns.push(t);
            }
        }
        // Request turn: the row's last user message, when it is new.
        if let Some(u) = last_user {
            let content = messages[u].get("content").cloned().unwrap_or(Value::Null);
            if last_request.as_ref() != Some(&content) {
                let mut t = Turn::new(context_count + 2 * step_id - 1, "user", content.clone());
                t.kind = Some("llm.request".into());
                t.ts.clone_from(&created_at);
                doc.turns.push(t);
                last_request = Some(content);
            }
        }
        // Tool results in this row answer earlier calls.
        let resp_index = doc.turns.len();
        let mut pending_results = Vec::new();
        for m in &messages {
            if m.get("role").and_then(Value::as_str) != Some("tool") {
                continue;
            }
            let tcid = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
            if tcid.is_empty() || !seen_results.insert(tcid.to_string()) {
                continue;
            }
            pending_results.push((
                tcid.to_string(),
                m.get("content").cloned().unwrap_or(Value::Null),
            ));
        }
        // Response turn.
        let output = match response.as_ref().and_then(Value::as_object) {
            Some(r) if usable(r) => Some(r.clone()),
            _ => messages
                .iter()
                .rev()
                .filter_map(Value::as_object)
                .find(|m| {
                    m.get("role").and_then(Value::as_str) == Some("assistant")
                        && (usable(m) || m.get("refusal").is_some_and(|r| !r.is_null()))
                })
                .cloned(),
        };
        let Some(out) = output else {
            ctx.diag(
                Diagnostic::LENIENT_VALUE,
                rp.clone(),
                "row has no usable assistant output",
            );
            for (tcid, content) in pending_results {
                attach_result(&mut doc.turns, &owner, None, &tcid, content);
            }
            continue;
        };
        let mut msg = out.get("content").cloned().unwrap_or(Value::Null);
        if msg.is_null() || msg.as_str() == Some("") {
            if let Some(r) = out.get("refusal").filter(|r| !r.is_null()) {
                msg = r.clone();
            }
        }
        let mut t = Turn::new(context_count + 2 * step_id, "agent", msg);
        t.nllm = Some(1);
        t.reason = reasoning_of(&out);
        t.model = model;
        t.ts = created_at;
        if let Some(Value::Array(calls)) = out.get("tool_calls") {
            let c = convert_calls(calls, t.id, ctx, &format!("{rp}/response"));
            for call in &c {
                if !seen_calls.insert(call.tcid.clone()) {
                    ctx.diag(
                        Diagnostic::DUPLICATE_TOOL_CALL_ID,
                        format!("{rp}/response/tool_calls"),
                        format!("tool call id `{}` is used more than once", call.tcid),
                    );
                }
                owner.insert(call.tcid.clone(), resp_index);
            }
            if !c.is_empty() {
                t.tool_calls = Some(c);
            }
        }
        t.kind = Some(
            if t.tool_calls.is_some() {
                "autonomous"
            } else {
                "llm.response"
            }
            .into(),
        );
        t.latency_ms = metrics.get("total_latency_ms").and_then(Value::as_i64);
        t.ttft_ms = metrics.get("ttft_ms").and_then(Value::as_i64);
        if !metrics.is_empty() {
            t.metrics = Some(Value::Object(metrics));
        }
        if turn_env != Env::default() {
            t.env = Some(turn_env);
        }
        doc.turns.push(t);
        for (tcid, content) in pending_results {
            if !attach_result(&mut doc.turns, &owner, Some(resp_index), &tcid, content) {
                ctx.diag(
                    Diagnostic::ORPHAN_RESULT,
                    rp.clone(),
                    format!("tool result `{tcid}` names no call of this session"),
                );
            }
        }
    }
    doc.final_metrics = doc
        .turns
        .iter()
        .rev()
        .find(|t| t.src == "agent")
        .and_then(|t| t.metrics.clone());
    let aid = agent_id
        .or(meta_source)
        .or_else(|| doc.agent.model.clone())
        .unwrap_or_else(|| "openai-import".into());
    doc.agent = Agent {
        id: aid.clone(),
        name: Some(aid),
        ..doc.agent
    };
    if !state.is_empty() {
        env.state = Some(state);
    }
    if env != Env::default() {
        doc.task = Some(Task {
            env: Some(env),
            llm: None,
            result: None,
        });
    }
    // What each row holds beyond what the encoder rebuilds from the turns.
    let keys: Vec<String> = rows
        .first()
        .map(|(_, row)| {
            row.keys()
                .filter(|k| ROW_DERIVED.contains(&k.as_str()))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let mut plan = RowPlan {
        context: context_count.max(0) as usize,
        keys,
        rows: infos,
    };
    let spans = row_spans(&doc, &plan);
    let index = history_index(&doc);
    let with_messages = plan.keys.iter().any(|k| k == "messages");
    for (n, (_, actual)) in rows.iter().enumerate() {
        let at = format!("/session_steps/{}", plan.rows[n].at);
        let built = row_built(&doc, &plan, &spans, n);
        diff_object(&mut res, &at, actual, &built, &["messages"]);
        if !with_messages {
            if let Some(m) = actual.get("messages") {
                res.put(format!("{at}/messages"), m.clone());
            }
            continue;
        }
        // The history is compared message by message, and only when the
        // lengths agree: its cost follows the row, not the session.
        let span = spans[n];
        match actual.get("messages") {
            Some(Value::Array(m)) => {
                // Some producers log the call's own output as the last
                // message of its history.
                let with_output = span.has_response()
                    && m.len() == history_len(&index, span, true)
                    && history_messages(&doc, span, true)
                        .zip(m)
                        .all(|(b, a)| b == *a);
                if with_output {
                    plan.rows[n].with_output = true;
                } else if m.len() == history_len(&index, span, false) {
                    for (i, (b, a)) in history_messages(&doc, span, false).zip(m).enumerate() {
                        diff_into(&mut res, &format!("{at}/messages/{i}"), a, &b);
                    }
                } else {
                    res.put(format!("{at}/messages"), Value::Array(m.clone()));
                }
            }
            Some(other) => res.put(format!("{at}/messages"), other.clone()),
            None => res.absent(format!("{at}/messages")),
        }
    }
    res.note("shape", json!(SHAPE_ROWS));
    res.note("context", json!(plan.context));
    res.note("row_keys", json!(plan.keys));
    res.note(
        "rows",
        Value::Array(
            plan.rows
                .iter()
                .map(|i| {
                    let mut o = Map::new();
                    o.insert("at".into(), json!(i.at));
                    o.insert("step_id".into(), json!(i.step));
                    if i.with_output {
                        o.insert("with_output".into(), json!(true));
                    }
                    Value::Object(o)
                })
                .collect(),
        ),
    );
    if enveloped {
        res.note("envelope", json!(true));
    }
    let id = format!("{}#{sid}", ctx.source_path);
    res.apply(&mut doc, SOURCE, &id, ARRAYS);
    Ok(doc)
}
