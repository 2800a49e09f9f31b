//! The canonical events store (`events.lance`): one Lance table, one row per
//! captured event (RFC-0002 `EventRow`: indexed envelope columns plus the
//! complete record as `payload_json`). Appends add a Lance version; readers
//! open the version discovery pinned.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use serde_json::Value;

use super::lance_io::{self, runtime, ChannelReader};
use super::StoreError;
use crate::util::rt::reads_runtime;

/// Envelope columns stored beside `payload_json`, in table order.
const TEXT_COLUMNS: &[&str] = &[
    "event_id",
    "run_id",
    "session_id",
    "agent_id",
    "call_id",
    "trace_id",
    "parent_call_id",
    "kind",
    "source",
    "producer",
    "model",
];

/// The physical schema of `events.lance`.
pub fn events_table_schema() -> SchemaRef {
    let mut fields = vec![
        Field::new("seq", DataType::Int64, false),
        Field::new("timestamp_unix_ms", DataType::Int64, false),
    ];
    for c in TEXT_COLUMNS {
        let nullable = !matches!(*c, "kind" | "source");
        fields.push(Field::new(*c, DataType::Utf8, nullable));
    }
    fields.push(Field::new("payload_json", DataType::Utf8, false));
    Arc::new(Schema::new(fields))
}

/// The record's string field `key`, when present.
fn text(v: &Value, key: &str) -> Option<String> {
    match v.get(key) {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    }
}

/// The batch holding `events` (full `EventRecord` objects).
pub fn events_batch(events: &[Value]) -> Result<RecordBatch, StoreError> {
    let schema = events_table_schema();
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    cols.push(Arc::new(Int64Array::from_iter_values(
        events
            .iter()
            .map(|e| e.get("seq").and_then(Value::as_i64).unwrap_or(0)),
    )));
    cols.push(Arc::new(Int64Array::from_iter_values(events.iter().map(
        |e| {
            e.get("timestamp_unix_ms")
                .and_then(Value::as_i64)
                .unwrap_or(0)
        },
    ))));
    for c in TEXT_COLUMNS {
        let values: Vec<Option<String>> = events
            .iter()
            .map(|e| {
                let v = if *c == "model" {
                    e.get("payload").and_then(|p| text(p, "model"))
                } else {
                    text(e, c)
                };
                match (*c, v) {
                    ("kind" | "source", None) => Some(String::new()),
                    (_, v) => v,
                }
            })
            .collect();
        cols.push(Arc::new(StringArray::from(values)));
    }
    let payloads: Vec<String> = events
        .iter()
        .map(|e| serde_json::to_string(e).unwrap_or_else(|_| "{}".into()))
        .collect();
    cols.push(Arc::new(StringArray::from(payloads)));
    RecordBatch::try_new(schema, cols).map_err(|e| StoreError::Internal(e.to_string()))
}

/// Append `events` to the events table at `path` (a local directory or an
/// `s3://` URL), creating it when absent. Returns the new table version.
pub fn append(path: &str, events: &[Value], exists: bool) -> Result<u64, StoreError> {
    let batch = events_batch(events)?;
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let reader = ChannelReader {
        schema: events_table_schema(),
        rx,
    };
    let _ = tx.send(batch);
    drop(tx);
    let path = path.to_string();
    runtime().block_on(async move { lance_io::append_table(&path, reader, exists).await })
}

/// The newest version of the table at `path`, if it exists.
pub fn latest_version(path: &str) -> Result<Option<u64>, StoreError> {
    let p = path.to_string();
    runtime().block_on(async move { lance_io::latest_version(&p).await })
}

