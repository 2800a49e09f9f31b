//! Fetching large cells from a pinned `objects` table by content id.
//!
//! A scan resolves the descriptors of each batch as it goes. Filtering the
//! objects table per batch opened it, planned a filter and read every id
//! again each time (23 times for a `LIKE` over the tool output of the
//! 1M-step benchmark store). The table is opened once per reader instead,
//! its ids are read once into a map from id to row, and each batch takes
//! only the rows it references. A table with more objects than
//! [`MAX_MAPPED_OBJECTS`] is not mapped, so that a reader's memory does not
//! grow with the store: each batch's objects are found with a filter on the
//! table opened once.

use std::collections::{HashMap, HashSet};

use arrow::array::AsArray;
use futures::StreamExt as _;
use lance::dataset::ProjectionRequest;
use lance::Dataset;

use super::lance_io::{lance_err, open_at, project, sequential_reads};
use super::objects::load_objects;
use super::StoreError;

/// Objects fetched by one take. It bounds how many objects a take reads
/// at once, not their bytes: each is at least 64 KiB, and the batch being
/// resolved holds all of them anyway once its descriptors are replaced.
const OBJECTS_PER_TAKE: usize = 64;

/// Objects whose rows a reader keeps in memory: 41 bytes a slot in a table
/// of at most 2^19 slots, about 21 MiB per reader, reached by a table of at
/// least 16 GiB of large cells.
pub const MAX_MAPPED_OBJECTS: usize = 1 << 18;

/// Ids per filter of a table too large to map.
const IDS_PER_FILTER: usize = 512;

/// The objects table of one snapshot, open, with the row of every id.
pub struct ObjectReader {
    ds: Dataset,
    /// The columns a take reads: the id (checked against the payload's
    /// hash) and the payload.
    projection: ProjectionRequest,
    /// Row offset of each content id (the id's 32 hash bytes); `None` for a
    /// table of more than [`MAX_MAPPED_OBJECTS`] objects.
    rows: Option<HashMap<[u8; 32], u64>>,
}

impl std::fmt::Debug for ObjectReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectReader")
            .field("mapped", &self.rows.as_ref().map(HashMap::len))
            .finish_non_exhaustive()
    }
}

/// The hash bytes of a hex content id (None: not an id).
fn id_key(id: &str) -> Option<[u8; 32]> {
    let bytes = id.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut key = [0u8; 32];
    for (k, pair) in key.iter_mut().zip(bytes.chunks_exact(2)) {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        *k = (hi * 16 + lo) as u8;
    }
    Some(key)
}

impl ObjectReader {
    /// Open `path@version` and read its ids.
    pub async fn open(path: &str, version: u64) -> Result<Self, StoreError> {
        Self::open_mapping(path, version, MAX_MAPPED_OBJECTS).await
    }

    /// Open `path@version`, mapping its ids when it has at most `max_mapped`
    /// objects.
    pub async fn open_mapping(
        path: &str,
        version: u64,
        max_mapped: usize,
    ) -> Result<Self, StoreError> {
        let ds = open_at(path, version).await?;
        crate::util::stats::add(
            crate::util::stats::Counter::FilesOpened,
            ds.fragments().len() as u64,
        );
        // A table without these columns fails here, not in a take.
        let projection = ProjectionRequest::from_schema(
            ds.schema()
                .project(&["content_id", "payload"])
                .map_err(lance_err)?,
        );
        // Counted from the manifest, without reading the table.
        let n = ds.count_rows(None).await.map_err(lance_err)?;
        if n > max_mapped {
            return Ok(ObjectReader {
                ds,
                projection,
                rows: None,
            });
        }
        let mut scanner = ds.scan();
        scanner.scan_in_order(true);
        scanner.with_file_reader_options(sequential_reads());
        project(&mut scanner, &ds, &["content_id"])?;
        let mut stream = scanner.try_into_stream().await.map_err(lance_err)?;
        let mut rows = HashMap::with_capacity(n);
        let mut offset = 0u64;
        while let Some(b) = stream.next().await {
            let b = b.map_err(lance_err)?;
            let ids = b.column(0).as_string_opt::<i32>().ok_or_else(|| {
                StoreError::Corrupt("the objects table's ids are not text".into())
            })?;
            for id in ids {
                let key = id.and_then(id_key).ok_or_else(|| {
                    StoreError::Corrupt("the objects table holds a malformed id".into())
                })?;
                rows.insert(key, offset);
                offset += 1;
            }
        }
        Ok(ObjectReader {
            ds,
            projection,
            rows: Some(rows),
        })
    }

    /// The bytes of each object in `ids`, verified against its hash.
    pub async fn fetch(
        &self,
        ids: &HashSet<String>,
    ) -> Result<HashMap<String, arrow::buffer::Buffer>, StoreError> {
        let Some(rows) = &self.rows else {
            return self.fetch_filtered(ids).await;
        };
        let mut offsets = Vec::with_capacity(ids.len());
        for id in ids {
            let row = id_key(id).and_then(|k| rows.get(&k));
            offsets
                .push(*row.ok_or_else(|| StoreError::Corrupt(format!("object {id} is missing")))?);
        }
        // Storage order reads each page once.
        offsets.sort_unstable();
        let mut out = HashMap::with_capacity(ids.len());
        for chunk in offsets.chunks(OBJECTS_PER_TAKE) {
            let batch = self
                .ds
                .take(chunk, self.projection.clone())
                .await
                .map_err(lance_err)?;
            out.extend(load_objects(&[batch])?);
        }
        Ok(out)
    }

