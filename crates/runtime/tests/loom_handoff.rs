//! Loom model of the arbiter's hand-off (see `src/handoff.rs`): the
//! arbiter thread runs rounds under the lock, a client that pushed into
//! its mailbox tries the lock and runs a round itself. The mailbox's
//! consumer end moves between the two threads with the lock. Run with
//! `ci/loom.sh`.
#![cfg(loom)]
#![forbid(unsafe_code)]

use loom::sync::Arc;
use loom::thread;

use pktsched_runtime::handoff::RoundLock;
use pktsched_runtime::mailbox::{Consumer, Mailbox};

/// The arbiter's state in the model: the consumer end of one mailbox and
/// what it drained, in order.
struct State {
    rx: Consumer<usize, 1, 1>,
    got: Vec<usize>,
}

/// One round: drain the mailbox.
fn round(s: &mut State) {
    while let Some(v) = s.rx.pop() {
        s.got.push(v);
    }
}

/// A client pushes `items` and after each push tries a round; the arbiter
/// thread runs rounds until it has seen all of them. Every item is drained
/// once, in order, whichever thread drained it (loom also checks that the
/// rounds never overlap: the state is in a loom cell).
fn model(items: usize, weaken: bool) {
    loom::model(move || {
        let (mut tx, rx) = Mailbox::with_line_slots::<usize, 1>(items + 1);
        let mut lock = RoundLock::new(State {
            rx,
            got: Vec::new(),
        });
        if weaken {
            lock.loom_weaken();
        }
        let lock = Arc::new(lock);
        let l2 = lock.clone();
        let client = thread::spawn(move || {
            let mut ran = 0;
            for i in 0..items {
                while tx.try_push(i).is_err() {
                    thread::yield_now();
                }
                l2.stamp_round(i as u64);
                if l2.try_with(round).is_some() {
                    ran += 1;
                }
            }
            ran
        });
        loop {
            let n = lock.with(|s| {
                round(s);
                s.got.len()
            });
            if n == items {
                break;
            }
            thread::yield_now();
        }
        let _ran = client.join().expect("client");
        let got = lock.with(|s| s.got.clone());
        assert_eq!(got, (0..items).collect::<Vec<_>>());
        assert!(!lock.is_held());
    });
}

#[test]
fn rounds_by_client_and_arbiter_drain_every_item_once_in_order() {
    model(2, false);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn broken_relaxed_hand_off_is_caught() {
    model(2, true);
}
