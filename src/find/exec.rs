//! Executing a find request over prepared indexes (steps) or the runs
//! relation (runs).
//!
//! Text leaves become tantivy queries whose hits are bitsets per segment.
//! The expression is then evaluated over those sets: AND narrows the
//! candidates child by child, OR unions what each child adds, NOT subtracts.
//! JSON leaves are only evaluated on the candidates that reach them. And/Or
//! nodes are n-ary and folded iteratively, so thousands of terms never nest.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;
use tantivy::query::{BooleanQuery, EnableScoring, PhraseQuery, Query, TermQuery};
use tantivy::schema::{IndexRecordOption, Value as _};
use tantivy::{DocId, Searcher, SegmentReader, TantivyDocument, Term};

use super::ast::{FindExpr, TextField};
use super::index::{Fields, JSON_IN_STORE};
use super::jsonpath::Predicate;
use super::tokenize::{analyzer, tokens};
use super::FindError;

/// Longest preview, in characters.
pub const PREVIEW_CHARS: usize = 200;

/// Identity conditions (`--source`, `--run-id`, …), ANDed with the expression.
#[derive(Debug, Clone, Default)]
pub struct Identity {
    /// `--source`: a Dataset-relative path.
    pub source: Option<String>,
    /// `--run-id`.
    pub run_id: Option<String>,
    /// `--document-id`.
    pub document_id: Option<String>,
    /// `--session-id`.
    pub session_id: Option<String>,
    /// `--step-id` (needs `--session-id`).
    pub step_id: Option<i64>,
}

impl Identity {
    /// True when no identity condition is given.
    pub fn is_empty(&self) -> bool {
        self.source.is_none()
            && self.run_id.is_none()
            && self.document_id.is_none()
            && self.session_id.is_none()
            && self.step_id.is_none()
    }

    /// True when an id (not only `--source`) is given.
    pub fn has_id(&self) -> bool {
        self.run_id.is_some() || self.document_id.is_some() || self.session_id.is_some()
    }
}

/// One match.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Hit {
    /// Dataset-relative Source path.
    pub source_path: String,
    /// Dataset-relative path of the file the document was read from (the
    /// Source itself, unless it is a store).
    pub origin_path: String,
    /// Document id.
    pub document_id: String,
    /// Run id.
    pub run_id: Option<String>,
    /// Session id.
    pub session_id: Option<String>,
    /// Step id (steps scope).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_id: Option<i64>,
    /// Step source (steps scope).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_source: Option<String>,
    /// Effective kind (steps scope).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_kind: Option<String>,
    /// Timestamp, RFC 3339 (steps scope).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// Bounded human-readable excerpt.
    pub preview: String,
    /// Sort key within the Source (not printed).
    #[serde(skip)]
    pub ord: u64,
    /// The document's position in its Source, when known (not printed:
    /// readers use it to tell documents with the same id apart).
    #[serde(skip)]
    pub storage_ordinal: Option<u64>,
    /// Whether this is a steps-scope hit (not printed).
    #[serde(skip)]
    pub step_scope: bool,
}

/// Hits in stable order, the total count, and whether the list was cut.
#[derive(Debug, Default)]
pub struct HitList {
    /// At most `max_results` hits.
    pub hits: Vec<Hit>,
    /// Number of matches before the cut.
    pub total: u64,
}

/// A searchable index: a tantivy searcher and the Sources it answers for.
pub struct Searchable {
    /// The searcher (one point-in-time view).
    pub searcher: Searcher,
    /// Field handles.
    pub fields: Fields,
    /// For a store's own index, whose documents carry an empty `src`: the
    /// Source path to report.
    pub src_override: Option<String>,
    /// Sources whose hits count (others are stale and ignored).
    pub sources: BTreeSet<String>,
}

/// Deadline checks.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    /// When to give up.
    pub at: Option<Instant>,
    /// The configured timeout in seconds, for the message.
    pub seconds: f64,
}

