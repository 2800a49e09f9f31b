//! The RFC-0012 expression parser: precedence climbing over the raw text
//! (parentheses > NOT > AND > OR), with byte positions in every error.

use super::ast::{CmpOp, FindExpr, JsonValue, Span, TextField};
use super::FindError;

/// Longest single `--match` expression, in bytes.
pub const MAX_EXPRESSION_BYTES: usize = 4096;
/// Deepest nesting of parentheses and NOTs.
pub const MAX_DEPTH: usize = 64;

struct P<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    depth: usize,
    /// Operator words written in lower or mixed case, by byte offset.
    soft: Vec<(usize, &'a str)>,
}

fn is_op_byte(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'<' | b'>')
}

impl<'a> P<'a> {
    fn err(&self, pos: usize, message: impl Into<String>) -> FindError {
        FindError::Parse {
            position: pos,
            message: message.into(),
        }
    }

    fn ws(&mut self) {
        while self.i < self.b.len() && (self.b[self.i] as char).is_ascii_whitespace() {
            self.i += 1;
        }
        // Unicode whitespace (e.g. full-width spaces) separates too.
        while let Some(c) = self.s[self.i..].chars().next() {
            if c.is_whitespace() {
                self.i += c.len_utf8();
            } else {
                break;
            }
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    /// The word starting at `i` (up to whitespace, a parenthesis or a quote).
    fn word_at(&self, i: usize) -> &'a str {
        let rest = &self.s[i..];
        let end = rest
            .char_indices()
            .find(|(_, c)| c.is_whitespace() || matches!(c, '(' | ')' | '"' | '\''))
            .map_or(rest.len(), |(k, _)| k);
        &rest[..end]
    }

    fn keyword_at(&self, i: usize) -> Option<&'static str> {
        let w = self.word_at(i);
        ["AND", "OR", "NOT"]
            .into_iter()
            .find(|k| w.eq_ignore_ascii_case(k))
    }

    fn eat_keyword(&mut self, k: &str) -> bool {
        self.ws();
        if self.keyword_at(self.i) == Some(k) {
            let word = &self.s[self.i..self.i + k.len()];
            if word != k {
                self.soft.push((self.i, word));
            }
            self.i += k.len();
            true
        } else {
            false
        }
    }

