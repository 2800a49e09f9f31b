//! `import --from … [--output …]`: create a Storyline Lance store from
//! exchange files, create-only and atomic.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;
use serde_json::{json, Value};

use super::{ImportInput, ImportOptions, IngestError as Error};
use crate::catalog::read::{read_file, ReadFailure};
use crate::catalog::{discover, CatalogError, DiscoveryLimits, Source, SourceStatus};
use crate::formats::model::Storyline;
use crate::formats::{DecodeOptions, Diagnostic, FormatError, SourceFormat};
use crate::store::{StoreError, StoreWriter};
use crate::util::interrupt;
use crate::util::notes::Notes;

/// Import problems.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The target exists.
    #[error("the target `{0}` already exists; import only creates new Datasets")]
    TargetExists(String),
    /// Another import holds the target.
    #[error("another import is creating `{0}` right now")]
    Busy(String),
    /// Another import holds the lock object of an S3 target.
    #[error("another import is creating `{target}` (its lock object is `{lock}`; delete it if that import was killed)")]
    BusyS3 {
        /// The target.
        target: String,
        /// The lock object.
        lock: String,
    },
    /// The input has no trajectory files.
    #[error("no trajectory files found in `{0}`")]
    NoInput(String),
    /// Files of several formats under `--format auto` (boxed: the details
    /// would make every import `Result` large).
    #[error("{0}")]
    MixedFormats(Box<MixedFormats>),
    /// A file is not of the declared format.
    #[error("`{file}` is {found}, not {expected} (--format {expected})")]
    WrongFormat {
        /// The file.
        file: String,
        /// What it looks like.
        found: &'static str,
        /// What was asked for.
        expected: &'static str,
    },
    /// An input file, or stdin, is not a trajectory file that can be read.
    #[error("{input} is not a readable trajectory file: [{reason_code}] {reason}")]
    Unreadable {
        /// `stdin`, or the file in backticks.
        input: String,
        /// The file's path relative to the input (None for stdin).
        source_path: Option<String>,
        /// The code of the underlying problem.
        reason_code: &'static str,
        /// Sanitised reason.
        reason: String,
    },
    /// The input is larger than `--max-input-bytes`.
    #[error("the input is larger than {0} bytes (--max-input-bytes)")]
    TooLarge(u64),
    /// The input is a store or an events store.
    #[error("`{0}` is a Lance store; import reads exchange files")]
    StoreInput(String),
    /// Reading the input failed.
    #[error("cannot read the input: {0}")]
    Io(String),
    /// Writing the store failed.
    #[error("cannot write the Dataset: {message}")]
    Store {
        /// The store error code.
        code: &'static str,
        /// Message.
        message: String,
    },
}

/// What `--format auto` found in a folder of several formats.
#[derive(Debug, thiserror::Error)]
#[error("one format per import: `{first}` is {first_format} but `{other}` is {other_format} (the input holds {formats}); pass {choices} to import the files of that format and skip the others, or import them separately")]
pub struct MixedFormats {
    /// A file of the first format.
    pub first: String,
    /// Its format.
    pub first_format: &'static str,
    /// A file of another format.
    pub other: String,
    /// Its format.
    pub other_format: &'static str,
    /// Every format found, with its file count.
    pub formats: String,
    /// The `--format` values that would import a part.
    pub choices: String,
}

impl ImportError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            ImportError::TargetExists(_) => "PC-IMP-001",
            ImportError::Busy(_) | ImportError::BusyS3 { .. } => "PC-IMP-002",
            ImportError::NoInput(_) => "PC-IMP-003",
            ImportError::MixedFormats(_) => "PC-IMP-004",
            ImportError::WrongFormat { .. } => "PC-IMP-005",
            ImportError::TooLarge(_) => "PC-IMP-006",
            ImportError::StoreInput(_) => "PC-IMP-007",
            ImportError::Io(_) => "PC-IMP-008",
            ImportError::Store { code, .. } => code,
            ImportError::Unreadable { .. } => "PC-IMP-010",
        }
    }

    /// The input file concerned, when there is one.
    pub fn source_path(&self) -> Option<&str> {
        match self {
            ImportError::Unreadable { source_path, .. } => source_path.as_deref(),
            _ => None,
        }
    }
}

