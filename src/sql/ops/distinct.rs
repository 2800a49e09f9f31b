//! SELECT DISTINCT: keep the first row of each distinct value tuple.

use std::collections::HashSet;

use arrow::array::UInt32Array;
use arrow::compute::take_record_batch;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use super::super::SqlError;

/// Distinct rows of `batches`, in first-seen order.
pub fn run(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<Vec<RecordBatch>, SqlError> {
    let all = super::concat(schema, batches)?;
    if all.num_columns() == 0 {
        return Ok(vec![all.slice(0, all.num_rows().min(1))]);
    }
    let (_, rows) = super::encode_rows(all.columns())?;
    let mut seen = HashSet::with_capacity(rows.num_rows());
    let keep: Vec<u32> = (0..rows.num_rows())
        .filter(|&i| seen.insert(rows.row(i)))
        .map(|i| i as u32)
        .collect();
    Ok(vec![take_record_batch(&all, &UInt32Array::from(keep))?])
}
