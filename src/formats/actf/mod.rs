//! ACTF v1.0 → Storyline.
//!
//! One ACTF document is one task; each attempt becomes one Storyline
//! document with `run` = `task_id`. A step is one LLM call with the tool
//! events it issued and their observations. Attempt results go to
//! `task.result` (the judgments of later relations).

use std::collections::HashSet;

use serde_json::{json, Map, Value};

use super::json::RecordPos;
use super::model::{
    Agent, Llm, Origin, Prompt, Storyline, Task, TaskResult, ToolCall, ToolResponse, Turn,
};
use super::residual::{join, Residual};
use super::{locator, DecodeCtx, Diagnostic, FormatError};

/// Source name in `unknown_fields`.
pub const SOURCE: &str = "actf";
const ARRAYS: &[&str] = &["steps", "tools", "tool_calls", "observation"];
const ROOT_KEYS: &[&str] = &[
    "task_id",
    "category",
    "k",
    "correct",
    "attempts_tried",
    "solved_at",
    "attempts",
    "retry_count",
    "retry_counts",
];

fn nonempty_str(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// Decode one ACTF document.
pub fn decode(
    v: Value,
    pos: RecordPos,
    ctx: &mut DecodeCtx,
    sink: &mut dyn FnMut(Storyline),
) -> Result<(), FormatError> {
    let at = locator(pos);
    let Value::Object(mut root) = v else {
        return Err(ctx.schema(at, "an ACTF document must be a JSON object"));
    };
    let digest = super::atif::source_document_id(&ctx.source_path, pos);
    let task_id = match root.get("task_id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => return Err(ctx.schema(format!("{at} /task_id"), "must be a non-empty string")),
    };
    let attempts = match root.remove("attempts") {
        Some(Value::Object(a)) if !a.is_empty() => a,
        _ => {
            return Err(ctx.schema(
                format!("{at} /attempts"),
                "must be a non-empty object of attempts",
            ))
        }
    };
    let n_attempts = attempts.len();
    let k = root.get("k").and_then(Value::as_u64);
    if k.is_none() || k == Some(0) {
        ctx.diag(
            Diagnostic::LENIENT_VALUE,
            format!("{at} /k"),
            "k must be a positive integer",
        );
    }
    if root.get("attempts_tried").and_then(Value::as_u64) != Some(n_attempts as u64) {
        ctx.diag(
            Diagnostic::LENIENT_VALUE,
            format!("{at} /attempts_tried"),
            "attempts_tried does not equal the number of attempts",
        );
    }
    let mut root_extra = Map::new();
    for (key, val) in &root {
        if !ROOT_KEYS.contains(&key.as_str()) {
            root_extra.insert(key.clone(), val.clone());
        }
    }
    for (a, attempt) in attempts {
        let ap = format!("/attempts/{}", super::residual::escape_token(&a));
        let Value::Object(mut att) = attempt else {
            return Err(ctx.schema(format!("{at} {ap}"), "an attempt must be an object"));
        };
        let mut res = Residual::default();
        res.rest("", root_extra.clone());
        let session = if n_attempts == 1 {
            task_id.clone()
        } else {
            format!("{task_id}#attempt-{a}")
        };
        let mut doc = Storyline::new(session, "actf-agent");
        doc.agent = Agent {
            id: "actf-agent".into(),
            name: Some("ACTF Agent".into()),
            ver: None,
            model: None,
            tools: None,
            extra: None,
        };
        doc.run = Some(task_id.clone());
        doc.attempt_id = Some(a.clone());
        let result = TaskResult {
            task_correct: root.get("correct").cloned(),
            correct: att.remove("correct"),
            final_answer: att.remove("final_answer"),
            ground_truth: att.remove("ground_truth"),
            status: att.remove("status"),
            score: att.remove("score"),
            max_score: att.remove("max_score"),
            error: att.remove("error"),
            artifacts: att.remove("artifacts"),
            category: root.get("category").cloned(),
            attempts_tried: root.get("attempts_tried").cloned(),
            solved_at: root.get("solved_at").cloned(),
            retry_count: root.get("retry_count").cloned(),
            retry_counts: root.get("retry_counts").cloned(),
        };
        let mut fm = Map::new();
        for (key, val) in [
            ("task_correct", &result.task_correct),
            ("correct", &result.correct),
            ("score", &result.score),
            ("status", &result.status),
        ] {
            if let Some(v) = val {
                fm.insert(key.into(), v.clone());
            }
        }
        if let Some(ar) = att.remove("analysis_result") {
            fm.insert("analysis_result".into(), ar);
        }
        doc.final_metrics = Some(Value::Object(fm));
        doc.task = Some(Task {
            env: None,
            llm: Some(Llm { k }),
            result: Some(result),
        });
        doc.extra = att.remove("extra");
        doc.meta = att.remove("meta");
        let traj = att.remove("trajectory");
        res.rest(&ap, att);
        let tp = format!("{ap}/trajectory");
        let mut schema_version = None;
        match traj {
            Some(Value::Object(mut t)) => {
                schema_version = match t.remove("schema_version") {
                    Some(Value::String(s)) if s.starts_with("ACTF_v1.") => Some(s),
                    Some(Value::String(s)) => {
                        return Err(FormatError::UnsupportedVersion {
                            source_path: ctx.source_path.clone(),
                            field: "schema_version",
                            found: crate::util::text::escape_control(&s).into_owned(),
                            supported: "ACTF_v1.0",
                        })
                    }
                    other => {
                        if let Some(o) = other {
                            res.put(join(&tp, "schema_version"), o);
                        }
                        ctx.diag(
                            Diagnostic::LENIENT_VALUE,
                            format!("{at} {tp}/schema_version"),
                            "missing ACTF schema_version",
                        );
                        None
                    }
                };
                doc.started_at = t.remove("started_at").filter(|v| !v.is_null());
                doc.finished_at = t.remove("finished_at").filter(|v| !v.is_null());
                let steps = match t.remove("steps") {
                    Some(Value::Array(s)) => s,
                    Some(Value::Null) | None => Vec::new(),
                    Some(other) => {
                        return Err(ctx.schema(
                            format!("{at} {tp}/steps"),
                            format!(
                                "expected an array, found {}",
                                super::atif::type_name(&other)
                            ),
                        ))
                    }
                };
                res.rest(&tp, t);
                convert_steps(steps, &tp, &at, &mut doc, &mut res, ctx)?;
            }
            Some(Value::Null) | None => {
                ctx.diag(
                    Diagnostic::LENIENT_VALUE,
                    format!("{at} {tp}"),
                    "attempt has no trajectory; read as empty",
                );
            }
            Some(other) => {
                ctx.diag(
                    Diagnostic::LENIENT_VALUE,
                    format!("{at} {tp}"),
                    "attempt trajectory is not an ACTF trajectory object; kept as residual",
                );
                res.put(tp.clone(), other);
            }
        }
        doc.origin = Some(Origin {
            format: SOURCE.into(),
            schema_version,
            document_id: None,
        });
        res.apply(&mut doc, SOURCE, &digest, ARRAYS);
        sink(doc);
    }
    Ok(())
}

fn convert_steps(
    steps: Vec<Value>,
    tp: &str,
    at: &str,
    doc: &mut Storyline,
    res: &mut Residual,
    ctx: &mut DecodeCtx,
) -> Result<(), FormatError> {
    let mut prev: Option<i64> = None;
    let mut order_reported = false;
    let mut baseline: Option<(String, String)> = None;
    let mut all_calls = HashSet::new();
    for (i, s) in steps.into_iter().enumerate() {
        let sp = format!("{tp}/steps/{i}");
        let Value::Object(mut o) = s else {
            return Err(ctx.schema(format!("{at} {sp}"), "a step must be an object"));
        };
        let id = if let Some(id) = o.remove("step_id").and_then(|v| v.as_i64()) {
            id
        } else {
            ctx.diag(
                Diagnostic::GENERATED_ID,
                format!("{at} {sp}/step_id"),
                format!("missing step_id; using {}", i + 1),
            );
            i as i64 + 1
        };
        if prev.is_some_and(|p| id <= p) && !order_reported {
            ctx.diag(
                Diagnostic::STEP_ORDER,
                format!("{at} {sp}/step_id"),
                format!("step_id {id} does not increase"),
            );
            order_reported = true;
        }
        prev = Some(id);
        let mut ac = match o.remove("assistant_content") {
            Some(Value::Object(m)) => m,
            Some(Value::Null) | None => Map::new(),
            Some(other) => {
                res.put(join(&sp, "assistant_content"), other);
                Map::new()
            }
        };
        // Content and reasoning are kept exactly (null stays null).
        let msg = ac.remove("content").unwrap_or(Value::Null);
        let mut turn = Turn::new(id, "agent", msg);
        turn.nllm = Some(1);
        match ac.remove("reasoning_content") {
            Some(Value::String(r)) => turn.reason = Some(r),
            None => {}
            Some(other) => res.put(format!("{sp}/assistant_content/reasoning_content"), other),
        }
        let ac_calls = match ac.remove("tool_calls") {
            Some(Value::Array(c)) => c,
            Some(Value::Null) | None => Vec::new(),
            Some(other) => {
                res.put(format!("{sp}/assistant_content/tool_calls"), other);
                Vec::new()
            }
        };
        let tools = match o.remove("tools") {
            Some(Value::Array(c)) => c,
            Some(Value::Null) | None => Vec::new(),
            Some(other) => {
                res.put(format!("{sp}/tools"), other);
                Vec::new()
            }
        };
        // `tools` is authoritative; a differing `assistant_content.tool_calls`
        // is kept as residual rather than dropped.
        // `tools` is authoritative; when the two lists differ, the other is
        // kept exactly as residual (export writes both from the calls).
        let raw_calls = if tools.is_empty() {
            if !ac_calls.is_empty() {
                res.put(format!("{sp}/tools"), Value::Array(Vec::new()));
            }
            ac_calls
        } else {
            if ac_calls != tools {
                if !ac_calls.is_empty() {
                    ctx.diag(
                        Diagnostic::LENIENT_VALUE,
                        format!("{at} {sp}/assistant_content/tool_calls"),
                        "differs from `tools`; `tools` is used and the other kept as residual",
                    );
                }
                ac.insert("tool_calls".into(), Value::Array(ac_calls));
            }
            tools
        };
        res.rest(&format!("{sp}/assistant_content"), ac);
        let mut calls = Vec::new();
        let mut step_ids = HashSet::new();
        for (c, call) in raw_calls.into_iter().enumerate() {
            let Value::Object(mut co) = call else {
                ctx.diag(
                    Diagnostic::LENIENT_VALUE,
                    format!("{at} {sp}/tools/{c}"),
                    "a tool entry that is not an object is kept as residual",
                );
                res.put(format!("{sp}/tools/{c}"), call);
                continue;
            };
            let tcid = if let Some(t) = nonempty_str(co.get("id")) {
                t
            } else {
                let g = format!("step-{id}-tool-{c}");
                ctx.diag(
                    Diagnostic::GENERATED_ID,
                    format!("{at} {sp}/tools/{c}/id"),
                    format!("tool call without id; using `{g}`"),
                );
                g
            };
            if !step_ids.insert(tcid.clone()) || !all_calls.insert(tcid.clone()) {
                ctx.diag(
                    Diagnostic::DUPLICATE_TOOL_CALL_ID,
                    format!("{at} {sp}/tools/{c}/id"),
                    format!("tool call id `{tcid}` is used more than once"),
                );
            }
            let kind = nonempty_str(co.get("type"));
            let func = nonempty_str(co.get("name"))
                .or_else(|| nonempty_str(co.get("function").and_then(|f| f.get("name"))))
                .or_else(|| kind.clone())
                .unwrap_or_else(|| "unknown".into());
            let args = if let Some(v) = co.get("input") {
                v.clone()
            } else if let Some(v) = co.get("arguments") {
                v.clone()
            } else if let Some(v) = co.get("function").and_then(|f| f.get("arguments")) {
                v.clone()
            } else if let Some(cmd) = co.get("command") {
                json!({ "command": cmd })
            } else {
                let mut rest = co.clone();
                for k in ["type", "id", "status", "exit_code"] {
                    rest.remove(k);
                }
                Value::Object(rest)
            };
            let result = co.get("aggregated_output").cloned();
            let status = co.get("status").and_then(Value::as_str).map(str::to_string);
            let exit_code = co.get("exit_code").and_then(Value::as_i64);
            let response = (status.is_some() || exit_code.is_some())
                .then_some(ToolResponse { status, exit_code });
            for key in [
                "id",
                "name",
                "input",
                "arguments",
                "function",
                "command",
                "aggregated_output",
                "type",
                "status",
                "exit_code",
            ] {
                co.remove(key);
            }
            res.rest(&format!("{sp}/tools/{c}"), co);
            calls.push(ToolCall {
                tcid,
                func,
                args,
                result,
                duration_ms: None,
                extra: None,
                kind,
                response,
                args_raw: None,
            });
        }
        let metric = o.remove("metric");
        if let Some(m) = metric.as_ref().and_then(Value::as_object) {
            turn.latency_ms = m
                .get("llm_infer_ms")
                .and_then(Value::as_f64)
                .map(|f| f as i64);
            if calls.len() == 1 {
                calls[0].duration_ms = m
                    .get("env_action_ms")
                    .and_then(Value::as_f64)
                    .map(|f| f as i64);
            }
        }
        turn.metrics = metric;
        if let Some(Value::Array(obs)) = o.remove("observation") {
            if !obs.is_empty() {
                let mut results = Vec::with_capacity(obs.len());
                // Items are kept verbatim; readers link them to calls by
                // `tool_use_id` or `id`.
                for (k, r) in obs.into_iter().enumerate() {
                    let link =
                        nonempty_str(r.get("tool_use_id")).or_else(|| nonempty_str(r.get("id")));
                    if let Some(l) = link {
                        if !step_ids.contains(&l) {
                            ctx.diag(Diagnostic::ORPHAN_RESULT, format!("{at} {sp}/observation/{k}"), format!("observation names tool call `{l}`, which is not a call of this step"));
                        }
                    }
                    results.push(r);
                }
                turn.observation = Some(json!({ "results": results }));
            }
        }
        if !calls.is_empty() {
            turn.kind = Some("autonomous".into());
            turn.tool_calls = Some(calls);
        }
        turn.ts = o.remove("started_at").filter(|v| !v.is_null());
        turn.finished_at = o.remove("finished_at").filter(|v| !v.is_null());
        let mut text_field = |key: &str| match o.remove(key) {
            Some(Value::String(t)) => t,
            Some(other) => {
                res.put(join(&sp, key), other);
                String::new()
            }
            None => String::new(),
        };
        let sys = text_field("system_prompt");
        let user = text_field("user_content");
        let pair = (sys, user);
        match &baseline {
            None if !pair.0.is_empty() || !pair.1.is_empty() => {
                doc.prompt = Some(Prompt {
                    system: Some(pair.0.clone()).filter(|s| !s.is_empty()),
                    user: Some(pair.1.clone()).filter(|s| !s.is_empty()),
                });
                baseline = Some(pair);
            }
            Some(b) if *b == pair => {}
            _ => {
                turn.prompt = Some(Prompt {
                    system: Some(pair.0),
                    user: Some(pair.1),
                });
            }
        }
        res.rest(&sp, o);
        doc.turns.push(turn);
    }
    Ok(())
}

pub mod encode;
