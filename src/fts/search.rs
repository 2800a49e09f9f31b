//! Reading an index: queries built from text leaves and identity keys, the
//! document sets they match per segment, the JSON cells of a segment (fast
//! column dictionary and document store), the first steps of a result in
//! Source order, and the stored fields of a step.

use std::ops::Bound;

use rayon::prelude::*;
use tantivy::columnar::StrColumn;
use tantivy::query::{EmptyQuery, EnableScoring, PhraseQuery, RangeQuery, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, Value as _};
use tantivy::DocSet as _;
use tantivy::{DocAddress, SegmentReader, TantivyDocument, Term};

use super::docset::{DocId, DocSet};
use super::json_leaves::{self, LeafTest};
use super::schema::{Fields, JSON_IN_STORE};
use super::FtsError;
use crate::util::jsonpath::PathStep;

/// A query bound to the fields of the [`Searcher`] that built it.
///
/// Unions and intersections are kept as a tree and combined as bitsets per
/// segment ([`Segment::matching`]): each leaf's postings are read straight
/// into a [`DocSet`], which is cheaper than merging posting lists through
/// tantivy's boolean scorers when, as here, every match is wanted and none
/// is scored.
pub struct Query(Node);

enum Node {
    Leaf(Box<dyn tantivy::query::Query>),
    /// A leaf that reads positions (a phrase): it costs far more per
    /// document than a posting list, so large segments are split into
    /// document ranges evaluated in parallel.
    Positions(Box<dyn tantivy::query::Query>),
    Any(Vec<Node>),
    All(Vec<Node>),
}

/// Exact identity keys; the steps with every given key match.
#[derive(Debug, Clone, Copy, Default)]
pub struct Keys<'a> {
    /// `source_path`.
    pub source_path: Option<&'a str>,
    /// `run_id`.
    pub run_id: Option<&'a str>,
    /// `document_id`.
    pub document_id: Option<&'a str>,
    /// `session_id`.
    pub session_id: Option<&'a str>,
    /// `step_id`.
    pub step_id: Option<i64>,
}

/// Where a step is in the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepAddress {
    /// Segment ordinal.
    pub segment: u32,
    /// Document id in the segment.
    pub doc: DocId,
}

/// One point-in-time view of an index.
pub struct Searcher {
    searcher: tantivy::Searcher,
    fields: Fields,
}

fn term_query(f: Field, v: &str) -> Box<dyn tantivy::query::Query> {
    Box::new(TermQuery::new(
        Term::from_field_text(f, v),
        IndexRecordOption::Basic,
    ))
}

impl Searcher {
    pub(crate) fn new(searcher: tantivy::Searcher, fields: Fields) -> Searcher {
        Searcher { searcher, fields }
    }

    /// Steps whose text in any of `columns` (indices into
    /// [`TEXT_COLUMNS`](super::TEXT_COLUMNS)) holds `terms`: one term, or a
    /// phrase of terms at their offsets from the first (as [`super::tokens`]
    /// positions them). With `role`, only steps of that `step_source`.
    /// `terms` must not be empty.
    pub fn text_query(
        &self,
        columns: &[usize],
        role: Option<&str>,
        terms: &[(usize, String)],
    ) -> Query {
        let terms = &super::pairs::phrase_terms(terms);
        let per_col: Vec<Node> = columns
            .iter()
            .map(|&c| {
                let f = self.fields.text[c];
                if terms.len() == 1 {
                    Node::Leaf(term_query(f, &terms[0].1))
                } else {
                    Node::Positions(Box::new(PhraseQuery::new_with_offset(
                        terms
                            .iter()
                            .map(|(o, t)| (*o, Term::from_field_text(f, t)))
                            .collect(),
                    )))
                }
            })
            .collect();
        let q = Node::Any(per_col);
        Query(match role {
            None => q,
            Some(r) => Node::All(vec![q, Node::Leaf(term_query(self.fields.role, r))]),
        })
    }

    /// Steps whose cell of JSON column `column` ([`JSON_COLUMNS`](super::JSON_COLUMNS)
    /// index) has a leaf at `path` that passes `test` (see
    /// [`super::json_leaves`]). Cells the index could not break into leaves
    /// are not among them: [`Searcher::json_unindexed_query`] names those.
    pub fn json_query(&self, column: usize, path: &[PathStep], test: &LeafTest) -> Query {
        let f = self.fields.json_leaf;
        Query(Node::Leaf(
            match json_leaves::test_bounds(column, path, test) {
                None => Box::new(EmptyQuery),
                Some((Bound::Included(lo), Bound::Included(hi))) if lo == hi => term_query(f, &lo),
                Some((lo, hi)) => {
                    let term = |b: Bound<String>| b.map(|t| Term::from_field_text(f, &t));
                    Box::new(RangeQuery::new(term(lo), term(hi)))
                }
            },
        ))
    }

