//! Values derived from documents for table cells: message text, token and
//! cost scalars from metrics, totals, timestamps.

use std::borrow::Cow;

use serde_json::Value;

use super::builder::Cell;
use crate::formats::model::{Prompt, Storyline, ToolCall, Turn};
use crate::formats::text::{self, result_link};
use crate::util::time::{format_rfc3339, parse_timestamp};

/// The row being built: a document, and for step and call tables the
/// position within it.
pub struct RowCtx<'a> {
    pub(crate) source_path: &'a str,
    pub(crate) doc: &'a Storyline,
    pub(crate) doc_ordinal: usize,
    pub(crate) turn_ordinal: usize,
    /// Position in the whole document of `doc.turns[0]` (not 0 when `doc`
    /// holds one page of its steps).
    pub(crate) first_turn: usize,
    pub(crate) call_index: usize,
}

impl<'a> RowCtx<'a> {
    pub(crate) fn turn(&self) -> &'a Turn {
        &self.doc.turns[self.turn_ordinal - self.first_turn]
    }

    pub(crate) fn call(&self) -> &'a ToolCall {
        &self
            .turn()
            .tool_calls
            .as_ref()
            .expect("a call row has calls")[self.call_index]
    }
}

/// The shape of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    /// JSON null.
    Null,
    /// A string.
    Text,
    /// An array of content parts.
    Parts,
    /// Any other JSON.
    Json,
}

impl MessageKind {
    /// The kind of a message value.
    pub fn of(v: &Value) -> Self {
        match v {
            Value::Null => MessageKind::Null,
            Value::String(_) => MessageKind::Text,
            Value::Array(_) => MessageKind::Parts,
            _ => MessageKind::Json,
        }
    }

    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            MessageKind::Null => "null",
            MessageKind::Text => "text",
            MessageKind::Parts => "parts",
            MessageKind::Json => "json",
        }
    }
}

pub(crate) fn message_text<'a>(r: &RowCtx<'a>) -> Cell<'a> {
    match &r.turn().msg {
        Value::String(s) => Cell::str(s),
        other => Cell::Str(Cow::Owned(text::content_text(other))),
    }
}

pub(crate) fn message_json<'a>(r: &RowCtx<'a>) -> Cell<'a> {
    match &r.turn().msg {
        Value::String(_) => Cell::Null,
        other => Cell::json_required(other),
    }
}

/// JSON text of any serialisable value (absent is NULL).
pub fn json_of<T: serde::Serialize>(v: Option<&T>) -> Cell<'static> {
    v.and_then(|v| serde_json::to_string(v).ok())
        .map_or(Cell::Null, |s| Cell::Str(Cow::Owned(s)))
}

/// JSON text of a value.
pub fn json_text(v: &Value) -> String {
    v.to_string()
}

/// The text of a prompt pair: system then user, joined by a newline.
pub fn prompt_text(p: &Prompt) -> String {
    match (
        p.system.as_deref().filter(|s| !s.is_empty()),
        p.user.as_deref().filter(|s| !s.is_empty()),
    ) {
        (Some(s), Some(u)) => format!("{s}\n{u}"),
        (Some(s), None) => s.to_string(),
        (None, Some(u)) => u.to_string(),
        (None, None) => String::new(),
    }
}

pub(crate) fn prompt_cell<'a>(r: &RowCtx<'a>) -> Cell<'a> {
    let p = r.turn().prompt.as_ref().or(r.doc.prompt.as_ref());
    match p.map(prompt_text) {
        Some(t) if !t.is_empty() => Cell::Str(Cow::Owned(t)),
        _ => Cell::Null,
    }
}

/// The timestamp as given, when formatting its instant as RFC 3339 does not
/// give the same JSON back (numbers, offsets, other precisions).
pub(crate) fn raw_ts(v: Option<&Value>) -> Cell<'static> {
    let Some(v) = v else { return Cell::Null };
    match parse_timestamp(v) {
        Some(ns) if Value::String(format_rfc3339(ns)) == *v => Cell::Null,
        _ => Cell::json_required(v),
    }
}

