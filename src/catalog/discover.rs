//! Source discovery in a local directory.
//!
//! Walks the Dataset depth-first in byte order of names, never following
//! symlinks and skipping hidden entries (names starting with `.`, which is
//! where import staging lives). A directory holding a Storyline `CURRENT`
//! pointer is one Source (a store) and is not descended for Sources; a
//! directory named `events.lance` is an events store. Every `.json`,
//! `.jsonl` and `.ndjson` file is a candidate whose format is decided by
//! content; JSON that is not a trajectory is skipped.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::snapshot::{ReadConsistency, SnapshotRef};
use super::source::{Source, SourceKind, SourceStatus, StatusReason};
use super::CatalogError;
use crate::formats::SourceFormat;
use crate::formats::{self, Container};
use crate::util::path::to_slash;

/// Bounds on a walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiscoveryLimits {
    /// Most candidate trajectory files.
    pub max_files: u64,
    /// Most directory entries visited in total.
    pub max_entries: u64,
    /// When the command must give up (checked per directory and before
    /// each file is opened).
    pub deadline: Option<Deadline>,
}

impl Default for DiscoveryLimits {
    fn default() -> Self {
        DiscoveryLimits {
            max_files: 1_000_000,
            max_entries: 10_000_000,
            deadline: None,
        }
    }
}

/// A time bound on reading a Dataset (`ls --timeout`, `status --timeout`),
/// checked between directories, files and Sources: one file or Source in
/// progress is finished first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    at: Instant,
    limit: Duration,
}

impl Deadline {
    /// A deadline `limit` from now.
    pub fn after(limit: Duration) -> Self {
        Deadline {
            at: Instant::now() + limit,
            limit,
        }
    }

    /// Time left (zero once passed).
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// The limit it was set with.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// True once the deadline has passed.
    pub fn expired(&self) -> bool {
        Instant::now() >= self.at
    }

    /// Fail with `PC-CAT-015` once the deadline has passed.
    pub fn check(&self) -> Result<(), CatalogError> {
        if self.expired() {
            return Err(CatalogError::Timeout {
                seconds: self.limit.as_secs_f64(),
            });
        }
        Ok(())
    }
}

/// What a physical entry is to the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The entry is a Source (a file Source, or the root of a store).
    Source,
    /// The entry belongs to a store Source.
    Member,
    /// A directory that was walked for Sources.
    Directory,
    /// The entry was looked at and is not part of any Source.
    Skipped,
}

/// One file or directory seen during the walk (for `ls --physical`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct PhysicalEntry {
    /// Dataset-relative path.
    pub path: String,
    /// `file`, `dir`, `symlink` or `other`.
    pub entry_type: &'static str,
    /// Size in bytes (files only).
    pub size: Option<u64>,
    /// How the catalog used it.
    pub role: Role,
    /// The Source it belongs to, for members and Sources.
    pub source_path: Option<String>,
    /// Why it was skipped.
    pub reason: Option<String>,
}

/// The outcome of discovery.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    /// Sources in path order.
    pub sources: Vec<Source>,
    /// Every entry visited, in path order (filled when requested).
    pub physical: Vec<PhysicalEntry>,
    /// Problems met while walking that did not stop it (unreadable directories).
    pub discovery_errors: Vec<(String, String)>,
    /// What interrupted imports left (hidden, so never part of a Source).
    pub orphans: Vec<super::orphans::Orphan>,
}

struct Candidate {
    rel: String,
    abs: PathBuf,
    meta: fs::Metadata,
}

