//! Physical operators over materialised inputs. Each takes its input batches
//! and returns output batches; the shared expression evaluator computes keys
//! and arguments.

pub mod aggregate;
pub mod distinct;
pub mod join;
pub mod sort;
pub mod window;

use arrow::array::ArrayRef;
use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, Rows, SortField};

use super::SqlError;

/// One batch holding all input rows.
pub fn concat(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<RecordBatch, SqlError> {
    Ok(concat_batches(schema, batches)?)
}

/// Row-encode key columns for hashing and equality (NULLs encode as NULL).
pub fn encode_rows(cols: &[ArrayRef]) -> Result<(RowConverter, Rows), SqlError> {
    let fields = cols
        .iter()
        .map(|c| SortField::new(c.data_type().clone()))
        .collect();
    let conv = RowConverter::new(fields)?;
    let rows = conv.convert_columns(cols)?;
    Ok((conv, rows))
}
