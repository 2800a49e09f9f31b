//! Column definitions. Each column names its type, nullability, whether it
//! holds JSON text, a doc string, and how to compute it from a row.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

use super::builder::Cell;
use super::derive::{self as d, RowCtx};

/// SQL-visible column types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColType {
    /// UTF-8 text.
    Text,
    /// UTF-8 JSON text.
    Json,
    /// 64-bit integer.
    Int,
    /// 64-bit float.
    Float,
    /// Boolean.
    Bool,
    /// Timestamp, nanoseconds, UTC.
    Timestamp,
}

impl ColType {
    /// The Arrow type.
    pub fn arrow(self) -> DataType {
        match self {
            ColType::Text | ColType::Json => DataType::Utf8,
            ColType::Int => DataType::Int64,
            ColType::Float => DataType::Float64,
            ColType::Bool => DataType::Boolean,
            ColType::Timestamp => DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
        }
    }

    /// The name shown by `DESCRIBE`.
    pub fn sql_name(self) -> &'static str {
        match self {
            ColType::Text => "TEXT",
            ColType::Json => "JSON",
            ColType::Int => "BIGINT",
            ColType::Float => "DOUBLE",
            ColType::Bool => "BOOLEAN",
            ColType::Timestamp => "TIMESTAMP",
        }
    }
}

/// One column of a logical table.
pub struct Column {
    /// Column name.
    pub name: &'static str,
    /// Type.
    pub ty: ColType,
    /// May be NULL.
    pub nullable: bool,
    /// One-line description for `DESCRIBE` and the docs.
    pub doc: &'static str,
    /// Computes the cell from a row.
    pub(crate) get: for<'a> fn(&RowCtx<'a>) -> Cell<'a>,
    /// For a column computed from other columns' stored text (a decoded view
    /// of raw JSON): how. Such columns are not written to stores; readers of
    /// a store compute them from the columns they derive from.
    pub derived: Option<Derived>,
}

/// How a derived column is computed from the raw text of stored columns.
#[derive(Clone, Copy)]
pub struct Derived {
    /// The stored columns it reads, in the order `compute` takes them.
    pub from: &'static [&'static str],
    /// The cell from those columns' text (NULL cells as `None`).
    pub compute: fn(&[Option<&str>]) -> Option<String>,
}

impl Column {
    /// True when stores keep this column (it is not derived).
    pub fn is_stored(&self) -> bool {
        self.derived.is_none()
    }

    const fn derived_from(mut self, d: Derived) -> Column {
        self.derived = Some(d);
        self
    }
}

impl std::fmt::Debug for Column {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.name, self.ty.sql_name())
    }
}

/// A logical table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Table {
    /// One row per trajectory document.
    Runs,
    /// One row per trajectory with aggregates.
    Trajectories,
    /// One row per step (turn).
    Steps,
    /// One row per tool call.
    ToolCalls,
    /// One row per evaluation result.
    Judgments,
}

impl Table {
    /// All document-derived tables.
    pub const ALL: [Table; 5] = [
        Table::Runs,
        Table::Trajectories,
        Table::Steps,
        Table::ToolCalls,
        Table::Judgments,
    ];

    /// The relation name.
    pub fn name(self) -> &'static str {
        match self {
            Table::Runs => "runs",
            Table::Trajectories => "trajectories",
            Table::Steps => "steps",
            Table::ToolCalls => "tool_calls",
            Table::Judgments => "judgments",
        }
    }

    /// The table with this relation name.
    pub fn from_name(name: &str) -> Option<Table> {
        Table::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Column definitions, `source_path` first.
    pub fn columns(self) -> &'static [Column] {
        match self {
            Table::Runs => RUNS,
            Table::Trajectories => TRAJECTORIES,
            Table::Steps => STEPS,
            Table::ToolCalls => TOOL_CALLS,
            Table::Judgments => JUDGMENTS,
        }
    }

    /// Index of a column by name.
    pub fn index_of(self, name: &str) -> Option<usize> {
        self.columns().iter().position(|c| c.name == name)
    }

    /// The Arrow schema of the relation (with `source_path`).
    pub fn schema(self) -> SchemaRef {
        schema_of(self.columns())
    }
}

