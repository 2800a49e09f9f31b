//! The shared expression evaluator: [`Expr`] × [`RecordBatch`] → array, with
//! Arrow compute kernels.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, StringArray,
    TimestampNanosecondArray,
};
use arrow::compute::kernels::{boolean, cmp, numeric};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;

use super::functions::eval_call;
use super::logical::{BinOp, Expr};
use super::value::{type_name, Scalar};
use super::SqlError;

/// Evaluate `e` over every row of `batch`.
pub fn eval(e: &Expr, batch: &RecordBatch) -> Result<ArrayRef, SqlError> {
    let n = batch.num_rows();
    Ok(match e {
        Expr::Column { index, .. } => batch.column(*index).clone(),
        Expr::Literal(s) => s.to_array(n),
        Expr::Binary {
            op, left, right, ..
        } => {
            let l = eval(left, batch)?;
            match right.as_ref() {
                // A constant is compared as one value, not repeated per row.
                Expr::Literal(c) if op.is_comparison() && n > 0 => {
                    Arc::new(compare_with(&l, &c.to_array(1), *op)?)
                }
                _ => binary(*op, &l, &eval(right, batch)?)?,
            }
        }
        Expr::Not(x) => {
            let v = eval(x, batch)?;
            Arc::new(boolean::not(as_bool(&v)?)?)
        }
        Expr::Neg(x) => {
            let v = eval(x, batch)?;
            numeric::neg(&v).map_err(arith_error)?
        }
        Expr::IsNull { expr, negated } => {
            let v = eval(expr, batch)?;
            let r = if *negated {
                arrow::compute::is_not_null(&v)?
            } else {
                arrow::compute::is_null(&v)?
            };
            Arc::new(r)
        }
        Expr::Like {
            expr,
            pattern,
            negated,
            case_insensitive,
        } => {
            let v = eval(expr, batch)?;
            if v.data_type() == &DataType::Null {
                return Ok(new_null_array(&DataType::Boolean, n));
            }
            // SQL LIKE has no escape character unless ESCAPE is given; the Arrow
            // kernels treat `\` as one, so backslashes are doubled first.
            let literal = |t: &str| StringArray::from(vec![t.replace('\\', "\\\\")]);
            let r = match pattern.as_ref() {
                Expr::Literal(Scalar::Null) => return Ok(new_null_array(&DataType::Boolean, n)),
                Expr::Literal(Scalar::Str(t)) => like(
                    &v,
                    &arrow::array::Scalar::new(literal(t)),
                    *negated,
                    *case_insensitive,
                )?,
                _ => {
                    let p = eval(pattern, batch)?;
                    if p.data_type() == &DataType::Null {
                        return Ok(new_null_array(&DataType::Boolean, n));
                    }
                    let p: StringArray = strings_of(&p)?
                        .iter()
                        .map(|t| t.map(|t| t.replace('\\', "\\\\")))
                        .collect();
                    like(&v, &p, *negated, *case_insensitive)?
                }
            };
            Arc::new(r)
        }
        Expr::InList {
            expr,
            list,
            negated,
        } => {
            let v = eval(expr, batch)?;
            in_list(&v, list, *negated, batch)?
        }
        Expr::InSubquery { .. } => {
            return Err(SqlError::Internal(
                "subquery was not materialised before execution".into(),
            ))
        }
        Expr::InValues {
            expr,
            values,
            negated,
        } => {
            let v = eval(expr, batch)?;
            Arc::new(in_values(&v, values, *negated)?)
        }
        Expr::Case {
            operand,
            whens,
            else_,
            ty,
        } => eval_case(operand.as_deref(), whens, else_.as_deref(), ty, batch)?,
        Expr::Cast { expr, to } => match super::json_eval::cast(expr, to, batch)? {
            Some(a) => a,
            None => cast_array(&eval(expr, batch)?, to)?,
        },
        Expr::Call { func, args, ty } => {
            if n == 0 {
                return Ok(arrow::array::new_empty_array(ty));
            }
            if let Some(a) = super::json_eval::call(*func, args, batch)? {
                return Ok(a);
            }
            let vals = args
                .iter()
                .map(|a| eval(a, batch))
                .collect::<Result<Vec<_>, _>>()?;
            eval_call(*func, &vals, n)?
        }
    })
}

