//! The reference model of a policy tree (linear scans over `Vec`s, no
//! priority queues, no handles) and the seeded differential run that
//! checks `PolicySched` against it.

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::flow::{FlowConfig, FlowId, Pkt};
use crate::sched::Scheduler;
use crate::units::{Nanos, Rate};

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Ch {
    N(usize),
    F(usize),
}

#[derive(Clone, Debug, Default)]
struct RMem {
    parent: usize,
    /// 0 idle, 1 queued, 2 parked.
    slot: u8,
    start: u64,
    finish: u64,
    rtag: u64,
    /// `rtag` exactly, times the reservation rate (bit·ns/s).
    rtag_x: u128,
    by_res: bool,
    next_tx: u64,
    /// `next_tx` exactly, times the limit rate (bit·ns/s).
    next_x: u128,
    bytes: u64,
    sent: u64,
    weight: u64,
    prio: u64,
    limit: Option<Rate>,
    res: Option<Rate>,
    deadline: u64,
    slack: u64,
}

#[derive(Debug)]
struct RNode {
    kind: Kind,
    q: Vec<(u64, u64, Ch)>,
    res: Vec<(u64, u64, Ch)>,
    vt: u64,
}

/// The reference: the same policy semantics written as directly as
/// possible — every queue a `Vec` searched for its minimum `(rank, seq)`.
struct Reference {
    nodes: Vec<RNode>,
    nm: Vec<RMem>,
    fm: Vec<RMem>,
    fifo: Vec<VecDeque<(u64, u32, u64)>>,
    parked: Vec<(u64, u64, Ch)>,
    seq: u64,
    unit: u64,
    root: usize,
    max_len: u64,
}

/// The limiter clock, written out independently: strict pacing
/// `max(T, now) + len/rate`, except that a member served late keeps up to
/// one maximum packet (at its rate) of credit. Exact: `x` is the clock
/// times the rate (bit·ns/s), so no rounding is lost per packet.
pub(super) fn clock(x: u128, now: u64, r: Rate, len: u64, max_len: u64) -> u128 {
    let bps = u128::from(r.as_bps());
    let credit = r.tx_time(max_len).as_u64();
    let floor = u128::from(now.saturating_sub(credit)) * bps;
    x.max(floor) + u128::from(len) * 8_000_000_000
}

/// An exact clock `x` (times the rate `r`) in whole ns, rounded up.
pub(super) fn ceil_ns(x: u128, r: Rate) -> u64 {
    u64::try_from(x.div_ceil(u128::from(r.as_bps()))).unwrap()
}

fn argmin(v: &[(u64, u64, Ch)]) -> Option<usize> {
    (0..v.len()).min_by_key(|&i| (v[i].0, v[i].1))
}

