//! Following a JSONPath through JSON text without building the document.
//! The text is read byte by byte: members and elements off the path are
//! checked against JSON's grammar and skipped, and only the bytes where the
//! path ends are turned into a value, often by borrowing them. SQL's `->`,
//! `->>` and `json_extract` run this once per row, and a JSON text's
//! members are mostly off the path.
//!
//! The answer is the one [`super::jsonpath::lookup`] gives on the parsed
//! document: invalid JSON anywhere is an error, a missing member or an
//! index out of range is `None`, and a member given twice counts with its
//! last value. As when `serde_json` skips a value, a string the path does
//! not end at has each `\u` escape checked for four hex digits only, and a
//! number there for its grammar, not its range; the value the path ends at
//! is decoded by `serde_json`, so it is checked in full.
//!
//! Text known to be written by `serde_json` from a value or a record (what
//! the tables' JSON columns hold, but OpenAI argument strings, kept as
//! written) is valid and names each member once in its object, so its
//! first match is its only one: read as [`Reading::Canonical`], it is read
//! only up to the end of the value the path reaches. A filter on the first
//! member of a step's `extra` object read a quarter of each text.

use std::borrow::Cow;
use std::ops::Range;

use serde_json::Value;

use super::jsonpath::PathStep;

/// The text is not JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Invalid;

/// How much of a text the follower reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// All of it: invalid JSON anywhere gives nothing, and a member named
    /// twice counts with its last value.
    Whole,
    /// Up to the end of the value the path reaches, for text that
    /// `serde_json` wrote from a value or a record: valid JSON, each member
    /// named once in its object. Other text may then give an answer where
    /// [`Reading::Whole`] gives none or another.
    Canonical,
}

/// The value at `path` as JSON text, as SQL's `->` and `json_extract`
/// give it: compact, object members in key order; nothing for a missing
/// member or invalid JSON.
pub fn json_at<'t>(text: &'t str, path: &[PathStep]) -> Option<Cow<'t, str>> {
    json_at_reading(text, path, Reading::Whole)
}

/// [`json_at`], reading `text` as `reading` says.
pub fn json_at_reading<'t>(
    text: &'t str,
    path: &[PathStep],
    reading: Reading,
) -> Option<Cow<'t, str>> {
    let v = &text[locate(text, path, reading).ok()??];
    // These print as they are written.
    if matches!(v, "null" | "true" | "false") || plain_integer(v) || plain_string(v) {
        return Some(Cow::Borrowed(v));
    }
    let value: Value = serde_json::from_str(v).ok()?;
    Some(Cow::Owned(value.to_string()))
}

/// The value at `path` as text, as SQL's `->>` and `json_extract_string`
/// give it: a string without its quotes, any other value as JSON, and
/// nothing for JSON null, a missing member or invalid JSON.
pub fn text_at<'t>(text: &'t str, path: &[PathStep]) -> Option<Cow<'t, str>> {
    text_at_reading(text, path, Reading::Whole)
}

/// [`text_at`], reading `text` as `reading` says.
pub fn text_at_reading<'t>(
    text: &'t str,
    path: &[PathStep],
    reading: Reading,
) -> Option<Cow<'t, str>> {
    let v = &text[locate(text, path, reading).ok()??];
    if v == "null" {
        return None;
    }
    if plain_string(v) {
        return Some(Cow::Borrowed(&v[1..v.len() - 1]));
    }
    if v.starts_with('"') {
        return serde_json::from_str::<String>(v).ok().map(Cow::Owned);
    }
    // `v` was read whole as part of valid JSON: what prints as written
    // needs no second reading (most members a filter casts are integers).
    if matches!(v, "true" | "false") || plain_integer(v) {
        return Some(Cow::Borrowed(v));
    }
    json_at(v, &[])
}

/// A string with no escapes: its text is its value.
fn plain_string(v: &str) -> bool {
    v.starts_with('"') && !v.contains('\\')
}

