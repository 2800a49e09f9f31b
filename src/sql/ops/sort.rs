//! ORDER BY. The input is held, then sorted by index and gathered. Past a
//! sixth of the memory budget (sorting a run needs about three times its
//! size, and the scans feeding it hold batches of their own), the rows held are sorted and spilled as a run, and the runs are
//! merged at the end ([`super::merge`]). With a LIMIT (top-N) only the best
//! `fetch` rows are kept: the held rows are cut back to them whenever they
//! reach a batch or twice the LIMIT, so memory is bounded by the LIMIT, not
//! the input (and a LIMIT too large for memory spills like a full sort).

use arrow::compute::{lexsort_to_indices, take_record_batch, SortColumn, SortOptions};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use super::super::expr::eval;
use super::super::logical::SortKey;
use super::super::SqlError;
use super::merge::Merge;
use super::scan::BATCH_ROWS;
use super::{BoxOp, Operator, Reservation};

/// `input` sorted by `keys`, the first `fetch` rows when given.
pub struct SortOp<'s> {
    pub input: BoxOp<'s>,
    pub schema: SchemaRef,
    pub keys: Vec<SortKey>,
    pub fetch: Option<usize>,
    pub mem: Reservation<'s>,
    pub state: SortState,
}

/// Where a sort is.
pub enum SortState {
    /// Not started.
    Reading,
    /// Merging spilled runs.
    Merging(Box<Merge>),
    /// All rows given out.
    Done,
}

impl Operator for SortOp<'_> {
    fn next(&mut self) -> Result<Option<RecordBatch>, SqlError> {
        match &mut self.state {
            SortState::Done => Ok(None),
            SortState::Merging(m) => {
                self.mem.ctx.check_time()?;
                let out = m.next()?;
                if out.is_none() {
                    self.state = SortState::Done;
                }
                Ok(out)
            }
            SortState::Reading => {
                self.state = SortState::Done;
                self.read()
            }
        }
    }
}

impl SortOp<'_> {
    /// Read the whole input: the sorted rows, or the first batch of the
    /// merge of the runs spilled on the way.
    fn read(&mut self) -> Result<Option<RecordBatch>, SqlError> {
        let ctx = self.mem.ctx;
        let spill = ctx.spill.enabled();
        let run_bytes = usize::try_from(ctx.limits.memory_budget / 6).unwrap_or(usize::MAX);
        let mut held: Vec<RecordBatch> = Vec::new();
        let mut runs = Vec::new();
        let mut rows = 0usize;
        let mut bytes = 0usize;
        // Top-N: cut back once this many rows are held.
        let cut = self.fetch.map(|k| (2 * k).max(BATCH_ROWS));
        while let Some(b) = self.input.next()? {
            let size = b.get_array_memory_size();
            if spill && !held.is_empty() && bytes + size > run_bytes {
                // Under a LIMIT, a run needs no more rows than it keeps.
                let run = sort(&self.schema, &held, &self.keys, self.fetch)?;
                held.clear();
                bytes = 0;
                runs.push(ctx.spill.write(&self.schema, &slices(&run))?);
                drop(run);
                self.mem.set(0)?;
            }
            rows += b.num_rows();
            bytes += size;
            self.mem.set(bytes)?;
            held.push(b);
            if cut.is_some_and(|c| rows >= c) {
                let best = sort(&self.schema, &held, &self.keys, self.fetch)?;
                rows = best.num_rows();
                bytes = best.get_array_memory_size();
                held = vec![best];
            }
        }
        let last = sort(&self.schema, &held, &self.keys, self.fetch)?;
        drop(held);
        if runs.is_empty() {
            return Ok(Some(last));
        }
        let mut merge = Merge::new(&self.schema, &self.keys, runs, slices(&last))?;
        let first = merge.next()?;
        self.state = SortState::Merging(Box::new(merge));
        Ok(first)
    }
}

/// `b` in batches of [`BATCH_ROWS`] rows.
fn slices(b: &RecordBatch) -> Vec<RecordBatch> {
    (0..b.num_rows())
        .step_by(BATCH_ROWS)
        .map(|at| b.slice(at, BATCH_ROWS.min(b.num_rows() - at)))
        .collect()
}

/// The sort options of `k`.
pub fn options(k: &SortKey) -> SortOptions {
    SortOptions {
        descending: !k.asc,
        nulls_first: k.nulls_first,
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
                options: Some(options(k)),
            })
        })
        .collect::<Result<Vec<_>, SqlError>>()?;
    let idx = lexsort_to_indices(&cols, fetch)?;
    Ok(take_record_batch(&all, &idx)?)
}
