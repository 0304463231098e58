//! The word mailbox: the IFFQ protocol for items that are one non-zero
//! word, with the value itself as the slot's full / empty mark.
//!
//! # Protocol
//!
//! A slot is one `AtomicU64`; `0` means *empty*, anything else is an item
//! ([`WordItem`] turns an item into a [`NonZeroU64`] and back). The ring is
//! an array of lines of `L` slots, each line aligned to
//! [`super::LINE_BYTES`] (the default `L` = [`WORD_LINE_SLOTS`] = 32 makes a
//! line 256 bytes, four hardware lines, as spscq's `iffq` with `-L 32`).
//!
//! * **Push** — one store: the producer writes the item's word into its next
//!   slot (`Release`). Its position is its own (a handle field, or a local in
//!   [`WordProducer::try_push_many`]); nothing else is written.
//! * **Pop** — one load: the consumer loads its next slot (`Acquire`); `0`
//!   means empty, anything else is the item, and the consumer moves on. It
//!   does not clear the slot then.
//! * **Release** — after taking a line's last slot the consumer writes `0`
//!   into every slot of the line (one clearing store per item, a line at a
//!   time, the first slot's store with `Release`) and moves to the next line.
//! * **Look-ahead** — the producer checks the ring once per line: to claim
//!   line `k` it loads (`Acquire`) the first slot of line `k + 1` (mod the
//!   ring); if that is `0` line `k + 1` was released, hence (lines are
//!   released in order) line `k` too, and the producer fills line `k` without
//!   looking again. Otherwise the mailbox is full. One line therefore always
//!   stays free: **capacity = entries − one line**.
//!
//! No index is shared and no slot carries a pass tag: the consumer can never
//! see a word of an earlier pass in a slot, because it cleared that slot
//! itself before moving on (program order and coherence), and the producer
//! writes a slot again only after the look-ahead.
//!
//! # Memory orderings
//!
//! * **Publication**: the producer's `Release` store of the word and the
//!   consumer's `Acquire` load of it order whatever the producer did before
//!   the push (for a handle item: filling the memory it names) before what
//!   the consumer does after the pop. A plain `u64` payload needs no such
//!   ordering, but a handle does; on x86 both compile to plain moves.
//! * **Release of a line**: the consumer clears line `k + 1` — slot 0 first,
//!   with `Release` — only after it has read and cleared every slot of line
//!   `k` (program order). The producer's `Acquire` load seeing that `0`
//!   therefore orders all of line `k`'s reads and clears before its own
//!   writes into line `k`: a producer word can never be overwritten by a
//!   late clear, nor read before the consumer took the previous one. The
//!   clearing order *inside* a line does not matter thanks to the
//!   look-ahead (without it — the producer checking the line it is about to
//!   fill — the producer could write slot 1 of a line whose slot 0 the
//!   consumer has just cleared but whose slot 1 it has not: `tests/
//!   loom_mailbox.rs` has that broken variant, and loom must reject it).
//! * The `0` the look-ahead sees is the consumer's clear of the producer's
//!   own last visit of that line (or the initial `0` in the first pass): the
//!   producer wrote a non-zero word there on that visit, and the only later
//!   stores to that slot are the consumer's clear and the producer's own
//!   next visit, which follows this check.
//!
//! # Sentinel rule
//!
//! `0` is reserved. [`WordItem::into_word`] returns a [`NonZeroU64`], so a
//! typed item cannot be `0`; the raw-word entry
//! [`WordProducer::try_push_u64`] refuses `0` with
//! [`WordPushError::Zero`] (nothing is written, nothing panics). Items are
//! `Copy` words: nothing is dropped with the mailbox, and what is still
//! queued when both handles are gone is simply forgotten (a handle whose
//! resource must be returned belongs in the generic [`super::Mailbox`],
//! which drops what is left).
//!
//! # Compared with the generic mailbox
//!
//! The generic mailbox's producer stores the value and a pass-tag byte per
//! item (and a single `try_push` also its position); this one stores the
//! word only (and its position for a single `try_push`). Its consumer
//! stores the word's clearing `0` per item, against one stamp per line
//! there. It takes 8 bytes per item against 9.1, and no `T` but a word.

