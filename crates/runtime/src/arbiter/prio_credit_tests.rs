//! The priority credit ([`Arbiter::set_priority_credit`]) on a virtual
//! clock: an urgent frame does not wait for the bulk frame on the link,
//! bulk frames still start only within `burst`, and the bytes released
//! over any interval stay within `rate·t + burst + prio_burst` + one frame.

use std::time::Duration;

use pktsched_core::{Algorithm, FlowConfig, FlowId, Nanos, Pkt, Rate};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Arbiter, Round};
use crate::client::Client;
use crate::config::{Config, Sent};
use crate::output::VecOutput;

const URGENT: FlowId = FlowId(0);
const BULK: FlowId = FlowId(1);
const MAX_FRAME: u32 = 1538;

type TestArbiter = Arbiter<u64, VecOutput<u64>>;

/// Strict priority, the urgent flow on level 0 and the bulk flow on level
/// 1; the credit given to the urgent flow. Mailboxes are read every round.
fn prio_arbiter(
    rate: Rate,
    burst: u32,
    prio_burst: u32,
) -> (TestArbiter, Client<u64>, Client<u64>) {
    let mut cfg = Config::new(rate);
    cfg.burst = burst;
    cfg.read_interval = Duration::ZERO;
    cfg.mailbox_capacity = 1024;
    let mut a = Arbiter::new(
        &cfg,
        Algorithm::Prio.build_send::<u64>(),
        VecOutput::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for prio in [0, 1] {
        a.scheduler()
            .add_flow(
                FlowConfig::weight(1)
                    .with_prio(prio)
                    .with_limit(10_000)
                    .with_max_len(MAX_FRAME),
            )
            .unwrap_or_else(|e| panic!("{e}"));
    }
    a.set_priority_credit(prio_burst, vec![URGENT]);
    let urgent = a.client().unwrap_or_else(|e| panic!("{e}"));
    let bulk = a.client().unwrap_or_else(|e| panic!("{e}"));
    (a, urgent, bulk)
}

fn send(c: &mut Client<u64>, flow: FlowId, len: u32, now: Nanos, seq: u64) {
    match c.send(Pkt::new(flow, len, now, seq)) {
        Ok(Sent::Queued | Sent::Backpressure) => {}
        Err(e) => panic!("mailbox refused packet {seq}: {e:?}"),
    }
}

/// Keeps `n` bulk frames of `MAX_FRAME` bytes waiting in the mailbox.
fn top_up(a: &TestArbiter, bulk: &mut Client<u64>, n: usize, now: Nanos, seq: &mut u64) {
    let queued = a.sched.flow_stats(BULK).map_or(0, |c| c.backlog.pkts);
    for _ in (queued as usize + bulk.pending())..n {
        *seq += 1;
        send(bulk, BULK, MAX_FRAME, now, *seq);
    }
}

/// The round at which the urgent frame sent at `at` (while the bulk flow
/// keeps the 100 Mbit/s link full, with rounds whenever the link is due)
/// is released, less `at`; and the urgent frames released on the credit.
/// One round at `now`, and the packets it released.
fn scan_released(a: &mut TestArbiter, now: Nanos) -> (Round, Vec<Pkt<u64>>) {
    let before = a.output().map_or(0, |o| o.pkts.len());
    let r = a.do_scan(now);
    let out = a
        .output()
        .map(|o| o.pkts[before..].to_vec())
        .unwrap_or_default();
    (r, out)
}

fn urgent_wait(prio_burst: u32, at: Nanos) -> (u64, u64) {
    let (mut a, mut urgent, mut bulk) = prio_arbiter(Rate::mbit(100), MAX_FRAME, prio_burst);
    let mut now = Nanos(0);
    let mut seq = 0;
    let mut sent_urgent = false;
    loop {
        top_up(&a, &mut bulk, 4, now, &mut seq);
        if !sent_urgent && now >= at {
            // It arrives between two rounds: the next round is at `at`.
            now = at;
            send(&mut urgent, URGENT, 200, now, 0);
            sent_urgent = true;
        }
        let (r, out) = scan_released(&mut a, now);
        if out.iter().any(|p| p.flow == URGENT) {
            return (now.0 - at.0, a.priority_releases());
        }
        // A punctual forwarder: the next round when the link is due, or
        // at the urgent frame's arrival, whichever is first.
        let due = r
            .link_free
            .0
            .saturating_sub(a.release_lead().0)
            .max(now.0 + 1);
        now = Nanos(if sent_urgent { due } else { due.min(at.0) });
    }
}

/// Under overload the bulk class keeps the link `burst` ahead; an urgent
/// frame on the default credit (one maximum frame) leaves in the round it
/// arrives, at any instant, where without the credit it waits up to one
/// bulk frame (123 µs at 100 Mbit/s).
#[test]
fn an_urgent_frame_leaves_at_once_instead_of_after_the_bulk_frame() {
    let frame_ns = Rate::mbit(100).tx_time(u64::from(MAX_FRAME)).0;
    let mut waited_without = Vec::new();
    for k in 0..40u64 {
        // Arrival instants spread over several bulk frame times.
        let at = Nanos(1_000_000 + k * frame_ns / 7);
        let (with, on_credit) = urgent_wait(MAX_FRAME, at);
        assert_eq!(with, 0, "arrival {at:?}: waited {with} ns with the credit");
        let (without, none) = urgent_wait(0, at);
        assert_eq!(none, 0, "no credit, no credit release");
        assert!(
            without <= frame_ns,
            "waited {without} ns: more than one bulk frame"
        );
        waited_without.push(without);
        // With the link more than `burst` ahead it was the credit that let it go.
        if without > 0 {
            assert_eq!(on_credit, 1);
        }
    }
    // Without the credit most arrivals wait, on average about half a frame.
    let waited = waited_without.iter().filter(|&&w| w > 0).count();
    assert!(
        waited >= 30,
        "only {waited} of 40 waited without the credit"
    );
    let mean = waited_without.iter().sum::<u64>() / 40;
    assert!(
        mean > frame_ns / 4,
        "mean wait {mean} ns, a frame is {frame_ns} ns"
    );
}

/// After an urgent frame went on the credit, bulk frames wait until the
/// link is back within `burst`: they pay the urgent bytes back at once.
#[test]
fn bulk_frames_pay_the_urgent_bytes_back() {
    let rate = Rate::mbit(100);
    let (mut a, mut urgent, mut bulk) = prio_arbiter(rate, MAX_FRAME, MAX_FRAME);
    let mut seq = 0;
    top_up(&a, &mut bulk, 8, Nanos(0), &mut seq);
    let r = a.do_scan(Nanos(0));
    // Two bulk frames: the one due now and the one within `burst`.
    assert_eq!(r.released, 2);
    let lead = a.link_lead();
    assert_eq!(r.link_free, Nanos(2 * lead.0));
    send(&mut urgent, URGENT, 1000, Nanos(10), 0);
    let r = a.do_scan(Nanos(10));
    assert_eq!(r.released, 1, "the urgent frame, on the credit");
    assert_eq!(a.priority_releases(), 1);
    let urgent_ns = rate.tx_time(1000).0;
    assert_eq!(r.link_free, Nanos(2 * lead.0 + urgent_ns));
    // No bulk frame until the link is within `burst` again: `urgent_ns`
    // later than it would have been.
    let due = r.link_free.0 - lead.0;
    assert_eq!(a.release_lead(), lead, "nothing urgent queued");
    assert_eq!(a.do_scan(Nanos(due - 1)).released, 0);
    assert_eq!(a.do_scan(Nanos(due)).released, 1);
}

/// One random case: Poisson urgent frames (sometimes in bursts), greedy
/// bulk frames of random lengths, a punctual forwarder. Checks every
/// release against the rule (bulk within `burst`, urgent within `burst +
/// prio_burst`), the window bound, and that an urgent frame that finds no
/// other urgent frame queued, with the previous one released at least a
/// frame time back, leaves in its arrival round when the credit is at
/// least a frame.
fn random_case(seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let rate = Rate::bps(rng.random_range(1_000_000..2_000_000_000));
    let burst = rng.random_range(0..3 * MAX_FRAME);
    let prio_burst = match rng.random_range(0..4) {
        0 => 0,
        1 => MAX_FRAME,
        _ => rng.random_range(1..4 * MAX_FRAME),
    };
    let (mut a, mut urgent, mut bulk) = prio_arbiter(rate, burst, prio_burst);
    let frame_ns = rate.tx_time(u64::from(MAX_FRAME)).0;
    let end = 400 * frame_ns;
    let mut next_urgent = rng.random_range(0..20 * frame_ns);
    let (mut now, mut seq, mut last_urgent) = (Nanos(0), 0u64, None::<u64>);
    let mut releases: Vec<(u64, u32)> = Vec::new();
    let mut fresh = Vec::new(); // seqs of urgent frames that must not wait
    while now.0 < end {
        let n = a.sched.backlog().pkts as usize + bulk.pending();
        for _ in n..6 {
            seq += 1;
            send(&mut bulk, BULK, rng.random_range(64..=MAX_FRAME), now, seq);
        }
        if now.0 >= next_urgent {
            let queued = a.sched.flow_stats(URGENT).map_or(0, |c| c.backlog.pkts) > 0;
            let spaced = last_urgent.is_none_or(|t| now.0 >= t + frame_ns);
            let k = if rng.random_range(0..5) == 0 { 4 } else { 1 };
            for i in 0..k {
                seq += 1;
                send(
                    &mut urgent,
                    URGENT,
                    rng.random_range(64..=MAX_FRAME),
                    now,
                    seq,
                );
                if i == 0 && !queued && spaced && prio_burst >= MAX_FRAME {
                    fresh.push(seq);
                }
            }
            next_urgent = now.0 + rng.random_range(1..10 * frame_ns);
        }
        let mut shadow = a.link.clone();
        if a.was_empty {
            shadow.idle(now);
        }
        let (r, out) = scan_released(&mut a, now);
        for p in &out {
            let lead = if p.flow == URGENT {
                a.lead.0 + a.prio_lead.0
            } else {
                a.lead.0
            };
            assert!(
                shadow.ready(Nanos(now.0 + lead)),
                "seed {seed}: {:?} frame {} started {} ns ahead, allowed {lead}",
                p.flow,
                p.item,
                shadow.free_at().0 - now.0
            );
            shadow.send(p.len);
            releases.push((now.0, p.len));
            if p.flow == URGENT {
                last_urgent = Some(now.0);
            }
            fresh.retain(|&s| s != p.item);
        }
        // Every fresh urgent frame of this round or before has left.
        assert!(
            fresh.is_empty(),
            "seed {seed}: urgent {fresh:?} waited at {now:?}"
        );
        let due = if r.backlog > 0 {
            r.link_free.0.saturating_sub(a.release_lead().0)
        } else {
            u64::MAX
        };
        now = Nanos(due.min(next_urgent).max(now.0 + 1));
    }
    check_window_bound(seed, rate, burst + prio_burst + MAX_FRAME, &releases);
}

/// Over every window `[t_i, t_j]` of release instants the bytes released
/// stay ≤ `rate·(t_j − t_i) + allowance` (exact, in bit·ns units).
fn check_window_bound(seed: u64, rate: Rate, allowance: u32, releases: &[(u64, u32)]) {
    let bps = i128::from(rate.as_bps());
    let bits_ns = |bytes: u64| i128::from(bytes) * 8 * 1_000_000_000;
    // max over i ≤ j of (B_j − rate·t_j) − (B_{i−1} − rate·t_i): keep the
    // minimum of the second term over the releases seen.
    let (mut cum, mut min_start, mut worst) = (0u64, i128::MAX, i128::MIN);
    for &(t, len) in releases {
        min_start = min_start.min(bits_ns(cum) - bps * i128::from(t));
        cum += u64::from(len);
        worst = worst.max(bits_ns(cum) - bps * i128::from(t) - min_start);
    }
    // Rounding of the two leads to whole nanoseconds: at most 2 ns.
    let limit = bits_ns(u64::from(allowance)) + 2 * bps;
    assert!(
        worst <= limit,
        "seed {seed}: {:.1} bytes over a window, allowed {allowance} + rate·t",
        worst as f64 / 8e9
    );
}

/// The property over random arrivals, rates, bursts and credits.
#[test]
fn the_bytes_on_the_wire_stay_within_rate_burst_and_credit() {
    for seed in 0..120 {
        random_case(seed);
    }
}
