//! The receiving half of the mailbox.

use std::collections::VecDeque;
use std::fmt;

use super::prefetch;
use super::ring::{Group, GroupPtr, Ring, Shared};
use super::{DEFAULT_GROUP_SLOTS, DEFAULT_LINE_SLOTS, EMPTY, TAG_FLIP};
use crate::sync::{Arc, Ordering};

/// The receiving half of a mailbox. `Send`, not `Clone`: exactly one thread
/// pops. `L` is the number of slots per line, `H` per group (see
/// [`super::Producer`]).
pub struct Consumer<T, const L: usize = DEFAULT_LINE_SLOTS, const H: usize = DEFAULT_GROUP_SLOTS> {
    pub(super) ring: Ring<T, H>,
    pub(super) shared: Arc<Shared<T, H>>,
    /// Group being read (an index into the ring's slice); the lines before
    /// its line (in ring order) are released, so its line is also the
    /// clear index.
    pub(super) group: usize,
    /// Points at `group` (the hot path's way to it).
    pub(super) cur: GroupPtr<T, H>,
    /// Next slot to read in `group` (`0..H`).
    pub(super) offset: usize,
    /// Slots `offset..ready` of `group` are known to be published (`ready ≤
    /// H`): they are taken without loading their stamps again.
    pub(super) ready: usize,
    /// One past the last group of the line being read.
    pub(super) line_end: usize,
    /// Stamp of the current pass.
    pub(super) tag: u8,
    /// Items popped before the first slot of `group` (wrapping): the
    /// items popped so far are `group_base + offset`, so a pop counts
    /// nothing but its move along the group.
    pub(super) group_base: usize,
    /// Whether moving to a new line prefetches the line after it
    /// ([`Consumer::set_prefetch`]).
    pub(super) prefetch: bool,
    /// Ordering of the line-release store (loom builds can weaken it).
    #[cfg(loom)]
    pub(super) release: Ordering,
}

impl<T, const L: usize, const H: usize> fmt::Debug for Consumer<T, L, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("capacity", &self.capacity())
            .field("line_slots", &L)
            .field("group_slots", &H)
            .field("group", &self.group)
            .field("offset", &self.offset)
            .field("popped", &self.popped())
            .field("prefetch", &self.prefetch)
            .finish_non_exhaustive()
    }
}

mod sealed {
    /// Only this crate's impls (`Vec`, `VecDeque`) may be [`super::RunSink`]s.
    pub trait Sealed {}
    impl<T> Sealed for Vec<T> {}
    impl<T> Sealed for std::collections::VecDeque<T> {}
}

/// Where [`Consumer::pop_many`] appends its runs: a queue that can
/// reserve room for a run before the run's values are moved into it, so
/// that nothing can panic between moving a value out of its slot and
/// advancing past it. Sealed: `take_run`'s safety rests on `extend`
/// taking every item it is given without panicking once room is
/// reserved, which holds for `Vec` and `VecDeque` (the only impls) and
/// could not be promised for an impl outside this crate.
pub trait RunSink<T>: Extend<T> + sealed::Sealed {
    /// Makes room for `n` more items.
    fn reserve_run(&mut self, n: usize);
}

impl<T> RunSink<T> for Vec<T> {
    #[inline(always)]
    fn reserve_run(&mut self, n: usize) {
        self.reserve(n);
    }
}

impl<T> RunSink<T> for VecDeque<T> {
    #[inline(always)]
    fn reserve_run(&mut self, n: usize) {
        self.reserve(n);
    }
}

/// The items a batch pop takes: at most `left` more, each moved out by
/// [`Consumer::take`] in whole-group mode. The loop under
/// [`Consumer::pop_batch`] and [`Consumer::pop_into`] ([`Consumer::pop_many`]
/// moves whole runs instead).
struct Batch<'a, T, const L: usize, const H: usize> {
    rx: &'a mut Consumer<T, L, H>,
    left: usize,
}

impl<T, const L: usize, const H: usize> Iterator for Batch<'_, T, L, H> {
    type Item = T;

    #[inline(always)]
    fn next(&mut self) -> Option<T> {
        if self.left == 0 {
            return None;
        }
        let value = self.rx.take(true)?;
        self.left -= 1;
        Some(value)
    }
}

impl<T, const L: usize, const H: usize> Consumer<T, L, H> {
    /// Groups per line.
    const GROUPS: usize = L / H;

