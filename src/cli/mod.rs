//! The command line: clap types (data only), resolved settings, one module per
//! command, and the output writers.
//!
//! May call every library layer; nothing calls into `cli`.

pub mod cmd;
pub mod out;
pub use crate::render;
pub mod settings;

use std::ffi::OsString;
use std::io::Write as _;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::error::Error;
use out::Out;
use settings::Settings;

/// How a command ended; maps to the documented exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// 0: the command did what was asked.
    Success,
    /// 1: the command ran but found nothing (where that applies).
    NothingFound,
    /// 2: an error; a message with a stable code went to stderr.
    Error,
}

impl From<ExitStatus> for ExitCode {
    fn from(s: ExitStatus) -> Self {
        ExitCode::from(match s {
            ExitStatus::Success => 0,
            ExitStatus::NothingFound => 1,
            ExitStatus::Error => 2,
        })
    }
}

/// pChronicle — discover, inspect and report AI-agent trajectories in place.
///
/// A Dataset is a directory; every trajectory file or store inside it is a
/// Source. Results go to stdout; progress, the snapshot_id, counts and
/// warnings go to stderr.
///
/// Exit codes: 0 success, 1 nothing found (where a command says so), 2 error.
/// Every error carries a stable code such as PC-CAT-004 (see docs/errors.md).
#[derive(Debug, Parser)]
#[allow(missing_docs)]
#[command(
    name = "pchronicle",
    version,
    max_term_width = 100,
    propagate_version = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command accepts.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// User settings file (TOML). Default: $XDG_CONFIG_HOME/pchronicle/settings.toml
    /// or ~/.config/pchronicle/settings.toml.
    #[arg(long, global = true, value_name = "FILE", env = "PCHRONICLE_SETTINGS")]
    pub settings: Option<std::path::PathBuf>,
    /// Print no progress or summary lines to stderr (errors and warnings still print).
    #[arg(long, short = 'q', global = true)]
    pub quiet: bool,
    /// Allow an S3 endpoint that is not public: a host name, an IP or a CIDR
    /// (repeatable; also `s3_allow` in the settings file). Loopback, private,
    /// link-local and metadata addresses are refused without it.
    #[arg(
        long,
        global = true,
        value_name = "HOST|IP|CIDR",
        env = "PCHRONICLE_S3_ALLOW"
    )]
    pub s3_allow: Vec<String>,
    /// Allow plain HTTP to allowed S3 endpoints that are not loopback.
    #[arg(long, global = true)]
    pub s3_allow_http: bool,
    /// Report what the command did: Sources and bytes read, S3 requests,
    /// rows scanned and produced, index segments, peak memory, time per
    /// phase (one `stats:` line on stderr, and a `stats` object in JSON
    /// output; see docs/commands.md#statistics).
    #[arg(long, global = true)]
    pub stats: bool,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Set or print the default Warehouse (a local Dataset directory).
    ///
    /// With DIRECTORY: normalise it to an absolute path, create it when it is
    /// missing, and store it in the settings file. Without: print the current
    /// default. Commands that take a Dataset may then omit it.
    Default(DefaultArgs),
    /// List the Sources of a Dataset.
    ///
    /// One row per logical Source (a trajectory file, a Storyline Lance store,
    /// an events store). --physical lists every file visited instead, with the
    /// reason files were skipped. Exits 1 when no Source is found.
    #[command(visible_alias = "list")]
    Ls(LsArgs),
    /// Read every Source and report its health and counts.
    ///
    /// Decodes each Source fully and reports runs, trajectories, steps and tool
    /// calls per Source and in total, with problems found (degraded/error).
    Status(StatusArgs),
    /// Run a read-only SQL query.
    ///
    /// Each Dataset is a SQL schema: the positional DATASET (or the default
    /// Warehouse) is `dataset`, and `--dataset NAME=URI` mounts more. Every
    /// schema has the relations sources, runs, trajectories, steps,
    /// tool_calls, events and judgments (see DESCRIBE and
    /// docs/query-model.md). Only SELECT / VALUES / WITH, DESCRIBE and
    /// EXPLAIN are accepted.
    ///
    /// Examples:
    ///   pchronicle query ./data "SELECT step_source, count(*) FROM steps GROUP BY 1"
    ///   pchronicle query --dataset a=./x --dataset b=./y "SELECT count(*) FROM a.runs"
    #[command(verbatim_doc_comment)]
    Query(QueryArgs),
    /// Create a new Dataset (a Storyline Lance store) from exchange files.
    ///
    /// Create-only: the target must not exist. Everything is written to a
    /// hidden staging directory beside the target, validated, and published
    /// by one atomic rename; a failure or an interruption leaves no target.
    /// One input format per call: a directory with `--format auto` must hold
    /// files of one format, and an explicit `--format` skips the files of
    /// other formats. Reading stdin (`--from -`) needs `--stream` and an
    /// explicit `--format`. Prints a JSON report.
    Import(ImportArgs),
    /// Write complete trajectories of a Dataset in an exchange format.
    ///
    /// Reads one Catalog Snapshot (snapshot_id on stderr). Selects by
    /// Source, run id, session id, or a SQL condition on `runs` (--where).
    /// Same-format exports rebuild the original documents; other conversions
    /// write what the target can express and report what was dropped
    /// (--strict refuses instead). Outputs are create-only unless
    /// --overwrite.
    Export(ExportArgs),
    /// Search steps or runs with the find expression language (RFC-0012).
    ///
    /// --match takes an expression: words and "quoted phrases" (full text,
    /// Jieba segmentation for Chinese), selectors such as #user("…"),
    /// #assistant, #system, #reasoning, #observation, #prompt, #model, #all,
    /// JSON comparisons such as '$.priority>=2' or '#json.metrics("$.score")>=0.9',
    /// combined with AND, OR, NOT and parentheses. Repeated --match are ANDed.
    /// Identity conditions (--run-id, --document-id, --session-id, --step-id,
    /// --source) narrow the search or look items up directly.
    ///
    /// The full-text index is built on first use and kept in the cache
    /// directory ($PCHRONICLE_CACHE_DIR, else $XDG_CACHE_HOME/pchronicle, else
    /// ~/.cache/pchronicle); it is refreshed when a Source changes. Imported
    /// stores carry their own. See docs/find.md.
    ///
    /// Examples:
    ///   pchronicle find ./data --match timeout --match retry
    ///   pchronicle find ./data --match '#user("数据库") AND NOT #system(example)'
    ///   pchronicle find ./data --source runs/a.json --session-id s1 --step-id 7
    #[command(verbatim_doc_comment)]
    Find(FindArgs),
    /// Fixed reports over a Dataset, run by the SQL engine.
    ///
    /// overview: Sources per format and state, with the runs, trajectories,
    /// steps and tool calls they hold. agents: activity per agent name and
    /// version. models: models declared by agents versus models observed on
    /// steps, with tokens and cost. tools: calls per normalised function name
    /// (trimmed, lowercased) with duration coverage and failures. The SQL of
    /// each report is in docs/query-model.md; the same limits as `query` apply.
    Analysis(AnalysisArgs),
    /// Serve a read-only Warehouse: a JSON API and the web explorer.
    ///
    /// The configuration (TOML) mounts Datasets by name; requests name them
    /// and never carry paths, URIs or credentials. The server listens on
    /// loopback only (default 127.0.0.1:8765) and prints `listening: URL` to
    /// stderr, then one JSON access-log line per request. SIGHUP rebuilds the
    /// Catalog Snapshots (a failed rebuild keeps the old ones); SIGINT or
    /// SIGTERM stops after the requests in progress. See docs/serve.md.
    ///
    /// warehouse.toml:
    ///   [[datasets]]
    ///   name = "evals"            # also its SQL schema
    ///   uri = "./evals"           # relative to this file, or s3://bucket/prefix
    ///
    /// With --gateway, the same process also runs the Gateway: a loopback
    /// proxy for OpenAI- and Anthropic-compatible APIs that records every
    /// exchange as canonical events into the target Dataset's events.lance
    /// (through a local write-ahead log), and an admin API. Routes, keys (by
    /// environment variable), network policy and ports come only from
    /// gateway.toml. See docs/gateway.md.
    ///
    /// Examples:
    ///   pchronicle serve --config warehouse.toml --open
    ///   pchronicle serve --config warehouse.toml --listen 127.0.0.1:9000
    ///   pchronicle serve --config warehouse.toml --gateway gateway.toml \
    ///       --gateway-dataset production
    #[command(verbatim_doc_comment)]
    Serve(ServeArgs),
}

