//! FIFO across all flows: packets leave in arrival order, whatever their
//! flow. Per-flow limits and counters still apply.

use std::collections::VecDeque;

use super::{Discipline, Limits};
use crate::flow::{FlowConfig, FlowId};
use crate::units::{Bytes, Nanos};

/// First in, first out. Keeps one flow id per queued packet.
#[derive(Debug, Default)]
pub struct Fifo {
    order: VecDeque<FlowId>,
}

impl Fifo {
    /// An empty FIFO.
    pub fn new() -> Fifo {
        Fifo::default()
    }
}

impl Discipline for Fifo {
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
    #[inline]
    fn activate(&mut self, _id: FlowId, _head: Bytes, _now: Nanos) {}
    #[inline]
    fn arrive(&mut self, id: FlowId, _len: Bytes) {
        self.order.push_back(id);
    }
    fn deactivate(&mut self, id: FlowId) {
        self.order.retain(|&f| f != id);
    }
    #[inline]
    fn pick<H: Fn(FlowId) -> Bytes>(&mut self, _head: H) -> FlowId {
        match self.order.pop_front() {
            Some(f) => f,
            None => unreachable!("pick called on an empty FIFO"),
        }
    }
    #[inline]
    fn depart(&mut self, _id: FlowId, _len: Bytes, _next: Option<Bytes>) {}
    fn memory_bytes(&self) -> usize {
        self.order.capacity() * 4
    }
}