    /// Maximum number of items the mailbox holds: entries − one line.
    pub fn capacity(&self) -> usize {
        self.ring.len() * H - L
    }

    /// Slots per line: the granularity of the look-ahead and of release.
    pub fn line_slots(&self) -> usize {
        L
    }

    /// Slots per group: the granularity of the layout.
    pub fn group_slots(&self) -> usize {
        H
    }

    /// Approximate number of queued items (exact when the producer is idle).
    ///
    /// Counts the published slots from the read position on (the producer
    /// keeps no shared counter): one stamp per full group, then the slots of
    /// the last one, so it costs `O(groups + H)` loads.
    pub fn len_estimate(&self) -> usize {
        let ring = &self.ring;
        let (mut group, mut offset, mut tag) = (self.group, self.offset, self.tag);
        let mut queued = 0;
        for _ in 0..ring.len() {
            let Some(g) = ring.groups.get(group) else {
                break;
            };
            // The producer fills a group in order, so a group whose last
            // slot carries the tag is full from `offset` on.
            if g.stamps[H - 1].load(Ordering::Relaxed) == tag {
                queued += H - offset;
            } else {
                queued += g.stamps[offset..]
                    .iter()
                    .take_while(|s| s.load(Ordering::Relaxed) == tag)
                    .count();
                break;
            }
            offset = 0;
            group += 1;
            if group == ring.end {
                group = ring.first;
                tag ^= TAG_FLIP;
            }
        }
        queued.min(self.capacity())
    }

    /// `true` if [`Consumer::pop`] would return `None` right now.
    pub fn is_empty(&self) -> bool {
        self.offset >= self.ready
            && self
                .ring
                .groups
                .get(self.group)
                .and_then(|g| g.stamps.get(self.offset))
                .is_none_or(|s| s.load(Ordering::Acquire) != self.tag)
    }

