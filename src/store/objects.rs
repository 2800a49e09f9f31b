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
    Array, ArrayBuilder, ArrayRef, AsArray, Int64Array, LargeBinaryBuilder, StringArray,
    StringBuilder,
};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;

use super::StoreError;

/// Cells at least this long (bytes) are stored as objects.
pub const OBJECT_INLINE_LIMIT: usize = 64 * 1024;

const MARK: char = '\u{1e}';
const PREFIX: &str = "\u{1e}pco1:";
/// The longest descriptor: the prefix, 64 hex digits, `:` and a length.
const DESCRIPTOR_MAX: usize = PREFIX.len() + 64 + 1 + 20;

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

/// True when cell `v` is stored as an object: it is large, or it starts
/// with the descriptor marker and so could be mistaken for a descriptor.
fn offloaded(v: &str) -> bool {
    v.len() >= OBJECT_INLINE_LIMIT || v.starts_with(MARK)
}

/// Objects collected while writing (deduplicated by content id).
///
/// Their bytes are copied once, straight into the buffers of the objects
/// table's next batch: holding each as its own `Vec` and gathering them at
/// the flush held every object twice for a moment.
#[derive(Debug, Default)]
pub struct ObjectSink {
    seen: HashSet<String>,
    ids: StringBuilder,
    payload: LargeBinaryBuilder,
    /// Objects written in total.
    pub count: u64,
}

impl ObjectSink {
    /// Replace large cells of `batch` by descriptors, collecting the objects.
    /// Only the text columns that hold such a cell are rebuilt.
    pub fn offload(&mut self, batch: RecordBatch) -> Result<RecordBatch, StoreError> {
        let mut cols: Vec<ArrayRef> = Vec::with_capacity(batch.num_columns());
        let mut changed = false;
        for col in batch.columns() {
            if col.data_type() != &DataType::Utf8 {
                cols.push(col.clone());
                continue;
            }
            let s = col.as_string::<i32>();
            let (moved, count) = s
                .iter()
                .flatten()
                .filter(|v| offloaded(v))
                .fold((0, 0), |(bytes, n), v| (bytes + v.len(), n + 1));
            if count == 0 {
                cols.push(col.clone());
                continue;
            }
            changed = true;
            // One buffer of the size the column will have: the cells that
            // stay, plus a short descriptor for each that moves.
            let kept = s.value_data().len().saturating_sub(moved);
            let mut out = StringBuilder::with_capacity(s.len(), kept + count * DESCRIPTOR_MAX);
            for v in s {
                match v {
                    Some(v) if offloaded(v) => {
                        let id = blake3::hash(v.as_bytes()).to_hex().to_string();
                        out.append_value(descriptor(&id, v.len()));
                        if self.seen.insert(id.clone()) {
                            self.ids.append_value(&id);
                            self.payload.append_value(v.as_bytes());
                            self.count += 1;
                        }
                    }
                    other => out.append_option(other),
                }
            }
            cols.push(Arc::new(out.finish()));
        }
        if !changed {
            return Ok(batch);
        }
        RecordBatch::try_new(batch.schema(), cols).map_err(|e| StoreError::Internal(e.to_string()))
    }

    /// Bytes waiting to be written.
    pub fn pending_bytes(&self) -> usize {
        self.payload.values_slice().len()
    }

    /// Take the pending objects as a batch of the objects table.
    pub fn drain(&mut self) -> Option<RecordBatch> {
        if self.ids.is_empty() {
            return None;
        }
        let payload = self.payload.finish();
        let lens: Int64Array = payload.iter().map(|b| b.map(|b| b.len() as i64)).collect();
        RecordBatch::try_new(
            super::schema::objects_schema(),
            vec![
                Arc::new(self.ids.finish()),
                Arc::new(lens),
                Arc::new(payload),
            ],
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
        let schema = Arc::new(Schema::new(vec![
            Field::new("t", DataType::Utf8, true),
            Field::new("other", DataType::Utf8, true),
        ]));
        let other: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c", "d", "e"]));
        let col: StringArray = vec![
            Some("small"),
            Some(big.as_str()),
            None,
            Some(marked.as_str()),
            Some(big.as_str()),
        ]
        .into_iter()
        .collect();
        let batch = RecordBatch::try_new(schema, vec![Arc::new(col), other.clone()]).unwrap();
        let mut sink = ObjectSink::default();
        let stored = sink.offload(batch.clone()).unwrap();
        assert_eq!(sink.count, 2, "the big cell is stored once");
        assert_eq!(sink.pending_bytes(), big.len() + marked.len());
        // A column without such cells is passed on, not copied.
        assert!(Arc::ptr_eq(stored.column(1), &other));
        let s = stored.column(0).as_string::<i32>();
        assert_eq!(s.value(0), "small");
        assert!(is_descriptor(s.value(1)) && is_descriptor(s.value(3)));
        let drained = sink.drain().unwrap();
        assert_eq!(sink.pending_bytes(), 0);
        assert!(sink.drain().is_none(), "nothing is written twice");
        let lens = drained
            .column(1)
            .as_primitive::<arrow::datatypes::Int64Type>();
        assert_eq!(lens.values(), &[big.len() as i64, marked.len() as i64]);
        let objects = load_objects(&[drained]).unwrap();
        // A slice of the batch, whose cells start inside the buffer.
        let part = resolve(vec![stored.slice(2, 3)], &objects).unwrap();
        assert_eq!(part[0], batch.slice(2, 3));
        let back = resolve(vec![stored], &objects).unwrap();
        assert_eq!(back[0], batch);
        assert_eq!(referenced_ids(&back).len(), 0);
    }
}
