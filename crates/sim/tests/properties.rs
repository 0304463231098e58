//! Property tests on random workloads: WF2Q+, DRR and QFQ stay within their
//! bounds (QFQ also with jumbo and 64 KiB frames and extreme weights), the fluid reference conserves work, every packet is accounted;
//! WF2Q+ lags GPS by at most one packet while every flow is greedy (and
//! by more once flows come and go); closed-form checks of the fluid
//! reference with greedy flows (more in `fluid_closed_form.rs`).
#![allow(clippy::unwrap_used)]

use pktsched_core::Rate;
use pktsched_core::sched::Algorithm;
use pktsched_sim::engine::{Options, simulate};
use pktsched_sim::{FlowSpec, SimConfig, SizeDist, SourceSpec, report};
use proptest::prelude::*;

fn size() -> impl Strategy<Value = SizeDist> {
    prop_oneof![
        (64u32..=1500).prop_map(SizeDist::Fixed),
        (64u32..=700, 700u32..=1500).prop_map(|(a, b)| SizeDist::Uniform(a, b)),
        Just(SizeDist::Mix(vec![(64, 3), (1500, 1)])),
    ]
}

/// Greedy, CBR, Poisson and exponential on-off sources. `rate_scale`
/// multiplies the upper rates (the lowest CBR/Poisson rate stays 10 Mbit/s);
/// on-off periods are divided by `period_div`.
fn source(rate_scale: u64, period_div: u64) -> impl Strategy<Value = SourceSpec> {
    prop_oneof![
        Just(SourceSpec::Greedy),
        (10u64..400 * rate_scale).prop_map(|m| SourceSpec::Cbr {
            rate: Rate::mbit(m)
        }),
        (10u64..600 * rate_scale).prop_map(|m| SourceSpec::Poisson {
            rate: Rate::mbit(m)
        }),
        (
            100 * rate_scale..900 * rate_scale,
            10 / period_div..200 / period_div,
            10 / period_div..400 / period_div,
        )
            .prop_map(|(m, on, off)| SourceSpec::OnOff {
                rate: Rate::mbit(m),
                on_ps: on * 1_000_000,
                off_ps: off * 1_000_000,
                exponential: true,
            }),
    ]
}

fn workload() -> impl Strategy<Value = (Vec<FlowSpec>, u64)> {
    (
        prop::collection::vec((1u32..=16, size(), source(1, 1)), 1..8),
        any::<u64>(),
    )
        .prop_map(|(v, seed)| {
            let flows = v
                .into_iter()
                .enumerate()
                .map(|(i, (weight, size, source))| FlowSpec {
                    group: i as u32,
                    weight,
                    size,
                    source,
                    limit: 1024,
                })
                .collect();
            (flows, seed)
        })
}

fn cfg(alg: Algorithm, flows: Vec<FlowSpec>, seed: u64) -> SimConfig {
    let mut c = SimConfig::uniform("prop", Rate::gbit(1), alg, 1_000_000_000, flows);
    c.seed = seed;
    c
}

