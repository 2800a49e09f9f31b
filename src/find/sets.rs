//! Evaluating a plan over one index segment, as document sets.
//!
//! Text leaves arrive as the sets their queries match. AND narrows the
//! candidates child by child, OR unions what each child adds to what the
//! children before it matched, NOT subtracts; And/Or nodes are n-ary and
//! folded iteratively, so thousands of terms never nest. JSON leaves are
//! looked up among the cells' indexed leaves where the comparison allows
//! it; otherwise (and for cells the index did not break into leaves) they
//! are evaluated on the candidates that reach them, once per distinct cell
//! value of the segment.

use std::collections::HashMap;

use serde_json::Value;

use super::compile::Node;
use super::exec::Deadline;
use super::predicate::Predicate;
use super::FindError;
use crate::fts::{DocId, DocSet, JsonCells, Segment, JSON_COLUMNS};

/// The evaluation state of one segment.
pub struct SegmentSets<'a> {
    /// The set each text leaf matches, by leaf number.
    text: Vec<DocSet>,
    segment: Segment<'a>,
    /// Opened when a JSON cell has to be read.
    cells: Option<JsonCells<'a>>,
    /// JSON cells read from the document store, parsed.
    json: HashMap<DocId, Vec<Option<Value>>>,
    /// Predicate results per (predicate, column, dictionary ordinal):
    /// 0 false, 1 true, 2 the cell is only in the document store.
    memo: HashMap<(usize, usize, u64), u8>,
    deadline: Deadline,
    evaluated: u64,
}

impl<'a> SegmentSets<'a> {
    /// State for a segment whose text leaves matched `text`.
    pub fn new(text: Vec<DocSet>, segment: Segment<'a>, deadline: Deadline) -> SegmentSets<'a> {
        SegmentSets {
            text,
            segment,
            cells: None,
            json: HashMap::new(),
            memo: HashMap::new(),
            deadline,
            evaluated: 0,
        }
    }

    fn cells(&mut self) -> Result<&JsonCells<'a>, FindError> {
        if self.cells.is_none() {
            self.cells = Some(self.segment.json_cells()?);
        }
        Ok(self.cells.as_ref().expect("opened above"))
    }

    fn json_of(&mut self, d: DocId) -> Result<&Vec<Option<Value>>, FindError> {
        if !self.json.contains_key(&d) {
            self.evaluated += 1;
            if self.evaluated.is_multiple_of(4096) {
                self.deadline.check()?;
            }
            let step = self.cells()?.document(d)?;
            let vals = (0..JSON_COLUMNS.len())
                .map(|c| {
                    step.json(c)
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
        cand: &DocSet,
        out: &mut DocSet,
    ) -> Result<(), FindError> {
        const FALSE: u8 = 0;
        const TRUE: u8 = 1;
        const IN_STORE: u8 = 2;
        if !self.cells()?.has_column(c) {
            return Ok(());
        }
        let cells = self.cells.as_ref().expect("opened above");
        let pkey = std::ptr::from_ref(p) as usize;
        let mut need: Vec<(DocId, u64)> = Vec::new();
        for d in cand.iter() {
            if out.contains(d) {
                continue;
            }
            if let Some(o) = cells.ordinal(c, d) {
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
        let deadline = self.deadline;
        cells.values(c, &ords, |cell| {
            if failed.is_some() {
                return;
            }
            if results.len() % 4096 == 4095 {
                if let Err(e) = deadline.check() {
                    failed = Some(e);
                    return;
                }
            }
            let r = match cell {
                None => IN_STORE,
                Some(bytes) => u8::from(
                    serde_json::from_slice::<Value>(bytes)
                        .ok()
                        .is_some_and(|v| p.eval(&v)),
                ),
            };
            results.push(r);
        })?;
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

    /// The candidates `cand` for which `n` holds.
    pub fn eval(&mut self, n: &Node, cand: &DocSet) -> Result<DocSet, FindError> {
        Ok(match n {
            Node::Text(i) => {
                let mut b = cand.clone();
                b.and(&self.text[*i]);
                b
            }
            Node::Json(cols, p) => {
                let mut b = DocSet::empty(cand.universe());
                let test = p.leaf_test();
                for &c in cols {
                    let Some(test) = &test else {
                        self.json_column(p, c, cand, &mut b)?;
                        continue;
                    };
                    // Indexed leaves answer for most cells; the cells the
                    // index could not break into leaves are read.
                    let mut hit = self
                        .segment
                        .matching(&self.segment.json_query(c, &p.path, test))?;
                    hit.and(cand);
                    b.or(&hit);
                    let mut rest = self
                        .segment
                        .matching(&self.segment.json_unindexed_query(c))?;
                    rest.and(cand);
                    rest.minus(&b);
                    if !rest.is_empty() {
                        self.json_column(p, c, &rest, &mut b)?;
                    }
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
                let mut acc = DocSet::empty(cand.universe());
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
