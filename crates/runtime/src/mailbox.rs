//! The PSPAT client mailbox: a bounded single-producer single-consumer queue
//! in the FastForward / IFFQ style.
//!
//! # Idea
//!
//! A classic ring buffer (Lamport) keeps a head and a tail index that both
//! threads read, so every push and pop moves the index cache lines between
//! the cores. FastForward instead marks each slot itself as *empty* or *full*:
//! the producer writes into the next slot if it is empty, the consumer reads
//! the next slot if it is full, and neither index is ever read by the other
//! thread. IFFQ (the queue of the PSPAT mailbox) adds two refinements that cut
//! the remaining cache-line traffic:
//!
//! * the producer does not test every slot: when its write index reaches its
//!   "checked up to" index (a line boundary) it looks at the line **one line
//!   ahead**; if that line is not yet released the queue is full, otherwise
//!   the checked index moves one line on and the producer fills the current
//!   line without looking at the ring again;
//! * the consumer does not clear a slot when it reads it; it releases a whole
//!   line once it has read past it, so each shared line is written by the
//!   consumer once per pass instead of once per item.
//!
//! Because the producer must see the line *after* the one it fills released,
//! one line always stays free: **capacity = entries − one line**.
//!
//! A third refinement serves the batch pops ([`Consumer::pop_many`],
//! [`Consumer::pop_batch`], [`Consumer::pop_into`]): the producer fills a group (below) in order, so when the
//! consumer reaches a slot it has not seen published it first loads the
//! stamp of the group's *last* slot; if that one is published, so is the
//! whole group, and the consumer takes the rest of it without loading a
//! stamp or branching on one per slot; [`Consumer::pop_many`] copies such a
//! run into its `Vec` or `VecDeque` ([`RunSink`]) at once. A single [`Consumer::pop`] loads only
//! its own slot's stamp.
//!
//! # Layout: lines of groups (generic `T`)
//!
//! The ring is an array of **groups**; a group holds `H` slots laid out as
//! `{ stamps: [AtomicU8; H], values: [UnsafeCell<MaybeUninit<T>>; H] }` and
//! is aligned to [`GROUP_BYTES`] (64, the hardware cache line). A **line**
//! — the unit of the producer's look-ahead and of the consumer's release —
//! is `L / H` consecutive groups. The default is `L` = 28, `H` = 7: with
//! 8-byte items (indices, pointers, `u64`, `Box`) a group is exactly one
//! 64-byte hardware line (7 stamps, 1 byte of padding, 7 values) and a line
//! is four of them, 256 bytes, starting on a [`LINE_BYTES`] boundary: 9.1
//! bytes per item, against 8 for a bare word and 16 for a `{stamp, value}`
//! pair per slot.
//!
//! Every slot's stamp and value share one hardware line, so handing an
//! item from one core to the other moves one hardware line. (A line of 14
//! stamps followed by 14 values — `with_line_slots::<T, 14>`, one group per
//! line — puts the values of slots 6–13 in the second 64 bytes and their
//! stamps in the first: 1.57 hardware lines per item when the consumer
//! follows the producer closely.) The look-ahead and the release still work
//! on whole lines, so the cross-core checks stay one per line (28 items by
//! default: fewer line moves per item than 14-slot lines when the consumer
//! trails, measured faster in the mailbox bench).
//!
//! Stamps take three values:
//!
//! * `0`: released (and the initial state);
//! * `1` / `2`: written in an even / odd pass over the ring (a *pass* is one
//!   trip of an index from the first line to the last).
//!
//! The consumer reading a slot in pass `p` takes it iff its stamp equals the
//! tag of pass `p`. Every other value it can observe there is either the tag
//! of pass `p − 1` (the item it already took one pass ago) or `0`, so a slot
//! never needs clearing for the *consumer's* sake. Releasing a line is
//! therefore a single store of `0` into the stamp of the first slot of its
//! first group — and that is the only slot the producer's look-ahead
//! examines. This plays the role of the sequence bit of the PSPAT kernel
//! code, with a separate stamp so that any `T` (not only aligned, non-null
//! pointers) can be carried: the item needs no spare bit and no "empty"
//! value.
//!
//! A sentinel design (IFFQ's own: the slot is the item, 0 = empty) saves
//! the stamp, but restricts the item to a non-zero word; the stamp keeps
//! `T` generic and the unsafe surface to moving a `T` in and out of a
//! `MaybeUninit`. The groups give the stamp design the sentinel's
//! property that matters for traffic: one hardware line per item. For
//! items that *are* one word the sentinel design is here too: the [`word`]
//! mailbox ([`Mailbox::words`]), whose push is one store (the stamp
//! design's producer stores the value and its stamp) at the price of a
//! clearing store per item on the consumer's side.
//!
//! # Memory orderings
//!
//! * **Publication** (producer → consumer): the producer writes the value,
//!   then stores the pass tag into the stamp with `Release`; the consumer
//!   loads the stamp with `Acquire`. Seeing the tag therefore makes the value
//!   write happen-before the consumer's read of it — and the writes of every
//!   earlier slot of the group, which the producer made before that store:
//!   the last slot's tag publishes the whole group. A last stamp carrying
//!   the tag is not a leftover of two passes ago: before taking that pass's
//!   last slot of the group the consumer saw the stamp carry the tag of the
//!   pass in between (its own load, or the load of the last stamp that let
//!   it take the group), and coherence keeps later loads from seeing the
//!   older value.
//! * **Release of a line** (consumer → producer): after moving every value of
//!   a line out, the consumer stores `0` into the first stamp of the line's
//!   first group with `Release`; the producer's look-ahead loads it with
//!   `Acquire`. The consumer releases lines strictly in ring order, so
//!   seeing line `k + 1` released also makes the consumer's reads of line
//!   `k` (and all earlier lines) happen-before the producer overwriting them.
//! * The producer's check cannot mistake an *old* release for a new one: the
//!   producer itself wrote a non-zero tag into that first stamp on its last
//!   visit, and a `0` that is later in the stamp's modification order can only
//!   be the consumer's release of that very visit (the release of the visit
//!   before it happens-before the producer's write, by the previous point).
//!   For the same reason the consumer's `0` store can never overwrite a fresh
//!   tag.
//! * The consumer's item count, used only by [`Producer::len_estimate`],
//!   and the stamp loads of [`Consumer::len_estimate`] are `Relaxed`.
//!
//! Loom checks these arguments (`tests/loom_mailbox.rs`, run by
//! `ci/loom.sh`), over lines of one and of two groups and across a third
//! visit of a line, including variants where publication or release are
//! weakened to `Relaxed`, which loom must reject.
//!
//! # Unsafe surface
//!
//! Seven `unsafe` sites in the generic mailbox (the [`word`] mailbox adds
//! its line pointer, `LinePtr::get` and its `Send`/`Sync`, the same
//! argument as `GroupPtr`'s), each with its `SAFETY:` argument:
//!
//! * `Producer::write_slot` (an `unsafe fn`, called from `fill` for one
//!   push and from `try_push_many` for a batch) writes a value into a
//!   `MaybeUninit` slot of a line the look-ahead proved released;
//! * `Consumer::take_slot` (and `take_run`, for a run) moves a value out
//!   of a slot whose stamp, or the stamp of a later slot of its group, it
//!   has seen (Acquire) carry the current pass tag;
//! * `Shared::drop` drops the values still queued when both handles are
//!   gone;
//! * `unsafe impl Sync for Group` (the cells are partitioned by the
//!   protocol);
//! * `prefetch::group` calls the `_mm_prefetch` intrinsic (a hint with no
//!   architectural memory access; compiled out under loom and Miri; off
//!   unless [`Consumer::set_prefetch`] turns it on);
//! * `GroupPtr::get` dereferences a handle's pointer to its current group
//!   (taken with a bounds-checked `get` from the handle's own ring clone,
//!   which keeps the allocation alive), for the push, the batch push, the
//!   pop and the run pop;
//! * `unsafe impl Send`/`Sync` for `GroupPtr` (it gives only `&Group`, as
//!   the ring's `Arc` does).
//!
//! # Prefetch (off by default)
//!
//! [`Consumer::set_prefetch`]`(true)` makes the consumer, on moving to a
//! new line, ask the cache for the hardware lines of the line after it.
//! When the consumer trails the producer by more than a line — a backlog
//! at the arbiter, a queue running full — every line it reads next was
//! written on the producer's core, and each first read is a cross-core
//! transfer; the prefetch overlaps it with the pops of the current line.
//! Right behind the producer the prefetched lines are ones the producer
//! is still writing: the prefetch takes them away from the producer's
//! core, which must take them back for its next store. The traffic model
//! (`mailbox/traffic.rs`) counts lines, not this timing, and finds no
//! extra move; the idle interleaved runs found a cost: off was faster in
//! five of seven (within ±4 % either way on 2026-11-26, 1.23× and 1.30×
//! on 2026-11-27), so it is off by default (perf log, 2026-11-27 02:22,
//! h-mb9). A PREFETCHW of
//! the producer's next look-ahead line (as the PSPAT code does) was tried
//! and dropped: no gain could be measured on the shared 2-vCPU test
//! machine.
//!
//! Everything else — indices, stamps, the group ring — is safe code with
//! bounds-checked indexing. The hot paths need no bounds check: the group
//! is behind the pointer, a push's slot index is below `H` by its one
//! compare (the group is full or not), and a pop's by its one compare
//! with the group's last slot (before it: the index moves on; at it: the
//! constant index `H - 1`, then the group step).
//!
//! # Fields grouped by writer
//!
//! The producer's indices (write position = group + offset, where "offset
//! == `H`" is the *group full* case, and at a line's end the *write index
//! reached the checked index* case; the end of the claimed line, pass tag,
//! lines claimed) live in the [`Producer`] handle and the consumer's (read
//! position, whose line is also the clear index — everything before it is
//! released — the end of its line and pass tag) in the [`Consumer`] handle:
//! each is owned by one thread, so they are plain fields, never read by the
//! other side. Each handle also holds its own clone of the ring (a `std`
//! `Arc` of the group slice) and a pointer to its current group (re-taken
//! from that clone at each group step), so a push or pop reaches its slot
//! with one load from the handle. The producer writes nothing shared but
//! the slots: its item count follows from its position, and
//! [`Consumer::len_estimate`] counts the published stamps. The consumer
//! publishes its item count (`Relaxed`, on its own cache line, read only by
//! [`Producer::len_estimate`]; the count itself follows from its position,
//! so a pop only stores it) and, when dropped, its position, for dropping
//! what is left.
//!
//! # Line and group sizes
//!
//! Groups are aligned to 64 bytes ([`GROUP_BYTES`]), so two groups never
//! share a hardware line; the ring keeps one spare group so that its first
//! line starts on a 128-byte boundary ([`LINE_BYTES`]: the adjacent-line
//! prefetch pair on x86, the line of Apple M-series) whenever the group size
//! is an odd multiple of 64 bytes (the default with 8-byte items). `L` and
//! `H` are const parameters of the handles: [`Mailbox::with_capacity`] uses
//! [`DEFAULT_LINE_SLOTS`] and [`DEFAULT_GROUP_SLOTS`],
//! [`Mailbox::with_layout`] picks both (`H` must divide `L`; e.g. 24 and
//! 12 for 4-byte items), and [`Mailbox::with_line_slots`] makes a line one
//! group of `L` slots (tiny sizes make model checking tractable).
//!
//! # Miri
//!
//! The std-thread tests shrink their item counts under `cfg(miri)` and pass
//! under Miri: `ci/miri.sh` installs a nightly toolchain with the `miri`
//! component and runs them (not part of CI, which uses stable only).