/// An Arrow schema for a column list.
pub fn schema_of(cols: &[Column]) -> SchemaRef {
    Arc::new(Schema::new(
        cols.iter()
            .map(|c| Field::new(c.name, c.ty.arrow(), c.nullable))
            .collect::<Vec<_>>(),
    ))
}

macro_rules! col {
    ($name:literal, $ty:ident, $null:literal, $doc:literal, $get:expr) => {
        Column {
            name: $name,
            ty: ColType::$ty,
            nullable: $null,
            doc: $doc,
            get: $get,
            derived: None,
        }
    };
}

const SOURCE_PATH: Column = col!(
    "source_path",
    Text,
    false,
    "Dataset-relative path of the Source the row comes from",
    |r| Cell::str(r.source_path)
);

static RUNS: &[Column] = &[
    SOURCE_PATH,
    col!(
        "document_id",
        Text,
        false,
        "Source-local trajectory id (trajectory id, else session id)",
        |r| Cell::str(r.doc.document_id())
    ),
    col!(
        "storage_ordinal",
        Int,
        false,
        "Position of the document in its Source",
        |r| Cell::I64(r.doc_ordinal as i64)
    ),
    col!(
        "run_id",
        Text,
        false,
        "Run the trajectory belongs to (shared by a main agent and its subagents)",
        |r| Cell::str(r.doc.run_id())
    ),
    col!(
        "run_id_explicit",
        Bool,
        false,
        "The run id was given by the source (else it is derived from the parent or session)",
        |r| Cell::Bool(r.doc.run.as_deref().is_some_and(|x| !x.is_empty()))
    ),
    col!("session_id", Text, false, "Session id", |r| Cell::str(
        &r.doc.session
    )),
    col!(
        "trajectory_id",
        Text,
        true,
        "Explicit trajectory id, when the source gave one",
        |r| Cell::opt(r.doc.trajectory.as_deref())
    ),
    col!(
        "attempt_id",
        Text,
        true,
        "Attempt id (ACTF attempt key)",
        |r| Cell::opt(r.doc.attempt_id.as_deref())
    ),
    col!(
        "format",
        Text,
        true,
        "Exchange format the document came from",
        |r| Cell::opt(r.doc.origin.as_ref().map(|o| o.format.as_str()))
    ),
    col!("agent_id", Text, false, "Agent id", |r| Cell::str(
        &r.doc.agent.id
    )),
    col!("agent_name", Text, true, "Agent name", |r| Cell::opt(
        r.doc.agent.name.as_deref()
    )),
    col!("agent_version", Text, true, "Agent version", |r| Cell::opt(
        r.doc.agent.ver.as_deref()
    )),
    col!(
        "agent_model_name",
        Text,
        true,
        "The agent's declared model",
        |r| Cell::opt(r.doc.agent.model.as_deref())
    ),
    col!(
        "parent_document_id",
        Text,
        true,
        "Parent trajectory of a subagent",
        |r| Cell::opt(r.doc.parent.as_ref().map(|p| p.psid.as_str()))
    ),
    col!(
        "parent_tool_call_id",
        Text,
        true,
        "The parent's tool call that spawned this subagent",
        |r| Cell::opt(r.doc.parent.as_ref().and_then(|p| p.scid.as_deref()))
    ),
    col!(
        "parent_step_id",
        Int,
        true,
        "The parent's step that spawned this subagent",
        |r| Cell::opt_i64(r.doc.parent.as_ref().and_then(|p| p.ptid))
    ),
    col!("started_at", Timestamp, true, "Start time (UTC)", |r| {
        Cell::ts(r.doc.started_at.as_ref())
    }),
    col!("finished_at", Timestamp, true, "End time (UTC)", |r| {
        Cell::ts(r.doc.finished_at.as_ref())
    }),
    col!("step_count", Int, false, "Number of steps", |r| Cell::I64(
        r.doc.turns.len() as i64
    )),
    col!("tool_call_count", Int, false, "Number of tool calls", |r| {
        Cell::I64(r.doc.tool_call_count() as i64)
    }),
    col!(
        "total_prompt_tokens",
        Int,
        true,
        "Sum of step prompt tokens",
        |r| d::total_i64(r, d::prompt_tokens)
    ),
    col!(
        "total_completion_tokens",
        Int,
        true,
        "Sum of step completion tokens",
        |r| d::total_i64(r, d::completion_tokens)
    ),
    col!(
        "total_cost_usd",
        Float,
        true,
        "Sum of step costs in USD",
        |r| d::total_cost(r)
    ),
    col!("notes", Text, true, "Free-form notes", |r| Cell::opt(
        r.doc.notes.as_deref()
    )),
    col!(
        "continued_trajectory_ref",
        Text,
        true,
        "Continuation file reference",
        |r| Cell::opt(r.doc.continued_trajectory_ref.as_deref())
    ),
    col!(
        "agent_tool_definitions",
        Json,
        true,
        "Tool definitions",
        |r| Cell::json(r.doc.agent.tools.as_ref())
    ),
    col!("agent_extra", Json, true, "Agent extension object", |r| {
        Cell::json(r.doc.agent.extra.as_ref())
    }),
    col!(
        "final_metrics",
        Json,
        true,
        "Trajectory-level metrics",
        |r| Cell::json(r.doc.final_metrics.as_ref())
    ),
    col!("extra", Json, true, "Trajectory extension object", |r| {
        Cell::json(r.doc.extra.as_ref())
    }),
    col!("meta", Json, true, "Source metadata", |r| Cell::json(
        r.doc.meta.as_ref()
    )),
    col!(
        "unknown_fields",
        Json,
        true,
        "Source keys with no Storyline field, by JSON pointer",
        |r| Cell::json(r.doc.unknown_fields.as_ref())
    ),
    col!(
        "unknown_key_counts",
        Json,
        true,
        "Counts of unknown keys by normalised pointer",
        |r| Cell::json(r.doc.unknown_key_counts.as_ref())
    ),
    col!(
        "task",
        Json,
        true,
        "Task environment, LLM parameters and result",
        |r| d::json_of(r.doc.task.as_ref())
    ),
    col!(
        "prompt",
        Json,
        true,
        "Baseline prompt {system, user}",
        |r| d::json_of(r.doc.prompt.as_ref())
    ),
    col!("children", Json, true, "Child session ids", |r| d::json_of(
        r.doc.children.as_ref()
    )),
    col!(
        "origin",
        Json,
        true,
        "Origin {format, schema_version, document_id}",
        |r| d::json_of(r.doc.origin.as_ref())
    ),
    col!(
        "parent",
        Json,
        true,
        "Parent link {psid, scid, ptid, rel}",
        |r| d::json_of(r.doc.parent.as_ref())
    ),
    col!("schema_version", Text, false, "Storyline version", |r| {
        Cell::str(&r.doc.schema_version)
    }),
    col!(
        "started_at_raw",
        Json,
        true,
        "Start time exactly as given, when it is not canonical RFC 3339",
        |r| d::raw_ts(r.doc.started_at.as_ref())
    ),
    col!(
        "finished_at_raw",
        Json,
        true,
        "End time exactly as given, when it is not canonical RFC 3339",
        |r| d::raw_ts(r.doc.finished_at.as_ref())
    ),
];

