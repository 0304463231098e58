//! The exact GPS fluid reference, computed event by event.
//!
//! GPS serves every backlogged flow `i` at rate `R·w_i/W(t)`, where `W(t)` is
//! the sum of the weights of the flows backlogged at `t`. With the system
//! virtual time `V(t)`, `dV/dt = R/(8·W(t))` (bytes per unit of weight), a
//! packet of `l` bytes of flow `i` arriving at `a` starts at
//! `S = max(V(a), F_prev_i)` and finishes in virtual time at
//! `F = S + l/w_i`; it leaves the fluid system at the real time `t` with
//! `V(t) = F`. `V` is piecewise linear; its slope changes only when a flow
//! enters or leaves the backlogged set.
//!
//! # Fixed point and error
//!
//! - `V` is a `u64` in units of 2^-32 byte per unit weight that wraps
//!   around: only differences are used, and every live value (heads'
//!   finish times, the anchor) lies within 2^49 of the current `V`, far
//!   inside the ±2^63 window wrapping comparisons need. `l/w` is
//!   `⌊l·2^32/w⌋`, so each `F` is at most `n·2^-32` below the exact value
//!   after `n` packets of its flow (2^-12 byte after a billion packets).
//! - Real time is a `u128` in units of 2^-32 ps.
//! - The line `V(t)` is anchored at `(t0, V0)` and re-anchored at every
//!   fluid departure (where `V(t) = F` exactly, up to the time rounding:
//!   the departure time is rounded up to 2^-32 ps) and every arrival that
//!   changes `W`. Each re-anchoring can add at most 2^-32 ps to the time
//!   axis, i.e. 0.23 ps per 10^9 fluid events. Reported finish times are
//!   rounded to the nearest ps.
//! - Ranges: packet length ≤ 2^16 bytes, Σw ≤ 2^32 and any `R` in
//!   `1..2^64` bit/s keep every product below 2^123 (proof: between two
//!   anchors `ΔV < 2^16·2^32 = 2^48`, and `ΔV·8·10^12·W < 2^48·2^43·2^32`);
//!   any overflow would be reported, not wrapped.

use std::collections::VecDeque;

/// Fractional bits of `V`.
pub const VFRAC: u32 = 32;
/// Fractional bits of fluid real time (units of 2^-32 ps).
pub const TFRAC: u32 = 32;
const PS8: u128 = 8 * crate::PS_PER_SEC as u128;

/// A fluid departure: flow, the caller's packet id, finish time in ps.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FluidDeparture {
    /// Flow.
    pub flow: u32,
    /// Packet id given to [`Fluid::arrive`].
    pub id: u32,
    /// Fluid finish time, ps (rounded to nearest).
    pub t_ps: u64,
}

/// `a` before `b` for virtual times compared through their wrapping
/// difference (all live values lie within 2^49 of `V`).
#[inline(always)]
fn vlt(a: (u64, u32), b: (u64, u32)) -> bool {
    let d = a.0.wrapping_sub(b.0) as i64;
    d < 0 || (d == 0 && a.1 < b.1)
}

/// The GPS fluid system.
#[derive(Debug)]
pub struct Fluid {
    bps: u128,
    weights: Vec<u64>,
    /// Sum of the weights of backlogged flows.
    w: u128,
    /// Anchor of the line V(t): `V(t0) = v0` (V wraps modulo 2^64).
    v0: u64,
    t0: u128,
    /// Virtual finish of each flow's last packet.
    last_f: Vec<u64>,
    /// Per-flow FIFO of (F, packet id, len).
    queues: Vec<VecDeque<(u64, u32, u32)>>,
    /// Binary min-heap of (head F, flow) of the backlogged flows.
    heap: Vec<(u64, u32)>,
    /// Cached time of the next departure (2^-32 ps).
    next_t: Option<u128>,
    /// Bytes arrived and departed (for work-conservation checks).
    pub bytes_in: u64,
    /// Bytes that left the fluid system.
    pub bytes_out: u64,
    overflow: bool,
}

