//! The relations that are not decoded from documents: `sources` (what
//! discovery found) and `events` (their schema), and the answers to
//! `DESCRIBE` and `EXPLAIN`.

use arrow::array::{ArrayRef, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;

use crate::catalog::Source;
use crate::sql::SqlError;
use crate::table::Table;

/// Schema of the `sources` relation.
pub fn sources_schema() -> SchemaRef {
    std::sync::Arc::new(Schema::new(vec![
        Field::new("source_path", DataType::Utf8, false),
        Field::new("format", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("layout", DataType::Utf8, true),
        Field::new("snapshot_ref", DataType::Utf8, false),
        Field::new("read_consistency", DataType::Utf8, false),
        Field::new("status", DataType::Utf8, false),
        Field::new("reason_code", DataType::Utf8, true),
        Field::new("reason", DataType::Utf8, true),
        Field::new("size_bytes", DataType::Int64, false),
        Field::new("capabilities", DataType::Utf8, false),
    ]))
}

/// Columns of `sources` that hold JSON text.
pub(crate) const SOURCE_JSON_COLUMNS: &[&str] = &["capabilities"];

/// Schema of the `events` relation (canonical captured events).
pub fn events_schema() -> SchemaRef {
    let ts = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
    std::sync::Arc::new(Schema::new(vec![
        Field::new("source_path", DataType::Utf8, false),
        Field::new("seq", DataType::Int64, false),
        Field::new("event_id", DataType::Utf8, true),
        Field::new("timestamp", ts, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("source", DataType::Utf8, false),
        Field::new("agent_id", DataType::Utf8, true),
        Field::new("run_id", DataType::Utf8, true),
        Field::new("session_id", DataType::Utf8, true),
        Field::new("call_id", DataType::Utf8, true),
        Field::new("trace_id", DataType::Utf8, true),
        Field::new("parent_call_id", DataType::Utf8, true),
        Field::new("model", DataType::Utf8, true),
        Field::new("payload_json", DataType::Utf8, false),
        Field::new("duplicate_count", DataType::Int64, false),
    ]))
}

/// Columns of `events` that hold JSON text (the captured record).
pub(crate) const EVENT_JSON_COLUMNS: &[&str] = &["payload_json"];

/// (name, type, nullable, description) of every column of a relation.
pub fn describe_relation(relation: &str) -> Vec<(String, String, bool, String)> {
    if let Some(t) = Table::from_name(relation) {
        return t
            .columns()
            .iter()
            .map(|c| {
                (
                    c.name.to_string(),
                    c.ty.sql_name().to_string(),
                    c.nullable,
                    c.doc.to_string(),
                )
            })
            .collect();
    }
    let no_json: &[&str] = &[];
    let (schema, docs, json): (SchemaRef, &[&str], &[&str]) = match relation {
        "sources" => (sources_schema(), SOURCE_DOCS, SOURCE_JSON_COLUMNS),
        _ => (events_schema(), EVENT_DOCS, no_json),
    };
    schema
        .fields()
        .iter()
        .zip(docs)
        .map(|(f, d)| {
            // JSON text is TEXT to Arrow; DESCRIBE names it as the entity
            // tables do.
            let ty = if json.contains(&f.name().as_str()) {
                "JSON"
            } else {
                crate::sql::value::type_name(f.data_type())
            };
            (
                f.name().clone(),
                ty.to_string(),
                f.is_nullable(),
                (*d).to_string(),
            )
        })
        .collect()
}

const SOURCE_DOCS: &[&str] = &[
    "Dataset-relative path of the Source",
    "Format: atif, actf, openai-messages, storyline, storyline-lance, events-lance, unknown",
    "file or store",
    "JSON layout of a file: document, array or lines",
    "The pinned version (file fingerprint, store table versions)",
    "How the pin is enforced: fingerprint, native or conditional",
    "ready, degraded or error (as found by discovery)",
    "Stable code of the problem, when not ready",
    "Sanitised description of the problem",
    "Size in bytes",
    "What the Source serves, as JSON: relations (the relations it contributes rows to), writable, history (earlier versions readable)",
];

const EVENT_DOCS: &[&str] = &[
    "Dataset-relative path of the events store",
    "Producer sequence number",
    "Event id",
    "Event time (UTC)",
    "Event kind (http.request, http.response, …)",
    "Producing component",
    "Agent id",
    "Run id",
    "Session id",
    "Call id pairing a request with its response",
    "Trace id",
    "Parent call id",
    "Model",
    "The complete event record as JSON",
    "Further stored copies of this event_id (capture is at-least-once; rows are deduplicated)",
];

/// The `sources` relation of a snapshot as one batch.
pub fn sources_batch(sources: &[Source]) -> Result<RecordBatch, SqlError> {
    let text = |f: &dyn Fn(&Source) -> Option<String>| -> ArrayRef {
        std::sync::Arc::new(sources.iter().map(f).collect::<StringArray>())
    };
    let cols: Vec<ArrayRef> = vec![
        text(&|s| Some(s.source_path.clone())),
        text(&|s| Some(s.format.name().to_string())),
        text(&|s| Some(s.kind.name().to_string())),
        text(&|s| s.layout().map(str::to_string)),
        text(&|s| Some(s.snapshot_ref.to_string())),
        text(&|s| Some(s.read_consistency.to_string())),
        text(&|s| Some(s.status.name().to_string())),
        text(&|s| s.reason.as_ref().map(|r| r.code.to_string())),
        text(&|s| s.reason.as_ref().map(|r| r.message.clone())),
        std::sync::Arc::new(
            sources
                .iter()
                .map(|s| s.size as i64)
                .collect::<Int64Array>(),
        ),
        text(&|s| serde_json::to_string(&s.capabilities()).ok()),
    ];
    Ok(RecordBatch::try_new(sources_schema(), cols)?)
}

/// The answer to `DESCRIBE relation`: one row per column (name, type,
/// nullability, description).
pub fn describe_batches(relation: &str) -> (SchemaRef, Vec<RecordBatch>) {
    let cols = describe_relation(relation);
    let schema = std::sync::Arc::new(Schema::new(vec![
        Field::new("column_name", DataType::Utf8, false),
        Field::new("column_type", DataType::Utf8, false),
        Field::new("null", DataType::Utf8, false),
        Field::new("description", DataType::Utf8, false),
    ]));
    let col = |f: &dyn Fn(&(String, String, bool, String)) -> String| -> ArrayRef {
        std::sync::Arc::new(cols.iter().map(|c| Some(f(c))).collect::<StringArray>())
    };
    let arrays = vec![
        col(&|c| c.0.clone()),
        col(&|c| c.1.clone()),
        col(&|c| if c.2 { "YES".into() } else { "NO".into() }),
        col(&|c| c.3.clone()),
    ];
    let batch = RecordBatch::try_new(schema.clone(), arrays).expect("describe columns match");
    (schema, vec![batch])
}

/// The answer to `EXPLAIN`: the plan, one line per row.
pub fn explain_batches(plan: &impl std::fmt::Display) -> (SchemaRef, Vec<RecordBatch>) {
    let text = plan.to_string();
    let schema = std::sync::Arc::new(Schema::new(vec![Field::new("plan", DataType::Utf8, false)]));
    let lines: ArrayRef = std::sync::Arc::new(text.lines().map(Some).collect::<StringArray>());
    let batch = RecordBatch::try_new(schema.clone(), vec![lines]).expect("plan column matches");
    (schema, vec![batch])
}
