//! The emulated link: a leaky bucket with exact integer arithmetic.
//!
//! The arbiter releases a packet only when the emulated link is idle, so the
//! packets leave at the configured rate however fast the real output is —
//! the queue builds up in the scheduler, where the algorithm decides who goes
//! next, not in a NIC ring.
//!
//! The time at which the link becomes free is kept as whole nanoseconds plus
//! a remainder in units of `1/rate` ns (`rem < bps`), so a transmission of
//! `len` bytes adds exactly `len·8·10⁹ / bps` ns with no rounding ever
//! accumulated. PSPAT's kernel code instead keeps picoseconds per byte
//! truncated to an integer in `ns << 10` units, which at 40 Gbit/s is
//! 204/1024 ns instead of 204.8/1024 ns per byte — a link 0.4 % too fast.
//! Here the error over any run is below one nanosecond.

use pktsched_core::{Bytes, Nanos, Rate};

/// An emulated link of a fixed rate.
#[derive(Clone, Debug)]
pub struct Link {
    rate: Rate,
    /// Whole nanoseconds at which the link is free.
    free_ns: u64,
    /// Fraction of a nanosecond, in units of `1/bps` ns.
    rem: u64,
    /// Bytes sent since the link last went idle (for statistics).
    sent_bytes: u64,
    /// Memo of the last length's transmission time:
    /// `memo_len · 8·10⁹ = memo_ns · bps + memo_rem` (`memo_len` 0: empty).
    memo_len: Bytes,
    memo_ns: u64,
    memo_rem: u64,
    /// Memo of [`Link::starts_by`]'s bound: `bound_ns` is the transmission
    /// time of `bound_len` bytes rounded up (`bound_len` 0: empty).
    bound_len: Bytes,
    bound_ns: u64,
}

impl Link {
    /// An idle link of rate `rate`.
    pub fn new(rate: Rate) -> Link {
        Link {
            rate,
            free_ns: 0,
            rem: 0,
            sent_bytes: 0,
            memo_len: 0,
            memo_ns: 0,
            memo_rem: 0,
            bound_len: 0,
            bound_ns: 0,
        }
    }

    /// The link's rate.
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// Changes the rate for packets sent from now on; the packet in
    /// transmission keeps its end time (the fraction of a nanosecond is
    /// rounded up, so it never ends early).
    pub fn set_rate(&mut self, rate: Rate) {
        if rate == self.rate {
            return;
        }
        self.free_ns = self.free_at().0;
        self.rem = 0;
        self.rate = rate;
        self.memo_len = 0;
        self.bound_len = 0;
    }

    /// The first whole nanosecond at which the link is free (rounded up, so
    /// a packet released then never overlaps the previous one).
    pub fn free_at(&self) -> Nanos {
        Nanos(self.free_ns.saturating_add(u64::from(self.rem > 0)))
    }

    /// `true` if a packet may start at `now`.
    #[inline]
    pub fn ready(&self, now: Nanos) -> bool {
        self.free_at() <= now
    }

    /// How many packets of at most `max_len` bytes each, sent back to
    /// back from now on, are sure to start by `by` (each would find
    /// [`Link::ready`]`(by)` true): 0 if the link is busy past `by`, else
    /// `1 + ⌊(by − free_at) / ⌈tx_time(max_len)⌉⌋` (saturating); 1 if
    /// `max_len` is 0 (no bound known). A lower bound: the packets that
    /// follow are checked again.
    #[inline]
    pub fn starts_by(&mut self, by: Nanos, max_len: Bytes) -> usize {
        let free = self.free_at();
        if free > by {
            return 0;
        }
        let slack = by.0 - free.0;
        if max_len == 0 {
            return 1;
        }
        if max_len != self.bound_len {
            self.bound_ns = self.rate.tx_time(u64::from(max_len)).0;
            self.bound_len = max_len;
        }
        // Packets shorter than a nanosecond at this rate: count them as
        // taking one (still a lower bound).
        let per = self.bound_ns.max(1);
        if slack < per {
            return 1;
        }
        usize::try_from(slack / per)
            .unwrap_or(usize::MAX)
            .saturating_add(1)
    }

