//! Finding or building the full-text indexes a search needs.
//!
//! A Storyline store carries its own index (built at import, refreshed by
//! maintenance) in `_pchronicle/find-v1`, valid while its recorded
//! `snapshot_ref` equals the store's. Every other Source (exchange files, and
//! stores whose own index is missing or stale) is indexed in one per-Dataset
//! cache index under `$XDG_CACHE_HOME/pchronicle/find/`; a Source is
//! re-indexed when its `snapshot_ref` changes and dropped when it disappears.
//! When the cache cannot be written the index is built in memory for this
//! call. Writers of one cache index take turns through a file lock.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::exec::Searchable;
use crate::catalog::{Source, SourceStatus};
use crate::dataset::{Mounts, SourceProblem};
use crate::formats::SourceFormat;
use crate::fts::{self, FtsError, BUILD_COLUMNS, CALL_OUTPUT_COLUMN, INDEX_VERSION};
use crate::sql::SqlError;

/// Directory of a store's own index, relative to the store root.
pub const STORE_INDEX_DIR: &str = "_pchronicle/find-v1";

/// What an index covers, with the problems of the Sources it read
/// incompletely.
type IndexMeta = fts::IndexMeta<SourceProblem>;

/// How indexes may be obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildPolicy {
    /// Build or refresh what is missing (the default).
    Build,
    /// Only use indexes that are already current.
    ReuseOnly,
}

/// What preparation did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct PrepareReport {
    /// Sources (re)indexed now.
    pub indexed_sources: usize,
    /// Steps indexed now.
    pub indexed_steps: u64,
    /// Bytes of step text analysed now.
    pub indexed_text_bytes: u64,
    /// Seconds spent indexing.
    pub index_seconds: f64,
    /// Sources served by an index that was already current.
    pub reused_sources: usize,
    /// Where the Dataset cache index lives (`memory` when it could not be
    /// written to disk), if one was needed.
    pub cache: Option<String>,
    /// Problems of Sources the cached index read incompletely, reported
    /// again: (code, message).
    #[serde(skip)]
    pub replayed: Vec<(String, String)>,
}

/// The outcome: searchable indexes, or why full text is unavailable.
pub struct Prepared {
    /// Indexes to search.
    pub indexes: Vec<Searchable>,
    /// False when some searchable Source has no usable index.
    pub fts_available: bool,
    /// Why not.
    pub reason: Option<String>,
    /// What was done.
    pub report: PrepareReport,
    /// Warnings: (code, message).
    pub warnings: Vec<(String, String)>,
}

/// True for Sources that contribute steps.
pub fn has_steps(s: &Source) -> bool {
    if s.format == SourceFormat::Unknown {
        return false;
    }
    s.status != SourceStatus::Error
}

/// The snapshot_ref text an index records for a Source.
fn ref_text(s: &Source) -> String {
    s.snapshot_ref.to_string()
}

/// Open a store's own index if it is current for `s`.
pub fn open_store_index(s: &Source) -> Option<Searchable> {
    if s.abs_path.as_os_str().is_empty() {
        // A store on S3: its own index is not fetched; the Dataset's cache
        // index serves it.
        return None;
    }
    let dir = s.abs_path.join(STORE_INDEX_DIR);
    let meta = IndexMeta::read(&dir)?;
    if meta.sources.get(".") != Some(&ref_text(s)) {
        return None;
    }
    let index = fts::Index::open(&dir).ok()?.searcher().ok()?;
    Some(Searchable {
        index,
        src_override: Some(s.source_path.clone()),
        sources: BTreeSet::from([s.source_path.clone()]),
    })
}

