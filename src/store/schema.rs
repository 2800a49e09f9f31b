//! Arrow schemas of the store tables: the per-document `documents` table
//! (`runs.lance`, one row per Storyline document as in the public layout),
//! `steps` and `tool_calls`, each without `source_path` (a store is one
//! Source), and the objects table.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, BinaryArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use crate::table::{ColType, Table};

/// The tables a store holds.
pub const STORE_TABLES: [Table; 3] = [Table::Documents, Table::Steps, Table::ToolCalls];

/// Directory name of a table inside a generation.
pub fn dir_name(t: Table) -> &'static str {
    match t {
        Table::Documents => "runs.lance",
        Table::Steps => "steps.lance",
        Table::ToolCalls => "tool_calls.lance",
        Table::Runs | Table::Trajectories | Table::Judgments => "derived",
    }
}

/// The first store layout that keeps the derived text views
/// (`observation_text`, `results_text`) as columns. Stores of layout 2 do
/// not; their readers compute the views from the raw JSON columns.
pub const VIEWS_STORED_FROM: u64 = 3;

/// The first store layout that keeps the text views as bytes (Arrow
/// `Binary`) rather than text: Lance checks every byte of a text column
/// it reads for UTF-8, and a `LIKE` over tool output reads far more rows
/// than it keeps. Readers check the bytes of the rows they hand on
/// ([`crate::table::checked_text`]); SQL checks only the rows its scan
/// filter keeps.
pub const VIEWS_AS_BYTES_FROM: u64 = 4;

/// The first store layout that keeps label columns ([`is_label`]) as
/// Arrow dictionaries. Lance lays such a column out as a dictionary either
/// way, but handed a text column it rebuilds every row's text from the
/// dictionary one value at a time, which was a sixth of the CPU of a
/// filter on `step_source` and `model_name` over the 1M-step benchmark
/// store (docs/benchmarks.md). Read as a dictionary, a page is its keys
/// and a few values; [`labels_as_text`] turns a batch into text in one
/// vectorised pass.
pub const LABELS_AS_DICTIONARY_FROM: u64 = 5;

/// The type a store of [`LABELS_AS_DICTIONARY_FROM`] or later keeps a
/// label column as.
fn label_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// True for a column of `t` whose values are labels: few distinct values
/// (who produced a step, its kind, a model or tool name), repeated on
/// every row.
pub fn is_label(t: Table, column: &str) -> bool {
    let labels: &[&str] = match t {
        Table::Steps => &[
            "step_source",
            "kind",
            "effective_kind",
            "model_name",
            "message_kind",
        ],
        Table::Documents => &[
            "format",
            "agent_name",
            "agent_version",
            "agent_model_name",
            "model_name",
            "schema_version",
        ],
        Table::ToolCalls => &["function_name", "status", "kind"],
        Table::Runs | Table::Trajectories | Table::Judgments => &[],
    };
    labels.contains(&column)
}

/// `b` with its dictionary columns (the labels of a store of
/// [`LABELS_AS_DICTIONARY_FROM`] or later) as text: every reader of a
/// store sees labels as the text they were given, as from older stores.
///
/// # Errors
/// Only if Arrow cannot rebuild the text, which a column read back as
/// written never makes it do.
pub fn labels_as_text(b: RecordBatch) -> Result<RecordBatch, ArrowError> {
    let schema = b.schema();
    if !schema
        .fields()
        .iter()
        .any(|f| matches!(f.data_type(), DataType::Dictionary(..)))
    {
        return Ok(b);
    }
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns = Vec::with_capacity(schema.fields().len());
    for (f, c) in schema.fields().iter().zip(b.columns()) {
        if let DataType::Dictionary(_, values) = f.data_type() {
            columns.push(cast(c, values)?);
            fields.push(f.as_ref().clone().with_data_type(values.as_ref().clone()));
        } else {
            columns.push(c.clone());
            fields.push(f.as_ref().clone());
        }
    }
    let opts = RecordBatchOptions::new().with_row_count(Some(b.num_rows()));
    RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), columns, &opts)
}

/// `c` in the type the table's `field` keeps it as: text views as bytes
/// and labels as dictionaries, from the layouts that do so; anything
/// else as given.
///
/// # Errors
/// Only if Arrow cannot build the dictionary (more than 2^31 distinct
/// labels in one batch).
pub fn as_stored(c: &ArrayRef, field: &Field) -> Result<ArrayRef, ArrowError> {
    Ok(match (c.data_type(), field.data_type()) {
        (DataType::Utf8, DataType::Binary) => {
            Arc::new(BinaryArray::from(c.as_string::<i32>().clone()))
        }
        (DataType::Utf8, to @ DataType::Dictionary(..)) => cast(c, to)?,
        _ => c.clone(),
    })
}

/// Indexes into the logical table's columns that documents are rebuilt
/// from: all but `source_path` (a store is one Source) and the derived text
/// views (decoded copies of other columns).
pub fn source_columns(t: Table) -> Vec<usize> {
    let cols = t.columns();
    (1..cols.len())
        .filter(|&i| cols[i].derived.is_none())
        .collect()
}

