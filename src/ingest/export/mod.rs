//! `export`: write complete trajectories of one Catalog Snapshot in an
//! exchange format.

use std::collections::HashSet;

mod groups;
mod sink;

use groups::Groups;
use sink::Sink;

use super::{ExportOptions, IngestError as Error};
use crate::catalog::read::{origin_ends, read_source_selected, ReadFailure};
use crate::catalog::{CatalogError, CatalogSnapshot, SourceStatus};
use crate::formats::encode::Loss;
use crate::formats::model::Storyline;
use crate::formats::{encode_documents, DecodeOptions, ExportFormat};
use crate::util::notes::Notes;
use crate::util::stats;

/// Export problems.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The output exists and --overwrite was not given.
    #[error("output file `{0}` already exists; pass --overwrite to replace it")]
    OutputExists(String),
    /// A conversion would drop a field under --strict.
    #[error("cannot convert without loss (--strict): {field}: {reason}")]
    Lossy {
        /// The field.
        field: String,
        /// Why.
        reason: String,
    },
    /// Nothing matched the selection.
    #[error("no trajectory matches the selection")]
    Nothing,
    /// Writing failed.
    #[error("cannot write the output: {0}")]
    Io(String),
    /// `--overwrite` found something else than a regular file at the output.
    #[error("`{path}` is {kind}; --overwrite replaces regular files only (remove it, or choose another path)")]
    NotRegularFile {
        /// The output path.
        path: String,
        /// What is there (`a directory`, `a FIFO`, …).
        kind: &'static str,
    },
}

impl ExportError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            ExportError::OutputExists(_) => "PC-EXP-001",
            ExportError::Lossy { .. } => "PC-EXP-002",
            ExportError::Nothing => "PC-EXP-003",
            ExportError::Io(_) => "PC-EXP-004",
            ExportError::NotRegularFile { .. } => "PC-EXP-006",
        }
    }
}

/// `--overwrite` replaces a regular file only. A directory, a symlink (whose
/// target would be left alone while its name is replaced), a FIFO, a socket
/// or a device at the output path is refused. Nothing there is fine.
fn check_replaceable(path: &std::path::Path) -> Result<(), Error> {
    use std::os::unix::fs::FileTypeExt as _;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    let ft = meta.file_type();
    let kind = if ft.is_file() {
        return Ok(());
    } else if ft.is_symlink() {
        "a symbolic link"
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO (named pipe)"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_char_device() {
        "a character device"
    } else {
        "not a regular file"
    };
    Err(ExportError::NotRegularFile {
        path: path.display().to_string(),
        kind,
    }
    .into())
}

