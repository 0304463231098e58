#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;

use proptest::prelude::{prop, prop_assert, prop_assert_eq, proptest};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::bound::{bound, largest_b, largest_b_for_target, paper_largest_b};
use super::*;

/// Rings of tagged packets `(class, seq)`; `taken` records the order.
#[derive(Default)]
struct Tagged {
    rings: Vec<VecDeque<(usize, u64)>>,
    taken: Vec<(usize, u64)>,
}

impl Tagged {
    fn new(n: usize) -> Tagged {
        Tagged {
            rings: vec![VecDeque::new(); n],
            taken: Vec::new(),
        }
    }
}

impl Rings for Tagged {
    fn waiting(&self, r: usize) -> usize {
        self.rings[r].len()
    }
    fn take(&mut self, r: usize, max: usize) -> usize {
        let k = self.rings[r].len().min(max);
        self.taken.extend(self.rings[r].drain(..k));
        k
    }
}

#[test]
fn config_errors_name_field_value_and_range() {
    let e = |c: IngressConfig| c.plan().unwrap_err().to_string();
    assert_eq!(e(IngressConfig::sq(0)), "classes = 0: allowed 1..=64");
    assert_eq!(e(IngressConfig::rr(65)), "classes = 65: allowed 1..=64");
    assert_eq!(
        e(IngressConfig::ll_wfq(&[60, 0])),
        "budget of class 1 = 0: allowed 1..=64 (the device budget)"
    );
    assert_eq!(
        e(IngressConfig::ll_wfq(&[65, 4])),
        "budget of class 0 = 65: allowed 1..=64 (the device budget)"
    );
    assert_eq!(
        e(IngressConfig::ll_rr(2, 8).with_device_budget(0)),
        "device_budget = 0: allowed 1..=65536"
    );
    let mut c = IngressConfig::ll_rr(3, 8);
    c.budgets = vec![8, 8, 9];
    assert!(e(c).contains("class 2 has 9, class 0 has 8"));
    let mut c = IngressConfig::sq(2);
    c.budgets = vec![4];
    assert_eq!(
        e(c),
        "sq takes no (they poll with the device budget) budget(s) for 2 classes, got 1"
    );
    let mut c = IngressConfig::ll_wfq(&[60, 4]);
    c.classes = 3;
    assert!(e(c).contains("one per class"));
    assert!(
        "wfq"
            .parse::<Strategy>()
            .unwrap_err()
            .to_string()
            .contains("ll-wfq")
    );
    assert_eq!("LL-RR".parse::<Strategy>(), Ok(Strategy::LlRr));
}

#[test]
fn plans_per_strategy() {
    let p = IngressConfig::sq(4).plan().unwrap();
    assert_eq!((p.rings(), p.budgets(), p.ring_of(3)), (1, &[64][..], 0));
    let p = IngressConfig::rr(3).plan().unwrap();
    assert_eq!(
        (p.budgets(), p.one_ring_per_round(), p.ring_of(2)),
        (&[64, 64, 64][..], true, 2)
    );
    let p = IngressConfig::ll_rr(3, 8).plan().unwrap();
    assert_eq!((p.budgets(), p.others_per_cycle(0)), (&[8, 8, 8][..], 16));
    let p = IngressConfig::ll_wfq(&[60, 4]).plan().unwrap();
    assert_eq!(p.others_per_cycle(0), 4);
}

#[test]
fn rr_polls_one_device_per_round_with_the_full_budget() {
    let mut p = Poller::new(&IngressConfig::rr(2)).unwrap();
    let mut r = Tagged::new(2);
    r.rings[0].extend((0..100).map(|i| (0, i)));
    r.rings[1].extend((0..100).map(|i| (1, i)));
    let mut v = Vec::new();
    assert_eq!(p.poll(&mut r, &mut v), 64);
    assert_eq!(
        v,
        [Take {
            ring: 0,
            quota: 64,
            packets: 64
        }]
    );
    assert_eq!(p.poll(&mut r, &mut v), 64);
    assert_eq!(v[0].ring, 1);
    assert_eq!(p.stats()[0].budget_exhausted, 1);
}

