//! wfq/hclock share tags: the STFQ increment and the rebase that keeps
//! tags from wrapping.

use super::member::Slot;
use super::node_queue::NodeQ;
use super::sched::PolicySched;
use super::spec::QueueKind;

/// A wfq/hclock node whose virtual time passes this rebases its children's
/// tags ([`PolicySched::rebase_tags`]): `2^62` leaves `3·2^62` of room, far
/// more than the tags of one round can span (`len·scale/w <= 2^32` each).
pub(super) const REBASE_TAGS_AT: u64 = 1 << 62;

#[inline]
pub(super) fn inc(len: u64, scale: u64, w: u32) -> u64 {
    (len * scale).div_ceil(u64::from(w.max(1)))
}

impl<T> PolicySched<T> {
    /// Subtracts one offset from node `n`'s virtual time and every share
    /// tag of its children (and the ranks they are queued with), so the
    /// tags never wrap: `finish = start + len·scale/w` grows by up to
    /// `2^16 · 2^16` per packet, and a weight-1 child at 30 Mpps passes
    /// `2^64` in ~40 h. The offset is at most the virtual time and at most
    /// every queued rank, so the order of queued children is unchanged; a
    /// tag below it (an idle child's stale tag) becomes 0, which `enter`'s
    /// `max(start, vt, finish)` treats the same as before.
    #[cold]
    #[inline(never)]
    pub(super) fn rebase_tags(&mut self, n: usize) {
        let kind = match self.nodes[n].q {
            NodeQ::Cffs(_) => QueueKind::Cffs,
            NodeQ::Hier(_) => QueueKind::HierFfs,
            NodeQ::Heap(_) => QueueKind::Heap,
            NodeQ::Small(_) => QueueKind::Small,
        };
        let fresh = NodeQ::new(kind, self.policy.nodes[n].buckets);
        let mut old = core::mem::replace(&mut self.nodes[n].q, fresh);
        let mut queued = Vec::with_capacity(old.len());
        while let Some(p) = old.pop_ranked() {
            queued.push(p);
        }
        let min_rank = queued.iter().map(|p| p.0).min().unwrap_or(u64::MAX);
        let off = self.nodes[n].vt.min(min_rank);
        self.nodes[n].vt -= off;
        let parent = n as u32;
        for m in self.nm.iter_mut().chain(self.fm.iter_mut()) {
            if m.parent == parent {
                m.start = m.start.saturating_sub(off);
                m.finish = m.finish.saturating_sub(off);
            }
        }
        for (rank, r) in queued {
            let h = self.nodes[n].q.push(rank - off, r);
            self.member_mut(r).slot = Slot::Queued(h);
        }
    }

    /// Test hook: node `n`'s virtual time (to start share tags near the
    /// top of their range).
    #[cfg(test)]
    pub(crate) fn set_virtual_time(&mut self, n: usize, vt: u64) {
        self.nodes[n].vt = vt;
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::super::*;
    use crate::flow::{FlowConfig, FlowId, Pkt};
    use crate::sched::Scheduler;
    use crate::units::Nanos;

    /// Share tags started near the top of `u64` (a test hook sets the root's
    /// virtual time) or just below the rebase point are rebased instead of
    /// wrapping: the exact queues (and a cFFS whose ranks all fit its window)
    /// serve the same sequence as from 0, for wfq and hclock (before: an
    /// overflow panic in debug, wrapped tags and a broken order in release).
    #[test]
    fn share_tags_near_the_top_of_their_range_keep_the_order() {
        fn run(kind: &str, queue: &str, scale: u64, vt: u64) -> Vec<u32> {
            let src = format!(
                "[[node]]\nname = \"root\"\nkind = \"{kind}\"\nscale = {scale}\nqueue = \"{queue}\"\nbuckets = 4096\n"
            );
            let p = Policy::from_toml(&src).expect("policy");
            let mut s: PolicySched<u64> = PolicySched::new(&p);
            s.set_virtual_time(0, vt);
            let flows: Vec<FlowId> = (1..=4)
                .map(|w| {
                    let cfg = FlowConfig {
                        weight: w,
                        limit: 4096,
                        ..FlowConfig::default()
                    };
                    s.add_flow(cfg).expect("flow")
                })
                .collect();
            let mut rng = ChaCha8Rng::seed_from_u64(16);
            let mut out = Vec::new();
            for i in 0..20_000u64 {
                let f = flows[rng.random_range(0..4)];
                let len = rng.random_range(64..=1514);
                s.enqueue(Pkt::new(f, len, Nanos::ZERO, i), Nanos::ZERO)
                    .expect("enqueue");
                if rng.random_bool(0.45) {
                    out.extend(s.dequeue(Nanos::ZERO).map(|p| p.flow.0));
                }
            }
            out.extend(std::iter::from_fn(|| s.dequeue(Nanos::ZERO)).map(|p| p.flow.0));
            assert_eq!(out.len(), 20_000);
            // The tags of a round fit the cFFS window: nothing spilled.
            assert_eq!(
                s.policy_stats().node_spilled,
                0,
                "{kind} on {queue} from vt = {vt}"
            );
            out
        }
        for kind in ["wfq", "hclock"] {
            // Tags of one round span at most 1514·scale/1: within 2 × 4096
            // buckets of unit 1 for scale 1.
            for (queue, scale) in [("heap", 65536), ("small", 65536), ("cffs", 1)] {
                let want = run(kind, queue, scale, 0);
                for vt in [u64::MAX - (1 << 30), (1 << 62) - 5_000_000] {
                    let got = run(kind, queue, scale, vt);
                    assert!(got == want, "{kind} on {queue} from vt = {vt}");
                }
            }
        }
    }
}
