//! Reading a pinned Source: open it, check its fingerprint before and after,
//! decode it, and count what it holds.

use std::collections::HashSet;
use std::fs::File;

use super::discover::file_ref;
use super::snapshot::SnapshotRef;
use super::source::{Source, SourceKind, SourceStatus, StatusReason};
use super::CatalogError;
use crate::formats::model::Storyline;
use crate::formats::{self, DecodeCtx, DecodeOptions, Diagnostic, FormatError};
use crate::util::stats;

/// Counts and problems of one Source read.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SourceCounts {
    /// Distinct run ids.
    pub runs: u64,
    /// Trajectories (Storyline documents).
    pub trajectories: u64,
    /// Steps (turns).
    pub steps: u64,
    /// Tool calls.
    pub tool_calls: u64,
}

impl SourceCounts {
    /// Add another Source's counts.
    pub fn add(&mut self, o: &SourceCounts) {
        self.runs += o.runs;
        self.trajectories += o.trajectories;
        self.steps += o.steps;
        self.tool_calls += o.tool_calls;
    }
}

/// The outcome of reading one Source.
#[derive(Debug, Clone, Default)]
pub struct SourceRead {
    /// Counts.
    pub counts: SourceCounts,
    /// Problems that did not stop the read.
    pub diagnostics: Vec<Diagnostic>,
    /// Ids generated Source-locally.
    pub generated_ids: u64,
    /// For an events store: what it holds and how fresh it is.
    pub events: Option<EventsSummary>,
}

/// Contents and freshness of an events store.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct EventsSummary {
    /// Rows stored (duplicates included).
    pub stored_rows: u64,
    /// Distinct events.
    pub events: u64,
    /// Rows that repeat an earlier event id.
    pub duplicates: u64,
    /// Distinct sessions.
    pub sessions: u64,
    /// Time of the newest event (RFC 3339).
    pub newest_event_at: Option<String>,
    /// Seconds from the newest event to now.
    pub lag_seconds: Option<f64>,
    /// Events a Gateway has made durable in its write-ahead log (in the
    /// default state directory beside the store) but not yet appended.
    pub wal_pending_events: Option<u64>,
}

/// What reading a Source completely found.
#[derive(Debug)]
pub struct Assessment {
    /// Ready, degraded (read, with problems) or error (not readable).
    pub status: SourceStatus,
    /// Why it is not ready.
    pub reason: Option<StatusReason>,
    /// What was read.
    pub read: SourceRead,
    /// False when the contents were not counted (a Source that failed
    /// discovery).
    pub counted: bool,
}

/// Read `s` completely and say what state it is in: the one rule `status`,
/// `ls` and `--errors strict` share. Fails only when the command must
/// (the Source changed while it was read).
pub fn assess(s: &Source, opts: DecodeOptions) -> Result<Assessment, CatalogError> {
    // Sources that failed sniffing are decoded again when their format is
    // known, for a precise error position.
    if s.status == SourceStatus::Error && s.format == formats::SourceFormat::Unknown {
        return Ok(Assessment {
            status: s.status,
            reason: s.reason.clone(),
            read: SourceRead::default(),
            counted: false,
        });
    }
    let read = if s.kind == SourceKind::Store && s.format != formats::SourceFormat::EventsLance {
        count_store(s)
    } else {
        read_source(s, opts, &mut |_| {})
    };
    match read {
        Ok(read) => {
            let (status, reason) = match read.diagnostics.iter().find(|d| d.degrades()) {
                Some(d) => {
                    let more = read.diagnostics.iter().filter(|d| d.degrades()).count();
                    let suffix = if more > 1 {
                        format!(" (+{} more)", more - 1)
                    } else {
                        String::new()
                    };
                    (
                        SourceStatus::Degraded,
                        Some(StatusReason::new(
                            d.code,
                            format!("{}: {}{suffix}", d.pointer, d.message),
                        )),
                    )
                }
                None => (SourceStatus::Ready, None),
            };
            Ok(Assessment {
                status,
                reason,
                read,
                counted: true,
            })
        }
        Err(ReadFailure::Fatal(e)) => Err(e),
        Err(ReadFailure::Source(e)) => Ok(Assessment {
            status: SourceStatus::Error,
            reason: Some(StatusReason::new(e.code(), e.detail())),
            read: SourceRead::default(),
            counted: true,
        }),
    }
}

