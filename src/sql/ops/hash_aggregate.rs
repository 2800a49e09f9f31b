//! GROUP BY: the groups of the whole input, one batch when it is read.
//!
//! When the groups outgrow half the memory budget (and spilling is
//! allowed), the state so far is dropped and the input is read again from
//! the start, its rows written to [`PARTITIONS`] spill files by a hash of
//! their group keys. Each file then holds whole groups and about
//! 1/[`PARTITIONS`] of them, and is aggregated on its own.

use std::collections::VecDeque;

use arrow::array::UInt32Array;
use arrow::compute::take_record_batch;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use super::super::expr::eval;
use super::super::logical::{AggCall, Expr};
use super::super::spill::{SpillFile, SpillWriter};
use super::super::SqlError;
use super::aggregate::Grouper;
use super::{keys, BoxOp, Operator, Reservation};

/// Spill files of a partitioned aggregate.
const PARTITIONS: usize = 32;

/// Starts the input over (for the partitioned pass).
pub type Restart<'s> = Box<dyn FnMut() -> Result<BoxOp<'s>, SqlError> + Send + 's>;

/// GROUP BY over `input`.
pub struct AggregateOp<'s> {
    input: Option<BoxOp<'s>>,
    restart: Restart<'s>,
    group: Vec<Expr>,
    aggs: Vec<AggCall>,
    schema: SchemaRef,
    mem: Reservation<'s>,
    /// Partitions still to aggregate, once spilled.
    partitions: Option<VecDeque<SpillFile>>,
}

impl<'s> AggregateOp<'s> {
    /// Group `input` by `group` and compute `aggs`; output columns are the
    /// group keys then the aggregates. `restart` gives the input again.
    pub fn new(
        input: BoxOp<'s>,
        restart: Restart<'s>,
        (group, aggs): (Vec<Expr>, Vec<AggCall>),
        schema: SchemaRef,
        mem: Reservation<'s>,
    ) -> Self {
        AggregateOp {
            input: Some(input),
            restart,
            group,
            aggs,
            schema,
            mem,
            partitions: None,
        }
    }

    /// Aggregate all of `input`; `None` when the groups outgrew
    /// `spill_at` bytes.
    fn aggregate(
        &mut self,
        input: &mut dyn FnMut() -> Result<Option<RecordBatch>, SqlError>,
        spill_at: Option<usize>,
    ) -> Result<Option<RecordBatch>, SqlError> {
        let mut g = Grouper::new(&self.group, &self.aggs)?;
        while let Some(b) = input()? {
            g.push(&b, &self.group, &self.aggs)?;
            let bytes = g.bytes(self.aggs.len());
            if spill_at.is_some_and(|at| bytes > at) {
                self.mem.set(0)?;
                return Ok(None);
            }
            self.mem.set(bytes)?;
        }
        let out = g.finish(&self.schema, &self.aggs)?;
        self.mem.set(0)?;
        Ok(Some(out))
    }

    /// Read the input again, into partitions by group key.
    fn partition(&mut self) -> Result<VecDeque<SpillFile>, SqlError> {
        let spill = &self.mem.ctx.spill;
        let mut input = (self.restart)()?;
        let mut writers: Vec<SpillWriter<'_>> = Vec::new();
        while let Some(b) = input.next()? {
            if writers.is_empty() {
                let schema = b.schema();
                writers = (0..PARTITIONS)
                    .map(|_| spill.writer(&schema))
                    .collect::<Result<_, _>>()?;
            }
            let keys = self
                .group
                .iter()
                .map(|g| eval(g, &b))
                .collect::<Result<Vec<_>, _>>()?;
            let hashes = keys::hash_rows(&keys, b.num_rows())?;
            let mut rows: Vec<Vec<u32>> = vec![Vec::new(); PARTITIONS];
            for (i, h) in hashes.iter().enumerate() {
                rows[(*h % PARTITIONS as u64) as usize].push(i as u32);
            }
            for (w, r) in writers.iter_mut().zip(rows) {
                if !r.is_empty() {
                    w.write(&take_record_batch(&b, &UInt32Array::from(r))?)?;
                }
            }
            self.mem.ctx.check_time()?;
        }
        writers.into_iter().map(SpillWriter::finish).collect()
    }
}

impl Operator for AggregateOp<'_> {
    fn next(&mut self) -> Result<Option<RecordBatch>, SqlError> {
        if let Some(mut input) = self.input.take() {
            let ctx = self.mem.ctx;
            // A global aggregate has one group: partitions would not help.
            let spill_at = (ctx.spill.enabled() && !self.group.is_empty())
                .then(|| usize::try_from(ctx.limits.memory_budget / 2).unwrap_or(usize::MAX));
            if let Some(out) = self.aggregate(&mut || input.next(), spill_at)? {
                return Ok(Some(out));
            }
            // Let the first pass's scans go before the second starts.
            drop(input);
            self.partitions = Some(self.partition()?);
        }
        while let Some(f) = self.partitions.as_mut().and_then(VecDeque::pop_front) {
            let mut batches = f.read()?;
            let mut next = || batches.next().transpose().map_err(SqlError::from);
            let out = self
                .aggregate(&mut next, None)?
                .expect("no spilling within a partition");
            if out.num_rows() > 0 {
                return Ok(Some(out));
            }
        }
        Ok(None)
    }
}
