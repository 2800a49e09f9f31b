//! `find` settings: the `--match` expressions, identity conditions and
//! bounds of RFC-0012.

use super::{
    default_warehouse, discovery, positive, DatasetUri, DiscoveryLimits, Env, FindArgs,
    FindScopeArg, Path, SettingsError,
};

/// Resolved `find` settings.
#[derive(Debug, Clone)]
pub struct FindSettings {
    /// The Dataset.
    pub dataset: DatasetUri,
    /// The `--match` arguments as given.
    pub matches: Vec<String>,
    /// Their AND (None without `--match`).
    pub expr: Option<crate::find::FindExpr>,
    /// Resolved scope.
    pub scope: crate::find::scope::Scope,
    /// Resolved mode.
    pub mode: crate::find::scope::Mode,
    /// Identity conditions.
    pub identity: crate::find::exec::Identity,
    /// Result bound.
    pub max_results: usize,
    /// Output bound (bytes).
    pub max_output_bytes: u64,
    /// Time bound.
    pub timeout: std::time::Duration,
    /// Build or refresh missing indexes.
    pub build_index: bool,
    /// Largest document.
    pub max_document_bytes: u64,
    /// Discovery bounds.
    pub limits: DiscoveryLimits,
    /// Fail on bad Sources.
    pub strict: bool,
}

pub(super) fn find_settings(
    a: &FindArgs,
    env: &Env,
    settings_path: Option<&Path>,
) -> Result<FindSettings, SettingsError> {
    use crate::find::{exec::Identity, scope, FindError};
    // Upgrades come with explicit errors: the flags of the earlier search
    // are refused with the --match form that replaces them.
    for (flag, given, instead) in [
        (
            "--fts",
            &a.fts,
            "full-text terms are words or \"quoted phrases\" in --match, e.g. --match 'timeout retry'",
        ),
        (
            "--jsonb",
            &a.jsonb,
            "JSON conditions are --match terms, e.g. --match '$.priority >= 2' or --match '#json.metrics(\"$.score\") >= 0.9'",
        ),
        (
            "--query",
            &a.query,
            "the whole expression is a --match value, e.g. --match 'timeout AND #user(retry)'",
        ),
    ] {
        if given.is_some() {
            return Err(SettingsError::Find(FindError::InvalidArgument {
                message: format!(
                    "{flag} is no longer accepted; use --match: {instead} (see docs/find.md)"
                ),
            }));
        }
    }
    let (limits, strict) = discovery(&a.dataset.discovery)?;
    let dataset = match &a.dataset.dataset {
        Some(u) => DatasetUri::parse(u, &env.cwd)?,
        None => default_warehouse(env, settings_path)?,
    };
    let invalid = |message: String| SettingsError::Find(FindError::InvalidArgument { message });
    if let Some(src) = &a.source {
        crate::util::path::check_dataset_relative(src).map_err(|reason| {
            crate::catalog::CatalogError::InvalidSourcePath {
                given: crate::util::text::escape_control(src).into_owned(),
                reason,
            }
        })?;
    }
    if a.step_id.is_some() && a.session_id.is_none() {
        return Err(invalid(
            "--step-id needs --session-id (step ids are only unique within a session)".into(),
        ));
    }
    let identity = Identity {
        source: a.source.clone(),
        run_id: a.run_id.clone(),
        document_id: a.document_id.clone(),
        session_id: a.session_id.clone(),
        step_id: a.step_id,
    };
    if a.matches.is_empty() && !identity.has_id() {
        return Err(invalid("give at least one --match, or an identity condition (--run-id, --document-id, --session-id)".into()));
    }
    let exprs = a
        .matches
        .iter()
        .map(|m| crate::find::parse_match_expression(m))
        .collect::<Result<Vec<_>, _>>()?;
    let expr = crate::find::combine_match_expressions(exprs);
    let explicit = a.scope.map(|s| match s {
        FindScopeArg::Runs => scope::Scope::Runs,
        FindScopeArg::Steps => scope::Scope::Steps,
    });
    let (scope, mode) = scope::resolve(expr.as_ref(), explicit, a.step_id.is_some())?;
    if a.max_results == 0 {
        return Err(SettingsError::InvalidValue {
            flag: "--max-results",
            reason: "must be > 0".into(),
        });
    }
    if !(a.timeout.is_finite() && a.timeout > 0.0 && a.timeout <= 86_400.0) {
        return Err(SettingsError::InvalidValue {
            flag: "--timeout",
            reason: "must be a number of seconds in (0, 86400]".into(),
        });
    }
    Ok(FindSettings {
        dataset,
        matches: a.matches.clone(),
        expr,
        scope,
        mode,
        identity,
        max_results: usize::try_from(a.max_results).unwrap_or(usize::MAX),
        max_output_bytes: positive("--max-output-bytes", a.max_output_bytes)?,
        timeout: std::time::Duration::from_secs_f64(a.timeout),
        build_index: !a.no_build_index,
        max_document_bytes: positive("--max-document-bytes", a.max_document_bytes)?,
        limits,
        strict,
    })
}
