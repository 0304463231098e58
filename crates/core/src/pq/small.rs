//! `SmallPq`: an exact queue for a handful of elements, by linear scan.

use super::arena::Arena;
use super::{Handle, IntPq, PqStats, PushError, Rank};

/// A few elements in one dense array, found by a linear scan on
/// `(rank, seq)`: exact PIFO order, any rank, nothing to size. Push is
/// O(1); pop, peek and remove are O(n) — cheaper than any bucketed queue
/// while `n` is a handful (a policy node over a few child nodes), and
/// meant for nothing larger.
#[derive(Clone, Debug)]
pub struct SmallPq<V> {
    /// `(rank, seq, slot, generation)` of every element, unordered.
    entries: Vec<(Rank, u64, u32, u32)>,
    arena: Arena<V>,
    seq: u64,
}

impl<V> SmallPq<V> {
    /// An empty queue.
    pub fn new() -> SmallPq<V> {
        SmallPq {
            entries: Vec::new(),
            arena: Arena::new(0, 0),
            seq: 0,
        }
    }

    /// Position of the first element in `(rank, seq)` order.
    #[inline]
    fn argmin(&self) -> Option<usize> {
        let mut it = self.entries.iter().enumerate();
        let (mut best, first) = it.next()?;
        let mut key = (first.0, first.1);
        for (i, e) in it {
            if (e.0, e.1) < key {
                key = (e.0, e.1);
                best = i;
            }
        }
        Some(best)
    }
}

impl<V> Default for SmallPq<V> {
    fn default() -> SmallPq<V> {
        SmallPq::new()
    }
}

impl<V> IntPq<V> for SmallPq<V> {
    #[inline]
    fn push(&mut self, rank: Rank, value: V) -> Result<Handle, PushError<V>> {
        let h = self.arena.alloc(rank, value)?;
        self.entries.push((rank, self.seq, h.idx, h.generation));
        self.seq += 1;
        Ok(h)
    }

    #[inline]
    fn pop_min(&mut self) -> Option<(Rank, V)> {
        let i = self.argmin()?;
        let (_, _, idx, generation) = self.entries.swap_remove(i);
        self.arena.take(Handle { idx, generation })
    }

    fn peek_min_rank(&self) -> Option<Rank> {
        self.argmin().map(|i| self.entries[i].0)
    }

    fn remove(&mut self, handle: Handle) -> Option<V> {
        let pos = self
            .entries
            .iter()
            .position(|e| e.2 == handle.idx && e.3 == handle.generation)?;
        self.entries.swap_remove(pos);
        self.arena.take(handle).map(|(_, v)| v)
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn memory_bytes(&self) -> usize {
        self.arena.memory_bytes() + self.entries.capacity() * size_of::<(Rank, u64, u32, u32)>()
    }

    fn stats(&self) -> PqStats {
        PqStats::default()
    }
}
