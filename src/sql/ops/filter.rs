//! Filter: keep the rows where the predicate is true, batch by batch.

use arrow::compute::filter_record_batch;
use arrow::record_batch::RecordBatch;

use super::super::expr::eval_predicate;
use super::super::logical::Expr;
use super::super::SqlError;
use super::{BoxOp, Operator};

/// Rows of `input` passing `predicate`.
pub struct FilterOp<'s> {
    pub input: BoxOp<'s>,
    pub predicate: Expr,
}

impl Operator for FilterOp<'_> {
    fn next(&mut self) -> Result<Option<RecordBatch>, SqlError> {
        while let Some(b) = self.input.next()? {
            let mask = eval_predicate(&self.predicate, &b)?;
            let kept = filter_record_batch(&b, &mask)?;
            if kept.num_rows() > 0 {
                return Ok(Some(kept));
            }
        }
        Ok(None)
    }
}