/// An integer that `serde_json` keeps as an integer and prints as written:
/// not `-0` (a float to it) and short enough for 64 bits.
fn plain_integer(v: &str) -> bool {
    let digits = v.strip_prefix('-').unwrap_or(v);
    !digits.is_empty()
        && digits.len() <= 18
        && digits.bytes().all(|b| b.is_ascii_digit())
        && v != "-0"
}

/// Where in `text` the value at `path` is written.
fn locate(
    text: &str,
    path: &[PathStep],
    reading: Reading,
) -> Result<Option<Range<usize>>, Invalid> {
    let mut s = Scan {
        b: text.as_bytes(),
        i: 0,
        first_match: reading == Reading::Canonical,
    };
    let found = s.find(path)?;
    if s.first_match {
        return Ok(found);
    }
    s.ws();
    if s.i != s.b.len() {
        return Err(Invalid);
    }
    Ok(found)
}

/// A cursor over JSON text.
struct Scan<'a> {
    b: &'a [u8],
    i: usize,
    /// Stop at the member or element the path goes through: nothing after
    /// it can change the answer ([`Reading::Canonical`]).
    first_match: bool,
}

impl Scan<'_> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Result<u8, Invalid> {
        self.ws();
        self.b.get(self.i).copied().ok_or(Invalid)
    }

    fn expect(&mut self, c: u8) -> Result<(), Invalid> {
        if self.peek()? != c {
            return Err(Invalid);
        }
        self.i += 1;
        Ok(())
    }

    /// The value here, walked along `path`: where the path ends, or `None`.
    /// Either way the whole value is read, unless a match ends the reading
    /// ([`Reading::Canonical`]).
    fn find(&mut self, path: &[PathStep]) -> Result<Option<Range<usize>>, Invalid> {
        let Some((step, rest)) = path.split_first() else {
            self.ws();
            let start = self.i;
            self.skip_value()?;
            return Ok(Some(start..self.i));
        };
        match (self.peek()?, step) {
            (b'{', PathStep::Key(want)) => self.find_member(want, rest),
            (b'[', PathStep::Index(n)) => self.find_element(*n, rest),
            (b'[', PathStep::FromEnd(n)) => self.find_from_end(*n, rest),
            _ => {
                self.skip_value()?;
                Ok(None)
            }
        }
    }

    fn find_member(
        &mut self,
        want: &str,
        rest: &[PathStep],
    ) -> Result<Option<Range<usize>>, Invalid> {
        let mut found = None;
        self.each_item(b'}', |s, _| {
            let hit = s.key_is(want)?;
            s.expect(b':')?;
            if hit {
                found = s.find(rest)?;
                Ok(s.first_match)
            } else {
                s.skip_value().map(|()| false)
            }
        })?;
        Ok(found)
    }

    fn find_element(
        &mut self,
        want: usize,
        rest: &[PathStep],
    ) -> Result<Option<Range<usize>>, Invalid> {
        let mut found = None;
        self.each_item(b']', |s, at| {
            if at == want {
                found = s.find(rest)?;
                Ok(s.first_match)
            } else {
                s.skip_value().map(|()| false)
            }
        })?;
        Ok(found)
    }

    /// Counting from the end needs the array's length: the elements are
    /// read once for where they start, and the path goes on in the one picked.
    fn find_from_end(
        &mut self,
        n: usize,
        rest: &[PathStep],
    ) -> Result<Option<Range<usize>>, Invalid> {
        let mut starts = Vec::new();
        self.each_item(b']', |s, _| {
            s.ws();
            starts.push(s.i);
            s.skip_value().map(|()| false)
        })?;
        let Some(&pick) = starts.len().checked_sub(n).and_then(|k| starts.get(k)) else {
            return Ok(None);
        };
        Scan { i: pick, ..*self }.find(rest)
    }

    /// Reads an object or array from its opening bracket to `close`,
    /// handing each member or element, with its position, to `item`, which
    /// reads it whole and says whether to stop there, before `close`.
    fn each_item(
        &mut self,
        close: u8,
        mut item: impl FnMut(&mut Self, usize) -> Result<bool, Invalid>,
    ) -> Result<(), Invalid> {
        self.i += 1;
        if self.peek()? == close {
            self.i += 1;
            return Ok(());
        }
        let mut at = 0;
        loop {
            if item(self, at)? {
                return Ok(());
            }
            at += 1;
            match self.peek()? {
                b',' => self.i += 1,
                c if c == close => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(Invalid),
            }
        }
    }

    /// Reads a member name and its quotes; whether it is `want`.
    fn key_is(&mut self, want: &str) -> Result<bool, Invalid> {
        if self.peek()? != b'"' {
            return Err(Invalid);
        }
        let start = self.i;
        let escaped = self.string()?;
        let raw = &self.b[start + 1..self.i - 1];
        if !escaped {
            return Ok(raw == want.as_bytes());
        }
        let quoted = std::str::from_utf8(&self.b[start..self.i]).map_err(|_| Invalid)?;
        let name: String = serde_json::from_str(quoted).map_err(|_| Invalid)?;
        Ok(name == want)
    }

    /// Reads a string from its opening quote; whether it holds an escape.
    fn string(&mut self) -> Result<bool, Invalid> {
        self.i += 1;
        let mut escaped = false;
        loop {
            self.i += plain_run(self.b.get(self.i..).unwrap_or_default());
            let c = *self.b.get(self.i).ok_or(Invalid)?;
            self.i += 1;
            match c {
                b'"' => return Ok(escaped),
                b'\\' => {
                    escaped = true;
                    match *self.b.get(self.i).ok_or(Invalid)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 1,
                        b'u' => {
                            let hex = self.b.get(self.i + 1..self.i + 5).ok_or(Invalid)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return Err(Invalid);
                            }
                            self.i += 5;
                        }
                        _ => return Err(Invalid),
                    }
                }
                0..=0x1f => return Err(Invalid),
                _ => {}
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        self.i - start
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Result<(), Invalid> {
        if self.b[self.i] == b'-' {
            self.i += 1;
        }
        match self.b.get(self.i) {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(Invalid),
        }
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return Err(Invalid);
            }
        }
        if let Some(b'e' | b'E') = self.b.get(self.i) {
            self.i += 1;
            if let Some(b'+' | b'-') = self.b.get(self.i) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(Invalid);
            }
        }
        Ok(())
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), Invalid> {
        if !self.b[self.i..].starts_with(word) {
            return Err(Invalid);
        }
        self.i += word.len();
        Ok(())
    }

    /// Reads one value whole. Containers are tracked on a stack of their
    /// kinds rather than by recursion, so deep nesting cannot exhaust the
    /// thread's stack.
    fn skip_value(&mut self) -> Result<(), Invalid> {
        let mut open = Nesting::default();
        loop {
            match self.peek()? {
                b'{' => {
                    self.i += 1;
                    if self.peek()? == b'}' {
                        self.i += 1;
                    } else {
                        open.push(true);
                        self.member_name()?;
                        continue;
                    }
                }
                b'[' => {
                    self.i += 1;
                    if self.peek()? == b']' {
                        self.i += 1;
                    } else {
                        open.push(false);
                        continue;
                    }
                }
                b'"' => {
                    self.string()?;
                }
                b'-' | b'0'..=b'9' => self.number()?,
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'n' => self.literal(b"null")?,
                _ => return Err(Invalid),
            }
            // After a value: close what ends here, then go on to the next
            // member or element.
            loop {
                let Some(object) = open.innermost() else {
                    return Ok(());
                };
                match (self.peek()?, object) {
                    (b',', _) => {
                        self.i += 1;
                        if object {
                            self.member_name()?;
                        }
                        break;
                    }
                    (b'}', true) | (b']', false) => {
                        self.i += 1;
                        open.pop();
                    }
                    _ => return Err(Invalid),
                }
            }
        }
    }

    /// A member's name and the colon after it.
    fn member_name(&mut self) -> Result<(), Invalid> {
        if self.peek()? != b'"' {
            return Err(Invalid);
        }
        self.string()?;
        self.expect(b':')
    }
}

