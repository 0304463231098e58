//! Packet round-robin: one packet from each backlogged flow in turn,
//! whatever its length (unfair in bytes when lengths differ; see DRR).

use super::{Discipline, FlowList, Limits, Links};
use crate::flow::{FlowConfig, FlowId};
use crate::units::{Bytes, Nanos};

/// Packet round-robin over backlogged flows.
#[derive(Debug, Default)]
pub struct Rr {
    active: FlowList,
    links: Links,
}

impl Rr {
    /// An empty round-robin scheduler.
    pub fn new() -> Rr {
        Rr {
            active: FlowList::new(),
            links: Links::default(),
        }
    }
}

impl Discipline for Rr {
    /// Served by turns, whatever the lengths.
    const HEAD_LEN: bool = false;
    fn name(&self) -> &'static str {
        "rr"
    }
    fn limits(&self) -> Limits {
        Limits::generic("rr")
    }
    fn add(&mut self, id: FlowId, _cfg: &FlowConfig) {
        self.links.ensure(id);
    }
    fn remove(&mut self, _id: FlowId, _cfg: &FlowConfig) {}
    #[inline(always)]
    fn activate(&mut self, id: FlowId, _head: Bytes, _now: Nanos) {
        self.active.push_back(&mut self.links, id);
    }
    fn deactivate(&mut self, id: FlowId) {
        self.active.unlink(&mut self.links, id);
    }
    #[inline(always)]
    fn pick<H: Fn(FlowId) -> Bytes>(&mut self, _head: H) -> Option<FlowId> {
        self.active.front()
    }
    #[inline(always)]
    fn depart(&mut self, id: FlowId, _len: Bytes, next: Option<Bytes>) {
        if next.is_none() {
            self.active.unlink(&mut self.links, id);
        } else {
            self.active.rotate(&self.links);
        }
    }
    fn memory_bytes(&self) -> usize {
        self.links.memory_bytes()
    }
}
