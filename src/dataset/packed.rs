//! A decoded document held with its steps as JSON text.
//!
//! The model of a step keeps every JSON object of it (metrics, a tool
//! call's arguments, an observation and each of its results) as a map whose
//! smallest node takes about 630 bytes, so a decoded trajectory holds about
//! four bytes per byte of its file. A reader that keeps a large file for
//! later pages (the explorer) holds each step as the JSON of its model
//! instead, about a byte per byte, and turns back into the model only the
//! steps a page shows. A [`KeptDocument`] starts whole, so the request that
//! decoded it is not slowed, and is packed later, off that request's path.

use std::sync::{PoisonError, RwLock};

use rayon::prelude::*;

use crate::formats::model::{Storyline, Turn};

/// Steps parsed per task: enough to be worth a task, few enough that the
/// 100,000 steps of one long trajectory spread over cores.
const STEPS_PER_TASK: usize = 2048;

/// One document: everything but its steps as the model, its steps as JSON.
#[derive(Debug)]
pub struct PackedDocument {
    /// The document without its steps.
    head: Storyline,
    /// The JSON of every step, back to back.
    text: Vec<u8>,
    /// Where the JSON of each step ends in `text`.
    ends: Vec<usize>,
    /// `(step, call, text)` of tool-call arguments kept as the source wrote
    /// them ([`crate::formats::model::ToolCall::args_raw`], which the JSON
    /// of a step leaves out), in step order.
    raw_args: Vec<(usize, usize, String)>,
    tool_calls: usize,
}

impl PackedDocument {
    /// Pack `doc`.
    pub fn pack(mut doc: Storyline) -> Self {
        let turns = std::mem::take(&mut doc.turns);
        Self::of(doc, &turns)
    }

    /// The document `head` (whose steps are left out) with the steps
    /// `turns`, packed.
    fn of(head: Storyline, turns: &[Turn]) -> Self {
        let tool_calls = turns
            .iter()
            .map(|t| t.tool_calls.as_ref().map_or(0, Vec::len))
            .sum();
        let mut raw_args = Vec::new();
        for (i, t) in turns.iter().enumerate() {
            for (c, call) in t.tool_calls.iter().flatten().enumerate() {
                if let Some(raw) = &call.args_raw {
                    raw_args.push((i, c, raw.clone()));
                }
            }
        }
        // One thread: packing runs beside the requests a server answers.
        let mut text = Vec::new();
        let mut ends = Vec::with_capacity(turns.len());
        for t in turns {
            serde_json::to_writer(&mut text, t).expect("a step's model always serializes");
            ends.push(text.len());
        }
        text.shrink_to_fit();
        PackedDocument {
            head,
            text,
            ends,
            raw_args,
            tool_calls,
        }
    }

    /// Number of steps.
    pub fn step_count(&self) -> usize {
        self.ends.len()
    }

    /// Number of tool calls over all steps.
    pub fn tool_call_count(&self) -> usize {
        self.tool_calls
    }

    /// Bytes held, estimated: the text, its offsets, and the model of what
    /// is not a step (small next to the steps).
    pub fn held_bytes(&self) -> usize {
        self.text.capacity()
            + self.ends.capacity() * std::mem::size_of::<usize>()
            + self
                .raw_args
                .iter()
                .map(|(_, _, s)| s.len() + 48)
                .sum::<usize>()
            + 4096
    }

    /// The document with only the steps `range` (clamped to the steps it
    /// has): the steps a page shows, at positions `range.start..` of the
    /// whole document.
    pub fn page(&self, range: std::ops::Range<usize>) -> Storyline {
        let end = range.end.min(self.ends.len());
        let start = range.start.min(end);
        let mut doc = self.head.clone();
        doc.turns = self.turns(start, end);
        doc
    }

    /// The whole document, as it was packed.
    pub fn unpack(&self) -> Storyline {
        let mut doc = self.head.clone();
        doc.turns = self.turns(0, self.ends.len());
        doc
    }