/// How many bytes at the start of `b` a string holds as they are: up to
/// the first quote, backslash or control character. Eight bytes are looked
/// at a time, which reads the long strings of tool output several times
/// faster than one byte at a time.
fn plain_run(b: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // High bit set in each byte of `x` that is zero. A borrow can also mark
    // a byte above a marked one, never below: the lowest mark is exact.
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let mut at = 0;
    let mut words = b.chunks_exact(8);
    for w in &mut words {
        let x = u64::from_le_bytes(w.try_into().expect("eight bytes"));
        let stops = zero(x ^ (ONES * u64::from(b'"')))
            | zero(x ^ (ONES * u64::from(b'\\')))
            // Bytes below 0x20; those of 0x80 and above are never marked.
            | (x.wrapping_sub(ONES * 0x20) & !x & HIGH);
        if stops != 0 {
            return at + (stops.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + words
        .remainder()
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
        .unwrap_or(words.remainder().len())
}

/// The containers open around a point of the text, innermost last: `true`
/// for an object, `false` for an array. The first 64 levels are bits, so
/// the short JSON of most cells is skipped without allocating.
#[derive(Default)]
struct Nesting {
    bits: u64,
    depth: usize,
    deeper: Vec<bool>,
}

impl Nesting {
    fn push(&mut self, object: bool) {
        if self.depth < 64 {
            self.bits = (self.bits & !(1 << self.depth)) | (u64::from(object) << self.depth);
        } else {
            self.deeper.push(object);
        }
        self.depth += 1;
    }

    fn pop(&mut self) {
        self.depth -= 1;
        if self.depth >= 64 {
            self.deeper.pop();
        }
    }

    fn innermost(&self) -> Option<bool> {
        match self.depth {
            0 => None,
            d @ 1..=64 => Some(self.bits >> (d - 1) & 1 == 1),
            _ => self.deeper.last().copied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::jsonpath::{lookup, parse, Indexes};
    use super::*;

    /// Eight bytes at a time finds the same first stop as one at a time,
    /// wherever it falls and whatever comes before or after it.
    #[test]
    fn a_plain_run_ends_at_the_first_quote_backslash_or_control() {
        let naive = |b: &[u8]| {
            b.iter()
                .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
                .unwrap_or(b.len())
        };
        let fill = "aé超\u{7f}~ !#[]{}".as_bytes();
        for stop in [b'"', b'\\', 0x00, b'\n', 0x1f] {
            for len in 0..40 {
                for at in 0..=len {
                    let mut b: Vec<u8> = fill.iter().copied().cycle().take(len).collect();
                    if at < len {
                        b[at] = stop;
                        // Stops after the first must not move it.
                        for k in (at + 1..len).step_by(3) {
                            b[k] = 0x01;
                        }
                    }
                    assert_eq!(plain_run(&b), naive(&b), "{stop} at {at} of {len}");
                }
            }
        }
        // Bytes just above each stop are plain.
        let above = [b'"' + 1, b'\\' + 1, 0x20, 0x80, 0xff, b'"' - 1];
        let b: Vec<u8> = above.iter().copied().cycle().take(33).collect();
        assert_eq!(plain_run(&b), 33);
    }

    /// The value at `path`, built.
    fn follow(text: &str, path: &[PathStep]) -> Result<Option<Value>, Invalid> {
        match locate(text, path, Reading::Whole)? {
            Some(at) => serde_json::from_str(&text[at])
                .map(Some)
                .map_err(|_| Invalid),
            None => Ok(None),
        }
    }

    /// The same answer as parsing the document and looking the path up.
    fn same(text: &str, path: &str) {
        let steps = parse(path, Indexes::Signed).unwrap();
        let whole: Result<Value, _> = serde_json::from_str(text);
        let want = whole.ok().map(|d| lookup(&d, &steps).cloned());
        let got = follow(text, &steps).ok();
        assert_eq!(got, want, "{text} {path}");
    }

    #[test]
    fn follows_like_a_parsed_document() {
        let doc = r#"{"a": {"b": [1, {"c d": true}, "x"]}, "n": 1.50, "s": "caf\u00e9",
                      "dup": 1, "dup": {"k": 2}, "e\"sc": [], "big": 12345678901234567890}"#;
        for p in [
            "$",
            "$.a",
            "$.a.b",
            "$.a.b[0]",
            "$.a.b[1].\"c d\"",
            "$.a.b[2]",
            "$.a.b[3]",
            "$.a.b[-1]",
            "$.a.b[#-3]",
            "$.n",
            "$.s",
            "$.dup",
            "$.dup.k",
            "$[\"e\\\"sc\"]",
            "$.big",
            "$.missing",
            "$.n.x",
            "$.a[0]",
            "$.a.b.x",
            "$.s[0]",
        ] {
            same(doc, p);
        }
        for bad in [
            r#"{"a": 1,}"#,
            r#"{"a": 1} x"#,
            r#"{"a": [1, 2}"#,
            "",
            r#"{"b": tru}"#,
            r#"{"a": 1, "b": }"#,
            r#"{"a": 1]"#,
            r#"{"a": [1, 2}}"#,
        ] {
            same(bad, "$.a");
        }
        // A closing bracket of the other kind, on the path and around it.
        for (bad, path) in [
            ("[1, 2}", "$[0]"),
            ("[[1}, 2]", "$[0][0]"),
            ("[1, 2}", "$[-1]"),
        ] {
            same(bad, path);
        }
        same("[1, [2, 3], {\"a\": null}]", "$[1][1]");
        same("[1, [2, 3], {\"a\": null}]", "$[2].a");
        same("\"text\"", "$");
        same("null", "$.a");
    }

    /// What `->>` and `->` answer, from the parsed document.
    fn want_texts(text: &str, steps: &[PathStep]) -> (Option<String>, Option<String>) {
        let Ok(doc) = serde_json::from_str::<Value>(text) else {
            return (None, None);
        };
        match lookup(&doc, steps) {
            None => (None, None),
            Some(Value::Null) => (None, Some("null".into())),
            Some(Value::String(s)) => (Some(s.clone()), Some(Value::String(s.clone()).to_string())),
            Some(v) => (Some(v.to_string()), Some(v.to_string())),
        }
    }

    /// A small generator of JSON texts: nested containers, escapes, every
    /// form of number, whitespace.
    struct Gen(u64);

    impl Gen {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) % n
        }

        fn ws(&mut self, out: &mut String) {
            out.push_str([" ", "", "", "\n ", "\t"][self.below(5) as usize]);
        }

        fn value(&mut self, depth: u32, out: &mut String) {
            let pick = if depth > 3 {
                self.below(5)
            } else {
                self.below(8)
            };
            match pick {
                0 => out.push_str(["null", "true", "false"][self.below(3) as usize]),
                1 => out.push_str(
                    [
                        "0",
                        "-0",
                        "7",
                        "-12",
                        "1.50",
                        "2e3",
                        "-0.5E-2",
                        "12345678901234567890",
                        "123456789012345678",
                    ][self.below(9) as usize],
                ),
                2..=4 => out.push_str(
                    [
                        r#""a""#,
                        r#""caf\u00e9""#,
                        r#""x\"y""#,
                        r#""tab\tnl\n""#,
                        r#""""#,
                        r#""超时""#,
                        r#""a/b\/c""#,
                    ][self.below(7) as usize],
                ),
                5 | 6 => {
                    out.push('{');
                    for k in 0..self.below(4) {
                        if k > 0 {
                            out.push(',');
                        }
                        self.ws(out);
                        out.push_str(
                            [r#""a""#, r#""b""#, r#""a""#, r#""\u0061""#, r#""c d""#]
                                [self.below(5) as usize],
                        );
                        self.ws(out);
                        out.push(':');
                        self.ws(out);
                        self.value(depth + 1, out);
                    }
                    self.ws(out);
                    out.push('}');
                }
                _ => {
                    out.push('[');
                    for k in 0..self.below(4) {
                        if k > 0 {
                            out.push(',');
                        }
                        self.ws(out);
                        self.value(depth + 1, out);
                    }
                    out.push(']');
                }
            }
        }

        /// The text with one byte taken out, doubled, replaced or put in.
        fn mutate(&mut self, text: &str) -> String {
            let mut b = text.as_bytes().to_vec();
            let at = self.below(b.len() as u64 + 1) as usize;
            let any = b"{}[],:\"\\0-.e1 tnx"[self.below(17) as usize];
            match self.below(4) {
                0 if at < b.len() => {
                    b.remove(at);
                }
                1 if at < b.len() => b.insert(at, b[at]),
                2 if at < b.len() => b[at] = any,
                _ => b.insert(at, any),
            }
            String::from_utf8(b).unwrap_or_default()
        }
    }

    /// The paths tried on generated texts: members, elements from either
    /// end, nested, quoted, and ones the texts rarely hold.
    fn generated_paths() -> Vec<Vec<PathStep>> {
        [
            "$",
            "$.a",
            "$.b",
            "$.a.a",
            "$.a[0]",
            "$[0]",
            "$[1].a",
            "$[-1]",
            "$.a[#-2].b",
            "$.\"c d\"",
            "$[0][0]",
            "$[2]",
            "$.a.b",
        ]
        .iter()
        .map(|p| parse(p, Indexes::Signed).unwrap())
        .collect()
    }

    /// Generated texts, valid and broken, answer as the parsed document
    /// does for every path tried.
    #[test]
    fn generated_texts_answer_like_a_parsed_document() {
        let paths = generated_paths();
        let mut g = Gen(7);
        let mut broken = 0;
        for _ in 0..4000 {
            let mut text = String::new();
            g.value(0, &mut text);
            let text = if g.below(2) == 0 {
                g.mutate(&text)
            } else {
                text
            };
            match serde_json::from_str::<Value>(&text) {
                // Out of range off the path is not an error here (above).
                Err(e) if e.to_string().starts_with("number out of range") => continue,
                Err(_) => broken += 1,
                Ok(_) => {}
            }
            for steps in &paths {
                let (text_want, json_want) = want_texts(&text, steps);
                assert_eq!(
                    text_at(&text, steps).map(Cow::into_owned),
                    text_want,
                    "->> {text} {steps:?}"
                );
                assert_eq!(
                    json_at(&text, steps).map(Cow::into_owned),
                    json_want,
                    "-> {text} {steps:?}"
                );
                let whole: Result<Value, _> = serde_json::from_str(&text);
                assert_eq!(
                    follow(&text, steps).ok(),
                    whole.ok().map(|d| lookup(&d, steps).cloned()),
                    "{text} {steps:?}"
                );
            }
        }
        // Both kinds were tried.
        assert!((500..3500).contains(&broken), "{broken}");
    }

    /// Read as canonical, the text `serde_json` writes for a generated
    /// value answers as read whole, for every path tried.
    #[test]
    fn canonical_text_answers_as_read_whole() {
        let paths = generated_paths();
        let mut g = Gen(11);
        let mut found = 0;
        for _ in 0..4000 {
            let mut text = String::new();
            g.value(0, &mut text);
            let Ok(value) = serde_json::from_str::<Value>(&text) else {
                continue;
            };
            let canonical = value.to_string();
            for steps in &paths {
                let whole = text_at(&canonical, steps);
                found += usize::from(whole.is_some());
                assert_eq!(
                    text_at_reading(&canonical, steps, Reading::Canonical),
                    whole,
                    "->> {canonical} {steps:?}"
                );
                assert_eq!(
                    json_at_reading(&canonical, steps, Reading::Canonical),
                    json_at(&canonical, steps),
                    "-> {canonical} {steps:?}"
                );
            }
        }
        assert!(found > 1000, "{found}");
    }

    /// Read as canonical, nothing after the value a path reaches is read:
    /// what follows it may be anything. (Such text is never read so: it
    /// is not what `serde_json` writes.)
    #[test]
    fn canonical_reading_stops_where_the_path_ends() {
        let at = |text: &str, p: &str| {
            let steps = parse(p, Indexes::Signed).unwrap();
            (
                text_at_reading(text, &steps, Reading::Canonical).map(Cow::into_owned),
                text_at(text, &steps).map(Cow::into_owned),
            )
        };
        let cut = r#"{"a":{"b":[1,{"c":"x"}],"d":2},"e":"#;
        assert_eq!(at(cut, "$.a.b[1].c"), (Some("x".into()), None));
        assert_eq!(at(cut, "$.a.d"), (Some("2".into()), None));
        // A member that is not there is looked for to the end of its object.
        assert_eq!(at(cut, "$.a.z"), (None, None));
        assert_eq!(at(cut, "$.z"), (None, None));
        // An element ends the reading too; one that is not there, and
        // counting from the end, read the whole array.
        let cut = r#"{"a":{"b":[1,2,"#;
        assert_eq!(at(cut, "$.a.b[0]"), (Some("1".into()), None));
        assert_eq!(at(cut, "$.a.b[5]"), (None, None));
        assert_eq!(at(cut, "$.a.b[#-1]"), (None, None));
        // Read whole, a member named twice counts with its last value.
        let twice = r#"{"a":1,"a":2}"#;
        assert_eq!(at(twice, "$.a"), (Some("1".into()), Some("2".into())));
    }

    /// A number or a string off the path is checked against the grammar
    /// only, as `serde_json` skips it; where the path ends, it must convert.
    #[test]
    fn numbers_off_the_path_are_not_converted() {
        let text = r#"{"a": 1, "b": 1e400}"#;
        let at = |p: &str| text_at(text, &parse(p, Indexes::Signed).unwrap());
        assert_eq!(at("$.a").as_deref(), Some("1"));
        assert_eq!(at("$.b"), None);
        let text = r#"{"s": "\ud800", "t": 1}"#;
        let at = |p: &str| text_at(text, &parse(p, Indexes::Signed).unwrap());
        assert_eq!(at("$.t").as_deref(), Some("1"));
        assert_eq!(at("$.s"), None);
    }

    #[test]
    fn deep_nesting_is_read_without_recursion() {
        let deep = format!(
            "{{\"a\": 1, \"b\": {}{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let steps = parse("$.a", Indexes::Signed).unwrap();
        assert_eq!(text_at(&deep, &steps).as_deref(), Some("1"));
        let cut = &deep[..deep.len() - 2];
        assert_eq!(text_at(cut, &steps), None);
        // Objects and arrays mixed across the 64 levels kept as bits: a
        // closing bracket of the wrong kind is found on either side.
        let mixed = |levels: usize, wrong_at: Option<usize>| {
            let mut t = String::from(r#"{"a": 2, "b": "#);
            for _ in 0..levels {
                t.push_str(r#"[{"k": "#);
            }
            t.push('0');
            for l in (0..levels).rev() {
                t.push_str(if wrong_at == Some(l) { "]]" } else { "}]" });
            }
            t.push('}');
            t
        };
        for levels in [10, 40, 70] {
            assert_eq!(text_at(&mixed(levels, None), &steps).as_deref(), Some("2"));
            for wrong in [0, levels / 2, levels - 1] {
                assert_eq!(text_at(&mixed(levels, Some(wrong)), &steps), None);
            }
        }
    }
}
