//! Loom model of the arbiter thread going to sleep while a client may run
//! a round itself (see `src/handoff.rs`, "Sleeping while clients run
//! rounds"). Run with `ci/loom.sh`.
//!
//! The client pushes a packet, rings, then runs a round. A round takes the
//! doorbell's bits, sends what the scheduler held at its start (the link
//! was busy until then) and moves the mailbox into the scheduler: a packet
//! needs two rounds. If the client's round runs between the arbiter's
//! round and its look before sleeping, the bits are taken and the mailbox
//! is empty, but the packet waits in the scheduler for a round no ring
//! will cause: only the round count shows it.
#![cfg(loom)]
#![forbid(unsafe_code)]

mod loom_support;

use loom::sync::Arc;
use loom::thread;

use pktsched_runtime::doorbell::Doorbell;
use pktsched_runtime::handoff::{RoundLock, SleepCheck};
use pktsched_runtime::mailbox::{Consumer, Mailbox};

/// The arbiter's state in the model.
struct State {
    rx: Consumer<usize, 1, 1>,
    /// In the scheduler, waiting for the link.
    queued: Vec<usize>,
    /// Sent, in order.
    sent: Vec<usize>,
    rounds: u64,
}

impl SleepCheck for State {
    fn rounds(&self) -> u64 {
        self.rounds
    }

    fn has_news(&self) -> bool {
        !self.rx.is_empty()
    }
}

/// One round: take the bits, send what was queued, queue what arrived.
fn round(s: &mut State, bell: &Doorbell) {
    bell.take(|_| {});
    s.sent.append(&mut s.queued);
    while let Some(v) = s.rx.pop() {
        s.queued.push(v);
    }
    s.rounds += 1;
}

/// The arbiter thread runs rounds; with packets queued it waits for the
/// link (the driver sleeps with a timeout: here, a yield), with nothing to
/// do it sleeps until a ring. Loom reports a deadlock if the packet can be
/// stranded with the arbiter asleep.
fn model(items: usize, ignore_rounds: bool) {
    let mut builder = loom::model::Builder::new();
    // Keep CI's loom budget small: the race needs two preemptions.
    builder.preemption_bound = Some(3);
    builder.check(move || {
        let bell = Arc::new(Doorbell::new(1));
        let (mut tx, rx) = Mailbox::with_line_slots::<usize, 1>(items + 1);
        let mut lock = RoundLock::new(State {
            rx,
            queued: Vec::new(),
            sent: Vec::new(),
            rounds: 0,
        });
        if ignore_rounds {
            lock.loom_ignore_rounds();
        }
        let lock = Arc::new(lock);
        let (l2, b2) = (lock.clone(), bell.clone());
        let arbiter = thread::spawn(move || {
            b2.register_consumer();
            loop {
                let (seen, waiting, done) = l2.with(|s| {
                    round(s, &b2);
                    (s.rounds, !s.queued.is_empty(), s.sent.len() == items)
                });
                if done {
                    return;
                }
                if waiting {
                    thread::yield_now();
                    continue;
                }
                if l2.announce_sleep_if_quiet(&b2, seen, |_| ()).is_some() {
                    b2.sleep();
                } else {
                    thread::yield_now();
                }
            }
        });
        // The client is the model's main thread.
        for i in 0..items {
            assert!(tx.try_push(i).is_ok());
            bell.ring(0);
            let _ = lock.try_with(|s| round(s, &bell));
        }
        arbiter.join().expect("arbiter thread");
        let sent = lock.with(|s| s.sent.clone());
        assert_eq!(sent, (0..items).collect::<Vec<_>>());
    });
}

#[test]
fn a_client_round_before_the_sleep_strands_nothing() {
    model(1, false);
}

/// Without the round count the arbiter can sleep with the client's packet
/// queued and no ring to come: loom must report the deadlock. Loom's
/// failure aborts the process, so the broken model runs in a child
/// process (see `loom_support`).
#[test]
fn sleeping_without_the_round_count_strands_a_packet() {
    loom_support::expect_broken_model_fails(
        "sleep_without_round_count_child",
        "deadlock",
        "round count",
        "with loom's deadlock report",
    );
}

/// The broken model itself; run only by
/// `sleeping_without_the_round_count_strands_a_packet`.
#[test]
#[ignore = "run in a child process by sleeping_without_the_round_count_strands_a_packet"]
fn sleep_without_round_count_child() {
    model(1, true);
}
