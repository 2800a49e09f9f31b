//! Dictionary segmentation straight from the compiled word list.
//!
//! Jieba's dictionary as a `jieba_rs::Jieba` takes about 30 MB of heap and
//! a moment to build; the same words as a finite-state map are a few MB of
//! the binary's read-only data, paged in as they are used. Without HMM,
//! Jieba's segmentation is a function of the words and their frequencies
//! only, so it is done here over the map: the same directed graph of
//! dictionary words, the same best route by log-frequency, the same ties,
//! and the same arithmetic (see the test comparing both).

use std::sync::OnceLock;

use tantivy_fst::raw::Fst;

/// Jieba's word list as a finite-state map (word → frequency), compiled by
/// the build script.
static WORDS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/jieba_words.fst"));
mod list {
    include!(concat!(env!("OUT_DIR"), "/jieba_words.rs"));
}

/// The word list with the constants of its route computation.
pub struct Words {
    fst: Fst<&'static [u8]>,
    /// `ln` of the total frequency (every line of the list counts).
    log_total: f64,
}

static LOADED: OnceLock<Option<Words>> = OnceLock::new();

impl Words {
    /// The compiled list; `None` when the build found none.
    pub fn get() -> Option<&'static Words> {
        LOADED
            .get_or_init(|| {
                if list::TOTAL == 0 {
                    return None;
                }
                Some(Words {
                    fst: Fst::new(WORDS).ok()?,
                    log_total: (list::TOTAL as f64).ln(),
                })
            })
            .as_ref()
    }

    /// True when `word` is in the list (with any frequency, even 0).
    pub fn has_word(&self, word: &str) -> bool {
        self.fst.get(word.as_bytes()).is_some()
    }

    /// Every dictionary word of `text` starting at byte `from`, shortest
    /// first, as `(end byte, frequency)`; only ends at character boundaries.
    fn prefixes(&self, text: &str, from: usize, mut each: impl FnMut(usize, u64)) {
        let b = text.as_bytes();
        let mut node = self.fst.root();
        let mut out = 0u64;
        for (i, &byte) in b.iter().enumerate().skip(from) {
            let Some(t) = node.find_input(byte) else {
                return;
            };
            let tr = node.transition(t);
            out += tr.out.value();
            node = self.fst.node(tr.addr);
            if node.is_final() && text.is_char_boundary(i + 1) {
                each(i + 1, out + node.final_output().value());
            }
        }
    }

    /// The words of `run`, a run of characters [`super::tokenize::is_cjk`]
    /// accepts, as `(start, end)` byte ranges in order: exactly
    /// `Jieba::cut(run, false)` with the full dictionary.
    pub fn cut(&self, run: &str, mut emit: impl FnMut(usize, usize)) {
        let mut route = Vec::new();
        let mut chars = run.char_indices().peekable();
        while let Some(&(start, c)) = chars.peek() {
            if !is_han(c) {
                // Jieba segments ideographs only: kana and hangul are words
                // of one character.
                chars.next();
                emit(start, start + c.len_utf8());
                continue;
            }
            let mut offsets = Vec::new();
            while let Some(&(i, c)) = chars.peek() {
                if !is_han(c) {
                    break;
                }
                offsets.push(i);
                chars.next();
            }
            let end = chars.peek().map_or(run.len(), |&(i, _)| i);
            offsets.push(end);
            self.best_route(run, &offsets, &mut route);
            let mut x = 0;
            while x + 1 < offsets.len() {
                let y = route[x].1;
                emit(offsets[x], offsets[y]);
                x = y;
            }
        }
    }

    /// For each character `x` of the block whose characters start at
    /// `offsets` (its end last), `route[x] = (score, y)`: the best
    /// segmentation of the rest starts with the word of characters `x..y`.
    fn best_route(&self, text: &str, offsets: &[usize], route: &mut Vec<(f64, usize)>) {
        let n = offsets.len() - 1;
        route.clear();
        route.resize(n + 1, (0.0, n));
        // Byte offset → character index, for the ends the map reports.
        let index_of = |byte: usize, from: usize| {
            offsets[from..]
                .iter()
                .position(|&o| o == byte)
                .map(|p| from + p)
        };
        let lt = self.log_total;
        for x in (0..n).rev() {
            let mut best: Option<(f64, usize)> = None;
            self.prefixes(&text[..offsets[n]], offsets[x], |end, freq| {
                let Some(y) = index_of(end, x + 1) else {
                    return;
                };
                let score = (freq as f64).ln() - lt + route[y].0;
                if best.is_none_or(|(s, e)| score > s || (score == s && y > e)) {
                    best = Some((score, y));
                }
            });
            route[x] = best.unwrap_or(((0.0 - lt) + route[x + 1].0, x + 1));
        }
    }
}

/// The characters Jieba's dictionary segmentation applies to (its default
/// block pattern without ASCII): the CJK Unified Ideographs and their
/// extensions.
fn is_han(c: char) -> bool {
    matches!(c,
        '\u{4E00}'..='\u{9FFF}'
        | '\u{3400}'..='\u{4DBF}'
        | '\u{F900}'..='\u{FAFF}'
        | '\u{20000}'..='\u{2A6DF}'
        | '\u{2A700}'..='\u{2B73F}'
        | '\u{2B740}'..='\u{2B81F}'
        | '\u{2B820}'..='\u{2CEAF}'
        | '\u{2CEB0}'..='\u{2EBEF}'
        | '\u{2F800}'..='\u{2FA1F}'
    )
}

#[cfg(test)]
impl Words {
    /// Every word of the list, in byte order.
    pub(crate) fn words(&self) -> impl Iterator<Item = String> + '_ {
        use tantivy_fst::Streamer;
        let mut s = self.fst.stream();
        std::iter::from_fn(move || {
            s.next()
                .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
        })
    }
}
