//! Differential tests of every queue against a `BTreeMap` ordered on
//! `(key, seq)`, plus parameter, level-count, handle and memory tests.

use super::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, HashMap};

type Contents = BTreeMap<(u64, u64), (Rank, u64)>;

/// The reference's notion of a queue's key for a rank (bucket, clamping,
/// range movement), written independently of the queues.
trait RefKey {
    /// The key `rank` gets now, or the error the queue must return.
    fn key(&mut self, rank: Rank, contents: &Contents) -> Result<u64, PqError>;
    /// Called before the reference pops (a Cffs may swap halves).
    fn before_pop(&mut self, _contents: &Contents) {}
    fn stats(&self) -> PqStats;
}

/// `(rank, seq)`: the BinaryHeap ordering.
struct Exact;

impl RefKey for Exact {
    fn key(&mut self, rank: Rank, _: &Contents) -> Result<u64, PqError> {
        Ok(rank)
    }
    fn stats(&self) -> PqStats {
        PqStats::default()
    }
}

/// A fixed range of buckets.
struct Fixed {
    cfg: BucketConfig,
    stats: PqStats,
}

impl RefKey for Fixed {
    fn key(&mut self, rank: Rank, _: &Contents) -> Result<u64, PqError> {
        let c = &self.cfg;
        let max = c.min_rank + c.buckets as u64 * c.granularity - 1;
        let err = PqError::OutOfRange {
            rank,
            min: c.min_rank,
            max,
        };
        if rank < c.min_rank {
            match c.below {
                OutOfRange::Clamp => {
                    self.stats.clamped_below += 1;
                    Ok(0)
                }
                OutOfRange::Reject => {
                    self.stats.rejected_below += 1;
                    Err(err)
                }
            }
        } else if rank > max {
            match c.above {
                OutOfRange::Clamp => {
                    self.stats.clamped_above += 1;
                    Ok(c.buckets as u64 - 1)
                }
                OutOfRange::Reject => {
                    self.stats.rejected_above += 1;
                    Err(err)
                }
            }
        } else {
            Ok((rank - c.min_rank) / c.granularity)
        }
    }
    fn stats(&self) -> PqStats {
        self.stats
    }
}

/// The moving range of a Cffs: keys are absolute buckets `rank / g`.
struct Circular {
    base: u64,
    n: u64,
    g: u64,
    below: OutOfRange,
    above: OutOfRange,
    stats: PqStats,
}

impl Circular {
    fn new(cfg: BucketConfig) -> Circular {
        Circular {
            base: cfg.min_rank / cfg.granularity,
            n: cfg.buckets as u64,
            g: cfg.granularity,
            below: cfg.below,
            above: cfg.above,
            stats: PqStats::default(),
        }
    }
    fn primary_empty(&self, contents: &Contents) -> bool {
        contents
            .keys()
            .next()
            .is_none_or(|&(k, _)| k >= self.base + self.n)
    }
    fn err(&self, rank: Rank) -> PqError {
        PqError::OutOfRange {
            rank,
            min: self.base * self.g,
            max: (self.base + 2 * self.n) * self.g - 1,
        }
    }
}

impl RefKey for Circular {
    fn key(&mut self, rank: Rank, contents: &Contents) -> Result<u64, PqError> {
        let abs = rank / self.g;
        if abs < self.base {
            return match self.below {
                OutOfRange::Clamp => {
                    self.stats.clamped_below += 1;
                    Ok(self.base)
                }
                OutOfRange::Reject => {
                    self.stats.rejected_below += 1;
                    Err(self.err(rank))
                }
            };
        }
        if abs >= self.base + 2 * self.n && self.primary_empty(contents) {
            if contents.is_empty() {
                self.base += (abs - self.base) / self.n * self.n;
            } else {
                self.base += self.n;
            }
        }
        if abs >= self.base + 2 * self.n {
            return match self.above {
                OutOfRange::Clamp => {
                    self.stats.clamped_above += 1;
                    Ok(self.base + 2 * self.n - 1)
                }
                OutOfRange::Reject => {
                    self.stats.rejected_above += 1;
                    Err(self.err(rank))
                }
            };
        }
        Ok(abs)
    }
    fn before_pop(&mut self, contents: &Contents) {
        if !contents.is_empty() && self.primary_empty(contents) {
            self.base += self.n;
        }
    }
    fn stats(&self) -> PqStats {
        self.stats
    }
}

