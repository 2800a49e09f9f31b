//! A fast hasher for in-memory hash tables keyed by byte strings (the
//! row-encoded keys of joins, GROUP BY and DISTINCT). The standard
//! library's SipHash defends against chosen keys, which a query over local
//! data does not need, at several times the cost per key.
//!
//! Words of 8 bytes are folded in by multiply and rotate, then the result
//! is mixed so that both its low bits (the bucket) and its high bits (the
//! tag the table compares first) depend on every input byte.

use std::hash::{BuildHasherDefault, Hasher};

/// Odd constant with well-spread bits (from the golden ratio).
const K: u64 = 0x9e37_79b9_7f4a_7c15;

/// The hasher; see the module documentation.
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last));
        }
        // The length too: keys that differ only by trailing zero bytes.
        self.add(bytes.len() as u64);
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // The finaliser of MurmurHash3: every bit reaches every other.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// A `HashMap`/`HashSet` hasher choice: `HashMap<K, V, FastBuild>`.
pub type FastBuild = BuildHasherDefault<FastHasher>;

/// A `HashMap` with [`FastHasher`].
pub type FastMap<K, V> = std::collections::HashMap<K, V, FastBuild>;

/// A `HashSet` with [`FastHasher`].
pub type FastSet<T> = std::collections::HashSet<T, FastBuild>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    fn h(b: &[u8]) -> u64 {
        FastBuild::default().hash_one(b)
    }

    #[test]
    fn equal_keys_hash_equal_and_near_keys_differ() {
        assert_eq!(h(b"agent-1"), h(b"agent-1"));
        assert_ne!(h(b"agent-1"), h(b"agent-2"));
        assert_ne!(h(b"a"), h(b"a\0"));
        assert_ne!(h(b""), h(b"\0"));
        // Low bits (the bucket) spread over sequential keys.
        let buckets: std::collections::HashSet<u64> =
            (0u32..1024).map(|i| h(&i.to_le_bytes()) & 1023).collect();
        assert!(buckets.len() > 550, "{}", buckets.len());
    }

    #[test]
    fn a_table_with_many_keys_works() {
        let mut m: FastMap<Box<[u8]>, usize> = FastMap::default();
        for i in 0..10_000usize {
            m.insert(format!("session-{i}").into_bytes().into(), i);
        }
        assert_eq!(m.len(), 10_000);
        assert_eq!(m.get(b"session-4242".as_slice()), Some(&4242));
    }
}
