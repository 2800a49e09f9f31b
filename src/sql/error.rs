//! SQL errors: user errors (syntax, names, types, refused statements,
//! resource bounds) kept apart from bugs.

/// What went wrong planning or running a query.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SqlError {
    /// The text is not valid SQL.
    #[error("syntax error: {message}")]
    Syntax {
        /// The parser's message (with line and column).
        message: String,
    },
    /// A statement other than a read-only query.
    #[error("only read-only queries are allowed (SELECT, VALUES, WITH, DESCRIBE, EXPLAIN); {what} is refused")]
    NotReadOnly {
        /// What was found.
        what: String,
    },
    /// More than one statement.
    #[error("one statement per query; found {count}")]
    MultipleStatements {
        /// How many.
        count: usize,
    },
    /// Valid SQL outside the supported subset.
    #[error("unsupported: {what}")]
    Unsupported {
        /// The construct.
        what: String,
    },
    /// A relation name that does not exist.
    #[error("unknown relation `{name}`{hint}")]
    UnknownRelation {
        /// As written.
        name: String,
        /// `; did you mean …?` or empty.
        hint: String,
    },
    /// A column name that does not exist.
    #[error("unknown column `{name}`{hint}")]
    UnknownColumn {
        /// As written.
        name: String,
        /// `; did you mean …?` or empty.
        hint: String,
    },
    /// A column name that matches several inputs.
    #[error("column `{name}` is ambiguous; qualify it (e.g. `{example}`)")]
    AmbiguousColumn {
        /// As written.
        name: String,
        /// A qualified spelling.
        example: String,
    },
    /// An unknown function.
    #[error("unknown function `{name}`{hint}")]
    UnknownFunction {
        /// As written.
        name: String,
        /// Suggestion.
        hint: String,
    },
    /// Types that do not fit.
    #[error("type error: {message}")]
    Type {
        /// What does not fit.
        message: String,
    },
    /// A plan error that the user can fix (grouping, ordering, …).
    #[error("{message}")]
    Plan {
        /// What to fix.
        message: String,
    },
    /// A join on Source-local ids without `source_path` equality.
    #[error("joins between `{left}` and `{right}` must also match `source_path` (ids are only unique within a Source); write:\n  {corrected}")]
    SourceLocalJoin {
        /// Left relation.
        left: String,
        /// Right relation.
        right: String,
        /// The query with the missing condition added.
        corrected: String,
    },
    /// Division by zero.
    #[error("division by zero")]
    DivisionByZero,
    /// A value could not be converted.
    #[error("cannot cast {value} to {to}")]
    Cast {
        /// The value (shortened).
        value: String,
        /// Target type.
        to: String,
    },
    /// The query was stopped from outside: the client of a server request
    /// closed its connection.
    #[error("the query was cancelled: the client closed the connection")]
    Cancelled,
    /// The query ran past `--timeout`.
    #[error("query timed out after {seconds}s (--timeout)")]
    Timeout {
        /// The bound.
        seconds: f64,
    },
    /// The result has more rows than `--max-rows`.
    #[error("the result has more than {limit} rows; add a LIMIT or raise --max-rows")]
    TooManyRows {
        /// The bound.
        limit: u64,
    },
    /// The output is larger than `--max-output-bytes`.
    #[error(
        "the output is larger than {limit} bytes; narrow the query or raise --max-output-bytes"
    )]
    OutputTooLarge {
        /// The bound.
        limit: u64,
    },
    /// Intermediate state exceeded the memory budget.
    #[error("the query needs more than the memory budget of {limit} bytes ({what}); narrow it (filters, fewer columns) or raise --memory-budget")]
    MemoryBudget {
        /// The bound.
        limit: u64,
        /// Which operator.
        what: &'static str,
    },
    /// State past the memory budget was spilled, and the spill files
    /// passed their limit too.
    #[error("the query needs more than the memory budget, and its spill files passed the spill limit of {limit} bytes; narrow it (filters, fewer columns) or raise --memory-budget or --spill-limit")]
    SpillLimit {
        /// The bound.
        limit: u64,
    },
    /// Spill files could not be created, written or read back.
    #[error("cannot spill past the memory budget: {message}; free space in the temporary directory, point TMPDIR at one with room, or raise --memory-budget")]
    Spill {
        /// What failed, with the path.
        message: String,
    },
    /// Too deeply nested.
    #[error("expression or query nested too deeply (limit {limit})")]
    TooDeep {
        /// The bound.
        limit: usize,
    },
    /// Reading the data failed.
    #[error("{message}")]
    Source {
        /// Stable code of the underlying error.
        code: &'static str,
        /// Message.
        message: String,
    },
    /// A bug.
    #[error("internal error: {0}")]
    Internal(String),
}

impl SqlError {
    /// Stable error code.
    pub fn code(&self) -> &'static str {
        match self {
            SqlError::Syntax { .. } => "PC-SQL-001",
            SqlError::NotReadOnly { .. } => "PC-SQL-002",
            SqlError::MultipleStatements { .. } => "PC-SQL-003",
            SqlError::Unsupported { .. } => "PC-SQL-004",
            SqlError::UnknownRelation { .. } => "PC-SQL-005",
            SqlError::UnknownColumn { .. } => "PC-SQL-006",
            SqlError::AmbiguousColumn { .. } => "PC-SQL-007",
            SqlError::UnknownFunction { .. } => "PC-SQL-008",
            SqlError::Type { .. } => "PC-SQL-009",
            SqlError::Plan { .. } => "PC-SQL-010",
            SqlError::SourceLocalJoin { .. } => "PC-SQL-011",
            SqlError::DivisionByZero => "PC-SQL-012",
            SqlError::Cast { .. } => "PC-SQL-013",
            SqlError::Timeout { .. } => "PC-SQL-014",
            SqlError::TooManyRows { .. } => "PC-SQL-015",
            SqlError::OutputTooLarge { .. } => "PC-SQL-016",
            SqlError::MemoryBudget { .. } | SqlError::SpillLimit { .. } => "PC-SQL-017",
            SqlError::TooDeep { .. } => "PC-SQL-018",
            SqlError::Cancelled => "PC-SQL-019",
            SqlError::Spill { .. } => "PC-SQL-020",
            SqlError::Source { code, .. } => code,
            SqlError::Internal(_) => "PC-SQL-099",
        }
    }

    pub(crate) fn plan(message: impl Into<String>) -> Self {
        SqlError::Plan {
            message: message.into(),
        }
    }

    pub(crate) fn unsupported(what: impl Into<String>) -> Self {
        SqlError::Unsupported { what: what.into() }
    }

    pub(crate) fn type_error(message: impl Into<String>) -> Self {
        SqlError::Type {
            message: message.into(),
        }
    }
}

impl From<arrow::error::ArrowError> for SqlError {
    fn from(e: arrow::error::ArrowError) -> Self {
        match e {
            arrow::error::ArrowError::DivideByZero => SqlError::DivisionByZero,
            arrow::error::ArrowError::CastError(m) => SqlError::Cast {
                value: m,
                to: "the target type".into(),
            },
            other => SqlError::Internal(other.to_string()),
        }
    }
}

/// `; did you mean `x`?` for the closest of `candidates`, if any is close.
pub(crate) fn suggest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    let lower = name.to_ascii_lowercase();
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let d = edit_distance(&lower, &c.to_ascii_lowercase());
        if d <= 2.max(lower.len() / 3) && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map_or_else(String::new, |(_, c)| format!("; did you mean `{c}`?"))
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}
