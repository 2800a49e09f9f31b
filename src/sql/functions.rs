//! Scalar functions: binding (argument checks and result types) and
//! vectorized evaluation.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, StringArray,
    TimestampNanosecondArray,
};
use arrow::datatypes::{DataType, TimestampNanosecondType};
use chrono::{DateTime, Datelike, Timelike};

use super::error::suggest;
use super::logical::{Expr, Func};
use super::value::{common_type, is_numeric, ts_type, type_name};
use super::SqlError;
use crate::util::json_follow::Reading;
use crate::util::jsonpath::{self, Indexes, PathStep};

const NAMES: &[&str] = &[
    "lower",
    "upper",
    "length",
    "char_length",
    "substr",
    "substring",
    "trim",
    "coalesce",
    "ifnull",
    "nullif",
    "abs",
    "round",
    "date_trunc",
    "date_part",
    "json_extract",
    "json_extract_string",
    "json_extract_path_text",
    "concat",
    "replace",
    "starts_with",
    "contains",
];

fn arity(name: &str, args: &[Expr], min: usize, max: usize) -> Result<(), SqlError> {
    if args.len() < min || args.len() > max {
        let want = if min == max {
            format!("{min}")
        } else {
            format!("{min} to {max}")
        };
        return Err(SqlError::plan(format!(
            "{name}() takes {want} arguments, got {}",
            args.len()
        )));
    }
    Ok(())
}

fn text_arg(name: &str, e: Expr) -> Result<Expr, SqlError> {
    match e.data_type() {
        DataType::Utf8 => Ok(e),
        DataType::Null
        | DataType::Int64
        | DataType::Float64
        | DataType::Boolean
        | DataType::Timestamp(..) => Ok(Expr::Cast {
            expr: Box::new(e),
            to: DataType::Utf8,
        }),
        other => Err(SqlError::type_error(format!(
            "{name}() needs TEXT, found {}",
            type_name(&other)
        ))),
    }
}

fn int_arg(name: &str, e: Expr) -> Result<Expr, SqlError> {
    match e.data_type() {
        DataType::Int64 => Ok(e),
        DataType::Null | DataType::Float64 => Ok(Expr::Cast {
            expr: Box::new(e),
            to: DataType::Int64,
        }),
        other => Err(SqlError::type_error(format!(
            "{name}() needs an integer, found {}",
            type_name(&other)
        ))),
    }
}

/// Bind a function call by name.
pub fn bind_function(name: &str, args: Vec<Expr>) -> Result<Expr, SqlError> {
    let func = match name {
        "lower" => Func::Lower,
        "upper" => Func::Upper,
        "length" | "char_length" => Func::Length,
        "substr" | "substring" => Func::Substr,
        "trim" => Func::Trim,
        "coalesce" | "ifnull" => Func::Coalesce,
        "nullif" => Func::NullIf,
        "abs" => Func::Abs,
        "round" => Func::Round,
        "date_trunc" => Func::DateTrunc,
        "date_part" => Func::Extract,
        "json_extract" => Func::JsonExtract,
        "json_extract_string" | "json_extract_path_text" => Func::JsonExtractString,
        "->" => Func::JsonArrow,
        "->>" => Func::JsonLongArrow,
        "concat" => Func::Concat,
        "replace" => Func::Replace,
        "starts_with" => Func::StartsWith,
        "contains" => Func::Contains,
        other => {
            return Err(SqlError::UnknownFunction {
                name: other.to_string(),
                hint: suggest(other, NAMES.iter().copied()),
            });
        }
    };
    typed_call(func, args)
}

