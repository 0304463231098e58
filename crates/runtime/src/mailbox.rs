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
//! [`Consumer::pop_batch`], [`Consumer::pop_into`]): the producer fills a
//! line in order, so when the consumer reaches a slot it has not seen
//! published it first loads the stamp of the line's *last* slot; if that
//! one is published, so is the whole line, and the consumer takes the rest
//! of it without loading a stamp or branching on one per slot. A single
//! [`Consumer::pop`] loads only its own slot's stamp.
//!
//! # Slot representation (generic `T`)
//!
//! The ring is an array of *lines*; a line holds `L` slots laid out as
//! `{ stamps: [AtomicU8; L], values: [UnsafeCell<MaybeUninit<T>>; L] }` and
//! is aligned to [`LINE_BYTES`]. With the default `L` = 14 and 8-byte items
//! (indices, pointers, `u64`, `Box`) a line is exactly one 128-byte line:
//! 14 stamps, 2 bytes of padding, 14 values (9.1 bytes per item, against 8
//! for a bare word and 16 for a `{stamp, value}` pair per slot, which a first
//! version used and which cost ~10 % throughput: cross-core line transfers
//! per item are what an SPSC queue pays for). A stamp and its value always
//! share the line, so one line transfer hands both over. Stamps take three
//! values:
//!
//! * `0`: released (and the initial state);
//! * `1` / `2`: written in an even / odd pass over the ring (a *pass* is one
//!   trip of an index from the first line to the last).
//!
//! The consumer reading a slot in pass `p` takes it iff its stamp equals the
//! tag of pass `p`. Every other value it can observe there is either the tag
//! of pass `p − 1` (the item it already took one pass ago) or `0`, so a slot
//! never needs clearing for the *consumer's* sake. Releasing a line is
//! therefore a single store of `0` into the stamp of the line's **first**
//! slot — and that is the only slot the producer's look-ahead examines. This
//! plays the role of the sequence bit of the PSPAT kernel code, with a
//! separate stamp so that any `T` (not only aligned, non-null pointers) can be
//! carried: the item needs no spare bit and no "empty" value.
//!
//! A sentinel design (slots of `usize`, 0 = empty, low bit = pass parity)
//! would save the stamp byte, but restricts `T` to non-zero word-sized handles
//! with a spare bit and needs an encoding trait; the stamp keeps `T` generic
//! and the unsafe surface to moving a `T` in and out of a `MaybeUninit`.
//!
//! # Memory orderings
//!
//! * **Publication** (producer → consumer): the producer writes the value,
//!   then stores the pass tag into the stamp with `Release`; the consumer
//!   loads the stamp with `Acquire`. Seeing the tag therefore makes the value
//!   write happen-before the consumer's read of it — and the writes of every
//!   earlier slot of the line, which the producer made before that store:
//!   the last slot's tag publishes the whole line. A last stamp carrying the
//!   tag is not a leftover of two passes ago: before taking that pass's
//!   last slot the consumer saw the stamp carry the tag of the pass in
//!   between (its own load, or the load of the last stamp that let it take
//!   the line), and coherence keeps later loads from seeing the older value.
//! * **Release of a line** (consumer → producer): after moving every value of
//!   a line out, the consumer stores `0` into the first stamp of that line
//!   with `Release`; the producer's look-ahead loads it with `Acquire`. The
//!   consumer releases lines strictly in ring order, so seeing line `k + 1`
//!   released also makes the consumer's reads of line `k` (and all earlier
//!   lines) happen-before the producer overwriting them.
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
//! `ci/loom.sh`), including variants where publication or release are
//! weakened to `Relaxed`, which loom must reject.
//!
//! # Unsafe surface
//!
//! Four `unsafe` sites, each with its `SAFETY:` argument:
//!
//! * `Producer::fill` writes a value into a `MaybeUninit` slot of a line
//!   the look-ahead proved released;
//! * `Consumer::take` moves a value out of a slot whose stamp, or the stamp
//!   of a later slot of its line, it has seen (Acquire) carry the current
//!   pass tag;
//! * `Shared::drop` drops the values still queued when both handles are
//!   gone;
//! * `unsafe impl Sync for Line` (the cells are partitioned by the protocol).
//!
//! A PREFETCHW of the producer's next look-ahead line (as the PSPAT code
//! does) was tried and dropped: it needs an `unsafe` intrinsic call and no
//! gain could be measured on the shared 2-vCPU test machine.
//!
//! Everything else — indices, stamps, the line ring — is safe code with
//! bounds-checked indexing.
//!
//! # Fields grouped by writer
//!
//! The producer's indices (write position = line + offset, where "offset ==
//! `L`" is the *write index reached the checked index* case, pass tag and
//! lines claimed) live in the [`Producer`] handle and the consumer's (read
//! position, whose line is also the clear index — everything before it is
//! released — and pass tag) in the [`Consumer`] handle: each is owned by one
//! thread, so they are plain fields, never read by the other side. Each
//! handle also holds its own clone of the ring (a `std` `Arc` of the line
//! slice), so a push or pop reaches its slot with one indexed access from
//! the handle. The producer writes nothing shared but the slots: its item
//! count follows from its position, and [`Consumer::len_estimate`] counts
//! the published stamps. The consumer publishes its item count
//! (`Relaxed`, on its own cache line, read only by
//! [`Producer::len_estimate`]) and, when dropped, its position, for
//! dropping what is left.
//!
//! # Line size
//!
//! Lines are aligned to 128 bytes ([`LINE_BYTES`]: the adjacent-line
//! prefetch pair on x86, the line of Apple M-series), so two lines never
//! share a hardware line. The number of slots per line `L` is a const
//! parameter of the handles, [`DEFAULT_LINE_SLOTS`] = 14 unless
//! [`Mailbox::with_line_slots`] picks another (25 fills 128 bytes for 4-byte
//! items; tiny `L` make model checking tractable).
//!
//! # Miri
//!
//! The std-thread tests shrink their item counts under `cfg(miri)` and pass
//! under Miri: `ci/miri.sh` installs a nightly toolchain with the `miri`
//! component and runs them (not part of CI, which uses stable only).