    /// The objects of `ids` found with a filter on the id: for a table too
    /// large to map. An id the table lacks is left out; `resolve` reports
    /// it.
    async fn fetch_filtered(
        &self,
        ids: &HashSet<String>,
    ) -> Result<HashMap<String, arrow::buffer::Buffer>, StoreError> {
        let mut ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        ids.sort_unstable();
        let mut out = HashMap::with_capacity(ids.len());
        for chunk in ids.chunks(IDS_PER_FILTER) {
            // Only well-formed hex ids are quoted into the filter.
            let listed: Vec<String> = chunk
                .iter()
                .filter(|id| id_key(id).is_some())
                .map(|id| format!("'{id}'"))
                .collect();
            if listed.is_empty() {
                continue;
            }
            let mut scanner = self.ds.scan();
            scanner.with_file_reader_options(sequential_reads());
            project(&mut scanner, &self.ds, &["content_id", "payload"])?;
            scanner
                .filter(&format!("content_id IN ({})", listed.join(",")))
                .map_err(lance_err)?;
            let mut stream = scanner.try_into_stream().await.map_err(lance_err)?;
            while let Some(b) = stream.next().await {
                out.extend(load_objects(&[b.map_err(lance_err)?])?);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::lance_io::{append_table, runtime, ChannelReader};
    use crate::store::objects::{is_descriptor, resolve, ObjectSink, OBJECT_INLINE_LIMIT};
    use arrow::array::{Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    use std::sync::Arc;

    #[test]
    fn ids_are_read_as_their_hash_bytes() {
        let id = blake3::hash(b"x").to_hex();
        assert_eq!(id_key(id.as_str()), Some(*blake3::hash(b"x").as_bytes()));
        assert_eq!(id_key(&id.as_str()[1..]), None);
        assert_eq!(id_key(&"g".repeat(64)), None);
    }

    /// Objects written by the store's sink are fetched by id across more
    /// than one take, in any order, and an id the table lacks is an error.
    #[test]
    fn objects_are_taken_by_id() {
        let texts: Vec<String> = (0..OBJECTS_PER_TAKE * 3 + 5)
            .map(|i| format!("{i:06} ").repeat(OBJECT_INLINE_LIMIT / 7 + 1 + i))
            .collect();
        let schema = Arc::new(Schema::new(vec![Field::new("t", DataType::Utf8, true)]));
        let batch = RecordBatch::try_new(
            schema,
            vec![Arc::new(StringArray::from_iter_values(texts.iter().rev()))],
        )
        .unwrap();
        let mut sink = ObjectSink::default();
        let stored = sink.offload(batch).unwrap();
        let descriptors = stored
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert!(descriptors.iter().flatten().all(is_descriptor));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("objects.lance").display().to_string();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let objects = sink.drain().unwrap();
        let schema = objects.schema();
        tx.send(objects).unwrap();
        drop(tx);
        let version = runtime()
            .block_on(append_table(&path, ChannelReader { schema, rx }, false))
            .unwrap();
        let ids = crate::store::objects::referenced_ids(std::slice::from_ref(&stored));
        assert_eq!(ids.len(), texts.len());
        let want: Vec<&str> = texts.iter().rev().map(String::as_str).collect();
        let absent_id = blake3::hash(b"absent").to_hex().to_string();
        let absent = HashSet::from([absent_id.clone()]);
        // Mapped, and too large to map (found by a filter).
        for max_mapped in [MAX_MAPPED_OBJECTS, 0] {
            let reader = runtime()
                .block_on(ObjectReader::open_mapping(&path, version, max_mapped))
                .unwrap();
            assert_eq!(reader.rows.is_some(), max_mapped > 0);
            let fetched = runtime().block_on(reader.fetch(&ids)).unwrap();
            let back = resolve(vec![stored.clone()], &fetched).unwrap();
            let back = back[0]
                .column(0)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            let back: Vec<&str> = back.iter().flatten().collect();
            assert_eq!(back, want, "max_mapped {max_mapped}");
            // An id the table lacks is never resolved.
            match runtime().block_on(reader.fetch(&absent)) {
                Err(e) => assert!(e.to_string().contains("is missing"), "{e}"),
                Ok(found) => assert!(!found.contains_key(&absent_id)),
            }
        }
    }

    /// A table that is not an objects table is an error when opened, not a
    /// panic in a take.
    #[test]
    fn a_table_without_payloads_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("objects.lance").display().to_string();
        let schema = Arc::new(Schema::new(vec![Field::new(
            "content_id",
            DataType::Utf8,
            false,
        )]));
        let id = blake3::hash(b"x").to_hex().to_string();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(StringArray::from(vec![id.as_str()]))],
        )
        .unwrap();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        tx.send(batch).unwrap();
        drop(tx);
        let version = runtime()
            .block_on(append_table(&path, ChannelReader { schema, rx }, false))
            .unwrap();
        assert!(runtime()
            .block_on(ObjectReader::open(&path, version))
            .is_err());
    }
}