use std::fmt;
use std::marker::PhantomData;
use std::num::NonZeroU64;
use std::ptr::NonNull;

use super::ring::Publication;
use crate::sync::{AtomicU64, Ordering};

/// Default slots per line of the word mailbox: 32 words, 256 bytes (four
/// hardware lines), as spscq's `iffq` in `compare-peers-queues.sh`.
pub const WORD_LINE_SLOTS: usize = 32;

/// The empty-slot mark.
const EMPTY_WORD: u64 = 0;

/// An item the word mailbox carries: a `Copy` value that travels as one
/// non-zero 64-bit word (`0` marks an empty slot).
///
/// `from_word(into_word(x))` must give back `x`; the mailbox only ever
/// hands `from_word` words that `into_word` made.
pub trait WordItem: Copy + Send + 'static {
    /// The word this item travels as (never zero).
    fn into_word(self) -> NonZeroU64;
    /// The item `word` came from.
    fn from_word(word: NonZeroU64) -> Self;
}

impl WordItem for NonZeroU64 {
    #[inline(always)]
    fn into_word(self) -> NonZeroU64 {
        self
    }
    #[inline(always)]
    fn from_word(word: NonZeroU64) -> Self {
        word
    }
}

/// Why [`WordProducer::try_push_u64`] did not push a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WordPushError {
    /// The mailbox is full; the word (handed back) was not pushed.
    Full(u64),
    /// The word was `0`, the empty-slot mark: word items must be
    /// `1..=u64::MAX`. Nothing was pushed.
    Zero,
}

impl fmt::Display for WordPushError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(word) => write!(f, "word mailbox is full: item {word} was not pushed"),
            Self::Zero => f.write_str(
                "word mailbox item: value 0 is not allowed (0 marks an empty slot; \
                 items must be 1..=18446744073709551615)",
            ),
        }
    }
}

impl std::error::Error for WordPushError {}

/// One line of `L` word slots, aligned to [`super::LINE_BYTES`].
#[repr(C, align(128))]
pub(super) struct WordLine<const L: usize> {
    pub(super) slots: [AtomicU64; L],
}

impl<const L: usize> WordLine<L> {
    fn new() -> Self {
        Self {
            slots: std::array::from_fn(|_| AtomicU64::new(EMPTY_WORD)),
        }
    }
}

/// A handle's pointer to its current line (one load on the hot path, no
/// bounds check on the line index).
///
/// Made only by [`line_ptr`], from a bounds-checked index of a ring whose
/// `Arc` the same handle holds, which keeps the line alive for as long as
/// the handle.
struct LinePtr<const L: usize>(NonNull<WordLine<L>>);

// SAFETY: a `LinePtr` only gives shared access (`&WordLine`) to a line of a
// ring whose `Arc` the same handle holds; `WordLine` is made of atomics
// only (`Send + Sync`), so sending or sharing the pointer is as safe as
// sending or sharing that `Arc`.
unsafe impl<const L: usize> Send for LinePtr<L> {}
// SAFETY: as for `Send` above.
unsafe impl<const L: usize> Sync for LinePtr<L> {}

impl<const L: usize> LinePtr<L> {
    /// The line this points at, borrowed for as long as `lines`.
    ///
    /// # Safety
    ///
    /// `self` was made by [`line_ptr`] from `lines` or from a clone of its
    /// `Arc` (the same allocation).
    #[inline(always)]
    unsafe fn get<'a>(&self, lines: &'a [WordLine<L>]) -> &'a WordLine<L> {
        debug_assert!(
            lines.as_ptr_range().contains(&self.0.as_ptr().cast_const()),
            "line pointer outside its ring"
        );
        // SAFETY: the caller guarantees that `self` points at a line of
        // `lines`' allocation, which the shared borrow keeps alive; the
        // line holds atomics only, so a shared reference is all any access
        // needs.
        unsafe { self.0.as_ref() }
    }
}

