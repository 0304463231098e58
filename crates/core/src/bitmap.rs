//! A hierarchical find-first-set bitmap over any number of bits.
//!
//! Level 0 holds one bit per index; each higher level holds one bit per
//! non-zero word of the level below, up to a single top word. The number of
//! levels is `ceil(log64(n))` (at least one), computed exactly with integer
//! arithmetic — never a floor that under-provisions the array for some `n`.
//! `set`, `clear` and `first_set` cost O(levels): 1 level up to 64 bits,
//! 2 up to 4096, 3 up to 262 144, 4 up to 16.7 M.

/// Most levels a bitmap can have: 64^11 > 2^64 bits.
const MAX_LEVELS: usize = 11;

/// A hierarchical bitmap of a fixed number of bits.
///
/// All levels live in one array, leaf level first, so the single top word
/// is the array's last word and a walk from the top needs no indirection.
#[derive(Clone, Debug)]
pub struct HierBitmap {
    /// Every level's words; level `l` starts at `off[l]`.
    words: Vec<u64>,
    off: [usize; MAX_LEVELS],
    depth: usize,
    len: usize,
}

impl HierBitmap {
    /// A bitmap of `len` bits, all clear. `len` may be zero.
    pub fn new(len: usize) -> HierBitmap {
        let mut off = [0; MAX_LEVELS];
        let mut depth = 0;
        let mut total = 0;
        let mut words = len.div_ceil(64).max(1);
        loop {
            off[depth] = total;
            total += words;
            depth += 1;
            if words == 1 {
                break;
            }
            words = words.div_ceil(64);
        }
        HierBitmap {
            words: vec![0; total],
            off,
            depth,
            len,
        }
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
        self.depth
    }

    /// Bytes used by the words.
    pub fn memory_bytes(&self) -> usize {
        self.words.len() * 8
    }

    #[inline(always)]
    fn top(&self) -> u64 {
        self.words.last().copied().unwrap_or(0)
    }

    /// True if no bit is set.
    #[inline]
    pub fn none(&self) -> bool {
        self.top() == 0
    }

    /// Is bit `i` set? (`false` for `i >= len()`.)
    #[inline]
    pub fn get(&self, i: usize) -> bool {
        i < self.len && self.words[i / 64] & (1 << (i % 64)) != 0
    }

    /// Sets bit `i`; indices `>= len()` are ignored.
    #[inline(always)]
    pub fn set(&mut self, i: usize) {
        if i >= self.len {
            return;
        }
        self.set_in_range(i);
    }

    /// Sets bit `i < len()` (a larger `i` sets a padding bit or panics on
    /// the index: callers guarantee the range).
    #[inline(always)]
    pub(crate) fn set_in_range(&mut self, i: usize) {
        debug_assert!(i < self.len);
        // Level 0 starts at word 0; most sets stop there.
        let w = &mut self.words[i / 64];
        let was = *w;
        *w = was | 1 << (i % 64);
        if was != 0 {
            return;
        }
        let mut i = i / 64;
        for l in 1..self.depth {
            let w = &mut self.words[self.off[l] + i / 64];
            let was = *w;
            *w = was | 1 << (i % 64);
            if was != 0 {
                return;
            }
            i /= 64;
        }
    }

    /// Clears bit `i`; indices `>= len()` are ignored.
    #[inline(always)]
    pub fn clear(&mut self, i: usize) {
        if i >= self.len {
            return;
        }
        self.clear_in_range(i);
    }

    /// Clears bit `i < len()` (callers guarantee the range).
    #[inline(always)]
    pub(crate) fn clear_in_range(&mut self, i: usize) {
        debug_assert!(i < self.len);
        let w = &mut self.words[i / 64];
        *w &= !(1 << (i % 64));
        if *w != 0 {
            return;
        }
        let mut i = i / 64;
        for l in 1..self.depth {
            let w = &mut self.words[self.off[l] + i / 64];
            *w &= !(1 << (i % 64));
            if *w != 0 {
                return;
            }
            i /= 64;
        }
    }

    /// Lowest set bit, if any.
    #[inline(always)]
    pub fn first_set(&self) -> Option<usize> {
        let top = self.top();
        if top == 0 {
            return None;
        }
        let mut i = top.trailing_zeros() as usize;
        for l in (0..self.depth - 1).rev() {
            let w = self.words[self.off[l] + i];
            i = i * 64 + w.trailing_zeros() as usize;
        }
        Some(i)
    }

    /// Lowest set bit, given `hint <= ` that bit (any lower bound): the
    /// leaf word holding `hint` is tried first, which is where a queue
    /// served in rank order usually finds its next bucket.
    #[inline(always)]
    pub fn first_set_from(&self, hint: usize) -> Option<usize> {
        if let Some(&w) = self.words.get(hint / 64)
            && hint < self.len
        {
            let w = w & (!0u64 << (hint % 64));
            if w != 0 {
                return Some((hint / 64) * 64 + w.trailing_zeros() as usize);
            }
        }
        self.next_set(hint)
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
            let word = self.words[self.off[l] + idx / 64] & (!0u64 << (idx % 64));
            if word != 0 {
                let mut i = (idx / 64) * 64 + word.trailing_zeros() as usize;
                while l > 0 {
                    l -= 1;
                    i = i * 64 + self.words[self.off[l] + i].trailing_zeros() as usize;
                }
                return Some(i);
            }
            l += 1;
            if l == self.depth {
                return None;
            }
            idx = idx / 64 + 1;
            let level_words = self.level_words(l);
            if idx >= level_words * 64 {
                return None;
            }
        }
    }

    fn level_words(&self, l: usize) -> usize {
        let end = if l + 1 < self.depth {
            self.off[l + 1]
        } else {
            self.words.len()
        };
        end - self.off[l]
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
                // Any lower bound of the first set bit finds it.
                let hint = s
                    .first()
                    .map_or(rng.random_range(0..n + 1), |&f| rng.random_range(0..=f));
                assert_eq!(
                    b.first_set_from(hint),
                    s.first().copied(),
                    "n={n} hint={hint}"
                );
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
