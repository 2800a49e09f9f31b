//! The `jieba` text analyzer shared by the index and by queries.
//!
//! Text is split into runs. A run of CJK characters is segmented with Jieba
//! (dictionary only, no HMM, so a word segments the same way wherever it
//! occurs). Every word takes one position; a word longer than two characters
//! also emits its 2- and 3-character dictionary sub-words at the same
//! position, so `数据` finds `数据库`. Other text splits on anything that is not
//! a letter or digit. A word longer than [`MAX_TOKEN_BYTES`] is cut to its
//! first bytes (at a character boundary) and kept as one token, in the index
//! and in queries alike, so long identifiers and hashes stay searchable.
//! Tokens are lowercased and folded to ASCII where an equivalent exists
//! (`Café` → `cafe`). Offsets are byte offsets into the original text.

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use jieba_rs::Jieba;
use tantivy::tokenizer::{
    AsciiFoldingFilter, LowerCaser, TextAnalyzer, Token, TokenStream, Tokenizer,
};

/// Jieba's word list as a finite-state map (word → frequency), compiled by
/// the build script.
static WORDS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/jieba_words.fst"));
mod words {
    include!(concat!(env!("OUT_DIR"), "/jieba_words.rs"));
}

/// Name the analyzer is registered under in every index.
pub const TOKENIZER_NAME: &str = "jieba";

/// Words longer than this many bytes are cut to their first bytes.
pub const MAX_TOKEN_BYTES: usize = 200;

static JIEBA: OnceLock<Jieba> = OnceLock::new();

/// The full dictionary (loaded on first use; it takes a moment).
fn full() -> &'static Jieba {
    JIEBA.get_or_init(Jieba::new)
}

/// True once the full dictionary has been loaded in this process.
pub fn dictionary_loaded() -> bool {
    JIEBA.get().is_some()
}

/// Load the full dictionary now instead of on first use.
pub fn warm_up() {
    full();
}

/// A Jieba that knows only the dictionary words occurring in the CJK runs
/// of `text`, with the full dictionary's total frequency. Segmentation
/// without HMM only ever consults words that are substrings of the input and
/// that total, so this segments `text` exactly as the full dictionary does,
/// without loading it. `None` when the build has no word list.
pub fn dictionary_for(text: &str) -> Option<Jieba> {
    if words::TOTAL == 0 {
        return None;
    }
    let fst = tantivy_fst::raw::Fst::new(WORDS).ok()?;
    let mut j = Jieba::empty();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut sum = 0u64;
    let b = text.as_bytes();
    for (start, c) in text.char_indices() {
        if !is_cjk(c) {
            continue;
        }
        let mut node = fst.root();
        let mut out = 0u64;
        let mut i = start;
        while i < b.len() {
            let Some(t) = node.find_input(b[i]) else {
                break;
            };
            let tr = node.transition(t);
            out += tr.out.value();
            node = fst.node(tr.addr);
            i += 1;
            if node.is_final() && text.is_char_boundary(i) {
                let w = &text[start..i];
                if seen.insert(w) {
                    let f = out + node.final_output().value();
                    sum += f;
                    j.add_word(w, Some(f as usize), None);
                }
            }
        }
    }
    // A word that never occurs in text (a private-use character) carries the
    // rest of the total.
    j.add_word(
        "\u{E000}",
        Some(words::TOTAL.saturating_sub(sum) as usize),
        None,
    );
    Some(j)
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
/// the index analyzes it (pair terms left out). Short texts (queries) are segmented with only the
/// dictionary words they contain, so a query does not load the dictionary.
pub fn tokens(text: &str) -> Vec<(String, usize)> {
    let dict = if JIEBA.get().is_some() {
        None
    } else if text.chars().any(is_cjk) {
        dictionary_for(text).map(Arc::new)
    } else {
        // No CJK run: segmentation never consults the dictionary.
        Some(Arc::new(Jieba::empty()))
    };
    let mut a = with_tokenizer(JiebaTokenizer {
        dict,
        ..JiebaTokenizer::default()
    });
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
    /// A reduced dictionary for one text; `None` uses the full one.
    dict: Option<Arc<Jieba>>,
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
        let dict = self.dict.as_deref().unwrap_or_else(|| full());
        segment(text, dict, &mut self.tokens);
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
fn segment(text: &str, dict: &Jieba, out: &mut Vec<Token>) {
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
            segment_cjk(text, start, end, dict, &mut position, out);
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

fn segment_cjk(
    text: &str,
    start: usize,
    end: usize,
    dict: &Jieba,
    position: &mut usize,
    out: &mut Vec<Token>,
) {
    let run = &text[start..end];
    for w in dict.cut(run, false) {
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
                    if dict.has_word(gram) {
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
        let mut a = words_analyzer();
        let mut s = a.token_stream(text);
        while s.advance() {
            let t = s.token();
            let orig = &text[t.offset_from..t.offset_to];
            assert_eq!(orig.to_lowercase(), t.text, "{t:?}");
        }
    }

    fn full_tokens(text: &str) -> Vec<(String, usize)> {
        let mut a = words_analyzer();
        let mut s = a.token_stream(text);
        let mut out = Vec::new();
        while s.advance() {
            out.push((s.token().text.clone(), s.token().position));
        }
        out
    }

    #[test]
    fn reduced_dictionary_segments_like_the_full_one() {
        let reduced = |text: &str| {
            let mut a = with_tokenizer(JiebaTokenizer {
                dict: Some(Arc::new(dictionary_for(text).expect("word list built"))),
                ..JiebaTokenizer::default()
            });
            let mut s = a.token_stream(text);
            let mut out = Vec::new();
            while s.advance() {
                out.push((s.token().text.clone(), s.token().position));
            }
            out
        };
        let mut texts: Vec<String> = vec![
            "请求超时后重试".into(),
            "南京市长江大桥".into(),
            "数据库连接池耗尽，检查日志配置文件缺失".into(),
            "第 1 轮：验证中文、标点与 Unicode 数据的无损存储。".into(),
            "中华人民共和国成立了，我们在北京天安门广场".into(),
            "模型推理延迟 timeout 超时 retry 重试 cache 缓存命中".into(),
        ];
        // Pseudo-random strings of common characters.
        let chars: Vec<char> = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严龙飞超时库重试请求池耗尽检查日志配置缺失".chars().collect();
        let mut seed = 7u64;
        for _ in 0..200 {
            let mut t = String::new();
            for _ in 0..=(seed % 40) {
                seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                t.push(chars[(seed >> 33) as usize % chars.len()]);
            }
            texts.push(t);
        }
        for t in &texts {
            assert_eq!(reduced(t), full_tokens(t), "{t}");
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
