//! Earliest-departure-time stamping with exact integer arithmetic.

use crate::units::{Bytes, Nanos, Rate};

/// Bits per byte times nanoseconds per second: `len · NS_BITS / R` is the
/// transmission time of `len` bytes at `R` bit/s, in ns.
const NS_BITS: u128 = 8_000_000_000;

/// A clock and a spacing both below `2^62` ns (146 years) add up, with a
/// carry and a rounding nanosecond, to less than 2^63: the stamp's fast
/// path needs no overflow test.
const NO_OVERFLOW_BITS: u32 = 62;

/// Per-flow EDT stamper: `EDT_i = max(now, EDT_{i−1}) + L_i / R`.
///
/// The previous departure time is kept exactly, as whole nanoseconds plus a
/// remainder in units of `1/R` ns (`8·10⁹·L` divided by `R` leaves a
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
/// the last length's spacing as whole nanoseconds plus a remainder and adds
/// them with one carry. The per-packet path is 64-bit only: no division and
/// no 128-bit arithmetic (both cost a sixth of the MLTW's per-packet work
/// each in `bench shape`); 128-bit arithmetic is left to a length or rate
/// change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pacer {
    rate: Rate,
    /// Exact previous departure: `ns + rem / rate` nanoseconds
    /// (`rem < rate`).
    ns: u64,
    rem: u64,
    /// `ns + (rem != 0)` (saturating): the previous stamp, kept so the
    /// idle test costs one compare.
    due: u64,
    /// Memo: `memo_len · 8·10⁹ = memo_ns · rate + memo_rem` (`memo_ns`
    /// saturates at `u64::MAX`). Always true, so one compare of the length
    /// decides: an empty memo is the zero-length packet's (0, 0).
    memo_len: Bytes,
    memo_ns: u64,
    memo_rem: u64,
    /// `rate − memo_rem` (`> 0`): a remainder `>= memo_gap` carries a
    /// nanosecond when `memo_rem` is added, with no overflow to test.
    memo_gap: u64,
}

/// A saved [`Pacer`] clock (see [`Pacer::checkpoint`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacerClock {
    ns: u64,
    rem: u64,
    due: u64,
}

impl Pacer {
    /// A pacer at `rate` that has sent nothing yet.
    pub const fn new(rate: Rate) -> Pacer {
        Pacer {
            rate,
            ns: 0,
            rem: 0,
            due: 0,
            memo_len: 0,
            memo_ns: 0,
            memo_rem: 0,
            memo_gap: rate.as_bps(),
        }
    }

    /// The current rate.
    pub const fn rate(&self) -> Rate {
        self.rate
    }

    /// Changes the rate; applies to packets stamped from now on.
    pub fn set_rate(&mut self, rate: Rate) {
        if rate != self.rate {
            // The remainder is in units of 1/old-rate ns: convert it to
            // units of 1/new-rate ns, rounding up so the change never makes
            // a packet early (`rem < old` so the result is `<= new`).
            let (old, new) = (u128::from(self.rate.as_bps()), u128::from(rate.as_bps()));
            let rem = (u128::from(self.rem) * new).div_ceil(old);
            if rem >= new {
                self.ns = self.ns.saturating_add(1);
                self.rem = 0;
            } else {
                // `rem < new <= u64::MAX`.
                self.rem = rem as u64;
            }
            self.rate = rate;
            self.due = self.ns.saturating_add(u64::from(self.rem != 0));
            self.memo_len = 0;
            self.memo_ns = 0;
            self.memo_rem = 0;
            self.memo_gap = rate.as_bps();
        }
    }

    /// The pacer's clock, to undo a [`Pacer::stamp`] whose packet was
    /// refused after all (the memo is a pure cache and need not be saved).
    #[inline]
    pub fn checkpoint(&self) -> PacerClock {
        PacerClock {
            ns: self.ns,
            rem: self.rem,
            due: self.due,
        }
    }

