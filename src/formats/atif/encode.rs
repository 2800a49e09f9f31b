//! Storyline → ATIF.
//!
//! Documents that came from ATIF are rebuilt exactly: subagents are embedded
//! again under their parent, and the keys kept in `unknown_fields` go back to
//! their pointers. Documents from other formats become valid ATIF v1.7 where
//! ATIF can say it; what it cannot is reported as a [`Loss`] (and refused
//! under `--strict`).

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::SOURCE;
use crate::formats::encode::{restore_all, Loss, Losses, ResidualEntry};
use crate::formats::model::{Storyline, Turn};

/// Encode documents as ATIF records (one per root trajectory).
pub fn encode(docs: &[Storyline], losses: &mut Losses) -> Vec<Value> {
    let by_id: HashMap<&str, usize> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| (d.document_id(), i))
        .collect();
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut roots = Vec::new();
    for (i, d) in docs.iter().enumerate() {
        match d.parent.as_ref().and_then(|p| by_id.get(p.psid.as_str())) {
            Some(&p) if p != i => children.entry(p).or_default().push(i),
            _ => roots.push(i),
        }
    }
    // Children in the parent's declared order first.
    for (p, kids) in &mut children {
        let order: Vec<&str> = docs[*p]
            .children
            .iter()
            .flatten()
            .map(String::as_str)
            .collect();
        kids.sort_by_key(|&k| {
            order
                .iter()
                .position(|o| *o == docs[k].document_id())
                .unwrap_or(usize::MAX)
        });
    }
    roots
        .into_iter()
        .map(|r| {
            let mut residual = Vec::new();
            let mut v = node(docs, r, &children, losses, &mut residual, true);
            restore_all(&mut v, residual);
            v
        })
        .collect()
}

fn node(
    docs: &[Storyline],
    i: usize,
    children: &HashMap<usize, Vec<usize>>,
    losses: &mut Losses,
    residual: &mut Vec<ResidualEntry>,
    root: bool,
) -> Value {
    let d = &docs[i];
    let from_atif = d.origin.as_ref().is_some_and(|o| o.format == SOURCE);
    let mut o = Map::new();
    let version = d
        .origin
        .as_ref()
        .filter(|_| from_atif)
        .and_then(|o| o.schema_version.clone())
        .unwrap_or_else(|| "ATIF-v1.7".into());
    o.insert("schema_version".into(), json!(version));
    // Written unless the source lacked it (then the residual removes it:
    // an embedded child inherits its parent's, a root may have only a
    // trajectory id).
    o.insert("session_id".into(), json!(d.session));
    let _ = root;
    if let Some(t) = &d.trajectory {
        o.insert("trajectory_id".into(), json!(t));
    }
    let mut agent = Map::new();
    agent.insert(
        "name".into(),
        json!(d.agent.name.clone().unwrap_or_else(|| d.agent.id.clone())),
    );
    agent.insert(
        "version".into(),
        json!(d.agent.ver.clone().unwrap_or_else(|| "unknown".into())),
    );
    if let Some(m) = &d.agent.model {
        agent.insert("model_name".into(), json!(m));
    }
    if let Some(t) = &d.agent.tools {
        agent.insert("tool_definitions".into(), t.clone());
    }
    if let Some(e) = &d.agent.extra {
        agent.insert("extra".into(), e.clone());
    }
    o.insert("agent".into(), Value::Object(agent));
    let steps: Vec<Value> = d
        .turns
        .iter()
        .enumerate()
        .map(|(k, t)| step(t, k, from_atif, d, losses))
        .collect();
    o.insert("steps".into(), Value::Array(steps));
    if let Some(n) = &d.notes {
        o.insert("notes".into(), json!(n));
    }
    if let Some(m) = &d.final_metrics {
        o.insert("final_metrics".into(), m.clone());
    }
    if let Some(c) = &d.continued_trajectory_ref {
        o.insert("continued_trajectory_ref".into(), json!(c));
    }
    if let Some(e) = &d.extra {
        o.insert("extra".into(), e.clone());
    }
    if let Some(kids) = children.get(&i) {
        let subs: Vec<Value> = kids
            .iter()
            .map(|&k| node(docs, k, children, losses, residual, false))
            .collect();
        o.insert("subagent_trajectories".into(), Value::Array(subs));
    }
    if !from_atif {
        note_lost_document_fields(d, losses);
    }
    collect_residual(d, SOURCE, residual, losses);
    Value::Object(o)
}

