//! ATIF v1.x → Storyline.
//!
//! Each trajectory node (the root and every embedded subagent, depth-first)
//! becomes one Storyline document. ATIF v1.7 makes `session_id` run-scoped,
//! so it is also the Storyline `run` of the root and of every embedded child.
//! Keys ATIF does not define are kept in `unknown_fields` by source pointer.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::json::RecordPos;
use super::model::{Agent, Origin, Parent, Storyline, ToolCall, Turn};
use super::residual::{canonical_digest, join, Residual};
use super::{locator, DecodeCtx, Diagnostic, FormatError};

/// Source name in `unknown_fields`.
pub const SOURCE: &str = "atif";
const ARRAYS: &[&str] = &["steps", "tool_calls", "subagent_trajectories"];

/// Accepted major version prefix.
const VERSION_PREFIX: &str = "ATIF-v1.";

/// Decode one ATIF record (a root trajectory with its embedded subagents).
pub fn decode(
    v: Value,
    pos: RecordPos,
    ctx: &mut DecodeCtx,
    sink: &mut dyn FnMut(Storyline),
) -> Result<(), FormatError> {
    let Value::Object(root) = v else {
        return Err(ctx.schema(locator(pos), "an ATIF trajectory must be a JSON object"));
    };
    let digest_src = Value::Object(root.clone());
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
    let needs_digest = docs
        .iter()
        .any(|(_, r): &(Storyline, Residual)| !r.is_empty());
    let digest = if needs_digest {
        canonical_digest(&digest_src)
    } else {
        String::new()
    };
    for (mut doc, residual) in docs {
        residual.apply(&mut doc, SOURCE, &digest, ARRAYS);
        sink(doc);
    }
    Ok(())
}

struct Node {
    prefix: String,
    inherited_session: Option<String>,
    run: Option<String>,
    parent: Option<Parent>,
    pos: RecordPos,
}

fn take_str(
    obj: &mut Map<String, Value>,
    key: &str,
    res: &mut Residual,
    prefix: &str,
) -> Option<String> {
    match obj.remove(key) {
        Some(Value::String(s)) => Some(s),
        Some(Value::Null) | None => None,
        Some(other) => {
            res.put(join(prefix, key), other);
            None
        }
    }
}

fn as_i64(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && f.is_finite())
            .map(|f| f as i64)
    })
}