impl From<StoreError> for ImportError {
    fn from(e: StoreError) -> Self {
        ImportError::Store {
            code: e.code(),
            message: e.to_string(),
        }
    }
}

/// Removes the staging directory unless disarmed, and on an interrupt.
struct Staging {
    dir: PathBuf,
    armed: bool,
}

impl Staging {
    fn new(dir: PathBuf) -> Self {
        interrupt::remove_on_interrupt(&dir);
        Staging { dir, armed: true }
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // An interrupt meanwhile waits, then finds nothing left to remove.
        let mut held = interrupt::hold();
        if self.armed {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        held.forget(&self.dir);
    }
}

/// The held import lock of a target: an exclusive lock on the hidden file
/// `.NAME.pchronicle-import.lock` beside it. Dropping it removes the file
/// while still holding the lock, then releases it, so nothing of a finished
/// or failed import stays beside the target.
struct ImportLock {
    path: PathBuf,
    _file: std::fs::File,
}

impl ImportLock {
    /// Lock `path`; `None` when another import holds it. A lock taken on a
    /// file that was removed meanwhile (by an import that just ended) is no
    /// lock at all — a third import could create and lock a new file — so
    /// the lock counts only while `path` still names the locked file.
    fn acquire(path: PathBuf) -> Result<Option<ImportLock>, ImportError> {
        use std::os::unix::fs::MetadataExt as _;
        for _ in 0..16 {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .map_err(|e| ImportError::Io(e.to_string()))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
                Err(std::fs::TryLockError::Error(e)) => return Err(ImportError::Io(e.to_string())),
            }
            let held = file
                .metadata()
                .map_err(|e| ImportError::Io(e.to_string()))?;
            if let Ok(now) = std::fs::metadata(&path) {
                if now.dev() == held.dev() && now.ino() == held.ino() {
                    return Ok(Some(ImportLock { path, _file: file }));
                }
            }
            // Removed or replaced under us: try again on the new file.
        }
        Ok(None)
    }
}

impl Drop for ImportLock {
    fn drop(&mut self) {
        // Forgotten only once removed: an interrupt never removes the lock
        // file of a later import that took the same path.
        let mut held = interrupt::hold();
        let _ = std::fs::remove_file(&self.path);
        held.forget(&self.path);
    }
}

/// Files per parallel decoding round.
const CHUNK: usize = 32;
/// Input bytes per parallel decoding round (a larger file is a round of
/// its own): decoded documents take several times their file's size, and a
/// round's are all held until they are written, while the next round is
/// decoded. Two rounds are in memory at once, so each is half of what one
/// round was when decoding and writing took turns (64 files, 16 MiB): a
/// whole round ahead added 45 MiB to a 5M-step import's peak while the
/// store was written.
const ROUND_BYTES: u64 = 8 << 20;

/// Consecutive rounds of at most [`CHUNK`] files and [`ROUND_BYTES`] bytes
/// (at least one file each), in order.
fn rounds<T>(sources: &[T], size: impl Fn(&T) -> u64) -> impl Iterator<Item = &[T]> {
    let mut rest = sources;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0u64;
        let n = rest
            .iter()
            .take(CHUNK)
            .take_while(|s| {
                bytes += size(s);
                bytes <= ROUND_BYTES
            })
            .count()
            .max(1);
        let (round, tail) = rest.split_at(n);
        rest = tail;
        Some(round)
    })
}

/// The documents of one round of files, by file, in order.
type Decoded = Vec<(
    String,
    Result<(Vec<Storyline>, Vec<Diagnostic>, u64), Error>,
)>;

/// Decode the files of one round on the thread pool.
fn decode_round(chunk: &[Source], opts: DecodeOptions) -> Decoded {
    chunk
        .par_iter()
        .map(|src| {
            let mut docs = Vec::new();
            let r = read_file(src, opts, &mut |d| docs.push(d));
            let r = match r {
                Ok(read) => Ok((docs, read.diagnostics, read.generated_ids)),
                Err(ReadFailure::Fatal(e)) => Err(Error::from(e)),
                Err(ReadFailure::Source(e)) => Err(Error::from(e)),
            };
            (src.source_path.clone(), r)
        })
        .collect()
}