/// A pointer to line `index` of `lines`; `None` only for an index outside
/// the ring, which a handle never keeps.
#[inline(always)]
fn line_ptr<const L: usize>(lines: &[WordLine<L>], index: usize) -> Option<LinePtr<L>> {
    lines.get(index).map(|l| LinePtr(NonNull::from(l)))
}

/// The line after `index` in a ring of `count` lines.
#[inline(always)]
fn next_line(index: usize, count: usize) -> usize {
    if index + 1 >= count { 0 } else { index + 1 }
}

/// The sending half of a word mailbox ([`super::Mailbox::words`]). `Send`,
/// not `Clone`: exactly one thread pushes.
pub struct WordProducer<W, const L: usize = WORD_LINE_SLOTS> {
    lines: std::sync::Arc<[WordLine<L>]>,
    /// Line being filled.
    line: usize,
    /// Points at `line`.
    cur: LinePtr<L>,
    /// Next slot to fill in `line`; `L` means the line is full and the next
    /// push claims the next one.
    offset: usize,
    /// Ordering of the publishing store (loom builds can weaken it).
    publish: Publication,
    /// Lines between the claimed line and the one the look-ahead checks
    /// (1; loom builds can set 0, a deliberate bug).
    #[cfg(loom)]
    look_ahead: usize,
    _item: PhantomData<fn(W) -> W>,
}

/// The receiving half of a word mailbox ([`super::Mailbox::words`]).
/// `Send`, not `Clone`: exactly one thread pops.
pub struct WordConsumer<W, const L: usize = WORD_LINE_SLOTS> {
    lines: std::sync::Arc<[WordLine<L>]>,
    /// Line being read; every line before it (in ring order) is released.
    line: usize,
    /// Points at `line`.
    cur: LinePtr<L>,
    /// Next slot to read in `line` (`0..L`).
    offset: usize,
    /// Loom builds only: release a line as soon as its first item is taken
    /// (clearing slots not yet read), a deliberate bug.
    #[cfg(loom)]
    early_release: bool,
    _item: PhantomData<fn(W) -> W>,
}

impl<W, const L: usize> fmt::Debug for WordProducer<W, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WordProducer")
            .field("capacity", &((self.lines.len() - 1) * L))
            .field("line_slots", &L)
            .field("line", &self.line)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

impl<W, const L: usize> fmt::Debug for WordConsumer<W, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WordConsumer")
            .field("capacity", &((self.lines.len() - 1) * L))
            .field("line_slots", &L)
            .field("line", &self.line)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

/// Builds both handles over a ring of at least `capacity` items (see
/// [`super::Mailbox::words_with_line_slots`]).
pub(super) fn channel<W: WordItem, const L: usize>(
    capacity: usize,
) -> (WordProducer<W, L>, WordConsumer<W, L>) {
    const { assert!(L > 0, "a word mailbox line needs at least one slot") };
    let Some(count) = capacity.max(1).div_ceil(L).checked_add(1) else {
        panic!("word mailbox of {capacity} items with {L}-slot lines overflows usize");
    };
    let lines: std::sync::Arc<[WordLine<L>]> = (0..count).map(|_| WordLine::new()).collect();
    // Both are lines of the ring (it has at least two).
    let (Some(last), Some(first)) = (line_ptr(&lines, count - 1), line_ptr(&lines, 0)) else {
        unreachable!("a word mailbox ring has at least two lines");
    };
    let producer = WordProducer {
        lines: std::sync::Arc::clone(&lines),
        // "The last line is full": the first push claims line 0.
        line: count - 1,
        cur: last,
        offset: L,
        publish: Publication::RELEASE,
        #[cfg(loom)]
        look_ahead: 1,
        _item: PhantomData,
    };
    let consumer = WordConsumer {
        lines,
        line: 0,
        cur: first,
        offset: 0,
        #[cfg(loom)]
        early_release: false,
        _item: PhantomData,
    };
    (producer, consumer)
}

