//! The sending half of the mailbox.

use std::fmt;

use super::ring::{Group, GroupPtr, Publication, Ring, Shared};
use super::{DEFAULT_GROUP_SLOTS, DEFAULT_LINE_SLOTS, EMPTY, TAG_FLIP, clamp_len};
use crate::sync::{Arc, Ordering};

/// The sending half of a mailbox. `Send`, not `Clone`: exactly one thread
/// pushes. `L` is the number of slots per line (the unit of look-ahead and
/// release), `H` the number per group (the unit of layout: a group's stamps
/// and values share its hardware cache lines).
///
/// The producer writes nothing shared but the slots: its item count is
/// derived from its position, and the consumer's length estimate reads the
/// stamps.
pub struct Producer<T, const L: usize = DEFAULT_LINE_SLOTS, const H: usize = DEFAULT_GROUP_SLOTS> {
    pub(super) ring: Ring<T, H>,
    pub(super) shared: Arc<Shared<T, H>>,
    /// Group being filled (an index into the ring's slice).
    pub(super) group: usize,
    /// Points at `group` (the hot path's way to it).
    pub(super) cur: GroupPtr<T, H>,
    /// Next slot to fill in `group`; `H` means the group is full and the
    /// next push must move on (and, at the end of a line, claim a new one:
    /// the "write index reached the checked index" case).
    pub(super) offset: usize,
    /// One past the last group of the claimed line.
    pub(super) line_end: usize,
    /// Stamp of the current pass.
    pub(super) tag: u8,
    /// Lines claimed so far (wrapping): items pushed = `claimed · L` less
    /// the free slots of the claimed line.
    pub(super) claimed: usize,
    /// Ordering of the publishing stamp store (loom builds can weaken it to
    /// show that the model checker catches the bug).
    pub(super) publish: Publication,
}

impl<T, const L: usize, const H: usize> fmt::Debug for Producer<T, L, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("capacity", &self.capacity())
            .field("line_slots", &L)
            .field("group_slots", &H)
            .field("group", &self.group)
            .field("offset", &self.offset)
            .field("pushed", &self.pushed())
            .finish_non_exhaustive()
    }
}

impl<T, const L: usize, const H: usize> Producer<T, L, H> {
    /// Groups per line.
    const GROUPS: usize = L / H;

    /// Maximum number of items the mailbox holds: entries − one line.
    ///
    /// Space is reclaimed a line at a time: after the consumer popped `k`
    /// items from a full mailbox, a push succeeds only once the consumer has
    /// read to the end of a line.
    pub fn capacity(&self) -> usize {
        self.ring.len() * H - L
    }

    /// Slots per line: the granularity of the look-ahead and of release.
    pub fn line_slots(&self) -> usize {
        L
    }

    /// Slots per group: the granularity of the layout (a group's stamps and
    /// values share its hardware cache lines).
    pub fn group_slots(&self) -> usize {
        H
    }

    /// Items pushed so far (wrapping).
    fn pushed(&self) -> usize {
        // Groups of the claimed line after the current one, all free.
        let later = self.line_end.wrapping_sub(self.group).wrapping_sub(1);
        self.claimed
            .wrapping_mul(L)
            .wrapping_sub(later.wrapping_mul(H))
            .wrapping_sub(H - self.offset)
    }

    /// Approximate number of queued items (exact when the consumer is idle).
    pub fn len_estimate(&self) -> usize {
        let popped = self.shared.cons.popped.load(Ordering::Relaxed);
        clamp_len(self.pushed().wrapping_sub(popped), self.capacity())
    }

    /// Pushes `value`, or hands it back if the mailbox is full.
    #[inline]
    pub fn try_push(&mut self, value: T) -> Result<(), T> {
        let Some(offset) = self.free_offset() else {
            return Err(value);
        };
        self.fill(offset, value);
        Ok(())
    }

    /// The slot of the current group the next push fills (moving to the
    /// next group, or claiming the next line, first if the current group is
    /// full), or `None` if the mailbox is full. The result is `< H` on every
    /// path, which the compiler sees, so indexing the group with it needs no
    /// bounds check.
    #[inline(always)]
    fn free_offset(&mut self) -> Option<usize> {
        let offset = self.offset;
        if offset < H {
            Some(offset)
        } else if self.next_group() {
            Some(0)
        } else {
            None
        }
    }

    /// The current group is full: move to the next group of the claimed
    /// line, or claim the next line. `false` if the mailbox is full.
    #[inline(always)]
    fn next_group(&mut self) -> bool {
        let next = self.group + 1;
        if next < self.line_end {
            self.group = next;
            self.ring.point(&mut self.cur, next);
        } else if !self.claim_line() {
            return false;
        }
        self.offset = 0;
        true
    }