/// Prepare indexes for every step-bearing Source of mount `dataset`, with
/// the Dataset's cache index in `cache` (see [`super::search::cache_dir`]; `None`
/// indexes in memory). Fails only when reading a Source fails the command
/// (`--errors strict`, or a Source changed while it was read).
pub fn prepare(
    mounts: &Mounts,
    dataset: &str,
    cache: Option<&Path>,
    policy: BuildPolicy,
    progress: &dyn Fn(&str),
) -> Result<Prepared, SqlError> {
    let mut out = Prepared {
        indexes: Vec::new(),
        fts_available: true,
        reason: None,
        report: PrepareReport::default(),
        warnings: Vec::new(),
    };
    let Some(mount) = mounts.mounts().iter().find(|m| m.name == dataset) else {
        return Ok(out);
    };
    let mut rest: Vec<&Source> = Vec::new();
    for s in &mount.snapshot.sources {
        if !has_steps(s) {
            if s.status == SourceStatus::Error {
                out.warnings.push((
                    s.reason
                        .as_ref()
                        .map_or("PC-FMT-005", |r| r.code)
                        .to_string(),
                    format!("{} is not readable and is not searched", s.source_path),
                ));
            }
            continue;
        }
        if s.format == SourceFormat::StorylineLance {
            if let Some(ix) = open_store_index(s) {
                out.report.reused_sources += 1;
                out.indexes.push(ix);
                continue;
            }
        }
        rest.push(s);
    }
    if rest.is_empty() {
        return Ok(out);
    }
    let dir = cache;
    let disk = dir.map(|d| cached(mounts, dataset, d, &rest, policy, progress));
    match disk {
        Some(Err(CacheError::Source(e))) => return Err(e),
        Some(Ok((ix, rep))) => {
            out.warnings.extend(rep.replayed.iter().cloned());
            out.report.reused_sources += rest.len() - rep.indexed_sources;
            out.report.indexed_sources += rep.indexed_sources;
            out.report.indexed_steps += rep.indexed_steps;
            out.report.indexed_text_bytes += rep.indexed_text_bytes;
            out.report.index_seconds += rep.index_seconds;
            out.report.cache = dir.map(|d| d.display().to_string());
            out.indexes.push(ix);
        }
        other if policy == BuildPolicy::ReuseOnly => {
            let n = match other {
                Some(Err(CacheError::Stale(n))) => n,
                _ => rest.len(),
            };
            out.fts_available = false;
            out.reason = Some(format!(
                "{n} Source(s) have no current full-text index and building one was not allowed (--no-build-index)"
            ));
        }
        other => {
            if let Some(Err(e)) = &other {
                out.warnings.push((
                    "PC-FND-003".into(),
                    format!("the index cache could not be used ({e}); indexing in memory for this search"),
                ));
            }
            match in_memory(mounts, dataset, &rest, progress) {
                Ok((ix, rep)) => {
                    out.report.indexed_sources += rep.indexed_sources;
                    out.report.indexed_steps += rep.indexed_steps;
                    out.report.indexed_text_bytes += rep.indexed_text_bytes;
                    out.report.index_seconds += rep.index_seconds;
                    out.report.cache = Some("memory".into());
                    out.indexes.push(ix);
                }
                Err(CacheError::Source(e)) => return Err(e),
                Err(e) => {
                    out.fts_available = false;
                    out.reason = Some(format!("the full-text index could not be built: {e}"));
                }
            }
        }
    }
    Ok(out)
}

#[derive(Debug, thiserror::Error)]
enum CacheError {
    #[error("{0} Source(s) need indexing")]
    Stale(usize),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Index(#[from] FtsError),
    #[error("{0}")]
    Scan(String),
    /// Reading a Source failed (strict mode, or a Source that changed):
    /// the command fails with that error.
    #[error("{0}")]
    Source(SqlError),
}

impl From<crate::store::StoreError> for CacheError {
    fn from(e: crate::store::StoreError) -> Self {
        CacheError::Scan(e.to_string())
    }
}

impl From<SqlError> for CacheError {
    fn from(e: SqlError) -> Self {
        CacheError::Source(e)
    }
}

fn lock(dir: &Path) -> Result<std::fs::File, CacheError> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(".lock"))?;
    f.lock()?;
    Ok(f)
}

