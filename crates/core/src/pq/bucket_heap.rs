//! `BucketHeap`: Eiffel's baseline — buckets whose non-empty indices sit in
//! a binary heap.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::arena::Arena;
use super::range::{BucketConfig, FixedRange};
use super::{Handle, IntPq, PqConfigError, PqStats, PushError, Rank};

/// Bucketed queue whose non-empty bucket indices are kept in a binary
/// min-heap: push and pop cost O(log buckets) when a bucket changes from
/// empty to non-empty or back, O(1) otherwise.
///
/// A bucket emptied by [`remove`](IntPq::remove) keeps its heap entry
/// until that entry reaches the top, where it is dropped (lazy deletion).
/// A per-bucket flag keeps each bucket in the heap at most once, so the
/// heap never holds more than `buckets` entries, and the top entry is
/// always a non-empty bucket after every operation.
///
/// Ordering: increasing `(bucket, seq)` with `bucket = (rank − min_rank) /
/// granularity` after the [`OutOfRange`](super::OutOfRange) policy — exact
/// `(rank, seq)` order when the granularity is 1 and nothing is clamped.
#[derive(Clone, Debug)]
pub struct BucketHeap<V> {
    heap: BinaryHeap<Reverse<u32>>,
    in_heap: Vec<bool>,
    arena: Arena<V>,
    range: FixedRange,
}

impl<V> BucketHeap<V> {
    /// Largest number of buckets.
    pub const MAX_BUCKETS: usize = u32::MAX as usize;

    /// A queue with `cfg.buckets` buckets.
    pub fn new(cfg: BucketConfig) -> Result<BucketHeap<V>, PqConfigError> {
        let range = FixedRange::new(&cfg, "BucketHeap", Self::MAX_BUCKETS)?;
        Ok(BucketHeap {
            heap: BinaryHeap::with_capacity(cfg.buckets),
            in_heap: vec![false; cfg.buckets],
            arena: Arena::new(cfg.buckets, cfg.capacity),
            range,
        })
    }

    /// Drops heap entries of empty buckets from the top.
    #[inline]
    fn clean_top(&mut self) {
        while let Some(&Reverse(b)) = self.heap.peek() {
            if !self.arena.bucket_is_empty(b as usize) {
                return;
            }
            self.heap.pop();
            self.in_heap[b as usize] = false;
        }
    }
}

impl<V> IntPq<V> for BucketHeap<V> {
    #[inline]
    fn push(&mut self, rank: Rank, value: V) -> Result<Handle, PushError<V>> {
        let b = match self.range.bucket(rank) {
            Ok(b) => b,
            Err(error) => return Err(PushError { error, value }),
        };
        let (h, _) = self.arena.push_back(b, rank, value)?;
        if !self.in_heap[b] {
            self.in_heap[b] = true;
            self.heap.push(Reverse(b as u32));
        }
        Ok(h)
    }

    #[inline]
    fn pop_min(&mut self) -> Option<(Rank, V)> {
        let &Reverse(b) = self.heap.peek()?;
        let (rank, value, _) = self.arena.pop_front(b as usize)?;
        self.clean_top();
        Some((rank, value))
    }

    fn peek_min_rank(&self) -> Option<Rank> {
        let &Reverse(b) = self.heap.peek()?;
        self.arena.front_rank(b as usize)
    }

    fn remove(&mut self, handle: Handle) -> Option<V> {
        let (_, value, _) = self.arena.remove(handle)?;
        self.clean_top();
        Some(value)
    }

    fn len(&self) -> usize {
        self.arena.len()
    }

    fn memory_bytes(&self) -> usize {
        self.arena.memory_bytes()
            + self.heap.capacity() * size_of::<u32>()
            + self.in_heap.capacity() * size_of::<bool>()
    }

    fn stats(&self) -> PqStats {
        self.range.stats
    }
}
