//! The flow table in arrival order (FIFO across flows): one ring of packets
//! for all flows, and per flow a 32-byte record of what an enqueue and a
//! dequeue touch.

use std::collections::VecDeque;

use super::{Cold, FlowTable, NIL, Totals};
use crate::flow::{Bytes, FlowConfig, FlowId, Pkt, Rejected};

/// The per-packet part of a flow in a table in arrival order: the queue
/// length, the admission limits and the counters, on half a cache line.
/// Two flows share a line, so a sweep through the flows (the order in
/// which a FIFO serves a closed loop) misses once for every two.
///
/// Packets accepted are counted in 32 bits here and carried into
/// [`Cold::enq_pkts_hi`] when they wrap; departed packets are derived
/// (`enqueued − len`, since a live flow never drops a packet it accepted).
/// The two counters one end adds 1 to (`len` and `enq_pkts_lo`) are not
/// adjacent, so each stays one scalar add to memory (see `Hot`).
#[derive(Debug, Clone)]
#[repr(C, align(32))]
pub(crate) struct ArrivalRec {
    /// Packets queued.
    len: u32,
    /// Queue limit in packets; 0 marks a dead flow.
    limit: u32,
    max_len: Bytes,
    /// Packets accepted, modulo 2^32.
    enq_pkts_lo: u32,
    /// Bytes accepted.
    enq_bytes: u64,
    /// Bytes that left through a dequeue.
    deq_bytes: u64,
}

impl ArrivalRec {
    pub(super) fn new(cfg: &FlowConfig) -> ArrivalRec {
        ArrivalRec {
            len: 0,
            limit: cfg.limit.max(1),
            max_len: cfg.max_len,
            enq_pkts_lo: 0,
            enq_bytes: 0,
            deq_bytes: 0,
        }
    }
    /// Packets queued.
    pub(super) fn len(&self) -> u32 {
        self.len
    }
    /// The limit (0: a dead flow).
    pub(super) fn limit(&self) -> u32 {
        self.limit
    }
    pub(super) fn set_limits(&mut self, cfg: &FlowConfig) {
        self.max_len = cfg.max_len;
        self.limit = cfg.limit.max(1);
    }
    pub(super) fn kill(&mut self) {
        self.limit = 0;
    }
    /// Packets accepted, with the high bits kept in `cold`.
    pub(super) fn enq_pkts(&self, cold: &Cold) -> u64 {
        (cold.enq_pkts_hi << 32) | u64::from(self.enq_pkts_lo)
    }
    /// Bytes accepted and bytes dequeued.
    pub(super) fn bytes(&self) -> (u64, u64) {
        (self.enq_bytes, self.deq_bytes)
    }
    /// Would `len` bytes be refused: too long, queue full, or a dead flow
    /// (limit 0 fails the limit test)?
    #[inline(always)]
    fn refuses(&self, len: Bytes) -> bool {
        len > self.max_len || self.len >= self.limit
    }
    /// Counts a departure of `len` bytes (the scheduler-wide departed
    /// packets are derived from the ring's length).
    #[inline(always)]
    fn count_out(&mut self, totals: &mut Totals, len: Bytes) {
        self.len -= 1;
        self.deq_bytes += u64::from(len);
        totals.deq_bytes += u64::from(len);
    }
}