    /// Pushes items taken from `items` while there is room; returns how many
    /// were pushed. An item is taken from the iterator only when a slot is
    /// known to be free, so nothing is lost: what did not fit stays in
    /// `items`.
    ///
    /// Fills a group at a time from a local position (and the group and
    /// tag in locals): the handle's position is stored once per group, not
    /// once per item (the publishing Release store of each stamp keeps the
    /// compiler from deferring a per-item store of it), so an item costs
    /// the producer two stores, its value and its stamp.
    pub fn try_push_many<I: Iterator<Item = T>>(&mut self, items: &mut I) -> usize {
        let mut pushed = 0;
        while let Some(start) = self.free_offset() {
            let (tag, publish) = (self.tag, self.publish.ordering());
            // SAFETY: `cur` was made by `group_ptr` of this handle's ring.
            let group = unsafe { self.cur.get(&self.ring) };
            let mut pos = Position {
                stored: &mut self.offset,
                offset: start,
            };
            while pos.offset < H {
                let Some(value) = items.next() else {
                    break;
                };
                // SAFETY: `pos.offset` is the next free slot of the
                // claimed group (`free_offset`, then the slots after it
                // while under H), and `pos` moves past it even if the
                // iterator unwinds later (its drop stores the position).
                unsafe { Self::write_slot(group, pos.offset, value, tag, publish) };
                pos.offset += 1;
            }
            let end = pos.offset;
            drop(pos);
            pushed += end - start;
            if end < H {
                break;
            }
        }
        pushed
    }

    /// Pushes the longest prefix of `items` that fits; returns its length.
    pub fn push_batch(&mut self, items: &[T]) -> usize
    where
        T: Copy,
    {
        self.try_push_many(&mut items.iter().copied())
    }

    /// The claimed line is full: look one line ahead.
    ///
    /// Moves to the first group of the next line and returns `true` if the
    /// line *after* it has been released by the consumer (the first stamp of
    /// its first group is [`EMPTY`]); returns `false` (full) otherwise.
    #[inline(never)]
    fn claim_line(&mut self) -> bool {
        let ring = &self.ring;
        let mut next = self.line_end;
        let mut tag = self.tag;
        if next == ring.end {
            next = ring.first;
            tag ^= TAG_FLIP;
        }
        let mut ahead = next + Self::GROUPS;
        if ahead == ring.end {
            ahead = ring.first;
        }
        let released = ring
            .groups
            .get(ahead)
            .is_some_and(|g| g.stamps[0].load(Ordering::Acquire) == EMPTY);
        if !released {
            return false;
        }
        // Lines are released in ring order, so `ahead` being released means
        // `next` is released too.
        self.group = next;
        self.ring.point(&mut self.cur, next);
        self.line_end = next + Self::GROUPS;
        self.tag = tag;
        self.claimed = self.claimed.wrapping_add(1);
        true
    }

    /// Writes `value` into slot `offset` (the next one, from
    /// [`Producer::free_offset`]) of the current group and publishes it.
    #[inline(always)]
    fn fill(&mut self, offset: usize, value: T) {
        // SAFETY: `cur` was made by `group_ptr` of this handle's ring.
        let group = unsafe { self.cur.get(&self.ring) };
        // SAFETY: `offset` is the next free slot of the claimed group
        // (`free_offset`), and the position moves past it below.
        unsafe { Self::write_slot(group, offset, value, self.tag, self.publish.ordering()) };
        self.offset = offset + 1;
    }

    /// Writes `value` into slot `offset` of `group` and publishes it with
    /// `tag`.
    ///
    /// # Safety
    ///
    /// `group` is the producer's current group, in a line `claim_line`
    /// claimed, and `offset` its next free slot (from
    /// [`Producer::free_offset`], or a slot after it in the same group not
    /// yet written since the claim); the caller then advances its position
    /// past the slot, also when it unwinds, so the slot is written once per
    /// claim and never while the consumer may read it.
    #[inline(always)]
    unsafe fn write_slot(group: &Group<T, H>, offset: usize, value: T, tag: u8, publish: Ordering) {
        group.values[offset].with_mut(|p| {
            // SAFETY: the group's line was claimed by `claim_line`, whose
            // Acquire load saw the line after it (hence, by release order,
            // this one) released: the consumer has moved the previous value
            // out and will not touch the cell until it sees the stamp stored
            // below. The producer is unique (`&mut self` in every caller),
            // and each caller advances past the slot, so it is written once
            // per claim. Writing a `MaybeUninit` never drops the (moved-out)
            // old bytes.
            unsafe {
                (*p).write(value);
            }
        });
        group.stamps[offset].store(tag, publish);
    }

    /// Loom builds only: store the publishing stamp with `Relaxed` instead of
    /// `Release` — a deliberate bug the model checker must catch.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_weaken_publication(&mut self) {
        self.publish.weaken();
    }
}

/// The producer's position within its group during a batch push, kept in
/// a local and stored into the handle when dropped: at the end of the
/// group's batch, or while unwinding if the item iterator panics part-way
/// (the slots written before are published, so the next push must start
/// after them, never write them again while the consumer may read them).
/// The word mailbox's batch push (`word.rs`) uses it the same way.
pub(super) struct Position<'a> {
    pub(super) stored: &'a mut usize,
    pub(super) offset: usize,
}

impl Drop for Position<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        *self.stored = self.offset;
    }
}
