//! Ordinary (std-thread) tests of the PSPAT mailbox: capacity, FIFO order,
//! batches, drop accounting, and millions of items across two threads.
#![cfg(not(loom))]
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use std::num::NonZeroU64;

use pktsched_runtime::mailbox::{
    Consumer, Mailbox, Producer, WordConsumer, WordItem, WordProducer, WordPushError,
};

/// Items sent across threads in the long tests (fewer under Miri).
const MANY: u64 = if cfg!(miri) { 2_000 } else { 3_000_000 };

/// Small deterministic PRNG (xorshift64*), so no dependency is needed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn push_spin<T, const L: usize, const H: usize>(tx: &mut Producer<T, L, H>, mut value: T) {
    loop {
        match tx.try_push(value) {
            Ok(()) => return,
            Err(back) => {
                value = back;
                thread::yield_now();
            }
        }
    }
}

fn pop_spin<T, const L: usize, const H: usize>(rx: &mut Consumer<T, L, H>) -> T {
    loop {
        if let Some(v) = rx.pop() {
            return v;
        }
        thread::yield_now();
    }
}

/// Fills a fresh mailbox with an idle consumer; returns how many fitted.
fn fill<T, const L: usize, const H: usize>(
    tx: &mut Producer<T, L, H>,
    mut make: impl FnMut(usize) -> T,
) -> usize {
    let mut n = 0;
    while tx.try_push(make(n)).is_ok() {
        n += 1;
        assert!(n <= tx.capacity(), "pushed more than the capacity");
    }
    n
}

fn capacity_rounding<const L: usize, const H: usize>() {
    for requested in 0..40usize {
        let (tx, rx) = Mailbox::with_layout::<u64, L, H>(requested);
        let expect = requested.max(1).div_ceil(L) * L;
        assert_eq!(tx.capacity(), expect, "requested {requested}, line {L}");
        assert_eq!(rx.capacity(), expect);
        assert_eq!(tx.line_slots(), L);
        assert_eq!(rx.line_slots(), L);
    }
}

#[test]
fn capacity_is_requested_rounded_up_to_lines() {
    capacity_rounding::<1, 1>();
    capacity_rounding::<2, 2>();
    capacity_rounding::<3, 3>();
    capacity_rounding::<8, 4>();
    capacity_rounding::<14, 7>();
    capacity_rounding::<14, 14>();
    capacity_rounding::<6, 2>();
    capacity_rounding::<3, 1>();
    let (tx, _rx) = Mailbox::with_capacity::<u64>(1024);
    assert_eq!(tx.capacity(), 1036, "37 lines of 28");
    assert_eq!(tx.line_slots(), 28);
    let (tx, _rx) = Mailbox::with_capacity::<u64>(1008);
    assert_eq!(tx.capacity(), 1008);
}

fn idle_consumer_fill<const L: usize, const H: usize>() {
    for requested in [1usize, 2, 5, 8, 17, 64] {
        let (mut tx, mut rx) = Mailbox::with_layout::<u64, L, H>(requested);
        let n = fill(&mut tx, |i| i as u64);
        assert_eq!(n, tx.capacity(), "requested {requested}, line {L}");
        // The value comes back when full.
        assert_eq!(tx.try_push(999), Err(999));
        assert_eq!(tx.len_estimate(), n);
        assert_eq!(rx.len_estimate(), n);
        for i in 0..n {
            assert_eq!(rx.pop(), Some(i as u64));
        }
        assert_eq!(rx.pop(), None);
        assert!(rx.is_empty());
        assert_eq!(rx.len_estimate(), 0);
    }
}

#[test]
fn exactly_capacity_items_fit_when_the_consumer_is_idle() {
    idle_consumer_fill::<1, 1>();
    idle_consumer_fill::<2, 2>();
    idle_consumer_fill::<3, 3>();
    idle_consumer_fill::<8, 4>();
    idle_consumer_fill::<14, 7>();
    idle_consumer_fill::<14, 14>();
    idle_consumer_fill::<6, 2>();
    idle_consumer_fill::<3, 1>();
}