/// How many rows `path@old` had, when `path@new` holds them unchanged, in
/// the same place, followed only by appended rows (the Gateway only
/// appends); `None` when the table was rewritten, compacted or had rows
/// deleted in between, or `old` is gone.
pub fn appended_since(path: &str, old: u64, new: u64) -> Result<Option<u64>, StoreError> {
    let p = path.to_string();
    let (before, after) = runtime().block_on(async move {
        let Ok(before) = lance_io::open_at(&p, old).await else {
            return Ok::<_, StoreError>((None, None));
        };
        let after = lance_io::open_at(&p, new).await?;
        Ok((
            Some(before.fragments().to_vec()),
            Some(after.fragments().to_vec()),
        ))
    })?;
    let (Some(before), Some(after)) = (before, after) else {
        return Ok(None);
    };
    if old > new || before.len() > after.len() {
        return Ok(None);
    }
    let same = |a: &lance::table::format::Fragment, b: &lance::table::format::Fragment| {
        a.id == b.id
            && a.files == b.files
            && a.physical_rows == b.physical_rows
            && a.deletion_file.is_none()
            && b.deletion_file.is_none()
    };
    if !before.iter().zip(&after).all(|(a, b)| same(a, b)) {
        return Ok(None);
    }
    Ok(before
        .iter()
        .map(|f| f.physical_rows.map(|n| n as u64))
        .sum::<Option<u64>>())
}

/// Of events with these ids (in storage order), the positions of the first
/// copy of each id (events without an id are all kept), how many further
/// copies each has, and the position of its last copy: at-least-once
/// capture can store an event twice after a crash, and readers see it once,
/// in the place of its first copy.
fn first_copies<'a>(ids: impl Iterator<Item = Option<&'a str>>) -> Copies {
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut c = Copies::default();
    for (i, id) in ids.enumerate() {
        if let Some(id) = id {
            if let Some(&k) = index.get(id) {
                c.duplicates[k] += 1;
                c.last[k] = i as u64;
                continue;
            }
            index.insert(id, c.keep.len());
        }
        c.keep.push(i as u32);
        c.duplicates.push(0);
        c.last.push(i as u64);
    }
    c
}

/// What [`first_copies`] finds, one entry per kept event.
#[derive(Default)]
struct Copies {
    keep: Vec<u32>,
    duplicates: Vec<i64>,
    last: Vec<u64>,
}

/// Columns of `path@version` with the first copy of each event marked (see
/// [`first_copies`]); nothing is parsed.
pub struct DedupedColumns {
    /// `seq`, `timestamp_unix_ms`, `event_id`, then the columns asked for,
    /// in storage order.
    pub batches: Vec<RecordBatch>,
    /// (batch, row) of the first copy of each event, in storage order.
    pub kept: Vec<(u32, u32)>,
    /// How many further copies each kept event has.
    pub duplicates: Vec<i64>,
    /// The row (counted over the whole table, in storage order) of each kept
    /// event's last copy: its own when it has no other.
    pub last: Vec<u64>,
}

/// Columns `seq`, `timestamp_unix_ms`, `event_id`, then `columns` (envelope
/// columns or `payload_json`) of `path@version`, with the first copies
/// marked as [`first_copies`] keeps them. The batches are kept as Lance returns
/// them: a reader borrows the rows it needs instead of copying the table.
pub fn read_deduped(
    path: &str,
    version: u64,
    columns: &[&str],
) -> Result<DedupedColumns, StoreError> {
    let mut cols = vec!["seq", "timestamp_unix_ms", "event_id"];
    for c in columns {
        if !TEXT_COLUMNS.contains(c) && *c != "payload_json" {
            return Err(StoreError::Internal(format!("no events column {c}")));
        }
        if !cols.contains(c) {
            cols.push(c);
        }
    }
    let p = path.to_string();
    let read = cols.clone();
    let batches =
        runtime().block_on(async move { lance_io::scan(&p, version, &read, None).await })?;
    let mut ids: Vec<(u32, u32, &StringArray)> = Vec::with_capacity(batches.len());
    for (b, batch) in batches.iter().enumerate() {
        let a = batch
            .column(2)
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| StoreError::Corrupt("events: `event_id` is not Utf8".into()))?;
        ids.push((b as u32, batch.num_rows() as u32, a));
    }
    let positions: Vec<(u32, u32)> = ids
        .iter()
        .flat_map(|&(b, n, _)| (0..n).map(move |r| (b, r)))
        .collect();
    let copies = first_copies(
        ids.iter()
            .flat_map(|&(_, _, a)| (0..a.len()).map(move |r| (!a.is_null(r)).then(|| a.value(r)))),
    );
    let kept = copies
        .keep
        .into_iter()
        .map(|i| positions[i as usize])
        .collect();
    drop(ids);
    Ok(DedupedColumns {
        batches,
        kept,
        duplicates: copies.duplicates,
        last: copies.last,
    })
}