static TRAJECTORIES: &[Column] = &[
    SOURCE_PATH,
    col!(
        "document_id",
        Text,
        false,
        "Source-local trajectory id",
        |r| Cell::str(r.doc.document_id())
    ),
    col!("run_id", Text, false, "Run id", |r| Cell::str(
        r.doc.run_id()
    )),
    col!("session_id", Text, false, "Session id", |r| Cell::str(
        &r.doc.session
    )),
    col!(
        "parent_document_id",
        Text,
        true,
        "Parent trajectory of a subagent",
        |r| Cell::opt(r.doc.parent.as_ref().map(|p| p.psid.as_str()))
    ),
    col!("agent_id", Text, false, "Agent id", |r| Cell::str(
        &r.doc.agent.id
    )),
    col!("agent_name", Text, true, "Agent name", |r| Cell::opt(
        r.doc.agent.name.as_deref()
    )),
    col!(
        "model_name",
        Text,
        true,
        "Declared model, else the first step model",
        |r| Cell::opt(d::model_of(r.doc))
    ),
    col!("format", Text, true, "Exchange format", |r| Cell::opt(
        r.doc.origin.as_ref().map(|o| o.format.as_str())
    )),
    col!("step_count", Int, false, "Steps", |r| Cell::I64(
        r.doc.turns.len() as i64
    )),
    col!("user_step_count", Int, false, "Steps from the user", |r| {
        d::count_src(r, "user")
    }),
    col!(
        "agent_step_count",
        Int,
        false,
        "Steps from the agent",
        |r| d::count_src(r, "agent")
    ),
    col!("tool_call_count", Int, false, "Tool calls", |r| Cell::I64(
        r.doc.tool_call_count() as i64
    )),
    col!(
        "started_at",
        Timestamp,
        true,
        "Start: the document's, else the first step's",
        |r| d::first_ts(r)
    ),
    col!(
        "finished_at",
        Timestamp,
        true,
        "End: the document's, else the last step's",
        |r| d::last_ts(r)
    ),
    col!(
        "total_prompt_tokens",
        Int,
        true,
        "Sum of step prompt tokens",
        |r| d::total_i64(r, d::prompt_tokens)
    ),
    col!(
        "total_completion_tokens",
        Int,
        true,
        "Sum of step completion tokens",
        |r| d::total_i64(r, d::completion_tokens)
    ),
    col!(
        "total_cost_usd",
        Float,
        true,
        "Sum of step costs in USD",
        |r| d::total_cost(r)
    ),
    col!(
        "first_user_message",
        Text,
        true,
        "Text of the first user step",
        |r| d::first_user(r)
    ),
];

