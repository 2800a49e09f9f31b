//! The canonical in-memory model: Storyline `storyline/v1` documents.
//!
//! Every exchange format decodes into [`Storyline`] documents and encodes from
//! them (Storyline is the hub). One document is one trajectory (a session);
//! documents sharing `run` form a Run (a main agent, its subagents, retries).
//! Wire names are the short Storyline names; optional "any JSON" fields keep
//! an explicit `null` apart from absence.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// The Storyline wire version string.
pub const STORYLINE_V1: &str = "storyline/v1";

/// Deserialize a present value (including `null`) as `Some`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// One Storyline document: one trajectory of one agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Storyline {
    /// Always [`STORYLINE_V1`].
    pub schema_version: String,
    /// Where the document came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
    /// Run id shared by a main trajectory and its subagents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// Explicit trajectory id (ATIF `trajectory_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trajectory: Option<String>,
    /// Attempt id from the source (ACTF attempt key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_id: Option<String>,
    /// Session id (required, non-empty).
    pub session: String,
    /// The agent.
    pub agent: Agent,
    /// Link to the parent trajectory of a subagent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Parent>,
    /// Session ids of child trajectories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub children: Option<Vec<String>>,
    /// Free-form notes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Task environment, LLM parameters and evaluation result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<Task>,
    /// Baseline prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<Prompt>,
    /// Start time as given (RFC 3339 string or epoch seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Value>,
    /// End time as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Value>,
    /// Trajectory-level metrics.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub final_metrics: Option<Value>,
    /// ATIF continuation reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continued_trajectory_ref: Option<String>,
    /// Business extension.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub extra: Option<Value>,
    /// Source metadata (ACTF attempt `meta`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub meta: Option<Value>,
    /// Residual of the source format, keyed by JSON Pointer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown_fields: Option<Value>,
    /// Counts recomputable from `unknown_fields`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown_key_counts: Option<Value>,
    /// The turns, in authoritative order.
    pub turns: Vec<Turn>,
    /// Dataset-relative path of the file the document was read from, kept
    /// when the document moves into a store (one Source holding many
    /// files' documents). Not part of the Storyline wire.
    #[serde(skip)]
    pub origin_path: Option<String>,
}

/// Provenance of a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Origin {
    /// Source format name (`atif`, `actf`, `openai-msg`, …).
    pub format: String,
    /// Source schema version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<String>,
    /// Source document identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document_id: Option<String>,
}

/// The agent of a trajectory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    /// Agent id (required, non-empty).
    pub id: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ver: Option<String>,
    /// Default model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Tool definitions.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub tools: Option<Value>,
    /// Agent extension.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub extra: Option<Value>,
}

/// Link from a subagent trajectory to its parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parent {
    /// Parent session id.
    pub psid: String,
    /// The parent's tool call that spawned this trajectory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scid: Option<String>,
    /// The parent's turn id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ptid: Option<i64>,
    /// Relation (default `spawn`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rel: Option<String>,
}

/// Task environment, LLM parameters and result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// Environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Env>,
    /// LLM parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<Llm>,
    /// Evaluation result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<TaskResult>,
}

/// Environment of a task or a turn (a turn's env overlays the task's).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Env {
    /// Environment name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Environment instance id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Event type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// Request id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Open state object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Map<String, Value>>,
}

/// LLM parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Llm {
    /// Attempt budget (ACTF `k`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<u64>,
}

/// Evaluation result of a task or attempt.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskResult {
    /// Task-level verdict (ACTF root `correct`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub task_correct: Option<Value>,
    /// Attempt verdict.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub correct: Option<Value>,
    /// Final answer.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub final_answer: Option<Value>,
    /// Ground truth.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub ground_truth: Option<Value>,
    /// Status string.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub status: Option<Value>,
    /// Score.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub score: Option<Value>,
    /// Maximum score.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub max_score: Option<Value>,
    /// Error text.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub error: Option<Value>,
    /// Artifacts.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub artifacts: Option<Value>,
    /// Task category.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub category: Option<Value>,
    /// Attempts tried.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub attempts_tried: Option<Value>,
    /// When the task was solved.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub solved_at: Option<Value>,
    /// Retry count.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub retry_count: Option<Value>,
    /// Retry counts by cause.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub retry_counts: Option<Value>,
}