fn convert_node(
    mut obj: Map<String, Value>,
    node: Node,
    ctx: &mut DecodeCtx,
    out: &mut Vec<(Storyline, Residual)>,
    ids: &mut HashSet<String>,
) -> Result<(), FormatError> {
    let p = node.prefix.as_str();
    let mut res = Residual::default();
    let at = |rel: &str| format!("{} {}{rel}", locator(node.pos), p);

    let schema_version = match obj.remove("schema_version") {
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
    let session_id = take_str(&mut obj, "session_id", &mut res, p).filter(|s| !s.is_empty());
    let trajectory_id = take_str(&mut obj, "trajectory_id", &mut res, p).filter(|s| !s.is_empty());
    let session = match session_id
        .clone()
        .or_else(|| node.inherited_session.clone())
        .or_else(|| trajectory_id.clone())
    {
        Some(s) => s,
        None => {
            let g = format!("generated-{}", node.pos.index + 1);
            ctx.diag(
                Diagnostic::GENERATED_ID,
                at("/session_id"),
                format!("no session_id or trajectory_id; using `{g}`"),
            );
            g
        }
    };
    let run = node.run.clone().or_else(|| session_id.clone());

    let agent = match obj.remove("agent") {
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
            Agent {
                id: "unknown".into(),
                name: None,
                ver: None,
                model: None,
                tools: None,
                extra: None,
            }
        }
        None => {
            ctx.diag(
                Diagnostic::GENERATED_ID,
                at("/agent"),
                "no agent; using agent id `unknown`",
            );
            Agent {
                id: "unknown".into(),
                name: None,
                ver: None,
                model: None,
                tools: None,
                extra: None,
            }
        }
    };

    let mut doc = Storyline::new(session.clone(), agent.id.clone());
    doc.agent = agent;
    doc.origin = Some(Origin {
        format: SOURCE.into(),
        schema_version,
        document_id: None,
    });
    doc.run = run.clone();
    doc.trajectory = trajectory_id;
    doc.parent = node.parent;
    doc.notes = take_str(&mut obj, "notes", &mut res, p);
    doc.continued_trajectory_ref = take_str(&mut obj, "continued_trajectory_ref", &mut res, p);
    doc.final_metrics = obj.remove("final_metrics");
    doc.extra = obj.remove("extra");

    let doc_key = doc.document_id().to_string();
    if !ids.insert(doc_key.clone()) {
        ctx.diag(
            Diagnostic::DUPLICATE_ID,
            at("/trajectory_id"),
            format!("trajectory id `{doc_key}` appears twice in one document tree"),
        );
    }

    // Links from observation refs to the spawning call and step.
    let mut spawn: HashMap<String, (Option<String>, i64)> = HashMap::new();
    match obj.remove("steps") {
        Some(Value::Array(steps)) => {
            let mut seen_ids = HashSet::new();
            let mut seen_calls = HashSet::new();
            let mut prev: Option<i64> = None;
            let mut order_reported = false;
            for (i, s) in steps.into_iter().enumerate() {
                let sp = format!("{p}/steps/{i}");
                let turn =
                    convert_step(s, i, &sp, &mut res, ctx, &at, &mut seen_calls, &mut spawn)?;
                if !seen_ids.insert(turn.id) || prev.is_some_and(|pv| turn.id <= pv) {
                    if !order_reported {
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
                }
                prev = Some(turn.id);
                doc.turns.push(turn);
            }
        }
        Some(other) => {
            return Err(ctx.schema(
                at("/steps"),
                format!("expected an array of steps, found {}", type_name(&other)),
            ))
        }
        None => return Err(ctx.schema(at(""), "an ATIF trajectory needs `steps`")),
    }

    let children = match obj.remove("subagent_trajectories") {
        Some(Value::Array(c)) => c,
        Some(Value::Null) | None => Vec::new(),
        Some(other) => {
            res.put(join(p, "subagent_trajectories"), other);
            Vec::new()
        }
    };
    res.rest(p, obj);
    let parent_key = doc.document_id().to_string();
    let mut child_ids = Vec::new();
    let slot = out.len();
    out.push((doc, res));
    for (i, c) in children.into_iter().enumerate() {
        let cp = format!("{p}/subagent_trajectories/{i}");
        let Value::Object(mut cobj) = c else {
            return Err(ctx.schema(
                at(&format!("/subagent_trajectories/{i}")),
                "a subagent trajectory must be an object",
            ));
        };
        let tid = match cobj
            .get("trajectory_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            Some(t) => t.to_string(),
            None => {
                let g = format!("{parent_key}/subagent-{}", i + 1);
                ctx.diag(
                    Diagnostic::GENERATED_ID,
                    at(&format!("/subagent_trajectories/{i}/trajectory_id")),
                    format!("embedded subagent without trajectory_id; using `{g}`"),
                );
                cobj.insert("trajectory_id".into(), Value::String(g.clone()));
                g
            }
        };
        let (scid, ptid) = spawn
            .get(&tid)
            .cloned()
            .map_or((None, None), |(c, t)| (c, Some(t)));
        child_ids.push(tid);
        let child = Node {
            prefix: cp,
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
        convert_node(cobj, child, ctx, out, ids)?;
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
    let name = take_str(&mut a, "name", res, p);
    let id = match name.clone().filter(|n| !n.is_empty()) {
        Some(n) => n,
        None => {
            ctx.diag(
                Diagnostic::GENERATED_ID,
                format!("{at}/name"),
                "agent has no name; using agent id `unknown`",
            );
            "unknown".to_string()
        }
    };
    let agent = Agent {
        id,
        name,
        ver: take_str(&mut a, "version", res, p),
        model: take_str(&mut a, "model_name", res, p),
        tools: a.remove("tool_definitions"),
        extra: a.remove("extra"),
    };
    res.rest(p, a);
    agent
}

#[allow(clippy::too_many_arguments)]
fn convert_step(
    s: Value,
    index: usize,
    p: &str,
    res: &mut Residual,
    ctx: &mut DecodeCtx,
    at: &dyn Fn(&str) -> String,
    seen_calls: &mut HashSet<String>,
    spawn: &mut HashMap<String, (Option<String>, i64)>,
) -> Result<Turn, FormatError> {
    let rel = format!("/steps/{index}");
    let Value::Object(mut o) = s else {
        return Err(ctx.schema(at(&rel), "a step must be a JSON object"));
    };
    let id = match o.remove("step_id") {
        Some(v) if as_i64(&v).is_some() => as_i64(&v).unwrap_or_default(),
        other => {
            let g = index as i64 + 1;
            if let Some(v) = other {
                res.put(join(p, "step_id"), v);
            }
            ctx.diag(
                Diagnostic::GENERATED_ID,
                at(&format!("{rel}/step_id")),
                format!("missing or non-integer step_id; using {g}"),
            );
            g
        }
    };
    let src = match o.remove("source") {
        Some(Value::String(s)) if !s.is_empty() => s,
        other => {
            if let Some(v) = other {
                res.put(join(p, "source"), v);
            }
            ctx.diag(
                Diagnostic::LENIENT_VALUE,
                at(&format!("{rel}/source")),
                "missing step source; using `unknown`",
            );
            "unknown".into()
        }
    };
    let msg = o.remove("message").unwrap_or(Value::Null);
    let mut turn = Turn::new(id, src, msg);
    turn.ts = o.remove("timestamp").filter(|v| !v.is_null());
    if let Some(ts) = &turn.ts {
        if super::storyline::parse_timestamp(ts).is_none() {
            ctx.diag(
                Diagnostic::LENIENT_VALUE,
                at(&format!("{rel}/timestamp")),
                format!("timestamp {ts} is not RFC 3339; kept as text"),
            );
        }
    }
    turn.model = take_str(&mut o, "model_name", res, p);
    turn.effort = o.remove("reasoning_effort").filter(|v| !v.is_null());
    turn.reason = take_str(&mut o, "reasoning_content", res, p);
    if turn.reason.is_none() {
        // Other spellings seen in the wild; the original key stays in the residual.
        for alias in ["reasoning", "thinking"] {
            if let Some(Value::String(r)) = o.get(alias) {
                turn.reason = Some(r.clone());
                break;
            }
        }
    }
    let mut step_calls = HashSet::new();
    match o.remove("tool_calls") {
        Some(Value::Array(calls)) => {
            let mut out = Vec::with_capacity(calls.len());
            for (c, call) in calls.into_iter().enumerate() {
                let cp = format!("{p}/tool_calls/{c}");
                let crel = format!("{rel}/tool_calls/{c}");
                let Value::Object(mut co) = call else {
                    return Err(ctx.schema(at(&crel), "a tool call must be a JSON object"));
                };
                let tcid =
                    match take_str(&mut co, "tool_call_id", res, &cp).filter(|s| !s.is_empty()) {
                        Some(t) => t,
                        None => {
                            let g = format!("step-{id}-tool-{c}");
                            ctx.diag(
                                Diagnostic::GENERATED_ID,
                                at(&format!("{crel}/tool_call_id")),
                                format!("missing tool_call_id; using `{g}`"),
                            );
                            g
                        }
                    };
                if !seen_calls.insert(tcid.clone()) {
                    ctx.diag(
                        Diagnostic::DUPLICATE_TOOL_CALL_ID,
                        at(&format!("{crel}/tool_call_id")),
                        format!("tool_call_id `{tcid}` is used more than once in this trajectory"),
                    );
                }
                step_calls.insert(tcid.clone());
                let func = take_str(&mut co, "function_name", res, &cp).unwrap_or_default();
                let args = co.remove("arguments").unwrap_or(Value::Null);
                let extra = co.remove("extra");
                let duration_ms = extra
                    .as_ref()
                    .and_then(|e| e.get("duration_ms"))
                    .and_then(Value::as_i64);
                let result = co.remove("result");
                res.rest(&cp, co);
                out.push(ToolCall {
                    tcid,
                    func,
                    args,
                    result,
                    duration_ms,
                    extra,
                    kind: None,
                    response: None,
                });
            }
            turn.tool_calls = Some(out);
        }
        Some(Value::Null) | None => {}
        Some(other) => res.put(join(p, "tool_calls"), other),
    }
    if let Some(obs) = o.remove("observation") {
        if let Some(results) = obs.get("results").and_then(Value::as_array) {
            for (k, r) in results.iter().enumerate() {
                let scid = r.get("source_call_id").and_then(Value::as_str);
                if let Some(c) = scid {
                    if !step_calls.contains(c) {
                        ctx.diag(
                            Diagnostic::ORPHAN_RESULT,
                            at(&format!("{rel}/observation/results/{k}/source_call_id")),
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
    if let Some(m) = o.remove("metrics") {
        if let Some(mo) = m.as_object() {
            turn.latency_ms = ["latency_ms", "elapsed_ms", "duration_ms"]
                .iter()
                .find_map(|k| mo.get(*k).and_then(as_i64));
            turn.ttft_ms = mo.get("ttft_ms").and_then(as_i64);
        }
        turn.metrics = Some(m);
    }
    turn.extra = o.remove("extra");
    match o.remove("llm_call_count") {
        Some(v) if as_i64(&v).is_some() => turn.nllm = as_i64(&v),
        Some(Value::Null) | None => {}
        Some(v) => res.put(join(p, "llm_call_count"), v),
    }
    match o.remove("is_copied_context") {
        Some(Value::Bool(b)) => turn.copied = Some(b),
        Some(Value::Null) | None => {}
        Some(v) => res.put(join(p, "is_copied_context"), v),
    }
    res.rest(p, o);
    Ok(turn)
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
