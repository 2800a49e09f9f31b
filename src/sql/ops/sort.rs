//! ORDER BY: evaluate keys over the concatenated input, sort indices (top-k
//! when a LIMIT bounds the output), gather.

use arrow::compute::{lexsort_to_indices, take_record_batch, SortColumn, SortOptions};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use super::super::expr::eval;
use super::super::logical::SortKey;
use super::super::SqlError;

/// Sort `batches` by `keys`; keep the first `fetch` rows when given.
pub fn run(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    keys: &[SortKey],
    fetch: Option<usize>,
) -> Result<Vec<RecordBatch>, SqlError> {
    let all = super::concat(schema, batches)?;
    if all.num_rows() == 0 {
        return Ok(vec![all]);
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
    Ok(vec![take_record_batch(&all, &idx)?])
}