/// Runs `ops` random operations on `q` and the reference and compares
/// every result. `rank` draws a rank given the last popped rank.
fn differential(
    q: &mut dyn IntPq<u64>,
    r: &mut dyn RefKey,
    seed: u64,
    ops: usize,
    rank: &mut dyn FnMut(&mut ChaCha8Rng, Rank) -> Rank,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut contents = Contents::new();
    let mut live: Vec<(Handle, u64, (u64, u64))> = Vec::new();
    let mut pos: HashMap<u64, usize> = HashMap::new();
    let mut dead: Vec<Handle> = Vec::new();
    let (mut seq, mut next_val, mut last) = (0u64, 0u64, 0u64);
    let forget = |live: &mut Vec<(Handle, u64, (u64, u64))>,
                  pos: &mut HashMap<u64, usize>,
                  val: u64|
     -> (Handle, (u64, u64)) {
        let i = pos.remove(&val).expect("value is live");
        let (h, _, key) = live.swap_remove(i);
        if i < live.len() {
            pos.insert(live[i].1, i);
        }
        (h, key)
    };
    for step in 0..ops {
        let op = rng.random_range(0..100);
        if op < 50 {
            let rk = rank(&mut rng, last);
            let val = next_val;
            next_val += 1;
            let expect = r.key(rk, &contents);
            match (q.push(rk, val), expect) {
                (Ok(h), Ok(key)) => {
                    contents.insert((key, seq), (rk, val));
                    pos.insert(val, live.len());
                    live.push((h, val, (key, seq)));
                    seq += 1;
                }
                (Err(e), Err(want)) => {
                    assert_eq!(e.error, want, "step {step}");
                    assert_eq!(e.value, val, "the value must come back");
                }
                (got, want) => panic!("step {step}: push({rk}) = {got:?}, expected {want:?}"),
            }
        } else if op < 80 {
            r.before_pop(&contents);
            let want = contents.pop_first().map(|(_, v)| v);
            let got = q.pop_min();
            assert_eq!(got, want, "step {step}: pop");
            if let Some((rk, val)) = got {
                last = rk;
                let (h, _) = forget(&mut live, &mut pos, val);
                dead.push(h);
            }
        } else if op < 95 {
            if live.is_empty() {
                continue;
            }
            let i = rng.random_range(0..live.len());
            let val = live[i].1;
            let (h, key) = forget(&mut live, &mut pos, val);
            contents.remove(&key);
            assert_eq!(q.remove(h), Some(val), "step {step}: remove");
            dead.push(h);
        } else if !dead.is_empty() {
            let h = dead[rng.random_range(0..dead.len())];
            assert_eq!(q.remove(h), None, "step {step}: stale handle");
        }
        if dead.len() > 1000 {
            dead.drain(..500);
        }
        assert_eq!(q.len(), contents.len(), "step {step}: len");
        assert_eq!(
            q.peek_min_rank(),
            contents.first_key_value().map(|(_, &(rk, _))| rk),
            "step {step}: peek"
        );
    }
    loop {
        r.before_pop(&contents);
        let want = contents.pop_first().map(|(_, v)| v);
        let got = q.pop_min();
        assert_eq!(got, want, "drain");
        if got.is_none() {
            break;
        }
    }
    assert_eq!(q.stats(), r.stats());
}

const POLICIES: [(OutOfRange, OutOfRange); 4] = [
    (OutOfRange::Clamp, OutOfRange::Reject),
    (OutOfRange::Reject, OutOfRange::Clamp),
    (OutOfRange::Clamp, OutOfRange::Clamp),
    (OutOfRange::Reject, OutOfRange::Reject),
];

