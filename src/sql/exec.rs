//! Executing a logical plan: each node becomes a physical operator (see
//! `ops`), the root is pulled until it is done. Scans run on threads of a
//! scope that ends with the execution; IN-subqueries are run first and
//! replaced by their values.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::Scope;
use std::time::Instant;

use arrow::array::{ArrayRef, RecordBatch};

use super::logical::{Expr, Plan};
use super::ops::hash_aggregate::Restart;
use super::ops::scan::ScanWork;
use super::ops::{BoxOp, Reservation};
use super::pushdown::aggregate_into_scan;
use super::{ops, DataLayer, Limits, SqlError};

/// State shared by one execution.
pub struct ExecCtx<'a> {
    pub(crate) provider: &'a dyn DataLayer,
    pub(crate) limits: Limits,
    pub(crate) started: Instant,
    pub(crate) peak: AtomicU64,
    /// Per-operator statistics, for EXPLAIN ANALYZE.
    pub(crate) profile: Option<super::explain::Profile>,
    /// Where state past the budget goes.
    pub(crate) spill: super::spill::Spill,
}

impl<'a> ExecCtx<'a> {
    /// A context for one query.
    pub fn new(provider: &'a dyn DataLayer, limits: Limits) -> Self {
        ExecCtx {
            provider,
            spill: super::spill::Spill::new(std::env::temp_dir(), limits.spill_limit),
            limits,
            started: Instant::now(),
            peak: AtomicU64::new(0),
            profile: None,
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

    pub(crate) fn check_memory(&self, bytes: usize, what: &'static str) -> Result<(), SqlError> {
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

/// Run `plan`, returning its output batches (at least one).
pub fn execute(plan: &Plan, ctx: &ExecCtx<'_>) -> Result<Vec<RecordBatch>, SqlError> {
    ctx.check_time()?;
    let out = std::thread::scope(|scope| {
        let mut root = build(plan, ctx, scope, None)?;
        let mut out = Vec::new();
        while let Some(b) = root.next()? {
            ctx.check_time()?;
            out.push(b);
        }
        Ok::<_, SqlError>(out)
    })?;
    if out.is_empty() {
        return Ok(vec![RecordBatch::new_empty(plan.schema())]);
    }
    Ok(out)
}

/// The physical operator of each plan node. `needed` marks the output
/// columns the parent reads (all when `None`): a join fills the others
/// with NULLs instead of gathering them.
fn build<'s, 'env>(
    plan: &'s Plan,
    ctx: &'s ExecCtx<'s>,
    scope: &'s Scope<'s, 'env>,
    needed: Option<Vec<bool>>,
) -> Result<BoxOp<'s>, SqlError> {
    let child = |p: &'s Plan| build(p, ctx, scope, None);
    let child_using = |p: &'s Plan, exprs: &mut dyn Iterator<Item = &'s Expr>| {
        build(p, ctx, scope, Some(used(p, exprs)))
    };
    let stats = ctx.profile.as_ref().map(|p| p.node(plan));
    let mem = |what| Reservation::new(ctx, what, stats.clone());
    let op: BoxOp<'s> = match plan {
        Plan::Scan { .. } => scan(plan, ScanWork::default(), needed, ctx, scope)?,
        Plan::Values { schema, rows } => Box::new(ops::values::ValuesOp::new(schema, rows)?),
        Plan::Filter { input, predicate } => Box::new(ops::filter::FilterOp {
            predicate: materialise(predicate.clone(), ctx)?,
            input: child(input)?,
        }),
        Plan::Project {
            input,
            exprs,
            schema,
        } => Box::new(ops::project::ProjectOp::new(
            // Only the expressions read above need their columns.
            child_using(
                input,
                &mut exprs
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| needed.as_ref().is_none_or(|n| n[*i]))
                    .map(|(_, e)| e),
            )?,
            exprs
                .iter()
                .map(|e| materialise(e.clone(), ctx))
                .collect::<Result<Vec<_>, _>>()?,
            schema.clone(),
            needed.clone(),
        )),
        Plan::Aggregate {
            input,
            group,
            aggs,
            schema,
        } => {
            let mask = used(
                input,
                &mut group
                    .iter()
                    .chain(aggs.iter().filter_map(|a| a.arg.as_ref())),
            );
            let pushed = match &**input {
                Plan::Scan { .. } => Some(aggregate_into_scan(input, group, aggs, schema)),
                _ => None,
            };
            // Past its budget, the aggregate reads its input again.
            let (mut restart, group, aggs): (Restart<'s>, _, _) = match pushed {
                Some(p) if !p.work.is_empty() => {
                    let mut work = p.work;
                    work.computed = work
                        .computed
                        .into_iter()
                        .map(|e| materialise(e, ctx))
                        .collect::<Result<Vec<_>, _>>()?;
                    // The read columns the workers' expressions use, and,
                    // when they do not group, the aggregate's own.
                    let above = match &work.partial {
                        Some(q) => (&q.group, &q.aggs),
                        None => (&p.group, &p.aggs),
                    };
                    let needed = used(
                        input,
                        &mut work
                            .computed
                            .iter()
                            .chain(above.0)
                            .chain(above.1.iter().filter_map(|a| a.arg.as_ref())),
                    );
                    let source = Box::new(move || {
                        let op = scan(input, work.clone(), Some(needed.clone()), ctx, scope)?;
                        Ok(match ctx.profile.as_ref().map(|p| p.node(input)) {
                            Some(stats) => Box::new(super::explain::Measured { inner: op, stats }),
                            None => op,
                        })
                    });
                    (source, p.group, p.aggs)
                }
                _ => (
                    Box::new(move || build(input, ctx, scope, Some(mask.clone()))),
                    group.clone(),
                    aggs.clone(),
                ),
            };
            Box::new(ops::hash_aggregate::AggregateOp::new(
                restart()?,
                restart,
                (group, aggs),
                schema.clone(),
                mem("aggregate"),
            ))
        }
        Plan::Window {
            input,
            calls,
            schema,
        } => Box::new(ops::window::WindowOp {
            input_schema: input.schema(),
            input: child(input)?,
            calls: calls.clone(),
            schema: schema.clone(),
            mem: mem("window"),
            done: false,
        }),
        Plan::Sort { input, keys, fetch } => Box::new(ops::sort::SortOp {
            schema: input.schema(),
            input: child(input)?,
            keys: keys.clone(),
            fetch: *fetch,
            mem: mem("sort"),
            state: ops::sort::SortState::Reading,
        }),
        Plan::Limit {
            input,
            limit,
            offset,
        } => Box::new(ops::limit::LimitOp::new(child(input)?, *offset, *limit)),
        Plan::Distinct { input } => Box::new(ops::distinct::DistinctOp::new(
            child(input)?,
            mem("distinct"),
        )),
        Plan::Join {
            left,
            right,
            kind,
            on,
            filter,
            schema,
        } => Box::new(ops::join::HashJoinOp {
            // The build side first: its scan starts before the probe's.
            right: child(right)?,
            right_schema: right.schema(),
            left: child(left)?,
            spec: ops::join::JoinSpec {
                kind: *kind,
                on: on.clone(),
                filter: filter
                    .as_ref()
                    .map(|f| materialise(f.clone(), ctx))
                    .transpose()?,
                schema: match needed {
                    Some(_) => ops::nullable(schema),
                    None => schema.clone(),
                },
                keep: needed,
            },
            mem: mem("join build side"),
            scope,
            state: None,
        }),
        Plan::Union { inputs, schema } => Box::new(ops::union::UnionOp::new(
            inputs.iter().map(child).collect::<Result<_, _>>()?,
            schema.clone(),
        )),
    };
    Ok(match stats {
        Some(stats) => Box::new(super::explain::Measured { inner: op, stats }),
        None => op,
    })
}

/// The operator of a Scan node whose workers also do `work`, handing on
/// the `needed` columns (all when `None`).
fn scan<'s>(
    plan: &'s Plan,
    work: ScanWork,
    needed: Option<Vec<bool>>,
    ctx: &'s ExecCtx<'s>,
    scope: &'s Scope<'s, '_>,
) -> Result<BoxOp<'s>, SqlError> {
    let Plan::Scan {
        dataset,
        relation,
        columns,
        filter,
        ..
    } = plan
    else {
        return Err(SqlError::Internal(
            "a scan of a plan that is not one".into(),
        ));
    };
    let filter = filter
        .as_ref()
        .map(|f| materialise(f.clone(), ctx))
        .transpose()?;
    Ok(Box::new(ops::scan::ScanOp::start(
        ctx,
        scope,
        ops::scan::ScanSpec {
            dataset,
            relation,
            columns,
            schema: plan.schema(),
            filter,
            needed,
            work,
        },
    )))
}

/// The output columns of `p` that `exprs` read.
fn used(p: &Plan, exprs: &mut dyn Iterator<Item = &Expr>) -> Vec<bool> {
    let mut cols = Vec::new();
    for e in exprs {
        e.columns(&mut cols);
    }
    let mut mask = vec![false; p.schema().fields().len()];
    for c in cols {
        if let Some(m) = mask.get_mut(c) {
            *m = true;
        }
    }
    mask
}

/// Replace IN-subqueries by their (executed) values.
fn materialise(mut e: Expr, ctx: &ExecCtx<'_>) -> Result<Expr, SqlError> {
    if let Expr::InSubquery {
        expr,
        plan,
        negated,
    } = e
    {
        let plan = super::optimize::optimize(*plan, ctx.provider);
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
