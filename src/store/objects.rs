//! Content-addressed storage of large cells.
//!
//! A text cell of at least [`OBJECT_INLINE_LIMIT`] bytes is stored once in
//! the `objects` table under the BLAKE3 hash of its bytes and replaced in
//! its row by a descriptor `\x1Epco1:<hash>:<length>`. A cell that happens to
//! start with the descriptor marker is always offloaded, so a descriptor can
//! never be confused with user text. Readers resolve descriptors before any
//! value leaves the store.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, LargeBinaryArray, StringArray, StringBuilder,
};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;

use super::StoreError;

/// Cells at least this long (bytes) are stored as objects.
pub const OBJECT_INLINE_LIMIT: usize = 64 * 1024;

const MARK: char = '\u{1e}';
const PREFIX: &str = "\u{1e}pco1:";

/// True when a stored cell is an object descriptor.
pub fn is_descriptor(s: &str) -> bool {
    s.starts_with(PREFIX)
}

fn descriptor(id: &str, len: usize) -> String {
    format!("{PREFIX}{id}:{len}")
}

fn parse_descriptor(s: &str) -> Option<(&str, usize)> {
    let rest = s.strip_prefix(PREFIX)?;
    let (id, len) = rest.split_once(':')?;
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(())?;
    Some((id, len.parse().ok()?))
}

/// Objects collected while writing (deduplicated by content id).
#[derive(Debug, Default)]
pub struct ObjectSink {
    seen: HashSet<String>,
    pending: Vec<(String, Vec<u8>)>,
    pending_bytes: usize,
    /// Objects written in total.
    pub count: u64,
}

impl ObjectSink {
    /// Replace large cells of `batch` by descriptors, collecting the objects.
    pub fn offload(&mut self, batch: RecordBatch) -> Result<RecordBatch, StoreError> {
        let mut cols: Vec<ArrayRef> = Vec::with_capacity(batch.num_columns());
        let mut changed = false;
        for col in batch.columns() {
            if col.data_type() != &DataType::Utf8 {
                cols.push(col.clone());
                continue;
            }
            let s = col.as_string::<i32>();
            let needs = (0..s.len()).any(|i| {
                s.is_valid(i)
                    && (s.value(i).len() >= OBJECT_INLINE_LIMIT || s.value(i).starts_with(MARK))
            });
            if !needs {
                cols.push(col.clone());
                continue;
            }
            changed = true;
            let out: StringArray = (0..s.len())
                .map(|i| {
                    if s.is_null(i) {
                        return None;
                    }
                    let v = s.value(i);
                    if v.len() < OBJECT_INLINE_LIMIT && !v.starts_with(MARK) {
                        return Some(v.to_string());
                    }
                    let id = blake3::hash(v.as_bytes()).to_hex().to_string();
                    if self.seen.insert(id.clone()) {
                        self.pending_bytes += v.len();
                        self.pending.push((id.clone(), v.as_bytes().to_vec()));
                        self.count += 1;
                    }
                    Some(descriptor(&id, v.len()))
                })
                .collect();
            cols.push(Arc::new(out));
        }
        if !changed {
            return Ok(batch);
        }
        RecordBatch::try_new(batch.schema(), cols).map_err(|e| StoreError::Internal(e.to_string()))
    }

    /// Bytes waiting to be written.
    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }

    /// Take the pending objects as a batch of the objects table.
    pub fn drain(&mut self) -> Option<RecordBatch> {
        if self.pending.is_empty() {
            return None;
        }
        let items = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        let ids: StringArray = items.iter().map(|(id, _)| Some(id.as_str())).collect();
        let lens: Int64Array = items.iter().map(|(_, b)| b.len() as i64).collect();
        let payload: LargeBinaryArray = items.iter().map(|(_, b)| Some(b.as_slice())).collect();
        RecordBatch::try_new(
            super::schema::objects_schema(),
            vec![Arc::new(ids), Arc::new(lens), Arc::new(payload)],
        )
        .ok()
    }
}

/// False when no cell of `s` can be a descriptor: none starts with the
/// marker. A descriptor is always a whole cell, and no stored text starts
/// with the marker (`offload`), so the first byte of each cell tells. A
/// search of the whole buffer cost 4% of a scan of tool output; parsing
/// each cell cost a few percent of a scan of short text such as model names.
fn may_hold_descriptors(s: &StringArray) -> bool {
    let data = s.value_data();
    s.value_offsets()
        .windows(2)
        .any(|w| w[0] < w[1] && data[w[0] as usize] == MARK as u8)
}

