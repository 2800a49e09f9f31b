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
mod find;
mod ingest;
mod query;
#[cfg(test)]
mod tests;
mod user;

use find::find_settings;
pub use find::FindSettings;
use ingest::{export_settings, import_settings};
use query::{analysis_settings, query_settings};
pub use query::{QueryFormat, QuerySettings};
pub use user::UserSettings;

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
    /// Report statistics (`--stats`).
    pub stats: bool,
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
            stats: cli.global.stats,
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