/// Evaluate a predicate to a filter mask (NULL counts as false).
pub fn eval_predicate(e: &Expr, batch: &RecordBatch) -> Result<BooleanArray, SqlError> {
    let v = eval(e, batch)?;
    if v.data_type() == &DataType::Null {
        return Ok(BooleanArray::from(vec![false; batch.num_rows()]));
    }
    Ok(true_mask(as_bool(&v)?))
}

/// Rows where `b` is true (nulls become false).
pub fn true_mask(b: &BooleanArray) -> BooleanArray {
    if b.null_count() == 0 {
        return b.clone();
    }
    b.iter().map(|v| Some(v == Some(true))).collect()
}

fn as_bool(a: &ArrayRef) -> Result<&BooleanArray, SqlError> {
    a.as_any().downcast_ref::<BooleanArray>().ok_or_else(|| {
        SqlError::type_error(format!(
            "expected BOOLEAN, found {}",
            type_name(a.data_type())
        ))
    })
}

fn arith_error(e: arrow::error::ArrowError) -> SqlError {
    match e {
        arrow::error::ArrowError::DivideByZero => SqlError::DivisionByZero,
        arrow::error::ArrowError::ArithmeticOverflow(m) => {
            SqlError::type_error(format!("integer overflow: {m}"))
        }
        other => SqlError::from(other),
    }
}

fn binary(op: BinOp, l: &ArrayRef, r: &ArrayRef) -> Result<ArrayRef, SqlError> {
    let n = l.len();
    if matches!(op, BinOp::And | BinOp::Or) {
        let l = if l.data_type() == &DataType::Null {
            new_null_array(&DataType::Boolean, n)
        } else {
            l.clone()
        };
        let r = if r.data_type() == &DataType::Null {
            new_null_array(&DataType::Boolean, n)
        } else {
            r.clone()
        };
        let (lb, rb) = (as_bool(&l)?, as_bool(&r)?);
        return Ok(Arc::new(if op == BinOp::And {
            boolean::and_kleene(lb, rb)?
        } else {
            boolean::or_kleene(lb, rb)?
        }));
    }
    if op.is_comparison() {
        return Ok(Arc::new(compare(l, r, op)?));
    }
    if l.data_type() == &DataType::Null || r.data_type() == &DataType::Null {
        let t = if op == BinOp::Concat {
            DataType::Utf8
        } else if l.data_type() == &DataType::Null {
            r.data_type().clone()
        } else {
            l.data_type().clone()
        };
        let t = if t == DataType::Null {
            DataType::Int64
        } else {
            t
        };
        return Ok(new_null_array(&t, n));
    }
    Ok(match op {
        BinOp::Plus => numeric::add(l, r).map_err(arith_error)?,
        BinOp::Minus => numeric::sub(l, r).map_err(arith_error)?,
        BinOp::Mul => numeric::mul(l, r).map_err(arith_error)?,
        BinOp::Div => {
            let (lf, rf) = (
                cast_array(l, &DataType::Float64)?,
                cast_array(r, &DataType::Float64)?,
            );
            let rv = rf.as_primitive::<arrow::datatypes::Float64Type>();
            if rv.iter().any(|v| v == Some(0.0)) {
                return Err(SqlError::DivisionByZero);
            }
            numeric::div(&lf, &rf).map_err(arith_error)?
        }
        BinOp::Mod => {
            if l.data_type() == &DataType::Int64 {
                let rv = r.as_primitive::<arrow::datatypes::Int64Type>();
                if rv.iter().any(|v| v == Some(0)) {
                    return Err(SqlError::DivisionByZero);
                }
            }
            numeric::rem(l, r).map_err(arith_error)?
        }
        BinOp::Concat => {
            let (a, b) = (l.as_string::<i32>(), r.as_string::<i32>());
            let out: StringArray = a
                .iter()
                .zip(b.iter())
                .map(|(x, y)| Some(format!("{}{}", x?, y?)))
                .collect();
            Arc::new(out)
        }
        _ => unreachable!("comparisons and logic handled above"),
    })
}

