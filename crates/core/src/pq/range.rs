//! Bucket configuration shared by the bucketed queues, the out-of-range
//! policy and the rank → bucket mapping of the fixed-range queues.

use super::{PqConfigError, PqError, PqStats, Rank};

/// What a queue does with a rank outside the ranks it can hold.
///
/// Each side (below, beyond) has its own policy in [`BucketConfig`]; the
/// default is [`Clamp`](OutOfRange::Clamp) below and
/// [`Reject`](OutOfRange::Reject) beyond: a rank below the range is
/// "already due" (e.g. a timestamp in the past, or a virtual time behind
/// the queue's current minimum) and is served with the lowest bucket,
/// while a rank beyond the range means the range was configured too short,
/// which must not be hidden. Every clamp and every rejection is counted in
/// [`PqStats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutOfRange {
    /// Queue the element in the nearest bucket (the lowest for ranks below,
    /// the highest for ranks beyond) and count it. Its position is then
    /// that bucket's: FIFO behind the elements already there.
    Clamp,
    /// Refuse it with [`PqError::OutOfRange`]; the value comes back.
    Reject,
}

/// Parameters of a bucketed queue: `buckets` buckets of `granularity`
/// rank units each, starting at `min_rank`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketConfig {
    /// Number of buckets (≥ 1; [`Ffs`](super::Ffs) allows at most 64).
    pub buckets: usize,
    /// Rank units per bucket (≥ 1). Ranks in one bucket leave in FIFO order.
    pub granularity: u64,
    /// Lowest rank of bucket 0 (for [`Cffs`](super::Cffs): where the moving
    /// range starts).
    pub min_rank: Rank,
    /// Policy for ranks below the range. Default: clamp.
    pub below: OutOfRange,
    /// Policy for ranks beyond the range. Default: reject.
    pub above: OutOfRange,
    /// Elements the arena holds before it first grows (by doubling).
    pub capacity: usize,
}

impl BucketConfig {
    /// `buckets` buckets of one rank each from rank 0, default policies,
    /// no preallocated elements.
    pub fn new(buckets: usize) -> BucketConfig {
        BucketConfig {
            buckets,
            granularity: 1,
            min_rank: 0,
            below: OutOfRange::Clamp,
            above: OutOfRange::Reject,
            capacity: 0,
        }
    }

    /// Sets the granularity.
    pub fn granularity(mut self, g: u64) -> BucketConfig {
        self.granularity = g;
        self
    }

    /// Sets the lowest rank.
    pub fn min_rank(mut self, r: Rank) -> BucketConfig {
        self.min_rank = r;
        self
    }

    /// Sets both out-of-range policies.
    pub fn policy(mut self, below: OutOfRange, above: OutOfRange) -> BucketConfig {
        self.below = below;
        self.above = above;
        self
    }

    /// Sets the initial arena capacity.
    pub fn capacity(mut self, n: usize) -> BucketConfig {
        self.capacity = n;
        self
    }

    /// Checks the parameters for a queue that holds `span` ranges of
    /// `buckets` buckets (2 for [`Cffs`](super::Cffs)) and at most
    /// `max_buckets` buckets. Returns the highest rank of the first span.
    pub(crate) fn validate(
        &self,
        queue: &'static str,
        span: u64,
        max_buckets: usize,
    ) -> Result<Rank, PqConfigError> {
        if self.buckets == 0 || self.buckets > max_buckets {
            return Err(PqConfigError::new(
                queue,
                "buckets",
                self.buckets,
                format!("1..={max_buckets}"),
            ));
        }
        if self.granularity == 0 {
            return Err(PqConfigError::new(queue, "granularity", 0, "1..=2^64-1"));
        }
        let width = (self.buckets as u64)
            .checked_mul(self.granularity)
            .and_then(|w| w.checked_mul(span));
        match width.and_then(|w| self.min_rank.checked_add(w - 1)) {
            // Checked above (with `span` ≥ 1): no step overflows, also for a
            // range that ends at u64::MAX.
            Some(_) => Ok(self.min_rank + (self.buckets as u64 * self.granularity - 1)),
            None => Err(PqConfigError::new(
                queue,
                "buckets × granularity",
                format!(
                    "{} × {} from min_rank {}",
                    self.buckets, self.granularity, self.min_rank
                ),
                "a rank range that fits in u64",
            )),
        }
    }
}

/// Divides by the granularity, with a shift when it is a power of two.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Divider {
    g: u64,
    shift: Option<u32>,
}

impl Divider {
    pub(crate) fn new(g: u64) -> Divider {
        Divider {
            g,
            shift: g.is_power_of_two().then(|| g.trailing_zeros()),
        }
    }

    #[inline]
    pub(crate) fn div(&self, x: u64) -> u64 {
        match self.shift {
            Some(s) => x >> s,
            None => x / self.g,
        }
    }
}