#[test]
fn space_comes_back_a_line_at_a_time() {
    let line = 4;
    let (mut tx, mut rx) = Mailbox::with_line_slots::<u32, 4>(12);
    assert_eq!(fill(&mut tx, |i| i as u32), 12);
    // Popping less than a line frees nothing for the producer yet.
    for i in 0..line - 1 {
        assert_eq!(rx.pop(), Some(i as u32));
        assert_eq!(tx.try_push(100), Err(100));
    }
    // Finishing the line releases it: exactly one line fits again.
    assert_eq!(rx.pop(), Some(3));
    for i in 0..line {
        assert_eq!(tx.try_push(100 + i as u32), Ok(()));
    }
    assert_eq!(tx.try_push(7), Err(7));
    let mut rest = Vec::new();
    assert_eq!(rx.pop_into(&mut rest, usize::MAX), 12);
    let expect: Vec<u32> = (4..12).chain(100..104).collect();
    assert_eq!(rest, expect);
}

#[test]
fn empty_mailbox_edge_cases() {
    let (mut tx, mut rx) = Mailbox::with_capacity::<String>(4);
    assert!(rx.is_empty());
    assert_eq!(rx.pop(), None);
    assert_eq!(rx.pop_batch(10, |_| unreachable!()), 0);
    let mut v: Vec<String> = Vec::new();
    assert_eq!(rx.pop_into(&mut v, 10), 0);
    assert_eq!(tx.len_estimate(), 0);
    tx.try_push("a".to_owned()).ok();
    assert!(!rx.is_empty());
    assert_eq!(rx.pop_into(&mut v, 0), 0, "max = 0 takes nothing");
    assert_eq!(rx.pop().as_deref(), Some("a"));
    assert!(rx.is_empty());
}

/// Random single-threaded interleavings against a `VecDeque` model, over many
/// passes of the ring, for several line sizes.
fn fifo_model<const L: usize, const H: usize>() {
    let steps = if cfg!(miri) { 300 } else { 200_000 };
    let line = L;
    {
        for requested in [1usize, 3, 16] {
            let (mut tx, mut rx) = Mailbox::with_layout::<u64, L, H>(requested);
            let cap = tx.capacity();
            let mut model = VecDeque::new();
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (line * 31 + requested) as u64);
            let mut next = 0u64;
            for _ in 0..steps {
                match rng.below(6) {
                    0..=2 => match tx.try_push(next) {
                        Ok(()) => {
                            model.push_back(next);
                            next += 1;
                        }
                        Err(back) => {
                            assert_eq!(back, next);
                            // Full is only reported within a line of capacity.
                            assert!(model.len() > cap - line, "{} of {cap}", model.len());
                        }
                    },
                    3 => assert_eq!(rx.pop(), model.pop_front()),
                    4 => {
                        let max = rng.below(2 * line as u64 + 2) as usize;
                        let mut got = Vec::new();
                        let n = rx.pop_batch(max, |v| got.push(v));
                        assert_eq!(n, got.len());
                        let want: Vec<u64> = (0..n).filter_map(|_| model.pop_front()).collect();
                        assert_eq!(got, want);
                        assert!(n == max || model.is_empty());
                    }
                    _ => {
                        let k = rng.below(3 * line as u64 + 1);
                        let batch: Vec<u64> = (next..next + k).collect();
                        let n = tx.push_batch(&batch);
                        model.extend(&batch[..n]);
                        next += n as u64;
                        if n < batch.len() {
                            assert!(model.len() > cap - line);
                        }
                    }
                }
                assert!(model.len() <= cap);
                assert_eq!(rx.len_estimate(), model.len());
                assert_eq!(tx.len_estimate(), model.len());
                assert_eq!(rx.is_empty(), model.is_empty());
            }
        }
    }
}

#[test]
fn matches_a_fifo_model_over_many_wraps() {
    fifo_model::<1, 1>();
    fifo_model::<2, 2>();
    fifo_model::<3, 3>();
    fifo_model::<8, 4>();
    fifo_model::<14, 7>();
    fifo_model::<14, 14>();
    fifo_model::<6, 2>();
    fifo_model::<3, 1>();
    fifo_model::<2, 1>();
}

#[test]
fn try_push_many_leaves_what_did_not_fit_in_the_iterator() {
    let (mut tx, mut rx) = Mailbox::with_line_slots::<u64, 4>(8);
    let mut items = 0..20u64;
    assert_eq!(tx.try_push_many(&mut items), 8);
    assert_eq!(
        items.next(),
        Some(8),
        "item 8 was not consumed by the full push"
    );
    let mut out = VecDeque::new();
    assert_eq!(rx.pop_into(&mut out, 100), 8);
    assert!(out.iter().copied().eq(0..8));
    let mut rest = 9..12u64;
    assert_eq!(tx.try_push_many(&mut rest), 3);
    assert_eq!(rest.next(), None);
}