    fn enter(&mut self) -> Result<(), FindError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(FindError::Resource {
                message: format!("the expression is nested deeper than {MAX_DEPTH} levels"),
            });
        }
        Ok(())
    }

    fn or(&mut self) -> Result<FindExpr, FindError> {
        let mut terms = vec![self.and()?];
        while self.eat_keyword("OR") {
            terms.push(self.and()?);
        }
        Ok(flatten(terms, false))
    }

    fn and(&mut self) -> Result<FindExpr, FindError> {
        let mut terms = vec![self.unary()?];
        while self.eat_keyword("AND") {
            terms.push(self.unary()?);
        }
        Ok(flatten(terms, true))
    }

    fn unary(&mut self) -> Result<FindExpr, FindError> {
        if self.eat_keyword("NOT") {
            self.enter()?;
            let e = self.unary()?;
            self.depth -= 1;
            return Ok(FindExpr::Not(Box::new(e)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<FindExpr, FindError> {
        self.ws();
        let start = self.i;
        match self.peek() {
            None => Err(self.err(
                start,
                "expected a search term, found the end of the expression",
            )),
            Some(b'(') => {
                self.enter()?;
                self.i += 1;
                let e = self.or()?;
                self.ws();
                if self.peek() != Some(b')') {
                    return Err(self.err(self.i, "expected `)`"));
                }
                self.i += 1;
                self.depth -= 1;
                Ok(e)
            }
            Some(b')') => Err(self.err(start, "unexpected `)`")),
            Some(b'#') => self.selector(),
            Some(b'$') => self.json_short(),
            Some(b'"' | b'\'') => {
                let text = self.quoted()?;
                // A quoted `$…` followed by an operator is a JSON path.
                let save = self.i;
                self.ws();
                if text.starts_with('$') && self.peek().is_some_and(is_op_byte) {
                    check_path(&text).map_err(|m| self.err(start, m))?;
                    let (op, value) = self.op_value()?;
                    return Ok(FindExpr::Json {
                        column: None,
                        path: text,
                        op,
                        value,
                        span: Span { start, end: self.i },
                    });
                }
                self.i = save;
                searchable(&text)?;
                Ok(FindExpr::Text {
                    field: TextField::Plain,
                    text,
                    span: Span { start, end: self.i },
                })
            }
            Some(_) => {
                if let Some(k) = self.keyword_at(start) {
                    return Err(self.err(
                        start,
                        format!(
                            "expected a search term before `{k}` (quote it to search for the word)"
                        ),
                    ));
                }
                // A bare phrase: words up to a keyword, a parenthesis or the end.
                let mut end = start;
                loop {
                    let w = self.word_at(self.i);
                    if w.is_empty() || self.keyword_at(self.i).is_some() {
                        break;
                    }
                    self.i += w.len();
                    end = self.i;
                    let save = self.i;
                    self.ws();
                    if matches!(self.peek(), None | Some(b'(' | b')' | b'"' | b'\''))
                        || self.keyword_at(self.i).is_some()
                    {
                        self.i = save;
                        break;
                    }
                }
                let text = self.s[start..end].to_string();
                if text.is_empty() {
                    return Err(self.err(
                        start,
                        format!(
                            "unexpected `{}`",
                            self.s[start..].chars().next().unwrap_or(' ')
                        ),
                    ));
                }
                searchable(&text)?;
                Ok(FindExpr::Text {
                    field: TextField::Plain,
                    text,
                    span: Span { start, end },
                })
            }
        }
    }

    fn quoted(&mut self) -> Result<String, FindError> {
        let start = self.i;
        let q = self.b[self.i];
        self.i += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.s[self.i..].chars().next() else {
                return Err(self.err(start, "unterminated string"));
            };
            self.i += c.len_utf8();
            match c {
                c if c as u32 == u32::from(q) => return Ok(out),
                '\\' => {
                    let Some(e) = self.s[self.i..].chars().next() else {
                        return Err(self.err(self.i, "unterminated escape"));
                    };
                    self.i += e.len_utf8();
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        'u' => {
                            let hex = self
                                .s
                                .get(self.i..self.i + 4)
                                .ok_or_else(|| self.err(self.i, "bad \\u escape"))?;
                            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                                return Err(self.err(self.i, "bad \\u escape"));
                            }
                            let v = u32::from_str_radix(hex, 16)
                                .map_err(|_| self.err(self.i, "bad \\u escape"))?;
                            out.push(
                                char::from_u32(v)
                                    .ok_or_else(|| self.err(self.i, "bad \\u escape"))?,
                            );
                            self.i += 4;
                        }
                        other => out.push(other),
                    }
                }
                other => out.push(other),
            }
        }
    }

    fn selector(&mut self) -> Result<FindExpr, FindError> {
        let start = self.i;
        self.i += 1;
        let name_start = self.i;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
        {
            self.i += 1;
        }
        let name = self.s[name_start..self.i].to_ascii_lowercase();
        if name == "json" {
            let mut column = None;
            if self.peek() == Some(b'.') {
                self.i += 1;
                let cs = self.i;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
                {
                    self.i += 1;
                }
                if cs == self.i {
                    return Err(self.err(cs, "expected a column name after `#json.`"));
                }
                column = Some(self.s[cs..self.i].to_ascii_lowercase());
            }
            self.ws();
            self.expect(b'(')?;
            self.ws();
            let path = match self.peek() {
                Some(b'"' | b'\'') => self.quoted()?,
                _ => {
                    let ps = self.i;
                    while self
                        .peek()
                        .is_some_and(|c| c != b')' && !(c as char).is_ascii_whitespace())
                    {
                        self.i += 1;
                    }
                    self.s[ps..self.i].to_string()
                }
            };
            check_path(&path).map_err(|m| self.err(start, m))?;
            self.ws();
            self.expect(b')')?;
            let (op, value) = self.op_value()?;
            return Ok(FindExpr::Json {
                column,
                path,
                op,
                value,
                span: Span { start, end: self.i },
            });
        }
        let Some(field) = TextField::from_selector(&name) else {
            return Err(self.err(start, format!("unknown selector `#{name}` (known: #content #message #user #assistant #agent #system #reasoning #observation #prompt #model #model_name #all #json)")));
        };
        self.ws();
        self.expect(b'(')?;
        self.ws();
        let text = match self.peek() {
            Some(b'"' | b'\'') => {
                let t = self.quoted()?;
                self.ws();
                t
            }
            _ => {
                let ts = self.i;
                while self.peek().is_some_and(|c| c != b')') {
                    self.i += 1;
                }
                self.s[ts..self.i].trim().to_string()
            }
        };
        self.expect(b')')?;
        if text.trim().is_empty() {
            return Err(FindError::InvalidArgument {
                message: format!("#{name}() needs text to search for"),
            });
        }
        searchable(&text)?;
        Ok(FindExpr::Text {
            field,
            text,
            span: Span { start, end: self.i },
        })
    }

    fn expect(&mut self, c: u8) -> Result<(), FindError> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.err(self.i, format!("expected `{}`", c as char)))
        }
    }

    fn json_short(&mut self) -> Result<FindExpr, FindError> {
        let start = self.i;
        while self.peek().is_some_and(|c| {
            !(c as char).is_ascii_whitespace() && !is_op_byte(c) && c != b')' && c != b'('
        }) {
            self.i += 1;
        }
        let path = self.s[start..self.i].to_string();
        check_path(&path).map_err(|m| self.err(start, m))?;
        let (op, value) = self.op_value()?;
        Ok(FindExpr::Json {
            column: None,
            path,
            op,
            value,
            span: Span { start, end: self.i },
        })
    }

    fn op_value(&mut self) -> Result<(CmpOp, JsonValue), FindError> {
        self.ws();
        let at = self.i;
        let rest = &self.s[self.i..];
        let (op, len) = if rest.starts_with(">=") {
            (CmpOp::Ge, 2)
        } else if rest.starts_with("<=") {
            (CmpOp::Le, 2)
        } else if rest.starts_with("!=") {
            (CmpOp::Ne, 2)
        } else if rest.starts_with('=') {
            (CmpOp::Eq, 1)
        } else if rest.starts_with('>') {
            (CmpOp::Gt, 1)
        } else if rest.starts_with('<') {
            (CmpOp::Lt, 1)
        } else {
            return Err(self.err(
                at,
                "expected an operator (= != > >= < <=) after the JSON path",
            ));
        };
        self.i += len;
        if self.peek().is_some_and(is_op_byte) {
            let end = self.s[at..]
                .find(|c: char| !c.is_ascii() || !is_op_byte(c as u8))
                .map_or(self.s.len(), |n| at + n);
            return Err(self.err(
                at,
                format!(
                    "unknown operator `{}` (use = != > >= < <=)",
                    &self.s[at..end]
                ),
            ));
        }
        self.ws();
        let vs = self.i;
        let value = match self.peek() {
            Some(b'"' | b'\'') => JsonValue::Str(self.quoted()?),
            None => return Err(self.err(vs, "expected a value after the operator")),
            _ => {
                while self
                    .peek()
                    .is_some_and(|c| !(c as char).is_ascii_whitespace() && c != b')' && c != b'(')
                {
                    self.i += 1;
                }
                let raw = &self.s[vs..self.i];
                if raw.is_empty() {
                    return Err(self.err(vs, "expected a value after the operator"));
                }
                match raw {
                    "true" => JsonValue::Bool(true),
                    "false" => JsonValue::Bool(false),
                    "null" => JsonValue::Null,
                    n if is_number(n) => JsonValue::Num(n.to_string()),
                    s => JsonValue::Str(s.to_string()),
                }
            }
        };
        if op.is_range() && !matches!(value, JsonValue::Num(_)) {
            return Err(FindError::InvalidArgument {
                message: format!(
                    "`{}` compares numbers; the value must be a number",
                    op.symbol()
                ),
            });
        }
        Ok((op, value))
    }
}

