//! The `find` expression AST (RFC-0012). `Display` prints the canonical
//! form, which parses back to the same AST.

use std::fmt;

/// Text fields a text predicate can target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TextField {
    /// Plain text: the content set (message, observation, prompt).
    Plain,
    /// `#content`: message, observation and prompt.
    Content,
    /// `#message`: the message text.
    Message,
    /// `#user`: the message of user steps.
    User,
    /// `#assistant` (alias `#agent`): the message of agent steps.
    Assistant,
    /// `#system`: prompt and message of system steps.
    System,
    /// `#reasoning`: reasoning text.
    Reasoning,
    /// `#observation`: observation text.
    Observation,
    /// `#prompt`: prompt and message.
    Prompt,
    /// `#model` (alias `#model_name`): the step model name.
    Model,
    /// `#all`: every indexed step text column.
    All,
}

impl TextField {
    /// Selector name (without `#`), for every spelling.
    pub fn from_selector(name: &str) -> Option<TextField> {
        Some(match name {
            "content" => TextField::Content,
            "message" => TextField::Message,
            "user" => TextField::User,
            "assistant" | "agent" => TextField::Assistant,
            "system" => TextField::System,
            "reasoning" => TextField::Reasoning,
            "observation" => TextField::Observation,
            "prompt" => TextField::Prompt,
            "model" | "model_name" => TextField::Model,
            "all" => TextField::All,
            _ => return None,
        })
    }

    /// The canonical selector (`None` for plain text).
    pub fn selector(self) -> Option<&'static str> {
        Some(match self {
            TextField::Plain => return None,
            TextField::Content => "content",
            TextField::Message => "message",
            TextField::User => "user",
            TextField::Assistant => "assistant",
            TextField::System => "system",
            TextField::Reasoning => "reasoning",
            TextField::Observation => "observation",
            TextField::Prompt => "prompt",
            TextField::Model => "model",
            TextField::All => "all",
        })
    }
}

/// Comparison operators of JSON predicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `=`
    Eq,
    /// `!=`
    Ne,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
}

impl CmpOp {
    /// The operator text.
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Ne => "!=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
        }
    }

    /// True for `> >= < <=`.
    pub fn is_range(self) -> bool {
        matches!(self, CmpOp::Gt | CmpOp::Ge | CmpOp::Lt | CmpOp::Le)
    }
}

/// The right side of a JSON predicate.
#[derive(Debug, Clone, PartialEq)]
pub enum JsonValue {
    /// A string (quoted or bare).
    Str(String),
    /// A number (kept as written for exact printing).
    Num(String),
    /// `true` / `false`.
    Bool(bool),
    /// `null`.
    Null,
}

impl JsonValue {
    /// As a JSON value.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            JsonValue::Str(s) => serde_json::Value::String(s.clone()),
            JsonValue::Num(n) => serde_json::from_str(n).unwrap_or(serde_json::Value::Null),
            JsonValue::Bool(b) => serde_json::Value::Bool(*b),
            JsonValue::Null => serde_json::Value::Null,
        }
    }
}

/// A byte range in the expression text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    /// Start byte.
    pub start: usize,
    /// End byte (exclusive).
    pub end: usize,
}

/// A find expression.
#[derive(Debug, Clone)]
pub enum FindExpr {
    /// Full-text predicate.
    Text {
        /// Targeted field.
        field: TextField,
        /// The text (a word or a phrase).
        text: String,
        /// Where it was written.
        span: Span,
    },
    /// JSON path predicate.
    Json {
        /// `#json.COLUMN`; `None` for the short form `$.path OP value`.
        column: Option<String>,
        /// The JSONPath text (`$…`).
        path: String,
        /// Operator.
        op: CmpOp,
        /// Right side.
        value: JsonValue,
        /// Where it was written.
        span: Span,
    },
    /// `NOT e`
    Not(Box<FindExpr>),
    /// `a AND b AND …` (two or more terms)
    And(Vec<FindExpr>),
    /// `a OR b OR …` (two or more terms)
    Or(Vec<FindExpr>),
}

/// Equality ignores spans: two spellings of one expression are equal.
impl PartialEq for FindExpr {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (
                FindExpr::Text {
                    field: a, text: b, ..
                },
                FindExpr::Text {
                    field: c, text: d, ..
                },
            ) => a == c && b == d,
            (
                FindExpr::Json {
                    column: a,
                    path: b,
                    op: c,
                    value: d,
                    ..
                },
                FindExpr::Json {
                    column: e,
                    path: f,
                    op: g,
                    value: h,
                    ..
                },
            ) => a == e && b == f && c == g && d == h,
            (FindExpr::Not(a), FindExpr::Not(b)) => a == b,
            (FindExpr::And(a), FindExpr::And(b)) | (FindExpr::Or(a), FindExpr::Or(b)) => a == b,
            _ => false,
        }
    }
}

/// Quote a string with `"` and backslash escapes.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn prec(e: &FindExpr) -> u8 {
    match e {
        FindExpr::Or(_) => 1,
        FindExpr::And(_) => 2,
        FindExpr::Not(_) => 3,
        _ => 4,
    }
}

fn child(f: &mut fmt::Formatter<'_>, e: &FindExpr, min: u8) -> fmt::Result {
    if prec(e) < min {
        write!(f, "({e})")
    } else {
        write!(f, "{e}")
    }
}

impl fmt::Display for FindExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FindExpr::Text { field, text, .. } => match field.selector() {
                None => f.write_str(&quote(text)),
                Some(s) => write!(f, "#{s}({})", quote(text)),
            },
            FindExpr::Json {
                column,
                path,
                op,
                value,
                ..
            } => {
                let v = match value {
                    JsonValue::Str(s) => quote(s),
                    JsonValue::Num(n) => n.clone(),
                    JsonValue::Bool(b) => b.to_string(),
                    JsonValue::Null => "null".into(),
                };
                // A path the short form cannot spell bare is quoted.
                let bare = !path.is_empty()
                    && path.bytes().all(|c| {
                        !c.is_ascii_whitespace()
                            && !matches!(
                                c,
                                b'=' | b'!' | b'<' | b'>' | b'(' | b')' | b'"' | b'\'' | b'\\'
                            )
                    })
                    && path.chars().all(|c| !c.is_whitespace());
                match column {
                    None if bare => write!(f, "{path} {} {v}", op.symbol()),
                    None => write!(f, "{} {} {v}", quote(path), op.symbol()),
                    Some(c) => write!(f, "#json.{c}({}) {} {v}", quote(path), op.symbol()),
                }
            }
            FindExpr::Not(e) => {
                f.write_str("NOT ")?;
                child(f, e, 3)
            }
            FindExpr::And(v) => {
                for (i, e) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" AND ")?;
                    }
                    child(f, e, 3)?;
                }
                Ok(())
            }
            FindExpr::Or(v) => {
                for (i, e) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" OR ")?;
                    }
                    child(f, e, 2)?;
                }
                Ok(())
            }
        }
    }
}
