//! Storyline → ACTF.
//!
//! Documents are grouped into tasks by run id; each document is one attempt
//! (keyed by its attempt id). Documents that came from ACTF are rebuilt
//! exactly (their residual goes back in place); others get the defaults of a
//! synthetic one-attempt task and every field ACTF cannot hold is reported.

use serde_json::{json, Map, Value};

use super::SOURCE;
use crate::formats::atif::encode::collect_residual;
use crate::formats::encode::{restore_all, Loss, Losses};
use crate::formats::model::{Prompt, Storyline, ToolCall};

/// Encode documents as ACTF documents (one per task).
pub fn encode(docs: &[Storyline], losses: &mut Losses) -> Vec<Value> {
    let mut order: Vec<String> = Vec::new();
    let mut groups: std::collections::HashMap<String, Vec<&Storyline>> =
        std::collections::HashMap::new();
    for d in docs {
        let task = d.run.clone().unwrap_or_else(|| d.session.clone());
        if !groups.contains_key(&task) {
            order.push(task.clone());
        }
        groups.entry(task).or_default().push(d);
    }
    order
        .into_iter()
        .map(|t| task(&t, &groups[&t], losses))
        .collect()
}

fn get(
    d: &Storyline,
    f: fn(&crate::formats::model::TaskResult) -> Option<&Value>,
) -> Option<&Value> {
    d.task.as_ref()?.result.as_ref().and_then(f)
}

fn task(task_id: &str, attempts: &[&Storyline], losses: &mut Losses) -> Value {
    let first = attempts[0];
    let from_actf = first.origin.as_ref().is_some_and(|o| o.format == SOURCE);
    let mut root = Map::new();
    root.insert("task_id".into(), json!(task_id));
    let correct = get(first, |r| r.task_correct.as_ref())
        .or_else(|| get(first, |r| r.correct.as_ref()))
        .cloned()
        .unwrap_or(json!(false));
    root.insert(
        "category".into(),
        get(first, |r| r.category.as_ref())
            .cloned()
            .unwrap_or(json!("unknown")),
    );
    root.insert(
        "k".into(),
        json!(first
            .task
            .as_ref()
            .and_then(|t| t.llm.as_ref())
            .and_then(|l| l.k)
            .unwrap_or(attempts.len() as u64)),
    );
    root.insert("correct".into(), correct.clone());
    root.insert(
        "attempts_tried".into(),
        get(first, |r| r.attempts_tried.as_ref())
            .cloned()
            .unwrap_or(json!(attempts.len())),
    );
    let solved = match get(first, |r| r.solved_at.as_ref()) {
        Some(v) => v.clone(),
        None if from_actf => Value::Null,
        None if correct == json!(true) => first.finished_at.clone().unwrap_or(Value::Null),
        None => Value::Null,
    };
    root.insert("solved_at".into(), solved);
    for k in ["retry_count", "retry_counts"] {
        let v = if k == "retry_count" {
            get(first, |r| r.retry_count.as_ref())
        } else {
            get(first, |r| r.retry_counts.as_ref())
        };
        if let Some(v) = v {
            root.insert(k.into(), v.clone());
        }
    }
    let mut map = Map::new();
    let mut residual = Vec::new();
    for (n, d) in attempts.iter().enumerate() {
        let key = d.attempt_id.clone().unwrap_or_else(|| (n + 1).to_string());
        map.insert(key, attempt(d, losses));
        collect_residual(d, SOURCE, &mut residual, losses);
    }
    root.insert("attempts".into(), Value::Object(map));
    let mut v = Value::Object(root);
    restore_all(&mut v, residual);
    v
}

fn attempt(d: &Storyline, losses: &mut Losses) -> Value {
    let from_actf = d.origin.as_ref().is_some_and(|o| o.format == SOURCE);
    let mut a = Map::new();
    let correct = get(d, |r| r.correct.as_ref())
        .cloned()
        .unwrap_or(json!(false));
    a.insert("correct".into(), correct);
    let pairs: [(
        &str,
        fn(&crate::formats::model::TaskResult) -> Option<&Value>,
        Value,
    ); 7] = [
        ("final_answer", |r| r.final_answer.as_ref(), Value::Null),
        ("ground_truth", |r| r.ground_truth.as_ref(), json!("")),
        ("status", |r| r.status.as_ref(), json!("completed")),
        ("score", |r| r.score.as_ref(), Value::Null),
        ("max_score", |r| r.max_score.as_ref(), Value::Null),
        ("error", |r| r.error.as_ref(), json!("")),
        ("artifacts", |r| r.artifacts.as_ref(), json!({})),
    ];
    for (k, f, default) in pairs {
        match get(d, f) {
            Some(v) => {
                a.insert(k.into(), v.clone());
            }
            None if !from_actf && k != "max_score" => {
                a.insert(k.into(), default);
            }
            None => {}
        }
    }
    if let Some(e) = &d.extra {
        a.insert("extra".into(), e.clone());
    } else if !from_actf {
        a.insert("extra".into(), json!({}));
    }
    match d
        .final_metrics
        .as_ref()
        .and_then(|m| m.get("analysis_result"))
    {
        Some(v) => {
            a.insert("analysis_result".into(), v.clone());
        }
        None if !from_actf => {
            a.insert("analysis_result".into(), json!({}));
        }
        None => {}
    }
    if let Some(m) = &d.meta {
        a.insert("meta".into(), m.clone());
    }
    let epoch = json!("1970-01-01 00:00:00+00:00");
    let started = d
        .started_at
        .clone()
        .or_else(|| d.turns.first().and_then(|t| t.ts.clone()))
        .unwrap_or_else(|| epoch.clone());
    let finished = d
        .finished_at
        .clone()
        .or_else(|| {
            d.turns
                .last()
                .and_then(|t| t.finished_at.clone().or(t.ts.clone()))
        })
        .unwrap_or(epoch);
    let version = d
        .origin
        .as_ref()
        .filter(|_| from_actf)
        .and_then(|o| o.schema_version.clone())
        .unwrap_or_else(|| "ACTF_v1.0".into());
    let steps: Vec<Value> = d
        .turns
        .iter()
        .enumerate()
        .map(|(k, t)| step(d, k, t, from_actf, &started, losses))
        .collect();
    a.insert(
        "trajectory".into(),
        json!({ "schema_version": version, "started_at": started, "finished_at": finished, "steps": steps }),
    );
    if !from_actf {
        for t in d.turns.iter().filter(|t| t.src != "agent") {
            losses.push(Loss::new(
                format!("/turns/{}", t.id),
                format!(
                    "ACTF steps are assistant steps; the {} step is written as one",
                    t.src
                ),
            ));
        }
        if d.agent.model.is_some() || d.agent.tools.is_some() || d.agent.ver.is_some() {
            losses.push(Loss::new(
                "/agent",
                "ACTF has no agent model, version or tools",
            ));
        }
    }
    Value::Object(a)
}