fn fixed_queues(cfg: BucketConfig) -> Vec<(&'static str, Box<dyn IntPq<u64>>)> {
    let mut v: Vec<(&'static str, Box<dyn IntPq<u64>>)> = Vec::new();
    if cfg.buckets <= 64 {
        v.push(("Ffs", Box::new(Ffs::new(cfg).unwrap())));
    }
    v.push(("HierFfs", Box::new(HierFfs::new(cfg).unwrap())));
    v.push(("Gradient", Box::new(Gradient::exact(cfg).unwrap())));
    v.push((
        "Gradient α=1.5",
        Box::new(Gradient::approximate(cfg, 1.5).unwrap()),
    ));
    v.push((
        "Gradient α=1.1",
        Box::new(Gradient::approximate(cfg, 1.1).unwrap()),
    ));
    v.push(("BucketHeap", Box::new(BucketHeap::new(cfg).unwrap())));
    v
}

#[test]
fn fixed_range_queues_match_reference() {
    let mut seed = 0;
    for buckets in [1usize, 2, 7, 58, 59, 64, 65, 300, 3365, 5000] {
        for g in [1u64, 3, 8] {
            for (below, above) in POLICIES {
                let min_rank = if seed % 2 == 0 { 0 } else { 1000 };
                let cfg = BucketConfig::new(buckets)
                    .granularity(g)
                    .min_rank(min_rank)
                    .policy(below, above);
                let span = buckets as u64 * g;
                for (name, mut q) in fixed_queues(cfg) {
                    seed += 1;
                    let mut r = Fixed {
                        cfg,
                        stats: PqStats::default(),
                    };
                    // Mostly in range, ~10% below or beyond; few distinct
                    // ranks sometimes, to exercise FIFO ties.
                    let mut rank = |rng: &mut ChaCha8Rng, _| {
                        let lo = min_rank.saturating_sub(span / 10 + 2);
                        let hi = min_rank + span + span / 10 + 2;
                        if rng.random_bool(0.3) {
                            min_rank + rng.random_range(0..span.min(4))
                        } else {
                            rng.random_range(lo..hi)
                        }
                    };
                    let q: &mut dyn IntPq<u64> = q.as_mut();
                    let ctx = format!("{name} buckets={buckets} g={g} {below:?}/{above:?}");
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        differential(q, &mut r, seed, 3000, &mut rank)
                    }));
                    assert!(result.is_ok(), "failed: {ctx}");
                }
            }
        }
    }
}

#[test]
fn binary_heap_matches_reference() {
    for seed in 0..20 {
        let mut q = BinaryHeapPq::new(0);
        let mut rank = |rng: &mut ChaCha8Rng, _| {
            if seed % 2 == 0 {
                rng.random_range(0..50)
            } else {
                rng.random::<u64>()
            }
        };
        differential(&mut q, &mut Exact, seed, 5000, &mut rank);
    }
}

#[test]
fn small_queue_matches_reference() {
    // Exact like the heap: any rank, (rank, seq) order, handle removal.
    for seed in 0..20 {
        let mut q = SmallPq::new();
        let mut rank = |rng: &mut ChaCha8Rng, _| {
            if seed % 2 == 0 {
                rng.random_range(0..8)
            } else {
                rng.random::<u64>()
            }
        };
        differential(&mut q, &mut Exact, 500 + seed, 2000, &mut rank);
    }
}

#[test]
fn cffs_matches_reference_with_moving_range() {
    let mut seed = 1000;
    for buckets in [1usize, 2, 5, 64, 65, 500] {
        for g in [1u64, 4, 10] {
            for (below, above) in POLICIES {
                seed += 1;
                let min_rank = if seed % 3 == 0 { 12_345 } else { 0 };
                let cfg = BucketConfig::new(buckets)
                    .granularity(g)
                    .min_rank(min_rank)
                    .policy(below, above);
                let mut q = Cffs::new(cfg).unwrap();
                let mut r = Circular::new(cfg);
                let span = buckets as u64 * g;
                // Ranks move forward with the last popped rank, spreading
                // over ~2.4 halves (so some land beyond the buffer), some
                // behind it, and rare far jumps.
                let mut rank = |rng: &mut ChaCha8Rng, last: Rank| {
                    let now = last.max(min_rank);
                    match rng.random_range(0..100) {
                        0..10 => now.saturating_sub(rng.random_range(0..=span)),
                        10..12 => now + rng.random_range(0..100 * span),
                        _ => now + rng.random_range(0..(24 * span).div_ceil(10) + 1),
                    }
                };
                let ctx = format!("Cffs buckets={buckets} g={g} {below:?}/{above:?}");
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    differential(&mut q, &mut r, seed, 4000, &mut rank)
                }));
                assert!(result.is_ok(), "failed: {ctx}");
                assert!(q.moves() > 0, "{ctx}: the range never moved");
            }
        }
    }
}

