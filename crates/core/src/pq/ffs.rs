//! `Ffs`: up to 64 buckets indexed by one 64-bit word.

use super::arena::Arena;
use super::range::{BucketConfig, FixedRange};
use super::{Handle, IntPq, PqConfigError, PqStats, PushError, Rank};

/// A bucketed queue of at most 64 buckets whose non-empty buckets are the
/// set bits of one word; the first bucket is one `trailing_zeros`.
///
/// Ordering: increasing `(bucket, seq)` with `bucket = (rank − min_rank) /
/// granularity` after the [`OutOfRange`](super::OutOfRange) policy — exact
/// `(rank, seq)` order when the granularity is 1 and nothing is clamped.
#[derive(Clone, Debug)]
pub struct Ffs<V> {
    word: u64,
    arena: Arena<V>,
    range: FixedRange,
}

impl<V> Ffs<V> {
    /// Largest number of buckets.
    pub const MAX_BUCKETS: usize = 64;

    /// A queue with `cfg.buckets` ≤ 64 buckets.
    pub fn new(cfg: BucketConfig) -> Result<Ffs<V>, PqConfigError> {
        let range = FixedRange::new(&cfg, "Ffs", Self::MAX_BUCKETS)?;
        Ok(Ffs {
            word: 0,
            arena: Arena::new(cfg.buckets, cfg.capacity),
            range,
        })
    }
}

impl<V> IntPq<V> for Ffs<V> {
    #[inline]
    fn push(&mut self, rank: Rank, value: V) -> Result<Handle, PushError<V>> {
        let b = match self.range.bucket(rank) {
            Ok(b) => b,
            Err(error) => return Err(PushError { error, value }),
        };
        let (h, _) = self.arena.push_back(b, rank, value)?;
        self.word |= 1 << b;
        Ok(h)
    }

    #[inline]
    fn pop_min(&mut self) -> Option<(Rank, V)> {
        if self.word == 0 {
            return None;
        }
        let b = self.word.trailing_zeros() as usize;
        let (rank, value, now_empty) = self.arena.pop_front(b)?;
        if now_empty {
            self.word &= !(1 << b);
        }
        Some((rank, value))
    }

    fn peek_min_rank(&self) -> Option<Rank> {
        if self.word == 0 {
            return None;
        }
        self.arena.front_rank(self.word.trailing_zeros() as usize)
    }

    fn remove(&mut self, handle: Handle) -> Option<V> {
        let (b, value, now_empty) = self.arena.remove(handle)?;
        if now_empty {
            self.word &= !(1 << b);
        }
        Some(value)
    }

    fn len(&self) -> usize {
        self.arena.len()
    }

    fn memory_bytes(&self) -> usize {
        self.arena.memory_bytes()
    }

    fn stats(&self) -> PqStats {
        self.range.stats
    }
}