fn tool_object(c: &ToolCall) -> Value {
    let mut o = Map::new();
    match c.kind.as_deref() {
        Some("command_execution") => {
            o.insert("id".into(), json!(c.tcid));
            o.insert("type".into(), json!("command_execution"));
            o.insert(
                "command".into(),
                c.args.get("command").cloned().unwrap_or(Value::Null),
            );
            if let Some(r) = &c.result {
                o.insert("aggregated_output".into(), r.clone());
            }
            if let Some(x) = c.response.as_ref().and_then(|r| r.exit_code) {
                o.insert("exit_code".into(), json!(x));
            }
            if let Some(s) = c.response.as_ref().and_then(|r| r.status.clone()) {
                o.insert("status".into(), json!(s));
            }
        }
        Some(kind) => {
            o.insert("type".into(), json!(kind));
            o.insert("id".into(), json!(c.tcid));
            o.insert("name".into(), json!(c.func));
            o.insert("input".into(), c.args.clone());
        }
        None => {
            o.insert("type".into(), json!("tool_use"));
            o.insert("id".into(), json!(c.tcid));
            o.insert("name".into(), json!(c.func));
            o.insert("input".into(), c.args.clone());
        }
    }
    Value::Object(o)
}

fn prompt_pair(p: Option<&Prompt>) -> (String, String) {
    p.map_or_else(
        || (String::new(), String::new()),
        |p| {
            (
                p.system.clone().unwrap_or_default(),
                p.user.clone().unwrap_or_default(),
            )
        },
    )
}

fn step(
    d: &Storyline,
    k: usize,
    t: &crate::formats::model::Turn,
    from_actf: bool,
    started: &Value,
    losses: &mut Losses,
) -> Value {
    let calls: Vec<Value> = t.tool_calls.iter().flatten().map(tool_object).collect();
    let mut ac = Map::new();
    ac.insert(
        "content".into(),
        if from_actf || t.msg.is_string() {
            t.msg.clone()
        } else {
            json!(crate::formats::model::message_text(&t.msg))
        },
    );
    if let Some(r) = &t.reason {
        ac.insert("reasoning_content".into(), json!(r));
    } else if !from_actf {
        ac.insert("reasoning_content".into(), Value::Null);
    }
    ac.insert("tool_calls".into(), Value::Array(calls.clone()));
    let (system, user) = prompt_pair(t.prompt.as_ref().or(d.prompt.as_ref()));
    let observation = match &t.observation {
        Some(o) => o
            .get("results")
            .cloned()
            .unwrap_or_else(|| json!([o.clone()])),
        None => json!([]),
    };
    let metric = t.metrics.clone().unwrap_or_else(|| {
        json!({
            "prompt_tokens_len": crate::table::metric_i64(t.metrics.as_ref(), &["prompt_tokens"]).unwrap_or(0),
            "completion_tokens_len": crate::table::metric_i64(t.metrics.as_ref(), &["completion_tokens"]).unwrap_or(0),
            "llm_infer_ms": t.latency_ms,
            "env_action_ms": Value::Null,
            "stop_reason": Value::Null,
        })
    });
    if !from_actf && (t.env.is_some() || t.model.is_some() || t.effort.is_some()) {
        losses.push(Loss::new(
            format!("/turns/{k}"),
            "ACTF has no step model, effort or env",
        ));
    }
    let ts = t.ts.clone().unwrap_or_else(|| started.clone());
    json!({
        "step_id": t.id,
        "assistant_content": ac,
        "metric": metric,
        "system_prompt": system,
        "user_content": user,
        "tools": calls,
        "observation": observation,
        "started_at": ts,
        "finished_at": t.finished_at.clone().unwrap_or_else(|| t.ts.clone().unwrap_or_else(|| started.clone())),
    })
}
