//! FIFO across all flows: packets leave in arrival order, whatever their
//! flow. Per-flow limits and counters still apply.

use super::{Discipline, Limits};
use crate::flow::{FlowConfig, FlowId};
use crate::units::{Bytes, Nanos};

/// First in, first out. Holds no state: the flow table links the packets
/// in arrival order (see [`Discipline::ARRIVAL_ORDER`]), so a dequeue takes
/// the oldest packet without asking the discipline.
#[derive(Debug, Default)]
pub struct Fifo;

impl Fifo {
    /// An empty FIFO.
    pub fn new() -> Fifo {
        Fifo
    }
}

impl Discipline for Fifo {
    const ARRIVAL_ORDER: bool = true;
    fn name(&self) -> &'static str {
        "fifo"
    }
    fn limits(&self) -> Limits {
        Limits::generic("fifo")
    }
    fn add(&mut self, _id: FlowId, _cfg: &FlowConfig) {}
    /// Arrival order does not depend on the config: nothing to do.
    fn change(&mut self, _: FlowId, _: &FlowConfig, _: &FlowConfig, _: Option<Bytes>, _: Nanos) {}
    fn remove(&mut self, _id: FlowId, _cfg: &FlowConfig) {}
    fn activate(&mut self, _id: FlowId, _head: Bytes, _now: Nanos) {}
    fn deactivate(&mut self, _id: FlowId) {}
    /// Never asked: a FIFO is served from the flow table's arrival order.
    fn pick<H: Fn(FlowId) -> Bytes>(&mut self, _head: H) -> Option<FlowId> {
        None
    }
    fn depart(&mut self, _id: FlowId, _len: Bytes, _next: Option<Bytes>) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{DropReason, Pkt};
    use crate::sched::{FlowSched, Scheduler};

    /// The arrival ring grows past its first capacity (64) below a total
    /// limit of 150, refuses at the limit, takes a packet again once one
    /// left, and the derived departures stay exact across a removal.
    #[test]
    fn ring_grows_below_the_total_limit_and_refuses_at_it() {
        let mut s = FlowSched::<_, u64>::new(Fifo::new()).with_total_limit(150);
        let cfg = FlowConfig::default().with_limit(100);
        let (a, b) = (s.add_flow(cfg).unwrap(), s.add_flow(cfg).unwrap());
        let t = Nanos::ZERO;
        for i in 0..150u64 {
            let f = if i % 3 == 0 { a } else { b };
            s.enqueue(Pkt::new(f, 100, t, i), t).unwrap();
        }
        assert!(s.flows().pool_slots() >= 150);
        let r = s.enqueue(Pkt::new(a, 100, t, 150), t).unwrap_err();
        assert_eq!(r.reason, DropReason::QueueFull);
        assert_eq!(s.dequeue(t).map(|p| p.item), Some(0));
        s.enqueue(Pkt::new(a, 100, t, 151), t).unwrap();
        let r = s.enqueue(Pkt::new(a, 100, t, 152), t).unwrap_err();
        assert_eq!(r.reason, DropReason::QueueFull);
        // Flow b's 100 packets leave through removal, not a dequeue.
        assert_eq!(s.remove_flow(b).unwrap().len(), 100);
        let st = s.stats();
        assert_eq!(st.enqueued.pkts, 151);
        assert_eq!(st.dequeued.pkts, 1);
        assert_eq!(st.dropped(DropReason::Removed).pkts, 100);
        assert_eq!(st.backlog.pkts, 50);
        assert!(st.conserved());
        let mut items = Vec::new();
        while let Some(p) = s.dequeue(t) {
            items.push(p.item);
        }
        assert_eq!(items.len(), 50);
        assert_eq!(items.last(), Some(&151));
        let st = s.stats();
        assert_eq!((st.dequeued.pkts, st.dequeued.bytes), (51, 5100));
        assert_eq!(st.backlog.pkts, 0);
        let fa = s.flow_stats(a).unwrap();
        assert_eq!((fa.enqueued.pkts, fa.dequeued.pkts), (51, 51));
    }
}