impl<W: WordItem, const L: usize> WordProducer<W, L> {
    /// Maximum number of items the mailbox holds: entries − one line.
    pub fn capacity(&self) -> usize {
        (self.lines.len() - 1) * L
    }

    /// Slots per line: the granularity of the look-ahead and of release.
    pub fn line_slots(&self) -> usize {
        L
    }

    /// Pushes `item`, or hands it back if the mailbox is full.
    #[inline]
    pub fn try_push(&mut self, item: W) -> Result<(), W> {
        let mut offset = self.offset;
        if offset >= L {
            if !self.claim_line() {
                return Err(item);
            }
            offset = 0;
        }
        // SAFETY: `cur` was made by `line_ptr` of this handle's ring.
        let line = unsafe { self.cur.get(&self.lines) };
        line.slots[offset].store(item.into_word().get(), self.publish.ordering());
        self.offset = offset + 1;
        Ok(())
    }

    /// Pushes items taken from `items` while there is room; returns how
    /// many were pushed. An item is taken from the iterator only for a
    /// known-free slot, so what did not fit stays in `items`.
    ///
    /// The position stays in a local for a whole line (stored back once
    /// per line, and also if the iterator panics): one store per item.
    pub fn try_push_many<I: Iterator<Item = W>>(&mut self, items: &mut I) -> usize {
        let mut pushed = 0;
        loop {
            if self.offset >= L && !self.claim_line() {
                break;
            }
            let publish = self.publish.ordering();
            // SAFETY: `cur` was made by `line_ptr` of this handle's ring.
            let line = unsafe { self.cur.get(&self.lines) };
            let start = self.offset;
            let mut pos = super::producer::Position {
                stored: &mut self.offset,
                offset: start,
            };
            while pos.offset < L {
                let Some(item) = items.next() else {
                    break;
                };
                line.slots[pos.offset].store(item.into_word().get(), publish);
                pos.offset += 1;
            }
            let end = pos.offset;
            drop(pos);
            pushed += end - start;
            if end < L {
                break;
            }
        }
        pushed
    }

    /// The claimed line is full: look one line ahead. Moves to the next
    /// line and returns `true` if the line after it is released (its first
    /// slot is `0`); `false` (full) otherwise.
    #[inline(never)]
    fn claim_line(&mut self) -> bool {
        let count = self.lines.len();
        let next = next_line(self.line, count);
        #[cfg(not(loom))]
        let ahead = next_line(next, count);
        #[cfg(loom)]
        let ahead = if self.look_ahead == 0 {
            next
        } else {
            next_line(next, count)
        };
        let released = self
            .lines
            .get(ahead)
            .is_some_and(|l| l.slots[0].load(Ordering::Acquire) == EMPTY_WORD);
        if !released {
            return false;
        }
        let Some(cur) = line_ptr(&self.lines, next) else {
            return false;
        };
        self.line = next;
        self.cur = cur;
        self.offset = 0;
        true
    }

    /// Loom builds only: publish with `Relaxed` instead of `Release` — a
    /// deliberate bug the model checker must catch (for a handle item).
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_weaken_publication(&mut self) {
        self.publish.weaken();
    }

    /// Loom builds only: the look-ahead checks the line to be filled
    /// instead of the one after it — a deliberate bug the model checker
    /// must catch.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_skip_look_ahead(&mut self) {
        self.look_ahead = 0;
    }
}

impl<const L: usize> WordProducer<NonZeroU64, L> {
    /// Pushes a raw word: [`WordPushError::Zero`] for `0` (the empty-slot
    /// mark, never pushed), [`WordPushError::Full`] with the word if the
    /// mailbox is full.
    #[inline]
    pub fn try_push_u64(&mut self, word: u64) -> Result<(), WordPushError> {
        let Some(item) = NonZeroU64::new(word) else {
            return Err(WordPushError::Zero);
        };
        self.try_push(item).map_err(|_| WordPushError::Full(word))
    }
}

