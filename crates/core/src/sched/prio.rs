//! Strict priority over any number of levels (level 0 first), with packet
//! round-robin among the flows of one level. The non-empty levels are kept
//! in a hierarchical find-first-set bitmap, so a change of the highest
//! non-empty level costs O(log64 levels).
//!
//! The flow served next (the head of the highest non-empty level) is kept
//! in `front`, so `pick` is one load and a departure that leaves its flow
//! backlogged is one step of that level's ring. The bitmap is searched when
//! a flow becomes backlogged and when the served flow empties.

use super::{Discipline, FlowList, Limits, Links, NIL};
use crate::bitmap::HierBitmap;
use crate::flow::{FlowConfig, FlowId};
use crate::units::{Bytes, Nanos};

/// Strict priority scheduler.
#[derive(Debug)]
pub struct Prio {
    /// One ring of backlogged flows per level. The ring of level `top`
    /// has its cursor in `front` instead (its `head` is written back before
    /// any ring is changed).
    levels: Vec<FlowList>,
    nonempty: HierBitmap,
    links: Links,
    level_of: Vec<u32>,
    /// The flow `pick` returns: the head of the highest non-empty level, or
    /// `NIL` when no flow is backlogged.
    front: u32,
    /// The level of `front` (unused while `front` is `NIL`).
    top: usize,
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
            front: NIL,
            top: 0,
        }
    }

    /// Writes the cursor of the top level back into its ring, before a ring
    /// changes.
    fn store_front(&mut self) {
        if self.front != NIL
            && let Some(l) = self.levels.get_mut(self.top)
        {
            l.set_head(FlowId(self.front));
        }
    }

    /// Takes the cursor from the highest non-empty level.
    fn load_front(&mut self) {
        self.front = NIL;
        if let Some(t) = self.nonempty.first_set()
            && let Some(f) = self.levels.get(t).and_then(FlowList::front)
        {
            self.top = t;
            self.front = f.0;
        }
    }
}

impl Discipline for Prio {
    /// Served by turns, whatever the lengths.
    const HEAD_LEN: bool = false;
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
        self.store_front();
        self.levels[l].push_back(&mut self.links, id);
        self.nonempty.set(l);
        // A flow joining the top level goes to its tail: the front stays.
        if self.front == NIL || l < self.top {
            self.load_front();
        }
    }
    fn deactivate(&mut self, id: FlowId) {
        let l = self.level_of[id.index()] as usize;
        self.store_front();
        self.levels[l].unlink(&mut self.links, id);
        if self.levels[l].is_empty() {
            self.nonempty.clear(l);
        }
        if self.front == id.0 || l == self.top {
            self.load_front();
        }
    }
    #[inline(always)]
    fn pick<H: Fn(FlowId) -> Bytes>(&mut self, _head: H) -> Option<FlowId> {
        (self.front != NIL).then_some(FlowId(self.front))
    }
    #[inline(always)]
    fn depart(&mut self, id: FlowId, _len: Bytes, next: Option<Bytes>) {
        if next.is_none() {
            self.deactivate(id);
        } else {
            // `id` is the front (`pick` returned it): one step of its ring.
            self.front = self.links.next_of(self.front);
        }
    }
    fn memory_bytes(&self) -> usize {
        self.links.memory_bytes()
            + self.nonempty.memory_bytes()
            + self.levels.capacity() * core::mem::size_of::<FlowList>()
            + self.level_of.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The cached front always equals the head of the highest non-empty
    /// level of a plain model (one `VecDeque` per level), through random
    /// activations, departures (rotations and emptyings) and removals.
    #[test]
    fn front_matches_a_model_of_rings_per_level() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(16);
        let (levels, flows) = (5u32, 40u32);
        let mut p = Prio::new(levels);
        let mut model: Vec<std::collections::VecDeque<u32>> = vec![Default::default(); 5];
        let mut level = Vec::new();
        for f in 0..flows {
            let l = rng.random_range(0..levels);
            p.add(FlowId(f), &FlowConfig::default().with_prio(l));
            level.push(l as usize);
        }
        let active =
            |m: &Vec<std::collections::VecDeque<u32>>, f: u32| m.iter().any(|q| q.contains(&f));
        for _ in 0..50_000 {
            let f = rng.random_range(0..flows);
            match rng.random_range(0..4) {
                0 if !active(&model, f) => {
                    p.activate(FlowId(f), 100, Nanos::ZERO);
                    model[level[f as usize]].push_back(f);
                }
                1 if active(&model, f) => {
                    p.deactivate(FlowId(f));
                    model[level[f as usize]].retain(|&x| x != f);
                }
                _ => {
                    let want = model.iter().find_map(|q| q.front().copied());
                    let got = p.pick(|_| 0);
                    assert_eq!(got.map(|g| g.0), want);
                    let Some(g) = got else { continue };
                    let q = &mut model[level[g.index()]];
                    q.pop_front();
                    if rng.random_bool(0.3) {
                        p.depart(g, 100, None);
                    } else {
                        p.depart(g, 100, Some(100));
                        q.push_back(g.0);
                    }
                }
            }
            let want = model.iter().find_map(|q| q.front().copied());
            assert_eq!(p.pick(|_| 0).map(|g| g.0), want);
        }
    }
}
