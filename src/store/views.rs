//! What a store's readers get for the columns they ask for: the derived
//! text views computed for stores that do not keep them, views kept as
//! bytes checked into text, and labels kept as dictionaries turned into
//! text, or left as stored for a reader that does this itself (SQL).

use std::sync::Arc;

use arrow::array::{Array, AsArray};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;

use super::StoreError;
use crate::table::Table;

/// The stored columns to read for `columns`: when the store does not keep
/// the derived views (`derive`), a derived column is replaced by the
/// columns it is computed from (each read once).
pub(super) fn physical<'a>(t: Table, columns: &[&'a str], derive: bool) -> Vec<&'a str> {
    let defs = t.columns();
    let mut out: Vec<&'a str> = Vec::with_capacity(columns.len());
    for &c in columns {
        let derived = defs.iter().find(|d| d.name == c).and_then(|d| d.derived);
        match derived.filter(|_| derive) {
            Some(d) => {
                for f in d.from {
                    if !out.contains(f) {
                        out.push(f);
                    }
                }
            }
            None => {
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
    }
    out
}

/// `columns` of `b` in that order, computing derived columns from the raw
/// text of the columns they decode when the store does not keep them
/// (`derive`). A batch without derived columns to compute is returned as
/// read.
pub(super) fn with_views(
    t: Table,
    columns: &[&str],
    b: &RecordBatch,
    derive: bool,
) -> Result<RecordBatch, StoreError> {
    let defs = t.columns();
    let derived = |c: &str| {
        defs.iter()
            .find(|d| d.name == c)
            .and_then(|d| d.derived)
            .filter(|_| derive)
    };
    if columns.iter().all(|c| derived(c).is_none()) {
        return Ok(b.clone());
    }
    let mut fields = Vec::with_capacity(columns.len());
    let mut arrays: Vec<arrow::array::ArrayRef> = Vec::with_capacity(columns.len());
    for &c in columns {
        if let Some(d) = derived(c) {
            let inputs: Vec<Option<&arrow::array::StringArray>> = d
                .from
                .iter()
                .map(|f| b.column_by_name(f).and_then(|a| a.as_string_opt::<i32>()))
                .collect();
            let mut raw: Vec<Option<&str>> = vec![None; inputs.len()];
            let out: arrow::array::StringArray = (0..b.num_rows())
                .map(|r| {
                    for (slot, a) in raw.iter_mut().zip(&inputs) {
                        *slot = a.and_then(|a| (!a.is_null(r)).then(|| a.value(r)));
                    }
                    (d.compute)(&raw)
                })
                .collect();
            fields.push(arrow::datatypes::Field::new(c, DataType::Utf8, true));
            arrays.push(Arc::new(out));
        } else {
            let (f, a) = stored_column(b, c)?;
            fields.push(f);
            arrays.push(a);
        }
    }
    RecordBatch::try_new_with_options(
        Arc::new(arrow::datatypes::Schema::new(fields)),
        arrays,
        &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(b.num_rows())),
    )
    .map_err(|e| StoreError::Internal(e.to_string()))
}

/// Column `c` of `b`, with its field.
pub(super) fn stored_column(
    b: &RecordBatch,
    c: &str,
) -> Result<(arrow::datatypes::Field, arrow::array::ArrayRef), StoreError> {
    let i = b
        .schema()
        .index_of(c)
        .map_err(|_| StoreError::Internal(format!("store column {c} missing")))?;
    Ok((b.schema().field(i).clone(), b.column(i).clone()))
}

/// How a scan hands on the text views and labels a store keeps as bytes
/// and dictionaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Views {
    /// As text, the views checked.
    Text,
    /// As stored: views as bytes, labels as dictionaries.
    Stored,
}

/// `b` with its labels as `views` says. When a label column holds an
/// object's descriptor (a label too long to keep inline), every label
/// column of the batch is text either way, so that the object is found
/// and resolved like any other cell's; such labels are rare enough that
/// the batches they fall in need not be told apart further.
pub(super) fn labels_for(b: RecordBatch, views: Views) -> Result<RecordBatch, StoreError> {
    let to_text = match views {
        Views::Text => true,
        Views::Stored => b
            .columns()
            .iter()
            .any(super::objects::label_holds_descriptor),
    };
    if !to_text {
        return Ok(b);
    }
    super::schema::labels_as_text(b).map_err(|e| StoreError::Internal(e.to_string()))
}

/// `b` with the text views a store keeps as bytes checked into text: the
/// only `Binary` columns of the stored tables.
pub(super) fn as_text(b: RecordBatch) -> Result<RecordBatch, StoreError> {
    crate::table::all_checked(b)
        .map_err(|e| StoreError::Corrupt(format!("a text view is not UTF-8: {e}")))
}
