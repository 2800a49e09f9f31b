//! The trajectories of an events store, projected from its captured
//! sessions once per events version and kept as a Storyline store in the
//! cache directory. Reading captured traffic again then costs a store read
//! (columns straight from Lance) instead of parsing and projecting every
//! event.
//!
//! A projection is derived data, like the full-text index: it is keyed by
//! the events table's location and the version discovery pinned, so a new
//! append (or the re-append of a Gateway restarted after a crash) makes a
//! new one; it is never read for another version; and one that is missing
//! or unreadable is built again from the events. It is written under a
//! private name and renamed into place, so a crash mid-build leaves no
//! projection that looks whole.
//!
//! A version appended to one that has a projection extends that
//! projection's tables instead of projecting every session again: the
//! trajectories of the sessions that changed, and those after them, are
//! deleted and projected anew (see `read::Since`). The new version's
//! projection is then a directory of its own holding only its `CURRENT`,
//! which pins the new table versions, and links to the tables of the
//! directory they live in (its `base`). Earlier versions stay readable at
//! theirs. After [`MAX_EXTENSIONS`] extensions, or when the table was not
//! only appended to, the projection is built whole again.

use std::path::{Path, PathBuf};

use super::read::{events_table, project_events, ReadFailure, Since};
use super::{EventsSummary, ReadConsistency, Source, SourceKind, SourceStatus};
use crate::formats::SourceFormat;
use crate::store::{Current, StoreWriter, StorylineLanceStore};

/// Bumped when what a projection holds changes, so older ones are not read.
/// Layout 2 orders sessions by their last row (layout 1 by their first).
const LAYOUT: u32 = 2;

/// Extensions of one projection's tables before it is built whole again:
/// each adds a data file per table and marks the rows it replaced, which
/// later reads skip.
const MAX_EXTENSIONS: u32 = 32;

/// The manifest beside a projection's tables.
const MANIFEST: &str = "projection.json";

