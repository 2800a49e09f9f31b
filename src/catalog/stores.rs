//! Directory-based Sources: Storyline Lance stores (a `CURRENT` pointer) and
//! events stores (`events.lance`). Discovery pins them by reading their
//! pointer or manifest; it does not open Lance tables.

use std::fs;
use std::path::Path;

use serde_json::Value;

use super::discover::{DiscoveryLimits, PhysicalEntry, Role};
use super::snapshot::{ReadConsistency, SnapshotRef};
use super::source::{Source, SourceKind, SourceStatus, StatusReason};
use super::CatalogError;
use crate::formats::{FormatError, SourceFormat};

/// Largest `CURRENT` or manifest file read.
const MAX_POINTER_BYTES: u64 = 1 << 20;

/// If `dir` is a store, describe it as a Source.
pub fn probe_store(dir: &Path, rel: &str) -> Option<Source> {
    let current = dir.join("CURRENT");
    if fs::symlink_metadata(&current).is_ok_and(|m| m.is_file()) {
        let (snapshot_ref, status, reason) = match read_current(&current, rel) {
            Ok(r) => (r, SourceStatus::Ready, None),
            Err(e) => (
                SnapshotRef::Store {
                    snapshot: "invalid".into(),
                    tables: Vec::new(),
                },
                SourceStatus::Error,
                Some(StatusReason::new(e.code(), e.detail())),
            ),
        };
        return Some(store_source(
            dir,
            rel,
            SourceFormat::StorylineLance,
            snapshot_ref,
            status,
            reason,
        ));
    }
    let name = dir.file_name()?.to_string_lossy();
    if name == "events.lance" {
        let (snapshot_ref, status, reason) = match events_version(dir) {
            Some(v) => (SnapshotRef::Lance { version: v }, SourceStatus::Ready, None),
            None => (
                SnapshotRef::Lance { version: 0 },
                SourceStatus::Error,
                Some(StatusReason::new(
                    "PC-FMT-013",
                    "events store has no readable manifest or versions",
                )),
            ),
        };
        return Some(store_source(
            dir,
            rel,
            SourceFormat::EventsLance,
            snapshot_ref,
            status,
            reason,
        ));
    }
    None
}

fn store_source(
    dir: &Path,
    rel: &str,
    format: SourceFormat,
    snapshot_ref: SnapshotRef,
    status: SourceStatus,
    reason: Option<StatusReason>,
) -> Source {
    Source {
        source_path: rel.to_string(),
        abs_path: dir.to_path_buf(),
        format,
        kind: SourceKind::Store,
        container: None,
        openai_shape: None,
        snapshot_ref,
        read_consistency: ReadConsistency::Native,
        status,
        reason,
        size: dir_size(dir),
        object: None,
    }
}

fn read_small(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut buf = Vec::new();
    fs::File::open(path)?
        .take(MAX_POINTER_BYTES)
        .read_to_end(&mut buf)?;
    Ok(buf)
}

/// The snapshot reference of a store's committed pointer.
pub fn store_ref(cur: &crate::store::Current) -> SnapshotRef {
    match &cur.committed {
        None => SnapshotRef::Store {
            snapshot: "empty".into(),
            tables: Vec::new(),
        },
        Some(c) => {
            let mut tables = Vec::new();
            if let Some(v) = c.objects_version {
                tables.push(("objects".to_string(), v));
            }
            tables.push(("runs".to_string(), c.runs_version));
            tables.push(("steps".to_string(), c.steps_version));
            tables.push(("tool_calls".to_string(), c.tool_calls_version));
            SnapshotRef::Store {
                snapshot: c.generation.clone(),
                tables,
            }
        }
    }
}

/// Read a Storyline store `CURRENT` pointer into the pinned table versions.
pub fn read_current(path: &Path, rel: &str) -> Result<SnapshotRef, FormatError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    crate::store::Current::read(dir)
        .map(|c| store_ref(&c))
        .map_err(|e| FormatError::InvalidCurrent {
            source_path: rel.to_string(),
            message: e.to_string(),
        })
}

/// The version of an events store: the manifest revision, or the newest Lance
/// manifest under `_versions/`.
fn events_version(dir: &Path) -> Option<u64> {
    if let Ok(bytes) = read_small(&dir.join("_manifest.json")) {
        let v: Value = serde_json::from_slice(&bytes).ok()?;
        return v.get("revision").and_then(Value::as_u64);
    }
    let mut best = None;
    for e in fs::read_dir(dir.join("_versions")).ok()? {
        let name = e.ok()?.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".manifest") else {
            continue;
        };
        let Some(version) = manifest_version(stem) else {
            continue;
        };
        best = Some(best.map_or(version, |b: u64| b.max(version)));
    }
    best
}

/// The version a Lance manifest file stem (`_versions/<stem>.manifest`) names.
pub fn manifest_version(stem: &str) -> Option<u64> {
    let n = stem.parse::<u64>().ok()?;
    // Lance's V2 naming stores u64::MAX - version, zero-padded to 20 digits.
    Some(if stem.len() == 20 { u64::MAX - n } else { n })
}

fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() {
                total += e.metadata().map_or(0, |m| m.len());
            }
        }
    }
    total
}

/// Add every file of a store to the physical listing.
pub fn list_members(
    dir: &Path,
    rel: &str,
    out: &mut Vec<PhysicalEntry>,
    entries_seen: &mut u64,
    limits: DiscoveryLimits,
) -> Result<(), CatalogError> {
    out.push(PhysicalEntry {
        path: rel.to_string(),
        entry_type: "dir",
        size: None,
        role: Role::Source,
        source_path: Some(rel.to_string()),
        reason: None,
    });
    let mut stack = vec![(dir.to_path_buf(), rel.to_string())];
    while let Some((d, r)) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        let mut entries: Vec<_> = rd.flatten().collect();
        entries.sort_by_key(fs::DirEntry::file_name);
        for e in entries {
            *entries_seen += 1;
            if *entries_seen > limits.max_entries {
                return Err(CatalogError::TooManyEntries {
                    limit: limits.max_entries,
                });
            }
            let Ok(ft) = e.file_type() else { continue };
            let path = if r == "." {
                e.file_name().to_string_lossy().into_owned()
            } else {
                format!("{r}/{}", e.file_name().to_string_lossy())
            };
            let (entry_type, size) = if ft.is_symlink() {
                ("symlink", None)
            } else if ft.is_dir() {
                stack.push((e.path(), path.clone()));
                ("dir", None)
            } else {
                ("file", e.metadata().ok().map(|m| m.len()))
            };
            out.push(PhysicalEntry {
                path,
                entry_type,
                size,
                role: Role::Member,
                source_path: Some(rel.to_string()),
                reason: None,
            });
        }
    }
    Ok(())
}
