use super::*;
use crate::{FlowConfig, FlowId, Nanos, Pkt, Rate, Scheduler};

const MTU: u32 = 1500;

fn mltw(g: u64, horizon: Nanos) -> Wheels {
    Wheels::new(WheelConfig::mltw(g, 1024, horizon)).expect("mltw")
}

/// A 1 Gbit/s shaper over `q` with two flows `f` and `g` at 1 Gbit/s.
fn two_gigabit_flows(q: Wheels) -> (Shaper<Wheels, u64>, FlowId, FlowId) {
    let mut sh: Shaper<Wheels, u64> = Shaper::new(q, Rate::gbit(1));
    let f = sh
        .add_flow_bps(FlowConfig::default(), 1_000_000_000)
        .expect("f");
    let g = sh
        .add_flow_bps(FlowConfig::default(), 1_000_000_000)
        .expect("g");
    (sh, f, g)
}

/// Closed loop: `k` packets per flow outstanding, `per_flow` packets each;
/// checks no early release and the lateness bound on every packet.
fn closed_loop<Q: TimeQueue>(
    sh: &mut Shaper<Q, u64>,
    flows: &[FlowId],
    k: u64,
    len: u32,
    per_flow: u64,
) -> Vec<FlowRecord> {
    let mut cl = ClosedLoop::fill(sh, flows, &[], k, len, per_flow).expect("enqueue");
    // `run` checks that time never goes back (`next_ready` ≥ now).
    cl.run(
        sh,
        |sh, p, edt, now| {
            assert!(edt <= now, "early release: edt {edt:?} now {now:?}");
            let bound = sh.lateness_bound(p.flow).expect("flow").0;
            assert!(
                now.0 - edt.0 <= bound,
                "late by {} > {bound}",
                now.0 - edt.0
            );
        },
        || false,
    )
    .expect("closed loop");
    let c = sh.stats();
    assert!(c.conserved());
    assert_eq!(c.dequeued.pkts, per_flow * flows.len() as u64);
    cl.records().to_vec()
}

fn rate_err(r: &FlowRecord, bps: u64) -> f64 {
    r.rate_err(bps).unwrap_or(f64::NAN)
}

#[test]
fn mltw_rates_10kbit_to_100gbit_within_1pct_with_2mtu_bursts() {
    let rates: [u64; 8] = [
        10_000,
        1_000_000,
        37_000_000,
        1_000_000_000,
        7_000_000_000,
        10_000_000_000,
        40_000_000_000,
        100_000_000_000,
    ];
    let mut sh = Shaper::new(mltw(64, Nanos::from_secs(8)), Rate::gbit(1));
    let flows: Vec<FlowId> = rates
        .iter()
        .map(|&r| sh.add_flow_bps(FlowConfig::default(), r).expect("flow"))
        .collect();
    let rec = closed_loop(&mut sh, &flows, 4, MTU, 300);
    for (r, &bps) in rec.iter().zip(&rates) {
        assert!(rate_err(r, bps) < 0.01, "{bps}: err {}", rate_err(r, bps));
        assert!(
            r.max_burst <= 2 * u64::from(MTU),
            "{bps}: burst {}",
            r.max_burst
        );
    }
}

#[test]
fn wheel_and_cffs_rates_within_1pct() {
    let rates = [1_000_000u64, 100_000_000, 10_000_000_000];
    let run = |sh: &mut dyn FnMut(&[u64]) -> Vec<FlowRecord>| {
        for (r, &bps) in sh(&rates).iter().zip(&rates) {
            assert!(rate_err(r, bps) < 0.01, "{bps}: err {}", rate_err(r, bps));
        }
    };
    run(&mut |rates| {
        let q = Wheels::new(WheelConfig::single(64, Nanos::from_millis(64))).expect("wheel");
        let mut sh = Shaper::new(q, Rate::gbit(1));
        let f: Vec<_> = rates
            .iter()
            .map(|&r| sh.add_flow_bps(FlowConfig::default(), r).expect("f"))
            .collect();
        closed_loop(&mut sh, &f, 4, MTU, 300)
    });
    run(&mut |rates| {
        let q = CffsShaper::new(64, Nanos::from_millis(64), 64 << 20).expect("cffs");
        let mut sh = Shaper::new(q, Rate::gbit(1));
        let f: Vec<_> = rates
            .iter()
            .map(|&r| sh.add_flow_bps(FlowConfig::default(), r).expect("f"))
            .collect();
        closed_loop(&mut sh, &f, 4, MTU, 300)
    });
}

