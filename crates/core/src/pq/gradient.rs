//! `Gradient`: Eiffel's gradient queue, exact (base 2) and approximate
//! (base α < 2), made hierarchical for any number of buckets.

use super::arena::Arena;
use super::range::{BucketConfig, FixedRange};
use super::{Handle, IntPq, PqConfigError, PqStats, PushError, Rank};

/// Buckets per node of the exact (base-2) gradient queue: with weights
/// `2^x`, `b = Σ x·2^x` over 58 positions is at most `56·2^58 + 2`, which
/// (plus `a`) still fits a `u64`; 59 positions would overflow.
pub const MAX_EXACT_GROUP: usize = 58;

/// Buckets per node of the approximate queue at most (before the `u64`
/// limit on `b`, which usually binds first).
const MAX_APPROX_GROUP: usize = 1024;

/// How the approximate queue's estimates fared (see
/// [`Gradient::search_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SearchStats {
    /// Pops.
    pub pops: u64,
    /// Pops where `ceil(b/a)` pointed at an empty child on some level: an
    /// approximate queue without the search (Eiffel's) would have served
    /// a later bucket than the minimum.
    pub misses: u64,
    /// Children checked for emptiness by the searches, over all levels
    /// (0 for the exact queue).
    pub probes: u64,
    /// Sum over pops of how far the estimates lay after the true first
    /// child, in buckets (each level's error times the buckets under one
    /// of its children).
    pub bucket_error: u64,
}

/// The `(a, b)` pair of one node.
#[derive(Clone, Copy, Debug, Default)]
struct Sums {
    a: u64,
    b: u64,
}

/// The gradient queue (Saeed et al., NSDI'19, §3.2).
///
/// Each node of the index covers `G` children (buckets at the leaves,
/// nodes above). Child `j` has position `x = G − 1 − j` (so lower ranks get
/// larger weights) and weight `w_x`; the node keeps `a = Σ w_x` and
/// `b = Σ x·w_x` over its non-empty children. `b/a` is a weighted mean of
/// the non-empty positions, so it never exceeds the largest one, `X`; the
/// first non-empty child is `G − 1 − X`. Finding it is a division, not a
/// bit scan. Push, pop and remove update O(levels) nodes; levels =
/// `ceil(log_G buckets)`, at least 1.
///
/// - **Exact** ([`Gradient::exact`], base 2: `w_x = 2^x`, `G = 58`): then
///   `X − b/a < 1`, so `X = ceil(b/a)` exactly, with no search. `G` is
///   limited to [`MAX_EXACT_GROUP`] so that `b` fits a `u64`; more buckets
///   use more levels (Eiffel's hierarchical gradient queue).
/// - **Approximate** ([`Gradient::approximate`], base `α` in `[1.01, 2)`):
///   integer weights growing by about `α` per position (from
///   `w_0 ≈ 1/(α−1)`), so more children fit one node, but the estimate
///   `ceil(b/a)` can fall short of `X` by up to `K` positions.
///   `K` ([`Gradient::window`]) is computed exactly when the queue is
///   built, as the largest `X − ceil(b/a)` over the worst sets of
///   non-empty children (which have the form {X} ∪ {0..k}: adding a child
///   raises the gap iff it lies further from `X` than the gap already
///   is). `(G, K)` = (63, 1) for α = 1.9, (95, 2) for 1.5, (165, 5) for
///   1.25, (360, 18) for 1.1, (1024, 344) for 1.01.
///
///   Search: in rank order the estimate never points *before* the true
///   first child and lies at most `K` children after it, so the queue
///   scans from `estimate − K` onward towards the estimate (increasing
///   rank) and takes the first non-empty child. Cost: at most `K + 1`
///   emptiness checks per level; the result is exact, not approximate.
///
/// Ordering (both variants): increasing `(bucket, seq)` with
/// `bucket = (rank − min_rank) / granularity` after the
/// [`OutOfRange`](super::OutOfRange) policy — exact `(rank, seq)` order
/// when the granularity is 1 and nothing is clamped.
#[derive(Clone, Debug)]
pub struct Gradient<V> {
    /// `levels[0]` has one node per `G` buckets; the last has one node.
    levels: Vec<Vec<Sums>>,
    /// `w[x]` and `x·w[x]` for positions `x < G`.
    w: Vec<u64>,
    xw: Vec<u64>,
    group: usize,
    exact: bool,
    window: usize,
    buckets: usize,
    arena: Arena<V>,
    range: FixedRange,
    search: SearchStats,
}

