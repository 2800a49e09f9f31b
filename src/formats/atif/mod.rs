//! ATIF v1.x → Storyline.
//!
//! Each trajectory node (the root and every embedded subagent, depth-first)
//! becomes one Storyline document. ATIF v1.7 makes `session_id` run-scoped,
//! so it is also the Storyline `run` of the root and of every embedded child.
//! Keys ATIF does not define are kept in `unknown_fields` by source pointer.
//! Records are read with the typed parser in [`raw`]; in skeleton projection
//! the heavy payloads are never materialised.

pub mod encode;
pub mod raw;

use std::collections::{HashMap, HashSet};

use serde_json::{json, Map, Value};

use super::json::RecordPos;
use super::model::{Agent, Origin, Parent, Storyline, ToolCall, Turn};
use super::residual::{join, Residual};
use super::{locator, DecodeCtx, Diagnostic, FormatError};
pub use raw::{NodeSeed, Projection, RawCall, RawNode, RawStep};

/// Source name in `unknown_fields`.
pub const SOURCE: &str = "atif";
const ARRAYS: &[&str] = &["steps", "tool_calls", "subagent_trajectories"];

/// Accepted major version prefix.
const VERSION_PREFIX: &str = "ATIF-v1.";

/// Decode one ATIF record (a root trajectory with its embedded subagents).
pub fn decode(
    root: RawNode,
    pos: RecordPos,
    ctx: &mut DecodeCtx,
    sink: &mut dyn FnMut(Storyline),
) -> Result<(), FormatError> {
    let mut docs = Vec::new();
    let mut ids = HashSet::new();
    let node = Node {
        prefix: String::new(),
        inherited_session: None,
        run: None,
        parent: None,
        pos,
    };
    convert_node(root, node, ctx, &mut docs, &mut ids)?;
    let doc_id = source_document_id(&ctx.source_path, pos);
    for (mut doc, residual) in docs {
        residual.apply(&mut doc, SOURCE, &doc_id, ARRAYS);
        sink(doc);
    }
    Ok(())
}

/// The id that groups the Storyline documents made from one source record:
/// the Source path and the record's 1-based position.
pub fn source_document_id(source_path: &str, pos: RecordPos) -> String {
    format!("{source_path}#{}", pos.index + 1)
}

struct Node {
    prefix: String,
    inherited_session: Option<String>,
    run: Option<String>,
    parent: Option<Parent>,
    pos: RecordPos,
}

/// A string field: strings pass, null is absent, anything else goes to the residual.
fn string(v: Option<Value>, res: &mut Residual, prefix: &str, key: &str) -> Option<String> {
    match v {
        Some(Value::String(s)) => Some(s),
        Some(Value::Null) | None => None,
        Some(other) => {
            res.put(join(prefix, key), other);
            None
        }
    }
}

/// An integer, also from a float without a fraction (how ATIF readers
/// take step ids and metrics; encoders predict what they will read back).
pub(crate) fn as_i64(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && f.is_finite())
            .map(|f| f as i64)
    })
}

fn non_null(v: Option<Value>) -> Option<Value> {
    v.filter(|v| !v.is_null())
}

fn unknown_agent() -> Agent {
    Agent {
        id: "unknown".into(),
        name: None,
        ver: None,
        model: None,
        tools: None,
        extra: None,
    }
}

