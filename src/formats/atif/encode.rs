//! Storyline → ATIF.
//!
//! Documents that came from ATIF are rebuilt exactly: subagents are embedded
//! again under their parent, and the keys kept in `unknown_fields` go back to
//! their pointers. Documents from other formats become valid ATIF v1.7 where
//! ATIF can say it. Every Storyline field the ATIF reader would not give back
//! as it is (not written, written with a default ATIF requires, or linked
//! differently) is reported as a [`Loss`] with its JSON pointer, and refused
//! under `--strict`.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::SOURCE;
use crate::formats::encode::{restore_all, Loss, Losses, ResidualEntry};
use crate::formats::model::{Parent, Storyline, Turn};

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
    // Parent links that loop never reach a root: those documents are
    // written as roots of their own (their parent link is reported) rather
    // than left out or embedded in each other forever.
    let mut reached = vec![false; docs.len()];
    let mut stack: Vec<usize> = roots.clone();
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut reached[i], true) {
            continue;
        }
        if let Some(kids) = children.get(&i) {
            stack.extend(kids.iter().copied());
        }
    }
    for (i, seen) in reached.iter().enumerate() {
        if !seen {
            for kids in children.values_mut() {
                kids.retain(|&k| k != i);
            }
            roots.push(i);
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
            if let Some(p) = &docs[r].parent {
                // ATIF links a subagent by embedding it in its parent; a
                // parent that is not exported (or a document naming itself)
                // leaves nothing to embed it in.
                losses.push(Loss::new(
                    "/parent",
                    format!(
                        "the parent trajectory `{}` is not exported around it; ATIF links a subagent only by embedding it in its parent",
                        crate::util::text::escape_control(&p.psid)
                    ),
                ));
            }
            let mut residual = Vec::new();
            let top = Top {
                session: docs[r].session.as_str(),
            };
            let mut v = node(docs, r, &children, losses, &mut residual, None, top);
            restore_all(&mut v, residual);
            v
        })
        .collect()
}

/// What an embedded node inherits when it is read back.
#[derive(Clone, Copy)]
struct Top<'a> {
    /// The root's session id: ATIF v1.7 makes it the run of every node.
    session: &'a str,
}

/// Where a node sits when it is embedded: its parent and its position.
#[derive(Clone, Copy)]
struct Embedded<'a> {
    parent: &'a Storyline,
    /// The parent's step ids as written.
    parent_step_ids: &'a [i64],
    /// 0-based position among the parent's embedded subagents.
    index: usize,
}

/// The trajectory id a node is read back with: its own, or the one the
/// reader generates for an embedded subagent without one.
fn read_trajectory(d: &Storyline, at: Option<Embedded<'_>>) -> Option<String> {
    match (&d.trajectory, at) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(e)) => Some(format!(
            "{}/subagent-{}",
            e.parent.document_id(),
            e.index + 1
        )),
        (None, None) => None,
    }
}

fn node(
    docs: &[Storyline],
    i: usize,
    children: &HashMap<usize, Vec<usize>>,
    losses: &mut Losses,
    residual: &mut Vec<ResidualEntry>,
    at: Option<Embedded<'_>>,
    top: Top<'_>,
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
    if let Some(t) = &d.trajectory {
        o.insert("trajectory_id".into(), json!(t));
    } else if at.is_some() {
        losses.push(Loss::new(
            "/trajectory",
            "ATIF requires a trajectory_id for an embedded subagent; the reader generates one",
        ));
    }
    agent(d, &mut o, losses);
    let step_ids: Vec<i64> = d
        .turns
        .iter()
        .enumerate()
        .map(|(k, t)| if from_atif { t.id } else { k as i64 + 1 })
        .collect();
    let steps: Vec<Value> = d
        .turns
        .iter()
        .enumerate()
        .map(|(k, t)| step(t, k, step_ids[k], from_atif, losses))
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
    let kids = children.get(&i).map_or(&[][..], Vec::as_slice);
    let mut kid_ids = Vec::with_capacity(kids.len());
    if !kids.is_empty() {
        let mut subs = Vec::with_capacity(kids.len());
        for (index, &k) in kids.iter().enumerate() {
            let e = Embedded {
                parent: d,
                parent_step_ids: &step_ids,
                index,
            };
            kid_ids.push(read_trajectory(&docs[k], Some(e)).unwrap_or_default());
            subs.push(node(docs, k, children, losses, residual, Some(e), top));
        }
        o.insert("subagent_trajectories".into(), Value::Array(subs));
    }
    // The reader lists the embedded subagents as the children.
    let read_children = (!kid_ids.is_empty()).then_some(kid_ids);
    if read_children != d.children {
        losses.push(Loss::new(
            "/children",
            "ATIF lists as children exactly the subagents embedded in the record",
        ));
    }
    links(d, at, top, losses);
    document_losses(d, losses);
    collect_residual(d, SOURCE, residual, losses);
    Value::Object(o)
}

