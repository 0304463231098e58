//! The shared ring of the mailbox: slot groups, the block both handles
//! share, and dropping what is left when both are gone.

use std::mem::MaybeUninit;
use std::ptr::NonNull;

use crossbeam_utils::CachePadded;

use super::{EMPTY, LINE_BYTES, TAG_FLIP};
use crate::sync::{AtomicU8, AtomicUsize, Ordering, UnsafeCell};

/// The ordering of a producer's publishing store (the generic mailbox's
/// stamp, the word mailbox's word): always `Release`, except that loom
/// builds can weaken it to `Relaxed`, a deliberate bug the model checker
/// must catch. Zero-sized outside loom builds.
#[derive(Clone, Copy, Debug)]
pub(super) struct Publication {
    #[cfg(loom)]
    ordering: Ordering,
}

impl Publication {
    /// The correct publication.
    pub(super) const RELEASE: Self = Self {
        #[cfg(loom)]
        ordering: Ordering::Release,
    };

    /// The ordering to store with.
    #[inline(always)]
    pub(super) fn ordering(self) -> Ordering {
        #[cfg(loom)]
        {
            self.ordering
        }
        #[cfg(not(loom))]
        {
            Ordering::Release
        }
    }

    /// Loom builds only: publish with `Relaxed` from now on.
    #[cfg(loom)]
    pub(super) fn weaken(&mut self) {
        self.ordering = Ordering::Relaxed;
    }
}

/// One group of `H` slots: their stamps, then their values, aligned to
/// [`super::GROUP_BYTES`] so that a group never shares a hardware cache line
/// with another one. With the default `H` = 7 and 8-byte items a group is
/// exactly one 64-byte line (7 stamps, 1 byte padding, 7 values), so a
/// slot's stamp and its value always travel between the cores together.
#[repr(C, align(64))]
pub(super) struct Group<T, const H: usize> {
    pub(super) stamps: [AtomicU8; H],
    pub(super) values: [UnsafeCell<MaybeUninit<T>>; H],
}

// SAFETY: the only non-`Sync` parts are the value cells. Access to them is
// partitioned by the mailbox protocol: the single `Producer` (not `Clone`,
// every mutation through `&mut self`) writes a slot only after the look-ahead
// has shown (with Acquire) that the consumer released its line, and the single
// `Consumer` reads it only after an Acquire load of a stamp the producer
// stored with Release after writing it; `Shared::drop` touches them only once
// both handles are gone. A `T` is thereby moved, never shared, between the
// two threads, so `T: Send` suffices.
unsafe impl<T: Send, const H: usize> Sync for Group<T, H> {}

impl<T, const H: usize> Group<T, H> {
    fn new() -> Self {
        Self {
            stamps: std::array::from_fn(|_| AtomicU8::new(EMPTY)),
            values: std::array::from_fn(|_| UnsafeCell::new(MaybeUninit::uninit())),
        }
    }
}

/// The ring: a `std` `Arc` of a slice of groups, of which `first..end` are
/// used (a line is `L / H` consecutive groups). Each handle keeps its own
/// clone (no pointer chase through the shared block), which also keeps
/// alive the group its [`GroupPtr`] points at. Loom sees every protocol access
/// anyway: they all go through the loom atomics and cells inside the
/// groups, and the end of both handles is ordered by the loom `Arc` of
/// [`Shared`].
pub(super) struct Ring<T, const H: usize> {
    pub(super) groups: std::sync::Arc<[Group<T, H>]>,
    /// Index of the first group of line 0.
    pub(super) first: usize,
    /// One past the last group of the last line.
    pub(super) end: usize,
}

impl<T, const H: usize> Clone for Ring<T, H> {
    fn clone(&self) -> Self {
        Self {
            groups: std::sync::Arc::clone(&self.groups),
            first: self.first,
            end: self.end,
        }
    }
}

impl<T, const H: usize> Ring<T, H> {
    /// `used` groups, the first of them on a [`LINE_BYTES`] boundary when a
    /// group's size allows it (one spare group is allocated to absorb an
    /// allocation that starts half-way through a 128-byte line).
    pub(super) fn new(used: usize) -> Self {
        let groups: std::sync::Arc<[Group<T, H>]> = (0..=used).map(|_| Group::new()).collect();
        let first = usize::from(
            groups
                .first()
                .is_some_and(|g| std::ptr::from_ref(g).addr() % LINE_BYTES != 0)
                && !std::mem::size_of::<Group<T, H>>().is_multiple_of(LINE_BYTES),
        );
        Self {
            groups,
            first,
            end: first + used,
        }
    }

    /// Number of groups in use.
    pub(super) fn len(&self) -> usize {
        self.end - self.first
    }

    /// A pointer to group `index`, for the handle's hot path; `None` only
    /// for an index outside the ring, which a handle never keeps (its
    /// indices are in `first..end`). An `Option` rather than an indexing
    /// panic keeps the panic path (and its code) out of the callers' hot
    /// loops, which changes their inlining.
    #[inline(always)]
    pub(super) fn group_ptr(&self, index: usize) -> Option<GroupPtr<T, H>> {
        self.groups.get(index).map(|g| GroupPtr(NonNull::from(g)))
    }

