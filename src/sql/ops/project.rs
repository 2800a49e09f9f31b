//! Project: compute the output columns of each batch.

use arrow::array::new_null_array;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use super::super::expr::{cast_array, eval};
use super::super::logical::Expr;
use super::super::SqlError;
use super::{BoxOp, Operator};

/// `exprs` over each batch of `input`.
pub struct ProjectOp<'s> {
    input: BoxOp<'s>,
    exprs: Vec<Expr>,
    schema: SchemaRef,
    /// The columns read above (all when `None`); the others are NULL.
    needed: Option<Vec<bool>>,
}

impl<'s> ProjectOp<'s> {
    /// `exprs` under `schema`, computing only the `needed` ones.
    pub fn new(
        input: BoxOp<'s>,
        exprs: Vec<Expr>,
        schema: SchemaRef,
        needed: Option<Vec<bool>>,
    ) -> Self {
        // Columns left out are NULL, which the declared schema may refuse.
        let schema = match &needed {
            Some(_) => super::nullable(&schema),
            None => schema,
        };
        ProjectOp {
            input,
            exprs,
            schema,
            needed,
        }
    }
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
            .enumerate()
            .map(|(i, (e, f))| {
                if self.needed.as_ref().is_some_and(|n| !n[i]) {
                    return Ok(new_null_array(f.data_type(), b.num_rows()));
                }
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
