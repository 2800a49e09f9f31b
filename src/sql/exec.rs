//! Executing a logical plan: scans run in parallel inside the provider (with
//! the scan filter applied in each worker); the other operators run over
//! materialised inputs with Arrow kernels. Limits (timeout, memory budget)
//! are checked between operators.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::filter_record_batch;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatchOptions;

use super::expr::{eval, eval_predicate};
use super::logical::{Expr, Plan};
use super::{ops, DataLayer, Limits, SqlError};

/// State shared by one execution.
pub struct ExecCtx<'a> {
    pub(crate) provider: &'a dyn DataLayer,
    pub(crate) limits: Limits,
    pub(crate) started: Instant,
    pub(crate) peak: AtomicU64,
}

impl<'a> ExecCtx<'a> {
    /// A context for one query.
    pub fn new(provider: &'a dyn DataLayer, limits: Limits) -> Self {
        ExecCtx {
            provider,
            limits,
            started: Instant::now(),
            peak: AtomicU64::new(0),
        }
    }

    pub(crate) fn check_time(&self) -> Result<(), SqlError> {
        if self
            .limits
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
        {
            return Err(SqlError::Cancelled);
        }
        if let Some(t) = self.limits.timeout {
            if self.started.elapsed() > t {
                return Err(SqlError::Timeout {
                    seconds: t.as_secs_f64(),
                });
            }
        }
        Ok(())
    }

    fn check_memory(&self, bytes: usize, what: &'static str) -> Result<(), SqlError> {
        self.peak.fetch_max(bytes as u64, Ordering::Relaxed);
        if bytes as u64 > self.limits.memory_budget {
            return Err(SqlError::MemoryBudget {
                limit: self.limits.memory_budget,
                what,
            });
        }
        Ok(())
    }
}

fn batches_size(b: &[RecordBatch]) -> usize {
    b.iter().map(RecordBatch::get_array_memory_size).sum()
}

/// Run `plan`, returning its output batches.
pub fn execute(plan: &Plan, ctx: &ExecCtx<'_>) -> Result<Vec<RecordBatch>, SqlError> {
    ctx.check_time()?;
    let out = match plan {
        Plan::Scan {
            dataset,
            relation,
            columns,
            filter,
            ..
        } => {
            let filter = filter
                .as_ref()
                .map(|f| materialise(f.clone(), ctx))
                .transpose()?;
            let post = |b: RecordBatch| -> Result<RecordBatch, SqlError> {
                crate::util::stats::add(
                    crate::util::stats::Counter::RowsScanned,
                    b.num_rows() as u64,
                );
                match &filter {
                    Some(f) => {
                        let mask = eval_predicate(f, &b)?;
                        Ok(filter_record_batch(&b, &mask)?)
                    }
                    None => Ok(b),
                }
            };
            let limit_hint = None;
            ctx.provider
                .scan(dataset, relation, columns, &post, limit_hint, &|| {
                    ctx.check_time()
                })?
        }
        Plan::Values { schema, rows } => {
            let mut cols: Vec<ArrayRef> = Vec::new();
            for (c, f) in schema.fields().iter().enumerate() {
                let parts: Vec<ArrayRef> = rows
                    .iter()
                    .map(|r| {
                        let a = r[c].to_array(1);
                        if a.data_type() == f.data_type() {
                            Ok(a)
                        } else {
                            super::expr::cast_array(&a, f.data_type())
                        }
                    })
                    .collect::<Result<_, SqlError>>()?;
                let refs: Vec<&dyn arrow::array::Array> = parts.iter().map(AsRef::as_ref).collect();
                cols.push(arrow::compute::concat(&refs)?);
            }
            let opts = RecordBatchOptions::new().with_row_count(Some(rows.len()));
            vec![RecordBatch::try_new_with_options(
                schema.clone(),
                cols,
                &opts,
            )?]
        }
        Plan::Filter { input, predicate } => {
            let predicate = materialise(predicate.clone(), ctx)?;
            let inp = execute(input, ctx)?;
            inp.iter()
                .map(|b| {
                    ctx.check_time()?;
                    let mask = eval_predicate(&predicate, b)?;
                    Ok(filter_record_batch(b, &mask)?)
                })
                .collect::<Result<Vec<_>, SqlError>>()?
        }
        Plan::Project {
            input,
            exprs,
            schema,
        } => {
            let exprs = exprs
                .iter()
                .map(|e| materialise(e.clone(), ctx))
                .collect::<Result<Vec<_>, _>>()?;
            let inp = execute(input, ctx)?;
            project(&inp, &exprs, schema, &|| ctx.check_time())?
        }
        Plan::Aggregate {
            input,
            group,
            aggs,
            schema,
        } => {
            let inp = execute(input, ctx)?;
            ctx.check_time()?;
            ops::aggregate::run(schema, &inp, group, aggs, &|bytes| {
                ctx.check_memory(bytes, "aggregate")
            })?
        }
        Plan::Window {
            input,
            calls,
            schema,
        } => {
            let inp = execute(input, ctx)?;
            ctx.check_memory(batches_size(&inp), "window")?;
            ops::window::run(&input.schema(), &inp, calls, schema)?
        }
        Plan::Sort { input, keys, fetch } => {
            let inp = execute(input, ctx)?;
            ctx.check_memory(batches_size(&inp), "sort")?;
            ctx.check_time()?;
            ops::sort::run(&input.schema(), &inp, keys, *fetch)?
        }
        Plan::Limit {
            input,
            limit,
            offset,
        } => {
            let inp = execute(input, ctx)?;
            limit_batches(inp, *offset, *limit)
        }
        Plan::Distinct { input } => {
            let inp = execute(input, ctx)?;
            ctx.check_memory(batches_size(&inp), "distinct")?;
            ops::distinct::run(&input.schema(), &inp)?
        }
        Plan::Join {
            left,
            right,
            kind,
            on,
            filter,
            schema,
        } => {
            let l = execute(left, ctx)?;
            let r = execute(right, ctx)?;
            ctx.check_memory(batches_size(&r), "join build side")?;
            let filter = filter
                .as_ref()
                .map(|f| materialise(f.clone(), ctx))
                .transpose()?;
            ops::join::run(
                &left.schema(),
                &l,
                &right.schema(),
                &r,
                *kind,
                on,
                filter.as_ref(),
                schema,
                // Called per batch of output: also the time and
                // cancellation check of a long join.
                &|bytes| {
                    ctx.check_time()?;
                    ctx.check_memory(bytes, "join")
                },
            )?
        }
        Plan::Union { inputs, schema } => {
            let mut out = Vec::new();
            for i in inputs {
                for b in execute(i, ctx)? {
                    out.push(RecordBatch::try_new_with_options(
                        schema.clone(),
                        b.columns().to_vec(),
                        &RecordBatchOptions::new().with_row_count(Some(b.num_rows())),
                    )?);
                }
            }
            out
        }
    };
    Ok(out)
}

