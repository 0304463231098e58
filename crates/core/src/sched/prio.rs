//! Strict priority over any number of levels (level 0 first), with packet
//! round-robin among the flows of one level. The non-empty levels are kept
//! in a hierarchical find-first-set bitmap, so selection costs
//! O(log64 levels).

use super::{Discipline, FlowList, Limits, Links};
use crate::bitmap::HierBitmap;
use crate::flow::{FlowConfig, FlowId};
use crate::units::{Bytes, Nanos};

/// Strict priority scheduler.
#[derive(Debug)]
pub struct Prio {
    levels: Vec<FlowList>,
    nonempty: HierBitmap,
    links: Links,
    level_of: Vec<u32>,
}

impl Prio {
    /// Largest number of levels.
    pub const MAX_LEVELS: u32 = 1 << 20;

    /// A scheduler with `levels` priority levels (`0..levels`); clamped to
    /// `1..=MAX_LEVELS`.
    pub fn new(levels: u32) -> Prio {
        let n = levels.clamp(1, Prio::MAX_LEVELS) as usize;
        Prio {
            levels: vec![FlowList::new(); n],
            nonempty: HierBitmap::new(n),
            links: Links::default(),
            level_of: Vec::new(),
        }
    }
}

impl Discipline for Prio {
    fn name(&self) -> &'static str {
        "prio"
    }
    fn limits(&self) -> Limits {
        Limits {
            levels: self.levels.len() as u64,
            ..Limits::generic("prio")
        }
    }
    fn add(&mut self, id: FlowId, cfg: &FlowConfig) {
        self.links.ensure(id);
        if self.level_of.len() <= id.index() {
            self.level_of.resize(id.index() + 1, 0);
        }
        self.level_of[id.index()] = cfg.prio;
    }
    fn remove(&mut self, _id: FlowId, _cfg: &FlowConfig) {}
    #[inline(always)]
    fn activate(&mut self, id: FlowId, _head: Bytes, _now: Nanos) {
        let l = self.level_of[id.index()] as usize;
        self.levels[l].push_back(&mut self.links, id);
        self.nonempty.set(l);
    }
    fn deactivate(&mut self, id: FlowId) {
        let l = self.level_of[id.index()] as usize;
        self.levels[l].unlink(&mut self.links, id);
        if self.levels[l].is_empty() {
            self.nonempty.clear(l);
        }
    }
    #[inline(always)]
    fn pick<H: Fn(FlowId) -> Bytes>(&mut self, _head: H) -> Option<FlowId> {
        let l = self.nonempty.first_set()?;
        self.levels.get(l)?.front()
    }
    #[inline(always)]
    fn depart(&mut self, id: FlowId, _len: Bytes, next: Option<Bytes>) {
        if next.is_none() {
            self.deactivate(id);
        } else {
            let l = self.level_of[id.index()] as usize;
            self.levels[l].rotate(&self.links);
        }
    }
    fn memory_bytes(&self) -> usize {
        self.links.memory_bytes()
            + self.nonempty.memory_bytes()
            + self.levels.capacity() * core::mem::size_of::<FlowList>()
            + self.level_of.capacity() * 4
    }
}