impl Reference {
    fn new(p: &Policy) -> Reference {
        let mut nm = Vec::new();
        let nodes = p
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                nm.push(RMem {
                    parent: p.parent[i].unwrap_or(usize::MAX),
                    weight: u64::from(n.weight),
                    prio: u64::from(n.prio),
                    limit: n.rate,
                    res: n.reservation,
                    ..RMem::default()
                });
                RNode {
                    kind: n.kind,
                    q: Vec::new(),
                    res: Vec::new(),
                    vt: 0,
                }
            })
            .collect();
        Reference {
            nodes,
            nm,
            fm: Vec::new(),
            fifo: Vec::new(),
            parked: Vec::new(),
            seq: 0,
            unit: p.shaper_unit,
            root: p.root,
            max_len: u64::from(p.max_len),
        }
    }
    fn add_flow(&mut self, p: &Policy, node: usize, cfg: &FlowConfig) {
        let n = &p.nodes[node];
        self.fm.push(RMem {
            parent: node,
            weight: u64::from(cfg.weight),
            prio: u64::from(cfg.prio),
            limit: n.flow_rate,
            res: n.flow_reservation,
            deadline: n.flow_deadline,
            slack: n.flow_slack,
            ..RMem::default()
        });
        self.fifo.push(VecDeque::new());
    }
    fn m(&mut self, c: Ch) -> &mut RMem {
        match c {
            Ch::N(i) => &mut self.nm[i],
            Ch::F(i) => &mut self.fm[i],
        }
    }
    fn work(&self, c: Ch) -> bool {
        match c {
            Ch::N(i) => !self.nodes[i].q.is_empty(),
            Ch::F(i) => !self.fifo[i].is_empty(),
        }
    }
    fn rank(&mut self, n: usize, c: Ch) -> u64 {
        let head = match c {
            Ch::F(f) => self.fifo[f].front().copied(),
            Ch::N(_) => None,
        };
        let kind = self.nodes[n].kind;
        let m = self.m(c).clone();
        match kind {
            Kind::Rr => 0,
            Kind::Prio { .. } => m.prio,
            Kind::Wfq { .. } | Kind::Hclock { .. } => m.start,
            Kind::Pfabric { unit } => m.bytes / unit,
            Kind::Edf { unit } => (head.map_or(0, |h| h.2) + m.deadline) / unit,
            Kind::Lstf { unit, link } => {
                let (ts, len) = head.map_or((0, 0), |h| (h.2, u64::from(h.1)));
                (ts + m.slack).saturating_sub(link.tx_time(len).as_u64()) / unit
            }
        }
    }
    /// Returns true if `c` went into its parent's queue.
    fn enter(&mut self, c: Ch, now: u64, fresh: bool) -> bool {
        let m = self.m(c).clone();
        if m.limit.is_some() && m.next_tx > now {
            self.seq += 1;
            self.parked
                .push((m.next_tx.div_ceil(self.unit), self.seq, c));
            self.m(c).slot = 2;
            return false;
        }
        let n = m.parent;
        if matches!(self.nodes[n].kind, Kind::Wfq { .. } | Kind::Hclock { .. }) {
            let vt = self.nodes[n].vt;
            let m = self.m(c);
            m.start = vt.max(m.finish).max(m.start);
            if let (true, Some(r)) = (fresh, m.res) {
                m.rtag_x = m.rtag_x.max(u128::from(now) * u128::from(r.as_bps()));
                m.rtag = ceil_ns(m.rtag_x, r);
            }
        }
        let r = self.rank(n, c);
        self.seq += 1;
        let s = self.seq;
        self.nodes[n].q.push((r, s, c));
        if matches!(self.nodes[n].kind, Kind::Hclock { .. }) && m.res.is_some() {
            let rt = self.m(c).rtag;
            self.nodes[n].res.push((rt, s, c));
        }
        self.m(c).slot = 1;
        true
    }
    fn activate(&mut self, c: Ch, now: u64, fresh: bool) {
        if self.m(c).slot != 0 {
            return;
        }
        let n = self.m(c).parent;
        let was_empty = self.nodes[n].q.is_empty();
        if self.enter(c, now, fresh) && was_empty && n != self.root {
            self.activate(Ch::N(n), now, true);
        }
    }
    fn enqueue(&mut self, f: usize, item: u64, len: u32, ts: u64, now: u64) {
        let was_empty = self.fifo[f].is_empty();
        self.fifo[f].push_back((item, len, ts));
        let mut c = Ch::F(f);
        loop {
            self.m(c).bytes += u64::from(len);
            let p = self.m(c).parent;
            if p == usize::MAX {
                break;
            }
            if matches!(self.nodes[p].kind, Kind::Pfabric { .. }) && self.m(c).slot == 1 {
                let i = self.nodes[p]
                    .q
                    .iter()
                    .position(|e| e.2 == c)
                    .expect("queued");
                self.nodes[p].q.remove(i);
                let r = self.rank(p, c);
                self.seq += 1;
                let s = self.seq;
                self.nodes[p].q.push((r, s, c));
            }
            c = Ch::N(p);
        }
        if was_empty {
            self.activate(Ch::F(f), now, true);
        }
    }
    fn dequeue(&mut self, now: u64) -> Option<(usize, u64)> {
        // Release in (release rank, park order).
        while let Some(i) = argmin(&self.parked) {
            if self.parked[i].0 * self.unit > now {
                break;
            }
            let (_, _, c) = self.parked.remove(i);
            self.m(c).slot = 0;
            self.activate(c, now, false);
        }
        let root = self.root;
        if self.nm[root].limit.is_some() && self.nm[root].next_tx > now {
            return None;
        }
        let mut path = Vec::new();
        let mut n = root;
        let f = loop {
            let node = &mut self.nodes[n];
            let due = argmin(&node.res).filter(|&i| node.res[i].0 <= now);
            let (c, by_res) = match due {
                Some(i) => {
                    let c = node.res.remove(i).2;
                    node.q.retain(|e| e.2 != c);
                    (c, true)
                }
                None => {
                    let c = node.q.remove(argmin(&node.q)?).2;
                    node.res.retain(|e| e.2 != c);
                    (c, false)
                }
            };
            let m = self.m(c);
            m.slot = 0;
            m.by_res = by_res;
            path.push((n, c));
            match c {
                Ch::N(i) => n = i,
                Ch::F(f) => break f,
            }
        };
        let (item, len, _) = self.fifo[f].pop_front()?;
        let len = u64::from(len);
        for &(n, c) in path.iter().rev() {
            let kind = self.nodes[n].kind;
            let m = self.m(c).clone();
            let mut m2 = m.clone();
            m2.bytes -= len;
            m2.sent += len;
            match kind {
                Kind::Wfq { scale } => {
                    self.nodes[n].vt = m.start;
                    m2.finish = m.start + (len * scale).div_ceil(m.weight);
                }
                Kind::Hclock { scale } => {
                    if !m.by_res {
                        self.nodes[n].vt = m.start;
                        m2.finish = m.start + (len * scale).div_ceil(m.weight);
                    }
                    if let Some(r) = m.res {
                        m2.rtag_x += u128::from(len) * 8_000_000_000;
                        m2.rtag = ceil_ns(m2.rtag_x, r);
                    }
                }
                _ => {}
            }
            if let Some(r) = m.limit {
                m2.next_x = clock(m.next_x, now, r, len, self.max_len);
                m2.next_tx = ceil_ns(m2.next_x, r);
            }
            *self.m(c) = m2;
            if self.work(c) {
                self.enter(c, now, false);
            }
        }
        let rm = &mut self.nm[root];
        rm.bytes -= len;
        if let Some(r) = rm.limit {
            rm.next_x = clock(rm.next_x, now, r, len, self.max_len);
            rm.next_tx = ceil_ns(rm.next_x, r);
        }
        Some((f, item))
    }
    fn next_ready(&self, now: u64) -> Option<u64> {
        if self.fifo.iter().all(|q| q.is_empty()) {
            return None;
        }
        let rm = &self.nm[self.root];
        let root_at = if rm.limit.is_some() { rm.next_tx } else { 0 };
        if !self.nodes[self.root].q.is_empty() {
            return Some(root_at.max(now));
        }
        let t = self.parked.iter().map(|p| p.0).min()? * self.unit;
        Some(t.max(root_at).max(now))
    }
}