/// Read every exchange file (local or S3) of `sources` completely, the way
/// `status` does, and set its status: `ls` then says of a file what
/// `status` says (a truncated or undecodable file is `error` for both).
/// Stores keep the status discovery gave them (their pointer and tables
/// were checked when they were opened). What was found is cached per file
/// version (`snapshot_ref`), so listing unchanged files again reads nothing.
pub fn check_files(
    dataset: &super::DatasetUri,
    sources: &mut [Source],
) -> Result<(), CatalogError> {
    use rayon::prelude::*;
    let opts = DecodeOptions {
        max_document_bytes: formats::DEFAULT_MAX_DOCUMENT_BYTES,
        projection: formats::atif::Projection::Skeleton,
    };
    let cache_file = checks_cache_file(dataset);
    let cached: std::collections::HashMap<String, CachedCheck> = cache_file
        .as_deref()
        .and_then(|f| std::fs::read(f).ok())
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let remote = sources.iter().any(|s| s.object.is_some());
    let found: Vec<Result<Option<CachedCheck>, CatalogError>> =
        crate::util::rt::on_pool(remote, || {
            sources
                .par_iter()
                .map(|s| {
                    if s.kind != SourceKind::File || s.status == SourceStatus::Error {
                        return Ok(None);
                    }
                    let at = s.snapshot_ref.to_string();
                    if let Some(c) = cached.get(&s.source_path).filter(|c| c.snapshot_ref == at) {
                        return Ok(Some(c.clone()));
                    }
                    let a = assess(s, opts)?;
                    Ok(Some(CachedCheck {
                        snapshot_ref: at,
                        status: a.status,
                        code: a.reason.as_ref().map(|r| r.code.to_string()),
                        message: a.reason.map(|r| r.message),
                    }))
                })
                .collect()
        });
    let mut fresh = std::collections::HashMap::new();
    for (s, r) in sources.iter_mut().zip(found) {
        if let Some(c) = r? {
            s.status = c.status;
            s.reason = c.code.as_deref().map(|code| {
                StatusReason::new(
                    crate::util::text::leak_code(code),
                    c.message.clone().unwrap_or_default(),
                )
            });
            fresh.insert(s.source_path.clone(), c);
        }
    }
    // Best effort: a cache that cannot be written is skipped.
    if let (Some(file), true) = (cache_file, fresh != cached) {
        if let Some(dir) = file.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Ok(body) = serde_json::to_vec(&fresh) {
            let _ = crate::util::fs::write_atomic(&file, &body);
        }
    }
    Ok(())
}

/// What reading one file version found.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct CachedCheck {
    snapshot_ref: String,
    status: SourceStatus,
    code: Option<String>,
    message: Option<String>,
}

const CHECKS_CACHE_VERSION: u32 = 1;

fn checks_cache_file(dataset: &super::DatasetUri) -> Option<std::path::PathBuf> {
    let identity = match dataset.s3() {
        Some(u) => crate::s3::cache_identity(u),
        None => dataset.to_string(),
    };
    let key = blake3::hash(identity.as_bytes()).to_hex();
    Some(
        crate::util::path::cache_base()?
            .join("checks")
            .join(format!(
                "v{CHECKS_CACHE_VERSION}-{}.json",
                &key.as_str()[..32]
            )),
    )
}

/// Why a read did not complete.
#[derive(Debug)]
pub enum ReadFailure {
    /// The Source itself is bad: mark it `error` (or fail under strict).
    Source(FormatError),
    /// The command must fail (e.g. the Source changed while read).
    Fatal(CatalogError),
}

/// Read `src`, passing every document to `sink`.
pub fn read_source(
    src: &Source,
    opts: DecodeOptions,
    sink: &mut dyn FnMut(&Storyline),
) -> Result<SourceRead, ReadFailure> {
    read_source_selected(src, opts, &mut |_| true, &mut |d, _| {
        sink(&d);
        true
    })
}

