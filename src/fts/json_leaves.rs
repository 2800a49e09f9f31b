//! JSON cells indexed by path, so that a comparison on a JSON value is a
//! term or range lookup instead of a parse of every candidate's cell.
//!
//! Each JSON cell of a step (one of [`JSON_COLUMNS`](super::JSON_COLUMNS))
//! is parsed once, when the step is indexed, into its *leaves*: every
//! scalar (string, number, boolean, null) reachable from the root through
//! object members and array elements, under the path that names it. A
//! scalar element of an array is also indexed under the array's own path,
//! because a comparison on a path that names an array holds when the array
//! holds a matching scalar ("lax" arrays, docs/find.md). Nothing else is:
//! an object or array is never equal to a scalar and has no number.
//!
//! One term per leaf, in the raw field `json_leaf`:
//!
//! ```text
//! <column digit> <path as a JSON array of keys and indexes> U+001F <tag> <value>
//! ```
//!
//! with tag `n` and 16 hex digits of an order-preserving encoding of the
//! number as `f64` (so a numeric range is a range of terms), `s` and the
//! string, `t`/`f` for booleans and `z` for null. A JSON encoding never holds
//! a raw U+001F, so the path ends at the first one.
//!
//! A cell whose leaves cannot all be indexed (more than [`MAX_LEAVES`], a
//! path or string longer than [`MAX_LEAF_BYTES`]) gets the term
//! `<column digit>!` instead of any of its leaves: a search evaluates those
//! cells itself. A cell that is not JSON gets nothing: no comparison holds
//! on it.

use std::ops::Bound;

use serde_json::Value;

use crate::util::jsonpath::PathStep;

/// Most leaves indexed for one cell.
pub const MAX_LEAVES: usize = 4096;

/// Longest path or string value indexed, in bytes.
pub const MAX_LEAF_BYTES: usize = 512;

/// Separates the path from the value in a leaf term.
const SEP: char = '\u{1f}';

/// A comparison a leaf lookup can answer.
#[derive(Debug, Clone, PartialEq)]
pub enum LeafTest {
    /// Equal to this scalar: a string, a boolean, null, or a number whose
    /// `f64` equality is the comparison's own (see [`number_is_exact`]).
    Eq(Value),
    /// A number within the bounds.
    Range(Bound<f64>, Bound<f64>),
}

/// True when comparing `n` for equality as an `f64` gives the same answer as
/// comparing it as an integer would. Integers from 2^53 on are not: 2^53 + 1
/// rounds to 2^53, so a cell holding it would match `= 9007199254740992`.
/// Below 2^53 no other integer shares an integer's `f64`.
pub fn number_is_exact(n: &serde_json::Number) -> bool {
    const EXACT: u64 = 1 << 53;
    match (n.as_i64(), n.as_u64()) {
        (Some(i), _) => i.unsigned_abs() < EXACT,
        (None, Some(u)) => u < EXACT,
        (None, None) => true,
    }
}

/// The leaf terms of one cell of JSON column `column`, or the "evaluate it
/// yourself" term when they cannot all be indexed. Empty when the cell is
/// not JSON.
pub fn cell_terms(column: usize, cell: &str) -> Vec<String> {
    let Ok(v) = serde_json::from_str::<Value>(cell) else {
        return Vec::new();
    };
    let mut out = Leaves {
        column,
        path: Vec::new(),
        terms: Vec::new(),
        complete: true,
    };
    out.walk(&v);
    if !out.complete {
        return vec![unindexed_term(column)];
    }
    out.terms.sort_unstable();
    out.terms.dedup();
    out.terms
}

/// The term of cells of `column` that searches must evaluate themselves.
pub fn unindexed_term(column: usize) -> String {
    format!("{column}!")
}

/// The term bounds of `test` on `path` in `column`: one term for `Eq`, a
/// range of terms for `Range`. `None` when no cell can hold such a leaf
/// (a path or string too long to be indexed: only unindexed cells can).
pub fn test_bounds(
    column: usize,
    path: &[PathStep],
    test: &LeafTest,
) -> Option<(Bound<String>, Bound<String>)> {
    let prefix = prefix(column, path)?;
    match test {
        LeafTest::Eq(v) => {
            let t = leaf_term(&prefix, v)?;
            Some((Bound::Included(t.clone()), Bound::Included(t)))
        }
        LeafTest::Range(lo, hi) => {
            let num = |x: &f64| format!("{prefix}n{}", sortable_hex(*x));
            let lo = match lo {
                Bound::Included(x) => Bound::Included(num(x)),
                Bound::Excluded(x) => Bound::Excluded(num(x)),
                Bound::Unbounded => Bound::Included(format!("{prefix}n")),
            };
            let hi = match hi {
                Bound::Included(x) => Bound::Included(num(x)),
                Bound::Excluded(x) => Bound::Excluded(num(x)),
                // `o` follows `n`: every number of the path sorts before it.
                Bound::Unbounded => Bound::Excluded(format!("{prefix}o")),
            };
            Some((lo, hi))
        }
    }
}

