//! The ingress polling model: the RT bound holds under its assumptions,
//! accounting is exact, runs are deterministic, bad parameters are errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pktsched_core::ingress::{IngressConfig, Strategy};
use pktsched_sim::ingress::{Arrivals, ClassLoad, IngressOutcome, IngressSim, sweep};
use proptest::prelude::{prop, prop_assert, proptest};

fn class(load: f64, arrivals: Arrivals) -> ClassLoad {
    ClassLoad {
        load,
        arrivals,
        ring: 256,
    }
}

/// LL-WFQ with RT budget `rt` and the given BE budgets; RT periodic at
/// `rho`, BE Poisson splitting `be_load`.
fn llwfq(
    rt: u32,
    be: &[u32],
    x_ps: u64,
    rho: f64,
    be_load: f64,
    jitter: f64,
    seed: u64,
) -> IngressSim {
    let mut budgets = vec![rt];
    budgets.extend(be);
    let device = budgets.iter().sum::<u32>().max(1);
    // The RT ring holds two RT budgets at least: the bound assumes every
    // RT visit empties a ring that never overflowed (a cycle brings up to
    // one RT budget of arrivals).
    let mut classes = vec![ClassLoad {
        ring: (2 * rt as usize).max(256),
        ..class(rho, Arrivals::Periodic)
    }];
    classes.extend(
        be.iter()
            .map(|_| class(be_load / be.len() as f64, Arrivals::Poisson)),
    );
    IngressSim {
        poller: IngressConfig::ll_wfq(&budgets).with_device_budget(device),
        x_ps,
        jitter,
        classes,
        packets: 20_000,
        seed,
    }
}

fn conserved(o: &IngressOutcome) {
    for c in &o.classes {
        assert_eq!(c.arrivals, c.served + c.dropped, "class {}", c.class);
    }
    let taken: u64 = o.rings.iter().map(|r| r.packets).sum();
    assert_eq!(taken, o.classes.iter().map(|c| c.served).sum::<u64>());
}

proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(48))]

    /// Under the bound's assumptions (periodic RT, RT budget at least the
    /// bound's minimum, budgets within the device budget) no simulated RT
    /// packet exceeds (b+ρ)x/(1−ρ) + x, whatever the BE load.
    #[test]
    fn rt_latency_never_exceeds_the_bound(
        x_ns in 50u64..5_000,
        rho in 0.01f64..0.9,
        be in prop::collection::vec(1u32..=16, 1..=3),
        be_load in 0.3f64..3.0,
        jitter in prop::sample::select(vec![0.0, 0.2, 0.5]),
        seed: u64,
    ) {
        let x_ps = x_ns * 1000;
        let b: u64 = be.iter().map(|&v| u64::from(v)).sum();
        let min_rt = pktsched_core::ingress::bound::bound(b, x_ps, rho).unwrap().min_rt_budget;
        let sim = llwfq(min_rt as u32, &be, x_ps, rho, be_load, jitter, seed);
        let o = sim.run().unwrap();
        conserved(&o);
        let bd = o.bound.clone().unwrap();
        prop_assert!(bd.assumptions_hold);
        prop_assert!(o.classes[0].dropped == 0, "RT dropped {}", o.classes[0].dropped);
        let slack = 100.0 + bd.response_ps * 1e-9;
        prop_assert!(
            bd.rt_max_ps as f64 <= bd.response_ps + slack,
            "RT max {} ps > bound {} ps (b {b}, rho {rho}, x {x_ps})", bd.rt_max_ps, bd.response_ps
        );
    }
}

/// On a grid of (ρ, b) with BE overloading the poller, the worst RT
/// latency stays within the bound and comes close to it (the bound is
/// not vacuous); the ratio to the published form b·x/(1−ρ) + x is
/// printed.
#[test]
fn the_bound_is_met_and_nearly_reached() {
    let x = 1_000_000;
    let (mut worst, mut worst_published) = (0.0f64, 0.0f64);
    for rho in [0.05, 0.3, 0.6, 0.85] {
        for be in [1u32, 4, 16] {
            let bd = pktsched_core::ingress::bound::bound(u64::from(be), x, rho).unwrap();
            for seed in 0..4 {
                let o = llwfq(bd.min_rt_budget as u32, &[be], x, rho, 2.0, 0.0, seed)
                    .run()
                    .unwrap();
                let b = o.bound.clone().unwrap();
                assert!(b.assumptions_hold);
                let m = b.rt_max_ps as f64;
                assert!(
                    m <= b.response_ps + 100.0,
                    "rho {rho} b {be}: {m} > {}",
                    b.response_ps
                );
                worst = worst.max(m / b.response_ps);
                worst_published = worst_published.max(m / (bd.paper_wait_ps + x as f64));
            }
        }
    }
    eprintln!("worst RT max / bound = {worst:.4}; / published form = {worst_published:.4}");
    assert!(worst > 0.8, "worst RT max is only {worst:.3} of the bound");
}