    /// Steps `start..end`, parsed (in parallel when there are many).
    fn turns(&self, start: usize, end: usize) -> Vec<Turn> {
        let parse = |i: usize| -> Turn {
            let from = if i == 0 { 0 } else { self.ends[i - 1] };
            serde_json::from_slice(&self.text[from..self.ends[i]])
                .expect("a step packed from its model parses back")
        };
        let mut turns: Vec<Turn> = if end - start > STEPS_PER_TASK {
            (start..end)
                .into_par_iter()
                .with_min_len(STEPS_PER_TASK)
                .map(parse)
                .collect()
        } else {
            (start..end).map(parse).collect()
        };
        let first = self.raw_args.partition_point(|(i, _, _)| *i < start);
        for (i, c, raw) in self.raw_args[first..]
            .iter()
            .take_while(|(i, _, _)| *i < end)
        {
            if let Some(call) = turns[i - start]
                .tool_calls
                .as_mut()
                .and_then(|calls| calls.get_mut(*c))
            {
                call.args_raw = Some(raw.clone());
            }
        }
        turns
    }
}

/// A document a reader keeps: whole as decoded, then packed once
/// [`KeptDocument::pack`] runs (which readers need not wait for).
#[derive(Debug)]
pub struct KeptDocument {
    state: RwLock<Kept>,
    /// What the whole document is estimated to hold.
    whole_bytes: usize,
}

#[derive(Debug)]
enum Kept {
    Whole(Storyline),
    Packed(PackedDocument),
}

impl KeptDocument {
    /// `doc` as decoded, estimated to hold `whole_bytes`.
    pub fn whole(doc: Storyline, whole_bytes: usize) -> Self {
        KeptDocument {
            state: RwLock::new(Kept::Whole(doc)),
            whole_bytes,
        }
    }