fn step(t: &Turn, k: usize, from_atif: bool, d: &Storyline, losses: &mut Losses) -> Value {
    let mut s = Map::new();
    s.insert(
        "step_id".into(),
        json!(if from_atif { t.id } else { k as i64 + 1 }),
    );
    if let Some(ts) = &t.ts {
        s.insert("timestamp".into(), ts.clone());
    }
    let src = match t.src.as_str() {
        "user" | "agent" | "system" => t.src.clone(),
        other if from_atif => other.to_string(),
        other => {
            losses.push(Loss::new(
                format!("/turns/{k}/src"),
                format!("ATIF has no step source `{other}`; written as `system`"),
            ));
            "system".into()
        }
    };
    s.insert("source".into(), json!(src));
    if let Some(m) = &t.model {
        s.insert("model_name".into(), json!(m));
    }
    if let Some(e) = &t.effort {
        s.insert("reasoning_effort".into(), e.clone());
    }
    s.insert("message".into(), message(&t.msg, from_atif, k, losses));
    if let Some(r) = &t.reason {
        s.insert("reasoning_content".into(), json!(r));
    }
    if let Some(calls) = &t.tool_calls {
        let list: Vec<Value> = calls
            .iter()
            .map(|c| {
                let mut o = Map::new();
                o.insert("tool_call_id".into(), json!(c.tcid));
                o.insert("function_name".into(), json!(c.func));
                o.insert(
                    "arguments".into(),
                    if c.args.is_object() || from_atif {
                        c.args.clone()
                    } else {
                        json!({ "value": c.args })
                    },
                );
                if let Some(e) = &c.extra {
                    o.insert("extra".into(), e.clone());
                } else if let Some(ms) = c.duration_ms {
                    o.insert("extra".into(), json!({ "duration_ms": ms }));
                }
                if let Some(r) = &c.result {
                    if from_atif {
                        o.insert("result".into(), r.clone());
                    } else {
                        losses.push(Loss::new(
                            format!("/turns/{k}/tool_calls/{}/result", c.tcid),
                            "ATIF keeps tool results in the observation only",
                        ));
                    }
                }
                if !from_atif && (c.kind.is_some() || c.response.is_some()) {
                    losses.push(Loss::new(
                        format!("/turns/{k}/tool_calls/{}", c.tcid),
                        "ATIF has no tool kind or response status",
                    ));
                }
                Value::Object(o)
            })
            .collect();
        s.insert("tool_calls".into(), Value::Array(list));
    }
    if let Some(obs) = &t.observation {
        s.insert("observation".into(), obs.clone());
    }
    if let Some(m) = &t.metrics {
        s.insert("metrics".into(), m.clone());
    } else if !from_atif && (t.latency_ms.is_some() || t.ttft_ms.is_some()) {
        let mut extra = Map::new();
        if let Some(l) = t.latency_ms {
            extra.insert("latency_ms".into(), json!(l));
        }
        if let Some(l) = t.ttft_ms {
            extra.insert("ttft_ms".into(), json!(l));
        }
        s.insert("metrics".into(), json!({ "extra": extra }));
    }
    if let Some(e) = &t.extra {
        s.insert("extra".into(), e.clone());
    }
    if let Some(n) = t.nllm {
        s.insert("llm_call_count".into(), json!(n));
    }
    if let Some(c) = t.copied {
        s.insert("is_copied_context".into(), json!(c));
    }
    if !from_atif {
        if t.kind.is_some() && t.kind.as_deref() != Some(t.effective_kind()) {
            losses.push(Loss::new(
                format!("/turns/{k}/kind"),
                "ATIF has no step kind",
            ));
        }
        if t.env.is_some() || t.prompt.is_some() || t.finished_at.is_some() {
            losses.push(Loss::new(
                format!("/turns/{k}"),
                "ATIF has no step env, prompt or end time",
            ));
        }
        let _ = d;
    }
    Value::Object(s)
}

/// ATIF messages are text or text/image parts; other JSON becomes its text.
fn message(msg: &Value, from_atif: bool, k: usize, losses: &mut Losses) -> Value {
    match msg {
        Value::String(_) => msg.clone(),
        Value::Array(_) if from_atif => msg.clone(),
        Value::Null => json!(""),
        Value::Array(parts)
            if parts.iter().all(|p| {
                matches!(
                    p.get("type").and_then(Value::as_str),
                    Some("text" | "image")
                )
            }) =>
        {
            msg.clone()
        }
        other => {
            losses.push(Loss::new(
                format!("/turns/{k}/msg"),
                "ATIF messages are text or text/image parts; written as text",
            ));
            json!(crate::formats::model::message_text(other))
        }
    }
}

fn note_lost_document_fields(d: &Storyline, losses: &mut Losses) {
    let mut lost = Vec::new();
    if d.attempt_id.is_some() {
        lost.push("attempt_id");
    }
    if d.task.is_some() {
        lost.push("task");
    }
    if d.prompt.is_some() {
        lost.push("prompt");
    }
    if d.meta.is_some() {
        lost.push("meta");
    }
    if d.started_at.is_some() || d.finished_at.is_some() {
        lost.push("started_at/finished_at");
    }
    for f in lost {
        losses.push(Loss::new(
            format!("/{f}"),
            "ATIF has no such trajectory field",
        ));
    }
}

/// Gather this document's residual for `source`; residuals of other
/// sources cannot be carried and are reported.
pub(crate) fn collect_residual(
    d: &Storyline,
    source: &str,
    out: &mut Vec<ResidualEntry>,
    losses: &mut Losses,
) {
    let Some(Value::Object(sources)) = d.unknown_fields.as_ref().and_then(|u| u.get("sources"))
    else {
        return;
    };
    for (name, slice) in sources {
        if name == source {
            if let Some(Value::Object(fields)) = slice.get("fields") {
                for (p, v) in fields {
                    out.push((p.clone(), Some(v.clone())));
                }
            }
            if let Some(Value::Array(absent)) = slice.get("absent") {
                for p in absent.iter().filter_map(Value::as_str) {
                    out.push((p.to_string(), None));
                }
            }
        } else {
            losses.push(Loss::new(
                format!("/unknown_fields/sources/{name}"),
                format!("fields kept from {name} cannot be written to {source}"),
            ));
        }
    }
}
