//! Summary statistics of benchmark samples, with one convention for empty
//! input: every function here returns `None` for an empty sample (there is
//! no median of nothing, and no fairness among no one), so a caller picks
//! what to show instead (the tables print `-` or `NaN`, JSON `null`).

pub use pktsched_runtime::thread_cpu_ns;

/// The `q`-quantile of `v` (`q` in `[0, 1]`, clamped), by linear
/// interpolation between the two nearest order statistics; `None` when `v`
/// is empty. `quantile(v, 0.5)` is the median: the middle element of an
/// odd-length sample, the mean of the two middle ones of an even-length
/// sample.
pub fn quantile(v: &[f64], q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let pos = q.clamp(0.0, 1.0) * (s.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    Some(s[lo] + (s[hi] - s[lo]) * (pos - lo as f64))
}

/// The median of `v` (see [`quantile`]); `None` when `v` is empty.
pub fn median(v: &[f64]) -> Option<f64> {
    quantile(v, 0.5)
}

/// Jain's fairness index `(Σx)² / (n·Σx²)` of `x`: 1 when all are equal,
/// `1/n` when one gets everything. `None` when `x` is empty; 1 when every
/// `x` is zero (all got the same: nothing). The index itself is the
/// simulator's ([`pktsched_sim::metrics::jain`]), so benches and `sim`
/// reports agree.
pub fn jain(x: &[f64]) -> Option<f64> {
    (!x.is_empty()).then(|| pktsched_sim::metrics::jain(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_input_has_no_statistic() {
        assert_eq!(median(&[]), None);
        assert_eq!(quantile(&[], 0.99), None);
        assert_eq!(jain(&[]), None);
    }

    #[test]
    fn one_element() {
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(quantile(&[7.0], 0.0), Some(7.0));
        assert_eq!(quantile(&[7.0], 1.0), Some(7.0));
        assert_eq!(jain(&[3.0]), Some(1.0));
        assert_eq!(jain(&[0.0]), Some(1.0));
    }

    #[test]
    fn odd_and_even_lengths() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.25), Some(2.0));
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0, 5.0], 1.0), Some(5.0));
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0, 5.0], 7.0), Some(5.0));
    }

    #[test]
    fn jain_extremes() {
        assert_eq!(jain(&[2.0, 2.0, 2.0]), Some(1.0));
        assert_eq!(jain(&[1.0, 0.0]), Some(0.5));
        assert_eq!(jain(&[0.0, 0.0]), Some(1.0));
        let j = jain(&[1.0, 0.0, 0.0, 0.0]).unwrap_or(0.0);
        assert!((j - 0.25).abs() < 1e-12);
    }
}
