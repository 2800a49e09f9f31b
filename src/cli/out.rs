//! Output: stdout carries only the result (table or JSON); progress, the
//! snapshot_id, counts and warnings go to stderr.

use std::io::{BufWriter, Stdout, Write};
use std::time::{Duration, Instant};

use super::settings::{OutputFormat, Settings};
use crate::error::Error;
use crate::util::stats;
use crate::util::text::escape_control;

/// The result writer for one command.
pub struct Out {
    stdout: Option<BufWriter<Stdout>>,
    format: OutputFormat,
    quiet: bool,
    color: bool,
    progress: bool,
    stats: bool,
    context: std::sync::Mutex<ErrorContext>,
}

/// What the JSON error object says about the Dataset a command read (as the
/// REST errors do), filled in as the command learns it.
#[derive(Debug, Clone, Default)]
pub struct ErrorContext {
    /// The Dataset URI, when the command reads (or creates) one Dataset.
    pub dataset_uri: Option<String>,
    /// Its Catalog Snapshot, once pinned.
    pub snapshot_id: Option<String>,
}

impl Out {
    /// Writers configured by the resolved settings.
    pub fn new(settings: &Settings) -> Self {
        Out {
            stdout: Some(BufWriter::with_capacity(1 << 16, std::io::stdout())),
            format: settings.format,
            quiet: settings.quiet,
            color: settings.color,
            progress: settings.progress,
            stats: settings.stats,
            context: std::sync::Mutex::new(ErrorContext {
                dataset_uri: settings.command.dataset_uri(),
                snapshot_id: None,
            }),
        }
    }

    /// Note the Catalog Snapshot the command pinned, for an error object.
    pub fn remember_snapshot(&self, dataset_uri: &str, snapshot_id: &str) {
        if let Ok(mut c) = self.context.lock() {
            c.dataset_uri = Some(dataset_uri.to_string());
            c.snapshot_id = Some(snapshot_id.to_string());
        }
    }

    /// The Dataset and snapshot known so far.
    pub fn error_context(&self) -> ErrorContext {
        self.context.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// True when the result is JSON.
    pub fn json(&self) -> bool {
        self.format == OutputFormat::Json
    }

    /// The resolved result format.
    pub fn format(&self) -> OutputFormat {
        self.format
    }

    fn stdout(&mut self) -> &mut BufWriter<Stdout> {
        self.stdout
            .get_or_insert_with(|| BufWriter::new(std::io::stdout()))
    }

    /// Write one JSON document (pretty, newline-terminated). With
    /// `--stats`, an object gains a `stats` member.
    pub fn write_json<T: serde::Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        let _w = stats::phase(stats::Phase::Write);
        let bytes = if self.stats {
            let mut v = serde_json::to_value(v).map_err(|e| Error::Internal(e.to_string()))?;
            if let Some(o) = v.as_object_mut() {
                o.insert("stats".into(), stats_json());
            }
            json_bytes(&v)?
        } else {
            json_bytes(v)?
        };
        self.stdout().write_all(&bytes).map_err(Error::Output)
    }

    /// True when `--stats` was given.
    pub fn stats(&self) -> bool {
        self.stats
    }

    /// With `--stats`, the `stats:` line on stderr (printed even with
    /// `--quiet`: it was asked for).
    pub fn report_stats(&self) {
        if !self.stats {
            return;
        }
        let s = stats_json();
        let n = |k: &str| s[k].as_u64().unwrap_or(0);
        let phases: Vec<String> = s["phases"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k} {} ms", v["wall_ms"]))
                    .collect()
            })
            .unwrap_or_default();
        let rss = s["peak_rss_bytes"].as_u64().map_or("unknown".into(), |b| {
            format!("{:.1} MiB", b as f64 / 1_048_576.0)
        });
        let _ = writeln!(
            std::io::stderr().lock(),
            "stats: {} sources, {} files opened, {} bytes read locally, {} from S3 in {} requests, {} rows scanned, {} produced, {} index segments, spilled {} bytes; peak RSS {rss}; {} ms wall, {} ms CPU ({})",
            n("sources_read"),
            n("files_opened"),
            n("bytes_read_local"),
            n("bytes_read_s3"),
            n("s3_requests"),
            n("rows_scanned"),
            n("rows_produced"),
            n("index_segments"),
            n("spill_bytes"),
            s["wall_ms"],
            s["cpu_ms"],
            phases.join(", ")
        );
    }

    /// Write a table.
    pub fn write_table(&mut self, t: &Grid) -> Result<(), Error> {
        let _w = stats::phase(stats::Phase::Write);
        let text = t.render();
        self.stdout()
            .write_all(text.as_bytes())
            .map_err(Error::Output)
    }

    /// Write raw bytes to stdout.
    pub fn write_bytes(&mut self, b: &[u8]) -> Result<(), Error> {
        self.stdout().write_all(b).map_err(Error::Output)
    }

    /// Write raw text to stdout.
    pub fn write_text(&mut self, s: &str) -> Result<(), Error> {
        self.stdout().write_all(s.as_bytes()).map_err(Error::Output)
    }

    /// Flush stdout.
    pub fn flush(&mut self) -> Result<(), Error> {
        match self.stdout.as_mut() {
            Some(w) => w.flush().map_err(Error::Output),
            None => Ok(()),
        }
    }

    /// Drop whatever result is still buffered (used on failure, so a failed
    /// command does not leave a partial document on stdout).
    pub fn discard(&mut self) {
        if let Some(w) = self.stdout.take() {
            let (_inner, _buffered) = w.into_parts();
        }
    }

    /// An informational line on stderr (suppressed by --quiet).
    pub fn info(&self, msg: &str) {
        if !self.quiet {
            let _ = writeln!(std::io::stderr().lock(), "{msg}");
        }
    }

    /// A `note:` line on stderr: something the user may not expect, that is
    /// not wrong (suppressed by --quiet).
    pub fn note(&self, msg: &str) {
        self.info(&format!("note: {}", escape_control(msg)));
    }

    /// A warning on stderr (always shown).
    pub fn warn(&self, code: &str, msg: &str) {
        let label = if self.color {
            "\x1b[33mwarning\x1b[0m"
        } else {
            "warning"
        };
        let _ = writeln!(
            std::io::stderr().lock(),
            "{label}[{code}]: {}",
            escape_control(msg)
        );
    }

    /// An error line on stderr, for a command that still prints its result
    /// (the caller then exits with status 2).
    pub fn error_line(&self, code: &str, msg: &str) {
        let label = if self.color {
            "\x1b[31merror\x1b[0m"
        } else {
            "error"
        };
        let _ = writeln!(
            std::io::stderr().lock(),
            "{label}[{code}]: {}",
            escape_control(msg)
        );
    }

    /// True with --quiet.
    pub fn quiet(&self) -> bool {
        self.quiet
    }

    /// A live progress indicator (only on a terminal).
    pub fn progress(&self, label: &'static str) -> Progress {
        Progress {
            enabled: self.progress,
            label,
            last: None,
            shown: false,
        }
    }
}

