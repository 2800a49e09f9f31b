//! A least-recently-used map bounded by the bytes its values stand for
//! (the caller says how many each one costs), shared by threads.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Values that together cost at most `budget` bytes; the least recently
/// used go first.
#[derive(Debug)]
pub struct ByteLru<K, V> {
    budget: u64,
    inner: Mutex<Inner<K, V>>,
}

#[derive(Debug)]
struct Inner<K, V> {
    /// Value, its cost and the tick of its last use.
    map: HashMap<K, (V, u64, u64)>,
    bytes: u64,
    tick: u64,
}

impl<K: Eq + Hash + Clone, V: Clone> ByteLru<K, V> {
    /// An empty map holding at most `budget` bytes.
    pub fn new(budget: u64) -> Self {
        ByteLru {
            budget,
            inner: Mutex::new(Inner {
                map: HashMap::new(),
                bytes: 0,
                tick: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<K, V>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The most the values may cost together.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// The value under `k`, now the most recently used.
    pub fn get(&self, k: &K) -> Option<V> {
        let mut g = self.lock();
        g.tick += 1;
        let tick = g.tick;
        g.map.get_mut(k).map(|e| {
            e.2 = tick;
            e.0.clone()
        })
    }

    /// Charge `bytes` for the value under `k` if it is still held and
    /// `same` accepts it (a value that shrank after it was put), evicting
    /// as [`ByteLru::put`] does.
    pub fn recharge(&self, k: &K, bytes: u64, same: impl Fn(&V) -> bool) {
        let mut g = self.lock();
        let Some(e) = g.map.get_mut(k).filter(|e| same(&e.0)) else {
            return;
        };
        let old = std::mem::replace(&mut e.1, bytes);
        g.bytes = g.bytes - old + bytes;
        self.evict(&mut g);
    }

    /// Insert, evicting the least recently used until the rest fits; a
    /// value costing more than the whole budget is not kept.
    pub fn put(&self, k: K, v: V, bytes: u64) {
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
        self.evict(&mut g);
    }

    /// Drop the least recently used until the rest fits the budget.
    fn evict(&self, g: &mut Inner<K, V>) {
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

    /// Keep only the entries whose key `keep` accepts.
    pub fn retain(&self, keep: impl Fn(&K) -> bool) {
        let mut g = self.lock();
        g.map.retain(|k, _| keep(k));
        g.bytes = g.map.values().map(|e| e.1).sum();
    }

    /// What the values held now cost together.
    #[cfg(test)]
    fn bytes(&self) -> u64 {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::ByteLru;

    #[test]
    fn the_least_recently_used_go_first_and_oversized_values_are_not_kept() {
        let c: ByteLru<&str, u32> = ByteLru::new(10);
        c.put("a", 1, 4);
        c.put("b", 2, 4);
        assert_eq!(c.get(&"a"), Some(1));
        c.put("c", 3, 4);
        assert_eq!(c.get(&"b"), None, "b was used least recently");
        assert_eq!(c.get(&"a"), Some(1));
        assert_eq!(c.bytes(), 8);
        c.put("big", 4, 11);
        assert_eq!(c.get(&"big"), None);
        c.put("a", 5, 2);
        assert_eq!((c.get(&"a"), c.bytes()), (Some(5), 6));
        c.retain(|k| *k != "c");
        assert_eq!((c.get(&"c"), c.bytes()), (None, 2));
    }

    #[test]
    fn a_recharged_value_costs_its_new_size_and_others_are_left_alone() {
        let c: ByteLru<&str, u32> = ByteLru::new(10);
        c.put("a", 1, 8);
        c.recharge(&"a", 2, |v| *v == 1);
        c.put("b", 2, 8);
        assert_eq!((c.get(&"a"), c.bytes()), (Some(1), 10));
        c.recharge(&"gone", 1, |_| true);
        assert_eq!((c.get(&"gone"), c.bytes()), (None, 10));
        // Another value under the key: not this one's size.
        c.recharge(&"a", 1, |v| *v == 7);
        assert_eq!(c.bytes(), 10);
        // Grown past the budget: the least recently used (b) goes.
        c.recharge(&"b", 9, |_| true);
        assert_eq!((c.get(&"a"), c.get(&"b"), c.bytes()), (Some(1), None, 2));
    }
}