    /// The clock's exact part (whole ns, remainder): a checkpoint of two
    /// words for [`Pacer::rewind`] (the rounded stamp is derived from them).
    #[inline(always)]
    pub(crate) fn clock_parts(&self) -> (u64, u64) {
        (self.ns, self.rem)
    }

    /// Sets the clock back to [`Pacer::clock_parts`] taken at the same
    /// rate.
    #[inline]
    pub(crate) fn rewind(&mut self, (ns, rem): (u64, u64)) {
        self.ns = ns;
        self.rem = rem;
        self.due = ns.saturating_add(u64::from(rem != 0));
    }

    /// Sets the clock to a [`Pacer::checkpoint`] or a [`Pacer::peek`]
    /// taken at the same rate.
    #[inline]
    pub fn restore(&mut self, c: PacerClock) {
        self.ns = c.ns;
        self.rem = c.rem;
        self.due = c.due;
    }

    /// Moves the clock forward to `t` if it is earlier: the next packet is
    /// spaced from `t` (as if the previous one had departed then), unless
    /// it is offered later still.
    pub(crate) fn hold_until(&mut self, t: Nanos) {
        // The exact clock is `ns + rem / rate < ns + 1`: later than it is
        // later than `ns`.
        if t.0 > self.ns {
            self.ns = t.0;
            self.rem = 0;
            self.due = t.0;
        }
    }

    /// Departure time of the previous packet, rounded up to a nanosecond
    /// (zero before the first packet).
    pub fn last(&self) -> Nanos {
        Nanos(self.due)
    }

    /// Stamps a packet of `len` bytes offered at `now` and returns its
    /// departure time, rounded up to a whole nanosecond.
    #[inline]
    pub fn stamp(&mut self, len: Bytes, now: Nanos) -> Nanos {
        let (edt, c) = self.peek(len, now);
        self.restore(c);
        edt
    }

    /// What [`Pacer::stamp`] would return, and the clock it would leave,
    /// without moving the clock (only the memo of the spacing changes):
    /// [`Pacer::restore`] the clock to accept the stamp.
    #[inline]
    pub fn peek(&mut self, len: Bytes, now: Nanos) -> (Nanos, PacerClock) {
        // `now >= ceil(previous departure)`: the flow was idle.
        let (ns, rem) = if now.0 >= self.due {
            (now.0, 0)
        } else {
            (self.ns, self.rem)
        };
        if len != self.memo_len {
            self.memoise(len);
        }
        // rem < r and memo_rem < r: the true sum is < 2r, so at most one
        // carry, exactly when `rem >= r − memo_rem` (then `rem − gap` is
        // the sum less r; else the sum is below r and fits).
        let carry = rem >= self.memo_gap;
        let rem = if carry {
            rem - self.memo_gap
        } else {
            rem + self.memo_rem
        };
        let frac = u64::from(rem != 0);
        let step = self.memo_ns;
        // Both below 2^62: `ns + step + carry + frac < 2^63`, no overflow
        // is possible, so one test replaces three checked additions.
        let (ns, due) = if (ns | step) >> NO_OVERFLOW_BITS == 0 {
            let ns = ns + step + u64::from(carry);
            (ns, ns + frac)
        } else {
            Self::advance_saturating(ns, step, carry, frac)
        };
        (Nanos(due), PacerClock { ns, rem, due })
    }

    /// `ns + step + carry` and that plus `frac`, saturating at `u64::MAX`
    /// (a clock that far out stays there); exact when nothing overflows.
    #[cold]
    #[inline(never)]
    fn advance_saturating(ns: u64, step: u64, carry: bool, frac: u64) -> (u64, u64) {
        let ns = ns.saturating_add(step).saturating_add(u64::from(carry));
        (ns, ns.saturating_add(frac))
    }

