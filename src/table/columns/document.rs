//! The per-document columns: `trajectories` (one row per trajectory
//! document) and the store's `documents` table (`runs.lance`), which share
//! most of them. A store keeps the document's own times (`started_at` as
//! given) and its first and last step times; `trajectories` shows the
//! document's time, else its steps'.

use super::{Cell, ColType, Column, ORIGIN_PATH, SOURCE_PATH, STORAGE_ORDINAL};
use crate::table::derive as d;

const DOCUMENT_ID: Column = col!(
    "document_id",
    Text,
    false,
    "Source-local trajectory id (trajectory id, else session id)",
    |r| Cell::str(r.doc.document_id())
);
const RUN_ID: Column = col!(
    "run_id",
    Text,
    false,
    "Run the trajectory belongs to (shared by a main agent and its subagents)",
    |r| Cell::str(r.doc.run_id())
);
const RUN_ID_EXPLICIT: Column = col!(
    "run_id_explicit",
    Bool,
    false,
    "The run id was given by the source (else it is derived from the parent or session)",
    |r| Cell::Bool(r.doc.run.as_deref().is_some_and(|x| !x.is_empty()))
);
const SESSION_ID: Column = col!("session_id", Text, false, "Session id", |r| Cell::str(
    &r.doc.session
));
const TRAJECTORY_ID: Column = col!(
    "trajectory_id",
    Text,
    true,
    "Explicit trajectory id, when the source gave one",
    |r| Cell::opt(r.doc.trajectory.as_deref())
);
const ATTEMPT_ID: Column = col!(
    "attempt_id",
    Text,
    true,
    "Attempt id (ACTF attempt key)",
    |r| Cell::opt(r.doc.attempt_id.as_deref())
);
const FORMAT: Column = col!(
    "format",
    Text,
    true,
    "Exchange format the document came from",
    |r| Cell::opt(r.doc.origin.as_ref().map(|o| o.format.as_str()))
);
const AGENT_ID: Column = col!("agent_id", Text, false, "Agent id", |r| Cell::str(
    &r.doc.agent.id
));
const AGENT_NAME: Column = col!("agent_name", Text, true, "Agent name", |r| Cell::opt(
    r.doc.agent.name.as_deref()
));
const AGENT_VERSION: Column = col!("agent_version", Text, true, "Agent version", |r| {
    Cell::opt(r.doc.agent.ver.as_deref())
});
const AGENT_MODEL_NAME: Column = col!(
    "agent_model_name",
    Text,
    true,
    "The agent's declared model",
    |r| Cell::opt(r.doc.agent.model.as_deref())
);
const MODEL_NAME: Column = col!(
    "model_name",
    Text,
    true,
    "Declared model, else the first step model",
    |r| Cell::opt(d::model_of(r.doc))
);
const PARENT_DOCUMENT_ID: Column = col!(
    "parent_document_id",
    Text,
    true,
    "Parent trajectory of a subagent",
    |r| Cell::opt(r.doc.parent.as_ref().map(|p| p.psid.as_str()))
);
const PARENT_TOOL_CALL_ID: Column = col!(
    "parent_tool_call_id",
    Text,
    true,
    "The parent's tool call that spawned this subagent",
    |r| Cell::opt(r.doc.parent.as_ref().and_then(|p| p.scid.as_deref()))
);
const PARENT_STEP_ID: Column = col!(
    "parent_step_id",
    Int,
    true,
    "The parent's step that spawned this subagent",
    |r| Cell::opt_i64(r.doc.parent.as_ref().and_then(|p| p.ptid))
);
const STEP_COUNT: Column = col!("step_count", Int, false, "Number of steps", |r| Cell::I64(
    r.doc.turns.len() as i64
));
const USER_STEP_COUNT: Column = col!("user_step_count", Int, false, "Steps from the user", |r| {
    d::count_src(r, "user")
});
const AGENT_STEP_COUNT: Column = col!(
    "agent_step_count",
    Int,
    false,
    "Steps from the agent",
    |r| d::count_src(r, "agent")
);
const TOOL_CALL_COUNT: Column = col!("tool_call_count", Int, false, "Number of tool calls", |r| {
    Cell::I64(r.doc.tool_call_count() as i64)
});
const TOTAL_PROMPT_TOKENS: Column = col!(
    "total_prompt_tokens",
    Int,
    true,
    "Sum of step prompt tokens",
    |r| d::total_i64(r, d::prompt_tokens)
);
const TOTAL_COMPLETION_TOKENS: Column = col!(
    "total_completion_tokens",
    Int,
    true,
    "Sum of step completion tokens",
    |r| d::total_i64(r, d::completion_tokens)
);
const TOTAL_COST_USD: Column = col!(
    "total_cost_usd",
    Float,
    true,
    "Sum of step costs in USD",
    |r| d::total_cost(r)
);
const FIRST_USER_MESSAGE: Column = col!(
    "first_user_message",
    Text,
    true,
    "Text of the first user step",
    |r| d::first_user(r)
);
const NOTES: Column = col!("notes", Text, true, "Free-form notes", |r| Cell::opt(
    r.doc.notes.as_deref()
));
const CONTINUED_TRAJECTORY_REF: Column = col!(
    "continued_trajectory_ref",
    Text,
    true,
    "Continuation file reference",
    |r| Cell::opt(r.doc.continued_trajectory_ref.as_deref())
);
const AGENT_TOOL_DEFINITIONS: Column = col!(
    "agent_tool_definitions",
    Json,
    true,
    "Tool definitions",
    |r| Cell::json(r.doc.agent.tools.as_ref())
);
const AGENT_EXTRA: Column = col!("agent_extra", Json, true, "Agent extension object", |r| {
    Cell::json(r.doc.agent.extra.as_ref())
});
const FINAL_METRICS: Column = col!(
    "final_metrics",
    Json,
    true,
    "Trajectory-level metrics",
    |r| Cell::json(r.doc.final_metrics.as_ref())
);
const EXTRA: Column = col!("extra", Json, true, "Trajectory extension object", |r| {
    Cell::json(r.doc.extra.as_ref())
});
const META: Column = col!("meta", Json, true, "Source metadata", |r| Cell::json(
    r.doc.meta.as_ref()
));
const UNKNOWN_FIELDS: Column = col!(
    "unknown_fields",
    Json,
    true,
    "Source keys with no Storyline field, by JSON pointer",
    |r| Cell::json(r.doc.unknown_fields.as_ref())
);
const UNKNOWN_KEY_COUNTS: Column = col!(
    "unknown_key_counts",
    Json,
    true,
    "Counts of unknown keys by normalised pointer",
    |r| Cell::json(r.doc.unknown_key_counts.as_ref())
);
const TASK: Column = col!(
    "task",
    Json,
    true,
    "Task environment, LLM parameters and result",
    |r| d::json_of(r.doc.task.as_ref())
);
const PROMPT: Column = col!(
    "prompt",
    Json,
    true,
    "Baseline prompt {system, user}",
    |r| d::json_of(r.doc.prompt.as_ref())
);
const CHILDREN: Column = col!("children", Json, true, "Child session ids", |r| d::json_of(
    r.doc.children.as_ref()
));
const ORIGIN: Column = col!(
    "origin",
    Json,
    true,
    "Origin {format, schema_version, document_id}",
    |r| d::json_of(r.doc.origin.as_ref())
);
const PARENT: Column = col!(
    "parent",
    Json,
    true,
    "Parent link {psid, scid, ptid, rel}",
    |r| d::json_of(r.doc.parent.as_ref())
);
const SCHEMA_VERSION: Column = col!("schema_version", Text, false, "Storyline version", |r| {
    Cell::str(&r.doc.schema_version)
});
const STARTED_AT_RAW: Column = col!(
    "started_at_raw",
    Json,
    true,
    "Start time exactly as given, when it is not canonical RFC 3339",
    |r| d::raw_ts(r.doc.started_at.as_ref())
);
const FINISHED_AT_RAW: Column = col!(
    "finished_at_raw",
    Json,
    true,
    "End time exactly as given, when it is not canonical RFC 3339",
    |r| d::raw_ts(r.doc.finished_at.as_ref())
);