impl Deadline {
    /// Fail when past the deadline.
    pub fn check(&self) -> Result<(), FindError> {
        match self.at {
            Some(t) if Instant::now() > t => Err(FindError::Resource {
                message: format!("the search took longer than --timeout {}s", self.seconds),
            }),
            _ => Ok(()),
        }
    }
}

/// Text columns (indices into [`super::index::TEXT_COLUMNS`]) and role a
/// selector searches.
pub fn selector_columns(field: TextField) -> (&'static [usize], Option<&'static str>) {
    // 0 message, 1 reasoning, 2 observation, 3 prompt, 4 model
    match field {
        TextField::Plain | TextField::Content => (&[0, 2, 3], None),
        TextField::Message => (&[0], None),
        TextField::User => (&[0], Some("user")),
        TextField::Assistant => (&[0], Some("agent")),
        TextField::System => (&[3, 0], Some("system")),
        TextField::Reasoning => (&[1], None),
        TextField::Observation => (&[2], None),
        TextField::Prompt => (&[3, 0], None),
        TextField::Model => (&[4], None),
        TextField::All => (&[0, 1, 2, 3, 4], None),
    }
}

/// The query terms of a text argument: the whole word at each position,
/// with its offset from the first.
pub fn query_terms(text: &str) -> Result<Vec<(usize, String)>, FindError> {
    let mut by_pos: Vec<(usize, String)> = Vec::new();
    for (t, p) in tokens(text) {
        match by_pos.last_mut() {
            Some((lp, lt)) if *lp == p => *lt = t,
            _ => by_pos.push((p, t)),
        }
    }
    let Some(first) = by_pos.first().map(|x| x.0) else {
        return Err(FindError::InvalidArgument {
            message: format!("`{text}` has no searchable words (only punctuation or spaces)"),
        });
    };
    Ok(by_pos.into_iter().map(|(p, t)| (p - first, t)).collect())
}

/// The JSON columns a JSON leaf reads, as indices into `columns`.
pub fn json_leaf_columns(column: Option<&str>, columns: &[&str]) -> Result<Vec<usize>, FindError> {
    match column {
        None => Ok((0..columns.len()).collect()),
        Some(c) => columns
            .iter()
            .position(|x| *x == c)
            .map(|i| vec![i])
            .ok_or_else(|| FindError::InvalidArgument {
                message: format!(
                    "`#json.{c}` is not a JSON column of this scope (allowed: {})",
                    columns.join(", ")
                ),
            }),
    }
}

/// A compiled expression.
pub enum Node {
    /// A text leaf: (index into the leaf table).
    Text(usize),
    /// A JSON leaf: columns and predicate.
    Json(Vec<usize>, Predicate),
    /// NOT.
    Not(Box<Node>),
    /// AND, text children first.
    And(Vec<Node>),
    /// OR, text children first.
    Or(Vec<Node>),
}

/// A text leaf: selector and query terms.
#[derive(Debug, Clone)]
pub struct TextLeaf {
    /// Selector.
    pub field: TextField,
    /// Terms with offsets.
    pub terms: Vec<(usize, String)>,
}

/// Compile `e` for a scope whose JSON columns are `json_columns`.
pub fn compile(
    e: &FindExpr,
    json_columns: &[&str],
    leaves: &mut Vec<TextLeaf>,
) -> Result<Node, FindError> {
    Ok(match e {
        FindExpr::Text { field, text, .. } => {
            leaves.push(TextLeaf {
                field: *field,
                terms: query_terms(text)?,
            });
            Node::Text(leaves.len() - 1)
        }
        FindExpr::Json {
            column,
            path,
            op,
            value,
            ..
        } => Node::Json(
            json_leaf_columns(column.as_deref(), json_columns)?,
            Predicate::new(path, *op, value)?,
        ),
        FindExpr::Not(x) => Node::Not(Box::new(compile(x, json_columns, leaves)?)),
        FindExpr::And(v) | FindExpr::Or(v) => {
            let mut kids = v
                .iter()
                .map(|x| compile(x, json_columns, leaves))
                .collect::<Result<Vec<_>, _>>()?;
            // Cheap set operations first, JSON (per-row) last.
            kids.sort_by_key(|k| u8::from(has_json(k)));
            if matches!(e, FindExpr::And(_)) {
                Node::And(kids)
            } else {
                Node::Or(kids)
            }
        }
    })
}