/// An RT budget below the minimum breaks the bound at high RT load.
#[test]
fn a_small_rt_budget_breaks_the_bound() {
    let o = llwfq(1, &[8], 1_000_000, 0.8, 2.0, 0.0, 3).run().unwrap();
    let b = o.bound.unwrap();
    assert!(!b.assumptions_hold);
    assert!(
        b.rt_max_ps as f64 > b.response_ps,
        "{} <= {}",
        b.rt_max_ps,
        b.response_ps
    );
}

#[test]
fn same_seed_same_outcome_and_exact_accounting() {
    let a = llwfq(60, &[4], 1_000_000, 0.3, 1.5, 0.3, 9).run().unwrap();
    let b = llwfq(60, &[4], 1_000_000, 0.3, 1.5, 0.3, 9).run().unwrap();
    assert_eq!(a, b);
    conserved(&a);
    // BE offered 1.5 with 0.3 of RT: the poller is overloaded, BE drops.
    assert!(a.classes[1].loss > 0.2, "BE loss {}", a.classes[1].loss);
    assert_eq!(a.classes[0].dropped, 0);
    let c = llwfq(60, &[4], 1_000_000, 0.3, 1.5, 0.3, 10).run().unwrap();
    assert_ne!(a, c);
}

/// With BE overloading the poller, SQ makes RT wait behind the full
/// shared ring; LL-WFQ keeps RT within the bound; RR within one device
/// budget cycle.
#[test]
fn strategies_order_rt_latency_under_overload() {
    let x = 1_000_000;
    let rt_p99 = |cfg: IngressConfig| {
        let sim = IngressSim {
            poller: cfg,
            x_ps: x,
            jitter: 0.0,
            classes: vec![class(0.3, Arrivals::Poisson), class(1.2, Arrivals::Poisson)],
            packets: 50_000,
            seed: 1,
        };
        let o = sim.run().unwrap();
        conserved(&o);
        o.classes[0].p99_ps
    };
    let sq = rt_p99(IngressConfig::sq(2));
    let rr = rt_p99(IngressConfig::rr(2));
    let wfq = rt_p99(IngressConfig::ll_wfq(&[60, 4]));
    // SQ: ~the shared ring (512) ahead of RT.
    assert!(sq > 300 * x, "sq {sq}");
    assert!(rr < sq && rr > wfq, "rr {rr} sq {sq} wfq {wfq}");
    assert!(wfq < 20 * x, "wfq {wfq}");
}

#[test]
fn bad_parameters_are_errors_naming_the_value() {
    let base = llwfq(60, &[4], 1000, 0.3, 1.0, 0.0, 1);
    let err = |s: IngressSim| s.run().unwrap_err().to_string();
    assert_eq!(
        err(IngressSim {
            x_ps: 0,
            ..base.clone()
        }),
        "x = 0: allowed a positive duration"
    );
    assert!(
        err(IngressSim {
            jitter: 1.0,
            ..base.clone()
        })
        .contains("jitter = 1: allowed 0 <= jitter < 1")
    );
    assert!(
        err(IngressSim {
            packets: 0,
            ..base.clone()
        })
        .contains("packets = 0")
    );
    let mut s = base.clone();
    s.classes[1].load = -1.0;
    assert!(err(s).contains("load of class 1 = -1"));
    let mut s = base.clone();
    s.classes[0].ring = 0;
    assert!(err(s).contains("ring of class 0 = 0"));
    let mut s = base.clone();
    s.classes.pop();
    assert!(err(s).contains("classes = 1: allowed 2"));
    let s = IngressSim {
        poller: IngressConfig::ll_wfq(&[0, 4]),
        ..base
    };
    assert!(err(s).contains("budget of class 0 = 0"));
}

#[test]
fn sweep_covers_every_strategy_and_load() {
    let pts = sweep(1_000_000, &[0.5, 1.5], 0.3, 5_000, 128, 1).unwrap();
    assert_eq!(pts.len(), 4 * 2 * 2);
    for st in Strategy::ALL {
        let be_hi = pts
            .iter()
            .find(|p| p.strategy == st.name() && p.load == 1.5 && p.class == 1)
            .unwrap();
        assert!(be_hi.loss > 0.0, "{st}: BE should lose at load 1.5");
    }
    let rt = |s: &str| {
        pts.iter()
            .find(|p| p.strategy == s && p.load == 1.5 && p.class == 0)
            .unwrap()
            .p99_us
    };
    assert!(rt("ll-wfq") < rt("sq"));
    assert!(sweep(1000, &[0.5], 1.0, 10, 8, 1).is_err());
}

/// Poisson RT arrivals do not fit the bound's envelope (A1): bursts make
/// RT packets queue behind each other, and the bound is passed.
#[test]
fn poisson_rt_arrivals_can_pass_the_bound() {
    let mut sim = llwfq(16, &[4], 1_000_000, 0.5, 2.0, 0.0, 5);
    sim.classes[0].arrivals = Arrivals::Poisson;
    let o = sim.run().unwrap();
    let b = o.bound.unwrap();
    assert!(!b.assumptions_hold);
    assert!(
        b.rt_max_ps as f64 > b.response_ps,
        "{} <= {}",
        b.rt_max_ps,
        b.response_ps
    );
}
