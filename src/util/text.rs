//! Text helpers for output: control-character escaping and bounded previews.

/// Replace control characters (C0, DEL, C1) with visible escapes so that
/// trajectory text can never drive the terminal. Newlines and tabs become
/// `\n` and `\t` so a table cell stays on one line.
pub fn escape_control(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for ch in s.chars() {
        match ch {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if is_control(c) => {
                use std::fmt::Write as _;
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Like [`escape_control`] but keeps newlines (for multi-line messages).
pub fn escape_control_keep_newlines(s: &str) -> String {
    s.split('\n')
        .map(|line| escape_control(line).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// C0 and C1 controls, DEL, the line and paragraph separators, and the
/// bidirectional embedding, override and isolate controls (which can make a
/// terminal show text in another order than it is stored).
fn is_control(c: char) -> bool {
    let u = c as u32;
    u < 0x20
        || (0x7f..=0x9f).contains(&u)
        || c == '\u{2028}'
        || c == '\u{2029}'
        || (0x202a..=0x202e).contains(&u)
        || (0x2066..=0x2069).contains(&u)
}

/// Cut `s` to at most `max_chars` characters, appending `…` when cut.
pub fn truncate_chars(s: &str, max_chars: usize) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(max_chars) {
        None => std::borrow::Cow::Borrowed(s),
        Some((idx, _)) => std::borrow::Cow::Owned(format!("{}…", &s[..idx])),
    }
}

/// Display width of a string in a monospace terminal: East Asian wide and
/// full-width characters count two columns.
pub fn display_width(s: &str) -> usize {
    s.chars().map(char_width).sum()
}

fn char_width(c: char) -> usize {
    let u = c as u32;
    let wide = matches!(u,
        0x1100..=0x115F | 0x2E80..=0x303E | 0x3041..=0x33FF | 0x3400..=0x4DBF
        | 0x4E00..=0x9FFF | 0xA000..=0xA4CF | 0xAC00..=0xD7A3 | 0xF900..=0xFAFF
        | 0xFE30..=0xFE4F | 0xFF00..=0xFF60 | 0xFFE0..=0xFFE6 | 0x1F300..=0x1F64F
        | 0x1F900..=0x1F9FF | 0x20000..=0x3FFFD);
    if wide {
        2
    } else {
        1
    }
}

/// Decode `%XX` escapes; `None` for a malformed escape or bytes that are
/// not UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let v = u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
            out.push(v);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A stable error code read back from stored data, as the `&'static str`
/// error types carry. Each distinct code is kept once for the life of the
/// process (codes are a small, fixed set).
pub fn leak_code(code: &str) -> &'static str {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static CODES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut set = CODES
        .get_or_init(|| Mutex::new(HashSet::new()))
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(c) = set.get(code) {
        return c;
    }
    let c: &'static str = Box::leak(code.to_string().into_boxed_str());
    set.insert(c);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_terminal_sequences() {
        assert_eq!(escape_control("a\x1b[31mb"), "a\\u{1b}[31mb");
        assert_eq!(escape_control("x\ny"), "x\\ny");
        assert_eq!(escape_control("plain"), "plain");
        assert_eq!(
            escape_control("a\u{202e}b\u{2067}c"),
            "a\\u{202e}b\\u{2067}c"
        );
        // Right-to-left text itself and its marks are kept.
        assert_eq!(escape_control("שלום\u{200f}"), "שלום\u{200f}");
    }

    #[test]
    fn truncates_on_char_boundary() {
        assert_eq!(truncate_chars("超时重试", 2), "超时…");
        assert_eq!(truncate_chars("abc", 3), "abc");
    }

    #[test]
    fn width_counts_cjk_double() {
        assert_eq!(display_width("ab超时"), 6);
    }
}
