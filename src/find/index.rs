//! The step full-text index: one tantivy document per step.
//!
//! An index covers a set of Sources. Its `pchronicle-index.json` records the
//! `snapshot_ref` each Source had when it was indexed, so a reader knows which
//! Sources are current. The index is derived data: deleting it loses nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, TimestampNanosecondType};
use serde::{Deserialize, Serialize};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST, INDEXED, STORED, STRING,
};
use tantivy::{Index, IndexWriter, TantivyDocument, Term};

use super::tokenize::{analyzer, TOKENIZER_NAME};

/// JSON cells longer than this are not put in the fast column.
pub const JSON_FAST_MAX_BYTES: usize = 16 * 1024;

/// The fast-column value of a JSON cell kept only in the document store.
pub const JSON_IN_STORE: &str = "\u{1}";

/// Version of the index layout; an index with another version is rebuilt.
pub const INDEX_VERSION: u32 = 4;

/// File that records what an index covers.
pub const META_FILE: &str = "pchronicle-index.json";

/// What an index covers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct IndexMeta {
    /// [`INDEX_VERSION`].
    pub version: u32,
    /// Always `jieba`.
    pub tokenizer: String,
    /// source_path → the snapshot_ref it was indexed at.
    pub sources: BTreeMap<String, String>,
    /// Steps indexed.
    pub steps: u64,
    /// Bytes of step text analysed.
    pub text_bytes: u64,
    /// Sources indexed but read incompletely (skipped or degraded), with the
    /// problem: a search served by this index reports it again, and fails
    /// on it under `--errors strict`, as a fresh read would.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub problems: BTreeMap<String, crate::dataset::SourceProblem>,
}

impl IndexMeta {
    /// Read `dir/pchronicle-index.json`; `None` when absent, unreadable or of
    /// another version.
    pub fn read(dir: &Path) -> Option<IndexMeta> {
        let bytes = std::fs::read(dir.join(META_FILE)).ok()?;
        let m: IndexMeta = serde_json::from_slice(&bytes).ok()?;
        (m.version == INDEX_VERSION && m.tokenizer == TOKENIZER_NAME).then_some(m)
    }

    /// Write it atomically (temporary file, then rename).
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let tmp = dir.join(format!(".{META_FILE}.tmp-{}", std::process::id()));
        let body = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(&tmp, body)?;
        std::fs::rename(&tmp, dir.join(META_FILE))
    }
}

/// The text fields of the index, in field order. The `observation` field
/// holds the decoded observation text (the `observation_text` column), not
/// its JSON.
pub const TEXT_COLUMNS: [&str; 5] = [
    "message_value",
    "reasoning_content",
    "observation",
    "prompt",
    "model_name",
];

/// Position of the observation in [`TEXT_COLUMNS`].
const OBSERVATION: usize = 2;

/// The JSON columns kept for predicates.
pub const JSON_COLUMNS: [&str; 2] = ["metrics", "extra"];

/// Fields of the index schema.
#[derive(Debug, Clone)]
pub struct Fields {
    /// The schema.
    pub schema: Schema,
    /// source_path (raw term, stored, fast).
    pub src: Field,
    /// Order of the step in its Source (fast): document ordinal << 24 | step.
    pub ord: Field,
    /// document_id (raw term, stored).
    pub doc: Field,
    /// run_id (raw term, stored).
    pub run: Field,
    /// session_id (raw term, stored).
    pub session: Field,
    /// origin_path (raw term, stored).
    pub origin: Field,
    /// step_id (indexed, stored).
    pub step: Field,
    /// step_source (raw term, stored).
    pub role: Field,
    /// effective_kind (stored).
    pub kind: Field,
    /// timestamp as RFC 3339 (stored).
    pub ts: Field,
    /// Text fields, one per [`TEXT_COLUMNS`] entry.
    pub text: [Field; 5],
    /// JSON fields, one per [`JSON_COLUMNS`] entry (stored).
    pub json: [Field; 2],
    /// The same JSON cells as dictionary-encoded fast columns (`<name>_fast`;
    /// [`JSON_IN_STORE`] for cells above [`JSON_FAST_MAX_BYTES`]).
    pub json_fast: [Field; 2],
}

impl Fields {
    /// Build the schema.
    pub fn new() -> Fields {
        let mut b = Schema::builder();
        let src = b.add_text_field("src", STRING | STORED | FAST);
        let ord = b.add_u64_field("ord", FAST | STORED);
        let doc = b.add_text_field("doc", STRING | STORED);
        let run = b.add_text_field("run", STRING | STORED);
        let session = b.add_text_field("session", STRING | STORED);
        let origin = b.add_text_field("origin", STRING | STORED);
        let step = b.add_i64_field("step", INDEXED | STORED);
        let role = b.add_text_field("role", STRING | STORED);
        let kind = b.add_text_field("kind", STORED);
        let ts = b.add_text_field("ts", STORED);
        let opts = TextOptions::default()
            .set_indexing_options(
                TextFieldIndexing::default()
                    .set_tokenizer(TOKENIZER_NAME)
                    .set_index_option(IndexRecordOption::WithFreqsAndPositions),
            )
            .set_stored();
        let text = TEXT_COLUMNS.map(|c| b.add_text_field(c, opts.clone()));
        // Stored, and a dictionary-encoded fast column: a JSON predicate is
        // evaluated once per distinct value instead of once per step.
        let json = JSON_COLUMNS.map(|c| b.add_text_field(c, STORED));
        let fast = TextOptions::default().set_fast("raw");
        let json_fast = JSON_COLUMNS.map(|c| b.add_text_field(&format!("{c}_fast"), fast.clone()));
        Fields {
            schema: b.build(),
            src,
            ord,
            doc,
            run,
            session,
            origin,
            step,
            role,
            kind,
            ts,
            text,
            json,
            json_fast,
        }
    }

