//! Lowercasing and ASCII folding of the analyzer's tokens.
//!
//! The tokens come out exactly as tantivy's `LowerCaser` followed by its
//! `AsciiFoldingFilter` make them; only the work differs. Those filters send
//! every token that is not ASCII through a character-by-character rewrite,
//! and in mixed Chinese and English text most such tokens are CJK words and
//! pair terms, which neither filter changes: the rewrite was a fifth of the
//! analyzer's time. Here an ASCII token is lowercased in place, a token of
//! CJK characters (and ASCII that is not upper case, as the joiner of a pair
//! term) is left alone, and only the rest (`Café`, `ΣΟΦΊΑ`, `Ｆｕｌｌ`) goes
//! through tantivy's own two filters.

use tantivy::tokenizer::{
    AsciiFoldingFilter, LowerCaser, RawTokenizer, TextAnalyzer, Token, TokenFilter, TokenStream,
    Tokenizer,
};

use super::tokenize::is_cjk;

/// The filter: lowercase, then fold to ASCII where an equivalent exists.
#[derive(Clone, Copy)]
pub(crate) struct Fold;

impl TokenFilter for Fold {
    type Tokenizer<T: Tokenizer> = FoldTokenizer<T>;

    fn transform<T: Tokenizer>(self, tokenizer: T) -> FoldTokenizer<T> {
        FoldTokenizer {
            inner: tokenizer,
            slow: None,
        }
    }
}

/// A tokenizer followed by [`Fold`].
#[derive(Clone)]
pub(crate) struct FoldTokenizer<T> {
    inner: T,
    /// tantivy's filters over one whole token, for the tokens they change;
    /// made when the first one comes.
    slow: Option<TextAnalyzer>,
}

impl<T: Tokenizer> Tokenizer for FoldTokenizer<T> {
    type TokenStream<'a> = FoldStream<'a, T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        FoldStream {
            tail: self.inner.token_stream(text),
            slow: &mut self.slow,
        }
    }
}

/// The tokens of one text, folded.
pub(crate) struct FoldStream<'a, S> {
    tail: S,
    slow: &'a mut Option<TextAnalyzer>,
}

impl<S: TokenStream> TokenStream for FoldStream<'_, S> {
    fn advance(&mut self) -> bool {
        if !self.tail.advance() {
            return false;
        }
        let text = &mut self.tail.token_mut().text;
        if text.is_ascii() {
            text.make_ascii_lowercase();
        } else if !text.chars().all(unchanged) {
            let slow = self.slow.get_or_insert_with(tantivy_filters);
            let mut s = slow.token_stream(text);
            let folded = s.advance().then(|| std::mem::take(&mut s.token_mut().text));
            drop(s);
            if let Some(folded) = folded {
                *text = folded;
            }
        }
        true
    }

    fn token(&self) -> &Token {
        self.tail.token()
    }

    fn token_mut(&mut self) -> &mut Token {
        self.tail.token_mut()
    }
}

/// A character neither lowercasing nor ASCII folding changes, checked
/// without either: CJK characters have no case and no ASCII equivalent
/// (every one is checked in the tests), and folding leaves ASCII alone.
fn unchanged(c: char) -> bool {
    (c.is_ascii() && !c.is_ascii_uppercase()) || is_cjk(c)
}

/// `LowerCaser` then `AsciiFoldingFilter` over a whole text as one token.
fn tantivy_filters() -> TextAnalyzer {
    TextAnalyzer::builder(RawTokenizer::default())
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .build()
}

/// Tokens of every kind the filter treats apart: ASCII, CJK words and
/// pair terms, and the letters tantivy's filters change (accents, `ß`,
/// dotted `İ`, Greek, full-width forms, a titlecase digraph, Cyrillic,
/// ligatures), for the tests here and the analyzer's.
#[cfg(test)]
pub(crate) const SAMPLES: &[&str] = &[
    "timeout",
    "TimeOut",
    "数据库",
    "数据\u{1}库",
    "Café",
    "ÉCOLE",
    "straße",
    "İstanbul",
    "ΣΟΦΊΑ",
    "Ｆｕｌｌ",
    "ǅemal",
    "Москва",
    "モデル",
    "한국어",
    "x\u{1}Y",
    "ﬁle",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn fold(text: &str) -> String {
        let mut a = TextAnalyzer::builder(RawTokenizer::default())
            .filter(Fold)
            .build();
        let mut s = a.token_stream(text);
        assert!(s.advance());
        s.token().text.clone()
    }

    fn tantivy(text: &str) -> String {
        let mut a = tantivy_filters();
        let mut s = a.token_stream(text);
        assert!(s.advance());
        s.token().text.clone()
    }

    #[test]
    fn cjk_characters_are_left_alone_by_tantivys_filters() {
        let mut a = tantivy_filters();
        let mut buf = [0u8; 4];
        let cjk = (0..=u32::from(char::MAX))
            .filter_map(char::from_u32)
            .filter(|&c| is_cjk(c));
        let mut n = 0;
        for c in cjk {
            let text: &str = c.encode_utf8(&mut buf);
            let mut s = a.token_stream(text);
            assert!(s.advance());
            assert_eq!(s.token().text, text, "U+{:04X}", u32::from(c));
            n += 1;
        }
        assert!(n > 90_000, "{n}");
    }

    #[test]
    fn tokens_fold_as_tantivys_filters_fold_them() {
        for &text in SAMPLES {
            assert_eq!(fold(text), tantivy(text), "{text}");
        }
    }
}
