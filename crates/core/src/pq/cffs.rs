//! `Cffs`: circular hierarchical find-first-set over a moving rank range.

use super::arena::Arena;
use super::range::{BucketConfig, Divider, OutOfRange};
use super::{Handle, IntPq, PqConfigError, PqError, PqStats, PushError, Rank};
use crate::bitmap::HierBitmap;

/// Circular hierarchical FFS queue (Eiffel's cFFS) for ranks that move
/// forward, such as timestamps or virtual times.
///
/// Buckets are aligned on multiples of the granularity `g`: rank `r` falls
/// in *absolute bucket* `r / g`. The queue holds two halves of `n` buckets,
/// each with its own [`HierBitmap`] (`ceil(log64 n)` levels): the
/// *primary* half covers absolute buckets `base..base+n`, the *buffer* half
/// `base+n..base+2n`. Ranks `base·g ..= (base+2n)·g − 1` are accepted
/// (see [`Cffs::range`]).
///
/// # Moving the range
/// The range only moves forward, in steps of `n` buckets, so bucket
/// boundaries never shift:
/// - when a pop (or a push beyond the buffer) finds the primary half empty
///   and the buffer half not, the halves swap roles in O(1) and `base`
///   advances by `n` — the old primary, now empty, becomes the new buffer;
/// - when a push beyond the buffer finds the whole queue empty, `base`
///   jumps forward (by a multiple of `n`) so that the rank lands in the
///   primary half.
///
/// A push never moves the range for a rank below it, and an empty queue is
/// not re-anchored backwards.
///
/// # Out-of-range ranks
/// After any move, a rank still below `base·g` or beyond the buffer is
/// handled by the [`OutOfRange`] policy of its side (default: clamp below,
/// reject beyond): clamped ranks go to the first bucket of the primary half
/// or the last bucket of the buffer half, and are counted in
/// [`PqStats`]; rejected ones come back with [`PqError::OutOfRange`]
/// naming the accepted ranks at that moment.
///
/// # Ordering
/// Increasing `(absolute bucket, seq)` where the absolute bucket is
/// `rank / g`, or the bucket the rank was clamped to — exact `(rank, seq)`
/// order when `g = 1` and nothing is clamped. Used as a shaper, an element
/// can thus leave up to `g − 1` rank units before its rank.
#[derive(Clone, Debug)]
pub struct Cffs<V> {
    halves: [HierBitmap; 2],
    /// `2n` bucket lists: half `h`, bucket `k` is list `h·n + k`.
    arena: Arena<V>,
    primary: usize,
    /// Absolute bucket of the primary half's bucket 0.
    base: u64,
    n: usize,
    g: u64,
    div: Divider,
    below: OutOfRange,
    above: OutOfRange,
    stats: PqStats,
    moves: u64,
    /// Per half, a lower bound of its first non-empty bucket (pushes lower
    /// it, pops set it to the bucket served; removals only raise the
    /// minimum): the next pop looks there first.
    hint: [usize; 2],
}

impl<V> Cffs<V> {
    /// Largest `n` (buckets per half).
    pub const MAX_BUCKETS: usize = (u32::MAX / 2) as usize;

    /// A queue of two halves of `cfg.buckets` buckets; the range starts at
    /// the bucket holding `cfg.min_rank`.
    pub fn new(cfg: BucketConfig) -> Result<Cffs<V>, PqConfigError> {
        cfg.validate("Cffs", 2, Self::MAX_BUCKETS)?;
        let div = Divider::new(cfg.granularity);
        Ok(Cffs {
            halves: [HierBitmap::new(cfg.buckets), HierBitmap::new(cfg.buckets)],
            arena: Arena::new(2 * cfg.buckets, cfg.capacity),
            primary: 0,
            base: div.div(cfg.min_rank),
            n: cfg.buckets,
            g: cfg.granularity,
            div,
            below: cfg.below,
            above: cfg.above,
            stats: PqStats::default(),
            moves: 0,
            hint: [0; 2],
        })
    }

    /// Ranks accepted without clamping now: `(min, max)`, inclusive.
    pub fn range(&self) -> (Rank, Rank) {
        let end = self.base.saturating_add(2 * self.n as u64);
        let max = end.checked_mul(self.g).map_or(u64::MAX, |e| e - 1);
        (self.base * self.g, max)
    }

