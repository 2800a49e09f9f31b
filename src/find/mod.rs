//! `find`: the RFC-0012 expression language and its search.
//!
//! One parser and AST ([`FindExpr`]) serve the CLI and the web explorer:
//! [`parse_match_expression`] reads one `--match`, and
//! [`combine_match_expressions`] joins repeated ones with AND. The canonical
//! print (`Display`) parses back to the same AST. [`scope`] resolves what is
//! searched, [`prepare`] decides which full-text index serves each Source
//! (a store's own, the Dataset's cache, or one in memory) and builds what is
//! missing, [`exec`] compiles the expression and evaluates it over index
//! document sets (steps) or `runs` rows, and [`search`] ties them together.
//!
//! What it does not: know tantivy or jieba. The index, the analyzer, term
//! and phrase queries and the reading of stored fields are [`crate::fts`]'s.
//!
//! May call: `fts`, `dataset`, `catalog`, `store`, `table`, `formats`, `s3`,
//! `sql` (its error type), `error` (what [`search`] returns), `util`. Never
//! `cli` or `web`.

pub mod ast;
mod compile;
pub mod exec;
mod parser;
pub mod predicate;
pub mod prepare;
mod preview;
mod runs;
pub mod scope;
pub mod search;
mod sets;
mod steps;

/// The analyzer every search and index uses, as reported to users.
pub use crate::fts::TOKENIZER_NAME;
pub use ast::{CmpOp, FindExpr, JsonValue, Span, TextField};
pub use parser::{
    combine_match_expressions, operator_notes, parse_expression_text, parse_match_expression,
    MAX_DEPTH, MAX_EXPRESSION_BYTES,
};

/// `find` errors, distinguishable by code.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FindError {
    /// The expression does not parse.
    #[error("cannot parse the expression at byte {position}: {message}")]
    Parse {
        /// Byte offset in the expression.
        position: usize,
        /// What was expected.
        message: String,
    },
    /// A well-formed expression or flag that cannot apply.
    #[error("invalid argument: {message}")]
    InvalidArgument {
        /// What is wrong.
        message: String,
    },
    /// The full-text index is missing and cannot be built.
    #[error("full-text index unavailable: {message}")]
    IndexUnavailable {
        /// Why.
        message: String,
    },
    /// A bound was hit (size, depth, time, output).
    #[error("resource limit: {message}")]
    Resource {
        /// Which bound.
        message: String,
    },
}

/// Why a search failed: its own errors, or reading the Sources it searches.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The expression, the index or a bound.
    #[error(transparent)]
    Find(#[from] FindError),
    /// Reading the Sources (a strict refusal, a Source changed while read).
    #[error(transparent)]
    Sql(#[from] crate::sql::SqlError),
}

impl SearchError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            SearchError::Find(e) => e.code(),
            SearchError::Sql(e) => e.code(),
        }
    }
}

/// An index that cannot be read is unavailable.
impl From<crate::fts::FtsError> for FindError {
    fn from(e: crate::fts::FtsError) -> Self {
        FindError::IndexUnavailable {
            message: e.to_string(),
        }
    }
}

