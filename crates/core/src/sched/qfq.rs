//! Quick Fair Queueing (Checconi, Rizzo, Valente), per flow.
//!
//! Every flow `k` has exact virtual start and finish times `S_k`, `F_k`
//! (integer fixed point, see below). `F_k = S_k + l/φ_k` for its head packet
//! of `l` bytes. The flow belongs to *group* `i = ceil(log2(L_k/φ_k))`
//! (`L_k` = `max_len`), so that `σ_i = 2^i ≥ L_k/φ_k`. Inside a group, flows
//! are bucket-sorted by their start time rounded down to a multiple of `σ_i`
//! in a ring of 32 slots (each slot an intrusive doubly linked list of flow
//! ids). A group's own timestamps are `S_i` = the rounded start of its first
//! non-empty slot and `F_i = S_i + 2σ_i`.
//!
//! Groups are kept in four sets, each a `u64` bitmap indexed by group:
//! ER (eligible, ready), IR (ineligible, ready), EB (eligible, blocked),
//! IB (ineligible, blocked). Eligible means `S_i ≤ V`; blocked means some
//! ER group of higher index has a smaller finish time. ER groups are sorted
//! by finish time in index order, so the next packet comes from the first
//! flow of the front slot of the lowest group in ER: one find-first-set.
//! `V` (the system virtual time) advances by `l/Σφ` on every departure and
//! jumps to the smallest group start when no group is eligible, which keeps
//! the scheduler work conserving.
//!
//! Guarantee (the QFQ paper's T-WFI): T-WFI_k ≤ (3·σ_k + 2·L)/R, with σ_k
//! the slot size of flow k's group (`L_k/φ_k ≤ σ_k < 2·L_k/φ_k` up to the
//! rounding of the inverse weight), φ normalised over all configured flows
//! and `L` the largest `max_len`; hence also T-WFI_k ≤ 6·L_k/(φ_k·R) +
//! 2·L/R. PSPAT's eq. (2), 6·L_k/(φ_k·R) + (L − L_k)/R, does not hold: a
//! small high-weight flow next to a jumbo one exceeds it (the simulator's
//! `qfq-jumbo` scenarios and the derivation in ARCHITECTURE.md).
//!
//! # Deviations from the paper
//!
//! - A flow that becomes backlogged while its group lags far behind `V` (the
//!   group's first slot is old, e.g. after a long packet of a light flow
//!   advanced `V` a lot) would need a slot beyond the 32 of the ring. Its
//!   timestamps are then moved back so that it lands in slot 30 (as Linux's
//!   QFQ+ does): a bounded advantage of less than the group's lag, which is
//!   itself bounded by the service the group is owed.
//! - The order of flows inside one slot is LIFO (any order is allowed by the
//!   analysis; pushing at the front touches one cache line less). Slot
//!   lists are singly linked, as in the paper: a departure always takes the
//!   head of the front slot, so moving a flow touches no other flow's
//!   record; `deactivate` (removal, change) walks the flow's slot list to
//!   find its predecessor.
//! - A flow alone in its group that moves on to a later slot re-bases the
//!   group's front slot at its new start instead of moving to that slot and
//!   advancing the front to it (the same group start, state and departures,
//!   no slot writes); when its group is the only backlogged one, only the
//!   group's eligibility is recomputed (nothing can block it or be blocked
//!   by it). A lone backlogged flow (`1::1`, a PSPAT client's flow) crosses
//!   a slot on most departures of packets near its `max_len`.
//! - `deactivate` (removal, change) recomputes the ready/blocked state of the
//!   lower groups from its definition instead of the paper's shortcut.
//!
//! # Fixed point and supported ranges
//!
//! Virtual times are `u64` in units of 2^-31 byte per unit weight
//! (`ONE = 2^31`) and wrap around; they are only compared through wrapping
//! differences read as `i64`.
//!
//! | parameter | range |
//! | --- | --- |
//! | `weight` | 1..=65536 (2^16) |
//! | sum of weights | ≤ 1 048 576 (2^20) |
//! | `max_len` | 1..=65536 bytes (2^16) |
//! | flows | ≤ 1 048 576 (2^20) |
//!
//! Proof that nothing overflows or loses order with these ranges:
//! - `inv_w = ⌊2^31/w⌋ ∈ [2^15, 2^31]` fits the `u32` kept per flow; its
//!   relative truncation error is < w/2^31 ≤ 2^-15, i.e. the effective weight
//!   `w' = 2^31/inv_w` satisfies `w ≤ w' < w·(1 + 2^-14)` (exact for powers of
//!   two).
//! - `σ_k = L_k·inv_w ∈ [2^15, 2^47]`, so the group index
//!   `ceil(log2 σ_k) − 15 ∈ [0, 32]`: 33 groups fit a `u64` bitmap. The slot
//!   width is `2^(15+i) ≤ 2^47`, so `2σ` and `31σ` are far below 2^64 and no
//!   shift count reaches 64.
//! - One departure adds at most `l·inv_w ≤ 2^16·2^31 = 2^47` to a flow's
//!   time and `l·2^31/Σw ≤ 2^47` to `V`. Live timestamps stay within
//!   `2σ_max` above `V` and within the WFI lag (a few `σ_max` plus one
//!   `L/Σφ`, < 2^52) below it, far inside the ±2^63 window the wrapping
//!   comparisons need. A stale finish time of an idle flow is only trusted
//!   when it lies in `(V, round(V) + 2σ]`, otherwise the flow restarts at `V`.
//! - `V` advances by `(l·2^31 + r)/Σw` over the integer weight sum, carrying
//!   the remainder `r < Σw` (`l·2^31 + r < 2^48`): `V` is always exactly
//!   ⌊the true virtual time⌋, and since group start times are whole units a
//!   group whose start equals the true `V` is eligible. (An earlier version
//!   multiplied by a rounded-down `2^47/Σw`; `V` then lagged by a fraction of
//!   a unit, a group due exactly at `V` was judged ineligible, and a 1500-byte
//!   packet of another flow could go first: `pktsched sim` measured a T-WFI
//!   of 18.3 µs against the 15.6 µs bound.) `V` thus never runs faster than
//!   the configured weights allow (the effective weights `w' ≥ w` of the
//!   flows' own timestamps differ by < 2^-14 relative). A change of Σw
//!   restarts the remainder (an error below one unit per reconfiguration).
//! - Flow ids and links are `u32` with `u32::MAX` as nil: 2^20 flows fit.

use super::exact_div::ExactDiv;
use super::{Discipline, Limits};
use crate::flow::{FlowConfig, FlowId};
use crate::units::{Bytes, Nanos};

/// Fractional bits of the virtual time (`ONE = 2^31` per byte at weight 1).
const FRAC_BITS: u32 = 31;
const ONE: u64 = 1 << FRAC_BITS;
const WEIGHT_BITS: u32 = 16;
/// Largest weight of one flow.
const QFQ_MAX_WEIGHT: u64 = 1 << WEIGHT_BITS;
/// Largest `max_len` in bytes.
const QFQ_MAX_LEN: u64 = 1 << 16;
/// Largest sum of the weights of all flows.
const QFQ_MAX_WEIGHT_SUM: u64 = 1 << 20;
/// Largest number of flows.
const QFQ_MAX_FLOWS: u64 = 1 << 20;
/// Slot width of group 0: `log2(1 byte · ONE / max weight)`.
const MIN_SLOT_SHIFT: u32 = FRAC_BITS - WEIGHT_BITS;
/// Highest group index: `log2(QFQ_MAX_LEN · ONE) − MIN_SLOT_SHIFT`.
const MAX_INDEX: u32 = 16 + FRAC_BITS - MIN_SLOT_SHIFT;
const NGROUPS: usize = MAX_INDEX as usize + 1;
const NSLOTS: u32 = 32;
/// Highest slot a newly backlogged flow may be put in (see module docs).
const MAX_SLOT: u64 = NSLOTS as u64 - 2;