    /// Occupies the link with `len` bytes, starting when it is free.
    #[inline]
    pub fn send(&mut self, len: Bytes) {
        let bps = self.rate.as_bps();
        // Packets mostly repeat lengths: divide once per new length, then
        // add the memoised quotient and remainder with one carry.
        if len != self.memo_len || len == 0 {
            let num = u128::from(len) * 8_000_000_000;
            // `len <= 2^32` and `bps >= 1`: the quotient is below 2^66;
            // saturate the unreachable top instead of wrapping.
            self.memo_ns = u64::try_from(num / u128::from(bps)).unwrap_or(u64::MAX);
            self.memo_rem = (num % u128::from(bps)) as u64;
            self.memo_len = len;
        }
        // rem < bps and memo_rem < bps: at most one carry.
        let rem = u128::from(self.rem) + u128::from(self.memo_rem);
        let carry = u64::from(rem >= u128::from(bps));
        self.rem = (rem - u128::from(carry) * u128::from(bps)) as u64;
        self.free_ns = self
            .free_ns
            .saturating_add(self.memo_ns)
            .saturating_add(carry);
        self.sent_bytes = self.sent_bytes.saturating_add(u64::from(len));
    }

    /// Occupies the link with packets of `bytes` bytes in all, sent back
    /// to back: the same end time (to the fraction of a nanosecond) as a
    /// [`Link::send`] per packet, with one division for the run.
    #[inline]
    pub fn send_run(&mut self, bytes: u64) {
        let bps = u128::from(self.rate.as_bps());
        // bytes < 2^64: the numerator stays below 2^97.
        let num = u128::from(self.rem) + u128::from(bytes) * 8_000_000_000;
        let whole = u64::try_from(num / bps).unwrap_or(u64::MAX);
        self.rem = (num % bps) as u64;
        self.free_ns = self.free_ns.saturating_add(whole);
        self.sent_bytes = self.sent_bytes.saturating_add(bytes);
    }

    /// The scheduler had nothing to send at `now`: if the link finished
    /// before `now`, it starts again from `now` (idle time is not credit).
    #[inline]
    pub fn idle(&mut self, now: Nanos) {
        if self.free_at() < now {
            self.free_ns = now.0;
            self.rem = 0;
        }
    }