    /// Spacing of a `len`-byte packet: whole ns and remainder.
    #[cold]
    fn memoise(&mut self, len: Bytes) {
        let r = u128::from(self.rate.as_bps());
        let num = u128::from(len) * NS_BITS;
        self.memo_ns = u64::try_from(num / r).unwrap_or(u64::MAX);
        // `num % r < r <= u64::MAX`.
        self.memo_rem = (num % r) as u64;
        self.memo_gap = self.rate.as_bps() - self.memo_rem;
        self.memo_len = len;
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

    /// The memo is checked by length alone, so an emptied memo must be the
    /// zero-length packet's: a zero-length packet right after a rate
    /// change (or first) takes no time, and the next real packet is spaced
    /// at the new rate from the previous departure.
    #[test]
    fn zero_length_packets_take_no_time_after_a_rate_change() {
        let mut p = Pacer::new(Rate::gbit(1));
        assert_eq!(p.stamp(0, Nanos(500)), Nanos(500));
        assert_eq!(p.stamp(125, Nanos(500)), Nanos(1500));
        p.set_rate(Rate::mbit(100));
        assert_eq!(p.stamp(0, Nanos(500)), Nanos(1500));
        assert_eq!(p.stamp(125, Nanos(500)), Nanos(11_500));
        p.set_rate(Rate::gbit(1));
        assert_eq!(p.stamp(125, Nanos(500)), Nanos(12_500));
        assert_eq!(p.stamp(0, Nanos(500)), Nanos(12_500));
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

    /// Across the fast path's bound (a clock or a spacing at 2^62 ns) and up
    /// to `u64::MAX`: stamps equal one big division (saturated at
    /// `u64::MAX`), whichever path each addition took; and a rewind to
    /// [`Pacer::clock_parts`] gives back the clock a stamp moved (the
    /// refused filing's undo).
    #[test]
    fn stamps_are_exact_across_the_fast_paths_bound() {
        for bps in [7_000_000_000u64, 999_983, 1] {
            for t0 in [(1u64 << 62) - 5_000, u64::MAX - 20_000_000_000_000] {
                let mut p = Pacer::new(Rate::bps(bps));
                // Idle at `t0`: the schedule restarts there.
                assert_eq!(p.stamp(0, Nanos(t0)), Nanos(t0));
                let mut bits: u128 = 0;
                for i in 0..40u32 {
                    let len = 1 + (i % 3) * 700;
                    let (parts, before) = (p.clock_parts(), p.last());
                    let undone = p.stamp(len, Nanos(t0));
                    p.rewind(parts);
                    assert_eq!(p.last(), before, "rewind, {bps} bit/s, packet {i}");
                    let got = p.stamp(len, Nanos(t0));
                    assert_eq!(got, undone, "after a rewind, packet {i}");
                    bits += u128::from(len) * 8;
                    let exact = u128::from(t0) + (bits * 1_000_000_000).div_ceil(u128::from(bps));
                    assert_eq!(
                        u128::from(got.0),
                        exact.min(u128::from(u64::MAX)),
                        "{bps} bit/s from {t0}, packet {i}"
                    );
                }
            }
        }
    }

    /// Rates above 2^63 bit/s, where a remainder and the memoised one can
    /// each exceed half of `u64`: enough 9000-byte packets that the carried
    /// remainder passes the rate many times, against one big division.
    #[test]
    fn the_carry_is_exact_at_rates_above_two_to_the_63() {
        for bps in [u64::MAX, u64::MAX - 12_345, (1u64 << 63) + 1] {
            let mut p = Pacer::new(Rate::bps(bps));
            let mut bits: u128 = 0;
            for i in 0..300_000u32 {
                let len = if i % 5 == 4 { 8_999 } else { 9_000 };
                bits += u128::from(len) * 8;
                let got = p.stamp(len, Nanos::ZERO);
                let exact_ps = bits * 1_000_000_000_000 / u128::from(bps);
                let rem = bits * 1_000_000_000_000 % u128::from(bps);
                let want = (exact_ps + u128::from(rem != 0)).div_ceil(1000);
                assert_eq!(u128::from(got.0), want, "{bps} bit/s, packet {i}");
            }
        }
    }
}