impl<W: WordItem, const L: usize> WordConsumer<W, L> {
    /// Maximum number of items the mailbox holds: entries − one line.
    pub fn capacity(&self) -> usize {
        (self.lines.len() - 1) * L
    }

    /// Slots per line.
    pub fn line_slots(&self) -> usize {
        L
    }

    /// Whether the next pop would find nothing (one load of the next slot).
    pub fn is_empty(&self) -> bool {
        // SAFETY: `cur` was made by `line_ptr` of this handle's ring.
        let line = unsafe { self.cur.get(&self.lines) };
        line.slots
            .get(self.offset)
            .is_none_or(|s| s.load(Ordering::Relaxed) == EMPTY_WORD)
    }

    /// Takes the next item, or `None` if the mailbox is empty.
    ///
    /// One compare on the position: before the line's last slot the
    /// position moves on; at it (the constant index `L - 1`) the line is
    /// released and the next one begins.
    #[inline]
    pub fn pop(&mut self) -> Option<W> {
        // SAFETY: `cur` was made by `line_ptr` of this handle's ring.
        let line = unsafe { self.cur.get(&self.lines) };
        let offset = self.offset;
        if offset < L - 1 {
            let word = NonZeroU64::new(line.slots[offset].load(Ordering::Acquire))?;
            self.offset = offset + 1;
            #[cfg(loom)]
            if self.early_release && offset == 0 {
                self.clear_line();
            }
            Some(W::from_word(word))
        } else {
            let word = NonZeroU64::new(line.slots[L - 1].load(Ordering::Acquire))?;
            self.release_line();
            Some(W::from_word(word))
        }
    }

    /// Takes up to `max` items into `out`; returns how many.
    pub fn pop_into(&mut self, out: &mut Vec<W>, max: usize) -> usize {
        let mut taken = 0;
        while taken < max {
            let Some(item) = self.pop() else {
                break;
            };
            out.push(item);
            taken += 1;
        }
        taken
    }

    /// Clears the current line and moves to the next one.
    #[inline(never)]
    fn release_line(&mut self) {
        #[cfg(loom)]
        let cleared = self.early_release && L > 1;
        #[cfg(not(loom))]
        let cleared = false;
        if !cleared {
            self.clear_line();
        }
        let next = next_line(self.line, self.lines.len());
        if let Some(cur) = line_ptr(&self.lines, next) {
            self.line = next;
            self.cur = cur;
            self.offset = 0;
        }
    }

    /// Writes `0` into every slot of the current line, slot 0 first with
    /// `Release` (the order inside the line does not matter: see the
    /// module docs).
    #[inline(always)]
    fn clear_line(&self) {
        // SAFETY: `cur` was made by `line_ptr` of this handle's ring.
        let line = unsafe { self.cur.get(&self.lines) };
        let (first, rest) = line.slots.split_at(1);
        for slot in first {
            slot.store(EMPTY_WORD, Ordering::Release);
        }
        for slot in rest {
            slot.store(EMPTY_WORD, Ordering::Relaxed);
        }
    }

    /// Loom builds only: release a line (clear all its slots) as soon as its
    /// first item is taken, before the rest are read — a deliberate bug the
    /// model checker must catch.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_release_early(&mut self) {
        self.early_release = true;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::{LINE_BYTES, Mailbox};
    use super::*;

    fn nz(v: u64) -> NonZeroU64 {
        NonZeroU64::new(v).unwrap_or(NonZeroU64::MAX)
    }

