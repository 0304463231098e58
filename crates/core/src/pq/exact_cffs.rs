//! [`Exact`]: a bucketed queue ([`Cffs`] or [`HierFfs`]) made exact by an
//! exact heap for the ranks that fall outside its range. [`ExactCffs`] is
//! used by the policy tree's cffs node queues and shaper and by
//! [`CffsShaper`](crate::shape::CffsShaper); [`ExactHier`] by its hffs
//! node queues.

use super::{
    BinaryHeapPq, BucketConfig, Cffs, Handle, HierFfs, IntPq, OutOfRange, PqConfigError, PqError,
    PushError, Rank,
};

/// A bucketed queue `Q` whose range refuses what it cannot place exactly,
/// with an exact heap (the *spill*) for those ranks: always for ranks
/// below the range, and for ranks beyond it if built with `spill_above`
/// (otherwise they are refused).
///
/// Below: a [`Cffs`] window moves forward in whole halves and can start
/// after a rank still to come (an empty queue jumps to its first rank's
/// half, a push beyond the buffer swaps halves); clamped into the first
/// bucket, such a rank would leave in push order with whatever is there.
/// A [`HierFfs`] range is fixed, so a rank below or beyond it would be
/// clamped into its first or last bucket the same way.
///
/// Order: every element of `Q` lies inside its range, which never moves
/// back, so a below-range rank in the spill is lower than all of them; a
/// beyond-range rank in the spill was filed before any element of equal
/// rank reached `Q` (a fixed range never holds one: it is strictly higher
/// than all of them). A pop therefore takes the spill's head unless `Q`'s
/// is strictly lower, and the queue leaves in exact `(rank, push order)`
/// order at granularity 1 (at `Q`'s granularity otherwise). While the
/// spill is empty (the usual case) a pop costs one compare more than
/// `Q`'s own.
#[derive(Clone, Debug)]
pub(crate) struct Exact<V, Q> {
    q: Q,
    spill: BinaryHeapPq<V>,
    spill_above: bool,
    /// Elements filed in the spill so far.
    spilled: u64,
}

/// A [`Cffs`] with an exact spill (see [`Exact`]).
pub(crate) type ExactCffs<V> = Exact<V, Cffs<V>>;

/// A [`HierFfs`] with an exact spill on both sides (see [`Exact`]).
pub(crate) type ExactHier<V> = Exact<V, HierFfs<V>>;

/// Where an [`Exact`] queue filed an element, to remove it again.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Filed {
    handle: Handle,
    spilled: bool,
}

impl Filed {
    /// An element of another queue (not an [`Exact`] one), by its handle.
    pub(crate) fn elsewhere(handle: Handle) -> Filed {
        Filed {
            handle,
            spilled: false,
        }
    }

    /// A ticket kept as its parts (see [`Filed::into_parts`]).
    pub(crate) fn from_parts(handle: Handle, spilled: bool) -> Filed {
        Filed { handle, spilled }
    }

    /// The handle and whether it is in the spill.
    pub(crate) fn into_parts(self) -> (Handle, bool) {
        (self.handle, self.spilled)
    }

    /// Its handle in the queue that holds it.
    pub(crate) fn handle(self) -> Handle {
        self.handle
    }

    /// True if it is in the spill heap.
    #[cfg(test)]
    pub(crate) fn spilled(self) -> bool {
        self.spilled
    }
}

impl<V> ExactCffs<V> {
    /// A cFFS of `cfg` (its out-of-range policies are replaced: both sides
    /// refuse, and the refused ranks go to the spill as described above).
    pub(crate) fn new(cfg: BucketConfig, spill_above: bool) -> Result<ExactCffs<V>, PqConfigError> {
        Ok(Exact::wrap(Cffs::new(refusing(cfg))?, spill_above))
    }
}

impl<V> ExactHier<V> {
    /// A HierFfs of `cfg` whose ranks outside its fixed range, on either
    /// side, go to the spill (its out-of-range policies are replaced).
    pub(crate) fn new(cfg: BucketConfig) -> Result<ExactHier<V>, PqConfigError> {
        Ok(Exact::wrap(HierFfs::new(refusing(cfg))?, true))
    }
}

/// Why [`PushInRange::push_in_range`] did not file an element.
#[derive(Debug)]
pub(crate) enum Refused<V> {
    /// The rank lies outside the queue's fixed range; nothing was counted.
    Outside(V),
    /// The queue refused it ([`IntPq::push`]'s error).
    Error(PushError<V>),
}