/// Like [`read_source`], with a selection and a way to stop. `keep` sees
/// each document once, in reading order, before `sink` gets it with its
/// answer; reading stops when `sink` returns false (a store at once, a file
/// at its end, handing out nothing more). In a store, `keep` sees the
/// document as its `runs` row gives it (no steps), and a document it
/// refuses is not built: `sink` gets that row alone. A file is decoded
/// whole, so there `keep` sees full documents. Counts are those of what was
/// built.
pub fn read_source_selected(
    src: &Source,
    opts: DecodeOptions,
    keep: &mut dyn FnMut(&Storyline) -> bool,
    sink: &mut dyn FnMut(Storyline, bool) -> bool,
) -> Result<SourceRead, ReadFailure> {
    if src.kind == SourceKind::Store && src.format != formats::SourceFormat::EventsLance {
        return read_store(src, keep, sink);
    }
    let mut going = true;
    let sink = &mut |d: Storyline| {
        if going {
            let kept = keep(&d);
            going = sink(d, kept);
        }
    };
    if src.format == formats::SourceFormat::EventsLance {
        return read_events(src, sink);
    }
    read_file(src, opts, sink)
}

/// Decode a file Source (local or S3 object), handing each document over
/// as it is built, so a caller may keep it without a copy. Stores and
/// events stores are not files: read them with [`read_source`].
pub fn read_file(
    src: &Source,
    opts: DecodeOptions,
    sink: &mut dyn FnMut(Storyline),
) -> Result<SourceRead, ReadFailure> {
    if src.kind == SourceKind::Store || src.format == formats::SourceFormat::EventsLance {
        return Err(ReadFailure::Source(FormatError::NotReadable {
            source_path: src.source_path.clone(),
            what: "store (not a file)",
        }));
    }
    if let Some(object) = &src.object {
        return read_object(src, object, opts, sink);
    }
    let changed = |after: &SnapshotRef| {
        ReadFailure::Fatal(CatalogError::ChangedDuringRead {
            source_path: src.source_path.clone(),
            before: src.snapshot_ref.to_string(),
            after: after.to_string(),
        })
    };
    let io = |e: std::io::Error| {
        ReadFailure::Source(FormatError::Io {
            source_path: src.source_path.clone(),
            message: e.to_string(),
        })
    };
    let file = File::open(&src.abs_path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            ReadFailure::Fatal(CatalogError::ChangedDuringRead {
                source_path: src.source_path.clone(),
                before: src.snapshot_ref.to_string(),
                after: "deleted".into(),
            })
        } else {
            io(e)
        }
    })?;
    let before = file_ref(&file.metadata().map_err(io)?);
    if before != src.snapshot_ref {
        return Err(changed(&before));
    }
    let check = file.try_clone().map_err(io)?;
    let len = file.metadata().ok().map(|m| m.len());
    stats::add(stats::Counter::FilesOpened, 1);
    stats::add(stats::Counter::SourcesRead, 1);
    let mut tally = Tally::new(src);
    let result = tally.decode(stats::CountingReader(file), len, src, opts, sink);
    // Whatever the outcome, a changed file means nothing read from it counts.
    let after_fd = file_ref(&check.metadata().map_err(io)?);
    let after_path = std::fs::metadata(&src.abs_path).map(|m| file_ref(&m));
    if after_fd != src.snapshot_ref {
        return Err(changed(&after_fd));
    }
    match after_path {
        Ok(p) if p != src.snapshot_ref => return Err(changed(&p)),
        Err(_) => {
            return Err(ReadFailure::Fatal(CatalogError::ChangedDuringRead {
                source_path: src.source_path.clone(),
                before: src.snapshot_ref.to_string(),
                after: "deleted".into(),
            }))
        }
        _ => {}
    }
    result.map_err(|e| ReadFailure::Source(with_path(e, &src.source_path)))?;
    Ok(tally.finish())
}

