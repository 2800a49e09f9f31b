//! SELECT DISTINCT: pass on the first row of each distinct value tuple as
//! batches come; the tuples seen are the state.

use crate::util::hash::FastSet;

use arrow::array::UInt32Array;
use arrow::compute::take_record_batch;
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, SortField};

use super::super::SqlError;
use super::{BoxOp, Operator, Reservation};

/// Distinct rows of `input`, in first-seen order.
pub struct DistinctOp<'s> {
    input: BoxOp<'s>,
    conv: Option<RowConverter>,
    seen: FastSet<Box<[u8]>>,
    mem: Reservation<'s>,
    bytes: usize,
    /// A relation without columns has one distinct row at most.
    gave_empty_row: bool,
}

impl<'s> DistinctOp<'s> {
    /// Distinct rows of `input`.
    pub fn new(input: BoxOp<'s>, mem: Reservation<'s>) -> Self {
        DistinctOp {
            input,
            conv: None,
            seen: FastSet::default(),
            mem,
            bytes: 0,
            gave_empty_row: false,
        }
    }
}

impl Operator for DistinctOp<'_> {
    fn next(&mut self) -> Result<Option<RecordBatch>, SqlError> {
        while let Some(b) = self.input.next()? {
            if b.num_rows() == 0 {
                continue;
            }
            if b.num_columns() == 0 {
                if self.gave_empty_row {
                    continue;
                }
                self.gave_empty_row = true;
                return Ok(Some(b.slice(0, 1)));
            }
            if self.conv.is_none() {
                let fields = b
                    .columns()
                    .iter()
                    .map(|c| SortField::new(c.data_type().clone()))
                    .collect();
                self.conv = Some(RowConverter::new(fields)?);
            }
            let conv = self.conv.as_ref().expect("set above");
            let rows = conv.convert_columns(b.columns())?;
            let mut keep: Vec<u32> = Vec::new();
            for i in 0..rows.num_rows() {
                let r = rows.row(i);
                if !self.seen.contains(r.as_ref()) {
                    self.bytes += r.as_ref().len() + 48;
                    self.seen.insert(r.as_ref().into());
                    keep.push(i as u32);
                }
            }
            self.mem.set(self.bytes)?;
            if !keep.is_empty() {
                return Ok(Some(take_record_batch(&b, &UInt32Array::from(keep))?));
            }
        }
        Ok(None)
    }
}
