//! Earliest-departure-time stamping with exact integer arithmetic.

use crate::units::{Bytes, Nanos, Rate};

/// Picoseconds per nanosecond.
const PS: u128 = 1000;

/// Per-flow EDT stamper: `EDT_i = max(now, EDT_{i−1}) + L_i / R`.
///
/// The previous departure time is kept exactly, as picoseconds plus a
/// remainder in units of `1/R` ps (`8·10¹²·L` divided by `R` leaves a
/// remainder that is carried, never dropped), so a flow paced for hours
/// runs at exactly its rate. The stamp handed out is that exact time
/// rounded **up** to a whole nanosecond, so a packet is never due early.
/// When `now` is later than the previous departure, the carried remainder
/// is reset (the flow was idle: its schedule restarts at `now`).
///
/// The rate can change at any time: packets already stamped keep their
/// stamps, later ones are spaced at the new rate.
///
/// A flow's packets are usually all the same length, so the pacer memoises
/// the last length's spacing as whole picoseconds plus a remainder and
/// adds them with one carry: no 128-bit division per packet (that division
/// was a sixth of the MLTW's cost per packet in `bench shape`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pacer {
    rate: Rate,
    /// Exact previous departure: `ps + rem / rate` picoseconds.
    ps: u128,
    rem: u64,
    /// Memo: `memo_len · 8·10¹² = memo_ps · rate + memo_rem` (0: empty).
    memo_len: Bytes,
    memo_ps: u128,
    memo_rem: u64,
}

/// A saved [`Pacer`] clock (see [`Pacer::checkpoint`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacerClock {
    ps: u128,
    rem: u64,
}

impl Pacer {
    /// A pacer at `rate` that has sent nothing yet.
    pub const fn new(rate: Rate) -> Pacer {
        Pacer {
            rate,
            ps: 0,
            rem: 0,
            memo_len: 0,
            memo_ps: 0,
            memo_rem: 0,
        }
    }

    /// The current rate.
    pub const fn rate(&self) -> Rate {
        self.rate
    }

    /// Changes the rate; applies to packets stamped from now on.
    pub fn set_rate(&mut self, rate: Rate) {
        if rate != self.rate {
            // The remainder is in units of 1/old-rate ps: round it up to a
            // whole picosecond so the change never makes a packet early.
            if self.rem != 0 {
                self.ps += 1;
                self.rem = 0;
            }
            self.rate = rate;
            self.memo_len = 0;
        }
    }

    /// The pacer's clock, to undo a [`Pacer::stamp`] whose packet was
    /// refused after all (the memo is a pure cache and need not be saved).
    #[inline]
    pub fn checkpoint(&self) -> PacerClock {
        PacerClock {
            ps: self.ps,
            rem: self.rem,
        }
    }

    /// Puts the clock back to a [`Pacer::checkpoint`] taken at the same
    /// rate.
    #[inline]
    pub fn restore(&mut self, c: PacerClock) {
        self.ps = c.ps;
        self.rem = c.rem;
    }

    /// Departure time of the previous packet, rounded up to a nanosecond
    /// (zero before the first packet).
    pub fn last(&self) -> Nanos {
        Nanos(ps_to_ns_ceil(self.ps + u128::from(self.rem != 0)))
    }

    /// Stamps a packet of `len` bytes offered at `now` and returns its
    /// departure time, rounded up to a whole nanosecond.
    #[inline]
    pub fn stamp(&mut self, len: Bytes, now: Nanos) -> Nanos {
        let now_ps = u128::from(now.0) * PS;
        if now_ps >= self.ps + u128::from(self.rem != 0) {
            self.ps = now_ps;
            self.rem = 0;
        }
        let r = self.rate.as_bps();
        if len != self.memo_len || len == 0 {
            let num = u128::from(len) * 8_000_000_000_000;
            self.memo_ps = num / u128::from(r);
            // `num % r < r <= u64::MAX`.
            self.memo_rem = (num % u128::from(r)) as u64;
            self.memo_len = len;
        }
        // rem < r and memo_rem < r: at most one carry (u128 sum: no overflow).
        self.ps += self.memo_ps;
        let rem = u128::from(self.rem) + u128::from(self.memo_rem);
        if rem >= u128::from(r) {
            self.ps += 1;
            self.rem = (rem - u128::from(r)) as u64;
        } else {
            self.rem = rem as u64;
        }
        Nanos(ps_to_ns_ceil(self.ps + u128::from(self.rem != 0)))
    }
}

#[inline]
fn ps_to_ns_ceil(ps: u128) -> u64 {
    // Up to 2^64 ps (213 days) a 64-bit division by a constant does it.
    if let Ok(p) = u64::try_from(ps) {
        return p.div_ceil(1000);
    }
    let ns = ps.div_ceil(PS);
    if ns > u128::from(u64::MAX) {
        u64::MAX
    } else {
        ns as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_drift_over_a_long_run() {
        // 1500 B at 7 Gbit/s = 1714.285714... ns: a rounded-up stamp per
        // packet would drift by ~0.7 ns per packet.
        let mut p = Pacer::new(Rate::bps(7_000_000_000));
        let n = 1_000_000u64;
        let mut last = Nanos::ZERO;
        for _ in 0..n {
            last = p.stamp(1500, Nanos::ZERO);
        }
        let exact = (n as u128 * 1500 * 8 * 1_000_000_000).div_ceil(7_000_000_000);
        assert_eq!(u128::from(last.0), exact);
    }

    #[test]
    fn idle_flow_restarts_at_now_and_rate_changes_apply_to_new_packets() {
        let mut p = Pacer::new(Rate::gbit(1));
        assert_eq!(p.stamp(125, Nanos(1000)), Nanos(2000));
        assert_eq!(p.stamp(125, Nanos(1000)), Nanos(3000));
        assert_eq!(p.stamp(125, Nanos(10_000)), Nanos(11_000));
        p.set_rate(Rate::mbit(100));
        assert_eq!(p.stamp(125, Nanos(10_000)), Nanos(21_000));
        assert_eq!(p.last(), Nanos(21_000));
    }

    /// Mixed lengths and odd rates: the memoised spacing gives exactly the
    /// cumulative `Σ L·8·10¹² / R` picoseconds that one big division does.
    #[test]
    fn memoised_spacing_is_exact_with_changing_lengths() {
        for bps in [1u64, 999_983, 7_000_000_000, 99_999_999_967, u64::MAX / 3] {
            let mut p = Pacer::new(Rate::bps(bps));
            let mut x = 0x2545_f491_4f6c_dd1du64;
            let mut bits: u128 = 0;
            for i in 0..5_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Runs of equal lengths with changes in between.
                let len = if i % 7 < 4 {
                    1500
                } else {
                    64 + (x % 9000) as u32
                };
                bits += u128::from(len) * 8;
                let got = p.stamp(len, Nanos::ZERO);
                let exact_ps = bits * 1_000_000_000_000 / u128::from(bps);
                let rem = bits * 1_000_000_000_000 % u128::from(bps);
                let want = (exact_ps + u128::from(rem != 0)).div_ceil(1000);
                assert_eq!(
                    u128::from(got.0),
                    want.min(u128::from(u64::MAX)),
                    "{bps} bit/s, packet {i}"
                );
            }
        }
    }
}
