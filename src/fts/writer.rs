//! The index writer: one tantivy document per row of a steps batch.

use std::sync::atomic::{AtomicU64, Ordering};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, TimestampNanosecondType};
use tantivy::{IndexWriter, TantivyDocument, Term};

use super::queued::{Gauge, Queued};
use super::schema::{
    step_order, Fields, CALL_OUTPUT_COLUMN, JSON_FAST_MAX_BYTES, JSON_IN_STORE, OBSERVATION,
};
use super::FtsError;

/// The indexing buffer of each writer thread, after which it writes a
/// segment. Both threads' buffers are full at the index build's peak, which
/// is import's: 64 MB made the 1M-step import peak at 1,034 MiB against
/// 832 MiB with 32 MB (when documents were held far longer than now), and
/// 24 MB instead of 32 MB lowered the 5M-step import by 13–18 MiB for 4–8%
/// of the index build's time (docs/benchmarks.md). The segments are
/// merged when the writer finishes.
const BUFFER_BYTES_PER_THREAD: usize = 24_000_000;

/// Segments with more steps than this are not merged again. A merge reads
/// every byte of its input segments; uncapped, tantivy's merges grow with
/// the index (a 5M-step import merged segments of 170,000 steps, eight at
/// a time, and peaked at 1,519 MiB, then 343 MiB with the cap and reads
/// without memory maps, see `build_dir`). With the cap, a merge takes the
/// segments one writer buffer fills (about 20,000 steps each here) and
/// stops one level above them: a 1M-step index keeps about 8 segments, a
/// 5M-step one about 30 (`find` on 44 segments took 20–30 ms against
/// 10–20 ms on 9; docs/benchmarks.md).
const MAX_DOCS_TO_MERGE: usize = 100_000;

/// Segments merged into one, as tantivy's log merge policy does by default.
const SEGMENTS_PER_MERGE: usize = 8;

/// Adds steps to an index. `add_batch` may be called from several threads.
pub struct Writer {
    writer: IndexWriter<Queued>,
    /// The text waiting in tantivy's queue.
    queued: Gauge,
    fields: Fields,
    steps: AtomicU64,
    text_bytes: AtomicU64,
}

impl Writer {
    /// A writer on `index` with `threads` indexing threads.
    pub(crate) fn new(
        index: &tantivy::Index,
        fields: Fields,
        threads: usize,
    ) -> Result<Writer, FtsError> {
        let threads = threads.clamp(1, 8);
        let options = tantivy::indexer::IndexWriterOptions::builder()
            .memory_budget_per_thread(BUFFER_BYTES_PER_THREAD)
            .num_worker_threads(threads)
            .num_merge_threads(threads)
            .build();
        let writer = index.writer_with_options(options)?;
        // Segments are merged in `finish`, once the indexing buffers and
        // the scans feeding them are gone: merging while indexing added
        // its own memory to theirs at the peak of an import.
        writer.set_merge_policy(Box::new(tantivy::merge_policy::NoMergePolicy));
        Ok(Writer {
            writer,
            queued: Gauge::default(),
            fields,
            steps: AtomicU64::new(0),
            text_bytes: AtomicU64::new(0),
        })
    }

    /// Remove every step of `source_path`.
    pub fn delete_source(&self, source_path: &str) {
        self.writer
            .delete_term(Term::from_field_text(self.fields.src, source_path));
    }