fn agent(d: &Storyline, o: &mut Map<String, Value>, losses: &mut Losses) {
    let mut agent = Map::new();
    let name = d.agent.name.clone().unwrap_or_else(|| d.agent.id.clone());
    // The reader takes the name as the agent id ("unknown" when empty).
    let read_id = if name.is_empty() {
        "unknown"
    } else {
        name.as_str()
    };
    if read_id != d.agent.id {
        losses.push(Loss::new(
            "/agent/id",
            "ATIF has no agent id; the agent name is read back as the id",
        ));
    }
    if d.agent.name.is_none() {
        losses.push(Loss::new(
            "/agent/name",
            "ATIF requires an agent name; the agent id is written",
        ));
    }
    if d.agent.ver.is_none() {
        losses.push(Loss::new(
            "/agent/ver",
            "ATIF requires an agent version; `unknown` is written",
        ));
    }
    agent.insert("name".into(), json!(name));
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
}

/// Run and parent as the reader derives them: the root's session is the
/// run of every node; an embedded node's parent is the node it is embedded
/// in, its spawning call and step come from the parent's observation refs.
fn links(d: &Storyline, at: Option<Embedded<'_>>, top: Top<'_>, losses: &mut Losses) {
    match at {
        None => {
            if d.explicit_run().is_some() {
                losses.push(Loss::new(
                    "/run",
                    "ATIF carries the run as the root's session_id; another run id is not kept",
                ));
            }
        }
        Some(e) => {
            if d.run.as_deref() != Some(top.session) {
                losses.push(Loss::new(
                    "/run",
                    "an embedded ATIF subagent's run is its root's session_id",
                ));
            }
            let tid = read_trajectory(d, Some(e)).unwrap_or_default();
            let (scid, ptid) = spawn_of(e, &tid);
            let read = Parent {
                psid: e.parent.document_id().to_string(),
                scid,
                ptid,
                rel: None,
            };
            let Some(p) = &d.parent else { return };
            if p.psid != read.psid {
                losses.push(Loss::new(
                    "/parent/psid",
                    "an embedded ATIF subagent's parent is the trajectory it is embedded in",
                ));
            }
            if p.scid != read.scid {
                losses.push(Loss::new(
                    "/parent/scid",
                    "ATIF names the spawning call only by a subagent_trajectory_ref in the parent's observation",
                ));
            }
            if p.ptid != read.ptid {
                losses.push(Loss::new(
                    "/parent/ptid",
                    "ATIF names the spawning step only by a subagent_trajectory_ref in the parent's observation",
                ));
            }
            if p.rel.is_some() {
                losses.push(Loss::new("/parent/rel", "ATIF has no subagent relation"));
            }
        }
    }
}

/// The spawning call and step of subagent `tid` as the reader finds them:
/// the last observation result of the parent whose
/// `subagent_trajectory_ref` names `tid`.
fn spawn_of(e: Embedded<'_>, tid: &str) -> (Option<String>, Option<i64>) {
    let mut found = (None, None);
    for (k, t) in e.parent.turns.iter().enumerate() {
        let Some(results) = t
            .observation
            .as_ref()
            .and_then(|o| o.get("results"))
            .and_then(Value::as_array)
        else {
            continue;
        };
        for r in results {
            let Some(refs) = r.get("subagent_trajectory_ref").and_then(Value::as_array) else {
                continue;
            };
            let names = refs
                .iter()
                .any(|rf| rf.get("trajectory_id").and_then(Value::as_str) == Some(tid));
            if names {
                let scid = r
                    .get("source_call_id")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                found = (scid, e.parent_step_ids.get(k).copied());
            }
        }
    }
    found
}

