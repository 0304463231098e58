//! Loom model tests of the PSPAT mailbox.
//!
//! Run with `ci/loom.sh` (or
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p pktsched-runtime --test loom_mailbox --release`).
//!
//! The rings are tiny (one to three slots per line, in one, two or four
//! groups; two or three lines) so that a handful of items already wraps around
//! several times and every line release is on the path between the two
//! threads. The models that visit a line a third time bound the preemptions
//! themselves (2) to stay within CI's budget; the others take
//! `LOOM_MAX_PREEMPTIONS`.
//!
//! The word mailbox's models (`words_*`, `broken_*word*`, `broken_skipped_*`,
//! `broken_clearing_*`) use one- and two-slot lines of two or three lines;
//! its slots are atomics only, so its broken variants fail by a stale
//! payload read or a lost word, not by a cell race.
#![cfg(loom)]
#![forbid(unsafe_code)]

use loom::model::Builder;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

use std::num::NonZeroU64;

use pktsched_runtime::mailbox::{Consumer, Mailbox, Producer, WordConsumer, WordProducer};

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

/// Two one-slot lines (capacity 1): every item after the first waits for a
/// line release, and the ring wraps every second item.
#[test]
fn one_slot_lines_wrap_in_order() {
    loom::model(|| {
        let (mut tx, mut rx) = Mailbox::with_line_slots::<usize, 1>(1);
        let producer = thread::spawn(move || {
            for i in 0..4 {
                push_spin(&mut tx, i);
            }
        });
        for i in 0..4 {
            assert_eq!(pop_spin(&mut rx), i);
        }
        producer.join().ok();
        assert_eq!(rx.pop(), None);
    });
}

/// Two-slot lines, three lines (capacity 4): release happens only after the
/// second slot of a line is read, and the look-ahead checks the first slot of
/// the next line.
#[test]
fn two_slot_lines_wrap_in_order() {
    loom::model(|| {
        let (mut tx, mut rx) = Mailbox::with_line_slots::<usize, 2>(4);
        let producer = thread::spawn(move || {
            for i in 0..7 {
                push_spin(&mut tx, i);
            }
        });
        for i in 0..7 {
            assert_eq!(pop_spin(&mut rx), i);
        }
        producer.join().ok();
        assert!(rx.is_empty());
    });
}

/// A checker with at most two preemptions: enough for the models whose
/// item count makes a deeper search too slow for CI.
fn shallow() -> Builder {
    let mut b = Builder::new();
    b.preemption_bound = Some(2);
    b
}

/// Lines of two one-slot groups (two lines, capacity 2), single pushes and
/// pops: within a line the producer enters the second group without a
/// look-ahead and the consumer moves to it without a release; the line is
/// released after its second group only. Ten items visit each line three
/// times, so the never-cleared stamp of a second group carries the tag of
/// two passes ago when the third visit begins.
#[test]
fn two_group_lines_visited_three_times() {
    shallow().check(|| {
        let (mut tx, mut rx) = Mailbox::with_layout::<usize, 2, 1>(2);
        let producer = thread::spawn(move || {
            for i in 0..10 {
                push_spin(&mut tx, i);
            }
        });
        for i in 0..10 {
            assert_eq!(pop_spin(&mut rx), i);
        }
        producer.join().ok();
        assert!(rx.is_empty());
    });
}

/// Single pops of owned values over lines of two two-slot groups (two
/// lines of four slots, capacity 4), for 9 items: each pop takes either a
/// group's first slot (the position just moves on) or its last (then the
/// consumer's group pointer moves to the next group of the line, or the
/// line is released), and the producer's pointer moves within a line and
/// across lines; line 0 is visited twice (items 0–3, then 8, after line 1
/// took 4–7). A value read twice or never would be a double drop or a
/// leak of its `Box`.
#[test]
fn single_pops_of_two_slot_groups_move_owned_values() {
    shallow().check(|| {
        let (mut tx, mut rx) = Mailbox::with_layout::<Box<usize>, 4, 2>(4);
        let producer = thread::spawn(move || {
            for i in 0..9 {
                push_spin(&mut tx, Box::new(i));
            }
        });
        for i in 0..9 {
            assert_eq!(*pop_spin(&mut rx), i);
        }
        producer.join().ok();
        assert!(rx.is_empty());
    });
}

/// Batch pops over lines of two two-slot groups (two lines of four
/// slots, capacity 4) while single pushes fill them, for 18 items: each
/// line is visited three times (line 0 takes items 0–3, 8–11 and 16–17).
/// The batch pop trusts a group's last stamp for the whole group; on the
/// third visit that stamp last held the same tag two passes ago, which must
/// not be mistaken for the new one.
#[test]
fn batch_pops_of_two_group_lines_visited_three_times() {
    shallow().check(|| {
        let (mut tx, mut rx) = Mailbox::with_layout::<usize, 4, 2>(4);
        let producer = thread::spawn(move || {
            for i in 0..18 {
                push_spin(&mut tx, i);
            }
        });
        let mut got = std::collections::VecDeque::new();
        while got.len() < 18 {
            if rx.pop_many(&mut got, 18) == 0 {
                thread::yield_now();
            }
        }
        producer.join().ok();
        assert_eq!(got, (0..18).collect::<std::collections::VecDeque<_>>());
        assert!(rx.is_empty());
    });
}

/// The default layout's shape (`Mailbox::with_capacity`: a line of four
/// groups of 7 slots) in small: two lines of four one-slot groups
/// (capacity 4), batch pushes of up to 3 against batch pops of up to 3, for
/// 10 items. Line 0 takes items 0–3 and 8–9, so it is visited twice: the
/// producer's look-ahead waits for the release of a four-group line, and a
/// batch pop crosses from one group to the next and over a line release.
/// (A pop of up to 3 cannot walk all four groups of a line here, and a
/// third visit would need 16 items or more, beyond CI's loom budget; runs
/// of a partly published group and third visits are
/// `batch_pops_of_two_group_lines_visited_three_times`' subject; the
/// 28-slot line itself needs 57 items to come back to a line.)
#[test]
fn four_group_lines_batches_wrap_in_order() {
    const ITEMS: usize = 10;
    shallow().check(|| {
        let (mut tx, mut rx) = Mailbox::with_layout::<usize, 4, 1>(4);
        let producer = thread::spawn(move || {
            let mut next = 0;
            while next < ITEMS {
                let mut items = next..(next + 3).min(ITEMS);
                let n = tx.try_push_many(&mut items);
                next += n;
                if n == 0 {
                    thread::yield_now();
                }
            }
        });
        let mut got = std::collections::VecDeque::new();
        while got.len() < ITEMS {
            if rx.pop_many(&mut got, 3) == 0 {
                thread::yield_now();
            }
        }
        producer.join().ok();
        assert_eq!(got, (0..ITEMS).collect::<std::collections::VecDeque<_>>());
        assert!(rx.is_empty());
    });
}

/// Heap-owning items moved through the ring, with batch push and pop.
#[test]
fn batches_move_owned_values() {
    loom::model(|| {
        let (mut tx, mut rx) = Mailbox::with_line_slots::<Box<usize>, 2>(2);
        let producer = thread::spawn(move || {
            let mut items = (0..5).map(Box::new).peekable();
            while items.peek().is_some() {
                if tx.try_push_many(&mut items) == 0 {
                    thread::yield_now();
                }
            }
        });
        let mut got = Vec::new();
        while got.len() < 5 {
            if rx.pop_into(&mut got, 3) == 0 {
                thread::yield_now();
            }
        }
        producer.join().ok();
        let got: Vec<usize> = got.into_iter().map(|b| *b).collect();
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
    });
}

/// The arbiter's read: batch pops of heap-owning items appended to a
/// `Vec` (the other batch-pop models use a `VecDeque`); each item arrives
/// once, in order, and nothing is dropped twice (3 preemptions; the
/// unbounded model takes five minutes).
#[test]
fn batch_pops_into_a_vec_move_owned_values() {
    let mut bounded = Builder::new();
    bounded.preemption_bound = Some(3);
    bounded.check(|| {
        let (mut tx, mut rx) = Mailbox::with_line_slots::<Box<usize>, 2>(2);
        let producer = thread::spawn(move || {
            for i in 0..5 {
                push_spin(&mut tx, Box::new(i));
            }
        });
        let mut got: Vec<Box<usize>> = Vec::new();
        while got.len() < 5 {
            if rx.pop_many(&mut got, 3) == 0 {
                thread::yield_now();
            }
        }
        producer.join().ok();
        let got: Vec<usize> = got.into_iter().map(|b| *b).collect();
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        assert!(rx.is_empty());
    });
}

/// `u64` items through the `Copy` slice API, popped with a closure.
#[test]
fn push_batch_and_pop_batch() {
    loom::model(|| {
        let (mut tx, mut rx) = Mailbox::with_line_slots::<u64, 1>(2);
        let producer = thread::spawn(move || {
            let items = [10u64, 11, 12, 13];
            let mut done = 0;
            while done < items.len() {
                let n = tx.push_batch(&items[done..]);
                if n == 0 {
                    thread::yield_now();
                }
                done += n;
            }
        });
        let mut next = 10;
        while next < 14 {
            let n = rx.pop_batch(4, |v| {
                assert_eq!(v, next);
                next += 1;
            });
            if n == 0 {
                thread::yield_now();
            }
        }
        producer.join().ok();
    });
}

/// Batch pops over three-slot lines while single pushes fill them: the
/// consumer finds lines partly published (it takes the published prefix
/// from the slot's own stamp, then looks again) and wholly published (the
/// last stamp vouches for the rest of the line, which it then takes
/// without loading those stamps), across a wrap of the ring.
#[test]
fn batch_pops_of_partly_published_lines() {
    loom::model(|| {
        let (mut tx, mut rx) = Mailbox::with_line_slots::<Box<usize>, 3>(3);
        let producer = thread::spawn(move || {
            for i in 0..7 {
                push_spin(&mut tx, Box::new(i));
            }
        });
        let mut got = std::collections::VecDeque::new();
        while got.len() < 7 {
            if rx.pop_many(&mut got, 7) == 0 {
                thread::yield_now();
            }
        }
        producer.join().ok();
        let got: Vec<usize> = got.into_iter().map(|b| *b).collect();
        assert_eq!(got, (0..7).collect::<Vec<_>>());
        assert!(rx.is_empty());
    });
}

/// Length estimates while the other side runs: the consumer's counts the
/// published stamps, the producer's subtracts the consumer's count from its
/// own position. Both stay within the capacity at every interleaving and
/// are exact once the other side is done.
#[test]
fn length_estimates_stay_in_range_and_settle() {
    loom::model(|| {
        let (mut tx, mut rx) = Mailbox::with_line_slots::<usize, 2>(2);
        let cap = rx.capacity();
        let producer = thread::spawn(move || {
            for i in 0..4 {
                push_spin(&mut tx, i);
                assert!(tx.len_estimate() <= tx.capacity());
            }
            tx
        });
        let mut seen = Vec::new();
        for _ in 0..2 {
            assert!(rx.len_estimate() <= cap);
            seen.push(pop_spin(&mut rx));
        }
        let tx = producer.join().expect("producer");
        assert_eq!(seen, vec![0, 1]);
        assert_eq!(rx.len_estimate(), 2);
        assert_eq!(tx.len_estimate(), 2);
    });
}

#[derive(Debug)]
struct Tracked(Arc<AtomicUsize>);

impl Drop for Tracked {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Items left in the mailbox are dropped exactly once, whichever handle goes
/// last and whatever the consumer managed to take.
#[test]
fn items_left_behind_are_dropped_once() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let (mut tx, mut rx) = Mailbox::with_line_slots::<Tracked, 1>(2);
        let d = Arc::clone(&drops);
        let producer = thread::spawn(move || {
            for _ in 0..4 {
                // Full pushes hand the value back; it is dropped here.
                let _ = tx.try_push(Tracked(Arc::clone(&d)));
            }
            // `tx` is dropped on this thread, concurrently with the consumer.
        });
        let mut taken = 0;
        for _ in 0..2 {
            if rx.pop().is_some() {
                taken += 1;
            }
        }
        drop(rx);
        producer.join().ok();
        // Every one of the 4 values was dropped once: rejected, popped, or
        // left in the ring and dropped with it.
        assert!(taken <= 2);
        assert_eq!(drops.load(Ordering::Relaxed), 4);
    });
}

/// The deliberately broken variant: the producer publishes the stamp with
/// `Relaxed` instead of `Release`, so the consumer's read of the value is not
/// ordered after the producer's write. Loom must report the data race.
#[test]
#[should_panic(expected = "Causality violation")]
fn broken_relaxed_publication_is_caught() {
    loom::model(|| {
        let (mut tx, mut rx) = Mailbox::with_line_slots::<usize, 1>(2);
        tx.loom_weaken_publication();
        let producer = thread::spawn(move || {
            push_spin(&mut tx, 1);
        });
        assert_eq!(pop_spin(&mut rx), 1);
        producer.join().ok();
    });
}

/// The second deliberately broken variant: the consumer releases lines with
/// `Relaxed` instead of `Release`, so when the producer wraps around it may
/// overwrite a slot the consumer is still reading. Loom must report it.
#[test]
#[should_panic(expected = "Causality violation")]
fn broken_relaxed_release_is_caught() {
    loom::model(|| {
        let (mut tx, mut rx) = Mailbox::with_line_slots::<usize, 1>(1);
        rx.loom_weaken_release();
        let producer = thread::spawn(move || {
            for i in 0..3 {
                push_spin(&mut tx, i);
            }
        });
        for i in 0..3 {
            assert_eq!(pop_spin(&mut rx), i);
        }
        producer.join().ok();
    });
}

/// The release bug again, on lines of two one-slot groups: the producer's
/// look-ahead reads the first group of a line, the consumer read the
/// second one last. Six items overwrite both groups of line 0 (items 4
/// and 5). Loom must report the producer overwriting what is being read.
#[test]
#[should_panic(expected = "Causality violation")]
fn broken_relaxed_release_of_two_group_lines_is_caught() {
    loom::model(|| {
        let (mut tx, mut rx) = Mailbox::with_layout::<usize, 2, 1>(2);
        rx.loom_weaken_release();
        let producer = thread::spawn(move || {
            for i in 0..6 {
                push_spin(&mut tx, i);
            }
        });
        for i in 0..6 {
            assert_eq!(pop_spin(&mut rx), i);
        }
        producer.join().ok();
    });
}

/// The release bug on the batch path, on lines of four one-slot groups:
/// a batch pop copies a run out and then releases the line; with the
/// release store weakened, the producer's look-ahead does not order its
/// writes of line 0's second pass (items 8–11) after those copies. Loom
/// must report the producer overwriting what is being read.
#[test]
#[should_panic(expected = "Causality violation")]
fn broken_relaxed_release_of_batch_pops_is_caught() {
    loom::model(|| {
        let (mut tx, mut rx) = Mailbox::with_layout::<usize, 4, 1>(4);
        rx.loom_weaken_release();
        let producer = thread::spawn(move || {
            for i in 0..12 {
                push_spin(&mut tx, i);
            }
        });
        let mut got = std::collections::VecDeque::new();
        while got.len() < 12 {
            if rx.pop_many(&mut got, 4) == 0 {
                thread::yield_now();
            }
        }
        producer.join().ok();
        assert_eq!(got, (0..12).collect::<std::collections::VecDeque<_>>());
    });
}

/// The publication bug on the batch path: with two-slot groups a batch
/// pop reads a group's values after loading only its last stamp, so that
/// stamp's `Release` must cover the whole group. With it weakened, loom
/// must report the value read before it was written.
#[test]
#[should_panic(expected = "Causality violation")]
fn broken_relaxed_publication_of_batch_pops_is_caught() {
    loom::model(|| {
        let (mut tx, mut rx) = Mailbox::with_layout::<usize, 4, 2>(4);
        tx.loom_weaken_publication();
        let producer = thread::spawn(move || {
            for i in 0..2 {
                push_spin(&mut tx, i);
            }
        });
        let mut got = std::collections::VecDeque::new();
        while got.len() < 2 {
            if rx.pop_many(&mut got, 2) == 0 {
                thread::yield_now();
            }
        }
        producer.join().ok();
        assert_eq!(got, (0..2).collect::<std::collections::VecDeque<_>>());
    });
}

/// The batch push (`try_push_many`) publishes its slots from its own loop,
/// with the group, the tag and the ordering in locals: with its stamps
/// weakened to `Relaxed`, loom must report the consumer's read of a value
/// not ordered after its write (the check that the batch loop's stores are
/// the ones the model sees).
#[test]
#[should_panic(expected = "Causality violation")]
fn broken_relaxed_publication_of_batch_pushes_is_caught() {
    loom::model(|| {
        let (mut tx, mut rx) = Mailbox::with_layout::<usize, 4, 2>(4);
        tx.loom_weaken_publication();
        let producer = thread::spawn(move || {
            let mut items = 0..2;
            while !items.is_empty() {
                if tx.try_push_many(&mut items) == 0 {
                    thread::yield_now();
                }
            }
        });
        for i in 0..2 {
            assert_eq!(pop_spin(&mut rx), i);
        }
        producer.join().ok();
    });
}

// ---- The word mailbox (`Mailbox::words`) ----

fn nz(v: u64) -> NonZeroU64 {
    NonZeroU64::MIN.saturating_add(v - 1)
}

fn push_word_spin<const L: usize>(tx: &mut WordProducer<NonZeroU64, L>, value: NonZeroU64) {
    while tx.try_push(value).is_err() {
        thread::yield_now();
    }
}

/// Pops the next word, yielding while the mailbox is empty; gives up (a
/// panic naming the lost word) after `SPINS` empty looks, which no
/// correct execution of these small models needs: each yield lets the
/// producer run, and it has pushed everything long before.
fn pop_word_spin<const L: usize>(rx: &mut WordConsumer<NonZeroU64, L>, want: u64) -> u64 {
    const SPINS: usize = 40;
    for _ in 0..SPINS {
        if let Some(v) = rx.pop() {
            return v.get();
        }
        thread::yield_now();
    }
    panic!("word {want} lost: the consumer found its slot empty {SPINS} times");
}

/// Word models: `items` words 1..=items through lines of `L` slots and
/// `capacity`, each checked in order.
fn word_model<const L: usize>(
    capacity: usize,
    items: u64,
    setup: fn(&mut WordProducer<NonZeroU64, L>, &mut WordConsumer<NonZeroU64, L>),
) {
    let (mut tx, mut rx) = Mailbox::words_with_line_slots::<NonZeroU64, L>(capacity);
    setup(&mut tx, &mut rx);
    let producer = thread::spawn(move || {
        for i in 1..=items {
            push_word_spin(&mut tx, nz(i));
        }
    });
    for i in 1..=items {
        assert_eq!(pop_word_spin(&mut rx, i), i, "word out of order");
    }
    producer.join().ok();
    assert_eq!(rx.pop(), None);
}

/// Two one-slot lines (capacity 1): every push after the first waits for
/// the release of the line ahead, and the ring wraps every second word.
#[test]
fn words_one_slot_lines_wrap_in_order() {
    loom::model(|| word_model::<1>(1, 4, |_, _| {}));
}

/// Two-slot lines, three lines (capacity 4): seven words visit line 0
/// twice and wrap the ring; a release clears two slots, the look-ahead
/// reads the first slot of the line after the one it claims.
#[test]
fn words_two_slot_lines_wrap_in_order() {
    loom::model(|| word_model::<2>(4, 7, |_, _| {}));
}

/// Two two-slot lines (capacity 2): five words, the third visit of line 0
/// (words 5 and 6 would be the next) on the path.
#[test]
fn words_two_line_ring_visited_again() {
    loom::model(|| word_model::<2>(2, 5, |_, _| {}));
}

/// Batch pushes over two-slot lines of a three-line ring, single pops.
#[test]
fn words_batch_pushes_wrap_in_order() {
    loom::model(|| {
        let (mut tx, mut rx) = Mailbox::words_with_line_slots::<NonZeroU64, 2>(4);
        let producer = thread::spawn(move || {
            let mut next = 1u64;
            while next <= 7 {
                let mut items = (next..=7).map(nz);
                let n = tx.try_push_many(&mut items) as u64;
                if n == 0 {
                    thread::yield_now();
                }
                next += n;
            }
        });
        for i in 1..=7 {
            assert_eq!(pop_word_spin(&mut rx, i), i, "word out of order");
        }
        producer.join().ok();
        assert_eq!(rx.pop(), None);
    });
}

/// A handle item: the word names a payload the producer fills before the
/// push (a packet in a pool); the consumer reads it after the pop. With
/// the `Release` publication the consumer must see the payload.
fn handle_model(weaken: bool) {
    let payload = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let (mut tx, mut rx) = Mailbox::words_with_line_slots::<NonZeroU64, 1>(1);
    if weaken {
        tx.loom_weaken_publication();
    }
    let p = Arc::clone(&payload);
    let producer = thread::spawn(move || {
        for i in 1..=2u64 {
            p[i as usize - 1].store(10 * i as usize, Ordering::Relaxed);
            push_word_spin(&mut tx, nz(i));
        }
    });
    for i in 1..=2u64 {
        let w = pop_word_spin(&mut rx, i);
        assert_eq!(
            payload[w as usize - 1].load(Ordering::Relaxed),
            10 * w as usize,
            "the handle's payload was not visible after the pop"
        );
    }
    producer.join().ok();
}

#[test]
fn words_publish_what_a_handle_names() {
    loom::model(|| handle_model(false));
}

/// The deliberately broken variant: the word published with `Relaxed`, so
/// the consumer may read the payload the handle names before the
/// producer's write of it. Loom must find the stale read.
#[test]
#[should_panic(expected = "payload was not visible")]
fn broken_relaxed_word_publication_is_caught() {
    loom::model(|| handle_model(true));
}

/// The deliberately broken variant: the producer's look-ahead skipped (it
/// checks the first slot of the line it is about to fill, not the line
/// after it). The consumer clears a line slot 0 first, so the producer
/// can see slot 0 cleared, write slot 1, and have the consumer's clear of
/// slot 1 wipe the word (word 6, the second of line 0's second visit).
/// Loom must find the lost word.
#[test]
#[should_panic(expected = "lost")]
fn broken_skipped_look_ahead_is_caught() {
    loom::model(|| word_model::<2>(2, 6, |tx, _| tx.loom_skip_look_ahead()));
}

/// The deliberately broken variant: the consumer clears a line when it
/// takes the line's first word, before reading the rest (the producer's
/// look-ahead then lets it refill the line early, and the clear may wipe
/// a word not yet read: word 4, the second of line 1). Loom must find
/// the lost word.
#[test]
#[should_panic(expected = "lost")]
fn broken_clearing_before_reading_is_caught() {
    loom::model(|| word_model::<2>(2, 5, |_, rx| rx.loom_release_early()));
}