    /// `doc` packed now.
    pub fn packed(doc: Storyline) -> Self {
        KeptDocument {
            state: RwLock::new(Kept::Packed(PackedDocument::pack(doc))),
            whole_bytes: 0,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Kept> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Kept> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Number of steps.
    pub fn step_count(&self) -> usize {
        match &*self.read() {
            Kept::Whole(d) => d.turns.len(),
            Kept::Packed(p) => p.step_count(),
        }
    }

    /// Number of tool calls over all steps.
    pub fn tool_call_count(&self) -> usize {
        match &*self.read() {
            Kept::Whole(d) => d.tool_call_count(),
            Kept::Packed(p) => p.tool_call_count(),
        }
    }

    /// Bytes held now, estimated.
    pub fn held_bytes(&self) -> usize {
        match &*self.read() {
            Kept::Whole(_) => self.whole_bytes,
            Kept::Packed(p) => p.held_bytes(),
        }
    }

    /// `f` on a document holding at least the steps `range` (clamped to the
    /// steps it has), the position in the whole document of its first step,
    /// and the clamped range: the whole document while it is whole, else
    /// only those steps, parsed now.
    pub fn with_steps<R>(
        &self,
        range: std::ops::Range<usize>,
        f: impl FnOnce(&Storyline, usize, std::ops::Range<usize>) -> R,
    ) -> R {
        let g = self.read();
        match &*g {
            Kept::Whole(d) => {
                let end = range.end.min(d.turns.len());
                f(d, 0, range.start.min(end)..end)
            }
            Kept::Packed(p) => {
                let end = range.end.min(p.step_count());
                let start = range.start.min(end);
                let page = p.page(start..end);
                drop(g);
                f(&page, start, start..end)
            }
        }
    }

    /// `f` on the whole document (parsed again when packed).
    pub fn with_whole<R>(&self, f: impl FnOnce(&Storyline) -> R) -> R {
        let g = self.read();
        match &*g {
            Kept::Whole(d) => f(d),
            Kept::Packed(p) => {
                let d = p.unpack();
                drop(g);
                f(&d)
            }
        }
    }

    /// Pack the document if it is whole. Readers go on meanwhile: the steps
    /// are serialized under a shared lock, and only the swap is exclusive.
    /// Returns whether it packed.
    pub fn pack(&self) -> bool {
        let head = {
            let mut g = self.write();
            let Kept::Whole(d) = &mut *g else {
                return false;
            };
            let turns = std::mem::take(&mut d.turns);
            let head = d.clone();
            d.turns = turns;
            head
        };
        let packed = {
            let g = self.read();
            let Kept::Whole(d) = &*g else {
                return false;
            };
            PackedDocument::of(head, &d.turns)
        };
        let whole = std::mem::replace(&mut *self.write(), Kept::Packed(packed));
        // Freed here, by the packing thread, not under the lock.
        drop(whole);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::DecodeOptions;

    /// Every document of the shipped example dataset and the real runs under
    /// `data/external` (terminal sessions, OpenAI messages with raw
    /// arguments) packs and unpacks to an equal document, and a page is
    /// the slice of its steps.
    /// Every document of the shipped example dataset and of the real runs
    /// under `tests/fixtures` (terminal sessions, OpenAI messages with raw
    /// arguments).
    fn documents() -> Vec<Storyline> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut docs = Vec::new();
        for dir in ["examples/dataset", "tests/fixtures"] {
            for path in walk(&root.join(dir)) {
                let Ok(bytes) = std::fs::read(&path) else {
                    continue;
                };
                let mut ctx = crate::formats::DecodeCtx::new(path.display().to_string());
                // Files that are not trajectories (licence notes) decode to
                // nothing.
                let _ = crate::formats::decode_bytes(
                    &bytes,
                    DecodeOptions::full(1 << 30),
                    &mut ctx,
                    &mut |d| docs.push(d),
                );
            }
        }
        docs
    }

    /// Every document packs and unpacks to an equal document, raw tool-call
    /// arguments included, and a page is the slice of its steps.
    #[test]
    fn documents_unpack_to_what_was_packed() {
        let docs = documents();
        assert!(docs.len() >= 20, "found {} documents", docs.len());
        let mut raw = 0;
        for d in docs {
            raw += d
                .turns
                .iter()
                .flat_map(|t| t.tool_calls.iter().flatten())
                .filter(|c| c.args_raw.is_some())
                .count();
            let p = PackedDocument::pack(d.clone());
            assert_eq!(p.step_count(), d.turns.len());
            assert_eq!(p.tool_call_count(), d.tool_call_count());
            let back = p.unpack();
            assert_eq!(back, d);
            let raws = |s: &Storyline| -> Vec<Option<String>> {
                s.turns
                    .iter()
                    .flat_map(|t| t.tool_calls.iter().flatten())
                    .map(|c| c.args_raw.clone())
                    .collect()
            };
            assert_eq!(raws(&back), raws(&d));
            let n = d.turns.len();
            let (a, b) = (n / 3, n - n / 4);
            let page = p.page(a..b);
            assert_eq!(page.turns, d.turns[a..b]);
            assert_eq!(
                raws(&page),
                raws(&Storyline {
                    turns: d.turns[a..b].to_vec(),
                    ..d.clone()
                })
            );
            assert!(p.page(n..n + 5).turns.is_empty());
        }
        assert!(raw > 0, "no fixture has raw tool-call arguments");
    }

    /// The rows of a page are the same while a kept document is whole and
    /// once it is packed, and so is the whole document.
    #[test]
    fn a_page_has_the_same_rows_whole_and_packed() {
        use crate::table::{Table, TableBuilder};
        let rows = |k: &KeptDocument, range: std::ops::Range<usize>| {
            k.with_steps(range, |d, first, range| {
                let mut steps = TableBuilder::new(Table::Steps, None);
                let mut calls = TableBuilder::new(Table::ToolCalls, None);
                steps.push_turns_from("f.json", d, 3, first, range.clone());
                calls.push_turns_from("f.json", d, 3, first, range);
                (steps.finish(), calls.finish())
            })
        };
        let mut pages = 0;
        for d in documents() {
            let n = d.turns.len();
            let k = KeptDocument::whole(d.clone(), 1);
            let ranges = [0..n, n / 3..n / 2 + 1, n - n / 4..n + 7, n..n + 1];
            let before: Vec<_> = ranges.iter().map(|r| rows(&k, r.clone())).collect();
            assert_eq!((k.step_count(), k.held_bytes()), (n, 1));
            assert!(k.pack());
            assert!(!k.pack(), "packed once");
            assert_eq!(k.step_count(), n);
            assert_eq!(k.tool_call_count(), d.tool_call_count());
            for (r, want) in ranges.iter().zip(&before) {
                assert_eq!(&rows(&k, r.clone()), want, "{r:?} of {n}");
                pages += usize::from(want.0.num_rows() > 0);
            }
            k.with_whole(|w| assert_eq!(w, &d));
        }
        assert!(pages > 40, "{pages}");
    }

    fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return out;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
        out
    }
}