/// Counts how many `Tracked` values were dropped.
#[derive(Debug)]
struct Tracked {
    id: u64,
    drops: Arc<AtomicUsize>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::Relaxed);
    }
}

fn drop_case<const L: usize, const H: usize>(requested: usize, pushed: usize, popped: usize) {
    let line = L;
    for consumer_first in [false, true] {
        {
            let drops = Arc::new(AtomicUsize::new(0));
            let made = AtomicUsize::new(0);
            let make = |id| {
                made.fetch_add(1, Ordering::Relaxed);
                Tracked {
                    id,
                    drops: Arc::clone(&drops),
                }
            };
            let (mut tx, mut rx) = Mailbox::with_layout::<Tracked, L, H>(requested);
            // Go around the ring a few times first so the leftovers wrap.
            for round in 0..3u64 {
                for i in 0..pushed {
                    // A rejected value comes back and is dropped here.
                    let _ = tx.try_push(make(round * 1000 + i as u64));
                }
                for _ in 0..pushed {
                    if let Some(t) = rx.pop() {
                        assert!(t.id >= round * 1000);
                    }
                }
            }
            let mut queued = 0;
            for i in 0..pushed {
                if tx.try_push(make(9000 + i as u64)).is_ok() {
                    queued += 1;
                }
            }
            for _ in 0..popped {
                if rx.pop().is_some() {
                    queued -= 1;
                }
            }
            let before = drops.load(Ordering::Relaxed);
            assert_eq!(before, made.load(Ordering::Relaxed) - queued);
            assert_eq!(rx.len_estimate(), queued);
            if consumer_first {
                drop(rx);
                // The producer can still push after the consumer is gone;
                // those items must be dropped too.
                let _ = tx.try_push(make(424_242));
                drop(tx);
            } else {
                drop(tx);
                drop(rx);
            }
            let total = made.load(Ordering::Relaxed);
            assert_eq!(
                drops.load(Ordering::Relaxed),
                total,
                "line {line}, requested {requested}, pushed {pushed}, popped {popped}"
            );
        }
    }
}

#[test]
fn queued_items_are_dropped_exactly_once() {
    // (requested, pushed in each round, popped at the end)
    drop_case::<4, 4>(12, 12, 0);
    drop_case::<4, 4>(12, 12, 5);
    drop_case::<4, 4>(12, 9, 9);
    drop_case::<1, 1>(1, 1, 0);
    drop_case::<3, 3>(7, 9, 4);
    drop_case::<8, 4>(64, 64, 63);
    drop_case::<14, 7>(100, 100, 50);
    drop_case::<14, 14>(100, 100, 50);
    drop_case::<6, 2>(12, 12, 5);
    drop_case::<6, 2>(12, 9, 7);
    drop_case::<3, 1>(7, 9, 4);
}

#[test]
fn handles_are_send() {
    fn is_send<T: Send>() {}
    is_send::<Producer<Box<u64>>>();
    is_send::<Consumer<Box<u64>>>();
    is_send::<Producer<Tracked>>();
}

/// One producer thread, one consumer thread, every item checked in order.
fn run_threads<const L: usize, const H: usize>(capacity: usize, batch: bool) {
    let (mut tx, mut rx) = Mailbox::with_layout::<u64, L, H>(capacity);
    let producer = thread::spawn(move || {
        if batch {
            let mut next = 0u64;
            let mut buf = Vec::with_capacity(64);
            let mut rng = Rng(7);
            while next < MANY {
                buf.clear();
                let k = 1 + rng.below(40);
                buf.extend(next..(next + k).min(MANY));
                let mut done = 0;
                while done < buf.len() {
                    let n = tx.push_batch(&buf[done..]);
                    if n == 0 {
                        thread::yield_now();
                    }
                    done += n;
                }
                next += buf.len() as u64;
            }
        } else {
            for i in 0..MANY {
                push_spin(&mut tx, i);
            }
        }
    });
    let mut expect = 0u64;
    let mut sum = 0u64;
    if batch {
        let mut buf = Vec::new();
        let mut rng = Rng(11);
        while expect < MANY {
            buf.clear();
            let n = rx.pop_into(&mut buf, 1 + rng.below(50) as usize);
            if n == 0 {
                thread::yield_now();
            }
            for &v in &buf {
                assert_eq!(v, expect, "item lost, duplicated or reordered");
                sum = sum.wrapping_add(v);
                expect += 1;
            }
        }
    } else {
        while expect < MANY {
            let v = pop_spin(&mut rx);
            assert_eq!(v, expect, "item lost, duplicated or reordered");
            sum = sum.wrapping_add(v);
            expect += 1;
        }
    }
    assert!(producer.join().is_ok());
    assert_eq!(rx.pop(), None, "nothing beyond the last item");
    assert_eq!(sum, MANY * (MANY - 1) / 2);
}

