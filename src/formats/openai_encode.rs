//! Storyline → OpenAI messages, in the shape each document came in.
//!
//! - A document decoded from an **SFT example** is written as that example
//!   again: [`sft_record`] renders its turns as messages, and the residual
//!   the decoder recorded (the difference between the example and that
//!   rendering) is put back over it.
//! - A document decoded from **row-per-call rows** is written as those rows
//!   again, the same way ([`row_built`] plus the residual), in the order the
//!   rows had in their file.
//! - Any other document becomes one SFT example; every Storyline field the
//!   example cannot hold is reported as a [`Loss`] (a JSON pointer into the
//!   document). The loss rules follow what the OpenAI decoder reads back
//!   from the example, so that reading the export gives the document minus
//!   exactly the reported fields.
//!
//! The shape is the recorded fact `unknown_fields.sources.openai-msg.shape`,
//! never guessed from other fields.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::encode::{restore_all, Loss, Losses, ResidualEntry};
use super::model::{Storyline, ToolCall, Turn};
use super::openai::{convert_calls, reasoning_of, SHAPE_ROWS, SHAPE_SFT, SOURCE};
use super::DecodeCtx;

/// Encode documents as OpenAI messages: SFT examples, and rows for the
/// documents that came from rows (all rows of the group together, in file
/// order, where the first of those documents stands).
pub fn encode(docs: &[Storyline], losses: &mut Losses) -> Vec<Value> {
    let mut out = Vec::new();
    let mut rows_written = false;
    for d in docs {
        match recorded(d) {
            Recorded::Rows(..) => {
                if !rows_written {
                    out.extend(rows_records(docs));
                    rows_written = true;
                }
            }
            Recorded::Sft(slice) => {
                let mut v = sft_record(d);
                restore_all(&mut v, residual_entries(slice, false));
                out.push(v);
            }
            Recorded::LegacySft(slice) => {
                // Stores written before the shape was recorded: the residual
                // of an SFT example, with pointers that may start with the
                // record's position in an array file.
                let mut v = example(d, &mut Vec::new());
                restore_all(&mut v, residual_entries(slice, true));
                out.push(v);
            }
            Recorded::None => out.push(example(d, losses)),
        }
    }
    out
}

/// What a document records about the OpenAI shape it came in.
enum Recorded<'a> {
    /// An SFT example; the slice holds its residual.
    Sft(&'a Value),
    /// Rows, with how they map to the turns.
    Rows(&'a Value, RowPlan),
    /// An SFT example decoded before shapes were recorded.
    LegacySft(&'a Value),
    /// Not from OpenAI messages (or a shape this encoder cannot rebuild).
    None,
}

fn openai_slice(d: &Storyline) -> Option<&Value> {
    d.unknown_fields.as_ref()?.get("sources")?.get(SOURCE)
}

fn recorded(d: &Storyline) -> Recorded<'_> {
    let Some(slice) = openai_slice(d) else {
        return Recorded::None;
    };
    match slice.get("shape").and_then(Value::as_str) {
        Some(SHAPE_SFT) => Recorded::Sft(slice),
        Some(SHAPE_ROWS) => match plan_of(slice) {
            Some(plan) => Recorded::Rows(slice, plan),
            None => Recorded::None,
        },
        Some(_) => Recorded::None,
        None => {
            let legacy = d
                .origin
                .as_ref()
                .is_some_and(|o| o.format == SOURCE && o.document_id.is_none());
            if legacy {
                Recorded::LegacySft(slice)
            } else {
                Recorded::None
            }
        }
    }
}

/// The residual of a slice as entries to put back (`fields`) or remove
/// (`absent`).
fn residual_entries(slice: &Value, strip_record: bool) -> Vec<ResidualEntry> {
    let mut out = Vec::new();
    if let Some(Value::Object(fields)) = slice.get("fields") {
        for (p, v) in fields {
            let p = if strip_record {
                strip_record_prefix(p)
            } else {
                p.clone()
            };
            out.push((p, Some(v.clone())));
        }
    }
    if let Some(Value::Array(absent)) = slice.get("absent") {
        for p in absent.iter().filter_map(Value::as_str) {
            out.push((p.to_string(), None));
        }
    }
    out
}

fn strip_record_prefix(p: &str) -> String {
    let mut parts = p.splitn(3, '/');
    let _ = parts.next();
    match (parts.next(), parts.next()) {
        (Some(first), Some(rest)) if first.bytes().all(|b| b.is_ascii_digit()) => {
            format!("/{rest}")
        }
        _ => p.to_string(),
    }
}

// ------------------------------------------------------------ rendering

/// The OpenAI role of a turn source; `None` for sources OpenAI has no role
/// for (written as `user`).
fn role_of(src: &str) -> Option<&'static str> {
    match src {
        "system" => Some("system"),
        "user" => Some("user"),
        "agent" => Some("assistant"),
        _ => None,
    }
}