/// A projection store ready to read, with the events summary it was built
/// with.
#[derive(Debug)]
pub struct Projection {
    /// The projection as a Storyline store Source, named like the events
    /// store it comes from.
    pub store: Source,
    /// What the events store held at that version.
    pub summary: EventsSummary,
    /// Time of the newest event (for the lag).
    pub newest_ms: Option<i64>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Manifest {
    layout: u32,
    events: String,
    version: u64,
    summary: EventsSummary,
    newest_ms: Option<i64>,
    /// The directory (beside this one) whose tables this projection's
    /// `CURRENT` pins, when it is an extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base: Option<String>,
    /// Extensions since the base was built whole.
    #[serde(default)]
    extensions: u32,
}

impl Manifest {
    /// The manifest of a projection of this build's layout.
    fn new(
        events: &str,
        version: u64,
        projected: super::read::ProjectedEvents,
        base: Option<String>,
        extensions: u32,
    ) -> Self {
        Manifest {
            layout: LAYOUT,
            events: events.to_string(),
            version,
            summary: projected.summary,
            newest_ms: projected.newest_ms,
            base,
            extensions,
        }
    }
}

/// Where the events table of `src` lives (a local path or an S3 URI).
fn location(src: &Source) -> String {
    match &src.object {
        Some(o) => format!("s3://{}/{}", o.bucket, o.key.trim_end_matches('/')),
        None => src.abs_path.display().to_string(),
    }
}

/// The projection of the events store `src` at the version discovery
/// pinned: opened when built before, else built now. `None` when there is
/// no cache directory or it cannot be written: the caller projects in
/// memory, as without a cache.
pub fn projection(src: &Source) -> Result<Option<Projection>, ReadFailure> {
    let super::SnapshotRef::Lance { version } = src.snapshot_ref else {
        return Ok(None);
    };
    let Some(base) = crate::util::path::cache_base() else {
        return Ok(None);
    };
    let events = location(src);
    let key = blake3::hash(format!("{LAYOUT}\0{events}").as_bytes()).to_hex();
    let dir = base.join("projections").join(&key.as_str()[..32]);
    let at = dir.join(format!("v{version}"));
    if let Some(p) = open(&at, src, &events, version) {
        return Ok(Some(p));
    }
    // Without a place to keep it, do not project here: the caller projects
    // in memory once.
    if std::fs::create_dir_all(&dir).is_err() {
        return Ok(None);
    }
    let extended = match extend(&dir, &at, src, &events, version) {
        Ok(done) => done,
        Err(Failed::Read(f)) => return Err(f),
        // Built whole instead.
        Err(Failed::Write) => None,
    };
    let manifest = match extended {
        Some(m) => m,
        None => match build(&dir, &at, src, &events, version) {
            Ok(m) => m,
            Err(Failed::Read(f)) => return Err(f),
            // The cache is a convenience: when it cannot be written, read
            // without it (the events are projected again, in memory).
            Err(Failed::Write) => return Ok(None),
        },
    };
    prune(&dir, version);
    Ok(open(&at, src, &manifest.events, version))
}

/// Why a projection was not built.
enum Failed {
    /// The events could not be read or projected.
    Read(ReadFailure),
    /// The projection could not be written (the cache is a convenience:
    /// why does not matter to the reader).
    Write,
}

/// The projection at `at`, when it is whole and of this events version.
fn open(at: &Path, src: &Source, events: &str, version: u64) -> Option<Projection> {
    let m = manifest_of(at)?;
    if m.layout != LAYOUT || m.events != events || m.version != version {
        return None;
    }
    if !is_whole(at) {
        return None;
    }
    let store = StorylineLanceStore::open(at).ok()?;
    let store = Source {
        source_path: src.source_path.clone(),
        abs_path: at.to_path_buf(),
        format: SourceFormat::StorylineLance,
        kind: SourceKind::Store,
        container: None,
        openai_shape: None,
        snapshot_ref: super::stores::store_ref(store.current()),
        read_consistency: ReadConsistency::Native,
        status: SourceStatus::Ready,
        reason: None,
        size: 0,
        object: None,
    };
    Some(Projection {
        store,
        summary: m.summary,
        newest_ms: m.newest_ms,
    })
}

/// Project the events of `src` (at `version`, stored at `events`) into a
/// store under a private name in `dir`, each trajectory written as it is
/// projected, then rename it to `at`. Another process that built the same
/// version first wins; ours is removed.
fn build(
    dir: &Path,
    at: &Path,
    src: &Source,
    events: &str,
    version: u64,
) -> Result<Manifest, Failed> {
    publish(dir, at, |tmp| {
        let write = |_: crate::store::StoreError| Failed::Write;
        let (projected, w) = project_into(src, None, || StoreWriter::create(tmp))?;
        let w = match w {
            Some(w) => w,
            None => StoreWriter::create(tmp).map_err(write)?,
        };
        w.finish().map_err(write)?;
        Ok(Manifest::new(events, version, projected, None, 0))
    })
}

/// Project the events of `src` (see `read::project_events`) into the
/// writer `open` gives at the first trajectory: once the events are read,
/// since its tables wait on the runtime that reads them. The writer is
/// `None` when there was no trajectory to write.
fn project_into(
    src: &Source,
    since: Option<&Since>,
    mut open: impl FnMut() -> Result<StoreWriter, crate::store::StoreError>,
) -> Result<(super::read::ProjectedEvents, Option<StoreWriter>), Failed> {
    let mut w: Option<StoreWriter> = None;
    let mut failed = None;
    let projected = project_events(src, since, &mut |d| {
        if failed.is_some() {
            return;
        }
        let d = with_origin(d, src);
        let pushed = match &mut w {
            Some(w) => w.push(d),
            None => open().and_then(|new| w.insert(new).push(d)),
        };
        failed = pushed.err();
    })
    .map_err(Failed::Read)?;
    match failed {
        Some(_) => Err(Failed::Write),
        None => Ok((projected, w)),
    }
}

/// A store keeps each document's origin; read in memory, the captured
/// sessions have the events store as theirs.
fn with_origin(
    mut d: crate::formats::model::Storyline,
    src: &Source,
) -> crate::formats::model::Storyline {
    if d.origin_path.is_none() {
        d.origin_path = Some(src.source_path.clone());
    }
    d
}

/// Extend the projection of the newest earlier version in `dir` to
/// `version`, when the events table was only appended to since: its
/// tables lose the trajectories from the first session that changed on and
/// get those sessions' and the new ones', and `at` pins the result.
/// `None` when there is nothing to extend, it was extended too often, its
/// tables are being extended by another process (or were left half-way by
/// one that stopped), or the events table was rewritten: the caller builds
/// the projection whole.
fn extend(
    dir: &Path,
    at: &Path,
    src: &Source,
    events: &str,
    version: u64,
) -> Result<Option<Manifest>, Failed> {
    let Some((from, before)) = newest_before(dir, events, version) else {
        return Ok(None);
    };
    if before.extensions >= MAX_EXTENSIONS {
        return Ok(None);
    }
    let base_name = match &before.base {
        Some(b) => b.clone(),
        None => file_name(&from),
    };
    let base = dir.join(&base_name);
    // One extension of a base's tables at a time.
    let Ok(Some(_lock)) = crate::util::fs::FileLock::try_new(&base.join(".extend.lock")) else {
        return Ok(None);
    };
    let Ok(pinned) = Current::read(&from) else {
        return Ok(None);
    };
    let (path, _) = events_table(src).map_err(Failed::Read)?;
    let Ok(Some(rows)) = crate::store::events::appended_since(&path, before.version, version)
    else {
        return Ok(None);
    };
    if rows != before.summary.stored_rows {
        return Ok(None);
    }
    // At least half of the earlier trajectories stay, or the version is
    // projected whole: replacing more would leave the tables mostly rows
    // marked deleted, where a whole build writes only live ones.
    let since = Since {
        rows,
        least: before.summary.sessions.div_ceil(2),
        kept: std::cell::Cell::new(0),
        earlier_sessions: std::cell::Cell::new(0),
    };
    // The earlier projection has a trajectory per session, in order, and
    // enough of them stay.
    let matches = || {
        since.earlier_sessions.get() == before.summary.sessions && since.kept.get() >= since.least
    };
    let manifest = publish(dir, at, |tmp| {
        let (projected, w) = project_into(src, Some(&since), || {
            if matches() {
                StoreWriter::resume(&base, &pinned, since.kept.get())
            } else {
                Err(crate::store::StoreError::Internal(
                    "the earlier projection has other sessions, or most of it changed".into(),
                ))
            }
        })?;
        if !matches() {
            return Err(Failed::Write);
        }
        let current = match w {
            Some(w) => w.finish().ok().and_then(|s| s.current),
            // No trajectory changed: the tables as they were.
            None if since.kept.get() == before.summary.sessions => Some(pinned.clone()),
            None => None,
        };
        let current = current.ok_or(Failed::Write)?;
        std::fs::create_dir(tmp).map_err(|_| Failed::Write)?;
        for name in ["generations", "objects.lance"] {
            let target = Path::new("..").join(&base_name).join(name);
            std::os::unix::fs::symlink(target, tmp.join(name)).map_err(|_| Failed::Write)?;
        }
        current.write(tmp).map_err(|_| Failed::Write)?;
        Ok(Manifest::new(
            events,
            version,
            projected,
            Some(base_name.clone()),
            before.extensions + 1,
        ))
    });
    match manifest {
        Ok(m) => Ok(Some(m)),
        Err(Failed::Read(f)) => Err(Failed::Read(f)),
        Err(Failed::Write) => Ok(None),
    }
}

/// The projection in `dir` of the newest version of `events` before
/// `version`, and its manifest.
fn newest_before(dir: &Path, events: &str, version: u64) -> Option<(PathBuf, Manifest)> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let v = e
                .file_name()
                .to_str()?
                .strip_prefix('v')?
                .parse::<u64>()
                .ok()?;
            (v < version).then(|| e.path())
        })
        .filter_map(|p| {
            let m = manifest_of(&p)?;
            (m.layout == LAYOUT && m.events == events && m.version < version).then_some((p, m))
        })
        .max_by_key(|(_, m)| m.version)
}

