//! `runs`: one row per Run of a Source. A Run groups the trajectory
//! documents that share (`source_path`, `origin_path`, `run_id`): a main
//! agent, its subagents and retries. Its identity and JSON columns are its
//! main trajectory's (the first document of the Run without a parent, else
//! its first document); counts, tokens and cost are sums over the Run; times
//! span it. The rows are computed by [`crate::table::group_runs`] from
//! `trajectories` rows, never from a single document.

use super::{Cell, ColType, Column, ORIGIN_PATH, SOURCE_PATH};

/// A column of the grouped relation: no per-document value (`get` is never
/// called for `runs`).
macro_rules! run_col {
    ($name:literal, $ty:ident, $null:literal, $doc:literal) => {
        col!($name, $ty, $null, $doc, |_| Cell::Null)
    };
}

pub(super) static RUNS: &[Column] = &[
    SOURCE_PATH,
    ORIGIN_PATH,
    run_col!(
        "run_id",
        Text,
        false,
        "Run id (the source's, else derived from the parent or session)"
    ),
    run_col!(
        "run_id_explicit",
        Bool,
        false,
        "Some document of the Run gave its run id"
    ),
    run_col!(
        "root_document_id",
        Text,
        false,
        "The main trajectory: the first document of the Run without a parent (else its first)"
    ),
    run_col!(
        "session_id",
        Text,
        false,
        "Session id of the main trajectory"
    ),
    run_col!("agent_id", Text, false, "Agent id of the main trajectory"),
    run_col!(
        "agent_name",
        Text,
        true,
        "Agent name of the main trajectory"
    ),
    run_col!(
        "agent_version",
        Text,
        true,
        "Agent version of the main trajectory"
    ),
    run_col!(
        "agent_model_name",
        Text,
        true,
        "Declared model of the main trajectory's agent"
    ),
    run_col!(
        "model_name",
        Text,
        true,
        "Model of the main trajectory: declared, else its first step's"
    ),
    run_col!(
        "format",
        Text,
        true,
        "Exchange format of the main trajectory"
    ),
    run_col!(
        "first_user_message",
        Text,
        true,
        "Text of the main trajectory's first user step"
    ),
    run_col!(
        "trajectory_count",
        Int,
        false,
        "Trajectory documents in the Run"
    ),
    run_col!(
        "subagent_count",
        Int,
        false,
        "Documents of the Run that name a parent"
    ),
    run_col!("step_count", Int, false, "Steps over all trajectories"),
    run_col!(
        "tool_call_count",
        Int,
        false,
        "Tool calls over all trajectories"
    ),
    run_col!(
        "started_at",
        Timestamp,
        true,
        "Earliest start of its trajectories (each: the document's, else its first step's)"
    ),
    run_col!(
        "finished_at",
        Timestamp,
        true,
        "Latest end of its trajectories (each: the document's, else its last step's)"
    ),
    run_col!(
        "total_prompt_tokens",
        Int,
        true,
        "Sum of prompt tokens over all trajectories"
    ),
    run_col!(
        "total_completion_tokens",
        Int,
        true,
        "Sum of completion tokens over all trajectories"
    ),
    run_col!(
        "total_cost_usd",
        Float,
        true,
        "Sum of costs in USD over all trajectories"
    ),
    run_col!(
        "agent_extra",
        Json,
        true,
        "The main trajectory's agent extension object"
    ),
    run_col!("final_metrics", Json, true, "The main trajectory's metrics"),
    run_col!(
        "extra",
        Json,
        true,
        "The main trajectory's extension object"
    ),
    run_col!("meta", Json, true, "The main trajectory's source metadata"),
    run_col!(
        "unknown_fields",
        Json,
        true,
        "The main trajectory's source keys with no Storyline field"
    ),
    run_col!(
        "storage_ordinal",
        Int,
        false,
        "Position of the main trajectory in its Source (with source_path, identifies it)"
    ),
];

/// The `trajectories` columns [`crate::table::group_runs`] reads, in the
/// order it takes them.
pub(crate) const RUN_INPUTS: [&str; 27] = [
    "source_path",
    "origin_path",
    "run_id",
    "run_id_explicit",
    "document_id",
    "parent_document_id",
    "session_id",
    "agent_id",
    "agent_name",
    "agent_version",
    "agent_model_name",
    "model_name",
    "format",
    "first_user_message",
    "step_count",
    "tool_call_count",
    "started_at",
    "finished_at",
    "total_prompt_tokens",
    "total_completion_tokens",
    "total_cost_usd",
    "agent_extra",
    "final_metrics",
    "extra",
    "meta",
    "unknown_fields",
    "storage_ordinal",
];