/// The push an [`Exact`] queue files through: a queue that can tell a rank
/// outside its range without building a [`PqError`] (a [`HierFfs`]) does
/// so; the others push as usual.
pub(crate) trait PushInRange<V>: IntPq<V> {
    /// Files `value`, or gives it back (see [`Refused`]).
    #[inline]
    fn push_in_range(&mut self, rank: Rank, value: V) -> Result<Handle, Refused<V>> {
        self.push(rank, value).map_err(Refused::Error)
    }
}

impl<V> PushInRange<V> for Cffs<V> {}

impl<V> PushInRange<V> for HierFfs<V> {
    #[inline]
    fn push_in_range(&mut self, rank: Rank, value: V) -> Result<Handle, Refused<V>> {
        HierFfs::push_in_range(self, rank, value)
    }
}

/// `cfg` with both out-of-range policies set to refuse (the spill takes
/// the refused ranks).
fn refusing(cfg: BucketConfig) -> BucketConfig {
    cfg.policy(OutOfRange::Reject, OutOfRange::Reject)
}

impl<V, Q: PushInRange<V>> Exact<V, Q> {
    /// `q` (which must refuse, not clamp, outside its range) with an empty
    /// spill.
    fn wrap(q: Q, spill_above: bool) -> Exact<V, Q> {
        Exact {
            q,
            spill: BinaryHeapPq::new(0),
            spill_above,
            spilled: 0,
        }
    }

    /// Files `value` with `rank`; refused only beyond the range without
    /// `spill_above`, or when full (the value comes back).
    #[inline]
    pub(crate) fn push(&mut self, rank: Rank, value: V) -> Result<Filed, PushError<V>> {
        match self.q.push_in_range(rank, value) {
            Ok(handle) => Ok(Filed {
                handle,
                spilled: false,
            }),
            Err(refused) => self.push_refused(rank, refused),
        }
    }

    /// A rank the range refused: into the spill if it lies below the
    /// range, or beyond it with `spill_above`.
    #[cold]
    #[inline(never)]
    fn push_refused(&mut self, rank: Rank, refused: Refused<V>) -> Result<Filed, PushError<V>> {
        let e = match refused {
            Refused::Error(e) => e,
            // `Q`'s own push applies (and counts) its policy, which
            // refuses it: the error names the range.
            Refused::Outside(value) => match self.q.push(rank, value) {
                Ok(handle) => {
                    return Ok(Filed {
                        handle,
                        spilled: false,
                    });
                }
                Err(e) => e,
            },
        };
        match e.error {
            PqError::OutOfRange { min, .. } if rank < min || self.spill_above => {
                let handle = self.spill.push(rank, e.value)?;
                self.spilled += 1;
                Ok(Filed {
                    handle,
                    spilled: true,
                })
            }
            _ => Err(e),
        }
    }

    /// Removes and returns the first element (see the type's docs on the
    /// order) and the rank it was filed with.
    #[inline]
    pub(crate) fn pop_min(&mut self) -> Option<(Rank, V)> {
        if !self.spill.is_empty() && self.spill_first() {
            return self.spill.pop_min();
        }
        // The one call of the queue's pop: it stays inlined here.
        self.q.pop_min()
    }

    /// True if the spill's head leaves before `Q`'s: unless `Q`'s rank is
    /// strictly lower (see the type's docs).
    #[cold]
    #[inline(never)]
    fn spill_first(&self) -> bool {
        match (self.spill.peek_min_rank(), self.q.peek_min_rank()) {
            (Some(s), Some(c)) => s <= c,
            (s, _) => s.is_some(),
        }
    }

    /// Pops the first element if its rank is at most `limit` (a shaper's
    /// "due by now").
    #[inline]
    pub(crate) fn pop_at_most(&mut self, limit: Rank) -> Option<(Rank, V)> {
        if self.peek_min_rank()? <= limit {
            self.pop_min()
        } else {
            None
        }
    }

    /// The rank of the element [`ExactCffs::pop_min`] would return.
    #[inline]
    pub(crate) fn peek_min_rank(&self) -> Option<Rank> {
        let c = self.q.peek_min_rank();
        if self.spill.is_empty() {
            return c;
        }
        match (self.spill.peek_min_rank(), c) {
            (Some(s), Some(c)) => Some(s.min(c)),
            (s, c) => s.or(c),
        }
    }

