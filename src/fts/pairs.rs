//! Word pairs of Chinese, Japanese and Korean text.
//!
//! A CJK query is a phrase whenever it spans two dictionary words, which is
//! nearly always (`请求超时` is `请求` then `超时`), and the words of such
//! phrases are among the most frequent in the index: matching by positions
//! reads the positions of every step that holds both words. So the index
//! analyzer also emits, at each position `p` whose words and those at
//! `p + 1` are CJK, one pair term per combination of a token at `p` with a
//! token at `p + 1` (sub-words included). A pair term is at position `p` of
//! a step exactly when its first word is at `p` and its second at `p + 1`,
//! so a phrase of CJK words is the same phrase of pair terms, with far
//! shorter posting lists. Latin words are separate terms unless quoted, so
//! their pairs would cost index space for the rare quoted phrase and are not
//! emitted.

use super::tokenize::is_cjk;

/// Joins the two words of a pair term. No word holds it: words are runs of
/// letters, digits or CJK characters.
const JOINER: char = '\u{1}';

/// A word of CJK characters (words are runs of one kind, so the first
/// character tells).
pub(crate) fn is_cjk_word(t: &str) -> bool {
    t.chars().next().is_some_and(is_cjk)
}

fn pair(a: &str, b: &str) -> String {
    let mut s = String::with_capacity(a.len() + b.len() + 1);
    push_pair(&mut s, a, b);
    s
}

/// Append the pair term of the words `a` and `b` to `s`.
pub(crate) fn push_pair(s: &mut String, a: &str, b: &str) {
    s.push_str(a);
    s.push(JOINER);
    s.push_str(b);
}

/// The terms to look up for a phrase of query terms (each at its offset from
/// the first): each two adjacent CJK words become their pair term, which
/// covers both; other words stay. A phrase of two CJK words becomes a single
/// term.
pub(crate) fn phrase_terms(terms: &[(usize, String)]) -> Vec<(usize, String)> {
    let adjacent = terms.windows(2).all(|w| w[1].0 == w[0].0 + 1);
    if !adjacent {
        return terms.to_vec();
    }
    let mut out: Vec<(usize, String)> = Vec::with_capacity(terms.len());
    // terms[..covered] are in `out`, alone or in a pair.
    let mut covered = 0;
    for (i, (o, t)) in terms.iter().enumerate() {
        match terms.get(i + 1) {
            Some((_, u)) if is_cjk_word(t) && is_cjk_word(u) => {
                out.push((*o, pair(t, u)));
                covered = i + 2;
            }
            _ if covered <= i => {
                out.push((*o, t.clone()));
                covered = i + 1;
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_cover_every_combination_of_adjacent_cjk_tokens() {
        use tantivy::tokenizer::TokenStream;
        let mut a = crate::fts::tokenize::analyzer();
        let mut stream = a.token_stream("数据库连接 timeout 超时");
        let mut t: Vec<(String, usize)> = Vec::new();
        while stream.advance() {
            let k = stream.token();
            t.push((k.text.replace(JOINER, "+"), k.position));
        }
        let s = |x: &str, p: usize| (x.to_string(), p);
        assert_eq!(
            t,
            [
                s("数据", 0),
                s("据库", 0),
                s("数据库", 0),
                s("数据+连接", 0),
                s("据库+连接", 0),
                s("数据库+连接", 0),
                s("连接", 1),
                s("timeout", 2),
                s("超时", 3),
            ]
        );
    }

    #[test]
    fn phrases_of_cjk_words_become_pairs() {
        let q = |ws: &[&str]| -> Vec<(usize, String)> {
            ws.iter()
                .enumerate()
                .map(|(i, w)| (i, w.to_string()))
                .collect()
        };
        let shown = |v: Vec<(usize, String)>| -> Vec<(usize, String)> {
            v.into_iter()
                .map(|(o, t)| (o, t.replace(JOINER, "+")))
                .collect()
        };
        assert_eq!(
            shown(phrase_terms(&q(&["请求", "超时"]))),
            [(0, "请求+超时".into())]
        );
        assert_eq!(
            shown(phrase_terms(&q(&["数据库", "连接", "超时"]))),
            [(0, "数据库+连接".into()), (1, "连接+超时".into())]
        );
        assert_eq!(
            shown(phrase_terms(&q(&["请求", "超时", "in", "数据库", "连接"]))),
            [
                (0, "请求+超时".into()),
                (2, "in".into()),
                (3, "数据库+连接".into())
            ]
        );
        assert_eq!(
            shown(phrase_terms(&q(&["most", "recent", "call"]))),
            [(0, "most".into()), (1, "recent".into()), (2, "call".into())]
        );
    }
}