pub(super) struct Workload {
    pub(super) flows: usize,
    pub(super) steps: usize,
    /// Max ns between steps.
    pub(super) gap: u64,
    pub(super) weights: bool,
    pub(super) prios: u32,
}

/// Runs the same random workload through `PolicySched` and the reference;
/// checks identical dequeue order, next_ready, counters, no early release.
pub(super) fn differential(p: &Policy, w: &Workload, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut s: PolicySched<u64> = PolicySched::new(p);
    let mut r = Reference::new(p);
    for k in 0..w.flows {
        let cfg = FlowConfig {
            weight: if w.weights {
                rng.random_range(1..=8)
            } else {
                1
            },
            prio: rng.random_range(0..w.prios),
            max_len: p.max_len,
            ..FlowConfig::default()
        };
        let id = s.add_flow(cfg).expect("add flow");
        assert_eq!(id.index(), k);
        let node = s.flow_node(id).expect("live");
        r.add_flow(p, node, &cfg);
    }
    let mut now = 0u64;
    let mut item = 0u64;
    let mut outs = 0;
    for step in 0..w.steps {
        now += rng.random_range(0..=w.gap);
        if rng.random_bool(0.55) {
            let f = rng.random_range(0..w.flows);
            let len = rng.random_range(64..=p.max_len);
            item += 1;
            let pkt = Pkt::new(FlowId(f as u32), len, Nanos(now), item);
            if s.enqueue(pkt, Nanos(now)).is_ok() {
                r.enqueue(f, item, len, now, now);
            }
        } else {
            let want = r.dequeue(now);
            let got = s.dequeue(Nanos(now)).map(|p| (p.flow.index(), p.item));
            assert_eq!(
                got,
                want,
                "step {step}, now {now}: dequeue differs; {:?} {:?}",
                s.policy_stats(),
                s.spilled_by_node()
            );
            outs += usize::from(got.is_some());
        }
        let nr = s.next_ready(Nanos(now)).map(|t| t.0);
        assert_eq!(nr, r.next_ready(now), "step {step}: next_ready differs");
        if let Some(t) = nr {
            assert!(t >= now);
        }
        let c = s.stats();
        assert!(c.conserved(), "counters: {c:?}");
    }
    // Drain, jumping to next_ready when nothing is eligible.
    while let Some(t) = s.next_ready(Nanos(now)) {
        now = t.0;
        let want = r.dequeue(now);
        let got = s.dequeue(Nanos(now)).map(|p| (p.flow.index(), p.item));
        assert_eq!(got, want, "drain at {now}");
        // A release may only re-park a child under a still-limited node:
        // then the next wake-up must lie in the future.
        match got {
            Some(_) => outs += 1,
            None => assert!(s.next_ready(Nanos(now)).is_none_or(|t| t.0 > now)),
        }
    }
    assert!(outs > 0);
    let c = s.stats();
    assert!(c.conserved() && c.backlog.pkts == 0 && c.enqueued == c.dequeued);
}

pub(super) fn small(flows: usize) -> Workload {
    Workload {
        flows,
        steps: 4000,
        gap: 2000,
        weights: true,
        prios: 1,
    }
}
