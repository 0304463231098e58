//! The tree against the reference on seeded random workloads (built-ins,
//! a mixed tree with rates, automatic queue growth), pFabric re-ranking,
//! and counters across remove/change while queued.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::reference::{Workload, differential, small};
use super::*;
use crate::flow::{FlowConfig, FlowId, Pkt};
use crate::sched::Scheduler;
use crate::units::Nanos;

#[test]
fn builtins_match_reference() {
    // 12 flows keep every automatic node in its SmallPq; 40 make the
    // nodes over flows move to their bucketed queue mid-run.
    for flows in [12, 40] {
        for (name, _) in BUILTINS {
            let p = Policy::builtin(name).expect(name);
            let mut w = small(flows);
            if name == "prio" {
                w.prios = 8;
            }
            if name == "hclock" || name == "hpfq" {
                w.gap = 20_000;
            }
            for seed in 0..3 {
                differential(&p, &w, seed + flows as u64);
            }
        }
    }
}

/// An automatic node that outgrows its SmallPq serves in exactly the order
/// of the same node with its bucketed queue chosen up front.
#[test]
fn automatic_queue_growth_keeps_the_order() {
    let auto = Policy::from_toml("[[node]]\nname = \"r\"\nkind = \"wfq\"\n").expect("auto");
    let fixed = Policy::from_toml("[[node]]\nname = \"r\"\nkind = \"wfq\"\nqueue = \"cffs\"\n")
        .expect("cffs");
    let mut a: PolicySched<u64> = PolicySched::new(&auto);
    let mut b: PolicySched<u64> = PolicySched::new(&fixed);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for _ in 0..40 {
        let w = rng.random_range(1..8);
        a.add_flow(FlowConfig::weight(w)).expect("flow");
        b.add_flow(FlowConfig::weight(w)).expect("flow");
    }
    assert_eq!(a.queue_of(0), Some(QueueKind::Small));
    let mut out = (Vec::new(), Vec::new());
    for i in 0..4000u64 {
        if rng.random_bool(0.55) {
            let f = FlowId(rng.random_range(0..40));
            let len = rng.random_range(64..1500);
            let _ = a.enqueue(Pkt::new(f, len, Nanos(i), i), Nanos(i));
            let _ = b.enqueue(Pkt::new(f, len, Nanos(i), i), Nanos(i));
        } else {
            out.0.push(a.dequeue(Nanos(i)).map(|p| p.item));
            out.1.push(b.dequeue(Nanos(i)).map(|p| p.item));
        }
    }
    assert_eq!(out.0, out.1);
    assert!(out.0.iter().flatten().count() > 1000);
    assert_eq!(a.queue_of(0), Some(QueueKind::Cffs), "the node grew");
    assert_eq!(b.queue_of(0), Some(QueueKind::Cffs));
    assert_eq!(a.policy_stats().node_spilled, 0);
}

const DEEP: &str = r#"
[policy]
shaper_unit_ns = 1000
shaper_buckets = 4096
max_len = 1500

[[node]]
name = "root"
kind = "prio"
levels = 2

[[node]]
name = "a"
parent = "root"
kind = "wfq"
prio = 1

[[node]]
name = "b"
parent = "root"
kind = "hclock"
prio = 0
rate = "80mbit"

[[node]]
name = "a1"
parent = "a"
kind = "pfabric"
unit = 64
weight = 3
rate = "40mbit"

[[node]]
name = "a2"
parent = "a"
kind = "edf"
queue = "heap"
flow_deadline_ns = 50000
flow_rate = "20mbit"

[[node]]
name = "b1"
parent = "b"
kind = "rr"
reservation = "10mbit"
rate = "60mbit"

[[node]]
name = "b2"
parent = "b"
kind = "lstf"
link_rate = "1gbit"
flow_slack_ns = 30000
weight = 5
"#;

#[test]
fn mixed_tree_with_rates_matches_reference() {
    let p = Policy::from_toml(DEEP).expect("policy");
    assert_eq!(p.depth(), 3);
    for seed in 0..4 {
        let w = Workload {
            flows: 16,
            steps: 5000,
            gap: 30_000,
            weights: true,
            prios: 1,
        };
        differential(&p, &w, 100 + seed);
    }
}

#[test]
fn pfabric_serves_shortest_remaining_and_reranks() {
    let p = Policy::builtin("pfabric").expect("pfabric");
    let mut s: PolicySched<u64> = PolicySched::new(&p);
    let a = s.add_flow(FlowConfig::default()).expect("a");
    let b = s.add_flow(FlowConfig::default()).expect("b");
    let t = Nanos::ZERO;
    for i in 0..3 {
        s.enqueue(Pkt::new(a, 1000, t, i), t).expect("a");
    }
    s.enqueue(Pkt::new(b, 1000, t, 10), t).expect("b");
    s.enqueue(Pkt::new(b, 1000, t, 11), t).expect("b");
    // b has less remaining: it goes first, then a.
    assert_eq!(s.dequeue(t).map(|p| p.item), Some(10));
    // On-enqueue re-ranking: b grows past a.
    for i in 12..16 {
        s.enqueue(Pkt::new(b, 1000, t, i), t).expect("b");
    }
    assert_eq!(s.dequeue(t).map(|p| p.item), Some(0));
    // Declared sizes: remaining = size − sent.
    s.set_flow_params(
        a,
        FlowParams {
            size: Some(1_000_000),
            ..FlowParams::default()
        },
        t,
    )
    .expect("params");
    assert_eq!(s.dequeue(t).map(|p| p.flow), Some(b));
}

#[test]
fn remove_and_change_while_queued_keep_counters() {
    let p = Policy::from_toml(DEEP).expect("policy");
    let mut s: PolicySched<u64> = PolicySched::new(&p);
    let ids: Vec<FlowId> = (0..8)
        .map(|_| {
            s.add_flow(FlowConfig::default().with_max_len(1500))
                .expect("flow")
        })
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut now = 0;
    for i in 0..2000u64 {
        now += rng.random_range(0..5000);
        let f = ids[rng.random_range(0..ids.len())];
        match rng.random_range(0..10) {
            0 if s.flow_config(f).is_some() => {
                let got = s.remove_flow(f).expect("remove");
                assert!(got.iter().all(|p| p.flow == f));
            }
            1 if s.flow_config(f).is_some() => {
                let cfg = FlowConfig::weight(rng.random_range(1..5)).with_max_len(1500);
                s.change_flow(f, cfg, Nanos(now)).expect("change");
            }
            2..=5 => {
                let _ = s.enqueue(Pkt::new(f, 500, Nanos(now), i), Nanos(now));
            }
            _ => {
                s.dequeue(Nanos(now));
            }
        }
        let c = s.stats();
        assert!(c.conserved());
        let queued: usize = s
            .flow_ids()
            .iter()
            .filter_map(|&f| s.flows().queued(f))
            .sum();
        assert_eq!(queued as u64, c.backlog.pkts);
    }
    while let Some(t) = s.next_ready(Nanos(now)) {
        now = t.0;
        if s.dequeue(Nanos(now)).is_none() {
            assert!(s.next_ready(Nanos(now)).is_none_or(|t| t.0 > now));
        }
    }
    assert_eq!(s.backlog().pkts, 0);
}
