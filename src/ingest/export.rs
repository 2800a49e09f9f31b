//! `export`: write complete trajectories of one Catalog Snapshot in an
//! exchange format.

use std::collections::HashSet;
use std::io::Write as _;

use super::{ExportOptions, IngestError as Error};
use crate::catalog::read::{read_source, ReadFailure};
use crate::catalog::{CatalogError, CatalogSnapshot, SourceStatus};
use crate::formats::model::Storyline;
use crate::formats::{encode_documents, DecodeOptions, ExportFormat};
use crate::util::interrupt;
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
    let opts = DecodeOptions::full(s.max_document_bytes);
    let mut records: Vec<serde_json::Value> = Vec::new();
    let mut losses = Vec::new();
    let mut trajectories = 0u64;
    let mut sink_stream = StreamSink::new(s)?;
    // Streamed records are written while Sources are read: that time is
    // the read phase's.
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
        let mut docs: Vec<Storyline> = Vec::new();
        let mut ordinal = 0i64;
        let r = read_source(src, opts, &mut |d| {
            let keep = s.run_id.as_ref().is_none_or(|r| d.run_id() == r)
                && s.session_id.as_ref().is_none_or(|x| &d.session == x)
                && allowed
                    .as_ref()
                    .is_none_or(|a| a.contains(&(src.source_path.clone(), ordinal)));
            if keep {
                docs.push(d.clone());
            }
            ordinal += 1;
        });
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
            Err(ReadFailure::Fatal(e)) => return Err(e.into()),
            Err(ReadFailure::Source(e)) if s.errors_strict => {
                return Err(strict_source(
                    src,
                    SourceStatus::Error,
                    e.code(),
                    e.detail(),
                ));
            }
            Err(ReadFailure::Source(e)) => {
                out.warn(
                    e.code(),
                    &format!("skipped {}: {}", src.source_path, e.detail()),
                );
                continue;
            }
        }
        if docs.is_empty() {
            continue;
        }
        trajectories += docs.len() as u64;
        // A store holds the documents of many files: subagents are matched
        // to their parents, and runs grouped, within the file they came
        // from (ids may repeat across files).
        let mut recs = Vec::new();
        for group in by_origin(docs) {
            let (r, l) = encode_documents(s.format, &group);
            recs.extend(r);
            losses.extend(l);
        }
        if s.strict {
            if let Some(first) = losses.first() {
                return Err(ExportError::Lossy {
                    field: first.field.clone(),
                    reason: first.reason.clone(),
                }
                .into());
            }
        }
        match &mut sink_stream {
            Some(w) => {
                for r in &recs {
                    w.line(r)?;
                }
            }
            None => records.extend(recs),
        }
    }
    if trajectories == 0 {
        return Err(ExportError::Nothing.into());
    }
    drop(read_phase);
    let write_phase = stats::phase(stats::Phase::Write);
    let n_records = match sink_stream {
        Some(w) => w.finish()?,
        None => {
            let bytes = render(&records, s.format)?;
            match &s.output {
                None => stdout.write_all(&bytes).map_err(Error::Output)?,
                Some(p) => write_file(p, &bytes, s.overwrite)?,
            }
            records.len() as u64
        }
    };
    drop(write_phase);
    stats::add(stats::Counter::RowsProduced, n_records);
    let mut seen = HashSet::new();
    let mut shown = 0;
    for l in &losses {
        if seen.insert((l.field.clone(), l.reason.clone())) {
            if shown < 20 {
                out.warn("PC-EXP-005", &format!("dropped {}: {}", l.field, l.reason));
            }
            shown += 1;
        }
    }
    if shown > 20 {
        out.warn(
            "PC-EXP-005",
            &format!("… and {} more dropped fields", shown - 20),
        );
    }
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

/// Documents grouped by the file they were read from, in order of first
/// appearance (one group for an exchange file).
fn by_origin(docs: Vec<Storyline>) -> Vec<Vec<Storyline>> {
    let mut groups: Vec<(Option<String>, Vec<Storyline>)> = Vec::new();
    for d in docs {
        match groups.iter_mut().find(|(o, _)| *o == d.origin_path) {
            Some((_, g)) => g.push(d),
            None => groups.push((d.origin_path.clone(), vec![d])),
        }
    }
    groups.into_iter().map(|(_, g)| g).collect()
}

fn format_name(f: ExportFormat) -> &'static str {
    match f {
        ExportFormat::Atif => "ATIF",
        ExportFormat::Actf => "ACTF",
        ExportFormat::OpenAiMessages => "OpenAI messages",
        ExportFormat::Storyline => "Storyline",
    }
}

