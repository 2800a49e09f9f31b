//! Storyline → ACTF.
//!
//! Documents are grouped into tasks by run id; each document is one attempt
//! (keyed by its attempt id). Documents that came from ACTF are rebuilt
//! exactly (their residual goes back in place); others get the defaults of a
//! synthetic task. Every Storyline field the ACTF reader would not give back
//! as it is (not written, or written with a default ACTF requires) is
//! reported as a [`Loss`] with its JSON pointer.

use serde_json::{json, Map, Value};

use super::SOURCE;
use crate::formats::atif::encode::collect_residual;
use crate::formats::encode::{restore_all, Loss, Losses};
use crate::formats::model::{
    Llm, Prompt, Storyline, Task, TaskResult, ToolCall, ToolResponse, Turn,
};

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

/// The attempt keys of a task: each document's attempt id, or (without
/// one, or when another attempt of the task already has it) the first
/// unused position.
fn attempt_keys(attempts: &[&Storyline]) -> Vec<String> {
    let mut used: std::collections::HashSet<String> = attempts
        .iter()
        .filter_map(|d| d.attempt_id.clone())
        .collect();
    let mut taken = std::collections::HashSet::new();
    let mut keys = Vec::with_capacity(attempts.len());
    for (n, d) in attempts.iter().enumerate() {
        let own = d.attempt_id.clone().filter(|a| taken.insert(a.clone()));
        let key = own.unwrap_or_else(|| {
            let mut i = n + 1;
            while used.contains(&i.to_string()) {
                i += 1;
            }
            let k = i.to_string();
            used.insert(k.clone());
            taken.insert(k.clone());
            k
        });
        keys.push(key);
    }
    keys
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
    let category = get(first, |r| r.category.as_ref())
        .cloned()
        .unwrap_or(json!("unknown"));
    root.insert("category".into(), category.clone());
    let k = first
        .task
        .as_ref()
        .and_then(|t| t.llm.as_ref())
        .and_then(|l| l.k)
        .unwrap_or(attempts.len() as u64);
    root.insert("k".into(), json!(k));
    root.insert("correct".into(), correct.clone());
    let tried = get(first, |r| r.attempts_tried.as_ref())
        .cloned()
        .unwrap_or(json!(attempts.len()));
    root.insert("attempts_tried".into(), tried.clone());
    let solved = match get(first, |r| r.solved_at.as_ref()) {
        Some(v) => v.clone(),
        None if from_actf => Value::Null,
        None if correct == json!(true) => first.finished_at.clone().unwrap_or(Value::Null),
        None => Value::Null,
    };
    root.insert("solved_at".into(), solved.clone());
    let retry_count = get(first, |r| r.retry_count.as_ref()).cloned();
    let retry_counts = get(first, |r| r.retry_counts.as_ref()).cloned();
    if let Some(v) = &retry_count {
        root.insert("retry_count".into(), v.clone());
    }
    if let Some(v) = &retry_counts {
        root.insert("retry_counts".into(), v.clone());
    }
    // What the reader gives every attempt of the task from the root.
    let shared = TaskResult {
        task_correct: Some(correct),
        category: Some(category),
        attempts_tried: Some(tried),
        solved_at: Some(solved),
        retry_count,
        retry_counts,
        ..TaskResult::default()
    };
    let keys = attempt_keys(attempts);
    let mut map = Map::new();
    let mut residual = Vec::new();
    for (d, key) in attempts.iter().zip(&keys) {
        if d.attempt_id.as_deref() != Some(key.as_str()) {
            losses.push(Loss::new(
                "/attempt_id",
                match &d.attempt_id {
                    None => format!("ACTF requires an attempt key; `{key}` is written"),
                    Some(a) => format!(
                        "attempt key `{}` is taken by another attempt of task `{}`; `{key}` is written",
                        crate::util::text::escape_control(a),
                        crate::util::text::escape_control(task_id)
                    ),
                },
            ));
        }
        let read_session = if attempts.len() == 1 {
            task_id.to_string()
        } else {
            format!("{task_id}#attempt-{key}")
        };
        if d.session != read_session {
            losses.push(Loss::new(
                "/session",
                "ACTF has no session id; the reader names an attempt by its task id (and attempt key)",
            ));
        }
        let read_run = (task_id != read_session).then_some(task_id);
        if d.explicit_run() != read_run {
            losses.push(Loss::new("/run", "an ACTF attempt's run is its task id"));
        }
        map.insert(key.clone(), attempt(d, &shared, k, losses));
        collect_residual(d, SOURCE, &mut residual, losses);
    }
    root.insert("attempts".into(), Value::Object(map));
    let mut v = Value::Object(root);
    restore_all(&mut v, residual);
    v
}

