//! Criterion benchmarks: every algorithm in the dummynet-style closed loop at
//! 1, 64, 4096 and 32768 flows and on the QFQ paper's weighted mix.
//! One iteration = 1000 loop steps ≈ 500 enqueue+dequeue pairs.
//!
//! Run: `cargo bench -p pktsched-core --bench sched`. The figures recorded in
//! BENCHMARKS.md come from `pktsched bench sched`, which runs algorithms side
//! by side in one process; this bench is for regressions.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pktsched_core::Scheduler;
use pktsched_core::harness::{Harness, NoSched, QBound, parse_flowsets};
use pktsched_core::sched::{Drr, Fifo, FlowSched, Prio, Qfq, Rr, Wf2q};

const SETS: [(&str, &str); 5] = [
    ("1", "1::1"),
    ("64", "1::64"),
    ("4096", "1::4096"),
    ("32768", "1::32768"),
    ("mix", "1::32768,2::4096,4::2048,8::1024,128::16,1024::1"),
];

fn one<S: Scheduler<u64>>(c: &mut Criterion, alg: &str, mk: impl Fn() -> S) {
    let mut g = c.benchmark_group(alg);
    g.sample_size(20);
    g.warm_up_time(std::time::Duration::from_millis(300));
    g.measurement_time(std::time::Duration::from_secs(1));
    g.throughput(Throughput::Elements(500));
    for (name, fs) in SETS {
        let fs = parse_flowsets(fs).expect("flowset");
        let mut h =
            Harness::new(mk(), &fs, QBound::PerFlow(4), QBound::PerFlow(30)).expect("harness");
        // Reach steady state (backlog between qmin and qmax) before timing.
        h.run(70 * fs.iter().map(|f| u64::from(f.flows)).sum::<u64>());
        g.bench_with_input(BenchmarkId::from_parameter(name), &(), |b, _| {
            b.iter(|| h.run(1000))
        });
    }
    g.finish();
}

fn benches(c: &mut Criterion) {
    one(c, "none", NoSched::default);
    one(c, "fifo", || FlowSched::new(Fifo::new()));
    one(c, "prio", || FlowSched::new(Prio::new(8)));
    one(c, "rr", || FlowSched::new(Rr::new()));
    one(c, "drr", || FlowSched::new(Drr::new(1000)));
    one(c, "wf2q", || FlowSched::new(Wf2q::new()));
    one(c, "qfq", || FlowSched::new(Qfq::new()));
}

criterion_group!(sched, benches);
criterion_main!(sched);
