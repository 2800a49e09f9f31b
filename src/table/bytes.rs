//! Text kept as bytes: a store keeps its text views as Arrow `Binary` so
//! that reading them checks nothing, and the rows handed on are checked as
//! UTF-8 here, once.

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray, StringArray};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::DataType;
use arrow::error::ArrowError;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use std::sync::Arc;

/// `a` as text, checking only the bytes its rows span: an array sliced
/// out of a larger one shares its buffer, and the bytes outside the slice
/// are neither checked nor kept alive twice.
///
/// # Errors
/// When a row is not UTF-8.
pub fn checked_text(a: &BinaryArray) -> Result<StringArray, ArrowError> {
    let offsets = a.value_offsets();
    let (first, last) = (offsets[0], offsets[offsets.len() - 1]);
    let start = usize::try_from(first).unwrap_or(0);
    let len = usize::try_from(last - first).unwrap_or(0);
    let values = a.values().slice_with_length(start, len);
    let rebased = OffsetBuffer::new(offsets.iter().map(|o| o - first).collect());
    StringArray::try_new(rebased, values, a.nulls().cloned())
}

/// `b` with every `Binary` column whose field in `schema` is text checked
/// into text, under `schema`; `b` itself when there is none.
///
/// # Errors
/// When a row of such a column is not UTF-8.
pub fn checked_batch(
    b: RecordBatch,
    schema: &arrow::datatypes::SchemaRef,
) -> Result<RecordBatch, ArrowError> {
    let bytes = |i: usize, c: &ArrayRef| {
        c.data_type() == &DataType::Binary && schema.field(i).data_type() == &DataType::Utf8
    };
    if !b.columns().iter().enumerate().any(|(i, c)| bytes(i, c)) {
        return Ok(b);
    }
    let columns = b
        .columns()
        .iter()
        .enumerate()
        .map(|(i, c)| -> Result<ArrayRef, ArrowError> {
            Ok(if bytes(i, c) {
                Arc::new(checked_text(c.as_binary::<i32>())?)
            } else {
                c.clone()
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let opts = RecordBatchOptions::new().with_row_count(Some(b.num_rows()));
    RecordBatch::try_new_with_options(schema.clone(), columns, &opts)
}

/// `b` with every `Binary` column checked into text; `b` itself when it
/// has none.
///
/// # Errors
/// When a row of such a column is not UTF-8.
pub fn all_checked(b: RecordBatch) -> Result<RecordBatch, ArrowError> {
    let schema = b.schema();
    if !schema
        .fields()
        .iter()
        .any(|f| f.data_type() == &DataType::Binary)
    {
        return Ok(b);
    }
    let text = arrow::datatypes::Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| match f.data_type() {
                DataType::Binary => f.as_ref().clone().with_data_type(DataType::Utf8),
                _ => f.as_ref().clone(),
            })
            .collect::<Vec<_>>(),
    );
    checked_batch(b, &Arc::new(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_is_checked_over_its_own_bytes() {
        // The first row is not UTF-8; a slice without it is text.
        let a = BinaryArray::from(vec![
            Some(&b"\xff\xfe"[..]),
            Some("超时".as_bytes()),
            None,
            Some(b"ok"),
        ]);
        assert!(checked_text(&a).is_err());
        let s = a.slice(1, 3);
        let t = checked_text(&s).unwrap();
        assert_eq!(
            t.iter().collect::<Vec<_>>(),
            [Some("超时"), None, Some("ok")]
        );
        assert_eq!(t.value_data().len(), "超时ok".len());
    }

    #[test]
    fn a_row_cut_inside_a_character_is_refused() {
        let bytes = "超时".as_bytes();
        let a = BinaryArray::from(vec![Some(&bytes[..2]), Some(&bytes[2..])]);
        assert!(checked_text(&a).is_err());
    }
}