#[test]
fn granularity_orders_by_bucket_then_fifo() {
    let cfg = BucketConfig::new(10).granularity(10);
    let ranks = [15u64, 12, 11, 25, 3, 19, 10];
    let expect = [3u64, 15, 12, 11, 19, 10, 25];
    let mut queues = fixed_queues(cfg);
    queues.push(("Cffs", Box::new(Cffs::new(cfg).unwrap())));
    for (name, q) in &mut queues {
        for (i, &r) in ranks.iter().enumerate() {
            q.push(r, i as u64).unwrap();
        }
        let out: Vec<Rank> = std::iter::from_fn(|| q.pop_min()).map(|(r, _)| r).collect();
        assert_eq!(out, expect, "{name}");
    }
    let mut bh = BinaryHeapPq::new(0);
    for (i, &r) in ranks.iter().enumerate() {
        bh.push(r, i as u64).unwrap();
    }
    let out: Vec<Rank> = std::iter::from_fn(|| bh.pop_min())
        .map(|(r, _)| r)
        .collect();
    assert_eq!(out, [3, 10, 11, 12, 15, 19, 25]);
}

#[test]
fn equal_ranks_leave_in_push_order() {
    let cfg = BucketConfig::new(100);
    let mut queues = fixed_queues(cfg);
    queues.push(("Cffs", Box::new(Cffs::new(cfg).unwrap())));
    queues.push(("BinaryHeap", Box::new(BinaryHeapPq::new(0))));
    queues.push(("SmallPq", Box::new(SmallPq::new())));
    for (name, q) in &mut queues {
        for i in 0..50u64 {
            q.push(7 + (i % 2) * 50, i).unwrap();
        }
        let out: Vec<u64> = std::iter::from_fn(|| q.pop_min()).map(|(_, v)| v).collect();
        let want: Vec<u64> = (0..50).step_by(2).chain((1..50).step_by(2)).collect();
        assert_eq!(out, want, "{name}");
    }
}

#[test]
fn stale_handles_do_not_reach_new_elements() {
    let cfg = BucketConfig::new(64);
    let mut queues = fixed_queues(cfg);
    queues.push(("Cffs", Box::new(Cffs::new(cfg).unwrap())));
    queues.push(("BinaryHeap", Box::new(BinaryHeapPq::new(0))));
    queues.push(("SmallPq", Box::new(SmallPq::new())));
    for (name, q) in &mut queues {
        let h = q.push(5, 1).unwrap();
        assert_eq!(q.pop_min(), Some((5, 1)));
        let h2 = q.push(6, 2).unwrap(); // reuses the slot
        assert_eq!(q.remove(h), None, "{name}");
        assert_eq!(q.len(), 1);
        assert_eq!(q.remove(h2), Some(2), "{name}");
        assert_eq!(q.remove(h2), None, "{name}");
        assert!(q.is_empty());
        assert_eq!(q.peek_min_rank(), None);
        assert_eq!(q.pop_min(), None);
    }
}

#[test]
fn cffs_range_moves_and_policy_at_edges() {
    // 4 buckets of 10 per half: accepts 0..=79 at first.
    let cfg = BucketConfig::new(4).granularity(10);
    let mut q = Cffs::new(cfg).unwrap();
    assert_eq!(q.range(), (0, 79));
    // Empty queue: a rank beyond the buffer moves the range forward, in
    // whole halves (buckets stay aligned), so the rank lands in the primary.
    q.push(85, 1).unwrap();
    assert_eq!(q.range(), (80, 159));
    assert_eq!(q.moves(), 1);
    // Not empty now: the default rejects beyond the buffer, names the range,
    // and gives the value back.
    let err = q.push(160, 2).unwrap_err();
    assert_eq!(
        err.error,
        PqError::OutOfRange {
            rank: 160,
            min: 80,
            max: 159
        }
    );
    assert_eq!(err.value, 2);
    assert_eq!(q.stats().rejected_above, 1);
    // Below the range: clamped (default) to the first bucket, counted.
    q.push(3, 3).unwrap();
    assert_eq!(q.stats().clamped_below, 1);
    assert_eq!(q.pop_min(), Some((85, 1)));
    assert_eq!(q.pop_min(), Some((3, 3)));
    // Primary empty, buffer not: a pop swaps halves in O(1).
    q.push(125, 4).unwrap();
    let moves = q.moves();
    assert_eq!(q.peek_min_rank(), Some(125));
    assert_eq!(q.pop_min(), Some((125, 4)));
    assert_eq!(q.moves(), moves + 1);
    assert_eq!(q.range(), (120, 199));
    // Clamp beyond when configured: to the last bucket of the buffer.
    let mut q = Cffs::new(cfg.policy(OutOfRange::Reject, OutOfRange::Clamp)).unwrap();
    q.push(0, 1).unwrap();
    q.push(1000, 2).unwrap();
    q.push(79, 3).unwrap();
    assert_eq!(q.stats().clamped_above, 1);
    assert_eq!(q.pop_min(), Some((0, 1)));
    assert_eq!(q.pop_min(), Some((1000, 2)));
    assert_eq!(q.pop_min(), Some((79, 3)));
    let err = q.push(0, 4).unwrap_err();
    assert!(matches!(err.error, PqError::OutOfRange { rank: 0, .. }));
    assert_eq!(q.stats().rejected_below, 1);
    assert!(err.error.to_string().contains("rank 0 is out of range"));
}

