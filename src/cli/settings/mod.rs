//! Resolved settings: clap values + environment + settings file → one frozen
//! value per run. All validation of user input to the CLI lives here.

use std::collections::HashMap;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};

use super::{
    AnalysisArgs, AnalysisReportArg, Cli, Command, DatasetArgs, DiscoveryArgs, ErrorsArg,
    ExportArgs, ExportFormatArg, FindArgs, FindScopeArg, ImportArgs, InputFormatArg,
    OutputFormatArg, QueryArgs, QueryFormatArg,
};
use crate::catalog::{DatasetUri, DiscoveryLimits};
pub use crate::ingest::{
    ExportOptions as ExportSettings, ImportInput, ImportOptions as ImportSettings,
};

impl crate::error::SurfaceError for SettingsError {
    fn code(&self) -> &'static str {
        SettingsError::code(self)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl From<SettingsError> for crate::error::Error {
    fn from(e: SettingsError) -> Self {
        crate::error::Error::Surface(Box::new(e))
    }
}

/// Problems with flags, the environment or the settings file.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// No Dataset was given and no default Warehouse is set.
    #[error("no Dataset given and no default Warehouse is set; pass a directory, or set one with `pchronicle default DIR`")]
    NoDataset,
    /// A flag value is out of range.
    #[error("invalid value for {flag}: {reason}")]
    InvalidValue {
        /// The flag, e.g. `--max-files`.
        flag: &'static str,
        /// Why the value is refused.
        reason: String,
    },
    /// The settings file exists but cannot be read.
    #[error("cannot read settings file `{path}`: {reason}")]
    Read {
        /// Path of the settings file.
        path: String,
        /// Sanitised reason.
        reason: String,
    },
    /// The settings file is not valid.
    #[error("invalid settings file `{path}`: {reason}")]
    Invalid {
        /// Path of the settings file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The settings file could not be written.
    #[error("cannot write settings file `{path}`: {reason}")]
    Write {
        /// Path of the settings file.
        path: String,
        /// Sanitised reason.
        reason: String,
    },
    /// The Dataset URI was refused.
    #[error(transparent)]
    Dataset(#[from] crate::catalog::CatalogError),
    /// An output file already exists.
    #[error(
        "output file `{path}` already exists; choose a new path (outputs are never overwritten)"
    )]
    OutputExists {
        /// The path.
        path: String,
    },
    /// No home or config directory to keep settings in.
    #[error("cannot locate a settings file: set HOME, XDG_CONFIG_HOME or PCHRONICLE_SETTINGS, or pass --settings")]
    NoSettingsLocation,
    /// A `find` expression or condition is refused.
    #[error(transparent)]
    Find(#[from] crate::find::FindError),
    /// An S3 outbound-policy setting is refused.
    #[error(transparent)]
    S3(#[from] crate::s3::PolicyError),
}

impl SettingsError {
    /// Stable error code.
    pub fn code(&self) -> &'static str {
        match self {
            SettingsError::NoDataset => "PC-CLI-002",
            SettingsError::InvalidValue { .. } => "PC-CLI-003",
            SettingsError::Read { .. } => "PC-SET-001",
            SettingsError::Invalid { .. } => "PC-SET-002",
            SettingsError::Write { .. } => "PC-SET-003",
            SettingsError::NoSettingsLocation => "PC-SET-004",
            SettingsError::OutputExists { .. } => "PC-CLI-004",
            SettingsError::Dataset(e) => e.code(),
            SettingsError::Find(e) => e.code(),
            SettingsError::S3(e) => e.code(),
        }
    }
}

/// What the process environment contributes; a plain value so tests can build one.
#[derive(Debug, Clone)]
pub struct Env {
    /// Working directory for relative paths.
    pub cwd: PathBuf,
    /// Environment variables of interest.
    pub vars: HashMap<String, String>,
    /// Whether stdout is a terminal.
    pub stdout_tty: bool,
    /// Whether stderr is a terminal.
    pub stderr_tty: bool,
}

impl Env {
    /// Read the real process environment.
    pub fn from_process() -> Self {
        let vars = ["HOME", "XDG_CONFIG_HOME", "NO_COLOR", "PCHRONICLE_SETTINGS"]
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_string(), v)))
            .collect();
        Env {
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
            vars,
            stdout_tty: std::io::stdout().is_terminal(),
            stderr_tty: std::io::stderr().is_terminal(),
        }
    }

    fn var(&self, k: &str) -> Option<&str> {
        self.vars
            .get(k)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

/// Output format after `auto` is resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// Aligned text columns.
    Table,
    /// One JSON document.
    Json,
}

