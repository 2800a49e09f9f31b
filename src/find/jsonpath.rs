//! JSON predicates: a small JSONPath (`$`, `.key`, `."quoted key"`,
//! `["quoted key"]`, `[index]`) and the comparison rules of RFC-0012.
//!
//! A predicate holds when the path exists and the comparison is true. When
//! the value at the path is an array and the array itself does not satisfy
//! the comparison, its elements are tried (lax mode): `$.tags = "x"` matches
//! `{"tags": ["x", "y"]}`.

use serde_json::Value;

use super::ast::{CmpOp, JsonValue};
use super::FindError;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// An object member.
    Key(String),
    /// An array element (0-based).
    Index(usize),
}

/// Parse `$…` into segments.
pub fn parse_path(path: &str) -> Result<Vec<Segment>, FindError> {
    let bad = |why: &str| FindError::InvalidArgument {
        message: format!("invalid JSONPath `{path}`: {why}"),
    };
    let mut chars = path.char_indices().peekable();
    if chars.next().map(|c| c.1) != Some('$') {
        return Err(bad("it must start with `$`"));
    }
    let mut out = Vec::new();
    while let Some((_, c)) = chars.next() {
        match c {
            '.' => match chars.peek() {
                Some((_, '"')) => {
                    chars.next();
                    out.push(Segment::Key(
                        quoted(&mut chars, '"').ok_or_else(|| bad("unterminated quoted key"))?,
                    ));
                }
                Some(_) => {
                    let mut key = String::new();
                    while let Some(&(_, c)) = chars.peek() {
                        if c == '.' || c == '[' {
                            break;
                        }
                        key.push(c);
                        chars.next();
                    }
                    if key.is_empty() {
                        return Err(bad("empty key"));
                    }
                    out.push(Segment::Key(key));
                }
                None => return Err(bad("it ends with `.`")),
            },
            '[' => {
                match chars.peek().map(|c| c.1) {
                    Some(q @ ('"' | '\'')) => {
                        chars.next();
                        out.push(Segment::Key(
                            quoted(&mut chars, q).ok_or_else(|| bad("unterminated quoted key"))?,
                        ));
                    }
                    Some(c) if c.is_ascii_digit() => {
                        let mut n = String::new();
                        while let Some(&(_, c)) = chars.peek() {
                            if !c.is_ascii_digit() {
                                break;
                            }
                            n.push(c);
                            chars.next();
                        }
                        let i = n.parse().map_err(|_| bad("array index too large"))?;
                        out.push(Segment::Index(i));
                    }
                    _ => return Err(bad("expected an index or a quoted key after `[`")),
                }
                if chars.next().map(|c| c.1) != Some(']') {
                    return Err(bad("expected `]`"));
                }
            }
            other => return Err(bad(&format!("unexpected `{other}`"))),
        }
    }
    Ok(out)
}

fn quoted(chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>, q: char) -> Option<String> {
    let mut s = String::new();
    loop {
        let (_, c) = chars.next()?;
        match c {
            '\\' => s.push(chars.next()?.1),
            c if c == q => return Some(s),
            c => s.push(c),
        }
    }
}

/// Follow `path` in `v`.
pub fn lookup<'a>(v: &'a Value, path: &[Segment]) -> Option<&'a Value> {
    let mut cur = v;
    for s in path {
        cur = match (s, cur) {
            (Segment::Key(k), Value::Object(m)) => m.get(k)?,
            (Segment::Index(i), Value::Array(a)) => a.get(*i)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// A compiled comparison.
#[derive(Debug, Clone)]
pub struct Predicate {
    /// Path segments.
    pub path: Vec<Segment>,
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
        use Segment::*;
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