#[test]
fn sq_is_fifo_across_classes() {
    let mut p = Poller::new(&IngressConfig::sq(3)).unwrap();
    let mut r = Tagged::new(1);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut arrived = Vec::new();
    let mut v = Vec::new();
    for seq in 0..1000u64 {
        let class = rng.random_range(0..3);
        r.rings[p.plan().ring_of(class)].push_back((class, seq));
        arrived.push((class, seq));
        if rng.random_ratio(1, 50) {
            p.poll(&mut r, &mut v);
            assert!(v.iter().all(|t| t.ring == 0 && t.packets <= 64));
        }
    }
    while p.poll(&mut r, &mut v) > 0 {}
    assert_eq!(r.taken, arrived);
}

#[test]
fn device_budget_cuts_a_round_and_the_next_resumes_at_the_next_ring() {
    let cfg = IngressConfig::ll_wfq(&[40, 40, 40]).with_device_budget(64);
    let mut p = Poller::new(&cfg).unwrap();
    let mut r = Tagged::new(3);
    for (i, ring) in r.rings.iter_mut().enumerate() {
        ring.extend((0..1000).map(|s| (i, s)));
    }
    let mut v = Vec::new();
    assert_eq!(p.poll(&mut r, &mut v), 64);
    assert_eq!(
        v.iter().map(|t| (t.ring, t.packets)).collect::<Vec<_>>(),
        [(0, 40), (1, 24)]
    );
    p.poll(&mut r, &mut v);
    assert_eq!(v[0].ring, 2);
}

/// Fills rings at random (seeded), polls, and checks budgets.
fn random_run(
    cfg: &IngressConfig,
    seed: u64,
    rounds: usize,
    mut check: impl FnMut(&Poller, &[Take], &Tagged),
) {
    let mut p = Poller::new(cfg).unwrap();
    let n = p.plan().rings();
    let mut r = Tagged::new(n);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut v = Vec::new();
    for _ in 0..rounds {
        for (i, ring) in r.rings.iter_mut().enumerate() {
            let add = if rng.random_ratio(1, 3) {
                rng.random_range(0..200)
            } else {
                0
            };
            ring.extend((0..add).map(|s| (i, s)));
            ring.truncate(4096);
        }
        p.poll(&mut r, &mut v);
        check(&p, &v, &r);
    }
}

