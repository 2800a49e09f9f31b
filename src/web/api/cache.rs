//! The document cache: decoded trajectories, listings and their sort
//! orders, bounded in bytes and keyed by WarehouseView generation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::trajectory::Doc;

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
pub struct DocCache {
    budget: usize,
    inner: Mutex<CacheInner>,
}

#[derive(Default)]
struct CacheInner {
    map: HashMap<DocKey, (CacheEntry, usize, u64)>,
    bytes: usize,
    tick: u64,
}

impl DocCache {
    /// A cache holding at most about `budget` bytes.
    pub(crate) fn new(budget: usize) -> Self {
        DocCache {
            budget,
            inner: Mutex::new(CacheInner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheInner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A cached entry.
    pub(super) fn get(&self, k: &DocKey) -> Option<CacheEntry> {
        let mut g = self.lock();
        g.tick += 1;
        let tick = g.tick;
        g.map.get_mut(k).map(|e| {
            e.2 = tick;
            e.0.clone()
        })
    }

    /// Insert, evicting the least recently used; entries larger than the
    /// whole budget are not kept.
    pub(super) fn put(&self, k: DocKey, v: CacheEntry, bytes: usize) {
        if bytes > self.budget {
            return;
        }
        let mut g = self.lock();
        g.tick += 1;
        let tick = g.tick;
        if let Some(old) = g.map.insert(k, (v, bytes, tick)) {
            g.bytes -= old.1;
        }
        g.bytes += bytes;
        while g.bytes > self.budget {
            let Some(oldest) = g
                .map
                .iter()
                .min_by_key(|(_, e)| e.2)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(e) = g.map.remove(&oldest) {
                g.bytes -= e.1;
            }
        }
    }

    /// Drop entries of other generations.
    pub(crate) fn retain_generation(&self, generation: u64) {
        let mut g = self.lock();
        g.map.retain(|k, _| k.generation == generation);
        g.bytes = g.map.values().map(|e| e.1).sum();
    }
}