/// `serve --config FILE [--listen ADDR] [--open]`
#[derive(Debug, Args)]
#[allow(missing_docs)]
pub struct ServeArgs {
    /// The Warehouse configuration (TOML): [[datasets]] name/uri, optional
    /// listen, default_dataset, refresh_seconds, [limits] and [proxy].
    #[arg(long, value_name = "FILE")]
    pub config: std::path::PathBuf,
    /// Address to listen on: a loopback IP and port (127.0.0.1:PORT, [::1]:PORT
    /// or localhost:PORT; port 0 picks a free one). Overrides `listen` in the file.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Open the web explorer in the default browser once listening.
    #[arg(long)]
    pub open: bool,
    /// Also run the Gateway configured by this TOML file (routes, keys by
    /// environment variable, network policy, listen and admin_listen ports).
    /// Without --listen (and without `listen` in the Warehouse file) only the
    /// Gateway runs.
    #[arg(long, value_name = "FILE")]
    pub gateway: Option<std::path::PathBuf>,
    /// The mounted Dataset that receives captured events (needed when the
    /// Warehouse mounts several and names no default_dataset).
    #[arg(long, value_name = "NAME", requires = "gateway")]
    pub gateway_dataset: Option<String>,
    /// Directory for the Gateway's write-ahead log, checkpoint and session
    /// index (required for an S3 target; a local target defaults to
    /// DATASET/.pchronicle-gateway).
    #[arg(long, value_name = "DIR", requires = "gateway")]
    pub gateway_state: Option<std::path::PathBuf>,
    /// Also maintain a Markdown view of each session under STATE/markdown/
    /// (diagnostic only; never read back).
    #[arg(long, requires = "gateway")]
    pub gateway_stream_markdown: bool,
    /// Mirror Gateway dispatch and capture diagnostics to stderr, with
    /// request and response bodies cut to 2 KiB (not for regular production
    /// use: bodies may hold private data).
    #[arg(long, visible_alias = "gateway-debug", requires = "gateway")]
    pub debug: bool,
}

