//! Rendering record batches: aligned table, JSON Lines and CSV.
//!
//! Cells: NULL is `NULL` in tables, empty in CSV and `null` in JSON;
//! timestamps are RFC 3339 UTC; floats print like `1.0` (tables round them
//! to 12 significant digits, CSV and JSON keep every digit); JSON columns
//! are text (their JSON as a string).

use std::io::Write;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{
    DataType, Float64Type, Int64Type, SchemaRef, TimestampNanosecondType, UInt64Type,
};
use arrow::record_batch::RecordBatch;
use serde_json::Value;

use crate::sql::float_text;
use crate::util::text::{display_width, escape_control, truncate_chars};
use crate::util::time::format_rfc3339;

/// A cell as text (None for NULL).
pub fn cell_text(a: &dyn Array, i: usize) -> Option<String> {
    if a.is_null(i) {
        return None;
    }
    Some(match a.data_type() {
        DataType::Utf8 => a.as_string::<i32>().value(i).to_string(),
        DataType::Int64 => a.as_primitive::<Int64Type>().value(i).to_string(),
        DataType::UInt64 => a.as_primitive::<UInt64Type>().value(i).to_string(),
        DataType::Float64 => float_text(a.as_primitive::<Float64Type>().value(i)),
        DataType::Boolean => a.as_boolean().value(i).to_string(),
        DataType::Timestamp(..) => {
            format_rfc3339(a.as_primitive::<TimestampNanosecondType>().value(i))
        }
        DataType::Null => return None,
        other => format!("<{other}>"),
    })
}

/// A float as a table shows it: rounded to 12 significant digits, then in
/// the shortest form (`0.00325`, not `0.0032500000000000003`). Tables are
/// read by people, and the last digits of binary arithmetic are noise to
/// them; JSON Lines and CSV keep the exact value.
pub fn float_display(f: f64) -> String {
    if !f.is_finite() {
        return float_text(f);
    }
    // Eleven decimals in scientific notation are 12 significant digits;
    // read back, the value prints without the noise.
    let rounded = format!("{f:.11e}").parse::<f64>().unwrap_or(f);
    float_text(rounded)
}

/// A cell as a table shows it: [`cell_text`] with floats at display
/// precision.
fn table_cell_text(a: &dyn Array, i: usize) -> Option<String> {
    if a.data_type() == &DataType::Float64 && !a.is_null(i) {
        return Some(float_display(a.as_primitive::<Float64Type>().value(i)));
    }
    cell_text(a, i)
}

/// A cell as JSON.
pub fn cell_json(a: &dyn Array, i: usize) -> Value {
    if a.is_null(i) {
        return Value::Null;
    }
    match a.data_type() {
        DataType::Int64 => Value::from(a.as_primitive::<Int64Type>().value(i)),
        DataType::UInt64 => Value::from(a.as_primitive::<UInt64Type>().value(i)),
        DataType::Float64 => {
            let f = a.as_primitive::<Float64Type>().value(i);
            serde_json::Number::from_f64(f)
                .map_or_else(|| Value::String(f.to_string()), Value::Number)
        }
        DataType::Boolean => Value::Bool(a.as_boolean().value(i)),
        _ => cell_text(a, i).map_or(Value::Null, Value::String),
    }
}

/// Counts bytes written and fails past a bound.
pub struct Bounded<W> {
    inner: W,
    written: u64,
    limit: u64,
}

impl<W: Write> Bounded<W> {
    /// Wrap `inner` with a byte bound.
    pub fn new(inner: W, limit: u64) -> Self {
        Bounded {
            inner,
            written: 0,
            limit,
        }
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The inner writer.
    pub fn into_inner(self) -> W {
        self.inner
    }
}

/// The error a [`Bounded`] writer returns past its bound.
#[derive(Debug)]
pub struct OutputLimit;

impl std::fmt::Display for OutputLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("output limit reached")
    }
}

impl std::error::Error for OutputLimit {}

impl<W: Write> Write for Bounded<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.written + buf.len() as u64 > self.limit {
            return Err(std::io::Error::other(OutputLimit));
        }
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// JSON Lines: one object per row, keys in column order.
pub fn write_jsonl(
    w: &mut dyn Write,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> std::io::Result<()> {
    let names: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| serde_json::to_string(f.name()).unwrap_or_default())
        .collect();
    let mut line = Vec::with_capacity(256);
    for b in batches {
        for i in 0..b.num_rows() {
            line.clear();
            line.push(b'{');
            for (c, name) in names.iter().enumerate() {
                if c > 0 {
                    line.push(b',');
                }
                line.extend_from_slice(name.as_bytes());
                line.push(b':');
                serde_json::to_writer(&mut line, &cell_json(b.column(c).as_ref(), i))
                    .map_err(std::io::Error::other)?;
            }
            line.extend_from_slice(b"}\n");
            w.write_all(&line)?;
        }
    }
    Ok(())
}

fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        std::borrow::Cow::Owned(format!("\"{}\"", s.replace('"', "\"\"")))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

/// CSV with a header row (RFC 4180 quoting; NULL is an empty field).
pub fn write_csv(
    w: &mut dyn Write,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> std::io::Result<()> {
    let header: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| csv_field(f.name()).into_owned())
        .collect();
    writeln!(w, "{}", header.join(","))?;
    let mut line = String::new();
    for b in batches {
        for i in 0..b.num_rows() {
            line.clear();
            for c in 0..b.num_columns() {
                if c > 0 {
                    line.push(',');
                }
                if let Some(t) = cell_text(b.column(c).as_ref(), i) {
                    line.push_str(&csv_field(&t));
                }
            }
            line.push('\n');
            w.write_all(line.as_bytes())?;
        }
    }
    Ok(())
}

