//! Text a data layer hands on as bytes (the text views a store keeps as
//! `Binary`, see `DataLayer::scan`). A scan answers the `LIKE`s of its
//! filter that a byte search can answer on the bytes, then checks as UTF-8
//! only the rows kept of the columns still used: a `LIKE` over tool output
//! keeps a few rows of a million, and checking every byte it reads was a
//! fifth of its time.
//!
//! A byte search is exact on UTF-8: no character's encoding starts inside
//! another's, so a text contains, starts or ends with another exactly when
//! its bytes do.

use arrow::array::{new_null_array, Array, ArrayRef, AsArray, BinaryArray, BooleanArray};
use arrow::compute::kernels::{boolean, cmp, comparison};
use arrow::compute::FilterBuilder;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use super::super::expr::true_mask;
use super::super::logical::Expr;
use super::super::value::Scalar;
use super::super::SqlError;

/// A scan filter split for batches with text as bytes.
pub struct BytesFilter {
    /// Conjuncts a byte search answers, on a column that comes as bytes.
    likes: Vec<ByteLike>,
    /// The other conjuncts (all of them for batches without bytes).
    rest: Option<Expr>,
    /// The whole filter, for batches without bytes.
    whole: Option<Expr>,
}

/// `column [NOT] LIKE pattern` with a pattern a byte search answers.
struct ByteLike {
    column: usize,
    search: Search,
    negated: bool,
    /// The conjunct, for batches where the column is text.
    expr: Expr,
}

/// What a `LIKE` pattern without `_` asks of a value's bytes.
#[derive(Debug, PartialEq, Eq)]
enum Search {
    Equals(Vec<u8>),
    StartsWith(Vec<u8>),
    EndsWith(Vec<u8>),
    Contains(Vec<u8>),
}

impl Search {
    /// The search `pattern` is, when `%` appears only at its ends and `_`
    /// nowhere. SQL `LIKE` here has no escape character (`ESCAPE` is
    /// refused when the query is bound; were it ever taken, this would need
    /// to learn it).
    fn of(pattern: &str) -> Option<Search> {
        if pattern.contains('_') {
            return None;
        }
        let (lead, rest) = match pattern.strip_prefix('%') {
            Some(r) => (true, r),
            None => (false, pattern),
        };
        let (trail, core) = match rest.strip_suffix('%') {
            Some(c) => (true, c),
            None => (false, rest),
        };
        if core.contains('%') {
            return None;
        }
        let core = core.as_bytes().to_vec();
        Some(match (lead, trail) {
            (false, false) => Search::Equals(core),
            (false, true) => Search::StartsWith(core),
            (true, false) => Search::EndsWith(core),
            (true, true) => Search::Contains(core),
        })
    }

    fn run(&self, a: &BinaryArray) -> Result<BooleanArray, SqlError> {
        Ok(match self {
            Search::Equals(p) => cmp::eq(a, &BinaryArray::new_scalar(p))?,
            Search::StartsWith(p) => comparison::starts_with(a, &BinaryArray::new_scalar(p))?,
            Search::EndsWith(p) => comparison::ends_with(a, &BinaryArray::new_scalar(p))?,
            Search::Contains(p) => comparison::contains(a, &BinaryArray::new_scalar(p))?,
        })
    }
}

impl BytesFilter {
    /// Split `filter` into the `LIKE`s a byte search answers and the rest.
    pub fn new(filter: Option<&Expr>) -> BytesFilter {
        let mut likes = Vec::new();
        let mut rest: Vec<Expr> = Vec::new();
        for c in filter.cloned().map(Expr::conjuncts).unwrap_or_default() {
            match byte_like(&c) {
                Some((column, search, negated)) => likes.push(ByteLike {
                    column,
                    search,
                    negated,
                    expr: c,
                }),
                None => rest.push(c),
            }
        }
        BytesFilter {
            likes,
            rest: Expr::and_all(rest),
            whole: filter.cloned(),
        }
    }

    /// The filter to run on `b` after [`BytesFilter::settle`] gave it.
    pub fn remaining(&self, settled: bool) -> Option<&Expr> {
        if settled {
            self.rest.as_ref()
        } else {
            self.whole.as_ref()
        }
    }