/// Run the command.
/// Create the store `s` names from its input; returns the JSON report the
/// command prints.
pub fn import(s: &ImportOptions, out: &dyn Notes) -> Result<Value, Error> {
    let started = Instant::now();
    // Ctrl-C or SIGTERM removes the lock file and the staged copies, then
    // exits 130 or 143 (an S3 lock object stays, as after a kill).
    interrupt::install("import");
    let target = &s.target;
    // An S3 target is claimed first, built locally in a temporary directory
    // (removed at the end), then published.
    let remote = match &s.s3_target {
        Some(uri) => Some(crate::store::publish::S3Target::claim(uri).map_err(publish_error)?),
        None => None,
    };
    let _local_tmp = remote
        .as_ref()
        .and_then(|_| target.parent().map(|p| Staging::new(p.to_path_buf())));
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| ImportError::Io("the target has no name".into()))?;
    let parent = target
        .parent()
        .ok_or_else(|| ImportError::Io("the target has no parent directory".into()))?
        .to_path_buf();
    std::fs::create_dir_all(&parent)
        .map_err(|e| ImportError::Io(format!("cannot create {}: {e}", parent.display())))?;
    // Serialise imports of one target; the lock file is hidden beside it.
    let lock_path = parent.join(format!(".{name}.pchronicle-import.lock"));
    let lock = {
        // Registered as it is taken: an interrupt in between would leave it.
        let mut held = interrupt::hold();
        let lock = ImportLock::acquire(lock_path)?
            .ok_or_else(|| ImportError::Busy(target.display().to_string()))?;
        held.add(&lock.path);
        lock
    };
    if std::fs::symlink_metadata(target).is_ok() {
        return Err(ImportError::TargetExists(target.display().to_string()).into());
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let staging = Staging::new(parent.join(format!(
        ".{name}.pchronicle-staging-{}-{nanos}",
        std::process::id()
    )));

    // The input: a list of Sources of one format.
    let spool_dir = parent.join(format!(
        ".{name}.pchronicle-input-{}-{nanos}",
        std::process::id()
    ));
    let _spool = Staging::new(spool_dir.clone());
    let Input {
        sources,
        format,
        bytes: input_bytes,
        skipped,
    } = collect_input(s, &spool_dir)?;
    let mut skipped_warnings = Vec::with_capacity(skipped.len());
    for x in &skipped {
        let message = format!(
            "skipped {}: it is {}, not {} (--format {})",
            x.path,
            x.format.name(),
            format.name(),
            format.name()
        );
        out.warn("PC-IMP-005", &message);
        skipped_warnings
            .push(json!({"code": "PC-IMP-005", "source_path": x.path, "message": message}));
    }
    out.info(&format!(
        "importing {} {} file{} ({:.1} MB)",
        sources.len(),
        format.name(),
        if sources.len() == 1 { "" } else { "s" },
        input_bytes as f64 / 1e6
    ));

    let mut writer = StoreWriter::create(&staging.dir).map_err(ImportError::from)?;
    let opts = DecodeOptions::full(s.max_document_bytes);
    let mut warnings: Vec<serde_json::Value> = Vec::new();
    let mut generated_ids = 0u64;
    let mut progress = out.progress("decoding files");
    let mut done = 0u64;
    // Files are decoded a round ahead on the other threads while the
    // documents of the round before are written: decoding and writing one
    // after the other left the two cores a quarter idle.
    std::thread::scope(|scope| -> Result<(), Error> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Decoded>(0);
        let sources = &sources;
        scope.spawn(move || {
            for chunk in rounds(sources, |s| s.size) {
                if tx.send(decode_round(chunk, opts)).is_err() {
                    // The writer stopped at an error.
                    return;
                }
            }
        });
        for decoded in rx {
            for (path, r) in decoded {
                let (docs, diags, generated) = r?;
                generated_ids += generated;
                for d in diags.iter().filter(|d| d.degrades()) {
                    warnings.push(json!({"source_path": path, "code": d.code, "pointer": d.pointer, "message": d.message}));
                }
                for mut doc in docs {
                    // Where it came from: the store is one Source holding the
                    // documents of many files.
                    doc.origin_path = Some(path.clone());
                    writer.push(doc).map_err(ImportError::from)?;
                }
                done += 1;
                progress.tick(done, Some(sources.len() as u64));
            }
        }
        Ok(())
    })?;
    progress.finish();
    let summary = writer.finish().map_err(ImportError::from)?;
    // Validate what was written before publishing it.
    let store = crate::store::StorylineLanceStore::open(&staging.dir).map_err(ImportError::from)?;
    let reader = store.reader().map_err(ImportError::from)?;
    for (t, want) in [
        (crate::table::Table::Documents, summary.trajectories),
        (crate::table::Table::Steps, summary.steps),
        (crate::table::Table::ToolCalls, summary.tool_calls),
    ] {
        let got = reader.count(t).map_err(ImportError::from)?;
        if got != want {
            return Err(ImportError::Store {
                code: "PC-STO-005",
                message: format!("{} has {got} rows, expected {want}", t.name()),
            }
            .into());
        }
    }
    // The full-text index travels with the store: derived data, rebuilt by
    // `find` in its cache when missing.
    // A store published to S3 goes without it: readers do not fetch it.
    let index_started = std::time::Instant::now();
    let mut fts_index = Value::Null;
    match crate::catalog::stores::probe_store(&staging.dir, ".").filter(|_| s.s3_target.is_none()) {
        Some(src) => match crate::find::prepare::build_store_index(&staging.dir, &src) {
            Ok((steps, text_bytes)) => {
                let secs = index_started.elapsed().as_secs_f64();
                fts_index = json!({
                    "tokenizer": crate::find::TOKENIZER_NAME,
                    "steps": steps,
                    "text_bytes": text_bytes,
                    "seconds": (secs * 1000.0).round() / 1000.0,
                });
            }
            Err(e) => warnings.push(json!({"code": "PC-FND-003", "message": format!("the full-text index was not built ({e}); `find` will build it on first use")})),
        },
        None if s.s3_target.is_some() => {}
        None => warnings.push(json!({"code": "PC-FND-003", "message": "the full-text index was not built (no CURRENT); `find` will build it on first use"})),
    }
    // Publish: one rename of the complete store. An interrupt waits for
    // it: emptying the staging directory while it is renamed would publish
    // a part of it.
    {
        let mut held = interrupt::hold();
        if std::fs::symlink_metadata(target).is_ok() {
            return Err(ImportError::TargetExists(target.display().to_string()).into());
        }
        crate::util::failpoint::hit("import-before-rename");
        std::fs::rename(&staging.dir, target)
            .map_err(|e| ImportError::Io(format!("cannot publish {}: {e}", target.display())))?;
        held.forget(&staging.dir);
    }
    crate::util::failpoint::hit("import-after-rename");
    let mut staging = staging;
    staging.armed = false;
    crate::store::current::sync_dir(&parent);
    drop(lock);
    let dataset_uri = match (remote, &s.s3_target) {
        (Some(remote), Some(uri)) => {
            out.info(&format!("publishing to {uri}"));
            remote.publish(target).map_err(publish_error)?;
            uri.to_string()
        }
        _ => target.display().to_string(),
    };
    for w in &warnings {
        out.warn(
            w["code"].as_str().unwrap_or_default(),
            format!(
                "{} {}",
                w.get("source_path").and_then(|v| v.as_str()).unwrap_or(""),
                w["message"].as_str().unwrap_or("")
            )
            .trim_start(),
        );
    }
    // Printed when they were found; reported with the others.
    warnings.extend(skipped_warnings);
    let elapsed = started.elapsed();
    out.info(&format!(
        "created {} ({} {}, {} steps) in {:.1}s, {:.1} MB/s",
        dataset_uri,
        summary.trajectories,
        if summary.trajectories == 1 {
            "trajectory"
        } else {
            "trajectories"
        },
        summary.steps,
        elapsed.as_secs_f64(),
        input_bytes as f64 / 1e6 / elapsed.as_secs_f64().max(1e-6)
    ));
    Ok(json!({
        "dataset_uri": dataset_uri,
        "format": format.name(),
        "sources": sources.iter().map(|s| s.source_path.clone()).collect::<Vec<_>>(),
        "imported_files": sources.len(),
        "skipped_files": skipped.len(),
        "skipped": skipped.iter().map(|x| json!({"path": x.path, "format": x.format.name()})).collect::<Vec<_>>(),
        "trajectories": summary.trajectories,
        "steps": summary.steps,
        "tool_calls": summary.tool_calls,
        "objects": summary.objects,
        "input_bytes": input_bytes,
        "generated_ids": generated_ids,
        "warnings": warnings,
        "generation": summary.generation,
        "fts_index": fts_index,
        "elapsed_ms": elapsed.as_millis() as u64,
    }))
}

