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
use tantivy::tokenizer::{TextAnalyzer, Token, TokenStream, Tokenizer};

use super::fold::Fold;
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
    TextAnalyzer::builder(t).filter(Fold).build()
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

/// The segmenting tokenizer (before the filters). Tokens are made one
/// position at a time into one reused [`Token`]: a tool output of a
/// megabyte has some 200,000 tokens, and building them all first, each with
/// its own string, took a fifth of the index build's time in allocation
/// and copies, and tens of megabytes per indexing thread while it lasted.
#[derive(Clone, Default)]
pub struct JiebaTokenizer {
    /// Emit the pair terms of adjacent CJK words.
    pairs: bool,
    scratch: Scratch,
}

/// Buffers kept between texts. Ranges are byte ranges of the text.
#[derive(Clone, Default)]
struct Scratch {
    /// The words of the CJK run being read.
    run: Vec<(usize, usize)>,
    /// Character offsets of a word, for its sub-words.
    chars: Vec<usize>,
    /// The tokens at the position being emitted, and at the next one.
    here: Vec<(usize, usize)>,
    next: Vec<(usize, usize)>,
    /// What the position being emitted emits, in order.
    out: Vec<Emit>,
    /// The segmenter's buffers.
    cut: super::words::Scratch,
}

/// One token to emit: a word, or the pair term of two words.
#[derive(Clone, Copy)]
enum Emit {
    Word(usize, usize),
    Pair((usize, usize), (usize, usize)),
}

/// The tokens of one text, made as they are asked for.
pub struct JiebaTokenStream<'a> {
    text: &'a str,
    pairs: bool,
    s: &'a mut Scratch,
    /// Where the search for the next word resumes.
    scan: usize,
    /// The next word of `s.run`.
    run_next: usize,
    /// The position of `s.here`, once started.
    position: Option<usize>,
    /// `s.next` holds the tokens of the next position (false at the end).
    has_next: bool,
    /// The next entry of `s.out`.
    emitted: usize,
    token: Token,
}

impl Tokenizer for JiebaTokenizer {
    type TokenStream<'a> = JiebaTokenStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> JiebaTokenStream<'a> {
        self.scratch.run.clear();
        self.scratch.out.clear();
        JiebaTokenStream {
            text,
            pairs: self.pairs,
            s: &mut self.scratch,
            scan: 0,
            run_next: 0,
            position: None,
            has_next: false,
            emitted: 0,
            token: Token::default(),
        }
    }
}

impl TokenStream for JiebaTokenStream<'_> {
    fn advance(&mut self) -> bool {
        while self.emitted == self.s.out.len() {
            if !self.next_position() {
                return false;
            }
        }
        let e = self.s.out[self.emitted];
        self.emitted += 1;
        let t = &mut self.token;
        t.position = self.position.unwrap_or(0);
        t.position_length = 1;
        t.text.clear();
        match e {
            Emit::Word(from, to) => {
                (t.offset_from, t.offset_to) = (from, to);
                t.text.push_str(&self.text[from..to]);
            }
            Emit::Pair(a, b) => {
                (t.offset_from, t.offset_to) = (a.0, b.1);
                super::pairs::push_pair(&mut t.text, &self.text[a.0..a.1], &self.text[b.0..b.1]);
            }
        }
        true
    }

    fn token(&self) -> &Token {
        &self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
    }
}

