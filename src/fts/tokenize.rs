//! The `jieba` text analyzer shared by the index and by queries.
//!
//! Text is split into runs. A run of CJK characters is segmented as Jieba
//! segments it (dictionary only, no HMM, so a word segments the same way
//! wherever it occurs), over the word list compiled into the binary
//! ([`super::words`]). Every word takes one position; a word longer than two characters
//! also emits its 2- and 3-character dictionary sub-words at the same
//! position, so `数据` finds `数据库`. Other text splits on anything that is not
//! a letter or digit. A word longer than [`MAX_TOKEN_BYTES`] is cut to its
//! first bytes (at a character boundary) and kept as one token, in the index
//! and in queries alike, so long identifiers and hashes stay searchable.
//! Tokens are lowercased and folded to ASCII where an equivalent exists
//! (`Café` → `cafe`). Offsets are byte offsets into the original text.

use std::sync::OnceLock;

use jieba_rs::Jieba;
use tantivy::tokenizer::{
    AsciiFoldingFilter, LowerCaser, TextAnalyzer, Token, TokenStream, Tokenizer,
};

use super::words::Words;

/// Name the analyzer is registered under in every index.
pub const TOKENIZER_NAME: &str = "jieba";

/// Words longer than this many bytes are cut to their first bytes.
pub const MAX_TOKEN_BYTES: usize = 200;

static JIEBA: OnceLock<Jieba> = OnceLock::new();

/// Jieba with its full dictionary, for a build without the compiled word
/// list (loaded on first use; it takes a moment and about 30 MB).
fn full() -> &'static Jieba {
    JIEBA.get_or_init(Jieba::new)
}

