//! Hash join (INNER / LEFT) on equality keys with an optional residual
//! predicate. The right input is the build side: read into a hash table on
//! the first pull. Left batches are then probed as they come, on one
//! worker thread per core, and their joined rows come out in the order of
//! the left batches; each is probed a slice of left rows at a time so that
//! no output batch holds much more than [`BATCH_ROWS`] rows, however many
//! matches a key has.

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread::Scope;

use crate::util::hash::FastMap;
use crate::util::ordered::OrderedMap;

use arrow::array::{ArrayRef, DynComparator, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use super::super::expr::{cast_array, eval, eval_predicate};
use super::super::logical::{Expr, JoinKind};
use super::super::SqlError;
use super::scan::BATCH_ROWS;
use super::{keys, BoxOp, Operator, Reservation};

/// Hash join of `left` and `right`.
pub struct HashJoinOp<'s, 'env> {
    pub left: BoxOp<'s>,
    pub right: BoxOp<'s>,
    pub right_schema: SchemaRef,
    pub spec: JoinSpec,
    pub mem: Reservation<'s>,
    /// Where the probe workers run.
    pub scope: &'s Scope<'s, 'env>,
    pub state: Option<Probes>,
}

/// What a join computes, shared with its probe workers.
#[derive(Clone)]
pub struct JoinSpec {
    pub kind: JoinKind,
    pub on: Vec<(Expr, Expr)>,
    pub filter: Option<Expr>,
    pub schema: SchemaRef,
    /// The output columns read above the join (all when `None`); the
    /// others come out as NULLs, not gathered, and `schema` is then
    /// all nullable.
    pub keep: Option<Vec<bool>>,
}

/// Joined rows a worker produces for one left batch. Past them it hands
/// the rest of the batch back, to be probed a slice at a time as the
/// output is pulled: a key that matches many rows must not be joined all
/// at once, nor ahead of a LIMIT.
const WORKER_ROWS: usize = 8 * BATCH_ROWS;

/// What a worker gives back for one left batch, in order.
enum Joined {
    Batch(RecordBatch),
    /// The rows not probed yet.
    Rest(Probing),
}

type Probed = Result<Vec<Joined>, SqlError>;

/// A join past its build: left batches out to the workers, joined batches
/// back in order.
pub struct Probes {
    build: Arc<Build>,
    /// `None` once the left input is done and every result is in `ready`.
    workers: Option<OrderedMap<RecordBatch, Probed>>,
    ready: VecDeque<Joined>,
}

/// The build side: its rows, their keys and a hash table over them.
struct Build {
    rows: RecordBatch,
    keys: Vec<ArrayRef>,
    hashes: Vec<u64>,
    /// Key hash → the first row with it; `next` chains the others, in row
    /// order (rows with a NULL key are left out: they never match).
    heads: FastMap<u64, u32>,
    next: Vec<u32>,
}

/// End of a chain.
const NONE: u32 = u32::MAX;

/// A left batch being probed.
struct Probing {
    batch: RecordBatch,
    /// Its keys (none: a join without keys), their hashes, and the
    /// comparisons with the build side's keys.
    keys: Vec<ArrayRef>,
    hashes: Vec<u64>,
    cmps: Vec<DynComparator>,
    /// Comparisons of its keys with themselves, to tell a run of equal
    /// keys.
    runs: Vec<DynComparator>,
    /// The first row not probed yet.
    next: usize,
}

impl Operator for HashJoinOp<'_, '_> {
    fn next(&mut self) -> Result<Option<RecordBatch>, SqlError> {
        if self.state.is_none() {
            let right = super::drain(&mut self.right, &mut self.mem)?;
            let build = Arc::new(build(&self.right_schema, &right, &self.spec.on)?);
            let (shared, spec) = (Arc::clone(&build), Arc::new(self.spec.clone()));
            let workers = crate::util::rt::cores();
            self.state = Some(Probes {
                build,
                workers: Some(OrderedMap::start(self.scope, workers, move |lb| {
                    probe_batch(&shared, lb, &spec)
                })),
                ready: VecDeque::new(),
            });
        }
        let p = self.state.as_mut().expect("set above");
        let spec = &self.spec;
        loop {
            match p.ready.pop_front() {
                Some(Joined::Batch(b)) => return Ok(Some(b)),
                Some(Joined::Rest(mut rest)) => {
                    self.mem.ctx.check_time()?;
                    let b = probe(
                        &p.build,
                        &mut rest,
                        (spec.kind, spec.filter.as_ref()),
                        (&spec.schema, spec.keep.as_deref()),
                    )?;
                    if rest.next < rest.batch.num_rows() {
                        p.ready.push_front(Joined::Rest(rest));
                    }
                    if b.num_rows() > 0 {
                        return Ok(Some(b));
                    }
                    continue;
                }
                None => {}
            }
            let Some(workers) = p.workers.as_mut() else {
                return Ok(None);
            };
            // The time and cancellation check of a long join.
            self.mem.ctx.check_time()?;
            let ready = &mut p.ready;
            let mut take = |r: Probed| -> Result<(), SqlError> {
                ready.extend(r?);
                Ok(())
            };
            match self.left.next()? {
                Some(lb) => workers.push(lb, &mut take)?,
                None => {
                    if let Some(w) = p.workers.take() {
                        w.finish(&mut take)?;
                    }
                }
            }
        }
    }
}

/// The joined batches of one left batch, up to [`WORKER_ROWS`] rows, then
/// what is left of it.
fn probe_batch(build: &Build, lb: RecordBatch, spec: &JoinSpec) -> Probed {
    let mut p = start_probe(build, lb, &spec.on)?;
    let mut out = Vec::new();
    let mut rows = 0;
    while p.next < p.batch.num_rows() {
        if rows >= WORKER_ROWS {
            out.push(Joined::Rest(p));
            return Ok(out);
        }
        let b = probe(
            build,
            &mut p,
            (spec.kind, spec.filter.as_ref()),
            (&spec.schema, spec.keep.as_deref()),
        )?;
        rows += b.num_rows();
        if b.num_rows() > 0 {
            out.push(Joined::Batch(b));
        }
    }
    Ok(out)
}

fn build(
    schema: &SchemaRef,
    right: &[RecordBatch],
    on: &[(Expr, Expr)],
) -> Result<Build, SqlError> {
    let r = super::concat(schema, right)?;
    let n = r.num_rows();
    let keys = on
        .iter()
        .map(|(_, re)| eval(re, &r))
        .collect::<Result<Vec<_>, _>>()?;
    let hashes = keys::hash_rows(&keys, n)?;
    let mut heads: FastMap<u64, u32> = FastMap::default();
    let mut next = vec![NONE; n];
    if !on.is_empty() {
        // Backwards, so that each chain runs in row order.
        for j in (0..n).rev() {
            if keys::any_null(&keys, j) {
                continue;
            }
            if let Some(prev) = heads.insert(hashes[j], j as u32) {
                next[j] = prev;
            }
        }
    }
    Ok(Build {
        rows: r,
        keys,
        hashes,
        heads,
        next,
    })
}

/// Hash the keys of a left batch, cast to the build side's key types.
fn start_probe(build: &Build, lb: RecordBatch, on: &[(Expr, Expr)]) -> Result<Probing, SqlError> {
    let keys = on
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
    Ok(Probing {
        hashes: keys::hash_rows(&keys, lb.num_rows())?,
        cmps: keys::comparators(&keys, &build.keys)?,
        runs: keys::comparators(&keys, &keys)?,
        keys,
        batch: lb,
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
    let keyed = !p.keys.is_empty();
    // The last keyed row probed, and where its matches are in `li`/`ri`.
    let mut last: Option<(usize, usize, usize)> = None;
    while i < lb.num_rows() && li.len() < BATCH_ROWS {
        if !keyed {
            // No keys: every right row.
            for j in 0..r.num_rows() {
                li.push(i as u32);
                ri.push(Some(j as u32));
            }
            if r.num_rows() == 0 && kind == JoinKind::Left {
                li.push(i as u32);
                ri.push(None);
            }
            i += 1;
            continue;
        }
        let before = li.len();
        if !keys::any_null(&p.keys, i) {
            let h = p.hashes[i];
            // Keys come in runs (the steps of one document): a row with the
            // keys of the row before matches what that one matched.
            let same = last.filter(|&(k, _, _)| p.hashes[k] == h && keys::equal(&p.runs, i, k));
            if let Some((_, start, end)) = same {
                for m in start..end {
                    let j = ri[m];
                    li.push(i as u32);
                    ri.push(j);
                }
            } else {
                let mut j = build.heads.get(&h).copied().unwrap_or(NONE);
                while j != NONE {
                    let ju = j as usize;
                    if build.hashes[ju] == h && keys::equal(&p.cmps, i, ju) {
                        li.push(i as u32);
                        ri.push(Some(j));
                    }
                    j = build.next[ju];
                }
            }
            last = Some((i, before, li.len()));
        }
        if li.len() == before && kind == JoinKind::Left && filter.is_none() {
            li.push(i as u32);
            ri.push(None);
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
/// `keep` leaves out are NULL (`schema` must then allow it).
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
    let options = arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(n));
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        cols,
        &options,
    )?)
}
