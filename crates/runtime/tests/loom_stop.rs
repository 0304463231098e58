//! Loom model of the stop handshake between a client's `send` and the
//! arbiter's stop (see `barrier::stop`, used by `Client::send`,
//! `Client::send_batch` and `Arbiter::close_and_drain`). Run with
//! `ci/loom.sh`.
//!
//! The client enters, pushes into its mailbox and leaves, or is refused;
//! the arbiter closes, waits until the client is not inside a send and
//! drains the mailbox once. Whatever the interleaving, every packet the
//! client queued must be in that drain: a packet left in the mailbox after
//! it would be stranded (the real arbiter never reads the mailbox again).
//! The handshake's steps are the crate's own functions; the push and pop
//! are the real mailbox's.
#![cfg(loom)]
#![forbid(unsafe_code)]

mod loom_support;

use loom::sync::Arc;
use loom::sync::atomic::AtomicBool;
use loom::thread;

use pktsched_runtime::barrier::{Light, stop};
use pktsched_runtime::mailbox::{Mailbox, Producer};

/// Which part of the handshake a model leaves out (the broken variants
/// loom must reject).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Broken {
    /// The real handshake.
    Nothing,
    /// The client's light barrier between `busy` and the look at `stop`.
    LightBarrier,
    /// The arbiter's heavy barrier between `stop` and the look at `busy`.
    HeavyBarrier,
    /// The Release of the client's `busy ← false` after its push.
    ReleaseOfBusy,
}

/// A client's side: `sends` packets, each one handshake as `send` does;
/// returns those queued (the others were refused).
fn client(
    busy: &AtomicBool,
    stop_flag: &AtomicBool,
    tx: &mut Producer<usize, 1, 1>,
    sends: usize,
    broken: Broken,
) -> Vec<usize> {
    let light = if broken == Broken::LightBarrier {
        Light::loom_skipped()
    } else {
        Light::mode()
    };
    let mut queued = Vec::new();
    for i in 0..sends {
        if !stop::enter(busy, light, || stop_flag) {
            continue;
        }
        assert!(tx.try_push(i).is_ok(), "the mailbox has room");
        if broken == Broken::ReleaseOfBusy {
            stop::loom_leave_relaxed(busy);
        } else {
            stop::leave(busy);
        }
        queued.push(i);
    }
    queued
}

/// `clients` clients (client 0 the model's main thread, the others one
/// thread each) send `sends` packets each while the arbiter stops: it
/// closes, waits for each client in turn and drains each mailbox once.
/// Each drain must hold every packet its client queued, in order.
fn model(clients: usize, sends: usize, broken: Broken) {
    let mut builder = loom::model::Builder::new();
    // A small bound keeps CI's loom budget: every broken variant fails
    // within it (two clients of two sends each at loom's default of 5
    // took two minutes here).
    builder.preemption_bound = Some(3);
    builder.check(move || {
        let stop_flag = Arc::new(AtomicBool::new(false));
        let busy: Vec<Arc<AtomicBool>> = (0..clients)
            .map(|_| Arc::new(AtomicBool::new(false)))
            .collect();
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..clients)
            .map(|_| Mailbox::with_line_slots::<usize, 1>(sends + 1))
            .unzip();
        let (stop2, busy2) = (stop_flag.clone(), busy.clone());
        let arbiter = thread::spawn(move || {
            if broken == Broken::HeavyBarrier {
                stop::loom_close_without_barrier(&stop2);
            } else {
                stop::close(&stop2);
            }
            for b in &busy2 {
                stop::wait_idle(b);
            }
            rxs.into_iter()
                .map(|mut rx| std::iter::from_fn(|| rx.pop()).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        });
        let mut txs = txs.into_iter();
        let mut first = txs.next().expect("at least one client");
        let others: Vec<_> = txs
            .zip(busy.iter().skip(1).cloned())
            .map(|(mut tx, b)| {
                let s = stop_flag.clone();
                thread::spawn(move || client(&b, &s, &mut tx, sends, broken))
            })
            .collect();
        let mut queued = vec![client(&busy[0], &stop_flag, &mut first, sends, broken)];
        for c in others {
            queued.push(c.join().expect("client thread"));
        }
        let drained = arbiter.join().expect("arbiter thread");
        assert_eq!(
            drained, queued,
            "packets queued but stranded in the mailbox after the stop's drain"
        );
    });
}

#[test]
fn every_packet_sent_before_the_stop_is_drained_one_send() {
    model(1, 1, Broken::Nothing);
}

#[test]
fn every_packet_sent_before_the_stop_is_drained_two_sends() {
    model(1, 2, Broken::Nothing);
}

/// The arbiter waits for each client's `busy` in turn after one barrier.
#[test]
fn every_packet_sent_before_the_stop_is_drained_two_clients() {
    model(2, 1, Broken::Nothing);
}

/// Without the client's barrier both sides can miss each other's store:
/// the client pushes after the arbiter found it idle and drained. The
/// model's assertion fails; loom's failure may abort while unwinding, so
/// the broken model runs in a child process (see `loom_support`).
#[test]
fn entering_without_the_light_barrier_strands_a_packet() {
    loom_support::expect_broken_model_fails(
        "stop_without_light_barrier_child",
        "stranded",
        "light barrier in enter",
        "with a stranded packet",
    );
}

#[test]
#[ignore = "run in a child process by entering_without_the_light_barrier_strands_a_packet"]
fn stop_without_light_barrier_child() {
    model(1, 1, Broken::LightBarrier);
}

/// The same on the arbiter's side: without the heavy barrier it may read
/// `busy` before its `stop` is visible.
#[test]
fn closing_without_the_heavy_barrier_strands_a_packet() {
    loom_support::expect_broken_model_fails(
        "stop_without_heavy_barrier_child",
        "stranded",
        "heavy barrier in close",
        "with a stranded packet",
    );
}

#[test]
#[ignore = "run in a child process by closing_without_the_heavy_barrier_strands_a_packet"]
fn stop_without_heavy_barrier_child() {
    model(1, 1, Broken::HeavyBarrier);
}

/// With `busy ← false` relaxed, the arbiter that reads it is not ordered
/// after the client's push: its drain may miss the packet.
#[test]
fn leaving_without_release_strands_a_packet() {
    loom_support::expect_broken_model_fails(
        "stop_leave_relaxed_child",
        "stranded",
        "Release of busy in leave",
        "with a stranded packet",
    );
}

#[test]
#[ignore = "run in a child process by leaving_without_release_strands_a_packet"]
fn stop_leave_relaxed_child() {
    model(1, 1, Broken::ReleaseOfBusy);
}
