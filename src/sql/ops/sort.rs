//! ORDER BY. Without a LIMIT the input is held (against the budget), then
//! sorted by index and gathered. With one (top-N), only the best `fetch`
//! rows are kept: the held rows are cut back to them whenever they reach a
//! few batches, so memory is bounded by the LIMIT, not the input.

use arrow::compute::{lexsort_to_indices, take_record_batch, SortColumn, SortOptions};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use super::super::expr::eval;
use super::super::logical::SortKey;
use super::super::SqlError;
use super::scan::BATCH_ROWS;
use super::{BoxOp, Operator, Reservation};

/// `input` sorted by `keys`, the first `fetch` rows when given.
pub struct SortOp<'s> {
    pub input: BoxOp<'s>,
    pub schema: SchemaRef,
    pub keys: Vec<SortKey>,
    pub fetch: Option<usize>,
    pub mem: Reservation<'s>,
    pub done: bool,
}

impl Operator for SortOp<'_> {
    fn next(&mut self) -> Result<Option<RecordBatch>, SqlError> {
        if self.done {
            return Ok(None);
        }
        self.done = true;
        let mut held: Vec<RecordBatch> = Vec::new();
        let mut rows = 0usize;
        let mut bytes = 0usize;
        // Top-N: cut back once this many rows are held.
        let cut = self.fetch.map(|k| (2 * k).max(BATCH_ROWS));
        while let Some(b) = self.input.next()? {
            rows += b.num_rows();
            bytes += b.get_array_memory_size();
            self.mem.set(bytes)?;
            held.push(b);
            if cut.is_some_and(|c| rows >= c) {
                let best = sort(&self.schema, &held, &self.keys, self.fetch)?;
                rows = best.num_rows();
                bytes = best.get_array_memory_size();
                held = vec![best];
            }
        }
        sort(&self.schema, &held, &self.keys, self.fetch).map(Some)
    }
}

/// `batches` in `keys` order, the first `fetch` rows when given.
fn sort(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    keys: &[SortKey],
    fetch: Option<usize>,
) -> Result<RecordBatch, SqlError> {
    let all = super::concat(schema, batches)?;
    if all.num_rows() == 0 {
        return Ok(all);
    }
    let cols = keys
        .iter()
        .map(|k| {
            Ok(SortColumn {
                values: eval(&k.expr, &all)?,
                options: Some(SortOptions {
                    descending: !k.asc,
                    nulls_first: k.nulls_first,
                }),
            })
        })
        .collect::<Result<Vec<_>, SqlError>>()?;
    let idx = lexsort_to_indices(&cols, fetch)?;
    Ok(take_record_batch(&all, &idx)?)
}