proptest! {
    // Fixed seed and no persistence: the same cases on every run (the
    // counter-examples found so far are the ignored tests below).
    #![proptest_config(ProptestConfig {
        cases: 24,
        rng_seed: proptest::test_runner::RngSeed::Fixed(20_261_122),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn fair_queueing_stays_within_its_bounds((flows, seed) in workload()) {
        for alg in [Algorithm::Qfq, Algorithm::Drr, Algorithm::Wf2q] {
            let c = cfg(alg, flows.clone(), seed);
            let rep = pktsched_sim::run(&c).unwrap();
            prop_assert!(rep.violations.is_empty(), "{alg}: {}", rep.table());
            prop_assert!(rep.accounting.conserved, "{alg}: {}", rep.table());
            prop_assert_eq!(rep.accounting.fluid_pending, 0);
        }
    }

    #[test]
    fn pspat_model_stays_within_the_composed_bound(
        (flows, seed) in workload(),
        da in 1u64..20,
        dd in 1u64..10,
    ) {
        for alg in [Algorithm::Qfq, Algorithm::Drr] {
            let mut c = cfg(alg, flows.clone(), seed);
            c.pspat = Some(pktsched_sim::Pspat { arbiter_ps: da * 1_000_000, dispatcher_ps: dd * 1_000_000 });
            let rep = pktsched_sim::run(&c).unwrap();
            prop_assert!(rep.violations.is_empty(), "{alg} da={da}us dd={dd}us: {}", rep.table());
            prop_assert!(rep.accounting.conserved, "{alg}: {}", rep.table());
            prop_assert_eq!(rep.accounting.fluid_pending, 0);
        }
    }

    /// The lemma behind the WF2Q+ bound (`metrics`): whenever a packet is
    /// chosen, `V − F_i ≤ L − l_i` for every backlogged flow, checked on the
    /// textbook reference (whose `V` is in bytes per unit weight).
    #[test]
    fn wf2q_virtual_time_never_passes_a_head_by_more_than_a_packet((flows, seed) in workload()) {
        let c = cfg(Algorithm::Wf2q, flows, seed);
        let mut s = pktsched_core::FlowSched::<RefWf2q, u32>::new(RefWf2q::default());
        let out = pktsched_sim::engine::simulate_with(&c, Options::default(), &mut s).unwrap();
        prop_assert!(out.packets > 0);
        let excess = s.discipline().lemma_excess;
        prop_assert!(excess.is_some(), "the lemma was never checked");
        prop_assert!(
            excess.is_some_and(|e| e <= 1e-6),
            "V − F_i exceeded L − l_i by {excess:?} bytes"
        );
    }

    #[test]
    fn bwfi_matches_a_brute_force_computation((flows, seed) in workload()) {
        let c = cfg(Algorithm::Wf2q, flows, seed);
        let out = simulate(&c, Options { departures: true, ..Options::default() }).unwrap();
        let rep = report::build(&c, &out);
        for (k, f) in rep.flows.iter().enumerate() {
            let bf = brute_force_bwfi(&c, &out.departures, k as u32);
            prop_assert!((f.bwfi_bytes - bf).abs() <= 1.0, "flow {k}: engine {} vs brute force {bf}", f.bwfi_bytes);
        }
    }

    /// The fluid reference on its own thread gives the same results as on
    /// the simulation's thread, packet for packet, with and without
    /// draining; with tiny queue limits packets are refused, the thread's
    /// premise fails and the run falls back to one thread.
    #[test]
    fn the_fluid_thread_changes_nothing(
        (flows, seed) in workload(),
        tiny_limits in any::<bool>(),
        drain in any::<bool>(),
    ) {
        let mut c = cfg(Algorithm::Qfq, flows, seed);
        if tiny_limits {
            for f in &mut c.flows {
                f.limit = 1;
            }
        }
        c.drain = drain;
        let opt = Options { departures: true, ..Options::default() };
        let a = simulate(&c, Options { fluid_thread: true, ..opt }).unwrap();
        let b = simulate(&c, Options { fluid_thread: false, ..opt }).unwrap();
        prop_assert!(!b.fluid_threaded);
        let refused: u64 = b.flows.iter().map(|f| f.dropped.iter().sum::<u64>()).sum();
        prop_assert_eq!(a.fluid_threaded, refused == 0, "refused {}", refused);
        prop_assert_eq!(&a.departures, &b.departures);
        prop_assert_eq!(a.fluid_pending, b.fluid_pending);
        prop_assert_eq!(a.fluid_bytes, b.fluid_bytes);
        let json = |o| serde_json::to_string(&report::build(&c, o)).unwrap();
        prop_assert_eq!(json(&a), json(&b));
    }

    #[test]
    fn fluid_reference_conserves_work((flows, seed) in workload()) {
        let c = cfg(Algorithm::Qfq, flows, seed);
        let out = simulate(&c, Options { busy_ends: true, ..Options::default() }).unwrap();
        // Same arrivals, both work conserving at rate R: same busy periods.
        prop_assert_eq!(out.fluid_bytes.0, out.fluid_bytes.1);
        prop_assert_eq!(out.link_busy_ends.len(), out.fluid_busy_ends.len());
        for (a, b) in out.link_busy_ends.iter().zip(&out.fluid_busy_ends) {
            prop_assert!(a.abs_diff(*b) <= 2, "link idle at {a} ps, fluid at {b} ps");
        }
        let delivered: u64 = out.flows.iter().map(|f| f.delivered.1).sum();
        prop_assert_eq!(delivered, out.fluid_bytes.1);
    }
}