fn is_number(s: &str) -> bool {
    matches!(
        serde_json::from_str::<serde_json::Value>(s),
        Ok(serde_json::Value::Number(_))
    )
}

/// Validate a JSONPath: `$` then `.key`, `["key"]` or `[n]` steps.
fn check_path(p: &str) -> Result<(), String> {
    if !p.starts_with('$') {
        return Err(format!("a JSON path starts with `$`, found `{p}`"));
    }
    super::predicate::parse_path(p)
        .map(|_| ())
        .map_err(|e| match e {
            FindError::InvalidArgument { message } => message,
            other => other.to_string(),
        })
}

/// Refuse text with no searchable word (only punctuation or spaces).
fn searchable(text: &str) -> Result<(), FindError> {
    if crate::fts::tokens(text).is_empty() {
        return Err(FindError::InvalidArgument {
            message: format!("`{text}` has no searchable words (only punctuation or spaces)"),
        });
    }
    Ok(())
}

fn flatten(terms: Vec<FindExpr>, and: bool) -> FindExpr {
    if terms.len() == 1 {
        return terms.into_iter().next().expect("one term");
    }
    let mut out = Vec::with_capacity(terms.len());
    for t in terms {
        match (t, and) {
            (FindExpr::And(inner), true) | (FindExpr::Or(inner), false) => out.extend(inner),
            (other, _) => out.push(other),
        }
    }
    if and {
        FindExpr::And(out)
    } else {
        FindExpr::Or(out)
    }
}

