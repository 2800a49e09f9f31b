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

use arrow::array::{new_null_array, ArrayRef, BooleanArray};
use arrow::compute::{filter_record_batch, BatchCoalescer, FilterBuilder};
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use super::super::exec::ExecCtx;
use super::super::expr::{cast_array, eval, eval_predicate};
use super::super::json_eval;
use super::super::logical::{AggCall, Expr};
use super::super::SqlError;
use super::aggregate::Grouper;
use super::scan_bytes::BytesFilter;
use super::scan_labels::LabelFilter;
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
    /// The columns read.
    pub schema: SchemaRef,
    /// Predicate applied while scanning.
    pub filter: Option<Expr>,
    /// The columns read that the work or the operator above use (all when
    /// `None`). The others, read only for the filter, are handed on as
    /// NULLs, so the rows kept of a wide text column are not copied.
    pub needed: Option<Vec<bool>>,
    /// What the workers do with the rows kept, for the operator above.
    pub work: ScanWork,
}

/// Work a scan's workers do on the rows they keep, for the operator above
/// (see `sql::pushdown`).
#[derive(Clone, Default)]
pub struct ScanWork {
    /// Expressions appended as columns after the columns read.
    pub computed: Vec<Expr>,
    /// A GROUP BY of each batch on its own, after `computed`: its groups
    /// are what the scan hands on.
    pub partial: Option<PartialAggregate>,
}

/// The GROUP BY a scan's workers run on each batch.
#[derive(Clone)]
pub struct PartialAggregate {
    pub group: Vec<Expr>,
    pub aggs: Vec<AggCall>,
    /// Its output: the keys, then the aggregates.
    pub schema: SchemaRef,
}

impl ScanOp {
    /// Start reading `spec` on a thread of `scope`.
    pub fn start<'s>(ctx: &'s ExecCtx<'s>, scope: &'s Scope<'s, '_>, spec: ScanSpec<'s>) -> ScanOp {
        let (tx, rx) = sync_channel(QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        scope.spawn(move || {
            let (filter, work, needed) = (spec.filter, spec.work, spec.needed);
            let read = match &needed {
                Some(_) => super::nullable(&spec.schema),
                None => spec.schema.clone(),
            };
            let computed = work.computed_schema(&read);
            let output = work.output_schema(&computed);
            let bytes = BytesFilter::new(filter.as_ref());
            let labels = LabelFilter::new(filter.as_ref());
            let canonical: Vec<bool> = read
                .fields()
                .iter()
                .map(|f| ctx.provider.canonical_json(spec.relation, f.name()))
                .collect();
            let post = |b: RecordBatch| -> Result<RecordBatch, SqlError> {
                crate::util::stats::add(
                    crate::util::stats::Counter::RowsScanned,
                    b.num_rows() as u64,
                );
                let b = labels.settle(b, &read, needed.as_deref())?;
                let settled = bytes.settle(&b, &read, needed.as_deref())?;
                let filter = bytes.remaining(settled.is_some());
                let b = settled.unwrap_or(b);
                let keep = |f: &Expr| eval_predicate(f, &json_eval::mark(&b, &canonical)?);
                let b = match (filter, &needed) {
                    (Some(f), None) => filter_record_batch(&b, &keep(f)?)?,
                    (Some(f), Some(n)) => kept(&b, Some(&keep(f)?), n, &read)?,
                    (None, Some(n)) => kept(&b, None, n, &read)?,
                    (None, None) => b,
                };
                work.run(b, &computed, &canonical)
            };
            let mut gather = Gather::new(output);
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

/// The rows of `b` that `mask` keeps (all when `None`), with the columns
/// not `needed` left NULL, under `schema` (which allows that).
fn kept(
    b: &RecordBatch,
    mask: Option<&BooleanArray>,
    needed: &[bool],
    schema: &SchemaRef,
) -> Result<RecordBatch, SqlError> {
    let rows = mask.map_or(b.num_rows(), BooleanArray::true_count);
    let mask = mask.map(|m| FilterBuilder::new(m).optimize().build());
    let columns = b
        .columns()
        .iter()
        .enumerate()
        .map(|(i, c)| -> Result<ArrayRef, SqlError> {
            Ok(match &mask {
                _ if !needed.get(i).copied().unwrap_or(true) => new_null_array(c.data_type(), rows),
                Some(m) => m.filter(c)?,
                None => c.clone(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let opts = RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &opts,
    )?)
}

impl ScanWork {
    /// True when the workers only filter.
    pub fn is_empty(&self) -> bool {
        self.computed.is_empty() && self.partial.is_none()
    }

    /// The columns read (`read`), then the computed ones.
    pub fn computed_schema(&self, read: &SchemaRef) -> SchemaRef {
        if self.computed.is_empty() {
            return read.clone();
        }
        let mut fields: Vec<Field> = read.fields().iter().map(|f| (**f).clone()).collect();
        for (k, e) in self.computed.iter().enumerate() {
            fields.push(Field::new(format!("#{k}"), e.data_type(), true));
        }
        Arc::new(Schema::new(fields))
    }

    /// What the scan hands on, given its `computed_schema`.
    pub fn output_schema(&self, computed: &SchemaRef) -> SchemaRef {
        match &self.partial {
            Some(p) => p.schema.clone(),
            None => computed.clone(),
        }
    }

    /// Do the work on a batch `b` of rows kept, whose columns `canonical`
    /// says hold canonical JSON (`json_eval::mark`).
    fn run(
        &self,
        b: RecordBatch,
        computed: &SchemaRef,
        canonical: &[bool],
    ) -> Result<RecordBatch, SqlError> {
        let b = if self.computed.is_empty() {
            b
        } else {
            let seen = json_eval::mark(&b, canonical)?;
            let mut columns = b.columns().to_vec();
            for e in &self.computed {
                let a = eval(e, &seen)?;
                let ty = e.data_type();
                columns.push(if *a.data_type() == ty {
                    a
                } else {
                    cast_array(&a, &ty)?
                });
            }
            let opts = RecordBatchOptions::new().with_row_count(Some(b.num_rows()));
            RecordBatch::try_new_with_options(computed.clone(), columns, &opts)?
        };
        match &self.partial {
            Some(p) if b.num_rows() > 0 => {
                let mut g = Grouper::new(&p.group, &p.aggs)?;
                g.push(&json_eval::mark(&b, canonical)?, &p.group, &p.aggs)?;
                g.finish(&p.schema, &p.aggs)
            }
            Some(p) => Ok(RecordBatch::new_empty(p.schema.clone())),
            None => Ok(b),
        }
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
