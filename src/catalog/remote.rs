//! Source discovery under an S3 prefix.
//!
//! One flat listing (ListObjectsV2) of the prefix stands for the directory
//! walk: keys are taken in byte order, a key with a hidden segment (`.…`) is
//! skipped, a "directory" holding a `CURRENT` object is a store and a
//! `*.lance/` directory an events store or a stray Lance table, exactly as
//! locally. Candidate files are sniffed in parallel with small conditional
//! ranged reads; the first read also reports the object's version id on a
//! versioned bucket, so each Source is pinned to its version (else its ETag)
//! and every later read is conditional on that pin.
//!
//! What a sniff found is kept in a small per-Dataset file in the cache
//! directory, keyed by object key and ETag: an object listed again with the
//! same ETag is not read again, so a warm `ls` or `find` costs the listing.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use rayon::prelude::*;

use super::discover::{sniff_message, Discovery, DiscoveryLimits, PhysicalEntry, Role};
use super::snapshot::{ReadConsistency, SnapshotRef};
use super::source::{RemoteObject, Source, SourceKind, SourceStatus, StatusReason};
use super::CatalogError;
use crate::formats::{self, Container, SourceFormat};
use crate::s3::{Client, ListedObject, ObjectPin, ObjectReader, S3Uri};

/// Why an events store found on S3 is not read.
const EVENTS_UNSUPPORTED: &str = "events store has no readable Lance version";

