//! The `events` relation: every events store's rows at its pinned version,
//! deduplicated by `event_id`.

use super::{events_schema, Mount, Mounts};
use arrow::record_batch::RecordBatch;

use crate::sql::SqlError;

impl Mounts {
    /// The `events` relation: every events store's rows at its pinned
    /// version, one row per distinct `event_id` with its duplicate count.
    pub(super) fn scan_events(
        &self,
        mount: &Mount,
        columns: &[usize],
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
        emit: &mut dyn FnMut(RecordBatch) -> Result<(), SqlError>,
    ) -> Result<(), SqlError> {
        use arrow::array::{Int64Array, StringArray, TimestampNanosecondArray};
        let full = events_schema();
        let schema = std::sync::Arc::new(full.project(columns)?);
        for s in &mount.snapshot.sources {
            if s.format != crate::formats::SourceFormat::EventsLance {
                continue;
            }
            let names: Vec<&str> = columns
                .iter()
                .map(|&i| full.field(i).name().as_str())
                .collect();
            if !names.contains(&"payload_json") {
                // Every other column is stored beside the payload: no
                // record is parsed.
                match crate::catalog::read::events_envelopes(s, &envelope_columns(&names)) {
                    Ok((b, dups)) => emit(post(envelope_batch(s, &names, &schema, &b, dups)?)?)?,
                    Err(f) => self.skip_or_fail(s, f)?,
                }
                continue;
            }
            let rows = match crate::catalog::read::events_rows(s) {
                Ok(r) => r,
                Err(f) => {
                    self.skip_or_fail(s, f)?;
                    continue;
                }
            };
            let text = |key: &str| -> StringArray {
                rows.iter()
                    .map(|(r, _)| match r.record.get(key) {
                        Some(serde_json::Value::String(v)) => Some(v.as_str()),
                        _ => None,
                    })
                    .collect()
            };
            let mut cols: Vec<arrow::array::ArrayRef> = Vec::with_capacity(columns.len());
            for &i in columns {
                let name = full.field(i).name().as_str();
                let a: arrow::array::ArrayRef = match name {
                    "source_path" => std::sync::Arc::new(StringArray::from(vec![
                        s.source_path
                            .as_str();
                        rows.len()
                    ])),
                    "seq" => std::sync::Arc::new(Int64Array::from_iter_values(
                        rows.iter().map(|(r, _)| r.seq),
                    )),
                    "timestamp" => std::sync::Arc::new(
                        TimestampNanosecondArray::from_iter_values(
                            rows.iter()
                                .map(|(r, _)| r.timestamp_unix_ms.saturating_mul(1_000_000)),
                        )
                        .with_timezone("UTC"),
                    ),
                    "model" => std::sync::Arc::new(
                        rows.iter()
                            .map(|(r, _)| {
                                r.record
                                    .get("payload")
                                    .and_then(|p| p.get("model"))
                                    .and_then(serde_json::Value::as_str)
                            })
                            .collect::<StringArray>(),
                    ),
                    "kind" | "source" => std::sync::Arc::new(
                        rows.iter()
                            .map(|(r, _)| {
                                Some(
                                    r.record
                                        .get(name)
                                        .and_then(serde_json::Value::as_str)
                                        .unwrap_or(""),
                                )
                            })
                            .collect::<StringArray>(),
                    ),
                    "payload_json" => std::sync::Arc::new(
                        rows.iter()
                            .map(|(r, _)| Some(r.record.to_string()))
                            .collect::<StringArray>(),
                    ),
                    "duplicate_count" => std::sync::Arc::new(Int64Array::from_iter_values(
                        rows.iter().map(|(_, d)| *d),
                    )),
                    other => std::sync::Arc::new(text(other)),
                };
                cols.push(a);
            }
            let b = RecordBatch::try_new_with_options(
                schema.clone(),
                cols,
                &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows.len())),
            )?;
            emit(post(b)?)?;
        }
        Ok(())
    }
}

/// The stored envelope columns that the relation columns `names` read.
fn envelope_columns<'a>(names: &[&'a str]) -> Vec<&'a str> {
    names
        .iter()
        .copied()
        .filter(|n| {
            !matches!(
                *n,
                "source_path" | "seq" | "timestamp" | "event_id" | "duplicate_count"
            )
        })
        .collect()
}

/// The relation columns `names` of one events store from its envelope
/// columns `b` (see [`crate::store::events::read_envelopes`]).
fn envelope_batch(
    s: &crate::catalog::Source,
    names: &[&str],
    schema: &arrow::datatypes::SchemaRef,
    b: &RecordBatch,
    dups: Vec<i64>,
) -> Result<RecordBatch, SqlError> {
    use arrow::array::AsArray;
    use arrow::array::{ArrayRef, Int64Array, StringArray, TimestampNanosecondArray};
    use std::sync::Arc;
    let n = b.num_rows();
    let stored = |name: &str| -> Result<ArrayRef, SqlError> {
        b.column_by_name(name)
            .cloned()
            .ok_or_else(|| SqlError::Internal(format!("events: no stored column {name}")))
    };
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(names.len());
    for &name in names {
        cols.push(match name {
            "source_path" => Arc::new(StringArray::from(vec![s.source_path.as_str(); n])),
            "timestamp" => {
                let ms = stored("timestamp_unix_ms")?;
                let ms = ms.as_primitive::<arrow::datatypes::Int64Type>();
                Arc::new(
                    TimestampNanosecondArray::from_iter_values(
                        ms.values().iter().map(|v| v.saturating_mul(1_000_000)),
                    )
                    .with_timezone("UTC"),
                )
            }
            "duplicate_count" => Arc::new(Int64Array::from(dups.clone())),
            other => stored(other)?,
        });
    }
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        cols,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(n)),
    )?)
}