/// Rank → bucket for a queue over the fixed range `min..=max`.
#[derive(Clone, Debug)]
pub(crate) struct FixedRange {
    min: Rank,
    max: Rank,
    /// `max − min`: a rank is in range iff `rank − min` (wrapping) is at
    /// most this, one compare for both sides.
    span: u64,
    last: usize,
    div: Divider,
    below: OutOfRange,
    above: OutOfRange,
    pub(crate) stats: PqStats,
}

impl FixedRange {
    pub(crate) fn new(
        cfg: &BucketConfig,
        queue: &'static str,
        max_buckets: usize,
    ) -> Result<FixedRange, PqConfigError> {
        let max = cfg.validate(queue, 1, max_buckets)?;
        Ok(FixedRange {
            min: cfg.min_rank,
            max,
            span: max - cfg.min_rank,
            last: cfg.buckets - 1,
            div: Divider::new(cfg.granularity),
            below: cfg.below,
            above: cfg.above,
            stats: PqStats::default(),
        })
    }

    /// The bucket for `rank` if it lies in the range, `None` otherwise
    /// (nothing counted: the caller takes [`FixedRange::bucket`] for the
    /// policy). One compare: below `min` the offset wraps past `span`.
    #[inline]
    pub(crate) fn in_range(&self, rank: Rank) -> Option<usize> {
        let offset = rank.wrapping_sub(self.min);
        (offset <= self.span).then(|| self.div.div(offset) as usize)
    }

    /// The bucket for `rank`, applying (and counting) the policy.
    #[inline]
    pub(crate) fn bucket(&mut self, rank: Rank) -> Result<usize, PqError> {
        match self.in_range(rank) {
            Some(b) => Ok(b),
            None => self.outside(rank),
        }
    }

    /// [`FixedRange::bucket`] for a rank outside the range.
    #[cold]
    #[inline(never)]
    fn outside(&mut self, rank: Rank) -> Result<usize, PqError> {
        let refused = PqError::OutOfRange {
            rank,
            min: self.min,
            max: self.max,
        };
        if rank < self.min {
            match self.below {
                OutOfRange::Clamp => {
                    self.stats.clamped_below += 1;
                    Ok(0)
                }
                OutOfRange::Reject => {
                    self.stats.rejected_below += 1;
                    Err(refused)
                }
            }
        } else {
            match self.above {
                OutOfRange::Clamp => {
                    self.stats.clamped_above += 1;
                    Ok(self.last)
                }
                OutOfRange::Reject => {
                    self.stats.rejected_above += 1;
                    Err(refused)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-compare in-range test against the two-compare definition,
    /// at the edges of ranges starting at 0, in the middle and ending at
    /// `u64::MAX`, with granularities a power of two and not: the same
    /// bucket in range, `None` (and nothing counted) outside, and
    /// `bucket` applying and counting each side's policy there.
    #[test]
    fn in_range_is_the_two_sided_test() {
        let edges = |min: Rank, max: Rank| {
            [0, 1, min.wrapping_sub(1), min, min + 1, max - 1, max]
                .into_iter()
                .chain([max.wrapping_add(1), u64::MAX - 1, u64::MAX, min / 2])
        };
        for (min, buckets, g) in [
            (0, 8, 1),
            (100, 8, 1),
            (100, 5, 3),
            (1 << 40, 64, 1 << 20),
            (u64::MAX - 99, 10, 10),
            (u64::MAX - 7, 8, 1),
        ] {
            let cfg = BucketConfig::new(buckets).granularity(g).min_rank(min);
            let clamping = cfg.policy(OutOfRange::Clamp, OutOfRange::Clamp);
            let mut clamp = FixedRange::new(&clamping, "test", 1 << 20).expect("valid");
            let rejecting = cfg.policy(OutOfRange::Reject, OutOfRange::Reject);
            let mut reject = FixedRange::new(&rejecting, "test", 1 << 20).expect("valid");
            let max = min + (buckets as u64 * g - 1);
            for rank in edges(min, max) {
                let inside = rank >= min && rank <= max;
                let want = inside.then(|| ((rank - min) / g) as usize);
                assert_eq!(
                    clamp.in_range(rank),
                    want,
                    "{min}..={max} g {g}: rank {rank}"
                );
                let clamped = if rank < min { 0 } else { buckets - 1 };
                assert_eq!(
                    clamp.bucket(rank),
                    Ok(want.unwrap_or(clamped)),
                    "rank {rank}"
                );
                let refused = PqError::OutOfRange { rank, min, max };
                assert_eq!(reject.bucket(rank), want.ok_or(refused), "rank {rank}");
            }
            let n = edges(min, max).count() as u64;
            let below = edges(min, max).filter(|&r| r < min).count() as u64;
            let above = edges(min, max).filter(|&r| r > max).count() as u64;
            let s = clamp.stats;
            assert_eq!((s.clamped_below, s.clamped_above), (below, above), "{min}");
            let s = reject.stats;
            assert_eq!(
                (s.rejected_below, s.rejected_above),
                (below, above),
                "{min}"
            );
            assert!(below + above < n, "some edges are in range");
        }
    }
}