mod consumer;
mod prefetch;
mod producer;
mod ring;
pub mod word;
// A model without unsafe code: nothing in it for Miri to check.
#[cfg(all(test, not(loom), not(miri)))]
mod traffic;

pub use consumer::{Consumer, RunSink};
pub use producer::Producer;
pub use word::{WORD_LINE_SLOTS, WordConsumer, WordItem, WordProducer, WordPushError};

use crossbeam_utils::CachePadded;
use ring::{ConsumerShared, Ring, Shared};

#[cfg(loom)]
use crate::sync::Ordering;
use crate::sync::{Arc, AtomicU8, AtomicUsize};

/// Alignment of the first group of every line (with the default layout), in
/// bytes.
pub const LINE_BYTES: usize = 128;

/// Alignment of every group of slots, in bytes: the hardware cache line.
pub const GROUP_BYTES: usize = 64;

/// Default number of slots per line (the unit of look-ahead and release):
/// four groups of [`DEFAULT_GROUP_SLOTS`].
pub const DEFAULT_LINE_SLOTS: usize = 28;

/// Default number of slots per group: with 8-byte items (indices, pointers,
/// `u64`, `Box`) a group is 7 stamp bytes + 1 byte padding + 7 × 8 value
/// bytes = exactly [`GROUP_BYTES`].
pub const DEFAULT_GROUP_SLOTS: usize = 7;

