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
    Array, ArrayBuilder, ArrayRef, AsArray, GenericByteArray, GenericByteBuilder, Int64Array,
    LargeBinaryBuilder, StringBuilder,
};
use arrow::buffer::Buffer;
use arrow::datatypes::{ByteArrayType, DataType};
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
/// Short cells are searched for the marker in one pass first: looking at
/// each cell's first byte cost 2.7% of a sort of steps by cost (three
/// short text columns), and the marker is almost never there.
fn may_hold_descriptors<T: ByteArrayType<Offset = i32>>(s: &GenericByteArray<T>) -> bool {
    let data = s.value_data();
    if data.len() < s.len() * SHORT_CELLS && !data.contains(&(MARK as u8)) {
        return false;
    }
    s.value_offsets()
        .windows(2)
        .any(|w| w[0] < w[1] && data[w[0] as usize] == MARK as u8)
}

/// Bytes a cell holds on average, below which a column's buffer is searched
/// for the marker before its cells are looked at.
const SHORT_CELLS: usize = 64;

/// The descriptor a cell holds, if it is one. Text views a store keeps as
/// bytes hold descriptors too (a descriptor is ASCII).
fn descriptor_in(cell: &[u8]) -> Option<Result<(&str, usize), StoreError>> {
    cell.starts_with(PREFIX.as_bytes()).then(|| {
        std::str::from_utf8(cell)
            .ok()
            .and_then(parse_descriptor)
            .ok_or_else(|| StoreError::Corrupt("malformed object descriptor".into()))
    })
}

/// The cells of a text column, or of text kept as bytes, when any may be
/// a descriptor.
fn cells(col: &ArrayRef) -> Option<Box<dyn Iterator<Item = Option<&[u8]>> + '_>> {
    match col.data_type() {
        DataType::Utf8 => {
            let s = col.as_string::<i32>();
            may_hold_descriptors(s).then(|| Box::new(s.iter().map(|v| v.map(str::as_bytes))) as _)
        }
        DataType::Binary => {
            let s = col.as_binary::<i32>();
            may_hold_descriptors(s).then(|| Box::new(s.iter()) as _)
        }
        _ => None,
    }
}

/// True when `col` is a label column (a dictionary of text) one of whose
/// values is an object's descriptor.
pub fn label_holds_descriptor(col: &ArrayRef) -> bool {
    let Some(d) = col.as_any_dictionary_opt() else {
        return false;
    };
    d.values().as_string_opt::<i32>().is_some_and(|v| {
        may_hold_descriptors(v)
            && v.iter()
                .flatten()
                .any(|c| descriptor_in(c.as_bytes()).is_some())
    })
}

