//! Hash join (INNER / LEFT) on equality keys with an optional residual
//! predicate. The right input is the build side: read into a hash table on
//! the first pull. Left batches are then probed as they come, a slice of
//! left rows at a time so that no output batch holds much more than
//! [`BATCH_ROWS`] rows, however many matches a key has.

use crate::util::hash::FastMap;

use arrow::array::{ArrayRef, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, Rows};

use super::super::expr::{cast_array, eval, eval_predicate};
use super::super::logical::{Expr, JoinKind};
use super::super::SqlError;
use super::scan::BATCH_ROWS;
use super::{BoxOp, Operator, Reservation};

/// Hash join of `left` and `right`.
pub struct HashJoinOp<'s> {
    pub left: BoxOp<'s>,
    pub right: BoxOp<'s>,
    pub right_schema: SchemaRef,
    pub kind: JoinKind,
    pub on: Vec<(Expr, Expr)>,
    pub filter: Option<Expr>,
    pub schema: SchemaRef,
    /// The output columns read above the join (all when `None`); the
    /// others come out as NULLs, not gathered.
    pub keep: Option<Vec<bool>>,
    pub mem: Reservation<'s>,
    pub build: Option<Build>,
    pub probing: Option<Probing>,
}

/// The build side: its rows and their keys.
pub struct Build {
    rows: RecordBatch,
    keys: Vec<ArrayRef>,
    /// Key bytes → right row indexes (rows with a NULL key never match).
    table: FastMap<Box<[u8]>, Vec<u32>>,
    conv: Option<RowConverter>,
}

/// A left batch being probed.
pub struct Probing {
    batch: RecordBatch,
    /// Its encoded keys (`None`: a join without keys), and whether each
    /// row has a NULL key.
    keys: Option<(Rows, Vec<bool>)>,
    /// The first row not probed yet.
    next: usize,
}

impl Operator for HashJoinOp<'_> {
    fn next(&mut self) -> Result<Option<RecordBatch>, SqlError> {
        if self.build.is_none() {
            let right = super::drain(&mut self.right, &mut self.mem)?;
            self.build = Some(build(&self.right_schema, &right, &self.on)?);
        }
        let build = self.build.as_ref().expect("built above");
        loop {
            let done = self
                .probing
                .as_ref()
                .is_none_or(|p| p.next >= p.batch.num_rows());
            if done {
                let Some(lb) = self.left.next()? else {
                    return Ok(None);
                };
                self.probing = Some(start_probe(build, lb, &self.on)?);
                continue;
            }
            let p = self.probing.as_mut().expect("checked above");
            // The time and cancellation check of a long join.
            self.mem.ctx.check_time()?;
            let out = probe(
                build,
                p,
                (self.kind, self.filter.as_ref()),
                (&self.schema, self.keep.as_deref()),
            )?;
            if out.num_rows() > 0 {
                return Ok(Some(out));
            }
        }
    }
}

fn build(
    schema: &SchemaRef,
    right: &[RecordBatch],
    on: &[(Expr, Expr)],
) -> Result<Build, SqlError> {
    let r = super::concat(schema, right)?;
    let mut table: FastMap<Box<[u8]>, Vec<u32>> = FastMap::default();
    let keys = on
        .iter()
        .map(|(_, re)| eval(re, &r))
        .collect::<Result<Vec<_>, _>>()?;
    let conv = if on.is_empty() {
        None
    } else {
        let (conv, rows) = super::encode_rows(&keys)?;
        for i in 0..r.num_rows() {
            if keys.iter().any(|k| k.is_null(i)) {
                continue;
            }
            table
                .entry(rows.row(i).as_ref().into())
                .or_default()
                .push(i as u32);
        }
        Some(conv)
    };
    Ok(Build {
        rows: r,
        keys,
        table,
        conv,
    })
}

/// Encode the keys of a left batch, cast to the build side's key types.
fn start_probe(build: &Build, lb: RecordBatch, on: &[(Expr, Expr)]) -> Result<Probing, SqlError> {
    let keys = match &build.conv {
        None => None,
        Some(conv) => {
            let left_keys = on
                .iter()
                .zip(&build.keys)
                .map(|((le, _), r)| {
                    let l = eval(le, &lb)?;
                    if l.data_type() == r.data_type() {
                        Ok(l)
                    } else {
                        cast_array(&l, r.data_type())
                    }
                })
                .collect::<Result<Vec<_>, SqlError>>()?;
            let nulls = (0..lb.num_rows())
                .map(|i| left_keys.iter().any(|k| k.is_null(i)))
                .collect();
            Some((conv.convert_columns(&left_keys)?, nulls))
        }
    };
    Ok(Probing {
        batch: lb,
        keys,
        next: 0,
    })
}