/// Settings shared by commands that read a Dataset.
#[derive(Debug, Clone)]
pub struct ReadSettings {
    /// The normalised Dataset.
    pub dataset: DatasetUri,
    /// Discovery bounds.
    pub limits: DiscoveryLimits,
    /// Fail on the first Source that is not ready.
    pub strict: bool,
}

/// The resolved command.
#[derive(Debug, Clone)]
pub enum CommandSettings {
    /// `default`
    Default {
        /// The directory to set (normalised, absolute), or `None` to print.
        set: Option<PathBuf>,
    },
    /// `ls`
    Ls {
        /// Dataset and bounds.
        read: ReadSettings,
        /// Expand physical files.
        physical: bool,
        /// Time bound.
        timeout: std::time::Duration,
    },
    /// `query`
    Query(Box<QuerySettings>),
    /// `find`
    Find(Box<FindSettings>),
    /// `import`
    Import(Box<ImportSettings>),
    /// `export`
    Export(Box<ExportSettings>),
    /// `serve`
    Serve {
        /// The Warehouse configuration file.
        config: PathBuf,
        /// `--listen`.
        listen: Option<String>,
        /// `--open`.
        open: bool,
        /// `--gateway` and its options.
        gateway: Option<GatewaySettings>,
    },
    /// `status`
    Status {
        /// Dataset and bounds.
        read: ReadSettings,
        /// Largest document accepted.
        max_document_bytes: u64,
        /// Time bound.
        timeout: std::time::Duration,
    },
}

impl CommandSettings {
    /// The one Dataset the command reads or creates, as error objects name
    /// it (`None` for `default`, `serve`, and `query` over several mounts).
    pub fn dataset_uri(&self) -> Option<String> {
        match self {
            CommandSettings::Ls { read, .. } | CommandSettings::Status { read, .. } => {
                Some(read.dataset.to_string())
            }
            CommandSettings::Query(q) => match q.mounts.as_slice() {
                [(_, uri)] => Some(uri.to_string()),
                _ => None,
            },
            CommandSettings::Find(f) => Some(f.dataset.to_string()),
            CommandSettings::Export(e) => Some(e.dataset.to_string()),
            CommandSettings::Import(i) => Some(match &i.s3_target {
                Some(uri) => uri.to_string(),
                None => i.target.display().to_string(),
            }),
            CommandSettings::Default { .. } | CommandSettings::Serve { .. } => None,
        }
    }
}

/// Everything a command needs, frozen before it runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The command and its settings.
    pub command: CommandSettings,
    /// Result format.
    pub format: OutputFormat,
    /// Suppress progress and summaries on stderr.
    pub quiet: bool,
    /// Colour on stderr.
    pub color: bool,
    /// Show live progress (stderr is a terminal and not quiet).
    pub progress: bool,
    /// The user settings file in effect.
    pub settings_path: Option<PathBuf>,
    /// The outbound policy for S3 connections.
    pub s3: crate::s3::Policy,
}

/// The user settings file.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserSettings {
    /// Absolute, normalised path of the default Warehouse.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_warehouse: Option<String>,
    /// S3 endpoints that may be reached although not public (host, IP or
    /// CIDR), added to `--s3-allow`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub s3_allow: Vec<String>,
    /// Allow plain HTTP to allowed S3 endpoints off loopback.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub s3_allow_http: bool,
    /// Follow S3 redirects (every hop re-validated, credentials dropped
    /// across origins).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub s3_follow_redirects: bool,
}