/// `analysis overview|agents|models|tools [DATASET]`
#[derive(Debug, Args)]
#[allow(missing_docs)]
pub struct AnalysisArgs {
    /// Which report.
    #[arg(value_enum)]
    pub report: AnalysisReportArg,
    #[command(flatten)]
    pub dataset: DatasetArgs,
    /// Output format: table on a terminal and JSON Lines otherwise (auto), or forced.
    #[arg(long, value_enum, default_value_t = QueryFormatArg::Auto)]
    pub format: QueryFormatArg,
    /// Return at most this many rows.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub limit: u64,
    /// Fail when the report runs longer than this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub timeout: f64,
    /// Largest intermediate state (bytes) one operator may hold.
    #[arg(long, value_name = "BYTES", default_value_t = 2 * 1024 * 1024 * 1024)]
    pub memory_budget: u64,
    /// Bytes of temporary files a sort or GROUP BY past --memory-budget may
    /// write (under TMPDIR, removed when the command ends); 0 never spills.
    #[arg(long, value_name = "BYTES", default_value_t = crate::sql::DEFAULT_SPILL_LIMIT)]
    pub spill_limit: u64,
    /// Largest single JSON document or line accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = crate::formats::DEFAULT_MAX_DOCUMENT_BYTES)]
    pub max_document_bytes: u64,
}

/// The `analysis` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AnalysisReportArg {
    /// Source readiness and totals per format.
    Overview,
    /// Activity per agent name and version.
    Agents,
    /// Declared versus observed models.
    Models,
    /// Tool calls per function, with duration coverage.
    Tools,
}