/// Check arguments and compute the result type of a call.
pub fn typed_call(func: Func, args: Vec<Expr>) -> Result<Expr, SqlError> {
    let name = func.name();
    let (args, ty) = match func {
        Func::Lower | Func::Upper | Func::Trim => {
            arity(name, &args, 1, 1)?;
            (
                vec![text_arg(name, args.into_iter().next().expect("checked"))?],
                DataType::Utf8,
            )
        }
        Func::Length => {
            arity(name, &args, 1, 1)?;
            (
                vec![text_arg(name, args.into_iter().next().expect("checked"))?],
                DataType::Int64,
            )
        }
        Func::Substr => {
            arity(name, &args, 2, 3)?;
            let mut it = args.into_iter();
            let mut out = vec![text_arg(name, it.next().expect("checked"))?];
            for a in it {
                out.push(int_arg(name, a)?);
            }
            (out, DataType::Utf8)
        }
        Func::Coalesce => {
            if args.is_empty() {
                return Err(SqlError::plan("coalesce() needs at least one argument"));
            }
            let mut t = DataType::Null;
            for a in &args {
                t = common_type(&t, &a.data_type()).ok_or_else(|| {
                    SqlError::type_error("coalesce() arguments have different types")
                })?;
            }
            let args = args
                .into_iter()
                .map(|a| {
                    if a.data_type() == t {
                        a
                    } else {
                        Expr::Cast {
                            expr: Box::new(a),
                            to: t.clone(),
                        }
                    }
                })
                .collect();
            (args, t)
        }
        Func::NullIf => {
            arity(name, &args, 2, 2)?;
            let t = common_type(&args[0].data_type(), &args[1].data_type())
                .ok_or_else(|| SqlError::type_error("nullif() arguments have different types"))?;
            let args = args
                .into_iter()
                .map(|a| {
                    if a.data_type() == t {
                        a
                    } else {
                        Expr::Cast {
                            expr: Box::new(a),
                            to: t.clone(),
                        }
                    }
                })
                .collect();
            (args, t)
        }
        Func::Abs => {
            arity(name, &args, 1, 1)?;
            let t = args[0].data_type();
            if !is_numeric(&t) && t != DataType::Null {
                return Err(SqlError::type_error(format!("abs() of {}", type_name(&t))));
            }
            (
                args,
                if t == DataType::Null {
                    DataType::Int64
                } else {
                    t
                },
            )
        }
        Func::Round => {
            arity(name, &args, 1, 2)?;
            let mut it = args.into_iter();
            let x = it.next().expect("checked");
            let t = x.data_type();
            if !is_numeric(&t) && t != DataType::Null {
                return Err(SqlError::type_error(format!(
                    "round() of {}",
                    type_name(&t)
                )));
            }
            let mut out = vec![Expr::Cast {
                expr: Box::new(x),
                to: DataType::Float64,
            }];
            if let Some(d) = it.next() {
                out.push(int_arg(name, d)?);
            }
            (out, DataType::Float64)
        }
        Func::DateTrunc | Func::Extract => {
            arity(name, &args, 2, 2)?;
            let mut it = args.into_iter();
            let unit = it.next().expect("checked");
            let Expr::Literal(super::value::Scalar::Str(u)) = &unit else {
                return Err(SqlError::plan(format!(
                    "the first argument of {name}() must be a string literal unit"
                )));
            };
            let u = u.to_ascii_lowercase();
            let ok = [
                "year",
                "quarter",
                "month",
                "week",
                "day",
                "hour",
                "minute",
                "second",
                "millisecond",
                "microsecond",
            ];
            let extra = ["epoch", "dow", "doy", "dayofweek", "dayofyear"];
            if !ok.contains(&u.as_str()) && !(func == Func::Extract && extra.contains(&u.as_str()))
            {
                return Err(SqlError::plan(format!("unknown unit `{u}` for {name}()")));
            }
            let ts = it.next().expect("checked");
            let ts = match ts.data_type() {
                DataType::Timestamp(..) => ts,
                DataType::Utf8 | DataType::Null => Expr::Cast {
                    expr: Box::new(ts),
                    to: ts_type(),
                },
                other => {
                    return Err(SqlError::type_error(format!(
                        "{name}() needs a TIMESTAMP, found {}",
                        type_name(&other)
                    )))
                }
            };
            let ty = if func == Func::DateTrunc {
                ts_type()
            } else if u == "epoch" {
                DataType::Float64
            } else {
                DataType::Int64
            };
            (vec![Expr::Literal(super::value::Scalar::Str(u)), ts], ty)
        }
        Func::JsonExtract | Func::JsonExtractString | Func::JsonArrow | Func::JsonLongArrow => {
            arity(name, &args, 2, 2)?;
            let mut it = args.into_iter();
            let doc = text_arg(name, it.next().expect("checked"))?;
            let path = it.next().expect("checked");
            if !matches!(path.data_type(), DataType::Utf8 | DataType::Int64) {
                return Err(SqlError::type_error(format!(
                    "the path of {name} must be TEXT or an integer index"
                )));
            }
            (vec![doc, path], DataType::Utf8)
        }
        Func::Concat => {
            let out = args
                .into_iter()
                .map(|a| text_arg(name, a))
                .collect::<Result<Vec<_>, _>>()?;
            (out, DataType::Utf8)
        }
        Func::Replace => {
            arity(name, &args, 3, 3)?;
            (
                args.into_iter()
                    .map(|a| text_arg(name, a))
                    .collect::<Result<Vec<_>, _>>()?,
                DataType::Utf8,
            )
        }
        Func::StartsWith | Func::Contains => {
            arity(name, &args, 2, 2)?;
            (
                args.into_iter()
                    .map(|a| text_arg(name, a))
                    .collect::<Result<Vec<_>, _>>()?,
                DataType::Boolean,
            )
        }
    };
    Ok(Expr::Call { func, args, ty })
}