#[test]
fn level_counts_at_ceil_boundaries() {
    // A floor-based level count under-provisions just above each power.
    for (n, levels) in [
        (1, 1),
        (64, 1),
        (65, 2),
        (4096, 2),
        (4097, 3),
        (262_144, 3),
        (262_145, 4),
    ] {
        let q = HierFfs::<u32>::new(BucketConfig::new(n)).unwrap();
        assert_eq!(q.levels(), levels, "HierFfs n = {n}");
        let c = Cffs::<u32>::new(BucketConfig::new(n)).unwrap();
        assert_eq!(c.levels(), levels, "Cffs n = {n}");
    }
    for (n, levels) in [
        (1, 1),
        (58, 1),
        (59, 2),
        (3364, 2),
        (3365, 3),
        (195_112, 3),
        (195_113, 4),
    ] {
        let q = Gradient::<u32>::exact(BucketConfig::new(n)).unwrap();
        assert_eq!(q.group(), MAX_EXACT_GROUP);
        assert_eq!(q.levels(), levels, "Gradient n = {n}");
    }
    // The highest bucket at each boundary is usable.
    for n in [65usize, 4097, 262_145] {
        let mut q = HierFfs::new(BucketConfig::new(n)).unwrap();
        q.push(n as u64 - 1, 1u8).unwrap();
        q.push(0, 0).unwrap();
        assert_eq!(q.pop_min(), Some((0, 0)));
        assert_eq!(q.pop_min(), Some((n as u64 - 1, 1)));
    }
    for n in [59usize, 3365, 195_113] {
        let mut q = Gradient::exact(BucketConfig::new(n)).unwrap();
        q.push(n as u64 - 1, 1u8).unwrap();
        q.push(n as u64 - 2, 0).unwrap();
        assert_eq!(q.pop_min(), Some((n as u64 - 2, 0)));
        assert_eq!(q.pop_min(), Some((n as u64 - 1, 1)));
    }
}

#[test]
fn gradient_exactness_and_window() {
    let q = Gradient::<u32>::exact(BucketConfig::new(58)).unwrap();
    assert_eq!(q.window(), 0);
    for (alpha, min_group) in [(1.5, 59), (1.1, 59), (1.9, 59), (1.25, 59), (1.01, 59)] {
        let q = Gradient::<u32>::approximate(BucketConfig::new(1000), alpha).unwrap();
        println!("α = {alpha}: G = {}, K = {}", q.group(), q.window());
        assert!(q.group() >= min_group, "α = {alpha}: G = {}", q.group());
        assert!(q.window() >= 1, "α = {alpha}");
        if alpha >= 1.1 {
            assert!(
                q.window() as f64 <= 2.0 / (alpha - 1.0),
                "α = {alpha}: {}",
                q.window()
            );
        }
    }
    // The worst sets for the estimate, {X} ∪ {0..k} in positions (bucket
    // j has position G−1−j), over a full one-level node.
    for alpha in [2.0, 1.9, 1.5, 1.25] {
        let g = Gradient::<u32>::approximate(BucketConfig::new(1), alpha)
            .unwrap()
            .group();
        let mut q = Gradient::new(BucketConfig::new(g), alpha, 1).unwrap();
        let mut hit_window = false;
        for x in 0..g {
            for k in 0..=x {
                q.push((g - 1 - x) as u64, 0).unwrap();
                for i in 0..k {
                    q.push((g - 1 - i) as u64, 0).unwrap();
                }
                assert_eq!(
                    q.peek_min_rank(),
                    Some((g - 1 - x) as u64),
                    "α={alpha} x={x} k={k}"
                );
                while q.pop_min().is_some() {}
                // How far the estimate was off, recomputed here.
                let (mut a, mut b) = (0f64, 0f64);
                for p in (0..k).chain([x]) {
                    a += alpha.powi(p as i32);
                    b += p as f64 * alpha.powi(p as i32);
                }
                hit_window |= (x as f64 - b / a) > 0.5 * q.window() as f64;
            }
        }
        assert!(
            q.window() == 0 || hit_window,
            "α={alpha}: the window was never exercised"
        );
    }
    // Exhaustively: every non-empty set of one node's positions (small G
    // via a 1-level queue of 12 buckets) finds the first bucket.
    for alpha in [2.0, 1.5, 1.2] {
        let mut q = Gradient::new(BucketConfig::new(12), alpha, 1).unwrap();
        for set in 1u32..(1 << 12) {
            for b in 0..12 {
                if set & (1 << b) != 0 {
                    q.push(b as u64, b).unwrap();
                }
            }
            assert_eq!(
                q.peek_min_rank(),
                Some(set.trailing_zeros() as u64),
                "{alpha} {set:b}"
            );
            while q.pop_min().is_some() {}
        }
    }
}

