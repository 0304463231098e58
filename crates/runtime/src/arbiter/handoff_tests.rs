//! The hand-off on a virtual clock: a client runs the rounds a late
//! arbiter misses, and the departures are those of an arbiter that was
//! never late.

use std::time::Duration;

use pktsched_core::{Algorithm, FlowId, Nanos, Pkt, Rate};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Arbiter, SharedArbiter};
use crate::client::{Client, STARVED_GAP};
use crate::config::{Config, StopMode, add_flows};
use crate::output::VecOutput;

type Out = VecOutput<u64>;

fn config(assist_after: Option<Duration>) -> Config {
    Config {
        assist_after,
        ..Config::new(Rate::gbit(1))
    }
}

fn qfq_arbiter(cfg: &Config, flows: usize) -> Arbiter<u64, Out> {
    let mut a = Arbiter::new(cfg, Algorithm::Qfq.build_send::<u64>(), Out::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let weights: Vec<u32> = (1..=flows as u32).collect();
    add_flows(a.scheduler().as_mut(), &weights, flows, 64).unwrap_or_else(|e| panic!("{e}"));
    a
}

fn client(s: &SharedArbiter<u64, Out>) -> Client<u64> {
    s.client().unwrap_or_else(|e| panic!("{e}"))
}

/// Released packets (item) with the index of the round that released them.
fn releases(out: &Out, rounds: &[usize]) -> Vec<(u64, usize)> {
    let mut v = Vec::new();
    let mut start = 0;
    for (round, &end) in rounds.iter().enumerate() {
        v.extend(out.pkts[start..end].iter().map(|p| (p.item, round)));
        start = end;
    }
    v
}

/// The same seeded workload twice: once with the arbiter running every
/// round, once with the arbiter missing rounds at random and a client
/// running them. Rounds are 3 µs apart and the lateness threshold is 2 µs,
/// so the client runs exactly the rounds the arbiter missed, at the same
/// `now`: every packet leaves in the same order in the same round.
#[test]
fn a_client_runs_the_missed_rounds_and_departures_are_unchanged() {
    let cfg = config(Some(Duration::from_micros(2)));
    let flows = 4;
    let steps = 2_000;
    // Reference: the arbiter never late.
    let mut a = qfq_arbiter(&cfg, flows);
    let mut cs: Vec<_> = (0..flows)
        .map(|_| a.client().unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(16);
    let mut ends = Vec::new();
    let mut seq = 0u64;
    for step in 0..steps {
        let now = Nanos((step + 1) * 3_000);
        send_some(&mut cs, &mut rng, &mut seq, now);
        a.do_scan(now);
        ends.push(a.output().map_or(0, |o| o.pkts.len()));
    }
    let want = a.output().map(|o| releases(o, &ends));
    // Hand-off: same workload, same seed; the arbiter misses rounds.
    let s = SharedArbiter::new(qfq_arbiter(&cfg, flows));
    let mut cs: Vec<_> = (0..flows).map(|_| client(&s)).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(16);
    let mut miss = ChaCha8Rng::seed_from_u64(61);
    let (mut ends, mut missed, mut seq) = (Vec::new(), 0u64, 0u64);
    for step in 0..steps {
        let now = Nanos((step + 1) * 3_000);
        send_some(&mut cs, &mut rng, &mut seq, now);
        if miss.random_bool(0.4) {
            missed += 1;
            let helper = (step as usize) % flows;
            assert!(
                cs[helper].assist_at(now),
                "step {step}: the client ran no round"
            );
            // The round just ran: the arbiter is not late any more.
            assert!(!cs[(helper + 1) % flows].assist_at(now));
        } else {
            assert!(s.do_scan(now).is_some());
        }
        ends.push(released_so_far(&s));
    }
    assert_same_releases(&s, &ends, want);
    let stats = s.with(|a| a.stats()).unwrap_or_default();
    assert_eq!(stats.assisted_rounds, missed);
    assert_eq!(stats.loops, steps);
    let by_clients: u64 = cs.iter().map(Client::assisted_rounds).sum();
    assert_eq!(by_clients, missed);
    // Stop accounts for every packet.
    let r = s.stop(StopMode::Return, Nanos((steps + 1) * 3_000));
    let r = r.unwrap_or_else(|| panic!("stopped twice"));
    assert_eq!(
        r.arbiter.decisions + r.returned.len() as u64 + r.arbiter.dropped,
        seq
    );
}

/// Each client sends 0–2 packets of 125–1500 bytes (seeded).
/// Packets the shared arbiter's output holds so far.
fn released_so_far(s: &SharedArbiter<u64, Out>) -> usize {
    s.with(|a| a.output().map_or(0, |o| o.pkts.len()))
        .unwrap_or(0)
}

/// The shared arbiter released what the lone arbiter did (`want`), round
/// by round (`ends`: its output's length after each round), and enough of
/// it to mean something.
fn assert_same_releases(
    s: &SharedArbiter<u64, Out>,
    ends: &[usize],
    want: Option<Vec<(u64, usize)>>,
) {
    let got = s.with(|a| a.output().map(|o| releases(o, ends))).flatten();
    assert!(
        want.as_ref().is_some_and(|w| w.len() > 500),
        "too few releases"
    );
    assert_eq!(got, want);
}

fn send_some(cs: &mut [Client<u64>], rng: &mut ChaCha8Rng, seq: &mut u64, now: Nanos) {
    for (i, c) in cs.iter_mut().enumerate() {
        for _ in 0..rng.random_range(0..3) {
            let len = rng.random_range(125..=1500);
            *seq += 1;
            let p = Pkt::new(FlowId(i as u32), len, now, *seq);
            assert!(c.send(p).is_ok(), "mailbox full at {now:?}");
        }
    }
}

/// A client runs a round only when the last one started more than
/// `assist_after` ago, and never while someone holds the lock.
#[test]
fn a_client_runs_a_round_only_when_the_arbiter_is_late_and_the_lock_free() {
    let s = SharedArbiter::new(qfq_arbiter(&config(Some(Duration::from_micros(2))), 1));
    let mut c = client(&s);
    assert!(c.send(Pkt::new(FlowId(0), 100, Nanos(0), 1)).is_ok());
    assert!(s.do_scan(Nanos(10_000)).is_some());
    assert_eq!(s.last_round(), Nanos(10_000));
    // Exactly 2 µs after the last round: not late yet.
    assert!(!c.assist_at(Nanos(12_000)));
    // Late, but the arbiter (anyone) holds the lock: the client never waits.
    let inside = s.with(|_| c.assist_at(Nanos(12_001)));
    assert_eq!(inside, Some(false));
    assert!(c.assist_at(Nanos(12_001)));
    assert_eq!(s.last_round(), Nanos(12_001));
    assert_eq!(s.with(|a| a.stats().assisted_rounds), Some(1));
    // Once stopped, no round runs and nothing panics.
    let a = s.take();
    assert!(a.is_some());
    assert!(!c.assist_at(Nanos(1_000_000)));
    assert!(s.do_scan(Nanos(1_000_000)).is_none());
    assert!(s.client().is_err());
}

/// `assist_after: None` turns the hand-off off; a plain `Arbiter`'s
/// clients never run rounds.
#[test]
fn without_assist_after_or_a_lock_clients_never_run_rounds() {
    let s = SharedArbiter::new(qfq_arbiter(&config(None), 1));
    let mut c = client(&s);
    assert!(c.send(Pkt::new(FlowId(0), 100, Nanos(0), 1)).is_ok());
    assert!(!c.assist_at(Nanos(1_000_000_000)));
    assert_eq!(s.with(|a| a.stats().loops), Some(0));
    let a = qfq_arbiter(&config(Some(Duration::from_micros(2))), 1);
    let mut c = a.client().unwrap_or_else(|e| panic!("{e}"));
    assert!(!c.assist_at(Nanos(1_000_000_000)));
    let bad = Config {
        assist_after: Some(Duration::from_secs(2)),
        ..Config::new(Rate::gbit(1))
    };
    let e = bad.validate().map(|_| ()).unwrap_err().to_string();
    assert!(
        e.contains("assist_after") && e.contains("at most 1s"),
        "{e}"
    );
}

/// A client that asked for late rounds (`set_assist_after`) runs them when
/// the arbiter is late, also when it polls with its packet still in its
/// mailbox; the others, with `assist_after: None`, do not. A runtime
/// without a hand-off lock refuses the request.
#[test]
fn one_client_may_run_late_rounds_while_the_others_do_not() {
    use crate::config::Clock;
    // The threaded runtime's set-up (a clock, no step-aside, nothing for
    // all clients); no sends here, so its clock decides nothing.
    let s = SharedArbiter::with_clock(qfq_arbiter(&config(None), 2), Clock::new(), false);
    let (mut plain, mut quick) = (client(&s), client(&s));
    assert!(quick.set_assist_after(Duration::from_micros(2)));
    assert!(!plain.assist_at(Nanos(1_000_000)));
    assert!(quick.assist_at(Nanos(1_000_000)));
    // On a virtual clock.
    let s = SharedArbiter::new(qfq_arbiter(&config(None), 2));
    let (mut plain, mut quick) = (client(&s), client(&s));
    assert!(quick.set_assist_after(Duration::from_micros(2)));
    assert!(plain.send(Pkt::new(FlowId(0), 100, Nanos(0), 1)).is_ok());
    assert!(quick.send(Pkt::new(FlowId(1), 100, Nanos(0), 2)).is_ok());
    assert!(s.do_scan(Nanos(10_000)).is_some());
    assert!(!plain.assist_at(Nanos(1_000_000)));
    assert!(!quick.assist_at(Nanos(12_000)));
    assert!(quick.assist_at(Nanos(12_001)));
    assert_eq!(s.with(|a| a.stats().assisted_rounds), Some(1));
    // A poll with nothing to send, its packet still in the mailbox.
    assert!(quick.send(Pkt::new(FlowId(1), 100, Nanos(0), 3)).is_ok());
    quick.clocked_send(0, 20_000, false);
    assert_eq!(s.with(|a| a.stats().assisted_rounds), Some(2));
    assert_eq!(s.with(|a| a.stats().drained), Some(3));
    // Changing the threshold keeps the request.
    assert!(quick.set_assist_after(Duration::from_micros(50)));
    assert!(!quick.assist_at(Nanos(70_000)));
    assert!(quick.assist_at(Nanos(70_001)));
    // No hand-off lock: refused.
    let a = qfq_arbiter(&config(None), 1);
    let mut c = a.client().unwrap_or_else(|e| panic!("{e}"));
    assert!(!c.set_assist_after(Duration::from_micros(2)));
    assert!(!c.assist_at(Nanos(1_000_000_000)));
}

/// While the arbiter thread is marked as stepped aside, clients run the
/// rounds without `assist_after`, backlogged or not (`AWAY_AFTER`
/// lateness), and the departures are those of an arbiter running every
/// round itself; once it is back, they run none.
#[test]
fn clients_run_the_rounds_while_the_arbiter_is_away_and_departures_are_unchanged() {
    let cfg = config(None);
    let flows = 3;
    let steps = 1_500;
    let mut a = qfq_arbiter(&cfg, flows);
    let mut cs: Vec<_> = (0..flows)
        .map(|_| a.client().unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let (mut ends, mut seq) = (Vec::new(), 0u64);
    for step in 0..steps {
        let now = Nanos((step + 1) * 3_000);
        send_some(&mut cs, &mut rng, &mut seq, now);
        a.do_scan(now);
        ends.push(a.output().map_or(0, |o| o.pkts.len()));
    }
    let want = a.output().map(|o| releases(o, &ends));
    let s = SharedArbiter::new(qfq_arbiter(&cfg, flows));
    let mut cs: Vec<_> = (0..flows).map(|_| client(&s)).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let (mut ends, mut seq, mut by_clients) = (Vec::new(), 0u64, 0u64);
    // Present: without `assist_after` no client runs a round.
    send_some(&mut cs, &mut rng, &mut seq, Nanos(3_000));
    assert!(!cs[0].assist_at(Nanos(3_000)));
    assert!(s.do_scan(Nanos(3_000)).is_some());
    ends.push(
        s.with(|a| a.output().map_or(0, |o| o.pkts.len()))
            .unwrap_or(0),
    );
    s.set_away(true);
    for step in 1..steps {
        let now = Nanos((step + 1) * 3_000);
        send_some(&mut cs, &mut rng, &mut seq, now);
        // The client with the most packets waiting runs it: backlogged
        // clients run rounds while the arbiter is away.
        let i = (0..flows).max_by_key(|&i| cs[i].pending()).unwrap_or(0);
        assert!(cs[i].assist_at(now), "step {step}: no round");
        by_clients += 1;
        ends.push(released_so_far(&s));
    }
    assert_same_releases(&s, &ends, want);
    assert_eq!(s.with(|a| a.stats().assisted_rounds), Some(by_clients));
    // Back: no client round, however late.
    s.set_away(false);
    assert!(!cs[0].assist_at(Nanos(1_000_000_000)));
    let r = s.stop(StopMode::Return, Nanos((steps + 1) * 3_000));
    let r = r.unwrap_or_else(|| panic!("stopped twice"));
    assert_eq!(
        r.arbiter.decisions + r.returned.len() as u64 + r.arbiter.dropped,
        seq,
        "a packet was neither released, returned nor dropped"
    );
}

/// `Config::starved_assist` on a virtual clock: a client that was sending
/// back to back and then lost its core for longer than `STARVED_GAP` runs
/// the round the arbiter missed, though the arbiter thread is present and
/// there is no `assist_after`; a late arbiter alone (the client kept its
/// core) or an arbiter on time does not make it run one, and without the
/// option a starved client runs none.
#[test]
fn a_starved_client_runs_the_late_round_only_with_starved_assist() {
    for starved_assist in [false, true] {
        let cfg = Config {
            starved_assist,
            ..config(None)
        };
        let s = SharedArbiter::new(qfq_arbiter(&cfg, 1));
        let mut c = client(&s);
        let (mut t, mut seq) = (1_000_000u64, 0u64);
        let mut send = |c: &mut Client<u64>, t: u64| {
            seq += 1;
            assert!(c.send(Pkt::new(FlowId(0), 64, Nanos(t), seq)).is_ok());
            c.clocked_send(1, t, false);
        };
        // Back to back (1 µs apart), the arbiter on time.
        for _ in 0..50 {
            send(&mut c, t);
            assert!(s.do_scan(Nanos(t)).is_some());
            t += 1_000;
        }
        // The arbiter misses 100 µs of rounds while the client keeps its
        // core: not starved, so no round.
        for _ in 0..100 {
            send(&mut c, t);
            t += 1_000;
        }
        assert_eq!(c.assisted_rounds(), 0);
        // Both lose their cores; the client's next send comes after a
        // starved gap, the last round 1 ms ago.
        t += STARVED_GAP + 1_000;
        send(&mut c, t);
        let ran = u64::from(starved_assist);
        assert_eq!(c.assisted_rounds(), ran, "starved_assist {starved_assist}");
        assert_eq!(s.last_round().0 == t, starved_assist);
        // Streaming again; then a starved gap with the arbiter on time (a
        // round 1 µs before the send, within AWAY_AFTER): no round.
        for _ in 0..10 {
            t += 1_000;
            send(&mut c, t);
            assert!(s.do_scan(Nanos(t)).is_some());
        }
        t += STARVED_GAP + 1_000;
        assert!(s.do_scan(Nanos(t - 1_000)).is_some());
        send(&mut c, t);
        assert_eq!(c.assisted_rounds(), ran);
        assert_eq!(s.with(|a| a.stats().assisted_rounds), Some(ran));
        let r = s.stop(StopMode::Return, Nanos(t + 1_000));
        let r = r.unwrap_or_else(|| panic!("stopped twice"));
        assert_eq!(
            r.arbiter.decisions + r.returned.len() as u64 + r.arbiter.dropped,
            seq,
            "a packet was neither released, returned nor dropped"
        );
    }
}
