//! Per-flow measurements and the published bounds they are checked against.
//!
//! Definitions (φ_k = w_k/Σw over all configured flows, R the link rate):
//!
//! - **T-WFI** (time worst-case fair index) of flow k: the largest
//!   `d_p − a_p − Q_k(a_p)/(φ_k·R)` over its packets, where `Q_k(a_p)` is
//!   the flow's backlog just after `p` arrived (queued bytes, `p` included,
//!   plus what is left to send of a packet of the flow on the wire).
//! - **B-WFI** (bit worst-case fair index, here in bytes): the largest
//!   `φ_k·W(t1,t2) − W_k(t1,t2)` over intervals inside one backlogged
//!   period of the flow, where `W` is the service of the whole link and
//!   `W_k` the flow's, both counted when a packet's last bit leaves. It is
//!   computed exactly in integers scaled by Σw: the difference peaks just
//!   before one of the flow's own departures and bottoms out just after one
//!   (or at the start of the period), so one update per departure suffices.
//! - **Lag** vs the fluid system: `d_p − f_p`, the packet's departure minus
//!   its GPS finish time.
//!
//! Bounds (L_k = the flow's largest packet, L = the largest of all flows):
//!
//! | algorithm | T-WFI_k | B-WFI_k |
//! | --- | --- | --- |
//! | QFQ | 6·L_k/(φ_k·R) + (L − L_k)/R | — |
//! | DRR (quantum_k = L·w_k/w_min) | (1/φ_min + 1/φ_k + N − 1)·L/R | — |
//! | WF2Q+ | — | L (one maximum packet) |
//!
//! The start of a backlogged period is the arrival instant: the part of
//! the packet then on the wire that has already been sent is not counted in
//! `W(t1, t2)` (rounded down to whole bytes).
//!
//! A T-WFI passes if it is at most `bound·(1 + 2^-10) + 2 ns`, a B-WFI if
//! it is at most `bound·(1 + 2^-10) + 1 byte`: the
//! relative slack covers QFQ's fixed-point weights (effective weights are
//! up to 2^-14 above the configured ones and `V` advances up to 2^-10
//! slower), the absolute one the rounding of the link to whole ps and of
//! the schedulers' clock to whole ns.

use hdrhistogram::Histogram;
use pktsched_core::sched::Algorithm;

use crate::PS_PER_SEC;

/// Relative slack of the bound check.
pub const REL_TOL: f64 = 1.0 / 1024.0;
/// Absolute slack of the bound check, ps.
pub const ABS_TOL_PS: f64 = 2_000.0;

/// Bounds of one flow (`None`: the algorithm has no bound of that kind).
#[derive(Copy, Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Bounds {
    /// T-WFI bound, ps.
    pub twfi_ps: Option<f64>,
    /// B-WFI bound, bytes.
    pub bwfi_bytes: Option<f64>,
}

/// The published bound of `alg` for a flow of weight `w` and largest packet
/// `lk`, with `wsum` = Σw, `wmin` the smallest weight, `l` the largest
/// packet of all flows and `n` flows, on a link of `bps`.
#[allow(clippy::too_many_arguments)]
pub fn bounds(
    alg: Algorithm,
    w: u32,
    lk: u32,
    wsum: u64,
    wmin: u32,
    l: u32,
    n: usize,
    bps: u64,
) -> Bounds {
    let ps_per_byte = 8.0 * PS_PER_SEC as f64 / bps as f64;
    let inv_phi = wsum as f64 / f64::from(w);
    match alg {
        Algorithm::Qfq => Bounds {
            twfi_ps: Some((6.0 * f64::from(lk) * inv_phi + f64::from(l - lk)) * ps_per_byte),
            bwfi_bytes: None,
        },
        Algorithm::Drr => Bounds {
            twfi_ps: Some(
                (wsum as f64 / f64::from(wmin) + inv_phi + n as f64 - 1.0)
                    * f64::from(l)
                    * ps_per_byte,
            ),
            bwfi_bytes: None,
        },
        Algorithm::Wf2q => Bounds {
            twfi_ps: None,
            bwfi_bytes: Some(f64::from(l)),
        },
        _ => Bounds::default(),
    }
}

