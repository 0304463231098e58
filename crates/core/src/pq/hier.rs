//! `HierFfs`: any number of buckets indexed by a hierarchical bitmap.

use super::arena::Arena;
use super::exact_cffs::Refused;
use super::range::{BucketConfig, FixedRange};
use super::{Handle, IntPq, PqConfigError, PqStats, PushError, Rank};
use crate::bitmap::HierBitmap;

/// A bucketed queue over any number of buckets whose non-empty buckets are
/// tracked by a [`HierBitmap`] of `ceil(log64 n)` levels (at least one):
/// push, pop and remove cost O(levels) — 2 levels up to 4096 buckets,
/// 3 up to 262 144.
///
/// Ordering: increasing `(bucket, seq)` with `bucket = (rank − min_rank) /
/// granularity` after the [`OutOfRange`](super::OutOfRange) policy — exact
/// `(rank, seq)` order when the granularity is 1 and nothing is clamped.
/// The policy tree's `hffs` node queues refuse both sides and keep the
/// refused ranks in an exact spill heap (`ExactHier`), so they never clamp.
#[derive(Clone, Debug)]
pub struct HierFfs<V> {
    bits: HierBitmap,
    arena: Arena<V>,
    range: FixedRange,
    /// A lower bound of the first non-empty bucket (see `Cffs`).
    hint: usize,
}

impl<V> HierFfs<V> {
    /// Largest number of buckets (bucket indices are `u32`).
    pub const MAX_BUCKETS: usize = u32::MAX as usize;

    /// A queue with `cfg.buckets` buckets.
    pub fn new(cfg: BucketConfig) -> Result<HierFfs<V>, PqConfigError> {
        let range = FixedRange::new(&cfg, "HierFfs", Self::MAX_BUCKETS)?;
        Ok(HierFfs {
            bits: HierBitmap::new(cfg.buckets),
            arena: Arena::new(cfg.buckets, cfg.capacity),
            range,
            hint: 0,
        })
    }

    /// Number of bitmap levels: `ceil(log64 buckets)`, at least 1.
    pub fn levels(&self) -> usize {
        self.bits.depth()
    }

    /// Pushes `value` if `rank` lies in the fixed range; otherwise gives it
    /// back as [`Refused::Outside`] with nothing counted (a later
    /// [`IntPq::push`] applies and counts the policy). The push of
    /// [`ExactHier`](super::ExactHier): no `PqError` is built in range.
    #[inline]
    pub(crate) fn push_in_range(&mut self, rank: Rank, value: V) -> Result<Handle, Refused<V>> {
        match self.range.in_range(rank) {
            Some(b) => self.file(b, rank, value).map_err(Refused::Error),
            None => Err(Refused::Outside(value)),
        }
    }

    /// Files `value` in bucket `b`.
    #[inline]
    fn file(&mut self, b: usize, rank: Rank, value: V) -> Result<Handle, PushError<V>> {
        let (h, was_empty) = self.arena.push_back(b, rank, value)?;
        if was_empty {
            self.bits.set_in_range(b);
        }
        self.hint = self.hint.min(b);
        Ok(h)
    }
}

impl<V> IntPq<V> for HierFfs<V> {
    #[inline]
    fn push(&mut self, rank: Rank, value: V) -> Result<Handle, PushError<V>> {
        let b = match self.range.bucket(rank) {
            Ok(b) => b,
            Err(error) => return Err(PushError { error, value }),
        };
        self.file(b, rank, value)
    }

    #[inline]
    fn pop_min(&mut self) -> Option<(Rank, V)> {
        let b = self.bits.first_set_from(self.hint)?;
        self.hint = b;
        let (rank, value, now_empty) = self.arena.pop_front(b)?;
        if now_empty {
            self.bits.clear_in_range(b);
        }
        Some((rank, value))
    }

    fn peek_min_rank(&self) -> Option<Rank> {
        self.arena.front_rank(self.bits.first_set()?)
    }

    fn remove(&mut self, handle: Handle) -> Option<V> {
        let (b, value, now_empty) = self.arena.remove(handle)?;
        if now_empty {
            self.bits.clear(b);
        }
        Some(value)
    }

    fn len(&self) -> usize {
        self.arena.len()
    }

    fn memory_bytes(&self) -> usize {
        self.arena.memory_bytes() + self.bits.memory_bytes()
    }

    fn stats(&self) -> PqStats {
        self.range.stats
    }
}
