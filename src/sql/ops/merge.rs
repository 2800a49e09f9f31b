//! Merging sorted runs (spilled files, and the last run still in memory)
//! into one sorted stream: each run is read a batch at a time, its sort
//! keys row-encoded so that byte order is sort order, and a heap picks the
//! smallest next row of all runs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use arrow::array::RecordBatch;
use arrow::compute::interleave_record_batch;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::row::{OwnedRow, RowConverter, Rows, SortField};

use super::super::expr::eval;
use super::super::logical::SortKey;
use super::super::spill::SpillFile;
use super::super::SqlError;
use super::scan::BATCH_ROWS;

type Batches = Box<dyn Iterator<Item = Result<RecordBatch, ArrowError>> + Send>;

/// One run being read.
struct Cursor {
    batches: Batches,
    batch: RecordBatch,
    rows: Rows,
    at: usize,
    /// Index of `batch` among the batches of the output being built.
    slot: usize,
    /// The file read, removed when the run is done.
    _file: Option<SpillFile>,
}

/// The merge of sorted runs.
pub struct Merge {
    schema: SchemaRef,
    keys: Vec<SortKey>,
    conv: RowConverter,
    cursors: Vec<Option<Cursor>>,
    heap: BinaryHeap<Reverse<(OwnedRow, usize)>>,
}

impl Merge {
    /// Merge the spilled `runs` and the sorted batches `last`.
    pub fn new(
        schema: &SchemaRef,
        keys: &[SortKey],
        runs: Vec<SpillFile>,
        last: Vec<RecordBatch>,
    ) -> Result<Self, SqlError> {
        let conv = RowConverter::new(
            keys.iter()
                .map(|k| SortField::new_with_options(k.expr.data_type(), super::sort::options(k)))
                .collect(),
        )?;
        let mut m = Merge {
            schema: schema.clone(),
            keys: keys.to_vec(),
            conv,
            cursors: Vec::new(),
            heap: BinaryHeap::new(),
        };
        let mut sources: Vec<(Batches, Option<SpillFile>)> = Vec::new();
        for f in runs {
            sources.push((Box::new(f.read()?), Some(f)));
        }
        sources.push((Box::new(last.into_iter().map(Ok)), None));
        for (i, (batches, file)) in sources.into_iter().enumerate() {
            let c = m.open(batches, file)?;
            if let Some(c) = &c {
                m.heap.push(Reverse((c.rows.row(0).owned(), i)));
            }
            m.cursors.push(c);
        }
        Ok(m)
    }

    /// A cursor at the first row of `batches`, `None` when it has none.
    fn open(
        &self,
        mut batches: Batches,
        file: Option<SpillFile>,
    ) -> Result<Option<Cursor>, SqlError> {
        match self.next_batch(&mut batches)? {
            None => Ok(None),
            Some((batch, rows)) => Ok(Some(Cursor {
                batches,
                batch,
                rows,
                at: 0,
                slot: usize::MAX,
                _file: file,
            })),
        }
    }

    /// The next non-empty batch of a run and its encoded keys.
    fn next_batch(&self, batches: &mut Batches) -> Result<Option<(RecordBatch, Rows)>, SqlError> {
        for b in batches.by_ref() {
            let b = b?;
            if b.num_rows() == 0 {
                continue;
            }
            let keys = self
                .keys
                .iter()
                .map(|k| eval(&k.expr, &b))
                .collect::<Result<Vec<_>, _>>()?;
            let rows = self.conv.convert_columns(&keys)?;
            return Ok(Some((b, rows)));
        }
        Ok(None)
    }

    /// The next batch of merged rows, `None` when all runs are done.
    pub fn next(&mut self) -> Result<Option<RecordBatch>, SqlError> {
        if self.heap.is_empty() {
            return Ok(None);
        }
        let mut batches: Vec<RecordBatch> = Vec::new();
        for c in self.cursors.iter_mut().flatten() {
            c.slot = batches.len();
            batches.push(c.batch.clone());
        }
        let mut picks: Vec<(usize, usize)> = Vec::with_capacity(BATCH_ROWS);
        while picks.len() < BATCH_ROWS {
            let Some(Reverse((_, i))) = self.heap.pop() else {
                break;
            };
            let c = self.cursors[i].as_mut().expect("a run in the heap is open");
            picks.push((c.slot, c.at));
            c.at += 1;
            if c.at == c.batch.num_rows() {
                let mut run = std::mem::replace(&mut c.batches, Box::new(std::iter::empty()));
                match self.next_batch(&mut run)? {
                    Some((batch, rows)) => {
                        let c = self.cursors[i].as_mut().expect("open");
                        c.batches = run;
                        c.batch = batch;
                        c.rows = rows;
                        c.at = 0;
                        c.slot = batches.len();
                        batches.push(c.batch.clone());
                    }
                    None => {
                        self.cursors[i] = None;
                        continue;
                    }
                }
            }
            let c = self.cursors[i].as_ref().expect("open");
            self.heap.push(Reverse((c.rows.row(c.at).owned(), i)));
        }
        let refs: Vec<&RecordBatch> = batches.iter().collect();
        let out = interleave_record_batch(&refs, &picks)?;
        Ok(Some(RecordBatch::try_new_with_options(
            self.schema.clone(),
            out.columns().to_vec(),
            &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(out.num_rows())),
        )?))
    }
}