fn publish_error(e: crate::store::publish::PublishError) -> Error {
    use crate::store::publish::PublishError as P;
    match e {
        P::Exists(t) => ImportError::TargetExists(t).into(),
        P::Busy { target, lock } => ImportError::BusyS3 { target, lock }.into(),
        P::S3(e) => CatalogError::S3(e).into(),
        P::Local(m) => ImportError::Store {
            code: "PC-STO-003",
            message: m,
        }
        .into(),
    }
}

/// Find the input files and their one format.
fn collect_input(s: &ImportOptions, spool_dir: &Path) -> Result<Input, Error> {
    let (root, single) = match &s.input {
        ImportInput::Stdin => {
            std::fs::create_dir_all(spool_dir).map_err(|e| ImportError::Io(e.to_string()))?;
            // The layout (one document, an array, or JSON Lines) is detected
            // from the content, so one name fits all.
            let file = spool_dir.join("stdin.json");
            let mut f = std::fs::File::create(&file).map_err(|e| ImportError::Io(e.to_string()))?;
            let mut limited = std::io::stdin().lock().take(s.max_input_bytes + 1);
            let n = std::io::copy(&mut limited, &mut f)
                .map_err(|e| ImportError::Io(format!("reading stdin: {e}")))?;
            if n > s.max_input_bytes {
                return Err(ImportError::TooLarge(s.max_input_bytes).into());
            }
            f.flush().map_err(|e| ImportError::Io(e.to_string()))?;
            (spool_dir.to_path_buf(), true)
        }
        ImportInput::Path(p) => {
            let meta = std::fs::metadata(p)
                .map_err(|e| ImportError::Io(format!("{}: {e}", p.display())))?;
            (p.clone(), meta.is_file())
        }
    };
    let limits = DiscoveryLimits {
        max_files: s.max_files,
        max_entries: s.max_files.saturating_mul(16),
        deadline: None,
    };
    let sources: Vec<Source> = if single && matches!(s.input, ImportInput::Path(_)) {
        // One file: discover its directory and keep that file.
        let dir = root.parent().unwrap_or(Path::new("/"));
        let name = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let d = discover(dir, limits, false)?;
        let found: Vec<Source> = d
            .sources
            .into_iter()
            .filter(|x| x.source_path == name)
            .collect();
        if found.is_empty() {
            return Err(FormatError::NotThisFormat {
                source_path: name,
                record: 1,
                expected: "trajectory",
            }
            .into());
        }
        found
    } else {
        discover(&root, limits, false)?.sources
    };
    if sources.is_empty() {
        return Err(ImportError::NoInput(root.display().to_string()).into());
    }
    for src in &sources {
        if src.kind == crate::catalog::SourceKind::Store {
            return Err(ImportError::StoreInput(src.source_path.clone()).into());
        }
        if src.status == SourceStatus::Error && src.format == SourceFormat::Unknown {
            // Import has no --errors: a file it cannot identify is its own
            // error, named after the input the user gave.
            let r = src.reason.clone();
            let stdin = s.input == ImportInput::Stdin;
            return Err(ImportError::Unreadable {
                input: if stdin {
                    "stdin".to_string()
                } else {
                    format!("`{}`", src.source_path)
                },
                source_path: (!stdin).then(|| src.source_path.clone()),
                reason_code: r.as_ref().map_or("PC-FMT-001", |r| r.code),
                reason: r.map_or_else(String::new, |r| r.message),
            }
            .into());
        }
    }
    let (format, sources, skipped) = match s.format {
        // An explicit format picks its files out of a mixed input; the
        // others are listed, not read.
        Some(f) => {
            let (kept, other): (Vec<Source>, Vec<Source>) =
                sources.into_iter().partition(|x| x.format == f);
            if kept.is_empty() {
                let first = &other[0];
                return Err(ImportError::WrongFormat {
                    file: first.source_path.clone(),
                    found: first.format.name(),
                    expected: f.name(),
                }
                .into());
            }
            let skipped: Vec<Skipped> = other
                .into_iter()
                .map(|x| Skipped {
                    path: x.source_path,
                    format: x.format,
                })
                .collect();
            (f, kept, skipped)
        }
        None => {
            let first = &sources[0];
            if let Some(other) = sources.iter().find(|x| x.format != first.format) {
                let (formats, choices) = format_counts(&sources);
                return Err(ImportError::MixedFormats(Box::new(MixedFormats {
                    first: first.source_path.clone(),
                    first_format: first.format.name(),
                    other: other.source_path.clone(),
                    other_format: other.format.name(),
                    formats,
                    choices,
                }))
                .into());
            }
            (first.format, sources, Vec::new())
        }
    };
    let total: u64 = sources.iter().map(|x| x.size).sum();
    if total > s.max_input_bytes {
        return Err(ImportError::TooLarge(s.max_input_bytes).into());
    }
    Ok(Input {
        sources,
        format,
        bytes: total,
        skipped,
    })
}

