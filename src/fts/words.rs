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
/// For each character of [`FIRST`], where the map stands after its bytes
/// (`node address << 32 | output so far`, or `u64::MAX` when no word starts
/// with it), 8 bytes little-endian each, written by the build script from
/// the same map. Nearly every step of a route starts at one of these
/// characters, and the table saves it three steps through the map.
static FIRST_TABLE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/jieba_first.bin"));
mod list {
    include!(concat!(env!("OUT_DIR"), "/jieba_words.rs"));
}

/// The word list with the constants of its route computation.
pub struct Words {
    fst: Fst<&'static [u8]>,
    /// `ln` of the total frequency (every line of the list counts).
    log_total: f64,
}

/// The CJK Unified Ideographs, the characters of nearly all Chinese text.
const FIRST: std::ops::RangeInclusive<u32> = 0x4E00..=0x9FFF;

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
        let b = word.as_bytes();
        let c = word.chars().next().map_or(0, u32::from);
        // Sub-words are looked up by the thousand in CJK text: start after
        // the first character, as route steps do.
        let (mut node, rest) = if FIRST.contains(&c) {
            match after_first(c) {
                Some((addr, _)) => (self.fst.node(addr), &b[3..]),
                None => return false,
            }
        } else {
            (self.fst.root(), b)
        };
        for &byte in rest {
            let Some(i) = node.find_input(byte) else {
                return false;
            };
            node = self.fst.node(node.transition(i).addr);
        }
        node.is_final()
    }

    /// Every dictionary word of `text` starting at byte `from`, shortest
    /// first, as `(end byte, frequency)`; only ends at character boundaries.
    fn prefixes(&self, text: &str, from: usize, mut each: impl FnMut(usize, u64)) {
        let b = text.as_bytes();
        let mut node = self.fst.root();
        let mut out = 0u64;
        let mut from = from;
        let c = text[from..].chars().next().map_or(0, u32::from);
        if FIRST.contains(&c) {
            let Some((addr, o)) = after_first(c) else {
                return;
            };
            node = self.fst.node(addr);
            out = o;
            from += 3;
            if node.is_final() {
                each(from, out + node.final_output().value());
            }
        }
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
    /// `Jieba::cut(run, false)` with the full dictionary. `scratch` holds
    /// buffers between calls.
    pub fn cut(&self, run: &str, scratch: &mut Scratch, mut emit: impl FnMut(usize, usize)) {
        let mut chars = run.char_indices().peekable();
        while let Some(&(start, c)) = chars.peek() {
            if !is_han(c) {
                // Jieba segments ideographs only: kana and hangul are words
                // of one character.
                chars.next();
                emit(start, start + c.len_utf8());
                continue;
            }
            scratch.offsets.clear();
            while let Some(&(i, c)) = chars.peek() {
                if !is_han(c) {
                    break;
                }
                scratch.offsets.push(i);
                chars.next();
            }
            let end = chars.peek().map_or(run.len(), |&(i, _)| i);
            scratch.offsets.push(end);
            self.best_route(run, scratch);
            let (offsets, route) = (&scratch.offsets, &scratch.route);
            let mut x = 0;
            while x + 1 < offsets.len() {
                let y = route[x].1;
                emit(offsets[x], offsets[y]);
                x = y;
            }
        }
    }

    /// For each character `x` of the block whose characters start at
    /// `scratch.offsets` (its end last), `route[x] = (score, y)`: the best
    /// segmentation of the rest starts with the word of characters `x..y`.
    fn best_route(&self, text: &str, scratch: &mut Scratch) {
        let Scratch { offsets, route, ln } = scratch;
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
                let score = ln_of(ln, freq) - lt + route[y].0;
                if best.is_none_or(|(s, e)| score > s || (score == s && y > e)) {
                    best = Some((score, y));
                }
            });
            route[x] = best.unwrap_or(((0.0 - lt) + route[x + 1].0, x + 1));
        }
    }
}

/// Slots of the memo of logarithms (a power of two).
const LN_SLOTS: usize = 1024;

/// What [`Words::cut`] keeps between calls: its buffers, and the
/// logarithms of the frequencies it met last (a word's `ln` was a twentieth
/// of the analyzer's time, and the same words come again and again).
#[derive(Clone)]
pub struct Scratch {
    offsets: Vec<usize>,
    route: Vec<(f64, usize)>,
    /// `(frequency, ln frequency)` by frequency modulo [`LN_SLOTS`].
    ln: Vec<(u64, f64)>,
}

impl Default for Scratch {
    fn default() -> Scratch {
        Scratch {
            offsets: Vec::new(),
            route: Vec::new(),
            // No word has the frequency `u64::MAX`, so no slot matches yet.
            ln: vec![(u64::MAX, 0.0); LN_SLOTS],
        }
    }
}

/// `ln(freq)`, from the memo when it holds it; computed the same way either way.
fn ln_of(memo: &mut [(u64, f64)], freq: u64) -> f64 {
    let slot = &mut memo[(freq as usize) & (LN_SLOTS - 1)];
    if slot.0 != freq {
        *slot = (freq, (freq as f64).ln());
    }
    slot.1
}

/// Where the map stands after the character `c` of [`FIRST`], from
/// [`FIRST_TABLE`]; `None` when no word starts with it.
fn after_first(c: u32) -> Option<(tantivy_fst::raw::CompiledAddr, u64)> {
    let at = (c - FIRST.start()) as usize * 8;
    let v = u64::from_le_bytes(FIRST_TABLE.get(at..at + 8)?.try_into().ok()?);
    (v != u64::MAX).then_some(((v >> 32) as usize, v & 0xFFFF_FFFF))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_character_table_is_where_the_map_stands() {
        let w = Words::get().expect("word list built");
        let mut starts = 0;
        for c in FIRST.clone() {
            let ch = char::from_u32(c).unwrap();
            let mut node = w.fst.root();
            let mut out = 0u64;
            let mut walked = Some(());
            for &byte in ch.encode_utf8(&mut [0; 4]).as_bytes() {
                let Some(i) = node.find_input(byte) else {
                    walked = None;
                    break;
                };
                let t = node.transition(i);
                out += t.out.value();
                node = w.fst.node(t.addr);
            }
            let want = walked.map(|()| (node.addr(), out));
            assert_eq!(after_first(c), want, "U+{c:04X}");
            starts += usize::from(want.is_some());
        }
        assert!(starts > 10_000, "{starts}");
    }
}