#[test]
fn bad_parameters_are_rejected() {
    fn field(e: PqConfigError) -> (&'static str, String) {
        let msg = e.to_string();
        match e {
            PqConfigError::OutOfRange { field, .. } => (field, msg),
        }
    }
    let zero = BucketConfig::new(0);
    assert_eq!(field(Ffs::<u8>::new(zero).unwrap_err()).0, "buckets");
    assert_eq!(field(HierFfs::<u8>::new(zero).unwrap_err()).0, "buckets");
    assert_eq!(field(Cffs::<u8>::new(zero).unwrap_err()).0, "buckets");
    assert_eq!(field(Gradient::<u8>::exact(zero).unwrap_err()).0, "buckets");
    assert_eq!(field(BucketHeap::<u8>::new(zero).unwrap_err()).0, "buckets");
    let (f, msg) = field(Ffs::<u8>::new(BucketConfig::new(65)).unwrap_err());
    assert_eq!(f, "buckets");
    assert!(
        msg.contains("buckets = 65") && msg.contains("1..=64"),
        "{msg}"
    );
    let g0 = BucketConfig::new(10).granularity(0);
    assert_eq!(field(HierFfs::<u8>::new(g0).unwrap_err()).0, "granularity");
    assert_eq!(field(Cffs::<u8>::new(g0).unwrap_err()).0, "granularity");
    // The one-word exact gradient queue holds at most 58 buckets.
    assert!(Gradient::<u8>::new(BucketConfig::new(58), 2.0, 1).is_ok());
    let (f, msg) = field(Gradient::<u8>::new(BucketConfig::new(59), 2.0, 1).unwrap_err());
    assert_eq!(f, "buckets");
    assert!(msg.contains("1..=58") && msg.contains("exact"), "{msg}");
    let (f, msg) = field(Gradient::<u8>::new(BucketConfig::new(3365), 2.0, 2).unwrap_err());
    assert!(f == "buckets" && msg.contains("1..=3364"), "{msg}");
    for alpha in [0.5, 1.0, 2.5, f64::NAN] {
        let (f, _) = field(Gradient::<u8>::approximate(BucketConfig::new(10), alpha).unwrap_err());
        assert_eq!(f, "alpha");
    }
    assert_eq!(
        field(Gradient::<u8>::new(BucketConfig::new(10), 2.0, 0).unwrap_err()).0,
        "max_levels"
    );
    // A range that does not fit u64.
    let huge = BucketConfig::new(1 << 20).granularity(u64::MAX / 1000);
    assert_eq!(
        field(HierFfs::<u8>::new(huge).unwrap_err()).0,
        "buckets × granularity"
    );
    let edge = BucketConfig::new(1 << 20).granularity(1 << 43).min_rank(0);
    assert!(HierFfs::<u8>::new(edge).is_ok());
    assert!(
        Cffs::<u8>::new(edge).is_err(),
        "two halves need twice the range"
    );
}