/// Parse one `--match` expression (at most [`MAX_EXPRESSION_BYTES`]).
pub fn parse_match_expression(text: &str) -> Result<FindExpr, FindError> {
    if text.len() > MAX_EXPRESSION_BYTES {
        return Err(FindError::Resource {
            message: format!(
                "one --match is limited to {MAX_EXPRESSION_BYTES} bytes (got {})",
                text.len()
            ),
        });
    }
    parse_expression_text(text)
}

/// Parse an expression of any length: the canonical form of an accepted
/// `--match` can be longer than the bound (quotes added, control characters
/// escaped), and must still parse back to the same expression. Nesting stays
/// bounded.
pub fn parse_expression_text(text: &str) -> Result<FindExpr, FindError> {
    parse_recording(text).map(|(e, _)| e)
}

fn parse_recording(text: &str) -> Result<(FindExpr, Vec<(usize, &str)>), FindError> {
    let mut p = P {
        s: text,
        b: text.as_bytes(),
        i: 0,
        depth: 0,
        soft: Vec::new(),
    };
    let e = p.or()?;
    p.ws();
    if p.i < text.len() {
        let word = p.word_at(p.i);
        let shown: String = if word.is_empty() {
            text[p.i..].chars().take(1).collect()
        } else {
            word.chars().take(20).collect()
        };
        let hint = if shown == ")" {
            "(no `(` is open)"
        } else {
            "(join terms with AND or OR, or quote a phrase)"
        };
        return Err(p.err(p.i, format!("unexpected `{shown}` {hint}")));
    }
    Ok((e, p.soft))
}

/// Notes for a `--match` whose lower-case (or mixed-case) `and`, `or` or
/// `not` was read as an operator, as RFC-0012 says: `not found` searches
/// steps without `found`. Each note shows how the expression was read and
/// the quoted alternative. Empty when every operator was written in capitals
/// or the expression does not parse.
pub fn operator_notes(text: &str) -> Vec<String> {
    let Ok((e, soft)) = parse_recording(text) else {
        return Vec::new();
    };
    if soft.is_empty() {
        return Vec::new();
    }
    let mut words: Vec<String> = soft.iter().map(|(_, w)| format!("`{w}`")).collect();
    words.dedup();
    // A plain run of words is quoted whole; elsewhere the operator words are
    // shown in capitals (their meaning) and quoting is left to the reader.
    let bare = !text.chars().any(|c| {
        matches!(
            c,
            '"' | '\'' | '(' | ')' | '#' | '$' | '=' | '<' | '>' | '!'
        )
    });
    let alternative = if bare {
        let quoted = FindExpr::Text {
            field: super::ast::TextField::Plain,
            text: text.trim().to_string(),
            span: Span { start: 0, end: 0 },
        };
        format!("to search for the words, quote them: --match '{quoted}'")
    } else {
        "write operators in capitals (AND, OR, NOT) and quote words you mean as text".to_string()
    };
    vec![format!(
        "lower-case {} in `{}` {} read as an operator: {e}; {alternative}",
        words.join(", "),
        text.trim(),
        if words.len() == 1 { "was" } else { "were" },
    )]
}

/// Combine repeated `--match` expressions with AND.
pub fn combine_match_expressions(exprs: Vec<FindExpr>) -> Option<FindExpr> {
    match exprs.len() {
        0 => None,
        1 => exprs.into_iter().next(),
        _ => Some(flatten(exprs, true)),
    }
}