use std::collections::VecDeque;
use std::fmt;
use std::mem::MaybeUninit;

use crossbeam_utils::CachePadded;

use crate::sync::{Arc, AtomicU8, AtomicUsize, Ordering, UnsafeCell};

/// Alignment of every line of the ring, in bytes.
pub const LINE_BYTES: usize = 128;

/// Default number of slots per line: with 8-byte items (indices, pointers,
/// `u64`, `Box`) a line is 14 stamp bytes + 2 bytes padding + 14 × 8 value
/// bytes = exactly [`LINE_BYTES`].
pub const DEFAULT_LINE_SLOTS: usize = 14;

/// Stamp of a released (or never written) slot.
const EMPTY: u8 = 0;
/// Stamp written in the first pass over the ring.
const FIRST_TAG: u8 = 1;
/// `tag ^ TAG_FLIP` alternates between the two pass tags 1 and 2.
const TAG_FLIP: u8 = 3;

/// One line of the ring: the stamps of its `L` slots, then their values.
///
/// Aligned to [`LINE_BYTES`] so that two lines never share a hardware cache
/// line (with the default `L` and 8-byte items, a line *is* one 128-byte
/// line).
#[repr(C, align(128))]
struct Line<T, const L: usize> {
    stamps: [AtomicU8; L],
    values: [UnsafeCell<MaybeUninit<T>>; L],
}

// SAFETY: the only non-`Sync` parts are the value cells. Access to them is
// partitioned by the mailbox protocol: the single `Producer` (not `Clone`,
// every mutation through `&mut self`) writes a slot only after the look-ahead
// has shown (with Acquire) that the consumer released its line, and the single
// `Consumer` reads it only after an Acquire load of the stamp the producer
// stored with Release; `Shared::drop` touches them only once both handles are
// gone. A `T` is thereby moved, never shared, between the two threads, so
// `T: Send` suffices.
unsafe impl<T: Send, const L: usize> Sync for Line<T, L> {}

