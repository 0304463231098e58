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

use super::{Discipline, Limits, NIL};
use crate::flow::{FlowConfig, FlowId};
use crate::units::{Bytes, Nanos};

/// Deficit round-robin.
///
/// The active list is a circular doubly linked list threaded through the
/// flows' own records (`next`, `prev` next to the deficit), so the step to
/// the next flow at the end of a turn reads the record already at hand.
#[derive(Debug)]
pub struct Drr {
    base: u32,
    /// The flow at the front of the active list, `NIL` when none.
    head: u32,
    st: Vec<DrrFlow>,
}

#[derive(Copy, Clone, Debug)]
struct DrrFlow {
    quantum: u64,
    deficit: u64,
    /// Active list links (`NIL` while the flow is not in the list).
    next: u32,
    prev: u32,
}

impl Default for DrrFlow {
    fn default() -> DrrFlow {
        DrrFlow {
            quantum: 0,
            deficit: 0,
            next: NIL,
            prev: NIL,
        }
    }
}

impl Drr {
    /// DRR whose default quantum is `weight × base` bytes (`base` ≥ 1).
    pub fn new(base: u32) -> Drr {
        Drr {
            base: base.max(1),
            head: NIL,
            st: Vec::new(),
        }
    }
    fn quantum(&self, cfg: &FlowConfig) -> u64 {
        cfg.quantum
            .map_or(u64::from(cfg.weight) * u64::from(self.base), u64::from)
    }
    /// Appends `i` at the tail of the active list (just before the head).
    fn push_back(&mut self, i: u32) {
        let h = self.head;
        if h == NIL {
            self.st[i as usize].next = i;
            self.st[i as usize].prev = i;
            self.head = i;
        } else {
            let t = self.st[h as usize].prev;
            self.st[i as usize].next = h;
            self.st[i as usize].prev = t;
            self.st[t as usize].next = i;
            self.st[h as usize].prev = i;
        }
    }
    /// Takes `i`, which must be in the active list, out of it.
    fn unlink(&mut self, i: u32) {
        let DrrFlow {
            next: n, prev: p, ..
        } = self.st[i as usize];
        if n == i {
            self.head = NIL;
        } else {
            self.st[p as usize].next = n;
            self.st[n as usize].prev = p;
            if self.head == i {
                self.head = n;
            }
        }
        self.st[i as usize].next = NIL;
        self.st[i as usize].prev = NIL;
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
        if self.st.len() <= id.index() {
            self.st.resize(id.index() + 1, DrrFlow::default());
        }
        self.st[id.index()] = DrrFlow {
            quantum: self.quantum(cfg),
            ..DrrFlow::default()
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
        self.push_back(id.0);
    }
    fn deactivate(&mut self, id: FlowId) {
        self.unlink(id.0);
    }
    #[inline(always)]
    fn pick<H: Fn(FlowId) -> Bytes>(&mut self, head: H) -> Option<FlowId> {
        loop {
            let f = self.head;
            let s = self.st.get_mut(f as usize)?;
            if u64::from(head(FlowId(f))) <= s.deficit {
                return Some(FlowId(f));
            }
            s.deficit += s.quantum;
            self.head = s.next;
        }
    }
    #[inline(always)]
    fn depart(&mut self, id: FlowId, len: Bytes, next: Option<Bytes>) {
        let s = &mut self.st[id.index()];
        s.deficit -= u64::from(len);
        match next {
            None => self.unlink(id.0),
            // The next packet does not fit: end the flow's turn now, while
            // its head length is at hand, so `pick` usually finds the new
            // front ready without touching another flow's queue. `id` is
            // the head (`pick` returned it): the next flow is in its record.
            Some(n) if u64::from(n) > s.deficit => {
                s.deficit += s.quantum;
                self.head = s.next;
            }
            Some(_) => {}
        }
    }
    fn memory_bytes(&self) -> usize {
        self.st.capacity() * core::mem::size_of::<DrrFlow>()
    }
}
