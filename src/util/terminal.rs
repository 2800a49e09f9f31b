//! What a terminal would show: tool output captured from a pseudo-terminal
//! carries colour codes, cursor movements, progress bars redrawn with a
//! carriage return, and backspace overstrikes. Searching and previewing that
//! text must see the characters a person saw, not the control bytes between
//! them (`\x1b[31mError` would otherwise be the word `31merror`).

use std::borrow::Cow;

/// The text as a terminal shows it: escape sequences (CSI, OSC, DCS and the
/// other string controls, two-byte escapes; in their 7-bit and 8-bit forms)
/// removed, carriage returns and backspaces applied as cursor moves that
/// overwrite the line, CRLF read as a newline, other C0/C1 controls and DEL
/// dropped. Tabs and newlines stay. Runs in one pass; text without any of
/// these is returned as is.
pub fn clean(text: &str) -> Cow<'_, str> {
    if !has_dropped_control(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut line: Vec<char> = Vec::new();
    let mut cursor = 0usize;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => {
                out.extend(line.drain(..));
                out.push('\n');
                cursor = 0;
            }
            '\r' => cursor = 0,
            '\u{8}' => cursor = cursor.saturating_sub(1),
            '\u{1b}' => match chars.next() {
                Some('[') => skip_csi(&mut chars),
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut chars),
                // Intermediate bytes, then one final byte (charset
                // selection `ESC ( B`, keypad modes, `ESC 7`, …).
                Some(i) if ('\u{20}'..='\u{2f}').contains(&i) => {
                    while chars
                        .next_if(|c| ('\u{20}'..='\u{2f}').contains(c))
                        .is_some()
                    {}
                    chars.next_if(|c| *c != '\n');
                }
                // A newline never belongs to an escape: keep the line break.
                Some('\n') => {
                    out.extend(line.drain(..));
                    out.push('\n');
                    cursor = 0;
                }
                Some(_) | None => {}
            },
            '\u{9b}' => skip_csi(&mut chars),
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            '\t' => put(&mut line, &mut cursor, '\t'),
            c if is_dropped_control(c) => {}
            c => put(&mut line, &mut cursor, c),
        }
    }
    out.extend(line.drain(..));
    Cow::Owned(out)
}

fn put(line: &mut Vec<char>, cursor: &mut usize, c: char) {
    if *cursor < line.len() {
        line[*cursor] = c;
    } else {
        line.push(c);
    }
    *cursor += 1;
}

/// C0 controls but newline and tab, DEL and C1 controls: the characters that
/// make [`clean`] do more than copy (carriage return, backspace and escape
/// among them).
/// Whether `text` holds a character [`is_dropped_control`] accepts, read
/// byte by byte: nearly all text has none, and decoding every character to
/// find that out was most of the time `clean` took. In UTF-8 the C0
/// controls and DEL are single bytes, and the C1 controls (U+0080–U+009F)
/// are `0xC2` followed by `0x80`–`0x9F`.
fn has_dropped_control(text: &str) -> bool {
    let b = text.as_bytes();
    b.iter().enumerate().any(|(i, &x)| {
        (x < 0x20 && x != b'\n' && x != b'\t')
            || x == 0x7f
            || (x == 0xc2 && b.get(i + 1).is_some_and(|n| (0x80..=0x9f).contains(n)))
    })
}

fn is_dropped_control(c: char) -> bool {
    let u = c as u32;
    (u < 0x20 && c != '\n' && c != '\t') || (0x7f..=0x9f).contains(&u)
}

/// Skip a control sequence after its introducer: parameter and intermediate
/// bytes, then the final byte. A malformed sequence ends at the first byte
/// outside those ranges (kept) or at a newline (kept).
fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while chars
        .next_if(|c| ('\u{30}'..='\u{3f}').contains(c))
        .is_some()
    {}
    while chars
        .next_if(|c| ('\u{20}'..='\u{2f}').contains(c))
        .is_some()
    {}
    chars.next_if(|c| ('\u{40}'..='\u{7e}').contains(c));
}

/// Skip a string control (OSC title or hyperlink, DCS, …) up to its
/// terminator: BEL, ST (`ESC \` or U+009C), or the end of the line, which a
/// lost terminator must not swallow.
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(&c) = chars.peek() {
        match c {
            '\n' => return,
            '\u{7}' | '\u{9c}' => {
                chars.next();
                return;
            }
            '\u{1b}' => {
                chars.next();
                chars.next_if_eq(&'\\');
                return;
            }
            _ => {
                chars.next();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{clean, has_dropped_control, is_dropped_control};

    #[test]
    fn the_byte_test_finds_the_controls_the_character_test_finds() {
        let chars = (0..0x3000)
            .chain([0xFEFF, 0x1F600])
            .filter_map(char::from_u32);
        for c in chars {
            for text in [
                c.to_string(),
                format!("ab{c}"),
                format!("{c}é"),
                format!("é{c}x"),
            ] {
                assert_eq!(
                    has_dropped_control(&text),
                    text.chars().any(is_dropped_control),
                    "U+{:04X} in {text:?}",
                    u32::from(c)
                );
            }
        }
    }

    #[test]
    fn plain_text_is_borrowed() {
        assert!(matches!(
            clean("a\tb\nc"),
            std::borrow::Cow::Borrowed("a\tb\nc")
        ));
    }

    #[test]
    fn colours_and_cursor_codes_are_removed() {
        assert_eq!(clean("\u{1b}[1;31mError\u{1b}[0m: boom"), "Error: boom");
        assert_eq!(clean("\u{9b}32mok\u{9b}0m"), "ok");
        assert_eq!(clean("a\u{1b}[2Kb\u{1b}[?25h"), "ab");
        assert_eq!(clean("\u{1b}(Bx\u{1b}=y"), "xy");
    }

    #[test]
    fn osc_titles_and_hyperlinks_end_at_their_terminator() {
        assert_eq!(
            clean("\u{1b}]0;title\u{7}root@host:/app# ls"),
            "root@host:/app# ls"
        );
        assert_eq!(
            clean("\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\ text"),
            "link text"
        );
        // A lost terminator does not swallow the next line.
        assert_eq!(clean("\u{1b}]0;title\nnext"), "\nnext");
    }

    #[test]
    fn carriage_returns_and_backspaces_overwrite() {
        assert_eq!(clean("10%\r20%\r100%\ndone"), "100%\ndone");
        assert_eq!(clean("abcdef\rXY"), "XYcdef");
        assert_eq!(clean("line one\r\nline two\r\n"), "line one\nline two\n");
        assert_eq!(clean("_\u{8}A_\u{8}B"), "AB");
        assert_eq!(clean("ab\u{8}\u{8}\u{8}c"), "cb");
    }

    #[test]
    fn other_controls_are_dropped_and_tabs_kept() {
        assert_eq!(clean("a\u{7}b\u{0}c\u{7f}d\te"), "abcd\te");
        // A truncated escape at the end is not an error.
        assert_eq!(clean("x\u{1b}"), "x");
        assert_eq!(clean("x\u{1b}["), "x");
    }
}
