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

/// Parse a Storyline store `CURRENT` pointer (control envelope or bare
/// committed object) into the pinned table versions.
pub fn read_current(path: &Path, rel: &str) -> Result<SnapshotRef, FormatError> {
    let bad = |m: String| FormatError::InvalidCurrent {
        source_path: rel.to_string(),
        message: m,
    };
    let bytes = read_small(path).map_err(|e| bad(e.to_string()))?;
    let v: Value =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("not valid JSON: {e}")))?;
    let committed = if v.get("control_version").is_some() {
        if v.get("control_version").and_then(Value::as_u64) != Some(1) {
            return Err(bad("unsupported control_version".into()));
        }
        match v.get("committed") {
            None | Some(Value::Null) => {
                return Ok(SnapshotRef::Store {
                    snapshot: "empty".into(),
                    tables: Vec::new(),
                })
            }
            Some(c) => c.clone(),
        }
    } else {
        v
    };
    let schema = committed.get("schema_version").and_then(Value::as_u64);
    if !matches!(schema, Some(1 | 2)) {
        return Err(bad(format!(
            "unsupported store schema_version {}",
            committed.get("schema_version").unwrap_or(&Value::Null)
        )));
    }
    let generation = committed
        .get("generation")
        .and_then(Value::as_str)
        .filter(|g| {
            g.starts_with("gen-") && !g.contains(['/', '\\', ',', '=', ':']) && !g.contains("..")
        })
        .ok_or_else(|| bad("missing or invalid generation".into()))?;
    let mut tables = Vec::new();
    for t in ["objects", "runs", "steps", "tool_calls"] {
        match committed.get(format!("{t}_version")) {
            Some(x) => tables.push((
                t.to_string(),
                x.as_u64()
                    .ok_or_else(|| bad(format!("{t}_version is not an unsigned integer")))?,
            )),
            None if t == "objects" => {}
            None => return Err(bad(format!("missing {t}_version"))),
        }
    }
    Ok(SnapshotRef::Store {
        snapshot: generation.to_string(),
        tables,
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
        let Ok(n) = stem.parse::<u64>() else { continue };
        // Lance's V2 naming stores u64::MAX - version, zero-padded to 20 digits.
        let version = if stem.len() == 20 { u64::MAX - n } else { n };
        best = Some(best.map_or(version, |b: u64| b.max(version)));
    }
    best
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
            let path = format!("{r}/{}", e.file_name().to_string_lossy());
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
