//! A fixed-size bitset over the document ids of one index segment: what a
//! query matches there, and what a caller combines with AND, OR and NOT.

/// A document id within one segment.
pub type DocId = u32;

/// A set of a segment's document ids.
#[derive(Clone, Debug)]
pub struct DocSet {
    words: Vec<u64>,
    len: u32,
}

impl DocSet {
    /// The empty set over `len` ids (`0..len`).
    pub fn empty(len: u32) -> DocSet {
        DocSet {
            words: vec![0; (len as usize).div_ceil(64)],
            len,
        }
    }

    /// The set of every id in `0..len`.
    pub fn full(len: u32) -> DocSet {
        let mut words = vec![u64::MAX; (len as usize).div_ceil(64)];
        if let Some(last) = words.last_mut() {
            let tail = len % 64;
            if tail != 0 {
                *last = (1 << tail) - 1;
            }
        }
        DocSet { words, len }
    }

    /// The number of ids the set ranges over (not its count).
    pub fn universe(&self) -> u32 {
        self.len
    }

    /// Add `d`.
    pub fn insert(&mut self, d: DocId) {
        self.words[(d / 64) as usize] |= 1 << (d % 64);
    }

    /// True when `d` is in the set.
    pub fn contains(&self, d: DocId) -> bool {
        self.words[(d / 64) as usize] & (1 << (d % 64)) != 0
    }

    /// Keep only what `o` holds too.
    pub fn and(&mut self, o: &DocSet) {
        for (a, b) in self.words.iter_mut().zip(&o.words) {
            *a &= b;
        }
    }

    /// Add what `o` holds.
    pub fn or(&mut self, o: &DocSet) {
        for (a, b) in self.words.iter_mut().zip(&o.words) {
            *a |= b;
        }
    }

    /// Remove what `o` holds.
    pub fn minus(&mut self, o: &DocSet) {
        for (a, b) in self.words.iter_mut().zip(&o.words) {
            *a &= !b;
        }
    }

    /// How many ids are in the set.
    pub fn count(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// True when no id is in the set.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// The ids in the set, ascending.
    pub fn iter(&self) -> impl Iterator<Item = DocId> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let t = w.trailing_zeros();
                w &= w - 1;
                Some(i as u32 * 64 + t)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_algebra() {
        let mut a = DocSet::empty(130);
        for d in [0, 5, 64, 129] {
            a.insert(d);
        }
        let mut b = DocSet::empty(130);
        for d in [5, 129] {
            b.insert(d);
        }
        let mut x = a.clone();
        x.minus(&b);
        assert_eq!(x.iter().collect::<Vec<_>>(), [0, 64]);
        x.or(&b);
        assert_eq!(x.count(), 4);
        x.and(&b);
        assert_eq!(x.iter().collect::<Vec<_>>(), [5, 129]);
        assert!(x.contains(129) && !x.contains(0));
        for n in [0, 1, 63, 64, 65, 130] {
            let full = DocSet::full(n);
            assert_eq!(full.count(), u64::from(n));
            assert_eq!(full.iter().last(), n.checked_sub(1));
        }
    }
}