/// `trajectories`: one row per trajectory document.
pub(super) static TRAJECTORIES: &[Column] = &[
    SOURCE_PATH,
    ORIGIN_PATH,
    DOCUMENT_ID,
    STORAGE_ORDINAL,
    RUN_ID,
    RUN_ID_EXPLICIT,
    SESSION_ID,
    TRAJECTORY_ID,
    ATTEMPT_ID,
    PARENT_DOCUMENT_ID,
    PARENT_TOOL_CALL_ID,
    PARENT_STEP_ID,
    AGENT_ID,
    AGENT_NAME,
    AGENT_VERSION,
    AGENT_MODEL_NAME,
    MODEL_NAME,
    FORMAT,
    STEP_COUNT,
    USER_STEP_COUNT,
    AGENT_STEP_COUNT,
    TOOL_CALL_COUNT,
    col!(
        "started_at",
        Timestamp,
        true,
        "Start: the document's, else its first step's (UTC)",
        |r| d::first_ts(r)
    ),
    col!(
        "finished_at",
        Timestamp,
        true,
        "End: the document's, else its last step's (UTC)",
        |r| d::last_ts(r)
    ),
    TOTAL_PROMPT_TOKENS,
    TOTAL_COMPLETION_TOKENS,
    TOTAL_COST_USD,
    FIRST_USER_MESSAGE,
    NOTES,
    CONTINUED_TRAJECTORY_REF,
    AGENT_TOOL_DEFINITIONS,
    AGENT_EXTRA,
    FINAL_METRICS,
    EXTRA,
    META,
    UNKNOWN_FIELDS,
    UNKNOWN_KEY_COUNTS,
    TASK,
    PROMPT,
    CHILDREN,
    ORIGIN,
    PARENT,
    SCHEMA_VERSION,
    STARTED_AT_RAW,
    FINISHED_AT_RAW,
];

