//! One search over a mounted Dataset, shared by the `find` command and the
//! web explorer: the same parser output, scope, index preparation and
//! execution, so both answer the same hit set for the same expression.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray};

use super::exec::{self, run_json_columns, Deadline, HitList, Identity, RunRow};
use super::prepare::{self, BuildPolicy, PrepareReport};
use super::scope::Scope;
use super::FindExpr;
use super::SearchError as Error;
use crate::catalog::DatasetUri;
use crate::dataset::Mounts;
use crate::table::Table as Relation;

/// What to search.
pub struct Request<'a> {
    /// The mount to search in `mounts`.
    pub mount: &'a str,
    /// Its Dataset (names the index cache).
    pub dataset: &'a DatasetUri,
    /// The expression (None: identity conditions only).
    pub expr: Option<&'a FindExpr>,
    /// Identity conditions.
    pub identity: &'a Identity,
    /// Resolved scope.
    pub scope: Scope,
    /// Result bound.
    pub max_results: usize,
    /// Time bound.
    pub timeout: Duration,
    /// Build or refresh missing indexes (otherwise reuse only).
    pub build_index: bool,
}

/// The answer.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Hits in stable order and the total before the cut.
    pub hits: HitList,
    /// False when some searchable Source had no usable index.
    pub fts_available: bool,
    /// Why not.
    pub reason: Option<String>,
    /// What index preparation did (steps scope).
    pub report: PrepareReport,
    /// Warnings: (code, message).
    pub warnings: Vec<(String, String)>,
}

/// The index cache directory of a Dataset, under the user's cache base:
/// `find/v<index version>/<hash of the Dataset>`.
pub fn cache_dir(dataset: &DatasetUri) -> Option<PathBuf> {
    let identity = match dataset.s3() {
        Some(u) => crate::s3::cache_identity(u),
        None => dataset.to_string(),
    };
    let base = crate::util::path::cache_base()?;
    let key = blake3::hash(identity.as_bytes()).to_hex();
    Some(
        base.join("find")
            .join(format!("v{}", crate::fts::INDEX_VERSION))
            .join(&key.as_str()[..32]),
    )
}

/// Run one search.
pub fn search(mounts: &Mounts, r: &Request<'_>, progress: &dyn Fn(&str)) -> Result<Outcome, Error> {
    let deadline = Deadline {
        at: Instant::now().checked_add(r.timeout),
        seconds: r.timeout.as_secs_f64(),
    };
    let mut out = Outcome {
        fts_available: true,
        ..Outcome::default()
    };
    match r.scope {
        // Ids only: a lookup in the steps relation, with no index to build.
        Scope::Steps if r.expr.is_none() && r.identity.has_id() => {
            out.hits = identity_steps(mounts, r.mount, r.identity, r.max_results, deadline)?;
        }
        Scope::Steps => {
            let read = crate::util::stats::phase(crate::util::stats::Phase::Read);
            let prepared = prepare::prepare(
                mounts,
                r.mount,
                cache_dir(r.dataset).as_deref(),
                if r.build_index {
                    BuildPolicy::Build
                } else {
                    BuildPolicy::ReuseOnly
                },
                progress,
            )?;
            out.warnings = prepared.warnings;
            out.fts_available = prepared.fts_available;
            out.reason = prepared.reason;
            out.report = prepared.report;
            drop(read);
            out.hits = exec::search_steps(
                &prepared.indexes,
                r.expr,
                r.identity,
                r.max_results,
                deadline,
            )?;
        }
        Scope::Runs => {
            let rows = run_rows(mounts, r.mount, deadline)?;
            out.hits = exec::search_runs(&rows, r.expr, r.identity, r.max_results, deadline)?;
        }
    }
    out.warnings.extend(mounts.take_warnings());
    crate::util::stats::add(crate::util::stats::Counter::RowsProduced, out.hits.total);
    Ok(out)
}