    #[test]
    fn lines_are_aligned_and_sized() {
        assert_eq!(std::mem::size_of::<WordLine<32>>(), 256);
        assert_eq!(std::mem::align_of::<WordLine<32>>(), LINE_BYTES);
        let (tx, _rx) = Mailbox::words::<NonZeroU64>(1024);
        for line in tx.lines.iter() {
            assert_eq!(std::ptr::from_ref(line).addr() % LINE_BYTES, 0);
        }
        assert_eq!(tx.capacity(), 1024);
        assert_eq!(tx.lines.len(), 33);
    }

    #[test]
    fn fills_to_capacity_then_frees_a_line_at_a_time() {
        let (mut tx, mut rx) = Mailbox::words_with_line_slots::<NonZeroU64, 4>(8);
        assert_eq!(tx.capacity(), 8);
        for v in 1..=8 {
            assert_eq!(tx.try_push(nz(v)), Ok(()));
        }
        assert_eq!(tx.try_push(nz(9)), Err(nz(9)));
        // Three items popped: the line is not released yet.
        for v in 1..=3 {
            assert_eq!(rx.pop(), Some(nz(v)));
        }
        assert_eq!(tx.try_push(nz(9)), Err(nz(9)));
        assert_eq!(rx.pop(), Some(nz(4)));
        for v in 9..=12 {
            assert_eq!(tx.try_push(nz(v)), Ok(()));
        }
        assert_eq!(tx.try_push(nz(13)), Err(nz(13)));
        for v in 5..=12 {
            assert_eq!(rx.pop(), Some(nz(v)));
        }
        assert_eq!(rx.pop(), None);
        assert!(rx.is_empty());
    }

    #[test]
    fn zero_is_refused_by_name() {
        let (mut tx, mut rx) = Mailbox::words::<NonZeroU64>(4);
        assert_eq!(tx.try_push_u64(0), Err(WordPushError::Zero));
        assert_eq!(rx.pop(), None);
        assert_eq!(tx.try_push_u64(7), Ok(()));
        assert_eq!(rx.pop(), Some(nz(7)));
        let msg = WordPushError::Zero.to_string();
        assert!(
            msg.contains("value 0") && msg.contains("must be 1..="),
            "{msg}"
        );
    }

    #[test]
    fn full_hands_the_word_back() {
        let (mut tx, _rx) = Mailbox::words_with_line_slots::<NonZeroU64, 1>(1);
        assert_eq!(tx.try_push_u64(5), Ok(()));
        assert_eq!(tx.try_push_u64(6), Err(WordPushError::Full(6)));
        assert!(WordPushError::Full(6).to_string().contains("item 6"));
    }

    #[test]
    fn push_many_stops_when_full_and_leaves_the_rest() {
        let (mut tx, mut rx) = Mailbox::words_with_line_slots::<NonZeroU64, 4>(8);
        let mut items = (1..=20).map(nz);
        assert_eq!(tx.try_push_many(&mut items), 8);
        assert_eq!(items.next(), Some(nz(9)));
        let mut out = Vec::new();
        assert_eq!(rx.pop_into(&mut out, 100), 8);
        assert_eq!(out, (1..=8).map(nz).collect::<Vec<_>>());
        assert_eq!(tx.try_push_many(&mut items), 8);
        assert_eq!(items.next(), Some(nz(18)));
    }

    #[test]
    fn many_passes_keep_fifo_order() {
        let (mut tx, mut rx) = Mailbox::words_with_line_slots::<NonZeroU64, 3>(6);
        let mut next_in = 1u64;
        let mut next_out = 1u64;
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            for _ in 0..rng % 5 {
                if tx.try_push(nz(next_in)).is_ok() {
                    next_in += 1;
                }
            }
            for _ in 0..(rng >> 8) % 5 {
                if let Some(v) = rx.pop() {
                    assert_eq!(v.get(), next_out);
                    next_out += 1;
                }
            }
        }
        while let Some(v) = rx.pop() {
            assert_eq!(v.get(), next_out);
            next_out += 1;
        }
        assert_eq!(next_in, next_out);
        assert!(next_in > 1000);
    }
}