impl<T, const L: usize> Line<T, L> {
    fn new() -> Self {
        Self {
            stamps: std::array::from_fn(|_| AtomicU8::new(EMPTY)),
            values: std::array::from_fn(|_| UnsafeCell::new(MaybeUninit::uninit())),
        }
    }
}

/// The ring of lines. A `std` `Arc` of a slice in both builds: each handle
/// keeps its own clone, so reaching a line is one indexed access from the
/// handle (no pointer chase through the shared block). Loom sees every
/// protocol access anyway: they all go through the loom atomics and cells
/// inside the lines, and the end of both handles is ordered by the loom
/// `Arc` of [`Shared`].
type Lines<T, const L: usize> = std::sync::Arc<[Line<T, L>]>;

/// Written only by the consumer; read by the producer's length estimate and
/// by [`Shared::drop`].
struct ConsumerShared {
    /// Items popped so far (wrapping), for the producer's length estimate.
    popped: AtomicUsize,
    /// The consumer's position (`line * L + offset`), stored when it is
    /// dropped.
    final_pos: AtomicUsize,
    /// The consumer's pass tag, stored when it is dropped.
    final_tag: AtomicU8,
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
///   only after seeing the publishing stamp with `Acquire`.
struct Shared<T, const L: usize> {
    /// Constant after construction (at least two lines).
    lines: Lines<T, L>,
    cons: CachePadded<ConsumerShared>,
}

impl<T, const L: usize> Drop for Shared<T, L> {
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
        let pos = self.cons.final_pos.load(Ordering::Relaxed);
        let (mut line, mut offset) = (pos / L, pos % L);
        let mut tag = self.cons.final_tag.load(Ordering::Relaxed);
        let lines = self.lines.len();
        for _ in 0..lines * L {
            let Some(l) = self.lines.get(line) else {
                break;
            };
            if l.stamps[offset].load(Ordering::Relaxed) != tag {
                break;
            }
            l.values[offset].with_mut(|p| {
                // SAFETY: the stamp carries the tag the consumer would have
                // accepted at this position, so the producer initialised the
                // value and the consumer never moved it out; no other thread
                // exists any more, so this is the only access.
                unsafe { (*p).assume_init_drop() }
            });
            offset += 1;
            if offset == L {
                offset = 0;
                line += 1;
                if line == lines {
                    line = 0;
                    tag ^= TAG_FLIP;
                }
            }
        }
    }
}

