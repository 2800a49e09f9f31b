//! `steps`: one row per step (turn) of a trajectory.

use super::{
    Cell, ColType, Column, Derived, MessageKindName, ORIGIN_PATH, SOURCE_PATH, STORAGE_ORDINAL,
};
use crate::table::derive as d;

pub(super) static STEPS: &[Column] = &[
    SOURCE_PATH,
    col!(
        "document_id",
        Text,
        false,
        "Source-local trajectory id",
        |r| Cell::str(r.doc.document_id())
    ),
    col!("run_id", Text, false, "Run id", |r| Cell::str(
        r.doc.run_id()
    )),
    col!("session_id", Text, false, "Session id", |r| Cell::str(
        &r.doc.session
    )),
    col!(
        "step_id",
        Int,
        false,
        "Step id (unique in its trajectory; identity, not order)",
        |r| Cell::I64(r.turn().id)
    ),
    col!(
        "turn_ordinal",
        Int,
        false,
        "0-based position of the step in its trajectory",
        |r| Cell::I64(r.turn_ordinal as i64)
    ),
    col!("timestamp", Timestamp, true, "Step time (UTC)", |r| {
        Cell::ts(r.turn().ts.as_ref())
    }),
    col!(
        "step_source",
        Text,
        false,
        "Who produced it: user, agent, system",
        |r| Cell::str(&r.turn().src)
    ),
    col!(
        "kind",
        Text,
        true,
        "Explicit narrative kind",
        |r| Cell::opt(r.turn().kind.as_deref())
    ),
    col!(
        "effective_kind",
        Text,
        false,
        "Kind, derived when not given (dialogue, autonomous, internal, …)",
        |r| Cell::str(r.turn().effective_kind())
    ),
    col!(
        "model_name",
        Text,
        true,
        "Model of the step",
        |r| Cell::opt(r.turn().model.as_deref())
    ),
    col!(
        "message_kind",
        Text,
        false,
        "Shape of the message: text, parts, json or null",
        |r| Cell::str(MessageKindName::of(&r.turn().msg))
    ),
    col!(
        "message_value",
        Text,
        false,
        "Normalised message text (parts joined, images as [image: path])",
        |r| d::message_text(r)
    ),
    col!(
        "message_json",
        Json,
        true,
        "The message as JSON, when it is not plain text",
        |r| d::message_json(r)
    ),
    col!("reasoning_content", Text, true, "Reasoning text", |r| {
        Cell::opt(r.turn().reason.as_deref())
    }),
    col!("reasoning_effort", Json, true, "Reasoning effort", |r| {
        Cell::json(r.turn().effort.as_ref())
    }),
    col!(
        "observation",
        Json,
        true,
        "Observation (tool and environment results)",
        |r| Cell::json(r.turn().observation.as_ref())
    ),
    col!(
        "observation_text",
        Text,
        true,
        "Decoded text of the observation: each result's content with JSON escapes decoded, parts joined by newlines, media as [image: path]",
        |r| d::observation_text(r)
    )
    .derived_from(Derived {
        from: &["observation"],
        compute: d::observation_text_of,
    }),
    col!(
        "prompt",
        Text,
        true,
        "Effective prompt text (the step's, else the trajectory's)",
        |r| d::prompt_cell(r)
    ),
    col!(
        "tool_call_count",
        Int,
        false,
        "Tool calls of the step",
        |r| Cell::I64(r.turn().tool_calls.as_ref().map_or(0, Vec::len) as i64)
    ),
    col!(
        "prompt_tokens",
        Int,
        true,
        "Prompt tokens (from metrics)",
        |r| Cell::opt_i64(d::prompt_tokens(r.turn()))
    ),
    col!(
        "completion_tokens",
        Int,
        true,
        "Completion tokens (from metrics)",
        |r| Cell::opt_i64(d::completion_tokens(r.turn()))
    ),
    col!(
        "cached_tokens",
        Int,
        true,
        "Cached prompt tokens (from metrics)",
        |r| Cell::opt_i64(d::cached_tokens(r.turn()))
    ),
    col!("cost_usd", Float, true, "Cost in USD (from metrics)", |r| {
        Cell::opt_f64(d::cost_usd(r.turn()))
    }),
    col!("latency_ms", Int, true, "LLM latency in ms", |r| {
        Cell::opt_i64(r.turn().latency_ms)
    }),
    col!("ttft_ms", Int, true, "Time to first token in ms", |r| {
        Cell::opt_i64(r.turn().ttft_ms)
    }),
    col!("llm_call_count", Int, true, "LLM calls in the step", |r| {
        Cell::opt_i64(r.turn().nllm)
    }),
    col!(
        "is_copied_context",
        Bool,
        true,
        "Copied from an earlier trajectory as context",
        |r| Cell::opt_bool(r.turn().copied)
    ),
    col!("metrics", Json, true, "Step metrics", |r| Cell::json(
        r.turn().metrics.as_ref()
    )),
    col!(
        "extra",
        Json,
        true,
        "Step extension object",
        |r| Cell::json(r.turn().extra.as_ref())
    ),
    col!("env", Json, true, "Environment overlay", |r| d::json_of(
        r.turn().env.as_ref()
    )),
    col!(
        "prompt_json",
        Json,
        true,
        "The step's own prompt object, when given",
        |r| d::json_of(r.turn().prompt.as_ref())
    ),
    col!("finished_at", Timestamp, true, "Step end time (UTC)", |r| {
        Cell::ts(r.turn().finished_at.as_ref())
    }),
    col!(
        "had_tool_calls",
        Bool,
        false,
        "A tool_calls list was present (even empty)",
        |r| Cell::Bool(r.turn().tool_calls.is_some())
    ),
    col!(
        "timestamp_raw",
        Json,
        true,
        "Step time exactly as given, when it is not canonical RFC 3339",
        |r| d::raw_ts(r.turn().ts.as_ref())
    ),
    col!(
        "finished_at_raw",
        Json,
        true,
        "End time exactly as given, when it is not canonical RFC 3339",
        |r| d::raw_ts(r.turn().finished_at.as_ref())
    ),
    STORAGE_ORDINAL,
    ORIGIN_PATH,
];