/// The steps an identity names (`--session-id`, `--document-id`,
/// `--run-id`, `--step-id`, `--source`), in Source order, read from the
/// steps relation (stores filter with Lance, files are decoded).
fn identity_steps(
    mounts: &Mounts,
    mount: &str,
    id: &Identity,
    max_results: usize,
    d: Deadline,
) -> Result<HitList, Error> {
    const COLS: [&str; 13] = [
        "source_path",
        "origin_path",
        "document_id",
        "run_id",
        "session_id",
        "step_id",
        "step_source",
        "effective_kind",
        "timestamp",
        "message_value",
        "observation_text",
        "storage_ordinal",
        "turn_ordinal",
    ];
    let quote = |v: &str| format!("'{}'", v.replace('\'', "''"));
    let mut conds = Vec::new();
    for (col, v) in [
        ("session_id", &id.session_id),
        ("document_id", &id.document_id),
        ("run_id", &id.run_id),
    ] {
        if let Some(v) = v {
            conds.push(format!("{col} = {}", quote(v)));
        }
    }
    if let Some(step) = id.step_id {
        conds.push(format!("step_id = {step}"));
    }
    let filter = conds.join(" AND ");
    let keep = |b: &arrow::array::RecordBatch, r: usize| -> bool {
        let text = |i: usize| {
            let a = b.column(i).as_string::<i32>();
            (!a.is_null(r)).then(|| a.value(r))
        };
        let step = b.column(5).as_primitive::<arrow::datatypes::Int64Type>();
        id.session_id.as_deref().is_none_or(|v| text(4) == Some(v))
            && id.document_id.as_deref().is_none_or(|v| text(2) == Some(v))
            && id.run_id.as_deref().is_none_or(|v| text(3) == Some(v))
            && id
                .step_id
                .is_none_or(|v| !step.is_null(r) && step.value(r) == v)
    };
    let batches = mounts
        .scan_sources_where(
            mount,
            Relation::Steps,
            &COLS,
            &|s| id.source.as_ref().is_none_or(|p| *p == s.source_path),
            Some(&filter),
            &|b| {
                let mask: arrow::array::BooleanArray =
                    (0..b.num_rows()).map(|r| Some(keep(&b, r))).collect();
                Ok(arrow::compute::filter_record_batch(&b, &mask)?)
            },
            &scan_check(d),
        )
        .map_err(scan_error(d))?;
    let mut out = HitList::default();
    for b in &batches {
        let text = |i: usize, r: usize| {
            let a = b.column(i).as_string::<i32>();
            (!a.is_null(r)).then(|| a.value(r).to_string())
        };
        let int = |i: usize, r: usize| {
            let a = b.column(i).as_primitive::<arrow::datatypes::Int64Type>();
            (!a.is_null(r)).then(|| a.value(r))
        };
        let ts = b
            .column(8)
            .as_primitive::<arrow::datatypes::TimestampNanosecondType>();
        for r in 0..b.num_rows() {
            out.total += 1;
            if out.hits.len() >= max_results {
                continue;
            }
            let preview = [9, 10]
                .iter()
                .find_map(|&c| text(c, r).filter(|t| !t.trim().is_empty()))
                .map(|t| exec::excerpt(&crate::util::terminal::clean(&t), 0))
                .unwrap_or_default();
            let doc_ord = int(11, r).unwrap_or(0);
            let ord = crate::fts::step_order(doc_ord, int(12, r).unwrap_or(0));
            out.hits.push(exec::Hit {
                source_path: text(0, r).unwrap_or_default(),
                origin_path: text(1, r).unwrap_or_default(),
                document_id: text(2, r).unwrap_or_default(),
                run_id: text(3, r),
                session_id: text(4, r),
                step_id: int(5, r),
                step_source: text(6, r),
                effective_kind: text(7, r),
                timestamp: (!ts.is_null(r))
                    .then(|| crate::formats::storyline::format_rfc3339(ts.value(r))),
                preview,
                ord,
                storage_ordinal: Some(doc_ord as u64),
                step_scope: true,
            });
        }
    }
    Ok(out)
}

/// The deadline as a scan's interruption check.
fn scan_check(d: Deadline) -> impl Fn() -> Result<(), crate::sql::SqlError> + Sync {
    move || {
        d.check()
            .map_err(|_| crate::sql::SqlError::Timeout { seconds: d.seconds })
    }
}

/// A scan's error as the search's: a timeout is a resource limit.
fn scan_error(d: Deadline) -> impl Fn(crate::sql::SqlError) -> Error {
    move |e| match e {
        crate::sql::SqlError::Timeout { .. } => Error::Find(super::FindError::Resource {
            message: format!("the search took longer than --timeout {}s", d.seconds),
        }),
        e => e.into(),
    }
}

/// Every Run of a mount (the `runs` relation), in Source order: its main
/// trajectory's id and JSON columns, and its first user message to preview.
fn run_rows(mounts: &Mounts, mount: &str, d: Deadline) -> Result<Vec<RunRow>, Error> {
    let mut cols = vec![
        "source_path",
        "root_document_id",
        "run_id",
        "session_id",
        "first_user_message",
        "origin_path",
    ];
    cols.extend(run_json_columns());
    let batches = mounts
        .scan_sources(
            mount,
            Relation::Runs,
            &cols,
            &|_| true,
            &|b| Ok(b),
            &scan_check(d),
        )
        .map_err(scan_error(d))?;
    let mut rows = Vec::new();
    let mut last = String::new();
    let mut ord = 0u64;
    for b in &batches {
        let text = |i: usize| b.column(i).as_string_opt::<i32>();
        let get = |i: usize, r: usize| {
            text(i).and_then(|a| (!a.is_null(r)).then(|| a.value(r).to_string()))
        };
        for r in 0..b.num_rows() {
            let src = get(0, r).unwrap_or_default();
            if src == last {
                ord += 1;
            } else {
                last.clone_from(&src);
                ord = 0;
            }
            rows.push(RunRow {
                source_path: src,
                document_id: get(1, r).unwrap_or_default(),
                run_id: get(2, r),
                session_id: get(3, r),
                prompt: get(4, r),
                origin_path: get(5, r).unwrap_or_default(),
                json: (6..6 + run_json_columns().len())
                    .map(|i| get(i, r))
                    .collect(),
                ord,
            });
        }
    }
    Ok(rows)
}

/// The terms a viewer highlights for `expr`: each full-text leaf cut by the
/// index tokenizer (lower-cased), longest first, without duplicates. JSON
/// predicates contribute nothing.
pub fn highlight_terms(expr: Option<&FindExpr>) -> Vec<String> {
    fn walk(e: &FindExpr, negated: bool, out: &mut Vec<String>) {
        match e {
            FindExpr::Text { text, .. } if !negated => {
                if let Ok(terms) = exec::query_terms(text) {
                    out.extend(terms.into_iter().map(|(_, t)| t));
                }
            }
            FindExpr::Text { .. } | FindExpr::Json { .. } => {}
            FindExpr::Not(inner) => walk(inner, !negated, out),
            FindExpr::And(v) | FindExpr::Or(v) => {
                for x in v {
                    walk(x, negated, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    if let Some(e) = expr {
        walk(e, false, &mut out);
    }
    out.retain(|t| !t.trim().is_empty());
    out.sort_by(|a, b| b.chars().count().cmp(&a.chars().count()).then(a.cmp(b)));
    out.dedup();
    out
}
