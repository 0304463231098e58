//! The complete departure sequence of every algorithm (and a few policy
//! trees) on seeded random workloads, reduced to a digest and compared with
//! the committed table in `departures_unchanged.digests`.
//!
//! A workload mixes bursts of enqueues (to live, removed and never-added
//! flows, with lengths above `max_len` and queues at their limits) and
//! bursts of dequeues with live adds, changes (weight, quantum, limit,
//! `max_len`, priority) and removals. Every observable outcome enters the
//! digest in order: each departure (flow, length, item), each refusal
//! (reason, item), each removal's returned items, each configuration
//! result, and at the end the scheduler-wide and per-flow counters. A
//! change to the hot path that alters any of it fails here.
//!
//! The same workloads run a second time through `enqueue_batch` and
//! `dequeue_batch` must give the same digests: batching changes no outcome.
//!
//! To record a new table on purpose (a deliberate change of behaviour):
//! `PKTSCHED_BLESS_DEPARTURES=1 cargo test -p pktsched-core --test
//! departures_unchanged`, then review the diff.
#![allow(clippy::unwrap_used)]

use pktsched_core::policy::{Policy, PolicySched};
use pktsched_core::sched::{Drr, FlowSched, Prio};
use pktsched_core::{Algorithm, DropReason, FlowConfig, FlowId, Nanos, Pkt, Scheduler};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SEEDS: u64 = 6;
const TABLE: &str = "tests/departures_unchanged.digests";

/// FNV-1a over 64-bit words.
struct Digest(u64);