impl UserSettings {
    /// Load from `path`; a missing file is empty settings.
    pub fn load(path: &Path) -> Result<Self, SettingsError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => {
                return Err(SettingsError::Read {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })
            }
        };
        Self::parse(&text, &path.display().to_string())
    }

    /// Parse and check the text of a settings file read from `path`.
    pub fn parse(text: &str, path: &str) -> Result<Self, SettingsError> {
        let s: UserSettings = toml::from_str(text).map_err(|e| SettingsError::Invalid {
            path: path.to_string(),
            reason: e.message().to_string(),
        })?;
        if let Some(w) = &s.default_warehouse {
            if !Path::new(w).is_absolute() {
                return Err(SettingsError::Invalid {
                    path: path.to_string(),
                    reason: "default_warehouse must be an absolute path".into(),
                });
            }
        }
        Ok(s)
    }

    /// The TOML text `save` writes (without its comment line).
    pub fn to_toml(&self) -> Result<String, toml::ser::Error> {
        toml::to_string(self)
    }

    /// Write atomically (temporary file + rename) to `path`.
    pub fn save(&self, path: &Path) -> Result<(), SettingsError> {
        let err = |e: std::io::Error| SettingsError::Write {
            path: path.display().to_string(),
            reason: e.to_string(),
        };
        let text = self.to_toml().map_err(|e| SettingsError::Write {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        std::fs::write(&tmp, format!("# pChronicle user settings\n{text}")).map_err(err)?;
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            err(e)
        })
    }
}

impl Settings {
    /// Resolve against the real process environment.
    pub fn resolve(cli: &Cli) -> Result<Self, SettingsError> {
        Self::resolve_with(cli, &Env::from_process())
    }

    /// Resolve against an explicit environment (unit-testable).
    pub fn resolve_with(cli: &Cli, env: &Env) -> Result<Self, SettingsError> {
        let settings_path = settings_location(cli.global.settings.as_deref(), env);
        let (command, format_arg) = match &cli.command {
            Command::Default(a) => {
                let set = a
                    .directory
                    .as_deref()
                    .map(|d| {
                        if d.trim().is_empty() {
                            return Err(SettingsError::InvalidValue {
                                flag: "DIRECTORY",
                                reason: "empty path".into(),
                            });
                        }
                        match DatasetUri::parse(d, &env.cwd)? {
                            DatasetUri::Local(p) => Ok(p),
                            DatasetUri::S3(_) => Err(SettingsError::InvalidValue {
                                flag: "DIRECTORY",
                                reason: "the default Warehouse is a local directory; pass an s3:// Dataset to each command instead".into(),
                            }),
                        }
                    })
                    .transpose()?;
                if set.is_some() || settings_path.is_some() {
                    (CommandSettings::Default { set }, a.output.format)
                } else {
                    return Err(SettingsError::NoSettingsLocation);
                }
            }
            Command::Ls(a) => (
                CommandSettings::Ls {
                    read: read_settings(&a.dataset, env, settings_path.as_deref())?,
                    physical: a.physical,
                    timeout: read_timeout(a.timeout)?,
                },
                a.output.format,
            ),
            Command::Status(a) => {
                if a.max_document_bytes == 0 {
                    return Err(SettingsError::InvalidValue {
                        flag: "--max-document-bytes",
                        reason: "must be > 0".into(),
                    });
                }
                (
                    CommandSettings::Status {
                        read: read_settings(&a.dataset, env, settings_path.as_deref())?,
                        max_document_bytes: a.max_document_bytes,
                        timeout: read_timeout(a.timeout)?,
                    },
                    a.output.format,
                )
            }
            Command::Export(a) => (
                CommandSettings::Export(Box::new(export_settings(
                    a,
                    env,
                    settings_path.as_deref(),
                )?)),
                OutputFormatArg::Auto,
            ),
            Command::Find(a) => (
                CommandSettings::Find(Box::new(find_settings(a, env, settings_path.as_deref())?)),
                a.output.format,
            ),
            Command::Import(a) => (
                CommandSettings::Import(Box::new(import_settings(
                    a,
                    env,
                    settings_path.as_deref(),
                )?)),
                OutputFormatArg::Json,
            ),
            Command::Analysis(a) => {
                let q = analysis_settings(a, env, settings_path.as_deref())?;
                let fmt = if q.format == QueryFormat::Jsonl {
                    OutputFormatArg::Json
                } else {
                    OutputFormatArg::Table
                };
                (CommandSettings::Query(Box::new(q)), fmt)
            }
            Command::Serve(a) => (
                CommandSettings::Serve {
                    config: crate::util::path::lexical_absolute(&a.config, &env.cwd),
                    listen: a.listen.clone(),
                    open: a.open,
                    gateway: a.gateway.as_ref().map(|g| GatewaySettings {
                        config: crate::util::path::lexical_absolute(g, &env.cwd),
                        dataset: a.gateway_dataset.clone(),
                        state: a
                            .gateway_state
                            .as_ref()
                            .map(|s| crate::util::path::lexical_absolute(s, &env.cwd)),
                        stream_markdown: a.gateway_stream_markdown,
                        debug: a.debug,
                    }),
                },
                OutputFormatArg::Table,
            ),
            Command::Query(a) => {
                let q = query_settings(a, env, settings_path.as_deref())?;
                let json = q.format == QueryFormat::Jsonl && q.output.is_none();
                let fmt = if json {
                    OutputFormatArg::Json
                } else {
                    OutputFormatArg::Table
                };
                (CommandSettings::Query(Box::new(q)), fmt)
            }
        };
        let format = match format_arg {
            OutputFormatArg::Table => OutputFormat::Table,
            OutputFormatArg::Json => OutputFormat::Json,
            OutputFormatArg::Auto if env.stdout_tty => OutputFormat::Table,
            OutputFormatArg::Auto => OutputFormat::Json,
        };
        let s3 = s3_policy(cli, settings_path.as_deref())?;
        Ok(Settings {
            command,
            format,
            quiet: cli.global.quiet,
            color: color_enabled(env.stderr_tty, env.var("NO_COLOR")),
            progress: env.stderr_tty && !cli.global.quiet,
            settings_path,
            s3,
        })
    }
}