/// Content ids referenced by descriptors in `batches`.
pub fn referenced_ids(batches: &[RecordBatch]) -> HashSet<String> {
    let mut ids = HashSet::new();
    for b in batches {
        for col in b.columns() {
            for v in cells(col).into_iter().flatten().flatten() {
                if let Some(Ok((id, _))) = descriptor_in(v) {
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
    objects: &HashMap<String, Buffer>,
) -> Result<Vec<RecordBatch>, StoreError> {
    batches
        .into_iter()
        .map(|b| {
            let mut changed = false;
            let mut cols: Vec<ArrayRef> = Vec::with_capacity(b.num_columns());
            for col in b.columns() {
                let resolved = match col.data_type() {
                    DataType::Utf8 => resolve_column(col.as_string::<i32>(), objects, |b| {
                        std::str::from_utf8(b).ok()
                    })?,
                    DataType::Binary => {
                        resolve_column(col.as_binary::<i32>(), objects, |b| Some(b))?
                    }
                    _ => None,
                };
                changed |= resolved.is_some();
                cols.push(resolved.unwrap_or_else(|| col.clone()));
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

/// `s` with its descriptors replaced, or `None` when it has none. An
/// object's bytes are a value of the column's type as `native` reads them
/// (text is checked here, as objects are kept as bytes).
fn resolve_column<T>(
    s: &GenericByteArray<T>,
    objects: &HashMap<String, Buffer>,
    native: for<'a> fn(&'a [u8]) -> Option<&'a T::Native>,
) -> Result<Option<ArrayRef>, StoreError>
where
    T: ByteArrayType<Offset = i32>,
    T::Native: AsRef<[u8]> + AsRef<T::Native>,
{
    fn bytes<N: AsRef<[u8]> + ?Sized>(v: &N) -> &[u8] {
        v.as_ref()
    }
    if !may_hold_descriptors(s)
        || !s
            .iter()
            .flatten()
            .any(|v| descriptor_in(bytes(v)).is_some())
    {
        return Ok(None);
    }
    // Rebuilt in one buffer: a String per row would cost an allocation and
    // a copy for every small cell of the batch.
    let mut out = GenericByteBuilder::<T>::with_capacity(s.len(), s.value_data().len());
    for v in s {
        let Some(v) = v else {
            out.append_null();
            continue;
        };
        let Some(d) = descriptor_in(bytes(v)) else {
            out.append_value(v);
            continue;
        };
        let (id, len) = d?;
        let object = objects
            .get(id)
            .ok_or_else(|| StoreError::Corrupt(format!("object {id} is missing")))?;
        if object.len() != len {
            return Err(StoreError::Corrupt(format!(
                "object {id} has the wrong length"
            )));
        }
        let value = native(object)
            .ok_or_else(|| StoreError::Corrupt(format!("object {id} is not UTF-8")))?;
        out.append_value(value);
    }
    Ok(Some(Arc::new(out.finish())))
}

/// Turn rows of the objects table into a map, verifying every hash. The
/// payloads stay bytes, in the buffers they were read into: they are
/// checked as text where they resolve a text column.
pub fn load_objects(batches: &[RecordBatch]) -> Result<HashMap<String, Buffer>, StoreError> {
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
            let (start, end) = (payload.value_offsets()[i], payload.value_offsets()[i + 1]);
            let at = |o: i64| usize::try_from(o).unwrap_or(0);
            let object = payload
                .values()
                .slice_with_length(at(start), at(end - start));
            out.insert(id.to_string(), object);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::StringArray;
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

    /// A column of short cells is searched for the marker as a whole: a
    /// descriptor among them is still found and resolved, and without one
    /// the column is handed on as it is.
    #[test]
    fn a_descriptor_among_short_cells_is_found() {
        let marked = format!("{MARK}model");
        let mut cells: Vec<String> = (0..500).map(|i| format!("m{i}")).collect();
        cells[250] = marked.clone();
        let schema = Arc::new(Schema::new(vec![Field::new("t", DataType::Utf8, true)]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(StringArray::from(cells.clone()))],
        )
        .unwrap();
        let mut sink = ObjectSink::default();
        let stored = sink.offload(batch.clone()).unwrap();
        let s = stored.column(0).as_string::<i32>();
        assert!(s.value_data().len() < s.len() * SHORT_CELLS);
        assert_eq!(referenced_ids(std::slice::from_ref(&stored)).len(), 1);
        let objects = load_objects(&[sink.drain().unwrap()]).unwrap();
        assert_eq!(resolve(vec![stored], &objects).unwrap()[0], batch);
        cells[250] = "m250".into();
        let plain = RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(cells))]).unwrap();
        let back = resolve(vec![plain.clone()], &objects).unwrap();
        assert!(Arc::ptr_eq(back[0].column(0), plain.column(0)));
    }

    /// Text views a store keeps as bytes hold descriptors as text columns
    /// do: they are found (the objects' collection keeps what they name)
    /// and resolved, into bytes.
    #[test]
    fn descriptors_in_text_kept_as_bytes_are_found_and_resolved() {
        let big = "Traceback 超时 ".repeat(OBJECT_INLINE_LIMIT / 8);
        let texts = [Some("small"), None, Some(big.as_str())];
        let schema = Arc::new(Schema::new(vec![Field::new("t", DataType::Utf8, true)]));
        let col: StringArray = texts.iter().copied().collect();
        let batch = RecordBatch::try_new(schema, vec![Arc::new(col)]).unwrap();
        let mut sink = ObjectSink::default();
        let stored = sink.offload(batch).unwrap();
        let as_bytes = |b: &RecordBatch| {
            let c = arrow::array::BinaryArray::from(b.column(0).as_string::<i32>().clone());
            let schema = Schema::new(vec![Field::new("t", DataType::Binary, true)]);
            RecordBatch::try_new(Arc::new(schema), vec![Arc::new(c)]).unwrap()
        };
        let bytes = as_bytes(&stored);
        assert_eq!(
            referenced_ids(std::slice::from_ref(&bytes)),
            referenced_ids(&[stored])
        );
        assert_eq!(referenced_ids(std::slice::from_ref(&bytes)).len(), 1);
        let objects = load_objects(&[sink.drain().unwrap()]).unwrap();
        let back = resolve(vec![bytes.slice(1, 2)], &objects).unwrap();
        let back = back[0].column(0).as_binary::<i32>();
        assert_eq!(
            back.iter().collect::<Vec<_>>(),
            [None, Some(big.as_bytes())]
        );
        // A cell that starts like a descriptor and is not one.
        let bad = as_bytes(
            &RecordBatch::try_new(
                Arc::new(Schema::new(vec![Field::new("t", DataType::Utf8, true)])),
                vec![Arc::new(StringArray::from(vec![format!("{PREFIX}zz:1")]))],
            )
            .unwrap(),
        );
        let e = resolve(vec![bad], &objects).unwrap_err();
        assert!(matches!(e, StoreError::Corrupt(_)), "{e}");
    }

    /// Objects are kept as bytes: one that is not UTF-8 resolves text kept
    /// as bytes, and is an error where it would be text.
    #[test]
    fn an_object_is_checked_as_text_only_where_it_becomes_text() {
        let bytes = vec![0xff_u8; 10];
        let id = blake3::hash(&bytes).to_hex().to_string();
        let objects = HashMap::from([(id.clone(), Buffer::from_vec(bytes.clone()))]);
        let cell = descriptor(&id, bytes.len());
        let batch = |ty: DataType| {
            let col: ArrayRef = match ty {
                DataType::Utf8 => Arc::new(StringArray::from(vec![cell.as_str()])),
                _ => Arc::new(arrow::array::BinaryArray::from(vec![cell.as_bytes()])),
            };
            RecordBatch::try_new(
                Arc::new(Schema::new(vec![Field::new("t", ty, true)])),
                vec![col],
            )
            .unwrap()
        };
        let back = resolve(vec![batch(DataType::Binary)], &objects).unwrap();
        assert_eq!(back[0].column(0).as_binary::<i32>().value(0), &bytes[..]);
        let e = resolve(vec![batch(DataType::Utf8)], &objects).unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
    }
}