/// Stamp of a released (or never written) slot.
const EMPTY: u8 = 0;
/// Stamp written in the first pass over the ring.
const FIRST_TAG: u8 = 1;
/// `tag ^ TAG_FLIP` alternates between the two pass tags 1 and 2.
const TAG_FLIP: u8 = 3;

/// Constructors of the PSPAT mailbox (a namespace: it has no values).
///
/// ```
/// use pktsched_runtime::mailbox::Mailbox;
///
/// let (mut tx, mut rx) = Mailbox::with_capacity::<u64>(1000);
/// assert_eq!(tx.capacity(), 1008); // 36 lines of 28
/// let worker = std::thread::spawn(move || {
///     let mut sum = 0u64;
///     let mut got = 0;
///     while got < 1000 {
///         if let Some(v) = rx.pop() {
///             sum += v;
///             got += 1;
///         } else {
///             std::hint::spin_loop();
///         }
///     }
///     sum
/// });
/// for i in 0..1000u64 {
///     let mut item = i;
///     while let Err(back) = tx.try_push(item) {
///         item = back;
///         std::hint::spin_loop();
///     }
/// }
/// assert_eq!(worker.join().ok(), Some(499_500));
/// ```
#[derive(Debug)]
pub enum Mailbox {}

impl Mailbox {
    /// A mailbox holding at least `capacity` items, in lines of
    /// [`DEFAULT_LINE_SLOTS`] slots made of groups of
    /// [`DEFAULT_GROUP_SLOTS`].
    ///
    /// The capacity is rounded up to a whole number of lines and the ring has
    /// one more line than that; [`Producer::capacity`] reports the exact
    /// figure.
    ///
    /// # Panics
    ///
    /// If the ring size overflows `usize` or the allocation fails.
    pub fn with_capacity<T>(capacity: usize) -> (Producer<T>, Consumer<T>) {
        Self::with_layout::<T, DEFAULT_LINE_SLOTS, DEFAULT_GROUP_SLOTS>(capacity)
    }