fn has_json(n: &Node) -> bool {
    match n {
        Node::Text(_) => false,
        Node::Json(..) => true,
        Node::Not(x) => has_json(x),
        Node::And(v) | Node::Or(v) => v.iter().any(has_json),
    }
}

/// Evaluate a compiled expression on one row, given leaf outcomes.
pub fn eval_row(
    n: &Node,
    text: &mut dyn FnMut(usize) -> bool,
    json: &mut dyn FnMut(&[usize], &Predicate) -> bool,
) -> bool {
    match n {
        Node::Text(i) => text(*i),
        Node::Json(c, p) => json(c, p),
        Node::Not(x) => !eval_row(x, text, json),
        Node::And(v) => v.iter().all(|x| eval_row(x, text, json)),
        Node::Or(v) => v.iter().any(|x| eval_row(x, text, json)),
    }
}

// ---------------------------------------------------------------- bitsets

/// A fixed-size bitset over a segment's doc ids.
#[derive(Clone, Debug)]
pub struct Bits {
    words: Vec<u64>,
    len: u32,
}

impl Bits {
    fn empty(len: u32) -> Bits {
        Bits {
            words: vec![0; (len as usize).div_ceil(64)],
            len,
        }
    }

    fn insert(&mut self, d: DocId) {
        self.words[(d / 64) as usize] |= 1 << (d % 64);
    }

    fn contains(&self, d: DocId) -> bool {
        self.words[(d / 64) as usize] & (1 << (d % 64)) != 0
    }

    fn and(&mut self, o: &Bits) {
        for (a, b) in self.words.iter_mut().zip(&o.words) {
            *a &= b;
        }
    }

    fn or(&mut self, o: &Bits) {
        for (a, b) in self.words.iter_mut().zip(&o.words) {
            *a |= b;
        }
    }

    fn minus(&mut self, o: &Bits) {
        for (a, b) in self.words.iter_mut().zip(&o.words) {
            *a &= !b;
        }
    }

    fn count(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    fn iter(&self) -> impl Iterator<Item = DocId> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let t = w.trailing_zeros();
                w &= w - 1;
                Some(i as u32 * 64 + t)
            })
        })
    }
}

// ---------------------------------------------------------------- steps

fn leaf_query(fields: &Fields, leaf: &TextLeaf) -> Box<dyn Query> {
    let (cols, role) = selector_columns(leaf.field);
    let per_col: Vec<Box<dyn Query>> = cols
        .iter()
        .map(|&c| -> Box<dyn Query> {
            let f = fields.text[c];
            if leaf.terms.len() == 1 {
                Box::new(TermQuery::new(
                    Term::from_field_text(f, &leaf.terms[0].1),
                    IndexRecordOption::Basic,
                ))
            } else {
                Box::new(PhraseQuery::new_with_offset(
                    leaf.terms
                        .iter()
                        .map(|(o, t)| (*o, Term::from_field_text(f, t)))
                        .collect(),
                ))
            }
        })
        .collect();
    let q: Box<dyn Query> = if per_col.len() == 1 {
        per_col.into_iter().next().expect("one")
    } else {
        Box::new(BooleanQuery::union(per_col))
    };
    match role {
        None => q,
        Some(r) => Box::new(BooleanQuery::intersection(vec![
            q,
            Box::new(TermQuery::new(
                Term::from_field_text(fields.role, r),
                IndexRecordOption::Basic,
            )),
        ])),
    }
}

fn query_bits(q: &dyn Query, searcher: &Searcher, seg: &SegmentReader) -> Result<Bits, FindError> {
    let w = q
        .weight(EnableScoring::disabled_from_searcher(searcher))
        .map_err(index_err)?;
    let mut bits = Bits::empty(seg.max_doc());
    w.for_each_no_score(seg, &mut |docs| {
        for d in docs {
            bits.insert(*d);
        }
    })
    .map_err(index_err)?;
    Ok(bits)
}