/// Rows read from `payload_json` in one request: enough to amortise a
/// read, few enough that a request holds a few MiB of records.
const RECORDS_PER_TAKE: usize = 2048;

/// Rows per batch read into a spool file.
const SPOOL_ROWS: usize = 1024;

/// A new file in the system's temporary directory, already removed from
/// it: its space is given back when the last handle closes, even after a
/// crash.
fn spool_file() -> Result<std::fs::File, StoreError> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("pchronicle-records-{}-{n}", std::process::id()));
    let file = std::fs::File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(spool_error)?;
    std::fs::remove_file(&path).map_err(spool_error)?;
    Ok(file)
}

fn spool_error(e: std::io::Error) -> StoreError {
    StoreError::Internal(format!("records spooled to a temporary file: {e}"))
}

/// The records `rows` (ascending, each once) of a spool file whose records
/// end at `ends`, as one text column. Records next to each other are read
/// in one go.
fn read_spooled(
    file: &std::fs::File,
    ends: &[u64],
    rows: &[u64],
) -> Result<StringArray, StoreError> {
    use std::os::unix::fs::FileExt;
    let span = |r: u64| -> Result<(u64, u64), StoreError> {
        let r = usize::try_from(r).ok().filter(|&r| r < ends.len());
        let r = r.ok_or_else(|| StoreError::Corrupt("events: a record is missing".into()))?;
        Ok((if r == 0 { 0 } else { ends[r - 1] }, ends[r]))
    };
    let mut texts = arrow::array::StringBuilder::new();
    let mut buf = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let mut j = i + 1;
        while j < rows.len() && rows[j] == rows[j - 1] + 1 {
            j += 1;
        }
        let (from, _) = span(rows[i])?;
        let (_, to) = span(rows[j - 1])?;
        buf.resize(
            usize::try_from(to - from).map_err(|e| StoreError::Internal(e.to_string()))?,
            0,
        );
        file.read_exact_at(&mut buf, from).map_err(spool_error)?;
        for &r in &rows[i..j] {
            let (a, b) = span(r)?;
            let bytes = &buf[(a - from) as usize..(b - from) as usize];
            let text = std::str::from_utf8(bytes)
                .map_err(|_| StoreError::Corrupt("events: a spooled record is not UTF-8".into()))?;
            texts.append_value(text);
        }
        i = j;
    }
    Ok(texts.finish())
}

/// Whether the records of the events table at `path` are read whole, in
/// storage order, rather than by row: on S3 (see [`RecordReader::open`]).
fn reads_whole(path: &str) -> bool {
    path.starts_with("s3://")
}

/// The `payload_json` of chosen rows of an events table at a pinned
/// version, read on demand: the projection of captured traffic reads the
/// envelope columns of every event, then the records a few sessions or
/// calls at a time, so it never holds every record's text.
pub enum RecordReader {
    /// Rows taken from the table as they are asked for.
    Table {
        /// The table at the pinned version.
        ds: Box<lance::Dataset>,
        /// `payload_json`.
        projection: lance::dataset::ProjectionRequest,
    },
    /// Every record, read once in storage order (a table on S3) into a
    /// file of the system's temporary directory, removed from it as soon
    /// as it is made, so it goes with the reader (or the process) whatever
    /// happens; and where each record ends in it.
    Spooled {
        /// The spool file.
        file: std::fs::File,
        /// Where each record ends in it, in storage order.
        ends: Vec<u64>,
    },
}