/// Compare two arrays of one type.
pub fn compare(l: &ArrayRef, r: &ArrayRef, op: BinOp) -> Result<BooleanArray, SqlError> {
    compare_datums(l, r, op, false)
}

/// Compare every row of `l` with the one value in `constant`.
fn compare_with(l: &ArrayRef, constant: &ArrayRef, op: BinOp) -> Result<BooleanArray, SqlError> {
    compare_datums(l, constant, op, true)
}

fn compare_datums(
    l: &ArrayRef,
    r: &ArrayRef,
    op: BinOp,
    r_is_scalar: bool,
) -> Result<BooleanArray, SqlError> {
    if l.data_type() == &DataType::Null || r.data_type() == &DataType::Null {
        return Ok(BooleanArray::new_null(l.len()));
    }
    let r = if l.data_type() == r.data_type() {
        r.clone()
    } else {
        cast_array(r, l.data_type())?
    };
    let r: &dyn arrow::array::Datum = if r_is_scalar {
        &arrow::array::Scalar::new(r)
    } else {
        &r
    };
    let l: &dyn arrow::array::Datum = l;
    Ok(match op {
        BinOp::Eq => cmp::eq(l, r)?,
        BinOp::NotEq => cmp::neq(l, r)?,
        BinOp::Lt => cmp::lt(l, r)?,
        BinOp::LtEq => cmp::lt_eq(l, r)?,
        BinOp::Gt => cmp::gt(l, r)?,
        BinOp::GtEq => cmp::gt_eq(l, r)?,
        _ => return Err(SqlError::Internal("not a comparison".into())),
    })
}

/// Hashable form of a cell for set membership.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    I(i64),
    F(u64),
    S(String),
    B(bool),
}

fn key_of(a: &dyn Array, i: usize) -> Option<Key> {
    if a.is_null(i) {
        return None;
    }
    Some(match a.data_type() {
        DataType::Int64 => Key::I(a.as_primitive::<arrow::datatypes::Int64Type>().value(i)),
        DataType::Float64 => {
            let f = a.as_primitive::<arrow::datatypes::Float64Type>().value(i);
            Key::F(if f == 0.0 { 0 } else { f.to_bits() })
        }
        DataType::Utf8 => Key::S(a.as_string::<i32>().value(i).to_string()),
        DataType::Boolean => Key::B(a.as_boolean().value(i)),
        DataType::Timestamp(..) => Key::I(
            a.as_primitive::<arrow::datatypes::TimestampNanosecondType>()
                .value(i),
        ),
        _ => return None,
    })
}

fn in_list(
    v: &ArrayRef,
    list: &[Expr],
    negated: bool,
    batch: &RecordBatch,
) -> Result<ArrayRef, SqlError> {
    let n = v.len();
    if list.iter().all(|e| matches!(e, Expr::Literal(_))) {
        let mut set = HashSet::with_capacity(list.len());
        let mut has_null = false;
        for e in list {
            let Expr::Literal(s) = e else { unreachable!() };
            let a = s.to_array(1);
            let a = if a.data_type() == v.data_type() || s.is_null() {
                a
            } else {
                cast_array(&a, v.data_type())?
            };
            match key_of(a.as_ref(), 0) {
                Some(k) => {
                    set.insert(k);
                }
                None => has_null = true,
            }
        }
        return Ok(Arc::new(membership(v, &set, has_null, negated)));
    }
    // General case: OR of equalities, with SQL NULL rules.
    let mut acc: Option<BooleanArray> = None;
    for e in list {
        let item = eval(e, batch)?;
        let eq = compare(v, &item, BinOp::Eq)?;
        acc = Some(match acc {
            None => eq,
            Some(a) => boolean::or_kleene(&a, &eq)?,
        });
    }
    let r = acc.unwrap_or_else(|| BooleanArray::from(vec![false; n]));
    Ok(Arc::new(if negated { boolean::not(&r)? } else { r }))
}