#[test]
fn many_flows_1_to_100k() {
    for (n, per_flow) in [(1usize, 400u64), (16, 200), (1000, 120), (100_000, 6)] {
        let mut sh = Shaper::new(mltw(64, Nanos::from_secs(4)), Rate::mbit(1));
        let flows: Vec<FlowId> = (0..n)
            .map(|i| {
                let bps = 1_000_000 * (1 + (i as u64 % 7));
                sh.add_flow_bps(FlowConfig::default(), bps).expect("flow")
            })
            .collect();
        let rec = closed_loop(&mut sh, &flows, 2, MTU, per_flow);
        for (i, r) in rec.iter().enumerate() {
            let bps = 1_000_000 * (1 + (i as u64 % 7));
            // Each release is within one slot (< one packet time) of an
            // exact EDT, so the endpoint error is < 1/(per_flow − 1).
            let tol = if per_flow >= 101 {
                0.01
            } else {
                1.0 / (per_flow - 1) as f64
            };
            assert!(
                rate_err(r, bps) < tol,
                "n={n} flow {i}: {}",
                rate_err(r, bps)
            );
        }
        // Inter-flow batching: far fewer wake-ups than packets.
        if n >= 1000 {
            let s = sh.shape_stats();
            assert!(s.wakeups * 10 < s.released, "{s:?}");
        }
    }
}

/// Open loop with random arrivals: the EDTs depend only on arrivals, so all
/// three structures must release each packet in `[edt, edt + g)`.
#[test]
fn differential_mltw_wheel_cffs() {
    use rand::{Rng, SeedableRng};
    let g = 256u64;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let rates: Vec<u64> = (0..50)
        .map(|_| rng.random_range(1_000_000..20_000_000_000))
        .collect();
    let mut arrivals: Vec<(u64, usize, u32)> = Vec::new();
    let mut t = 0u64;
    for _ in 0..20_000 {
        t += rng.random_range(0..2_000);
        arrivals.push((
            t,
            rng.random_range(0..rates.len()),
            rng.random_range(64..=MTU),
        ));
    }
    fn drive<Q: TimeQueue>(
        q: Q,
        rates: &[u64],
        arr: &[(u64, usize, u32)],
        g_of: impl Fn(&Shaper<Q, u64>, FlowId) -> u64,
    ) -> Vec<(u64, u64)> {
        let mut sh = Shaper::new(q, Rate::gbit(1));
        let f: Vec<_> = rates
            .iter()
            .map(|&r| {
                sh.add_flow_bps(FlowConfig::default().with_limit(1 << 20), r)
                    .expect("f")
            })
            .collect();
        let mut out = vec![(0u64, 0u64); arr.len()];
        let mut i = 0;
        let mut now = Nanos::ZERO;
        loop {
            let na = arr.get(i).map(|a| a.0);
            let nr = sh.next_ready(now).map(|t| t.0);
            let t = match (na, nr) {
                (None, None) => break,
                (Some(a), Some(r)) => a.min(r),
                (Some(a), None) => a,
                (None, Some(r)) => r,
            };
            now = Nanos(t);
            while let Some((p, edt)) = sh.dequeue_edt(now) {
                let g = g_of(&sh, p.flow);
                assert!(edt <= now && now.0 - edt.0 < g.max(1));
                out[p.item as usize] = (edt.0, now.0);
            }
            while i < arr.len() && arr[i].0 == t {
                let (ta, fl, len) = arr[i];
                sh.enqueue(Pkt::new(f[fl], len, Nanos(ta), i as u64), now)
                    .expect("enq");
                i += 1;
            }
        }
        out
    }
    let h = Nanos::from_secs(2);
    let a = drive(
        Wheels::new(WheelConfig::mltw(g, 1024, h)).expect("m"),
        &rates,
        &arrivals,
        |s, f| s.queue().granularity(s.level(f).unwrap_or(0)).0,
    );
    let b = drive(
        Wheels::new(WheelConfig::single(g, Nanos::from_millis(64))).expect("w"),
        &rates,
        &arrivals,
        |_, _| g,
    );
    let c = drive(
        CffsShaper::new(g, Nanos::from_millis(64), 64 << 20).expect("c"),
        &rates,
        &arrivals,
        |_, _| g,
    );
    for i in 0..arrivals.len() {
        // Same EDT everywhere; wheel and cFFS release in the same slot.
        assert_eq!(a[i].0, b[i].0);
        assert_eq!(b[i], c[i], "packet {i}");
        assert_eq!(b[i].1, b[i].0.div_ceil(g) * g);
    }
}