/// Walk `root` and return its Sources; `physical` also records every entry.
pub fn discover(
    root: &Path,
    limits: DiscoveryLimits,
    physical: bool,
) -> Result<Discovery, CatalogError> {
    let mut out = Discovery::default();
    let mut candidates = Vec::new();
    let mut entries_seen: u64 = 0;
    // A Dataset whose root is itself a store (what `import` creates) has one
    // Source, `.`.
    if let Some(source) = super::stores::probe_store(root, ".") {
        if physical {
            super::stores::list_members(root, ".", &mut out.physical, &mut entries_seen, limits)?;
        }
        out.sources.push(source);
        return Ok(out);
    }
    // Stack of (absolute dir, relative dir); pushed in reverse so pops come in order.
    let mut stack: Vec<(PathBuf, PathBuf)> = vec![(root.to_path_buf(), PathBuf::new())];
    while let Some((dir, rel_dir)) = stack.pop() {
        if let Some(d) = limits.deadline {
            d.check()?;
        }
        let rd = match fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) => {
                let rel = if rel_dir.as_os_str().is_empty() {
                    ".".to_string()
                } else {
                    to_slash(&rel_dir)
                };
                if rel == "." {
                    return Err(CatalogError::Io {
                        source_path: rel,
                        reason: e.to_string(),
                    });
                }
                out.discovery_errors.push((rel, e.to_string()));
                continue;
            }
        };
        let mut names = Vec::new();
        for entry in rd {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    out.discovery_errors
                        .push((to_slash(&rel_dir), e.to_string()));
                    continue;
                }
            };
            entries_seen += 1;
            if entries_seen > limits.max_entries {
                return Err(CatalogError::TooManyEntries {
                    limit: limits.max_entries,
                });
            }
            names.push(entry);
        }
        names.sort_by_key(fs::DirEntry::file_name);
        let mut subdirs = Vec::new();
        for entry in names {
            let name = entry.file_name();
            let name_str = name.to_string_lossy().into_owned();
            let rel = rel_dir.join(&name);
            let rel_s = to_slash(&rel);
            let abs = entry.path();
            let ft = match entry.file_type() {
                Ok(ft) => ft,
                Err(e) => {
                    out.discovery_errors.push((rel_s, e.to_string()));
                    continue;
                }
            };
            let skip = |out: &mut Discovery, ty: &'static str, size: Option<u64>, reason: &str| {
                if physical {
                    out.physical.push(PhysicalEntry {
                        path: rel_s.clone(),
                        entry_type: ty,
                        size,
                        role: Role::Skipped,
                        source_path: None,
                        reason: Some(reason.to_string()),
                    });
                }
            };
            if ft.is_symlink() {
                skip(&mut out, "symlink", None, "symlinks are not followed");
                continue;
            }
            if name_str.starts_with('.') {
                let orphan = super::orphans::local(&abs, &rel_s, &name_str);
                let reason = match &orphan {
                    Some(o) => format!("hidden: {} of an import of `{}`", o.kind.name(), o.target),
                    None => "hidden".to_string(),
                };
                skip(
                    &mut out,
                    if ft.is_dir() { "dir" } else { "file" },
                    orphan.as_ref().filter(|_| !ft.is_dir()).map(|o| o.bytes),
                    &reason,
                );
                out.orphans.extend(orphan);
                continue;
            }
            if ft.is_dir() {
                if let Some(source) = super::stores::probe_store(&abs, &rel_s) {
                    if physical {
                        super::stores::list_members(
                            &abs,
                            &rel_s,
                            &mut out.physical,
                            &mut entries_seen,
                            limits,
                        )?;
                    }
                    out.sources.push(source);
                    continue;
                }
                if name_str.ends_with(".lance") {
                    skip(
                        &mut out,
                        "dir",
                        None,
                        "a Lance table outside a Storyline store",
                    );
                    continue;
                }
                if physical {
                    out.physical.push(PhysicalEntry {
                        path: rel_s.clone(),
                        entry_type: "dir",
                        size: None,
                        role: Role::Directory,
                        source_path: None,
                        reason: None,
                    });
                }
                subdirs.push((abs, rel));
                continue;
            }
            if !ft.is_file() {
                skip(&mut out, "other", None, "not a regular file");
                continue;
            }
            let meta = match entry.metadata() {
                Ok(m) => m,
                Err(e) => {
                    out.discovery_errors.push((rel_s, e.to_string()));
                    continue;
                }
            };
            if !formats::is_candidate_name(&name_str) {
                skip(
                    &mut out,
                    "file",
                    Some(meta.len()),
                    "not a .json/.jsonl/.ndjson file",
                );
                continue;
            }
            candidates.push(Candidate {
                rel: rel_s,
                abs,
                meta,
            });
            if candidates.len() as u64 > limits.max_files {
                return Err(CatalogError::TooManyFiles {
                    limit: limits.max_files,
                });
            }
        }
        for d in subdirs.into_iter().rev() {
            stack.push(d);
        }
    }

    let sniffed: Vec<(
        Candidate,
        Result<formats::Sniffed, String>,
        Option<formats::FormatError>,
    )> = candidates
        .into_par_iter()
        .map(|c| {
            // Past the deadline the remaining files are not opened; the
            // check below then fails the walk.
            if limits.deadline.is_some_and(|d| d.expired()) {
                return (c, Err(String::new()), None);
            }
            let r = formats::sniff_file(&c.abs).map_err(|e| e.to_string());
            // Unrecognised JSON is checked to its end (see below).
            let broken = match &r {
                Ok(s)
                    if s.format.is_none()
                        && s.invalid.is_none()
                        && s.container != Container::Empty
                        && is_json_name(&c.rel) =>
                {
                    broken_json(&c.abs, &c.rel)
                }
                _ => None,
            };
            (c, r, broken)
        })
        .collect();
    if let Some(d) = limits.deadline {
        d.check()?;
    }
    for (c, r, broken) in sniffed {
        let snapshot_ref = file_ref(&c.meta);
        let size = c.meta.len();
        let shape = r.as_ref().ok().and_then(|s| s.openai_shape);
        let push_source = |out: &mut Discovery, format, container, status, reason| {
            if physical {
                out.physical.push(PhysicalEntry {
                    path: c.rel.clone(),
                    entry_type: "file",
                    size: Some(size),
                    role: Role::Source,
                    source_path: Some(c.rel.clone()),
                    reason: None,
                });
            }
            out.sources.push(Source {
                source_path: c.rel.clone(),
                abs_path: c.abs.clone(),
                format,
                kind: SourceKind::File,
                container,
                openai_shape: shape,
                snapshot_ref: snapshot_ref.clone(),
                read_consistency: ReadConsistency::Fingerprint,
                status,
                reason,
                size,
                object: None,
            });
        };
        match r {
            Err(e) => push_source(
                &mut out,
                SourceFormat::Unknown,
                None,
                SourceStatus::Error,
                Some(StatusReason::new("PC-CAT-009", e)),
            ),
            Ok(s) => match (s.format, s.invalid) {
                (Some(f), None) => {
                    push_source(&mut out, f, Some(s.container), SourceStatus::Ready, None);
                }
                (f, Some(err)) => push_source(
                    &mut out,
                    f.unwrap_or(SourceFormat::Unknown),
                    Some(s.container),
                    SourceStatus::Error,
                    Some(StatusReason::new(err.code(), sniff_message(&err))),
                ),
                // A `.json` file that is not a trajectory must still be
                // JSON: a broken one is an error Source, never skipped.
                (None, None) if broken.is_some() => {
                    let err = broken.expect("checked in the guard");
                    push_source(
                        &mut out,
                        SourceFormat::Unknown,
                        Some(s.container),
                        SourceStatus::Error,
                        Some(StatusReason::new(err.code(), sniff_message(&err))),
                    );
                }
                (None, None) => {
                    if physical {
                        out.physical.push(PhysicalEntry {
                            path: c.rel.clone(),
                            entry_type: "file",
                            size: Some(size),
                            role: Role::Skipped,
                            source_path: None,
                            reason: Some(match s.container {
                                Container::Empty => "empty file".into(),
                                _ => "JSON, but not a trajectory format".into(),
                            }),
                        });
                    }
                }
            },
        }
    }
    out.sources
        .sort_by(|a, b| a.source_path.cmp(&b.source_path));
    out.physical.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

