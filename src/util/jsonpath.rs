//! The one JSONPath of pChronicle: `$`, `.key`, `."quoted key"`,
//! `["quoted key"]`, `['quoted key']` and `[index]`, parsed into steps and
//! followed through a `serde_json::Value`.
//!
//! `find` predicates and SQL's `->`, `->>` and `json_extract` use it. They
//! document different index rules, so the rule is an explicit option
//! ([`Indexes`]): `find` takes `[N]` as digits only, counted from 0
//! (docs/find.md, "Paths"); SQL also takes a negative index, counted from
//! the end, written `[-1]` or `[#-1]`, with spaces allowed inside the
//! brackets (docs/query-model.md, "JSON access"). Everything else (keys,
//! quoting, escapes, what is refused) is the same for both. No wildcards,
//! no `..`, no filters.

use serde_json::Value;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathStep {
    /// An object member.
    Key(String),
    /// An array element, counted from 0.
    Index(usize),
    /// An array element counted from the end: 1 is the last.
    FromEnd(usize),
}

impl PathStep {
    /// The step for a signed index: negative counts from the end.
    pub fn signed(i: i64) -> PathStep {
        if i < 0 {
            PathStep::FromEnd(usize::try_from(i.unsigned_abs()).unwrap_or(usize::MAX))
        } else {
            PathStep::Index(usize::try_from(i).unwrap_or(usize::MAX))
        }
    }
}

/// Which array indexes a path may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Indexes {
    /// `[N]`: digits only, counted from 0 (`find`).
    FromStart,
    /// `[N]`, `[-N]` or `[#-N]`, spaces around the number allowed; a
    /// negative index counts from the end (SQL).
    Signed,
}

/// Parse `$…` into steps. The error says what is wrong (without the path).
pub fn parse(path: &str, indexes: Indexes) -> Result<Vec<PathStep>, String> {
    let bad = |why: &str| why.to_string();
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
                    out.push(PathStep::Key(
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
                    out.push(PathStep::Key(key));
                }
                None => return Err(bad("it ends with `.`")),
            },
            '[' => {
                match (chars.peek().map(|c| c.1), indexes) {
                    (Some(q @ ('"' | '\'')), _) => {
                        chars.next();
                        out.push(PathStep::Key(
                            quoted(&mut chars, q).ok_or_else(|| bad("unterminated quoted key"))?,
                        ));
                    }
                    (Some(c), Indexes::FromStart) if c.is_ascii_digit() => {
                        let mut n = String::new();
                        while let Some(&(_, c)) = chars.peek() {
                            if !c.is_ascii_digit() {
                                break;
                            }
                            n.push(c);
                            chars.next();
                        }
                        let i = n.parse().map_err(|_| bad("array index too large"))?;
                        out.push(PathStep::Index(i));
                    }
                    (_, Indexes::Signed) => {
                        let mut n = String::new();
                        while let Some(&(_, c)) = chars.peek() {
                            if c == ']' {
                                break;
                            }
                            n.push(c);
                            chars.next();
                        }
                        let mut n = n.trim();
                        if n.starts_with("#-") {
                            n = &n[1..];
                        }
                        let i: i64 = n
                            .parse()
                            .map_err(|_| bad("expected an index or a quoted key after `[`"))?;
                        out.push(PathStep::signed(i));
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

/// The rest of a quoted key after its opening quote `q`; a backslash takes
/// the next character literally. `None` when unterminated.
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

/// Follow `path` in `v`: `None` when a key is missing, an index is out of
/// range, or a step meets a value of the other kind.
pub fn lookup<'a>(v: &'a Value, path: &[PathStep]) -> Option<&'a Value> {
    let mut cur = v;
    for s in path {
        cur = match (s, cur) {
            (PathStep::Key(k), Value::Object(m)) => m.get(k)?,
            (PathStep::Index(i), Value::Array(a)) => a.get(*i)?,
            (PathStep::FromEnd(i), Value::Array(a)) => a.get(a.len().checked_sub(*i)?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// The path as text: `$`, then `.key` for keys of letters, digits and `_`,
/// `["key"]` (JSON-quoted) for other keys, `[N]` and `[#-N]` for indexes.
pub fn to_text(path: &[PathStep]) -> String {
    let mut s = String::from("$");
    for step in path {
        match step {
            PathStep::Key(k) => {
                if k.chars().all(|c| c.is_alphanumeric() || c == '_') {
                    s.push('.');
                    s.push_str(k);
                } else {
                    s.push_str(&format!(
                        "[{}]",
                        serde_json::to_string(k).unwrap_or_default()
                    ));
                }
            }
            PathStep::Index(i) => s.push_str(&format!("[{i}]")),
            PathStep::FromEnd(i) => s.push_str(&format!("[#-{i}]")),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_index_rules_share_keys_and_quoting() {
        use PathStep::*;
        for rule in [Indexes::FromStart, Indexes::Signed] {
            assert_eq!(parse("$", rule).unwrap(), vec![]);
            assert_eq!(
                parse(r#"$.a["b c"]['d'][0]"#, rule).unwrap(),
                vec![
                    Key("a".into()),
                    Key("b c".into()),
                    Key("d".into()),
                    Index(0)
                ]
            );
            assert_eq!(
                parse(r#"$."x.y"["\"é"]["\é"]"#, rule).unwrap(),
                vec![Key("x.y".into()), Key("\"é".into()), Key("é".into())]
            );
            for bad in ["a", "$.", "$[", "$[x]", "$..a", "$[0", r#"$["a"#] {
                assert!(parse(bad, rule).is_err(), "{bad} {rule:?}");
            }
        }
    }

    #[test]
    fn index_rules_differ_only_in_sign_and_spaces() {
        for p in ["$[-1]", "$[#-1]", "$[ 0 ]", "$[+1]"] {
            assert!(parse(p, Indexes::FromStart).is_err(), "{p}");
            assert!(parse(p, Indexes::Signed).is_ok(), "{p}");
        }
        let v = json!([1, 2, 3]);
        let at = |p: &str| lookup(&v, &parse(p, Indexes::Signed).unwrap()).cloned();
        assert_eq!(at("$[-1]"), Some(json!(3)));
        assert_eq!(at("$[#-3]"), Some(json!(1)));
        assert_eq!(at("$[-4]"), None);
        assert_eq!(at("$[ 1 ]"), Some(json!(2)));
        assert_eq!(PathStep::signed(-2), PathStep::FromEnd(2));
        assert_eq!(PathStep::signed(2), PathStep::Index(2));
    }

    #[test]
    fn paths_print_back() {
        let p = parse(r#"$.a["b c"][2]"#, Indexes::FromStart).unwrap();
        assert_eq!(to_text(&p), r#"$.a["b c"][2]"#);
    }
}
