//! `BinaryHeapPq`: the comparison-based baseline on `std`'s binary heap.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::arena::Arena;
use super::{Handle, IntPq, PqStats, PushError, Rank};

/// `std::collections::BinaryHeap` ordered on `(rank, seq)`: the
/// comparison baseline. Ranks are unbounded (no buckets, no clamping), and
/// the order is exact PIFO order on `(rank, seq)`.
///
/// Values live in the same slab arena as in the bucketed queues so that
/// handles work alike; heap entries are `(rank, seq, slot, generation)`
/// (24 bytes). [`remove`](IntPq::remove) is lazy: it frees the slot at
/// once, in O(1), and the heap entry, now stale (its generation no longer
/// matches), is dropped when it reaches the top. The top entry is always
/// live after every operation, and when stale entries outnumber live ones
/// (beyond 64) the heap is rebuilt in O(n), so stale entries never
/// outnumber live ones by more than 64 after an operation.
#[derive(Clone, Debug)]
pub struct BinaryHeapPq<V> {
    heap: BinaryHeap<Reverse<(Rank, u64, u32, u32)>>,
    arena: Arena<V>,
    seq: u64,
}

impl<V> BinaryHeapPq<V> {
    /// An empty queue with room for `capacity` elements before it grows.
    pub fn new(capacity: usize) -> BinaryHeapPq<V> {
        BinaryHeapPq {
            heap: BinaryHeap::with_capacity(capacity),
            arena: Arena::new(0, capacity),
            seq: 0,
        }
    }

    fn live(&self, idx: u32, generation: u32) -> bool {
        self.arena.is_live(Handle { idx, generation })
    }

    /// Drops all stale entries once they outnumber live ones by 64.
    #[inline]
    fn maybe_rebuild(&mut self) {
        if self.heap.len() > 2 * self.arena.len() + 64 {
            let arena = &self.arena;
            self.heap.retain(|&Reverse((_, _, idx, generation))| {
                arena.is_live(Handle { idx, generation })
            });
        }
    }

    #[inline]
    fn clean_top(&mut self) {
        while let Some(&Reverse((_, _, idx, generation))) = self.heap.peek() {
            if self.live(idx, generation) {
                return;
            }
            self.heap.pop();
        }
    }
}

impl<V> IntPq<V> for BinaryHeapPq<V> {
    #[inline]
    fn push(&mut self, rank: Rank, value: V) -> Result<Handle, PushError<V>> {
        let h = self.arena.alloc(rank, value)?;
        self.heap
            .push(Reverse((rank, self.seq, h.idx, h.generation)));
        self.seq += 1;
        Ok(h)
    }

    #[inline]
    fn pop_min(&mut self) -> Option<(Rank, V)> {
        let Reverse((_, _, idx, generation)) = self.heap.pop()?;
        let out = self.arena.take(Handle { idx, generation });
        self.clean_top();
        self.maybe_rebuild();
        out
    }

    fn peek_min_rank(&self) -> Option<Rank> {
        self.heap.peek().map(|&Reverse((rank, ..))| rank)
    }

    fn remove(&mut self, handle: Handle) -> Option<V> {
        let (_, value) = self.arena.take(handle)?;
        self.clean_top();
        self.maybe_rebuild();
        Some(value)
    }

    fn len(&self) -> usize {
        self.arena.len()
    }

    fn memory_bytes(&self) -> usize {
        self.arena.memory_bytes()
            + self.heap.capacity() * size_of::<Reverse<(Rank, u64, u32, u32)>>()
    }

    fn stats(&self) -> PqStats {
        PqStats::default()
    }
}
