//! A hierarchical find-first-set bitmap over any number of bits.
//!
//! Level 0 holds one bit per index; each higher level holds one bit per
//! non-zero word of the level below, up to a single top word. The number of
//! levels is `ceil(log64(n))` (at least one), computed exactly with integer
//! arithmetic — never a floor that under-provisions the array for some `n`.
//! `set`, `clear` and `first_set` cost O(levels): 1 level up to 64 bits,
//! 2 up to 4096, 3 up to 262 144, 4 up to 16.7 M.

/// A hierarchical bitmap of a fixed number of bits.
#[derive(Clone, Debug)]
pub struct HierBitmap {
    /// `levels[0]` is the leaf level; the last level has exactly one word.
    levels: Vec<Vec<u64>>,
    len: usize,
}

impl HierBitmap {
    /// A bitmap of `len` bits, all clear. `len` may be zero.
    pub fn new(len: usize) -> HierBitmap {
        let mut levels = Vec::new();
        let mut words = len.div_ceil(64).max(1);
        loop {
            levels.push(vec![0u64; words]);
            if words == 1 {
                break;
            }
            words = words.div_ceil(64);
        }
        HierBitmap { levels, len }
    }

    /// Number of bits.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the bitmap has no bits at all (`len() == 0`).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of levels (for tests and memory reports).
    pub fn depth(&self) -> usize {
        self.levels.len()
    }

    /// Bytes used by the words.
    pub fn memory_bytes(&self) -> usize {
        self.levels.iter().map(|l| l.len() * 8).sum()
    }

    /// True if no bit is set.
    #[inline]
    pub fn none(&self) -> bool {
        self.levels[self.levels.len() - 1][0] == 0
    }

    /// Is bit `i` set? (`false` for `i >= len()`.)
    #[inline]
    pub fn get(&self, i: usize) -> bool {
        i < self.len && self.levels[0][i / 64] & (1 << (i % 64)) != 0
    }

    /// Sets bit `i`; indices `>= len()` are ignored.
    #[inline]
    pub fn set(&mut self, i: usize) {
        if i >= self.len {
            return;
        }
        let mut i = i;
        for level in &mut self.levels {
            let w = &mut level[i / 64];
            let was = *w;
            *w |= 1 << (i % 64);
            if was != 0 {
                return;
            }
            i /= 64;
        }
    }

    /// Clears bit `i`; indices `>= len()` are ignored.
    #[inline]
    pub fn clear(&mut self, i: usize) {
        if i >= self.len {
            return;
        }
        let mut i = i;
        for level in &mut self.levels {
            let w = &mut level[i / 64];
            *w &= !(1 << (i % 64));
            if *w != 0 {
                return;
            }
            i /= 64;
        }
    }

    /// Lowest set bit, if any.
    #[inline]
    pub fn first_set(&self) -> Option<usize> {
        let top = self.levels.len() - 1;
        if self.levels[top][0] == 0 {
            return None;
        }
        let mut i = 0usize;
        for l in (0..=top).rev() {
            let w = self.levels[l][i];
            i = i * 64 + w.trailing_zeros() as usize;
        }
        Some(i)
    }

    /// Lowest set bit at index `>= from`, if any.
    pub fn next_set(&self, from: usize) -> Option<usize> {
        if from >= self.len {
            return None;
        }
        // Walk up while the rest of the current word is empty, then down.
        let mut idx = from;
        let mut l = 0;
        loop {
            let word = self.levels[l][idx / 64] & (!0u64 << (idx % 64));
            if word != 0 {
                let mut i = (idx / 64) * 64 + word.trailing_zeros() as usize;
                while l > 0 {
                    l -= 1;
                    i = i * 64 + self.levels[l][i].trailing_zeros() as usize;
                }
                return Some(i);
            }
            l += 1;
            if l == self.levels.len() {
                return None;
            }
            idx = idx / 64 + 1;
            if idx >= self.levels[l].len() * 64 {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn depth_is_ceil_log64() {
        for (n, d) in [
            (0, 1),
            (1, 1),
            (64, 1),
            (65, 2),
            (4096, 2),
            (4097, 3),
            (262_144, 3),
        ] {
            assert_eq!(HierBitmap::new(n).depth(), d, "n = {n}");
        }
    }

    #[test]
    fn matches_btreeset() {
        use rand::{Rng, SeedableRng};
        for n in [1usize, 63, 64, 65, 200, 4095, 4097, 10_000] {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(n as u64);
            let mut b = HierBitmap::new(n);
            let mut s = BTreeSet::new();
            for _ in 0..5_000 {
                let i = rng.random_range(0..n);
                if rng.random_bool(0.5) {
                    b.set(i);
                    s.insert(i);
                } else {
                    b.clear(i);
                    s.remove(&i);
                }
                assert_eq!(b.first_set(), s.first().copied());
                let from = rng.random_range(0..n + 2);
                assert_eq!(
                    b.next_set(from),
                    s.range(from..).next().copied(),
                    "n={n} from={from}"
                );
                assert_eq!(b.get(i), s.contains(&i));
            }
            // Out-of-range indices change nothing.
            let before = b.first_set();
            b.set(n + 3);
            b.clear(n + 3);
            assert!(!b.get(n + 3));
            assert_eq!(b.first_set(), before);
        }
    }
}