#[test]
fn threads_fifo_no_loss_default_lines() {
    run_threads::<14, 7>(1024, false);
}

#[test]
fn threads_fifo_no_loss_tiny_ring() {
    // Two one-slot lines: every push waits for the consumer.
    run_threads::<1, 1>(1, false);
}

#[test]
fn threads_fifo_no_loss_odd_lines() {
    run_threads::<3, 3>(10, false);
}

#[test]
fn threads_fifo_no_loss_lines_of_several_groups() {
    // Two-slot lines of one-slot groups, and six-slot lines of two-slot
    // groups popped in batches: groups are entered within a line without
    // a look-ahead, and lines released only after their last group.
    run_threads::<2, 1>(2, false);
    run_threads::<6, 2>(12, true);
}

#[test]
fn threads_fifo_no_loss_single_group_lines() {
    run_threads::<14, 14>(1024, false);
}

#[test]
fn threads_fifo_no_loss_batches() {
    run_threads::<14, 7>(64, true);
    run_threads::<2, 2>(6, true);
}

#[test]
fn threads_owned_values_are_dropped_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let n = MANY / 10;
    let (mut tx, mut rx) = Mailbox::with_line_slots::<Tracked, 4>(16);
    let d = Arc::clone(&drops);
    let producer = thread::spawn(move || {
        for id in 0..n {
            push_spin(
                &mut tx,
                Tracked {
                    id,
                    drops: Arc::clone(&d),
                },
            );
        }
        // Leave a few in the mailbox for `Drop` to clean up (fewer than the
        // capacity, so these pushes complete once the consumer took `n`).
        for id in n..n + 10 {
            push_spin(
                &mut tx,
                Tracked {
                    id,
                    drops: Arc::clone(&d),
                },
            );
        }
    });
    for id in 0..n {
        assert_eq!(pop_spin(&mut rx).id, id);
    }
    assert!(producer.join().is_ok());
    assert_eq!(rx.len_estimate(), 10);
    assert_eq!(drops.load(Ordering::Relaxed) as u64, n);
    drop(rx);
    assert_eq!(drops.load(Ordering::Relaxed) as u64, n + 10);
}

#[test]
fn pop_many_takes_in_order_and_held_items_count_as_queued() {
    let (mut tx, mut rx) = Mailbox::with_line_slots::<u32, 4>(16);
    assert_eq!(fill(&mut tx, |i| i as u32), 16);
    let mut q = std::collections::VecDeque::new();
    assert_eq!(rx.pop_many(&mut q, 6), 6);
    assert_eq!(q, (0..6).collect::<Vec<_>>());
    assert_eq!(tx.len_estimate(), 10);
    // The consumer keeps the last 4 aside: the producer still counts them.
    rx.report_held(4);
    assert_eq!(tx.len_estimate(), 14);
    // A pop_many ends the report, even one that takes nothing.
    assert_eq!(rx.pop_many(&mut q, 0), 0);
    assert_eq!(tx.len_estimate(), 10);
    rx.report_held(2);
    assert_eq!(rx.pop_many(&mut q, usize::MAX), 10);
    assert_eq!(q, (0..16).collect::<Vec<_>>());
    assert_eq!(tx.len_estimate(), 0);
    assert_eq!(rx.pop_many(&mut q, 3), 0, "empty");
    assert!(rx.is_empty());
}

/// A batch push whose iterator panics (before the first item, part-way
/// through a group, right after a group boundary, in the second group)
/// keeps what it pushed before the panic queued, and the next push goes
/// after it (no slot written twice, nothing lost or repeated); an empty
/// iterator pushes nothing.
#[test]
fn a_panicking_iterator_leaves_what_was_pushed_queued() {
    for fail_at in [0u64, 3, 7, 9] {
        let (mut tx, mut rx) = Mailbox::with_capacity::<u64>(40);
        let pushed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut items = (0..20u64).inspect(|&i| {
                assert_ne!(i, fail_at, "the iterator fails at item {fail_at}");
            });
            tx.try_push_many(&mut items)
        }));
        assert!(pushed.is_err(), "the iterator's panic reaches the caller");
        assert_eq!(
            tx.len_estimate(),
            fail_at as usize,
            "items before {fail_at}"
        );
        assert_eq!(tx.try_push_many(&mut core::iter::empty()), 0);
        assert_eq!(tx.try_push_many(&mut (fail_at..fail_at + 3)), 3);
        for want in 0..fail_at + 3 {
            assert_eq!(rx.pop(), Some(want), "failed at {fail_at}");
        }
        assert_eq!(rx.pop(), None);
    }
}