/// The window `K` = the largest `floor(X − b/a)` = `X − ceil(b/a)` over all
/// sets of non-empty positions, for weights `w`; `K = 0` means exact.
fn analyse(w: &[u64]) -> (usize, bool) {
    // Prefix sums P[k] = Σ_{i<k} w_i and Q[k] = Σ_{i<k} i·w_i.
    let mut p = vec![0u128; w.len() + 1];
    let mut q = vec![0u128; w.len() + 1];
    for (i, &wi) in w.iter().enumerate() {
        p[i + 1] = p[i] + wi as u128;
        q[i + 1] = q[i] + i as u128 * wi as u128;
    }
    let mut window = 0u128;
    for (m, &wm) in w.iter().enumerate() {
        // Sets {m} ∪ {0..k}: gap = Σ_{i<k} (m−i)·w_i / (w_m + Σ_{i<k} w_i).
        for k in 1..=m {
            let num = m as u128 * p[k] - q[k];
            let den = wm as u128 + p[k];
            window = window.max(num / den);
        }
    }
    (window as usize, window == 0)
}

impl<V> Gradient<V> {
    /// The exact gradient queue (base 2, 58 buckets per node), with as many
    /// levels as `cfg.buckets` needs.
    pub fn exact(cfg: BucketConfig) -> Result<Gradient<V>, PqConfigError> {
        Self::new(cfg, 2.0, usize::MAX)
    }

    /// The approximate gradient queue with base `alpha` in `[1.01, 2]`
    /// (2 gives the exact queue), with as many levels as needed.
    pub fn approximate(cfg: BucketConfig, alpha: f64) -> Result<Gradient<V>, PqConfigError> {
        Self::new(cfg, alpha, usize::MAX)
    }

    /// A gradient queue of base `alpha` limited to `max_levels` levels:
    /// `cfg.buckets` above `G^max_levels` is rejected (with `max_levels =
    /// 1` and `alpha = 2`, the single-word queue of at most 58 buckets).
    pub fn new(
        cfg: BucketConfig,
        alpha: f64,
        max_levels: usize,
    ) -> Result<Gradient<V>, PqConfigError> {
        // `!(..)` also rejects NaN.
        if !(1.01..=2.0).contains(&alpha) {
            return Err(PqConfigError::new("Gradient", "alpha", alpha, "1.01..=2.0"));
        }
        if max_levels == 0 {
            return Err(PqConfigError::new("Gradient", "max_levels", 0, "1.."));
        }
        let w: Vec<u64> = if alpha == 2.0 {
            (0..MAX_EXACT_GROUP).map(|x| 1u64 << x).collect()
        } else {
            // Integer recurrence in Q16 fixed point: deterministic, and each
            // weight exceeds the previous one.
            // `w_0 ≈ 1/(α−1)` keeps the first weights from collapsing to
            // +1 steps when rounded.
            let aq = (alpha * 65536.0).round() as u128;
            let w0 = (1.0 / (alpha - 1.0)).round().max(1.0) as u64;
            let mut w = vec![w0];
            let (mut a, mut b) = (w0 as u128, 0u128);
            while w.len() < MAX_APPROX_GROUP {
                let prev = w[w.len() - 1] as u128;
                let next = ((prev * aq) >> 16).max(prev + 1);
                let x = w.len() as u128;
                if a + next + b + x * next > u64::MAX as u128 {
                    break;
                }
                a += next;
                b += x * next;
                w.push(next as u64);
            }
            w
        };
        let group = w.len();
        let (window, exact) = analyse(&w);
        let max_buckets = (0..max_levels.min(64))
            .try_fold(1usize, |acc, _| acc.checked_mul(group))
            .unwrap_or(usize::MAX)
            .min(u32::MAX as usize);
        let queue = if alpha == 2.0 {
            "Gradient (exact, base 2)"
        } else {
            "Gradient (approximate)"
        };
        let range = FixedRange::new(&cfg, queue, max_buckets)?;
        let mut levels = Vec::new();
        let mut nodes = cfg.buckets.div_ceil(group);
        loop {
            levels.push(vec![Sums::default(); nodes]);
            if nodes == 1 {
                break;
            }
            nodes = nodes.div_ceil(group);
        }
        let xw = w.iter().enumerate().map(|(x, &wx)| x as u64 * wx).collect();
        Ok(Gradient {
            levels,
            w,
            xw,
            group,
            exact,
            window,
            buckets: cfg.buckets,
            arena: Arena::new(cfg.buckets, cfg.capacity),
            range,
            search: SearchStats::default(),
        })
    }

    /// Children per node (`G`).
    pub fn group(&self) -> usize {
        self.group
    }

    /// Number of levels: `ceil(log_G buckets)`, at least 1.
    pub fn levels(&self) -> usize {
        self.levels.len()
    }

    /// `K`: how far (in children) the estimate can lie after the first
    /// non-empty child; 0 when `ceil(b/a)` is exact.
    pub fn window(&self) -> usize {
        if self.exact { 0 } else { self.window }
    }

    /// Counters of the pops' searches since the queue was built.
    pub fn search_stats(&self) -> SearchStats {
        self.search
    }

    /// Is child `c` (a bucket at level 0, a node above) non-empty?
    #[inline]
    fn child_nonempty(&self, level: usize, c: usize) -> bool {
        if level == 0 {
            c < self.buckets && !self.arena.bucket_is_empty(c)
        } else {
            self.levels[level - 1].get(c).is_some_and(|s| s.a != 0)
        }
    }