impl RecordReader {
    /// Open `path@version`. Its reads run on a runtime of their own, so
    /// that they go on while a store writer waits for the projection on
    /// the shared one (see `util::rt::reads_runtime`).
    ///
    /// A table on S3 is read whole, once, in storage order, into a spool
    /// file ([`RecordReader::spool`]): there a take
    /// pays round trips for every page it touches, and the rows of a group
    /// of sessions are spread over the whole table when sessions
    /// interleave (100,000 events of 2,000 interleaved sessions took 11.7 s
    /// to project by row on a loopback S3 server, 1.0 s read whole).
    pub fn open(path: &str, version: u64) -> Result<Self, StoreError> {
        if reads_whole(path) {
            return Self::spool(path, version);
        }
        let p = path.to_string();
        let ds = reads_runtime().block_on(async move { lance_io::open_at(&p, version).await })?;
        let projection = lance::dataset::ProjectionRequest::from_schema(
            ds.schema()
                .project(&["payload_json"])
                .map_err(lance_io::lance_err)?,
        );
        Ok(RecordReader::Table {
            ds: Box::new(ds),
            projection,
        })
    }

    /// Read every record of `path@version` in storage order into a
    /// spool file. The reader holds where each record ends, not its text,
    /// so the records of a store on S3 need not fit in memory.
    pub fn spool(path: &str, version: u64) -> Result<Self, StoreError> {
        use futures::StreamExt;
        use std::io::Write;
        let p = path.to_string();
        let mut stream = reads_runtime().block_on(async move {
            lance_io::scan_stream(&p, version, &["payload_json"], None, Some(SPOOL_ROWS)).await
        })?;
        let file = spool_file()?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, &file);
        let (mut ends, mut at) = (Vec::new(), 0u64);
        while let Some(b) = reads_runtime().block_on(stream.next()) {
            let b = b?;
            let a = b
                .column(0)
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| StoreError::Corrupt("events: `payload_json` is not Utf8".into()))?;
            for r in 0..a.len() {
                let v = if a.is_null(r) { "" } else { a.value(r) };
                out.write_all(v.as_bytes()).map_err(spool_error)?;
                at += v.len() as u64;
                ends.push(at);
            }
        }
        out.flush().map_err(spool_error)?;
        drop(out);
        Ok(RecordReader::Spooled { file, ends })
    }

    /// The records at `rows` (offsets in storage order, as
    /// [`read_deduped`]'s batches count them), in the order asked, kept
    /// in the buffers they were read into.
    fn record_arrays(&self, rows: &[u64]) -> Result<RecordArrays, StoreError> {
        // Read in storage order, each row once; hand back in the order asked.
        let mut sorted = rows.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let (arrays, places) = self.read(&sorted)?;
        let at = rows
            .iter()
            .map(|r| match sorted.binary_search(r) {
                Ok(i) => Ok(places[i]),
                Err(_) => Err(StoreError::Internal(format!("record {r} not read"))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RecordArrays { arrays, at })
    }

    /// The records at `rows` (ascending, each once) as one text column.
    pub fn column(&self, rows: &[u64]) -> Result<ArrayRef, StoreError> {
        if rows.windows(2).any(|w| w[0] >= w[1]) {
            return Err(StoreError::Internal("records asked out of order".into()));
        }
        let (arrays, places) = self.read(rows)?;
        let parts: Vec<&dyn Array> = arrays.iter().map(|a| a as &dyn Array).collect();
        let places: Vec<(usize, usize)> = places
            .iter()
            .map(|&(a, r)| (a as usize, r as usize))
            .collect();
        if parts.is_empty() {
            return Ok(arrow::array::new_empty_array(&DataType::Utf8));
        }
        arrow::compute::interleave(&parts, &places).map_err(arrow_error)
    }

    /// `payload_json` of `sorted` (ascending, each once): the arrays that
    /// hold them and, for each, which array and row.
    fn read(&self, sorted: &[u64]) -> Result<(Vec<StringArray>, Vec<(u32, u32)>), StoreError> {
        match self {
            RecordReader::Spooled { file, ends } => {
                let mut out = Vec::with_capacity(sorted.len().div_ceil(RECORDS_PER_TAKE));
                let mut places = Vec::with_capacity(sorted.len());
                for chunk in sorted.chunks(RECORDS_PER_TAKE) {
                    let n = out.len() as u32;
                    out.push(read_spooled(file, ends, chunk)?);
                    places.extend((0..chunk.len() as u32).map(|r| (n, r)));
                }
                Ok((out, places))
            }
            RecordReader::Table { ds, projection } => {
                let mut out = Vec::with_capacity(sorted.len().div_ceil(RECORDS_PER_TAKE));
                let mut places = Vec::with_capacity(sorted.len());
                for chunk in sorted.chunks(RECORDS_PER_TAKE) {
                    let batch = reads_runtime().block_on(ds.take(chunk, projection.clone()));
                    let batch = batch.map_err(lance_io::lance_err)?;
                    let a = batch
                        .column(0)
                        .as_any()
                        .downcast_ref::<StringArray>()
                        .ok_or_else(|| {
                            StoreError::Corrupt("events: `payload_json` is not Utf8".into())
                        })?;
                    if a.len() != chunk.len() {
                        return Err(StoreError::Corrupt(format!(
                            "events: {} of {} records read",
                            a.len(),
                            chunk.len()
                        )));
                    }
                    let n = out.len() as u32;
                    places.extend((0..chunk.len() as u32).map(|r| (n, r)));
                    out.push(a.clone());
                }
                Ok((out, places))
            }
        }
    }
}

impl crate::formats::events::RecordTexts for RecordReader {
    fn texts(
        &self,
        rows: &[u64],
    ) -> Result<Box<dyn crate::formats::events::TextList + '_>, String> {
        let texts = self.record_arrays(rows).map_err(|e| e.to_string())?;
        Ok(Box::new(texts))
    }
}