    /// A mailbox holding at least `capacity` items, checking ahead and
    /// releasing `L` slots at a time, with one group of `L` slots per line
    /// (all `L` stamps, then all `L` values).
    ///
    /// Small `L` serve model checking; for throughput prefer
    /// [`Mailbox::with_layout`], whose groups keep every slot's stamp and
    /// value in one hardware line.
    ///
    /// Capacity = `capacity` rounded up to a multiple of `L`; the ring has one
    /// line more.
    ///
    /// # Panics
    ///
    /// If the ring size overflows `usize` or the allocation fails. `L` = 0
    /// does not compile.
    pub fn with_line_slots<T, const L: usize>(
        capacity: usize,
    ) -> (Producer<T, L, L>, Consumer<T, L, L>) {
        Self::with_layout::<T, L, L>(capacity)
    }

    /// A mailbox holding at least `capacity` items in lines of `L` slots
    /// (the unit of look-ahead and release), each made of `L / H` groups of
    /// `H` slots (the unit of layout: `H` stamps, then `H` values, aligned
    /// to [`GROUP_BYTES`]).
    ///
    /// Pick `H` so that a group fills a multiple of [`GROUP_BYTES`] (7 for
    /// 8-byte items, 12 for 4-byte items) and `L` a small multiple of it
    /// (four groups make the 256-byte line of the default).
    ///
    /// Capacity = `capacity` rounded up to a multiple of `L`; the ring has one
    /// line more.
    ///
    /// # Panics
    ///
    /// If the ring size overflows `usize` or the allocation fails. `H` = 0,
    /// or an `L` that is not a non-zero multiple of `H`, does not compile.
    pub fn with_layout<T, const L: usize, const H: usize>(
        capacity: usize,
    ) -> (Producer<T, L, H>, Consumer<T, L, H>) {
        const {
            assert!(H > 0, "a mailbox group needs at least one slot");
            assert!(
                L >= H && L.is_multiple_of(H),
                "a mailbox line must be a whole number of groups"
            );
        };
        let Some(count) = capacity.max(1).div_ceil(L).checked_add(1) else {
            panic!("mailbox of {capacity} items with {L}-slot lines overflows usize");
        };
        let groups = count
            .checked_mul(L / H)
            .filter(|g| g.checked_mul(H).is_some() && g.checked_add(2).is_some());
        let Some(groups) = groups else {
            panic!("mailbox of {capacity} items with {L}-slot lines overflows usize");
        };
        let ring: Ring<T, H> = Ring::new(groups);
        // Both are groups of the ring (it has at least two lines).
        let (Some(last), Some(first)) = (ring.group_ptr(ring.end - 1), ring.group_ptr(ring.first))
        else {
            unreachable!("a mailbox ring has at least two lines");
        };
        let shared = Arc::new(Shared {
            ring: ring.clone(),
            cons: CachePadded::new(ConsumerShared {
                popped: AtomicUsize::new(0),
                final_group: AtomicUsize::new(ring.first),
                final_offset: AtomicUsize::new(0),
                final_tag: AtomicU8::new(FIRST_TAG),
            }),
        });
        let producer = Producer {
            ring: ring.clone(),
            shared: Arc::clone(&shared),
            // "The last group of the last line is full": the first push
            // claims line 0 and flips the tag to FIRST_TAG.
            group: ring.end - 1,
            cur: last,
            offset: H,
            line_end: ring.end,
            tag: FIRST_TAG ^ TAG_FLIP,
            claimed: 0,
            publish: ring::Publication::RELEASE,
        };
        let consumer = Consumer {
            group: ring.first,
            cur: first,
            line_end: ring.first + L / H,
            ring,
            shared,
            offset: 0,
            ready: 0,
            tag: FIRST_TAG,
            group_base: 0,
            prefetch: false,
            #[cfg(loom)]
            release: Ordering::Release,
        };
        (producer, consumer)
    }
}