/// List and pin the Sources under `uri`.
pub fn discover(
    uri: &S3Uri,
    limits: DiscoveryLimits,
    physical: bool,
) -> Result<Discovery, CatalogError> {
    let client = crate::s3::client()?;
    let listed = client.list(uri.bucket(), uri.prefix(), limits.max_entries)?;
    if let Some(d) = limits.deadline {
        d.check()?;
    }
    if listed.len() as u64 > limits.max_entries {
        return Err(CatalogError::TooManyEntries {
            limit: limits.max_entries,
        });
    }
    let prefix = uri.prefix();
    let objects: Vec<(String, ListedObject)> = listed
        .into_iter()
        .filter_map(|o| {
            let rel = o.key.strip_prefix(prefix)?.to_string();
            (!rel.is_empty() && !rel.ends_with('/')).then_some((rel, o))
        })
        .collect();
    let mut out = Discovery {
        orphans: super::orphans::remote(
            objects
                .iter()
                .filter(|(rel, _)| hidden(rel))
                .map(|(rel, o)| (rel.as_str(), o.size, o.last_modified.as_str())),
        ),
        ..Discovery::default()
    };
    // Store roots: directories with a `CURRENT` object, and `*.lance` directories.
    let mut stores: BTreeSet<String> = BTreeSet::new();
    let mut with_current: BTreeSet<String> = BTreeSet::new();
    for (rel, _) in &objects {
        if hidden(rel) {
            continue;
        }
        let current_dir = if rel == "CURRENT" {
            Some(".")
        } else {
            rel.strip_suffix("/CURRENT")
        };
        if let Some(dir) = current_dir {
            stores.insert(dir.to_string());
            with_current.insert(dir.to_string());
        }
        let mut dir = String::new();
        for seg in rel
            .split('/')
            .rev()
            .skip(1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            if !dir.is_empty() {
                dir.push('/');
            }
            dir.push_str(seg);
            if seg.ends_with(".lance") {
                stores.insert(dir.clone());
                break;
            }
        }
    }
    // A store nested in another store belongs to the outer one.
    let roots: Vec<String> = stores
        .iter()
        .filter(|s| {
            !stores
                .iter()
                .any(|o| o != *s && (o == "." || s.starts_with(&format!("{o}/"))))
        })
        .cloned()
        .collect();
    let store_of = |rel: &str| -> Option<&String> {
        roots
            .iter()
            .find(|r| r.as_str() == "." || rel.starts_with(&format!("{r}/")))
    };
    // A root is a Source when it has a `CURRENT` (Storyline) or is named
    // `events.lance`; any other `*.lance` directory is a stray table.
    let is_events = |root: &str| {
        !with_current.contains(root) && root.rsplit('/').next() == Some("events.lance")
    };
    let is_source = |root: &str| with_current.contains(root) || is_events(root);
    let mut candidates: Vec<(String, ListedObject)> = Vec::new();
    let mut store_sizes: Vec<u64> = vec![0; roots.len()];
    // The newest Lance manifest listed under each events store.
    let mut events_versions: Vec<Option<u64>> = vec![None; roots.len()];
    for (rel, o) in objects {
        let entry = |role, source_path: Option<String>, reason: Option<&str>| PhysicalEntry {
            path: rel.clone(),
            entry_type: "object",
            size: Some(o.size),
            role,
            source_path,
            reason: reason.map(str::to_string),
        };
        if hidden(&rel) {
            if physical {
                out.physical
                    .push(entry(Role::Skipped, None, Some("hidden")));
            }
            continue;
        }
        if let Some(root) = store_of(&rel) {
            let i = roots.iter().position(|r| r == root).unwrap_or(0);
            store_sizes[i] += o.size;
            if is_events(root) {
                let name = rel.rsplit('/').next().unwrap_or("");
                let in_versions = rel[root.len()..].starts_with("/_versions/");
                if let Some(v) = name
                    .strip_suffix(".manifest")
                    .filter(|_| in_versions)
                    .and_then(super::stores::manifest_version)
                {
                    events_versions[i] = Some(events_versions[i].map_or(v, |b: u64| b.max(v)));
                }
            }
            if physical {
                out.physical.push(if is_source(root) {
                    entry(Role::Member, Some(root.clone()), None)
                } else {
                    entry(
                        Role::Skipped,
                        None,
                        Some("a Lance table outside a Storyline store"),
                    )
                });
            }
            continue;
        }
        let name = rel.rsplit('/').next().unwrap_or(&rel);
        if !formats::is_candidate_name(name) {
            if physical {
                out.physical.push(entry(
                    Role::Skipped,
                    None,
                    Some("not a .json/.jsonl/.ndjson file"),
                ));
            }
            continue;
        }
        candidates.push((rel, o));
        if candidates.len() as u64 > limits.max_files {
            return Err(CatalogError::TooManyFiles {
                limit: limits.max_files,
            });
        }
    }
    let pin_phase = crate::util::stats::phase(crate::util::stats::Phase::Pin);
    for ((root, size), events_version) in roots.iter().zip(store_sizes).zip(events_versions) {
        if !is_source(root) {
            continue;
        }
        let is_events = is_events(root);
        let store_prefix = if root == "." {
            prefix.to_string()
        } else {
            format!("{prefix}{root}/")
        };
        let mut source = Source {
            source_path: root.clone(),
            abs_path: PathBuf::new(),
            format: if is_events {
                SourceFormat::EventsLance
            } else {
                SourceFormat::StorylineLance
            },
            kind: SourceKind::Store,
            container: None,
            openai_shape: None,
            snapshot_ref: SnapshotRef::Store {
                snapshot: "invalid".into(),
                tables: Vec::new(),
            },
            read_consistency: ReadConsistency::Native,
            status: SourceStatus::Ready,
            reason: None,
            size,
            object: None,
        };
        if is_events {
            match events_version {
                // Pinned at the newest version listed; Lance reads that
                // version's manifest and files, which appends never change.
                Some(version) => {
                    source.snapshot_ref = SnapshotRef::Lance { version };
                    source.object = Some(RemoteObject {
                        bucket: uri.bucket().to_string(),
                        key: store_prefix,
                        pin: ObjectPin {
                            etag: String::new(),
                            version: None,
                        },
                    });
                }
                None => {
                    source.snapshot_ref = SnapshotRef::Lance { version: 0 };
                    source.status = SourceStatus::Error;
                    source.reason = Some(StatusReason::new("PC-S3-019", EVENTS_UNSUPPORTED));
                }
            }
        } else {
            match crate::store::Current::read_s3(uri.bucket(), &store_prefix) {
                Ok((current, etag)) => {
                    source.snapshot_ref = super::stores::store_ref(&current);
                    source.object = Some(RemoteObject {
                        bucket: uri.bucket().to_string(),
                        key: store_prefix,
                        pin: ObjectPin {
                            etag,
                            version: None,
                        },
                    });
                }
                Err(e) => {
                    source.status = SourceStatus::Error;
                    source.reason = Some(StatusReason::new("PC-FMT-013", e.to_string()));
                }
            }
        }
        out.sources.push(source);
    }
    let bucket = uri.bucket().to_string();
    let cache_file = sniff_cache_file(uri);
    let cached = cache_file.as_deref().map(load_sniffs).unwrap_or_default();
    let sniffed: Vec<_> = crate::util::rt::on_pool(true, || {
        candidates
            .into_par_iter()
            .map(|(rel, o)| {
                let r = match cached.get(&o.key).filter(|c| c.etag == o.etag) {
                    Some(c) => c.restore(),
                    None => sniff(&client, &bucket, &o),
                };
                (rel, o, r)
            })
            .collect()
    });
    drop(pin_phase);
    // Rewrite the cache only when it no longer matches the listing: a warm
    // command over unchanged objects writes nothing.
    let all_cached = sniffed.len() == cached.len()
        && sniffed
            .iter()
            .all(|(_, o, _)| cached.get(&o.key).is_some_and(|c| c.etag == o.etag));
    if let (Some(file), false) = (&cache_file, all_cached) {
        save_sniffs(file, &sniffed);
    }
    if let Some(d) = limits.deadline {
        d.check()?;
    }
    for (rel, o, r) in sniffed {
        let (pin, sniffed) = r;
        let snapshot_ref = SnapshotRef::Object {
            etag: pin.etag.clone(),
            size: o.size,
            version: pin.version.clone(),
        };
        let shape = sniffed.as_ref().ok().and_then(|s| s.openai_shape);
        let mut source = Source {
            source_path: rel.clone(),
            abs_path: PathBuf::new(),
            format: SourceFormat::Unknown,
            kind: SourceKind::File,
            container: None,
            openai_shape: shape,
            snapshot_ref,
            read_consistency: ReadConsistency::Conditional,
            status: SourceStatus::Ready,
            reason: None,
            size: o.size,
            object: Some(RemoteObject {
                bucket: bucket.clone(),
                key: o.key.clone(),
                pin,
            }),
        };
        match sniffed {
            Err(reason) => {
                source.status = SourceStatus::Error;
                source.reason = Some(reason);
            }
            Ok(s) => match (s.format, s.invalid) {
                (Some(f), None) => {
                    source.format = f;
                    source.container = Some(s.container);
                }
                (f, Some(err)) => {
                    source.format = f.unwrap_or(SourceFormat::Unknown);
                    source.container = Some(s.container);
                    source.status = SourceStatus::Error;
                    source.reason = Some(StatusReason::new(err.code(), sniff_message(&err)));
                }
                (None, None) => {
                    if physical {
                        out.physical.push(PhysicalEntry {
                            path: rel,
                            entry_type: "object",
                            size: Some(o.size),
                            role: Role::Skipped,
                            source_path: None,
                            reason: Some(match s.container {
                                Container::Empty => "empty file".into(),
                                _ => "JSON, but not a trajectory format".into(),
                            }),
                        });
                    }
                    continue;
                }
            },
        }
        if physical {
            out.physical.push(PhysicalEntry {
                path: rel.clone(),
                entry_type: "object",
                size: Some(o.size),
                role: Role::Source,
                source_path: Some(rel),
                reason: None,
            });
        }
        out.sources.push(source);
    }
    out.sources
        .sort_by(|a, b| a.source_path.cmp(&b.source_path));
    out.physical.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// What one sniff found, as cached.
#[derive(serde::Serialize, serde::Deserialize)]
struct CachedSniff {
    etag: String,
    version: Option<String>,
    format: Option<SourceFormat>,
    shape: Option<formats::OpenAiShape>,
    container: Container,
}

impl CachedSniff {
    fn restore(&self) -> (ObjectPin, Result<formats::Sniffed, StatusReason>) {
        (
            ObjectPin {
                etag: self.etag.clone(),
                version: self.version.clone(),
            },
            Ok(formats::Sniffed {
                format: self.format,
                openai_shape: self.shape,
                container: self.container,
                invalid: None,
            }),
        )
    }
}

const SNIFF_CACHE_VERSION: u32 = 1;

fn sniff_cache_file(uri: &S3Uri) -> Option<PathBuf> {
    let key = blake3::hash(crate::s3::cache_identity(uri).as_bytes()).to_hex();
    Some(
        crate::util::path::cache_base()?
            .join("s3-sniff")
            .join(format!(
                "v{SNIFF_CACHE_VERSION}-{}.json",
                &key.as_str()[..32]
            )),
    )
}

fn load_sniffs(file: &std::path::Path) -> std::collections::HashMap<String, CachedSniff> {
    std::fs::read(file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Keep what this discovery knows (clean sniffs only; failures are retried
/// next time). Best effort: a cache that cannot be written is skipped.
fn save_sniffs(
    file: &std::path::Path,
    sniffed: &[(
        String,
        ListedObject,
        (ObjectPin, Result<formats::Sniffed, StatusReason>),
    )],
) {
    let map: std::collections::HashMap<&str, CachedSniff> = sniffed
        .iter()
        .filter_map(|(_, o, (pin, r))| {
            let s = r.as_ref().ok().filter(|s| s.invalid.is_none())?;
            Some((
                o.key.as_str(),
                CachedSniff {
                    etag: pin.etag.clone(),
                    version: pin.version.clone(),
                    format: s.format,
                    shape: s.openai_shape,
                    container: s.container,
                },
            ))
        })
        .collect();
    let Ok(bytes) = serde_json::to_vec(&map) else {
        return;
    };
    let Some(dir) = file.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = file.with_extension(format!("tmp-{}", std::process::id()));
    if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, file).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// A key with a segment starting with `.` (staging, caches) is not part of
/// the Dataset.
fn hidden(rel: &str) -> bool {
    rel.split('/').any(|s| s.starts_with('.'))
}

/// Sniff one object with conditional ranged reads; return its pin (with the
/// version the server reported) and the outcome.
fn sniff(
    client: &Arc<Client>,
    bucket: &str,
    o: &ListedObject,
) -> (ObjectPin, Result<formats::Sniffed, StatusReason>) {
    let pin = ObjectPin {
        etag: o.etag.clone(),
        version: None,
    };
    let name = o.key.rsplit('/').next().unwrap_or(&o.key).to_string();
    let mut reader = ObjectReader::new(client.clone(), bucket, &o.key, pin.clone(), o.size);
    let r =
        formats::sniff_reader(&mut reader, &name).map_err(
            |e| match crate::s3::client::s3_error_of(&e) {
                Some(s3) => StatusReason::new(s3.code(), s3.to_string()),
                None => StatusReason::new("PC-CAT-009", e.to_string()),
            },
        );
    let pin = ObjectPin {
        version: reader.version.take(),
        ..pin
    };
    (pin, r)
}