/// The consumer's prefetch is off unless asked for (measured slower than
/// no prefetch with the consumer close behind the producer); the handle's
/// `Debug` says which.
#[test]
fn prefetch_is_off_by_default() {
    let (_tx, mut rx) = Mailbox::with_capacity::<u64>(40);
    assert!(format!("{rx:?}").contains("prefetch: false"), "{rx:?}");
    rx.set_prefetch(true);
    assert!(format!("{rx:?}").contains("prefetch: true"), "{rx:?}");
}

/// The consumer's prefetch is a hint: on or off, the same items come out
/// in order over many passes, and the producer's estimate of what is
/// queued (which counts the consumer's pops by its position) stays exact
/// while the consumer is idle.
#[test]
fn prefetch_on_or_off_changes_nothing_but_timing() {
    for prefetch in [true, false] {
        let (mut tx, mut rx) = Mailbox::with_capacity::<u64>(40);
        rx.set_prefetch(prefetch);
        let mut rng = Rng(7);
        let (mut next_in, mut next_out) = (0u64, 0u64);
        for _ in 0..if cfg!(miri) { 300 } else { 2_000 } {
            for _ in 0..rng.below(30) {
                if tx.try_push(next_in).is_err() {
                    break;
                }
                next_in += 1;
            }
            assert_eq!(tx.len_estimate() as u64, next_in - next_out);
            for _ in 0..rng.below(30) {
                match rx.pop() {
                    Some(v) => {
                        assert_eq!(v, next_out, "prefetch {prefetch}");
                        next_out += 1;
                    }
                    None => break,
                }
            }
            assert_eq!(tx.len_estimate() as u64, next_in - next_out);
        }
        assert!(next_out > 10 * 42, "several passes, prefetch {prefetch}");
    }
}

// ---- The word mailbox (`Mailbox::words`) ----

fn nz(v: u64) -> NonZeroU64 {
    NonZeroU64::MIN.saturating_add(v - 1)
}

/// A packet-handle-like item: a pool index, travelling as index + 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Handle(u32);

impl WordItem for Handle {
    fn into_word(self) -> NonZeroU64 {
        NonZeroU64::MIN.saturating_add(u64::from(self.0))
    }
    fn from_word(word: NonZeroU64) -> Self {
        Handle(u32::try_from(word.get() - 1).unwrap_or(u32::MAX))
    }
}

/// One producer thread, one consumer thread, every word checked in order;
/// `batch` pushes with `try_push_many` over random-length runs and pops
/// with `pop_into`.
fn run_word_threads<const L: usize>(capacity: usize, batch: bool) {
    let (mut tx, mut rx) = Mailbox::words_with_line_slots::<NonZeroU64, L>(capacity);
    let producer = thread::spawn(move || {
        let mut next = 1u64;
        let mut rng = Rng(5);
        while next <= MANY {
            if batch {
                let end = (next + 1 + rng.below(40)).min(MANY + 1);
                let mut items = (next..end).map(nz);
                let n = tx.try_push_many(&mut items) as u64;
                if n == 0 {
                    thread::yield_now();
                }
                next += n;
            } else if tx.try_push(nz(next)).is_ok() {
                next += 1;
            } else {
                thread::yield_now();
            }
        }
    });
    let mut expect = 1u64;
    let mut buf = Vec::new();
    let mut rng = Rng(13);
    while expect <= MANY {
        buf.clear();
        let max = if batch { 1 + rng.below(50) as usize } else { 1 };
        if rx.pop_into(&mut buf, max) == 0 {
            thread::yield_now();
        }
        for v in &buf {
            assert_eq!(v.get(), expect, "word lost, duplicated or reordered");
            expect += 1;
        }
    }
    assert!(producer.join().is_ok());
    assert_eq!(rx.pop(), None, "nothing beyond the last word");
    assert!(rx.is_empty());
}