/// The store's per-document table: what rebuilds the document (its own
/// times, as given), and what `trajectories` and `runs` read without
/// decoding steps (counts, the first and last step times).
pub(super) static DOCUMENTS: &[Column] = &[
    SOURCE_PATH,
    DOCUMENT_ID,
    STORAGE_ORDINAL,
    RUN_ID,
    RUN_ID_EXPLICIT,
    SESSION_ID,
    TRAJECTORY_ID,
    ATTEMPT_ID,
    FORMAT,
    AGENT_ID,
    AGENT_NAME,
    AGENT_VERSION,
    AGENT_MODEL_NAME,
    PARENT_DOCUMENT_ID,
    PARENT_TOOL_CALL_ID,
    PARENT_STEP_ID,
    col!(
        "started_at",
        Timestamp,
        true,
        "Start time as given (UTC)",
        |r| { Cell::ts(r.doc.started_at.as_ref()) }
    ),
    col!(
        "finished_at",
        Timestamp,
        true,
        "End time as given (UTC)",
        |r| { Cell::ts(r.doc.finished_at.as_ref()) }
    ),
    STEP_COUNT,
    TOOL_CALL_COUNT,
    TOTAL_PROMPT_TOKENS,
    TOTAL_COMPLETION_TOKENS,
    TOTAL_COST_USD,
    NOTES,
    CONTINUED_TRAJECTORY_REF,
    AGENT_TOOL_DEFINITIONS,
    AGENT_EXTRA,
    FINAL_METRICS,
    EXTRA,
    META,
    UNKNOWN_FIELDS,
    UNKNOWN_KEY_COUNTS,
    TASK,
    PROMPT,
    CHILDREN,
    ORIGIN,
    PARENT,
    SCHEMA_VERSION,
    STARTED_AT_RAW,
    FINISHED_AT_RAW,
    ORIGIN_PATH,
    col!(
        "first_step_at",
        Timestamp,
        true,
        "Time of the first step that has one (UTC)",
        |r| d::first_step_ts(r)
    ),
    col!(
        "last_step_at",
        Timestamp,
        true,
        "End (else time) of the last step that has one (UTC)",
        |r| d::last_step_ts(r)
    ),
    USER_STEP_COUNT,
    AGENT_STEP_COUNT,
    MODEL_NAME,
    FIRST_USER_MESSAGE,
];