proptest! {
    #[test]
    fn budgets_are_respected(seed: u64, budgets in prop::collection::vec(1u32..=64, 1..8), d in 1u32..=128) {
        let budgets: Vec<u32> = budgets.into_iter().map(|b| b.min(d)).collect();
        let cfg = IngressConfig::ll_wfq(&budgets).with_device_budget(d);
        random_run(&cfg, seed, 200, |p, v, _| {
            let total: usize = v.iter().map(|t| t.packets).sum();
            assert!(total <= d as usize);
            assert!(v.len() <= budgets.len());
            for t in v {
                assert!(t.packets <= t.quota && t.quota <= p.plan().budget(t.ring) as usize);
            }
        });
    }

    /// LL-WFQ never starves a ring: under any load, a ring with packets
    /// waiting gets at least min(waiting, budget) within one cycle (one
    /// visit of every ring), and saturated rings share by budget.
    #[test]
    fn ll_wfq_never_starves_be(seed: u64, budgets in prop::collection::vec(1u32..=64, 2..6)) {
        let cfg = IngressConfig::ll_wfq(&budgets).with_device_budget(64);
        let mut p = Poller::new(&cfg).unwrap();
        let n = budgets.len();
        let mut r = Tagged::new(n);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // served[i] = packets of ring i taken since it last had a visit.
        for _ in 0..500 {
            // Random occupancies; ring 0 (RT) overloaded half the time.
            for (i, ring) in r.rings.iter_mut().enumerate() {
                let add = if i == 0 && rng.random_bool(0.5) { 500 } else { rng.random_range(0..40) };
                ring.extend((0..add).map(|s| (i, s)));
                ring.truncate(2048);
            }
            let before: Vec<usize> = r.rings.iter().map(VecDeque::len).collect();
            // One full cycle = n visits (rounds may be cut by the device budget).
            let mut got = vec![0usize; n];
            let mut visits = 0;
            while visits < n {
                if let Step::Visit(t) = p.step(&mut r) {
                    got[t.ring] += t.packets;
                    visits += 1;
                }
            }
            for i in 0..n {
                prop_assert!(got[i] >= before[i].min(1), "ring {i} starved: waiting {} got 0", before[i]);
            }
        }
        let s = p.stats();
        prop_assert!(s.iter().all(|x| x.visits > 0));
    }

    /// An RT packet arriving at an empty RT ring, between visits, is taken
    /// after at most one budget of the other rings (b packets).
    #[test]
    fn rt_into_empty_ring_waits_at_most_one_be_budget(
        seed: u64, budgets in prop::collection::vec(1u32..=16, 2..5), rt in 1u32..=48,
    ) {
        let mut all = vec![rt];
        all.extend(&budgets);
        let cfg = IngressConfig::ll_wfq(&all).with_device_budget(64);
        let mut p = Poller::new(&cfg).unwrap();
        let b = p.plan().others_per_cycle(0) as usize;
        let mut r = Tagged::new(all.len());
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for trial in 0..50u64 {
            for (i, ring) in r.rings.iter_mut().enumerate().skip(1) {
                ring.extend((0..rng.random_range(0..100)).map(|s| (i, s)));
            }
            // Run a random number of visits, then drain RT if needed.
            for _ in 0..rng.random_range(0..10) {
                p.step(&mut r);
            }
            if !r.rings[0].is_empty() {
                continue;
            }
            r.rings[0].push_back((0, u64::MAX - trial));
            r.taken.clear();
            let mut others = 0;
            loop {
                if let Step::Visit(t) = p.step(&mut r) {
                    if t.ring == 0 {
                        break;
                    }
                    others += t.packets;
                }
            }
            prop_assert!(others <= b, "waited {others} > b = {b}");
            prop_assert_eq!(r.taken.last().copied(), Some((0, u64::MAX - trial)));
        }
    }
}

#[test]
fn stats_count_polls_packets_and_exhaustion() {
    let mut p = Poller::new(&IngressConfig::ll_wfq(&[8, 2])).unwrap();
    let mut r = Tagged::new(2);
    r.rings[0].extend((0..5).map(|s| (0, s)));
    r.rings[1].extend((0..5).map(|s| (1, s)));
    let mut v = Vec::new();
    p.poll(&mut r, &mut v);
    p.poll(&mut r, &mut v);
    let s = p.stats();
    assert_eq!(
        (s[0].visits, s[0].polls, s[0].packets, s[0].budget_exhausted),
        (2, 1, 5, 0)
    );
    assert_eq!(
        (s[1].visits, s[1].polls, s[1].packets, s[1].budget_exhausted),
        (2, 2, 4, 2)
    );
    assert_eq!(s[1].packets_per_poll(), 2.0);
    assert_eq!(p.rounds(), 2);
}

