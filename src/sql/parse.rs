//! Parsing with sqlparser and the read-only allow-list: one SELECT / VALUES
//! / WITH query, `EXPLAIN <query>`, or `DESCRIBE <relation>`.

use sqlparser::ast as sql;
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;

use super::SqlError;

/// The statement kinds pChronicle runs.
#[derive(Debug)]
pub enum Parsed {
    /// A query.
    Query(sql::Statement),
    /// `EXPLAIN <query>`.
    Explain(sql::Statement),
    /// `EXPLAIN ANALYZE` of a query.
    ExplainAnalyze(sql::Statement),
    /// `DESCRIBE <relation>`.
    Describe(Vec<String>),
}

/// Largest SQL text accepted.
pub const MAX_SQL_BYTES: usize = 1 << 20;

/// Parse one read-only statement.
pub fn parse(text: &str) -> Result<Parsed, SqlError> {
    if text.len() > MAX_SQL_BYTES {
        return Err(SqlError::Syntax {
            message: format!("the query is longer than {MAX_SQL_BYTES} bytes"),
        });
    }
    let dialect = GenericDialect {};
    let mut stmts = Parser::new(&dialect)
        .with_recursion_limit(super::bind::MAX_DEPTH)
        .try_with_sql(text)
        .and_then(|mut p| p.parse_statements())
        .map_err(|e| match e {
            sqlparser::parser::ParserError::RecursionLimitExceeded => SqlError::TooDeep {
                limit: super::bind::MAX_DEPTH,
            },
            other => SqlError::Syntax {
                message: other
                    .to_string()
                    .trim_start_matches("sql parser error: ")
                    .to_string(),
            },
        })?;
    if stmts.len() != 1 {
        return Err(if stmts.is_empty() {
            SqlError::Syntax {
                message: "empty query".into(),
            }
        } else {
            SqlError::MultipleStatements { count: stmts.len() }
        });
    }
    let stmt = stmts.remove(0);
    match stmt {
        sql::Statement::Query(_) => Ok(Parsed::Query(stmt)),
        sql::Statement::Explain {
            statement, analyze, ..
        } => match *statement {
            s @ sql::Statement::Query(_) if analyze => Ok(Parsed::ExplainAnalyze(s)),
            s @ sql::Statement::Query(_) => Ok(Parsed::Explain(s)),
            other => Err(refused(&other)),
        },
        sql::Statement::ExplainTable { table_name, .. } => Ok(Parsed::Describe(
            table_name
                .0
                .iter()
                .map(|p| match p {
                    sql::ObjectNamePart::Identifier(i) => i.value.to_ascii_lowercase(),
                    sql::ObjectNamePart::Function(f) => f.name.value.clone(),
                })
                .collect(),
        )),
        other => Err(refused(&other)),
    }
}

/// The refusal for a statement that is not a read-only query.
fn refused(s: &sql::Statement) -> SqlError {
    let text = s.to_string();
    let word: String = text
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    SqlError::NotReadOnly {
        what: crate::util::text::truncate_chars(&word, 40).into_owned(),
    }
}

/// The query selecting the positions of `trajectories` rows that satisfy
/// `condition` (one boolean SQL expression, parsed on its own so it cannot
/// change the statement around it).
pub fn trajectories_where(condition: &str, mount: &str) -> Result<String, SqlError> {
    if condition.len() > MAX_SQL_BYTES {
        return Err(SqlError::Syntax {
            message: "the condition is too long".into(),
        });
    }
    let dialect = GenericDialect {};
    let mut p = Parser::new(&dialect)
        .with_recursion_limit(super::bind::MAX_DEPTH)
        .try_with_sql(condition)
        .map_err(|e| SqlError::Syntax {
            message: e.to_string(),
        })?;
    let expr = p.parse_expr().map_err(|e| SqlError::Syntax {
        message: e.to_string(),
    })?;
    if p.peek_token().token != sqlparser::tokenizer::Token::EOF {
        return Err(SqlError::Syntax {
            message: format!("unexpected text after the condition `{expr}`"),
        });
    }
    Ok(format!(
        "SELECT source_path, storage_ordinal FROM {mount}.trajectories WHERE {expr}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_list() {
        assert!(matches!(parse("SELECT 1"), Ok(Parsed::Query(_))));
        assert!(matches!(
            parse("WITH a AS (SELECT 1) SELECT * FROM a"),
            Ok(Parsed::Query(_))
        ));
        assert!(matches!(parse("VALUES (1), (2)"), Ok(Parsed::Query(_))));
        assert!(matches!(parse("EXPLAIN SELECT 1"), Ok(Parsed::Explain(_))));
        assert!(matches!(
            parse("DESCRIBE dataset.steps"),
            Ok(Parsed::Describe(_))
        ));
        for bad in [
            "DELETE FROM runs",
            "INSERT INTO runs VALUES (1)",
            "CREATE TABLE t (a INT)",
            "DROP TABLE runs",
            "COPY runs TO 'x.csv'",
            "ATTACH 'x.db'",
            "PRAGMA version",
            "SET threads = 4",
            "UPDATE runs SET a = 1",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(
                matches!(e.code(), "PC-SQL-002" | "PC-SQL-001"),
                "{bad}: {e:?}"
            );
        }
        assert_eq!(
            parse("SELECT 1; SELECT 2").unwrap_err().code(),
            "PC-SQL-003"
        );
        assert_eq!(parse("SELEC 1").unwrap_err().code(), "PC-SQL-001");
        let deep = format!("SELECT {}1{}", "(".repeat(500), ")".repeat(500));
        assert_eq!(parse(&deep).unwrap_err().code(), "PC-SQL-018");
    }
}