    /// Takes the oldest item, if any.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        let value = self.take(false)?;
        self.publish_popped(0);
        Some(value)
    }

    /// Pops up to `max` items onto the back of `out`; returns how many.
    /// The count the producer's length estimate reads is stored once, at
    /// the end (even if nothing was popped).
    ///
    /// Moves a published run of a group at a time: one look at the
    /// group's stamps, room reserved in `out` once, then the run's values
    /// copied out back to back (no per-item position, bound or capacity
    /// check). `out` is a `Vec` (the cheapest: one contiguous append per
    /// run) or a `VecDeque`.
    #[inline]
    pub fn pop_many<O: RunSink<T>>(&mut self, out: &mut O, max: usize) -> usize {
        let mut left = max;
        while left > 0 {
            let Some(run) = self.take_run(left, out) else {
                break;
            };
            left -= run;
        }
        self.publish_popped(0);
        max - left
    }

    /// Moves the published slots of the current group from the read
    /// position on, at most `max` (≥ 1), onto the back of `out` and
    /// advances past them; returns how many, `None` if the next slot is not
    /// published.
    #[inline(always)]
    fn take_run<O: RunSink<T>>(&mut self, max: usize, out: &mut O) -> Option<usize> {
        let (offset, tag) = (self.offset, self.tag);
        // SAFETY: `cur` was made by `group_ptr` of this handle's ring.
        let group = unsafe { self.cur.get(&self.ring) };
        if offset >= self.ready {
            self.ready = published_run(group, offset, tag)?;
        }
        let end = self.ready.min(offset.saturating_add(max));
        let cells = group.values.get(offset..end)?;
        // Room first: nothing below can panic between moving a value out
        // and advancing past its slot (`out` is a `Vec` or `VecDeque`:
        // `RunSink` is sealed, and their `extend` with room reserved pulls
        // every item and does not panic).
        out.reserve_run(cells.len());
        out.extend(cells.iter().map(|cell| {
            cell.with(|p| {
                // SAFETY: every slot of `offset..ready` is published in this
                // pass (the run's last stamp, or a later one of the group,
                // was seen with Acquire after the producer initialised the
                // values in order); the producer will not write them again
                // before the consumer releases their line, which happens
                // only below, after the copy; the consumer is unique
                // (`&mut self`) and advances past the run right after, so
                // each value is moved out exactly once.
                unsafe { (*p).assume_init_read() }
            })
        }));
        if end < H {
            self.offset = end;
        } else {
            self.next_group();
        }
        Some(end - offset)
    }

    /// Pops up to `max` items, handing each to `sink`; returns how many.
    ///
    /// The consumer's position is updated before each call of `sink`, so a
    /// panicking `sink` loses nothing but the item it was given; the count
    /// the producer's length estimate reads is stored once, at the end.
    #[inline]
    pub fn pop_batch(&mut self, max: usize, mut sink: impl FnMut(T)) -> usize {
        self.pop_batch_with(max, |items| items.for_each(&mut sink))
    }

    /// Pops up to `max` items into `out` (a `Vec`, `VecDeque`, …); returns
    /// how many. The count the producer's length estimate reads is stored
    /// once, at the end.
    #[inline]
    pub fn pop_into<E: Extend<T>>(&mut self, out: &mut E, max: usize) -> usize {
        self.pop_batch_with(max, |items| out.extend(items))
    }

    /// The batch pops: `consume` drains up to `max` items from the
    /// iterator it is given; then the popped count is published once (also
    /// after popping nothing: that ends a `report_held`).
    #[inline(always)]
    fn pop_batch_with(
        &mut self,
        max: usize,
        consume: impl FnOnce(&mut Batch<'_, T, L, H>),
    ) -> usize {
        let mut items = Batch {
            rx: self,
            left: max,
        };
        consume(&mut items);
        let taken = max - items.left;
        self.publish_popped(0);
        taken
    }

    /// Turns the software prefetch on or off (off by default): on moving
    /// to a new line the consumer asks the cache for the hardware lines of
    /// the line after it (x86_64; elsewhere nothing happens). When the
    /// consumer trails the producer by more than a line, those lines sit
    /// in the producer's cache and the prefetch overlaps their transfer
    /// with the pops of the current line; right behind the producer it
    /// fetches lines the producer is still writing, which then move once
    /// more (slower in five of seven idle interleaved runs of
    /// `benches/mailbox.rs`, by up to 1.3×; hence off by default).
    pub fn set_prefetch(&mut self, on: bool) {
        self.prefetch = on;
    }

    /// The consumer keeps the last `n` items it popped aside, unprocessed:
    /// the producer's length estimate ([`super::Producer::len_estimate`])
    /// counts them as still queued until the next [`Consumer::pop`] or
    /// batch pop. (Their slots are free either way.)
    pub fn report_held(&mut self, n: usize) {
        self.publish_popped(n);
    }

    /// Items popped so far (wrapping).
    #[inline(always)]
    fn popped(&self) -> usize {
        self.group_base.wrapping_add(self.offset)
    }

    /// Stores the popped count, less `held`, for the producer's estimate.
    #[inline(always)]
    fn publish_popped(&self, held: usize) {
        self.shared
            .cons
            .popped
            .store(self.popped().wrapping_sub(held), Ordering::Relaxed);
    }

    /// Moves the oldest item out of its slot, if any, and advances (the
    /// popped count is published by the caller).
    ///
    /// With `whole_group` (the batch pops), a slot before `ready` is known
    /// published and its stamp is not loaded; past it, [`published_run`]
    /// looks at the group's stamps. Without (a single [`Consumer::pop`]),
    /// the slot's own stamp is loaded, which is all a lone pop needs.
    ///
    /// One compare splits the two cases a pop can be in: a slot before the
    /// group's last (the position just moves on; the compare also proves
    /// the slot index in bounds, so no other check is made) and the
    /// group's last slot (index `H - 1`, a constant; then the group step).
    #[inline(always)]
    fn take(&mut self, whole_group: bool) -> Option<T> {
        let (offset, tag) = (self.offset, self.tag);
        // SAFETY: `cur` was made by `group_ptr` of this handle's ring.
        let group = unsafe { self.cur.get(&self.ring) };
        if offset < H - 1 {
            let value = Self::take_slot(&mut self.ready, group, offset, tag, whole_group)?;
            self.offset = offset + 1;
            Some(value)
        } else {
            // `offset < H` always holds, so this is the last slot.
            let value = Self::take_slot(&mut self.ready, group, H - 1, tag, whole_group)?;
            self.next_group();
            Some(value)
        }
    }

    /// Moves the value of slot `offset` of `group` (the read position) out
    /// if it is published in the pass of `tag`; the caller advances.
    ///
    /// The position and the group are read into locals before the first
    /// Acquire load, which the compiler may not move later loads of `self`
    /// above: everything after it uses the locals.
    #[inline(always)]
    fn take_slot(
        ready: &mut usize,
        group: &Group<T, H>,
        offset: usize,
        tag: u8,
        whole_group: bool,
    ) -> Option<T> {
        if whole_group {
            if offset >= *ready {
                *ready = published_run(group, offset, tag)?;
            }
        } else if group.stamps[offset].load(Ordering::Acquire) != tag {
            return None;
        }
        Some(group.values[offset].with(|p| {
            // SAFETY: this pass's tag was seen (Acquire) in this slot's stamp
            // or in a later slot's of the group, which the producer stored
            // with Release after initialising this value (it fills a group
            // in order); the producer will not write this slot again before
            // the consumer releases its line, and the consumer is unique
            // (`&mut self`) and advances past the slot (the caller) before
            // it reads again, so the value is moved out exactly once.
            unsafe { (*p).assume_init_read() }
        }))
    }

    /// The consumer has read the last slot of its group: move to the next
    /// group of the line, or release the line if that was its last group.
    #[inline(always)]
    fn next_group(&mut self) {
        self.offset = 0;
        self.ready = 0;
        self.group_base = self.group_base.wrapping_add(H);
        let next = self.group + 1;
        if next < self.line_end {
            self.group = next;
            self.ring.point(&mut self.cur, next);
        } else {
            self.release_line();
        }
    }

    /// The consumer has read the last slot of its line: release the line
    /// (one store into the first stamp of its first group) and move to the
    /// next one.
    #[inline(never)]
    fn release_line(&mut self) {
        let start = self.line_end - Self::GROUPS;
        if let Some(g) = self.ring.groups.get(start) {
            g.stamps[0].store(EMPTY, self.release_ordering());
        }
        let mut next = self.line_end;
        if next == self.ring.end {
            next = self.ring.first;
            self.tag ^= TAG_FLIP;
        }
        self.group = next;
        self.ring.point(&mut self.cur, next);
        self.line_end = next + Self::GROUPS;
        if self.prefetch {
            self.prefetch_line_after(next);
        }
    }

    /// Prefetches the groups of the line after the one starting at group
    /// `start` (the line the consumer reads after its current one).
    #[inline(always)]
    fn prefetch_line_after(&self, start: usize) {
        let mut ahead = start + Self::GROUPS;
        if ahead == self.ring.end {
            ahead = self.ring.first;
        }
        if let Some(line) = self.ring.groups.get(ahead..ahead + Self::GROUPS) {
            line.iter().for_each(prefetch::group);
        }
    }

    #[inline(always)]
    fn release_ordering(&self) -> Ordering {
        #[cfg(loom)]
        {
            self.release
        }
        #[cfg(not(loom))]
        {
            Ordering::Release
        }
    }

    /// Loom builds only: release lines with a `Relaxed` store instead of
    /// `Release` — a deliberate bug the model checker must catch.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_weaken_release(&mut self) {
        self.release = Ordering::Relaxed;
    }
}

