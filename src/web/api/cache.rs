//! The document cache: decoded trajectories, listings and their sort
//! orders, bounded in bytes and keyed by WarehouseView generation.

use std::sync::Arc;

use serde_json::Value;

use super::trajectory::Doc;
use crate::util::lru::ByteLru;

/// Key of a cached trajectory or runs list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct DocKey {
    pub(super) generation: u64,
    pub(super) dataset: String,
    pub(super) source: String,
    pub(super) document: String,
}

/// A cached value.
#[derive(Clone)]
pub(super) enum CacheEntry {
    /// A decoded trajectory.
    Doc(Arc<Doc>),
    /// The runs list of a Dataset.
    Rows(Arc<Vec<Value>>),
    /// A sort order of the runs list.
    Order(Arc<Vec<u32>>),
}

/// A byte-bounded least-recently-used cache of decoded trajectories and
/// runs lists, keyed by WarehouseView generation so a refresh never serves old
/// content.
pub struct DocCache(ByteLru<DocKey, CacheEntry>);

impl DocCache {
    /// A cache holding at most about `budget` bytes.
    pub(crate) fn new(budget: usize) -> Self {
        DocCache(ByteLru::new(budget as u64))
    }

    /// A cached entry.
    pub(super) fn get(&self, k: &DocKey) -> Option<CacheEntry> {
        self.0.get(k)
    }

    /// Insert, evicting the least recently used; entries larger than the
    /// whole budget are not kept.
    pub(super) fn put(&self, k: DocKey, v: CacheEntry, bytes: usize) {
        self.0.put(k, v, bytes as u64);
    }

    /// Drop entries of other generations.
    pub(crate) fn retain_generation(&self, generation: u64) {
        self.0.retain(|k| k.generation == generation);
    }
}