/// Run the command.
/// Export what `s` selects; a document written to stdout goes to `stdout`.
pub fn export(
    s: &ExportOptions,
    out: &dyn Notes,
    stdout: &mut dyn std::io::Write,
) -> Result<(), Error> {
    let snap = CatalogSnapshot::open(&s.dataset, s.limits, false)?;
    out.snapshot(&snap.dataset.to_string(), &snap.snapshot_id);
    if let Some(src) = &s.source {
        if !snap.sources.iter().any(|x| &x.source_path == src) {
            return Err(CatalogError::UnknownSource {
                given: crate::util::text::escape_control(src).into_owned(),
            }
            .into());
        }
    }
    // Refused before anything is read; checked again when written.
    if let (Some(p), true) = (&s.output, s.overwrite) {
        check_replaceable(p)?;
    }
    // --where: documents selected by the SQL engine over `trajectories`, by
    // position (ids may repeat within a Source).
    let allowed: Option<HashSet<(String, i64)>> = match &s.where_ {
        None => None,
        Some(cond) => {
            let mounts = crate::dataset::Mounts::open(
                &[("dataset".to_string(), s.dataset.clone())],
                s.limits,
                false,
                s.max_document_bytes,
            )?;
            let sql_text = crate::sql::parse::trajectories_where(cond, "dataset")?;
            let crate::sql::Statement::Query(plan) = crate::sql::plan(&sql_text, &mounts)? else {
                return Err(Error::Internal("the --where query is not a query".into()));
            };
            let r = crate::sql::execute(&plan, &mounts, crate::sql::Limits::default())?;
            let mut set = HashSet::new();
            for b in &r.batches {
                let p = arrow::array::AsArray::as_string::<i32>(b.column(0));
                let d =
                    arrow::array::AsArray::as_primitive::<arrow::datatypes::Int64Type>(b.column(1));
                for i in 0..b.num_rows() {
                    set.insert((p.value(i).to_string(), d.value(i)));
                }
            }
            Some(set)
        }
    };
    // The Sources the selection picked something from.
    let picked: Option<HashSet<&str>> = allowed
        .as_ref()
        .map(|a| a.iter().map(|(p, _)| p.as_str()).collect());
    let opts = DecodeOptions::full(s.max_document_bytes);
    let mut losses = Losses::default();
    let mut trajectories = 0u64;
    let mut sink = Sink::open(s, stdout)?;
    // Records are written while Sources are read: that time is the read
    // phase's.
    let read_phase = stats::phase(stats::Phase::Read);
    for src in &snap.sources {
        if s.source.as_ref().is_some_and(|x| x != &src.source_path) {
            continue;
        }
        if src.status != SourceStatus::Ready && s.errors_strict {
            return Err(strict_source(
                src,
                src.status,
                src.reason.as_ref().map_or("PC-CAT-010", |r| r.code),
                src.reason
                    .as_ref()
                    .map_or_else(|| "not ready".to_string(), |r| r.message.clone()),
            ));
        }
        if src.status == SourceStatus::Error && src.format == crate::formats::SourceFormat::Unknown
        {
            out.warn(
                src.reason.as_ref().map_or("PC-CAT-009", |r| r.code),
                &format!("skipped {}: not readable", src.source_path),
            );
            continue;
        }
        // Nothing of it selected: it is not read again.
        if picked
            .as_ref()
            .is_some_and(|p| !p.contains(src.source_path.as_str()))
        {
            continue;
        }
        // Each file's documents are encoded and written as soon as the
        // last one is read. A file Source is checked whole before any of it
        // is written; a store that fails part way keeps the files already
        // written, and its warning says so.
        let ends = match origin_ends(src) {
            Ok(e) => e,
            Err(e) => {
                skip_or_fail(s, out, src, e, 0)?;
                continue;
            }
        };
        let before = trajectories;
        let mut groups = Groups::new(ends);
        let mut failed: Option<Error> = None;
        let mut ordinal = 0i64;
        let mut emit = |group: Vec<Storyline>,
                        sink: &mut Sink<'_>,
                        losses: &mut Losses|
         -> Result<(), Error> {
            trajectories += group.len() as u64;
            let (records, l) = encode_documents(s.format, &group);
            drop(group);
            if s.strict {
                if let Some(first) = l.first() {
                    return Err(ExportError::Lossy {
                        field: first.field.clone(),
                        reason: first.reason.clone(),
                    }
                    .into());
                }
            }
            losses.add(l);
            for r in records {
                sink.record(r)?;
            }
            Ok(())
        };
        // The selection needs only what a store's `runs` row gives, so the
        // documents it refuses are not built.
        let mut keep = |d: &Storyline| {
            let keep = s.run_id.as_ref().is_none_or(|r| d.run_id() == r)
                && s.session_id.as_ref().is_none_or(|x| &d.session == x)
                && allowed
                    .as_ref()
                    .is_none_or(|a| a.contains(&(src.source_path.clone(), ordinal)));
            ordinal += 1;
            keep
        };
        let r = read_source_selected(src, opts, &mut keep, &mut |d, keep| {
            for group in groups.next(d, keep) {
                if let Err(e) = emit(group, &mut sink, &mut losses) {
                    failed = Some(e);
                    return false;
                }
            }
            true
        });
        if let Some(e) = failed {
            return Err(e);
        }
        match r {
            Ok(read) => {
                // Read, but not as given: refused under --errors strict.
                if let Some(d) = read.diagnostics.iter().find(|d| d.degrades()) {
                    let detail = format!("{}: {}", d.pointer, d.message);
                    if s.errors_strict {
                        return Err(strict_source(src, SourceStatus::Degraded, d.code, detail));
                    }
                    out.warn(d.code, &format!("{}: {detail}", src.source_path));
                }
            }
            Err(e) => {
                skip_or_fail(s, out, src, e, trajectories - before)?;
                continue;
            }
        }
        for group in groups.finish() {
            emit(group, &mut sink, &mut losses)?;
        }
    }
    if trajectories == 0 {
        return Err(ExportError::Nothing.into());
    }
    drop(read_phase);
    let write_phase = stats::phase(stats::Phase::Write);
    let n_records = sink.finish()?;
    drop(write_phase);
    stats::add(stats::Counter::RowsProduced, n_records);
    losses.report(out);
    out.info(&format!(
        "exported {trajectories} {} as {n_records} {} record{}",
        if trajectories == 1 {
            "trajectory"
        } else {
            "trajectories"
        },
        format_name(s.format),
        if n_records == 1 { "" } else { "s" }
    ));
    Ok(())
}