#[test]
fn bound_values_and_inverse() {
    let b = bound(4, 1_000_000, 0.3).unwrap();
    assert!((b.wait_ps - 4.3e6 / 0.7).abs() < 1.0);
    assert!((b.paper_wait_ps - 4e6 / 0.7).abs() < 1.0);
    assert!((b.response_ps - b.wait_ps - 1e6).abs() < 1e-6);
    assert_eq!(b.min_rt_budget, 4); // 1 + 0.3·5/0.7 = 3.14 → 4
    assert_eq!(bound(1, 1, 0.0).unwrap().min_rt_budget, 1);
    // m = 8, ρ = 0.3: (b+0.3)/0.7 ≤ 8 → b ≤ 5.3; the published rule 5.6.
    assert_eq!(largest_b(8.0, 0.3), Ok(5));
    assert_eq!(paper_largest_b(8.0, 0.3), Ok(5));
    // m = 4, ρ = 0.5: 1.5 → 1 (the published rule: 2).
    assert_eq!(largest_b(4.0, 0.5), Ok(1));
    assert_eq!(paper_largest_b(4.0, 0.5), Ok(2));
    // Exact boundaries are kept despite rounding: 5.25·0.8 − 0.2 = 4.
    assert_eq!(largest_b(5.25, 0.2), Ok(4));
    assert_eq!(paper_largest_b(10.0, 0.3), Ok(7));
    assert_eq!(largest_b_for_target(20_000_000, 1_000_000, 0.3), Ok(13));
    for m in [2.0, 3.5, 8.0, 100.0] {
        for rho in [0.0, 0.1, 0.3, 0.5, 0.9] {
            if let Ok(b) = largest_b(m, rho) {
                let w = bound(b, 1000, rho).unwrap().wait_ps;
                assert!(
                    w <= m * 1000.0 * (1.0 + 1e-9),
                    "m {m} rho {rho} b {b} w {w}"
                );
                let w1 = bound(b + 1, 1000, rho).unwrap().wait_ps;
                assert!(w1 > m * 1000.0, "b + 1 should miss: m {m} rho {rho}");
            }
        }
    }
}

#[test]
fn bound_edge_cases_are_errors_naming_value_and_range() {
    let msg = |r: Result<Bound, BoundError>| r.unwrap_err().to_string();
    assert_eq!(
        msg(bound(4, 1000, 1.0)),
        "rho_rt = 1: allowed 0 <= rho_rt < 1 (an RT ring loaded to 1 or more has no bound)"
    );
    assert!(msg(bound(4, 1000, -0.1)).contains("rho_rt = -0.1"));
    assert!(msg(bound(4, 1000, f64::NAN)).contains("rho_rt = NaN"));
    assert!(msg(bound(4, 0, 0.5)).contains("x = 0"));
    assert!(msg(bound(0, 1000, 0.5)).contains("b = 0: allowed 1..=4294967296"));
    assert!(
        largest_b(0.0, 0.3)
            .unwrap_err()
            .to_string()
            .contains("m = 0")
    );
    assert!(
        largest_b(f64::INFINITY, 0.3)
            .unwrap_err()
            .to_string()
            .contains("m = inf")
    );
    let e = largest_b(1.5, 0.3).unwrap_err().to_string();
    assert!(e.contains("b = 1 needs m >= 1.857"), "{e}");
    assert!(
        largest_b(8.0, 1.5)
            .unwrap_err()
            .to_string()
            .contains("rho_rt = 1.5")
    );
    assert!(largest_b_for_target(100, 0, 0.3).is_err());
}

#[test]
fn a_device_poll_repeats_rounds_while_rings_have_packets() {
    // RT idle, BE backlogged: one round takes BE's budget only, a device
    // poll takes the device budget in BE-sized visits.
    let mut p = Poller::new(&IngressConfig::ll_wfq(&[60, 4])).unwrap();
    let mut r = Tagged::new(2);
    r.rings[1].extend((0..100).map(|s| (1, s)));
    let mut v = Vec::new();
    assert_eq!(p.poll_device(&mut r, &mut v), 64);
    let be: Vec<usize> = v
        .iter()
        .filter(|t| t.ring == 1)
        .map(|t| t.packets)
        .collect();
    assert_eq!(be, [4; 16]);
    assert_eq!(p.rounds(), 16);
    // 36 left: nine rounds of 4, then a round that finds nothing ends it.
    assert_eq!(p.poll_device(&mut r, &mut v), 36);
    assert_eq!(p.rounds(), 16 + 10);
    assert_eq!(p.poll_device(&mut r, &mut v), 0);
}

