//! The tree walk: ranking a child, entering it in its parent's queue or
//! the shaper, taking it out again, popping a node's next child and
//! charging the children on a dequeue's path.

use super::member::{Member, NODE, Slot};
use super::node_queue::{NodeQ, SMALL_MAX};
use super::sched::PolicySched;
use super::shaper::{advance, next_tx};
use super::share_tags::{REBASE_TAGS_AT, inc};
use super::spec::Kind;
use crate::flow::FlowId;
use crate::pq::{IntPq, Rank};

impl<T> PolicySched<T> {
    #[inline(always)]
    pub(super) fn member(&self, r: u32) -> &Member {
        if r & NODE != 0 {
            &self.nm[(r & !NODE) as usize]
        } else {
            &self.fm[r as usize]
        }
    }

    #[inline(always)]
    pub(super) fn member_mut(&mut self, r: u32) -> &mut Member {
        if r & NODE != 0 {
            &mut self.nm[(r & !NODE) as usize]
        } else {
            &mut self.fm[r as usize]
        }
    }

    #[inline(always)]
    pub(super) fn has_work(&self, r: u32) -> bool {
        if r & NODE != 0 {
            !self.nodes[(r & !NODE) as usize].q.is_empty()
        } else {
            self.flows.hot[r as usize].len != 0
        }
    }

    /// The rank of child `r` in node `n`.
    #[inline]
    pub(super) fn rank(&self, n: usize, r: u32) -> Rank {
        let m = self.member(r);
        match self.nodes[n].kind {
            Kind::Rr => 0,
            Kind::Prio { .. } => u64::from(m.prio),
            Kind::Wfq { .. } | Kind::Hclock { .. } => m.start,
            Kind::Pfabric { unit } => {
                let rem = match m.size {
                    Some(s) => s.saturating_sub(m.sent),
                    None => m.bytes,
                };
                rem / unit
            }
            Kind::Edf { unit } => {
                let ts = self.head(r).map_or(0, |p| p.0);
                ts.saturating_add(m.deadline) / unit
            }
            Kind::Lstf { unit, link } => {
                let (ts, len) = self.head(r).unwrap_or((0, 0));
                ts.saturating_add(m.slack)
                    .saturating_sub(link.tx_time(len).as_u64())
                    / unit
            }
        }
    }

    /// Arrival time and length of a flow's head packet.
    fn head(&self, r: u32) -> Option<(u64, u64)> {
        if r & NODE != 0 {
            return None;
        }
        self.flows
            .head(FlowId(r))
            .map(|p| (p.ts.as_u64(), u64::from(p.len)))
    }

    /// Puts child `r` (idle, with work) in its parent's queue, or in the
    /// shaper if its rate limit does not allow it at `now`. `fresh`: it
    /// just became backlogged (hclock restarts its reservation clock).
    /// Returns true if it went into the parent's queue.
    #[inline]
    pub(super) fn enter(&mut self, r: u32, now: u64, fresh: bool) -> bool {
        let m = self.member(r);
        let n = m.parent as usize;
        if m.limit.is_some() && m.next_tx > now {
            let t = m.next_tx;
            let slot = self.shaper.push(t, r);
            self.member_mut(r).slot = slot;
            self.pstats.parked += 1;
            self.flows.count_overlimit();
            return false;
        }
        let vt = self.nodes[n].vt;
        let kind = self.nodes[n].kind;
        if let Kind::Wfq { .. } | Kind::Hclock { .. } = kind {
            let m = self.member_mut(r);
            m.start = m.start.max(vt).max(m.finish);
            if fresh {
                let floor = now.saturating_sub(m.res_credit);
                if floor >= m.rtag {
                    // At or past the exact clock (see `next_tx`).
                    (m.rtag, m.rtag_ahead) = (floor, 0);
                }
            }
        }
        let rank = self.rank(n, r);
        let h = self.nodes[n].q.push(rank, r);
        self.member_mut(r).slot = Slot::Queued(h);
        if self.nodes[n].grow.is_some() && self.nodes[n].q.len() > SMALL_MAX {
            self.grow(n);
        }
        let mut res_h = None;
        let (has_res, rtag) = (self.member(r).reservation.is_some(), self.member(r).rtag);
        if let (Some(res), true) = (self.nodes[n].res.as_mut(), has_res) {
            res_h = res.push(rtag, r).ok();
        }
        self.member_mut(r).res_h = res_h;
        true
    }

