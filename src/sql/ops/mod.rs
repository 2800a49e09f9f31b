//! Physical operators. Each pulls batches from its input and yields its
//! own: filters, projections, limits and unions pass batches through as
//! they come; sorts, aggregates, DISTINCT state, join build sides and
//! windows hold what their algorithm needs, counted against the memory
//! budget as it grows. Scans run on a thread of their own and stop when
//! nothing pulls any more (a satisfied LIMIT).

pub mod aggregate;
pub mod distinct;
pub mod filter;
pub mod hash_aggregate;
pub mod join;
pub mod keys;
pub mod limit;
pub mod merge;
pub mod project;
pub mod scan;
pub mod scan_bytes;
pub mod scan_labels;
pub mod sort;
pub mod union;
pub mod values;
pub mod window;

use arrow::array::ArrayRef;
use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, Rows, SortField};

use super::exec::ExecCtx;
use super::SqlError;

/// A physical operator: a source of batches.
pub trait Operator: Send {
    /// The next batch, or `None` when there are no more.
    fn next(&mut self) -> Result<Option<RecordBatch>, SqlError>;
}

/// An operator living as long as one execution.
pub type BoxOp<'s> = Box<dyn Operator + 's>;

/// Every remaining batch of `op`, each counted against `mem`.
pub fn drain(op: &mut BoxOp<'_>, mem: &mut Reservation<'_>) -> Result<Vec<RecordBatch>, SqlError> {
    let mut out = Vec::new();
    while let Some(b) = op.next()? {
        mem.grow(b.get_array_memory_size())?;
        out.push(b);
    }
    Ok(out)
}

/// Bytes one operator holds, checked against the budget before they are
/// kept.
pub struct Reservation<'s> {
    pub(super) ctx: &'s ExecCtx<'s>,
    what: &'static str,
    bytes: usize,
    /// Where EXPLAIN ANALYZE reads the most held.
    stats: Option<std::sync::Arc<crate::sql::explain::OpStats>>,
}

impl<'s> Reservation<'s> {
    /// Nothing held yet by operator `what`.
    pub fn new(
        ctx: &'s ExecCtx<'s>,
        what: &'static str,
        stats: Option<std::sync::Arc<crate::sql::explain::OpStats>>,
    ) -> Self {
        Reservation {
            ctx,
            what,
            bytes: 0,
            stats,
        }
    }

    /// Hold `n` more bytes; fails (`PC-SQL-017`) when that would pass the
    /// budget. Also the time and cancellation check of a growing state.
    pub fn grow(&mut self, n: usize) -> Result<(), SqlError> {
        self.set(self.bytes + n)
    }

    /// Hold `n` bytes in all.
    pub fn set(&mut self, n: usize) -> Result<(), SqlError> {
        self.ctx.check_time()?;
        self.ctx.check_memory(n, self.what)?;
        self.bytes = n;
        if let Some(s) = &self.stats {
            s.peak
                .fetch_max(n as u64, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }
}

/// `schema` with every column nullable: for an operator that leaves the
/// columns nothing reads as NULLs.
pub fn nullable(schema: &SchemaRef) -> SchemaRef {
    std::sync::Arc::new(arrow::datatypes::Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<_>>(),
    ))
}

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