fn attempt(d: &Storyline, shared: &TaskResult, k: u64, losses: &mut Losses) -> Value {
    let from_actf = d.origin.as_ref().is_some_and(|o| o.format == SOURCE);
    let mut a = Map::new();
    let correct = get(d, |r| r.correct.as_ref())
        .cloned()
        .unwrap_or(json!(false));
    a.insert("correct".into(), correct.clone());
    let mut read = TaskResult {
        correct: Some(correct),
        ..shared.clone()
    };
    let pairs: [(
        &str,
        fn(&TaskResult) -> Option<&Value>,
        fn(&mut TaskResult) -> &mut Option<Value>,
        Value,
    ); 7] = [
        (
            "final_answer",
            |r| r.final_answer.as_ref(),
            |r| &mut r.final_answer,
            Value::Null,
        ),
        (
            "ground_truth",
            |r| r.ground_truth.as_ref(),
            |r| &mut r.ground_truth,
            json!(""),
        ),
        (
            "status",
            |r| r.status.as_ref(),
            |r| &mut r.status,
            json!("completed"),
        ),
        ("score", |r| r.score.as_ref(), |r| &mut r.score, Value::Null),
        (
            "max_score",
            |r| r.max_score.as_ref(),
            |r| &mut r.max_score,
            Value::Null,
        ),
        ("error", |r| r.error.as_ref(), |r| &mut r.error, json!("")),
        (
            "artifacts",
            |r| r.artifacts.as_ref(),
            |r| &mut r.artifacts,
            json!({}),
        ),
    ];
    for (key, f, slot, default) in pairs {
        let v = match get(d, f) {
            Some(v) => Some(v.clone()),
            None if !from_actf && key != "max_score" => Some(default),
            None => None,
        };
        if let Some(v) = &v {
            a.insert(key.into(), v.clone());
        }
        *slot(&mut read) = v;
    }
    let extra = match &d.extra {
        Some(e) => Some(e.clone()),
        None if !from_actf => Some(json!({})),
        None => None,
    };
    if extra != d.extra {
        losses.push(Loss::new(
            "/extra",
            "ACTF requires an attempt extra; {} is written",
        ));
    }
    if let Some(e) = extra {
        a.insert("extra".into(), e);
    }
    let analysis = match d
        .final_metrics
        .as_ref()
        .and_then(|m| m.get("analysis_result"))
    {
        Some(v) => Some(v.clone()),
        None if !from_actf => Some(json!({})),
        None => None,
    };
    if let Some(v) = &analysis {
        a.insert("analysis_result".into(), v.clone());
    }
    if let Some(m) = &d.meta {
        a.insert("meta".into(), m.clone());
    }
    // The reader's task, result and final metrics come from these values.
    let read_task = Task {
        env: None,
        llm: Some(Llm { k: Some(k) }),
        result: Some(read.clone()),
    };
    task_losses(d, &read_task, losses);
    let mut fm = Map::new();
    for (key, val) in [
        ("task_correct", &read.task_correct),
        ("correct", &read.correct),
        ("score", &read.score),
        ("status", &read.status),
    ] {
        if let Some(v) = val {
            fm.insert(key.into(), v.clone());
        }
    }
    if let Some(v) = analysis {
        fm.insert("analysis_result".into(), v);
    }
    if d.final_metrics.as_ref() != Some(&Value::Object(fm)) {
        losses.push(Loss::new(
            "/final_metrics",
            "ACTF has no trajectory metrics; the reader derives them from the attempt result",
        ));
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
    if d.started_at.as_ref() != Some(&started) {
        losses.push(Loss::new(
            "/started_at",
            "ACTF requires a start time; the first step's time (or the epoch) is written",
        ));
    }
    if d.finished_at.as_ref() != Some(&finished) {
        losses.push(Loss::new(
            "/finished_at",
            "ACTF requires an end time; the last step's time (or the epoch) is written",
        ));
    }
    let version = d
        .origin
        .as_ref()
        .filter(|_| from_actf)
        .and_then(|o| o.schema_version.clone())
        .unwrap_or_else(|| "ACTF_v1.0".into());
    let prompts = read_prompts(d);
    if prompts.0 != d.prompt {
        losses.push(Loss::new(
            "/prompt",
            "ACTF keeps prompts on each step; the reader takes the first step's as the document's",
        ));
    }
    let steps: Vec<Value> = d
        .turns
        .iter()
        .enumerate()
        .map(|(k, t)| step(d, k, t, from_actf, &started, &prompts.1[k], losses))
        .collect();
    a.insert(
        "trajectory".into(),
        json!({ "schema_version": version, "started_at": started, "finished_at": finished, "steps": steps }),
    );
    document_losses(d, losses);
    Value::Object(a)
}

fn task_losses(d: &Storyline, read: &Task, losses: &mut Losses) {
    let Some(t) = &d.task else {
        losses.push(Loss::new(
            "/task",
            "ACTF requires a task result; its defaults are written",
        ));
        return;
    };
    if t.env.is_some() {
        losses.push(Loss::new("/task/env", "ACTF has no task environment"));
    }
    if t.llm != read.llm {
        losses.push(Loss::new(
            "/task/llm",
            "ACTF requires the attempt budget k; the number of attempts is written",
        ));
    }
    let (Some(mine), Some(theirs)) = (&t.result, &read.result) else {
        losses.push(Loss::new(
            "/task/result",
            "ACTF requires a task result; its defaults are written",
        ));
        return;
    };
    let fields: [(&str, &Option<Value>, &Option<Value>); 14] = [
        ("task_correct", &mine.task_correct, &theirs.task_correct),
        ("correct", &mine.correct, &theirs.correct),
        ("final_answer", &mine.final_answer, &theirs.final_answer),
        ("ground_truth", &mine.ground_truth, &theirs.ground_truth),
        ("status", &mine.status, &theirs.status),
        ("score", &mine.score, &theirs.score),
        ("max_score", &mine.max_score, &theirs.max_score),
        ("error", &mine.error, &theirs.error),
        ("artifacts", &mine.artifacts, &theirs.artifacts),
        ("category", &mine.category, &theirs.category),
        (
            "attempts_tried",
            &mine.attempts_tried,
            &theirs.attempts_tried,
        ),
        ("solved_at", &mine.solved_at, &theirs.solved_at),
        ("retry_count", &mine.retry_count, &theirs.retry_count),
        ("retry_counts", &mine.retry_counts, &theirs.retry_counts),
    ];
    for (name, a, b) in fields {
        if a != b {
            losses.push(Loss::new(
                format!("/task/result/{name}"),
                "ACTF keeps one value per task (from its first attempt) or writes a default",
            ));
        }
    }
}

fn document_losses(d: &Storyline, losses: &mut Losses) {
    if d.agent.id != "actf-agent" {
        losses.push(Loss::new("/agent/id", "ACTF has no agent id"));
    }
    if d.agent.name.as_deref() != Some("ACTF Agent") {
        losses.push(Loss::new("/agent/name", "ACTF has no agent name"));
    }
    for (present, field) in [
        (d.agent.ver.is_some(), "/agent/ver"),
        (d.agent.model.is_some(), "/agent/model"),
        (d.agent.tools.is_some(), "/agent/tools"),
        (d.agent.extra.is_some(), "/agent/extra"),
        (d.trajectory.is_some(), "/trajectory"),
        (d.parent.is_some(), "/parent"),
        (d.children.is_some(), "/children"),
        (d.notes.is_some(), "/notes"),
        (
            d.continued_trajectory_ref.is_some(),
            "/continued_trajectory_ref",
        ),
    ] {
        if present {
            losses.push(Loss::new(field, "ACTF has no such field"));
        }
    }
}

/// The prompts the reader takes from the steps written for `d`: the
/// document prompt (the first step with a prompt) and each turn's own.
fn read_prompts(d: &Storyline) -> (Option<Prompt>, Vec<Option<Prompt>>) {
    let mut doc = None;
    let mut baseline: Option<(String, String)> = None;
    let mut turns = Vec::with_capacity(d.turns.len());
    for t in &d.turns {
        let pair = prompt_pair(t.prompt.as_ref().or(d.prompt.as_ref()));
        match &baseline {
            None if !pair.0.is_empty() || !pair.1.is_empty() => {
                doc = Some(Prompt {
                    system: Some(pair.0.clone()).filter(|s| !s.is_empty()),
                    user: Some(pair.1.clone()).filter(|s| !s.is_empty()),
                });
                baseline = Some(pair);
                turns.push(None);
            }
            Some(b) if *b == pair => turns.push(None),
            _ => turns.push(Some(Prompt {
                system: Some(pair.0),
                user: Some(pair.1),
            })),
        }
    }
    (doc, turns)
}

/// A tool call as the reader takes it back from [`tool_object`] (the
/// duration comes from the step's metric, see [`step`]).
fn read_call(c: &ToolCall) -> ToolCall {
    let mut r = ToolCall {
        tcid: c.tcid.clone(),
        func: c.func.clone(),
        args: c.args.clone(),
        result: None,
        duration_ms: None,
        extra: None,
        kind: Some("tool_use".into()),
        response: None,
        args_raw: None,
    };
    match c.kind.as_deref() {
        Some("command_execution") => {
            r.kind.clone_from(&c.kind);
            r.func = "command_execution".into();
            r.args = json!({ "command": c.args.get("command").cloned().unwrap_or(Value::Null) });
            r.result.clone_from(&c.result);
            let status = c.response.as_ref().and_then(|x| x.status.clone());
            let exit_code = c.response.as_ref().and_then(|x| x.exit_code);
            r.response = (status.is_some() || exit_code.is_some())
                .then_some(ToolResponse { status, exit_code });
        }
        Some(kind) => r.kind = Some(kind.to_string()).filter(|k| !k.is_empty()),
        None => {}
    }
    r
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

/// An integer metric as the reader takes it (`as_f64`, truncated).
fn metric_ms(metric: &Value, key: &str) -> Option<i64> {
    metric.get(key).and_then(Value::as_f64).map(|f| f as i64)
}

#[allow(clippy::too_many_arguments)]
fn step(
    d: &Storyline,
    k: usize,
    t: &Turn,
    from_actf: bool,
    started: &Value,
    read_prompt: &Option<Prompt>,
    losses: &mut Losses,
) -> Value {
    let at = |f: &str| format!("/turns/{k}/{f}");
    let calls: Vec<Value> = t.tool_calls.iter().flatten().map(tool_object).collect();
    let mut ac = Map::new();
    let content = if from_actf || t.msg.is_string() {
        t.msg.clone()
    } else {
        losses.push(Loss::new(
            at("msg"),
            "ACTF assistant content is text; written as text",
        ));
        json!(crate::formats::model::message_text(&t.msg))
    };
    ac.insert("content".into(), content);
    if let Some(r) = &t.reason {
        ac.insert("reasoning_content".into(), json!(r));
    } else if !from_actf {
        ac.insert("reasoning_content".into(), Value::Null);
    }
    ac.insert("tool_calls".into(), Value::Array(calls.clone()));
    let (system, user) = prompt_pair(t.prompt.as_ref().or(d.prompt.as_ref()));
    if *read_prompt != t.prompt {
        losses.push(Loss::new(
            at("prompt"),
            "ACTF keeps prompts on each step; the reader keeps a step's only where it differs from the first",
        ));
    }
    let observation = match &t.observation {
        Some(o) => o
            .get("results")
            .cloned()
            .unwrap_or_else(|| json!([o.clone()])),
        None => json!([]),
    };
    // The reader keeps a non-empty array as {"results": […]}.
    let obs_exact = match &t.observation {
        None => true,
        Some(Value::Object(o)) => {
            o.len() == 1
                && o.get("results")
                    .and_then(Value::as_array)
                    .is_some_and(|r| !r.is_empty())
        }
        Some(_) => false,
    };
    if !obs_exact {
        losses.push(Loss::new(
            at("observation"),
            "ACTF keeps an observation as a non-empty list of results",
        ));
    }
    let metric = t.metrics.clone().unwrap_or_else(|| {
        json!({
            "prompt_tokens_len": crate::formats::model::metric_i64(t.metrics.as_ref(), &["prompt_tokens"]).unwrap_or(0),
            "completion_tokens_len": crate::formats::model::metric_i64(t.metrics.as_ref(), &["completion_tokens"]).unwrap_or(0),
            "llm_infer_ms": t.latency_ms,
            "env_action_ms": Value::Null,
            "stop_reason": Value::Null,
        })
    });
    if t.metrics.is_none() {
        losses.push(Loss::new(
            at("metrics"),
            "ACTF requires a step metric; zeros and the latency are written",
        ));
    }
    if metric_ms(&metric, "llm_infer_ms") != t.latency_ms {
        losses.push(Loss::new(
            at("latency_ms"),
            "ACTF keeps a step's latency only as metric.llm_infer_ms",
        ));
    }
    if let Some(list) = &t.tool_calls {
        if list.is_empty() {
            losses.push(Loss::new(
                at("tool_calls"),
                "an empty list of tool calls reads back as none",
            ));
        }
        for (c, call) in list.iter().enumerate() {
            let cp = |f: &str| format!("/turns/{k}/tool_calls/{c}/{f}");
            let mut read = read_call(call);
            // One call per step takes the step's env_action_ms.
            if list.len() == 1 {
                read.duration_ms = metric_ms(&metric, "env_action_ms");
            }
            for (differs, field) in [
                (read.func != call.func, "fn"),
                (read.args != call.args, "args"),
                (read.result != call.result, "result"),
                (read.duration_ms != call.duration_ms, "duration_ms"),
                (call.extra.is_some(), "extra"),
                (read.kind != call.kind, "kind"),
                (read.response != call.response, "response"),
            ] {
                if differs {
                    losses.push(Loss::new(
                        cp(field),
                        "ACTF tool objects keep a type, id, name and input (or a command with its output and status)",
                    ));
                }
            }
        }
    }
    if t.src != "agent" {
        losses.push(Loss::new(
            at("src"),
            format!(
                "ACTF steps are assistant steps; the {} step is written as one",
                t.src
            ),
        ));
    }
    if t.nllm != Some(1) {
        losses.push(Loss::new(
            at("nllm"),
            "an ACTF step is one LLM call; the reader sets llm_call_count 1",
        ));
    }
    if t.ts.is_none() {
        losses.push(Loss::new(
            at("ts"),
            "ACTF requires a step start; the attempt's start is written",
        ));
    }
    if t.finished_at.is_none() {
        losses.push(Loss::new(
            at("finished_at"),
            "ACTF requires a step end; the step's start is written",
        ));
    }
    if t.has_own_kind() {
        losses.push(Loss::new(at("kind"), "ACTF has no step kind"));
    }
    for (present, field) in [
        (t.model.is_some(), "model"),
        (t.effort.is_some(), "effort"),
        (t.env.is_some(), "env"),
        (t.ttft_ms.is_some(), "ttft_ms"),
        (t.copied.is_some(), "copied"),
        (t.extra.is_some(), "extra"),
    ] {
        if present {
            losses.push(Loss::new(at(field), "ACTF has no such step field"));
        }
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
