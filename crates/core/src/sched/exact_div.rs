//! Exact division by a divisor that changes rarely (a weight sum), as a
//! multiplication and a shift.

/// Exact `n / d` and `n % d` for a divisor fixed between reconfigurations
/// (Granlund and Montgomery, 1994): with `ℓ = ⌈log2 d⌉` and
/// `m = ⌈2^(N+ℓ) / d⌉`, `m·d − 2^(N+ℓ) < d ≤ 2^ℓ`, so
/// `⌊n·m / 2^(N+ℓ)⌋ = ⌊n / d⌋` for every `n < 2^N` (`N = 53`). Larger `n`
/// take the hardware division, so every dividend gets the exact result.
#[derive(Copy, Clone, Debug)]
pub(crate) struct ExactDiv {
    d: u64,
    m: u64,
    shift: u32,
}

impl ExactDiv {
    /// Bits of the dividends handled by the multiplication.
    const N: u32 = 53;

    /// A divider by `d` (0 is taken as 1).
    pub(crate) fn new(d: u64) -> ExactDiv {
        let d = d.max(1);
        let l = u64::BITS - (d - 1).leading_zeros();
        let shift = ExactDiv::N + l;
        // d ≤ 2^ℓ < 2·d, so m ≤ 2^(N+1) fits in 64 bits (and n·m in 128).
        let m = (1u128 << shift).div_ceil(u128::from(d)) as u64;
        ExactDiv { d, m, shift }
    }

    /// `(n / d, n % d)`.
    #[inline(always)]
    pub(crate) fn div_rem(&self, n: u64) -> (u64, u64) {
        if n >> ExactDiv::N != 0 {
            return (n / self.d, n % self.d);
        }
        let q = ((u128::from(n) * u128::from(self.m)) >> self.shift) as u64;
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
