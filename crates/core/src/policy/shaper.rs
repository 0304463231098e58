//! The tree's one shaper (a cFFS over release times with an exact spill
//! heap) and the rate limiter's exact virtual clock.

use super::member::Slot;
use crate::pq::BucketConfig;
use crate::pq::{ExactCffs, Filed};
use crate::units::Rate;

/// The one shaper of the tree: an [`ExactCffs`] over release times (unit
/// `unit` ns) whose spill takes anything outside its window (beyond its
/// horizon, or below a window that moved past `now`), so a release is
/// never early and late by less than one unit.
#[derive(Clone, Debug)]
pub(super) struct Shaper {
    pub(super) q: ExactCffs<u32>,
    pub(super) unit: u64,
}

impl Shaper {
    /// `buckets` per half (validated: 2..=MAX_SHAPER_BUCKETS) of `unit` ns.
    pub(super) fn new(buckets: usize, unit: u64) -> Shaper {
        // Both sides spill: below the window too (an empty queue's jump,
        // or a swap on a far push, can leave the window's start later than
        // `now`; a clamped rank would then wait behind a later one).
        let q = ExactCffs::new(BucketConfig::new(buckets), true)
            .unwrap_or_else(|_| unreachable!("validated shaper_buckets"));
        Shaper { q, unit }
    }
    #[inline]
    pub(super) fn push(&mut self, t: u64, r: u32) -> Slot {
        match self.q.push(t.div_ceil(self.unit), r) {
            Ok(filed) => Slot::Parked(filed),
            Err(_) => unreachable!("the shaper holds fewer than 2^31 members"),
        }
    }
    /// Pops the first member whose release time has come.
    #[inline]
    pub(super) fn pop_due(&mut self, now: u64) -> Option<u32> {
        self.q.pop_at_most(now / self.unit).map(|p| p.1)
    }
    pub(super) fn next(&self) -> Option<u64> {
        Some(self.q.peek_min_rank()?.saturating_mul(self.unit))
    }
    pub(super) fn remove(&mut self, filed: Filed) {
        self.q.remove(filed);
    }
}

/// The rate limiter's clock after sending `len` bytes at `now`:
/// `T = max(T, now − credit) + len/rate`, the member sending while
/// `T ≤ now` (HTB's "tokens not negative"). `credit` is `cburst/rate`
/// (rounded down) when given, but never less than one maximum packet
/// `L_max/rate`, which is also the default: a
/// member served late (the link was busy with another packet when it
/// became eligible) keeps that much, so its long-run rate is its limit even
/// though releases fall on packet boundaries. Over any interval of length
/// `t` between two of its sends it sends at most `rate·t + credit·rate`
/// bytes plus the last packet (every packet's time is rounded up).
///
/// The clock is kept exactly: `T = t − ahead/rate` ns, where `t` is whole
/// ns rounded up and `ahead < rate` (bits·ns/s) carries what the rounding
/// added, so the long-run rate is the limit itself (not `len/ceil(len/rate)`:
/// 64 B at 100 Gbit/s would be 6 ns instead of 5.12 ns, −15 %). Never early:
/// `t` is never below the exact clock. Returns the new `(t, ahead)`.
#[inline]
pub(super) fn next_tx(
    t: u64,
    ahead: u64,
    now: u64,
    rate: Rate,
    len: u64,
    credit: u64,
) -> (u64, u64) {
    let floor = now.saturating_sub(credit);
    // The exact clock is in (t − 1, t] (== t when `ahead` is 0), so an
    // integer `floor >= t` is at or past it.
    if floor >= t {
        advance(floor, 0, rate, len)
    } else {
        advance(t, ahead, rate, len)
    }
}

/// The exact clock `t − ahead/rate` ns plus `len` bytes at `rate`, as
/// `(t', ahead')` with `t'` rounded up and `ahead' < rate` (saturating).
#[inline]
pub(super) fn advance(t: u64, ahead: u64, rate: Rate, len: u64) -> (u64, u64) {
    let bps = u128::from(rate.as_bps().max(1));
    let bits_ns = u128::from(len) * 8_000_000_000;
    let ahead = u128::from(ahead);
    if bits_ns <= ahead {
        // Still inside the nanosecond `t` already stands for.
        return (t, u64::try_from(ahead - bits_ns).unwrap_or(0));
    }
    let d = bits_ns - ahead;
    let step = d.div_ceil(bps);
    // `step·bps − d < bps <= u64::MAX`.
    let rest = u64::try_from(step * bps - d).unwrap_or(0);
    match u64::try_from(step).ok().and_then(|s| t.checked_add(s)) {
        Some(t) => (t, rest),
        None => (u64::MAX, 0),
    }
}

/// `bytes` at `rate` in ns, rounded down (a credit never exceeds the bytes
/// it stands for), saturating.
pub(super) fn credit_ns(rate: Rate, bytes: u64) -> u64 {
    let t = u128::from(bytes) * 8_000_000_000 / u128::from(rate.as_bps().max(1));
    u64::try_from(t).unwrap_or(u64::MAX)
}