/// `find [DATASET] --match EXPR …`
#[derive(Debug, Args)]
#[allow(missing_docs)]
pub struct FindArgs {
    // First, so that `find --help` lists it first.
    /// A find expression (repeatable; all must hold). At most 4096 bytes each.
    #[arg(long = "match", value_name = "EXPRESSION")]
    pub matches: Vec<String>,
    #[command(flatten)]
    pub dataset: DatasetArgs,
    /// Search this table; an expression that needs the other one is refused.
    /// Default: inferred from the expression (text → steps, JSON → runs).
    #[arg(long, value_enum)]
    pub scope: Option<FindScopeArg>,
    /// Only this Source (a Dataset-relative path, as `ls` prints it).
    #[arg(long, value_name = "PATH")]
    pub source: Option<String>,
    /// Only this run.
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// Only this document (trajectory).
    #[arg(long, value_name = "ID")]
    pub document_id: Option<String>,
    /// Only this session.
    #[arg(long, value_name = "ID")]
    pub session_id: Option<String>,
    /// Only this step (needs --session-id).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub step_id: Option<i64>,
    /// Return at most this many matches (more sets `truncated`).
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub max_results: u64,
    /// Print at most this many bytes on stdout: trailing matches are dropped
    /// until the result fits (more sets `truncated`).
    #[arg(long, value_name = "BYTES", default_value_t = 8 * 1024 * 1024)]
    pub max_output_bytes: u64,
    /// Fail when the search runs longer than this many seconds (index
    /// building excluded).
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub timeout: f64,
    /// Use only full-text indexes that are already current; never build one
    /// (full text is then reported unavailable where none exists).
    #[arg(long)]
    pub no_build_index: bool,
    /// Largest single JSON document or line accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = crate::formats::DEFAULT_MAX_DOCUMENT_BYTES)]
    pub max_document_bytes: u64,
    #[command(flatten)]
    pub output: OutputArgs,
    // The flags of the search before --match (RFC-0012): accepted by the
    // parser only to be refused with a message that names --match.
    /// Removed: full-text terms go in --match.
    #[arg(
        long,
        hide = true,
        value_name = "TEXT",
        num_args = 0..=1,
        default_missing_value = ""
    )]
    pub fts: Option<String>,
    /// Removed: JSON conditions go in --match.
    #[arg(
        long,
        hide = true,
        value_name = "EXPR",
        num_args = 0..=1,
        default_missing_value = ""
    )]
    pub jsonb: Option<String>,
    /// Removed: the expression goes in --match.
    #[arg(
        long,
        hide = true,
        value_name = "EXPR",
        num_args = 0..=1,
        default_missing_value = ""
    )]
    pub query: Option<String>,
}

/// `--scope runs|steps`
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FindScopeArg {
    /// One match per trajectory (run-level JSON columns).
    Runs,
    /// One match per step.
    Steps,
}

/// `export --from … --output … --format …`
#[derive(Debug, Args)]
#[allow(missing_docs)]
pub struct ExportArgs {
    /// The Dataset to read (defaults to the default Warehouse).
    #[arg(long, value_name = "URI")]
    pub from: Option<String>,
    /// Output file, or `-` for stdout.
    #[arg(long, short = 'o', value_name = "PATH|-")]
    pub output: String,
    /// Target exchange format.
    #[arg(long, value_enum)]
    pub format: ExportFormatArg,
    /// Only this Source (a Dataset-relative path).
    #[arg(long, value_name = "PATH")]
    pub source: Option<String>,
    /// Only trajectories of this run.
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// Only trajectories of this session.
    #[arg(long, value_name = "ID")]
    pub session_id: Option<String>,
    /// Only trajectories whose `runs` row satisfies this SQL condition,
    /// e.g. "agent_name = 'coder' AND step_count > 10".
    #[arg(long = "where", value_name = "EXPR")]
    pub where_: Option<String>,
    /// Refuse conversions that cannot keep every field.
    #[arg(long)]
    pub strict: bool,
    /// Always JSON Lines, written as records are produced: on stdout, records
    /// written before a failure stay there. Without it a single record is one
    /// pretty document, and stdout gets nothing until the export succeeds.
    /// Memory is the same either way.
    #[arg(long)]
    pub stream: bool,
    /// Replace an existing output file (a regular file only; a directory,
    /// symlink, FIFO or device there is refused).
    #[arg(long)]
    pub overwrite: bool,
    /// Largest single JSON document or line accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = crate::formats::DEFAULT_MAX_DOCUMENT_BYTES)]
    pub max_document_bytes: u64,
    #[command(flatten)]
    pub discovery: DiscoveryArgs,
}

/// Formats `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormatArg {
    /// ATIF v1.7 (Harbor).
    Atif,
    /// ACTF v1.0.
    Actf,
    /// OpenAI messages (SFT examples).
    OpenaiMessages,
    /// Storyline storyline/v1.
    Storyline,
}

/// `import --from … [--output …]`
#[derive(Debug, Args)]
#[allow(missing_docs)]
pub struct ImportArgs {
    /// Input: a file, a directory, or `-` for stdin.
    #[arg(long, value_name = "PATH|-")]
    pub from: String,
    /// The new Dataset (directory) to create. Default: a child of the default
    /// Warehouse named after the input.
    #[arg(long, short = 'o', value_name = "URI")]
    pub output: Option<String>,
    /// Input format (auto: detected by content; all files must agree). An
    /// explicit format imports the files of that format and skips the others.
    #[arg(long, value_enum, default_value_t = InputFormatArg::Auto)]
    pub format: InputFormatArg,
    /// Read stdin to end of file (required with `--from -`).
    #[arg(long)]
    pub stream: bool,
    /// Refuse inputs larger than this many bytes in total.
    #[arg(long, value_name = "BYTES", default_value_t = 64 * 1024 * 1024 * 1024)]
    pub max_input_bytes: u64,
    /// Largest single JSON document or line accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = crate::formats::DEFAULT_MAX_DOCUMENT_BYTES)]
    pub max_document_bytes: u64,
    /// Stop with an error after this many input files.
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    pub max_files: u64,
}