/// The S3 outbound policy: the settings file's `s3_*` keys, then the flags.
fn s3_policy(cli: &Cli, settings_path: Option<&Path>) -> Result<crate::s3::Policy, SettingsError> {
    let user = match settings_path {
        Some(p) => UserSettings::load(p)?,
        None => UserSettings::default(),
    };
    let entries = user.s3_allow.iter().chain(cli.global.s3_allow.iter());
    Ok(crate::s3::Policy {
        allow: crate::s3::Allowlist::parse_entries(entries)?,
        allow_http: user.s3_allow_http || cli.global.s3_allow_http,
        follow_redirects: user.s3_follow_redirects,
    })
}

/// Colour on stderr: only on a terminal, and never when `NO_COLOR` is set to
/// a non-empty value (see no-color.org).
pub fn color_enabled(stderr_tty: bool, no_color: Option<&str>) -> bool {
    stderr_tty && no_color.is_none_or(str::is_empty)
}

/// Whether the result (and so an error object) will be JSON, decided from
/// the raw arguments; used to report errors raised while resolving.
pub fn json_requested(cli: &Cli, stdout_tty: bool) -> bool {
    let format = match &cli.command {
        Command::Default(a) => a.output.format,
        Command::Ls(a) => a.output.format,
        Command::Status(a) => a.output.format,
        Command::Find(a) => a.output.format,
        Command::Analysis(a) => match a.format {
            QueryFormatArg::Jsonl => OutputFormatArg::Json,
            QueryFormatArg::Auto => OutputFormatArg::Auto,
            _ => OutputFormatArg::Table,
        },
        Command::Import(_) => OutputFormatArg::Json,
        Command::Export(_) => OutputFormatArg::Auto,
        Command::Serve(_) => OutputFormatArg::Table,
        Command::Query(a) => match (a.format, a.output.as_deref()) {
            (_, Some(p)) if p != "-" => OutputFormatArg::Table,
            (QueryFormatArg::Jsonl, _) => OutputFormatArg::Json,
            (QueryFormatArg::Auto, _) => OutputFormatArg::Auto,
            _ => OutputFormatArg::Table,
        },
    };
    match format {
        OutputFormatArg::Json => true,
        OutputFormatArg::Table => false,
        OutputFormatArg::Auto => !stdout_tty,
    }
}

