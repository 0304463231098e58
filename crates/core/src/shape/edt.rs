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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pacer {
    rate: Rate,
    /// Exact previous departure: `ps + rem / rate` picoseconds.
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
        }
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
        let r = u128::from(self.rate.as_bps());
        let num = u128::from(len) * 8_000_000_000_000 + u128::from(self.rem);
        self.ps += num / r;
        // `num % r < r <= u64::MAX`.
        self.rem = (num % r) as u64;
        Nanos(ps_to_ns_ceil(self.ps + u128::from(self.rem != 0)))
    }
}

#[inline]
fn ps_to_ns_ceil(ps: u128) -> u64 {
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
}