/// Read an S3 Source: ranged reads, each conditional on the pinned version
/// or ETag, so an object replaced or deleted mid-read fails the command.
fn read_object(
    src: &Source,
    object: &super::source::RemoteObject,
    opts: DecodeOptions,
    sink: &mut dyn FnMut(Storyline),
) -> Result<SourceRead, ReadFailure> {
    let client = crate::s3::client().map_err(|e| ReadFailure::Fatal(e.into()))?;
    let mut reader = crate::s3::ObjectReader::new(
        client,
        &object.bucket,
        &object.key,
        object.pin.clone(),
        src.size,
    );
    stats::add(stats::Counter::SourcesRead, 1);
    let mut tally = Tally::new(src);
    let result = tally.decode(&mut reader, Some(src.size), src, opts, sink);
    if let Some(e) = reader.failure.take() {
        return Err(match e {
            crate::s3::S3Error::Changed { .. } | crate::s3::S3Error::Gone { .. } => {
                ReadFailure::Fatal(CatalogError::ChangedDuringRead {
                    source_path: src.source_path.clone(),
                    before: src.snapshot_ref.to_string(),
                    after: if matches!(e, crate::s3::S3Error::Gone { .. }) {
                        "deleted".into()
                    } else {
                        "a different object".into()
                    },
                })
            }
            other => ReadFailure::Source(FormatError::Io {
                source_path: src.source_path.clone(),
                message: format!("[{}] {other}", other.code()),
            }),
        });
    }
    result.map_err(|e| ReadFailure::Source(with_path(e, &src.source_path)))?;
    Ok(tally.finish())
}

/// Counts what a decode passes on, with duplicate document ids.
struct Tally {
    ctx: DecodeCtx,
    counts: SourceCounts,
    runs: HashSet<String>,
    doc_ids: HashSet<String>,
    dup_docs: Vec<String>,
}

impl Tally {
    fn new(src: &Source) -> Self {
        Tally {
            ctx: DecodeCtx::new(src.source_path.clone()),
            counts: SourceCounts::default(),
            runs: HashSet::new(),
            doc_ids: HashSet::new(),
            dup_docs: Vec::new(),
        }
    }

    fn decode<R: std::io::Read>(
        &mut self,
        reader: R,
        len: Option<u64>,
        src: &Source,
        opts: DecodeOptions,
        sink: &mut dyn FnMut(Storyline),
    ) -> Result<(), FormatError> {
        let Tally {
            ctx,
            counts,
            runs,
            doc_ids,
            dup_docs,
        } = self;
        formats::decode_reader(
            reader,
            len,
            src.format,
            src.openai_shape,
            src.container.unwrap_or(formats::Container::Object),
            opts,
            ctx,
            &mut |doc: Storyline| {
                counts.trajectories += 1;
                counts.steps += doc.turns.len() as u64;
                counts.tool_calls += doc.tool_call_count() as u64;
                if !runs.contains(doc.run_id()) {
                    runs.insert(doc.run_id().to_string());
                }
                if !doc_ids.insert(doc.document_id().to_string()) {
                    dup_docs.push(doc.document_id().to_string());
                }
                sink(doc);
            },
        )
    }

    fn finish(mut self) -> SourceRead {
        for d in self.dup_docs.iter().take(10) {
            self.ctx.diag(
                Diagnostic::DUPLICATE_ID,
                d.clone(),
                format!("document id `{d}` appears more than once in this Source"),
            );
        }
        self.counts.runs = self.runs.len() as u64;
        SourceRead {
            counts: self.counts,
            diagnostics: self.ctx.diagnostics,
            generated_ids: self.ctx.generated_ids,
            events: None,
        }
    }
}

/// Fill in the Source path of errors raised before it was known.
fn with_path(e: FormatError, path: &str) -> FormatError {
    match e {
        FormatError::InvalidJson {
            source_path,
            line,
            column,
            message,
        } if source_path.is_empty() => FormatError::InvalidJson {
            source_path: path.into(),
            line,
            column,
            message,
        },
        other => other,
    }
}

/// Open a store Source at the snapshot discovery pinned.
pub fn open_store(src: &Source) -> Result<crate::store::StorylineLanceStore, ReadFailure> {
    stats::add(stats::Counter::SourcesRead, 1);
    if let Some(object) = &src.object {
        let (store, _) = crate::store::StorylineLanceStore::open_s3(&object.bucket, &object.key)
            .map_err(|e| {
                ReadFailure::Source(FormatError::InvalidCurrent {
                    source_path: src.source_path.clone(),
                    message: e.to_string(),
                })
            })?;
        return pinned(src, store);
    }
    if src.abs_path.as_os_str().is_empty() {
        // A store listed under an S3 prefix but not readable: never resolved
        // against the working directory.
        return Err(ReadFailure::Source(FormatError::NotReadable {
            source_path: src.source_path.clone(),
            what: "S3 store (PC-S3-019)",
        }));
    }
    if src.format != formats::SourceFormat::StorylineLance {
        return Err(ReadFailure::Source(FormatError::NotReadable {
            source_path: src.source_path.clone(),
            what: "events Lance store",
        }));
    }
    let store = crate::store::StorylineLanceStore::open(&src.abs_path).map_err(|e| {
        ReadFailure::Source(FormatError::InvalidCurrent {
            source_path: src.source_path.clone(),
            message: e.to_string(),
        })
    })?;
    pinned(src, store)
}