/// Longest table cell, in characters.
const TABLE_CELL_CHARS: usize = 60;

/// An aligned table (cells escaped and cut at 60 characters).
pub fn write_table(
    w: &mut dyn Write,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> std::io::Result<()> {
    let heads: Vec<(String, Align)> = schema
        .fields()
        .iter()
        .map(|f| {
            let align = if matches!(
                f.data_type(),
                DataType::Int64 | DataType::Float64 | DataType::UInt64
            ) {
                Align::Right
            } else {
                Align::Left
            };
            (f.name().clone(), align)
        })
        .collect();
    let mut t = Grid::with_headers(heads.clone());
    for i in 0..heads.len() {
        t.limit(i, TABLE_CELL_CHARS);
    }
    let mut rows = 0usize;
    for b in batches {
        for i in 0..b.num_rows() {
            t.row(
                (0..b.num_columns())
                    .map(|c| {
                        table_cell_text(b.column(c).as_ref(), i).unwrap_or_else(|| "NULL".into())
                    })
                    .collect(),
            );
            rows += 1;
        }
    }
    t.footer(format!("({rows} row{})", if rows == 1 { "" } else { "s" }));
    w.write_all(t.render().as_bytes())
}

/// Column alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text columns.
    Left,
    /// Numbers.
    Right,
}

/// A simple aligned text table; cells are escaped and bounded.
#[derive(Debug, Clone)]
pub struct Grid {
    headers: Vec<(String, Align)>,
    limits: Vec<Option<usize>>,
    rows: Vec<Vec<String>>,
    footer: Option<String>,
}

impl Grid {
    /// A table with these column headers.
    pub fn new(headers: &[(&'static str, Align)]) -> Self {
        Self::with_headers(
            headers
                .iter()
                .map(|(h, a)| ((*h).to_string(), *a))
                .collect(),
        )
    }

    /// A table with owned column headers.
    pub fn with_headers(headers: Vec<(String, Align)>) -> Self {
        let n = headers.len();
        Grid {
            headers,
            limits: vec![None; n],
            rows: Vec::new(),
            footer: None,
        }
    }

    /// Cut cells of column `idx` to `chars` characters (for free text such
    /// as previews and reasons; identifiers are never cut).
    pub fn limit(&mut self, idx: usize, chars: usize) -> &mut Self {
        self.limits[idx] = Some(chars);
        self
    }

    /// Append a row (must have one cell per header).
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.headers.len());
        let cells = cells
            .into_iter()
            .zip(&self.limits)
            .map(|(c, lim)| {
                let escaped = escape_control(&c);
                match lim {
                    Some(n) => truncate_chars(&escaped, *n).into_owned(),
                    None => escaped.into_owned(),
                }
            })
            .collect();
        self.rows.push(cells);
    }

    /// A line printed under the table.
    pub fn footer(&mut self, s: impl Into<String>) {
        self.footer = Some(s.into());
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True with no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Render to text.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|(h, _)| display_width(h)).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                widths[i] = widths[i].max(display_width(c));
            }
        }
        let mut out = String::new();
        let line = |out: &mut String, cells: &mut dyn Iterator<Item = (&str, Align)>| {
            let mut parts = Vec::new();
            for (i, (c, align)) in cells.enumerate() {
                let pad = widths[i].saturating_sub(display_width(c));
                let last = i + 1 == widths.len();
                parts.push(match align {
                    Align::Right => format!("{}{c}", " ".repeat(pad)),
                    Align::Left if last => c.to_string(),
                    Align::Left => format!("{c}{}", " ".repeat(pad)),
                });
            }
            out.push_str(parts.join("  ").trim_end());
            out.push('\n');
        };
        line(
            &mut out,
            &mut self.headers.iter().map(|(h, a)| (h.as_str(), *a)),
        );
        for r in &self.rows {
            line(
                &mut out,
                &mut r
                    .iter()
                    .zip(self.headers.iter())
                    .map(|(c, (_, a))| (c.as_str(), *a)),
            );
        }
        if let Some(f) = &self.footer {
            out.push_str(f);
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_and_escapes() {
        let mut t = Grid::new(&[("Name", Align::Left), ("N", Align::Right)]);
        t.row(vec!["超时\x1b[2J".into(), "5".into()]);
        t.row(vec!["ab".into(), "123".into()]);
        insta::assert_snapshot!(t.render(), @r"
        Name             N
        超时\u{1b}[2J    5
        ab             123
        ");
    }

    #[test]
    fn table_floats_drop_binary_noise() {
        assert_eq!(float_display(0.1 + 0.2), "0.3");
        assert_eq!(float_display(3.0 * 1.1), "3.3");
        assert_eq!(float_display(0.013 / 4.0), "0.00325");
        assert_eq!(float_display(2.0), "2.0");
        assert_eq!(float_display(1.0 / 3.0), "0.333333333333");
        assert_eq!(float_display(1e20), "100000000000000000000");
        assert_eq!(float_display(f64::NAN), "NaN");
        assert_eq!(float_display(f64::NEG_INFINITY), "-inf");
    }
}