/// Evaluate `exprs` over each batch; `check` runs before each (time and
/// cancellation).
fn project(
    inp: &[RecordBatch],
    exprs: &[Expr],
    schema: &SchemaRef,
    check: &dyn Fn() -> Result<(), SqlError>,
) -> Result<Vec<RecordBatch>, SqlError> {
    inp.iter()
        .map(|b| {
            check()?;
            let cols = exprs
                .iter()
                .zip(schema.fields())
                .map(|(e, f)| {
                    let a = eval(e, b)?;
                    if a.data_type() == f.data_type() {
                        Ok(a)
                    } else {
                        super::expr::cast_array(&a, f.data_type())
                    }
                })
                .collect::<Result<Vec<_>, SqlError>>()?;
            let opts = RecordBatchOptions::new().with_row_count(Some(b.num_rows()));
            Ok(RecordBatch::try_new_with_options(
                schema.clone(),
                cols,
                &opts,
            )?)
        })
        .collect()
}

fn limit_batches(inp: Vec<RecordBatch>, offset: usize, limit: Option<usize>) -> Vec<RecordBatch> {
    let mut skip = offset;
    let mut left = limit.unwrap_or(usize::MAX);
    let mut out = Vec::new();
    for b in inp {
        if left == 0 {
            break;
        }
        let n = b.num_rows();
        if skip >= n {
            skip -= n;
            continue;
        }
        let take = (n - skip).min(left);
        out.push(b.slice(skip, take));
        left -= take;
        skip = 0;
    }
    out
}

/// Replace IN-subqueries by their (executed) values.
fn materialise(mut e: Expr, ctx: &ExecCtx<'_>) -> Result<Expr, SqlError> {
    if let Expr::InSubquery {
        expr,
        plan,
        negated,
    } = e
    {
        let plan = super::optimize::optimize(*plan);
        let batches = execute(&plan, ctx)?;
        let schema = plan.schema();
        let all = ops::concat(&schema, &batches)?;
        let values: ArrayRef = Arc::clone(all.column(0));
        let expr = materialise(*expr, ctx)?;
        return Ok(Expr::InValues {
            expr: Box::new(expr),
            values,
            negated,
        });
    }
    let mut err = None;
    for c in e.children_mut() {
        let taken = std::mem::replace(c, Expr::Literal(super::value::Scalar::Null));
        match materialise(taken, ctx) {
            Ok(m) => *c = m,
            Err(x) => {
                err = Some(x);
                break;
            }
        }
    }
    match err {
        Some(x) => Err(x),
        None => Ok(e),
    }
}