/// Whether the projection at `dir` has its manifest and its tables (an
/// extension's are in another directory, which may be gone).
fn is_whole(dir: &Path) -> bool {
    manifest_of(dir).is_some() && dir.join("generations").is_dir()
}

/// The manifest of the projection at `dir`, when it has a readable one.
fn manifest_of(dir: &Path) -> Option<Manifest> {
    serde_json::from_slice(&std::fs::read(dir.join(MANIFEST)).ok()?).ok()
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Fill a directory under a private name in `dir` (`fill` creates it),
/// write its manifest, then rename it to `at`. Another process that made
/// the same version first wins; ours is removed.
fn publish(
    dir: &Path,
    at: &Path,
    fill: impl FnOnce(&Path) -> Result<Manifest, Failed>,
) -> Result<Manifest, Failed> {
    let tmp = dir.join(format!(
        ".build-{}-{}",
        std::process::id(),
        chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
    ));
    // An interrupted command removes its unfinished build.
    crate::util::interrupt::remove_on_interrupt(&tmp);
    let written = fill(&tmp).and_then(|manifest| {
        let bytes = serde_json::to_vec(&manifest).map_err(|_| Failed::Write)?;
        crate::util::fs::write_atomic(&tmp.join(MANIFEST), &bytes).map_err(|_| Failed::Write)?;
        Ok(manifest)
    });
    crate::util::interrupt::settle(&tmp, || {
        let published = written.and_then(|manifest| {
            if at.exists() {
                // Built by another process meanwhile, or left unreadable:
                // a whole one is kept, a broken one replaced.
                if is_whole(at) {
                    return Ok(manifest);
                }
                std::fs::remove_dir_all(at).map_err(|_| Failed::Write)?;
            }
            std::fs::rename(&tmp, at).map_err(|_| Failed::Write)?;
            Ok(manifest)
        });
        let _ = std::fs::remove_dir_all(&tmp);
        published
    })
}

/// Remove projections of versions older than the one before `version`
/// once they are an hour old (a command still reading an older version,
/// such as a running server, keeps its files meanwhile), unless a kept one
/// extends their tables, and builds that a crash left behind more than an
/// hour ago.
fn prune(dir: &Path, version: u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut versions: Vec<(u64, PathBuf)> = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(v) = name.strip_prefix('v').and_then(|v| v.parse::<u64>().ok()) {
            versions.push((v, e.path()));
        } else if name.starts_with(".build-") && older_than_an_hour(&e.path()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    versions.sort_unstable();
    let keep_from = versions
        .iter()
        .rev()
        .filter(|(v, _)| *v < version)
        .map(|(v, _)| *v)
        .next()
        .unwrap_or(version);
    let (gone, kept): (Vec<_>, Vec<_>) = versions
        .into_iter()
        .partition(|(v, p)| *v < keep_from && older_than_an_hour(p));
    // The tables of an extension stay with the directory they are in.
    let bases: Vec<String> = kept
        .iter()
        .filter_map(|(_, p)| manifest_of(p)?.base)
        .collect();
    for (_, p) in gone {
        if bases.contains(&file_name(&p)) {
            continue;
        }
        // Nor are tables being extended now (before the extension is
        // published, nothing kept names them): removed under their lock.
        if let Ok(Some(_extending)) = crate::util::fs::FileLock::try_new(&p.join(".extend.lock")) {
            let _ = std::fs::remove_dir_all(&p);
        }
    }
}

fn older_than_an_hour(p: &Path) -> bool {
    std::fs::metadata(p)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age.as_secs() > 3600)
}