/// Greedy flows only: every flow is backlogged in both systems from 0 to
/// `duration`.
fn greedy_workload() -> impl Strategy<Value = (Vec<FlowSpec>, u64)> {
    (
        prop::collection::vec((1u32..=16, size()), 1..10),
        any::<u64>(),
    )
        .prop_map(|(v, seed)| {
            let flows = v
                .into_iter()
                .enumerate()
                .map(|(i, (weight, size))| FlowSpec {
                    group: i as u32,
                    weight,
                    size,
                    source: SourceSpec::Greedy,
                    limit: 1024,
                })
                .collect();
            (flows, seed)
        })
}

/// The largest per-packet lag `d − f` (ps) of the packets that left by
/// `until`, with the departure rows.
fn worst_lag(out: &pktsched_sim::Outcome, until: u64) -> i64 {
    out.departures
        .iter()
        .filter(|d| d.departure <= until)
        .filter_map(|d| d.fluid.map(|f| d.departure as i64 - f as i64))
        .max()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 32,
        rng_seed: proptest::test_runner::RngSeed::Fixed(20_261_127),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// WF2Q+ lags GPS by at most one largest packet, `d − f ≤ L/R`, while
    /// every flow is backlogged. Its `V` then equals GPS's at each choice
    /// (it grows by `l/Σw` per packet sent, the link never idles and every
    /// configured flow is in Σw), so the lemma of the WF2Q+ bound
    /// (`metrics`: `V − F_p ≤ L − l_p` when p is chosen at σ_p) reads
    /// `σ_p − f_p ≤ (L − l_p)/R`, and `d_p = σ_p + l_p/R`. Only packets
    /// that left by `duration` count: after it the greedy flows drain and
    /// stop being backlogged. (200 cases of this generator measured at
    /// most 0.98·L/R when the test was written.) Once flows come and go it
    /// is no bound: see `wf2q_lag_exceeds_one_packet_when_flows_come_and_go`.
    #[test]
    fn wf2q_lags_gps_by_at_most_one_packet_while_every_flow_is_greedy(
        (flows, seed) in greedy_workload()
    ) {
        let l = flows.iter().map(|f| f.size.max()).max().unwrap();
        let c = cfg(Algorithm::Wf2q, flows, seed);
        let out = simulate(&c, Options { departures: true, ..Options::default() }).unwrap();
        // 1 Gbit/s: 8000 ps per byte; 2 ps for the rounding of both systems.
        let bound = i64::from(l) * 8000 + 2;
        let lag = worst_lag(&out, c.duration_ps);
        prop_assert!(lag <= bound, "lag {lag} ps above L/R = {bound} ps");
    }
}

/// Sizes for the QFQ bound with large packets: jumbo and 64 KiB frames
/// next to small ones.
fn big_size() -> impl Strategy<Value = SizeDist> {
    prop_oneof![
        Just(SizeDist::Fixed(64)),
        Just(SizeDist::Fixed(1500)),
        Just(SizeDist::Fixed(9000)),
        Just(SizeDist::Fixed(65536)),
        (1u32..=65536).prop_map(SizeDist::Fixed),
        (64u32..=9000, 9000u32..=65536).prop_map(|(a, b)| SizeDist::Uniform(a, b)),
        Just(SizeDist::Mix(vec![(64, 3), (65536, 1)])),
        Just(SizeDist::Mix(vec![(64, 1), (9000, 1)])),
    ]
}

/// Weights from 1 to QFQ's largest, 65536 (ratios up to 2^16), including
/// ones whose fixed-point inverse is inexact.
fn big_weight() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(1u32),
        1u32..=16,
        Just(100),
        Just(1000),
        Just(65535),
        Just(65536),
        1u32..=65536,
    ]
}

