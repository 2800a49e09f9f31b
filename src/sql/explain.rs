//! EXPLAIN: the physical operators a plan runs as, and what each keeps in
//! memory. EXPLAIN ANALYZE runs the query and adds, per operator, the rows
//! and batches it produced, the time spent in it (including its inputs,
//! which it pulls) and the most memory it held against the budget.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arrow::record_batch::RecordBatch;

use super::exec::ExecCtx;
use super::logical::Plan;
use super::ops::{BoxOp, Operator};
use super::{DataLayer, Limits, SqlError};

/// What one operator did.
#[derive(Default)]
pub struct OpStats {
    rows: AtomicU64,
    batches: AtomicU64,
    nanos: AtomicU64,
    /// Most bytes held against the budget.
    pub(crate) peak: AtomicU64,
}

/// The statistics of each plan node of one execution, by node address.
#[derive(Default)]
pub struct Profile(Mutex<HashMap<usize, Arc<OpStats>>>);

impl Profile {
    /// The statistics of node `plan`.
    pub(crate) fn node(&self, plan: &Plan) -> Arc<OpStats> {
        let key = std::ptr::from_ref(plan) as usize;
        let mut m = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(m.entry(key).or_default())
    }
}

/// An operator counting what passes through it.
pub struct Measured<'s> {
    /// The operator measured.
    pub inner: BoxOp<'s>,
    /// Where its counts go.
    pub stats: Arc<OpStats>,
}

impl Operator for Measured<'_> {
    fn next(&mut self) -> Result<Option<RecordBatch>, SqlError> {
        let t = Instant::now();
        let r = self.inner.next();
        let s = &self.stats;
        s.nanos
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        if let Ok(Some(b)) = &r {
            s.rows.fetch_add(b.num_rows() as u64, Ordering::Relaxed);
            s.batches.fetch_add(1, Ordering::Relaxed);
        }
        r
    }
}

/// What a hash aggregate holds: past half the memory budget, it reads its
/// input again into spill files by a hash of the group keys (unless
/// `--spill-limit 0`).
const AGGREGATE_MEMORY: &str = "holds the groups, can spill its input by key hash";

/// The physical operator of one plan node, with how it holds memory and,
/// where the work is split, on how many workers (`workers`: one per core).
fn operator(plan: &Plan, workers: usize) -> String {
    let logical = plan.line();
    let (_, detail) = logical.split_once(": ").unwrap_or((&logical, ""));
    let on = if workers == 1 {
        "on 1 worker".to_string()
    } else {
        format!("on {workers} workers")
    };
    match plan {
        Plan::Scan { filter: None, .. } => format!("Scan: {detail} (streamed {on})"),
        Plan::Scan { .. } => {
            format!("Scan: {detail} (streamed {on}; filtered in the scan workers)")
        }
        Plan::Values { .. } => format!("Values: {detail}"),
        Plan::Filter { .. } => format!("Filter: {detail}"),
        Plan::Project { .. } => format!("Project: {detail}"),
        Plan::Aggregate {
            input,
            group,
            aggs,
            schema,
        } if matches!(**input, Plan::Scan { .. }) => {
            match super::pushdown::aggregate_into_scan(input, group, aggs, schema).describe() {
                Some(pushed) => format!("HashAggregate: {detail} ({AGGREGATE_MEMORY}; {pushed})"),
                None => format!("HashAggregate: {detail} ({AGGREGATE_MEMORY})"),
            }
        }
        Plan::Aggregate { .. } => format!("HashAggregate: {detail} ({AGGREGATE_MEMORY})"),
        Plan::Window { .. } => format!("Window: {detail} (holds its input)"),
        Plan::Sort { fetch: Some(_), .. } => {
            format!("TopN: {detail} (holds the best rows, cut back every batch)")
        }
        Plan::Sort { .. } => {
            format!("Sort: {detail} (holds its input, can spill it as sorted runs)")
        }
        Plan::Limit { .. } => format!("Limit: {detail} (stops its input when reached)"),
        Plan::Distinct { .. } => {
            "HashDistinct (streams first occurrences; holds the keys seen)".into()
        }
        Plan::Join { kind, .. } => format!(
            "HashJoin: {} {detail} (build: second input, held; probe: first, streamed {on})",
            format!("{kind:?}").to_lowercase()
        ),
        Plan::Union { .. } => format!("UnionAll: {detail} (one after the other)"),
    }
}

/// The physical plan as an indented tree, as it runs on this machine.
pub fn physical(plan: &Plan) -> String {
    physical_on(plan, crate::util::rt::cores())
}

/// The physical plan as it would run with `workers` cores.
pub fn physical_on(plan: &Plan, workers: usize) -> String {
    let mut out = String::new();
    tree(plan, 0, workers, &mut out, &|_| String::new());
    out
}

fn tree(
    plan: &Plan,
    depth: usize,
    workers: usize,
    out: &mut String,
    note: &dyn Fn(&Plan) -> String,
) {
    let _ = writeln!(
        out,
        "{}{}{}",
        "  ".repeat(depth),
        operator(plan, workers),
        note(plan)
    );
    for i in plan.inputs() {
        tree(i, depth + 1, workers, out, note);
    }
}

/// Run `plan` and return its physical plan annotated with what each
/// operator did, then the totals.
pub fn analyze(plan: &Plan, provider: &dyn DataLayer, limits: Limits) -> Result<String, SqlError> {
    let mut ctx = ExecCtx::new(provider, limits);
    ctx.profile = Some(Profile::default());
    let started = Instant::now();
    let batches = super::exec::execute(plan, &ctx)?;
    let wall = started.elapsed();
    let profile = ctx.profile.as_ref().expect("set above");
    let note = |p: &Plan| {
        let s = profile.node(p);
        let peak = s.peak.load(Ordering::Relaxed);
        let mut n = format!(
            "  [rows={} batches={} time={:.1}ms",
            s.rows.load(Ordering::Relaxed),
            s.batches.load(Ordering::Relaxed),
            s.nanos.load(Ordering::Relaxed) as f64 / 1e6
        );
        if peak > 0 {
            let _ = write!(n, " memory={}KiB", peak.div_ceil(1024));
        }
        n.push(']');
        n
    };
    let mut out = String::new();
    tree(plan, 0, crate::util::rt::cores(), &mut out, &note);
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let _ = writeln!(
        out,
        "{rows} rows in {:.1}ms; largest operator memory {}KiB",
        wall.as_secs_f64() * 1e3,
        ctx.peak.load(Ordering::Relaxed).div_ceil(1024)
    );
    Ok(out)
}