impl Mailbox {
    /// A word mailbox ([`word`]) holding at least `capacity` items in lines
    /// of [`WORD_LINE_SLOTS`]: each item is one non-zero word, a push is one
    /// store and a pop one load (plus, a line at a time, one clearing store
    /// per item). `capacity` is rounded up to whole lines; the ring has one
    /// line more.
    ///
    /// ```
    /// use std::num::NonZeroU64;
    /// use pktsched_runtime::mailbox::{Mailbox, WordPushError};
    ///
    /// let (mut tx, mut rx) = Mailbox::words::<NonZeroU64>(100);
    /// assert_eq!(tx.capacity(), 128); // 4 lines of 32
    /// assert_eq!(tx.try_push_u64(0), Err(WordPushError::Zero)); // 0 marks "empty"
    /// tx.try_push_u64(42)?;
    /// assert_eq!(rx.pop().map(NonZeroU64::get), Some(42));
    /// assert_eq!(rx.pop(), None);
    /// # Ok::<(), WordPushError>(())
    /// ```
    ///
    /// # Panics
    ///
    /// If the ring size overflows `usize` or the allocation fails.
    pub fn words<W: WordItem>(capacity: usize) -> (WordProducer<W>, WordConsumer<W>) {
        word::channel::<W, WORD_LINE_SLOTS>(capacity)
    }