    /// First non-empty child of node `node` at `level` (which is
    /// non-empty), the child the raw estimate named and the children
    /// probed.
    #[inline]
    fn first_child(&self, level: usize, node: usize) -> (usize, usize, u32) {
        let s = self.levels[level][node];
        let g = self.group;
        let est = (s.b.div_ceil(s.a) as usize).min(g - 1);
        let j_est = g - 1 - est;
        if self.exact {
            return (node * g + j_est, node * g + j_est, 0);
        }
        let from = j_est.saturating_sub(self.window);
        for j in from..=j_est {
            if self.child_nonempty(level, node * g + j) {
                return (node * g + j, node * g + j_est, (j - from + 1) as u32);
            }
        }
        // Unreachable when `window` is right; stay correct regardless.
        debug_assert!(false, "gradient window too small");
        let c = (0..g)
            .map(|j| node * g + j)
            .find(|&c| self.child_nonempty(level, c))
            .unwrap_or(node * g + j_est);
        (c, node * g + j_est, g as u32)
    }

    /// The first non-empty bucket, whether the raw estimate missed the
    /// true first child on some level, how far it missed (in buckets:
    /// `Σ (estimate − child) × buckets per child` over the levels) and the
    /// children probed.
    #[inline]
    fn first_bucket_traced(&self) -> Option<(usize, bool, u64, u64)> {
        let top = self.levels.len() - 1;
        if self.levels[top][0].a == 0 {
            return None;
        }
        let (mut node, mut missed, mut err, mut probes) = (0, false, 0u64, 0u64);
        let mut span = (0..top).fold(1u64, |acc, _| acc.saturating_mul(self.group as u64));
        for level in (0..=top).rev() {
            let (c, e, p) = self.first_child(level, node);
            if e != c {
                missed = true;
                err = err.saturating_add(((e - c) as u64).saturating_mul(span));
            }
            node = c;
            probes += u64::from(p);
            span /= self.group as u64;
        }
        Some((node, missed, err, probes))
    }

    #[inline]
    fn first_bucket(&self) -> Option<usize> {
        let top = self.levels.len() - 1;
        if self.levels[top][0].a == 0 {
            return None;
        }
        let mut node = 0;
        for level in (0..=top).rev() {
            node = self.first_child(level, node).0;
        }
        Some(node)
    }

    #[inline]
    fn mark(&mut self, bucket: usize) {
        let g = self.group;
        let mut c = bucket;
        for level in &mut self.levels {
            let (node, x) = (c / g, g - 1 - c % g);
            let s = &mut level[node];
            let was_empty = s.a == 0;
            s.a += self.w[x];
            s.b += self.xw[x];
            if !was_empty {
                return;
            }
            c = node;
        }
    }

    #[inline]
    fn unmark(&mut self, bucket: usize) {
        let g = self.group;
        let mut c = bucket;
        for level in &mut self.levels {
            let (node, x) = (c / g, g - 1 - c % g);
            let s = &mut level[node];
            s.a -= self.w[x];
            s.b -= self.xw[x];
            if s.a != 0 {
                return;
            }
            c = node;
        }
    }
}

impl<V> IntPq<V> for Gradient<V> {
    #[inline]
    fn push(&mut self, rank: Rank, value: V) -> Result<Handle, PushError<V>> {
        let b = match self.range.bucket(rank) {
            Ok(b) => b,
            Err(error) => return Err(PushError { error, value }),
        };
        let (h, was_empty) = self.arena.push_back(b, rank, value)?;
        if was_empty {
            self.mark(b);
        }
        Ok(h)
    }

    #[inline]
    fn pop_min(&mut self) -> Option<(Rank, V)> {
        let b = if self.exact {
            let b = self.first_bucket()?;
            self.search.pops += 1;
            b
        } else {
            let (b, missed, err, probes) = self.first_bucket_traced()?;
            self.search.pops += 1;
            self.search.probes += probes;
            self.search.misses += u64::from(missed);
            self.search.bucket_error += err;
            b
        };
        let (rank, value, now_empty) = self.arena.pop_front(b)?;
        if now_empty {
            self.unmark(b);
        }
        Some((rank, value))
    }

    fn peek_min_rank(&self) -> Option<Rank> {
        self.arena.front_rank(self.first_bucket()?)
    }

    fn remove(&mut self, handle: Handle) -> Option<V> {
        let (b, value, now_empty) = self.arena.remove(handle)?;
        if now_empty {
            self.unmark(b);
        }
        Some(value)
    }

    fn len(&self) -> usize {
        self.arena.len()
    }

    fn memory_bytes(&self) -> usize {
        self.arena.memory_bytes()
            + self
                .levels
                .iter()
                .map(|l| l.capacity() * size_of::<Sums>())
                .sum::<usize>()
            + (self.w.capacity() + self.xw.capacity()) * size_of::<u64>()
    }

    fn stats(&self) -> PqStats {
        self.range.stats
    }
}