struct Leaves {
    column: usize,
    path: Vec<PathStep>,
    terms: Vec<String>,
    complete: bool,
}

impl Leaves {
    fn walk(&mut self, v: &Value) {
        if !self.complete {
            return;
        }
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    self.path.push(PathStep::Key(k.clone()));
                    self.walk(x);
                    self.path.pop();
                }
            }
            Value::Array(items) => {
                for (i, x) in items.iter().enumerate() {
                    if !matches!(x, Value::Object(_) | Value::Array(_)) {
                        // The element also answers for the array's path.
                        self.leaf(x);
                    }
                    self.path.push(PathStep::Index(i));
                    self.walk(x);
                    self.path.pop();
                }
            }
            scalar => self.leaf(scalar),
        }
    }

    fn leaf(&mut self, v: &Value) {
        if self.terms.len() >= MAX_LEAVES {
            self.complete = false;
            return;
        }
        match prefix(self.column, &self.path).and_then(|p| leaf_term(&p, v)) {
            Some(t) => self.terms.push(t),
            None => self.complete = false,
        }
    }
}

/// `<column><path>` and the separator; `None` for a path too long to index.
fn prefix(column: usize, path: &[PathStep]) -> Option<String> {
    let steps: Vec<Value> = path
        .iter()
        .map(|s| match s {
            PathStep::Key(k) => Value::String(k.clone()),
            PathStep::Index(i) => Value::from(*i),
            // Not a path of a document's own leaves: nothing is indexed
            // under it.
            PathStep::FromEnd(i) => Value::String(format!("#-{i}")),
        })
        .collect();
    let p = Value::Array(steps).to_string();
    (p.len() <= MAX_LEAF_BYTES).then(|| format!("{column}{p}{SEP}"))
}

/// The term of scalar `v` under `prefix`; `None` for a string too long to
/// index, or a value that is not a scalar.
fn leaf_term(prefix: &str, v: &Value) -> Option<String> {
    Some(match v {
        Value::Null => format!("{prefix}z"),
        Value::Bool(true) => format!("{prefix}t"),
        Value::Bool(false) => format!("{prefix}f"),
        Value::Number(n) => format!("{prefix}n{}", sortable_hex(n.as_f64()?)),
        Value::String(s) if s.len() <= MAX_LEAF_BYTES => format!("{prefix}s{s}"),
        _ => return None,
    })
}

/// 16 hex digits that sort as the numbers do (negative zero is zero).
fn sortable_hex(x: f64) -> String {
    let x = if x == 0.0 { 0.0 } else { x };
    let bits = x.to_bits();
    let key = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    format!("{key:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_sort_as_hex() {
        let xs = [
            -1e300, -2.5, -1.0, -0.5, -1e-300, 0.0, 1e-300, 0.5, 1.0, 2.0, 2.5, 1e300,
        ];
        for w in xs.windows(2) {
            assert!(sortable_hex(w[0]) < sortable_hex(w[1]), "{w:?}");
        }
        assert_eq!(sortable_hex(-0.0), sortable_hex(0.0));
    }

    #[test]
    fn leaves_of_a_cell() {
        let t = cell_terms(1, r#"{"p": 2, "tags": ["x", {"y": true}], "n": null}"#);
        let shown: Vec<String> = t.iter().map(|s| s.replace(SEP, "|")).collect();
        assert_eq!(
            shown,
            [
                r#"1["n"]|z"#.to_string(),
                format!(r#"1["p"]|n{}"#, sortable_hex(2.0)),
                r#"1["tags",0]|sx"#.to_string(),
                r#"1["tags",1,"y"]|t"#.to_string(),
                r#"1["tags"]|sx"#.to_string(),
            ]
        );
        assert!(cell_terms(0, "not json").is_empty());
        let many = format!("[{}]", vec!["1"; MAX_LEAVES].join(","));
        assert_eq!(cell_terms(0, &many), ["0!"]);
        let long = format!(r#"{{"s": "{}"}}"#, "a".repeat(MAX_LEAF_BYTES + 1));
        assert_eq!(cell_terms(0, &long), ["0!"]);
    }

    #[test]
    fn exactness_of_numbers() {
        let n = |s: &str| serde_json::from_str::<serde_json::Number>(s).unwrap();
        assert!(number_is_exact(&n("9007199254740991")));
        assert!(!number_is_exact(&n("9007199254740992")));
        assert!(!number_is_exact(&n("9007199254740993")));
        assert!(!number_is_exact(&n("-9007199254740993")));
        assert!(!number_is_exact(&n("18446744073709551615")));
        assert!(number_is_exact(&n("2.5")));
    }
}