#[test]
fn word_threads_fifo_no_loss_default_lines() {
    run_word_threads::<32>(1024, false);
}

#[test]
fn word_threads_fifo_no_loss_tiny_rings() {
    // Two one-slot lines: every push waits for the consumer's release.
    run_word_threads::<1>(1, false);
    run_word_threads::<3>(6, false);
}

#[test]
fn word_threads_fifo_no_loss_batches() {
    run_word_threads::<32>(64, true);
    run_word_threads::<2>(4, true);
}

/// The word mailbox fills to exactly its capacity (entries − one line)
/// when the consumer is idle, and gives space back a line at a time.
#[test]
fn word_capacity_and_space_per_line() {
    let (mut tx, mut rx) = Mailbox::words::<NonZeroU64>(100);
    assert_eq!(tx.capacity(), 128);
    assert_eq!(rx.capacity(), 128);
    assert_eq!((tx.line_slots(), rx.line_slots()), (32, 32));
    let mut items = (1..=200).map(nz);
    assert_eq!(tx.try_push_many(&mut items), 128);
    for want in 1..=31 {
        assert_eq!(rx.pop(), Some(nz(want)));
    }
    assert_eq!(tx.try_push(nz(500)), Err(nz(500)), "line not released yet");
    assert_eq!(rx.pop(), Some(nz(32)));
    assert_eq!(tx.try_push_many(&mut items), 32);
    let mut out = Vec::new();
    assert_eq!(rx.pop_into(&mut out, 1000), 128);
    assert_eq!(out, (33..=160).map(nz).collect::<Vec<_>>());
}

/// 0 is the empty mark: the raw-word push refuses it with a named error
/// (nothing queued, nothing lost after it), a full mailbox hands the word
/// back, and both errors say what happened.
#[test]
fn word_zero_is_refused_with_a_named_error() {
    let (mut tx, mut rx) = Mailbox::words_with_line_slots::<NonZeroU64, 2>(2);
    assert_eq!(tx.try_push_u64(0), Err(WordPushError::Zero));
    assert_eq!(tx.try_push_u64(u64::MAX), Ok(()));
    assert_eq!(tx.try_push_u64(0), Err(WordPushError::Zero));
    assert_eq!(tx.try_push_u64(1), Ok(()));
    assert_eq!(tx.try_push_u64(2), Err(WordPushError::Full(2)));
    assert_eq!(rx.pop().map(NonZeroU64::get), Some(u64::MAX));
    assert_eq!(rx.pop().map(NonZeroU64::get), Some(1));
    assert_eq!(rx.pop(), None);
    let zero = WordPushError::Zero.to_string();
    assert!(zero.contains("value 0") && zero.contains("1..="), "{zero}");
    assert!(WordPushError::Full(2).to_string().contains("full"));
}

/// A user item type (a pool index as index + 1) round-trips, index 0
/// included; handles are `Send`.
#[test]
fn word_items_of_a_user_type_round_trip() {
    fn is_send<T: Send>() {}
    is_send::<WordProducer<Handle>>();
    is_send::<WordConsumer<Handle>>();
    let (mut tx, mut rx) = Mailbox::words::<Handle>(8);
    for i in [0, 1, 7, u32::MAX - 1] {
        assert_eq!(tx.try_push(Handle(i)), Ok(()));
    }
    for i in [0, 1, 7, u32::MAX - 1] {
        assert_eq!(rx.pop(), Some(Handle(i)));
    }
    assert_eq!(rx.pop(), None);
}

/// A batch push whose iterator panics part-way keeps what it pushed
/// queued, and the next push goes after it.
#[test]
fn word_panicking_iterator_leaves_what_was_pushed_queued() {
    for fail_at in [1u64, 4, 32, 33] {
        let (mut tx, mut rx) = Mailbox::words::<NonZeroU64>(64);
        let pushed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let items = (1..=60u64).inspect(|&i| {
                assert_ne!(i, fail_at, "the iterator fails at item {fail_at}");
            });
            tx.try_push_many(&mut items.map(nz))
        }));
        assert!(pushed.is_err(), "the iterator's panic reaches the caller");
        assert_eq!(tx.try_push_many(&mut (fail_at..fail_at + 3).map(nz)), 3);
        for want in (1..fail_at).chain(fail_at..fail_at + 3) {
            assert_eq!(rx.pop(), Some(nz(want)), "failed at {fail_at}");
        }
        assert_eq!(rx.pop(), None);
    }
}