/// Content ids referenced by descriptors in `batches`.
pub fn referenced_ids(batches: &[RecordBatch]) -> HashSet<String> {
    let mut ids = HashSet::new();
    for b in batches {
        for col in b.columns() {
            if col.data_type() != &DataType::Utf8 {
                continue;
            }
            let s = col.as_string::<i32>();
            if !may_hold_descriptors(s) {
                continue;
            }
            for v in s.iter().flatten() {
                if let Some((id, _)) = parse_descriptor(v) {
                    ids.insert(id.to_string());
                }
            }
        }
    }
    ids
}

/// Replace descriptors in `batches` with the objects' text (checked against
/// their hash and length).
pub fn resolve(
    batches: Vec<RecordBatch>,
    objects: &HashMap<String, Arc<str>>,
) -> Result<Vec<RecordBatch>, StoreError> {
    batches
        .into_iter()
        .map(|b| {
            let mut changed = false;
            let mut cols: Vec<ArrayRef> = Vec::with_capacity(b.num_columns());
            for col in b.columns() {
                if col.data_type() != &DataType::Utf8 {
                    cols.push(col.clone());
                    continue;
                }
                let s = col.as_string::<i32>();
                if !may_hold_descriptors(s) || !s.iter().flatten().any(is_descriptor) {
                    cols.push(col.clone());
                    continue;
                }
                changed = true;
                // Rebuilt in one buffer: a String per row would cost an
                // allocation and a copy for every small cell of the batch.
                let mut out = StringBuilder::with_capacity(s.len(), s.value_data().len());
                for v in s {
                    match v {
                        Some(d) if is_descriptor(d) => {
                            let (id, len) = parse_descriptor(d).ok_or_else(|| {
                                StoreError::Corrupt("malformed object descriptor".into())
                            })?;
                            let text = objects.get(id).ok_or_else(|| {
                                StoreError::Corrupt(format!("object {id} is missing"))
                            })?;
                            if text.len() != len {
                                return Err(StoreError::Corrupt(format!(
                                    "object {id} has the wrong length"
                                )));
                            }
                            out.append_value(&**text);
                        }
                        other => out.append_option(other),
                    }
                }
                cols.push(Arc::new(out.finish()));
            }
            if changed {
                RecordBatch::try_new(b.schema(), cols)
                    .map_err(|e| StoreError::Internal(e.to_string()))
            } else {
                Ok(b)
            }
        })
        .collect()
}

/// Turn rows of the objects table into a map, verifying every hash.
pub fn load_objects(batches: &[RecordBatch]) -> Result<HashMap<String, Arc<str>>, StoreError> {
    let mut out = HashMap::new();
    for b in batches {
        let column = |name: &str| {
            b.column_by_name(name)
                .ok_or_else(|| StoreError::Corrupt(format!("objects rows without `{name}`")))
        };
        let ids = column("content_id")?.as_string::<i32>();
        let payload = column("payload")?.as_binary::<i64>();
        for i in 0..b.num_rows() {
            let bytes = payload.value(i);
            let id = ids.value(i);
            if blake3::hash(bytes).to_hex().as_str() != id {
                return Err(StoreError::Corrupt(format!(
                    "object {id} does not match its hash"
                )));
            }
            let text = std::str::from_utf8(bytes)
                .map_err(|_| StoreError::Corrupt(format!("object {id} is not UTF-8")))?;
            out.insert(id.to_string(), Arc::from(text));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{Field, Schema};

    #[test]
    fn large_and_marked_cells_round_trip() {
        let big = "超时".repeat(OBJECT_INLINE_LIMIT);
        let marked = format!("{MARK}looks like a marker");
        let schema = Arc::new(Schema::new(vec![Field::new("t", DataType::Utf8, true)]));
        let col: StringArray = vec![
            Some("small"),
            Some(big.as_str()),
            None,
            Some(marked.as_str()),
            Some(big.as_str()),
        ]
        .into_iter()
        .collect();
        let batch = RecordBatch::try_new(schema, vec![Arc::new(col)]).unwrap();
        let mut sink = ObjectSink::default();
        let stored = sink.offload(batch.clone()).unwrap();
        assert_eq!(sink.count, 2, "the big cell is stored once");
        let s = stored.column(0).as_string::<i32>();
        assert_eq!(s.value(0), "small");
        assert!(is_descriptor(s.value(1)) && is_descriptor(s.value(3)));
        let objects = load_objects(&[sink.drain().unwrap()]).unwrap();
        // A slice of the batch, whose cells start inside the buffer.
        let part = resolve(vec![stored.slice(2, 3)], &objects).unwrap();
        assert_eq!(part[0], batch.slice(2, 3));
        let back = resolve(vec![stored], &objects).unwrap();
        assert_eq!(back[0], batch);
        assert_eq!(referenced_ids(&back).len(), 0);
    }
}