/// The `stats` object: what the command did so far.
pub fn stats_json() -> serde_json::Value {
    stats::snapshot(crate::s3::traffic().unwrap_or((0, 0)))
}

/// The bytes [`Out::write_json`] prints for `v`, so a command can measure
/// its result before printing it.
pub fn json_bytes<T: serde::Serialize + ?Sized>(v: &T) -> Result<Vec<u8>, Error> {
    let mut buf = Vec::new();
    serde_json::to_writer_pretty(&mut buf, v).map_err(|e| Error::Output(e.into()))?;
    buf.push(b'\n');
    Ok(buf)
}

/// Print an error with its code to stderr, and as JSON on stdout in JSON mode
/// (with the Dataset and snapshot of `context`, when known).
pub fn report_error(err: &Error, json: bool, context: &ErrorContext) {
    let no_color = std::env::var("NO_COLOR").ok();
    let color = super::settings::color_enabled(
        std::io::IsTerminal::is_terminal(&std::io::stderr()),
        no_color.as_deref(),
    );
    let label = if color {
        "\x1b[31merror\x1b[0m"
    } else {
        "error"
    };
    let _ = writeln!(
        std::io::stderr().lock(),
        "{label}[{}]: {}",
        err.code(),
        crate::util::text::escape_control_keep_newlines(&err.to_string())
    );
    if json {
        let doc = serde_json::json!({
            "error": {
                "code": err.code(),
                "message": err.to_string(),
                "source_path": err.source_path(),
                "dataset_uri": context.dataset_uri,
                "snapshot_id": context.snapshot_id,
            }
        });
        let mut stdout = std::io::stdout().lock();
        let _ = serde_json::to_writer(&mut stdout, &doc);
        let _ = stdout.write_all(b"\n");
    }
}

/// A throttled one-line progress display on stderr.
pub struct Progress {
    enabled: bool,
    label: &'static str,
    last: Option<Instant>,
    shown: bool,
}

impl Progress {
    /// Report the current count (redrawn at most ten times a second).
    pub fn tick(&mut self, done: u64, total: Option<u64>) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < Duration::from_millis(100))
        {
            return;
        }
        self.last = Some(now);
        self.shown = true;
        let msg = match total {
            Some(t) => format!("\r{} {done}/{t}\x1b[K", self.label),
            None => format!("\r{} {done}\x1b[K", self.label),
        };
        let _ = std::io::stderr().lock().write_all(msg.as_bytes());
    }

    /// Clear the progress line.
    pub fn finish(&mut self) {
        if self.shown {
            let _ = std::io::stderr().lock().write_all(b"\r\x1b[K");
            self.shown = false;
        }
    }
}

impl crate::util::notes::Progress for Progress {
    fn tick(&mut self, done: u64, total: Option<u64>) {
        Progress::tick(self, done, total);
    }
    fn finish(&mut self) {
        Progress::finish(self);
    }
}

/// Library code reports to the command line through its `Out`.
impl crate::util::notes::Notes for Out {
    fn info(&self, msg: &str) {
        Out::info(self, msg);
    }
    fn warn(&self, code: &str, msg: &str) {
        Out::warn(self, code, msg);
    }
    fn progress(&self, label: &'static str) -> Box<dyn crate::util::notes::Progress + '_> {
        Box::new(Out::progress(self, label))
    }
    fn snapshot(&self, dataset_uri: &str, snapshot_id: &str) {
        self.remember_snapshot(dataset_uri, snapshot_id);
        Out::info(self, &format!("snapshot_id: {snapshot_id}"));
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

pub use crate::render::{Align, Grid};