const NIL: u32 = u32::MAX;

/// Group sets, indexed by state: bit 0 = ineligible, bit 1 = blocked.
const ER: usize = 0;
const IR: usize = 1;
const EB: usize = 2;
const IB: usize = 3;

/// Per-flow state: 32 bytes, all flows in one `Vec`.
#[derive(Copy, Clone, Debug)]
struct QFlow {
    /// Virtual start of the head packet.
    s: u64,
    /// Virtual finish of the head packet (of the last packet when idle).
    f: u64,
    /// `⌊ONE / weight⌋`.
    inv_w: u32,
    /// Next flow in the same slot list.
    next: u32,
    /// Group index.
    grp: u8,
    /// Physical slot index (0..32) while backlogged.
    slot: u8,
}

const IDLE_FLOW: QFlow = QFlow {
    s: 0,
    f: 0,
    inv_w: ONE as u32,
    next: NIL,
    grp: 0,
    slot: 0,
};

#[derive(Copy, Clone, Debug)]
struct Group {
    /// Rounded start of the front slot (valid while `full != 0`).
    s: u64,
    /// Bit `r` set if slot `(front + r) % 32` holds a flow.
    full: u32,
    /// Physical index of the front slot.
    front: u32,
    /// Head of each slot's list, `NIL` if empty.
    slots: [u32; NSLOTS as usize],
}

const EMPTY_GROUP: Group = Group {
    s: 0,
    full: 0,
    front: 0,
    slots: [NIL; NSLOTS as usize],
};

/// Quick Fair Queueing scheduler (per-flow, 32 slots per group).
#[derive(Clone, Debug)]
pub struct Qfq {
    /// ER, IR, EB, IB.
    set: [u64; 4],
    /// System virtual time.
    v: u64,
    /// Remainder of the last `V` step (`< wsum`): `V` advances by
    /// `(l·ONE + v_rem) / wsum`, so it is always exactly ⌊the true V⌋ and a
    /// group whose start equals the true `V` is never judged ineligible.
    v_rem: u64,
    /// Sum of configured weights.
    wsum: u64,
    /// Division by `wsum` as a multiplication (one per dequeue).
    by_wsum: ExactDiv,
    max_flows: u64,
    /// Times `pick` found no ER group and rebuilt the group state (should
    /// stay 0; kept as a diagnostic).
    recoveries: u64,
    flows: Vec<QFlow>,
    groups: [Group; NGROUPS],
}

impl Default for Qfq {
    fn default() -> Qfq {
        Qfq::new()
    }
}

/// `a > b` for wrapping virtual times.
#[inline]
fn gt(a: u64, b: u64) -> bool {
    (a.wrapping_sub(b) as i64) > 0
}

#[inline]
fn round_down(t: u64, shift: u32) -> u64 {
    t & !((1u64 << shift) - 1)
}

#[inline]
const fn shift_of(g: usize) -> u32 {
    MIN_SLOT_SHIFT + g as u32
}

/// `⌊ONE / w⌋` (w ≥ 1; ≤ 2^31 so it fits `u32`).
fn inv_weight(w: u32) -> u32 {
    (ONE / u64::from(w.max(1))) as u32
}

/// Group of a flow: `ceil(log2(max_len · inv_w)) − MIN_SLOT_SHIFT`.
fn group_of(max_len: Bytes, inv_w: u32) -> u8 {
    let sigma = u64::from(max_len.max(1)) * u64::from(inv_w.max(1));
    let shift = if sigma <= 1 {
        0
    } else {
        64 - (sigma - 1).leading_zeros()
    };
    shift.saturating_sub(MIN_SLOT_SHIFT).min(MAX_INDEX) as u8
}

impl Qfq {
    /// QFQ with the default limits (see the module docs).
    pub fn new() -> Qfq {
        Qfq::with_max_flows(QFQ_MAX_FLOWS)
    }

    /// QFQ accepting at most `max_flows` flows (clamped to 1..=2^20).
    pub fn with_max_flows(max_flows: u64) -> Qfq {
        Qfq {
            set: [0; 4],
            v: 0,
            v_rem: 0,
            wsum: 0,
            by_wsum: ExactDiv::new(1),
            max_flows: max_flows.clamp(1, QFQ_MAX_FLOWS),
            recoveries: 0,
            flows: Vec::new(),
            groups: [EMPTY_GROUP; NGROUPS],
        }
    }

    /// Sum of the weights of all flows.
    pub fn weight_sum(&self) -> u64 {
        self.wsum
    }

    /// Times the group state had to be rebuilt in `pick` (0 unless there is
    /// a bug; exposed for tests and diagnostics).
    pub fn recoveries(&self) -> u64 {
        self.recoveries
    }

    #[inline]
    fn group_f(&self, g: usize) -> u64 {
        self.groups[g].s.wrapping_add(2u64 << shift_of(g))
    }

    /// A change of the weight sum restarts the carried remainder (an error
    /// below one unit, once per reconfiguration).
    fn update_inv_wsum(&mut self) {
        self.v_rem = 0;
        self.by_wsum = ExactDiv::new(self.wsum);
    }

    /// State of non-empty group `g` from its definition (ER/IR/EB/IB).
    #[inline]
    fn calc_state(&self, g: usize) -> usize {
        let mut st = if gt(self.groups[g].s, self.v) { IR } else { ER };
        let above = self.set[ER] & (!1u64 << g);
        if above != 0 {
            let n = above.trailing_zeros() as usize;
            if gt(self.group_f(g), self.group_f(n)) {
                st |= EB;
            }
        }
        st
    }

    #[inline]
    fn clear_group(&mut self, g: usize) {
        let m = !(1u64 << g);
        for s in &mut self.set {
            *s &= m;
        }
    }

    /// (Re)computes the state of non-empty group `g`.
    #[inline]
    fn place(&mut self, g: usize) {
        self.clear_group(g);
        let st = self.calc_state(g);
        self.set[st] |= 1 << g;
    }

    /// Recomputes the state of every non-empty group below `g`, highest
    /// first (each one's blocking depends on the ER groups above it).
    #[inline]
    fn reblock_below(&mut self, g: usize) {
        let all = self.set[ER] | self.set[IR] | self.set[EB] | self.set[IB];
        let mut m = all & ((1u64 << g) - 1);
        while m != 0 {
            let j = 63 - m.leading_zeros() as usize;
            m &= !(1u64 << j);
            self.place(j);
        }
    }

    /// After `V` moved from `old_v`: jump `V` if nothing is eligible, then
    /// move the groups whose start `V` has passed to the eligible sets.
    #[inline]
    fn update_eligible(&mut self, old_v: u64) {
        let inel = self.set[IR] | self.set[IB];
        if inel == 0 {
            return;
        }
        if self.set[ER] | self.set[EB] == 0 {
            // The lowest ineligible group has the smallest start: every
            // ineligible group starts at the first multiple of its slot
            // width above V.
            let s = self.groups[inel.trailing_zeros() as usize].s;
            if gt(s, self.v) {
                self.v = s;
                self.v_rem = 0;
            }
        }
        let x = (self.v >> MIN_SLOT_SHIFT) ^ (old_v >> MIN_SLOT_SHIFT);
        if x != 0 {
            // V crossed a multiple of 2^(MIN_SLOT_SHIFT + j) for every j
            // below the highest changed bit + 1.
            let top = 64 - x.leading_zeros();
            let mask = if top >= 64 { !0 } else { (1u64 << top) - 1 };
            let ir = self.set[IR] & mask;
            self.set[IR] &= !mask;
            self.set[ER] |= ir;
            let ib = self.set[IB] & mask;
            self.set[IB] &= !mask;
            self.set[EB] |= ib;
        }
    }

