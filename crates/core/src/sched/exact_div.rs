//! Exact division by a divisor that changes rarely (a weight sum), as a
//! multiplication and a shift.

/// Exact `n / d` and `n % d` for a divisor fixed between reconfigurations
/// (Granlund and Montgomery, 1994). With `ℓ = ⌈log2 d⌉`,
/// `k = max(64, N + ℓ)` and `m = ⌈2^k / d⌉`: `m·d − 2^k < d ≤ 2^ℓ ≤
/// 2^(k−N)`, so `⌊n·m / 2^k⌋ = ⌊n / d⌋` for every `n < 2^N` (`N = 53`), and
/// `k ≤ 63 + ℓ` keeps `m` below 2^64 for `d ≥ 2`. The quotient is the high
/// half of one 64×64-bit product shifted right by `k − 64`. `d = 1` and
/// dividends of 2^N or more (never seen by QFQ or WF2Q+) take exact
/// fallbacks, so every dividend gets the exact result.
#[derive(Copy, Clone, Debug)]
pub(crate) struct ExactDiv {
    d: u64,
    /// `⌈2^k / d⌉`, or 0 when `d = 1`.
    m: u64,
    /// `k − 64`.
    shift: u32,
}

impl ExactDiv {
    /// Bits of the dividends handled by the multiplication.
    const N: u32 = 53;

    /// A divider by `d` (0 is taken as 1).
    pub(crate) fn new(d: u64) -> ExactDiv {
        let d = d.max(1);
        if d == 1 {
            return ExactDiv { d, m: 0, shift: 0 };
        }
        let l = u64::BITS - (d - 1).leading_zeros();
        let k = (ExactDiv::N + l).max(64);
        let m = (1u128 << k).div_ceil(u128::from(d)) as u64;
        ExactDiv {
            d,
            m,
            shift: k - 64,
        }
    }

    /// `(n / d, n % d)`.
    #[inline(always)]
    pub(crate) fn div_rem(&self, n: u64) -> (u64, u64) {
        if self.m == 0 {
            return (n, 0);
        }
        if n >> ExactDiv::N != 0 {
            return (n / self.d, n % self.d);
        }
        let q = (((u128::from(n) * u128::from(self.m)) >> 64) as u64) >> self.shift;
        (q, n - q * self.d)
    }
}

#[cfg(test)]
mod tests {
    use super::ExactDiv;
    use rand::{Rng, SeedableRng};

    #[test]
    fn matches_the_hardware_division() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let mut ds: Vec<u64> = vec![1, 2, 3, 7, 1 << 19, (1 << 20) - 1, 1 << 20, 1_000_003];
        ds.extend([u64::from(u32::MAX), u64::from(u32::MAX) - 1, 1 << 32]);
        ds.extend((0..300).map(|_| rng.random_range(1..=u64::from(u32::MAX))));
        for d in ds {
            let div = ExactDiv::new(d);
            let n_max = (1u64 << ExactDiv::N) - 1;
            let edges = [0, 1, d - 1, d, d + 1, n_max - 1, n_max, n_max + 1, u64::MAX];
            let random = (0..3000).map(|_| rng.random_range(0..=n_max));
            for n in edges.into_iter().chain(random) {
                assert_eq!(div.div_rem(n), (n / d, n % d), "{n} / {d}");
            }
        }
    }
}