static STEPS: &[Column] = &[
    SOURCE_PATH,
    col!(
        "document_id",
        Text,
        false,
        "Source-local trajectory id",
        |r| Cell::str(r.doc.document_id())
    ),
    col!("run_id", Text, false, "Run id", |r| Cell::str(
        r.doc.run_id()
    )),
    col!("session_id", Text, false, "Session id", |r| Cell::str(
        &r.doc.session
    )),
    col!(
        "step_id",
        Int,
        false,
        "Step id (unique in its trajectory; identity, not order)",
        |r| Cell::I64(r.turn().id)
    ),
    col!(
        "turn_ordinal",
        Int,
        false,
        "0-based position of the step in its trajectory",
        |r| Cell::I64(r.turn_ordinal as i64)
    ),
    col!("timestamp", Timestamp, true, "Step time (UTC)", |r| {
        Cell::ts(r.turn().ts.as_ref())
    }),
    col!(
        "step_source",
        Text,
        false,
        "Who produced it: user, agent, system",
        |r| Cell::str(&r.turn().src)
    ),
    col!(
        "kind",
        Text,
        true,
        "Explicit narrative kind",
        |r| Cell::opt(r.turn().kind.as_deref())
    ),
    col!(
        "effective_kind",
        Text,
        false,
        "Kind, derived when not given (dialogue, autonomous, internal, …)",
        |r| Cell::str(r.turn().effective_kind())
    ),
    col!(
        "model_name",
        Text,
        true,
        "Model of the step",
        |r| Cell::opt(r.turn().model.as_deref())
    ),
    col!(
        "message_kind",
        Text,
        false,
        "Shape of the message: text, parts, json or null",
        |r| Cell::str(MessageKindName::of(&r.turn().msg))
    ),
    col!(
        "message_value",
        Text,
        false,
        "Normalised message text (parts joined, images as [image: path])",
        |r| d::message_text(r)
    ),
    col!(
        "message_json",
        Json,
        true,
        "The message as JSON, when it is not plain text",
        |r| d::message_json(r)
    ),
    col!("reasoning_content", Text, true, "Reasoning text", |r| {
        Cell::opt(r.turn().reason.as_deref())
    }),
    col!("reasoning_effort", Json, true, "Reasoning effort", |r| {
        Cell::json(r.turn().effort.as_ref())
    }),
    col!(
        "observation",
        Json,
        true,
        "Observation (tool and environment results)",
        |r| Cell::json(r.turn().observation.as_ref())
    ),
    col!(
        "observation_text",
        Text,
        true,
        "Decoded text of the observation: each result's content with JSON escapes decoded, parts joined by newlines, media as [image: path]",
        |r| d::observation_text(r)
    )
    .derived_from(Derived {
        from: &["observation"],
        compute: d::observation_text_of,
    }),
    col!(
        "prompt",
        Text,
        true,
        "Effective prompt text (the step's, else the trajectory's)",
        |r| d::prompt_cell(r)
    ),
    col!(
        "tool_call_count",
        Int,
        false,
        "Tool calls of the step",
        |r| Cell::I64(r.turn().tool_calls.as_ref().map_or(0, Vec::len) as i64)
    ),
    col!(
        "prompt_tokens",
        Int,
        true,
        "Prompt tokens (from metrics)",
        |r| Cell::opt_i64(d::prompt_tokens(r.turn()))
    ),
    col!(
        "completion_tokens",
        Int,
        true,
        "Completion tokens (from metrics)",
        |r| Cell::opt_i64(d::completion_tokens(r.turn()))
    ),
    col!(
        "cached_tokens",
        Int,
        true,
        "Cached prompt tokens (from metrics)",
        |r| Cell::opt_i64(d::cached_tokens(r.turn()))
    ),
    col!("cost_usd", Float, true, "Cost in USD (from metrics)", |r| {
        Cell::opt_f64(d::cost_usd(r.turn()))
    }),
    col!("latency_ms", Int, true, "LLM latency in ms", |r| {
        Cell::opt_i64(r.turn().latency_ms)
    }),
    col!("ttft_ms", Int, true, "Time to first token in ms", |r| {
        Cell::opt_i64(r.turn().ttft_ms)
    }),
    col!("llm_call_count", Int, true, "LLM calls in the step", |r| {
        Cell::opt_i64(r.turn().nllm)
    }),
    col!(
        "is_copied_context",
        Bool,
        true,
        "Copied from an earlier trajectory as context",
        |r| Cell::opt_bool(r.turn().copied)
    ),
    col!("metrics", Json, true, "Step metrics", |r| Cell::json(
        r.turn().metrics.as_ref()
    )),
    col!(
        "extra",
        Json,
        true,
        "Step extension object",
        |r| Cell::json(r.turn().extra.as_ref())
    ),
    col!("env", Json, true, "Environment overlay", |r| d::json_of(
        r.turn().env.as_ref()
    )),
    col!(
        "prompt_json",
        Json,
        true,
        "The step's own prompt object, when given",
        |r| d::json_of(r.turn().prompt.as_ref())
    ),
    col!("finished_at", Timestamp, true, "Step end time (UTC)", |r| {
        Cell::ts(r.turn().finished_at.as_ref())
    }),
    col!(
        "had_tool_calls",
        Bool,
        false,
        "A tool_calls list was present (even empty)",
        |r| Cell::Bool(r.turn().tool_calls.is_some())
    ),
    col!(
        "timestamp_raw",
        Json,
        true,
        "Step time exactly as given, when it is not canonical RFC 3339",
        |r| d::raw_ts(r.turn().ts.as_ref())
    ),
    col!(
        "finished_at_raw",
        Json,
        true,
        "End time exactly as given, when it is not canonical RFC 3339",
        |r| d::raw_ts(r.turn().finished_at.as_ref())
    ),
];

