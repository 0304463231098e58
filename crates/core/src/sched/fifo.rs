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
