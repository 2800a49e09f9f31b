//! Project: compute the output columns of each batch.

use arrow::datatypes::SchemaRef;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use super::super::expr::{cast_array, eval};
use super::super::logical::Expr;
use super::super::SqlError;
use super::{BoxOp, Operator};

/// `exprs` over each batch of `input`.
pub struct ProjectOp<'s> {
    pub input: BoxOp<'s>,
    pub exprs: Vec<Expr>,
    pub schema: SchemaRef,
}

impl Operator for ProjectOp<'_> {
    fn next(&mut self) -> Result<Option<RecordBatch>, SqlError> {
        let Some(b) = self.input.next()? else {
            return Ok(None);
        };
        let cols = self
            .exprs
            .iter()
            .zip(self.schema.fields())
            .map(|(e, f)| {
                let a = eval(e, &b)?;
                if a.data_type() == f.data_type() {
                    Ok(a)
                } else {
                    cast_array(&a, f.data_type())
                }
            })
            .collect::<Result<Vec<_>, SqlError>>()?;
        let opts = RecordBatchOptions::new().with_row_count(Some(b.num_rows()));
        Ok(Some(RecordBatch::try_new_with_options(
            self.schema.clone(),
            cols,
            &opts,
        )?))
    }
}