    /// Removes the element `filed` names; `None` if it is no longer queued.
    #[inline]
    pub(crate) fn remove(&mut self, filed: Filed) -> Option<V> {
        if filed.spilled {
            self.spill.remove(filed.handle)
        } else {
            self.q.remove(filed.handle)
        }
    }

    /// Elements queued (`Q` and spill).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.q.len() + self.spill.len()
    }

    /// True if nothing is queued.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.q.is_empty() && self.spill.is_empty()
    }

    /// Elements filed in the spill so far (ranks outside the range).
    pub(crate) fn spilled(&self) -> u64 {
        self.spilled
    }

    /// `Q`'s out-of-range counters (refusals, never clamps).
    #[cfg(test)]
    pub(crate) fn stats(&self) -> super::PqStats {
        self.q.stats()
    }

    /// Heap memory of `Q` and the spill.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.q.memory_bytes() + self.spill.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;

    fn queue(buckets: usize, spill_above: bool) -> ExactCffs<u32> {
        ExactCffs::new(BucketConfig::new(buckets), spill_above).expect("buckets")
    }

    /// Ranks below a window that jumped for a far first rank go to the
    /// spill and leave first, in rank order (a clamping cFFS serves them
    /// in push order behind the bucket they were clamped to).
    #[test]
    fn ranks_below_a_jumped_window_leave_first_in_rank_order() {
        let mut q = queue(8, false);
        q.push(100, 0).expect("jumps the window to 96..=111");
        for (v, r) in [(1, 40), (2, 20), (3, 96), (4, 30)] {
            q.push(r, v).expect("filed");
        }
        assert_eq!(q.spilled(), 3);
        let out: Vec<_> = std::iter::from_fn(|| q.pop_min()).collect();
        assert_eq!(out, [(20, 2), (30, 4), (40, 1), (96, 3), (100, 0)]);
        assert!(q.is_empty());
    }

    /// Beyond the window: refused (the value comes back) without
    /// `spill_above`, spilled with it and served in rank order after the
    /// window moved on, ahead of equal ranks filed later in the cFFS.
    #[test]
    fn ranks_beyond_the_window_are_refused_or_spilled() {
        let mut q = queue(4, false);
        q.push(0, 0).expect("in the window");
        let e = q.push(9, 1).expect_err("beyond 0..=7");
        assert_eq!(e.value, 1);
        let mut q = queue(4, true);
        q.push(0, 0).expect("in the window");
        let far = q.push(9, 1).expect("spilled");
        assert!(far.spilled());
        q.push(2, 2).expect("in the window");
        assert_eq!(q.pop_min(), Some((0, 0)));
        assert_eq!(q.pop_min(), Some((2, 2)));
        // The window is empty: it jumps for rank 9, where the spill's
        // element is older.
        q.push(9, 3).expect("in the window");
        assert_eq!(q.pop_at_most(8), None);
        assert_eq!(q.pop_at_most(9), Some((9, 1)));
        assert_eq!(q.pop_min(), Some((9, 3)));
    }

    /// Removal by `Filed` reaches either part; a removed element is gone.
    #[test]
    fn removal_reaches_the_window_and_the_spill() {
        let mut q = queue(4, true);
        let a = q.push(50, 0).expect("window");
        let b = q.push(10, 1).expect("below");
        let c = q.push(200, 2).expect("beyond");
        assert!(!a.spilled() && b.spilled() && c.spilled());
        assert_eq!(q.remove(b), Some(1));
        assert_eq!(q.remove(b), None);
        assert_eq!(q.len(), 2);
        assert_eq!(q.peek_min_rank(), Some(50));
        assert_eq!(q.remove(a), Some(0));
        assert_eq!(q.pop_min(), Some((200, 2)));
        assert!(q.is_empty() && q.peek_min_rank().is_none());
    }

    /// Random pushes around a moving window (below, inside, beyond), pops
    /// and removals against a sorted list of `(rank, push order)`: the
    /// same element every time, and nothing clamped.
    #[test]
    fn random_use_matches_exact_rank_then_push_order() {
        for seed in 0..30u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let buckets = rng.random_range(2..40usize);
            let mut q = queue(buckets, true);
            let mut want: Vec<(Rank, u32, Filed)> = Vec::new();
            let mut floor = 0u64;
            for v in 0..4000u32 {
                match rng.random_range(0..10) {
                    0..=4 => {
                        let spread = 4 * buckets as u64;
                        let r = (floor + rng.random_range(0..spread)).saturating_sub(spread / 2);
                        let f = q.push(r, v).expect("spills both sides");
                        want.push((r, v, f));
                        want.sort_by_key(|e| (e.0, e.1));
                    }
                    5 if !want.is_empty() => {
                        let (_, v, f) = want.remove(rng.random_range(0..want.len()));
                        assert_eq!(q.remove(f), Some(v), "seed {seed}");
                    }
                    _ => {
                        let got = q.pop_min();
                        let exp = (!want.is_empty()).then(|| want.remove(0));
                        assert_eq!(got, exp.map(|e| (e.0, e.1)), "seed {seed}");
                        if let Some((r, _)) = got {
                            floor = floor.max(r);
                        }
                    }
                }
                if rng.random_bool(0.01) {
                    floor += rng.random_range(0..50 * buckets as u64);
                }
                assert_eq!(q.len(), want.len());
            }
            assert_eq!(q.stats().clamped(), 0);
        }
    }

    fn hier(min_rank: Rank, buckets: usize) -> ExactHier<u32> {
        ExactHier::new(BucketConfig::new(buckets).min_rank(min_rank)).expect("buckets")
    }

    /// A HierFfs's fixed range 100..=107: ranks below it leave first and
    /// ranks beyond it last, each side in rank order, ties in push order
    /// (a clamping HierFfs serves them in push order in its first and last
    /// buckets); the in-range ones never spill.
    #[test]
    fn a_hier_range_spills_both_sides_in_rank_order() {
        let mut q = hier(100, 8);
        let pushes = [
            (120, 0),
            (103, 1),
            (40, 2),
            (108, 3),
            (99, 4),
            (107, 5),
            (40, 6),
            (300, 7),
        ];
        let spilled: Vec<bool> = pushes
            .iter()
            .map(|&(r, v)| q.push(r, v).expect("spills both sides").spilled())
            .collect();
        assert_eq!(spilled, [true, false, true, true, true, false, true, true]);
        assert_eq!(q.spilled(), 6);
        assert_eq!(q.peek_min_rank(), Some(40));
        let out: Vec<_> = std::iter::from_fn(|| q.pop_min()).collect();
        let want = [
            (40, 2),
            (40, 6),
            (99, 4),
            (103, 1),
            (107, 5),
            (108, 3),
            (120, 0),
            (300, 7),
        ];
        assert_eq!(out, want);
        assert_eq!(q.stats().clamped(), 0);
        assert_eq!(
            q.stats().rejected(),
            6,
            "the HierFfs refused, the spill took them"
        );
    }

    /// Random pushes on both sides of a HierFfs's fixed range and inside
    /// it, pops and removals against a sorted list of `(rank, push
    /// order)`: the same element every time, every out-of-range rank
    /// spilled, nothing clamped.
    #[test]
    fn random_hier_use_matches_exact_rank_then_push_order() {
        for seed in 0..30u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let buckets = rng.random_range(1..100usize);
            let min = rng.random_range(0..200u64);
            let mut q = hier(min, buckets);
            let mut want: Vec<(Rank, u32, Filed)> = Vec::new();
            let mut outside = 0u64;
            for v in 0..3000u32 {
                if rng.random_bool(0.55) {
                    let r = rng.random_range(0..min + 3 * buckets as u64);
                    let f = q.push(r, v).expect("spills both sides");
                    let out_of_range = r < min || r >= min + buckets as u64;
                    assert_eq!(f.spilled(), out_of_range, "seed {seed}: rank {r}");
                    outside += u64::from(out_of_range);
                    want.push((r, v, f));
                    want.sort_by_key(|e| (e.0, e.1));
                } else if rng.random_bool(0.2) && !want.is_empty() {
                    let (_, v, f) = want.remove(rng.random_range(0..want.len()));
                    assert_eq!(q.remove(f), Some(v), "seed {seed}");
                    assert_eq!(q.remove(f), None, "seed {seed}: removed twice");
                } else {
                    assert_eq!(q.peek_min_rank(), want.first().map(|e| e.0));
                    let exp = (!want.is_empty()).then(|| want.remove(0));
                    assert_eq!(q.pop_min(), exp.map(|e| (e.0, e.1)), "seed {seed}");
                }
                assert_eq!(q.len(), want.len());
            }
            assert_eq!(q.spilled(), outside, "seed {seed}");
            assert_eq!(q.stats().clamped(), 0);
        }
    }
}
