//! Executing a logical plan: each node becomes a physical operator (see
//! `ops`), the root is pulled until it is done. Scans run on threads of a
//! scope that ends with the execution; IN-subqueries are run first and
//! replaced by their values.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::Scope;
use std::time::Instant;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{Field, Schema};

use super::logical::{AggCall, Expr, Plan};
use super::ops::hash_aggregate::Restart;
use super::ops::{BoxOp, Reservation};
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
        Plan::Scan { .. } => scan(plan, Vec::new(), ctx, scope)?,
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
            let (group, aggs, computed) = match &**input {
                Plan::Scan { .. } => computed_by_scan(input, group, aggs),
                _ => (group.clone(), aggs.clone(), Vec::new()),
            };
            let source: Restart<'s> = if computed.is_empty() {
                Box::new(move || build(input, ctx, scope, Some(mask.clone())))
            } else {
                let computed = computed
                    .into_iter()
                    .map(|e| materialise(e, ctx))
                    .collect::<Result<Vec<_>, _>>()?;
                Box::new(move || {
                    let op = scan(input, computed.clone(), ctx, scope)?;
                    Ok(match ctx.profile.as_ref().map(|p| p.node(input)) {
                        Some(stats) => Box::new(super::explain::Measured { inner: op, stats }),
                        None => op,
                    })
                })
            };
            // Past its budget, the aggregate reads its input again.
            let mut restart = source;
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

/// The operator of a Scan node whose workers also compute `computed`,
/// appended to each batch after the columns read.
fn scan<'s, 'env>(
    plan: &'s Plan,
    computed: Vec<Expr>,
    ctx: &'s ExecCtx<'s>,
    scope: &'s Scope<'s, 'env>,
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
    let read = plan.schema();
    let mut fields: Vec<Field> = read.fields().iter().map(|f| (**f).clone()).collect();
    for (k, e) in computed.iter().enumerate() {
        fields.push(Field::new(format!("#{k}"), e.data_type(), true));
    }
    Ok(Box::new(ops::scan::ScanOp::start(
        ctx,
        scope,
        ops::scan::ScanSpec {
            dataset,
            relation,
            columns,
            schema: Arc::new(Schema::new(fields)),
            filter,
            computed,
        },
    )))
}

/// The group keys and aggregates of a GROUP BY over a scan, with every
/// expression that is more than a column or a constant (a JSON path, a
/// cast) moved into the scan, and the expressions moved. The scan's
/// workers then compute them in parallel, batch by batch, where the
/// aggregate would on one thread.
pub(super) fn computed_by_scan(
    scan: &Plan,
    group: &[Expr],
    aggs: &[AggCall],
) -> (Vec<Expr>, Vec<AggCall>, Vec<Expr>) {
    let base = scan.schema().fields().len();
    let mut computed: Vec<Expr> = Vec::new();
    let mut take = |e: &Expr| -> Expr {
        if matches!(e, Expr::Column { .. }) || e.is_constant() {
            return e.clone();
        }
        computed.push(e.clone());
        let k = computed.len() - 1;
        Expr::col(base + k, format!("#{k}"), e.data_type())
    };
    let group = group.iter().map(&mut take).collect();
    let aggs = aggs
        .iter()
        .map(|a| AggCall {
            arg: a.arg.as_ref().map(&mut take),
            ..a.clone()
        })
        .collect();
    (group, aggs, computed)
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