/// One record: a pretty JSON document; several: JSON Lines (ATIF, OpenAI,
/// Storyline and ACTF readers all accept one document per line).
fn render(records: &[serde_json::Value], _format: ExportFormat) -> Result<Vec<u8>, Error> {
    let mut buf = Vec::new();
    if records.len() == 1 {
        serde_json::to_writer_pretty(&mut buf, &records[0])
            .map_err(|e| Error::Internal(e.to_string()))?;
        buf.push(b'\n');
    } else {
        for r in records {
            serde_json::to_writer(&mut buf, r).map_err(|e| Error::Internal(e.to_string()))?;
            buf.push(b'\n');
        }
    }
    Ok(buf)
}

fn write_file(path: &std::path::Path, bytes: &[u8], overwrite: bool) -> Result<(), Error> {
    if !overwrite {
        return crate::util::fs::write_new(path, bytes).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                ExportError::OutputExists(path.display().to_string()).into()
            } else {
                ExportError::Io(e.to_string()).into()
            }
        });
    }
    let dir = path
        .parent()
        .ok_or_else(|| ExportError::Io("no parent directory".into()))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    check_replaceable(path)?;
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    interrupt::remove_on_interrupt(&tmp);
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    interrupt::settle(&tmp, || {
        let r = written
            .map_err(|e| Error::from(ExportError::Io(e.to_string())))
            // Again right before the rename: the path may have changed meanwhile.
            .and_then(|()| check_replaceable(path))
            .and_then(|()| {
                std::fs::rename(&tmp, path).map_err(|e| Error::from(ExportError::Io(e.to_string())))
            });
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r
    })
}

/// `--stream`: JSON Lines written as records are produced (to stdout, or to
/// a temporary file published at the end).
struct StreamSink {
    target: Option<(std::path::PathBuf, std::path::PathBuf, bool)>,
    w: Box<dyn std::io::Write>,
    n: u64,
}

impl StreamSink {
    fn new(s: &ExportOptions) -> Result<Option<Self>, Error> {
        if !s.stream {
            return Ok(None);
        }
        match &s.output {
            None => Ok(Some(StreamSink {
                target: None,
                w: Box::new(std::io::BufWriter::new(std::io::stdout())),
                n: 0,
            })),
            Some(p) => {
                if p.exists() && !s.overwrite {
                    return Err(ExportError::OutputExists(p.display().to_string()).into());
                }
                if s.overwrite {
                    check_replaceable(p)?;
                }
                let dir = p
                    .parent()
                    .ok_or_else(|| ExportError::Io("no parent directory".into()))?;
                let name = p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
                interrupt::remove_on_interrupt(&tmp);
                let f = std::fs::File::create(&tmp).map_err(|e| {
                    interrupt::settle(&tmp, || ());
                    ExportError::Io(e.to_string())
                })?;
                Ok(Some(StreamSink {
                    target: Some((tmp, p.clone(), s.overwrite)),
                    w: Box::new(std::io::BufWriter::new(f)),
                    n: 0,
                }))
            }
        }
    }

    fn line(&mut self, v: &serde_json::Value) -> Result<(), Error> {
        serde_json::to_writer(&mut self.w, v).map_err(|e| Error::Output(e.into()))?;
        self.w.write_all(b"\n").map_err(Error::Output)?;
        self.n += 1;
        Ok(())
    }

    fn finish(mut self) -> Result<u64, Error> {
        self.w.flush().map_err(Error::Output)?;
        drop(std::mem::replace(&mut self.w, Box::new(std::io::sink())));
        if let Some((tmp, dst, overwrite)) = self.target.take() {
            if overwrite {
                if let Err(e) = check_replaceable(&dst) {
                    interrupt::settle(&tmp, || std::fs::remove_file(&tmp).ok());
                    return Err(e);
                }
            }
            let r = interrupt::settle(&tmp, || {
                let r = if overwrite {
                    std::fs::rename(&tmp, &dst)
                } else {
                    std::fs::hard_link(&tmp, &dst)
                };
                let _ = std::fs::remove_file(&tmp);
                r
            });
            r.map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    Error::from(ExportError::OutputExists(dst.display().to_string()))
                } else {
                    Error::from(ExportError::Io(e.to_string()))
                }
            })?;
        }
        Ok(self.n)
    }
}

impl Drop for StreamSink {
    /// A failed export leaves no temporary file behind.
    fn drop(&mut self) {
        if let Some((tmp, _, _)) = self.target.take() {
            interrupt::settle(&tmp, || std::fs::remove_file(&tmp).ok());
        }
    }
}