fn step(t: &Turn, k: usize, step_id: i64, from_atif: bool, losses: &mut Losses) -> Value {
    let at = |f: &str| format!("/turns/{k}/{f}");
    let mut s = Map::new();
    if step_id != t.id {
        losses.push(Loss::new(
            at("id"),
            "ATIF step ids are written as positions for documents from other formats",
        ));
    }
    s.insert("step_id".into(), json!(step_id));
    if let Some(ts) = &t.ts {
        s.insert("timestamp".into(), ts.clone());
    }
    let src = match t.src.as_str() {
        "user" | "agent" | "system" => t.src.clone(),
        other if from_atif => other.to_string(),
        other => {
            losses.push(Loss::new(
                at("src"),
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
        if e.is_null() {
            losses.push(Loss::new(
                at("effort"),
                "a null reasoning effort reads back as absent",
            ));
        }
        s.insert("reasoning_effort".into(), e.clone());
    }
    s.insert("message".into(), message(&t.msg, from_atif, k, losses));
    if let Some(r) = &t.reason {
        s.insert("reasoning_content".into(), json!(r));
    }
    if let Some(calls) = &t.tool_calls {
        let list: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(c, call)| {
                let cp = |f: &str| format!("/turns/{k}/tool_calls/{c}/{f}");
                let mut o = Map::new();
                o.insert("tool_call_id".into(), json!(call.tcid));
                o.insert("function_name".into(), json!(call.func));
                let args = if call.args.is_object() || from_atif {
                    call.args.clone()
                } else {
                    losses.push(Loss::new(
                        cp("args"),
                        "ATIF arguments are an object; written as {\"value\": …}",
                    ));
                    json!({ "value": call.args })
                };
                o.insert("arguments".into(), args);
                let extra = match (&call.extra, call.duration_ms) {
                    (Some(e), _) => Some(e.clone()),
                    (None, Some(ms)) => {
                        losses.push(Loss::new(
                            cp("extra"),
                            "ATIF keeps a call's duration in its extra; written as {\"duration_ms\": …}",
                        ));
                        Some(json!({ "duration_ms": ms }))
                    }
                    (None, None) => None,
                };
                // The reader takes the duration from the call's extra.
                let read_ms = extra
                    .as_ref()
                    .and_then(|e| e.get("duration_ms"))
                    .and_then(Value::as_i64);
                if read_ms != call.duration_ms {
                    losses.push(Loss::new(
                        cp("duration_ms"),
                        "ATIF keeps a call's duration only as extra.duration_ms",
                    ));
                }
                if let Some(e) = extra {
                    o.insert("extra".into(), e);
                }
                if let Some(r) = &call.result {
                    if from_atif {
                        o.insert("result".into(), r.clone());
                    } else {
                        losses.push(Loss::new(
                            cp("result"),
                            "ATIF keeps tool results in the observation only",
                        ));
                    }
                }
                if call.kind.is_some() {
                    losses.push(Loss::new(cp("kind"), "ATIF has no tool kind"));
                }
                if call.response.is_some() {
                    losses.push(Loss::new(cp("response"), "ATIF has no tool response status"));
                }
                Value::Object(o)
            })
            .collect();
        s.insert("tool_calls".into(), Value::Array(list));
    }
    if let Some(obs) = &t.observation {
        if obs.is_null() {
            losses.push(Loss::new(
                at("observation"),
                "a null observation reads back as absent",
            ));
        }
        s.insert("observation".into(), obs.clone());
    }
    // The reader derives latency and time to first token from the metrics.
    let read_latency = t.metrics.as_ref().and_then(Value::as_object).and_then(|m| {
        ["latency_ms", "elapsed_ms", "duration_ms"]
            .iter()
            .find_map(|k| m.get(*k).and_then(super::as_i64))
    });
    let read_ttft = t
        .metrics
        .as_ref()
        .and_then(|m| m.get("ttft_ms"))
        .and_then(super::as_i64);
    if read_latency != t.latency_ms {
        losses.push(Loss::new(
            at("latency_ms"),
            "ATIF keeps a step's latency only in its metrics (latency_ms, elapsed_ms or duration_ms)",
        ));
    }
    if read_ttft != t.ttft_ms {
        losses.push(Loss::new(
            at("ttft_ms"),
            "ATIF keeps a step's time to first token only as metrics.ttft_ms",
        ));
    }
    if let Some(m) = &t.metrics {
        s.insert("metrics".into(), m.clone());
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
    if t.has_own_kind() {
        losses.push(Loss::new(at("kind"), "ATIF has no step kind"));
    }
    for (present, field) in [
        (t.env.is_some(), "env"),
        (t.prompt.is_some(), "prompt"),
        (t.finished_at.is_some(), "finished_at"),
    ] {
        if present {
            losses.push(Loss::new(at(field), "ATIF has no such step field"));
        }
    }
    Value::Object(s)
}

/// ATIF messages are text or text/image parts; other JSON becomes its text.
fn message(msg: &Value, from_atif: bool, k: usize, losses: &mut Losses) -> Value {
    match msg {
        Value::String(_) => msg.clone(),
        Value::Array(_) if from_atif => msg.clone(),
        Value::Null => {
            losses.push(Loss::new(
                format!("/turns/{k}/msg"),
                "ATIF requires a message; a null message is written as \"\"",
            ));
            json!("")
        }
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

fn document_losses(d: &Storyline, losses: &mut Losses) {
    for (present, field) in [
        (d.attempt_id.is_some(), "/attempt_id"),
        (d.task.is_some(), "/task"),
        (d.prompt.is_some(), "/prompt"),
        (d.meta.is_some(), "/meta"),
        (d.started_at.is_some(), "/started_at"),
        (d.finished_at.is_some(), "/finished_at"),
    ] {
        if present {
            losses.push(Loss::new(field, "ATIF has no such trajectory field"));
        }
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
                format!(
                    "/unknown_fields/sources/{}",
                    crate::formats::residual::escape_token(name)
                ),
                format!("fields kept from {name} cannot be written to {source}"),
            ));
        }
    }
}
