//! The GPS fluid reference against finish times worked out by hand, with
//! flows that start late, go idle and come back, equal and unequal
//! weights; checked on `Fluid` itself and on the engine's per-packet fluid
//! finish (the `fluid` of each departure row), on the simulation's thread
//! and on the fluid thread.
//!
//! The numbers below are computed in the comments from GPS's definition
//! alone (each backlogged flow `i` is served at `R·w_i/W(t)`), not from
//! the simulator's virtual-time formulas, so a wrong start time (for
//! instance `S = F_last` instead of `max(V(a), F_last)` for a flow that
//! went idle) or a wrong slope fails them. At 8 Gbit/s the link sends
//! 1 byte per ns, so 1000 bytes alone take 1 µs.
#![allow(clippy::unwrap_used)]

use pktsched_core::Rate;
use pktsched_core::sched::Algorithm;
use pktsched_sim::engine::{Options, simulate};
use pktsched_sim::fluid::Fluid;
use pktsched_sim::{FlowSpec, SimConfig, SizeDist, SourceSpec};

const BPS: u64 = 8_000_000_000;
const US: u64 = 1_000_000; // ps

/// An arrival: time (ps), flow, bytes.
type Arrival = (u64, u32, u32);

/// Runs `arrivals` (in time order) through `Fluid`, taking every
/// departure due by an arrival's time before it; per flow, its packets'
/// finish times (ps) in order.
fn fluid_finishes(weights: &[u32], arrivals: &[Arrival]) -> Vec<Vec<u64>> {
    let mut fl = Fluid::new(BPS, weights);
    let mut out = vec![Vec::new(); weights.len()];
    let mut take = |fl: &mut Fluid| {
        let d = fl.pop().unwrap();
        out[d.flow as usize].push(d.t_ps);
    };
    for (id, &(t, flow, len)) in arrivals.iter().enumerate() {
        while fl.next_time().is_some_and(|n| n <= t) {
            take(&mut fl);
        }
        fl.arrive(flow, len, t, id as u32);
    }
    while fl.next_time().is_some() {
        take(&mut fl);
    }
    assert!(fl.is_idle() && !fl.overflowed());
    out
}

/// The same arrivals as traces through the engine (WF2Q+, so the packet
/// system is a real scheduler); per flow, the fluid finish of each of its
/// packets in order (a flow's packets leave in FIFO order in both).
fn engine_finishes(weights: &[u32], arrivals: &[Arrival], fluid_thread: bool) -> Vec<Vec<u64>> {
    let flows = weights
        .iter()
        .enumerate()
        .map(|(i, &weight)| {
            let rows: Vec<(u64, u32)> = arrivals
                .iter()
                .filter(|a| a.1 == i as u32)
                .map(|&(t, _, len)| (t, len))
                .collect();
            FlowSpec {
                group: i as u32,
                weight,
                size: SizeDist::Fixed(rows.iter().map(|r| r.1).max().unwrap()),
                source: SourceSpec::Trace(rows),
                limit: 1024,
            }
        })
        .collect();
    let c = SimConfig::uniform(
        "closed-form",
        Rate::gbit(8),
        Algorithm::Wf2q,
        20 * US,
        flows,
    );
    let opt = Options {
        departures: true,
        fluid_thread,
        ..Options::default()
    };
    let out = simulate(&c, opt).unwrap();
    let mut per_flow = vec![Vec::new(); weights.len()];
    for d in &out.departures {
        per_flow[d.flow as usize].push(d.fluid.unwrap());
    }
    per_flow
}

/// Every finish within 1 ps (the reference rounds to the nearest ps) of
/// the hand-computed one, the same in `Fluid` and in the engine (both
/// threads).
fn check(weights: &[u32], arrivals: &[Arrival], want: &[Vec<u64>]) {
    let close = |got: &[Vec<u64>], how: &str| {
        assert_eq!(got.len(), want.len());
        for (f, (g, w)) in got.iter().zip(want).enumerate() {
            assert_eq!(g.len(), w.len(), "{how}: flow {f}: {g:?} vs {w:?}");
            for (k, (a, b)) in g.iter().zip(w).enumerate() {
                assert!(
                    a.abs_diff(*b) <= 1,
                    "{how}: flow {f} packet {k}: {a} ps, by hand {b} ps ({g:?})"
                );
            }
        }
    };
    close(&fluid_finishes(weights, arrivals), "Fluid");
    close(&engine_finishes(weights, arrivals, false), "engine");
    close(
        &engine_finishes(weights, arrivals, true),
        "engine, fluid thread",
    );
}