fn is_json_name(rel: &str) -> bool {
    let l = rel.to_ascii_lowercase();
    l.ends_with(".json") || l.ends_with(".jsonl")
}

/// Why the file at `abs` is not well-formed JSON to its end, if it is not.
fn broken_json(abs: &Path, rel: &str) -> Option<formats::FormatError> {
    let f = fs::File::open(abs).ok()?;
    formats::json::check_syntax(f, rel).err()
}

pub(super) fn sniff_message(e: &formats::FormatError) -> String {
    match e {
        formats::FormatError::Truncated { .. } => {
            "truncated JSON (the file ends inside a value)".into()
        }
        formats::FormatError::InvalidJson { message, .. } => message.clone(),
        formats::FormatError::NonFinite { .. } => {
            "non-finite number (NaN/Infinity) is not valid JSON".into()
        }
        formats::FormatError::TooDeep { .. } => "JSON nested too deeply (limit 128 levels)".into(),
        other => other.to_string(),
    }
}

/// The fingerprint of a plain file.
pub fn file_ref(meta: &fs::Metadata) -> SnapshotRef {
    use std::os::unix::fs::MetadataExt as _;
    SnapshotRef::File {
        size: meta.len(),
        mtime_ns: meta
            .mtime()
            .saturating_mul(1_000_000_000)
            .saturating_add(meta.mtime_nsec()),
        ino: meta.ino(),
    }
}