/// Constructors of the PSPAT mailbox (a namespace: it has no values).
///
/// ```
/// use pktsched_runtime::mailbox::Mailbox;
///
/// let (mut tx, mut rx) = Mailbox::with_capacity::<u64>(1000);
/// assert_eq!(tx.capacity(), 1008); // 72 lines of 14
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
    /// [`DEFAULT_LINE_SLOTS`] slots.
    ///
    /// The capacity is rounded up to a whole number of lines and the ring has
    /// one more line than that; [`Producer::capacity`] reports the exact
    /// figure.
    ///
    /// # Panics
    ///
    /// If the ring size overflows `usize` or the allocation fails.
    pub fn with_capacity<T>(capacity: usize) -> (Producer<T>, Consumer<T>) {
        Self::with_line_slots::<T, DEFAULT_LINE_SLOTS>(capacity)
    }

    /// A mailbox holding at least `capacity` items, checking ahead and
    /// releasing `L` slots at a time.
    ///
    /// Pick `L` so that a line (`L` stamp bytes, padding, `L` values) fills
    /// a multiple of [`LINE_BYTES`]: e.g. 14 for 8-byte items, 25 for 4-byte
    /// items; small `L` serve model checking.
    ///
    /// Capacity = `capacity` rounded up to a multiple of `L`; the ring has one
    /// line more.
    ///
    /// # Panics
    ///
    /// If the ring size overflows `usize` or the allocation fails. `L` = 0
    /// does not compile.
    pub fn with_line_slots<T, const L: usize>(capacity: usize) -> (Producer<T, L>, Consumer<T, L>) {
        const { assert!(L > 0, "a mailbox line needs at least one slot") };
        let Some(count) = capacity.max(1).div_ceil(L).checked_add(1) else {
            panic!("mailbox of {capacity} items with {L}-slot lines overflows usize");
        };
        if count.checked_mul(L).is_none() {
            panic!("mailbox of {capacity} items with {L}-slot lines overflows usize");
        }
        let lines: Lines<T, L> = (0..count).map(|_| Line::new()).collect();
        let shared = Arc::new(Shared {
            lines: std::sync::Arc::clone(&lines),
            cons: CachePadded::new(ConsumerShared {
                popped: AtomicUsize::new(0),
                final_pos: AtomicUsize::new(0),
                final_tag: AtomicU8::new(FIRST_TAG),
            }),
        });
        let producer = Producer {
            lines: std::sync::Arc::clone(&lines),
            shared: Arc::clone(&shared),
            // "The line before line 0 is full": the first push claims line 0
            // and flips the tag to FIRST_TAG.
            line: count - 1,
            offset: L,
            tag: FIRST_TAG ^ TAG_FLIP,
            claimed: 0,
            #[cfg(loom)]
            publish: Ordering::Release,
        };
        let consumer = Consumer {
            lines,
            shared,
            line: 0,
            offset: 0,
            ready: 0,
            tag: FIRST_TAG,
            popped: 0,
            #[cfg(loom)]
            release: Ordering::Release,
        };
        (producer, consumer)
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

/// The sending half of a mailbox. `Send`, not `Clone`: exactly one thread
/// pushes. `L` is the number of slots per line.
///
/// The producer writes nothing shared but the slots: its item count is
/// derived from its position, and the consumer's length estimate reads the
/// stamps.
pub struct Producer<T, const L: usize = DEFAULT_LINE_SLOTS> {
    lines: Lines<T, L>,
    shared: Arc<Shared<T, L>>,
    /// Line being filled.
    line: usize,
    /// Next slot to fill in `line`; `L` means the line is full and the next
    /// push must claim a new one (the "write index reached the checked
    /// index" case).
    offset: usize,
    /// Stamp of the current pass.
    tag: u8,
    /// Lines claimed so far (wrapping): items pushed = `claimed · L +
    /// offset − L`.
    claimed: usize,
    /// Ordering of the publishing stamp store (loom builds can weaken it to
    /// show that the model checker catches the bug).
    #[cfg(loom)]
    publish: Ordering,
}

impl<T, const L: usize> fmt::Debug for Producer<T, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("capacity", &self.capacity())
            .field("line_slots", &L)
            .field("line", &self.line)
            .field("offset", &self.offset)
            .field("pushed", &self.pushed())
            .finish_non_exhaustive()
    }
}

impl<T, const L: usize> Producer<T, L> {
    /// Maximum number of items the mailbox holds: entries − one line.
    ///
    /// Space is reclaimed a line at a time: after the consumer popped `k`
    /// items from a full mailbox, a push succeeds only once the consumer has
    /// read to the end of a line.
    pub fn capacity(&self) -> usize {
        (self.lines.len() - 1) * L
    }

    /// Slots per line: the granularity of the look-ahead and of release.
    pub fn line_slots(&self) -> usize {
        L
    }