fn index_err(e: tantivy::TantivyError) -> FindError {
    FindError::IndexUnavailable {
        message: e.to_string(),
    }
}

struct Segment<'a> {
    fields: &'a Fields,
    store: tantivy::store::StoreReader,
    text: Vec<Bits>,
    json: HashMap<DocId, Vec<Option<Value>>>,
    /// The JSON columns as dictionary-encoded fast columns (`None` when no
    /// step of the segment has a value).
    json_fast: Vec<Option<tantivy::columnar::StrColumn>>,
    /// Predicate results per (predicate, column, dictionary ordinal):
    /// 0 false, 1 true, 2 the cell is only in the document store.
    memo: HashMap<(usize, usize, u64), u8>,
    deadline: Deadline,
    evaluated: u64,
}

impl Segment<'_> {
    fn json_of(&mut self, d: DocId) -> Result<&Vec<Option<Value>>, FindError> {
        if !self.json.contains_key(&d) {
            self.evaluated += 1;
            if self.evaluated.is_multiple_of(4096) {
                self.deadline.check()?;
            }
            let doc: TantivyDocument = self.store.get(d).map_err(index_err)?;
            let vals = self
                .fields
                .json
                .iter()
                .map(|f| {
                    doc.get_first(*f)
                        .and_then(|v| v.as_str())
                        .and_then(|s| serde_json::from_str::<Value>(s).ok())
                })
                .collect();
            self.json.insert(d, vals);
        }
        Ok(&self.json[&d])
    }

    /// Add to `out` the candidates whose JSON column `c` satisfies `p`.
    /// Each distinct cell value is parsed and tested once per segment, read
    /// from the column dictionary in ordinal order; cells too large for the
    /// fast column come from the document store.
    fn json_column(
        &mut self,
        p: &Predicate,
        c: usize,
        cand: &Bits,
        out: &mut Bits,
    ) -> Result<(), FindError> {
        const FALSE: u8 = 0;
        const TRUE: u8 = 1;
        const IN_STORE: u8 = 2;
        let Some(col) = &self.json_fast[c] else {
            return Ok(());
        };
        let pkey = std::ptr::from_ref(p) as usize;
        let mut need: Vec<(DocId, u64)> = Vec::new();
        for d in cand.iter() {
            if out.contains(d) {
                continue;
            }
            if let Some(o) = col.term_ords(d).next() {
                need.push((d, o));
            }
        }
        let mut ords: Vec<u64> = need
            .iter()
            .map(|&(_, o)| o)
            .filter(|&o| !self.memo.contains_key(&(pkey, c, o)))
            .collect();
        ords.sort_unstable();
        ords.dedup();
        let mut results = Vec::with_capacity(ords.len());
        let mut failed = None;
        col.dictionary()
            .sorted_ords_to_term_cb(&ords, |bytes| {
                if failed.is_some() {
                    return;
                }
                if results.len() % 4096 == 4095 {
                    if let Err(e) = self.deadline.check() {
                        failed = Some(e);
                        return;
                    }
                }
                let r = if bytes == JSON_IN_STORE.as_bytes() {
                    IN_STORE
                } else {
                    u8::from(
                        serde_json::from_slice::<Value>(bytes)
                            .ok()
                            .is_some_and(|v| p.eval(&v)),
                    )
                };
                results.push(r);
            })
            .map_err(|e| index_err(e.into()))?;
        if let Some(e) = failed {
            return Err(e);
        }
        for (o, r) in ords.into_iter().zip(results) {
            self.memo.insert((pkey, c, o), r);
        }
        for (d, o) in need {
            match self.memo.get(&(pkey, c, o)).copied().unwrap_or(FALSE) {
                TRUE => out.insert(d),
                IN_STORE => {
                    let vals = self.json_of(d)?;
                    if vals[c].as_ref().is_some_and(|v| p.eval(v)) {
                        out.insert(d);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn eval(&mut self, n: &Node, cand: &Bits) -> Result<Bits, FindError> {
        Ok(match n {
            Node::Text(i) => {
                let mut b = cand.clone();
                b.and(&self.text[*i]);
                b
            }
            Node::Json(cols, p) => {
                let mut b = Bits::empty(cand.len);
                for &c in cols {
                    self.json_column(p, c, cand, &mut b)?;
                }
                b
            }
            Node::Not(x) => {
                let inner = self.eval(x, cand)?;
                let mut b = cand.clone();
                b.minus(&inner);
                b
            }
            Node::And(v) => {
                let mut cur = cand.clone();
                for x in v {
                    if cur.is_empty() {
                        break;
                    }
                    cur = self.eval(x, &cur)?;
                }
                cur
            }
            Node::Or(v) => {
                let mut acc = Bits::empty(cand.len);
                let mut rest = cand.clone();
                for x in v {
                    if rest.is_empty() {
                        break;
                    }
                    let r = self.eval(x, &rest)?;
                    rest.minus(&r);
                    acc.or(&r);
                }
                acc
            }
        })
    }
}

fn identity_query(
    fields: &Fields,
    id: &Identity,
    src_override: Option<&str>,
) -> Option<Box<dyn Query>> {
    let mut parts: Vec<Box<dyn Query>> = Vec::new();
    let term = |f, v: &str| -> Box<dyn Query> {
        Box::new(TermQuery::new(
            Term::from_field_text(f, v),
            IndexRecordOption::Basic,
        ))
    };
    if let (Some(s), None) = (&id.source, src_override) {
        parts.push(term(fields.src, s));
    }
    if let Some(v) = &id.run_id {
        parts.push(term(fields.run, v));
    }
    if let Some(v) = &id.document_id {
        parts.push(term(fields.doc, v));
    }
    if let Some(v) = &id.session_id {
        parts.push(term(fields.session, v));
    }
    if let Some(v) = id.step_id {
        parts.push(Box::new(TermQuery::new(
            Term::from_field_i64(fields.step, v),
            IndexRecordOption::Basic,
        )));
    }
    match parts.len() {
        0 => None,
        1 => parts.pop(),
        _ => Some(Box::new(BooleanQuery::intersection(parts))),
    }
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
        .map(|e| compile(e, &["metrics", "extra"], &mut leaves))
        .transpose()?;
    let mut total = 0u64;
    // (source_path, ord, index, segment, doc) of the best hits so far.
    let mut best: Vec<(String, u64, usize, u32, DocId)> = Vec::new();
    for (ix, s) in indexes.iter().enumerate() {
        if let (Some(want), Some(have)) = (&identity.source, &s.src_override) {
            if want != have {
                continue;
            }
        }
        let queries: Vec<Box<dyn Query>> =
            leaves.iter().map(|l| leaf_query(&s.fields, l)).collect();
        let id_query = identity_query(&s.fields, identity, s.src_override.as_deref());
        for (so, seg) in s.searcher.segment_readers().iter().enumerate() {
            deadline.check()?;
            let mut cand = Bits::empty(seg.max_doc());
            match seg.alive_bitset() {
                Some(alive) => {
                    for d in 0..seg.max_doc() {
                        if alive.is_alive(d) {
                            cand.insert(d);
                        }
                    }
                }
                None => {
                    for d in 0..seg.max_doc() {
                        cand.insert(d);
                    }
                }
            }
            if let Some(q) = &id_query {
                cand.and(&query_bits(q.as_ref(), &s.searcher, seg)?);
            }
            let result = match &node {
                None => cand,
                Some(n) => {
                    let text = queries
                        .iter()
                        .map(|q| query_bits(q.as_ref(), &s.searcher, seg))
                        .collect::<Result<Vec<_>, _>>()?;
                    let mut ctx = Segment {
                        fields: &s.fields,
                        store: seg.get_store_reader(64).map_err(|e| index_err(e.into()))?,
                        text,
                        json: HashMap::new(),
                        json_fast: s
                            .fields
                            .json_fast
                            .iter()
                            .map(|f| {
                                seg.fast_fields()
                                    .str(s.fields.schema.get_field_name(*f))
                                    .map_err(index_err)
                            })
                            .collect::<Result<_, _>>()?,
                        memo: HashMap::new(),
                        deadline,
                        evaluated: 0,
                    };
                    ctx.eval(n, &cand)?
                }
            };
            if result.is_empty() {
                continue;
            }
            let ords = seg.fast_fields().u64("ord").map_err(index_err)?;
            let srcs = seg.fast_fields().str("src").map_err(index_err)?;
            // Per segment: rank by (src term ordinal, ord), keep the first
            // max_results + 1, then name them.
            let mut keyed: Vec<(u64, u64, DocId)> = result
                .iter()
                .map(|d| {
                    let so = srcs
                        .as_ref()
                        .and_then(|c| c.term_ords(d).next())
                        .unwrap_or(0);
                    (so, ords.first(d).unwrap_or(0), d)
                })
                .collect();
            let keep = max_results.saturating_add(1).min(keyed.len());
            if keep < keyed.len() {
                keyed.select_nth_unstable(keep);
                keyed.truncate(keep);
            }
            let mut name = String::new();
            for (so_ord, ord, d) in keyed {
                let src = match &s.src_override {
                    Some(p) => p.clone(),
                    None => {
                        name.clear();
                        if let Some(c) = &srcs {
                            c.ord_to_str(so_ord, &mut name)
                                .map_err(|e| index_err(e.into()))?;
                        }
                        name.clone()
                    }
                };
                if !s.sources.contains(&src) {
                    continue;
                }
                total += 1;
                best.push((src, ord, ix, so as u32, d));
            }
            // Count the rest of the segment's matches without naming them.
            total += result.count().saturating_sub(keep as u64);
        }
    }
    best.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    best.truncate(max_results);
    let mut hits = Vec::with_capacity(best.len());
    for (src, ord, ix, so, d) in best {
        let s = &indexes[ix];
        let doc: TantivyDocument = s
            .searcher
            .doc(tantivy::DocAddress::new(so, d))
            .map_err(index_err)?;
        hits.push(step_hit(&s.fields, &doc, src, ord, &leaves, expr));
    }
    Ok(HitList { hits, total })
}

fn stored(doc: &TantivyDocument, f: tantivy::schema::Field) -> Option<&str> {
    doc.get_first(f).and_then(|v| v.as_str())
}

fn step_hit(
    fields: &Fields,
    doc: &TantivyDocument,
    source_path: String,
    ord: u64,
    leaves: &[TextLeaf],
    expr: Option<&FindExpr>,
) -> Hit {
    let s = |f| stored(doc, f).map(str::to_string);
    let role = s(fields.role);
    // Preview: around the first positive text leaf found in the step,
    // else the start of the first non-empty text column.
    let mut preview = None;
    let positive = expr.map(positive_text_leaves).unwrap_or_default();
    'leaves: for li in positive {
        let Some(leaf) = leaves.get(li) else { continue };
        let (cols, want_role) = selector_columns(leaf.field);
        if want_role.is_some() && want_role != role.as_deref() {
            continue;
        }
        for &c in cols {
            if let Some(text) = stored(doc, fields.text[c]) {
                if let Some(at) = locate(text, &leaf.terms) {
                    preview = Some(excerpt(text, at));
                    break 'leaves;
                }
            }
        }
    }
    let preview = preview.unwrap_or_else(|| {
        [0usize, 2, 3, 1]
            .iter()
            .find_map(|&c| stored(doc, fields.text[c]).filter(|t| !t.trim().is_empty()))
            .map(|t| excerpt(t, 0))
            .unwrap_or_default()
    });
    Hit {
        origin_path: s(fields.origin).unwrap_or_else(|| source_path.clone()),
        source_path,
        document_id: s(fields.doc).unwrap_or_default(),
        run_id: s(fields.run),
        session_id: s(fields.session),
        step_id: doc.get_first(fields.step).and_then(|v| v.as_i64()),
        step_source: role,
        effective_kind: s(fields.kind),
        timestamp: s(fields.ts),
        preview,
        ord,
        storage_ordinal: Some(super::index::document_of(ord)),
        step_scope: true,
    }
}

/// Indices (in compile order) of text leaves not under a NOT.
fn positive_text_leaves(e: &FindExpr) -> Vec<usize> {
    fn walk(e: &FindExpr, negated: bool, next: &mut usize, out: &mut Vec<usize>) {
        match e {
            FindExpr::Text { .. } => {
                if !negated {
                    out.push(*next);
                }
                *next += 1;
            }
            FindExpr::Json { .. } => {}
            FindExpr::Not(x) => walk(x, !negated, next, out),
            FindExpr::And(v) | FindExpr::Or(v) => {
                for x in v {
                    walk(x, negated, next, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(e, false, &mut 0, &mut out);
    out
}

/// Byte offset of the first occurrence of the query terms (as a phrase) in
/// `text`, by the same analyzer.
pub fn find_terms(text: &str, terms: &[(usize, String)]) -> Option<usize> {
    let mut a = analyzer();
    let mut s = a.token_stream(text);
    let mut toks: Vec<(String, usize, usize)> = Vec::new();
    while s.advance() {
        let t = s.token();
        toks.push((t.text.clone(), t.position, t.offset_from));
    }
    let (first_off, first) = terms.first()?;
    debug_assert_eq!(*first_off, 0);
    for (t, p, off) in &toks {
        if t != first {
            continue;
        }
        let ok = terms[1..]
            .iter()
            .all(|(o, term)| toks.iter().any(|(t2, p2, _)| *p2 == p + o && t2 == term));
        if ok {
            return Some(*off);
        }
    }
    None
}

/// Byte offset of the first place `text` contains the first query term,
/// compared in lowercase: where a preview starts. (A preview only needs a
/// good place to cut; it does not re-run the analyzer.)
pub fn locate(text: &str, terms: &[(usize, String)]) -> Option<usize> {
    let first = &terms.first()?.1;
    let mut lower = String::with_capacity(text.len());
    let mut map = Vec::with_capacity(text.len());
    for (i, c) in text.char_indices() {
        for l in c.to_lowercase() {
            let before = lower.len();
            lower.push(l);
            map.extend(std::iter::repeat_n(i, lower.len() - before));
        }
    }
    lower.find(first.as_str()).map(|p| map[p])
}

/// A bounded one-line excerpt of `text` around byte offset `at`.
pub fn excerpt(text: &str, at: usize) -> String {
    let at = (0..=at.min(text.len()))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    let before: Vec<char> = text[..at]
        .chars()
        .rev()
        .take(PREVIEW_CHARS / 4 + 1)
        .collect();
    let lead = before.len() > PREVIEW_CHARS / 4;
    let mut out = String::new();
    if lead {
        out.push('…');
    }
    out.extend(before.iter().take(PREVIEW_CHARS / 4).rev());
    let budget = PREVIEW_CHARS - PREVIEW_CHARS / 4;
    let mut after = text[at..].chars();
    out.extend(after.by_ref().take(budget));
    if after.next().is_some() {
        out.push('…');
    }
    let mut clean = String::with_capacity(out.len());
    let mut space = false;
    for c in out.chars() {
        if c.is_whitespace() || c.is_control() {
            if !space {
                clean.push(' ');
            }
            space = true;
        } else {
            clean.push(c);
            space = false;
        }
    }
    clean.trim().to_string()
}

// ---------------------------------------------------------------- runs

/// JSON columns of the runs scope.
pub const RUN_JSON_COLUMNS: [&str; 5] = [
    "agent_extra",
    "final_metrics",
    "extra",
    "meta",
    "unknown_fields",
];

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
    /// JSON columns in [`RUN_JSON_COLUMNS`] order (raw JSON text).
    pub json: Vec<Option<String>>,
    /// A text to preview when no JSON value is shown (the first user
    /// message).
    pub prompt: Option<String>,
    /// Order within the Source.
    pub ord: u64,
}

/// Search run rows (already in Source order).
pub fn search_runs(
    rows: &[RunRow],
    expr: Option<&FindExpr>,
    identity: &Identity,
    max_results: usize,
    deadline: Deadline,
) -> Result<HitList, FindError> {
    let mut leaves = Vec::new();
    let node = expr
        .map(|e| compile(e, &RUN_JSON_COLUMNS, &mut leaves))
        .transpose()?;
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
        if identity
            .source
            .as_ref()
            .is_some_and(|s| *s != r.source_path)
            || identity
                .run_id
                .as_ref()
                .is_some_and(|v| Some(v) != r.run_id.as_ref())
            || identity
                .document_id
                .as_ref()
                .is_some_and(|v| *v != r.document_id)
            || identity
                .session_id
                .as_ref()
                .is_some_and(|v| Some(v) != r.session_id.as_ref())
        {
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
            // Show the first JSON condition (not under NOT) that holds.
            let shown = node.as_ref().and_then(|n| {
                let mut leaves = Vec::new();
                positive_json_leaves(n, false, &mut leaves);
                leaves.into_iter().find_map(|(cols, p)| {
                    cols.iter().find_map(|&c| {
                        let v = parsed[c].as_ref()?;
                        p.eval(v).then(|| {
                            let at = crate::util::jsonpath::lookup(v, &p.path)
                                .map(Value::to_string)
                                .unwrap_or_default();
                            format!(
                                "{} {}: {}",
                                RUN_JSON_COLUMNS[c],
                                crate::util::jsonpath::to_text(&p.path),
                                at
                            )
                        })
                    })
                })
            });
            let preview = shown
                .or_else(|| r.prompt.clone())
                .map(|p| excerpt(&p, 0))
                .unwrap_or_default();
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
                preview,
                ord: r.ord,
                storage_ordinal: None,
                step_scope: false,
            });
        }
    }
    Ok(out)
}

fn positive_json_leaves<'a>(
    n: &'a Node,
    negated: bool,
    out: &mut Vec<(&'a [usize], &'a Predicate)>,
) {
    match n {
        Node::Text(_) => {}
        Node::Json(c, p) => {
            if !negated {
                out.push((c, p));
            }
        }
        Node::Not(x) => positive_json_leaves(x, !negated, out),
        Node::And(v) | Node::Or(v) => {
            for x in v {
                positive_json_leaves(x, negated, out);
            }
        }
    }
}

/// Stable order of hits: by Source path, then position in the Source.
pub fn hit_order(a: &Hit, b: &Hit) -> Ordering {
    a.source_path.cmp(&b.source_path).then(a.ord.cmp(&b.ord))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_algebra() {
        let mut a = Bits::empty(130);
        for d in [0, 5, 64, 129] {
            a.insert(d);
        }
        let mut b = Bits::empty(130);
        for d in [5, 129] {
            b.insert(d);
        }
        let mut x = a.clone();
        x.minus(&b);
        assert_eq!(x.iter().collect::<Vec<_>>(), [0, 64]);
        x.or(&b);
        assert_eq!(x.count(), 4);
        x.and(&b);
        assert_eq!(x.iter().collect::<Vec<_>>(), [5, 129]);
        assert!(x.contains(129) && !x.contains(0));
    }

    #[test]
    fn excerpts_are_bounded_and_centered() {
        let text = format!("{} needle {}", "a ".repeat(200), "b ".repeat(200));
        let at = text.find("needle").unwrap();
        let e = excerpt(&text, at);
        assert!(
            e.contains("needle") && e.starts_with('…') && e.ends_with('…'),
            "{e}"
        );
        assert!(e.chars().count() <= PREVIEW_CHARS + 2);
        assert_eq!(excerpt("line1\n\nline2", 0), "line1 line2");
    }

    #[test]
    fn phrases_are_found_by_position() {
        let t = query_terms("connection timeout").unwrap();
        assert_eq!(
            t,
            vec![(0, "connection".to_string()), (1, "timeout".to_string())]
        );
        let text = "timeout first; later a connection timeout happened";
        assert_eq!(find_terms(text, &t), text.find("connection"));
        assert!(query_terms(" ,; ").is_err());
    }
}