/// A prompt pair.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prompt {
    /// System prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// User prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// One turn (≈ an ATIF step).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// Turn id, unique within the document (identity, not order).
    pub id: i64,
    /// Who produced it: `user`, `agent`, `system` (free string).
    pub src: String,
    /// The message: text, content parts, any JSON, or null.
    pub msg: Value,
    /// Narrative kind; derived when absent (see [`Turn::effective_kind`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Start time as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts: Option<Value>,
    /// Model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Reasoning effort.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub effort: Option<Value>,
    /// Reasoning content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Tool calls (`Some(vec![])` differs from absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// Observation (usually `{"results":[…]}`), stored verbatim.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub observation: Option<Value>,
    /// Per-turn metrics.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub metrics: Option<Value>,
    /// LLM call count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nllm: Option<i64>,
    /// Copied context from an earlier trajectory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copied: Option<bool>,
    /// LLM latency in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<i64>,
    /// Time to first token in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<i64>,
    /// Extension.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub extra: Option<Value>,
    /// Environment overlay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Env>,
    /// Prompt (replaces the document prompt for this turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<Prompt>,
    /// End time as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Value>,
}

/// One tool call.
///
/// Equality is that of the Storyline document: `args_raw`, which is not on
/// the wire, is not compared.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// Tool call id, unique within the document.
    pub tcid: String,
    /// Function name.
    #[serde(rename = "fn")]
    pub func: String,
    /// Arguments (any JSON).
    pub args: Value,
    /// Result body.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub result: Option<Value>,
    /// Tool wall time in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    /// Extension.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub extra: Option<Value>,
    /// Tool event type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Status and exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ToolResponse>,
    /// The arguments exactly as the source wrote them, when they came as a
    /// JSON string (OpenAI `function.arguments`) whose text is not the
    /// canonical JSON of `args` (other spacing, key order, escapes). Kept so
    /// an export writes the training text back byte for byte. Not part of
    /// the Storyline wire: stores keep it as the `arguments` column text,
    /// Storyline JSON exports in `unknown_fields.arguments_text`.
    #[serde(skip)]
    pub args_raw: Option<String>,
}

impl PartialEq for ToolCall {
    fn eq(&self, other: &Self) -> bool {
        self.tcid == other.tcid
            && self.func == other.func
            && self.args == other.args
            && self.result == other.result
            && self.duration_ms == other.duration_ms
            && self.extra == other.extra
            && self.kind == other.kind
            && self.response == other.response
    }
}

/// A tool call's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolResponse {
    /// Status string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Process exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
}

impl Storyline {
    /// An empty document for `session` with agent `agent_id`.
    pub fn new(session: impl Into<String>, agent_id: impl Into<String>) -> Self {
        Storyline {
            schema_version: STORYLINE_V1.to_string(),
            origin: None,
            run: None,
            trajectory: None,
            attempt_id: None,
            session: session.into(),
            agent: Agent {
                id: agent_id.into(),
                name: None,
                ver: None,
                model: None,
                tools: None,
                extra: None,
            },
            parent: None,
            children: None,
            notes: None,
            task: None,
            prompt: None,
            started_at: None,
            finished_at: None,
            final_metrics: None,
            continued_trajectory_ref: None,
            extra: None,
            meta: None,
            unknown_fields: None,
            unknown_key_counts: None,
            turns: Vec::new(),
            origin_path: None,
        }
    }

    /// The Source-local document id: `trajectory` when given, else `session`.
    pub fn document_id(&self) -> &str {
        match &self.trajectory {
            Some(t) if !t.is_empty() => t,
            _ => &self.session,
        }
    }

    /// The run id: `run` when given, else the parent's session, else this session.
    pub fn run_id(&self) -> &str {
        if let Some(r) = self.run.as_deref().filter(|r| !r.is_empty()) {
            return r;
        }
        if let Some(p) = &self.parent {
            return &p.psid;
        }
        &self.session
    }

    /// `run` when it names more than this document: a run id equal to the
    /// session of a document without a parent says nothing (the session is
    /// its own run, which is what an absent `run` means too).
    pub fn explicit_run(&self) -> Option<&str> {
        let r = self.run.as_deref()?;
        if r == self.session && self.parent.is_none() {
            return None;
        }
        Some(r)
    }

    /// Number of tool calls across all turns.
    pub fn tool_call_count(&self) -> usize {
        self.turns
            .iter()
            .map(|t| t.tool_calls.as_ref().map_or(0, Vec::len))
            .sum()
    }
}

impl Turn {
    /// A turn with the given id, source and message, all else absent.
    pub fn new(id: i64, src: impl Into<String>, msg: Value) -> Self {
        Turn {
            id,
            src: src.into(),
            msg,
            kind: None,
            ts: None,
            model: None,
            effort: None,
            reason: None,
            tool_calls: None,
            observation: None,
            metrics: None,
            nllm: None,
            copied: None,
            latency_ms: None,
            ttft_ms: None,
            extra: None,
            env: None,
            prompt: None,
            finished_at: None,
        }
    }

    /// The explicit kind, or the kind derived from the source and tool calls.
    pub fn effective_kind(&self) -> &str {
        match self.kind.as_deref() {
            Some(k) => k,
            None => self.derived_kind(),
        }
    }