/// Records as read: the column buffers Lance returned, and where each
/// record asked for is in them, in the order asked.
struct RecordArrays {
    arrays: Vec<StringArray>,
    at: Vec<(u32, u32)>,
}

impl crate::formats::events::TextList for RecordArrays {
    fn len(&self) -> usize {
        self.at.len()
    }
    fn get(&self, i: usize) -> &str {
        let (a, r) = self.at[i];
        self.arrays[a as usize].value(r as usize)
    }
}

/// The envelope columns of `path@version`: `seq`, `timestamp_unix_ms`,
/// `event_id`, then `columns` (names of [`TEXT_COLUMNS`]), deduplicated as
/// [`first_copies`] does, with each row's count of further copies and its
/// row (for [`RecordReader`]). The payloads are
/// not read: every envelope column holds what the record says (see
/// [`events_batch`]), so the `events` relation needs them only for
/// `payload_json`.
pub fn read_envelopes(path: &str, version: u64, columns: &[&str]) -> Result<Envelopes, StoreError> {
    if let Some(c) = columns.iter().find(|c| !TEXT_COLUMNS.contains(c)) {
        return Err(StoreError::Internal(format!("no envelope column {c}")));
    }
    let read = read_deduped(path, version, columns)?;
    let schema = match read.batches.first() {
        Some(b) => b.schema(),
        None => {
            let mut names = vec!["seq", "timestamp_unix_ms", "event_id"];
            for c in columns {
                if !names.contains(c) {
                    names.push(c);
                }
            }
            Arc::new(
                events_table_schema()
                    .project(
                        &names
                            .iter()
                            .map(|c| events_table_schema().index_of(c))
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(|e| StoreError::Internal(e.to_string()))?,
                    )
                    .map_err(arrow_error)?,
            )
        }
    };
    let mut offsets = Vec::with_capacity(read.batches.len());
    let mut total = 0u32;
    for b in &read.batches {
        offsets.push(total);
        total += b.num_rows() as u32;
    }
    let keep: Vec<u32> = read
        .kept
        .iter()
        .map(|&(b, r)| offsets[b as usize] + r)
        .collect();
    let all = arrow::compute::concat_batches(&schema, &read.batches).map_err(arrow_error)?;
    let batch =
        arrow::compute::take_record_batch(&all, &arrow::array::UInt32Array::from(keep.clone()))
            .map_err(arrow_error)?;
    Ok(Envelopes {
        batch,
        duplicates: read.duplicates,
        rows: keep.into_iter().map(u64::from).collect(),
    })
}

