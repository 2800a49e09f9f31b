//! JSON functions with a constant path, over a whole column at once: the
//! path is parsed once for the batch instead of being repeated and compared
//! on every row, and `CAST(json ->> path AS BIGINT)` reads each number where
//! the path ends without first building a column of its text. A filter on
//! a JSON member of a million steps spent a tenth of its time on those two.
//!
//! The answers are those of the row-by-row functions
//! (`functions::eval_call`) followed by the cast (`expr::cast_array`): the
//! same JSON follower finds each value, and the same parse turns it into
//! a number.
//!
//! A scan marks the columns its data layer says `serde_json` wrote
//! (`DataLayer::canonical_json`: the tables' JSON columns but those kept as
//! written) with [`mark`], so a path over one of them is read only up to
//! where it ends (`json_follow::Reading::Canonical`).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, StringArray};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;

use super::expr::{eval, text_to_int};
use super::functions::{follow, text_path};
use super::logical::{Expr, Func};
use super::value::Scalar;
use super::SqlError;
use crate::util::json_follow::Reading;
use crate::util::jsonpath::PathStep;

/// Field metadata key marking a column whose every value is JSON text
/// that `serde_json` wrote: valid, each member named once in its object
/// (see `DataLayer::canonical_json`).
const CANONICAL_JSON: &str = "pchronicle:canonical-json";

/// The columns of `b` that `canonical` says hold canonical JSON, marked so
/// for the expressions evaluated on the batch. Only a scan's workers see
/// the marks; the batches they hand on are not marked.
pub fn mark(b: &RecordBatch, canonical: &[bool]) -> Result<RecordBatch, SqlError> {
    if !canonical.iter().any(|&c| c) {
        return Ok(b.clone());
    }
    let fields: Vec<arrow::datatypes::Field> = b
        .schema()
        .fields()
        .iter()
        .zip(canonical.iter().copied().chain(std::iter::repeat(false)))
        .map(|(f, c)| {
            let f = f.as_ref().clone();
            if c && *f.data_type() == DataType::Utf8 {
                let mut meta = f.metadata().clone();
                meta.insert(CANONICAL_JSON.into(), "true".into());
                f.with_metadata(meta)
            } else {
                f
            }
        })
        .collect();
    let schema = Arc::new(arrow::datatypes::Schema::new(fields));
    let opts = arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(b.num_rows()));
    Ok(RecordBatch::try_new_with_options(
        schema,
        b.columns().to_vec(),
        &opts,
    )?)
}

/// The documents a JSON function reads, and how it may read them.
struct Docs {
    text: StringArray,
    reading: Reading,
}

/// How the documents `doc` reads from `batch` may be read.
fn reading(doc: &Expr, batch: &RecordBatch) -> Reading {
    match doc {
        Expr::Column { index, .. }
            if batch
                .schema()
                .fields()
                .get(*index)
                .is_some_and(|f| f.metadata().contains_key(CANONICAL_JSON)) =>
        {
            Reading::Canonical
        }
        _ => Reading::Whole,
    }
}

/// A JSON function with a constant path: what it reads, and how.
struct Constant<'e> {
    doc: &'e Expr,
    /// The path's steps, or `None` when it does not parse (every row is
    /// then NULL, as row by row).
    steps: Option<Vec<PathStep>>,
    /// `->>` and `json_extract_string`: a string without its quotes.
    as_text: bool,
}