/// The store, if its `CURRENT` still names the snapshot discovery pinned.
fn pinned(
    src: &Source,
    store: crate::store::StorylineLanceStore,
) -> Result<crate::store::StorylineLanceStore, ReadFailure> {
    let now = super::stores::store_ref(store.current());
    if now != src.snapshot_ref {
        return Err(ReadFailure::Fatal(CatalogError::ChangedDuringRead {
            source_path: src.source_path.clone(),
            before: src.snapshot_ref.to_string(),
            after: now.to_string(),
        }));
    }
    Ok(store)
}

/// A store that failed while read: the Source is bad (skipped in report
/// mode), the command goes on.
pub fn store_failure(src: &Source, e: &crate::store::StoreError) -> ReadFailure {
    ReadFailure::Source(FormatError::Io {
        source_path: src.source_path.clone(),
        message: format!("[{}] {e}", e.code()),
    })
}

/// Where the documents of each file end in a Source's reading order: the
/// position (0-based, counting every document handed out by
/// [`read_source`]) of the last document of each `origin_path`. Only a
/// store holds documents of several files; for any other Source, `None`
/// (they all come from the Source itself).
pub fn origin_ends(
    src: &Source,
) -> Result<Option<std::collections::HashMap<Option<String>, u64>>, ReadFailure> {
    if src.kind != SourceKind::Store || src.format == formats::SourceFormat::EventsLance {
        return Ok(None);
    }
    let store = open_store(src)?;
    let reader = store.reader().map_err(|e| store_failure(src, &e))?;
    reader
        .origin_ends()
        .map(Some)
        .map_err(|e| store_failure(src, &e))
}

/// The counts of a store from its tables, without building its documents
/// (which [`read_store`] does; see [`crate::store::StoreReader::tally`]).
fn count_store(src: &Source) -> Result<SourceRead, ReadFailure> {
    let store = open_store(src)?;
    let reader = store.reader().map_err(|e| store_failure(src, &e))?;
    let t = reader.tally().map_err(|e| store_failure(src, &e))?;
    Ok(SourceRead {
        counts: SourceCounts {
            runs: t.runs,
            trajectories: t.trajectories,
            steps: t.steps,
            tool_calls: t.tool_calls,
        },
        diagnostics: Vec::new(),
        generated_ids: 0,
        events: None,
    })
}

fn read_store(
    src: &Source,
    keep: &mut dyn FnMut(&Storyline) -> bool,
    sink: &mut dyn FnMut(Storyline, bool) -> bool,
) -> Result<SourceRead, ReadFailure> {
    /// Why reading the documents ended early.
    enum Ended {
        Failed(crate::store::StoreError),
        Stopped,
    }
    impl From<crate::store::StoreError> for Ended {
        fn from(e: crate::store::StoreError) -> Self {
            Ended::Failed(e)
        }
    }
    let store = open_store(src)?;
    let reader = store.reader().map_err(|e| store_failure(src, &e))?;
    let mut counts = SourceCounts::default();
    // A Run of a store is a run id of one of the files it was imported from.
    let mut runs: HashSet<(Option<String>, String)> = HashSet::new();
    let read = reader.documents_selected(keep, |d, kept| -> Result<(), Ended> {
        counts.trajectories += 1;
        counts.steps += d.turns.len() as u64;
        counts.tool_calls += d.tool_call_count() as u64;
        runs.insert((d.origin_path.clone(), d.run_id().to_string()));
        if sink(d, kept) {
            Ok(())
        } else {
            Err(Ended::Stopped)
        }
    });
    match read {
        Ok(()) | Err(Ended::Stopped) => {}
        Err(Ended::Failed(e)) => return Err(store_failure(src, &e)),
    }
    counts.runs = runs.len() as u64;
    Ok(SourceRead {
        counts,
        diagnostics: Vec::new(),
        generated_ids: 0,
        events: None,
    })
}

