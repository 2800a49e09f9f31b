//! Scalar values and the type rules of the SQL subset.
//!
//! Types are Arrow types restricted to: BIGINT (Int64), DOUBLE (Float64),
//! TEXT (Utf8), BOOLEAN, TIMESTAMP (ns, UTC) and NULL.

use std::fmt;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int64Array, NullArray, StringArray,
    TimestampNanosecondArray,
};
use arrow::datatypes::{DataType, TimeUnit};

use super::SqlError;

/// The timestamp type used everywhere.
pub fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

/// True for Int64 and Float64.
pub fn is_numeric(t: &DataType) -> bool {
    matches!(t, DataType::Int64 | DataType::Float64)
}

/// The SQL name of a type.
pub fn type_name(t: &DataType) -> &'static str {
    match t {
        DataType::Int64 => "BIGINT",
        DataType::Float64 => "DOUBLE",
        DataType::Utf8 => "TEXT",
        DataType::Boolean => "BOOLEAN",
        DataType::Timestamp(..) => "TIMESTAMP",
        DataType::Null => "NULL",
        _ => "UNSUPPORTED",
    }
}

/// The common type two operands are brought to, if any.
pub fn common_type(a: &DataType, b: &DataType) -> Option<DataType> {
    use DataType as T;
    Some(match (a, b) {
        (x, y) if x == y => x.clone(),
        (T::Null, y) => y.clone(),
        (x, T::Null) => x.clone(),
        (T::Int64, T::Float64) | (T::Float64, T::Int64) => T::Float64,
        (T::Timestamp(..), T::Utf8) | (T::Utf8, T::Timestamp(..)) => ts_type(),
        (T::Utf8, T::Int64 | T::Float64 | T::Boolean)
        | (T::Int64 | T::Float64 | T::Boolean, T::Utf8) => T::Utf8,
        _ => return None,
    })
}

/// A constant value.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// NULL.
    Null,
    /// BOOLEAN.
    Bool(bool),
    /// BIGINT.
    Int(i64),
    /// DOUBLE.
    Float(f64),
    /// TEXT.
    Str(String),
    /// TIMESTAMP (epoch ns, UTC).
    Ts(i64),
}

impl Scalar {
    /// The type of the value.
    pub fn data_type(&self) -> DataType {
        match self {
            Scalar::Null => DataType::Null,
            Scalar::Bool(_) => DataType::Boolean,
            Scalar::Int(_) => DataType::Int64,
            Scalar::Float(_) => DataType::Float64,
            Scalar::Str(_) => DataType::Utf8,
            Scalar::Ts(_) => ts_type(),
        }
    }

    /// An array of `n` copies.
    pub fn to_array(&self, n: usize) -> ArrayRef {
        match self {
            Scalar::Null => Arc::new(NullArray::new(n)),
            Scalar::Bool(b) => Arc::new(BooleanArray::from(vec![*b; n])),
            Scalar::Int(v) => Arc::new(Int64Array::from_value(*v, n)),
            Scalar::Float(v) => Arc::new(Float64Array::from_value(*v, n)),
            Scalar::Str(s) => Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
                s.as_str(),
                n,
            ))),
            Scalar::Ts(v) => {
                Arc::new(TimestampNanosecondArray::from_value(*v, n).with_timezone("UTC"))
            }
        }
    }

    /// The value at `i` of an array.
    pub fn from_array(a: &dyn Array, i: usize) -> Result<Scalar, SqlError> {
        if a.is_null(i) {
            return Ok(Scalar::Null);
        }
        Ok(match a.data_type() {
            DataType::Null => Scalar::Null,
            DataType::Boolean => Scalar::Bool(
                a.as_any()
                    .downcast_ref::<BooleanArray>()
                    .is_some_and(|x| x.value(i)),
            ),
            DataType::Int64 => Scalar::Int(
                a.as_any()
                    .downcast_ref::<Int64Array>()
                    .map(|x| x.value(i))
                    .unwrap_or_default(),
            ),
            DataType::Float64 => Scalar::Float(
                a.as_any()
                    .downcast_ref::<Float64Array>()
                    .map(|x| x.value(i))
                    .unwrap_or_default(),
            ),
            DataType::Utf8 => Scalar::Str(
                a.as_any()
                    .downcast_ref::<StringArray>()
                    .map(|x| x.value(i).to_string())
                    .unwrap_or_default(),
            ),
            DataType::Timestamp(..) => Scalar::Ts(
                a.as_any()
                    .downcast_ref::<TimestampNanosecondArray>()
                    .map(|x| x.value(i))
                    .unwrap_or_default(),
            ),
            other => return Err(SqlError::Internal(format!("unexpected array type {other}"))),
        })
    }

    /// True for NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, Scalar::Null)
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Null => f.write_str("NULL"),
            Scalar::Bool(b) => f.write_str(if *b { "TRUE" } else { "FALSE" }),
            Scalar::Int(v) => write!(f, "{v}"),
            Scalar::Float(v) => write!(f, "{v:?}"),
            Scalar::Str(s) => write!(f, "'{}'", s.replace('\'', "''")),
            Scalar::Ts(v) => write!(f, "TIMESTAMP '{}'", crate::util::time::format_rfc3339(*v)),
        }
    }
}