fn strings(a: &ArrayRef) -> Result<&StringArray, SqlError> {
    a.as_any()
        .downcast_ref::<StringArray>()
        .ok_or_else(|| SqlError::Internal(format!("expected TEXT, got {}", a.data_type())))
}

fn map_str(a: &ArrayRef, f: impl Fn(&str) -> String) -> Result<ArrayRef, SqlError> {
    let s = strings(a)?;
    Ok(Arc::new(
        s.iter().map(|v| v.map(&f)).collect::<StringArray>(),
    ))
}

/// Evaluate a call on evaluated arguments (all of length `n`).
pub fn eval_call(func: Func, args: &[ArrayRef], n: usize) -> Result<ArrayRef, SqlError> {
    match func {
        Func::Lower => map_str(&args[0], str::to_lowercase),
        Func::Upper => map_str(&args[0], str::to_uppercase),
        Func::Trim => map_str(&args[0], |s| s.trim_matches(' ').to_string()),
        Func::Length => {
            let s = strings(&args[0])?;
            Ok(Arc::new(
                s.iter()
                    .map(|v| v.map(|x| x.chars().count() as i64))
                    .collect::<Int64Array>(),
            ))
        }
        Func::Substr => {
            let s = strings(&args[0])?;
            let start = args[1].as_primitive::<arrow::datatypes::Int64Type>();
            let len = args
                .get(2)
                .map(arrow::array::AsArray::as_primitive::<arrow::datatypes::Int64Type>);
            let out: StringArray = (0..n)
                .map(|i| {
                    if s.is_null(i) || start.is_null(i) || len.is_some_and(|l| l.is_null(i)) {
                        return None;
                    }
                    Some(substr(s.value(i), start.value(i), len.map(|l| l.value(i))))
                })
                .collect();
            Ok(Arc::new(out))
        }
        Func::Coalesce => {
            let mut out = args[0].clone();
            for a in &args[1..] {
                let mask = arrow::compute::is_not_null(&out)?;
                out = arrow::compute::kernels::zip::zip(&mask, &out, a)?;
            }
            Ok(out)
        }
        Func::NullIf => {
            let eq = super::expr::compare(&args[0], &args[1], super::logical::BinOp::Eq)?;
            let eq = arrow::compute::kernels::boolean::is_not_null(&eq)
                .and_then(|nn| arrow::compute::kernels::boolean::and(&nn, &eq))?;
            Ok(arrow::compute::nullif(&args[0], &eq)?)
        }
        Func::Abs => match args[0].data_type() {
            DataType::Int64 => {
                let a = args[0].as_primitive::<arrow::datatypes::Int64Type>();
                Ok(Arc::new(
                    a.iter()
                        .map(|v| v.map(i64::wrapping_abs))
                        .collect::<Int64Array>(),
                ))
            }
            _ => {
                let a = args[0].as_primitive::<arrow::datatypes::Float64Type>();
                Ok(Arc::new(
                    a.iter().map(|v| v.map(f64::abs)).collect::<Float64Array>(),
                ))
            }
        },
        Func::Round => {
            let a = args[0].as_primitive::<arrow::datatypes::Float64Type>();
            let d = args
                .get(1)
                .map(arrow::array::AsArray::as_primitive::<arrow::datatypes::Int64Type>);
            let out: Float64Array = (0..n)
                .map(|i| {
                    if a.is_null(i) || d.is_some_and(|d| d.is_null(i)) {
                        return None;
                    }
                    let digits = d.map_or(0, |d| d.value(i)).clamp(-18, 18) as i32;
                    let m = 10f64.powi(digits);
                    let x = a.value(i) * m;
                    // Half away from zero, like DuckDB.
                    Some(x.round() / m)
                })
                .collect();
            Ok(Arc::new(out))
        }
        Func::DateTrunc | Func::Extract => {
            let unit = strings(&args[0])?.value(0).to_string();
            let ts = args[1].as_primitive::<TimestampNanosecondType>();
            if func == Func::DateTrunc {
                let out: TimestampNanosecondArray =
                    ts.iter().map(|v| v.and_then(|x| trunc(x, &unit))).collect();
                Ok(Arc::new(out.with_timezone("UTC")))
            } else if unit == "epoch" {
                Ok(Arc::new(
                    ts.iter()
                        .map(|v| v.map(|x| x as f64 / 1e9))
                        .collect::<Float64Array>(),
                ))
            } else {
                Ok(Arc::new(
                    ts.iter()
                        .map(|v| v.and_then(|x| extract(x, &unit)))
                        .collect::<Int64Array>(),
                ))
            }
        }
        Func::JsonExtract | Func::JsonExtractString | Func::JsonArrow | Func::JsonLongArrow => {
            let docs = strings(&args[0])?;
            let as_text = matches!(func, Func::JsonExtractString | Func::JsonLongArrow);
            let arrow_op = matches!(func, Func::JsonArrow | Func::JsonLongArrow);
            let path_arr = &args[1];
            // The path is usually the same on every row: parsed once.
            let mut last: Option<(PathArg, Option<Vec<PathStep>>)> = None;
            let out: StringArray = (0..n)
                .map(|i| {
                    if docs.is_null(i) || path_arr.is_null(i) {
                        return None;
                    }
                    let arg = PathArg::of(path_arr, i);
                    if last.as_ref().is_none_or(|(a, _)| *a != arg) {
                        let steps = arg.steps(arrow_op);
                        last = Some((arg, steps));
                    }
                    let steps = last.as_ref()?.1.as_ref()?;
                    follow(docs.value(i), steps, as_text, Reading::Whole)
                })
                .collect();
            Ok(Arc::new(out))
        }
        Func::Concat => {
            let cols: Vec<&StringArray> = args.iter().map(strings).collect::<Result<_, _>>()?;
            let out: StringArray = (0..n)
                .map(|i| {
                    let mut s = String::new();
                    for c in &cols {
                        if !c.is_null(i) {
                            s.push_str(c.value(i));
                        }
                    }
                    Some(s)
                })
                .collect();
            Ok(Arc::new(out))
        }
        Func::Replace => {
            let (s, from, to) = (strings(&args[0])?, strings(&args[1])?, strings(&args[2])?);
            let out: StringArray = (0..n)
                .map(|i| {
                    if s.is_null(i) || from.is_null(i) || to.is_null(i) {
                        None
                    } else if from.value(i).is_empty() {
                        Some(s.value(i).to_string())
                    } else {
                        Some(s.value(i).replace(from.value(i), to.value(i)))
                    }
                })
                .collect();
            Ok(Arc::new(out))
        }
        Func::StartsWith | Func::Contains => {
            let (s, p) = (strings(&args[0])?, strings(&args[1])?);
            let out: BooleanArray = (0..n)
                .map(|i| {
                    if s.is_null(i) || p.is_null(i) {
                        None
                    } else if func == Func::StartsWith {
                        Some(s.value(i).starts_with(p.value(i)))
                    } else {
                        Some(s.value(i).contains(p.value(i)))
                    }
                })
                .collect();
            Ok(Arc::new(out))
        }
    }
}