/// Where the events table of `src` is and the version discovery pinned.
pub(super) fn events_table(src: &Source) -> Result<(String, u64), ReadFailure> {
    let path = match &src.object {
        Some(o) => format!("s3://{}/{}", o.bucket, o.key.trim_end_matches('/')),
        None if src.abs_path.as_os_str().is_empty() => {
            return Err(ReadFailure::Source(FormatError::NotReadable {
                source_path: src.source_path.clone(),
                what: "events store on S3 (PC-S3-019)",
            }))
        }
        None => src.abs_path.to_string_lossy().into_owned(),
    };
    let SnapshotRef::Lance { version } = src.snapshot_ref else {
        return Err(ReadFailure::Source(FormatError::NotReadable {
            source_path: src.source_path.clone(),
            what: "events store without a version",
        }));
    };
    if src.status == super::source::SourceStatus::Error {
        return Err(ReadFailure::Source(FormatError::NotReadable {
            source_path: src.source_path.clone(),
            what: "events store with no readable version",
        }));
    }
    Ok((path, version))
}

/// The envelope columns `columns` of an events store at its pinned version,
/// deduplicated, with each row's count of further copies (see
/// [`crate::store::events::read_envelopes`]): no payload is parsed.
pub fn events_envelopes(
    src: &Source,
    columns: &[&str],
) -> Result<crate::store::events::Envelopes, ReadFailure> {
    let (path, version) = events_table(src)?;
    crate::store::events::read_envelopes(&path, version, columns)
        .map_err(|e| store_failure(src, &e))
}

/// A reader of an events store's records by row, at its pinned version.
pub fn events_records(src: &Source) -> Result<crate::store::events::RecordReader, ReadFailure> {
    let (path, version) = events_table(src)?;
    crate::store::events::RecordReader::open(&path, version).map_err(|e| store_failure(src, &e))
}

/// The trajectories of an events store's captured sessions (see
/// `formats::events`), each passed to `sink` as it is projected, and what
/// the store holds. `newest_ms` is the time of the newest event, from which
/// a reader works out the lag.
///
/// With `since`, only the sessions after the first that changed since an
/// earlier version are projected (see [`Since`]).
pub(super) fn project_events(
    src: &Source,
    since: Option<&Since>,
    sink: &mut dyn FnMut(Storyline),
) -> Result<ProjectedEvents, ReadFailure> {
    use crate::store::StoreError;
    use arrow::array::{Array, Int64Array, StringArray};
    let (path, version) = events_table(src)?;
    let wanted = ["session_id", "call_id", "kind"];
    let read = crate::store::events::read_deduped(&path, version, &wanted)
        .map_err(|e| store_failure(src, &e))?;
    let corrupt = |what: &str| store_failure(src, &StoreError::Corrupt(format!("events: {what}")));
    // Per batch: its first row's offset, seq, timestamp, session_id,
    // call_id, kind.
    let mut columns = Vec::with_capacity(read.batches.len());
    let mut offset = 0u64;
    for b in &read.batches {
        let int = |i: usize| b.column(i).as_any().downcast_ref::<Int64Array>();
        let text = |i: usize| b.column(i).as_any().downcast_ref::<StringArray>();
        let (Some(seq), Some(ts)) = (int(0), int(1)) else {
            return Err(corrupt("`seq` or `timestamp_unix_ms` is not Int64"));
        };
        let (Some(sid), Some(cid), Some(kind)) = (text(3), text(4), text(5)) else {
            return Err(corrupt("an envelope column is not Utf8"));
        };
        columns.push((offset, seq, ts, sid, cid, kind));
        offset += b.num_rows() as u64;
    }
    let mut newest: Option<i64> = None;
    let mut sessions: HashSet<&str> = HashSet::new();
    let mut events = Vec::with_capacity(read.kept.len());
    for ((&(b, r), &duplicates), &last) in read.kept.iter().zip(&read.duplicates).zip(&read.last) {
        let (first, seq, ts, sid, cid, kind) = columns[b as usize];
        let row = first + u64::from(r);
        let r = r as usize;
        newest = newest.max(Some(ts.value(r)));
        let session_id = or_empty(sid, r);
        sessions.insert(session_id);
        events.push(formats::events::StoredEvent {
            seq: seq.value(r),
            session_id,
            call_id: or_empty(cid, r),
            kind: or_empty(kind, r),
            duplicates,
            row,
            last,
        });
    }
    let duplicates: i64 = read.duplicates.iter().sum();
    let summary = EventsSummary {
        stored_rows: events.len() as u64 + duplicates as u64,
        events: events.len() as u64,
        duplicates: duplicates as u64,
        sessions: sessions.len() as u64,
        newest_event_at: newest
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
        lag_seconds: None,
        // The Gateway's write-ahead log is not the catalog's to read:
        // `status` fills this in.
        wal_pending_events: None,
    };
    let sessions = formats::events::sessions(&events);
    let kept = match since {
        Some(since) => {
            let (kept, earlier) = formats::events::unchanged_sessions(&sessions, since.rows);
            since.kept.set(kept as u64);
            since.earlier_sessions.set(earlier);
            if (kept as u64) < since.least {
                return Ok(ProjectedEvents {
                    summary,
                    newest_ms: newest,
                });
            }
            kept
        }
        None => 0,
    };
    // The records are read as their sessions are projected.
    let records = events_records(src)?;
    formats::events::project_each(&sessions[kept..], &records, &src.source_path, sink).map_err(
        |e| match e {
            formats::events::ProjectError::Record(e) => {
                corrupt(&format!("payload_json of seq {}: {}", e.seq, e.message))
            }
            formats::events::ProjectError::Read(why) => store_failure(src, &StoreError::Lance(why)),
        },
    )?;
    Ok(ProjectedEvents {
        summary,
        newest_ms: newest,
    })
}

