//! The policy tree as a [`Scheduler`](crate::Scheduler): per-node integer
//! priority queues and one shared shaper. This file holds the scheduler's
//! state and its public methods; the tree walk is in `tree.rs`, the
//! `Scheduler` implementation in `scheduler_trait.rs`.

use super::compile::Policy;
use super::limits::MAX_BURST;
use super::member::{FlowParams, Member, NO_PARENT, Slot};
use super::node_queue::{NodeQ, NodeState};
use super::shaper::{Shaper, credit_ns};
use super::spec::{Kind, QueueKind, default_queue};
use crate::flow::{FlowConfig, FlowId, FlowTable};
use crate::pq::{BinaryHeapPq, IntPq};
use crate::sched::{ConfigError, Scheduler};
use crate::units::{Nanos, Rate};

/// Counters specific to a policy tree.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyStats {
    /// Times a child was parked in the shaper by a rate limit.
    pub parked: u64,
    /// Times a child was released from the shaper.
    pub released: u64,
    /// Entries that went to the shaper's spill heap (beyond its horizon,
    /// or below its window after the window moved past `now`).
    pub spilled: u64,
    /// Ranks a `queue = "cffs"` or `"hffs"` node filed in its exact spill
    /// heap because they lay outside its range (a cFFS window: below it,
    /// e.g. an old head packet after a long shaper hold, or beyond it; a
    /// HierFfs: beyond its fixed `buckets`, e.g. a large pFabric remaining
    /// size). The order stays exact; many mean the node's `buckets` is
    /// small for the ranks it sees (see [`PolicySched::spilled_by_node`]).
    pub node_spilled: u64,
}

/// A programmable scheduler: a tree of [`Policy`] nodes over flows, with
/// one shared shaper. See the [module docs](super).
#[derive(Debug)]
pub struct PolicySched<T> {
    pub(super) policy: Policy,
    pub(super) nodes: Vec<NodeState>,
    pub(super) nm: Vec<Member>,
    pub(super) fm: Vec<Member>,
    pub(super) flows: FlowTable<T>,
    pub(super) pstats: PolicyStats,

    pub(super) shaper: Shaper,
    pub(super) next_leaf: usize,
    pub(super) root: usize,
    pub(super) path: Vec<(u32, u32)>,
}

impl<T> PolicySched<T> {
    /// An empty scheduler running `policy`.
    pub fn new(policy: &Policy) -> PolicySched<T> {
        let policy = policy.clone();
        let mut nodes = Vec::with_capacity(policy.nodes.len());
        let mut nm = Vec::with_capacity(policy.nodes.len());
        for (i, n) in policy.nodes.iter().enumerate() {
            let (queue, grow) = match n.queue {
                QueueKind::Auto => (QueueKind::Small, Some((default_queue(n.kind), n.buckets))),
                q => (q, None),
            };
            nodes.push(NodeState {
                kind: n.kind,
                q: NodeQ::new(queue, n.buckets),
                grow,
                res: matches!(n.kind, Kind::Hclock { .. }).then(|| BinaryHeapPq::new(0)),
                vt: 0,
            });
            let mut m = Member::new(policy.parent[i].map_or(NO_PARENT, |p| p as u32));
            m.weight = n.weight;
            m.prio = n.prio;
            m.limit = n.rate;
            m.reservation = n.reservation;
            nm.push(m);
        }
        let shaper = Shaper::new(policy.shaper_buckets, policy.shaper_unit);
        PolicySched {
            root: policy.root,
            policy,
            nodes,
            nm,
            fm: Vec::new(),
            flows: FlowTable::default(),
            pstats: PolicyStats::default(),

            shaper,
            next_leaf: 0,
            path: Vec::new(),
        }
    }

    /// The policy this scheduler runs.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Policy-specific counters.
    pub fn policy_stats(&self) -> PolicyStats {
        let mut s = self.pstats;
        s.spilled = self.shaper.q.spilled();
        s.node_spilled = self.nodes.iter().map(|n| n.q.spilled()).sum::<u64>();
        s
    }

    /// Ranks spilled per node queue (node name, count; see
    /// [`PolicyStats::node_spilled`]): the order stays exact, but many
    /// mean that node's `buckets` (or `unit`) is small for the ranks it
    /// sees and its pops leave the bucketed fast path.
    pub fn spilled_by_node(&self) -> Vec<(&str, u64)> {
        self.nodes
            .iter()
            .zip(&self.policy.nodes)
            .map(|(n, s)| (s.name.as_str(), n.q.spilled()))
            .collect()
    }

    /// The queue node `node` keeps its children in right now (an automatic
    /// node reports `Small` until it has grown).
    pub fn queue_of(&self, node: usize) -> Option<QueueKind> {
        self.nodes.get(node).map(|n| match n.q {
            NodeQ::Cffs(_) => QueueKind::Cffs,
            NodeQ::Hier(_) => QueueKind::HierFfs,
            NodeQ::Heap(_) => QueueKind::Heap,
            NodeQ::Small(_) => QueueKind::Small,
        })
    }

    /// Heap memory held by the flow table, node queues and the shaper.
    pub fn memory_bytes(&self) -> usize {
        self.flows.memory_bytes()
            + self
                .nodes
                .iter()
                .map(|n| n.q.memory_bytes() + n.res.as_ref().map_or(0, |r| r.memory_bytes()))
                .sum::<usize>()
            + self.shaper.q.memory_bytes()
            + (self.nm.capacity() + self.fm.capacity()) * size_of::<Member>()
    }