/// Up to 16 flows (so Σw ≤ 2^20, QFQ's limit) in up to 6 kinds of 1 to 4
/// identical flows each: several flows share a group, which exercises QFQ's
/// move back to slot 30 when jumbo frames let a group lag far behind V.
fn big_workload() -> impl Strategy<Value = (Vec<FlowSpec>, u64)> {
    (
        prop::collection::vec((big_weight(), big_size(), source(10, 2), 1usize..=4), 1..=6),
        any::<u64>(),
    )
        .prop_map(|(v, seed)| {
            let mut flows = Vec::new();
            for (g, (weight, size, source, count)) in v.into_iter().enumerate() {
                for _ in 0..count {
                    if flows.len() < 16 {
                        flows.push(FlowSpec {
                            group: g as u32,
                            weight,
                            size: size.clone(),
                            source: source.clone(),
                            limit: 256,
                        });
                    }
                }
            }
            (flows, seed)
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        rng_seed: proptest::test_runner::RngSeed::Fixed(20_260_307),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// QFQ within `(3·σ_k + 2·L)/R` on 10 Gbit/s with jumbo and 64 KiB
    /// frames and weight ratios up to 2^16. (1500 cases of this generator
    /// passed when the bound was introduced, the tightest at 0.997 of its
    /// bound: a weight-65536 64-byte flow behind two 64 KiB frames, pinned
    /// in `tests/qfq_bound.rs`.)
    #[test]
    fn qfq_stays_within_its_bound_with_jumbo_frames((flows, seed) in big_workload()) {
        let mut c = SimConfig::uniform("jumbo", Rate::gbit(10), Algorithm::Qfq, 2_000_000_000, flows);
        c.seed = seed;
        let rep = pktsched_sim::run(&c).unwrap();
        prop_assert!(rep.violations.is_empty(), "{}", rep.table());
        prop_assert!(rep.accounting.conserved, "{}", rep.table());
    }
}

/// The textbook WF2Q+ below shows the same excess over PSPAT's eq. (2) on
/// the jumbo scenarios as QFQ (`tests/qfq_bound.rs`): the wait is a
/// property of WF2Q+-style virtual time (service owed to flows lagging
/// behind `V`), not of QFQ's groups. Its T-WFI is measured against the
/// same configured weights.
#[test]
fn textbook_wf2q_also_exceeds_eq2_with_jumbo_frames() {
    for (name, l) in [("qfq-jumbo.toml", 9000u32), ("qfq-jumbo-64k.toml", 65536)] {
        let p = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/scenarios")
            .join(name);
        let c = pktsched_sim::scenario::load(&p).unwrap();
        let out = pktsched_sim::engine::simulate_with(
            &c,
            Options::default(),
            &mut pktsched_core::FlowSched::<RefWf2q, u32>::new(RefWf2q::default()),
        )
        .unwrap();
        let rep = report::build(&c, &out);
        let m = rep.flows[0].twfi_ns.unwrap();
        let eq2 = pktsched_sim::metrics::qfq_pspat_eq2_ps(1000, 64, 4001, l, c.rate.as_bps()) / 1e3;
        let qfq = pktsched_sim::metrics::qfq_twfi_ps(1000, 64, 4001, l, c.rate.as_bps()) / 1e3;
        println!(
            "{name}: textbook WF2Q+ T-WFI {m:.3} ns, eq. (2) {eq2:.3} ns ({:.3})",
            m / eq2
        );
        assert!(m > eq2, "{name}: {m} vs {eq2}");
        assert!(m <= qfq, "{name}: {m} vs {qfq}");
    }
}

/// Two greedy flows of 1000-byte packets on 1 Gbit/s (8 µs per packet):
/// while both are backlogged GPS gives flow i the rate R·w_i/Σw, so its
/// k-th packet finishes at k·8 µs·Σw/w_i.
fn two_greedy(w: [u32; 2]) {
    let flows = (0..2)
        .map(|i| FlowSpec {
            group: i,
            weight: w[i as usize],
            size: SizeDist::Fixed(1000),
            source: SourceSpec::Greedy,
            limit: 1024,
        })
        .collect();
    let c = cfg(Algorithm::Qfq, flows, 1);
    let out = simulate(
        &c,
        Options {
            departures: true,
            ..Options::default()
        },
    )
    .unwrap();
    let wsum = u64::from(w[0] + w[1]);
    let mut k = [0u64; 2];
    let mut checked = 0;
    for d in &out.departures {
        let f = d.flow as usize;
        k[f] += 1;
        let fluid = d.fluid.unwrap();
        if fluid <= 900_000_000 {
            let exact = k[f] * 8_000_000 * wsum / u64::from(w[f]);
            assert!(
                fluid.abs_diff(exact) <= 1,
                "flow {f} packet {}: {fluid} vs {exact}",
                k[f]
            );
            checked += 1;
        }
    }
    assert!(checked > 100);
    let rep = report::build(&c, &out);
    for (f, fr) in rep.flows.iter().enumerate() {
        let want = f64::from(w[f]) / wsum as f64;
        assert!((fr.share - want).abs() < 0.01, "{}", rep.table());
    }
    assert!(rep.jain > 0.9999);
}

#[test]
fn fluid_two_greedy_flows_equal_weights() {
    two_greedy([1, 1]);
}

#[test]
fn fluid_two_greedy_flows_unequal_weights() {
    two_greedy([1, 3]);
}

/// B-WFI of flow `k` straight from the definition: service counted
/// continuously (bytes leave at rate R during a transmission), every
/// interval inside a backlogged period, O(n²). 1 Gbit/s: 8000 ps per byte.
fn brute_force_bwfi(c: &SimConfig, deps: &[pktsched_sim::engine::Departure], k: u32) -> f64 {
    assert_eq!(c.rate, Rate::gbit(1));
    let wsum: u64 = c.flows.iter().map(|f| u64::from(f.weight)).sum();
    let phi = f64::from(c.flows[k as usize].weight) / wsum as f64;
    let tx: Vec<(u64, u64, u64, u32)> = deps
        .iter()
        .map(|d| {
            (
                d.departure - u64::from(d.len) * 8000,
                d.departure,
                u64::from(d.len),
                d.flow,
            )
        })
        .collect();
    let served = |t: u64, only: Option<u32>| -> f64 {
        tx.iter()
            .filter(|x| only.is_none_or(|f| f == x.3))
            .map(|&(s, d, l, _)| {
                if d <= t {
                    l as f64
                } else if s < t {
                    (t - s) as f64 / 8000.0
                } else {
                    0.0
                }
            })
            .sum()
    };
    let mut periods: Vec<(u64, u64)> = Vec::new();
    for d in deps.iter().filter(|d| d.flow == k) {
        match periods.last_mut() {
            Some(p) if d.arrival <= p.1 => p.1 = p.1.max(d.departure),
            _ => periods.push((d.arrival, d.departure)),
        }
    }
    periods.sort_unstable();
    let mut best: f64 = 0.0;
    for (p0, p1) in periods {
        let mut pts: Vec<u64> = vec![p0, p1];
        pts.extend(
            tx.iter()
                .flat_map(|x| [x.0, x.1])
                .filter(|&t| p0 <= t && t <= p1),
        );
        pts.sort_unstable();
        pts.dedup();
        let mut mn = f64::MAX;
        for t in pts {
            let g = phi * served(t, None) - served(t, Some(k));
            mn = mn.min(g);
            best = best.max(g - mn);
        }
    }
    best
}

/// The worst B-WFI of `rep`, bytes.
fn worst_bwfi(rep: &pktsched_sim::Report) -> f64 {
    rep.groups.iter().map(|g| g.bwfi_bytes).fold(0.0, f64::max)
}

/// The first WF2Q+ counter-example to a one-packet B-WFI: three flows, one
/// of them Poisson, with the seed the property test found.
const WF2Q_POISSON_COUNTEREXAMPLE: &str = r#"
link = "1gbit"
algorithm = "wf2q"
duration = "1ms"
seed = 14896835110339716174
[[flows]]
weight = 1
size = 173
[[flows]]
weight = 1
size = { mix = [[64, 3], [1500, 1]] }
source = { type = "poisson", rate = "41mbit" }
[[flows]]
weight = 11
size = { mix = [[64, 3], [1500, 1]] }
"#;

/// Found by the property test when it checked WF2Q+ against one maximum
/// packet: a flow's B-WFI reaches 1527.6 bytes, above 1500. The
/// brute-force computation above agrees with the engine on this value and
/// a textbook WF2Q+ measures the same
/// (`wf2q_matches_a_textbook_reference_on_the_counterexamples`), so it was
/// the stated bound that did not hold. It is now checked against the bound
/// derived in `metrics` (2·L_k + 2·φ_k·(L − L_k)); the test also keeps
/// showing that one packet is exceeded.
#[test]
fn wf2q_one_packet_bwfi_counterexample() {
    let c = pktsched_sim::scenario::parse(WF2Q_POISSON_COUNTEREXAMPLE, "wf2q.toml", None).unwrap();
    let rep = pktsched_sim::run(&c).unwrap();
    assert!(rep.violations.is_empty(), "{}", rep.table());
    assert!((worst_bwfi(&rep) - 1527.6).abs() < 0.1, "{}", rep.table());
}

/// Second counter-example to the one-packet figure: six greedy flows
/// (weights 1..16, bimodal 64/1500 sizes) reach a B-WFI of 2060.8 bytes
/// (flow 1 is served 89 µs ahead of GPS, then waits for its next packet's
/// virtual finish); the derived bound for that flow is 3000 bytes.
#[test]
fn wf2q_greedy_bimodal_counterexample() {
    let flows = (0..6)
        .map(|i| FlowSpec {
            group: i,
            weight: 1 + i * 3,
            size: SizeDist::Mix(vec![(64, 1), (1500, 1)]),
            source: SourceSpec::Greedy,
            limit: 1024,
        })
        .collect();
    let rep = pktsched_sim::run(&cfg(Algorithm::Wf2q, flows, 5)).unwrap();
    assert!(rep.violations.is_empty(), "{}", rep.table());
    assert!((worst_bwfi(&rep) - 2060.8).abs() < 0.1, "{}", rep.table());
}

/// Regression: found by `qfq_and_drr_stay_within_their_bounds` with another
/// seed. Flow 0 (weight 3, 64-byte CBR at 205 Mbit/s) waited behind two
/// consecutive 1500-byte packets of flow 1 (weight 1, greedy): T-WFI
/// 18.313 us against the bound 15.584 us, because QFQ's virtual time was
/// rounded down by a fraction of a unit and a group due exactly at V was
/// judged ineligible. QFQ now carries the exact remainder of V.
#[test]
fn qfq_twfi_counterexample() {
    let src = r#"
link = "1gbit"
algorithm = "qfq"
duration = "1ms"
seed = 0
[[flows]]
weight = 3
size = 64
source = { type = "cbr", rate = "205mbit" }
[[flows]]
weight = 1
size = { mix = [[64, 3], [1500, 1]] }
"#;
    let c = pktsched_sim::scenario::parse(src, "qfq.toml", None).unwrap();
    let rep = pktsched_sim::run(&c).unwrap();
    assert!(rep.violations.is_empty(), "{}", rep.table());
}

/// Regression: with `drain = false` in PSPAT mode, packets left in the
/// client mailbox (never seen by the scheduler) and packets the arbiter had
/// released (already counted as dequeued) were compared with the wrong
/// scheduler counters, and a valid run was reported as not conserved.
#[test]
fn pspat_without_drain_is_conserved() {
    let src = r#"
link = "1gbit"
algorithm = "qfq"
duration = "100us"
drain = false
[pspat]
arbiter = "30us"
dispatcher = "7us"
[[flows]]
weight = 1
source = { type = "cbr", rate = "900mbit" }
[[flows]]
weight = 1
source = { type = "cbr", rate = "900mbit" }
"#;
    let c = pktsched_sim::scenario::parse(src, "nodrain.toml", None).unwrap();
    let rep = pktsched_sim::run(&c).unwrap();
    assert!(rep.table().contains("; conserved"), "{}", rep.table());
}

/// A textbook WF2Q+ (Bennett & Zhang), written for clarity, not speed:
/// `f64` virtual times, a linear scan per pick. `V` advances by `L / W`
/// per departure (`W` = the weight sum of all flows) and jumps to the
/// smallest start when no flow is eligible; the eligible flow with the
/// smallest finish goes next, ties to the lowest id.
#[derive(Debug, Default)]
struct RefWf2q {
    w: Vec<f64>,
    s: Vec<f64>,
    f: Vec<f64>,
    busy: Vec<bool>,
    wsum: f64,
    v: f64,
    /// Largest packet seen so far.
    lmax: f64,
    /// Largest `(V − F_i)·Σw + l_i − lmax` at a choice (the lemma of the
    /// WF2Q+ bound says it is never above 0); `None` until first computed.
    lemma_excess: Option<f64>,
}

impl pktsched_core::Discipline for RefWf2q {
    fn name(&self) -> &'static str {
        "ref-wf2q+"
    }
    fn limits(&self) -> pktsched_core::Limits {
        pktsched_core::Limits::generic("ref-wf2q+")
    }
    fn add(&mut self, id: pktsched_core::FlowId, cfg: &pktsched_core::FlowConfig) {
        let i = id.0 as usize;
        if self.w.len() <= i {
            self.w.resize(i + 1, 0.0);
            self.s.resize(i + 1, 0.0);
            self.f.resize(i + 1, 0.0);
            self.busy.resize(i + 1, false);
        }
        self.w[i] = f64::from(cfg.weight);
        self.wsum += f64::from(cfg.weight);
    }
    fn remove(&mut self, id: pktsched_core::FlowId, cfg: &pktsched_core::FlowConfig) {
        self.wsum -= f64::from(cfg.weight);
        self.w[id.0 as usize] = 0.0;
    }
    fn activate(&mut self, id: pktsched_core::FlowId, head: u32, _now: pktsched_core::Nanos) {
        let i = id.0 as usize;
        self.s[i] = self.f[i].max(self.v);
        self.f[i] = self.s[i] + f64::from(head) / self.w[i];
        self.busy[i] = true;
    }
    fn deactivate(&mut self, id: pktsched_core::FlowId) {
        self.busy[id.0 as usize] = false;
    }
    fn pick<H: Fn(pktsched_core::FlowId) -> u32>(
        &mut self,
        head: H,
    ) -> Option<pktsched_core::FlowId> {
        if !self.busy.iter().any(|&b| b) {
            return None;
        }
        let min_s = (0..self.w.len())
            .filter(|&i| self.busy[i])
            .map(|i| self.s[i])
            .fold(f64::INFINITY, f64::min);
        self.v = self.v.max(min_s);
        for i in (0..self.w.len()).filter(|&i| self.busy[i]) {
            let l = f64::from(head(pktsched_core::FlowId(i as u32)));
            self.lmax = self.lmax.max(l);
        }
        for i in (0..self.w.len()).filter(|&i| self.busy[i]) {
            let l = f64::from(head(pktsched_core::FlowId(i as u32)));
            let excess = (self.v - self.f[i]) * self.wsum + l - self.lmax;
            self.lemma_excess = Some(self.lemma_excess.map_or(excess, |e| e.max(excess)));
        }
        let mut best: Option<usize> = None;
        for i in 0..self.w.len() {
            if self.busy[i] && self.s[i] <= self.v && best.is_none_or(|b| self.f[i] < self.f[b]) {
                best = Some(i);
            }
        }
        Some(pktsched_core::FlowId(
            best.expect("a backlogged flow is eligible") as u32,
        ))
    }
    fn depart(&mut self, id: pktsched_core::FlowId, len: u32, next: Option<u32>) {
        let i = id.0 as usize;
        self.v += f64::from(len) / self.wsum;
        match next {
            Some(h) => {
                self.s[i] = self.f[i];
                self.f[i] = self.s[i] + f64::from(h) / self.w[i];
            }
            None => self.busy[i] = false,
        }
    }
}

/// Differential check of the WF2Q+ discipline on the two counter-examples
/// below: the textbook implementation measures the same worst B-WFI per
/// group, so the excess over one maximum packet is a property of WF2Q+
/// with this virtual time, not a bug of the O(1) implementation.
#[test]
fn wf2q_matches_a_textbook_reference_on_the_counterexamples() {
    let bimodal = (0..6)
        .map(|i| FlowSpec {
            group: i,
            weight: 1 + i * 3,
            size: SizeDist::Mix(vec![(64, 1), (1500, 1)]),
            source: SourceSpec::Greedy,
            limit: 1024,
        })
        .collect();
    let poisson =
        pktsched_sim::scenario::parse(WF2Q_POISSON_COUNTEREXAMPLE, "wf2q.toml", None).unwrap();
    for c in [cfg(Algorithm::Wf2q, bimodal, 5), poisson] {
        let ours = pktsched_sim::run(&c).unwrap();
        let out = pktsched_sim::engine::simulate_with(
            &c,
            Options::default(),
            &mut pktsched_core::FlowSched::<RefWf2q, u32>::new(RefWf2q::default()),
        )
        .unwrap();
        let refr = report::build(&c, &out);
        for (a, b) in ours.groups.iter().zip(&refr.groups) {
            assert!(
                (a.bwfi_bytes - b.bwfi_bytes).abs() < 1.0,
                "{}: group {}: B-WFI {} (ours) vs {} (reference)",
                c.name,
                a.name,
                a.bwfi_bytes,
                b.bwfi_bytes
            );
        }
        assert!(
            worst_bwfi(&refr) > 1500.0,
            "the reference exceeds one packet too"
        );
    }
}

/// The one-packet lag bound of WF2Q (with GPS's own virtual time) does not
/// hold for WF2Q+ once flows come and go: its `V` grows by `l/Σw` over all
/// configured flows, slower than GPS's while some are idle, and catches
/// up only by jumping to the smallest start. Two Poisson flows and an
/// on-off one (found by the property workload's generator) see a packet
/// leave 6·L/R = 72 µs after its GPS finish; the textbook WF2Q+ above
/// measures the same, so it is a property of WF2Q+, not of the O(1)
/// implementation. (Over 300 cases of `workload()` the largest was
/// 8.45·L/R.)
#[test]
fn wf2q_lag_exceeds_one_packet_when_flows_come_and_go() {
    let specs = [
        (
            7,
            SizeDist::Fixed(1490),
            SourceSpec::Poisson {
                rate: Rate::mbit(580),
            },
        ),
        (
            10,
            SizeDist::Fixed(677),
            SourceSpec::OnOff {
                rate: Rate::mbit(705),
                on_ps: 93_000_000,
                off_ps: 208_000_000,
                exponential: true,
            },
        ),
        (
            1,
            SizeDist::Mix(vec![(64, 3), (1500, 1)]),
            SourceSpec::Poisson {
                rate: Rate::mbit(243),
            },
        ),
    ];
    let flows = specs
        .into_iter()
        .enumerate()
        .map(|(i, (weight, size, source))| FlowSpec {
            group: i as u32,
            weight,
            size,
            source,
            limit: 1024,
        })
        .collect();
    let c = cfg(Algorithm::Wf2q, flows, 12_647_064_169_287_493_066);
    let opt = Options {
        departures: true,
        ..Options::default()
    };
    let ours = simulate(&c, opt).unwrap();
    let textbook = pktsched_sim::engine::simulate_with(
        &c,
        opt,
        &mut pktsched_core::FlowSched::<RefWf2q, u32>::new(RefWf2q::default()),
    )
    .unwrap();
    let one_packet = 1500 * 8000;
    for out in [&ours, &textbook] {
        let lag = worst_lag(out, u64::MAX);
        assert!(lag > 5 * one_packet, "lag {lag} ps, L/R = {one_packet} ps");
    }
    assert_eq!(worst_lag(&ours, u64::MAX), worst_lag(&textbook, u64::MAX));
}

/// `simulate_observed` reports how far the virtual clock got: at the end,
/// exactly where the run ended (past `duration` when it drained).
#[test]
fn progress_ends_where_the_run_ended() {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    let flows = (0..3)
        .map(|i| FlowSpec {
            group: i,
            weight: 1 + i,
            size: SizeDist::Fixed(1500),
            source: SourceSpec::Greedy,
            limit: 1024,
        })
        .collect();
    let c = cfg(Algorithm::Qfq, flows, 1);
    let p = AtomicU64::new(0);
    let out = pktsched_sim::engine::simulate_observed(&c, Options::default(), &p).unwrap();
    assert!(out.end_ps > c.duration_ps, "{}", out.end_ps);
    assert_eq!(p.load(Relaxed), out.end_ps);
}