    /// Bytes sent in total.
    pub fn sent_bytes(&self) -> u64 {
        self.sent_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A greedy sender at 40 Gbit/s: the link's clock after N packets equals
    /// the exact transmission time of all of them, to the nanosecond.
    #[test]
    fn greedy_40gbit_is_exact_over_a_long_run() {
        for (rate, len) in [
            (Rate::gbit(40), 1500u32),
            (Rate::gbit(40), 64),
            (Rate::bps(999_999_937), 1514),
            (Rate::mbit(1), 60),
        ] {
            let mut link = Link::new(rate);
            let mut now = Nanos(0);
            let n: u64 = 1_000_000;
            for _ in 0..n {
                // The arbiter may look at any time; release only when ready.
                if !link.ready(now) {
                    now = link.free_at();
                }
                assert!(link.ready(now));
                link.send(len);
            }
            let exact = (u128::from(n) * u128::from(len) * 8_000_000_000)
                .div_ceil(u128::from(rate.as_bps()));
            assert_eq!(u128::from(link.free_at().0), exact, "{rate:?} {len}");
            // Rate error: below one nanosecond over the run, i.e. far below 0.01 %.
            let err = (link.free_at().0 as f64 - exact as f64).abs() / exact as f64;
            assert!(err < 1e-4);
        }
    }

    /// A rate change paces later packets at the new rate and never ends the
    /// packet in transmission early.
    #[test]
    fn set_rate_applies_to_later_packets() {
        let mut link = Link::new(Rate::mbit(3));
        link.send(1); // 8 bits at 3 Mbit/s: 2666.67 ns
        assert_eq!(link.free_at(), Nanos(2667));
        link.set_rate(Rate::mbit(8));
        assert_eq!(link.rate(), Rate::mbit(8));
        assert_eq!(link.free_at(), Nanos(2667));
        link.send(1000); // 8000 bits at 8 Mbit/s: 1 ms
        assert_eq!(link.free_at(), Nanos(2667 + 1_000_000));
    }

    /// Changing lengths (the memo is refilled) stay exact too.
    #[test]
    fn mixed_lengths_are_exact() {
        for bps in [1u64, 999_999_937, 40_000_000_000, u64::MAX / 5] {
            let mut link = Link::new(Rate::bps(bps));
            let mut bits: u128 = 0;
            for i in 0..10_000u32 {
                let len = if i % 5 < 3 {
                    1500
                } else {
                    60 + (i * 7919) % 9000
                };
                link.send(len);
                bits += u128::from(len) * 8;
                let exact = (bits * 1_000_000_000).div_ceil(u128::from(bps));
                assert_eq!(
                    u128::from(link.free_at().0),
                    exact.min(u128::from(u64::MAX)),
                    "{bps} bit/s, packet {i}"
                );
            }
        }
    }

    /// A run sent at once ends exactly where the same packets sent one by
    /// one end, remainder included, whatever the rate and lengths.
    #[test]
    fn a_run_ends_where_its_packets_end() {
        for bps in [
            1u64,
            3_000_000_000,
            999_999_937,
            40_000_000_000,
            u64::MAX / 5,
        ] {
            let (mut one, mut run) = (Link::new(Rate::bps(bps)), Link::new(Rate::bps(bps)));
            for k in 0..200u32 {
                let lens: Vec<u32> = (0..k % 17)
                    .map(|i| 60 + (i * 7919 + k * 31) % 9000)
                    .collect();
                for &l in &lens {
                    one.send(l);
                }
                run.send_run(lens.iter().map(|&l| u64::from(l)).sum());
                assert_eq!(
                    (one.free_ns, one.rem),
                    (run.free_ns, run.rem),
                    "{bps} run {k}"
                );
                assert_eq!(one.free_at(), run.free_at());
                assert_eq!(one.sent_bytes(), run.sent_bytes());
            }
        }
    }

    /// What the truncating kernel arithmetic would do at 40 Gbit/s: 0.4 % fast.
    #[test]
    fn truncated_ps_per_byte_would_run_fast() {
        let rate = Rate::gbit(40);
        let exact_ns_shift10 = 8u128 * 1_000_000_000 * 1024 * 1000 / u128::from(rate.as_bps());
        let truncated = (8u128 * 1_000_000_000 * 1024) / u128::from(rate.as_bps());
        // 204.8 vs 204 (ns << 10 per byte)
        assert_eq!(exact_ns_shift10, 204_800);
        assert_eq!(truncated, 204);
        let mut link = Link::new(rate);
        for _ in 0..1000 {
            link.send(1500);
        }
        let kernel_ns = 1000u128 * 1500 * truncated / 1024;
        assert!(u128::from(link.free_at().0) > kernel_ns);
        let fast = 1.0 - kernel_ns as f64 / link.free_at().0 as f64;
        assert!(fast > 0.003, "{fast}");
    }

    #[test]
    fn idle_time_is_not_credit() {
        let mut link = Link::new(Rate::gbit(1));
        link.send(125); // 1000 ns
        assert_eq!(link.free_at(), Nanos(1000));
        link.idle(Nanos(500)); // still busy: no change
        assert_eq!(link.free_at(), Nanos(1000));
        link.idle(Nanos(5000));
        assert_eq!(link.free_at(), Nanos(5000));
        link.send(125);
        assert_eq!(link.free_at(), Nanos(6000));
        assert!(!link.ready(Nanos(5999)));
        assert!(link.ready(Nanos(6000)));
        assert_eq!(link.sent_bytes(), 250);
    }

    /// `starts_by` never promises a start the link would refuse: every
    /// packet of the promised run, of any length up to the bound, finds the
    /// link ready; when the bound's transmission time is a whole number of
    /// nanoseconds, one more packet of the bound's length would not.
    #[test]
    fn starts_by_is_a_tight_lower_bound() {
        for (bps, max_len) in [
            (3_000_000_000u64, 1500u32),
            (10_000_000_000_000, 64),
            (999_999_937, 1514),
            (1_000_000, 60),
        ] {
            let rate = Rate::bps(bps);
            for (start_len, lead) in [(0u32, 0u64), (700, 0), (1, 5_000), (1500, 123_457)] {
                for lens in [[max_len; 4], [1, max_len, max_len / 2, 7]] {
                    let mut link = Link::new(rate);
                    link.send(start_len);
                    let by = Nanos(link.free_at().0.saturating_sub(3) + lead);
                    let n = link.starts_by(by, max_len);
                    assert_eq!(n == 0, !link.ready(by));
                    for i in 0..n.min(10_000) {
                        assert!(link.ready(by), "{bps} {max_len} packet {i} of {n}");
                        link.send(lens[i % 4]);
                    }
                    let whole = u128::from(rate.tx_time(u64::from(max_len)).0) * u128::from(bps)
                        == u128::from(max_len) * 8_000_000_000;
                    if whole && lens == [max_len; 4] && n > 0 && n < 10_000 {
                        assert!(!link.ready(by), "the bound is tight: {bps} {max_len} {n}");
                    }
                }
            }
        }
    }

    #[test]
    fn fractional_nanoseconds_round_up_for_readiness() {
        let mut link = Link::new(Rate::bps(3_000_000_000));
        link.send(1); // 8/3 ns
        assert_eq!(link.free_at(), Nanos(3));
        link.send(1);
        link.send(1); // 8 ns exactly
        assert_eq!(link.free_at(), Nanos(8));
    }
}