/// SQL substring: 1-based start; a start before 1 eats into the length.
fn substr(s: &str, start: i64, len: Option<i64>) -> String {
    let chars: Vec<char> = s.chars().collect();
    let n = chars.len() as i64;
    let (mut from, mut to) = (
        start,
        len.map_or(i64::MAX, |l| start.saturating_add(l.max(0))),
    );
    if start <= 0 && len.is_none() {
        from = 1;
    }
    from = from.max(1);
    to = to.min(n + 1);
    if to <= from {
        return String::new();
    }
    chars[(from - 1) as usize..(to - 1) as usize]
        .iter()
        .collect()
}

fn dt(ns: i64) -> Option<DateTime<chrono::Utc>> {
    DateTime::from_timestamp(
        ns.div_euclid(1_000_000_000),
        ns.rem_euclid(1_000_000_000) as u32,
    )
}

fn trunc(ns: i64, unit: &str) -> Option<i64> {
    let d = dt(ns)?;
    let naive = d.naive_utc();
    let date = naive.date();
    let t = match unit {
        "year" => date.with_ordinal(1)?.and_hms_opt(0, 0, 0)?,
        "quarter" => {
            chrono::NaiveDate::from_ymd_opt(date.year(), ((date.month() - 1) / 3) * 3 + 1, 1)?
                .and_hms_opt(0, 0, 0)?
        }
        "month" => date.with_day(1)?.and_hms_opt(0, 0, 0)?,
        "week" => (date - chrono::Duration::days(i64::from(date.weekday().num_days_from_monday())))
            .and_hms_opt(0, 0, 0)?,
        "day" => date.and_hms_opt(0, 0, 0)?,
        "hour" => date.and_hms_opt(naive.hour(), 0, 0)?,
        "minute" => date.and_hms_opt(naive.hour(), naive.minute(), 0)?,
        "second" => date.and_hms_opt(naive.hour(), naive.minute(), naive.second())?,
        "millisecond" => return Some(ns - ns.rem_euclid(1_000_000)),
        "microsecond" => return Some(ns - ns.rem_euclid(1_000)),
        _ => return None,
    };
    t.and_utc().timestamp_nanos_opt()
}