/// Exchange formats accepted by `import`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InputFormatArg {
    /// Detect by content.
    Auto,
    /// ATIF (Harbor) v1.x.
    Atif,
    /// ACTF v1.0.
    Actf,
    /// OpenAI messages (SFT examples or row-per-call corpora).
    OpenaiMessages,
    /// Storyline storyline/v1 JSON.
    Storyline,
}

/// `query [DATASET] SQL`
#[derive(Debug, Args)]
#[allow(missing_docs)]
pub struct QueryArgs {
    /// [DATASET] then the SQL text (the DATASET may be omitted).
    #[arg(value_name = "[DATASET] SQL", num_args = 1..=2, required = true)]
    pub args: Vec<String>,
    /// Mount another Dataset as a schema: NAME=URI (repeatable).
    #[arg(long = "dataset", value_name = "NAME=URI")]
    pub mounts: Vec<String>,
    /// Output format: table on a terminal and JSON Lines otherwise (auto), or forced.
    #[arg(long, value_enum, default_value_t = QueryFormatArg::Auto)]
    pub format: QueryFormatArg,
    /// Write the result to a new file instead of stdout (`-` is stdout). The
    /// file must not exist; it appears complete or not at all.
    #[arg(long, short = 'o', value_name = "PATH")]
    pub output: Option<String>,
    /// Fail when the result has more rows than this.
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    pub max_rows: u64,
    /// Fail when the rendered result is larger than this many bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 256 * 1024 * 1024)]
    pub max_output_bytes: u64,
    /// Fail when the query runs longer than this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub timeout: f64,
    /// Largest intermediate state (bytes) one operator may hold.
    #[arg(long, value_name = "BYTES", default_value_t = 2 * 1024 * 1024 * 1024)]
    pub memory_budget: u64,
    /// Bytes of temporary files a sort or GROUP BY past --memory-budget may
    /// write (under TMPDIR, removed when the command ends); 0 never spills.
    #[arg(long, value_name = "BYTES", default_value_t = crate::sql::DEFAULT_SPILL_LIMIT)]
    pub spill_limit: u64,
    /// Largest single JSON document or line accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = crate::formats::DEFAULT_MAX_DOCUMENT_BYTES)]
    pub max_document_bytes: u64,
    #[command(flatten)]
    pub discovery: DiscoveryArgs,
}

/// `--format` of `query`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QueryFormatArg {
    /// Table on a terminal, JSON Lines otherwise.
    Auto,
    /// Aligned columns.
    Table,
    /// One JSON object per row.
    Jsonl,
    /// Comma-separated values with a header.
    Csv,
}

/// `default [DIRECTORY]`
#[derive(Debug, Args)]
#[allow(missing_docs)]
pub struct DefaultArgs {
    /// Directory to make the default Warehouse (created when missing).
    pub directory: Option<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Output selection shared by reporting commands.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Output format: table on a terminal and JSON otherwise (auto), or forced.
    #[arg(long, value_enum, default_value_t = OutputFormatArg::Auto)]
    pub format: OutputFormatArg,
}

/// `--format auto|table|json`
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormatArg {
    /// Table when stdout is a terminal, JSON otherwise.
    Auto,
    /// Aligned columns for people.
    Table,
    /// One JSON object for scripts.
    Json,
}

/// Dataset selection and discovery bounds shared by read commands.
#[derive(Debug, Args)]
#[allow(missing_docs)]
pub struct DatasetArgs {
    /// Dataset URI: a local directory, file:///path or s3://bucket/prefix. Defaults to the
    /// default Warehouse (see `pchronicle default`).
    pub dataset: Option<String>,
    #[command(flatten)]
    pub discovery: DiscoveryArgs,
}

/// Discovery bounds and the bad-Source policy.
#[derive(Debug, Args)]
pub struct DiscoveryArgs {
    /// Stop with an error after this many candidate files.
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    pub max_files: u64,
    /// Stop with an error after visiting this many directory entries.
    #[arg(long, value_name = "N", default_value_t = 10_000_000)]
    pub max_entries: u64,
    /// How to treat a bad Source: report it (degraded/error) and go on, or fail.
    #[arg(long, value_enum, default_value_t = ErrorsArg::Report)]
    pub errors: ErrorsArg,
}

