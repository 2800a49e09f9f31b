//! Reading JSON records from a file: one document, an array of documents, or
//! one document per line, each bounded by `max_document_bytes`.
//!
//! Arrays and lines are streamed record by record, so memory follows the
//! largest record, not the file. Parser errors become [`FormatError`]s that
//! carry the Source path and position.

use std::cell::Cell;
use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::marker::PhantomData;
use std::rc::Rc;

use serde::de::{DeserializeSeed, SeqAccess, Visitor};
use serde_json::Value;

use super::sniff::Container;
use super::FormatError;

/// Where a record came from, for pointers and messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordPos {
    /// 0-based record index in the file.
    pub index: u64,
    /// 1-based line of the record (lines only; 0 otherwise).
    pub line: u64,
}

/// Read every record of `file` laid out as `container` as a JSON [`Value`],
/// calling `f` per record. Stops at the first error from the reader or `f`.
pub fn for_each_record<R: Read>(
    file: R,
    size_hint: Option<u64>,
    container: Container,
    source_path: &str,
    max_document_bytes: u64,
    f: &mut dyn FnMut(Value, RecordPos) -> Result<(), FormatError>,
) -> Result<(), FormatError> {
    for_each_record_seed(
        file,
        size_hint,
        container,
        source_path,
        max_document_bytes,
        PhantomData::<Value>,
        f,
    )
}

/// Like [`for_each_record`], but each record is read with `seed` (a typed,
/// possibly projecting decoder) instead of as a generic JSON value.
pub fn for_each_record_seed<R, S, T>(
    file: R,
    size_hint: Option<u64>,
    container: Container,
    source_path: &str,
    max_document_bytes: u64,
    seed: S,
    f: &mut dyn FnMut(T, RecordPos) -> Result<(), FormatError>,
) -> Result<(), FormatError>
where
    R: Read,
    S: for<'de> DeserializeSeed<'de, Value = T> + Clone,
{
    let too_large = |what: String, size: u64| FormatError::TooLarge {
        source_path: source_path.to_string(),
        what,
        size,
        limit: max_document_bytes,
    };
    match container {
        Container::Empty | Container::Scalar => Ok(()),
        Container::Object => {
            let len = size_hint.unwrap_or(0);
            if len > max_document_bytes {
                return Err(too_large("document".into(), len));
            }
            let mut bytes = Vec::with_capacity(len.min(max_document_bytes) as usize);
            file.take(max_document_bytes + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| io_error(source_path, &e))?;
            if bytes.len() as u64 > max_document_bytes {
                return Err(too_large("document".into(), bytes.len() as u64));
            }
            let body = strip_bom(&bytes);
            let mut de = serde_json::Deserializer::from_slice(body);
            match seed
                .clone()
                .deserialize(&mut de)
                .and_then(|v| de.end().map(|()| v))
            {
                Ok(v) => f(v, RecordPos { index: 0, line: 0 }),
                // A `.json` file may still hold one document per line.
                Err(e) if e.to_string().starts_with("trailing characters") => {
                    for_each_line(body, source_path, max_document_bytes, &seed, f)
                }
                Err(e) => Err(classify(&e, source_path, Some(body), 0)),
            }
        }
        Container::Lines => for_each_line(
            BufReader::with_capacity(1 << 16, file),
            source_path,
            max_document_bytes,
            &seed,
            f,
        ),
        Container::Array => {
            let counter = Rc::new(Cell::new(0u64));
            let mut inner = BufReader::with_capacity(1 << 16, file);
            if inner
                .fill_buf()
                .map_err(|e| io_error(source_path, &e))?
                .starts_with(&[0xEF, 0xBB, 0xBF])
            {
                inner.consume(3);
            }
            let limited = LimitedReader {
                inner,
                counter: counter.clone(),
            };
            let mut de = serde_json::Deserializer::from_reader(limited);
            let mut err: Option<FormatError> = None;
            let array = ArraySeed {
                seed,
                f,
                counter: counter.clone(),
                limit: max_document_bytes,
                err: &mut err,
                source_path,
            };
            let r = array.deserialize(&mut de).and_then(|()| de.end());
            if let Some(e) = err {
                return Err(e);
            }
            r.map_err(|e| {
                if counter.get() > max_document_bytes {
                    too_large("array element".into(), counter.get())
                } else {
                    classify(&e, source_path, None, 0)
                }
            })
        }
    }
}