/// How far the published slots of `group` reach from `offset` (the end of
/// the run, `offset + 1..=H`), or `None` if the slot at `offset` is not
/// published in the pass of `tag`.
///
/// The producer fills a group in order and publishes each slot with a
/// Release store of its stamp, so the *last* stamp of the group carrying
/// the tag (Acquire) means every slot of the group is published: the rest
/// of the group is then taken with no further stamp loads and no branch on
/// each slot's stamp. That stamp cannot be a stale tag of two passes ago:
/// the consumer saw it overwritten with the tag of the pass in between
/// before it took that pass's last slot of the group. The last stamp is in
/// the group's own hardware line, so the check moves no other line.
#[inline]
fn published_run<T, const H: usize>(group: &Group<T, H>, offset: usize, tag: u8) -> Option<usize> {
    if group.stamps[H - 1].load(Ordering::Acquire) == tag {
        return Some(H);
    }
    let own = group.stamps.get(offset)?;
    (offset + 1 < H && own.load(Ordering::Acquire) == tag).then_some(offset + 1)
}

impl<T, const L: usize, const H: usize> Drop for Consumer<T, L, H> {
    fn drop(&mut self) {
        // Tell `Shared::drop` where the unread items start. The `Arc` drop
        // that follows orders these stores before it.
        let cons = &self.shared.cons;
        cons.final_group.store(self.group, Ordering::Relaxed);
        cons.final_offset.store(self.offset, Ordering::Relaxed);
        cons.final_tag.store(self.tag, Ordering::Relaxed);
    }
}
