//! Storyline `storyline/v1` JSON: the hub format, read as it is.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::encode::{Loss, Losses};
use super::json::RecordPos;
use super::model::{Storyline, STORYLINE_V1};
use super::{locator, DecodeCtx, Diagnostic, FormatError};

/// Key of `unknown_fields` under which Storyline JSON keeps the original
/// text of OpenAI tool-call arguments (`ToolCall::args_raw`, which has no
/// field on the wire), by JSON pointer to each call's `args`.
pub const ARGUMENTS_TEXT: &str = "arguments_text";

/// A document as Storyline JSON. Everything is written as it is; the
/// original text of OpenAI arguments goes into
/// `unknown_fields.arguments_text`, where the Storyline reader takes it back
/// from, so an OpenAI export of the re-read document is still byte-exact.
pub fn encode(d: &Storyline, losses: &mut Losses) -> Value {
    let mut v = serde_json::to_value(d).unwrap_or(Value::Null);
    let mut texts = Map::new();
    for (k, t) in d.turns.iter().enumerate() {
        for (c, call) in t.tool_calls.iter().flatten().enumerate() {
            if let Some(raw) = &call.args_raw {
                texts.insert(
                    format!("/turns/{k}/tool_calls/{c}/args"),
                    Value::String(raw.clone()),
                );
            }
        }
    }
    if texts.is_empty() {
        return v;
    }
    let Value::Object(o) = &mut v else { return v };
    match o
        .entry("unknown_fields")
        .or_insert_with(|| Value::Object(Map::new()))
    {
        Value::Object(u) => {
            u.insert(ARGUMENTS_TEXT.into(), Value::Object(texts));
        }
        _ => {
            for p in texts.keys() {
                losses.push(Loss::new(
                    p.clone(),
                    "the original argument text has no place beside an unknown_fields that is not an object",
                ));
            }
        }
    }
    v
}

/// Take `unknown_fields.arguments_text` (see [`encode`]) back into the calls'
/// `args_raw`: only text that reads as the call's arguments and is not their
/// canonical JSON. An `unknown_fields` left empty reads as absent.
fn take_arguments_text(doc: &mut Storyline) {
    let texts = {
        let Some(Value::Object(u)) = doc.unknown_fields.as_mut() else {
            return;
        };
        let texts = match u.remove(ARGUMENTS_TEXT) {
            Some(Value::Object(t)) => t,
            Some(other) => {
                // Not ours: leave it where it was.
                u.insert(ARGUMENTS_TEXT.into(), other);
                return;
            }
            None => return,
        };
        if u.is_empty() {
            doc.unknown_fields = None;
        }
        texts
    };
    for (p, raw) in texts {
        let Value::String(raw) = raw else { continue };
        let parts: Vec<&str> = p.split('/').collect();
        let (Some(k), Some(c)) = (
            parts.get(2).and_then(|x| x.parse::<usize>().ok()),
            parts.get(4).and_then(|x| x.parse::<usize>().ok()),
        ) else {
            continue;
        };
        if parts.len() != 6 || parts[1] != "turns" || parts[3] != "tool_calls" || parts[5] != "args"
        {
            continue;
        }
        let Some(call) = doc
            .turns
            .get_mut(k)
            .and_then(|t| t.tool_calls.as_mut())
            .and_then(|cs| cs.get_mut(c))
        else {
            continue;
        };
        let reads_as_args = serde_json::from_str::<Value>(&raw).ok().as_ref() == Some(&call.args);
        if reads_as_args && serde_json::to_string(&call.args).map_or(true, |t| t != raw) {
            call.args_raw = Some(raw);
        }
    }
}

