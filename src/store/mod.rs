//! The Storyline Lance store: three Lance tables (`runs`, `steps`,
//! `tool_calls`) plus a content-addressed `objects` table for large cells,
//! published atomically through a `CURRENT` pointer.
//!
//! This is the only module that touches Lance (and the async runtime it
//! needs); everything here is a synchronous facade over one private Tokio
//! runtime. Layout:
//!
//! ```text
//! root/
//!   CURRENT                                   committed snapshot (JSON)
//!   .write.lock                               serialises local writers
//!   objects.lance/                            large cells by BLAKE3 id
//!   generations/<gen>/{runs,steps,tool_calls}.lance
//! ```
//!
//! Publish order is objects → tables → `CURRENT`; readers open each table at
//! the version `CURRENT` names, so a crash at any point leaves the old or
//! the new snapshot visible, never a mix.

pub mod current;
pub mod events;
mod lance_io;
pub mod mirrors;
mod object_reader;
mod objects;
pub mod publish;
mod read;
mod schema;
mod views;
mod write;

use std::path::{Path, PathBuf};

pub use current::{Committed, Current};
pub use objects::{is_descriptor, OBJECT_INLINE_LIMIT};
pub use read::{StoreReader, Tally};
pub use views::Views;
pub use write::{StoreWriter, WriteSummary};

/// Store errors.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// `CURRENT` is missing or invalid.
    #[error("{0}")]
    Current(String),
    /// Lance reported an error.
    #[error("Lance: {0}")]
    Lance(String),
    /// File-system error.
    #[error("{0}")]
    Io(String),
    /// Another writer holds the store lock.
    #[error("another process is writing this store")]
    Locked,
    /// Stored data is inconsistent (e.g. a missing object).
    #[error("store data is inconsistent: {0}")]
    Corrupt(String),
    /// A bug.
    #[error("internal store error: {0}")]
    Internal(String),
}

impl StoreError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::Current(_) => "PC-STO-001",
            StoreError::Lance(_) => "PC-STO-002",
            StoreError::Io(_) => "PC-STO-003",
            StoreError::Locked => "PC-STO-004",
            StoreError::Corrupt(_) => "PC-STO-005",
            StoreError::Internal(_) => "PC-STO-099",
        }
    }
}

/// A Storyline Lance store on local disk or under an S3 prefix.
#[derive(Debug, Clone)]
pub struct StorylineLanceStore {
    /// The local directory (empty for a store on S3).
    root: PathBuf,
    /// The directory or `s3://bucket/prefix` URL the tables are under.
    base: String,
    current: Current,
}

impl StorylineLanceStore {
    /// Open a store, pinning the snapshot its `CURRENT` names now.
    pub fn open(root: &Path) -> Result<Self, StoreError> {
        let current = Current::read(root)?;
        Ok(StorylineLanceStore {
            root: root.to_path_buf(),
            base: root.display().to_string(),
            current,
        })
    }

    /// Open a store under `s3://bucket/prefix` (`prefix` empty or ending in
    /// `/`), pinning the snapshot its `CURRENT` object names now; also
    /// returns that object's ETag.
    pub fn open_s3(bucket: &str, prefix: &str) -> Result<(Self, String), StoreError> {
        let (current, etag) = Current::read_s3(bucket, prefix)?;
        Ok((
            StorylineLanceStore {
                root: PathBuf::new(),
                base: format!("s3://{bucket}/{prefix}"),
                current,
            },
            etag,
        ))
    }

    /// The pinned pointer.
    pub fn current(&self) -> &Current {
        &self.current
    }

    /// The store directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A reader over the pinned snapshot.
    pub fn reader(&self) -> Result<StoreReader, StoreError> {
        Ok(StoreReader::at(
            self.base.clone(),
            self.current.committed.clone(),
        ))
    }

    /// Compact tables, refresh the scalar indexes, drop versions older than
    /// the retention (keeping the committed ones) and unreferenced objects,
    /// then publish the result through `CURRENT`. The store's full-text
    /// index is derived data of the layer above: `ingest::maintain` rebuilds
    /// it for the new snapshot.
    pub fn maintain(&mut self, options: &MaintainOptions) -> Result<MaintainReport, StoreError> {
        if self.root.as_os_str().is_empty() {
            return Err(StoreError::Io(
                "maintenance of a store on S3 is not supported".into(),
            ));
        }
        let report = write::maintain(&self.root, options)?;
        self.current = Current::read(&self.root)?;
        Ok(report)
    }
}

/// Options of [`StorylineLanceStore::maintain`].
#[derive(Debug, Clone)]
pub struct MaintainOptions {
    /// Versions older than this (and not committed) are removed.
    pub retention: std::time::Duration,
    /// Compact small fragments.
    pub compact: bool,
    /// Build or refresh scalar indexes.
    pub reindex: bool,
    /// Drop objects no committed row references.
    pub gc_objects: bool,
}

impl Default for MaintainOptions {
    fn default() -> Self {
        MaintainOptions {
            retention: std::time::Duration::from_hours(168),
            compact: true,
            reindex: true,
            gc_objects: true,
        }
    }
}

/// What [`StorylineLanceStore::maintain`] did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct MaintainReport {
    /// Fragments removed by compaction.
    pub fragments_removed: u64,
    /// Fragments added by compaction.
    pub fragments_added: u64,
    /// Indexes built or refreshed.
    pub indexes: u64,
    /// Old versions removed.
    pub versions_removed: u64,
    /// Unreferenced objects removed.
    pub objects_removed: u64,
    /// The new generation.
    pub generation: String,
}