    /// `b` as `schema` has it, when some of its text columns come as
    /// bytes (`None` otherwise): the rows the byte `LIKE`s keep, with the
    /// columns in `needed` (all when `None`) or read by the rest of the
    /// filter checked into text, and the others NULL. `schema` allows NULL
    /// wherever `needed` is given.
    pub fn settle(
        &self,
        b: &RecordBatch,
        schema: &SchemaRef,
        needed: Option<&[bool]>,
    ) -> Result<Option<RecordBatch>, SqlError> {
        let is_bytes = |i: usize| {
            b.column(i).data_type() == &DataType::Binary
                && schema.field(i).data_type() == &DataType::Utf8
        };
        if !(0..b.num_columns()).any(is_bytes) {
            return Ok(None);
        }
        let mut mask: Option<BooleanArray> = None;
        for l in &self.likes {
            let m = if is_bytes(l.column) {
                let m = l.search.run(b.column(l.column).as_binary::<i32>())?;
                if l.negated {
                    boolean::not(&m)?
                } else {
                    m
                }
            } else {
                // Text here (another Source's rows, or a column read as text).
                super::super::expr::eval_predicate(&l.expr, b)?
            };
            let m = true_mask(&m);
            mask = Some(match mask {
                Some(a) => boolean::and(&a, &m)?,
                None => m,
            });
        }
        let mut used = vec![false; b.num_columns()];
        let mut read = Vec::new();
        if let Some(r) = &self.rest {
            r.columns(&mut read);
        }
        for i in read {
            used[i] = true;
        }
        for (i, u) in used.iter_mut().enumerate() {
            *u |= needed.is_none_or(|n| n.get(i).copied().unwrap_or(true));
        }
        let rows = mask.as_ref().map_or(b.num_rows(), BooleanArray::true_count);
        let mask = mask.map(|m| FilterBuilder::new(&m).optimize().build());
        let columns = b
            .columns()
            .iter()
            .enumerate()
            .map(|(i, c)| -> Result<ArrayRef, SqlError> {
                if !used[i] {
                    return Ok(new_null_array(schema.field(i).data_type(), rows));
                }
                let c = match &mask {
                    Some(m) => m.filter(c)?,
                    None => c.clone(),
                };
                Ok(if is_bytes(i) {
                    std::sync::Arc::new(
                        crate::table::checked_text(c.as_binary::<i32>()).map_err(not_text)?,
                    )
                } else {
                    c
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let opts = RecordBatchOptions::new().with_row_count(Some(rows));
        Ok(Some(RecordBatch::try_new_with_options(
            schema.clone(),
            columns,
            &opts,
        )?))
    }
}

/// Bytes a data layer gave as text are not UTF-8: only a damaged store
/// holds such (its code for inconsistent data, as its own reads report).
fn not_text(e: arrow::error::ArrowError) -> SqlError {
    SqlError::Source {
        code: "PC-STO-005",
        message: format!("store data is inconsistent: a text view is not UTF-8 ({e})"),
    }
}

/// `column [NOT] LIKE 'pattern'` (not ILIKE) with a byte search for a
/// pattern.
fn byte_like(e: &Expr) -> Option<(usize, Search, bool)> {
    let Expr::Like {
        expr,
        pattern,
        negated,
        case_insensitive: false,
    } = e
    else {
        return None;
    };
    let (Expr::Column { index, .. }, Expr::Literal(Scalar::Str(p))) =
        (expr.as_ref(), pattern.as_ref())
    else {
        return None;
    };
    Some((*index, Search::of(p)?, *negated))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_with_percent_only_at_the_ends_are_byte_searches() {
        let s = |p: &str| Search::of(p);
        assert_eq!(s("%超时%"), Some(Search::Contains("超时".into())));
        assert_eq!(s("claude%"), Some(Search::StartsWith(b"claude".to_vec())));
        assert_eq!(s("%.py"), Some(Search::EndsWith(b".py".to_vec())));
        assert_eq!(s("exact"), Some(Search::Equals(b"exact".to_vec())));
        assert_eq!(s("%"), Some(Search::EndsWith(vec![])));
        assert_eq!(s("%%"), Some(Search::Contains(vec![])));
        assert_eq!(s(r"%a\b%"), Some(Search::Contains(br"a\b".to_vec())));
        // `_` is one character, of one to four bytes; `%` inside needs
        // more than one search.
        assert_eq!(s("%a_b%"), None);
        assert_eq!(s("a%b"), None);
    }

    fn column(index: usize, name: &str, ty: DataType) -> Expr {
        Expr::Column {
            index,
            name: name.into(),
            ty,
        }
    }

    fn like(index: usize, pattern: &str, negated: bool) -> Expr {
        Expr::Like {
            expr: Box::new(column(index, "t", DataType::Utf8)),
            pattern: Box::new(Expr::Literal(Scalar::Str(pattern.into()))),
            negated,
            case_insensitive: false,
        }
    }

    /// Rows of text kept as bytes, one of them not UTF-8, and a number.
    fn batch() -> (RecordBatch, SchemaRef) {
        use arrow::datatypes::{Field, Schema};
        let t = BinaryArray::from(vec![
            Some("请求超时 after 30s".as_bytes()),
            Some(&b"\xff broken"[..]),
            None,
            Some("Traceback (most recent call last)".as_bytes()),
        ]);
        let n = arrow::array::Int64Array::from(vec![1, 2, 3, 4]);
        let read = |ty| {
            Schema::new(vec![
                Field::new("t", ty, true),
                Field::new("n", DataType::Int64, true),
            ])
        };
        let b = RecordBatch::try_new(
            std::sync::Arc::new(read(DataType::Binary)),
            vec![std::sync::Arc::new(t), std::sync::Arc::new(n)],
        )
        .unwrap();
        (b, std::sync::Arc::new(read(DataType::Utf8)))
    }

    fn texts(b: &RecordBatch) -> Vec<Option<&str>> {
        b.column(0).as_string::<i32>().iter().collect()
    }

    #[test]
    fn byte_likes_keep_rows_before_any_is_checked() {
        let (b, schema) = batch();
        // A LIKE the bytes answer, and a conjunct on another column.
        let n_big = Expr::Binary {
            op: super::super::super::logical::BinOp::Gt,
            left: Box::new(column(1, "n", DataType::Int64)),
            right: Box::new(Expr::Literal(Scalar::Int(0))),
            ty: DataType::Boolean,
        };
        let filter = Expr::and_all(vec![like(0, "%超时%", false), n_big]).unwrap();
        let f = BytesFilter::new(Some(&filter));
        assert_eq!(f.likes.len(), 1);
        let out = f.settle(&b, &schema, None).unwrap().unwrap();
        assert_eq!(texts(&out), [Some("请求超时 after 30s")]);
        assert!(f.remaining(true).is_some() && f.remaining(false).is_some());
        // Starts with, and NOT: NULL stays out of both.
        let f = BytesFilter::new(Some(&like(0, "Traceback%", false)));
        let out = f.settle(&b, &schema, None).unwrap().unwrap();
        assert_eq!(texts(&out), [Some("Traceback (most recent call last)")]);
        assert!(f.remaining(true).is_none());
        // The broken row is dropped by the search, so nothing checks it;
        // kept, it is an error.
        let f = BytesFilter::new(Some(&like(0, "%broken", true)));
        let out = f.settle(&b, &schema, None).unwrap().unwrap();
        assert_eq!(out.num_rows(), 2);
        let f = BytesFilter::new(Some(&like(0, "%broken", false)));
        let e = f.settle(&b, &schema, None).unwrap_err();
        assert_eq!(e.code(), "PC-STO-005", "{e}");
        // Not needed above the scan: never checked, handed on as NULL.
        let out = f
            .settle(&b, &schema, Some(&[false, true]))
            .unwrap()
            .unwrap();
        assert_eq!(out.num_rows(), 1);
        assert_eq!(out.column(0).null_count(), 1);
    }

    #[test]
    fn other_filters_check_the_rows_they_read() {
        let (b, schema) = batch();
        // `_` is a character: the column is checked first, and the
        // broken row fails the scan.
        let f = BytesFilter::new(Some(&like(0, "%超_%", false)));
        assert!(f.likes.is_empty());
        assert!(f.settle(&b, &schema, Some(&[false, true])).is_err());
        // Text that comes as text is left to the filter as it is.
        let text = RecordBatch::try_new(
            schema.clone(),
            vec![
                std::sync::Arc::new(arrow::array::StringArray::from(vec!["a"])),
                std::sync::Arc::new(arrow::array::Int64Array::from(vec![1])),
            ],
        )
        .unwrap();
        let f = BytesFilter::new(Some(&like(0, "%a%", false)));
        assert!(f.settle(&text, &schema, None).unwrap().is_none());
        assert!(f.remaining(false).is_some());
    }
}
