//! LIMIT / OFFSET: pass rows through until the limit is reached, then let
//! go of the input, which stops the scans under it.

use arrow::record_batch::RecordBatch;

use super::super::SqlError;
use super::{BoxOp, Operator};

/// At most `left` rows of `input` after skipping `skip`.
pub struct LimitOp<'s> {
    input: Option<BoxOp<'s>>,
    skip: usize,
    left: usize,
}

impl<'s> LimitOp<'s> {
    /// `limit` rows (all when `None`) after `offset`.
    pub fn new(input: BoxOp<'s>, offset: usize, limit: Option<usize>) -> Self {
        LimitOp {
            input: Some(input),
            skip: offset,
            left: limit.unwrap_or(usize::MAX),
        }
    }
}

impl Operator for LimitOp<'_> {
    fn next(&mut self) -> Result<Option<RecordBatch>, SqlError> {
        while self.left > 0 {
            let Some(input) = self.input.as_mut() else {
                break;
            };
            let Some(b) = input.next()? else {
                break;
            };
            let n = b.num_rows();
            if self.skip >= n {
                self.skip -= n;
                continue;
            }
            let take = (n - self.skip).min(self.left);
            let out = b.slice(self.skip, take);
            self.skip = 0;
            self.left -= take;
            return Ok(Some(out));
        }
        self.input = None;
        Ok(None)
    }
}