/// What [`read_envelopes`] read.
pub struct Envelopes {
    /// The columns, one row per event (first copies, storage order).
    pub batch: RecordBatch,
    /// How many further copies each event has.
    pub duplicates: Vec<i64>,
    /// Each event's row, for [`RecordReader`] (ascending).
    pub rows: Vec<u64>,
}

fn arrow_error(e: arrow::error::ArrowError) -> StoreError {
    StoreError::Internal(e.to_string())
}

/// The largest `seq` stored at `path@version`.
pub fn max_seq(path: &str, version: u64) -> Result<Option<i64>, StoreError> {
    let p = path.to_string();
    let batches =
        runtime().block_on(async move { lance_io::scan(&p, version, &["seq"], None).await })?;
    let mut best: Option<i64> = None;
    for b in batches {
        if let Some(a) = b.column(0).as_any().downcast_ref::<Int64Array>() {
            for v in a.iter().flatten() {
                best = Some(best.map_or(v, |x: i64| x.max(v)));
            }
        }
    }
    Ok(best)
}

/// Compact the events table at `path` (merge small fragments into larger
/// ones) and remove versions older than `retention`. Returns (fragments
/// removed, fragments added, versions removed).
pub fn maintain(path: &str, retention: std::time::Duration) -> Result<(u64, u64, u64), StoreError> {
    use lance::dataset::optimize::{compact_files, CompactionOptions};
    let p = path.to_string();
    runtime().block_on(async move {
        let Some(version) = lance_io::latest_version(&p).await? else {
            return Ok((0, 0, 0));
        };
        let mut ds = lance_io::open_at(&p, version).await?;
        let m = compact_files(&mut ds, CompactionOptions::default(), None)
            .await
            .map_err(lance_io::lance_err)?;
        let older = chrono::TimeDelta::from_std(retention).unwrap_or(chrono::TimeDelta::MAX);
        let stats = ds
            .cleanup_old_versions(older, None, None)
            .await
            .map_err(lance_io::lance_err)?;
        Ok((
            m.fragments_removed as u64,
            m.fragments_added as u64,
            stats.old_versions,
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spooled_records_read_as_the_table_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.lance");
        let path = path.to_str().unwrap();
        // Records of every size, including ones far larger than a batch's
        // share, over two versions (two data files).
        let event = |seq: i64| {
            serde_json::json!({
                "seq": seq,
                "event_id": format!("e{seq}"),
                "session_id": format!("s{}", seq % 7),
                "kind": "http.request",
                "payload": {"body": "超时 ".repeat((seq as usize * 37) % 3_000)},
            })
        };
        append(path, &(0..1_500).map(event).collect::<Vec<_>>(), false).unwrap();
        let version = append(path, &(1_500..3_100).map(event).collect::<Vec<_>>(), true).unwrap();
        let table = RecordReader::open(path, version).unwrap();
        assert!(matches!(table, RecordReader::Table { .. }));
        let spooled = RecordReader::spool(path, version).unwrap();
        let rows: Vec<u64> = (0..3_100)
            .filter(|r| r % 3 != 1 || (1_000..1_100).contains(r))
            .collect();
        let (a, b) = (table.column(&rows).unwrap(), spooled.column(&rows).unwrap());
        assert_eq!(a.len(), rows.len());
        assert_eq!(a.as_ref(), b.as_ref());
        // Asked out of storage order: handed back in the order asked.
        use crate::formats::events::RecordTexts;
        let asked = [3_099, 0, 1_500, 1_499, 7];
        let (a, b) = (table.texts(&asked).unwrap(), spooled.texts(&asked).unwrap());
        for i in 0..asked.len() {
            assert_eq!(a.get(i), b.get(i));
            assert!(
                b.get(i).contains(&format!("\"seq\":{}", asked[i])),
                "{}",
                b.get(i)
            );
        }
        assert!(spooled.column(&[3_100]).is_err());
    }
}