impl Digest {
    fn new() -> Digest {
        Digest(0xcbf2_9ce4_8422_2325)
    }
    fn word(&mut self, w: u64) {
        for b in w.to_le_bytes() {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// What a run saw, besides the digest (so the test can insist the
/// workload really exercised each path).
#[derive(Default, Debug)]
struct Seen {
    departures: u64,
    refused: [u64; 4],
    removed_pkts: u64,
    changes: u64,
}

/// The schedulers under test, by name.
fn names() -> Vec<&'static str> {
    vec![
        "fifo",
        "prio",
        "rr",
        "drr",
        "wf2q",
        "qfq",
        "drr-q300",
        "prio-3",
        "fifo-total64",
        "drr-total64",
        "policy:wfq",
        "policy:prio",
        "policy:hpfq",
    ]
}

fn build(name: &str) -> Box<dyn Scheduler<u64>> {
    if let Some(p) = name.strip_prefix("policy:") {
        return Box::new(PolicySched::<u64>::new(&Policy::builtin(p).unwrap()));
    }
    match name {
        "drr-q300" => Box::new(FlowSched::<_, u64>::new(Drr::new(300))),
        "prio-3" => Box::new(FlowSched::<_, u64>::new(Prio::new(3))),
        "fifo-total64" => Box::new(
            FlowSched::<_, u64>::new(pktsched_core::sched::Fifo::new()).with_total_limit(64),
        ),
        "drr-total64" => Box::new(FlowSched::<_, u64>::new(Drr::new(1514)).with_total_limit(64)),
        n => Algorithm::parse(n).unwrap().build(),
    }
}

fn random_config(rng: &mut ChaCha8Rng, levels: u32) -> FlowConfig {
    FlowConfig {
        weight: rng.random_range(1..=64),
        quantum: rng.random_bool(0.25).then(|| rng.random_range(64..=3000)),
        max_len: if rng.random_bool(0.2) {
            rng.random_range(64..=1514)
        } else {
            1514
        },
        limit: rng.random_range(1..=48),
        prio: rng.random_range(0..levels),
    }
}

fn reason_index(r: DropReason) -> usize {
    DropReason::ALL.iter().position(|&x| x == r).unwrap()
}

/// How packets are handed in and taken out.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Calls {
    /// `enqueue` and `dequeue`, one packet each.
    Single,
    /// `enqueue_batch` and `dequeue_batch`, one burst each.
    Batch,
}

/// Offers a burst, recording each refusal.
fn offer(
    s: &mut dyn Scheduler<u64>,
    burst: Vec<Pkt<u64>>,
    calls: Calls,
    now: Nanos,
    d: &mut Digest,
    seen: &mut Seen,
) {
    let mut refused = |item: u64, r: DropReason| {
        d.word(2);
        d.word(reason_index(r) as u64);
        d.word(item);
        seen.refused[reason_index(r)] += 1;
    };
    match calls {
        Calls::Single => {
            for p in burst {
                let item = p.item;
                if let Err(r) = s.enqueue(p, now) {
                    assert_eq!(r.pkt.item, item, "the refused packet comes back");
                    refused(item, r.reason);
                }
            }
        }
        Calls::Batch => {
            let (mut q, mut rest) = (burst, Vec::new());
            while let Err(r) = s.enqueue_batch(&mut q, &mut rest, now) {
                refused(r.pkt.item, r.reason);
                assert!(q.is_empty(), "the batch is taken whole");
                std::mem::swap(&mut q, &mut rest);
            }
            assert!(q.is_empty() && rest.is_empty());
        }
    }
}

/// Takes up to `k` packets, recording each departure and, if `note_none`,
/// each `None`.
fn take(
    s: &mut dyn Scheduler<u64>,
    k: usize,
    note_none: bool,
    calls: Calls,
    now: Nanos,
    d: &mut Digest,
    seen: &mut Seen,
) -> usize {
    match calls {
        Calls::Single => {
            let mut got = 0;
            for _ in 0..k {
                match s.dequeue(now) {
                    Some(p) => {
                        depart(d, seen, &p);
                        got += 1;
                    }
                    None if note_none => d.word(9),
                    None => {}
                }
            }
            got
        }
        Calls::Batch => {
            let mut out = Vec::new();
            let got = s.dequeue_batch(now, k, &mut out);
            assert_eq!(got, out.len());
            for p in &out {
                depart(d, seen, p);
            }
            for _ in got..k {
                if note_none {
                    d.word(9);
                }
            }
            got
        }
    }
}

/// Drives one seeded workload through `s`, feeding every outcome to `d`.
fn run(s: &mut dyn Scheduler<u64>, seed: u64, calls: Calls, d: &mut Digest, seen: &mut Seen) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let levels = s.limits().levels.min(8) as u32;
    let mut now = Nanos::ZERO;
    let mut item = 0u64;
    let mut ids: Vec<FlowId> = Vec::new();
    let initial = if seed % 3 == 2 {
        300
    } else {
        rng.random_range(1..=40)
    };
    for _ in 0..initial {
        if let Ok(f) = s.add_flow(random_config(&mut rng, levels)) {
            ids.push(f);
        }
    }
    for _ in 0..4000 {
        now = Nanos(now.0 + rng.random_range(0..2000));
        let span = ids.iter().map(|f| f.0).max().unwrap_or(0) + 3;
        match rng.random_range(0..1000) {
            0..=459 => {
                let mut burst = Vec::new();
                for _ in 0..rng.random_range(1..=16) {
                    let flow = if rng.random_bool(0.97) && !ids.is_empty() {
                        ids[rng.random_range(0..ids.len())]
                    } else {
                        FlowId(rng.random_range(0..span))
                    };
                    let len = if rng.random_bool(0.03) {
                        rng.random_range(1515..=2000)
                    } else {
                        rng.random_range(40..=1514)
                    };
                    item += 1;
                    burst.push(Pkt::new(flow, len, now, item));
                }
                offer(s, burst, calls, now, d, seen);
            }
            460..=959 => {
                let k = rng.random_range(1..=16);
                take(s, k, true, calls, now, d, seen);
            }
            960..=979 => {
                if ids.is_empty() {
                    continue;
                }
                let f = ids[rng.random_range(0..ids.len())];
                let r = s.change_flow(f, random_config(&mut rng, levels), now);
                d.word(4);
                d.word(u64::from(r.is_ok()));
                seen.changes += u64::from(r.is_ok());
            }
            980..=989 => {
                if ids.is_empty() {
                    continue;
                }
                let f = ids.swap_remove(rng.random_range(0..ids.len()));
                let pkts = s.remove_flow(f).unwrap();
                d.word(3);
                d.word(u64::from(f.0));
                d.word(pkts.len() as u64);
                for p in &pkts {
                    d.word(p.item);
                }
                seen.removed_pkts += pkts.len() as u64;
            }
            _ => {
                let r = s.add_flow(random_config(&mut rng, levels));
                d.word(5);
                match r {
                    Ok(f) => {
                        d.word(u64::from(f.0));
                        ids.push(f);
                    }
                    Err(_) => d.word(u64::MAX),
                }
            }
        }
    }
    // Drain (a shaped tree needs the clock to move on).
    for _ in 0..1_000_000 {
        if s.backlog().pkts == 0 {
            break;
        }
        if take(s, 64, false, calls, now, d, seen) == 0 {
            now = s.next_ready(now).unwrap_or(Nanos(now.0 + 1000)).max(now);
        }
    }
    assert_eq!(s.backlog().pkts, 0, "drained");
    let st = s.stats();
    assert!(st.conserved());
    for c in [st.enqueued, st.dequeued, st.backlog] {
        d.word(c.pkts);
        d.word(c.bytes);
    }
    for r in DropReason::ALL {
        d.word(st.dropped(r).pkts);
        d.word(st.dropped(r).bytes);
    }
    for f in s.flow_ids() {
        let fs = s.flow_stats(f).unwrap();
        assert!(fs.conserved());
        d.word(u64::from(f.0));
        d.word(fs.enqueued.pkts);
        d.word(fs.dequeued.bytes);
        for r in DropReason::ALL {
            d.word(fs.dropped(r).pkts);
        }
    }
}

