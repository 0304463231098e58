//! The flow table's side of a time queue whose nodes are the packets' pool
//! slots ([`TimeQueue::SLOT_NODES`](crate::shape::TimeQueue::SLOT_NODES),
//! the shaper's wheels): each queued packet's slot is also its entry in the
//! time queue, so a packet costs one slot, one allocation and one free.
//!
//! A slot holds up to two things: the packet (in its flow's FIFO) and the
//! entry (a *token*, filed in the time queue until the shaper takes it off
//! the ready list). A released token normally finds its own packet at the
//! head of its flow ([`FlowTable::take_head_slot`]); both leave and the
//! slot is freed. Otherwise (a flow's tokens released out of order, or a
//! token of a removed flow) the token pops its flow's head as any entry
//! does, and each slot is freed only once it holds neither a packet nor a
//! filed token ([`FlowTable::pop_keeping`], [`FlowTable::free_token_slot`]),
//! so a filed token never names a slot another packet reuses.

use super::{DropReason, FlowId, FlowTable, NIL, Pkt, Rejected};

impl<T> FlowTable<T> {
    /// [`FlowTable::admit`] returning the pool slot the packet took.
    #[inline(always)]
    pub(crate) fn admit_slot(&mut self, pkt: Pkt<T>) -> Result<u32, Rejected<T>> {
        self.admit_at(pkt, false).map(|(i, _)| i)
    }

    /// The packet in slot `i` if it is its flow's head: taken, counted as a
    /// departure, the slot freed (its token has just been taken). `None`
    /// (nothing changed) when the slot holds no packet or one behind its
    /// flow's head.
    #[inline(always)]
    pub(crate) fn take_head_slot(&mut self, i: u32) -> Option<Pkt<T>> {
        let s = self.pool.get_mut(i as usize)?;
        let flow = s.pkt.as_ref()?.flow;
        // Only packets of live flows are in the pool.
        let h = self.hot.get_mut(flow.index())?;
        if h.head != i {
            return None;
        }
        let pkt = s.pkt.take()?;
        let (next, next_len) = (s.next, s.next_len);
        s.next = self.free_slot;
        self.free_slot = i;
        Self::count_out(&mut self.totals, h, pkt.len);
        if h.len == 0 {
            h.head = NIL;
            h.tail = NIL;
            h.head_len = 0;
        } else {
            h.head = next;
            h.head_len = next_len;
        }
        Some(pkt)
    }

    /// Takes the head packet of a flow, as [`FlowTable::pop`] does, but
    /// frees its slot only if `filed(slot)` is false (no token of the slot
    /// is still in the time queue); a kept slot holds no packet until its
    /// token is taken and [`FlowTable::free_token_slot`] frees it.
    pub(crate) fn pop_keeping(
        &mut self,
        id: FlowId,
        filed: impl Fn(u32) -> bool,
    ) -> Option<Pkt<T>> {
        let h = self.hot.get_mut(id.index())?;
        if h.len == 0 {
            return None;
        }
        let i = h.head;
        let s = self.pool.get_mut(i as usize)?;
        let pkt = s.pkt.take()?;
        let (next, next_len) = (s.next, s.next_len);
        if filed(i) {
            s.next = NIL;
        } else {
            s.next = self.free_slot;
            self.free_slot = i;
        }
        Self::count_out(&mut self.totals, h, pkt.len);
        if h.len == 0 {
            h.head = NIL;
            h.tail = NIL;
            h.head_len = 0;
        } else {
            h.head = next;
            h.head_len = next_len;
        }
        Some(pkt)
    }

    /// Frees slot `i` whose token has been taken and which holds no packet
    /// (a slot holding one is left alone).
    pub(crate) fn free_token_slot(&mut self, i: u32) {
        if let Some(s) = self.pool.get_mut(i as usize)
            && s.pkt.is_none()
        {
            s.next = self.free_slot;
            self.free_slot = i;
        }
    }

    /// [`FlowTable::remove`] for a table under a slot-node time queue: the
    /// slots of packets whose token is still `filed` are kept (freed when
    /// the token is taken).
    pub(crate) fn remove_keeping(
        &mut self,
        id: FlowId,
        filed: impl Fn(u32) -> bool,
    ) -> Vec<Pkt<T>> {
        debug_assert!(!self.arrival_order);
        let mut out = Vec::with_capacity(self.hot.get(id.index()).map_or(0, |h| h.len as usize));
        while let Some(p) = self.pop_keeping(id, &filed) {
            out.push(p);
        }
        for p in &out {
            // The packet was counted as a departure; it is a removal.
            self.totals.deq_pkts -= 1;
            self.totals.deq_bytes -= u64::from(p.len);
            self.rare.drop(DropReason::Removed, p.len);
        }
        if let Some(h) = self.hot.get_mut(id.index()) {
            h.limit = 0;
            self.live -= 1;
            self.free.push(id.0);
        }
        out
    }
}
