//! Eiffel-style microbenchmark of the integer priority queues: enqueue +
//! dequeue throughput vs packets per bucket, for 64, 5k and 10k buckets,
//! every queue side by side in one run.
//!
//! One iteration pushes `buckets × ppb` elements (each bucket `ppb` times,
//! in a fixed shuffled order) into an empty queue and pops them all; the
//! queue is built once, so iterations reuse its arena. Throughput is in
//! elements, i.e. enqueue+dequeue pairs per second.
//!
//! `cargo bench -p pktsched-core --bench pq` (≈ 40 s).

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
    ppb: usize,
    r: &[u64],
) {
    g.bench_with_input(BenchmarkId::new(name, ppb), r, |b, r| {
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

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_millis(300));
    targets = bench
}
criterion_main!(benches);
