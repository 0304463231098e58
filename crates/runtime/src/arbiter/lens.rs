//! Sums and maxima of packet lengths over a run, the two folds the
//! arbiter makes per packet (the read's longest packet, the release's
//! bytes). Four lanes each: four independent chains the core runs side by
//! side, where one accumulator makes every step wait for the previous one.

use pktsched_core::{Bytes, Pkt};

/// The longer of `bound` and the longest packet of `pkts`.
#[inline(always)]
pub(super) fn longest<T>(pkts: &[Pkt<T>], bound: Bytes) -> Bytes {
    let mut m = [bound; 4];
    let mut quads = pkts.chunks_exact(4);
    for q in &mut quads {
        for (m, p) in m.iter_mut().zip(q) {
            *m = (*m).max(p.len);
        }
    }
    let tail = quads.remainder().iter().fold(bound, |a, p| a.max(p.len));
    m.into_iter().fold(tail, Bytes::max)
}

/// The bytes of `pkts`.
#[inline(always)]
pub(super) fn total_bytes<T>(pkts: &[Pkt<T>]) -> u64 {
    let mut s = [0u64; 4];
    let mut quads = pkts.chunks_exact(4);
    for q in &mut quads {
        for (s, p) in s.iter_mut().zip(q) {
            *s += u64::from(p.len);
        }
    }
    let tail: u64 = quads.remainder().iter().map(|p| u64::from(p.len)).sum();
    s.into_iter().sum::<u64>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use pktsched_core::{FlowId, Nanos};

    fn pkts(lens: &[Bytes]) -> Vec<Pkt<()>> {
        lens.iter()
            .map(|&l| Pkt::new(FlowId(0), l, Nanos::ZERO, ()))
            .collect()
    }

    /// Every length of 0..=9 packets, the longest in every position (the
    /// four lanes and the tail), against the plain folds.
    #[test]
    fn lanes_match_the_plain_folds() {
        for n in 0..=9usize {
            for at in 0..n.max(1) {
                let lens: Vec<Bytes> = (0..n)
                    .map(|i| if i == at { 9_000 } else { 60 + i as Bytes })
                    .collect();
                let v = pkts(&lens);
                for bound in [0, 100, 10_000] {
                    let want = lens.iter().copied().fold(bound, Bytes::max);
                    assert_eq!(longest(&v, bound), want, "n {n} at {at} bound {bound}");
                }
                let want: u64 = lens.iter().map(|&l| u64::from(l)).sum();
                assert_eq!(total_bytes(&v), want, "n {n} at {at}");
            }
        }
        assert_eq!(
            total_bytes(&pkts(&[Bytes::MAX; 5])),
            5 * u64::from(Bytes::MAX)
        );
    }
}