/// `--errors report|strict`
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ErrorsArg {
    /// Mark a bad Source degraded or error, with a reason, and continue.
    Report,
    /// Fail the command on the first Source that is not ready.
    Strict,
}

/// `ls [DATASET]`
#[derive(Debug, Args)]
#[allow(missing_docs)]
pub struct LsArgs {
    #[command(flatten)]
    pub dataset: DatasetArgs,
    /// List every file visited (members of stores, skipped files and why).
    #[arg(long)]
    pub physical: bool,
    /// Fail when listing runs longer than this many seconds (checked between
    /// directories and files).
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub timeout: f64,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `status [DATASET]`
#[derive(Debug, Args)]
#[allow(missing_docs)]
pub struct StatusArgs {
    #[command(flatten)]
    pub dataset: DatasetArgs,
    /// Largest single JSON document or line accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = crate::formats::DEFAULT_MAX_DOCUMENT_BYTES)]
    pub max_document_bytes: u64,
    /// Fail when reading runs longer than this many seconds (checked between
    /// Sources and before each file is opened).
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub timeout: f64,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Entry point used by `main`: parse, run, report, exit.
pub fn main() -> ExitCode {
    // Before any thread starts: the process's environment is set here.
    crate::util::rt::share_cores_with_lance();
    run_with_args(std::env::args_os()).into()
}

/// How soon (ms) the allocator should return freed memory to the system
/// for the command `args` run (see `main.rs`), where mimalloc's one second
/// is too long: commands that stream a whole Dataset through memory, whose
/// peak is bounded by the largest document, and the long-lived server,
/// which frees a large file's decoding once it is kept packed and then
/// holds what it keeps for hours. `import` returns it at once: on 5M steps
/// that lowered both of its phases by 15–45 MiB for a few percent of its
/// time (docs/benchmarks.md). `export` and `serve` keep the 10 ms they were
/// measured with. Arguments that do not parse keep the default.
pub fn purge_delay_ms<I: IntoIterator<Item = OsString>>(args: I) -> Option<&'static str> {
    match Cli::try_parse_from(args).ok()?.command {
        Command::Import(_) => Some("0"),
        Command::Export(_) | Command::Serve(_) => Some("10"),
        _ => None,
    }
}

/// Parse `args` and run; returns the exit status. Errors are reported here.
pub fn run_with_args<I: IntoIterator<Item = OsString>>(args: I) -> ExitStatus {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => return report_clap_error(&e),
    };
    let settings = match Settings::resolve(&cli) {
        Ok(s) => s,
        Err(e) => {
            let err = Error::from(e);
            let json = settings::json_requested(
                &cli,
                std::io::IsTerminal::is_terminal(&std::io::stdout()),
            );
            out::report_error(&err, json, &out::ErrorContext::default());
            return ExitStatus::Error;
        }
    };
    let mut out = Out::new(&settings);
    crate::s3::configure(settings.s3.clone());
    let result = {
        let _e = crate::util::stats::phase(crate::util::stats::Phase::Execute);
        cmd::run(&settings, &mut out).and_then(|status| {
            let _w = crate::util::stats::phase(crate::util::stats::Phase::Write);
            out.flush()?;
            Ok(status)
        })
    };
    out.report_stats();
    if let Some((requests, bytes)) = crate::s3::traffic() {
        if requests > 0 {
            out.info(&format!(
                "S3: {requests} request{}, {bytes} bytes received",
                if requests == 1 { "" } else { "s" }
            ));
        }
    }
    match result {
        Ok(status) => status,
        Err(e) if e.is_broken_pipe() => ExitStatus::Success,
        Err(e) => {
            out.discard();
            out::report_error(&e, out.json(), &out.error_context());
            ExitStatus::Error
        }
    }
}

fn report_clap_error(e: &clap::Error) -> ExitStatus {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let mut stdout = std::io::stdout().lock();
            let _ = write!(stdout, "{}", e.render());
            ExitStatus::Success
        }
        _ => {
            let rendered = e.render().to_string();
            let text = rendered.strip_prefix("error: ").map_or_else(
                || format!("error[PC-CLI-001]: {rendered}"),
                |rest| format!("error[PC-CLI-001]: {rest}"),
            );
            let _ = write!(std::io::stderr().lock(), "{text}");
            ExitStatus::Error
        }
    }
}
