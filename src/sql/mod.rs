//! The SQL engine: `sqlparser` for parsing, then our own binder, logical plan
//! and vectorized operators over Arrow record batches.
//!
//! Pipeline: [`parse`] (allow-list: one read-only statement) → `bind`
//! (names and types via a [`DataLayer`]) → [`optimize`] (scan filters,
//! column pruning) → `exec` (a pull-based operator per plan node in `ops`,
//! shared evaluator in `expr`). Read-only by construction: the binder only builds read plans and
//! the provider only exposes logical relations.
//!
//! May call `table` (relation schemas) and `util`; never `catalog` or `cli`
//! (they implement [`DataLayer`]).

mod bind;
mod build_side;
mod error;
mod exec;
pub mod explain;
mod expr;
pub mod functions;
mod json_eval;
pub mod logical;
mod mirror;
mod ops;
pub mod optimize;
pub mod parse;
mod pushdown;
mod spill;
pub mod value;

use std::time::Duration;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

pub use error::SqlError;
pub use expr::{float_text, ts_text};
pub use logical::Plan;

/// What the engine needs from the data layer.
pub trait DataLayer: Sync {
    /// Mount (schema) names, e.g. `dataset`.
    fn datasets(&self) -> Vec<String>;
    /// Relation names every mount has.
    fn relation_names(&self) -> Vec<&'static str>;
    /// The schema of a relation, if it exists.
    fn relation(&self, dataset: &str, relation: &str) -> Option<SchemaRef>;
    /// True for relations whose ids are Source-local (join check).
    fn is_entity(&self, relation: &str) -> bool;
    /// Read the given columns of a relation. `post` runs on every batch in
    /// the worker that produced it (the scan filter); `emit` gets its
    /// results on the calling thread as the scan goes, in a stable order,
    /// and stops the scan when it errors; so does `check`, called between
    /// batches (timeouts, a consumer gone). A text column may come to
    /// `post` as `Binary`, its bytes not yet checked as UTF-8 (the text
    /// views a store keeps as bytes): `post` checks the rows it keeps
    /// (`ops::scan_bytes`). It may also come as a `Dictionary` of text
    /// (the labels a store keeps so): `post` answers what it can on the
    /// values and turns the rows it keeps into text (`ops::scan_labels`).
    fn scan(
        &self,
        dataset: &str,
        relation: &str,
        columns: &[usize],
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
        emit: &mut dyn FnMut(RecordBatch) -> Result<(), SqlError>,
        check: &(dyn Fn() -> Result<(), SqlError> + Sync),
    ) -> Result<(), SqlError>;

    /// The BIGINT column of `relation` that holds, on every row of every
    /// Source of `dataset`, the text `json ->> key` gives as its decimal
    /// digits (see `store::mirrors`), so a query may read it instead of
    /// parsing the JSON. `None` when any Source cannot promise it.
    fn json_mirror(
        &self,
        _dataset: &str,
        _relation: &str,
        _json: &str,
        _key: &str,
    ) -> Option<&'static str> {
        None
    }

    /// True when every value of `column` of `relation` is JSON text that
    /// `serde_json` wrote (from a value or a record): valid, each member
    /// named once in its object. A JSON path over it is then read only up
    /// to where the path ends (`util::json_follow::Reading::Canonical`).
    fn canonical_json(&self, _relation: &str, _column: &str) -> bool {
        false
    }
}

/// Bounds on one query.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Wall-clock bound.
    pub timeout: Option<Duration>,
    /// Largest intermediate state (bytes) of one operator.
    pub memory_budget: u64,
    /// Set from outside to stop the query at its next check (the client of
    /// a server request went away).
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Bytes of temporary files a sort may write when its rows pass the
    /// memory budget (0: never spill, fail instead).
    pub spill_limit: u64,
}

/// The default [`Limits::spill_limit`]: 8 GiB.
pub const DEFAULT_SPILL_LIMIT: u64 = 8 << 30;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: None,
            memory_budget: 4 << 30,
            cancel: None,
            spill_limit: DEFAULT_SPILL_LIMIT,
        }
    }
}

/// A planned statement.
#[derive(Debug)]
pub enum Statement {
    /// A query to run.
    Query(Plan),
    /// `EXPLAIN`: the plan to print.
    Explain(Plan),
    /// `EXPLAIN ANALYZE`: the plan to run, then print with what each
    /// operator did ([`explain::analyze`]).
    ExplainAnalyze(Plan),
    /// `DESCRIBE`: (mount, relation, schema).
    Describe(String, String, SchemaRef),
}

/// Parse, bind and optimise `text`.
pub fn plan(text: &str, provider: &dyn DataLayer) -> Result<Statement, SqlError> {
    match parse::parse(text)? {
        parse::Parsed::Query(stmt) => {
            let sqlparser::ast::Statement::Query(q) = &stmt else {
                unreachable!("parse returns queries")
            };
            let mut b = bind::Binder::new(provider, &stmt);
            Ok(Statement::Query(optimize::optimize(
                b.bind_query(q)?,
                provider,
            )))
        }
        parse::Parsed::Explain(stmt) => {
            let sqlparser::ast::Statement::Query(q) = &stmt else {
                unreachable!("parse returns queries")
            };
            let mut b = bind::Binder::new(provider, &stmt);
            Ok(Statement::Explain(optimize::optimize(
                b.bind_query(q)?,
                provider,
            )))
        }
        parse::Parsed::ExplainAnalyze(stmt) => {
            let sqlparser::ast::Statement::Query(q) = &stmt else {
                unreachable!("parse returns queries")
            };
            let mut b = bind::Binder::new(provider, &stmt);
            Ok(Statement::ExplainAnalyze(optimize::optimize(
                b.bind_query(q)?,
                provider,
            )))
        }
        parse::Parsed::Describe(parts) => {
            let datasets = provider.datasets();
            let (ds, rel) = match parts.as_slice() {
                [r] => (
                    datasets
                        .first()
                        .cloned()
                        .unwrap_or_else(|| "dataset".into()),
                    r.clone(),
                ),
                [d, r] => (d.clone(), r.clone()),
                _ => {
                    return Err(SqlError::UnknownRelation {
                        name: parts.join("."),
                        hint: String::new(),
                    })
                }
            };
            let schema = provider
                .relation(&ds, &rel)
                .ok_or_else(|| SqlError::UnknownRelation {
                    name: format!("{ds}.{rel}"),
                    hint: error::suggest(&rel, provider.relation_names().iter().copied()),
                })?;
            Ok(Statement::Describe(ds, rel, schema))
        }
    }
}

/// The result of running a query.
#[derive(Debug)]
pub struct QueryResult {
    /// Output schema.
    pub schema: SchemaRef,
    /// Output rows.
    pub batches: Vec<RecordBatch>,
    /// Peak intermediate bytes seen.
    pub peak_bytes: u64,
}

/// Run a planned query.
pub fn execute(
    plan: &Plan,
    provider: &dyn DataLayer,
    limits: Limits,
) -> Result<QueryResult, SqlError> {
    let ctx = exec::ExecCtx::new(provider, limits);
    let batches = exec::execute(plan, &ctx)?;
    crate::util::stats::add(
        crate::util::stats::Counter::RowsProduced,
        batches.iter().map(|b| b.num_rows() as u64).sum(),
    );
    Ok(QueryResult {
        schema: plan.schema(),
        batches,
        peak_bytes: ctx.peak.load(std::sync::atomic::Ordering::Relaxed),
    })
}
