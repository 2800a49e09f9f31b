//! JSON predicates: a path ([`crate::util::jsonpath`], with `find`'s index
//! rule: `[N]` counted from 0, no negative indexes) and the comparison rules
//! of RFC-0012.
//!
//! A predicate holds when the path exists and the comparison is true. When
//! the value at the path is an array and the array itself does not satisfy
//! the comparison, its elements are tried (lax mode): `$.tags = "x"` matches
//! `{"tags": ["x", "y"]}`.

use std::ops::Bound;

use serde_json::Value;

use super::ast::{CmpOp, JsonValue};
use super::FindError;
use crate::fts::{number_is_exact, LeafTest};
use crate::util::jsonpath::{self, lookup, Indexes, PathStep};

/// Parse `$…` with `find`'s index rule (digits only, from 0).
pub fn parse_path(path: &str) -> Result<Vec<PathStep>, FindError> {
    jsonpath::parse(path, Indexes::FromStart).map_err(|why| FindError::InvalidArgument {
        message: format!("invalid JSONPath `{path}`: {why}"),
    })
}

/// A compiled comparison.
#[derive(Debug, Clone)]
pub struct Predicate {
    /// Path steps.
    pub path: Vec<PathStep>,
    /// Operator.
    pub op: CmpOp,
    /// Right side as JSON.
    pub value: Value,
}

impl Predicate {
    /// Compile; range operators need a number on the right.
    pub fn new(path: &str, op: CmpOp, value: &JsonValue) -> Result<Predicate, FindError> {
        let value = value.to_json();
        if matches!(op, CmpOp::Gt | CmpOp::Ge | CmpOp::Lt | CmpOp::Le) && !value.is_number() {
            return Err(FindError::InvalidArgument {
                message: format!("`{}` needs a number on its right side", op.symbol()),
            });
        }
        Ok(Predicate {
            path: parse_path(path)?,
            op,
            value,
        })
    }

    /// The same comparison as a lookup of indexed JSON leaves
    /// ([`crate::fts::LeafTest`]), when one gives exactly [`Predicate::eval`]'s
    /// answer: `=` and the range operators, but not `!=` (it also holds on
    /// arrays and on values of other types), nor `=` on an integer of
    /// magnitude 2^53 or more (leaves compare numbers as `f64`).
    pub fn leaf_test(&self) -> Option<LeafTest> {
        if self.path.iter().any(|s| matches!(s, PathStep::FromEnd(_))) {
            return None;
        }
        let num = || self.value.as_f64();
        Some(match self.op {
            CmpOp::Eq => match &self.value {
                Value::Number(n) if !number_is_exact(n) => return None,
                Value::Array(_) | Value::Object(_) => return None,
                v => LeafTest::Eq(v.clone()),
            },
            CmpOp::Ne => return None,
            CmpOp::Gt => LeafTest::Range(Bound::Excluded(num()?), Bound::Unbounded),
            CmpOp::Ge => LeafTest::Range(Bound::Included(num()?), Bound::Unbounded),
            CmpOp::Lt => LeafTest::Range(Bound::Unbounded, Bound::Excluded(num()?)),
            CmpOp::Le => LeafTest::Range(Bound::Unbounded, Bound::Included(num()?)),
        })
    }

    /// Does the document satisfy it?
    pub fn eval(&self, doc: &Value) -> bool {
        let Some(v) = lookup(doc, &self.path) else {
            return false;
        };
        if self.test(v) {
            return true;
        }
        match v {
            Value::Array(items) => items.iter().any(|x| self.test(x)),
            _ => false,
        }
    }

    fn test(&self, v: &Value) -> bool {
        match self.op {
            CmpOp::Eq => json_eq(v, &self.value),
            CmpOp::Ne => !json_eq(v, &self.value),
            op => {
                let (Some(a), Some(b)) = (v.as_f64(), self.value.as_f64()) else {
                    return false;
                };
                match op {
                    CmpOp::Gt => a > b,
                    CmpOp::Ge => a >= b,
                    CmpOp::Lt => a < b,
                    CmpOp::Le => a <= b,
                    CmpOp::Eq | CmpOp::Ne => unreachable!("handled above"),
                }
            }
        }
    }
}

/// Equality of JSON values; numbers compare by value (`2` = `2.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(p), Some(q)) => p == q,
            _ => x.as_f64() == y.as_f64(),
        },
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_parse() {
        use PathStep::*;
        assert_eq!(parse_path("$").unwrap(), vec![]);
        assert_eq!(
            parse_path("$.a.b").unwrap(),
            vec![Key("a".into()), Key("b".into())]
        );
        assert_eq!(
            parse_path("$.a[0]").unwrap(),
            vec![Key("a".into()), Index(0)]
        );
        assert_eq!(
            parse_path(r#"$["a b"].c"#).unwrap(),
            vec![Key("a b".into()), Key("c".into())]
        );
        assert_eq!(parse_path(r#"$."x.y""#).unwrap(), vec![Key("x.y".into())]);
        for bad in ["a", "$.", "$[", "$[x]", "$..a", "$[0", r#"$["a"#] {
            assert_eq!(parse_path(bad).unwrap_err().code(), "PC-FND-002", "{bad}");
        }
    }

    #[test]
    fn comparisons() {
        let d = json!({"p": 2, "s": "hi", "tags": ["x", "y"], "f": 0.5, "n": null});
        let t = |path: &str, op, v: JsonValue| Predicate::new(path, op, &v).unwrap().eval(&d);
        assert!(t("$.p", CmpOp::Ge, JsonValue::Num("2".into())));
        assert!(t("$.p", CmpOp::Eq, JsonValue::Num("2.0".into())));
        assert!(!t("$.p", CmpOp::Gt, JsonValue::Num("2".into())));
        assert!(t("$.s", CmpOp::Eq, JsonValue::Str("hi".into())));
        assert!(t("$.tags", CmpOp::Eq, JsonValue::Str("x".into())));
        assert!(t("$.n", CmpOp::Eq, JsonValue::Null));
        assert!(!t("$.missing", CmpOp::Ne, JsonValue::Num("1".into())));
        assert!(t("$.f", CmpOp::Lt, JsonValue::Num("1".into())));
        assert!(!t("$.s", CmpOp::Gt, JsonValue::Num("1".into())));
        assert!(Predicate::new("$.s", CmpOp::Gt, &JsonValue::Str("a".into())).is_err());
    }
}
