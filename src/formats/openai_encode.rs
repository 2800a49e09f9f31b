//! Storyline → OpenAI messages (the SFT shape: one `{"messages", "tools"}`
//! example per trajectory).
//!
//! Each turn becomes a message (system, user, assistant); tool results in a
//! turn's observation follow it as `tool` messages. Examples that came from
//! the SFT shape are rebuilt exactly from their residual; row-per-call
//! corpora are written as SFT examples too (their row fields are reported as
//! lost).

use serde_json::{json, Map, Value};

use super::encode::{restore_residual, Loss, Losses};
use super::model::Storyline;
use super::openai::SOURCE;

/// Encode documents as SFT examples.
pub fn encode(docs: &[Storyline], losses: &mut Losses) -> Vec<Value> {
    docs.iter().map(|d| example(d, losses)).collect()
}

fn example(d: &Storyline, losses: &mut Losses) -> Value {
    let mut messages = Vec::new();
    for (k, t) in d.turns.iter().enumerate() {
        let role = match t.src.as_str() {
            "system" => "system",
            "user" => "user",
            "agent" => "assistant",
            other => {
                losses.push(Loss::new(
                    format!("/turns/{k}/src"),
                    format!("no OpenAI role for `{other}`; written as user"),
                ));
                "user"
            }
        };
        let mut m = Map::new();
        m.insert("role".into(), json!(role));
        m.insert("content".into(), t.msg.clone());
        if let Some(calls) = &t.tool_calls {
            if !calls.is_empty() {
                let list: Vec<Value> = calls
                    .iter()
                    .map(|c| {
                        // The source's own text when it was kept.
                        let args = match (&c.args_raw, &c.args) {
                            (Some(raw), _) => raw.clone(),
                            (None, Value::String(s)) => s.clone(),
                            (None, other) => other.to_string(),
                        };
                        json!({"id": c.tcid, "type": "function", "function": {"name": c.func, "arguments": args}})
                    })
                    .collect();
                m.insert("tool_calls".into(), Value::Array(list));
            }
        }
        if let Some(r) = &t.reason {
            m.insert("reasoning_content".into(), json!(r));
        }
        messages.push(Value::Object(m));
        if let Some(results) = t
            .observation
            .as_ref()
            .and_then(|o| o.get("results"))
            .and_then(Value::as_array)
        {
            // OpenAI tool messages must name their call. Results without a
            // link answer the turn's unanswered calls in order; any left
            // over have no call to answer and become user messages.
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
            for (j, r) in results.iter().enumerate() {
                let content = r.get("content").cloned().unwrap_or(Value::Null);
                let link = match super::text::result_link(r) {
                    Some(id) => Some(id.to_string()),
                    None => {
                        let paired = unanswered.next().map(|c| (*c).to_string());
                        losses.push(Loss::new(
                            format!("/turns/{k}/observation/results/{j}"),
                            if paired.is_some() {
                                "a result without a tool call id is linked to the next unanswered call"
                            } else {
                                "a result without a tool call is written as a user message"
                            },
                        ));
                        paired
                    }
                };
                let mut tm = Map::new();
                match link {
                    Some(id) => {
                        tm.insert("role".into(), json!("tool"));
                        tm.insert("tool_call_id".into(), json!(id));
                    }
                    None => {
                        tm.insert("role".into(), json!("user"));
                    }
                }
                tm.insert("content".into(), content);
                messages.push(Value::Object(tm));
            }
        }
    }
    let mut o = Map::new();
    o.insert("messages".into(), Value::Array(messages));
    if let Some(t) = &d.agent.tools {
        o.insert("tools".into(), t.clone());
    }
    let mut v = Value::Object(o);
    let from_sft = d.origin.as_ref().is_some_and(|o| o.format == SOURCE)
        && d.origin.as_ref().is_some_and(|o| o.document_id.is_none());
    if let Some(Value::Object(sources)) = d.unknown_fields.as_ref().and_then(|u| u.get("sources")) {
        for (name, slice) in sources {
            let fields = slice.get("fields").and_then(Value::as_object);
            if name == SOURCE && from_sft {
                for (p, val) in fields.into_iter().flatten() {
                    // Residual pointers of array records start with the record index.
                    let p = strip_record_prefix(p);
                    restore_residual(&mut v, &p, val.clone());
                }
            } else {
                losses.push(Loss::new(
                    format!("/unknown_fields/sources/{name}"),
                    format!("fields kept from {name} cannot be written to OpenAI messages"),
                ));
            }
        }
    }
    let lost: Vec<&str> = [
        (d.task.is_some(), "task"),
        (d.final_metrics.is_some() && !from_sft, "final_metrics"),
        (d.run.is_some(), "run"),
        (d.parent.is_some(), "parent"),
        (
            d.turns
                .iter()
                .any(|t| t.metrics.is_some() || t.ts.is_some()),
            "step metrics and timestamps",
        ),
    ]
    .into_iter()
    .filter_map(|(b, n)| b.then_some(n))
    .collect();
    for f in lost {
        losses.push(Loss::new(
            format!("/{f}"),
            "OpenAI messages have no such field",
        ));
    }
    v
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
