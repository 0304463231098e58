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
//!   inside the ±2^63 window wrapping comparisons need; the tree of flows
//!   stores finish times as offsets from an epoch kept 2^60..2^62 below
//!   them, so it compares plain integers. `l/w` is
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

/// Fractional bits of `V`.
pub const VFRAC: u32 = 32;
/// Fractional bits of fluid real time (units of 2^-32 ps).
pub const TFRAC: u32 = 32;
const PS8: u128 = 8 * crate::PS_PER_SEC as u128;
/// End of a per-flow packet list.
const NIL: u32 = u32::MAX;

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
#[cfg(test)]
fn vlt(a: (u64, u32), b: (u64, u32)) -> bool {
    let d = a.0.wrapping_sub(b.0) as i64;
    d < 0 || (d == 0 && a.1 < b.1)
}

/// A tree entry packed into one integer so that a match is a single
/// comparison: bits 64.. hold the head packet's virtual finish minus
/// [`Fluid`]'s `epoch`, bits 32..64 the flow (ties go to the lower id) and
/// bits 0..32 the head packet's id (so a departure reads the packet and
/// the flow in parallel). A leaf with no backlogged flow is `EMPTY`.
type Key = u128;
const EMPTY: Key = u128::MAX;

#[inline(always)]
fn pack(rel: u64, flow: u32, id: u32) -> Key {
    (u128::from(rel) << 64) | (u128::from(flow) << 32) | u128::from(id)
}

/// (finish − epoch, flow, id) of a key.
#[inline(always)]
fn unpack(k: Key) -> (u64, u32, u32) {
    ((k >> 64) as u64, (k >> 32) as u32, k as u32)
}

/// Finish times are kept between `2^60` and `2^62` above the epoch: every
/// live finish time lies within 2^49 of `V`, so the offsets compare like
/// the wrapping virtual times they stand for.
const EPOCH_LAG: u64 = 1 << 60;
const REBASE_AT: u64 = 1 << 62;

/// Per-flow state, kept together so one cache line serves a packet.
#[derive(Copy, Clone, Debug)]
struct FlowState {
    /// Virtual finish of the flow's last packet.
    last_f: u64,
    weight: u32,
    /// First and last packet id of the flow's FIFO (`NIL` if empty).
    head: u32,
    tail: u32,
    /// Packets queued.
    len: u32,
}

/// A queued packet, indexed by the caller's id: virtual finish, next id
/// of the same flow, bytes.
#[derive(Copy, Clone, Debug)]
struct Node {
    fin: u64,
    next: u32,
    len: u32,
}

/// The GPS fluid system.
///
/// Packets are kept in per-flow lists threaded through an array indexed
/// by the caller's packet id (so ids should be small and reused, like slab
/// indices: the array grows to the largest id seen). The flows are the
/// leaves of a tournament tree on their head packet's virtual finish (one
/// integer comparison per level, ⌈log2 flows⌉ levels per packet).
#[derive(Debug)]
pub struct Fluid {
    bps: u128,
    flows: Vec<FlowState>,
    nodes: Vec<Node>,
    /// Sum of the weights of backlogged flows.
    w: u128,
    /// Anchor of the line V(t): `V(t0) = v0` (V wraps modulo 2^64).
    v0: u64,
    t0: u128,
    /// Tournament (winner) tree over the flows on their packed head
    /// [`Key`]: leaf `f` at `m + f` (`m` a power of two ≥ the number of
    /// flows), each inner node `i` the smaller of `2i` and `2i + 1`, the
    /// minimum at 1.
    tree: Vec<Key>,
    /// Number of leaves.
    m: usize,
    /// Origin of the finish offsets in the keys.
    epoch: u64,
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
        Fluid {
            bps: u128::from(bps),
            flows: weights
                .iter()
                .map(|&w| FlowState {
                    last_f: 0,
                    weight: w.max(1),
                    head: NIL,
                    tail: NIL,
                    len: 0,
                })
                .collect(),
            nodes: Vec::new(),
            w: 0,
            v0: 0,
            t0: 0,
            tree: vec![EMPTY; 2 * weights.len().next_power_of_two().max(1)],
            m: weights.len().next_power_of_two().max(1),
            epoch: 0u64.wrapping_sub(EPOCH_LAG),
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
        self.flows[flow as usize].len as usize
    }

    /// Whether no flow is backlogged.
    pub fn is_idle(&self) -> bool {
        self.w == 0
    }