fn extract(ns: i64, unit: &str) -> Option<i64> {
    let d = dt(ns)?;
    Some(match unit {
        "year" => i64::from(d.year()),
        "quarter" => i64::from((d.month() - 1) / 3 + 1),
        "month" => i64::from(d.month()),
        "week" => i64::from(d.iso_week().week()),
        "day" => i64::from(d.day()),
        "hour" => i64::from(d.hour()),
        "minute" => i64::from(d.minute()),
        "second" => i64::from(d.second()),
        "millisecond" => i64::from(d.second()) * 1000 + i64::from(d.nanosecond() / 1_000_000),
        "microsecond" => i64::from(d.second()) * 1_000_000 + i64::from(d.nanosecond() / 1000),
        "dow" | "dayofweek" => i64::from(d.weekday().num_days_from_sunday()),
        "doy" | "dayofyear" => i64::from(d.ordinal()),
        _ => return None,
    })
}

/// The path argument of a JSON function on one row.
#[derive(PartialEq)]
enum PathArg<'a> {
    Index(i64),
    Text(&'a str),
}

impl<'a> PathArg<'a> {
    fn of(a: &'a ArrayRef, i: usize) -> Self {
        match a.data_type() {
            DataType::Int64 => {
                PathArg::Index(a.as_primitive::<arrow::datatypes::Int64Type>().value(i))
            }
            _ => PathArg::Text(a.as_string::<i32>().value(i)),
        }
    }

    /// The steps, or `None` for a path that does not parse.
    fn steps(&self, arrow_op: bool) -> Option<Vec<PathStep>> {
        match self {
            PathArg::Index(n) => Some(vec![PathStep::signed(*n)]),
            PathArg::Text(p) => text_path(p, arrow_op),
        }
    }
}

/// The value at `steps` of JSON text `doc`, read as `reading` says: as
/// text for `->>` and `json_extract_string` (`as_text`), as JSON otherwise.
pub fn follow<'t>(
    doc: &'t str,
    steps: &[PathStep],
    as_text: bool,
    reading: Reading,
) -> Option<std::borrow::Cow<'t, str>> {
    if as_text {
        crate::util::json_follow::text_at_reading(doc, steps, reading)
    } else {
        crate::util::json_follow::json_at_reading(doc, steps, reading)
    }
}

/// The steps of a text path argument, or `None` for a path that does not
/// parse. With `->` and `->>` (`arrow_op`), text not starting with `$` is
/// one member name.
pub fn text_path(p: &str, arrow_op: bool) -> Option<Vec<PathStep>> {
    if arrow_op && !p.starts_with('$') {
        return Some(vec![PathStep::Key(p.to_string())]);
    }
    parse_json_path(p)
}

/// Parse a `json_extract` path: a JSONPath with SQL's index rules (negative
/// indexes count from the end, see [`Indexes::Signed`]), or, without a
/// leading `$`, a bare key path `a.b`.
pub fn parse_json_path(p: &str) -> Option<Vec<PathStep>> {
    if !p.starts_with('$') {
        // Bare key path: `a.b`.
        return Some(p.split('.').map(|k| PathStep::Key(k.to_string())).collect());
    }
    jsonpath::parse(p, Indexes::Signed).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_paths() {
        let v = json!({"a": {"b": [1, {"c d": true}]}, "x.y": 2});
        let get = |p: &str| jsonpath::lookup(&v, &parse_json_path(p).unwrap()).cloned();
        assert_eq!(get("$.a.b[0]"), Some(json!(1)));
        assert_eq!(get("$.a.b[1][\"c d\"]"), Some(json!(true)));
        assert_eq!(get("$.a.b[-1].\"c d\""), Some(json!(true)));
        assert_eq!(get("$[\"x.y\"]"), Some(json!(2)));
        assert_eq!(get("$.missing"), None);
        assert_eq!(get("a.b"), Some(json!([1, {"c d": true}])));
        assert!(parse_json_path("$.").is_none());
    }

    #[test]
    fn substrings_follow_sql() {
        assert_eq!(substr("hello", 2, Some(3)), "ell");
        assert_eq!(substr("hello", 0, Some(2)), "h");
        assert_eq!(substr("超时重试", 2, None), "时重试");
        assert_eq!(substr("abc", 5, Some(1)), "");
    }
}