impl<T, X> FlowTable<T, X> {
    /// A table whose packets are kept in arrival order across all flows
    /// (see [`FlowTable`]).
    pub(crate) fn in_arrival_order() -> FlowTable<T, X> {
        FlowTable {
            arrival_order: true,
            ..FlowTable::default()
        }
    }
    /// [`FlowTable::admit`] for a table in arrival order. One compare with
    /// `ring_room` covers the ring's capacity and the scheduler-wide cap;
    /// reaching it takes the cold path, which grows the ring or finds the
    /// cap reached.
    #[inline(always)]
    pub(crate) fn admit_arrival(&mut self, pkt: Pkt<T>) -> Result<(), Rejected<T>> {
        debug_assert!(self.arrival_order);
        if self.ring.len() as u64 >= self.ring_room && !self.make_room() {
            return Err(self.refuse_checked(pkt, true));
        }
        let len = pkt.len;
        let i = pkt.flow.index();
        let Some(r) = self.arr.get_mut(i) else {
            return Err(self.refuse_checked(pkt, false));
        };
        if r.refuses(len) {
            return Err(self.refuse_checked(pkt, false));
        }
        r.len += 1;
        r.enq_bytes += u64::from(len);
        r.enq_pkts_lo = r.enq_pkts_lo.wrapping_add(1);
        if r.enq_pkts_lo == 0 {
            Self::carry_arrivals(&mut self.cold, i);
        }
        self.totals.enq_pkts += 1;
        self.totals.enq_bytes += u64::from(len);
        self.ring.push_back(pkt);
        Ok(())
    }
    /// The flow's 32-bit count of accepted packets wrapped: one more in its
    /// high bits.
    #[cold]
    #[inline(never)]
    fn carry_arrivals(cold: &mut [Cold], i: usize) {
        if let Some(c) = cold.get_mut(i) {
            c.enq_pkts_hi += 1;
        }
    }
    /// Why `pkt` would be refused by a table in arrival order (`full`: the
    /// ring is at its cap), or `None`.
    pub(super) fn arrival_refusal(&self, pkt: &Pkt<T>, full: bool) -> Option<super::DropReason> {
        use super::DropReason;
        let Some(r) = self.arr.get(pkt.flow.index()) else {
            return Some(DropReason::UnknownFlow);
        };
        if !(r.refuses(pkt.len) || full) {
            return None;
        }
        Some(if r.limit == 0 {
            DropReason::UnknownFlow
        } else if pkt.len > r.max_len {
            DropReason::TooLarge
        } else {
            DropReason::QueueFull
        })
    }
    /// Makes room for one more packet in the arrival ring: false if the
    /// cap is reached, else true, the ring grown first if it was full.
    #[cold]
    #[inline(never)]
    fn make_room(&mut self) -> bool {
        if self.ring.len() as u64 >= self.arrival_cap {
            return false;
        }
        if self.ring.len() == self.ring.capacity() {
            Self::grow_ring(&mut self.ring);
        }
        self.ring_room = (self.ring.capacity() as u64).min(self.arrival_cap);
        true
    }
    /// Sets the most packets a table in arrival order holds (a
    /// scheduler-wide limit, at most [`FlowTable::ARRIVAL_CAP`]).
    pub(crate) fn set_arrival_cap(&mut self, cap: u64) {
        self.arrival_cap = cap.min(Self::ARRIVAL_CAP);
        self.ring_room = (self.ring.capacity() as u64).min(self.arrival_cap);
    }
    /// Grows a full arrival ring by a quarter (at least 64 packets) rather
    /// than doubling it: a ring sweeps its whole capacity, so its working
    /// set is the capacity, and this keeps it within 1.25× the peak backlog
    /// (still amortised O(1) per packet).
    #[cold]
    #[inline(never)]
    fn grow_ring(ring: &mut VecDeque<Pkt<T>>) {
        ring.reserve_exact((ring.len() / 4).max(64));
    }
    /// Most packets a table in arrival order holds (as many as the pool's
    /// u32 slot indices allow in per-flow order): the caller refuses
    /// arrivals beyond it as a full queue.
    pub(crate) const ARRIVAL_CAP: u64 = NIL as u64 - 1;
    /// Packets queued in a table in arrival order (one load: the ring's
    /// length).
    #[inline(always)]
    pub(crate) fn arrival_queued(&self) -> u64 {
        self.ring.len() as u64
    }
    /// Takes the oldest packet of a table in arrival order.
    #[inline(always)]
    pub(crate) fn pop_arrival(&mut self) -> Option<Pkt<T>> {
        let pkt = self.ring.pop_front()?;
        // Only packets of live flows are queued.
        if let Some(r) = self.arr.get_mut(pkt.flow.index()) {
            r.count_out(&mut self.totals, pkt.len);
        }
        Some(pkt)
    }
    /// Takes every packet of flow `id` out of the arrival ring, oldest
    /// first, counting each as a departure. The others keep their order;
    /// the ring keeps its capacity.
    pub(super) fn unlink_arrivals(&mut self, id: FlowId, out: &mut Vec<Pkt<T>>) {
        let n = self.ring.len();
        for _ in 0..n {
            let Some(p) = self.ring.pop_front() else {
                break;
            };
            if p.flow == id {
                out.push(p);
            } else {
                self.ring.push_back(p);
            }
        }
        if let Some(r) = self.arr.get_mut(id.index()) {
            for p in out.iter() {
                r.count_out(&mut self.totals, p.len);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Nanos;

    /// Two records per cache line.
    #[test]
    fn record_is_half_a_line() {
        assert_eq!(core::mem::size_of::<ArrivalRec>(), 32);
        assert_eq!(core::mem::align_of::<ArrivalRec>(), 32);
    }

    /// The 32-bit arrival count wraps into the cold record: the flow's
    /// enqueued and dequeued packets stay exact across the wrap.
    #[test]
    fn arrivals_carry_past_32_bits() {
        let mut t = FlowTable::<u32>::in_arrival_order();
        t.set_arrival_cap(FlowTable::<u32>::ARRIVAL_CAP);
        let a = t.insert(FlowConfig::default());
        let b = t.insert(FlowConfig::default());
        // As if 2^32 − 2 packets of 1 byte had come and gone already.
        t.arr[a.index()].enq_pkts_lo = u32::MAX - 1;
        t.arr[a.index()].enq_bytes = u64::from(u32::MAX - 1);
        t.arr[a.index()].deq_bytes = u64::from(u32::MAX - 1);
        for i in 0..4 {
            t.admit_arrival(Pkt::new(a, 1, Nanos::ZERO, i)).unwrap();
        }
        t.admit_arrival(Pkt::new(b, 1, Nanos::ZERO, 9)).unwrap();
        let s = t.stats(a).unwrap();
        assert_eq!(s.enqueued.pkts, (1 << 32) + 2);
        assert_eq!(s.backlog.pkts, 4);
        assert_eq!(t.pop_arrival().map(|p| p.item), Some(0));
        let s = t.stats(a).unwrap();
        assert_eq!(s.dequeued.pkts, (1 << 32) - 1);
        assert_eq!(s.dequeued.bytes, u64::from(u32::MAX));
        assert!(s.conserved());
        assert_eq!(t.stats(b).unwrap().enqueued.pkts, 1);
    }
}