    /// Puts backlogged flow `id` at the head of relative slot `rel` of its
    /// group.
    #[inline]
    fn link(&mut self, id: u32, g: usize, rel: u32) {
        let grp = &mut self.groups[g];
        let phys = (grp.front + rel) & (NSLOTS - 1);
        let head = grp.slots[phys as usize];
        grp.slots[phys as usize] = id;
        grp.full |= 1 << rel;
        let fl = &mut self.flows[id as usize];
        fl.next = head;
        fl.slot = phys as u8;
    }

    /// Takes flow `id` (with successor `next`) out of group `g`'s front
    /// slot, whose head it is (the flow `pick` returned); any other flow
    /// takes the general path.
    #[inline(always)]
    fn unlink_front(&mut self, id: u32, g: usize, next: u32) {
        let grp = &mut self.groups[g];
        let phys = (grp.front & (NSLOTS - 1)) as usize;
        if grp.slots[phys] != id {
            return self.unlink(id);
        }
        grp.slots[phys] = next;
        if next == NIL {
            grp.full &= !1;
        }
    }

    /// Takes flow `id` out of its slot list, wherever it is in it (walks
    /// the list from its head to find the predecessor: O(flows in that
    /// slot), so removing or re-weighting many queued flows of one slot is
    /// quadratic in its length; departures never walk).
    #[inline(never)]
    fn unlink(&mut self, id: u32) {
        let fl = self.flows[id as usize];
        let grp = &mut self.groups[fl.grp as usize];
        let phys = u32::from(fl.slot) & (NSLOTS - 1);
        let head = grp.slots[phys as usize];
        if head == id {
            grp.slots[phys as usize] = fl.next;
            if fl.next == NIL {
                grp.full &= !(1 << (phys.wrapping_sub(grp.front) & (NSLOTS - 1)));
            }
            return;
        }
        let mut cur = head;
        while let Some(c) = self.flows.get(cur as usize) {
            let n = c.next;
            if n == id {
                self.flows[cur as usize].next = fl.next;
                return;
            }
            cur = n;
        }
        debug_assert!(false, "flow {id} is not in its slot list");
    }

    /// True if flow `id` is the only flow of group `g` (the head of its
    /// front slot, every other slot empty); the caller knows it has no
    /// successor in the slot.
    #[inline(always)]
    fn alone_in_group(&self, id: u32, g: usize) -> bool {
        let grp = &self.groups[g];
        grp.full == 1 && grp.slots[(grp.front & (NSLOTS - 1)) as usize] == id
    }

    /// The lone flow of group `g` (front slot at `gs`) moves on to a start
    /// rounded to `rs > gs`: what moving it to its new slot and advancing
    /// the front to that slot would leave, without touching the slots. The
    /// front slot is re-based at the new start (the flow stays in the same
    /// physical slot, which stays the front) and the group's state is
    /// recomputed; when `g` is the only backlogged group it is neither
    /// blocked nor blocking, so only its eligibility is left to find.
    #[inline(always)]
    fn advance_alone(&mut self, g: usize, rs: u64, gs: u64) {
        let shift = shift_of(g);
        let old_f = self.group_f(g);
        let rel = (rs.wrapping_sub(gs) >> shift).min(MAX_SLOT);
        let new_s = gs.wrapping_add(rel << shift);
        self.groups[g].s = new_s;
        let bit = 1u64 << g;
        if self.set[ER] == bit && self.set[IR] | self.set[EB] | self.set[IB] == 0 {
            if gt(new_s, self.v) {
                self.set[ER] = 0;
                self.set[IR] = bit;
            }
            return;
        }
        self.place(g);
        self.unblock_below(g, old_f);
    }

    /// After a flow left group `g`: if the front slot emptied, move the
    /// group to its next non-empty slot (or out of the sets) and fix the
    /// states that depended on its finish time.
    #[inline(always)]
    fn after_leave(&mut self, g: usize) {
        if self.groups[g].full & 1 != 0 {
            return;
        }
        self.front_emptied(g);
    }

    /// [`Qfq::after_leave`] once group `g`'s front slot is empty.
    #[inline(never)]
    fn front_emptied(&mut self, g: usize) {
        let old_f = self.group_f(g);
        let grp = &mut self.groups[g];
        if grp.full == 0 {
            self.clear_group(g);
        } else {
            let k = grp.full.trailing_zeros();
            grp.full >>= k;
            grp.front = (grp.front + k) & (NSLOTS - 1);
            grp.s = grp.s.wrapping_add(u64::from(k) << shift_of(g));
            self.place(g);
        }
        self.unblock_below(g, old_f);
    }

    /// Group `g`'s finish time grew from `old_f` (or `g` left the sets):
    /// the blocked groups below it may be ready now. Ready groups below stay
    /// ready: their finish is at most `old_f`, which is at most the finish
    /// of any ER group above `g`. If an ER group above `g` finishes by
    /// `old_f`, it still blocks everything `g` blocked and nothing changes.
    #[inline]
    fn unblock_below(&mut self, g: usize, old_f: u64) {
        let blocked = (self.set[EB] | self.set[IB]) & ((1u64 << g) - 1);
        if blocked == 0 {
            return;
        }
        let next = self.set[ER] & (!1u64 << g);
        if next != 0 && !gt(self.group_f(next.trailing_zeros() as usize), old_f) {
            return;
        }
        self.reblock_below(g);
    }

    /// Rebuilds the group sets from their definitions (only reached if the
    /// incremental updates left ER empty with flows backlogged).
    #[cold]
    fn recover(&mut self) {
        let all = self.set[ER] | self.set[IR] | self.set[EB] | self.set[IB];
        if all == 0 {
            return;
        }
        self.recoveries += 1;
        let mut m = all;
        let mut min_s: Option<u64> = None;
        while m != 0 {
            let g = m.trailing_zeros() as usize;
            m &= m - 1;
            let s = self.groups[g].s;
            if min_s.is_none_or(|x| gt(x, s)) {
                min_s = Some(s);
            }
        }
        if let Some(s) = min_s.filter(|&s| gt(s, self.v)) {
            self.v = s;
            self.v_rem = 0;
        }
        self.reblock_below(NGROUPS);
    }