    /// Sets flow `f`'s leaf and replays its matches up to the root: one
    /// comparison per level, the two players of a match side by side.
    #[inline]
    fn set_leaf(&mut self, f: usize, k: Key) {
        let t = &mut self.tree[..];
        let mut i = self.m + f;
        let mut cur = k;
        t[i] = cur;
        while i > 1 {
            cur = cur.min(t[i ^ 1]);
            i >>= 1;
            t[i] = cur;
        }
    }

    /// The key of flow `flow`'s head packet `id` finishing at `fin`.
    #[inline]
    fn key(&mut self, fin: u64, flow: u32, id: u32) -> Key {
        let mut rel = fin.wrapping_sub(self.epoch);
        if rel >= REBASE_AT {
            self.rebase();
            rel = fin.wrapping_sub(self.epoch);
        }
        pack(rel, flow, id)
    }

    /// Moves the epoch up to `V − 2^60` (after `V` advanced by 2^61 or
    /// more) and rebuilds the tree: O(flows), once in a very long while.
    #[cold]
    fn rebase(&mut self) {
        let epoch = self.v0.wrapping_sub(EPOCH_LAG);
        let delta = epoch.wrapping_sub(self.epoch);
        self.epoch = epoch;
        let m = self.m;
        for k in &mut self.tree[m..] {
            if *k != EMPTY {
                let (rel, flow, id) = unpack(*k);
                *k = pack(rel.wrapping_sub(delta), flow, id);
            }
        }
        for i in (1..m).rev() {
            self.tree[i] = self.tree[2 * i].min(self.tree[2 * i + 1]);
        }
    }