fn convert_node(
    raw: RawNode,
    node: Node,
    ctx: &mut DecodeCtx,
    out: &mut Vec<(Storyline, Residual)>,
    ids: &mut HashSet<String>,
) -> Result<(), FormatError> {
    let p = node.prefix.as_str();
    let mut res = Residual::default();
    let at = |rel: &str| format!("{} {p}{rel}", locator(node.pos));

    let schema_version = match raw.schema_version {
        Some(Value::String(s)) => {
            if !s.starts_with(VERSION_PREFIX) {
                return Err(FormatError::UnsupportedVersion {
                    source_path: ctx.source_path.clone(),
                    field: "schema_version",
                    found: crate::util::text::escape_control(&s).into_owned(),
                    supported: "ATIF-v1.0 … ATIF-v1.x",
                });
            }
            Some(s)
        }
        None | Some(Value::Null) => None,
        Some(other) => {
            return Err(ctx.schema(
                at("/schema_version"),
                format!("expected a string, found {}", type_name(&other)),
            ))
        }
    };
    // A session id the document lacks (or gives as null or "") is derived
    // for Storyline; export writes back exactly what was there.
    match &raw.session_id {
        None => res.absent(join(p, "session_id")),
        Some(v @ Value::Null) => res.put(join(p, "session_id"), v.clone()),
        Some(Value::String(s)) if s.is_empty() => res.put(join(p, "session_id"), json!("")),
        Some(_) => {}
    }
    let session_id = string(raw.session_id, &mut res, p, "session_id").filter(|s| !s.is_empty());
    let trajectory_id =
        string(raw.trajectory_id, &mut res, p, "trajectory_id").filter(|s| !s.is_empty());
    let session = if let Some(s) = session_id
        .clone()
        .or_else(|| node.inherited_session.clone())
        .or_else(|| trajectory_id.clone())
    {
        s
    } else {
        let g = format!("generated-{}", node.pos.index + 1);
        ctx.diag(
            Diagnostic::GENERATED_ID,
            at("/session_id"),
            format!("no session_id or trajectory_id; using `{g}`"),
        );
        g
    };
    let run = node.run.clone().or_else(|| session_id.clone());

    let agent = match raw.agent {
        Some(Value::Object(a)) => {
            convert_agent(a, &format!("{p}/agent"), &mut res, ctx, &at("/agent"))
        }
        Some(other) => {
            res.put(join(p, "agent"), other);
            ctx.diag(
                Diagnostic::LENIENT_VALUE,
                at("/agent"),
                "agent is not an object; kept as residual",
            );
            unknown_agent()
        }
        None => {
            ctx.diag(
                Diagnostic::GENERATED_ID,
                at("/agent"),
                "no agent; using agent id `unknown`",
            );
            unknown_agent()
        }
    };

    let mut doc = Storyline::new(session.clone(), agent.id.clone());
    doc.agent = agent;
    doc.origin = Some(Origin {
        format: SOURCE.into(),
        schema_version,
        document_id: None,
    });
    doc.run.clone_from(&run);
    doc.trajectory = trajectory_id;
    doc.parent = node.parent;
    doc.notes = string(raw.notes, &mut res, p, "notes");
    doc.continued_trajectory_ref = string(
        raw.continued_trajectory_ref,
        &mut res,
        p,
        "continued_trajectory_ref",
    );
    doc.final_metrics = raw.final_metrics;
    doc.extra = raw.extra;

    ids.insert(doc.document_id().to_string());

    // Links from observation refs to the spawning call and step.
    let mut spawn: HashMap<String, (Option<String>, i64)> = HashMap::new();
    let Some(steps) = raw.steps else {
        return Err(ctx.schema(at(""), "an ATIF trajectory needs `steps`"));
    };
    let mut seen_ids = HashSet::with_capacity(steps.len());
    let mut seen_calls = HashSet::new();
    let mut prev: Option<i64> = None;
    let mut order_reported = false;
    doc.turns.reserve(steps.len());
    for (i, s) in steps.into_iter().enumerate() {
        let turn = convert_step(s, i, p, &mut res, ctx, &at, &mut seen_calls, &mut spawn);
        if (!seen_ids.insert(turn.id) || prev.is_some_and(|pv| turn.id <= pv)) && !order_reported {
            ctx.diag(
                Diagnostic::STEP_ORDER,
                at(&format!("/steps/{i}/step_id")),
                format!(
                    "step_id {} does not increase (previous {})",
                    turn.id,
                    prev.unwrap_or(0)
                ),
            );
            order_reported = true;
        }
        prev = Some(turn.id);
        doc.turns.push(turn);
    }

    for (k, v) in raw.rest {
        res.put(join(p, &k), v);
    }
    let parent_key = doc.document_id().to_string();
    let mut child_ids = Vec::new();
    let slot = out.len();
    out.push((doc, res));
    for (i, mut child) in raw.subagents.unwrap_or_default().into_iter().enumerate() {
        let tid = if let Some(t) = child
            .trajectory_id
            .as_ref()
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            t.to_string()
        } else {
            let g = format!("{parent_key}/subagent-{}", i + 1);
            ctx.diag(
                Diagnostic::GENERATED_ID,
                at(&format!("/subagent_trajectories/{i}/trajectory_id")),
                format!("embedded subagent without trajectory_id; using `{g}`"),
            );
            child.trajectory_id = Some(Value::String(g.clone()));
            g
        };
        let (scid, ptid) = spawn
            .get(&tid)
            .cloned()
            .map_or((None, None), |(c, t)| (c, Some(t)));
        child_ids.push(tid);
        let cnode = Node {
            prefix: format!("{p}/subagent_trajectories/{i}"),
            inherited_session: Some(session.clone()),
            run: run.clone().or_else(|| Some(session.clone())),
            parent: Some(Parent {
                psid: parent_key.clone(),
                scid,
                ptid,
                rel: None,
            }),
            pos: node.pos,
        };
        convert_node(child, cnode, ctx, out, ids)?;
    }
    if !child_ids.is_empty() {
        out[slot].0.children = Some(child_ids);
        if out[slot].0.run.is_none() {
            out[slot].0.run = Some(session);
        }
    }
    Ok(())
}