    /// Steps whose cell of JSON column `column` was not broken into leaves
    /// (too many, or too long): a search evaluates those cells itself.
    pub fn json_unindexed_query(&self, column: usize) -> Query {
        Query(Node::Leaf(term_query(
            self.fields.json_leaf,
            &json_leaves::unindexed_term(column),
        )))
    }

    /// Steps with every key given; `None` when no key is.
    pub fn keys_query(&self, keys: &Keys<'_>) -> Option<Query> {
        let f = &self.fields;
        let mut parts: Vec<Node> = Vec::new();
        for (field, v) in [
            (f.src, keys.source_path),
            (f.run, keys.run_id),
            (f.doc, keys.document_id),
            (f.session, keys.session_id),
        ] {
            if let Some(v) = v {
                parts.push(Node::Leaf(term_query(field, v)));
            }
        }
        if let Some(v) = keys.step_id {
            parts.push(Node::Leaf(Box::new(TermQuery::new(
                Term::from_field_i64(f.step, v),
                IndexRecordOption::Basic,
            ))));
        }
        (!parts.is_empty()).then(|| Query(Node::All(parts)))
    }

    /// The segments, in order.
    pub fn segments(&self) -> impl Iterator<Item = Segment<'_>> {
        self.searcher
            .segment_readers()
            .iter()
            .enumerate()
            .map(move |(i, reader)| Segment {
                searcher: self,
                ordinal: i as u32,
                reader,
            })
    }

    /// The stored fields of a step.
    pub fn step(&self, at: StepAddress) -> Result<StoredStep<'_>, FtsError> {
        let doc: TantivyDocument = self.searcher.doc(DocAddress::new(at.segment, at.doc))?;
        Ok(StoredStep {
            doc,
            fields: &self.fields,
        })
    }
}

/// One segment of a [`Searcher`].
#[derive(Clone, Copy)]
pub struct Segment<'a> {
    searcher: &'a Searcher,
    ordinal: u32,
    reader: &'a SegmentReader,
}

impl<'a> Segment<'a> {
    /// Document ids run from 0 to this (exclusive), deleted ones included.
    pub fn max_doc(&self) -> u32 {
        self.reader.max_doc()
    }

    /// The documents not deleted.
    pub fn alive(&self) -> DocSet {
        let max = self.reader.max_doc();
        let Some(alive) = self.reader.alive_bitset() else {
            return DocSet::full(max);
        };
        let mut set = DocSet::empty(max);
        for d in alive.iter_alive() {
            set.insert(d);
        }
        set
    }

    /// [`Searcher::json_query`] of this segment's searcher.
    pub fn json_query(&self, column: usize, path: &[PathStep], test: &LeafTest) -> Query {
        self.searcher.json_query(column, path, test)
    }

    /// [`Searcher::json_unindexed_query`] of this segment's searcher.
    pub fn json_unindexed_query(&self, column: usize) -> Query {
        self.searcher.json_unindexed_query(column)
    }

    /// The documents `q` matches (deleted ones included: intersect with
    /// [`Segment::alive`]).
    pub fn matching(&self, q: &Query) -> Result<DocSet, FtsError> {
        self.node_matching(&q.0)
    }

    fn node_matching(&self, n: &Node) -> Result<DocSet, FtsError> {
        match n {
            Node::Leaf(q) => {
                let w = self.weight(q.as_ref())?;
                let mut set = DocSet::empty(self.reader.max_doc());
                w.for_each_no_score(self.reader, &mut |docs| {
                    for d in docs {
                        set.insert(*d);
                    }
                })?;
                Ok(set)
            }
            Node::Positions(q) => {
                // Below this many documents a split saves nothing worth
                // a hand-off between threads.
                const SPLIT_DOCS: u32 = 2048;
                let w = self.weight(q.as_ref())?;
                let max = self.reader.max_doc();
                let parts = if max < SPLIT_DOCS {
                    1
                } else {
                    rayon::current_num_threads().clamp(1, 8) as u32
                };
                let width = max.div_ceil(parts);
                let sets = (0..parts)
                    .into_par_iter()
                    .map(|i| self.range_matching(w.as_ref(), i * width, (i + 1) * width))
                    .collect::<Result<Vec<_>, _>>()?;
                let mut set = DocSet::empty(max);
                for s in &sets {
                    set.or(s);
                }
                Ok(set)
            }
            Node::Any(parts) => {
                let mut set = DocSet::empty(self.reader.max_doc());
                for p in parts {
                    set.or(&self.node_matching(p)?);
                }
                Ok(set)
            }
            Node::All(parts) => {
                let mut set = DocSet::full(self.reader.max_doc());
                for p in parts {
                    if set.is_empty() {
                        break;
                    }
                    set.and(&self.node_matching(p)?);
                }
                Ok(set)
            }
        }
    }