/// The `function.arguments` text of a call: the source's own text when it
/// was kept, a string as it is, any other JSON as compact JSON.
pub(crate) fn arguments_text(c: &ToolCall) -> String {
    if let Some(raw) = &c.args_raw {
        return raw.clone();
    }
    match &c.args {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn call_object(c: &ToolCall) -> Value {
    json!({
        "id": c.tcid,
        "type": "function",
        "function": {"name": c.func, "arguments": arguments_text(c)},
    })
}

/// The message of a turn (its results are separate tool messages).
fn turn_message(t: &Turn) -> Value {
    let mut m = Map::new();
    m.insert("role".into(), json!(role_of(&t.src).unwrap_or("user")));
    m.insert("content".into(), t.msg.clone());
    if let Some(calls) = &t.tool_calls {
        m.insert(
            "tool_calls".into(),
            Value::Array(calls.iter().map(call_object).collect()),
        );
    }
    if let Some(r) = &t.reason {
        m.insert("reasoning_content".into(), json!(r));
    }
    Value::Object(m)
}

/// How an observation result was written.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fate {
    /// A tool message answering the call the result names.
    Named(String),
    /// A tool message answering the turn's next unanswered call (the result
    /// named none).
    Paired(String),
    /// A user message: the result names no call and none is left to answer.
    User,
}

/// The messages written after turn `t` for its observation results.
/// OpenAI tool messages must name their call: a result without a link
/// answers the turn's unanswered calls in order; one left over has no call
/// to answer and becomes a user message.
fn result_messages(t: &Turn) -> Vec<(Value, Fate)> {
    let Some(results) = t
        .observation
        .as_ref()
        .and_then(|o| o.get("results"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let calls: Vec<&str> = t
        .tool_calls
        .iter()
        .flatten()
        .map(|c| c.tcid.as_str())
        .collect();
    let linked: Vec<&str> = results
        .iter()
        .filter_map(super::text::result_link)
        .collect();
    let mut unanswered = calls.iter().filter(|c| !linked.contains(c));
    let mut out = Vec::with_capacity(results.len());
    for r in results {
        let fate = match super::text::result_link(r) {
            Some(id) => Fate::Named(id.to_string()),
            None => match unanswered.next() {
                Some(c) => Fate::Paired((*c).to_string()),
                None => Fate::User,
            },
        };
        let mut m = Map::new();
        match &fate {
            Fate::Named(id) | Fate::Paired(id) => {
                m.insert("role".into(), json!("tool"));
                m.insert("tool_call_id".into(), json!(id));
            }
            Fate::User => {
                m.insert("role".into(), json!("user"));
            }
        }
        match r.get("content") {
            Some(c) => {
                m.insert("content".into(), c.clone());
            }
            // A tool message may lack content (the decoder keeps that); a
            // user message needs one.
            None if fate == Fate::User => {
                m.insert("content".into(), Value::Null);
            }
            None => {}
        }
        out.push((Value::Object(m), fate));
    }
    out
}

/// An SFT example as written, with where each turn went.
struct Written {
    record: Value,
    /// Position of each turn's message in `messages`.
    turn_at: Vec<usize>,
    /// How each turn's observation results were written.
    fates: Vec<Vec<Fate>>,
}

fn written(d: &Storyline) -> Written {
    let mut messages = Vec::new();
    let mut turn_at = Vec::with_capacity(d.turns.len());
    let mut fates = Vec::with_capacity(d.turns.len());
    for t in &d.turns {
        turn_at.push(messages.len());
        messages.push(turn_message(t));
        let mut f = Vec::new();
        for (m, fate) in result_messages(t) {
            messages.push(m);
            f.push(fate);
        }
        fates.push(f);
    }
    let mut o = Map::new();
    o.insert("messages".into(), Value::Array(messages));
    if let Some(t) = &d.agent.tools {
        o.insert("tools".into(), t.clone());
    }
    Written {
        record: Value::Object(o),
        turn_at,
        fates,
    }
}

/// The SFT example the encoder writes for `d` before any residual: each
/// turn a message (`role`, `content`, `tool_calls`, `reasoning_content`),
/// its observation results as tool messages after it, and `tools`. The SFT
/// decoder records its residual against exactly this, so both sides must
/// render the same document the same way.
pub(crate) fn sft_record(d: &Storyline) -> Value {
    written(d).record
}

// ------------------------------------------------------------ SFT losses

const NO_FIELD: &str = "OpenAI messages have no such field";

/// A document that did not come from an SFT example, as one example, with
/// what the example cannot hold.
fn example(d: &Storyline, losses: &mut Losses) -> Value {
    let w = written(d);
    document_losses(d, losses);
    turn_losses(d, &w, losses);
    if let Some(Value::Object(sources)) = d.unknown_fields.as_ref().and_then(|u| u.get("sources")) {
        for name in sources.keys() {
            losses.push(Loss::new(
                format!(
                    "/unknown_fields/sources/{}",
                    super::residual::escape_token(name)
                ),
                format!("fields kept from {name} cannot be written to OpenAI messages"),
            ));
        }
    }
    w.record
}

fn document_losses(d: &Storyline, losses: &mut Losses) {
    // The decoder numbers examples by position; no id survives.
    losses.push(Loss::new(
        "/session",
        "OpenAI examples carry no ids; the session id is not kept",
    ));
    if d.agent.id != "openai-import" {
        losses.push(Loss::new(
            "/agent/id",
            "OpenAI examples name no agent; the agent id is not kept",
        ));
    }
    let present = [
        (d.agent.name.is_some(), "/agent/name"),
        (d.agent.ver.is_some(), "/agent/ver"),
        (d.agent.model.is_some(), "/agent/model"),
        (d.agent.extra.is_some(), "/agent/extra"),
        (d.explicit_run().is_some(), "/run"),
        (d.trajectory.is_some(), "/trajectory"),
        (d.attempt_id.is_some(), "/attempt_id"),
        (d.parent.is_some(), "/parent"),
        (d.children.is_some(), "/children"),
        (d.notes.is_some(), "/notes"),
        (d.task.is_some(), "/task"),
        (d.prompt.is_some(), "/prompt"),
        (d.started_at.is_some(), "/started_at"),
        (d.finished_at.is_some(), "/finished_at"),
        (d.final_metrics.is_some(), "/final_metrics"),
        (
            d.continued_trajectory_ref.is_some(),
            "/continued_trajectory_ref",
        ),
        (d.extra.is_some(), "/extra"),
        (d.meta.is_some(), "/meta"),
    ];
    for (p, field) in present {
        if p {
            losses.push(Loss::new(field, NO_FIELD));
        }
    }
}

fn turn_losses(d: &Storyline, w: &Written, losses: &mut Losses) {
    let messages = w.record.get("messages").and_then(Value::as_array);
    // The turn the decoder files a named result under: the last turn so far
    // that made that call.
    let mut owner: HashMap<&str, usize> = HashMap::new();
    let mut scratch = DecodeCtx::new("");
    let mut turns_move = false;
    for (k, t) in d.turns.iter().enumerate() {
        let at = |f: &str| format!("/turns/{k}/{f}");
        let pos = w.turn_at[k];
        if t.id != pos as i64 + 1 {
            losses.push(Loss::new(
                at("id"),
                "OpenAI messages have no step ids; the id is the message position",
            ));
        }
        if role_of(&t.src).is_none() {
            losses.push(Loss::new(
                at("src"),
                format!("no OpenAI role for `{}`; written as user", t.src),
            ));
        }
        if t.has_own_kind() {
            losses.push(Loss::new(at("kind"), NO_FIELD));
        }
        let present = [
            (t.ts.is_some(), "ts"),
            (t.model.is_some(), "model"),
            (t.effort.is_some(), "effort"),
            (t.metrics.is_some(), "metrics"),
            (t.nllm.is_some(), "nllm"),
            (t.copied.is_some(), "copied"),
            (t.latency_ms.is_some(), "latency_ms"),
            (t.ttft_ms.is_some(), "ttft_ms"),
            (t.extra.is_some(), "extra"),
            (t.env.is_some(), "env"),
            (t.prompt.is_some(), "prompt"),
            (t.finished_at.is_some(), "finished_at"),
        ];
        for (p, field) in present {
            if p {
                losses.push(Loss::new(at(field), NO_FIELD));
            }
        }
        let message = messages.and_then(|m| m.get(pos)).and_then(Value::as_object);
        // The reasoning read back from the message: reasoning_content, or
        // the text of thinking parts in the content.
        if message.and_then(reasoning_of) != t.reason {
            losses.push(Loss::new(
                at("reason"),
                "an empty reasoning text, or one beside thinking parts, is not kept",
            ));
        }
        if let Some(calls) = &t.tool_calls {
            let written_calls: Vec<Value> = calls.iter().map(call_object).collect();
            let read_back = convert_calls(&written_calls, t.id, &mut scratch, "");
            for (c, (orig, read)) in calls.iter().zip(&read_back).enumerate() {
                let cp = |f: &str| format!("/turns/{k}/tool_calls/{c}/{f}");
                if orig.args != read.args {
                    losses.push(Loss::new(
                        cp("args"),
                        "OpenAI arguments are text: this string reads back as the JSON it holds",
                    ));
                }
                let present = [
                    (orig.result.is_some(), "result"),
                    (orig.duration_ms.is_some(), "duration_ms"),
                    (orig.extra.is_some(), "extra"),
                    (orig.kind.is_some(), "kind"),
                    (orig.response.is_some(), "response"),
                ];
                for (p, field) in present {
                    if p {
                        losses.push(Loss::new(cp(field), NO_FIELD));
                    }
                }
            }
            for c in calls {
                owner.insert(c.tcid.as_str(), k);
            }
        }
        let Some(obs) = &t.observation else { continue };
        let results = obs.get("results").and_then(Value::as_array);
        let only_results = obs.as_object().is_some_and(|o| o.len() == 1);
        if results.is_none_or(Vec::is_empty) || !only_results {
            losses.push(Loss::new(
                at("observation"),
                "OpenAI messages keep only the results of an observation, as tool messages",
            ));
        }
        let Some(results) = results else { continue };
        let mut moved = false;
        for (j, (r, fate)) in results.iter().zip(&w.fates[k]).enumerate() {
            let rp = format!("/turns/{k}/observation/results/{j}");
            match fate {
                Fate::User => {
                    losses.push(Loss::new(
                        rp,
                        "a result without a tool call is written as a user message",
                    ));
                    turns_move = true;
                }
                Fate::Paired(_) => losses.push(Loss::new(
                    rp,
                    "a result without a tool call id is linked to the next unanswered call",
                )),
                Fate::Named(id) => {
                    match owner.get(id.as_str()) {
                        Some(&o) if o != k => {
                            moved = true;
                            losses.push(Loss::new(
                                format!("/turns/{o}/observation"),
                                "a later turn's result that answers this turn's call is read back here",
                            ));
                        }
                        _ => {}
                    }
                    if !plain_result(r) {
                        losses.push(Loss::new(
                            rp,
                            "OpenAI tool messages keep a result's content and call id only",
                        ));
                    }
                }
            }
        }
        if moved {
            losses.push(Loss::new(
                at("observation"),
                "a result that answers another turn's call is read back with that turn",
            ));
        }
    }
    if turns_move {
        losses.push(Loss::new(
            "/turns",
            "results written as user messages read back as turns of their own",
        ));
    }
}

/// A result a tool message carries exactly: its call id (as
/// `source_call_id`) and its content, nothing else.
fn plain_result(r: &Value) -> bool {
    let Some(o) = r.as_object() else {
        return false;
    };
    o.get("source_call_id").is_some_and(Value::is_string)
        && o.keys().all(|k| k == "source_call_id" || k == "content")
}

// ------------------------------------------------------------ rows

/// Row keys the rows encoder writes from the document; any other key of a
/// row comes back from the residual.
pub(crate) const ROW_DERIVED: &[&str] = &[
    "session_id",
    "step_id",
    "run_id",
    "run_bucket",
    "job_id",
    "agent_id",
    "agent_model",
    "llm_model",
    "created_at",
    "id",
    "env_name",
    "env_id",
    "dataset_type",
    "dt",
    "messages",
    "response",
    "reward",
    "step_reward",
    "is_terminal",
    "is_truncated",
    "is_session_completed",
    "is_trainable",
];

/// One row of a session, as the decoder recorded it.
#[derive(Debug, Clone)]
pub(crate) struct RowInfo {
    /// Position of the row in its file (its `/session_steps/<at>` pointer).
    pub(crate) at: u64,
    /// The step id the decoder used (given or generated).
    pub(crate) step: i64,
    /// The row's `messages` end with the row's own output.
    pub(crate) with_output: bool,
}

/// How a session's turns map back to its rows.
#[derive(Debug, Clone)]
pub(crate) struct RowPlan {
    /// Number of context turns (the first row's earlier history).
    pub(crate) context: usize,
    /// The derived keys the session's first row had: the keys written.
    pub(crate) keys: Vec<String>,
    /// The rows, in the session's step order.
    pub(crate) rows: Vec<RowInfo>,
}

fn plan_of(slice: &Value) -> Option<RowPlan> {
    let context = usize::try_from(slice.get("context")?.as_u64()?).ok()?;
    let keys = slice
        .get("row_keys")?
        .as_array()?
        .iter()
        .filter_map(|k| k.as_str().map(str::to_string))
        .collect();
    let rows = slice
        .get("rows")?
        .as_array()?
        .iter()
        .map(|r| {
            Some(RowInfo {
                at: r.get("at")?.as_u64()?,
                step: r.get("step_id")?.as_i64()?,
                with_output: r
                    .get("with_output")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(RowPlan {
        context,
        keys,
        rows,
    })
}

/// The turns one row made.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowTurns {
    req: Option<usize>,
    resp: Option<usize>,
    /// Position after the row's turns.
    end: usize,
}

/// Which turns each row of `plan` made: after the context turns, each row
/// adds its request turn (id `C + 2 × step − 1`) and its response turn (id
/// `C + 2 × step`), either of which may be missing.
pub(crate) fn row_spans(d: &Storyline, plan: &RowPlan) -> Vec<RowTurns> {
    let c = plan.context as i64;
    let mut p = plan.context.min(d.turns.len());
    let is = |p: usize, id: i64, src: &str| {
        d.turns
            .get(p)
            .is_some_and(|t| t.id == id && t.src == src && t.copied.is_none())
    };
    let mut out = Vec::with_capacity(plan.rows.len());
    for info in &plan.rows {
        let base = c.saturating_add(info.step.saturating_mul(2));
        let req = if is(p, base.saturating_sub(1), "user") {
            p += 1;
            Some(p - 1)
        } else {
            None
        };
        let resp = if is(p, base, "agent") {
            p += 1;
            Some(p - 1)
        } else {
            None
        };
        out.push(RowTurns { req, resp, end: p });
    }
    out
}

/// The history a row sent, message by message: every turn before its
/// response (with the results filed under them as tool messages), and the
/// output itself when the producer logged it there too. Lazy, so a caller
/// that compares it with a source row pays for the source's length only.
pub(crate) fn history_messages(
    d: &Storyline,
    span: RowTurns,
    with_output: bool,
) -> impl Iterator<Item = Value> + '_ {
    let upto = span.resp.unwrap_or(span.end).min(d.turns.len());
    let output = span.resp.filter(|_| with_output).map(|i| &d.turns[i]);
    d.turns[..upto]
        .iter()
        .flat_map(|t| {
            std::iter::once(turn_message(t)).chain(result_messages(t).into_iter().map(|(m, _)| m))
        })
        .chain(output.map(turn_message))
}

/// Messages before each turn's own in a history: `before[t]` for turn `t`,
/// and the total at the end (a turn is its message and its results).
pub(crate) fn history_index(d: &Storyline) -> Vec<usize> {
    let mut before = Vec::with_capacity(d.turns.len() + 1);
    let mut n = 0usize;
    before.push(0);
    for t in &d.turns {
        let results = t
            .observation
            .as_ref()
            .and_then(|o| o.get("results"))
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        n += 1 + results;
        before.push(n);
    }
    before
}

/// The length of [`history_messages`], from [`history_index`].
pub(crate) fn history_len(index: &[usize], span: RowTurns, with_output: bool) -> usize {
    let upto = span
        .resp
        .unwrap_or(span.end)
        .min(index.len().saturating_sub(1));
    index.get(upto).copied().unwrap_or(0) + usize::from(with_output && span.resp.is_some())
}

impl RowTurns {
    /// True when the row made a response turn.
    pub(crate) fn has_response(&self) -> bool {
        self.resp.is_some()
    }
}

/// Row `n` of `plan` as the encoder writes it from `d`, before the
/// residual: the plan's keys except `messages` (see [`history_messages`]),
/// each from the turn or document field it was read into. The rows decoder
/// records its residual against exactly this.
pub(crate) fn row_built(
    d: &Storyline,
    plan: &RowPlan,
    spans: &[RowTurns],
    n: usize,
) -> Map<String, Value> {
    let info = &plan.rows[n];
    let span = spans[n];
    let resp = span.resp.map(|i| &d.turns[i]);
    let req = span.req.map(|i| &d.turns[i]);
    let env = d.task.as_ref().and_then(|t| t.env.as_ref());
    let mut row = Map::new();
    for key in &plan.keys {
        let v: Option<Value> = match key.as_str() {
            "session_id" | "env_id" => Some(json!(d.session)),
            "step_id" => Some(json!(info.step)),
            "run_id" | "run_bucket" | "job_id" => d.run.as_ref().map(|r| json!(r)),
            "agent_id" => Some(json!(d.agent.id)),
            "agent_model" | "llm_model" => resp.and_then(|t| t.model.as_ref()).map(|m| json!(m)),
            "created_at" => resp.or(req).and_then(|t| t.ts.clone()),
            "id" => resp
                .and_then(|t| t.env.as_ref())
                .and_then(|e| e.id.as_ref())
                .map(|i| json!(i)),
            "env_name" => env.and_then(|e| e.name.as_ref()).map(|x| json!(x)),
            "dataset_type" | "dt" => env
                .and_then(|e| e.state.as_ref())
                .and_then(|s| s.get(key.as_str()))
                .cloned(),
            "messages" => None,
            "response" => resp.map(turn_message),
            metric => resp
                .and_then(|t| t.metrics.as_ref())
                .and_then(|m| m.get(metric))
                .cloned(),
        };
        if let Some(v) = v {
            row.insert(key.clone(), v);
        }
    }
    row
}

/// `/session_steps/<at>/rest` → (`at`, `/rest`).
fn row_pointer(p: &str) -> Option<(u64, String)> {
    let rest = p.strip_prefix("/session_steps/")?;
    let (at, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    Some((at.parse().ok()?, tail.to_string()))
}

/// The rows of every rows-shaped document of `docs`, in file order (one
/// `session_steps` envelope when they came in one).
fn rows_records(docs: &[Storyline]) -> Vec<Value> {
    let mut rows: Vec<(u64, Value)> = Vec::new();
    let mut envelope: Vec<ResidualEntry> = Vec::new();
    let mut enveloped = false;
    for d in docs {
        let Recorded::Rows(slice, plan) = recorded(d) else {
            continue;
        };
        enveloped |= slice.get("envelope") == Some(&Value::Bool(true));
        let mut per_row: HashMap<u64, Vec<ResidualEntry>> = HashMap::new();
        for (p, v) in residual_entries(slice, false) {
            match row_pointer(&p) {
                Some((at, tail)) => per_row.entry(at).or_default().push((tail, v)),
                None => envelope.push((p, v)),
            }
        }
        let spans = row_spans(d, &plan);
        let with_messages = plan.keys.iter().any(|k| k == "messages");
        for (n, info) in plan.rows.iter().enumerate() {
            let mut row = row_built(d, &plan, &spans, n);
            let entries = per_row.remove(&info.at).unwrap_or_default();
            // A history the residual keeps whole (or that the row lacks) is
            // not rebuilt.
            let kept_whole = entries.iter().any(|(p, _)| p == "/messages");
            if with_messages && !kept_whole {
                let history: Vec<Value> = history_messages(d, spans[n], info.with_output).collect();
                row.insert("messages".into(), Value::Array(history));
            }
            let mut row = Value::Object(row);
            restore_all(&mut row, entries);
            rows.push((info.at, row));
        }
    }
    rows.sort_by_key(|(at, _)| *at);
    let rows: Vec<Value> = rows.into_iter().map(|(_, r)| r).collect();
    if enveloped {
        let mut o = Map::new();
        o.insert("session_steps".into(), Value::Array(rows));
        let mut v = Value::Object(o);
        restore_all(&mut v, envelope);
        vec![v]
    } else {
        rows
    }
}