fn for_each_line<B, S, T>(
    mut reader: B,
    source_path: &str,
    max_document_bytes: u64,
    seed: &S,
    f: &mut dyn FnMut(T, RecordPos) -> Result<(), FormatError>,
) -> Result<(), FormatError>
where
    B: BufRead,
    S: for<'de> DeserializeSeed<'de, Value = T> + Clone,
{
    let mut buf = Vec::new();
    let mut line_no = 0u64;
    let mut index = 0u64;
    loop {
        buf.clear();
        line_no += 1;
        match read_line_bounded(&mut reader, &mut buf, max_document_bytes)
            .map_err(|e| io_error(source_path, &e))?
        {
            LineRead::Eof => return Ok(()),
            LineRead::TooLong(seen) => {
                return Err(FormatError::TooLarge {
                    source_path: source_path.to_string(),
                    what: format!("line {line_no}"),
                    size: seen,
                    limit: max_document_bytes,
                })
            }
            LineRead::Line => {}
        }
        while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            buf.pop();
        }
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let line = if line_no == 1 {
            strip_bom(&buf)
        } else {
            &buf[..]
        };
        let mut de = serde_json::Deserializer::from_slice(line);
        let v = seed
            .clone()
            .deserialize(&mut de)
            .and_then(|v| de.end().map(|()| v))
            .map_err(|e| classify(&e, source_path, Some(line), line_no - 1))?;
        f(
            v,
            RecordPos {
                index,
                line: line_no,
            },
        )?;
        index += 1;
    }
}

/// Drop a leading UTF-8 byte-order mark.
fn strip_bom(b: &[u8]) -> &[u8] {
    b.strip_prefix(&[0xEF, 0xBB, 0xBF]).unwrap_or(b)
}

/// Parse one complete JSON value from bytes. `line_offset` is added to the
/// reported line (for records taken from the middle of a file).
pub fn parse_slice(
    bytes: &[u8],
    source_path: &str,
    line_offset: u64,
) -> Result<Value, FormatError> {
    serde_json::from_slice(bytes).map_err(|e| classify(&e, source_path, Some(bytes), line_offset))
}

fn io_error(source_path: &str, e: &std::io::Error) -> FormatError {
    FormatError::Io {
        source_path: source_path.to_string(),
        message: e.to_string(),
    }
}

/// Turn a serde_json error into a coded [`FormatError`].
fn classify(
    e: &serde_json::Error,
    source_path: &str,
    bytes: Option<&[u8]>,
    line_offset: u64,
) -> FormatError {
    let line = e.line() as u64 + line_offset;
    let column = e.column() as u64;
    let sp = source_path.to_string();
    let msg = e.to_string();
    if msg.contains("recursion limit exceeded") {
        return FormatError::TooDeep {
            source_path: sp,
            line,
            column,
        };
    }
    if e.is_eof() {
        return FormatError::Truncated {
            source_path: sp,
            line,
            column,
        };
    }
    if let Some(b) = bytes {
        if looks_non_finite(b, e.line(), e.column()) {
            return FormatError::NonFinite {
                source_path: sp,
                line,
                column,
            };
        }
    }
    let message = match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg,
    };
    FormatError::InvalidJson {
        source_path: sp,
        line,
        column,
        message,
    }
}

/// True when the bytes at (line, column) start `NaN`, `Infinity` or `-Infinity`.
fn looks_non_finite(bytes: &[u8], line: usize, column: usize) -> bool {
    let mut off = 0usize;
    let mut cur = 1usize;
    while cur < line {
        match bytes[off..].iter().position(|&b| b == b'\n') {
            Some(p) => {
                off += p + 1;
                cur += 1;
            }
            None => return false,
        }
    }
    let start = (off + column).saturating_sub(2);
    let window = &bytes[start.min(bytes.len())..(off + column + 9).min(bytes.len())];
    let s = String::from_utf8_lossy(window);
    s.contains("NaN") || s.contains("Infinity")
}

enum LineRead {
    Line,
    Eof,
    TooLong(u64),
}

/// Read up to and including `\n` into `buf`, failing fast (without buffering
/// the rest) when the line exceeds `limit` bytes.
fn read_line_bounded<R: BufRead>(
    r: &mut R,
    buf: &mut Vec<u8>,
    limit: u64,
) -> std::io::Result<LineRead> {
    let mut seen = 0u64;
    loop {
        let avail = r.fill_buf()?;
        if avail.is_empty() {
            return Ok(if seen == 0 {
                LineRead::Eof
            } else {
                LineRead::Line
            });
        }
        let (take, done) = match avail.iter().position(|&b| b == b'\n') {
            Some(p) => (p + 1, true),
            None => (avail.len(), false),
        };
        seen += take as u64;
        if seen > limit + 1 {
            return Ok(LineRead::TooLong(seen));
        }
        buf.extend_from_slice(&avail[..take]);
        r.consume(take);
        if done {
            return Ok(LineRead::Line);
        }
    }
}

/// Counts bytes read since the last reset; errors once past the limit is the
/// seed's job (it checks between elements), this only counts.
struct LimitedReader<R> {
    inner: R,
    counter: Rc<Cell<u64>>,
}