    /// Items pushed so far (wrapping).
    fn pushed(&self) -> usize {
        self.claimed
            .wrapping_mul(L)
            .wrapping_add(self.offset)
            .wrapping_sub(L)
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

    /// The slot of the claimed line the next push fills (claiming the next
    /// line first if the current one is full), or `None` if the mailbox is
    /// full. The result is `< L` on every path, which the compiler sees, so
    /// indexing the line with it needs no bounds check.
    #[inline(always)]
    fn free_offset(&mut self) -> Option<usize> {
        let offset = self.offset;
        if offset < L {
            Some(offset)
        } else if self.claim_line() {
            Some(0)
        } else {
            None
        }
    }

    /// Pushes items taken from `items` while there is room; returns how many
    /// were pushed. An item is taken from the iterator only when a slot is
    /// known to be free, so nothing is lost: what did not fit stays in
    /// `items`.
    pub fn try_push_many<I: Iterator<Item = T>>(&mut self, items: &mut I) -> usize {
        let mut pushed = 0;
        while let Some(offset) = self.free_offset() {
            let Some(value) = items.next() else {
                break;
            };
            self.fill(offset, value);
            pushed += 1;
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

    /// The current line is full: look one line ahead.
    ///
    /// Moves to the next line and returns `true` if the line *after* it has
    /// been released by the consumer; returns `false` (full) otherwise.
    #[inline(never)]
    fn claim_line(&mut self) -> bool {
        let count = self.lines.len();
        let mut next = self.line + 1;
        let mut tag = self.tag;
        if next == count {
            next = 0;
            tag ^= TAG_FLIP;
        }
        let ahead = if next + 1 == count { 0 } else { next + 1 };
        let released = self
            .lines
            .get(ahead)
            .is_some_and(|l| l.stamps[0].load(Ordering::Acquire) == EMPTY);
        if !released {
            return false;
        }
        // Lines are released in ring order, so `ahead` being released means
        // `next` is released too.
        self.line = next;
        self.offset = 0;
        self.tag = tag;
        self.claimed = self.claimed.wrapping_add(1);
        true
    }

    /// Writes `value` into slot `offset` (the next one, from
    /// [`Producer::free_offset`]) of the claimed line and publishes it.
    #[inline(always)]
    fn fill(&mut self, offset: usize, value: T) {
        let Some(line) = self.lines.get(self.line) else {
            // `line < lines.len()` always holds; a `get` keeps the access
            // checked without a panic path in the hot loop.
            return;
        };
        line.values[offset].with_mut(|p| {
            // SAFETY: the line was claimed by `claim_line`, whose Acquire load
            // saw the line after it (hence, by release order, this one)
            // released: the consumer has moved the previous value out and
            // will not touch the cell until it sees the stamp stored below.
            // The producer is unique (`&mut self`). Writing a `MaybeUninit`
            // never drops the (moved-out) old bytes.
            unsafe {
                (*p).write(value);
            }
        });
        line.stamps[offset].store(self.tag, self.publish_ordering());
        self.offset = offset + 1;
    }

    #[inline(always)]
    fn publish_ordering(&self) -> Ordering {
        #[cfg(loom)]
        {
            self.publish
        }
        #[cfg(not(loom))]
        {
            Ordering::Release
        }
    }

    /// Loom builds only: store the publishing stamp with `Relaxed` instead of
    /// `Release` — a deliberate bug the model checker must catch.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_weaken_publication(&mut self) {
        self.publish = Ordering::Relaxed;
    }
}

/// The receiving half of a mailbox. `Send`, not `Clone`: exactly one thread
/// pops. `L` is the number of slots per line.
pub struct Consumer<T, const L: usize = DEFAULT_LINE_SLOTS> {
    lines: Lines<T, L>,
    shared: Arc<Shared<T, L>>,
    /// Line being read; lines before it (in ring order) are released, so
    /// `line` is also the clear index.
    line: usize,
    /// Next slot to read in `line` (`0..L`).
    offset: usize,
    /// Slots `offset..ready` of `line` are known to be published (`ready ≤
    /// L`): they are taken without loading their stamps again.
    ready: usize,
    /// Stamp of the current pass.
    tag: u8,
    /// Items popped so far (wrapping).
    popped: usize,
    /// Ordering of the line-release store (loom builds can weaken it).
    #[cfg(loom)]
    release: Ordering,
}

impl<T, const L: usize> fmt::Debug for Consumer<T, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("capacity", &self.capacity())
            .field("line_slots", &L)
            .field("line", &self.line)
            .field("offset", &self.offset)
            .field("popped", &self.popped)
            .finish_non_exhaustive()
    }
}

impl<T, const L: usize> Consumer<T, L> {
    /// Maximum number of items the mailbox holds: entries − one line.
    pub fn capacity(&self) -> usize {
        (self.lines.len() - 1) * L
    }

    /// Slots per line: the granularity of the look-ahead and of release.
    pub fn line_slots(&self) -> usize {
        L
    }