    /// The kind an absent `kind` stands for: from the source and whether the
    /// turn made tool calls. An explicit kind equal to it says nothing more.
    pub fn derived_kind(&self) -> &'static str {
        match self.src.as_str() {
            "system" => "internal",
            "agent" if self.tool_calls.as_ref().is_some_and(|c| !c.is_empty()) => "autonomous",
            _ => "dialogue",
        }
    }

    /// True when `kind` is given and differs from the derived kind (a target
    /// without kinds loses it).
    pub fn has_own_kind(&self) -> bool {
        self.kind
            .as_deref()
            .is_some_and(|k| k != self.derived_kind())
    }
}

/// The text of a message for search and display: strings as they are, text
/// parts joined by newlines, image parts as `[image: PATH]`, other JSON as
/// compact JSON text, null as empty.
pub fn message_text(msg: &Value) -> String {
    match msg {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            let mut out = String::new();
            for p in parts {
                let piece = part_text(p);
                if piece.is_empty() {
                    continue;
                }
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(&piece);
            }
            out
        }
        other => other.to_string(),
    }
}

fn part_text(p: &Value) -> String {
    match p {
        Value::String(s) => s.clone(),
        Value::Object(o) => {
            if let Some(Value::String(t)) = o.get("text") {
                return t.clone();
            }
            let ty = o.get("type").and_then(Value::as_str).unwrap_or("");
            if ty.contains("image") {
                let path = o
                    .get("source")
                    .and_then(|s| s.get("path").or_else(|| s.get("url")))
                    .or_else(|| o.get("image_url").and_then(|u| u.get("url").or(Some(u))))
                    .or_else(|| o.get("path"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let path = if path.starts_with("data:") {
                    "data:…"
                } else {
                    path
                };
                return format!("[image: {path}]");
            }
            p.to_string()
        }
        other => other.to_string(),
    }
}

/// An integer metric by the first of `keys` present (top level, then `extra`).
pub fn metric_i64(metrics: Option<&Value>, keys: &[&str]) -> Option<i64> {
    let m = metrics?.as_object()?;
    let get = |o: &serde_json::Map<String, Value>| {
        keys.iter().find_map(|k| {
            let v = o.get(*k)?;
            v.as_i64()
                .or_else(|| v.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))
        })
    };
    get(m).or_else(|| m.get("extra").and_then(Value::as_object).and_then(get))
}

/// A float metric by the first of `keys` present (top level, then `extra`).
pub fn metric_f64(metrics: Option<&Value>, keys: &[&str]) -> Option<f64> {
    let m = metrics?.as_object()?;
    let get = |o: &serde_json::Map<String, Value>| keys.iter().find_map(|k| o.get(*k)?.as_f64());
    get(m).or_else(|| m.get("extra").and_then(Value::as_object).and_then(get))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn null_is_kept_apart_from_absent() {
        let doc: Storyline = serde_json::from_value(json!({
            "schema_version": "storyline/v1", "session": "s", "agent": {"id": "a"},
            "extra": null,
            "turns": [{"id": 1, "src": "agent", "msg": null, "tool_calls": []}]
        }))
        .unwrap();
        assert_eq!(doc.extra, Some(Value::Null));
        assert_eq!(doc.meta, None);
        let back = serde_json::to_value(&doc).unwrap();
        assert_eq!(back["extra"], Value::Null);
        assert!(back.get("meta").is_none());
        assert_eq!(back["turns"][0]["tool_calls"], json!([]));
    }

    #[test]
    fn unknown_keys_are_refused() {
        let r: Result<Storyline, _> = serde_json::from_value(json!({
            "schema_version": "storyline/v1", "session": "s", "agent": {"id": "a"}, "turns": [], "bogus": 1
        }));
        assert!(r.is_err());
    }

    #[test]
    fn effective_kind_rules() {
        let mut t = Turn::new(1, "agent", json!("x"));
        assert_eq!(t.effective_kind(), "dialogue");
        t.tool_calls = Some(vec![ToolCall {
            tcid: "c".into(),
            func: "f".into(),
            args: json!({}),
            result: None,
            duration_ms: None,
            extra: None,
            kind: None,
            response: None,
            args_raw: None,
        }]);
        assert_eq!(t.effective_kind(), "autonomous");
        assert_eq!(
            Turn::new(1, "system", json!("x")).effective_kind(),
            "internal"
        );
    }

    #[test]
    fn message_text_of_parts() {
        let m = json!([{"type": "text", "text": "看图"}, {"type": "image", "source": {"path": "a.png"}}]);
        assert_eq!(message_text(&m), "看图\n[image: a.png]");
        assert_eq!(message_text(&json!(null)), "");
    }
}