pub use crate::formats::model::{metric_f64, metric_i64};

pub(crate) fn prompt_tokens(t: &Turn) -> Option<i64> {
    metric_i64(
        t.metrics.as_ref(),
        &["prompt_tokens", "prompt_tokens_len", "input_tokens"],
    )
}

pub(crate) fn completion_tokens(t: &Turn) -> Option<i64> {
    metric_i64(
        t.metrics.as_ref(),
        &[
            "completion_tokens",
            "completion_tokens_len",
            "output_tokens",
        ],
    )
}

pub(crate) fn cached_tokens(t: &Turn) -> Option<i64> {
    metric_i64(t.metrics.as_ref(), &["cached_tokens", "cache_read_tokens"])
}

pub(crate) fn cost_usd(t: &Turn) -> Option<f64> {
    metric_f64(t.metrics.as_ref(), &["cost_usd", "cost"])
}

pub(crate) fn total_i64(r: &RowCtx<'_>, f: fn(&Turn) -> Option<i64>) -> Cell<'static> {
    let mut any = false;
    let mut sum = 0i64;
    for t in &r.doc.turns {
        if let Some(v) = f(t) {
            any = true;
            sum = sum.saturating_add(v);
        }
    }
    if any {
        Cell::I64(sum)
    } else {
        Cell::Null
    }
}

pub(crate) fn total_cost(r: &RowCtx<'_>) -> Cell<'static> {
    let vals: Vec<f64> = r.doc.turns.iter().filter_map(cost_usd).collect();
    if vals.is_empty() {
        Cell::Null
    } else {
        Cell::F64(vals.iter().sum())
    }
}

pub(crate) fn count_src(r: &RowCtx<'_>, src: &str) -> Cell<'static> {
    Cell::I64(r.doc.turns.iter().filter(|t| t.src == src).count() as i64)
}

pub(crate) fn model_of(doc: &Storyline) -> Option<&str> {
    doc.agent
        .model
        .as_deref()
        .or_else(|| doc.turns.iter().find_map(|t| t.model.as_deref()))
}

fn first_step_time(doc: &Storyline) -> Option<&Value> {
    doc.turns.iter().find_map(|t| t.ts.as_ref())
}

fn last_step_time(doc: &Storyline) -> Option<&Value> {
    doc.turns
        .iter()
        .rev()
        .find_map(|t| t.finished_at.as_ref().or(t.ts.as_ref()))
}

/// The document's start, else its first step's.
pub(crate) fn first_ts(r: &RowCtx<'_>) -> Cell<'static> {
    Cell::ts(r.doc.started_at.as_ref().or_else(|| first_step_time(r.doc)))
}

/// The document's end, else its last step's.
pub(crate) fn last_ts(r: &RowCtx<'_>) -> Cell<'static> {
    Cell::ts(r.doc.finished_at.as_ref().or_else(|| last_step_time(r.doc)))
}

/// The time of the first step that has one.
pub(crate) fn first_step_ts(r: &RowCtx<'_>) -> Cell<'static> {
    Cell::ts(first_step_time(r.doc))
}

/// The end (else time) of the last step that has one.
pub(crate) fn last_step_ts(r: &RowCtx<'_>) -> Cell<'static> {
    Cell::ts(last_step_time(r.doc))
}

pub(crate) fn first_user<'a>(r: &RowCtx<'a>) -> Cell<'a> {
    match r.doc.turns.iter().find(|t| t.src == "user") {
        Some(t) => match &t.msg {
            Value::String(s) => Cell::str(s),
            other => Cell::Str(Cow::Owned(text::content_text(other))),
        },
        None => Cell::Null,
    }
}

/// Observation results of the call's step that name this call.
fn linked_results<'a>(r: &RowCtx<'a>) -> Vec<&'a Value> {
    let tcid = &r.call().tcid;
    r.turn()
        .observation
        .as_ref()
        .and_then(|o| o.get("results"))
        .and_then(Value::as_array)
        .map(|rs| {
            rs.iter()
                .filter(|x| result_link(x) == Some(tcid.as_str()))
                .collect()
        })
        .unwrap_or_default()
}

/// Observation results of the call's step that name this call, as JSON.
pub(crate) fn call_results(r: &RowCtx<'_>) -> Cell<'static> {
    Cell::Str(Cow::Owned(
        serde_json::to_string(&linked_results(r)).unwrap_or_else(|_| "[]".into()),
    ))
}

/// The decoded text of the call's own result and the results that name it.
pub(crate) fn call_results_text(r: &RowCtx<'_>) -> Cell<'static> {
    let c = r.call();
    text::call_results_text(c.result.as_ref(), linked_results(r))
        .map_or(Cell::Null, |t| Cell::Str(Cow::Owned(t)))
}

/// The decoded text of results given on the step's calls themselves (ACTF
/// `aggregated_output`, a Storyline call's `result`), one call after
/// another; results in the observation are not repeated here.
pub(crate) fn step_call_output(r: &RowCtx<'_>) -> Option<String> {
    let calls = r.turn().tool_calls.as_ref()?;
    let mut out = String::new();
    for c in calls {
        if let Some(t) = text::call_results_text(c.result.as_ref(), []) {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&t);
        }
    }
    (!out.is_empty()).then_some(out)
}

/// [`step_call_output`] for one stored `tool_calls.result` cell.
pub(crate) fn call_output_of(raw: &str) -> Option<String> {
    let v: Value = serde_json::from_str(raw).ok()?;
    text::call_results_text(Some(&v), [])
}

/// [`observation_text`] from the stored JSON text of `observation`.
pub(crate) fn observation_text_of(raw: &[Option<&str>]) -> Option<String> {
    let v: Value = serde_json::from_str(raw.first().copied().flatten()?).ok()?;
    text::observation_text(&v)
}

/// [`call_results_text`] from the stored JSON text of `result` and `results`.
pub(crate) fn call_results_text_of(raw: &[Option<&str>]) -> Option<String> {
    let parse =
        |i: usize| -> Option<Value> { serde_json::from_str(raw.get(i).copied().flatten()?).ok() };
    let result = parse(0);
    let results = parse(1);
    let linked: Vec<&Value> = match &results {
        Some(Value::Array(a)) => a.iter().collect(),
        _ => Vec::new(),
    };
    text::call_results_text(result.as_ref(), linked)
}

/// The decoded text of the step's observation.
pub(crate) fn observation_text(r: &RowCtx<'_>) -> Cell<'static> {
    r.turn()
        .observation
        .as_ref()
        .and_then(text::observation_text)
        .map_or(Cell::Null, |t| Cell::Str(Cow::Owned(t)))
}

pub(crate) fn judge(r: &RowCtx<'_>) -> Cell<'static> {
    let format = r
        .doc
        .origin
        .as_ref()
        .map_or("unknown", |o| o.format.as_str());
    Cell::Str(Cow::Owned(format.to_string()))
}

type ResultField = fn(&crate::formats::model::TaskResult) -> Option<&Value>;

fn result_value<'a>(r: &RowCtx<'a>, f: ResultField) -> Option<&'a Value> {
    r.doc
        .task
        .as_ref()?
        .result
        .as_ref()
        .and_then(f)
        .filter(|v| !v.is_null())
}

pub(crate) fn result_bool(r: &RowCtx<'_>, f: ResultField) -> Cell<'static> {
    Cell::opt_bool(result_value(r, f).and_then(Value::as_bool))
}

pub(crate) fn result_f64(r: &RowCtx<'_>, f: ResultField) -> Cell<'static> {
    Cell::opt_f64(result_value(r, f).and_then(Value::as_f64))
}

pub(crate) fn result_text<'a>(r: &RowCtx<'a>, f: ResultField) -> Cell<'a> {
    match result_value(r, f) {
        Some(Value::String(s)) => Cell::str(s),
        Some(other) => Cell::json_required(other),
        None => Cell::Null,
    }
}

pub(crate) fn result_json(r: &RowCtx<'_>, f: ResultField) -> Cell<'static> {
    Cell::json(result_value(r, f))
}