impl Fluid {
    /// A fluid system of rate `bps` with the given flow weights.
    pub fn new(bps: u64, weights: &[u32]) -> Fluid {
        let n = weights.len();
        Fluid {
            bps: u128::from(bps),
            weights: weights.iter().map(|&w| u64::from(w.max(1))).collect(),
            w: 0,
            v0: 0,
            t0: 0,
            last_f: vec![0; n],
            queues: (0..n).map(|_| VecDeque::new()).collect(),
            heap: Vec::with_capacity(n),
            next_t: None,
            bytes_in: 0,
            bytes_out: 0,
            overflow: false,
        }
    }

    /// True if some product left the proven range (the results are then
    /// not trustworthy).
    pub fn overflowed(&self) -> bool {
        self.overflow
    }

    /// Packets of `flow` still in the fluid system.
    #[inline]
    pub fn queued(&self, flow: u32) -> usize {
        self.queues[flow as usize].len()
    }

    /// Whether no flow is backlogged.
    pub fn is_idle(&self) -> bool {
        self.w == 0
    }

    fn sift_up(&mut self, mut i: usize) {
        let x = self.heap[i];
        while i > 0 {
            let p = (i - 1) / 2;
            if !vlt(x, self.heap[p]) {
                break;
            }
            self.heap[i] = self.heap[p];
            i = p;
        }
        self.heap[i] = x;
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        let x = self.heap[i];
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && vlt(self.heap[r], self.heap[l]) {
                r
            } else {
                l
            };
            if !vlt(self.heap[c], x) {
                break;
            }
            self.heap[i] = self.heap[c];
            i = c;
        }
        self.heap[i] = x;
    }

    /// `V` at fluid time `t` (must not be past the next departure).
    fn v_at(&mut self, t: u128) -> u64 {
        if self.w == 0 {
            return self.v0;
        }
        let dt = t.saturating_sub(self.t0);
        // ΔV = Δt·R·2^(VFRAC−TFRAC)/(8e12·W) < 2^49
        match dt.checked_mul(self.bps) {
            Some(x) => self
                .v0
                .wrapping_add(((x << (VFRAC - TFRAC)) / (PS8 * self.w)) as u64),
            None => {
                self.overflow = true;
                self.v0
            }
        }
    }

    /// A packet of `len` bytes of `flow` arrives at `t_ps`. All departures
    /// up to `t_ps` must have been taken with [`Fluid::pop`] first.
    pub fn arrive(&mut self, flow: u32, len: u32, t_ps: u64, id: u32) {
        let f = flow as usize;
        let w = self.weights[f];
        let dl = ((u64::from(len)) << VFRAC) / w;
        self.bytes_in += u64::from(len);
        if self.queues[f].is_empty() {
            // An idle flow left when V reached its last finish time and V
            // never decreases, so S = max(V(a), F_last) = V(a).
            let t = u128::from(t_ps) << TFRAC;
            let v = self.v_at(t);
            self.v0 = v;
            self.t0 = t;
            let fin = v.wrapping_add(dl);
            self.w += u128::from(w);
            self.last_f[f] = fin;
            self.queues[f].push_back((fin, id, len));
            self.heap.push((fin, flow));
            self.sift_up(self.heap.len() - 1);
        } else {
            let fin = self.last_f[f].wrapping_add(dl);
            self.last_f[f] = fin;
            self.queues[f].push_back((fin, id, len));
        }
        self.next_t = None;
    }

    /// Time (ps, rounded up) of the next fluid departure, if any.
    #[inline]
    pub fn next_time(&mut self) -> Option<u64> {
        let t = self.next_fix()?;
        Some(u64::try_from(t.div_ceil(1u128 << TFRAC)).unwrap_or(u64::MAX))
    }

    fn next_fix(&mut self) -> Option<u128> {
        if let Some(t) = self.next_t {
            return Some(t);
        }
        let &(fin, _) = self.heap.first()?;
        let dv = u128::from(fin.wrapping_sub(self.v0));
        if dv >= 1 << 63 {
            self.overflow = true;
        }
        // Δt = ΔV·8e12·W / (R·2^(VFRAC−TFRAC)), rounded up.
        let t = match dv.checked_mul(PS8).and_then(|x| x.checked_mul(self.w)) {
            Some(x) => self.t0 + x.div_ceil(self.bps << (VFRAC - TFRAC)),
            None => {
                self.overflow = true;
                self.t0
            }
        };
        self.next_t = Some(t);
        Some(t)
    }

    /// Takes the next departure (the caller checked [`Fluid::next_time`]).
    pub fn pop(&mut self) -> Option<FluidDeparture> {
        let t = self.next_fix()?;
        let &(fin, flow) = self.heap.first()?;
        let f = flow as usize;
        let (_, id, len) = self.queues[f].pop_front()?;
        self.bytes_out += u64::from(len);
        // V(t) = fin exactly: re-anchor there.
        self.v0 = fin;
        self.t0 = t;
        match self.queues[f].front() {
            Some(&(next, _, _)) => {
                self.heap[0] = (next, flow);
                self.sift_down(0);
            }
            None => {
                let last = self.heap.len() - 1;
                self.heap.swap(0, last);
                self.heap.pop();
                if !self.heap.is_empty() {
                    self.sift_down(0);
                }
                self.w -= u128::from(self.weights[f]);
            }
        }
        self.next_t = None;
        let half = 1u128 << (TFRAC - 1);
        let t_ps = u64::try_from((t + half) >> TFRAC).unwrap_or(u64::MAX);
        Some(FluidDeparture { flow, id, t_ps })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(fl: &mut Fluid) -> Vec<FluidDeparture> {
        let mut v = Vec::new();
        while let Some(d) = fl.pop() {
            v.push(d);
        }
        v
    }

    #[test]
    fn single_flow_runs_at_link_rate() {
        // 1 Gbit/s: 125 bytes take 1 µs.
        let mut fl = Fluid::new(1_000_000_000, &[3]);
        for i in 0..4 {
            fl.arrive(0, 125, 0, i);
        }
        let t: Vec<u64> = drain(&mut fl).iter().map(|d| d.t_ps).collect();
        assert_eq!(t, vec![1_000_000, 2_000_000, 3_000_000, 4_000_000]);
        assert!(fl.is_idle());
    }

    #[test]
    fn two_greedy_flows_unequal_weights_closed_form() {
        // Weights 1 and 3 at 8 Gbit/s (1 byte/ns): flow 1 gets 3/4 of the
        // link. 100-byte packets: flow 1's k-th packet leaves at
        // k·100/(3/4) ns while both are backlogged.
        let mut fl = Fluid::new(8_000_000_000, &[1, 3]);
        for i in 0..30 {
            fl.arrive(0, 100, 0, i);
            fl.arrive(1, 100, 0, 100 + i);
        }
        let d = drain(&mut fl);
        let f1: Vec<u64> = d.iter().filter(|d| d.flow == 1).map(|d| d.t_ps).collect();
        for (k, t) in f1.iter().enumerate() {
            let exact = (k as u64 + 1) * 100_000 * 4 / 3;
            assert!(t.abs_diff(exact) <= 1, "k={k}: {t} vs {exact}");
        }
        // Flow 1 ends at 4000 ns (3000 bytes at 3/4 B/ns); flow 0 then has
        // 3000 − 1000 = 2000 bytes left at full rate: ends at 6000 ns.
        assert!(f1[29].abs_diff(4_000_000) <= 1);
        assert_eq!(d.last().map(|d| d.t_ps), Some(6_000_000));
        assert_eq!(fl.bytes_in, fl.bytes_out);
    }
}
