//! Which columns a skeleton read can give: decoders then skip message
//! bodies, metrics and extras entirely.

use crate::table::Table;

/// Columns computable from a skeleton read (no message bodies, metrics or
/// extras): reading only these lets typed readers skip the heavy payloads.
pub(super) fn skeleton_safe(table: Table, column: &str) -> bool {
    const COMMON: &[&str] = &[
        "source_path",
        "origin_path",
        "document_id",
        "storage_ordinal",
        "run_id",
        "session_id",
    ];
    if COMMON.contains(&column) {
        return true;
    }
    let safe: &[&str] = match table {
        Table::Trajectories | Table::Documents => &[
            "run_id_explicit",
            "trajectory_id",
            "attempt_id",
            "format",
            "agent_id",
            "agent_name",
            "agent_version",
            "agent_model_name",
            "model_name",
            "parent_document_id",
            "parent_tool_call_id",
            "parent_step_id",
            "started_at",
            "finished_at",
            "first_step_at",
            "last_step_at",
            "step_count",
            "user_step_count",
            "agent_step_count",
            "tool_call_count",
            "continued_trajectory_ref",
            "agent_tool_definitions",
            "agent_extra",
            "children",
            "origin",
            "parent",
            "schema_version",
            "started_at_raw",
            "finished_at_raw",
        ],
        // Grouped from `trajectories` rows: see `scan_runs`.
        Table::Runs => return false,
        Table::Steps => &[
            "step_id",
            "turn_ordinal",
            "timestamp",
            "step_source",
            "kind",
            "effective_kind",
            "model_name",
            "tool_call_count",
            "llm_call_count",
            "is_copied_context",
            "had_tool_calls",
            "timestamp_raw",
            "finished_at",
            "finished_at_raw",
        ],
        Table::ToolCalls => &[
            "step_id",
            "turn_ordinal",
            "call_index",
            "tool_call_id",
            "function_name",
            "timestamp",
            "status",
            "exit_code",
            "kind",
            "response",
        ],
        Table::Judgments => return true,
    };
    safe.contains(&column)
}