fn cached(
    mounts: &Mounts,
    dataset: &str,
    dir: &Path,
    sources: &[&Source],
    policy: BuildPolicy,
    progress: &dyn Fn(&str),
) -> Result<(Searchable, PrepareReport), CacheError> {
    let mut report = PrepareReport::default();
    let want: BTreeMap<String, String> = sources
        .iter()
        .map(|s| (s.source_path.clone(), ref_text(s)))
        .collect();
    // Sources indexed by this call (their problems were reported as read).
    let mut fresh_sources: BTreeSet<String> = BTreeSet::new();
    let current = IndexMeta::read(dir);
    let up_to_date = current.as_ref().is_some_and(|m| m.sources == want);
    // Reuse-only: an index that covers every wanted Source will do, even if
    // it still holds Sources that are gone (their hits are ignored).
    let covers = current
        .as_ref()
        .is_some_and(|m| want.iter().all(|(k, v)| m.sources.get(k) == Some(v)));
    if !up_to_date && !(policy == BuildPolicy::ReuseOnly && covers) {
        let stale = current.as_ref().map_or(want.len(), |m| {
            want.iter()
                .filter(|(k, v)| m.sources.get(*k) != Some(*v))
                .count()
                + m.sources.keys().filter(|k| !want.contains_key(*k)).count()
        });
        if policy == BuildPolicy::ReuseOnly {
            return Err(CacheError::Stale(stale.max(1)));
        }
        std::fs::create_dir_all(dir)?;
        let _guard = lock(dir)?;
        // Another process may have refreshed it while we waited.
        let mut meta = IndexMeta::read(dir).unwrap_or_default();
        let fresh = meta.version != INDEX_VERSION;
        if fresh {
            wipe(dir)?;
            meta = IndexMeta::current();
        }
        if meta.sources != want {
            let idx = if fresh {
                fts::Index::create(dir)?
            } else {
                fts::Index::open_to_write(dir)?
            };
            let started = Instant::now();
            let builder = idx.writer(rayon::current_num_threads())?;
            for (k, v) in &meta.sources {
                if want.get(k) != Some(v) {
                    builder.delete_source(k);
                }
            }
            let todo: BTreeSet<&str> = want
                .iter()
                .filter(|(k, v)| meta.sources.get(*k) != Some(*v))
                .map(|(k, _)| k.as_str())
                .collect();
            index_sources(mounts, dataset, &builder, &todo, progress)?;
            let (steps, bytes) = builder.finish()?;
            meta.problems
                .retain(|k, _| want.contains_key(k) && !todo.contains(k.as_str()));
            for p in mounts.take_problems() {
                if todo.contains(p.source_path.as_str()) {
                    meta.problems.insert(p.source_path.clone(), p);
                }
            }
            fresh_sources.extend(todo.iter().map(ToString::to_string));
            report.indexed_sources = todo.len();
            report.indexed_steps = steps;
            report.indexed_text_bytes = bytes;
            report.index_seconds = started.elapsed().as_secs_f64();
            meta.steps = meta.steps.saturating_add(steps);
            meta.text_bytes = meta.text_bytes.saturating_add(bytes);
            meta.sources = want.clone();
            meta.write(dir)?;
        }
    }
    // A Source the index holds from an incomplete read says so again,
    // whatever is cached.
    if let Some(meta) = IndexMeta::read(dir) {
        for (path, p) in &meta.problems {
            if !want.contains_key(path) || fresh_sources.contains(path) {
                continue;
            }
            if mounts.strict() {
                let e = crate::catalog::CatalogError::StrictSource {
                    source_path: p.source_path.clone(),
                    status: if p.status == "error" {
                        "error"
                    } else {
                        "degraded"
                    },
                    reason_code: crate::util::text::leak_code(&p.code),
                    reason: p.detail.clone(),
                };
                return Err(CacheError::Source(SqlError::Source {
                    code: e.code(),
                    message: e.to_string(),
                }));
            }
            report.replayed.push((p.code.clone(), p.message.clone()));
        }
    }
    Ok((
        Searchable {
            index: fts::Index::open(dir)?.searcher()?,
            src_override: None,
            sources: want.into_keys().collect(),
        },
        report,
    ))
}

fn wipe(dir: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_name() == ".lock" {
            continue;
        }
        let p = e.path();
        if e.file_type()?.is_dir() {
            std::fs::remove_dir_all(p)?;
        } else {
            std::fs::remove_file(p)?;
        }
    }
    Ok(())
}

fn in_memory(
    mounts: &Mounts,
    dataset: &str,
    sources: &[&Source],
    progress: &dyn Fn(&str),
) -> Result<(Searchable, PrepareReport), CacheError> {
    let idx = fts::Index::create_in_memory();
    let started = Instant::now();
    let builder = idx.writer(rayon::current_num_threads())?;
    let todo: BTreeSet<&str> = sources.iter().map(|s| s.source_path.as_str()).collect();
    index_sources(mounts, dataset, &builder, &todo, progress)?;
    let (steps, bytes) = builder.finish()?;
    Ok((
        Searchable {
            index: idx.searcher()?,
            src_override: None,
            sources: todo.iter().map(std::string::ToString::to_string).collect(),
        },
        PrepareReport {
            indexed_sources: todo.len(),
            indexed_steps: steps,
            indexed_text_bytes: bytes,
            index_seconds: started.elapsed().as_secs_f64(),
            ..PrepareReport::default()
        },
    ))
}

