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
        let full = events_schema();
        let schema = std::sync::Arc::new(full.project(columns)?);
        let names: Vec<&str> = columns
            .iter()
            .map(|&i| full.field(i).name().as_str())
            .collect();
        for s in &mount.snapshot.sources {
            if s.format != crate::formats::SourceFormat::EventsLance {
                continue;
            }
            // Every column but the record is stored beside it, so no record
            // is parsed; the records, when asked for, are read by row a
            // batch at a time, never the whole store at once.
            let read = crate::catalog::read::events_envelopes(s, &envelope_columns(&names))
                .and_then(|e| {
                    let records = names
                        .contains(&"payload_json")
                        .then(|| crate::catalog::read::events_records(s))
                        .transpose()?;
                    Ok((e, records))
                });
            let (e, records) = match read {
                Ok(r) => r,
                Err(f) => {
                    self.skip_or_fail(s, f)?;
                    continue;
                }
            };
            let n = e.batch.num_rows();
            let step = if records.is_some() {
                RECORDS_PER_BATCH
            } else {
                n.max(1)
            };
            // An empty store still gives its (empty) batch.
            let starts: Vec<usize> = if n == 0 {
                vec![0]
            } else {
                (0..n).step_by(step).collect()
            };
            for start in starts {
                let len = step.min(n - start);
                let payload = match records
                    .as_ref()
                    .map(|r| r.column(&e.rows[start..start + len]))
                {
                    Some(Ok(p)) => Some(p),
                    // A read that fails half-way is the store's failure, as
                    // one that fails at the start: reported, or the query
                    // fails when sources must all be read.
                    Some(Err(err)) => {
                        self.skip_or_fail(s, crate::catalog::read::store_failure(s, &err))?;
                        break;
                    }
                    None => None,
                };
                let b = e.batch.slice(start, len);
                let dups = &e.duplicates[start..start + len];
                emit(post(envelope_batch(
                    s, &names, &schema, &b, dups, payload,
                )?)?)?;
            }
        }
        Ok(())
    }
}

/// Events per batch when their records are read: a batch holds their text.
const RECORDS_PER_BATCH: usize = 4096;

/// The stored envelope columns that the relation columns `names` read.
fn envelope_columns<'a>(names: &[&'a str]) -> Vec<&'a str> {
    names
        .iter()
        .copied()
        .filter(|n| {
            !matches!(
                *n,
                "source_path"
                    | "seq"
                    | "timestamp"
                    | "event_id"
                    | "duplicate_count"
                    | "payload_json"
            )
        })
        .collect()
}

/// The relation columns `names` of one events store from its envelope
/// columns `b` (see [`crate::store::events::read_envelopes`]) and, when
/// `payload_json` is among them, the records of the same rows.
fn envelope_batch(
    s: &crate::catalog::Source,
    names: &[&str],
    schema: &arrow::datatypes::SchemaRef,
    b: &RecordBatch,
    dups: &[i64],
    payload: Option<arrow::array::ArrayRef>,
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
            "duplicate_count" => Arc::new(Int64Array::from(dups.to_vec())),
            "payload_json" => payload
                .clone()
                .ok_or_else(|| SqlError::Internal("events: the records were not read".into()))?,
            other => stored(other)?,
        });
    }
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        cols,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(n)),
    )?)
}