fn settings_location(flag: Option<&Path>, env: &Env) -> Option<PathBuf> {
    if let Some(p) = flag {
        return Some(crate::util::path::lexical_absolute(p, &env.cwd));
    }
    if let Some(p) = env.var("PCHRONICLE_SETTINGS") {
        return Some(crate::util::path::lexical_absolute(Path::new(p), &env.cwd));
    }
    if let Some(x) = env.var("XDG_CONFIG_HOME") {
        return Some(Path::new(x).join("pchronicle").join("settings.toml"));
    }
    env.var("HOME").map(|h| {
        Path::new(h)
            .join(".config")
            .join("pchronicle")
            .join("settings.toml")
    })
}

fn discovery(a: &DiscoveryArgs) -> Result<(DiscoveryLimits, bool), SettingsError> {
    if a.max_files == 0 {
        return Err(SettingsError::InvalidValue {
            flag: "--max-files",
            reason: "must be > 0".into(),
        });
    }
    if a.max_entries == 0 {
        return Err(SettingsError::InvalidValue {
            flag: "--max-entries",
            reason: "must be > 0".into(),
        });
    }
    Ok((
        DiscoveryLimits {
            max_files: a.max_files,
            max_entries: a.max_entries,
            deadline: None,
        },
        a.errors == ErrorsArg::Strict,
    ))
}

fn default_warehouse(env: &Env, settings_path: Option<&Path>) -> Result<DatasetUri, SettingsError> {
    default_warehouse_dir(env, settings_path).map(DatasetUri::Local)
}

fn default_warehouse_dir(
    env: &Env,
    settings_path: Option<&Path>,
) -> Result<PathBuf, SettingsError> {
    let user = match settings_path {
        Some(p) => UserSettings::load(p)?,
        None => UserSettings::default(),
    };
    let w = user.default_warehouse.ok_or(SettingsError::NoDataset)?;
    Ok(DatasetUri::normalise_local(Path::new(&w), &env.cwd))
}

fn read_settings(
    a: &DatasetArgs,
    env: &Env,
    settings_path: Option<&Path>,
) -> Result<ReadSettings, SettingsError> {
    let (limits, strict) = discovery(&a.discovery)?;
    let dataset = match &a.dataset {
        Some(uri) => DatasetUri::parse(uri, &env.cwd)?,
        None => default_warehouse(env, settings_path)?,
    };
    Ok(ReadSettings {
        dataset,
        limits,
        strict,
    })
}

/// `--timeout` of `ls` and `status`: the range of `query` and `analysis`.
fn read_timeout(seconds: f64) -> Result<std::time::Duration, SettingsError> {
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= 31_536_000.0) {
        return Err(SettingsError::InvalidValue {
            flag: "--timeout",
            reason: "must be a number of seconds in (0, 31536000]".into(),
        });
    }
    Ok(std::time::Duration::from_secs_f64(seconds))
}

fn positive(flag: &'static str, v: u64) -> Result<u64, SettingsError> {
    if v == 0 {
        return Err(SettingsError::InvalidValue {
            flag,
            reason: "must be > 0".into(),
        });
    }
    Ok(v)
}

fn query_settings(
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
        max_document_bytes: positive("--max-document-bytes", a.max_document_bytes)?,
        limits,
        strict,
    })
}

/// `analysis` is a fixed query: the same settings as `query`.
fn analysis_settings(
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
        max_document_bytes: positive("--max-document-bytes", a.max_document_bytes)?,
        limits: read.limits,
        strict: read.strict,
    })
}