/// Decode one Storyline document.
pub fn decode(
    v: Value,
    pos: RecordPos,
    ctx: &mut DecodeCtx,
    sink: &mut dyn FnMut(Storyline),
) -> Result<(), FormatError> {
    let at = locator(pos);
    match v.get("schema_version") {
        Some(Value::String(s)) if s == STORYLINE_V1 => {}
        Some(Value::String(s)) => {
            return Err(FormatError::UnsupportedVersion {
                source_path: ctx.source_path.clone(),
                field: "schema_version",
                found: crate::util::text::escape_control(s).into_owned(),
                supported: STORYLINE_V1,
            })
        }
        _ => {
            return Err(ctx.schema(
                format!("{at} /schema_version"),
                format!("must be \"{STORYLINE_V1}\""),
            ))
        }
    }
    let mut doc: Storyline =
        serde_json::from_value(v).map_err(|e| ctx.schema(at.clone(), e.to_string()))?;
    take_arguments_text(&mut doc);
    validate(&doc, &at, ctx)?;
    sink(doc);
    Ok(())
}

/// Check the rules a Storyline document must follow. Hard violations are
/// errors; recoverable ones become diagnostics.
pub fn validate(doc: &Storyline, at: &str, ctx: &mut DecodeCtx) -> Result<(), FormatError> {
    if doc.session.is_empty() {
        return Err(ctx.schema(format!("{at} /session"), "must not be empty"));
    }
    if doc.agent.id.is_empty() {
        return Err(ctx.schema(format!("{at} /agent/id"), "must not be empty"));
    }
    if doc.trajectory.as_deref() == Some("") {
        return Err(ctx.schema(
            format!("{at} /trajectory"),
            "must not be empty when present",
        ));
    }
    let mut ids = HashSet::new();
    let mut calls = HashSet::new();
    for (i, t) in doc.turns.iter().enumerate() {
        if !ids.insert(t.id) {
            ctx.diag(
                Diagnostic::STEP_ORDER,
                format!("{at} /turns/{i}/id"),
                format!("turn id {} is used twice", t.id),
            );
        }
        if t.src.is_empty() {
            return Err(ctx.schema(format!("{at} /turns/{i}/src"), "must not be empty"));
        }
        for ts in [&t.ts, &t.finished_at].into_iter().flatten() {
            if parse_timestamp(ts).is_none() {
                ctx.diag(
                    Diagnostic::LENIENT_VALUE,
                    format!("{at} /turns/{i}"),
                    format!("timestamp {ts} is not RFC 3339 or epoch seconds"),
                );
            }
        }
        for (c, call) in t.tool_calls.iter().flatten().enumerate() {
            if call.tcid.is_empty() {
                return Err(ctx.schema(
                    format!("{at} /turns/{i}/tool_calls/{c}/tcid"),
                    "must not be empty",
                ));
            }
            if call.func.is_empty() {
                return Err(ctx.schema(
                    format!("{at} /turns/{i}/tool_calls/{c}/fn"),
                    "must not be empty",
                ));
            }
            if !calls.insert(call.tcid.as_str()) {
                ctx.diag(
                    Diagnostic::DUPLICATE_TOOL_CALL_ID,
                    format!("{at} /turns/{i}/tool_calls/{c}/tcid"),
                    format!("tool call id `{}` is used more than once", call.tcid),
                );
            }
        }
    }
    Ok(())
}

pub use crate::util::time::{format_rfc3339, parse_rfc3339, parse_timestamp};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timestamps() {
        assert_eq!(
            parse_timestamp(&json!("1970-01-01T00:00:01Z")),
            Some(1_000_000_000)
        );
        assert!(parse_timestamp(&json!("2026-08-01 00:00:00+00:00")).is_some());
        assert_eq!(parse_timestamp(&json!(1.25)), Some(1_250_000_000));
        // Large epochs with fractions keep every digit (no float rounding).
        assert_eq!(
            parse_timestamp(&json!(1_785_329_601.25)),
            Some(1_785_329_601_250_000_000)
        );
        // A JSON number holds a double: its shortest decimal form is used.
        assert_eq!(
            parse_timestamp(&json!(1_785_329_601.123_456_7)),
            Some(1_785_329_601_123_456_700)
        );
        assert_eq!(parse_timestamp(&json!(-1.5)), Some(-1_500_000_000));
        assert_eq!(parse_timestamp(&json!("yesterday")), None);
        assert_eq!(format_rfc3339(1_250_000_000), "1970-01-01T00:00:01.250Z");
    }
}