/// Row `r` of `a`, or `""` when null.
fn or_empty(a: &arrow::array::StringArray, r: usize) -> &str {
    use arrow::array::Array;
    if a.is_null(r) {
        ""
    } else {
        a.value(r)
    }
}

/// What [`project_events`] says of an events store.
pub(super) struct ProjectedEvents {
    pub(super) summary: EventsSummary,
    pub(super) newest_ms: Option<i64>,
}

/// An earlier version of the events table, of which the one read is an
/// append (see `store::events::appended_since`). Sessions are projected
/// in order of their last row (see `formats::events::sessions`), so the
/// earlier version's projection has this one's first `kept` trajectories
/// in the same places; only the sessions after them are projected. Both
/// counts are set before the first trajectory is handed on, and when
/// fewer than `least` would stay, none is.
pub(super) struct Since {
    /// The earlier version's rows.
    pub(super) rows: u64,
    /// Fewer leading trajectories than this would stay: nothing is
    /// projected (the caller projects the version whole instead).
    pub(super) least: u64,
    /// Leading trajectories of the earlier projection that stay.
    pub(super) kept: std::cell::Cell<u64>,
    /// Sessions the earlier version held (its projection's trajectories).
    pub(super) earlier_sessions: std::cell::Cell<u64>,
}

/// `summary` with the lag from its newest event to now.
pub(super) fn with_lag(mut summary: EventsSummary, newest_ms: Option<i64>) -> EventsSummary {
    summary.lag_seconds =
        newest_ms.map(|n| ((chrono::Utc::now().timestamp_millis() - n).max(0)) as f64 / 1000.0);
    summary
}

/// Read an events store as trajectories: from its projection in the cache
/// directory when it can be kept there (built on first read of each
/// version), else projected now in memory.
fn read_events(src: &Source, sink: &mut dyn FnMut(Storyline)) -> Result<SourceRead, ReadFailure> {
    if let Some(p) = super::projection::projection(src)? {
        let mut read = read_store(&p.store, &mut |_| true, &mut |d, _| {
            sink(d);
            true
        })?;
        read.events = Some(with_lag(p.summary, p.newest_ms));
        return Ok(read);
    }
    let mut counts = SourceCounts::default();
    let mut runs: HashSet<String> = HashSet::new();
    let p = project_events(src, None, &mut |d| {
        counts.trajectories += 1;
        counts.steps += d.turns.len() as u64;
        counts.tool_calls += d.tool_call_count() as u64;
        runs.insert(d.run_id().to_string());
        sink(d);
    })?;
    counts.runs = runs.len() as u64;
    Ok(SourceRead {
        counts,
        diagnostics: Vec::new(),
        generated_ids: 0,
        events: Some(with_lag(p.summary, p.newest_ms)),
    })
}