impl<R: Read> Read for LimitedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.counter.set(self.counter.get() + n as u64);
        Ok(n)
    }
}

struct ArraySeed<'a, 'f, S, T> {
    seed: S,
    f: &'a mut dyn FnMut(T, RecordPos) -> Result<(), FormatError>,
    counter: Rc<Cell<u64>>,
    limit: u64,
    err: &'a mut Option<FormatError>,
    source_path: &'f str,
}

impl<'de, S, T> DeserializeSeed<'de> for ArraySeed<'_, '_, S, T>
where
    S: for<'x> DeserializeSeed<'x, Value = T> + Clone,
{
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, S, T> Visitor<'de> for ArraySeed<'_, '_, S, T>
where
    S: for<'x> DeserializeSeed<'x, Value = T> + Clone,
{
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of records")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0u64;
        loop {
            self.counter.set(0);
            let Some(v) = seq.next_element_seed(self.seed.clone())? else {
                return Ok(());
            };
            // The reader runs ahead by at most one buffer; allow for it.
            if self.counter.get() > self.limit.saturating_add(1 << 16) {
                *self.err = Some(FormatError::TooLarge {
                    source_path: self.source_path.to_string(),
                    what: format!("array element {}", index + 1),
                    size: self.counter.get(),
                    limit: self.limit,
                });
                return Err(serde::de::Error::custom("record too large"));
            }
            if let Err(e) = (self.f)(v, RecordPos { index, line: 0 }) {
                *self.err = Some(e);
                return Err(serde::de::Error::custom("record rejected"));
            }
            index += 1;
        }
    }
}

/// Check that `file` holds well-formed JSON to its end (one value, or
/// values one after another as in JSON Lines) without building the values.
/// Discovery uses it on `.json` files it does not recognise, so a broken
/// file is reported, not passed over as "JSON of another kind".
pub fn check_syntax<R: Read>(file: R, source_path: &str) -> Result<(), FormatError> {
    let stream = serde_json::Deserializer::from_reader(BufReader::new(file))
        .into_iter::<serde::de::IgnoredAny>();
    for v in stream {
        if let Err(e) = v {
            return Err(classify(&e, source_path, None, 0));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn records(
        content: &[u8],
        container: Container,
        limit: u64,
    ) -> Result<Vec<Value>, FormatError> {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(content).unwrap();
        use std::io::Seek as _;
        f.rewind().unwrap();
        let mut out = Vec::new();
        let len = f.metadata().unwrap().len();
        for_each_record(f, Some(len), container, "x.json", limit, &mut |v, _| {
            out.push(v);
            Ok(())
        })?;
        Ok(out)
    }

    #[test]
    fn reads_each_layout() {
        assert_eq!(
            records(b"{\"a\":1}", Container::Object, 100).unwrap().len(),
            1
        );
        assert_eq!(
            records(b"[{\"a\":1},{\"a\":2}]", Container::Array, 100)
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            records(b"{\"a\":1}\n\n{\"a\":2}\n", Container::Lines, 100)
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn errors_are_coded() {
        let e = records(b"{\"a\":", Container::Object, 100).unwrap_err();
        assert_eq!(e.code(), "PC-FMT-002");
        let e = records(b"{\"a\": NaN}", Container::Object, 100).unwrap_err();
        assert_eq!(e.code(), "PC-FMT-003");
        let e = records(b"{\"a\": 1,}", Container::Object, 100).unwrap_err();
        assert_eq!(e.code(), "PC-FMT-001");
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let e = records(deep.as_bytes(), Container::Object, 1000).unwrap_err();
        assert_eq!(e.code(), "PC-FMT-010");
        let e = records(b"{\"a\":\"0123456789\"}\n", Container::Lines, 5).unwrap_err();
        assert_eq!(e.code(), "PC-FMT-009");
        let e = records(b"{\"a\":1}\n{\"a\":\n", Container::Lines, 100).unwrap_err();
        assert!(matches!(e, FormatError::Truncated { line: 2, .. }), "{e:?}");
    }
}

#[cfg(test)]
mod syntax_tests {
    #[test]
    fn broken_files_are_told_apart_from_other_json() {
        let ok = |s: &str| super::check_syntax(s.as_bytes(), "x.json");
        assert!(ok(r#"[{"a": 1}, {"b": [2]}]"#).is_ok());
        assert!(ok("{\"a\":1}\n{\"a\":2}\n").is_ok());
        let truncated = ok(r#"[{"a": 1}, {"b": "#).unwrap_err();
        assert_eq!(truncated.code(), "PC-FMT-002");
        assert!(ok(r#"[{"a": 1}, garbage]"#).is_err());
    }
}
