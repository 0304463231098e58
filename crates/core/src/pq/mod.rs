//! Integer priority queues with PIFO semantics, after Eiffel (Saeed et al.,
//! NSDI'19).
//!
//! Packet ranks are integers in a bounded (and, for [`Cffs`], moving) range,
//! so a queue can keep one FIFO per *bucket* of ranks and find the first
//! non-empty bucket with find-first-set instructions instead of comparing
//! ranks. All queues here implement [`IntPq`]:
//!
//! | queue | index over non-empty buckets | buckets | cost of push / pop |
//! | --- | --- | --- | --- |
//! | [`Ffs`] | one 64-bit word | ≤ 64 | O(1) |
//! | [`HierFfs`] | [`HierBitmap`](crate::bitmap::HierBitmap), `ceil(log64 n)` levels | any | O(levels) |
//! | [`Cffs`] | two hierarchical bitmaps over a moving range | any, ×2 | O(levels) |
//! | [`Gradient`] | gradient queue: `a = Σ w_i`, `b = Σ i·w_i`, `ceil(log_G n)` levels | any | O(levels) (+ window for α < 2) |
//! | [`BucketHeap`] | binary heap of bucket indices | any | O(log buckets) |
//! | [`BinaryHeapPq`] | `std::collections::BinaryHeap` on (rank, seq) | — | O(log n) |
//! | [`SmallPq`] | none: a linear scan of a handful of elements | — | O(1) / O(n) |
//!
//! # Ordering guarantee (PIFO semantics at bucket granularity)
//!
//! A bucketed queue maps a rank `r` to a bucket `k = (r − min_rank) / g`
//! (integer division, `g` = granularity). Elements leave in increasing
//! order of `(k, seq)`, where `seq` is the push order: FIFO among elements
//! of one bucket, **even if their ranks differ**. With `g = 1` this is exact
//! PIFO order on `(rank, seq)`. An element whose rank was *clamped* (see
//! [`OutOfRange`]) is ordered by the bucket it was clamped to. The rank
//! handed back by [`IntPq::pop_min`] is always the rank that was pushed,
//! never the clamped one. [`BinaryHeapPq`] orders on `(rank, seq)` exactly
//! and never clamps. Each queue's own documentation restates its guarantee.
//!
//! # Memory
//!
//! Elements live in one slab arena per queue ([`IntPq::memory_bytes`]
//! reports it): each bucket is a doubly linked FIFO threaded through the
//! arena by `u32` indices, freed slots are reused, and the arena grows by
//! doubling only when every slot is live — no allocation per element in
//! steady state. Bucket tables and bitmaps are allocated once, when the
//! queue is built.
//!
//! # Handles
//!
//! [`IntPq::push`] returns a [`Handle`] (slot index + generation). Removing
//! an element bumps its slot's generation, so a stale handle — to an element
//! already popped or removed, even if its slot now holds another element —
//! makes [`IntPq::remove`] return `None`. (Generations are 32-bit and wrap:
//! a handle kept across 2³² reuses of the same slot could alias.)

mod arena;
mod binary_heap;
mod bucket_heap;
mod cffs;
mod exact_cffs;
mod ffs;
mod gradient;
mod hier;
mod range;
mod small;

#[cfg(test)]
mod tests;

pub use binary_heap::BinaryHeapPq;
pub use bucket_heap::BucketHeap;
pub use cffs::Cffs;
pub(crate) use exact_cffs::{ExactCffs, ExactHier, Filed};
pub use ffs::Ffs;
pub use gradient::{Gradient, MAX_EXACT_GROUP, SearchStats};
pub use hier::HierFfs;
pub use range::{BucketConfig, OutOfRange};
pub use small::SmallPq;

/// A packet rank. Lower ranks leave first.
pub type Rank = u64;

/// Identifies one queued element for O(1) removal; see the module docs on
/// stale handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Handle {
    idx: u32,
    generation: u32,
}

/// Why a queue refused an element.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PqError {
    /// The rank lies outside the ranks the queue can hold right now and the
    /// queue's policy for that side is [`OutOfRange::Reject`]. `min..=max`
    /// is the range of ranks accepted at the time of the push.
    #[error("rank {rank} is out of range: the queue accepts {min}..={max} now")]
    OutOfRange {
        /// The rank that was pushed.
        rank: Rank,
        /// Lowest rank accepted now.
        min: Rank,
        /// Highest rank accepted now.
        max: Rank,
    },
    /// The arena already holds the largest number of elements it can index.
    #[error("queue is full: at most {capacity} elements")]
    Full {
        /// Largest number of elements.
        capacity: usize,
    },
}

/// A refused push: the value comes back with the reason, never lost.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct PushError<V> {
    /// Why it was refused.
    pub error: PqError,
    /// The value, untouched.
    pub value: V,
}

/// A bad queue parameter, naming the field, the value and what is allowed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PqConfigError {
    /// A parameter is outside its allowed range.
    #[error("{queue}: {field} = {value} is out of range: allowed {allowed}")]
    OutOfRange {
        /// The queue type.
        queue: &'static str,
        /// The parameter.
        field: &'static str,
        /// The value given, printed.
        value: String,
        /// What is allowed, printed.
        allowed: String,
    },
}

impl PqConfigError {
    pub(crate) fn new(
        queue: &'static str,
        field: &'static str,
        value: impl ToString,
        allowed: impl ToString,
    ) -> PqConfigError {
        PqConfigError::OutOfRange {
            queue,
            field,
            value: value.to_string(),
            allowed: allowed.to_string(),
        }
    }
}

/// Counters of out-of-range ranks, per side and outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PqStats {
    /// Ranks below the range that were clamped to the lowest bucket.
    pub clamped_below: u64,
    /// Ranks beyond the range that were clamped to the highest bucket.
    pub clamped_above: u64,
    /// Ranks below the range that were rejected.
    pub rejected_below: u64,
    /// Ranks beyond the range that were rejected.
    pub rejected_above: u64,
}

impl PqStats {
    /// All clamped elements.
    pub fn clamped(&self) -> u64 {
        self.clamped_below + self.clamped_above
    }

    /// All rejected pushes.
    pub fn rejected(&self) -> u64 {
        self.rejected_below + self.rejected_above
    }
}

/// An integer priority queue with PIFO semantics: elements leave in
/// increasing rank order (at the queue's rank granularity, see the module
/// docs), equal keys in push order.
pub trait IntPq<V> {
    /// Queues `value` with `rank`. On error the value comes back.
    fn push(&mut self, rank: Rank, value: V) -> Result<Handle, PushError<V>>;

    /// Removes and returns the first element and the rank it was pushed with.
    fn pop_min(&mut self) -> Option<(Rank, V)>;

    /// The rank (as pushed) of the element [`pop_min`](IntPq::pop_min)
    /// would return.
    fn peek_min_rank(&self) -> Option<Rank>;

    /// Removes the element `handle` names, in O(1) for the bucketed queues;
    /// `None` if it is no longer queued (popped, removed, or never ours).
    fn remove(&mut self, handle: Handle) -> Option<V>;

    /// Number of queued elements.
    fn len(&self) -> usize;

    /// True if nothing is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of heap memory held (capacity, not just what is in use).
    fn memory_bytes(&self) -> usize;

    /// Out-of-range counters.
    fn stats(&self) -> PqStats;
}