/// `v IN set` with SQL semantics: NULL when v is NULL, or when not found and
/// the set had a NULL.
fn membership(v: &ArrayRef, set: &HashSet<Key>, has_null: bool, negated: bool) -> BooleanArray {
    (0..v.len())
        .map(|i| match key_of(v.as_ref(), i) {
            None => None,
            Some(k) if set.contains(&k) => Some(!negated),
            Some(_) if has_null => None,
            Some(_) => Some(negated),
        })
        .collect()
}

/// Rows of `v` whose value is in `values` (a one-column subquery result).
pub fn in_values(v: &ArrayRef, values: &ArrayRef, negated: bool) -> Result<BooleanArray, SqlError> {
    let values = if values.data_type() == v.data_type() {
        values.clone()
    } else {
        cast_array(values, v.data_type())?
    };
    let mut set = HashSet::with_capacity(values.len());
    let mut has_null = false;
    for i in 0..values.len() {
        match key_of(values.as_ref(), i) {
            Some(k) => {
                set.insert(k);
            }
            None => has_null = true,
        }
    }
    Ok(membership(v, &set, has_null, negated))
}

/// Evaluate a constant expression.
pub fn eval_constant(e: &Expr) -> Result<Scalar, SqlError> {
    let batch = RecordBatch::try_new_with_options(
        Arc::new(arrow::datatypes::Schema::empty()),
        vec![],
        &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(1)),
    )?;
    let a = eval(e, &batch)?;
    Scalar::from_array(a.as_ref(), 0)
}

/// Cast a constant.
pub fn cast_scalar(s: Scalar, to: &DataType) -> Result<Scalar, SqlError> {
    if s.is_null() {
        return Ok(Scalar::Null);
    }
    if &s.data_type() == to {
        return Ok(s);
    }
    let a = cast_array(&s.to_array(1), to)?;
    Scalar::from_array(a.as_ref(), 0)
}