    /// Moves an automatic node's children from its `SmallPq` into its
    /// kind's queue, in order, and re-points every child's handle.
    #[cold]
    fn grow(&mut self, n: usize) {
        let Some((kind, buckets)) = self.nodes[n].grow.take() else {
            return;
        };
        let mut small = core::mem::replace(&mut self.nodes[n].q, NodeQ::new(kind, buckets));
        while let Some((rank, r)) = small.pop_ranked() {
            let h = self.nodes[n].q.push(rank, r);
            self.member_mut(r).slot = Slot::Queued(h);
        }
    }

    /// Child `r` now has work: enter it and, while that makes a parent go
    /// from empty to non-empty, enter the parent too.
    pub(super) fn activate(&mut self, mut r: u32, now: u64, mut fresh: bool) {
        loop {
            if self.member(r).slot != Slot::Idle {
                return;
            }
            let n = self.member(r).parent as usize;
            let was_empty = self.nodes[n].q.is_empty();
            if !self.enter(r, now, fresh) || !was_empty || n == self.root {
                return;
            }
            r = n as u32 | NODE;
            fresh = true;
        }
    }

    /// Takes child `r` out of its parent's queue or the shaper; a parent left
    /// empty is taken out of its own parent in turn.
    pub(super) fn detach(&mut self, mut r: u32) {
        loop {
            let m = self.member(r);
            let n = m.parent as usize;
            match m.slot {
                Slot::Idle => return,
                Slot::Parked(filed) => {
                    self.shaper.remove(filed);
                    self.member_mut(r).slot = Slot::Idle;
                    return;
                }
                Slot::Queued(h) => {
                    let res_h = m.res_h;
                    self.nodes[n].q.remove(h);
                    if let (Some(rh), Some(res)) = (res_h, self.nodes[n].res.as_mut()) {
                        res.remove(rh);
                    }
                    let m = self.member_mut(r);
                    m.slot = Slot::Idle;
                    m.res_h = None;
                    if !self.nodes[n].q.is_empty() || n == self.root {
                        return;
                    }
                    r = n as u32 | NODE;
                }
            }
        }
    }

    /// Moves every child whose release time has come from the shaper back
    /// into the tree.
    #[inline]
    pub(super) fn release(&mut self, now: u64) {
        while let Some(r) = self.shaper.pop_due(now) {
            self.member_mut(r).slot = Slot::Idle;
            self.pstats.released += 1;
            self.activate(r, now, false);
        }
    }

    /// Pops node `n`'s next child.
    #[inline]
    pub(super) fn pop(&mut self, n: usize, now: u64) -> Option<u32> {
        let st = &mut self.nodes[n];
        let (r, by_res) = match st.res.as_mut() {
            Some(res) if res.peek_min_rank().is_some_and(|t| t <= now) => {
                let r = res.pop_min()?.1;
                let h = match self.member(r).slot {
                    Slot::Queued(h) => Some(h),
                    _ => None,
                };
                if let Some(h) = h {
                    self.nodes[n].q.remove(h);
                }
                (r, true)
            }
            _ => {
                let r = st.q.pop()?;
                if let (Some(rh), Some(res)) = (self.member(r).res_h, self.nodes[n].res.as_mut()) {
                    res.remove(rh);
                }
                (r, false)
            }
        };
        let m = self.member_mut(r);
        m.slot = Slot::Idle;
        m.res_h = None;
        m.by_res = by_res;
        Some(r)
    }

    /// Accounts `len` bytes served from child `r` of node `n`.
    #[inline]
    pub(super) fn served(&mut self, n: usize, r: u32, len: u64, now: u64) {
        let kind = self.nodes[n].kind;
        let mut vt = self.nodes[n].vt;
        let max_len = u64::from(self.policy.max_len);
        let m = self.member_mut(r);
        m.bytes -= len;
        m.sent += len;
        match kind {
            Kind::Wfq { scale } => {
                vt = m.start;
                m.finish = m.start + inc(len, scale, m.weight);
            }
            Kind::Hclock { scale } => {
                if !m.by_res {
                    vt = m.start;
                    m.finish = m.start + inc(len, scale, m.weight);
                }
                if let Some(res) = m.reservation {
                    (m.rtag, m.rtag_ahead) = advance(m.rtag, m.rtag_ahead, res, len);
                }
            }
            _ => {}
        }
        if let Some(rate) = m.limit {
            let credit = m.limit_credit(rate, max_len);
            (m.next_tx, m.next_tx_ahead) =
                next_tx(m.next_tx, m.next_tx_ahead, now, rate, len, credit);
        }
        self.nodes[n].vt = vt;
        if vt > REBASE_TAGS_AT {
            self.rebase_tags(n);
        }
    }
}