static TOOL_CALLS: &[Column] = &[
    SOURCE_PATH,
    col!(
        "document_id",
        Text,
        false,
        "Source-local trajectory id",
        |r| Cell::str(r.doc.document_id())
    ),
    col!("run_id", Text, false, "Run id", |r| Cell::str(
        r.doc.run_id()
    )),
    col!("session_id", Text, false, "Session id", |r| Cell::str(
        &r.doc.session
    )),
    col!("step_id", Int, false, "Step that made the call", |r| {
        Cell::I64(r.turn().id)
    }),
    col!("turn_ordinal", Int, false, "Position of that step", |r| {
        Cell::I64(r.turn_ordinal as i64)
    }),
    col!(
        "call_index",
        Int,
        false,
        "0-based position of the call in its step",
        |r| Cell::I64(r.call_index as i64)
    ),
    col!("tool_call_id", Text, false, "Tool call id", |r| Cell::str(
        &r.call().tcid
    )),
    col!("function_name", Text, false, "Function (tool) name", |r| {
        Cell::str(&r.call().func)
    }),
    col!("arguments", Json, false, "Arguments as JSON", |r| {
        Cell::json_required(&r.call().args)
    }),
    col!("result", Json, true, "Result body given on the call", |r| {
        Cell::json(r.call().result.as_ref())
    }),
    col!(
        "results",
        Json,
        false,
        "Observation results that answer this call (JSON array)",
        |r| d::call_results(r)
    ),
    col!(
        "results_text",
        Text,
        true,
        "Decoded text of the call's result and of the observation results that answer it",
        |r| d::call_results_text(r)
    )
    .derived_from(Derived {
        from: &["result", "results"],
        compute: d::call_results_text_of,
    }),
    col!("status", Text, true, "Call status", |r| Cell::opt(
        r.call().response.as_ref().and_then(|x| x.status.as_deref())
    )),
    col!("exit_code", Int, true, "Process exit code", |r| {
        Cell::opt_i64(r.call().response.as_ref().and_then(|x| x.exit_code))
    }),
    col!("duration_ms", Int, true, "Tool wall time in ms", |r| {
        Cell::opt_i64(r.call().duration_ms)
    }),
    col!("kind", Text, true, "Tool event type", |r| Cell::opt(
        r.call().kind.as_deref()
    )),
    col!(
        "timestamp",
        Timestamp,
        true,
        "Time of the step that made the call (UTC)",
        |r| Cell::ts(r.turn().ts.as_ref())
    ),
    col!(
        "extra",
        Json,
        true,
        "Call extension object",
        |r| Cell::json(r.call().extra.as_ref())
    ),
    col!(
        "response",
        Json,
        true,
        "Response object {status, exit_code}",
        |r| d::json_of(r.call().response.as_ref())
    ),
];