    /// Checks every structural invariant (tests only). `backlogged(f)` says
    /// whether flow `f` has packets.
    #[cfg(test)]
    fn check_invariants(&self, backlogged: impl Fn(usize) -> bool) {
        let all = self.set[ER] | self.set[IR] | self.set[EB] | self.set[IB];
        assert_eq!(
            self.set.iter().map(|s| s.count_ones()).sum::<u32>(),
            all.count_ones(),
            "sets overlap"
        );
        let mut seen = vec![false; self.flows.len()];
        for (g, grp) in self.groups.iter().enumerate() {
            let shift = shift_of(g);
            assert_eq!(
                grp.full != 0,
                all & (1 << g) != 0,
                "group {g} emptiness vs sets"
            );
            if grp.full == 0 {
                assert!(
                    grp.slots.iter().all(|&h| h == NIL),
                    "empty group {g} has flows"
                );
                continue;
            }
            assert_eq!(grp.full & 1, 1, "group {g} front slot empty");
            assert_eq!(grp.s, round_down(grp.s, shift));
            for rel in 0..NSLOTS {
                let phys = (grp.front + rel) & (NSLOTS - 1);
                let mut id = grp.slots[phys as usize];
                assert_eq!(
                    id != NIL,
                    grp.full & (1 << rel) != 0,
                    "group {g} slot bit {rel}"
                );
                while id != NIL {
                    let fl = self.flows[id as usize];
                    assert!(!seen[id as usize], "flow {id} twice");
                    seen[id as usize] = true;
                    assert_eq!(fl.grp as usize, g);
                    assert_eq!(u32::from(fl.slot), phys);
                    let rs = round_down(fl.s, shift);
                    assert_eq!(
                        rs,
                        grp.s.wrapping_add(u64::from(rel) << shift),
                        "flow {id} in wrong slot"
                    );
                    // S_k is at most one slot ahead of V.
                    let lim = round_down(self.v, shift).wrapping_add(1 << shift);
                    assert!(!gt(rs, lim), "flow {id} starts too far ahead of V");
                    let d = fl.f.wrapping_sub(fl.s);
                    assert!(d > 0 && d <= 1 << shift, "flow {id} F - S out of range");
                    id = fl.next;
                }
            }
            let st = self.set.iter().position(|s| s & (1 << g) != 0).unwrap_or(9);
            assert_eq!(st, self.calc_state(g), "group {g} state");
        }
        for (i, &s) in seen.iter().enumerate() {
            assert_eq!(s, backlogged(i), "flow {i} backlogged vs linked");
        }
        // ER is sorted by finish time.
        let mut m = self.set[ER];
        let mut last: Option<u64> = None;
        while m != 0 {
            let g = m.trailing_zeros() as usize;
            m &= m - 1;
            let f = self.group_f(g);
            if let Some(l) = last {
                assert!(!gt(l, f), "ER not sorted by F");
            }
            last = Some(f);
        }
        if all != 0 {
            assert_ne!(self.set[ER], 0, "backlogged but ER empty");
        }
    }
}

