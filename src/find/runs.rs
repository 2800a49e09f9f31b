//! The runs scope: JSON predicates over the rows of the `runs` relation,
//! evaluated row by row (runs have no full-text index; text leaves are
//! refused). Its JSON columns are the relation's JSON columns, in table
//! order.

use std::sync::OnceLock;

use serde_json::Value;

use super::compile::{compile, eval_row};
use super::exec::{Deadline, Hit, HitList, Identity};
use super::preview::run_preview;
use super::{FindError, FindExpr};
use crate::table::{ColType, Table};

/// JSON columns of the runs scope: the JSON columns of the `runs` table.
pub fn run_json_columns() -> &'static [&'static str] {
    static COLUMNS: OnceLock<Vec<&'static str>> = OnceLock::new();
    COLUMNS.get_or_init(|| {
        Table::Runs
            .columns()
            .iter()
            .filter(|c| c.ty == ColType::Json)
            .map(|c| c.name)
            .collect()
    })
}

/// One run row for the runs scope.
#[derive(Debug, Clone)]
pub struct RunRow {
    /// Source path.
    pub source_path: String,
    /// Where the Run's documents were read from.
    pub origin_path: String,
    /// The Run's main trajectory.
    pub document_id: String,
    /// Run id.
    pub run_id: Option<String>,
    /// Session id.
    pub session_id: Option<String>,
    /// JSON columns in [`run_json_columns`] order (raw JSON text).
    pub json: Vec<Option<String>>,
    /// A text to preview when no JSON value is shown (the first user
    /// message).
    pub prompt: Option<String>,
    /// Order within the Source.
    pub ord: u64,
}

impl RunRow {
    /// False when an identity condition excludes the row.
    fn matches(&self, identity: &Identity) -> bool {
        !(identity
            .source
            .as_ref()
            .is_some_and(|s| *s != self.source_path)
            || identity
                .run_id
                .as_ref()
                .is_some_and(|v| Some(v) != self.run_id.as_ref())
            || identity
                .document_id
                .as_ref()
                .is_some_and(|v| *v != self.document_id)
            || identity
                .session_id
                .as_ref()
                .is_some_and(|v| Some(v) != self.session_id.as_ref()))
    }
}

/// Search run rows (already in Source order).
pub fn search_runs(
    rows: &[RunRow],
    expr: Option<&FindExpr>,
    identity: &Identity,
    max_results: usize,
    deadline: Deadline,
) -> Result<HitList, FindError> {
    let columns = run_json_columns();
    let mut leaves = Vec::new();
    let node = expr.map(|e| compile(e, columns, &mut leaves)).transpose()?;
    if !leaves.is_empty() {
        return Err(FindError::InvalidArgument {
            message: "text predicates search steps, not runs".into(),
        });
    }
    let mut out = HitList::default();
    for (i, r) in rows.iter().enumerate() {
        if i % 4096 == 0 {
            deadline.check()?;
        }
        if !r.matches(identity) {
            continue;
        }
        let parsed: Vec<Option<Value>> = r
            .json
            .iter()
            .map(|j| j.as_deref().and_then(|s| serde_json::from_str(s).ok()))
            .collect();
        let ok = match &node {
            None => true,
            Some(n) => eval_row(n, &mut |_| false, &mut |cols, p| {
                cols.iter()
                    .any(|&c| parsed[c].as_ref().is_some_and(|v| p.eval(v)))
            }),
        };
        if !ok {
            continue;
        }
        out.total += 1;
        if out.hits.len() < max_results {
            out.hits.push(Hit {
                source_path: r.source_path.clone(),
                origin_path: r.origin_path.clone(),
                document_id: r.document_id.clone(),
                run_id: r.run_id.clone(),
                session_id: r.session_id.clone(),
                step_id: None,
                step_source: None,
                effective_kind: None,
                timestamp: None,
                preview: run_preview(node.as_ref(), columns, &parsed, r.prompt.as_deref()),
                ord: r.ord,
                storage_ordinal: None,
                step_scope: false,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_json_columns_are_the_json_columns_of_runs() {
        assert_eq!(
            run_json_columns(),
            [
                "agent_extra",
                "final_metrics",
                "extra",
                "meta",
                "unknown_fields"
            ]
        );
    }
}