    /// Add the rows of one steps batch (projected to
    /// [`BUILD_COLUMNS`](super::BUILD_COLUMNS), in that order, optionally
    /// followed by [`CALL_OUTPUT_COLUMN`]). A step's
    /// place in its Source is its document's position and its own.
    pub fn add_batch(&self, batch: &RecordBatch) -> Result<(), FtsError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let f = &self.fields;
        let text = |i: usize| batch.column(i).as_string_opt::<i32>();
        let (Some(src), Some(doc)) = (text(0), text(1)) else {
            return Err(tantivy::TantivyError::InvalidArgument(
                "steps batch without source_path/document_id".into(),
            )
            .into());
        };
        let run = text(2);
        let session = text(3);
        let step = batch.column(4).as_primitive_opt::<Int64Type>();
        let role = text(5);
        let kind = text(6);
        let ts = batch
            .column(7)
            .as_primitive_opt::<TimestampNanosecondType>();
        let texts: Vec<_> = (8..13).map(text).collect();
        let jsons: Vec<_> = (13..15).map(text).collect();
        let call_output = batch
            .column_by_name(CALL_OUTPUT_COLUMN)
            .and_then(|a| a.as_string_opt::<i32>());
        let origin = text(15);
        let (Some(doc_ord), Some(turn_ord)) = (
            batch.column(16).as_primitive_opt::<Int64Type>(),
            batch.column(17).as_primitive_opt::<Int64Type>(),
        ) else {
            return Err(tantivy::TantivyError::InvalidArgument(
                "steps batch without storage_ordinal/turn_ordinal".into(),
            )
            .into());
        };
        let (mut steps, mut text_bytes) = (0u64, 0u64);
        for r in 0..batch.num_rows() {
            let mut d = TantivyDocument::default();
            // The text the document owns, roughly: what it holds in the queue.
            let mut held = 0;
            let s = src.value(r);
            let dv = doc.value(r);
            d.add_text(f.src, s);
            d.add_u64(f.ord, step_order(doc_ord.value(r), turn_ord.value(r)));
            d.add_text(f.doc, dv);
            if let Some(v) = cell(origin, r) {
                d.add_text(f.origin, v);
            }
            if let Some(v) = cell(run, r) {
                d.add_text(f.run, v);
            }
            if let Some(v) = cell(session, r) {
                d.add_text(f.session, v);
            }
            if let Some(a) = step {
                if !a.is_null(r) {
                    d.add_i64(f.step, a.value(r));
                }
            }
            if let Some(v) = cell(role, r) {
                d.add_text(f.role, v);
            }
            if let Some(v) = cell(kind, r) {
                d.add_text(f.kind, v);
            }
            if let Some(a) = ts {
                if !a.is_null(r) {
                    d.add_text(f.ts, crate::util::time::format_rfc3339(a.value(r)));
                }
            }
            for (i, a) in texts.iter().enumerate() {
                let own = cell(*a, r);
                // Results given on the calls read as more tool output.
                let more = if i == OBSERVATION {
                    cell(call_output, r)
                } else {
                    None
                };
                let joined;
                let v = match (own, more) {
                    (Some(o), Some(m)) => {
                        joined = format!("{o}\n{m}");
                        joined.as_str()
                    }
                    (Some(v), None) | (None, Some(v)) => v,
                    (None, None) => continue,
                };
                // What a terminal showed: colour codes and overprinted
                // progress lines would otherwise glue to the words.
                let v = crate::util::terminal::clean(v);
                text_bytes += v.len() as u64;
                held += v.len();
                d.add_text(f.text[i], &*v);
            }
            for (i, a) in jsons.iter().enumerate() {
                if let Some(v) = cell(*a, r) {
                    // Values above the fast-column cap are stored in full and
                    // marked in the column; readers take them from the store.
                    d.add_text(f.json[i], v);
                    let fast = if v.len() > JSON_FAST_MAX_BYTES {
                        JSON_IN_STORE
                    } else {
                        v
                    };
                    d.add_text(f.json_fast[i], fast);
                    held += v.len() + fast.len();
                    for t in super::json_leaves::cell_terms(i, v) {
                        held += t.len();
                        d.add_text(f.json_leaf, t);
                    }
                }
            }
            self.queued.wait();
            self.writer.add_document(self.queued.queue(d, held))?;
            steps += 1;
        }
        self.steps.fetch_add(steps, Ordering::Relaxed);
        self.text_bytes.fetch_add(text_bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Commit, then merge the small segments; returns (steps, text bytes)
    /// added.
    pub fn finish(mut self) -> Result<(u64, u64), FtsError> {
        self.writer.commit()?;
        self.merge_small_segments()?;
        self.writer.wait_merging_threads()?;
        Ok((
            self.steps.load(Ordering::Relaxed),
            self.text_bytes.load(Ordering::Relaxed),
        ))
    }

    /// Merge the segments of at most [`MAX_DOCS_TO_MERGE`] steps,
    /// [`SEGMENTS_PER_MERGE`] at a time (as many merges at once as there
    /// are merge threads), until fewer than that many are left.
    fn merge_small_segments(&mut self) -> Result<(), FtsError> {
        loop {
            let small: Vec<tantivy::index::SegmentId> = self
                .writer
                .index()
                .searchable_segment_metas()?
                .iter()
                .filter(|m| m.num_docs() as usize <= MAX_DOCS_TO_MERGE)
                .map(tantivy::index::SegmentMeta::id)
                .collect();
            if small.len() < SEGMENTS_PER_MERGE {
                return Ok(());
            }
            let merges: Vec<_> = small
                .chunks_exact(SEGMENTS_PER_MERGE)
                .map(|group| self.writer.merge(group))
                .collect();
            for m in merges {
                m.wait()?;
            }
        }
    }

    /// Commit what was added so far (one segment per indexing thread that
    /// holds steps), and count the index's segments.
    #[cfg(test)]
    fn commit_for_test(&mut self) -> usize {
        self.writer.commit().unwrap();
        self.writer.index().searchable_segment_ids().unwrap().len()
    }
}

fn cell(a: Option<&arrow::array::StringArray>, r: usize) -> Option<&str> {
    a.and_then(|a| (!a.is_null(r)).then(|| a.value(r)))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::super::queued::MAX_QUEUED_BYTES;
    use super::super::schema::BUILD_COLUMNS;
    use super::*;

    /// `rows` steps of one Source, each with `text` as its tool output.
    fn steps(rows: usize, text: &str) -> RecordBatch {
        let strings = |v: &str| -> ArrayRef { Arc::new(StringArray::from(vec![v; rows])) };
        let numbers = || -> ArrayRef { Arc::new(Int64Array::from_iter_values(0..rows as i64)) };
        let columns: Vec<ArrayRef> = BUILD_COLUMNS
            .iter()
            .map(|c| match *c {
                "observation_text" => strings(text),
                "storage_ordinal" | "turn_ordinal" => numbers(),
                _ => strings("x"),
            })
            .collect();
        let schema = Schema::new(
            BUILD_COLUMNS
                .iter()
                .zip(&columns)
                .map(|(c, a)| Field::new(*c, a.data_type().clone(), false))
                .collect::<Vec<_>>(),
        );
        assert_eq!(columns[16].data_type(), &DataType::Int64);
        RecordBatch::try_new(Arc::new(schema), columns).unwrap()
    }

    #[test]
    fn segments_are_merged_when_the_writer_finishes() {
        let index = crate::fts::Index::create_in_memory();
        let mut writer = index.writer(1).unwrap();
        let batch = steps(3, "请求超时 timeout");
        let mut segments = 0;
        for _ in 0..10 {
            writer.add_batch(&batch).unwrap();
            segments = writer.commit_for_test();
        }
        // Nothing is merged while steps are added.
        assert_eq!(segments, 10);
        let tantivy_index = writer.writer.index().clone();
        assert_eq!(writer.finish().unwrap().0, 30);
        let reader = tantivy_index.reader().unwrap();
        let searcher = reader.searcher();
        // Eight merged into one, two left as they were.
        assert_eq!(searcher.segment_readers().len(), 3);
        assert_eq!(searcher.num_docs(), 30);
    }

    #[test]
    fn the_text_waiting_for_the_indexing_threads_is_bounded() {
        let index = crate::fts::Index::create_in_memory();
        let writer = index.writer(1).unwrap();
        let text = "collecting lorem ipsum dolor sit amet\n".repeat(500);
        let batch = steps(600, &text);
        writer.add_batch(&batch).unwrap();
        // 11 MB of text went through, far faster than one thread indexes
        // it; at most the bound and one step were out with tantivy at once.
        let most = writer.queued.most();
        assert!(most > MAX_QUEUED_BYTES / 2, "{most}");
        assert!(most <= MAX_QUEUED_BYTES + text.len() + 64, "{most}");
        assert_eq!(writer.finish().unwrap().0, 600);
    }
}