    /// Points a handle's `cur` at group `index`, its new current group
    /// (always in the ring, so the pointer always moves; a slip would
    /// leave `cur` on a stale, still in-ring group: caught in debug
    /// builds).
    #[inline(always)]
    pub(super) fn point(&self, cur: &mut GroupPtr<T, H>, index: usize) {
        let group = self.group_ptr(index);
        debug_assert!(group.is_some(), "group {index} is outside the ring");
        if let Some(group) = group {
            *cur = group;
        }
    }
}

/// A handle's pointer to its current group: the hot path reaches the
/// group with one load, instead of loading the slice's base and adding the
/// scaled index (each handle keeps the group's index too, for its slow
/// paths).
///
/// Made only by [`Ring::group_ptr`], from a bounds-checked index, so it
/// points at a group of that ring's allocation; the handle that holds it
/// also holds a clone of that ring (its `Arc`), which keeps the allocation
/// alive for as long as the handle.
pub(super) struct GroupPtr<T, const H: usize>(NonNull<Group<T, H>>);

// SAFETY: a `GroupPtr` only ever gives shared access (`&Group`) to a group
// of a ring whose `Arc` the same handle holds, and `Group<T, H>` is `Sync`
// for `T: Send`: sending or sharing the pointer is as safe as sending or
// sharing that `Arc` (which is `Send + Sync` under the same bound).
unsafe impl<T: Send, const H: usize> Send for GroupPtr<T, H> {}
// SAFETY: as for `Send` above.
unsafe impl<T: Send, const H: usize> Sync for GroupPtr<T, H> {}

impl<T, const H: usize> GroupPtr<T, H> {
    /// The group this points at, borrowed for as long as `ring`.
    ///
    /// # Safety
    ///
    /// `self` was made by `ring.group_ptr` or by `group_ptr` of a clone of
    /// `ring` (the same allocation): then it points at a live group of
    /// `ring`, and the borrow of `ring` keeps it alive.
    #[inline(always)]
    pub(super) unsafe fn get<'a>(&self, ring: &'a Ring<T, H>) -> &'a Group<T, H> {
        debug_assert!(
            ring.groups
                .as_ptr_range()
                .contains(&self.0.as_ptr().cast_const()),
            "group pointer outside its ring"
        );
        // SAFETY: the caller guarantees that `self` points at a group of
        // `ring`'s allocation, which the shared borrow of `ring` keeps
        // alive; every access through the `&Group` is to atomics or to
        // cells whose use the mailbox protocol partitions (see `Group`).
        unsafe { self.0.as_ref() }
    }
}

/// Written only by the consumer; read by the producer's length estimate and
/// by [`Shared::drop`].
pub(super) struct ConsumerShared {
    /// Items popped so far (wrapping), for the producer's length estimate.
    pub(super) popped: AtomicUsize,
    /// The consumer's group (index into the ring's slice), stored when it
    /// is dropped.
    pub(super) final_group: AtomicUsize,
    /// The consumer's slot in that group, stored when it is dropped.
    pub(super) final_offset: AtomicUsize,
    /// The consumer's pass tag, stored when it is dropped.
    pub(super) final_tag: AtomicU8,
}

/// The block both handles share: the ring (a third clone, for dropping what
/// is left) and the consumer's published counters.
///
/// Invariants (the protocol described in the module docs):
///
/// * the value of a slot is initialised exactly when the consumer's
///   traversal (position + pass tag) will still find the current tag in its
///   stamp, i.e. the item was published and not yet taken;
/// * only the producer writes values, only into lines the consumer has
///   released (checked by the look-ahead), and only the consumer reads them,
///   only after seeing a publishing stamp with `Acquire`.
pub(super) struct Shared<T, const H: usize> {
    /// Constant after construction (at least two lines).
    pub(super) ring: Ring<T, H>,
    pub(super) cons: CachePadded<ConsumerShared>,
}

impl<T, const H: usize> Drop for Shared<T, H> {
    fn drop(&mut self) {
        // Both handles are gone (this is the last `Arc`), so every access of
        // both threads happens-before this point. Walk from where the consumer
        // stopped, taking every slot that still carries the tag it expected:
        // those are exactly the items that were pushed and never popped.
        #[cfg(loom)]
        if std::thread::panicking() {
            // Loom aborts a model by panicking, possibly in the middle of a
            // cell access; touching the cells again while unwinding would
            // turn its report into a double-panic abort. Leak instead.
            return;
        }
        let ring = &self.ring;
        let mut group = self.cons.final_group.load(Ordering::Relaxed);
        let mut offset = self.cons.final_offset.load(Ordering::Relaxed);
        let mut tag = self.cons.final_tag.load(Ordering::Relaxed);
        for _ in 0..ring.len() * H {
            let Some(g) = ring.groups.get(group) else {
                break;
            };
            if g.stamps
                .get(offset)
                .is_none_or(|s| s.load(Ordering::Relaxed) != tag)
            {
                break;
            }
            g.values[offset].with_mut(|p| {
                // SAFETY: the stamp carries the tag the consumer would have
                // accepted at this position, so the producer initialised the
                // value and the consumer never moved it out; no other thread
                // exists any more, so this is the only access.
                unsafe { (*p).assume_init_drop() }
            });
            offset += 1;
            if offset == H {
                offset = 0;
                group += 1;
                if group == ring.end {
                    group = ring.first;
                    tag ^= TAG_FLIP;
                }
            }
        }
    }
}
