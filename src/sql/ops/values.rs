//! VALUES: literal rows as one batch.

use arrow::array::ArrayRef;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use super::super::expr::cast_array;
use super::super::value::Scalar;
use super::super::SqlError;
use super::Operator;

/// The rows, until taken.
pub struct ValuesOp {
    pub batch: Option<RecordBatch>,
}

impl ValuesOp {
    /// `rows` under `schema`.
    pub fn new(schema: &SchemaRef, rows: &[Vec<Scalar>]) -> Result<Self, SqlError> {
        let mut cols: Vec<ArrayRef> = Vec::new();
        for (c, f) in schema.fields().iter().enumerate() {
            let parts: Vec<ArrayRef> = rows
                .iter()
                .map(|r| {
                    let a = r[c].to_array(1);
                    if a.data_type() == f.data_type() {
                        Ok(a)
                    } else {
                        cast_array(&a, f.data_type())
                    }
                })
                .collect::<Result<_, SqlError>>()?;
            let refs: Vec<&dyn arrow::array::Array> = parts.iter().map(AsRef::as_ref).collect();
            cols.push(arrow::compute::concat(&refs)?);
        }
        let opts = RecordBatchOptions::new().with_row_count(Some(rows.len()));
        Ok(ValuesOp {
            batch: Some(RecordBatch::try_new_with_options(
                schema.clone(),
                cols,
                &opts,
            )?),
        })
    }
}

impl Operator for ValuesOp {
    fn next(&mut self) -> Result<Option<RecordBatch>, SqlError> {
        Ok(self.batch.take())
    }
}
