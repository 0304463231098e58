//! The slab arena shared by the bucketed queues: elements in one `Vec`,
//! linked by `u32` indices into one doubly linked FIFO per bucket, freed
//! slots reused through a free list, generations against stale handles.

use super::{Handle, PqError, PushError, Rank};

/// "No element" in links.
pub(crate) const NIL: u32 = u32::MAX;

/// Largest number of elements an arena indexes (`NIL` is reserved).
pub(crate) const MAX_ELEMENTS: usize = NIL as usize;

#[derive(Clone, Debug)]
struct Node<V> {
    /// `None` when the slot is free.
    value: Option<V>,
    rank: Rank,
    /// The bucket whose list holds this node (unused by list-less users).
    bucket: u32,
    prev: u32,
    /// Next in the bucket list, or next free slot.
    next: u32,
    generation: u32,
}

#[derive(Clone, Copy, Debug)]
struct List {
    head: u32,
    tail: u32,
}

const EMPTY: List = List {
    head: NIL,
    tail: NIL,
};

/// Slab of elements plus one FIFO list per bucket.
#[derive(Clone, Debug)]
pub(crate) struct Arena<V> {
    nodes: Vec<Node<V>>,
    free: u32,
    len: usize,
    lists: Vec<List>,
}

impl<V> Arena<V> {
    /// An arena with `buckets` empty lists and room for `capacity` elements
    /// before it first grows.
    pub(crate) fn new(buckets: usize, capacity: usize) -> Arena<V> {
        Arena {
            nodes: Vec::with_capacity(capacity.min(MAX_ELEMENTS)),
            free: NIL,
            len: 0,
            lists: vec![EMPTY; buckets],
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.nodes.capacity() * size_of::<Node<V>>() + self.lists.capacity() * size_of::<List>()
    }

    /// Takes a free slot (growing the slab by doubling if none is free).
    #[inline]
    pub(crate) fn alloc(&mut self, rank: Rank, value: V) -> Result<Handle, PushError<V>> {
        let (idx, generation) = self.take_slot(rank, value, NIL, NIL)?;
        Ok(Handle { idx, generation })
    }

    /// Takes a free slot and fills every field of it in one visit:
    /// `(slot, generation)`.
    #[inline(always)]
    fn take_slot(
        &mut self,
        rank: Rank,
        value: V,
        bucket: u32,
        prev: u32,
    ) -> Result<(u32, u32), PushError<V>> {
        let slot = if self.free != NIL {
            let idx = self.free;
            let node = &mut self.nodes[idx as usize];
            self.free = node.next;
            node.value = Some(value);
            node.rank = rank;
            node.bucket = bucket;
            node.prev = prev;
            node.next = NIL;
            (idx, node.generation)
        } else {
            if self.nodes.len() >= MAX_ELEMENTS {
                return Err(PushError {
                    error: PqError::Full {
                        capacity: MAX_ELEMENTS,
                    },
                    value,
                });
            }
            let idx = self.nodes.len() as u32;
            self.nodes.push(Node {
                value: Some(value),
                rank,
                bucket,
                prev,
                next: NIL,
                generation: 0,
            });
            (idx, 0)
        };
        self.len += 1;
        Ok(slot)
    }

    /// Is `h` a live element?
    #[inline]
    pub(crate) fn is_live(&self, h: Handle) -> bool {
        match self.nodes.get(h.idx as usize) {
            Some(n) => n.generation == h.generation && n.value.is_some(),
            None => false,
        }
    }

    /// Frees a live slot (links must already be detached) and returns its
    /// rank and value.
    #[inline]
    fn release(&mut self, idx: u32) -> Option<(Rank, V)> {
        let node = &mut self.nodes[idx as usize];
        let value = node.value.take()?;
        // `bucket` and `prev` are stale from here on; `push_back` sets them
        // again before the slot is in a list.
        node.generation = node.generation.wrapping_add(1);
        node.next = self.free;
        self.free = idx;
        self.len -= 1;
        Some((node.rank, value))
    }

    /// Frees the element `h` names if it is live (for list-less users).
    pub(crate) fn take(&mut self, h: Handle) -> Option<(Rank, V)> {
        if !self.is_live(h) {
            return None;
        }
        self.release(h.idx)
    }

    /// Appends an element to `bucket`'s FIFO. Returns its handle and whether
    /// the bucket was empty before.
    #[inline]
    pub(crate) fn push_back(
        &mut self,
        bucket: usize,
        rank: Rank,
        value: V,
    ) -> Result<(Handle, bool), PushError<V>> {
        let list = self.lists[bucket];
        let was_empty = list.tail == NIL;
        let (idx, generation) = self.take_slot(rank, value, bucket as u32, list.tail)?;
        if was_empty {
            self.lists[bucket] = List {
                head: idx,
                tail: idx,
            };
        } else {
            self.nodes[list.tail as usize].next = idx;
            self.lists[bucket].tail = idx;
        }
        Ok((Handle { idx, generation }, was_empty))
    }

    /// Is `bucket`'s FIFO empty?
    #[inline]
    pub(crate) fn bucket_is_empty(&self, bucket: usize) -> bool {
        self.lists[bucket].head == NIL
    }

    /// Rank of the first element of `bucket`.
    #[inline]
    pub(crate) fn front_rank(&self, bucket: usize) -> Option<Rank> {
        let head = self.lists[bucket].head;
        if head == NIL {
            None
        } else {
            Some(self.nodes[head as usize].rank)
        }
    }

    /// Removes the first element of `bucket`. Returns its rank, its value
    /// and whether the bucket is now empty.
    #[inline]
    pub(crate) fn pop_front(&mut self, bucket: usize) -> Option<(Rank, V, bool)> {
        let head = self.lists[bucket].head;
        if head == NIL {
            return None;
        }
        // Unlink and free in one visit of the node. The new head's `prev`
        // still names the popped slot: `remove` tells a head by the list's
        // `head`, not by `prev`.
        let node = &mut self.nodes[head as usize];
        let next = node.next;
        let value = node.value.take()?;
        let rank = node.rank;
        node.generation = node.generation.wrapping_add(1);
        node.next = self.free;
        self.free = head;
        self.len -= 1;
        let now_empty = next == NIL;
        let list = &mut self.lists[bucket];
        list.head = next;
        if now_empty {
            list.tail = NIL;
        }
        Some((rank, value, now_empty))
    }

    /// Unlinks and frees the element `h` names. Returns the bucket it was
    /// in, its value and whether the bucket is now empty.
    #[inline]
    pub(crate) fn remove(&mut self, h: Handle) -> Option<(usize, V, bool)> {
        if !self.is_live(h) {
            return None;
        }
        let node = &self.nodes[h.idx as usize];
        let (bucket, prev, next) = (node.bucket as usize, node.prev, node.next);
        let is_head = self.lists[bucket].head == h.idx;
        if is_head {
            self.lists[bucket].head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.lists[bucket].tail = if is_head { NIL } else { prev };
        } else {
            self.nodes[next as usize].prev = prev;
        }
        let now_empty = self.lists[bucket].head == NIL;
        let (_, value) = self.release(h.idx)?;
        Some((bucket, value, now_empty))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_remove_and_stale_handles() {
        let mut a = Arena::new(2, 0);
        let (h1, e1) = a.push_back(0, 10, 'a').unwrap();
        let (h2, e2) = a.push_back(0, 11, 'b').unwrap();
        let (h3, _) = a.push_back(0, 12, 'c').unwrap();
        assert!(e1 && !e2);
        assert_eq!(a.remove(h2), Some((0, 'b', false)));
        assert_eq!(a.remove(h2), None);
        // The freed slot is reused; the old handle must not reach the new element.
        let (h4, e4) = a.push_back(1, 13, 'd').unwrap();
        assert!(e4);
        assert_eq!(h4.idx, h2.idx);
        assert_eq!(a.remove(h2), None);
        assert_eq!(a.pop_front(0), Some((10, 'a', false)));
        assert_eq!(a.remove(h1), None);
        assert_eq!(a.remove(h3), Some((0, 'c', true)));
        assert!(a.bucket_is_empty(0));
        assert_eq!(a.front_rank(1), Some(13));
        assert_eq!(a.pop_front(1), Some((13, 'd', true)));
        assert_eq!(a.pop_front(1), None);
        assert_eq!(a.len(), 0);
    }
}
