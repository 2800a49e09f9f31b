//! The catalog: Dataset URIs, Source discovery and the Catalog Snapshot.
//!
//! A Catalog Snapshot is the set of Sources one command read, each pinned by
//! a [`SnapshotRef`]; its `snapshot_id` digests the Dataset URI, every Source
//! path and reference, and every discovery error. May call `formats` and
//! `util`; never `cli`.

mod discover;
mod error;
pub mod orphans;
pub mod projection;
pub mod read;
mod remote;
mod snapshot;
mod source;
pub mod stores;
mod uri;

use std::path::Path;

pub use discover::{discover, Deadline, DiscoveryLimits, PhysicalEntry, Role};
pub use error::CatalogError;
pub use read::EventsSummary;
pub use snapshot::{ParseSnapshotRefError, ReadConsistency, SnapshotDigest, SnapshotRef};
pub use source::{Capabilities, RemoteObject, Source, SourceKind, SourceStatus, StatusReason};
pub use stores::read_current;
pub use uri::DatasetUri;

/// The Sources of a Dataset, pinned, with their digest.
#[derive(Debug, Clone)]
pub struct CatalogSnapshot {
    /// The Dataset.
    pub dataset: DatasetUri,
    /// Sources in path order.
    pub sources: Vec<Source>,
    /// Every entry visited (only when requested).
    pub physical: Vec<PhysicalEntry>,
    /// Directories that could not be read: (path, reason).
    pub discovery_errors: Vec<(String, String)>,
    /// What interrupted imports left in the Dataset (not in the digest:
    /// they are not part of it).
    pub orphans: Vec<orphans::Orphan>,
    /// Stable digest of the above.
    pub snapshot_id: String,
}

impl CatalogSnapshot {
    /// Discover and pin the Sources of `dataset`.
    pub fn open(
        dataset: &DatasetUri,
        limits: DiscoveryLimits,
        physical: bool,
    ) -> Result<Self, CatalogError> {
        let _phase = crate::util::stats::phase(crate::util::stats::Phase::Discover);
        let d = match dataset {
            DatasetUri::Local(root) => {
                check_root(root, dataset)?;
                discover(root, limits, physical)?
            }
            DatasetUri::S3(uri) => remote::discover(uri, limits, physical)?,
        };
        let mut digest = SnapshotDigest::default();
        for s in &d.sources {
            digest.add("source", &s.source_path, &s.snapshot_ref.to_string());
        }
        for (p, e) in &d.discovery_errors {
            digest.add("error", p, e);
        }
        let snapshot_id = digest.finish(&dataset.to_string());
        Ok(CatalogSnapshot {
            dataset: dataset.clone(),
            sources: d.sources,
            physical: d.physical,
            discovery_errors: d.discovery_errors,
            orphans: d.orphans,
            snapshot_id,
        })
    }
}

fn check_root(root: &Path, dataset: &DatasetUri) -> Result<(), CatalogError> {
    match std::fs::metadata(root) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(CatalogError::NotADirectory {
            uri: dataset.to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(CatalogError::NotFound {
            uri: dataset.to_string(),
        }),
        Err(e) => Err(CatalogError::Io {
            source_path: ".".into(),
            reason: e.to_string(),
        }),
    }
}