    /// How many times the range has moved forward (swaps and jumps).
    pub fn moves(&self) -> u64 {
        self.moves
    }

    /// Bitmap levels per half: `ceil(log64 n)`, at least 1.
    pub fn levels(&self) -> usize {
        self.halves[0].depth()
    }

    #[inline]
    fn swap(&mut self) {
        self.primary ^= 1;
        self.base += self.n as u64;
        self.moves += 1;
    }

    fn out_of_range(&mut self, rank: Rank, below: bool) -> PqError {
        if below {
            self.stats.rejected_below += 1;
        } else {
            self.stats.rejected_above += 1;
        }
        let (min, max) = self.range();
        PqError::OutOfRange { rank, min, max }
    }

    /// The half and bucket for `rank`, moving the range and applying the
    /// policy.
    #[inline]
    fn locate(&mut self, rank: Rank) -> Result<(usize, usize), PqError> {
        let n = self.n as u64;
        let abs = self.div.div(rank);
        // Fast path: inside the current two halves (one comparison covers
        // both sides: a rank below `base` wraps to a huge offset).
        let off = abs.wrapping_sub(self.base);
        if off < 2 * n {
            let off = off as usize;
            return Ok(if off < self.n {
                (self.primary, off)
            } else {
                (self.primary ^ 1, off - self.n)
            });
        }
        if abs < self.base {
            return match self.below {
                OutOfRange::Clamp => {
                    self.stats.clamped_below += 1;
                    Ok((self.primary, 0))
                }
                OutOfRange::Reject => Err(self.out_of_range(rank, true)),
            };
        }
        let mut local = abs - self.base;
        if local >= 2 * n && self.halves[self.primary].none() {
            if self.halves[self.primary ^ 1].none() {
                // Empty queue: jump forward, keeping buckets aligned.
                self.base = abs - local % n;
                self.moves += 1;
            } else {
                self.swap();
            }
            local = abs - self.base;
        }
        if local >= 2 * n {
            match self.above {
                OutOfRange::Clamp => {
                    self.stats.clamped_above += 1;
                    local = 2 * n - 1;
                }
                OutOfRange::Reject => return Err(self.out_of_range(rank, false)),
            }
        }
        let local = local as usize;
        Ok(if local < self.n {
            (self.primary, local)
        } else {
            (self.primary ^ 1, local - self.n)
        })
    }
}

impl<V> IntPq<V> for Cffs<V> {
    #[inline]
    fn push(&mut self, rank: Rank, value: V) -> Result<Handle, PushError<V>> {
        let (half, k) = match self.locate(rank) {
            Ok(l) => l,
            Err(error) => return Err(PushError { error, value }),
        };
        let (h, was_empty) = self.arena.push_back(half * self.n + k, rank, value)?;
        if was_empty {
            self.halves[half].set_in_range(k);
        }
        self.hint[half] = self.hint[half].min(k);
        Ok(h)
    }

    #[inline]
    fn pop_min(&mut self) -> Option<(Rank, V)> {
        let p = self.primary;
        let k = match self.halves[p].first_set_from(self.hint[p]) {
            Some(k) => k,
            None => {
                let k = self.halves[p ^ 1].first_set_from(self.hint[p ^ 1])?;
                self.swap();
                k
            }
        };
        let p = self.primary;
        self.hint[p] = k;
        let (rank, value, now_empty) = self.arena.pop_front(p * self.n + k)?;
        if now_empty {
            self.halves[p].clear_in_range(k);
        }
        Some((rank, value))
    }

    fn peek_min_rank(&self) -> Option<Rank> {
        let p = self.primary;
        let list = match self.halves[p].first_set() {
            Some(k) => p * self.n + k,
            None => (p ^ 1) * self.n + self.halves[p ^ 1].first_set()?,
        };
        self.arena.front_rank(list)
    }

    fn remove(&mut self, handle: Handle) -> Option<V> {
        let (list, value, now_empty) = self.arena.remove(handle)?;
        if now_empty {
            self.halves[list / self.n].clear(list % self.n);
        }
        Some(value)
    }

    fn len(&self) -> usize {
        self.arena.len()
    }

    fn memory_bytes(&self) -> usize {
        self.arena.memory_bytes() + self.halves[0].memory_bytes() + self.halves[1].memory_bytes()
    }

    fn stats(&self) -> PqStats {
        self.stats
    }
}
