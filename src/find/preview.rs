//! Previews: the bounded one-line excerpt a hit shows. A step hit shows the
//! text around the first positive text leaf found in it; a run hit shows
//! the first positive JSON condition that holds, else its first user
//! message.

use serde_json::Value;

use super::compile::{
    positive_json_leaves, positive_text_leaves, selector_columns, Node, TextLeaf,
};
use super::FindExpr;
use crate::fts::StoredStep;
use crate::util::jsonpath;

/// Longest preview, in characters.
pub const PREVIEW_CHARS: usize = 200;

/// The preview of a step hit: around the first positive text leaf found in
/// the step, else the start of the first non-empty text column (message,
/// observation, prompt, reasoning).
pub fn step_preview(step: &StoredStep<'_>, leaves: &[TextLeaf], expr: Option<&FindExpr>) -> String {
    let role = step.step_source();
    let positive = expr.map(positive_text_leaves).unwrap_or_default();
    for li in positive {
        let Some(leaf) = leaves.get(li) else { continue };
        let (cols, want_role) = selector_columns(leaf.field);
        if want_role.is_some() && want_role != role {
            continue;
        }
        for &c in cols {
            if let Some(text) = step.text(c) {
                if let Some(at) = locate(text, &leaf.terms) {
                    return excerpt(text, at);
                }
            }
        }
    }
    [0usize, 2, 3, 1]
        .iter()
        .find_map(|&c| step.text(c).filter(|t| !t.trim().is_empty()))
        .map(|t| excerpt(t, 0))
        .unwrap_or_default()
}

/// The preview of a run hit: `column path: value` of the first JSON leaf
/// (not under NOT) that holds, else the excerpt of `prompt`. `parsed` holds
/// the run's cells of `columns`.
pub fn run_preview(
    node: Option<&Node>,
    columns: &[&str],
    parsed: &[Option<Value>],
    prompt: Option<&str>,
) -> String {
    let shown = node.and_then(|n| {
        let mut leaves = Vec::new();
        positive_json_leaves(n, false, &mut leaves);
        leaves.into_iter().find_map(|(cols, p)| {
            cols.iter().find_map(|&c| {
                let v = parsed[c].as_ref()?;
                p.eval(v).then(|| {
                    let at = jsonpath::lookup(v, &p.path)
                        .map(Value::to_string)
                        .unwrap_or_default();
                    format!("{} {}: {}", columns[c], jsonpath::to_text(&p.path), at)
                })
            })
        })
    });
    shown
        .or_else(|| prompt.map(str::to_string))
        .map(|p| excerpt(&p, 0))
        .unwrap_or_default()
}

/// Byte offset of the first place `text` contains the first query term,
/// compared in lowercase: where a preview starts. (A preview only needs a
/// good place to cut; it does not re-run the analyzer.)
pub fn locate(text: &str, terms: &[(usize, String)]) -> Option<usize> {
    let first = &terms.first()?.1;
    if text.is_ascii() {
        // ASCII lower-casing keeps every byte where it was.
        return text.to_ascii_lowercase().find(first.as_str());
    }
    let mut lower = String::with_capacity(text.len());
    let mut map = Vec::with_capacity(text.len());
    for (i, c) in text.char_indices() {
        for l in c.to_lowercase() {
            let before = lower.len();
            lower.push(l);
            map.extend(std::iter::repeat_n(i, lower.len() - before));
        }
    }
    lower.find(first.as_str()).map(|p| map[p])
}

/// A bounded one-line excerpt of `text` around byte offset `at`.
pub fn excerpt(text: &str, at: usize) -> String {
    let at = (0..=at.min(text.len()))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    let before: Vec<char> = text[..at]
        .chars()
        .rev()
        .take(PREVIEW_CHARS / 4 + 1)
        .collect();
    let lead = before.len() > PREVIEW_CHARS / 4;
    let mut out = String::new();
    if lead {
        out.push('…');
    }
    out.extend(before.iter().take(PREVIEW_CHARS / 4).rev());
    let budget = PREVIEW_CHARS - PREVIEW_CHARS / 4;
    let mut after = text[at..].chars();
    out.extend(after.by_ref().take(budget));
    if after.next().is_some() {
        out.push('…');
    }
    let mut clean = String::with_capacity(out.len());
    let mut space = false;
    for c in out.chars() {
        if c.is_whitespace() || c.is_control() {
            if !space {
                clean.push(' ');
            }
            space = true;
        } else {
            clean.push(c);
            space = false;
        }
    }
    clean.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_bounded_and_centered() {
        let text = format!("{} needle {}", "a ".repeat(200), "b ".repeat(200));
        let at = text.find("needle").unwrap();
        let e = excerpt(&text, at);
        assert!(
            e.contains("needle") && e.starts_with('…') && e.ends_with('…'),
            "{e}"
        );
        assert!(e.chars().count() <= PREVIEW_CHARS + 2);
        assert_eq!(excerpt("line1\n\nline2", 0), "line1 line2");
    }

    #[test]
    fn located_in_lower_case() {
        let t = |s: &str| vec![(0, s.to_string())];
        assert_eq!(locate("a Traceback (most", &t("traceback")), Some(2));
        assert_eq!(locate("ÄÖ Traceback", &t("traceback")), Some(5));
        assert_eq!(locate("İİ 超时", &t("超时")), Some(5));
        assert_eq!(locate("no match", &t("超时")), None);
    }
}
