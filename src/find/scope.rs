//! Scope resolution (RFC-0012): which table an expression searches and in
//! which mode, and which JSON columns it may use there.

use super::ast::FindExpr;
use super::FindError;

/// The table searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// One hit per trajectory document.
    Runs,
    /// One hit per step.
    Steps,
}

impl Scope {
    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Runs => "runs",
            Scope::Steps => "steps",
        }
    }

    /// JSON columns predicates may read in this scope.
    pub fn json_columns(self) -> &'static [&'static str] {
        match self {
            Scope::Runs => &[
                "agent_extra",
                "final_metrics",
                "extra",
                "meta",
                "unknown_fields",
            ],
            Scope::Steps => &["metrics", "extra"],
        }
    }
}

/// How the search runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Full-text only.
    Fts,
    /// JSON predicates only.
    Json,
    /// Both.
    FtsJson,
    /// Identity conditions only.
    Identity,
}

impl Mode {
    /// The name reported in `search.mode`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Fts => "fts",
            Mode::Json => "json",
            Mode::FtsJson => "fts+json",
            Mode::Identity => "identity",
        }
    }
}

fn walk(e: &FindExpr, text: &mut bool, cols: &mut Vec<Option<String>>) {
    match e {
        FindExpr::Text { .. } => *text = true,
        FindExpr::Json { column, .. } => cols.push(column.clone()),
        FindExpr::Not(x) => walk(x, text, cols),
        FindExpr::And(v) | FindExpr::Or(v) => {
            for x in v {
                walk(x, text, cols);
            }
        }
    }
}

/// Resolve the scope and mode of `expr` (with an optional explicit
/// `--scope`); `step_identity` is true when `--step-id` is given.
pub fn resolve(
    expr: Option<&FindExpr>,
    explicit: Option<Scope>,
    step_identity: bool,
) -> Result<(Scope, Mode), FindError> {
    let mut text = false;
    let mut cols = Vec::new();
    if let Some(e) = expr {
        walk(e, &mut text, &mut cols);
    }
    let named: Vec<&str> = cols.iter().flatten().map(String::as_str).collect();
    for c in &named {
        if !Scope::Runs.json_columns().contains(c) && !Scope::Steps.json_columns().contains(c) {
            return Err(FindError::InvalidArgument {
                message: format!(
                    "unknown JSON column `{c}` (runs: {}; steps: {})",
                    Scope::Runs.json_columns().join(", "),
                    Scope::Steps.json_columns().join(", ")
                ),
            });
        }
    }
    let steps_only = named
        .iter()
        .any(|c| !Scope::Runs.json_columns().contains(c));
    let runs_only = named
        .iter()
        .any(|c| !Scope::Steps.json_columns().contains(c));
    let needs_steps = text || steps_only || step_identity;
    if needs_steps && runs_only {
        let c = named
            .iter()
            .find(|c| !Scope::Steps.json_columns().contains(c))
            .unwrap_or(&"");
        return Err(FindError::InvalidArgument {
            message: format!("`#json.{c}` is a runs column, but the expression searches steps (text, step columns or --step-id); split the search"),
        });
    }
    let inferred = if needs_steps {
        Scope::Steps
    } else if runs_only || !cols.is_empty() || expr.is_none() {
        Scope::Runs
    } else {
        Scope::Steps
    };
    let scope = match explicit {
        None => inferred,
        Some(Scope::Runs) if needs_steps => {
            return Err(FindError::InvalidArgument {
                message: "--scope runs conflicts with the expression: text predicates, step columns and --step-id search steps".into(),
            })
        }
        Some(Scope::Steps) if runs_only => {
            return Err(FindError::InvalidArgument { message: "--scope steps conflicts with a runs-only JSON column in the expression".into() })
        }
        Some(s) => s,
    };
    let json = !cols.is_empty();
    let mode = match (text, json) {
        (true, true) => Mode::FtsJson,
        (true, false) => Mode::Fts,
        (false, true) => Mode::Json,
        (false, false) => Mode::Identity,
    };
    Ok((scope, mode))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::find::parse_match_expression;

    fn r(s: &str) -> Result<(Scope, Mode), FindError> {
        resolve(Some(&parse_match_expression(s).unwrap()), None, false)
    }

    #[test]
    fn rfc_table() {
        assert_eq!(r("timeout").unwrap(), (Scope::Steps, Mode::Fts));
        assert_eq!(r("$.priority>=2").unwrap(), (Scope::Runs, Mode::Json));
        assert_eq!(
            r(r#"#json.metrics("$.score")>=0.9"#).unwrap(),
            (Scope::Steps, Mode::Json)
        );
        assert_eq!(
            r("timeout AND $.priority>=2").unwrap(),
            (Scope::Steps, Mode::FtsJson)
        );
        assert_eq!(
            resolve(None, None, false).unwrap(),
            (Scope::Runs, Mode::Identity)
        );
        assert_eq!(
            resolve(None, None, true).unwrap(),
            (Scope::Steps, Mode::Identity)
        );
        assert_eq!(
            r(r#"#json.final_metrics("$.x")=1"#).unwrap(),
            (Scope::Runs, Mode::Json)
        );
    }

    #[test]
    fn conflicts_are_parameter_errors() {
        assert_eq!(
            r(r#"timeout AND #json.final_metrics("$.x")=1"#)
                .unwrap_err()
                .code(),
            "PC-FND-002"
        );
        assert_eq!(
            r(r#"#json.nope("$.x")=1"#).unwrap_err().code(),
            "PC-FND-002"
        );
        let e = parse_match_expression("timeout").unwrap();
        assert_eq!(
            resolve(Some(&e), Some(Scope::Runs), false)
                .unwrap_err()
                .code(),
            "PC-FND-002"
        );
        let e = parse_match_expression("$.p = 1").unwrap();
        assert_eq!(
            resolve(Some(&e), Some(Scope::Steps), false).unwrap(),
            (Scope::Steps, Mode::Json)
        );
    }
}
