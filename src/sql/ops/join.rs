//! Hash join (INNER / LEFT) on equality keys with an optional residual
//! predicate. The right input is the build side.

use std::collections::HashMap;

use arrow::array::{ArrayRef, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use super::super::expr::{eval, eval_predicate};
use super::super::logical::{Expr, JoinKind};
use super::super::SqlError;

/// Join `left` and `right`.
#[allow(clippy::too_many_arguments)]
pub fn run(
    _left_schema: &SchemaRef,
    left: &[RecordBatch],
    right_schema: &SchemaRef,
    right: &[RecordBatch],
    kind: JoinKind,
    on: &[(Expr, Expr)],
    filter: Option<&Expr>,
    schema: &SchemaRef,
    budget: &dyn Fn(usize) -> Result<(), SqlError>,
) -> Result<Vec<RecordBatch>, SqlError> {
    let r = super::concat(right_schema, right)?;
    // Build: key bytes → right row indexes (rows with a NULL key never match).
    let mut table: HashMap<Box<[u8]>, Vec<u32>> = HashMap::new();
    let right_keys = on
        .iter()
        .map(|(_, re)| eval(re, &r))
        .collect::<Result<Vec<_>, _>>()?;
    let conv = if on.is_empty() {
        None
    } else {
        let (conv, rows) = super::encode_rows(&right_keys)?;
        for i in 0..r.num_rows() {
            if right_keys.iter().any(|k| k.is_null(i)) {
                continue;
            }
            table
                .entry(rows.row(i).as_ref().into())
                .or_default()
                .push(i as u32);
        }
        Some(conv)
    };
    let mut out = Vec::new();
    let mut produced = 0usize;
    for lb in left {
        if lb.num_rows() == 0 {
            continue;
        }
        let mut li: Vec<u32> = Vec::new();
        let mut ri: Vec<Option<u32>> = Vec::new();
        match &conv {
            Some(conv) => {
                let left_keys = on
                    .iter()
                    .map(|(le, _)| eval(le, lb))
                    .collect::<Result<Vec<_>, _>>()?;
                let left_keys = left_keys
                    .into_iter()
                    .zip(&right_keys)
                    .map(|(l, r)| {
                        if l.data_type() == r.data_type() {
                            Ok(l)
                        } else {
                            super::super::expr::cast_array(&l, r.data_type())
                        }
                    })
                    .collect::<Result<Vec<_>, SqlError>>()?;
                let rows = conv.convert_columns(&left_keys)?;
                for i in 0..lb.num_rows() {
                    let matches = if left_keys.iter().any(|k| k.is_null(i)) {
                        None
                    } else {
                        table.get(rows.row(i).as_ref())
                    };
                    match matches {
                        Some(m) => {
                            for &j in m {
                                li.push(i as u32);
                                ri.push(Some(j));
                            }
                        }
                        None if kind == JoinKind::Left && filter.is_none() => {
                            li.push(i as u32);
                            ri.push(None);
                        }
                        None => {}
                    }
                }
            }
            None => {
                for i in 0..lb.num_rows() {
                    for j in 0..r.num_rows() {
                        li.push(i as u32);
                        ri.push(Some(j as u32));
                    }
                    if r.num_rows() == 0 && kind == JoinKind::Left {
                        li.push(i as u32);
                        ri.push(None);
                    }
                }
            }
        }
        produced += li.len();
        budget(produced * 64)?;
        let mut joined = gather(lb, &r, &li, &ri, schema)?;
        if let Some(f) = filter {
            let mask = eval_predicate(f, &joined)?;
            if kind == JoinKind::Left {
                // Left rows whose every candidate failed come back null-extended.
                let mut matched = vec![false; lb.num_rows()];
                let mut keep_l = Vec::new();
                let mut keep_r = Vec::new();
                for (k, ok) in mask.iter().enumerate() {
                    if ok == Some(true) {
                        matched[li[k] as usize] = true;
                        keep_l.push(li[k]);
                        keep_r.push(ri[k]);
                    }
                }
                for (i, m) in matched.iter().enumerate() {
                    if !m {
                        keep_l.push(i as u32);
                        keep_r.push(None);
                    }
                }
                joined = gather(lb, &r, &keep_l, &keep_r, schema)?;
            } else {
                joined = arrow::compute::filter_record_batch(&joined, &mask)?;
            }
        }
        out.push(joined);
    }
    Ok(out)
}

fn gather(
    l: &RecordBatch,
    r: &RecordBatch,
    li: &[u32],
    ri: &[Option<u32>],
    schema: &SchemaRef,
) -> Result<RecordBatch, SqlError> {
    let lidx = UInt32Array::from(li.to_vec());
    let ridx: UInt32Array = ri.iter().copied().collect();
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for c in l.columns() {
        cols.push(take(c, &lidx, None)?);
    }
    for c in r.columns() {
        cols.push(take(c, &ridx, None)?);
    }
    let options = arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(li.len()));
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        cols,
        &options,
    )?)
}