impl<'e> Constant<'e> {
    /// `func(args)` when it is a JSON function whose path is a literal.
    fn of(func: Func, args: &'e [Expr]) -> Option<Constant<'e>> {
        let arrow_op = match func {
            Func::JsonArrow | Func::JsonLongArrow => true,
            Func::JsonExtract | Func::JsonExtractString => false,
            _ => return None,
        };
        let [doc, Expr::Literal(path)] = args else {
            return None;
        };
        let steps = match path {
            Scalar::Str(p) => text_path(p, arrow_op),
            Scalar::Int(n) => Some(vec![PathStep::signed(*n)]),
            // A NULL path gives NULL on every row; left to the general case.
            _ => return None,
        };
        Some(Constant {
            doc,
            steps,
            as_text: matches!(func, Func::JsonExtractString | Func::JsonLongArrow),
        })
    }

    /// The documents of `batch`, as text, and how they may be read.
    fn docs(&self, batch: &RecordBatch) -> Result<Docs, SqlError> {
        let docs = eval(self.doc, batch)?;
        let text = docs
            .as_any()
            .downcast_ref::<StringArray>()
            .cloned()
            .ok_or_else(|| {
                SqlError::Internal(format!("expected TEXT, got {}", docs.data_type()))
            })?;
        Ok(Docs {
            reading: reading(self.doc, batch),
            text,
        })
    }

    /// Each row's answer, handed to `each` (`None` for NULL).
    fn each<E>(
        &self,
        Docs {
            text: docs,
            reading,
        }: &Docs,
        mut each: impl FnMut(Option<std::borrow::Cow<'_, str>>) -> Result<(), E>,
    ) -> Result<(), E> {
        for i in 0..docs.len() {
            let v = match &self.steps {
                Some(steps) if !docs.is_null(i) => {
                    follow(docs.value(i), steps, self.as_text, *reading)
                }
                _ => None,
            };
            each(v)?;
        }
        Ok(())
    }
}

/// `func(args)` over `batch` when it is a JSON function with a constant
/// path; `None` otherwise.
pub fn call(func: Func, args: &[Expr], batch: &RecordBatch) -> Result<Option<ArrayRef>, SqlError> {
    let Some(c) = Constant::of(func, args) else {
        return Ok(None);
    };
    let docs = c.docs(batch)?;
    // Members are mostly short: a guess, not the documents' size (a batch
    // of tool output is megabytes).
    let rows = docs.text.len();
    let mut out = arrow::array::StringBuilder::with_capacity(rows, rows * 8);
    c.each(&docs, |v| -> Result<(), SqlError> {
        out.append_option(v);
        Ok(())
    })?;
    Ok(Some(Arc::new(out.finish())))
}

/// `CAST(e AS to)` over `batch` when `e` is a JSON function with a
/// constant path and `to` is BIGINT; `None` otherwise.
pub fn cast(e: &Expr, to: &DataType, batch: &RecordBatch) -> Result<Option<ArrayRef>, SqlError> {
    let (Expr::Call { func, args, .. }, DataType::Int64) = (e, to) else {
        return Ok(None);
    };
    let Some(c) = Constant::of(*func, args) else {
        return Ok(None);
    };
    let docs = c.docs(batch)?;
    let mut out = Vec::with_capacity(docs.text.len());
    c.each(&docs, |v| -> Result<(), SqlError> {
        out.push(v.as_deref().map(text_to_int).transpose()?);
        Ok(())
    })?;
    Ok(Some(Arc::new(Int64Array::from(out))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::expr::cast_array;
    use crate::sql::functions::eval_call;
    use arrow::datatypes::{Field, Schema};

    fn batch(docs: Vec<Option<&str>>) -> RecordBatch {
        let schema = Schema::new(vec![Field::new("extra", DataType::Utf8, true)]);
        RecordBatch::try_new(Arc::new(schema), vec![Arc::new(StringArray::from(docs))]).unwrap()
    }

    fn column() -> Expr {
        Expr::Column {
            index: 0,
            name: "extra".into(),
            ty: DataType::Utf8,
        }
    }

    /// The values of a BIGINT column.
    fn ints(a: &ArrayRef) -> Vec<Option<i64>> {
        let a = a.as_any().downcast_ref::<Int64Array>().unwrap();
        a.iter().collect()
    }

    /// Row by row, as before: the path repeated on every row.
    fn row_by_row(func: Func, path: &Scalar, b: &RecordBatch) -> ArrayRef {
        let docs = eval(&column(), b).unwrap();
        eval_call(func, &[docs, path.to_array(b.num_rows())], b.num_rows()).unwrap()
    }

    #[test]
    fn a_constant_path_gives_what_each_row_gives() {
        let b = batch(vec![
            Some(r#"{"priority": 2, "tags": ["a", "b"], "n": {"x": "\u00e9"}}"#),
            Some(r#"{"priority": "3", "priority": 7}"#),
            Some(r#"{"priority": null}"#),
            Some(r#"{"priority": 2"#),
            Some("[10, 20, 30]"),
            None,
            Some(r#"{"n": {"x": "y\"z"}, "tags": []}"#),
        ]);
        let paths = [
            Scalar::Str("priority".into()),
            Scalar::Str("$.n.x".into()),
            Scalar::Str("$.tags[1]".into()),
            Scalar::Str("$.tags".into()),
            Scalar::Str("$.[".into()),
            Scalar::Int(-1),
            Scalar::Int(0),
        ];
        let funcs = [
            Func::JsonArrow,
            Func::JsonLongArrow,
            Func::JsonExtract,
            Func::JsonExtractString,
        ];
        for func in funcs {
            for path in &paths {
                let args = [column(), Expr::Literal(path.clone())];
                let fast = call(func, &args, &b).unwrap().unwrap();
                assert_eq!(
                    fast.as_ref(),
                    row_by_row(func, path, &b).as_ref(),
                    "{func:?} {path:?}"
                );
            }
        }
    }

    /// What the evaluator gives for a constant path, and for a cast of
    /// it, is what the functions over the column give.
    #[test]
    fn the_evaluator_runs_a_constant_path_over_the_column() {
        let b = batch(vec![Some(r#"{"priority": 3}"#), None, Some("[]")]);
        let e = Expr::Cast {
            expr: Box::new(Expr::Call {
                func: Func::JsonLongArrow,
                args: vec![column(), Expr::Literal(Scalar::Str("priority".into()))],
                ty: DataType::Utf8,
            }),
            to: DataType::Int64,
        };
        let Expr::Cast { expr: call, .. } = &e else {
            unreachable!()
        };
        let Expr::Call { func, args, .. } = call.as_ref() else {
            unreachable!()
        };
        assert_eq!(
            eval(&e, &b).unwrap().as_ref(),
            cast(call, &DataType::Int64, &b).unwrap().unwrap().as_ref()
        );
        assert_eq!(
            eval(call, &b).unwrap().as_ref(),
            self::call(*func, args, &b).unwrap().unwrap().as_ref()
        );
        assert_eq!(ints(&eval(&e, &b).unwrap()), [Some(3), None, None]);
    }

    /// A column marked canonical is read only up to where the path ends:
    /// on canonical text the answers are the same, and text that is not
    /// canonical (never marked so) shows where the reading stopped.
    #[test]
    fn a_marked_column_is_read_up_to_where_the_path_ends() {
        let path = Expr::Literal(Scalar::Str("priority".into()));
        let on = |b: &RecordBatch| {
            call(Func::JsonLongArrow, &[column(), path.clone()], b)
                .unwrap()
                .unwrap()
        };
        let canonical = batch(vec![
            Some(r#"{"priority":2,"score":0.5,"tags":["a","b"]}"#),
            Some(r#"{"note":"x","priority":"3"}"#),
            Some(r#"{"score":1}"#),
            None,
        ]);
        let marked = mark(&canonical, &[true]).unwrap();
        assert_eq!(on(&marked).as_ref(), on(&canonical).as_ref());
        let twice = batch(vec![Some(r#"{"priority":1,"priority":2}"#)]);
        let text = |a: ArrayRef| {
            a.as_any()
                .downcast_ref::<StringArray>()
                .unwrap()
                .value(0)
                .to_string()
        };
        assert_eq!(text(on(&twice)), "2");
        assert_eq!(text(on(&mark(&twice, &[true]).unwrap())), "1");
        assert_eq!(text(on(&mark(&twice, &[false]).unwrap())), "2");
        // Columns other than text are left alone, and so is the data.
        let ints = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, true)])),
            vec![Arc::new(Int64Array::from(vec![1]))],
        )
        .unwrap();
        assert_eq!(mark(&ints, &[true]).unwrap(), ints);
        assert_eq!(marked.columns(), canonical.columns());
    }

    #[test]
    fn a_cast_of_a_member_gives_what_the_cast_of_its_text_gives() {
        let ok = batch(vec![
            Some(r#"{"priority": 2}"#),
            Some(r#"{"priority": " 41 "}"#),
            Some(r#"{"priority": -7, "priority": 9}"#),
            Some(r#"{"other": 1}"#),
            Some("not json"),
            None,
        ]);
        let call_of = |func| Expr::Call {
            func,
            args: vec![column(), Expr::Literal(Scalar::Str("priority".into()))],
            ty: DataType::Utf8,
        };
        for func in [
            Func::JsonLongArrow,
            Func::JsonExtractString,
            Func::JsonArrow,
        ] {
            let e = call_of(func);
            let path = Scalar::Str("priority".into());
            let want = cast_array(&row_by_row(func, &path, &ok), &DataType::Int64);
            let got = cast(&e, &DataType::Int64, &ok).map(Option::unwrap);
            match (got, want) {
                (Ok(g), Ok(w)) => assert_eq!(g.as_ref(), w.as_ref(), "{func:?}"),
                // `->` keeps the quotes of `" 41 "`: both fail alike.
                (Err(g), Err(w)) => assert_eq!(g.to_string(), w.to_string(), "{func:?}"),
                (g, w) => panic!("{func:?}: {g:?} against {w:?}"),
            }
        }
        let cast_ok = cast(&call_of(Func::JsonLongArrow), &DataType::Int64, &ok);
        assert_eq!(
            ints(&cast_ok.unwrap().unwrap()),
            [Some(2), Some(41), Some(9), None, None, None]
        );
        // A value that is not a whole number fails as the cast of its text.
        let bad = batch(vec![Some(r#"{"priority": 2.5}"#)]);
        let e = call_of(Func::JsonLongArrow);
        let want = cast_array(
            &row_by_row(Func::JsonLongArrow, &Scalar::Str("priority".into()), &bad),
            &DataType::Int64,
        )
        .unwrap_err();
        let got = cast(&e, &DataType::Int64, &bad).unwrap_err();
        assert_eq!(got.to_string(), want.to_string());
        assert!(got.to_string().contains("2.5"), "{got}");
        // Only BIGINT is fused, and only a constant path.
        assert!(cast(&e, &DataType::Float64, &bad).unwrap().is_none());
        let by_column = Expr::Call {
            func: Func::JsonLongArrow,
            args: vec![column(), column()],
            ty: DataType::Utf8,
        };
        assert!(cast(&by_column, &DataType::Int64, &bad).unwrap().is_none());
    }
}