#[test]
fn an_rr_device_poll_goes_on_past_an_empty_ring_while_others_have_packets() {
    // RR: a round is one visit. Ring 0 is empty, rings 1 and 2 have 10
    // each: the device poll takes them all and stops after every ring in
    // turn was found empty, not at the first empty one.
    let mut p = Poller::new(&IngressConfig::rr(3)).unwrap();
    let mut r = Tagged::new(3);
    r.rings[1].extend((0..10).map(|s| (1, s)));
    r.rings[2].extend((0..10).map(|s| (2, s)));
    let mut v = Vec::new();
    assert_eq!(p.poll_device(&mut r, &mut v), 20);
    let seen: Vec<(usize, usize)> = v.iter().map(|t| (t.ring, t.packets)).collect();
    assert_eq!(seen, [(0, 0), (1, 10), (2, 10), (0, 0), (1, 0), (2, 0)]);
    // Nothing anywhere: one empty visit per ring, then the poll ends.
    assert_eq!(p.poll_device(&mut r, &mut v), 0);
    assert_eq!(v.len(), 3);
    // Backlogged: the device budget (one ring's budget with RR) ends it.
    r.rings[0].extend((0..100).map(|s| (0, s)));
    r.rings[1].extend((0..100).map(|s| (1, s)));
    let device = p.plan().device_budget() as usize;
    assert_eq!(p.poll_device(&mut r, &mut v), device);
}

#[test]
fn a_device_poll_never_takes_more_than_the_device_budget() {
    // Budgets 40 + 40 over a device budget of 64: the second round is cut
    // to what the device poll has left.
    let cfg = IngressConfig::ll_rr(2, 40).with_device_budget(64);
    let mut p = Poller::new(&cfg).unwrap();
    let mut r = Tagged::new(2);
    r.rings[0].extend((0..30).map(|s| (0, s)));
    r.rings[1].extend((0..1000).map(|s| (1, s)));
    let mut v = Vec::new();
    assert_eq!(p.poll_device(&mut r, &mut v), 64);
    assert_eq!(
        v.iter()
            .map(|t| (t.ring, t.quota, t.packets))
            .collect::<Vec<_>>(),
        [(0, 40, 30), (1, 34, 34)]
    );
    assert_eq!(p.poll_device(&mut r, &mut v), 64);
    assert_eq!(
        v[0],
        Take {
            ring: 0,
            quota: 40,
            packets: 0
        }
    );
}

proptest! {
    /// Device polls keep the budgets and the bound: between two visits of
    /// a ring the others take at most `others_per_cycle`, and a device
    /// poll takes at most the device budget.
    #[test]
    fn device_polls_keep_budgets_and_the_bound(
        seed: u64, budgets in prop::collection::vec(1u32..=32, 2..6), d in 16u32..=128,
    ) {
        let budgets: Vec<u32> = budgets.into_iter().map(|b| b.min(d)).collect();
        let cfg = IngressConfig::ll_wfq(&budgets).with_device_budget(d);
        let mut p = Poller::new(&cfg).unwrap();
        let n = budgets.len();
        let limit: Vec<usize> = (0..n).map(|i| p.plan().others_per_cycle(i) as usize).collect();
        let mut since = vec![0usize; n];
        let mut r = Tagged::new(n);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut v = Vec::new();
        for _ in 0..300 {
            for (i, ring) in r.rings.iter_mut().enumerate() {
                ring.extend((0..rng.random_range(0..60)).map(|s| (i, s)));
            }
            let total = p.poll_device(&mut r, &mut v);
            prop_assert!(total <= d as usize);
            prop_assert_eq!(total, v.iter().map(|t| t.packets).sum::<usize>());
            for t in &v {
                prop_assert!(t.packets <= t.quota && t.quota <= budgets[t.ring] as usize);
                prop_assert!(since[t.ring] <= limit[t.ring], "ring {} waited {} > {}", t.ring, since[t.ring], limit[t.ring]);
                since[t.ring] = 0;
                for (j, s) in since.iter_mut().enumerate() {
                    if j != t.ring {
                        *s += t.packets;
                    }
                }
            }
        }
    }
}