/// Join the next slice of left rows of `p` against the build side.
fn probe(
    build: &Build,
    p: &mut Probing,
    (kind, filter): (JoinKind, Option<&Expr>),
    (schema, keep): (&SchemaRef, Option<&[bool]>),
) -> Result<RecordBatch, SqlError> {
    // The residual filter may read any column.
    let keep = if filter.is_some() { None } else { keep };
    let r = &build.rows;
    let lb = &p.batch;
    let from = p.next;
    let mut li: Vec<u32> = Vec::new();
    let mut ri: Vec<Option<u32>> = Vec::new();
    let mut i = from;
    while i < lb.num_rows() && li.len() < BATCH_ROWS {
        let matches: Option<&[u32]> = match &p.keys {
            Some((rows, nulls)) => {
                if nulls[i] {
                    None
                } else {
                    build.table.get(rows.row(i).as_ref()).map(Vec::as_slice)
                }
            }
            None => None,
        };
        match (&p.keys, matches) {
            (_, Some(m)) => {
                for &j in m {
                    li.push(i as u32);
                    ri.push(Some(j));
                }
            }
            (None, None) => {
                // No keys: every right row.
                for j in 0..r.num_rows() {
                    li.push(i as u32);
                    ri.push(Some(j as u32));
                }
                if r.num_rows() == 0 && kind == JoinKind::Left {
                    li.push(i as u32);
                    ri.push(None);
                }
            }
            (Some(_), None) if kind == JoinKind::Left && filter.is_none() => {
                li.push(i as u32);
                ri.push(None);
            }
            (Some(_), None) => {}
        }
        i += 1;
    }
    p.next = i;
    let mut joined = gather(lb, r, (&li, &ri), schema, keep)?;
    if let Some(f) = filter {
        let mask = eval_predicate(f, &joined)?;
        if kind == JoinKind::Left {
            // Left rows whose every candidate failed come back null-extended.
            let mut matched = vec![false; i - from];
            let mut keep_l = Vec::new();
            let mut keep_r = Vec::new();
            for (k, ok) in mask.iter().enumerate() {
                if ok == Some(true) {
                    matched[li[k] as usize - from] = true;
                    keep_l.push(li[k]);
                    keep_r.push(ri[k]);
                }
            }
            for (k, m) in matched.iter().enumerate() {
                if !m {
                    keep_l.push((from + k) as u32);
                    keep_r.push(None);
                }
            }
            joined = gather(lb, r, (&keep_l, &keep_r), schema, None)?;
        } else {
            joined = arrow::compute::filter_record_batch(&joined, &mask)?;
        }
    }
    Ok(joined)
}

/// The joined rows: left row `li[k]` beside right row `ri[k]`. Columns
/// `keep` leaves out are NULL (under a schema that allows it).
fn gather(
    l: &RecordBatch,
    r: &RecordBatch,
    (li, ri): (&[u32], &[Option<u32>]),
    schema: &SchemaRef,
    keep: Option<&[bool]>,
) -> Result<RecordBatch, SqlError> {
    let lidx = UInt32Array::from(li.to_vec());
    let ridx: UInt32Array = ri.iter().copied().collect();
    let n = li.len();
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    let sides = l
        .columns()
        .iter()
        .map(|c| (c, &lidx))
        .chain(r.columns().iter().map(|c| (c, &ridx)));
    for (i, (c, idx)) in sides.enumerate() {
        if keep.is_some_and(|k| !k.get(i).copied().unwrap_or(true)) {
            cols.push(arrow::array::new_null_array(c.data_type(), n));
        } else {
            cols.push(take(c, idx, None)?);
        }
    }
    let schema = match keep {
        Some(_) => std::sync::Arc::new(arrow::datatypes::Schema::new(
            schema
                .fields()
                .iter()
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect::<Vec<_>>(),
        )),
        None => schema.clone(),
    };
    let options = arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(n));
    Ok(RecordBatch::try_new_with_options(schema, cols, &options)?)
}