/// Cast an array with SQL semantics (errors on values that do not convert;
/// floats to integers round half away from zero; text to timestamps parses
/// RFC 3339 and `YYYY-MM-DD[ HH:MM:SS]`).
pub fn cast_array(a: &ArrayRef, to: &DataType) -> Result<ArrayRef, SqlError> {
    let from = a.data_type();
    if from == to {
        return Ok(a.clone());
    }
    if from == &DataType::Null {
        return Ok(new_null_array(to, a.len()));
    }
    match (from, to) {
        (DataType::Float64, DataType::Int64) => {
            let f = a.as_primitive::<arrow::datatypes::Float64Type>();
            let mut out = Vec::with_capacity(f.len());
            for v in f {
                out.push(match v {
                    None => None,
                    Some(x) => {
                        let r = x.round();
                        if !r.is_finite() || r < i64::MIN as f64 || r > i64::MAX as f64 {
                            return Err(SqlError::Cast {
                                value: x.to_string(),
                                to: "BIGINT".into(),
                            });
                        }
                        Some(r as i64)
                    }
                });
            }
            Ok(Arc::new(Int64Array::from(out)))
        }
        (DataType::Utf8, DataType::Timestamp(..)) => {
            let s = a.as_string::<i32>();
            let mut out = Vec::with_capacity(s.len());
            for v in s {
                out.push(match v {
                    None => None,
                    Some(t) => Some(parse_ts_text(t).ok_or_else(|| SqlError::Cast {
                        value: shorten(t),
                        to: "TIMESTAMP".into(),
                    })?),
                });
            }
            Ok(Arc::new(
                TimestampNanosecondArray::from(out).with_timezone("UTC"),
            ))
        }
        (DataType::Timestamp(..), DataType::Utf8) => {
            let t = a.as_primitive::<arrow::datatypes::TimestampNanosecondType>();
            let out: StringArray = t.iter().map(|v| v.map(ts_text)).collect();
            Ok(Arc::new(out))
        }
        (DataType::Float64, DataType::Utf8) => {
            let f = a.as_primitive::<arrow::datatypes::Float64Type>();
            let out: StringArray = f.iter().map(|v| v.map(float_text)).collect();
            Ok(Arc::new(out))
        }
        (DataType::Utf8, DataType::Boolean) => {
            let s = a.as_string::<i32>();
            let mut out = Vec::with_capacity(s.len());
            for v in s {
                out.push(match v.map(|x| x.trim().to_ascii_lowercase()) {
                    None => None,
                    Some(x) if ["true", "t", "1", "yes", "y"].contains(&x.as_str()) => Some(true),
                    Some(x) if ["false", "f", "0", "no", "n"].contains(&x.as_str()) => Some(false),
                    Some(x) => {
                        return Err(SqlError::Cast {
                            value: shorten(&x),
                            to: "BOOLEAN".into(),
                        })
                    }
                });
            }
            Ok(Arc::new(BooleanArray::from(out)))
        }
        (DataType::Utf8, DataType::Int64 | DataType::Float64) => {
            let s = a.as_string::<i32>();
            if to == &DataType::Int64 {
                let mut out = Vec::with_capacity(s.len());
                for v in s {
                    out.push(v.map(text_to_int).transpose()?);
                }
                Ok(Arc::new(Int64Array::from(out)))
            } else {
                let mut out = Vec::with_capacity(s.len());
                for v in s {
                    out.push(match v {
                        None => None,
                        Some(t) => Some(t.trim().parse::<f64>().map_err(|_| SqlError::Cast {
                            value: shorten(t),
                            to: "DOUBLE".into(),
                        })?),
                    });
                }
                Ok(Arc::new(Float64Array::from(out)))
            }
        }
        _ => {
            let opts = CastOptions {
                safe: false,
                ..Default::default()
            };
            cast_with_options(a, to, &opts).map_err(|e| SqlError::Cast {
                value: e.to_string(),
                to: type_name(to).into(),
            })
        }
    }
}

/// Text cast to BIGINT: surrounding spaces are ignored, anything else
/// that is not a 64-bit integer fails.
pub fn text_to_int(t: &str) -> Result<i64, SqlError> {
    t.trim().parse::<i64>().map_err(|_| SqlError::Cast {
        value: shorten(t),
        to: "BIGINT".into(),
    })
}

fn shorten(s: &str) -> String {
    let t = crate::util::text::truncate_chars(s, 40);
    format!("'{}'", crate::util::text::escape_control(&t))
}

/// Text of a float the way DuckDB prints it (`1.0`, `0.5`, `1e+20`).
pub fn float_text(f: f64) -> String {
    if f.is_finite() && f == f.trunc() && f.abs() < 1e16 {
        format!("{f:.1}")
    } else {
        format!("{f}")
    }
}

/// Text of a timestamp: `YYYY-MM-DD HH:MM:SS[.ffffff]+00`.
pub fn ts_text(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let sub = ns.rem_euclid(1_000_000_000) as u32;
    match chrono::DateTime::from_timestamp(secs, sub) {
        Some(d) if sub == 0 => d.format("%Y-%m-%d %H:%M:%S+00").to_string(),
        Some(d) => {
            let mut s = d.format("%Y-%m-%d %H:%M:%S%.6f").to_string();
            while s.ends_with('0') {
                s.pop();
            }
            s + "+00"
        }
        None => String::new(),
    }
}