    /// Bind to an opened index's schema (field ids by name).
    pub fn of(schema: &Schema) -> Option<Fields> {
        let f = |n: &str| schema.get_field(n).ok();
        Some(Fields {
            schema: schema.clone(),
            src: f("src")?,
            ord: f("ord")?,
            doc: f("doc")?,
            run: f("run")?,
            session: f("session")?,
            origin: f("origin")?,
            step: f("step")?,
            role: f("role")?,
            kind: f("kind")?,
            ts: f("ts")?,
            text: [
                f(TEXT_COLUMNS[0])?,
                f(TEXT_COLUMNS[1])?,
                f(TEXT_COLUMNS[2])?,
                f(TEXT_COLUMNS[3])?,
                f(TEXT_COLUMNS[4])?,
            ],
            json: [f(JSON_COLUMNS[0])?, f(JSON_COLUMNS[1])?],
            json_fast: [
                f(&format!("{}_fast", JSON_COLUMNS[0]))?,
                f(&format!("{}_fast", JSON_COLUMNS[1]))?,
            ],
        })
    }
}

impl Default for Fields {
    fn default() -> Self {
        Fields::new()
    }
}

/// The steps-relation columns an index is built from.
pub const BUILD_COLUMNS: [&str; 18] = [
    "source_path",
    "document_id",
    "run_id",
    "session_id",
    "step_id",
    "step_source",
    "effective_kind",
    "timestamp",
    "message_value",
    "reasoning_content",
    "observation_text",
    "prompt",
    "model_name",
    "metrics",
    "extra",
    "origin_path",
    "storage_ordinal",
    "turn_ordinal",
];

/// Open an index directory, registering the analyzer.
pub fn open(dir: &Path) -> tantivy::Result<(Index, Fields)> {
    let index = Index::open_in_dir(dir)?;
    index.tokenizers().register(TOKENIZER_NAME, analyzer());
    let fields = Fields::of(&index.schema())
        .ok_or_else(|| tantivy::TantivyError::SchemaError("not a pChronicle find index".into()))?;
    Ok((index, fields))
}

/// Create an empty index in `dir` (which must exist and be empty).
pub fn create(dir: &Path) -> tantivy::Result<(Index, Fields)> {
    let fields = Fields::new();
    let index = Index::create_in_dir(dir, fields.schema.clone())?;
    index.tokenizers().register(TOKENIZER_NAME, analyzer());
    Ok((index, fields))
}

/// The text column a steps batch may carry after [`BUILD_COLUMNS`]: the
/// decoded results given on the step's calls themselves, indexed with the
/// observation (a person reads both as what the tools printed).
pub const CALL_OUTPUT_COLUMN: &str = "call_output_text";

/// Adds steps to an index. `add_batch` may be called from several threads.
pub struct Builder {
    writer: IndexWriter<TantivyDocument>,
    fields: Fields,
    steps: AtomicU64,
    text_bytes: AtomicU64,
}

impl Builder {
    /// A writer on `index` with `threads` indexing threads.
    pub fn new(index: &Index, fields: Fields, threads: usize) -> tantivy::Result<Builder> {
        let threads = threads.clamp(1, 8);
        let writer = index.writer_with_num_threads(threads, 64_000_000 * threads)?;
        Ok(Builder {
            writer,
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

    /// Add the rows of one steps batch (projected to [`BUILD_COLUMNS`], in
    /// that order, optionally followed by [`CALL_OUTPUT_COLUMN`]). A step's
    /// place in its Source is its document's position and its own.
    pub fn add_batch(&self, batch: &RecordBatch) -> tantivy::Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let f = &self.fields;
        let text = |i: usize| batch.column(i).as_string_opt::<i32>();
        let (Some(src), Some(doc)) = (text(0), text(1)) else {
            return Err(tantivy::TantivyError::InvalidArgument(
                "steps batch without source_path/document_id".into(),
            ));
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
            ));
        };
        let (mut steps, mut text_bytes) = (0u64, 0u64);
        for r in 0..batch.num_rows() {
            let mut d = TantivyDocument::default();
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
                    d.add_text(f.ts, crate::formats::storyline::format_rfc3339(a.value(r)));
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
                }
            }
            self.writer.add_document(d)?;
            steps += 1;
        }
        self.steps.fetch_add(steps, Ordering::Relaxed);
        self.text_bytes.fetch_add(text_bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Commit and wait for merges; returns (steps, text bytes) added.
    pub fn finish(mut self) -> tantivy::Result<(u64, u64)> {
        self.writer.commit()?;
        self.writer.wait_merging_threads()?;
        Ok((
            self.steps.load(Ordering::Relaxed),
            self.text_bytes.load(Ordering::Relaxed),
        ))
    }
}

fn cell(a: Option<&arrow::array::StringArray>, r: usize) -> Option<&str> {
    a.and_then(|a| (!a.is_null(r)).then(|| a.value(r)))
}

/// A step's place in its Source: the document's position in the high bits,
/// the step's in the low 24.
pub fn step_order(document: i64, turn: i64) -> u64 {
    ((document.max(0) as u64) << 24) | (turn.max(0) as u64).min((1 << 24) - 1)
}

/// The document position of a step's place ([`step_order`]).
pub fn document_of(order: u64) -> u64 {
    order >> 24
}

/// Where the index of a Dataset's exchange files is cached.
pub fn cache_dir(dataset: &str) -> Option<PathBuf> {
    let base = crate::util::path::cache_base()?;
    let key = blake3::hash(dataset.as_bytes()).to_hex();
    Some(
        base.join("find")
            .join(format!("v{INDEX_VERSION}"))
            .join(&key.as_str()[..32]),
    )
}