    fn weight(
        &self,
        q: &dyn tantivy::query::Query,
    ) -> Result<Box<dyn tantivy::query::Weight>, FtsError> {
        Ok(q.weight(EnableScoring::disabled_from_searcher(
            &self.searcher.searcher,
        ))?)
    }

    /// The documents of `lo..hi` that `w` matches.
    fn range_matching(
        &self,
        w: &dyn tantivy::query::Weight,
        lo: DocId,
        hi: DocId,
    ) -> Result<DocSet, FtsError> {
        let mut set = DocSet::empty(self.reader.max_doc());
        let mut s = w.scorer(self.reader, 1.0)?;
        let mut d = s.doc();
        if d < lo {
            d = s.seek(lo);
        }
        // TERMINATED is u32::MAX, past every range.
        while d < hi {
            set.insert(d);
            d = s.advance();
        }
        Ok(set)
    }

    /// The JSON cells of the segment.
    pub fn json_cells(&self) -> Result<JsonCells<'a>, FtsError> {
        let fields = &self.searcher.fields;
        let store = self.reader.get_store_reader(64).map_err(FtsError::io)?;
        let fast = fields
            .json_fast
            .iter()
            .map(|f| {
                self.reader
                    .fast_fields()
                    .str(fields.schema.get_field_name(*f))
            })
            .collect::<Result<_, _>>()?;
        Ok(JsonCells {
            fields,
            store,
            fast,
        })
    }

    /// The first `limit` documents of `result` by (Source, place in the
    /// Source), in no particular order.
    pub fn first(&self, result: &DocSet, limit: usize) -> Result<Ranking, FtsError> {
        // Documents are ranked by (src term ordinal, ord, doc), which is
        // unique. Keys are read a block of documents at a time, and the
        // candidates are cut back to the first `limit` whenever they pile
        // up, so memory stays O(limit + block) however many documents
        // match. After a cut, a key above the first one cut away cannot
        // enter: segments mostly hold steps in Source order, so most of the
        // rest are dropped by one comparison.
        const BLOCK: usize = 1024;
        let ords = self.reader.fast_fields().u64("ord")?;
        let sources = self.reader.fast_fields().str("src")?;
        let key = |r: &Ranked| (r.source, r.ord, r.at.doc);
        let mut steps: Vec<Ranked> = Vec::new();
        let mut docs: Vec<DocId> = Vec::with_capacity(BLOCK);
        let mut src = vec![None; BLOCK];
        let mut ord = vec![None; BLOCK];
        let mut bound: Option<(u64, u64, DocId)> = None;
        let mut flush = |docs: &mut Vec<DocId>, steps: &mut Vec<Ranked>| {
            let n = docs.len();
            // `first_vals` leaves the slots of documents without a value
            // as they were.
            src[..n].fill(None);
            ord[..n].fill(None);
            if let Some(c) = &sources {
                c.ords().first_vals(docs, &mut src[..n]);
            }
            ords.first_vals(docs, &mut ord[..n]);
            let ranked = (0..n).map(|i| Ranked {
                source: src[i].unwrap_or(0),
                ord: ord[i].unwrap_or(0),
                at: StepAddress {
                    segment: self.ordinal,
                    doc: docs[i],
                },
            });
            steps.extend(ranked.filter(|r| bound.is_none_or(|b| key(r) < b)));
            docs.clear();
            if steps.len() > limit.max(BLOCK).saturating_mul(2) {
                steps.select_nth_unstable_by_key(limit, key);
                bound = Some(key(&steps[limit]));
                steps.truncate(limit);
            }
        };
        for d in result.iter() {
            docs.push(d);
            if docs.len() == BLOCK {
                flush(&mut docs, &mut steps);
            }
        }
        flush(&mut docs, &mut steps);
        if limit < steps.len() {
            steps.select_nth_unstable_by_key(limit, key);
            steps.truncate(limit);
        }
        Ok(Ranking { steps, sources })
    }
}