impl JiebaTokenStream<'_> {
    /// Move on to the next position and list what it emits: its words
    /// (sub-words first), then, with pairs on, the pair terms of each of
    /// its CJK words with each CJK word of the position after it. False at
    /// the end of the text.
    fn next_position(&mut self) -> bool {
        match self.position {
            None => {
                let mut here = std::mem::take(&mut self.s.here);
                let found = self.fill(&mut here);
                self.s.here = here;
                if !found {
                    return false;
                }
                self.position = Some(0);
            }
            Some(p) => {
                if !self.has_next {
                    self.s.out.clear();
                    self.emitted = 0;
                    return false;
                }
                std::mem::swap(&mut self.s.here, &mut self.s.next);
                self.position = Some(p + 1);
            }
        }
        let mut next = std::mem::take(&mut self.s.next);
        self.has_next = self.fill(&mut next);
        self.s.next = next;
        let s = &mut *self.s;
        s.out.clear();
        self.emitted = 0;
        s.out.extend(s.here.iter().map(|&(a, b)| Emit::Word(a, b)));
        if self.pairs {
            let cjk = |&&(a, b): &&(usize, usize)| super::pairs::is_cjk_word(&self.text[a..b]);
            for a in s.here.iter().filter(cjk) {
                for b in s.next.iter().filter(cjk) {
                    s.out.push(Emit::Pair(*a, *b));
                }
            }
        }
        true
    }

    /// The tokens of the next word into `into`: the word, after its 2- and
    /// 3-character sub-words that are dictionary words. False when the text
    /// has no more words.
    fn fill(&mut self, into: &mut Vec<(usize, usize)>) -> bool {
        into.clear();
        let text = self.text;
        while self.run_next == self.s.run.len() {
            self.s.run.clear();
            self.run_next = 0;
            let Some((start, cjk)) = next_word(text, self.scan) else {
                self.scan = text.len();
                return false;
            };
            let end = word_end(text, start, cjk);
            self.scan = end;
            if !cjk {
                into.push((start, cut(text, start, end)));
                return true;
            }
            segment_cjk(text, start, end, &mut self.s.run, &mut self.s.cut);
        }
        let (from, to) = self.s.run[self.run_next];
        self.run_next += 1;
        let at = &mut self.s.chars;
        at.clear();
        at.extend(text[from..to].char_indices().map(|(i, _)| from + i));
        let n = at.len();
        if n > 2 {
            at.push(to);
            let words = Words::get();
            let has_word = |g: &str| match words {
                Some(w) => w.has_word(g),
                None => full().has_word(g),
            };
            for len in [2, 3] {
                if n <= len {
                    continue;
                }
                for i in 0..=n - len {
                    if has_word(&text[at[i]..at[i + len]]) {
                        into.push((at[i], cut(text, at[i], at[i + len])));
                    }
                }
            }
        }
        into.push((from, cut(text, from, to)));
        true
    }
}

/// Where the next word of `text` at or after byte `from` starts, and
/// whether it is a run of CJK characters. ASCII is tested byte by byte:
/// most of what agents write and tools print is ASCII, and decoding every
/// character to test it was most of the time spent between words.
fn next_word(text: &str, from: usize) -> Option<(usize, bool)> {
    let bytes = text.as_bytes();
    let mut i = from;
    while let Some(&b) = bytes.get(i) {
        if b.is_ascii() {
            if b.is_ascii_alphanumeric() {
                return Some((i, false));
            }
            i += 1;
            continue;
        }
        let c = char_at(text, i);
        if is_cjk(c) {
            return Some((i, true));
        }
        if c.is_alphanumeric() {
            return Some((i, false));
        }
        i += c.len_utf8();
    }
    None
}

/// The end of the word starting at `start`: the run of CJK characters, or
/// of letters and digits that are not CJK.
fn word_end(text: &str, start: usize, cjk: bool) -> usize {
    let bytes = text.as_bytes();
    let mut i = start;
    while let Some(&b) = bytes.get(i) {
        if b.is_ascii() {
            if cjk || !b.is_ascii_alphanumeric() {
                return i;
            }
            i += 1;
            continue;
        }
        let c = char_at(text, i);
        if is_cjk(c) != cjk || !(cjk || c.is_alphanumeric()) {
            return i;
        }
        i += c.len_utf8();
    }
    text.len()
}

/// The character starting at byte `i` of `text`.
fn char_at(text: &str, i: usize) -> char {
    text[i..].chars().next().unwrap_or_default()
}

/// The end of the token `text[from..to]`, cut to [`MAX_TOKEN_BYTES`] at a
/// character boundary.
fn cut(text: &str, from: usize, to: usize) -> usize {
    if to - from <= MAX_TOKEN_BYTES {
        return to;
    }
    let mut to = from + MAX_TOKEN_BYTES;
    while !text.is_char_boundary(to) {
        to -= 1;
    }
    to
}