    /// The backlogged flow with the smallest head finish time: (finish,
    /// flow, head id).
    #[inline]
    fn top(&self) -> Option<(u64, u32, u32)> {
        let k = *self.tree.get(1)?;
        if k == EMPTY {
            return None;
        }
        let (rel, flow, id) = unpack(k);
        Some((self.epoch.wrapping_add(rel), flow, id))
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
    /// up to `t_ps` must have been taken with [`Fluid::pop`] first. `id`
    /// must not be queued already.
    pub fn arrive(&mut self, flow: u32, len: u32, t_ps: u64, id: u32) {
        let f = flow as usize;
        let fs = self.flows[f];
        let dl = ((u64::from(len)) << VFRAC) / u64::from(fs.weight);
        self.bytes_in += u64::from(len);
        let idx = id as usize;
        if idx >= self.nodes.len() {
            self.nodes.resize(
                idx + 1,
                Node {
                    fin: 0,
                    next: NIL,
                    len: 0,
                },
            );
        }
        let fin = if fs.head == NIL {
            // An idle flow left when V reached its last finish time and V
            // never decreases, so S = max(V(a), F_last) = V(a).
            let t = u128::from(t_ps) << TFRAC;
            let v = self.v_at(t);
            self.v0 = v;
            self.t0 = t;
            let fin = v.wrapping_add(dl);
            self.w += u128::from(fs.weight);
            let k = self.key(fin, flow, id);
            self.set_leaf(f, k);
            self.flows[f].head = id;
            fin
        } else {
            self.nodes[fs.tail as usize].next = id;
            fs.last_f.wrapping_add(dl)
        };
        self.nodes[idx] = Node {
            fin,
            next: NIL,
            len,
        };
        let fs = &mut self.flows[f];
        fs.last_f = fin;
        fs.tail = id;
        fs.len += 1;
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
        let fin = self.top()?.0;
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
        let (fin, flow, id) = self.top()?;
        let f = flow as usize;
        let node = *self.nodes.get(id as usize)?;
        self.bytes_out += u64::from(node.len);
        // V(t) = fin exactly: re-anchor there.
        self.v0 = fin;
        self.t0 = t;
        let fs = &mut self.flows[f];
        fs.head = node.next;
        fs.len -= 1;
        if node.next != NIL {
            let next = self.key(self.nodes[node.next as usize].fin, flow, node.next);
            self.set_leaf(f, next);
        } else {
            fs.tail = NIL;
            let w = fs.weight;
            self.set_leaf(f, EMPTY);
            self.w -= u128::from(w);
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

    /// The same GPS computation with the obvious data structures: a FIFO
    /// per flow and a linear scan for the smallest head finish time.
    struct Naive {
        bps: u128,
        wts: Vec<u64>,
        w: u128,
        v0: u64,
        t0: u128,
        last_f: Vec<u64>,
        q: Vec<std::collections::VecDeque<(u64, u32)>>,
    }

    impl Naive {
        fn head(&self) -> Option<(u64, u32)> {
            (0..self.q.len())
                .filter_map(|f| self.q[f].front().map(|&(fin, _)| (fin, f as u32)))
                .reduce(|a, b| if vlt(b, a) { b } else { a })
        }
        fn next_fix(&self) -> Option<u128> {
            let (fin, _) = self.head()?;
            let x = u128::from(fin.wrapping_sub(self.v0)) * PS8 * self.w;
            Some(self.t0 + x.div_ceil(self.bps))
        }
        fn arrive(&mut self, flow: u32, len: u32, t_ps: u64, id: u32) {
            let f = flow as usize;
            let dl = (u64::from(len) << VFRAC) / self.wts[f];
            let fin = if self.q[f].is_empty() {
                let t = u128::from(t_ps) << TFRAC;
                if self.w > 0 {
                    let dv = (t - self.t0) * self.bps / (PS8 * self.w);
                    self.v0 = self.v0.wrapping_add(dv as u64);
                }
                self.t0 = t;
                self.w += u128::from(self.wts[f]);
                self.v0.wrapping_add(dl)
            } else {
                self.last_f[f].wrapping_add(dl)
            };
            self.last_f[f] = fin;
            self.q[f].push_back((fin, id));
        }
        fn pop(&mut self) -> Option<FluidDeparture> {
            let t = self.next_fix()?;
            let (fin, flow) = self.head()?;
            let (_, id) = self.q[flow as usize].pop_front()?;
            self.v0 = fin;
            self.t0 = t;
            if self.q[flow as usize].is_empty() {
                self.w -= u128::from(self.wts[flow as usize]);
            }
            let t_ps = ((t + (1 << (TFRAC - 1))) >> TFRAC) as u64;
            Some(FluidDeparture { flow, id, t_ps })
        }
    }

    #[test]
    fn matches_naive_gps_on_random_arrivals_with_reused_ids() {
        use rand::{Rng, SeedableRng};
        for seed in 0..20u64 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let n = rng.random_range(1..40usize);
            let weights: Vec<u32> = (0..n).map(|_| rng.random_range(1..100)).collect();
            let bps = rng.random_range(1_000_000..100_000_000_000u64);
            let mut fl = Fluid::new(bps, &weights);
            if seed % 2 == 1 {
                // Start just below the point where the keys are rebased.
                fl.epoch = 0u64.wrapping_sub(REBASE_AT) + 1;
            }
            let mut nv = Naive {
                bps: u128::from(bps),
                wts: weights.iter().map(|&w| u64::from(w)).collect(),
                w: 0,
                v0: 0,
                t0: 0,
                last_f: vec![0; n],
                q: (0..n).map(|_| Default::default()).collect(),
            };
            let mut free: Vec<u32> = (0..64).rev().collect();
            let mut now = 0u64;
            let mut popped = 0;
            for _ in 0..3000 {
                let gap = rng.random_range(0..2_000_000u64);
                let t = now + gap;
                // Departures up to t first, identical in both systems.
                while let Some(tn) = fl.next_time()
                    && tn <= t
                {
                    let (a, b) = (fl.pop(), nv.pop());
                    assert_eq!(a, b, "seed {seed}");
                    free.push(a.map_or(0, |d| d.id));
                    popped += 1;
                }
                assert!(
                    nv.next_fix()
                        .is_none_or(|x| x.div_ceil(1 << TFRAC) > u128::from(t))
                );
                now = t;
                if rng.random_ratio(1, 97) {
                    fl.rebase();
                }
                let Some(id) = free.pop() else { continue };
                let flow = rng.random_range(0..n as u32);
                let len = rng.random_range(1..=9000);
                fl.arrive(flow, len, now, id);
                nv.arrive(flow, len, now, id);
            }
            while let Some(a) = fl.pop() {
                assert_eq!(Some(a), nv.pop(), "seed {seed}");
                popped += 1;
            }
            assert_eq!(nv.pop(), None);
            assert!(fl.is_idle() && !fl.overflowed());
            assert_eq!(fl.bytes_in, fl.bytes_out);
            assert!(popped > 100, "seed {seed}: only {popped} departures");
        }
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
