//! The steps scope: an expression over prepared full-text indexes. Its
//! JSON columns are those the index keeps ([`fts::JSON_COLUMNS`]; a test
//! checks them against the `steps` table).
//!
//! Per index, each text leaf becomes an [`fts::Query`]; per segment, the
//! identity keys narrow the alive steps, the plan is evaluated over the
//! sets ([`super::sets`]), and the first matches in Source order are kept.
//! Only the best hits across all indexes are read from the store and
//! previewed.

use std::collections::BTreeSet;

use super::compile::{compile, selector_columns, TextLeaf};
use super::exec::{Deadline, Hit, HitList, Identity};
use super::preview::step_preview;
use super::sets::SegmentSets;
use super::{FindError, FindExpr};
use crate::fts::{self, Keys, StepAddress, StoredStep};

/// A searchable index: a point-in-time searcher and the Sources it answers
/// for.
pub struct Searchable {
    /// The searcher.
    pub index: fts::Searcher,
    /// For a store's own index, whose documents carry an empty `src`: the
    /// Source path to report.
    pub src_override: Option<String>,
    /// Sources whose hits count (others are stale and ignored).
    pub sources: BTreeSet<String>,
}

/// Search the steps of every index.
pub fn search_steps(
    indexes: &[Searchable],
    expr: Option<&FindExpr>,
    identity: &Identity,
    max_results: usize,
    deadline: Deadline,
) -> Result<HitList, FindError> {
    let mut leaves = Vec::new();
    let node = expr
        .map(|e| compile(e, &fts::JSON_COLUMNS, &mut leaves))
        .transpose()?;
    let mut total = 0u64;
    // (source_path, ord, index, address) of the best hits so far.
    let mut best: Vec<(String, u64, usize, StepAddress)> = Vec::new();
    for (ix, s) in indexes.iter().enumerate() {
        if let (Some(want), Some(have)) = (&identity.source, &s.src_override) {
            if want != have {
                continue;
            }
        }
        let queries: Vec<fts::Query> = leaves
            .iter()
            .map(|l| {
                let (cols, role) = selector_columns(l.field);
                s.index.text_query(cols, role, &l.terms)
            })
            .collect();
        let id_query = s.index.keys_query(&Keys {
            // A store's own index answers for one Source: no key needed.
            source_path: identity
                .source
                .as_deref()
                .filter(|_| s.src_override.is_none()),
            run_id: identity.run_id.as_deref(),
            document_id: identity.document_id.as_deref(),
            session_id: identity.session_id.as_deref(),
            step_id: identity.step_id,
        });
        for seg in s.index.segments() {
            deadline.check()?;
            crate::util::stats::add(crate::util::stats::Counter::Segments, 1);
            let mut cand = seg.alive();
            if let Some(q) = &id_query {
                cand.and(&seg.matching(q)?);
            }
            let result = match &node {
                None => cand,
                Some(n) => {
                    let text = queries
                        .iter()
                        .map(|q| seg.matching(q))
                        .collect::<Result<Vec<_>, _>>()?;
                    SegmentSets::new(text, seg, deadline).eval(n, &cand)?
                }
            };
            if result.is_empty() {
                continue;
            }
            // Per segment: keep the first max_results + 1, then name them.
            let ranking = seg.first(&result, max_results.saturating_add(1))?;
            for r in &ranking.steps {
                let src = match &s.src_override {
                    Some(p) => p.clone(),
                    None => ranking.source_name(r.source)?,
                };
                if !s.sources.contains(&src) {
                    continue;
                }
                total += 1;
                best.push((src, r.ord, ix, r.at));
            }
            // Count the rest of the segment's matches without naming them.
            total += result.count().saturating_sub(ranking.steps.len() as u64);
        }
    }
    best.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    best.truncate(max_results);
    let mut hits = Vec::with_capacity(best.len());
    for (src, ord, ix, at) in best {
        let step = indexes[ix].index.step(at)?;
        hits.push(step_hit(&step, src, ord, &leaves, expr));
    }
    Ok(HitList { hits, total })
}

fn step_hit(
    step: &StoredStep<'_>,
    source_path: String,
    ord: u64,
    leaves: &[TextLeaf],
    expr: Option<&FindExpr>,
) -> Hit {
    let s = |v: Option<&str>| v.map(str::to_string);
    Hit {
        preview: step_preview(step, leaves, expr),
        origin_path: s(step.origin_path()).unwrap_or_else(|| source_path.clone()),
        source_path,
        document_id: s(step.document_id()).unwrap_or_default(),
        run_id: s(step.run_id()),
        session_id: s(step.session_id()),
        step_id: step.step_id(),
        step_source: s(step.step_source()),
        effective_kind: s(step.effective_kind()),
        timestamp: s(step.timestamp()),
        ord,
        storage_ordinal: Some(fts::document_of(ord)),
        step_scope: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::{ColType, Table};

    /// The index's JSON and build columns are the steps relation's, with the
    /// types the index reads them as.
    #[test]
    fn index_columns_agree_with_the_steps_table() {
        let ty = |name: &str| {
            Table::Steps
                .columns()
                .iter()
                .find(|c| c.name == name)
                .map(|c| c.ty)
        };
        for c in fts::JSON_COLUMNS {
            assert_eq!(ty(c), Some(ColType::Json), "{c}");
        }
        assert_eq!(fts::BUILD_COLUMNS[13..15], fts::JSON_COLUMNS);
        for c in fts::BUILD_COLUMNS {
            assert!(ty(c).is_some(), "{c} is not a steps column");
        }
    }
}