/// Weights 1 and 1. Flow 0 sends ten 1000-byte packets at 0 and is alone
/// until 3 µs: its first three finish at 1, 2 and 3 µs. Flow 1's
/// 1500-byte packet arrives at 3 µs; from then on each flow gets 0.5 B/ns,
/// so flow 1 finishes at 3 + 1500/0.5 ns = 6 µs, while flow 0 sends 1500
/// bytes: its 4th packet at 5 µs, 500 bytes of the 5th by 6 µs. Alone
/// again, the 5th ends at 6.5 µs and the rest 1 µs apart, the last at
/// 11.5 µs (11 500 bytes in all at 1 B/ns).
#[test]
fn a_flow_that_starts_late_gets_half_the_link() {
    let mut arrivals: Vec<Arrival> = (0..10).map(|_| (0, 0, 1000)).collect();
    arrivals.push((3 * US, 1, 1500));
    let f0 = [
        1_000, 2_000, 3_000, 5_000, 6_500, 7_500, 8_500, 9_500, 10_500, 11_500,
    ];
    let want = vec![f0.iter().map(|ns| ns * 1000).collect(), vec![6 * US]];
    check(&[1, 1], &arrivals, &want);
}

/// Weights 1 and 1. At 0 flow 0 sends 2 × 1000 B, flow 1 1000 B: both
/// first packets end at 2 µs (0.5 B/ns each). Flow 1 is idle from 2 µs;
/// flow 0 alone sends 500 bytes by 2.5 µs, when flow 1's second packet
/// (1000 B) comes: flow 0's last 500 bytes at 0.5 B/ns end at 3.5 µs,
/// flow 1 has sent 500 bytes by then and the rest alone by 4 µs. (Had
/// flow 1's packet started at its old finish instead of at V(2.5 µs), it
/// would end at 3.5 µs.) The link is idle from 4 µs; at 10 µs flow 0
/// sends 1000 B and flow 1 500 B: flow 1 ends at 11 µs, flow 0 then has
/// 500 bytes left alone: 11.5 µs.
#[test]
fn a_flow_that_goes_idle_restarts_at_the_current_virtual_time() {
    let arrivals: Vec<Arrival> = vec![
        (0, 0, 1000),
        (0, 0, 1000),
        (0, 1, 1000),
        (2_500_000, 1, 1000),
        (10 * US, 0, 1000),
        (10 * US, 1, 500),
    ];
    let want = vec![
        vec![2 * US, 3_500_000, 11_500_000],
        vec![2 * US, 4 * US, 11 * US],
    ];
    check(&[1, 1], &arrivals, &want);
}

/// Weights 1 and 3. Flow 0 sends 4 × 1000 B at 0, alone until 1 µs (its
/// first packet ends there). Flow 1 sends 3 × 1000 B at 1 µs: it gets
/// 0.75 B/ns, its packets end at 1 + k·4/3 µs (2.333…, 3.666…, 5 µs) while
/// flow 0 gets 0.25 B/ns, 1000 bytes by 5 µs: its 2nd packet ends at
/// 5 µs too. Flow 1 is idle from 5 µs; flow 0's 3rd packet ends at 6 µs,
/// when flow 1 sends 750 B: at 0.75 B/ns it ends at 7 µs, flow 0 has sent
/// 250 bytes of its 4th by then and the other 750 alone by 7.75 µs.
#[test]
fn unequal_weights_with_a_late_start_and_a_return() {
    let mut arrivals: Vec<Arrival> = (0..4).map(|_| (0, 0, 1000)).collect();
    arrivals.extend((0..3).map(|_| (US, 1, 1000)));
    arrivals.push((6 * US, 1, 750));
    let want = vec![
        vec![US, 5 * US, 6 * US, 7_750_000],
        vec![2_333_333, 3_666_667, 5 * US, 7 * US],
    ];
    check(&[1, 3], &arrivals, &want);
}
