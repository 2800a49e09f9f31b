//! Rows of record batches as JSON objects, with the columns that hold JSON
//! text returned parsed.

use std::collections::HashSet;
use std::sync::LazyLock;

use arrow::array::Array;
use arrow::record_batch::RecordBatch;
use serde_json::{Map, Value};

use crate::render::cell_json;
use crate::table::{ColType, Column, Table};

/// Columns returned parsed: those the relations define as JSON text
/// (`ColType::Json` in the tables, the JSON columns of `sources` and
/// `events`). A cell is matched by its column's name alone, so a name that
/// some table defines as plain text (`prompt`, a step's effective prompt)
/// stays text, as do the names in [`KEPT_AS_TEXT`].
static JSON_COLUMNS: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    let columns: Vec<&Column> = Table::ALL
        .into_iter()
        .chain([Table::Documents])
        .flat_map(Table::columns)
        .collect();
    let json_everywhere = |name: &str| {
        columns
            .iter()
            .all(|c| c.name != name || c.ty == ColType::Json)
    };
    columns
        .iter()
        .filter(|c| c.ty == ColType::Json)
        .map(|c| c.name)
        .filter(|&n| json_everywhere(n) && !KEPT_AS_TEXT.contains(&n))
        .chain(crate::dataset::SOURCE_JSON_COLUMNS.iter().copied())
        .chain(crate::dataset::EVENT_JSON_COLUMNS.iter().copied())
        .collect::<HashSet<_>>()
});

/// JSON columns returned as their text: a step's raw `observation` (the
/// explorer shows its results decoded, as `output`).
const KEPT_AS_TEXT: [&str; 1] = ["observation"];

/// Rows of a batch as JSON objects; JSON columns parsed.
pub(super) fn rows_json(b: &RecordBatch) -> Vec<Value> {
    (0..b.num_rows()).map(|r| row_json(b, r)).collect()
}

/// One row of a batch as a JSON object; JSON columns parsed.
pub(super) fn row_json(b: &RecordBatch, r: usize) -> Value {
    let schema = b.schema();
    let mut o = Map::with_capacity(schema.fields().len());
    for (c, f) in schema.fields().iter().enumerate() {
        o.insert(f.name().clone(), cell(b.column(c).as_ref(), r, f.name()));
    }
    Value::Object(o)
}

fn cell(a: &dyn Array, r: usize, name: &str) -> Value {
    let v = cell_json(a, r);
    if JSON_COLUMNS.contains(name) {
        if let Value::String(s) = &v {
            if let Ok(p) = serde_json::from_str::<Value>(s) {
                return p;
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::JSON_COLUMNS;

    #[test]
    fn json_columns_come_from_the_relations() {
        for name in [
            "capabilities",
            "payload_json",
            "metrics",
            "extra",
            "message_json",
            "env",
            "prompt_json",
            "reasoning_effort",
            "arguments",
            "result",
            "results",
            "response",
            "agent_extra",
            "final_metrics",
            "meta",
            "unknown_fields",
            "unknown_key_counts",
            "agent_tool_definitions",
            "children",
        ] {
            assert!(JSON_COLUMNS.contains(name), "{name}");
        }
        for name in [
            "observation",
            "prompt",
            "observation_text",
            "message_value",
            "first_user_message",
        ] {
            assert!(!JSON_COLUMNS.contains(name), "{name}");
        }
    }
}
