//! `tool_calls`: one row per tool call, with the results that answer it.

use super::{Cell, ColType, Column, Derived, ORIGIN_PATH, SOURCE_PATH, STORAGE_ORDINAL};
use crate::table::derive as d;

pub(super) static TOOL_CALLS: &[Column] = &[
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
    col!("step_id", Int, false, "Step that made the call", |r| {
        Cell::I64(r.turn().id)
    }),
    col!("turn_ordinal", Int, false, "Position of that step", |r| {
        Cell::I64(r.turn_ordinal as i64)
    }),
    col!(
        "call_index",
        Int,
        false,
        "0-based position of the call in its step",
        |r| Cell::I64(r.call_index as i64)
    ),
    col!("tool_call_id", Text, false, "Tool call id", |r| Cell::str(
        &r.call().tcid
    )),
    col!("function_name", Text, false, "Function (tool) name", |r| {
        Cell::str(&r.call().func)
    }),
    // OpenAI argument strings are kept as written (they are JSON text, so
    // JSON operators still read them); stores read the text back to restore
    // the exact bytes on export.
    col!(
        "arguments",
        Json,
        false,
        "Arguments as JSON (OpenAI argument strings as written)",
        |r| {
            let c = r.call();
            match c.args_raw.as_deref() {
                Some(raw) => Cell::str(raw),
                None => Cell::json_required(&c.args),
            }
        }
    )
    .kept_as_written(),
    col!("result", Json, true, "Result body given on the call", |r| {
        Cell::json(r.call().result.as_ref())
    }),
    col!(
        "results",
        Json,
        false,
        "Observation results that answer this call (JSON array)",
        |r| d::call_results(r)
    ),
    col!(
        "results_text",
        Text,
        true,
        "Decoded text of the call's result and of the observation results that answer it",
        |r| d::call_results_text(r)
    )
    .derived_from(Derived {
        from: &["result", "results"],
        compute: d::call_results_text_of,
    }),
    col!("status", Text, true, "Call status", |r| Cell::opt(
        r.call().response.as_ref().and_then(|x| x.status.as_deref())
    )),
    col!("exit_code", Int, true, "Process exit code", |r| {
        Cell::opt_i64(r.call().response.as_ref().and_then(|x| x.exit_code))
    }),
    col!("duration_ms", Int, true, "Tool wall time in ms", |r| {
        Cell::opt_i64(r.call().duration_ms)
    }),
    col!("kind", Text, true, "Tool event type", |r| Cell::opt(
        r.call().kind.as_deref()
    )),
    col!(
        "timestamp",
        Timestamp,
        true,
        "Time of the step that made the call (UTC)",
        |r| Cell::ts(r.turn().ts.as_ref())
    ),
    col!(
        "extra",
        Json,
        true,
        "Call extension object",
        |r| Cell::json(r.call().extra.as_ref())
    ),
    col!(
        "response",
        Json,
        true,
        "Response object {status, exit_code}",
        |r| d::json_of(r.call().response.as_ref())
    ),
    STORAGE_ORDINAL,
    ORIGIN_PATH,
];
