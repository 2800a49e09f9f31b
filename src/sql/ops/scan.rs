//! Scan: the data layer reads a relation on a thread of its own (decoding
//! Sources in parallel inside), applies the scan filter in the worker that
//! decoded each batch, and hands batches over a short queue, gathered into
//! batches of about [`BATCH_ROWS`] rows. The queue's bound is what keeps a
//! scan from running ahead of its consumer; dropping the operator stops the
//! scan at its next batch.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::Scope;

use arrow::compute::{filter_record_batch, BatchCoalescer};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use super::super::exec::ExecCtx;
use super::super::expr::{cast_array, eval, eval_predicate};
use super::super::logical::Expr;
use super::super::SqlError;
use super::Operator;

/// Rows per batch handed on by a scan.
pub const BATCH_ROWS: usize = 8192;

/// Batches a scan may have decoded ahead of its consumer.
const QUEUE: usize = 2;

/// A running scan.
pub struct ScanOp {
    rx: Receiver<Result<RecordBatch, SqlError>>,
    /// Set when the consumer goes away, so a scan whose filter keeps
    /// nothing (and so sends nothing) stops too.
    stop: Arc<AtomicBool>,
}

/// What one scan reads.
pub struct ScanSpec<'s> {
    pub dataset: &'s str,
    pub relation: &'s str,
    pub columns: &'s [usize],
    /// Output schema (the columns read).
    pub schema: SchemaRef,
    /// Predicate applied while scanning.
    pub filter: Option<Expr>,
    /// Expressions computed on the rows kept, appended after the columns
    /// read (`schema` names them too).
    pub computed: Vec<Expr>,
}

impl ScanOp {
    /// Start reading `spec` on a thread of `scope`.
    pub fn start<'s>(ctx: &'s ExecCtx<'s>, scope: &'s Scope<'s, '_>, spec: ScanSpec<'s>) -> ScanOp {
        let (tx, rx) = sync_channel(QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        scope.spawn(move || {
            let (filter, computed) = (spec.filter, spec.computed);
            let schema = spec.schema.clone();
            let post = |b: RecordBatch| -> Result<RecordBatch, SqlError> {
                crate::util::stats::add(
                    crate::util::stats::Counter::RowsScanned,
                    b.num_rows() as u64,
                );
                let b = match &filter {
                    Some(f) => {
                        let mask = eval_predicate(f, &b)?;
                        filter_record_batch(&b, &mask)?
                    }
                    None => b,
                };
                if computed.is_empty() {
                    return Ok(b);
                }
                let mut columns = b.columns().to_vec();
                for e in &computed {
                    let a = eval(e, &b)?;
                    let ty = e.data_type();
                    columns.push(if *a.data_type() == ty {
                        a
                    } else {
                        cast_array(&a, &ty)?
                    });
                }
                let opts = RecordBatchOptions::new().with_row_count(Some(b.num_rows()));
                Ok(RecordBatch::try_new_with_options(
                    schema.clone(),
                    columns,
                    &opts,
                )?)
            };
            let mut gather = Gather::new(spec.schema.clone());
            let send = |b: RecordBatch| {
                tx.send(Ok(b))
                    .map_err(|_| SqlError::Internal("scan consumer gone".into()))
            };
            let check = || {
                if stopped.load(Ordering::Relaxed) {
                    return Err(SqlError::Internal("scan consumer gone".into()));
                }
                ctx.check_time()
            };
            let read = ctx.provider.scan(
                spec.dataset,
                spec.relation,
                spec.columns,
                &post,
                &mut |b| gather.push(b, &send),
                &check,
            );
            let end = read.and_then(|()| gather.finish(&send));
            if let Err(e) = end {
                // Nobody listens when the consumer stopped the scan.
                let _ = tx.send(Err(e));
            }
        });
        ScanOp { rx, stop }
    }
}

/// Small batches gathered into larger ones, in order. The first batches
/// are kept small (a LIMIT of a few rows stops the scan early), and each
/// next one is twice as large up to [`BATCH_ROWS`].
struct Gather {
    schema: SchemaRef,
    target: usize,
    buffer: BatchCoalescer,
}

/// Rows of the first batch a scan hands on.
const FIRST_ROWS: usize = 1;

impl Gather {
    fn new(schema: SchemaRef) -> Self {
        Gather {
            buffer: BatchCoalescer::new(schema.clone(), FIRST_ROWS),
            schema,
            target: FIRST_ROWS,
        }
    }

    fn push(
        &mut self,
        b: RecordBatch,
        send: &dyn Fn(RecordBatch) -> Result<(), SqlError>,
    ) -> Result<(), SqlError> {
        if b.num_rows() >= self.target {
            // Large enough: no copy, after what came before.
            self.flush(send)?;
            return send(b);
        }
        self.buffer.push_batch(b)?;
        if self.buffer.has_completed_batch() {
            self.flush(send)?;
        }
        Ok(())
    }

    /// Send everything held, and grow the next batches.
    fn flush(
        &mut self,
        send: &dyn Fn(RecordBatch) -> Result<(), SqlError>,
    ) -> Result<(), SqlError> {
        self.buffer.finish_buffered_batch()?;
        while let Some(done) = self.buffer.next_completed_batch() {
            send(done)?;
        }
        if self.target < BATCH_ROWS {
            self.target = (self.target * 2).min(BATCH_ROWS);
            self.buffer = BatchCoalescer::new(self.schema.clone(), self.target);
        }
        Ok(())
    }

    fn finish(
        &mut self,
        send: &dyn Fn(RecordBatch) -> Result<(), SqlError>,
    ) -> Result<(), SqlError> {
        self.flush(send)
    }
}

impl Operator for ScanOp {
    fn next(&mut self) -> Result<Option<RecordBatch>, SqlError> {
        match self.rx.recv() {
            Ok(Ok(b)) => Ok(Some(b)),
            Ok(Err(e)) => Err(e),
            // The scan thread ended without error.
            Err(_) => Ok(None),
        }
    }
}

impl Drop for ScanOp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