/// Whether `measured` is within `bound` and its slack.
pub fn within(measured: f64, bound: f64, abs_tol: f64) -> bool {
    measured <= bound * (1.0 + REL_TOL) + abs_tol
}

/// Raw per-flow measurements (times in ps).
#[derive(Debug, Clone)]
pub struct FlowStat {
    /// Packets/bytes offered by the source.
    pub offered: (u64, u64),
    /// Packets accepted by the scheduler.
    pub accepted: u64,
    /// Refusals: queue_full, too_large, unknown_flow.
    pub dropped: [u64; 3],
    /// Packets/bytes delivered (last bit left).
    pub delivered: (u64, u64),
    /// Bytes delivered by `duration`.
    pub window_bytes: u64,
    /// Delay min/max/sum.
    pub delay_min: u64,
    /// Largest delay.
    pub delay_max: u64,
    /// Sum of delays.
    pub delay_sum: u128,
    /// Delay histogram in ns, 2 significant digits, auto-resizing (only for
    /// scenarios with few flows; boxed so the per-packet fields stay on
    /// few cache lines).
    pub hist: Option<Box<Histogram<u64>>>,
    /// Largest and smallest `d − f`.
    pub lag_max: i64,
    /// Smallest `d − f`.
    pub lag_min: i64,
    /// Packets with both times.
    pub lag_n: u64,
    /// Largest T-WFI sample, ps.
    pub twfi_max: i64,
    /// Largest B-WFI, bytes × Σw.
    pub bwfi_scaled: i128,
    /// Smallest `w_k·W − Σw·W_k` of the current backlogged period.
    pub min_g: i128,
    /// Bytes queued in the packet system (scheduler + wire).
    pub q_bytes: u64,
    /// Packets in the scheduler.
    pub q_pkts: u32,
    /// Bytes delivered (for B-WFI).
    pub served: u64,
    /// Delivered bytes per time bin.
    pub bins: Vec<u64>,
}

impl FlowStat {
    /// Empty stats with `bins` rate bins and an optional histogram.
    pub fn new(bins: usize, hist: bool) -> FlowStat {
        FlowStat {
            offered: (0, 0),
            accepted: 0,
            dropped: [0; 3],
            delivered: (0, 0),
            window_bytes: 0,
            delay_min: u64::MAX,
            delay_max: 0,
            delay_sum: 0,
            hist: if hist {
                Histogram::new(2).ok().map(Box::new)
            } else {
                None
            },
            lag_max: i64::MIN,
            lag_min: i64::MAX,
            lag_n: 0,
            twfi_max: i64::MIN,
            bwfi_scaled: 0,
            min_g: 0,
            q_bytes: 0,
            q_pkts: 0,
            served: 0,
            bins: vec![0; bins],
        }
    }
}

/// Jain's fairness index of `x` (1 = perfectly fair).
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    if s2 == 0.0 {
        1.0
    } else {
        s * s / (x.len() as f64 * s2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qfq_and_drr_bounds_by_hand() {
        // 1 Gbit/s: 1 byte = 8000 ps. Two flows w=1,3, L=1000.
        let b = bounds(Algorithm::Qfq, 1, 1000, 4, 1, 1000, 2, 1_000_000_000);
        assert_eq!(b.twfi_ps, Some(6.0 * 1000.0 * 4.0 * 8000.0));
        let b = bounds(Algorithm::Drr, 3, 1000, 4, 1, 1000, 2, 1_000_000_000);
        assert_eq!(b.twfi_ps, Some((4.0 + 4.0 / 3.0 + 1.0) * 1000.0 * 8000.0));
        assert_eq!(
            bounds(Algorithm::Fifo, 1, 1, 1, 1, 1, 1, 1),
            Bounds::default()
        );
    }

    #[test]
    fn jain_index() {
        assert!((jain(&[1.0, 1.0, 1.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 0.0]) - 0.5).abs() < 1e-12);
    }
}
