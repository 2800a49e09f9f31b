//! `query` and `analysis` settings.

use super::{
    default_warehouse, discovery, positive, read_settings, AnalysisArgs, AnalysisReportArg,
    DatasetUri, DiscoveryLimits, Env, Path, PathBuf, QueryArgs, QueryFormatArg, SettingsError,
};

pub(super) fn query_settings(
    a: &QueryArgs,
    env: &Env,
    settings_path: Option<&Path>,
) -> Result<QuerySettings, SettingsError> {
    let (limits, strict) = discovery(&a.discovery)?;
    let (positional, sql) = match a.args.as_slice() {
        [sql] => (None, sql.clone()),
        [ds, sql] => (Some(ds.as_str()), sql.clone()),
        _ => {
            return Err(SettingsError::InvalidValue {
                flag: "SQL",
                reason: "give the SQL text (and optionally a Dataset before it)".into(),
            })
        }
    };
    if sql.trim().is_empty() {
        return Err(SettingsError::InvalidValue {
            flag: "SQL",
            reason: "the query is empty".into(),
        });
    }
    let mut mounts: Vec<(String, DatasetUri)> = Vec::new();
    if let Some(ds) = positional {
        mounts.push(("dataset".into(), DatasetUri::parse(ds, &env.cwd)?));
    }
    for m in &a.mounts {
        let Some((name, uri)) = m.split_once('=') else {
            return Err(SettingsError::InvalidValue {
                flag: "--dataset",
                reason: format!("`{m}` is not NAME=URI"),
            });
        };
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid {
            return Err(SettingsError::InvalidValue {
                flag: "--dataset",
                reason: format!(
                    "mount name `{name}` must be a lowercase identifier ([a-z_][a-z0-9_]*)"
                ),
            });
        }
        if mounts.iter().any(|(n, _)| n == name) {
            return Err(SettingsError::InvalidValue {
                flag: "--dataset",
                reason: format!("mount name `{name}` is used twice"),
            });
        }
        mounts.push((name.to_string(), DatasetUri::parse(uri, &env.cwd)?));
    }
    if mounts.is_empty() {
        mounts.push(("dataset".into(), default_warehouse(env, settings_path)?));
    }
    if !(a.timeout.is_finite() && a.timeout > 0.0 && a.timeout <= 31_536_000.0) {
        return Err(SettingsError::InvalidValue {
            flag: "--timeout",
            reason: "must be a number of seconds in (0, 31536000]".into(),
        });
    }
    let output = match a.output.as_deref() {
        None | Some("-") => None,
        Some(p) => Some(crate::util::path::lexical_absolute(Path::new(p), &env.cwd)),
    };
    let to_stdout = output.is_none();
    let format = match a.format {
        QueryFormatArg::Table => QueryFormat::Table,
        QueryFormatArg::Jsonl => QueryFormat::Jsonl,
        QueryFormatArg::Csv => QueryFormat::Csv,
        QueryFormatArg::Auto if to_stdout && env.stdout_tty => QueryFormat::Table,
        QueryFormatArg::Auto => QueryFormat::Jsonl,
    };
    Ok(QuerySettings {
        mounts,
        sql,
        format,
        output,
        max_rows: positive("--max-rows", a.max_rows)?,
        max_output_bytes: positive("--max-output-bytes", a.max_output_bytes)?,
        timeout: std::time::Duration::from_secs_f64(a.timeout),
        memory_budget: positive("--memory-budget", a.memory_budget)?,
        spill_limit: a.spill_limit,
        max_document_bytes: positive("--max-document-bytes", a.max_document_bytes)?,
        limits,
        strict,
    })
}

/// `analysis` is a fixed query: the same settings as `query`.
pub(super) fn analysis_settings(
    a: &AnalysisArgs,
    env: &Env,
    settings_path: Option<&Path>,
) -> Result<QuerySettings, SettingsError> {
    use crate::analysis::Report;
    let read = read_settings(&a.dataset, env, settings_path)?;
    if !(a.timeout.is_finite() && a.timeout > 0.0 && a.timeout <= 31_536_000.0) {
        return Err(SettingsError::InvalidValue {
            flag: "--timeout",
            reason: "must be a number of seconds in (0, 31536000]".into(),
        });
    }
    let report = match a.report {
        AnalysisReportArg::Overview => Report::Overview,
        AnalysisReportArg::Agents => Report::Agents,
        AnalysisReportArg::Models => Report::Models,
        AnalysisReportArg::Tools => Report::Tools,
    };
    let format = match a.format {
        QueryFormatArg::Table => QueryFormat::Table,
        QueryFormatArg::Jsonl => QueryFormat::Jsonl,
        QueryFormatArg::Csv => QueryFormat::Csv,
        QueryFormatArg::Auto if env.stdout_tty => QueryFormat::Table,
        QueryFormatArg::Auto => QueryFormat::Jsonl,
    };
    Ok(QuerySettings {
        mounts: vec![("dataset".into(), read.dataset)],
        sql: crate::analysis::sql(report, positive("--limit", a.limit)?),
        format,
        output: None,
        max_rows: u64::MAX,
        max_output_bytes: 256 * 1024 * 1024,
        timeout: std::time::Duration::from_secs_f64(a.timeout),
        memory_budget: positive("--memory-budget", a.memory_budget)?,
        spill_limit: a.spill_limit,
        max_document_bytes: positive("--max-document-bytes", a.max_document_bytes)?,
        limits: read.limits,
        strict: read.strict,
    })
}

/// Output formats of `query`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryFormat {
    /// Aligned text.
    Table,
    /// JSON Lines.
    Jsonl,
    /// CSV with a header.
    Csv,
}

/// Resolved `query` settings.
#[derive(Debug, Clone)]
pub struct QuerySettings {
    /// (schema name, Dataset) pairs.
    pub mounts: Vec<(String, DatasetUri)>,
    /// The SQL text.
    pub sql: String,
    /// Result format.
    pub format: QueryFormat,
    /// Output file (None = stdout).
    pub output: Option<PathBuf>,
    /// Row bound.
    pub max_rows: u64,
    /// Output size bound.
    pub max_output_bytes: u64,
    /// Time bound.
    pub timeout: std::time::Duration,
    /// Operator memory bound.
    pub memory_budget: u64,
    /// Spill file bound (0: no spilling).
    pub spill_limit: u64,
    /// Largest document.
    pub max_document_bytes: u64,
    /// Discovery bounds.
    pub limits: DiscoveryLimits,
    /// Fail on bad Sources.
    pub strict: bool,
}