/// The error of a Source that `--errors strict` does not let through.
fn strict_source(
    src: &crate::catalog::Source,
    status: SourceStatus,
    code: &'static str,
    reason: String,
) -> Error {
    CatalogError::StrictSource {
        source_path: src.source_path.clone(),
        status: status.name(),
        reason_code: code,
        reason,
    }
    .into()
}

/// A Source that could not be read (or not to its end): the export fails
/// under `--errors strict`, and otherwise goes on with a warning that says
/// whether some of its trajectories were written.
fn skip_or_fail(
    s: &ExportOptions,
    out: &dyn Notes,
    src: &crate::catalog::Source,
    e: ReadFailure,
    written: u64,
) -> Result<(), Error> {
    match e {
        ReadFailure::Fatal(e) => Err(e.into()),
        ReadFailure::Source(e) if s.errors_strict => Err(strict_source(
            src,
            SourceStatus::Error,
            e.code(),
            e.detail(),
        )),
        ReadFailure::Source(e) => {
            let what = if written == 0 {
                format!("skipped {}", src.source_path)
            } else {
                format!("{}: stopped after {written} trajectories", src.source_path)
            };
            out.warn(e.code(), &format!("{what}: {}", e.detail()));
            Ok(())
        }
    }
}

/// What the conversions dropped: each (field, reason) reported once, the
/// first 20 by name, without keeping every loss of a large export.
#[derive(Default)]
struct Losses {
    seen: HashSet<(String, String)>,
    shown: Vec<Loss>,
}

impl Losses {
    const SHOWN: usize = 20;

    fn add(&mut self, losses: Vec<Loss>) {
        for l in losses {
            if self.seen.insert((l.field.clone(), l.reason.clone()))
                && self.shown.len() < Self::SHOWN
            {
                self.shown.push(l);
            }
        }
    }

    fn report(&self, out: &dyn Notes) {
        for l in &self.shown {
            out.warn("PC-EXP-005", &format!("dropped {}: {}", l.field, l.reason));
        }
        if self.seen.len() > Self::SHOWN {
            out.warn(
                "PC-EXP-005",
                &format!(
                    "… and {} more dropped fields",
                    self.seen.len() - Self::SHOWN
                ),
            );
        }
    }
}

fn format_name(f: ExportFormat) -> &'static str {
    match f {
        ExportFormat::Atif => "ATIF",
        ExportFormat::Actf => "ACTF",
        ExportFormat::OpenAiMessages => "OpenAI messages",
        ExportFormat::Storyline => "Storyline",
    }
}