#[test]
fn rate_change_and_removal() {
    let (mut sh, f, g) = two_gigabit_flows(mltw(1, Nanos::from_secs(1)));
    for i in 0..4 {
        sh.enqueue(Pkt::new(f, 125, Nanos::ZERO, i), Nanos::ZERO)
            .expect("e");
        sh.enqueue(Pkt::new(g, 125, Nanos::ZERO, 10 + i), Nanos::ZERO)
            .expect("e");
    }
    sh.set_rate(f, 100_000_000).expect("rate");
    sh.enqueue(Pkt::new(f, 125, Nanos::ZERO, 4), Nanos::ZERO)
        .expect("e");
    assert_eq!(sh.remove_flow(g).expect("rm").len(), 4);
    let mut got = Vec::new();
    let mut now = Nanos::ZERO;
    while let Some(t) = sh.next_ready(now) {
        now = t;
        while let Some((p, edt)) = sh.dequeue_edt(now) {
            got.push((p.item, edt.0, now.0));
        }
    }
    assert_eq!(
        got.iter().map(|x| (x.0, x.1)).collect::<Vec<_>>(),
        vec![(0, 1000), (1, 2000), (2, 3000), (3, 4000), (4, 14_000)]
    );
    assert!(sh.stats().conserved());
}

#[test]
fn bad_configs_are_refused_naming_the_field() {
    let e = Wheels::new(WheelConfig::single(1, Nanos::from_secs(256))).expect_err("huge");
    assert_eq!((e.structure, e.field), ("wheel", "memory"));
    assert!(e.to_string().contains("max_memory"), "{e}");
    let e = CffsShaper::new(1, Nanos::from_secs(256), 64 << 20).expect_err("huge");
    assert_eq!(e.field, "memory");
    let e = Wheels::new(WheelConfig::mltw(3, 1024, Nanos::from_secs(1))).expect_err("g");
    assert_eq!(e.field, "granularity");
    let e = Wheels::new(WheelConfig {
        slots: 1000,
        ..WheelConfig::mltw(1, 1024, Nanos::from_secs(1))
    })
    .expect_err("s");
    assert_eq!(e.field, "slots");
    let m = Wheels::new(WheelConfig::mltw(1, 1024, Nanos::from_secs(256)).max_memory(2 << 20))
        .expect("2 MB mltw");
    assert!(m.memory_bytes() <= 2 << 20);
    let mut sh: Shaper<_, u64> = Shaper::new(mltw(64, Nanos::from_millis(10)), Rate::gbit(1));
    for (bps, what) in [
        (0u64, "zero"),
        (1_000, "slower than the horizon"),
        (400_000_000_000, "faster than the granularity"),
    ] {
        match sh.add_flow_bps(FlowConfig::default(), bps) {
            Err(crate::ConfigError::OutOfRange {
                field,
                value,
                min,
                max,
                ..
            }) => {
                assert_eq!((field, value), ("rate", bps), "{what}");
                assert!(min > 1_000 && max < 400_000_000_000, "{min} {max}");
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    assert!(TokenBucket::new(Rate::mbit(1), 100, 1500).is_err());
}

#[test]
fn token_bucket_baseline() {
    let mut t: Tbf<u32> = Tbf::new(Rate::mbit(12), 3000, 100, 1500).expect("tbf");
    for i in 0..10 {
        t.enqueue(1500, i).expect("e");
    }
    let mut now = Nanos::ZERO;
    let mut times = Vec::new();
    while let Some(n) = t.next_ready(now) {
        now = n;
        while let Some((_, i)) = t.dequeue(now) {
            times.push((i, now.0));
        }
    }
    // Two packets of burst, then one per ms (1500 B at 12 Mbit/s).
    assert_eq!(times[..3], [(0, 0), (1, 0), (2, 1_000_000)]);
    assert_eq!(times[9], (9, 8_000_000));
}

#[test]
fn classifier_and_estimator() {
    let mut c = DestClassifier::new(4);
    for k in 0..4u64 {
        c.insert(k * 1_000_003, FlowId(k as u32)).expect("room");
    }
    assert!(c.insert(99, FlowId(9)).is_err());
    for k in 0..4u64 {
        assert_eq!(c.get(k * 1_000_003), Some(FlowId(k as u32)));
    }
    let mut e = RateEstimator::new(Rate::gbit(20), Nanos::from_millis(1));
    let mut now = 0;
    for _ in 0..50_000 {
        e.observe(1250, Nanos(now));
        now += 10_000; // 1250 B / 10 µs = 1 Gbit/s
    }
    let r = e.rate(Nanos(now)).as_bps();
    assert!((r as i64 - 1_000_000_000).abs() < 10_000_000, "{r}");
}

/// `dequeue_batch` and `dequeue_batch_edt` release exactly what the same
/// number of `dequeue_edt` calls would, with the same counters, whatever
/// the batch sizes (random arrivals, rates, flow removals; seeded).
#[test]
fn batch_release_matches_one_at_a_time() {
    use rand::{Rng, SeedableRng};
    for seed in 0..8u64 {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let make = || {
            let mut sh = Shaper::new(mltw(256, Nanos::from_millis(200)), Rate::mbit(10));
            let flows: Vec<FlowId> = (0..16u64)
                .map(|i| {
                    let bps = 1_000_000 * (1 + i * 37 % 50);
                    sh.add_flow_bps(FlowConfig::default().with_limit(64), bps)
                        .expect("flow")
                })
                .collect();
            (sh, flows)
        };
        let (mut one, flows) = make();
        let (mut many, _) = make();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut now = 0u64;
        for step in 0..3000u64 {
            now += rng.random_range(0..20_000);
            let t = Nanos(now);
            for _ in 0..rng.random_range(0..6) {
                let f = flows[rng.random_range(0..flows.len())];
                let len = rng.random_range(64..=MTU);
                let p = Pkt::new(f, len, t, step);
                let r1 = one.enqueue(p.clone(), t).is_ok();
                assert_eq!(r1, many.enqueue(p, t).is_ok(), "seed {seed} step {step}");
            }
            if step == 1500 {
                let gone = flows[3];
                assert_eq!(one.remove_flow(gone).ok(), many.remove_flow(gone).ok());
            }
            let max = rng.random_range(0..40usize);
            let mut want = Vec::new();
            while want.len() < max {
                let Some(x) = one.dequeue_edt(t) else { break };
                want.push(x);
            }
            let before = b.len();
            let got = if step % 2 == 0 {
                let mut v = Vec::new();
                let n = many.dequeue_batch_edt(t, max, &mut v);
                assert_eq!(n, v.len());
                v
            } else {
                let mut v = Vec::new();
                let n = many.dequeue_batch(t, max, &mut v);
                assert_eq!(n, v.len());
                // Plain batches carry no EDT: compare packets only.
                v.into_iter().zip(&want).map(|(p, w)| (p, w.1)).collect()
            };
            b.extend(got.into_iter().map(|(p, e)| (p.item, p.flow, e)));
            a.extend(want.into_iter().map(|(p, e)| (p.item, p.flow, e)));
            assert_eq!(
                a[before..],
                b[before..],
                "seed {seed} step {step} max {max}"
            );
        }
        assert_eq!(one.shape_stats(), many.shape_stats(), "seed {seed}");
        assert_eq!(one.stats(), many.stats(), "seed {seed}");
        assert!(one.shape_stats().released > 1000, "the workload releases");
    }
}

/// A release whose only entries belong to a removed flow hands out no
/// packet: it is an empty wake-up, not a batch, and the batches count
/// packets, not entries.
#[test]
fn a_release_of_stale_entries_only_is_an_empty_wakeup() {
    let q = Wheels::new(WheelConfig::single(64, Nanos::from_micros(64))).expect("wheel");
    let (mut sh, f, g) = two_gigabit_flows(q);
    // f: EDTs 1000 and 2000 (slots 1024 and 2048); g: 1496 (slot 1536).
    for (flow, len, item) in [(f, 125, 0), (f, 125, 1), (g, 187, 2)] {
        sh.enqueue(Pkt::new(flow, len, Nanos::ZERO, item), Nanos::ZERO)
            .expect("enqueue");
    }
    assert_eq!(sh.remove_flow(g).expect("remove").len(), 1);
    let mut got = Vec::new();
    let mut now = Nanos::ZERO;
    let mut polls = 0;
    while let Some(t) = sh.next_ready(now) {
        now = t;
        polls += 1;
        while let Some(p) = sh.dequeue(now) {
            got.push((p.item, now.0));
        }
    }
    assert_eq!(got, vec![(0, 1024), (1, 2048)]);
    assert_eq!(polls, 3, "woken at 1024, at g's stale slot 1536, at 2048");
    let st = sh.shape_stats();
    assert_eq!((st.wakeups, st.empty_wakeups), (2, 1), "{st:?}");
    assert_eq!((st.batches[0], st.max_batch, st.released), (2, 1, 2));
    assert!(sh.stats().conserved());
}

/// The stale-only release again, but the live flow is removed right after
/// it: the open batch can never hand out a packet, and `shape_stats`
/// counts it as the empty wake-up it was.
#[test]
fn a_stale_only_release_followed_by_an_empty_table_is_counted() {
    let q = Wheels::new(WheelConfig::single(64, Nanos::from_micros(64))).expect("wheel");
    let (mut sh, f, g) = two_gigabit_flows(q);
    // g: EDT 1000 (slot 1024); f: 1496 (slot 1536).
    for (flow, len, item) in [(g, 125, 0), (f, 187, 1)] {
        sh.enqueue(Pkt::new(flow, len, Nanos::ZERO, item), Nanos::ZERO)
            .expect("enqueue");
    }
    assert_eq!(sh.remove_flow(g).expect("remove g").len(), 1);
    let t = sh.next_ready(Nanos::ZERO).expect("g's stale slot");
    assert!(sh.dequeue(t).is_none(), "only g's stale entry was due");
    assert_eq!(sh.remove_flow(f).expect("remove f").len(), 1);
    assert!(sh.dequeue(t).is_none());
    let st = sh.shape_stats();
    assert_eq!((st.wakeups, st.empty_wakeups), (0, 1), "{st:?}");
    assert!(sh.stats().conserved());
}

/// An entry beyond its own wheel's horizon is parked in a coarser wheel
/// (the cold `park` path), comes back to its own wheel when the coarse
/// slot comes, and is released at its EDT, not before.
#[test]
fn mltw_parks_beyond_horizon_and_releases_on_time() {
    let cfg = WheelConfig {
        granularity: 1,
        slots: 4,
        levels: 3,
        max_memory: WheelConfig::DEFAULT_MAX_MEMORY,
    };
    let mut w = Wheels::new(cfg).expect("wheels");
    let e = Entry {
        edt: 10,
        flow: 7,
        generation: 0,
    };
    // Level 0 covers 4 ns and level 1 8 ns: 10 ns is only reached by
    // level 2 (4 ns slots), at the floor slot of time 8.
    w.push(e, 0).expect("within the coarsest horizon");
    assert_eq!((w.overflowed(), w.cascaded()), (1, 0));
    assert_eq!(w.next_due(), Some(Nanos(8)));
    let mut out = VecDeque::new();
    for now in 0..10 {
        assert_eq!(w.release(Nanos(now), &mut out), 0, "early at {now} ns");
    }
    assert_eq!(w.cascaded(), 1);
    assert_eq!(w.release(Nanos(10), &mut out), 1);
    assert_eq!(out.pop_front().map(|e| (e.edt, e.flow)), Some((10, 7)));
    assert_eq!(w.len(), 0);
    // Beyond even the coarsest wheel: refused, nothing kept.
    let far = Entry { edt: 1_000, ..e };
    assert!(w.push(far, 0).is_err());
    assert_eq!(w.len(), 0);
}

/// While an entry is parked, due slots are walked entry by entry: a slot
/// holding the parked entry and entries due at its time gives the due
/// ones, keeps the parked one, and the ready list hands them out in
/// release order; once nothing is parked, whole slot lists join it.
#[test]
fn mltw_ready_list_with_and_without_parked_entries() {
    let cfg = WheelConfig {
        granularity: 1,
        slots: 4,
        levels: 3,
        max_memory: WheelConfig::DEFAULT_MAX_MEMORY,
    };
    let mut w = Wheels::new(cfg).expect("wheels");
    let e = |edt, flow| Entry {
        edt,
        flow,
        generation: 0,
    };
    // Parked at level 2's floor slot of time 8; 7 and 8 merge into the
    // same slot (level 2, time 8).
    w.push(e(10, 1), 0).expect("parked");
    w.push(e(7, 2), 1).expect("filed");
    w.push(e(8, 3), 2).expect("filed");
    assert_eq!(w.overflowed(), 1);
    assert!(!w.release_ready(Nanos(6)));
    assert!(w.release_ready(Nanos(8)), "7 and 8 are due at 8");
    assert!(w.has_ready());
    let got: Vec<u32> = core::iter::from_fn(|| w.pop_ready())
        .map(|x| x.flow)
        .collect();
    assert_eq!(got, vec![2, 3]);
    assert!(!w.has_ready());
    assert_eq!((w.cascaded(), w.len()), (1, 1));
    assert!(w.release_ready(Nanos(10)));
    assert_eq!(w.pop_ready().map(|x| (x.edt, x.flow)), Some((10, 1)));
    // Nothing parked now: a due slot joins the ready list whole, in order.
    for f in 0..3 {
        w.push(e(12, 10 + f), 0).expect("filed");
    }
    assert!(w.release_ready(Nanos(12)));
    let got: Vec<u32> = core::iter::from_fn(|| w.pop_ready())
        .map(|x| x.flow)
        .collect();
    assert_eq!(got, vec![10, 11, 12]);
    assert_eq!(w.len(), 0);
}

/// A packet the flow table refuses after its place in the time queue was
/// reserved leaves no entry behind and does not move the pacer; one the
/// time queue cannot file is refused for the flow's own reason if it has
/// one, else counted as beyond the horizon. MLTW and cFFS alike.
#[test]
fn refused_packets_leave_no_entry_and_keep_the_pacer() {
    fn check<Q: TimeQueue>(q: Q) {
        let mut sh: Shaper<Q, u64> = Shaper::new(q, Rate::gbit(1));
        let f = sh
            .add_flow_bps(FlowConfig::default().with_limit(2), 1_000_000_000)
            .expect("flow");
        let t = Nanos::ZERO;
        for i in 0..2 {
            sh.enqueue(Pkt::new(f, 125, t, i), t).expect("queued");
        }
        let full = sh.enqueue(Pkt::new(f, 125, t, 2), t).expect_err("limit");
        assert_eq!(full.reason, crate::DropReason::QueueFull);
        let big = sh.enqueue(Pkt::new(f, 9000, t, 3), t).expect_err("max_len");
        assert_eq!(big.reason, crate::DropReason::TooLarge);
        assert_eq!(sh.queue().len(), 2, "{}: refused packets filed", sh.name());
        assert_eq!(sh.shape_stats().beyond_horizon, 0);
        // The two queued packets leave at 1 and 2 µs: the refused ones did
        // not advance the flow's clock.
        let mut got = Vec::new();
        let mut now = Nanos::ZERO;
        while let Some(n) = sh.next_ready(now) {
            now = n;
            while let Some((p, edt)) = sh.dequeue_edt(now) {
                got.push((p.item, edt.0));
            }
        }
        assert_eq!(got, vec![(0, 1000), (1, 2000)], "{}", sh.name());
        // A flow that queues far beyond the horizon is refused there.
        let g = sh
            .add_flow_bps(FlowConfig::default().with_limit(1 << 20), 1_000_000_000)
            .expect("flow");
        let mut queued = 0u64;
        let refused = loop {
            match sh.enqueue(Pkt::new(g, 1500, now, queued), now) {
                Ok(()) => queued += 1,
                Err(r) => break r,
            }
            assert!(queued < 1 << 20, "{}: never refused", sh.name());
        };
        assert_eq!(refused.reason, crate::DropReason::QueueFull);
        assert_eq!(sh.shape_stats().beyond_horizon, 1, "{}", sh.name());
        assert_eq!(sh.queue().len() as u64, queued);
        let c = sh.stats();
        assert_eq!(c.backlog.pkts, queued);
        assert!(c.conserved());
        // The refused packet left the flow's clock where it was: once all but ten of
        // the packets have left, the next one is spaced one gap (12 µs at
        // 1 Gbit/s) after the last accepted one, not two.
        let later = Nanos(now.0 + (queued - 10) * 12_000);
        while sh.dequeue_edt(later).is_some() {}
        sh.enqueue(Pkt::new(g, 1500, later, queued), later)
            .expect("fits once packets have left");
        let mut edts = Vec::new();
        let mut t = later;
        while let Some(n) = sh.next_ready(t) {
            t = n;
            while let Some((_, edt)) = sh.dequeue_edt(t) {
                edts.push(edt.0);
            }
        }
        let [.., before, last] = edts[..] else {
            panic!("{}: fewer than two packets left", sh.name());
        };
        assert_eq!(last - before, 12_000, "{}", sh.name());
    }
    check(mltw(64, Nanos::from_millis(1)));
    check(CffsShaper::new(64, Nanos::from_millis(1), 64 << 20).expect("cffs"));
}

/// `release_each` hands out what repeated `dequeue_edt` calls would, in the
/// same order with the same EDTs and statistics, lets its callback enqueue,
/// and stops at the callback's first error with that packet counted.
#[test]
fn release_each_matches_repeated_dequeue_edt() {
    let build = || {
        let (mut sh, f, g) = two_gigabit_flows(mltw(64, Nanos(1 << 24)));
        for i in 0..40u64 {
            let flow = if i % 3 == 0 { g } else { f };
            sh.enqueue(
                Pkt::new(flow, 100 + (i as u32 % 7) * 200, Nanos(0), i),
                Nanos(0),
            )
            .expect("enqueue");
        }
        sh
    };
    let (mut a, mut b) = (build(), build());
    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    let mut now = Nanos(0);
    while let Some(t) = a.next_ready(now) {
        now = t;
        while let Some((p, edt)) = a.dequeue_edt(now) {
            got_a.push((p.item, edt, now));
        }
        let n = b
            .release_each(now, |_, p, edt| {
                got_b.push((p.item, edt, now));
                Ok::<(), ()>(())
            })
            .expect("no error");
        assert_eq!(
            b.next_ready(now),
            a.next_ready(now),
            "at {now:?} ({n} released)"
        );
    }
    assert_eq!(got_a.len(), 40);
    assert_eq!(got_a, got_b);
    assert_eq!(a.shape_stats(), b.shape_stats());

    // The callback may enqueue; its error ends the loop at that packet.
    let mut c = build();
    let t = c.next_ready(Nanos(0)).expect("due");
    let mut seen = 0;
    let r = c.release_each(t, |sh, p, _| {
        seen += 1;
        sh.enqueue(Pkt::new(p.flow, p.len, t, p.item + 100), t)
            .map_err(|_| "refused")?;
        if seen == 2 { Err("stop") } else { Ok(()) }
    });
    assert_eq!(r, Err("stop"));
    assert_eq!(seen, 2);
    assert_eq!(c.shape_stats().released, 2);
    assert_eq!(c.stats().backlog.pkts, 40);
}

/// The released count is the flow table's departures: packets handed out
/// by `dequeue_batch` and `dequeue` count, those of a flow removed with
/// packets still queued do not, and the batches add up to it.
#[test]
fn released_counts_departures_not_removals() {
    let (mut sh, f, g) = two_gigabit_flows(mltw(1, Nanos::from_secs(1)));
    for i in 0..3 {
        for flow in [f, g] {
            sh.enqueue(Pkt::new(flow, MTU, Nanos::ZERO, i), Nanos::ZERO)
                .expect("enqueue");
        }
    }
    // f and g are due at 12, 24 and 36 µs, on the wheel of 8192 ns slots
    // (their `max_len` packet takes 12 112 ns): released at 16 384, 24 576
    // and 40 960 ns, two packets in the first batch.
    let mut now = sh.next_ready(Nanos::ZERO).expect("queued");
    let mut out = Vec::new();
    assert_eq!(sh.dequeue_batch(now, 8, &mut out), 2);
    assert_eq!(sh.shape_stats().released, 2);
    assert_eq!(sh.remove_flow(g).expect("remove g").len(), 2);
    assert_eq!(sh.shape_stats().released, 2, "a removal is no release");
    let mut late = 0;
    while let Some(t) = sh.next_ready(now) {
        now = t;
        while sh.dequeue(now).is_some() {
            late += 1;
        }
    }
    assert_eq!(late, 2, "f's two later packets");
    let st = sh.shape_stats();
    assert_eq!(st.released, 4);
    assert_eq!(st.released, sh.stats().dequeued.pkts);
    let in_batches: u64 = (0..16).map(|i| st.batches[i] << i).sum();
    assert_eq!((st.wakeups, in_batches), (3, 4), "{st:?}");
}