impl Discipline for Qfq {
    fn name(&self) -> &'static str {
        "qfq"
    }

    fn limits(&self) -> Limits {
        Limits {
            alg: "qfq",
            max_flows: self.max_flows,
            max_weight: QFQ_MAX_WEIGHT,
            max_weight_sum: QFQ_MAX_WEIGHT_SUM,
            max_len: QFQ_MAX_LEN,
            ..Limits::generic("qfq")
        }
    }

    // The weight-sum limit is enforced by `FlowSched` from `limits()`.

    fn add(&mut self, id: FlowId, cfg: &FlowConfig) {
        let i = id.index();
        if self.flows.len() <= i {
            self.flows.resize(i + 1, IDLE_FLOW);
        }
        let inv_w = inv_weight(cfg.weight);
        // F = V: the first activation starts at V.
        self.flows[i] = QFlow {
            s: self.v,
            f: self.v,
            inv_w,
            grp: group_of(cfg.max_len, inv_w),
            ..IDLE_FLOW
        };
        self.wsum += u64::from(cfg.weight);
        self.update_inv_wsum();
    }

    /// Keeps the flow's place in virtual time: a backlogged flow is taken
    /// out (its unsent head is not charged), gets the new weight and group,
    /// and comes back with the usual start rule, so it restarts at
    /// `max(V, old start)` if the old start is within the new group's window
    /// above `V`, at `V` otherwise.
    fn change(
        &mut self,
        id: FlowId,
        old: &FlowConfig,
        new: &FlowConfig,
        head: Option<Bytes>,
        now: Nanos,
    ) {
        if head.is_some() {
            self.deactivate(id);
        }
        let fl = &mut self.flows[id.index()];
        fl.inv_w = inv_weight(new.weight);
        fl.grp = group_of(new.max_len, fl.inv_w);
        self.wsum = self.wsum - u64::from(old.weight) + u64::from(new.weight);
        self.update_inv_wsum();
        if let Some(h) = head {
            self.activate(id, h, now);
        }
    }

    fn remove(&mut self, id: FlowId, cfg: &FlowConfig) {
        self.wsum -= u64::from(cfg.weight);
        self.update_inv_wsum();
        self.flows[id.index()] = IDLE_FLOW;
    }

    #[inline]
    fn activate(&mut self, id: FlowId, head: Bytes, _now: Nanos) {
        let old_v = self.v;
        let fl = self.flows[id.index()];
        let g = fl.grp as usize;
        let shift = shift_of(g);
        let sigma = 1u64 << shift;
        // Start: the old finish if it is ahead of V but not beyond the next
        // slot boundary (timestamps stay within a slot of V), else V.
        let mut s = old_v;
        if gt(fl.f, old_v)
            && round_down(fl.f, shift).wrapping_sub(round_down(old_v, shift)) <= sigma
        {
            s = fl.f;
        }
        let mut f = s.wrapping_add(u64::from(head) * u64::from(fl.inv_w));
        let rs = round_down(s, shift);
        let grp = self.groups[g];
        let rel;
        if grp.full != 0 {
            let d = rs.wrapping_sub(grp.s);
            if d as i64 >= 0 {
                let mut slot = d >> shift;
                if slot > MAX_SLOT {
                    // The group lags far behind V: move the flow back so
                    // that it fits the ring (bounded advantage).
                    let delta = (slot - MAX_SLOT) << shift;
                    s = s.wrapping_sub(delta);
                    f = f.wrapping_sub(delta);
                    slot = MAX_SLOT;
                }
                let fm = &mut self.flows[id.index()];
                fm.s = s;
                fm.f = f;
                self.link(id.0, g, slot as u32);
                return;
            }
            // The flow starts before the group's front: rotate the ring back.
            // The group was ineligible (its start is above V), hence at most
            // one slot ahead, so k is 1 in practice.
            let k = grp.s.wrapping_sub(rs) >> shift;
            if k < u64::from(grp.full.leading_zeros()) {
                let gm = &mut self.groups[g];
                gm.full <<= k;
                gm.front = gm.front.wrapping_sub(k as u32) & (NSLOTS - 1);
                gm.s = rs;
                rel = 0;
            } else {
                // Not reachable with the invariants; keep the ring intact by
                // starting the flow at the group's front instead.
                let delta = grp.s.wrapping_sub(rs);
                s = s.wrapping_add(delta);
                f = f.wrapping_add(delta);
                rel = 0;
            }
        } else {
            if self.set.iter().all(|&m| m == 0) && gt(rs, old_v) {
                // Idle system: V jumps to the new start.
                self.v = rs;
                self.v_rem = 0;
            }
            let gm = &mut self.groups[g];
            gm.s = rs;
            gm.front = 0;
            rel = 0;
        }
        let fm = &mut self.flows[id.index()];
        fm.s = s;
        fm.f = f;
        self.link(id.0, g, rel);
        self.place(g);
        if self.set[ER] == 0 {
            self.update_eligible(old_v);
        }
    }

    fn deactivate(&mut self, id: FlowId) {
        let fl = &mut self.flows[id.index()];
        // The unsent head is not charged: a later activation may restart at
        // the same start time.
        fl.f = fl.s;
        let g = fl.grp as usize;
        self.unlink(id.0);
        self.after_leave(g);
        let v = self.v;
        self.update_eligible(v);
    }

    #[inline]
    fn pick<H: Fn(FlowId) -> Bytes>(&mut self, _head: H) -> Option<FlowId> {
        if self.set[ER] == 0 {
            if self.set[IR] | self.set[EB] | self.set[IB] == 0 {
                return None;
            }
            self.recover();
        }
        // An empty ER (a failed recovery) gives 64: past the groups.
        let g = self.set[ER].trailing_zeros() as usize;
        let grp = self.groups.get(g)?;
        Some(FlowId(grp.slots[(grp.front & (NSLOTS - 1)) as usize]))
    }

    #[inline(always)]
    fn depart(&mut self, id: FlowId, len: Bytes, next: Option<Bytes>) {
        let old_v = self.v;
        // len·ONE ≤ 2^47 and v_rem < wsum ≤ 2^20: no overflow.
        let num = u64::from(len) * ONE + self.v_rem;
        let (q, r) = self.by_wsum.div_rem(num);
        self.v = old_v.wrapping_add(q);
        self.v_rem = r;
        let fl = &mut self.flows[id.index()];
        let (g, fl_next) = (fl.grp as usize, fl.next);
        match next {
            Some(nl) => {
                let shift = shift_of(g);
                let s = fl.f;
                fl.s = s;
                fl.f = s.wrapping_add(u64::from(nl) * u64::from(fl.inv_w));
                let rs = round_down(s, shift);
                let gs = self.groups[g].s;
                if rs == gs {
                    // Still in the front slot, still at its head.
                    self.update_eligible(old_v);
                    return;
                }
                if fl_next == NIL && self.alone_in_group(id.0, g) {
                    self.advance_alone(g, rs, gs);
                    self.update_eligible(old_v);
                    return;
                }
                self.unlink_front(id.0, g, fl_next);
                let rel = (rs.wrapping_sub(gs) >> shift).min(MAX_SLOT);
                self.link(id.0, g, rel as u32);
            }
            None => self.unlink_front(id.0, g, fl_next),
        }
        self.after_leave(g);
        self.update_eligible(old_v);
    }

    fn memory_bytes(&self) -> usize {
        self.flows.capacity() * core::mem::size_of::<QFlow>()
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::sched::ConfigError;
    use crate::sched::{FlowSched, Scheduler};
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::collections::VecDeque;

    type S = FlowSched<Qfq, u64>;

    impl Qfq {
        /// Starts the virtual time at `v` (to exercise wrap-around).
        fn with_v(v: u64) -> Qfq {
            Qfq { v, ..Qfq::new() }
        }
    }

    fn check(s: &S) {
        let d = s.discipline();
        d.check_invariants(|i| s.flows().queued(FlowId(i as u32)).unwrap_or(0) > 0);
        assert_eq!(d.recoveries(), 0);
        assert!(s.stats().conserved());
        for id in s.flow_ids() {
            assert!(s.flow_stats(id).is_some_and(|c| c.conserved()));
        }
    }

    fn add(s: &mut S, w: u32, l: u32) -> FlowId {
        s.add_flow(FlowConfig::weight(w).with_max_len(l).with_limit(1 << 20))
            .expect("valid flow")
    }

    fn enq(s: &mut S, f: FlowId, len: u32, item: u64) {
        s.enqueue(Pkt::new(f, len, Nanos(0), item), Nanos(0))
            .expect("accepted");
    }

    fn drain(s: &mut S) -> Vec<u64> {
        let mut out = Vec::new();
        while let Some(p) = s.dequeue(Nanos(0)) {
            check(s);
            out.push(p.item);
        }
        out
    }

    /// A flow alone in its group crosses a slot on most departures (the
    /// path that re-bases the group's front slot): alone in the system and
    /// next to a flow of another group. Every structural invariant (slot of
    /// each flow, group state from its definition, ER order) is checked
    /// after every enqueue and dequeue, `V` has advanced at least as far as
    /// the bytes sent put it, and the two flows share in their weights.
    #[test]
    fn lone_flow_in_its_group_moves_on_slot_by_slot() {
        let mut rng = ChaCha8Rng::seed_from_u64(16);
        let mut s = S::new(Qfq::with_v(u64::MAX - (1 << 40)));
        let a = add(&mut s, 3, 1514);
        let mut sent = 0u64;
        for i in 0..20_000u64 {
            enq(&mut s, a, rng.random_range(64..=1514), i);
            check(&s);
            if i % 3 != 0 {
                let p = s.dequeue(Nanos(0)).expect("backlogged");
                sent += u64::from(p.len);
                check(&s);
            }
        }
        while let Some(p) = s.dequeue(Nanos(0)) {
            sent += u64::from(p.len);
            check(&s);
        }
        let d = s.discipline();
        let start = u64::MAX - (1 << 40);
        // V grew by sent·ONE/3 exactly (the remainder carried), possibly
        // more where an idle system jumped to a new start.
        assert!(d.v.wrapping_sub(start) >= sent * ONE / 3);
        // Two groups, one flow each, both backlogged throughout.
        let b = add(&mut s, 1, 64);
        let mut got = [0u64; 2];
        for i in 0..40_000u64 {
            for (f, len) in [(a, rng.random_range(64..=1514)), (b, 64)] {
                if s.flows().queued(f) < Some(8) {
                    enq(&mut s, f, len, i);
                }
            }
            check(&s);
            let p = s.dequeue(Nanos(0)).expect("backlogged");
            got[usize::from(p.flow == b)] += u64::from(p.len);
            check(&s);
        }
        // Weights 3 (group of 1514·ONE/3) and 1 (group of 64·ONE/1, lower).
        let share = got[0] as f64 / (got[0] + got[1]) as f64;
        assert!(
            (share - 0.75).abs() < 0.01,
            "share of the weight-3 flow {share}"
        );
    }

    use crate::flow::Pkt;

    // Units below: u = 2^30 (ONE = 2u per byte at weight 1).

    /// A: w=1, B: w=2, max_len 1000, three 1000-byte packets each, A
    /// activated first.
    /// inv_w: A 2u/byte, B 1u/byte. σ_A = 2000u → slot 2048u (group 26);
    /// σ_B = 1000u → slot 1024u (group 25). V per byte = ⌊2^31/3⌋ ≈ 0.667u.
    /// - A: S=0 F=2000u; group 26: S=0, F=4096u, ER.
    /// - B: S=0 F=1000u; group 25: S=0, F=2048u ≤ 4096u, ER.
    /// - ffs(ER)=25: B1. V≈667u. B: S=1000u (slot 0 still) → stays.
    /// - B2. V≈1333u. B: S=2000u → slot 1024u; group 25 S=1024u ≤ V, F=3072u, ER.
    /// - B3. V≈2000u. B empty, group 25 empty.
    /// - A1, A2, A3 from group 26.
    #[test]
    fn golden_two_weights() {
        let mut s = S::new(Qfq::new());
        let a = add(&mut s, 1, 1000);
        let b = add(&mut s, 2, 1000);
        for i in 0..3 {
            enq(&mut s, a, 1000, 10 + i);
        }
        for i in 0..3 {
            enq(&mut s, b, 1000, 20 + i);
        }
        check(&s);
        assert_eq!(drain(&mut s), [20, 21, 22, 10, 11, 12]);
    }

    /// A, B: w=1, max_len 1000, four 1000-byte packets each, A first.
    /// inv_w 2u/byte, σ = 2000u → group 26, slot 2048u. V per byte = 1u.
    /// Slot lists are LIFO: slot 0 = [B, A].
    /// - B1: V=1000u. B: S=2000u → still slot 0 (round 0), stays at head.
    /// - B2: V=2000u. B: S=4000u → slot 2048u. slot 0 = [A].
    /// - A1: V=3000u. A: S=2000u, stays.
    /// - A2: V=4000u. A: S=4000u → slot 2048u = [A, B]; front moves, group
    ///   S=2048u ≤ V, ER.
    /// - A3: V=5000u. A: S=6000u → slot 4096u. slot 2048u = [B].
    /// - B3: V=6000u. B: S=6000u → slot 4096u = [B, A]; group S=4096u.
    /// - B4 (B empties), A4.
    #[test]
    fn golden_equal_weights() {
        let mut s = S::new(Qfq::new());
        let a = add(&mut s, 1, 1000);
        let b = add(&mut s, 1, 1000);
        for i in 0..4 {
            enq(&mut s, a, 1000, 10 + i);
        }
        for i in 0..4 {
            enq(&mut s, b, 1000, 20 + i);
        }
        assert_eq!(drain(&mut s), [20, 21, 10, 11, 12, 22, 23, 13]);
    }

    /// A: w=1, max_len 1000, two 1000-byte packets; B: w=4, max_len 100,
    /// five 100-byte packets; A first.
    /// inv_w: A 2u/byte, B 0.5u/byte. σ_A=2000u → group 26 (slot 2048u);
    /// σ_B = 50u → group 21 (slot 64u). V per byte = ⌊2^31/5⌋ ≈ 0.4u
    /// (slightly less, so V = 40u·n − ε below).
    /// - A: S=0, F=2000u; G26: S=0, F=4096u, ER. B: S=0, F=50u; G21: S=0,
    ///   F=128u, ER.
    /// - B1: V≈40u; B: S=50u (slot 0), stays.
    /// - B2: V≈80u; B: S=100u → G21 S=64u ≤ V, ER.
    /// - B3: V≈120u; B: S=150u → G21 S=128u > V: ineligible, IR.
    /// - ER={26}: A1: V≈520u, crossing 128u: G21 moves IR → ER.
    /// - B4: V≈560u; B: S=200u → G21 S=192u, ER. B5: G21 empties. A2.
    #[test]
    fn golden_ineligible_group() {
        let mut s = S::new(Qfq::new());
        let a = add(&mut s, 1, 1000);
        let b = add(&mut s, 4, 100);
        for i in 0..2 {
            enq(&mut s, a, 1000, 10 + i);
        }
        for i in 0..5 {
            enq(&mut s, b, 100, 20 + i);
        }
        assert_eq!(drain(&mut s), [20, 21, 22, 10, 23, 24, 11]);
    }

    #[test]
    fn group_index_extremes() {
        assert_eq!(group_of(1, inv_weight(65536)), 0);
        assert_eq!(group_of(65536, inv_weight(1)), MAX_INDEX as u8);
        assert_eq!(group_of(1, inv_weight(1)), 16);
        assert_eq!(group_of(65536, inv_weight(65536)), 16);
        assert_eq!(group_of(1000, inv_weight(1)), 26);
        assert_eq!(group_of(1000, inv_weight(2)), 25);
        assert_eq!(group_of(1, inv_weight(65535)), 0);
        for w in [1u32, 2, 3, 1000, 65535, 65536] {
            for l in [1u32, 2, 63, 64, 65, 1500, 65535, 65536] {
                let g = u32::from(group_of(l, inv_weight(w)));
                let sigma = u64::from(l) * u64::from(inv_weight(w));
                assert!(sigma <= 1 << shift_of(g as usize), "w={w} l={l}");
                assert!(
                    g == 0 || sigma > 1 << (shift_of(g as usize) - 1),
                    "w={w} l={l}"
                );
            }
        }
    }

    /// Backlogged flows served for a long time; returns bytes per flow.
    fn run_backlogged(q: Qfq, weights: &[u32], pkts: usize, seed: u64) -> (Vec<u64>, Vec<u32>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut s = S::new(q);
        let ids: Vec<FlowId> = weights.iter().map(|&w| add(&mut s, w, 1500)).collect();
        for &f in &ids {
            for _ in 0..8 {
                enq(&mut s, f, rng.random_range(64..=1500), 0);
            }
        }
        let mut bytes = vec![0u64; ids.len()];
        for n in 0..pkts {
            let p = s.dequeue(Nanos(0)).expect("backlogged");
            bytes[p.flow.index()] += u64::from(p.len);
            enq(&mut s, p.flow, rng.random_range(64..=1500), 0);
            if n % 4099 == 0 {
                check(&s);
            }
        }
        check(&s);
        (bytes, weights.to_vec())
    }

    fn assert_fair(bytes: &[u64], weights: &[u32]) {
        let total: u64 = bytes.iter().sum();
        let wsum: u32 = weights.iter().sum();
        for (i, (&b, &w)) in bytes.iter().zip(weights).enumerate() {
            let share = b as f64 / total as f64;
            let want = f64::from(w) / f64::from(wsum);
            assert!(
                (share / want - 1.0).abs() < 0.01,
                "flow {i}: share {share} want {want}"
            );
        }
        let x: Vec<f64> = bytes
            .iter()
            .zip(weights)
            .map(|(&b, &w)| b as f64 / f64::from(w))
            .collect();
        let jain =
            x.iter().sum::<f64>().powi(2) / (x.len() as f64 * x.iter().map(|v| v * v).sum::<f64>());
        assert!(jain >= 0.999, "Jain {jain}");
    }

    #[test]
    fn long_run_weighted_fairness() {
        let (b, w) = run_backlogged(Qfq::new(), &[1, 2, 4, 8, 128], 400_000, 1);
        assert_fair(&b, &w);
        // Weights that are not powers of two (inexact inverse weights).
        let (b, w) = run_backlogged(Qfq::new(), &[3, 5, 7, 100, 1000], 400_000, 2);
        assert_fair(&b, &w);
    }

    #[test]
    fn fairness_across_virtual_time_wrap() {
        let (b, w) = run_backlogged(
            Qfq::with_v(u64::MAX - (1 << 50)),
            &[1, 2, 4, 8, 128],
            400_000,
            3,
        );
        assert_fair(&b, &w);
    }

    /// B-WFI on a virtual link with sequential departures: over any interval
    /// in which flow k stays backlogged, φ_k·W − W_k ≤ φ_k·(3·σ_k + 2·L) ≤
    /// 6·L_k + 2·φ_k·L (the byte form of the paper's T-WFI_k · φ_k·R, with
    /// σ_k < 2·L_k/φ_k), φ_k = w_k/Σw.
    fn bwfi_run(seed: u64, start_v: u64) -> Vec<i128> {
        // (weight, max_len, arrival probability per step, burst)
        let spec: [(u32, u32, f64, u32); 7] = [
            (1, 1500, 1.0, 0),
            (3, 64, 0.05, 20),
            (7, 9000, 0.01, 4),
            (64, 200, 0.02, 40),
            (200, 1500, 1.0, 0),
            (1, 65536, 0.002, 2),
            (5000, 1, 0.01, 200),
        ];
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut s = S::new(Qfq::with_v(start_v));
        let ids: Vec<FlowId> = spec.iter().map(|&(w, l, _, _)| add(&mut s, w, l)).collect();
        let wsum: i128 = spec.iter().map(|x| i128::from(x.0)).sum();
        let lmax = i128::from(spec.iter().map(|x| x.1).max().unwrap_or(0));
        let n = ids.len();
        let mut wk = vec![0i128; n];
        let mut w_all = 0i128;
        let mut min_d: Vec<Option<i128>> = vec![None; n];
        let mut worst = vec![i128::MIN; n];
        // D_k · Σw = w_k·W − Σw·W_k.
        let d = |k: usize, w_all: i128, wk: &[i128]| i128::from(spec[k].0) * w_all - wsum * wk[k];
        for step in 0..150_000u32 {
            for (k, &(_, l, p, burst)) in spec.iter().enumerate() {
                let queued = s.flows().queued(ids[k]).unwrap_or(0);
                let arrivals = if burst == 0 {
                    usize::from(queued < 4) * 4
                } else if rng.random_bool(p) {
                    rng.random_range(1..=burst) as usize
                } else {
                    0
                };
                for _ in 0..arrivals {
                    let len = if rng.random_bool(0.5) {
                        l
                    } else {
                        rng.random_range(1..=l)
                    };
                    enq(&mut s, ids[k], len, 0);
                }
                if queued == 0 && arrivals > 0 {
                    min_d[k] = Some(d(k, w_all, &wk));
                }
            }
            let p = s.dequeue(Nanos(0)).expect("backlogged");
            w_all += i128::from(p.len);
            wk[p.flow.index()] += i128::from(p.len);
            for k in 0..n {
                if let Some(m) = min_d[k] {
                    let dk = d(k, w_all, &wk);
                    worst[k] = worst[k].max(dk - m);
                    min_d[k] = Some(m.min(dk));
                    if s.flows().queued(ids[k]) == Some(0) {
                        min_d[k] = None;
                    }
                }
            }
            if step % 1009 == 0 {
                check(&s);
            }
        }
        (0..n)
            .map(|k| {
                let (w, l) = (i128::from(spec[k].0), i128::from(spec[k].1));
                let bound = 6 * l * wsum + 2 * w * lmax;
                assert!(
                    worst[k] <= bound,
                    "flow {k}: B-WFI·Σw {} > bound·Σw {bound}",
                    worst[k]
                );
                worst[k]
            })
            .collect()
    }

    #[test]
    fn bwfi_bound_holds() {
        let a = bwfi_run(7, 0);
        let b = bwfi_run(8, u64::MAX - (1 << 52));
        // The bounds were met with room to spare but not trivially: the
        // tightest flows used ~45 % of theirs in these runs.
        assert!(a.iter().chain(&b).any(|&x| x > 0));
    }

    #[test]
    fn bad_configs_rejected() {
        let mut s = S::new(Qfq::with_max_flows(20));
        let err = |r: Result<FlowId, ConfigError>| r.expect_err("must be rejected");
        assert_eq!(
            err(s.add_flow(FlowConfig::weight(0))),
            ConfigError::OutOfRange {
                alg: "qfq",
                field: "weight",
                value: 0,
                min: 1,
                max: 65536
            }
        );
        assert_eq!(
            err(s.add_flow(FlowConfig::weight(65537))),
            ConfigError::OutOfRange {
                alg: "qfq",
                field: "weight",
                value: 65537,
                min: 1,
                max: 65536
            }
        );
        assert_eq!(
            err(s.add_flow(FlowConfig::weight(1).with_max_len(0))),
            ConfigError::OutOfRange {
                alg: "qfq",
                field: "max_len",
                value: 0,
                min: 1,
                max: 65536
            }
        );
        assert_eq!(
            err(s.add_flow(FlowConfig::weight(1).with_max_len(65537))),
            ConfigError::OutOfRange {
                alg: "qfq",
                field: "max_len",
                value: 65537,
                min: 1,
                max: 65536
            }
        );
        // Sum of weights: 16 × 2^16 = 2^20 is the maximum.
        let ids: Vec<FlowId> = (0..16).map(|_| add(&mut s, 65536, 1500)).collect();
        assert_eq!(s.discipline().weight_sum(), 1 << 20);
        assert_eq!(
            err(s.add_flow(FlowConfig::weight(1))),
            ConfigError::WeightSum {
                alg: "qfq",
                sum: (1 << 20) + 1,
                max: 1 << 20
            }
        );
        // A change is checked against the sum without the old weight.
        s.change_flow(
            ids[0],
            FlowConfig::weight(65536).with_max_len(9000),
            Nanos(0),
        )
        .expect("same weight");
        s.change_flow(
            ids[0],
            FlowConfig::weight(65535).with_max_len(9000),
            Nanos(0),
        )
        .expect("smaller");
        add(&mut s, 1, 1500);
        assert_eq!(
            s.change_flow(
                ids[1],
                FlowConfig::weight(65536).with_max_len(100),
                Nanos(0)
            ),
            Ok(()),
            "same weight again"
        );
        assert!(matches!(
            s.change_flow(ids[0], FlowConfig::weight(65536), Nanos(0)),
            Err(ConfigError::WeightSum { sum, .. }) if sum == (1 << 20) + 1
        ));
        s.remove_flow(ids[2]).expect("exists");
        assert_eq!(s.discipline().weight_sum(), (1 << 20) - 65536);
        // Number of flows.
        while s.flow_ids().len() < 20 {
            add(&mut s, 1, 1500);
        }
        assert_eq!(
            err(s.add_flow(FlowConfig::weight(1))),
            ConfigError::TooManyFlows {
                alg: "qfq",
                max: 20
            }
        );
        check(&s);
        let lim = Qfq::new().limits();
        assert_eq!(
            (
                lim.max_flows,
                lim.max_weight,
                lim.max_weight_sum,
                lim.max_len
            ),
            (1 << 20, 1 << 16, 1 << 20, 1 << 16)
        );
    }

    #[derive(Clone, Debug)]
    enum Op {
        Add(u32, u32),
        Change(usize, u32, u32),
        Remove(usize),
        Enq(usize, u32, u8),
        Deq(u8),
    }

    fn weight() -> impl Strategy<Value = u32> {
        prop_oneof![Just(1u32), Just(65536), 1..=16u32, 1..=65536u32]
    }

    fn max_len() -> impl Strategy<Value = u32> {
        prop_oneof![Just(1u32), Just(65536), 64..=1500u32, 1..=65536u32]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            2 => (weight(), max_len()).prop_map(|(w, l)| Op::Add(w, l)),
            1 => (any::<usize>(), weight(), max_len()).prop_map(|(i, w, l)| Op::Change(i, w, l)),
            1 => any::<usize>().prop_map(Op::Remove),
            8 => (any::<usize>(), any::<u32>(), 1..=8u8).prop_map(|(i, l, n)| Op::Enq(i, l, n)),
            6 => (1..=12u8).prop_map(Op::Deq),
        ]
    }

    fn run_ops(ops: &[Op], start_v: u64) {
        let mut s = S::new(Qfq::with_v(start_v));
        // Model: live flows with their queued items in FIFO order.
        let mut live: Vec<(FlowId, VecDeque<u64>)> = Vec::new();
        let mut next_item = 0u64;
        for op in ops {
            match *op {
                Op::Add(w, l) => {
                    if let Ok(id) = s.add_flow(FlowConfig::weight(w).with_max_len(l).with_limit(64))
                    {
                        live.push((id, VecDeque::new()));
                    } else {
                        assert!(s.discipline().weight_sum() + u64::from(w) > QFQ_MAX_WEIGHT_SUM);
                    }
                }
                Op::Change(i, w, l) if !live.is_empty() => {
                    let id = live[i % live.len()].0;
                    let cfg = FlowConfig::weight(w).with_max_len(l).with_limit(64);
                    match s.change_flow(id, cfg, Nanos(0)) {
                        Ok(()) => assert_eq!(s.flow_config(id), Some(&cfg)),
                        Err(
                            ConfigError::WeightSum { .. } | ConfigError::MaxLenBelowQueued { .. },
                        ) => {}
                        Err(e) => panic!("unexpected {e}"),
                    }
                }
                Op::Remove(i) if !live.is_empty() => {
                    let (id, q) = live.swap_remove(i % live.len());
                    let pkts = s.remove_flow(id).expect("live");
                    assert_eq!(
                        pkts.iter().map(|p| p.item).collect::<Vec<_>>(),
                        Vec::from(q)
                    );
                }
                Op::Enq(i, sel, n) if !live.is_empty() => {
                    let k = i % live.len();
                    let id = live[k].0;
                    let ml = s.flow_config(id).map_or(1, |c| c.max_len);
                    for j in 0..n {
                        let len = (sel.rotate_left(u32::from(j) * 5)) % ml + 1;
                        match s.enqueue(Pkt::new(id, len, Nanos(0), next_item), Nanos(0)) {
                            Ok(()) => live[k].1.push_back(next_item),
                            Err(r) => assert_eq!(r.reason, crate::flow::DropReason::QueueFull),
                        }
                        next_item += 1;
                    }
                }
                Op::Deq(n) => {
                    for _ in 0..n {
                        let backlog: usize = live.iter().map(|(_, q)| q.len()).sum();
                        match s.dequeue(Nanos(0)) {
                            Some(p) => {
                                let (_, q) = live
                                    .iter_mut()
                                    .find(|(id, _)| *id == p.flow)
                                    .expect("live flow");
                                assert_eq!(q.pop_front(), Some(p.item), "FIFO within a flow");
                            }
                            None => assert_eq!(backlog, 0, "work conservation"),
                        }
                        check(&s);
                    }
                }
                _ => {}
            }
            check(&s);
            let backlog: u64 = live.iter().map(|(_, q)| q.len() as u64).sum();
            assert_eq!(s.backlog().pkts, backlog);
        }
        // Everything queued comes out.
        let rest = drain(&mut s);
        assert_eq!(rest.len(), live.iter().map(|(_, q)| q.len()).sum::<usize>());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        #[test]
        fn random_ops(ops in proptest::collection::vec(op(), 1..200), wrap in any::<bool>()) {
            run_ops(&ops, if wrap { u64::MAX - (1 << 48) } else { 0 });
        }
    }

    /// The extremes of the ranges together: weight 1 with max_len 2^16
    /// (group 32, slot width 2^47) and weight 2^16 with max_len 1 (group 0),
    /// plus the corners in between, with full-size packets, near the
    /// weight-sum limit and across the wrap of the virtual time.
    #[test]
    fn extreme_parameters() {
        for start in [0, u64::MAX - (1 << 47)] {
            let mut s = S::new(Qfq::with_v(start));
            let specs = [(1, 65536), (65536, 1), (65536, 65536), (1, 1)];
            let mut ids = Vec::new();
            for &(w, l) in &specs {
                ids.push(add(&mut s, w, l));
            }
            // Fill the weight sum up to exactly 2^20 with max-weight flows.
            while s.discipline().weight_sum() + 65536 <= 1 << 20 {
                ids.push(add(&mut s, 65536, 1500));
            }
            let rest = (1u64 << 20) - s.discipline().weight_sum();
            if rest > 0 {
                ids.push(add(&mut s, rest as u32, 1500));
            }
            assert_eq!(s.discipline().weight_sum(), 1 << 20);
            let mut item = 0;
            for round in 0..40 {
                for (k, &id) in ids.iter().enumerate() {
                    let l = s.flow_config(id).map_or(1, |c| c.max_len);
                    for _ in 0..3 {
                        enq(&mut s, id, if round % 2 == 0 { l } else { l / 2 + 1 }, item);
                        item += 1;
                    }
                    if k % 3 == 0 {
                        s.dequeue(Nanos(0)).expect("backlogged");
                    }
                }
                for _ in 0..ids.len() {
                    s.dequeue(Nanos(0)).expect("backlogged");
                    check(&s);
                }
                if round == 20 {
                    // Live changes between the extremes while backlogged.
                    // (Lower one first: the sum is at its limit.)
                    let cfg = |w| {
                        FlowConfig::weight(w)
                            .with_max_len(65536)
                            .with_limit(1 << 20)
                    };
                    s.change_flow(ids[2], cfg(1), Nanos(0)).expect("ok");
                    s.change_flow(ids[0], cfg(65536), Nanos(0)).expect("ok");
                    check(&s);
                }
            }
            drain(&mut s);
            assert!(s.stats().conserved());
            assert_eq!(s.backlog().pkts, 0);
        }
    }

    /// Removing backlogged flows from the middle, the head and the tail of
    /// one slot list (singly linked: the walk finds the predecessor) keeps
    /// the structure consistent and the other flows' packets all leave.
    #[test]
    fn removal_from_anywhere_in_a_slot_list() {
        let mut s = S::new(Qfq::new());
        let ids: Vec<FlowId> = (0..5).map(|_| add(&mut s, 1, 1000)).collect();
        for (k, &f) in ids.iter().enumerate() {
            for j in 0..3 {
                enq(&mut s, f, 1000, (k * 10 + j) as u64);
            }
        }
        // Same group, same start: one slot, listed 4, 3, 2, 1, 0.
        check(&s);
        for k in [2, 4, 0] {
            let pkts = s.remove_flow(ids[k]).expect("live");
            assert_eq!(pkts.len(), 3, "flow {k}");
            check(&s);
        }
        let mut out = drain(&mut s);
        out.sort_unstable();
        assert_eq!(out, vec![10, 11, 12, 30, 31, 32]);
        assert!(s.stats().conserved());
    }

    /// A live weight change while backlogged moves the shares to the new
    /// weights, loses nothing and keeps the structure consistent.
    #[test]
    fn live_weight_change() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut s = S::new(Qfq::new());
        let a = add(&mut s, 1, 1500);
        let b = add(&mut s, 1, 1500);
        for f in [a, b] {
            for _ in 0..16 {
                enq(&mut s, f, rng.random_range(64..=1500), 0);
            }
        }
        let mut run = |s: &mut S, n: usize| {
            let mut bytes = [0u64; 2];
            for _ in 0..n {
                let p = s.dequeue(Nanos(0)).expect("backlogged");
                bytes[p.flow.index()] += u64::from(p.len);
                enq(s, p.flow, rng.random_range(64..=1500), 0);
            }
            bytes
        };
        let x = run(&mut s, 20_000);
        assert!((x[0] as f64 / x[1] as f64 - 1.0).abs() < 0.02);
        s.change_flow(
            a,
            FlowConfig::weight(9).with_max_len(1500).with_limit(1 << 20),
            Nanos(0),
        )
        .expect("ok");
        check(&s);
        let x = run(&mut s, 50_000);
        assert!(
            (x[0] as f64 / x[1] as f64 / 9.0 - 1.0).abs() < 0.02,
            "{x:?}"
        );
        s.change_flow(
            b,
            FlowConfig::weight(9).with_max_len(64).with_limit(1 << 20),
            Nanos(0),
        )
        .expect_err("queued");
        check(&s);
    }

    #[test]
    fn built_by_name() {
        let mut s = crate::sched::Algorithm::Qfq.build::<u32>();
        let f = s.add_flow(FlowConfig::weight(3)).expect("ok");
        s.enqueue(Pkt::new(f, 100, Nanos(0), 7), Nanos(0))
            .expect("ok");
        assert_eq!(s.dequeue(Nanos(0)).map(|p| p.item), Some(7));
        assert_eq!(s.name(), "qfq");
    }
}