fn depart(d: &mut Digest, seen: &mut Seen, p: &Pkt<u64>) {
    d.word(1);
    d.word(u64::from(p.flow.0));
    d.word(u64::from(p.len));
    d.word(p.item);
    seen.departures += 1;
}

/// `name seed digest` lines for every scheduler and seed.
fn table(calls: Calls) -> (String, Seen) {
    let mut out = String::new();
    let mut seen = Seen::default();
    for name in names() {
        for seed in 0..SEEDS {
            let mut s = build(name);
            let mut d = Digest::new();
            run(s.as_mut(), seed, calls, &mut d, &mut seen);
            out.push_str(&format!("{name} {seed} {:016x}\n", d.0));
        }
    }
    (out, seen)
}

#[test]
fn departures_match_the_committed_digests() {
    let (got, seen) = table(Calls::Single);
    // The workload reaches every path it is meant to check.
    assert!(seen.departures > 100_000, "{seen:?}");
    // (`Removed` is never a refusal: it counts packets already accepted.)
    assert!(seen.refused[..3].iter().all(|&n| n > 0), "{seen:?}");
    assert!(seen.removed_pkts > 0 && seen.changes > 0, "{seen:?}");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(TABLE);
    if std::env::var_os("PKTSCHED_BLESS_DEPARTURES").is_some() {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap();
    let diff: Vec<String> = want
        .lines()
        .zip(got.lines())
        .filter(|(w, g)| w != g)
        .map(|(w, g)| format!("want {w}\n got {g}"))
        .collect();
    assert!(
        diff.is_empty() && want.lines().count() == got.lines().count(),
        "departure sequences changed:\n{}",
        diff.join("\n")
    );
}

#[test]
fn batch_calls_give_the_same_departures() {
    let (single, _) = table(Calls::Single);
    let (batch, _) = table(Calls::Batch);
    for (a, b) in single.lines().zip(batch.lines()) {
        assert_eq!(a, b, "one at a time vs in batches");
    }
}
