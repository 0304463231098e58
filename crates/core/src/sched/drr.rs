//! Deficit round-robin (Shreedhar & Varghese, 1995).
//!
//! Backlogged flows sit in one active list. The flow at the head may send
//! while its head packet fits in its deficit; when it does not, the flow gets
//! one more quantum and moves to the tail. A flow that becomes backlogged
//! joins the tail with a deficit of one quantum. With quantum ≥ max_len every
//! selection is O(1); smaller quanta are allowed and cost up to
//! `max_len / quantum` rotations.
//!
//! Quanta proportional to weights give weighted fairness in bytes: by default
//! `quantum = weight × base`, with `base` given to [`Drr::new`].

use super::{Discipline, FlowList, Limits, Links};
use crate::flow::{FlowConfig, FlowId};
use crate::units::{Bytes, Nanos};

/// Deficit round-robin.
#[derive(Debug)]
pub struct Drr {
    base: u32,
    active: FlowList,
    links: Links,
    st: Vec<DrrFlow>,
}

#[derive(Copy, Clone, Debug, Default)]
struct DrrFlow {
    quantum: u64,
    deficit: u64,
}

impl Drr {
    /// DRR whose default quantum is `weight × base` bytes (`base` ≥ 1).
    pub fn new(base: u32) -> Drr {
        Drr {
            base: base.max(1),
            active: FlowList::new(),
            links: Links::default(),
            st: Vec::new(),
        }
    }
    fn quantum(&self, cfg: &FlowConfig) -> u64 {
        cfg.quantum
            .map_or(u64::from(cfg.weight) * u64::from(self.base), u64::from)
    }
}

impl Discipline for Drr {
    fn name(&self) -> &'static str {
        "drr"
    }
    fn limits(&self) -> Limits {
        Limits::generic("drr")
    }
    fn add(&mut self, id: FlowId, cfg: &FlowConfig) {
        self.links.ensure(id);
        if self.st.len() <= id.index() {
            self.st.resize(id.index() + 1, DrrFlow::default());
        }
        self.st[id.index()] = DrrFlow {
            quantum: self.quantum(cfg),
            deficit: 0,
        };
    }
    /// A new quantum applies from the flow's next round; its place in the
    /// active list and its current deficit are kept.
    fn change(
        &mut self,
        id: FlowId,
        _old: &FlowConfig,
        new: &FlowConfig,
        _head: Option<Bytes>,
        _now: Nanos,
    ) {
        self.st[id.index()].quantum = self.quantum(new);
    }
    fn remove(&mut self, _id: FlowId, _cfg: &FlowConfig) {}
    #[inline(always)]
    fn activate(&mut self, id: FlowId, _head: Bytes, _now: Nanos) {
        let s = &mut self.st[id.index()];
        s.deficit = s.quantum;
        self.active.push_back(&mut self.links, id);
    }
    fn deactivate(&mut self, id: FlowId) {
        self.active.unlink(&mut self.links, id);
    }
    #[inline(always)]
    fn pick<H: Fn(FlowId) -> Bytes>(&mut self, head: H) -> Option<FlowId> {
        loop {
            let f = self.active.front()?;
            let s = &mut self.st[f.index()];
            if u64::from(head(f)) <= s.deficit {
                return Some(f);
            }
            s.deficit += s.quantum;
            self.active.rotate(&self.links);
        }
    }
    #[inline(always)]
    fn depart(&mut self, id: FlowId, len: Bytes, next: Option<Bytes>) {
        let s = &mut self.st[id.index()];
        s.deficit -= u64::from(len);
        match next {
            None => self.active.unlink(&mut self.links, id),
            // The next packet does not fit: end the flow's turn now, while
            // its head length is at hand, so `pick` usually finds the new
            // front ready without touching another flow's queue.
            Some(n) if u64::from(n) > s.deficit => {
                s.deficit += s.quantum;
                self.active.rotate(&self.links);
            }
            Some(_) => {}
        }
    }
    fn memory_bytes(&self) -> usize {
        self.links.memory_bytes() + self.st.capacity() * core::mem::size_of::<DrrFlow>()
    }
}