impl FindError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            FindError::Parse { .. } => "PC-FND-001",
            FindError::InvalidArgument { .. } => "PC-FND-002",
            FindError::IndexUnavailable { .. } => "PC-FND-003",
            FindError::Resource { .. } => "PC-FND-004",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        parse_match_expression(s)
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .to_string()
    }

    #[test]
    fn canonical_forms() {
        for (input, want) in [
            ("timeout", r#""timeout""#),
            ("timeout error", r#""timeout error""#),
            ("timeout error AND retry", r#""timeout error" AND "retry""#),
            (
                r#"#user("timeout") OR #assistant("retry") AND NOT #system("example")"#,
                r#"#user("timeout") OR #assistant("retry") AND NOT #system("example")"#,
            ),
            (
                r#"(#user("timeout") OR #assistant("retry")) AND NOT #system("example")"#,
                r#"(#user("timeout") OR #assistant("retry")) AND NOT #system("example")"#,
            ),
            ("#agent(retry)", r#"#assistant("retry")"#),
            ("#model_name(gpt-4o)", r#"#model("gpt-4o")"#),
            ("$.priority>=2", "$.priority >= 2"),
            (r#"$.tags="important""#, r#"$.tags = "important""#),
            (
                r#"#json.metrics("$.score")>=0.9"#,
                r#"#json.metrics("$.score") >= 0.9"#,
            ),
            ("$.a.b[0] != null", "$.a.b[0] != null"),
            ("$.ok = true", "$.ok = true"),
            ("$.name = bob", r#"$.name = "bob""#),
            ("android and orange", r#""android" AND "orange""#),
            ("a or b and c", r#""a" OR "b" AND "c""#),
            ("not a", r#"NOT "a""#),
            ("超时 AND 数据库", r#""超时" AND "数据库""#),
            (r#""say \"hi\"""#, r#""say \"hi\"""#),
            ("((a))", r#""a""#),
            ("a AND (b AND c)", r#""a" AND "b" AND "c""#),
            ("NOT (a OR b)", r#"NOT ("a" OR "b")"#),
        ] {
            assert_eq!(canon(input), want, "{input}");
            // The canonical form parses back to the same tree.
            assert_eq!(
                parse_match_expression(&canon(input)).unwrap(),
                parse_match_expression(input).unwrap(),
                "{input}"
            );
        }
    }

    #[test]
    fn errors_carry_positions_and_codes() {
        let e = parse_match_expression("a AND").unwrap_err();
        assert_eq!(
            (e.code(), matches!(e, FindError::Parse { position: 5, .. })),
            ("PC-FND-001", true),
            "{e:?}"
        );
        assert_eq!(
            parse_match_expression("(a").unwrap_err().code(),
            "PC-FND-001"
        );
        assert_eq!(
            parse_match_expression("#nope(x)").unwrap_err().code(),
            "PC-FND-001"
        );
        assert_eq!(
            parse_match_expression("$.p > abc").unwrap_err().code(),
            "PC-FND-002"
        );
        assert_eq!(
            parse_match_expression("#user()").unwrap_err().code(),
            "PC-FND-002"
        );
        assert_eq!(
            parse_match_expression(&"a ".repeat(3000))
                .unwrap_err()
                .code(),
            "PC-FND-004"
        );
        assert_eq!(
            parse_match_expression(&format!("{}a{}", "(".repeat(100), ")".repeat(100)))
                .unwrap_err()
                .code(),
            "PC-FND-004"
        );
        assert_eq!(
            parse_match_expression(r#""open"#).unwrap_err().code(),
            "PC-FND-001"
        );
        assert_eq!(
            parse_match_expression("$x = 1").unwrap_err().code(),
            "PC-FND-001"
        );
    }

    #[test]
    fn lower_case_operators_are_noted_with_the_quoted_alternative() {
        let n = operator_notes("No such file or directory");
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(
            n[0].contains(r#""No such file" OR "directory""#)
                && n[0].contains(r#"--match '"No such file or directory"'"#),
            "{}",
            n[0]
        );
        let n = operator_notes("not found");
        assert!(n[0].contains(r#"NOT "found""#), "{n:?}");
        // Capitals are the operator on purpose: no note.
        assert!(operator_notes("timeout OR retry").is_empty());
        assert!(operator_notes("timeout").is_empty());
        // Inside a quoted phrase the words are text.
        assert!(operator_notes(r#""not found""#).is_empty());
        let n = operator_notes("#user(a) and b");
        assert!(n[0].contains("capitals"), "{n:?}");
    }

    #[test]
    fn repeated_matches_are_and_and_keep_or_inside() {
        let a = parse_match_expression("a OR b").unwrap();
        let b = parse_match_expression("c").unwrap();
        let c = combine_match_expressions(vec![a, b]).unwrap();
        assert_eq!(c.to_string(), r#"("a" OR "b") AND "c""#);
    }
}
