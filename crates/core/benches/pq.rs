//! Eiffel-style microbenchmark of the integer priority queues: enqueue +
//! dequeue throughput vs packets per bucket, for 64, 5k and 10k buckets,
//! every queue side by side in one run.
//!
//! One iteration pushes `buckets × ppb` elements (each bucket `ppb` times,
//! in a fixed shuffled order) into an empty queue and pops them all; the
//! queue is built once, so iterations reuse its arena. Throughput is in
//! elements, i.e. enqueue+dequeue pairs per second.
//!
//! A second group, `pq/occupancy`, sweeps the fraction of the 10k buckets
//! that hold an element (one each) for the gradient queues (exact and
//! approximate) next to Cffs, HierFfs and the std heap, and prints how
//! often the approximate queues' raw estimate missed the first bucket
//! (what Eiffel's approximate queue, which does not search, would have
//! served out of order) and the children probed per pop.
//!
//! `cargo bench -p pktsched-core --bench pq` (≈ 60 s).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pktsched_core::pq::{
    BinaryHeapPq, BucketConfig, BucketHeap, Cffs, Ffs, Gradient, HierFfs, IntPq,
};
use rand::SeedableRng;
use rand::seq::SliceRandom;

fn ranks(buckets: usize, ppb: usize) -> Vec<u64> {
    let mut r: Vec<u64> = (0..buckets as u64)
        .flat_map(|b| std::iter::repeat_n(b, ppb))
        .collect();
    r.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(42));
    r
}

fn fill_drain<Q: IntPq<u32>>(q: &mut Q, ranks: &[u64]) -> u64 {
    for (i, &r) in ranks.iter().enumerate() {
        q.push(r, i as u32).expect("rank in range");
    }
    let mut sum = 0u64;
    while let Some((r, v)) = q.pop_min() {
        sum = sum.wrapping_add(r ^ v as u64);
    }
    sum
}

/// Plain `std` heap on (rank, seq) with no handles: the floor for heaps.
fn std_heap(h: &mut BinaryHeap<Reverse<(u64, u64, u32)>>, ranks: &[u64]) -> u64 {
    for (i, &r) in ranks.iter().enumerate() {
        h.push(Reverse((r, i as u64, i as u32)));
    }
    let mut sum = 0u64;
    while let Some(Reverse((r, _, v))) = h.pop() {
        sum = sum.wrapping_add(r ^ v as u64);
    }
    sum
}

fn run<Q: IntPq<u32>>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    mut q: Q,
    param: impl std::fmt::Display,
    r: &[u64],
) {
    g.bench_with_input(BenchmarkId::new(name, param), r, |b, r| {
        b.iter(|| black_box(fill_drain(&mut q, r)))
    });
}

fn bench(c: &mut Criterion) {
    for buckets in [64usize, 5000, 10_000] {
        let mut g = c.benchmark_group(format!("pq/{buckets}_buckets"));
        for ppb in [1usize, 4, 16] {
            let r = ranks(buckets, ppb);
            g.throughput(Throughput::Elements(r.len() as u64));
            let cfg = BucketConfig::new(buckets).capacity(r.len());
            if buckets <= 64 {
                run(&mut g, "Ffs", Ffs::new(cfg).expect("cfg"), ppb, &r);
            }
            run(&mut g, "HierFfs", HierFfs::new(cfg).expect("cfg"), ppb, &r);
            run(&mut g, "Cffs", Cffs::new(cfg).expect("cfg"), ppb, &r);
            run(
                &mut g,
                "Gradient",
                Gradient::exact(cfg).expect("cfg"),
                ppb,
                &r,
            );
            let approx = Gradient::approximate(cfg, 1.5).expect("cfg");
            run(&mut g, "GradientA1.5", approx, ppb, &r);
            run(
                &mut g,
                "BucketHeap",
                BucketHeap::new(cfg).expect("cfg"),
                ppb,
                &r,
            );
            run(&mut g, "BinaryHeapPq", BinaryHeapPq::new(r.len()), ppb, &r);
            let mut h = BinaryHeap::with_capacity(r.len());
            g.bench_with_input(BenchmarkId::new("StdBinaryHeap", ppb), &r, |b, r| {
                b.iter(|| black_box(std_heap(&mut h, r)))
            });
        }
        g.finish();
    }
}

/// One element in each of `occ × buckets` distinct random buckets, in a
/// shuffled order.
fn occupied(buckets: usize, occ: f64) -> Vec<u64> {
    let mut all: Vec<u64> = (0..buckets as u64).collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    all.shuffle(&mut rng);
    all.truncate(((buckets as f64 * occ).round() as usize).max(1));
    all
}

fn occupancy(c: &mut Criterion) {
    let buckets = 10_000;
    let mut g = c.benchmark_group("pq/occupancy");
    for occ in [0.01, 0.05, 0.25, 0.5, 1.0] {
        let r = occupied(buckets, occ);
        g.throughput(Throughput::Elements(r.len() as u64));
        let cfg = BucketConfig::new(buckets).capacity(r.len());
        let pct = format!("{}%", occ * 100.0);
        for alpha in [1.5, 1.1] {
            let mut q = Gradient::approximate(cfg, alpha).expect("cfg");
            fill_drain(&mut q, &r);
            let s = q.search_stats();
            eprintln!(
                "occupancy {pct:>4}: Gradient α={alpha}: estimate missed {:.2} % of pops \
                 (mean error {:.2} buckets), {:.2} children probed per pop",
                100.0 * s.misses as f64 / s.pops as f64,
                s.bucket_error as f64 / s.pops as f64,
                s.probes as f64 / s.pops as f64
            );
        }
        let exact = Gradient::exact(cfg).expect("cfg");
        run(&mut g, "Gradient", exact, &pct, &r);
        let a15 = Gradient::approximate(cfg, 1.5).expect("cfg");
        run(&mut g, "GradientA1.5", a15, &pct, &r);
        let a11 = Gradient::approximate(cfg, 1.1).expect("cfg");
        run(&mut g, "GradientA1.1", a11, &pct, &r);
        run(&mut g, "Cffs", Cffs::new(cfg).expect("cfg"), &pct, &r);
        run(&mut g, "HierFfs", HierFfs::new(cfg).expect("cfg"), &pct, &r);
        let mut h = BinaryHeap::with_capacity(r.len());
        g.bench_with_input(BenchmarkId::new("StdBinaryHeap", &pct), &r, |b, r| {
            b.iter(|| black_box(std_heap(&mut h, r)))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_millis(300));
    targets = bench, occupancy
}
criterion_main!(benches);