    /// Approximate number of queued items (exact when the producer is idle).
    ///
    /// Counts the published slots from the read position on (the producer
    /// keeps no shared counter): one stamp per full line, then the slots of
    /// the last one, so it costs `O(lines + L)` loads.
    pub fn len_estimate(&self) -> usize {
        let count = self.lines.len();
        let (mut line, mut offset, mut tag) = (self.line, self.offset, self.tag);
        let mut queued = 0;
        for _ in 0..count {
            let Some(l) = self.lines.get(line) else {
                break;
            };
            // The producer fills a line in order, so a line whose last slot
            // carries the tag is full from `offset` on.
            if l.stamps[L - 1].load(Ordering::Relaxed) == tag {
                queued += L - offset;
            } else {
                queued += l.stamps[offset..]
                    .iter()
                    .take_while(|s| s.load(Ordering::Relaxed) == tag)
                    .count();
                break;
            }
            offset = 0;
            line += 1;
            if line == count {
                line = 0;
                tag ^= TAG_FLIP;
            }
        }
        queued.min(self.capacity())
    }

    /// `true` if [`Consumer::pop`] would return `None` right now.
    pub fn is_empty(&self) -> bool {
        self.offset >= self.ready
            && self
                .lines
                .get(self.line)
                .and_then(|l| l.stamps.get(self.offset))
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
    #[inline]
    pub fn pop_many(&mut self, out: &mut VecDeque<T>, max: usize) -> usize {
        let mut taken = 0;
        while taken < max {
            let Some(value) = self.take(true) else { break };
            out.push_back(value);
            taken += 1;
        }
        // Also after popping nothing: ends a `report_held`.
        self.publish_popped(0);
        taken
    }

    /// The consumer keeps the last `n` items it popped aside, unprocessed:
    /// the producer's length estimate ([`Producer::len_estimate`]) counts
    /// them as still queued until the next [`Consumer::pop`] or
    /// [`Consumer::pop_many`]. (Their slots are free
    /// either way.)
    pub fn report_held(&mut self, n: usize) {
        self.publish_popped(n);
    }

    /// Stores the popped count, less `held`, for the producer's estimate.
    #[inline(always)]
    fn publish_popped(&self, held: usize) {
        self.shared
            .cons
            .popped
            .store(self.popped.wrapping_sub(held), Ordering::Relaxed);
    }

    /// Moves the oldest item out of its slot, if any, and advances (the
    /// popped count is published by the caller).
    ///
    /// With `whole_line` (the batch pops), a slot before `ready` is known
    /// published and its stamp is not loaded; past it, [`published_run`]
    /// looks at the line's stamps. Without (a single [`Consumer::pop`]),
    /// the slot's own stamp is loaded, which is all a lone pop needs.
    ///
    /// The position and the line are read into locals before the first
    /// Acquire load, which the compiler may not move later loads of `self`
    /// above: everything after it uses the locals.
    #[inline(always)]
    fn take(&mut self, whole_line: bool) -> Option<T> {
        let (offset, tag) = (self.offset, self.tag);
        let line = self.lines.get(self.line)?;
        // `offset < L` always holds; `get` keeps a panic path out and lets
        // the compiler drop the bounds checks below.
        let stamp = line.stamps.get(offset)?;
        if whole_line {
            if offset >= self.ready {
                self.ready = published_run(line, offset, tag)?;
            }
        } else if stamp.load(Ordering::Acquire) != tag {
            return None;
        }
        let value = line.values[offset].with(|p| {
            // SAFETY: this pass's tag was seen (Acquire) in this slot's stamp
            // or in a later slot's of the line, which the producer stored
            // with Release after initialising this value (it fills a line
            // in order); the producer will not write this slot again before
            // the consumer releases its line, and the consumer is unique
            // (`&mut self`) and advances past the slot below, so the value
            // is moved out exactly once.
            unsafe { (*p).assume_init_read() }
        });
        self.popped = self.popped.wrapping_add(1);
        if offset + 1 >= L {
            self.release_line();
        } else {
            self.offset = offset + 1;
        }
        Some(value)
    }

    /// Pops up to `max` items, handing each to `sink`; returns how many.
    ///
    /// The consumer's position is updated before each call of `sink`, so a
    /// panicking `sink` loses nothing but the item it was given; the count
    /// the producer's length estimate reads is stored once, at the end.
    pub fn pop_batch(&mut self, max: usize, mut sink: impl FnMut(T)) -> usize {
        let mut taken = 0;
        while taken < max {
            let Some(value) = self.take(true) else {
                break;
            };
            sink(value);
            taken += 1;
        }
        self.publish_popped(0);
        taken
    }

    /// Pops up to `max` items into `out` (a `Vec`, `VecDeque`, …); returns
    /// how many. The count the producer's length estimate reads is stored
    /// once, at the end.
    pub fn pop_into<E: Extend<T>>(&mut self, out: &mut E, max: usize) -> usize {
        let mut taken = 0;
        out.extend(std::iter::from_fn(|| {
            if taken == max {
                return None;
            }
            let value = self.take(true)?;
            taken += 1;
            Some(value)
        }));
        self.publish_popped(0);
        taken
    }

    /// The consumer has read the last slot of its line: release the line
    /// (one store into its first stamp) and move to the next one.
    #[inline(never)]
    fn release_line(&mut self) {
        if let Some(l) = self.lines.get(self.line) {
            l.stamps[0].store(EMPTY, self.release_ordering());
        }
        self.offset = 0;
        self.ready = 0;
        self.line += 1;
        if self.line == self.lines.len() {
            self.line = 0;
            self.tag ^= TAG_FLIP;
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

/// How far the published slots of `line` reach from `offset` (the end of
/// the run, `offset + 1..=L`), or `None` if the slot at `offset` is not
/// published in the pass of `tag`.
///
/// The producer fills a line in order and publishes each slot with a
/// Release store of its stamp, so the *last* stamp of the line carrying the
/// tag (Acquire) means every slot of the line is published: the rest of the
/// line is then taken with no further stamp loads and no branch on each
/// slot's stamp. That stamp cannot be a stale tag of two passes ago: the
/// consumer saw it overwritten with the tag of the pass in between before
/// it took that pass's last slot.
#[inline]
fn published_run<T, const L: usize>(line: &Line<T, L>, offset: usize, tag: u8) -> Option<usize> {
    if line.stamps[L - 1].load(Ordering::Acquire) == tag {
        return Some(L);
    }
    let own = line.stamps.get(offset)?;
    (offset + 1 < L && own.load(Ordering::Acquire) == tag).then_some(offset + 1)
}

impl<T, const L: usize> Drop for Consumer<T, L> {
    fn drop(&mut self) {
        // Tell `Shared::drop` where the unread items start. The `Arc` drop
        // that follows orders these stores before it.
        let cons = &self.shared.cons;
        cons.final_pos
            .store(self.line * L + self.offset, Ordering::Relaxed);
        cons.final_tag.store(self.tag, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn default_line_of_words_is_one_128_byte_line() {
        assert_eq!(
            std::mem::size_of::<Line<u64, DEFAULT_LINE_SLOTS>>(),
            LINE_BYTES
        );
        assert_eq!(
            std::mem::size_of::<Line<usize, DEFAULT_LINE_SLOTS>>(),
            LINE_BYTES
        );
        assert_eq!(
            std::mem::size_of::<Line<Box<u8>, DEFAULT_LINE_SLOTS>>(),
            LINE_BYTES
        );
        assert_eq!(std::mem::size_of::<Line<u32, 25>>(), LINE_BYTES);
        assert_eq!(std::mem::align_of::<Line<u8, 1>>(), LINE_BYTES);
    }

    #[test]
    fn lines_start_on_line_boundaries() {
        for cap in [1, 7, 512, 1024, 4096] {
            let (tx, _rx) = Mailbox::with_capacity::<u64>(cap);
            for line in tx.lines.iter() {
                assert_eq!(std::ptr::from_ref(line).addr() % LINE_BYTES, 0);
            }
        }
    }

    #[test]
    fn clamp_len_handles_stale_counters() {
        assert_eq!(clamp_len(5, 10), 5);
        assert_eq!(clamp_len(12, 10), 10);
        assert_eq!(clamp_len(0usize.wrapping_sub(2), 10), 0);
    }
}
