//! UNION ALL: the inputs one after the other, under the union's schema.

use arrow::datatypes::SchemaRef;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use super::super::SqlError;
use super::{BoxOp, Operator};

/// Every batch of each input in turn.
pub struct UnionOp<'s> {
    /// Inputs not yet finished, the current one last.
    inputs: Vec<BoxOp<'s>>,
    schema: SchemaRef,
}

impl<'s> UnionOp<'s> {
    /// `inputs` in order.
    pub fn new(mut inputs: Vec<BoxOp<'s>>, schema: SchemaRef) -> Self {
        inputs.reverse();
        UnionOp { inputs, schema }
    }
}

impl Operator for UnionOp<'_> {
    fn next(&mut self) -> Result<Option<RecordBatch>, SqlError> {
        while let Some(input) = self.inputs.last_mut() {
            match input.next()? {
                Some(b) => {
                    let opts = RecordBatchOptions::new().with_row_count(Some(b.num_rows()));
                    return Ok(Some(RecordBatch::try_new_with_options(
                        self.schema.clone(),
                        b.columns().to_vec(),
                        &opts,
                    )?));
                }
                // Done: its scans stop now, not at the end of the query.
                None => drop(self.inputs.pop()),
            }
        }
        Ok(None)
    }
}