fn index_sources(
    mounts: &Mounts,
    dataset: &str,
    builder: &fts::Writer,
    todo: &BTreeSet<&str>,
    progress: &dyn Fn(&str),
) -> Result<(), CacheError> {
    if todo.is_empty() {
        return Ok(());
    }
    progress(&format!(
        "indexing {} Source{} for full-text search…",
        todo.len(),
        if todo.len() == 1 { "" } else { "s" }
    ));
    let empty = arrow::array::RecordBatch::new_empty(std::sync::Arc::new(
        arrow::datatypes::Schema::empty(),
    ));
    let failed = std::sync::Mutex::new(None::<String>);
    mounts.scan_steps_with_call_output(
        dataset,
        &BUILD_COLUMNS,
        CALL_OUTPUT_COLUMN,
        &|s| todo.contains(s.source_path.as_str()),
        &|b| {
            if let Err(e) = builder.add_batch(&b) {
                if let Ok(mut g) = failed.lock() {
                    g.get_or_insert(e.to_string());
                }
            }
            Ok(empty.clone())
        },
    )?;
    if let Some(e) = failed.into_inner().ok().flatten() {
        return Err(CacheError::Scan(e));
    }
    Ok(())
}

/// Build a store's own index for its current snapshot (import and
/// maintenance call this on a store they just published or are about to).
pub fn build_store_index(store_root: &Path, source: &Source) -> Result<(u64, u64), String> {
    let dir: PathBuf = store_root.join(STORE_INDEX_DIR);
    let tmp = store_root.join(format!("{STORE_INDEX_DIR}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
    crate::util::interrupt::remove_on_interrupt(&tmp);
    let result = (|| -> Result<(u64, u64), CacheError> {
        let builder = fts::Index::create(&tmp)?.writer(rayon::current_num_threads())?;
        let store = crate::store::StorylineLanceStore::open(store_root)
            .map_err(|e| CacheError::Scan(e.to_string()))?;
        let reader = store
            .reader()
            .map_err(|e| CacheError::Scan(e.to_string()))?;
        let stored: Vec<&str> = BUILD_COLUMNS[1..].to_vec();
        reader.scan_steps_with_call_output(&stored, |b| -> Result<(), CacheError> {
            let n = b.num_rows();
            let mut cols: Vec<arrow::array::ArrayRef> = vec![std::sync::Arc::new(
                arrow::array::StringArray::from_iter_values(std::iter::repeat_n("", n)),
            )];
            for c in stored.iter().chain([&CALL_OUTPUT_COLUMN]) {
                cols.push(
                    b.column_by_name(c)
                        .cloned()
                        .ok_or_else(|| CacheError::Scan(format!("store column {c} missing")))?,
                );
            }
            let schema = std::sync::Arc::new(arrow::datatypes::Schema::new(
                std::iter::once(arrow::datatypes::Field::new(
                    "source_path",
                    arrow::datatypes::DataType::Utf8,
                    false,
                ))
                .chain(stored.iter().chain([&CALL_OUTPUT_COLUMN]).map(|c| {
                    let f = b
                        .schema()
                        .field_with_name(c)
                        .cloned()
                        .expect("checked above");
                    f
                }))
                .collect::<Vec<_>>(),
            ));
            let batch = arrow::array::RecordBatch::try_new(schema, cols)
                .map_err(|e| CacheError::Scan(e.to_string()))?;
            builder.add_batch(&batch)?;
            Ok(())
        })?;
        let (steps, bytes) = builder.finish()?;
        IndexMeta {
            sources: BTreeMap::from([(".".to_string(), ref_text(source))]),
            steps,
            text_bytes: bytes,
            ..IndexMeta::current()
        }
        .write(&tmp)?;
        Ok((steps, bytes))
    })();
    crate::util::interrupt::settle(&tmp, || match result {
        Ok(r) => {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::rename(&tmp, &dir).map_err(|e| e.to_string())?;
            Ok(r)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(e.to_string())
        }
    })
}