fn export_settings(
    a: &ExportArgs,
    env: &Env,
    settings_path: Option<&Path>,
) -> Result<ExportSettings, SettingsError> {
    let (limits, errors_strict) = discovery(&a.discovery)?;
    let dataset = match &a.from {
        Some(u) => DatasetUri::parse(u, &env.cwd)?,
        None => default_warehouse(env, settings_path)?,
    };
    if let Some(src) = &a.source {
        crate::util::path::check_dataset_relative(src).map_err(|reason| {
            crate::catalog::CatalogError::InvalidSourcePath {
                given: crate::util::text::escape_control(src).into_owned(),
                reason,
            }
        })?;
    }
    let output = match a.output.as_str() {
        "-" => None,
        "" => {
            return Err(SettingsError::InvalidValue {
                flag: "--output",
                reason: "empty path".into(),
            })
        }
        p => Some(crate::util::path::lexical_absolute(Path::new(p), &env.cwd)),
    };
    use crate::formats::ExportFormat as F;
    let format = match a.format {
        ExportFormatArg::Atif => F::Atif,
        ExportFormatArg::Actf => F::Actf,
        ExportFormatArg::OpenaiMessages => F::OpenAiMessages,
        ExportFormatArg::Storyline => F::Storyline,
    };
    Ok(ExportSettings {
        dataset,
        output,
        format,
        source: a.source.clone(),
        run_id: a.run_id.clone(),
        session_id: a.session_id.clone(),
        where_: a.where_.clone(),
        strict: a.strict,
        stream: a.stream,
        overwrite: a.overwrite,
        errors_strict,
        max_document_bytes: positive("--max-document-bytes", a.max_document_bytes)?,
        limits,
    })
}

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

