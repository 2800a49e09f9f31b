//! The `jieba` text analyzer shared by the index and by queries.
//!
//! Text is split into runs. A run of CJK characters is segmented with Jieba
//! (dictionary only, no HMM, so a word segments the same way wherever it
//! occurs). Every word takes one position; a word longer than two characters
//! also emits its 2- and 3-character dictionary sub-words at the same
//! position, so `数据` finds `数据库`. Other text splits on anything that is not
//! a letter or digit. Tokens are lowercased and folded to ASCII where an
//! equivalent exists (`Café` → `cafe`). Offsets are byte offsets into the
//! original text.

use std::sync::LazyLock;

use jieba_rs::Jieba;
use tantivy::tokenizer::{
    AsciiFoldingFilter, LowerCaser, RemoveLongFilter, TextAnalyzer, Token, TokenStream, Tokenizer,
};

/// Name the analyzer is registered under in every index.
pub const TOKENIZER_NAME: &str = "jieba";

/// Tokens longer than this many bytes are not indexed.
pub const MAX_TOKEN_BYTES: usize = 200;

static JIEBA: LazyLock<Jieba> = LazyLock::new(Jieba::new);

/// Load the dictionary now (it takes a moment) instead of on first use.
pub fn warm_up() {
    LazyLock::force(&JIEBA);
}

/// True for characters Jieba segments: Han ideographs, kana and hangul.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF        // hiragana, katakana
        | 0x3400..=0x4DBF      // CJK extension A
        | 0x4E00..=0x9FFF      // CJK unified ideographs
        | 0xAC00..=0xD7AF      // hangul syllables
        | 0xF900..=0xFAFF      // CJK compatibility ideographs
        | 0x20000..=0x2EBEF    // CJK extensions B–F
    )
}

/// The analyzer: segmentation, then lowercasing, ASCII folding and a length cap.
pub fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(JiebaTokenizer::default())
        .filter(RemoveLongFilter::limit(MAX_TOKEN_BYTES))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .build()
}

/// Analyze `text` into (token, position) pairs, in stream order.
pub fn tokens(text: &str) -> Vec<(String, usize)> {
    let mut a = analyzer();
    let mut s = a.token_stream(text);
    let mut out = Vec::new();
    while s.advance() {
        let t = s.token();
        out.push((t.text.clone(), t.position));
    }
    out
}

/// The segmenting tokenizer (before the filters).
#[derive(Clone, Default)]
pub struct JiebaTokenizer {
    tokens: Vec<Token>,
}

/// Stream over precomputed tokens.
pub struct JiebaTokenStream<'a> {
    tokens: &'a mut Vec<Token>,
    next: usize,
}

impl Tokenizer for JiebaTokenizer {
    type TokenStream<'a> = JiebaTokenStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> JiebaTokenStream<'a> {
        self.tokens.clear();
        segment(text, &mut self.tokens);
        JiebaTokenStream {
            tokens: &mut self.tokens,
            next: 0,
        }
    }
}

impl TokenStream for JiebaTokenStream<'_> {
    fn advance(&mut self) -> bool {
        if self.next < self.tokens.len() {
            self.next += 1;
            true
        } else {
            false
        }
    }

    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}

fn push(out: &mut Vec<Token>, text: &str, from: usize, to: usize, position: usize) {
    out.push(Token {
        offset_from: from,
        offset_to: to,
        position,
        text: text[from..to].to_string(),
        position_length: 1,
    });
}

/// Segment `text` into `out`.
fn segment(text: &str, out: &mut Vec<Token>) {
    let mut position = 0usize;
    let mut chars = text.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if is_cjk(c) {
            let mut end = start;
            while let Some(&(i, c)) = chars.peek() {
                if !is_cjk(c) {
                    break;
                }
                end = i + c.len_utf8();
                chars.next();
            }
            segment_cjk(text, start, end, &mut position, out);
        } else if c.is_alphanumeric() {
            let mut end = start;
            while let Some(&(i, c)) = chars.peek() {
                if !c.is_alphanumeric() || is_cjk(c) {
                    break;
                }
                end = i + c.len_utf8();
                chars.next();
            }
            push(out, text, start, end, position);
            position += 1;
        } else {
            chars.next();
        }
    }
}

fn segment_cjk(text: &str, start: usize, end: usize, position: &mut usize, out: &mut Vec<Token>) {
    let run = &text[start..end];
    for w in JIEBA.cut(run, false) {
        let (from, to) = (start + w.byte_start, start + w.byte_end);
        let n = w.end - w.start;
        if n > 2 {
            // Byte offset of each character of the word, plus its end.
            let mut at: Vec<usize> = w.word.char_indices().map(|(i, _)| from + i).collect();
            at.push(to);
            for len in [2, 3] {
                if n <= len {
                    continue;
                }
                for i in 0..=n - len {
                    let gram = &text[at[i]..at[i + len]];
                    if JIEBA.has_word(gram) {
                        push(out, text, at[i], at[i + len], *position);
                    }
                }
            }
        }
        push(out, text, from, to, *position);
        *position += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        tokens(text).into_iter().map(|(t, _)| t).collect()
    }

    #[test]
    fn latin_is_lowercased_folded_and_split() {
        assert_eq!(
            words("Café TIMEOUT, worker-3"),
            ["cafe", "timeout", "worker", "3"]
        );
        let t = tokens("a b c");
        assert_eq!(t.iter().map(|x| x.1).collect::<Vec<_>>(), [0, 1, 2]);
    }

    #[test]
    fn chinese_words_are_segmented_with_subwords() {
        let w = words("数据库连接超时");
        for want in ["数据库", "数据", "连接", "超时"] {
            assert!(w.contains(&want.to_string()), "{want} not in {w:?}");
        }
        // Sub-words share the position of their word.
        let t = tokens("数据库");
        assert!(t.iter().all(|(_, p)| *p == 0), "{t:?}");
    }

    #[test]
    fn offsets_are_bytes_of_the_original_text() {
        let text = "请求 timeout 后重试";
        let mut a = analyzer();
        let mut s = a.token_stream(text);
        while s.advance() {
            let t = s.token();
            let orig = &text[t.offset_from..t.offset_to];
            assert_eq!(orig.to_lowercase(), t.text, "{t:?}");
        }
    }

    #[test]
    fn mixed_runs_keep_positions_in_order() {
        let t = tokens("第3次重试");
        let pos: Vec<usize> = t.iter().map(|x| x.1).collect();
        assert!(pos.windows(2).all(|w| w[0] <= w[1]), "{t:?}");
    }
}