    /// Adds a flow under node `node` (an index from [`Policy::node`]), with
    /// the node's flow defaults.
    pub fn add_flow_at(&mut self, node: usize, cfg: FlowConfig) -> Result<FlowId, ConfigError> {
        if node >= self.nodes.len() {
            return Err(ConfigError::OutOfRange {
                alg: "policy",
                field: "node",
                value: node as u64,
                min: 0,
                max: self.nodes.len() as u64 - 1,
            });
        }
        let lim = self.limits();
        if self.flows.len() as u64 >= lim.max_flows {
            return Err(ConfigError::TooManyFlows {
                alg: lim.alg,
                max: lim.max_flows,
            });
        }
        self.check(node, &cfg)?;
        let id = self.flows.insert(cfg);
        let spec = &self.policy.nodes[node];
        let mut m = Member::new(node as u32);
        m.weight = cfg.weight;
        m.prio = cfg.prio;
        m.limit = spec.flow_rate;
        m.reservation = spec.flow_reservation;
        m.deadline = spec.flow_deadline;
        m.slack = spec.flow_slack;
        if id.index() < self.fm.len() {
            self.fm[id.index()] = m;
        } else {
            self.fm.push(m);
        }
        Ok(id)
    }

    pub(super) fn check(&self, node: usize, cfg: &FlowConfig) -> Result<(), ConfigError> {
        self.limits().check(cfg)?;
        if let Kind::Prio { levels } = self.nodes[node].kind
            && cfg.prio >= levels
        {
            {
                return Err(ConfigError::OutOfRange {
                    alg: "policy",
                    field: "prio",
                    value: u64::from(cfg.prio),
                    min: 0,
                    max: u64::from(levels) - 1,
                });
            }
        }
        Ok(())
    }

    /// The node a live flow is attached to.
    pub fn flow_node(&self, flow: FlowId) -> Option<usize> {
        self.flows
            .contains(flow)
            .then(|| self.fm[flow.index()].parent as usize)
    }

    /// The flow table (read only).
    pub fn flows(&self) -> &FlowTable<T> {
        &self.flows
    }

    /// The per-flow parameters of a live flow.
    pub fn flow_params(&self, flow: FlowId) -> Option<FlowParams> {
        self.flows.contains(flow).then(|| {
            let m = &self.fm[flow.index()];
            FlowParams {
                size: m.size,
                deadline: m.deadline,
                slack: m.slack,
                rate: m.limit,
                reservation: m.reservation,
                burst: m.burst,
                cburst: m.cburst,
            }
        })
    }

    /// Changes a flow's parameters (queued packets stay queued; the flow is
    /// re-ranked). A rate must fit the shaper's horizon.
    pub fn set_flow_params(
        &mut self,
        flow: FlowId,
        p: FlowParams,
        now: Nanos,
    ) -> Result<(), ConfigError> {
        if !self.flows.contains(flow) {
            return Err(ConfigError::UnknownFlow(flow));
        }
        if let Some(r) = p.rate {
            let (unit, buckets) = (self.policy.shaper_unit, self.policy.shaper_buckets);
            let slowest = super::spec::slowest_shaped_rate(self.policy.max_len, unit, buckets);
            if slowest.is_none_or(|s| r < s) {
                return Err(ConfigError::RateBeyondHorizon {
                    alg: "policy",
                    field: "rate",
                    value: r,
                    slowest,
                    max_len: self.policy.max_len,
                    horizon: super::spec::shaper_horizon(unit, buckets),
                });
            }
        }
        for (field, v) in [("burst", p.burst), ("cburst", p.cburst)] {
            if let Some(b) = v
                && b > MAX_BURST
            {
                return Err(ConfigError::OutOfRange {
                    alg: "policy",
                    field,
                    value: b,
                    min: 0,
                    max: MAX_BURST,
                });
            }
        }
        let r = flow.0;
        let queued = self.fm[flow.index()].slot != Slot::Idle;
        if queued {
            self.detach(r);
        }
        let m = &mut self.fm[flow.index()];
        m.size = p.size;
        m.deadline = p.deadline;
        m.slack = p.slack;
        // The carried remainders are in units of the old rates: dropping
        // them moves each clock to its rounded-up value (later, never early).
        if m.limit != p.rate {
            m.next_tx_ahead = 0;
        }
        if m.reservation != p.reservation {
            m.rtag_ahead = 0;
        }
        m.limit = p.rate;
        m.reservation = p.reservation;
        m.burst = p.burst;
        m.cburst = p.cburst;
        m.res_credit = match (p.reservation, p.burst) {
            (Some(res), Some(b)) => credit_ns(res, b),
            _ => 0,
        };
        // Never less than one maximum packet: below that a member served
        // late would lose the lateness on every packet and fall below its
        // limit in the long run.
        let one_packet = |rate: Rate| rate.tx_time(u64::from(self.policy.max_len)).as_u64();
        m.limit_credit = match (p.rate, p.cburst) {
            (Some(rate), Some(b)) => Some(credit_ns(rate, b).max(one_packet(rate))),
            _ => None,
        };
        if queued {
            self.activate(r, now.as_u64(), false);
        }
        Ok(())
    }
}