fn convert_agent(
    mut a: Map<String, Value>,
    p: &str,
    res: &mut Residual,
    ctx: &mut DecodeCtx,
    at: &str,
) -> Agent {
    let name = string(a.remove("name"), res, p, "name");
    let id = if let Some(n) = name.clone().filter(|n| !n.is_empty()) {
        n
    } else {
        ctx.diag(
            Diagnostic::GENERATED_ID,
            format!("{at}/name"),
            "agent has no name; using agent id `unknown`",
        );
        "unknown".to_string()
    };
    let agent = Agent {
        id,
        name,
        ver: string(a.remove("version"), res, p, "version"),
        model: string(a.remove("model_name"), res, p, "model_name"),
        tools: a.remove("tool_definitions"),
        extra: a.remove("extra"),
    };
    res.rest(p, a);
    agent
}

#[allow(clippy::too_many_arguments)]
fn convert_step(
    s: RawStep,
    index: usize,
    node_prefix: &str,
    res: &mut Residual,
    ctx: &mut DecodeCtx,
    at: &dyn Fn(&str) -> String,
    seen_calls: &mut HashSet<String>,
    spawn: &mut HashMap<String, (Option<String>, i64)>,
) -> Turn {
    // Pointers are built only when something is reported or kept.
    let sp = || format!("{node_prefix}/steps/{index}");
    let rel = |tail: &str| at(&format!("/steps/{index}{tail}"));
    let id = if let Some(id) = s.step_id.as_ref().and_then(as_i64) {
        id
    } else {
        let g = index as i64 + 1;
        if let Some(v) = s.step_id {
            res.put(join(&sp(), "step_id"), v);
        }
        ctx.diag(
            Diagnostic::GENERATED_ID,
            rel("/step_id"),
            format!("missing or non-integer step_id; using {g}"),
        );
        g
    };
    let src = match s.source {
        Some(Value::String(src)) if !src.is_empty() => src,
        other => {
            if let Some(v) = other {
                res.put(join(&sp(), "source"), v);
            }
            ctx.diag(
                Diagnostic::LENIENT_VALUE,
                rel("/source"),
                "missing step source; using `unknown`",
            );
            "unknown".into()
        }
    };
    let mut turn = Turn::new(id, src, s.message.unwrap_or(Value::Null));
    turn.ts = non_null(s.timestamp);
    if let Some(ts) = &turn.ts {
        if super::storyline::parse_timestamp(ts).is_none() {
            ctx.diag(
                Diagnostic::LENIENT_VALUE,
                rel("/timestamp"),
                format!("timestamp {ts} is not RFC 3339; kept as text"),
            );
        }
    }
    turn.model = string(s.model_name, res, &sp(), "model_name");
    turn.effort = non_null(s.reasoning_effort);
    turn.reason = string(s.reasoning_content, res, &sp(), "reasoning_content");
    if turn.reason.is_none() {
        // Other spellings seen in the wild; the original key stays in the residual.
        turn.reason = s.rest.iter().find_map(|(k, v)| match (k.as_str(), v) {
            ("reasoning" | "thinking", Value::String(r)) => Some(r.clone()),
            _ => None,
        });
    }
    let mut step_calls: HashSet<&str> = HashSet::new();
    if let Some(calls) = s.tool_calls {
        let mut out = Vec::with_capacity(calls.len());
        for (c, call) in calls.into_iter().enumerate() {
            let cp = || format!("{}/tool_calls/{c}", sp());
            let tcid = if let Some(t) =
                string(call.tool_call_id, res, &cp(), "tool_call_id").filter(|s| !s.is_empty())
            {
                t
            } else {
                let g = format!("step-{id}-tool-{c}");
                ctx.diag(
                    Diagnostic::GENERATED_ID,
                    rel(&format!("/tool_calls/{c}/tool_call_id")),
                    format!("missing tool_call_id; using `{g}`"),
                );
                g
            };
            if !seen_calls.insert(tcid.clone()) {
                ctx.diag(
                    Diagnostic::DUPLICATE_TOOL_CALL_ID,
                    rel(&format!("/tool_calls/{c}/tool_call_id")),
                    format!("tool_call_id `{tcid}` is used more than once in this trajectory"),
                );
            }
            let func = if let Some(f) =
                string(call.function_name, res, &cp(), "function_name").filter(|f| !f.is_empty())
            {
                f
            } else {
                ctx.diag(
                    Diagnostic::LENIENT_VALUE,
                    rel(&format!("/tool_calls/{c}/function_name")),
                    "missing function_name; using `unknown`",
                );
                "unknown".into()
            };
            let duration_ms = call
                .extra
                .as_ref()
                .and_then(|e| e.get("duration_ms"))
                .and_then(Value::as_i64);
            for (k, v) in call.rest {
                res.put(join(&cp(), &k), v);
            }
            out.push(ToolCall {
                tcid,
                func,
                args: call.arguments.unwrap_or(Value::Null),
                result: call.result,
                duration_ms,
                extra: call.extra,
                kind: None,
                response: None,
                args_raw: None,
            });
        }
        turn.tool_calls = Some(out);
    }
    if let Some(calls) = &turn.tool_calls {
        step_calls.extend(calls.iter().map(|c| c.tcid.as_str()));
    }
    if let Some(obs) = non_null(s.observation) {
        if let Some(results) = obs.get("results").and_then(Value::as_array) {
            for (k, r) in results.iter().enumerate() {
                let scid = r.get("source_call_id").and_then(Value::as_str);
                if let Some(c) = scid {
                    if !step_calls.contains(c) {
                        ctx.diag(
                            Diagnostic::ORPHAN_RESULT,
                            rel(&format!("/observation/results/{k}/source_call_id")),
                            format!(
                                "result names tool call `{c}`, which is not a call of this step"
                            ),
                        );
                    }
                }
                if let Some(refs) = r.get("subagent_trajectory_ref").and_then(Value::as_array) {
                    for rf in refs {
                        if let Some(t) = rf.get("trajectory_id").and_then(Value::as_str) {
                            spawn.insert(t.to_string(), (scid.map(str::to_string), id));
                        }
                    }
                }
            }
        }
        turn.observation = Some(obs);
    }
    if let Some(m) = s.metrics {
        if let Some(mo) = m.as_object() {
            turn.latency_ms = ["latency_ms", "elapsed_ms", "duration_ms"]
                .iter()
                .find_map(|k| mo.get(*k).and_then(as_i64));
            turn.ttft_ms = mo.get("ttft_ms").and_then(as_i64);
        }
        turn.metrics = Some(m);
    }
    turn.extra = s.extra;
    match s.llm_call_count {
        Some(v) if as_i64(&v).is_some() => turn.nllm = as_i64(&v),
        Some(Value::Null) | None => {}
        Some(v) => res.put(join(&sp(), "llm_call_count"), v),
    }
    match s.is_copied_context {
        Some(Value::Bool(b)) => turn.copied = Some(b),
        Some(Value::Null) | None => {}
        Some(v) => res.put(join(&sp(), "is_copied_context"), v),
    }
    if !s.rest.is_empty() {
        let p = sp();
        for (k, v) in s.rest {
            res.put(join(&p, &k), v);
        }
    }
    turn
}

/// A short name for a JSON value's type.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