/// Parse timestamp text: RFC 3339, or `YYYY-MM-DD[ HH:MM:SS[.f]]` as UTC.
pub fn parse_ts_text(t: &str) -> Option<i64> {
    let t = t.trim();
    if let Some(ns) = crate::util::time::parse_rfc3339(t) {
        return Some(ns);
    }
    let t = t.trim_end_matches("+00").trim_end_matches('Z');
    for fmt in [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M",
    ] {
        if let Ok(d) = chrono::NaiveDateTime::parse_from_str(t, fmt) {
            return d.and_utc().timestamp_nanos_opt();
        }
    }
    chrono::NaiveDate::parse_from_str(t, "%Y-%m-%d")
        .ok()?
        .and_hms_opt(0, 0, 0)?
        .and_utc()
        .timestamp_nanos_opt()
}

/// The rows of `batch` at `rows`, or `batch` itself when that is every row.
fn rows_of(batch: &RecordBatch, rows: &[u32]) -> Result<RecordBatch, SqlError> {
    if rows.len() == batch.num_rows() {
        return Ok(batch.clone());
    }
    let idx = arrow::array::UInt32Array::from(rows.to_vec());
    Ok(arrow::compute::take_record_batch(batch, &idx)?)
}

/// CASE evaluates each branch only on the rows that reach it, so a branch
/// guarded by its condition (`WHEN x = 0 THEN 0 ELSE y / x`) never sees the
/// rows it is guarded against.
fn eval_case(
    operand: Option<&Expr>,
    whens: &[(Expr, Expr)],
    else_: Option<&Expr>,
    ty: &DataType,
    batch: &RecordBatch,
) -> Result<ArrayRef, SqlError> {
    let n = batch.num_rows();
    let mut remaining: Vec<u32> = (0..n as u32).collect();
    let mut pieces: Vec<ArrayRef> = Vec::new();
    let mut slot = vec![(0usize, 0usize); n];
    for (w, t) in whens {
        if remaining.is_empty() {
            break;
        }
        let sub = rows_of(batch, &remaining)?;
        let cond = match operand {
            Some(o) => compare(&eval(o, &sub)?, &eval(w, &sub)?, BinOp::Eq)?,
            None => as_bool(&eval(w, &sub)?)?.clone(),
        };
        let cond = true_mask(&cond);
        let (mut hit, mut miss) = (Vec::new(), Vec::new());
        for (k, &r) in remaining.iter().enumerate() {
            if cond.value(k) {
                hit.push(r);
            } else {
                miss.push(r);
            }
        }
        if !hit.is_empty() {
            let v = eval(t, &rows_of(batch, &hit)?)?;
            for (k, &r) in hit.iter().enumerate() {
                slot[r as usize] = (pieces.len(), k);
            }
            pieces.push(v);
        }
        remaining = miss;
    }
    if !remaining.is_empty() {
        let v = match else_ {
            Some(x) => eval(x, &rows_of(batch, &remaining)?)?,
            None => new_null_array(ty, remaining.len()),
        };
        for (k, &r) in remaining.iter().enumerate() {
            slot[r as usize] = (pieces.len(), k);
        }
        pieces.push(v);
    }
    match pieces.len() {
        0 => Ok(new_null_array(ty, 0)),
        1 => Ok(pieces.pop().expect("one piece")),
        _ => {
            let refs: Vec<&dyn Array> = pieces.iter().map(std::convert::AsRef::as_ref).collect();
            Ok(arrow::compute::interleave(&refs, &slot)?)
        }
    }
}

fn like(
    v: &dyn arrow::array::Datum,
    p: &dyn arrow::array::Datum,
    negated: bool,
    case_insensitive: bool,
) -> Result<BooleanArray, SqlError> {
    use arrow::compute::kernels::comparison as k;
    Ok(match (negated, case_insensitive) {
        (false, false) => k::like(v, p)?,
        (true, false) => k::nlike(v, p)?,
        (false, true) => k::ilike(v, p)?,
        (true, true) => k::nilike(v, p)?,
    })
}

fn strings_of(a: &ArrayRef) -> Result<&StringArray, SqlError> {
    a.as_string_opt::<i32>()
        .ok_or_else(|| SqlError::Internal(format!("expected TEXT, found {}", a.data_type())))
}