/// Steady state: after warm-up, `memory_bytes` must not change.
#[test]
fn memory_is_bounded_in_steady_state() {
    let n = 1000usize;
    let cfg = BucketConfig::new(n).capacity(256);
    let mut queues = fixed_queues(cfg);
    queues.push(("BinaryHeap", Box::new(BinaryHeapPq::new(256))));
    let mut cffs: Vec<(&'static str, Box<dyn IntPq<u64>>)> =
        vec![("Cffs", Box::new(Cffs::new(cfg).unwrap()))];
    for (name, q) in queues.iter_mut().chain(cffs.iter_mut()) {
        let moving = *name == "Cffs";
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        // Live elements: value ids 0..2000, each pushed again when it leaves.
        let mut handles: Vec<Option<Handle>> = vec![None; 2000];
        let mut now = 0u64;
        let rank = |rng: &mut ChaCha8Rng, now: u64| {
            if moving {
                now + rng.random_range(0..n as u64)
            } else {
                rng.random_range(0..n as u64)
            }
        };
        for (i, h) in handles.iter_mut().enumerate() {
            *h = Some(q.push(rank(&mut rng, now), i as u64).unwrap());
        }
        let mut step = |q: &mut Box<dyn IntPq<u64>>, rng: &mut ChaCha8Rng| {
            // Pop or remove one, push it again.
            let id = if rng.random_bool(0.2) {
                let id = rng.random_range(0..handles.len());
                let h = handles[id].take().unwrap();
                assert_eq!(q.remove(h), Some(id as u64));
                id
            } else {
                let (r, id) = q.pop_min().unwrap();
                now = now.max(r);
                handles[id as usize] = None;
                id as usize
            };
            handles[id] = Some(q.push(rank(rng, now), id as u64).unwrap());
        };
        for _ in 0..20_000 {
            step(q, &mut rng);
        }
        let warm = q.memory_bytes();
        let len = q.len();
        for _ in 0..200_000 {
            step(q, &mut rng);
        }
        assert_eq!(q.memory_bytes(), warm, "{name}");
        assert_eq!(q.len(), len, "{name}");
        println!("{name}: {warm} bytes for {len} elements over {n} buckets");
    }
}

#[test]
fn gradient_search_stats_count_estimate_misses() {
    // Exact queue: the estimate is always right, nothing is probed.
    let mut q = Gradient::exact(BucketConfig::new(5000)).unwrap();
    for b in (0..5000u64).step_by(7) {
        q.push(b, b).unwrap();
    }
    while q.pop_min().is_some() {}
    let s = q.search_stats();
    assert_eq!((s.pops, s.misses, s.probes, s.bucket_error), (715, 0, 0, 0));

    // Approximate, one node: the worst set {X} ∪ {0..k} in positions makes
    // the first estimate miss X by a computable distance.
    let alpha = 1.5;
    let g = Gradient::<u32>::approximate(BucketConfig::new(1), alpha)
        .unwrap()
        .group();
    let mut q = Gradient::new(BucketConfig::new(g), alpha, 1).unwrap();
    let x = g - 1;
    // Position p is bucket g−1−p: X = g−1 is bucket 0, positions 0..k are
    // the last k buckets; with every position occupied the weighted mean
    // lies about 1/(α−1)² · (α−1) = 2 positions below X for α = 1.5.
    let k = x;
    q.push(0, 0).unwrap();
    for p in 0..k {
        q.push((g - 1 - p) as u64, 0).unwrap();
    }
    let w: Vec<f64> = (0..g).map(|p| alpha.powi(p as i32)).collect();
    let (a, b): (f64, f64) = (0..k)
        .chain([x])
        .fold((0.0, 0.0), |(a, b), p| (a + w[p], b + p as f64 * w[p]));
    let expect_gap = x - (b / a).ceil() as usize;
    assert!(expect_gap >= 1, "the test set must fool the estimate");
    assert_eq!(q.pop_min(), Some((0, 0)));
    let s = q.search_stats();
    assert_eq!((s.pops, s.misses), (1, 1));
    // Integer weights only approximate α^p: allow one position either way.
    assert!(
        s.bucket_error.abs_diff(expect_gap as u64) <= 1,
        "{} vs {expect_gap}",
        s.bucket_error
    );
    assert!(s.probes >= 1 && s.probes <= q.window() as u64 + 1);
    // Draining in order: every later pop is counted too.
    let before = s.misses;
    let mut last = 0;
    while let Some((r, _)) = q.pop_min() {
        assert!(r >= last);
        last = r;
    }
    let s = q.search_stats();
    assert_eq!(s.pops, 1 + k as u64);
    assert!(s.misses >= before);
}
