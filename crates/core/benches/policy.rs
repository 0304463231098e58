//! Policy trees in the dummynet-style closed loop (`harness.rs`), side by
//! side in one run:
//!
//! - `tree/*`: flat QFQ vs a flat `wfq` policy vs a depth-3 `wfq` tree
//!   (root → 4 → 16 leaves, flows round robin over the leaves);
//! - `pfabric/*`: pFabric with its children in a Cffs, a HierFfs or a
//!   binary heap, vs the number of flows.
//!
//! One iteration = 1000 loop steps ≈ 500 enqueue+dequeue pairs.
//! `cargo bench -p pktsched-core --bench policy` (≈ 1 min).

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pktsched_core::Scheduler;
use pktsched_core::harness::{Harness, QBound, parse_flowsets};
use pktsched_core::policy::{Policy, PolicySched};
use pktsched_core::sched::{FlowSched, Qfq};

fn tree3() -> Policy {
    let mut s = String::from("[[node]]\nname = \"root\"\nkind = \"wfq\"\n");
    for i in 0..4 {
        s += &format!("[[node]]\nname = \"c{i}\"\nparent = \"root\"\nkind = \"wfq\"\n");
        for j in 0..4 {
            s += &format!("[[node]]\nname = \"c{i}.{j}\"\nparent = \"c{i}\"\nkind = \"wfq\"\n");
        }
    }
    Policy::from_toml(&s).expect("tree")
}

fn flat(kind: &str, queue: &str) -> Policy {
    Policy::from_toml(&format!(
        "[[node]]\nname = \"root\"\nkind = \"{kind}\"\nqueue = \"{queue}\"\nunit = 64\n"
    ))
    .or_else(|_| {
        Policy::from_toml(&format!(
            "[[node]]\nname = \"root\"\nkind = \"{kind}\"\nqueue = \"{queue}\"\n"
        ))
    })
    .expect("flat")
}

fn one<S: Scheduler<u64>>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    flows: u32,
    s: S,
) {
    let fs = parse_flowsets(&format!("1::{flows}")).expect("flowset");
    let mut h = Harness::new(s, &fs, QBound::PerFlow(4), QBound::PerFlow(30)).expect("harness");
    h.run(70 * u64::from(flows));
    g.bench_with_input(BenchmarkId::new(name, flows), &(), |b, _| {
        b.iter(|| h.run(1000))
    });
}

fn benches(c: &mut Criterion) {
    let t3 = tree3();
    assert_eq!(t3.depth(), 3);
    let wfq = flat("wfq", "cffs");
    let mut g = c.benchmark_group("tree");
    g.throughput(Throughput::Elements(500));
    for flows in [64u32, 1024, 16384] {
        one(&mut g, "qfq", flows, FlowSched::<_, u64>::new(Qfq::new()));
        one(
            &mut g,
            "policy-wfq-flat",
            flows,
            PolicySched::<u64>::new(&wfq),
        );
        one(
            &mut g,
            "policy-wfq-depth3",
            flows,
            PolicySched::<u64>::new(&t3),
        );
    }
    g.finish();
    let mut g = c.benchmark_group("pfabric");
    g.throughput(Throughput::Elements(500));
    let (pc, ph, pb) = (
        flat("pfabric", "cffs"),
        flat("pfabric", "hffs"),
        flat("pfabric", "heap"),
    );
    for flows in [1024u32, 2048, 4096, 8192, 16384, 32768, 65536, 262_144] {
        one(&mut g, "cffs", flows, PolicySched::<u64>::new(&pc));
        one(&mut g, "hffs", flows, PolicySched::<u64>::new(&ph));
        one(&mut g, "heap", flows, PolicySched::<u64>::new(&pb));
    }
    g.finish();
}

criterion_group! {
    name = policy;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_millis(600));
    targets = benches
}
criterion_main!(policy);