/// True once Jieba's full dictionary has been loaded in this process (only
/// a build without the compiled word list does).
pub fn dictionary_loaded() -> bool {
    JIEBA.get().is_some()
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

/// The analyzer of the index: segmentation with the full dictionary (long
/// words cut), the pair terms of adjacent CJK words (see
/// [`super::pairs`]), then lowercasing and ASCII folding.
pub fn analyzer() -> TextAnalyzer {
    with_tokenizer(JiebaTokenizer {
        pairs: true,
        ..JiebaTokenizer::default()
    })
}

/// The words of the index analyzer without its pair terms.
fn words_analyzer() -> TextAnalyzer {
    with_tokenizer(JiebaTokenizer::default())
}

fn with_tokenizer(t: JiebaTokenizer) -> TextAnalyzer {
    TextAnalyzer::builder(t)
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .build()
}

/// Analyze `text` into (token, position) pairs, in stream order, exactly as
/// the index analyzes it (pair terms left out).
pub fn tokens(text: &str) -> Vec<(String, usize)> {
    let mut a = words_analyzer();
    let mut s = a.token_stream(text);
    let mut out = Vec::new();
    while s.advance() {
        let t = s.token();
        out.push((t.text.clone(), t.position));
    }
    out
}

/// Byte offset of the first occurrence of the query terms (as a phrase:
/// each term at its offset from the first) in `text`, by the same analyzer
/// as the index.
pub fn find_terms(text: &str, terms: &[(usize, String)]) -> Option<usize> {
    let mut a = words_analyzer();
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

/// The segmenting tokenizer (before the filters).
#[derive(Clone, Default)]
pub struct JiebaTokenizer {
    tokens: Vec<Token>,
    /// Emit the pair terms of adjacent CJK words.
    pairs: bool,
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
        if self.pairs {
            super::pairs::add(&mut self.tokens);
        }
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
    let mut to = to;
    if to - from > MAX_TOKEN_BYTES {
        to = from + MAX_TOKEN_BYTES;
        while !text.is_char_boundary(to) {
            to -= 1;
        }
    }
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

/// Segment the CJK run `text[start..end]` with the dictionary.
fn segment_cjk(text: &str, start: usize, end: usize, position: &mut usize, out: &mut Vec<Token>) {
    let run = &text[start..end];
    if let Some(w) = Words::get() {
        w.cut(run, |from, to| {
            word(
                text,
                start + from,
                start + to,
                &|g| w.has_word(g),
                position,
                out,
            );
        });
    } else {
        let j = full();
        for t in j.cut(run, false) {
            let (from, to) = (start + t.byte_start, start + t.byte_end);
            word(text, from, to, &|g| j.has_word(g), position, out);
        }
    }
}

/// Push the word `text[from..to]` at the next position, with its 2- and
/// 3-character sub-words that are dictionary words at the same position.
fn word(
    text: &str,
    from: usize,
    to: usize,
    has_word: &dyn Fn(&str) -> bool,
    position: &mut usize,
    out: &mut Vec<Token>,
) {
    // Byte offset of each character of the word, plus its end.
    let mut at: Vec<usize> = text[from..to]
        .char_indices()
        .map(|(i, _)| from + i)
        .collect();
    let n = at.len();
    if n > 2 {
        at.push(to);
        for len in [2, 3] {
            if n <= len {
                continue;
            }
            for i in 0..=n - len {
                if has_word(&text[at[i]..at[i + len]]) {
                    push(out, text, at[i], at[i + len], *position);
                }
            }
        }
    }
    push(out, text, from, to, *position);
    *position += 1;
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
        let mut a = words_analyzer();
        let mut s = a.token_stream(text);
        while s.advance() {
            let t = s.token();
            let orig = &text[t.offset_from..t.offset_to];
            assert_eq!(orig.to_lowercase(), t.text, "{t:?}");
        }
    }

    #[test]
    fn the_word_list_segments_like_jieba() {
        let jieba = Jieba::new();
        let w = Words::get().expect("word list built");
        let mut texts: Vec<String> = vec![
            "请求超时后重试".into(),
            "南京市长江大桥".into(),
            "数据库连接池耗尽，检查日志配置文件缺失".into(),
            "验证中文标点与数据的无损存储".into(),
            "中华人民共和国成立了我们在北京天安门广场".into(),
            "モデル推理延迟タイムアウト超时한국어重试".into(),
            "\u{2A6E5}数据\u{3400}\u{20001}库".into(),
        ];
        let mut seed = 7u64;
        let mut next = |m: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as usize % m
        };
        // Random strings of common characters, and runs of dictionary words
        // (long words, overlapping candidates).
        let chars: Vec<char> = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严龙飞超时库重试请求池耗尽检查日志配置缺失".chars().collect();
        let all: Vec<String> = w.words().filter(|w| w.chars().all(is_cjk)).collect();
        let dict: Vec<&String> = all.iter().filter(|_| next(53) == 0).collect();
        assert!(dict.len() > 1000, "{}", dict.len());
        for _ in 0..2000 {
            let t: String = (0..=next(40)).map(|_| chars[next(chars.len())]).collect();
            texts.push(t);
            let t: String = (0..=next(12))
                .map(|_| dict[next(dict.len())].as_str())
                .collect();
            texts.push(t);
        }
        // Words with a character no word starts with: a route through such
        // a character alone scores it as an unknown character.
        let starts: std::collections::HashSet<char> =
            all.iter().filter_map(|w| w.chars().next()).collect();
        let inner = all
            .iter()
            .filter(|w| w.chars().skip(1).any(|c| !starts.contains(&c)));
        for (i, word) in inner.take(500).enumerate() {
            let (a, b) = (dict[(i * 7) % dict.len()], dict[(i * 13) % dict.len()]);
            let cut = word.char_indices().nth(1).map_or(0, |(i, _)| i);
            texts.push(format!("{a}{word}{b}"));
            texts.push(format!("{}{a}{}", &word[cut..], &word[..cut]));
        }
        for t in &texts {
            let mut ours = Vec::new();
            w.cut(t, |a, b| ours.push(&t[a..b]));
            let theirs: Vec<&str> = jieba.cut(t, false).iter().map(|x| x.word).collect();
            assert_eq!(ours, theirs, "{t}");
            let at: Vec<usize> = t.char_indices().map(|(i, _)| i).chain([t.len()]).collect();
            for len in [1, 2, 3, 4] {
                for i in 0..at.len().saturating_sub(len) {
                    let g = &t[at[i]..at[i + len]];
                    assert_eq!(w.has_word(g), jieba.has_word(g), "{g}");
                }
            }
        }
    }

    #[test]
    fn long_words_are_cut_not_dropped() {
        let long = "x".repeat(300);
        let w = words(&format!("before {long} after"));
        assert_eq!(w, ["before", &"x".repeat(MAX_TOKEN_BYTES), "after"]);
        // A cut inside a multi-byte character backs up to its start.
        let wide = format!("a{}", "é".repeat(150));
        let t = words(&wide);
        assert_eq!(t.len(), 1);
        assert!(t[0].len() <= MAX_TOKEN_BYTES, "{}", t[0].len());
    }

    #[test]
    fn mixed_runs_keep_positions_in_order() {
        let t = tokens("第3次重试");
        let pos: Vec<usize> = t.iter().map(|x| x.1).collect();
        assert!(pos.windows(2).all(|w| w[0] <= w[1]), "{t:?}");
    }
}