/// The words of the CJK run `text[start..end]`, segmented with the
/// dictionary, into `out` (as byte ranges of `text`).
fn segment_cjk(
    text: &str,
    start: usize,
    end: usize,
    out: &mut Vec<(usize, usize)>,
    scratch: &mut super::words::Scratch,
) {
    let run = &text[start..end];
    if let Some(w) = Words::get() {
        w.cut(run, scratch, |from, to| {
            out.push((start + from, start + to));
        });
    } else {
        out.extend(
            full()
                .cut(run, false)
                .iter()
                .map(|t| (start + t.byte_start, start + t.byte_end)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repeatable sequence of numbers below `m`, from `seed`.
    fn numbers(mut seed: u64) -> impl FnMut(usize) -> usize {
        move |m| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as usize % m
        }
    }

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
        let mut next = numbers(7);
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
        let mut scratch = crate::fts::words::Scratch::default();
        for t in &texts {
            let mut ours = Vec::new();
            w.cut(t, &mut scratch, |a, b| ours.push(&t[a..b]));
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

    /// The tokens of `text` as the tokenizer made them when it built every
    /// token first: words by position, sub-words before their word, and
    /// after each position's words the pairs with the next position's.
    fn built_first(text: &str, pairs: bool) -> Vec<(String, usize, usize, usize)> {
        let w = Words::get().expect("word list built");
        let mut words: Vec<(usize, usize, usize)> = Vec::new();
        let mut position = 0;
        let mut chars = text.char_indices().peekable();
        while let Some(&(start, c)) = chars.peek() {
            let cjk = is_cjk(c);
            if !cjk && !c.is_alphanumeric() {
                chars.next();
                continue;
            }
            let mut end = start;
            while let Some(&(i, c)) = chars.peek() {
                if is_cjk(c) != cjk || (!cjk && !c.is_alphanumeric()) {
                    break;
                }
                end = i + c.len_utf8();
                chars.next();
            }
            let mut cuts = Vec::new();
            if cjk {
                let mut scratch = crate::fts::words::Scratch::default();
                w.cut(&text[start..end], &mut scratch, |a, b| {
                    cuts.push((start + a, start + b));
                });
            } else {
                cuts.push((start, end));
            }
            for (from, to) in cuts {
                let at: Vec<usize> = text[from..to]
                    .char_indices()
                    .map(|(i, _)| from + i)
                    .chain([to])
                    .collect();
                let n = at.len() - 1;
                for len in [2, 3] {
                    let starts = if n > 2 && n > len { n - len + 1 } else { 0 };
                    for i in 0..starts {
                        if w.has_word(&text[at[i]..at[i + len]]) {
                            words.push((at[i], at[i + len], position));
                        }
                    }
                }
                words.push((from, cut(text, from, to), position));
                position += 1;
            }
        }
        let mut out = Vec::new();
        let is_word = |t: &&&(usize, usize, usize)| text[t.0..].chars().next().is_some_and(is_cjk);
        for p in 0..position {
            let here: Vec<_> = words.iter().filter(|t| t.2 == p).collect();
            let next: Vec<_> = words.iter().filter(|t| t.2 == p + 1).collect();
            out.extend(
                here.iter()
                    .map(|&&(a, b, p)| (text[a..b].to_string(), p, a, b)),
            );
            if pairs {
                for a in here.iter().filter(is_word) {
                    for b in next.iter().filter(is_word) {
                        let t = format!("{}\u{1}{}", &text[a.0..a.1], &text[b.0..b.1]);
                        out.push((t, p, a.0, b.1));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn tokens_are_made_as_when_all_were_built_first() {
        let mut next = numbers(11);
        let pieces = [
            "数据库",
            "连接",
            "超时",
            "请求",
            "重试",
            "中华人民共和国",
            "南京市长江大桥",
            "timeout",
            "Café",
            "worker-3",
            "的",
            "，",
            "。",
            " ",
            "\n",
            "\t",
            "x_y",
            "モデル",
            "한국어",
            "\u{1b}[31m",
            "é",
            "42",
            "..",
            "\u{20001}",
            "🙂",
        ];
        let mut texts: Vec<String> = vec![
            String::new(),
            " ,;".into(),
            "数据库连接 timeout 超时".into(),
            "x".repeat(300),
            format!("a{}b 数据", "é".repeat(150)),
        ];
        for _ in 0..3000 {
            texts.push((0..next(30)).map(|_| pieces[next(pieces.len())]).collect());
        }
        for pairs in [false, true] {
            let mut t = JiebaTokenizer {
                pairs,
                ..JiebaTokenizer::default()
            };
            for text in &texts {
                let mut stream = t.token_stream(text);
                let mut got = Vec::new();
                while stream.advance() {
                    let k = stream.token();
                    assert_eq!(k.position_length, 1);
                    got.push((k.text.clone(), k.position, k.offset_from, k.offset_to));
                }
                assert_eq!(got, built_first(text, pairs), "{text:?}");
            }
        }
    }

    #[test]
    fn the_analyzer_folds_as_tantivys_filters() {
        use tantivy::tokenizer::{AsciiFoldingFilter, LowerCaser};
        let mut next = numbers(13);
        let pieces: Vec<&str> = super::super::fold::SAMPLES
            .iter()
            .copied()
            .chain(["连接", "超时", " ", "，", "\u{1b}[31m", "42"])
            .collect();
        let ours = analyzer();
        let mut theirs = TextAnalyzer::builder(JiebaTokenizer {
            pairs: true,
            ..JiebaTokenizer::default()
        })
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .build();
        let collect = |a: &mut TextAnalyzer, text: &str| {
            let mut s = a.token_stream(text);
            let mut out = Vec::new();
            while s.advance() {
                let t = s.token();
                out.push((t.text.clone(), t.position, t.offset_from, t.offset_to));
            }
            out
        };
        for _ in 0..2000 {
            let text: String = (0..next(20)).map(|_| pieces[next(pieces.len())]).collect();
            assert_eq!(
                collect(&mut ours.clone(), &text),
                collect(&mut theirs, &text),
                "{text:?}"
            );
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