static JUDGMENTS: &[Column] = &[
    SOURCE_PATH,
    col!("document_id", Text, false, "Judged trajectory", |r| {
        Cell::str(r.doc.document_id())
    }),
    col!("run_id", Text, false, "Run id", |r| Cell::str(
        r.doc.run_id()
    )),
    col!("session_id", Text, false, "Session id", |r| Cell::str(
        &r.doc.session
    )),
    col!("attempt_id", Text, true, "Attempt id", |r| Cell::opt(
        r.doc.attempt_id.as_deref()
    )),
    col!(
        "judge",
        Text,
        false,
        "Who judged: the source format (e.g. actf) or the judgments file's judge",
        |r| d::judge(r)
    ),
    col!("correct", Bool, true, "Verdict", |r| d::result_bool(
        r,
        |x| x.correct.as_ref()
    )),
    col!("task_correct", Bool, true, "Task-level verdict", |r| {
        d::result_bool(r, |x| x.task_correct.as_ref())
    }),
    col!("score", Float, true, "Score", |r| d::result_f64(r, |x| x
        .score
        .as_ref())),
    col!(
        "max_score",
        Float,
        true,
        "Maximum score",
        |r| d::result_f64(r, |x| x.max_score.as_ref())
    ),
    col!("status", Text, true, "Status", |r| d::result_text(r, |x| x
        .status
        .as_ref())),
    col!("error", Text, true, "Error text", |r| d::result_text(
        r,
        |x| x.error.as_ref()
    )),
    col!("final_answer", Json, true, "Final answer", |r| {
        d::result_json(r, |x| x.final_answer.as_ref())
    }),
    col!("ground_truth", Json, true, "Ground truth", |r| {
        d::result_json(r, |x| x.ground_truth.as_ref())
    }),
    col!("details", Json, true, "The whole result object", |r| {
        d::json_of(r.doc.task.as_ref().and_then(|t| t.result.as_ref()))
    }),
];

/// Name of a message kind.
pub(crate) struct MessageKindName;

impl MessageKindName {
    pub(crate) fn of(v: &serde_json::Value) -> &'static str {
        d::MessageKind::of(v).name()
    }
}