fn find_settings(
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

fn import_settings(
    a: &ImportArgs,
    env: &Env,
    settings_path: Option<&Path>,
) -> Result<ImportSettings, SettingsError> {
    use crate::formats::SourceFormat as F;
    let format = match a.format {
        InputFormatArg::Auto => None,
        InputFormatArg::Atif => Some(F::Atif),
        InputFormatArg::Actf => Some(F::Actf),
        InputFormatArg::OpenaiMessages => Some(F::OpenAiMessages),
        InputFormatArg::Storyline => Some(F::Storyline),
    };
    let input = if a.from == "-" {
        if !a.stream {
            return Err(SettingsError::InvalidValue {
                flag: "--from",
                reason: "reading stdin (`--from -`) needs --stream".into(),
            });
        }
        if format.is_none() {
            return Err(SettingsError::InvalidValue {
                flag: "--format",
                reason: "reading stdin needs an explicit --format".into(),
            });
        }
        ImportInput::Stdin
    } else {
        if a.from.trim().is_empty() {
            return Err(SettingsError::InvalidValue {
                flag: "--from",
                reason: "empty path".into(),
            });
        }
        if a.from.contains("://") && !a.from.starts_with("file://") {
            if let uri @ DatasetUri::S3(_) = DatasetUri::parse(&a.from, &env.cwd)? {
                return Err(crate::catalog::CatalogError::S3NotSupported {
                    uri: uri.to_string(),
                    what: "importing from S3",
                }
                .into());
            }
        }
        ImportInput::Path(crate::util::path::lexical_absolute(
            Path::new(&a.from),
            &env.cwd,
        ))
    };
    let mut s3_target = None;
    let target = match &a.output {
        Some(o) => match DatasetUri::parse(o, &env.cwd)? {
            DatasetUri::Local(p) => p,
            DatasetUri::S3(uri) => {
                if uri.prefix().is_empty() {
                    return Err(SettingsError::InvalidValue {
                        flag: "--output",
                        reason: "an S3 Dataset to create needs a prefix (`s3://bucket/name`), not a whole bucket".into(),
                    });
                }
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                s3_target = Some(uri);
                std::env::temp_dir()
                    .join(format!("pchronicle-import-{}-{nanos}", std::process::id()))
                    .join("store")
            }
        },
        None => {
            let wh = default_warehouse_dir(env, settings_path).map_err(|e| match e {
                SettingsError::NoDataset => SettingsError::InvalidValue {
                    flag: "--output",
                    reason:
                        "give --output, or set a default Warehouse with `pchronicle default DIR`"
                            .into(),
                },
                other => other,
            })?;
            let ImportInput::Path(p) = &input else {
                return Err(SettingsError::InvalidValue {
                    flag: "--output",
                    reason: "importing stdin needs --output".into(),
                });
            };
            let stem: String = p
                .file_stem()
                .map_or_else(|| "import".into(), |s| s.to_string_lossy().into_owned())
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                        c
                    } else {
                        '-'
                    }
                })
                .collect();
            let tag = blake3::hash(p.display().to_string().as_bytes()).to_hex();
            wh.join(format!("{}-{}", stem.trim_matches('-'), &tag[..8]))
        }
    };
    Ok(ImportSettings {
        input,
        target,
        s3_target,
        format,
        max_input_bytes: positive("--max-input-bytes", a.max_input_bytes)?,
        max_document_bytes: positive("--max-document-bytes", a.max_document_bytes)?,
        max_files: positive("--max-files", a.max_files)?,
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
    /// Largest document.
    pub max_document_bytes: u64,
    /// Discovery bounds.
    pub limits: DiscoveryLimits,
    /// Fail on bad Sources.
    pub strict: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn env(dir: &Path) -> Env {
        let mut vars = HashMap::new();
        vars.insert(
            "PCHRONICLE_SETTINGS".to_string(),
            dir.join("s.toml").display().to_string(),
        );
        Env {
            cwd: dir.to_path_buf(),
            vars,
            stdout_tty: false,
            stderr_tty: false,
        }
    }

    fn resolve(args: &[&str], env: &Env) -> Result<Settings, SettingsError> {
        let cli =
            Cli::try_parse_from(std::iter::once("pchronicle").chain(args.iter().copied())).unwrap();
        Settings::resolve_with(&cli, env)
    }

    #[test]
    fn auto_format_follows_tty() {
        let d = tempfile::tempdir().unwrap();
        let mut e = env(d.path());
        assert_eq!(
            resolve(&["ls", "."], &e).unwrap().format,
            OutputFormat::Json
        );
        e.stdout_tty = true;
        assert_eq!(
            resolve(&["ls", "."], &e).unwrap().format,
            OutputFormat::Table
        );
        assert_eq!(
            resolve(&["ls", ".", "--format", "json"], &e)
                .unwrap()
                .format,
            OutputFormat::Json
        );
    }

    #[test]
    fn dataset_falls_back_to_default_warehouse() {
        let d = tempfile::tempdir().unwrap();
        let e = env(d.path());
        assert_eq!(resolve(&["status"], &e).unwrap_err().code(), "PC-CLI-002");
        let wh = d.path().join("wh");
        std::fs::create_dir(&wh).unwrap();
        UserSettings {
            default_warehouse: Some(wh.display().to_string()),
            ..UserSettings::default()
        }
        .save(&d.path().join("s.toml"))
        .unwrap();
        let s = resolve(&["status"], &e).unwrap();
        let CommandSettings::Status { read, .. } = s.command else {
            panic!()
        };
        assert_eq!(read.dataset, DatasetUri::local(&wh, d.path()));
        // An explicit URI wins.
        let s = resolve(&["ls", "/"], &e).unwrap();
        let CommandSettings::Ls { read, .. } = s.command else {
            panic!()
        };
        assert_eq!(read.dataset.to_string(), "/");
    }

    #[test]
    fn bad_values_have_codes() {
        let d = tempfile::tempdir().unwrap();
        let e = env(d.path());
        assert_eq!(
            resolve(&["ls", ".", "--max-files", "0"], &e)
                .unwrap_err()
                .code(),
            "PC-CLI-003"
        );
        std::fs::write(d.path().join("s.toml"), "nonsense = 1\n").unwrap();
        assert_eq!(resolve(&["ls"], &e).unwrap_err().code(), "PC-SET-002");
    }

    #[test]
    fn no_color_respected() {
        let d = tempfile::tempdir().unwrap();
        let mut e = env(d.path());
        e.stderr_tty = true;
        assert!(resolve(&["ls", "."], &e).unwrap().color);
        e.vars.insert("NO_COLOR".into(), "1".into());
        assert!(!resolve(&["ls", "."], &e).unwrap().color);
    }
}

/// `serve --gateway …`
#[derive(Debug, Clone)]
pub struct GatewaySettings {
    /// gateway.toml.
    pub config: PathBuf,
    /// `--gateway-dataset`.
    pub dataset: Option<String>,
    /// `--gateway-state`.
    pub state: Option<PathBuf>,
    /// `--gateway-stream-markdown`.
    pub stream_markdown: bool,
    /// `--debug`.
    pub debug: bool,
}