/// Indexes into the logical table's columns that a store of `layout`
/// keeps: the source columns, and from [`VIEWS_STORED_FROM`] the derived
/// text views too, so that searching tool output does not decode JSON.
pub fn stored_columns(t: Table, layout: u64) -> Vec<usize> {
    if layout < VIEWS_STORED_FROM {
        return source_columns(t);
    }
    (1..t.columns().len()).collect()
}

/// The Lance field metadata that stores a column's pages without
/// compression.
const UNCOMPRESSED: (&str, &str) = ("lance-encoding:compression", "none");

/// The Lance field metadata that compresses a column's pages with LZ4.
const LZ4: (&str, &str) = ("lance-encoding:compression", "lz4");

/// The Lance field metadata that lays out a column's pages in mini-blocks
/// (chunks of values) whatever the length of their values. Lance lays out
/// a page whose values are all shorter than 256 bytes so of its own
/// accord, and one holding a longer value (tool output) value by value:
/// each value then compressed on its own (with zstd whatever codec but
/// `none` is named), and read back by copying each into a buffer grown as
/// it goes.
/// Pages Lance encodes otherwise first (dictionary, constant, all-null)
/// stay so. Chunks of cells up to the objects' inline limit need the
/// 32-bit chunk sizes of Lance's file format 2.2, which new tables are
/// written in (`lance_io::FILE_FORMAT`).
const MINI_BLOCKS: (&str, &str) = ("lance-encoding:structural-encoding", "miniblock");

/// True for the Lance field metadata of a derived text view (see
/// [`table_schema`]): long text, kept to be scanned.
pub fn is_text_view(metadata: &std::collections::HashMap<String, String>) -> bool {
    let (k, v) = UNCOMPRESSED;
    metadata.get(k).is_some_and(|m| m == v)
}

/// True for the Lance field metadata of a column whose values are long:
/// a text view, or JSON (as new stores lay it out). A batch of 8,192 of
/// them is megabytes, where other columns hold a few bytes a row.
pub fn is_wide(metadata: &std::collections::HashMap<String, String>) -> bool {
    let (k, v) = MINI_BLOCKS;
    is_text_view(metadata) || metadata.get(k).is_some_and(|m| m == v)
}

/// The stored schema of a table in a store of `layout`.
///
/// Label columns are kept as dictionaries from layout
/// [`LABELS_AS_DICTIONARY_FROM`]. The derived text views are kept
/// uncompressed, and from layout [`VIEWS_AS_BYTES_FROM`] as bytes. They
/// exist to be scanned (`LIKE`, the full-text index build), and Lance's
/// default for text,
/// FSST, costs four times as long to decode as a plain copy (it zeroes and
/// fills a buffer eight times the compressed bytes per page). On the
/// benchmark corpus this makes `observation_text` 409 MB instead of 284 MB.
/// They are laid out in [`MINI_BLOCKS`] too: a `LIKE` over a million
/// steps' tool output peaked a third lower so, at the same speed
/// (docs/benchmarks.md, "Text views in mini-blocks").
///
/// JSON columns are asked for LZ4 instead of FSST, in [`MINI_BLOCKS`]:
/// JSON repeats its keys and punctuation, which a general compressor
/// finds and FSST's 8-byte symbols only partly do, and zstd started afresh
/// for every cell of a million took three times as long to read as LZ4
/// over chunks of cells (the raw `observation` of the 1M-step benchmark
/// store: 1.72 against 0.56 s, docs/benchmarks.md).
/// Lance keeps a table's own field metadata when rows are appended, so a
/// table created before these settings keeps its layout (FSST, or values
/// laid out one by one); either reads back the same values.
pub fn table_schema(t: Table, layout: u64) -> SchemaRef {
    let cols = t.columns();
    Arc::new(Schema::new(
        stored_columns(t, layout)
            .into_iter()
            .map(|i| {
                let ty = if cols[i].derived.is_some() && layout >= VIEWS_AS_BYTES_FROM {
                    DataType::Binary
                } else if layout >= LABELS_AS_DICTIONARY_FROM && is_label(t, cols[i].name) {
                    label_type()
                } else {
                    cols[i].ty.arrow()
                };
                let f = Field::new(cols[i].name, ty, cols[i].nullable);
                let how: &[(&str, &str)] = if cols[i].derived.is_some() {
                    &[UNCOMPRESSED, MINI_BLOCKS]
                } else if cols[i].ty == ColType::Json {
                    &[LZ4, MINI_BLOCKS]
                } else {
                    &[]
                };
                if how.is_empty() {
                    return f;
                }
                f.with_metadata(
                    how.iter()
                        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                        .collect(),
                )
            })
            .collect::<Vec<_>>(),
    ))
}

/// The objects table: large cells by content id.
pub fn objects_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("content_id", DataType::Utf8, false),
        Field::new("raw_length", DataType::Int64, false),
        Field::new("payload", DataType::LargeBinary, false),
    ]))
}