/// What `import` reads: files of one format, and the files of other
/// formats it leaves out under an explicit `--format`.
struct Input {
    sources: Vec<Source>,
    format: SourceFormat,
    bytes: u64,
    skipped: Vec<Skipped>,
}

/// A file of another format than the declared one.
struct Skipped {
    path: String,
    format: SourceFormat,
}

/// The formats of a mixed input with their file counts, most files first
/// (`3 atif files, 1 actf file`), and the `--format` choices that import
/// each part (`` `--format atif` or `--format actf` ``).
fn format_counts(sources: &[Source]) -> (String, String) {
    let mut counts: Vec<(&'static str, usize)> = Vec::new();
    for x in sources {
        let name = x.format.name();
        match counts.iter_mut().find(|(n, _)| *n == name) {
            Some((_, c)) => *c += 1,
            None => counts.push((name, 1)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let formats = counts
        .iter()
        .map(|(n, c)| format!("{c} {n} file{}", if *c == 1 { "" } else { "s" }))
        .collect::<Vec<_>>()
        .join(", ");
    let flags: Vec<String> = counts
        .iter()
        .map(|(n, _)| format!("`--format {n}`"))
        .collect();
    let choices = match flags.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => flags.join(""),
    };
    (formats, choices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_bound_files_and_bytes_and_keep_the_order() {
        let mb = 1 << 20;
        let sizes: Vec<u64> = vec![mb; 100];
        let r: Vec<usize> = rounds(&sizes, |s| *s).map(<[u64]>::len).collect();
        assert_eq!(r, [vec![8; 12], vec![4]].concat());
        let small: Vec<u64> = vec![10; 70];
        let r: Vec<usize> = rounds(&small, |s| *s).map(<[u64]>::len).collect();
        assert_eq!(r, vec![32, 32, 6]);
        // A file larger than a round is a round of its own.
        let big = vec![10, 100 * mb, 10, 10];
        let r: Vec<&[u64]> = rounds(&big, |s| *s).collect();
        assert_eq!(r, vec![&[10][..], &[100 * mb][..], &[10, 10][..]]);
        assert_eq!(rounds(&[] as &[u64], |s| *s).count(), 0);
    }
}