/// A step of a [`Ranking`].
#[derive(Debug, Clone, Copy)]
pub struct Ranked {
    /// The ordinal of its `source_path` in the segment's dictionary (see
    /// [`Ranking::source_name`]).
    pub source: u64,
    /// Its place in its Source ([`super::step_order`]).
    pub ord: u64,
    /// Where it is.
    pub at: StepAddress,
}

/// The first steps of a segment's result ([`Segment::first`]).
pub struct Ranking {
    /// The steps.
    pub steps: Vec<Ranked>,
    sources: Option<StrColumn>,
}

impl Ranking {
    /// The `source_path` with dictionary ordinal `source` (empty when the
    /// segment has none).
    pub fn source_name(&self, source: u64) -> Result<String, FtsError> {
        let mut name = String::new();
        if let Some(c) = &self.sources {
            c.ord_to_str(source, &mut name).map_err(FtsError::io)?;
        }
        Ok(name)
    }
}

/// The JSON cells of one segment: per [`JSON_COLUMNS`](super::JSON_COLUMNS)
/// entry, a dictionary-encoded column, and the document store for cells too
/// large for it.
pub struct JsonCells<'a> {
    fields: &'a Fields,
    store: tantivy::store::StoreReader,
    /// `None` when no step of the segment has a value in that column.
    fast: Vec<Option<StrColumn>>,
}

impl<'a> JsonCells<'a> {
    /// True when some step of the segment has a value in `column`.
    pub fn has_column(&self, column: usize) -> bool {
        self.fast[column].is_some()
    }

    /// The dictionary ordinal of `doc`'s cell in `column`; `None` when it
    /// has no value.
    pub fn ordinal(&self, column: usize, doc: DocId) -> Option<u64> {
        self.fast[column].as_ref()?.term_ords(doc).next()
    }

    /// Call `f` with the cell text of each ordinal of `column`, in the order
    /// of `ords` (which must be sorted): `None` for a cell kept only in the
    /// document store (read it with [`JsonCells::document`]).
    pub fn values(
        &self,
        column: usize,
        ords: &[u64],
        mut f: impl FnMut(Option<&[u8]>),
    ) -> Result<(), FtsError> {
        let Some(col) = &self.fast[column] else {
            return Ok(());
        };
        col.dictionary()
            .sorted_ords_to_term_cb(ords, |bytes| {
                f((bytes != JSON_IN_STORE.as_bytes()).then_some(bytes));
            })
            .map_err(FtsError::io)?;
        Ok(())
    }

    /// The stored fields of `doc`, its full JSON cells among them.
    pub fn document(&self, doc: DocId) -> Result<StoredStep<'a>, FtsError> {
        let doc: TantivyDocument = self.store.get(doc)?;
        Ok(StoredStep {
            doc,
            fields: self.fields,
        })
    }
}

/// The stored fields of one step.
pub struct StoredStep<'a> {
    doc: TantivyDocument,
    fields: &'a Fields,
}

impl StoredStep<'_> {
    fn text_of(&self, f: Field) -> Option<&str> {
        self.doc.get_first(f).and_then(|v| v.as_str())
    }

    /// Text column `column` ([`TEXT_COLUMNS`](super::TEXT_COLUMNS) index),
    /// as indexed (terminal output cleaned).
    pub fn text(&self, column: usize) -> Option<&str> {
        self.text_of(self.fields.text[column])
    }

    /// JSON column `column` ([`JSON_COLUMNS`](super::JSON_COLUMNS) index),
    /// the full JSON text.
    pub fn json(&self, column: usize) -> Option<&str> {
        self.text_of(self.fields.json[column])
    }

    /// `document_id`.
    pub fn document_id(&self) -> Option<&str> {
        self.text_of(self.fields.doc)
    }

    /// `run_id`.
    pub fn run_id(&self) -> Option<&str> {
        self.text_of(self.fields.run)
    }

    /// `session_id`.
    pub fn session_id(&self) -> Option<&str> {
        self.text_of(self.fields.session)
    }

    /// `origin_path`.
    pub fn origin_path(&self) -> Option<&str> {
        self.text_of(self.fields.origin)
    }

    /// `step_id`.
    pub fn step_id(&self) -> Option<i64> {
        self.doc
            .get_first(self.fields.step)
            .and_then(|v| v.as_i64())
    }

    /// `step_source` (the role).
    pub fn step_source(&self) -> Option<&str> {
        self.text_of(self.fields.role)
    }

    /// `effective_kind`.
    pub fn effective_kind(&self) -> Option<&str> {
        self.text_of(self.fields.kind)
    }

    /// `timestamp`, RFC 3339.
    pub fn timestamp(&self) -> Option<&str> {
        self.text_of(self.fields.ts)
    }
}