    /// A word mailbox with lines of `L` slots (the unit of look-ahead and
    /// release; small `L` serve model checking).
    ///
    /// # Panics
    ///
    /// If the ring size overflows `usize` or the allocation fails. `L` = 0
    /// does not compile.
    pub fn words_with_line_slots<W: WordItem, const L: usize>(
        capacity: usize,
    ) -> (WordProducer<W, L>, WordConsumer<W, L>) {
        word::channel::<W, L>(capacity)
    }
}

/// Clamps a wrapping counter difference into `0..=capacity`.
fn clamp_len(diff: usize, capacity: usize) -> usize {
    // A stale counter of the other side can make the difference slightly
    // negative (wrapped) or slightly above the capacity.
    if diff > capacity {
        if diff > usize::MAX / 2 { 0 } else { capacity }
    } else {
        diff
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::ring::Group;
    use super::*;

    #[test]
    fn default_group_of_words_is_one_64_byte_line() {
        assert_eq!(
            std::mem::size_of::<Group<u64, DEFAULT_GROUP_SLOTS>>(),
            GROUP_BYTES
        );
        assert_eq!(
            std::mem::size_of::<Group<usize, DEFAULT_GROUP_SLOTS>>(),
            GROUP_BYTES
        );
        assert_eq!(
            std::mem::size_of::<Group<Box<u8>, DEFAULT_GROUP_SLOTS>>(),
            GROUP_BYTES
        );
        assert_eq!(std::mem::size_of::<Group<u32, 12>>(), GROUP_BYTES);
        assert_eq!(std::mem::size_of::<Group<u64, 14>>(), LINE_BYTES);
        assert_eq!(std::mem::align_of::<Group<u8, 1>>(), GROUP_BYTES);
    }

    /// Every slot's stamp and value are in the same 64-byte hardware line
    /// with the default layout (the point of the groups).
    #[test]
    fn stamp_and_value_of_a_slot_share_a_hardware_line() {
        let (tx, _rx) = Mailbox::with_capacity::<u64>(1024);
        for g in tx.ring.groups.iter() {
            for (stamp, value) in g.stamps.iter().zip(g.values.iter()) {
                let s = std::ptr::from_ref(stamp).addr() / GROUP_BYTES;
                let v = std::ptr::from_ref(value).addr() / GROUP_BYTES;
                assert_eq!(s, v);
            }
        }
    }

    #[test]
    fn lines_start_on_line_boundaries() {
        for cap in [1, 7, 512, 1024, 4096] {
            let (tx, _rx) = Mailbox::with_capacity::<u64>(cap);
            let lines = tx.ring.groups[tx.ring.first..tx.ring.end].chunks(2);
            for line in lines {
                assert_eq!(std::ptr::from_ref(&line[0]).addr() % LINE_BYTES, 0);
            }
            for g in tx.ring.groups.iter() {
                assert_eq!(std::ptr::from_ref(g).addr() % GROUP_BYTES, 0);
            }
        }
    }

    #[test]
    fn layouts_report_their_sizes() {
        let (tx, rx) = Mailbox::with_capacity::<u64>(100);
        assert_eq!((tx.line_slots(), tx.group_slots()), (28, 7));
        assert_eq!((rx.line_slots(), rx.group_slots()), (28, 7));
        assert_eq!(tx.capacity(), 112);
        let (tx, rx) = Mailbox::with_line_slots::<u64, 3>(7);
        assert_eq!((tx.line_slots(), tx.group_slots()), (3, 3));
        assert_eq!(rx.capacity(), 9);
        let (tx, _rx) = Mailbox::with_layout::<u32, 24, 12>(1);
        assert_eq!(tx.capacity(), 24);
    }

    #[test]
    fn clamp_len_handles_stale_counters() {
        assert_eq!(clamp_len(5, 10), 5);
        assert_eq!(clamp_len(12, 10), 10);
        assert_eq!(clamp_len(0usize.wrapping_sub(2), 10), 0);
    }
}
