//! The policy tree as a [`Scheduler`]: per-node integer priority queues and
//! one shared shaper.

use super::compile::Policy;
use super::limits::MAX_BURST;
use super::spec::{Kind, QueueKind, default_queue};
use crate::flow::{FlowConfig, FlowId, FlowTable, Pkt, Rejected};
use crate::pq::{
    BinaryHeapPq, BucketConfig, Cffs, Handle, HierFfs, IntPq, OutOfRange, Rank, SmallPq,
};
use crate::sched::{ConfigError, Limits, Scheduler};
use crate::units::{Nanos, Rate};

/// Queued children an automatic node keeps in its `SmallPq` before moving
/// to its kind's bucketed queue.
const SMALL_MAX: usize = 16;

/// Marks a member reference as a node (otherwise it is a flow id).
const NODE: u32 = 1 << 31;
const NO_PARENT: u32 = u32::MAX;

/// Where a member (flow or node) is with respect to its parent.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Slot {
    /// Not queued anywhere: nothing to send, or being served.
    Idle,
    /// In its parent's queue.
    Queued(Handle),
    /// In the shaper until its rate limit allows it (`true`: in the spill heap).
    Parked(Handle, bool),
}

/// Per-flow parameters beyond [`FlowConfig`]; defaults come from the node
/// the flow attaches to (`flow_deadline_ns`, `flow_rate`, ...).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowParams {
    /// Declared flow size in bytes (pFabric: remaining = size − bytes sent).
    /// `None`: remaining = bytes queued.
    pub size: Option<u64>,
    /// Relative deadline in ns (EDF).
    pub deadline: u64,
    /// Slack in ns (LSTF).
    pub slack: u64,
    /// Rate limit (enforced by the shaper).
    pub rate: Option<Rate>,
    /// Reservation (hclock parent).
    pub reservation: Option<Rate>,
    /// Bytes the flow may send ahead of its reservation (HTB's `burst`):
    /// when it becomes backlogged its reservation clock starts up to this
    /// much before `now`. `None`: it starts at `now` (no credit).
    pub burst: Option<u64>,
    /// Bytes the flow may send ahead of its rate limit (HTB's `cburst`):
    /// the credit its limiter keeps. `None`: one `max_len` packet.
    pub cburst: Option<u64>,
}

/// A flow or node as a child of its parent node.
#[derive(Clone, Debug)]
struct Member {
    parent: u32,
    slot: Slot,
    /// Handle in an hclock parent's reservation queue.
    res_h: Option<Handle>,
    weight: u32,
    prio: u32,
    /// STFQ / hclock share tags.
    start: u64,
    finish: u64,
    /// hclock reservation tag (ns, rounded up).
    rtag: u64,
    /// What rounding `rtag` up added, in 1/reservation ns.
    rtag_ahead: u64,
    by_res: bool,
    limit: Option<Rate>,
    reservation: Option<Rate>,
    /// `FlowParams::burst` / `cburst` as given (bytes).
    burst: Option<u64>,
    cburst: Option<u64>,
    /// The reservation's credit (ns at `reservation`, rounded down); 0 when
    /// `burst` is `None`.
    res_credit: u64,
    /// The limiter's credit (ns at `limit`, rounded down), if `cburst` is
    /// given; otherwise one `max_len` packet (rounded up).
    limit_credit: Option<u64>,
    /// Earliest time the rate limit lets it send (virtual clock, ns,
    /// rounded up).
    next_tx: u64,
    /// What rounding `next_tx` up added, in 1/limit ns (see [`next_tx`]).
    next_tx_ahead: u64,
    /// Bytes queued in its subtree.
    bytes: u64,
    /// Bytes sent.
    sent: u64,
    size: Option<u64>,
    deadline: u64,
    slack: u64,
}

impl Member {
    fn new(parent: u32) -> Member {
        Member {
            parent,
            slot: Slot::Idle,
            res_h: None,
            weight: 1,
            prio: 0,
            start: 0,
            finish: 0,
            rtag: 0,
            rtag_ahead: 0,
            by_res: false,
            limit: None,
            reservation: None,
            burst: None,
            cburst: None,
            res_credit: 0,
            limit_credit: None,
            next_tx: 0,
            next_tx_ahead: 0,
            bytes: 0,
            sent: 0,
            size: None,
            deadline: 0,
            slack: 0,
        }
    }
}

/// A node's queue over its children.
#[derive(Clone, Debug)]
enum NodeQ {
    Cffs(Cffs<u32>),
    Hier(HierFfs<u32>),
    Heap(BinaryHeapPq<u32>),
    Small(SmallPq<u32>),
}

macro_rules! each {
    ($q:expr, $x:ident => $e:expr) => {
        match $q {
            NodeQ::Cffs($x) => $e,
            NodeQ::Hier($x) => $e,
            NodeQ::Heap($x) => $e,
            NodeQ::Small($x) => $e,
        }
    };
}

impl NodeQ {
    fn new(kind: QueueKind, buckets: usize) -> NodeQ {
        let cfg = BucketConfig::new(buckets.max(1)).policy(OutOfRange::Clamp, OutOfRange::Clamp);
        // Bucket counts were validated (1..=MAX_BUCKETS), so construction
        // succeeds (except a 1-bucket Cffs);
        // fall back to an exact heap rather than panic.
        match kind {
            QueueKind::Cffs => {
                Cffs::new(cfg).map_or_else(|_| NodeQ::Heap(BinaryHeapPq::new(0)), NodeQ::Cffs)
            }
            QueueKind::HierFfs => {
                HierFfs::new(cfg).map_or_else(|_| NodeQ::Heap(BinaryHeapPq::new(0)), NodeQ::Hier)
            }
            QueueKind::Heap => NodeQ::Heap(BinaryHeapPq::new(0)),
            QueueKind::Small => NodeQ::Small(SmallPq::new()),
            // `PolicySched::new` starts automatic nodes as `Small`; exact
            // if it ever is not.
            QueueKind::Auto => NodeQ::Heap(BinaryHeapPq::new(0)),
        }
    }
    #[inline]
    fn push(&mut self, rank: Rank, r: u32) -> Handle {
        match each!(self, q => q.push(rank, r)) {
            Ok(h) => h,
            // Both sides clamp, so only `Full` (2^32 elements) can fail, and
            // a queue never holds more than the 2^31 members of a tree.
            Err(_) => unreachable!("a node queue holds fewer than 2^31 members"),
        }
    }
    #[inline]
    fn pop(&mut self) -> Option<u32> {
        each!(self, q => q.pop_min()).map(|(_, r)| r)
    }
    #[inline]
    fn remove(&mut self, h: Handle) -> Option<u32> {
        each!(self, q => q.remove(h))
    }
    #[inline]
    fn is_empty(&self) -> bool {
        each!(self, q => q.is_empty())
    }
    #[inline]
    fn len(&self) -> usize {
        each!(self, q => q.len())
    }
    fn pop_ranked(&mut self) -> Option<(Rank, u32)> {
        each!(self, q => q.pop_min())
    }
    fn clamped(&self) -> u64 {
        each!(self, q => q.stats().clamped())
    }
    fn memory_bytes(&self) -> usize {
        each!(self, q => q.memory_bytes())
    }
}

#[derive(Clone, Debug)]
struct NodeState {
    kind: Kind,
    q: NodeQ,
    /// `queue = "auto"`: the queue (and buckets) to move into once more
    /// than [`SMALL_MAX`] children are queued; `None` once moved or if the
    /// queue was chosen explicitly.
    grow: Option<(QueueKind, usize)>,
    /// hclock: reservation tags (exact ns).
    res: Option<BinaryHeapPq<u32>>,
    /// Virtual time (STFQ / hclock shares).
    vt: u64,
}

/// The one shaper of the tree: a [`Cffs`] over release times (unit
/// `unit` ns), with an exact heap for anything outside its window (beyond
/// its horizon, or below a window that moved past `now`), so a release is
/// never early and late by less than one unit.
#[derive(Clone, Debug)]
struct Shaper {
    q: Cffs<u32>,
    spill: BinaryHeapPq<u32>,
    unit: u64,
}

impl Shaper {
    /// `buckets` per half (validated: 2..=MAX_SHAPER_BUCKETS) of `unit` ns.
    fn new(buckets: usize, unit: u64) -> Shaper {
        // Both sides refuse, and a refused rank goes to the exact spill:
        // below the window too (an empty queue's jump, or a swap on a far
        // push, can leave the window's start later than `now`; a clamped
        // rank would then wait behind a later one).
        let cfg = BucketConfig::new(buckets).policy(OutOfRange::Reject, OutOfRange::Reject);
        Shaper {
            q: Cffs::new(cfg).unwrap_or_else(|_| unreachable!("validated shaper_buckets")),
            spill: BinaryHeapPq::new(0),
            unit,
        }
    }
    #[inline]
    fn push(&mut self, t: u64, r: u32) -> Slot {
        let rank = t.div_ceil(self.unit);
        match self.q.push(rank, r) {
            Ok(h) => Slot::Parked(h, false),
            Err(e) => match self.spill.push(rank, e.value) {
                Ok(h) => Slot::Parked(h, true),
                Err(_) => unreachable!("the shaper holds fewer than 2^31 members"),
            },
        }
    }
    /// Pops the first member whose release time has come.
    #[inline]
    fn pop_due(&mut self, now: u64) -> Option<u32> {
        let due = now / self.unit;
        let a = self.q.peek_min_rank().filter(|&r| r <= due);
        let b = self.spill.peek_min_rank().filter(|&r| r <= due);
        match (a, b) {
            (Some(x), Some(y)) if y < x => self.spill.pop_min().map(|p| p.1),
            (Some(_), _) => self.q.pop_min().map(|p| p.1),
            (None, Some(_)) => self.spill.pop_min().map(|p| p.1),
            (None, None) => None,
        }
    }
    fn next(&self) -> Option<u64> {
        let a = self.q.peek_min_rank();
        let b = self.spill.peek_min_rank();
        let r = match (a, b) {
            (Some(x), Some(y)) => x.min(y),
            (x, y) => x.or(y)?,
        };
        Some(r.saturating_mul(self.unit))
    }
    fn remove(&mut self, h: Handle, spill: bool) {
        if spill {
            self.spill.remove(h);
        } else {
            self.q.remove(h);
        }
    }
}

/// Counters specific to a policy tree.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyStats {
    /// Times a child was parked in the shaper by a rate limit.
    pub parked: u64,
    /// Times a child was released from the shaper.
    pub released: u64,
    /// Ranks clamped by node queues and the shaper (0 when every rank fit
    /// its queue's range; see [`crate::pq::OutOfRange`]).
    pub clamped: u64,
    /// Entries that went to the shaper's spill heap (beyond its horizon,
    /// or below its window after the window moved past `now`).
    pub spilled: u64,
}

/// A programmable scheduler: a tree of [`Policy`] nodes over flows, with
/// one shared shaper. See the [module docs](super).
#[derive(Debug)]
pub struct PolicySched<T> {
    policy: Policy,
    nodes: Vec<NodeState>,
    nm: Vec<Member>,
    fm: Vec<Member>,
    flows: FlowTable<T>,
    pstats: PolicyStats,

    shaper: Shaper,
    next_leaf: usize,
    root: usize,
    path: Vec<(u32, u32)>,
}

/// The rate limiter's clock after sending `len` bytes at `now`:
/// `T = max(T, now − credit) + len/rate`, the member sending while
/// `T ≤ now` (HTB's "tokens not negative"). `credit` is `cburst/rate`
/// (rounded down) when given, but never less than one maximum packet
/// `L_max/rate`, which is also the default: a
/// member served late (the link was busy with another packet when it
/// became eligible) keeps that much, so its long-run rate is its limit even
/// though releases fall on packet boundaries. Over any interval of length
/// `t` between two of its sends it sends at most `rate·t + credit·rate`
/// bytes plus the last packet (every packet's time is rounded up).
///
/// The clock is kept exactly: `T = t − ahead/rate` ns, where `t` is whole
/// ns rounded up and `ahead < rate` (bits·ns/s) carries what the rounding
/// added, so the long-run rate is the limit itself (not `len/ceil(len/rate)`:
/// 64 B at 100 Gbit/s would be 6 ns instead of 5.12 ns, −15 %). Never early:
/// `t` is never below the exact clock. Returns the new `(t, ahead)`.
#[inline]
fn next_tx(t: u64, ahead: u64, now: u64, rate: Rate, len: u64, credit: u64) -> (u64, u64) {
    let floor = now.saturating_sub(credit);
    // The exact clock is in (t − 1, t] (== t when `ahead` is 0), so an
    // integer `floor >= t` is at or past it.
    if floor >= t {
        advance(floor, 0, rate, len)
    } else {
        advance(t, ahead, rate, len)
    }
}

/// The exact clock `t − ahead/rate` ns plus `len` bytes at `rate`, as
/// `(t', ahead')` with `t'` rounded up and `ahead' < rate` (saturating).
#[inline]
fn advance(t: u64, ahead: u64, rate: Rate, len: u64) -> (u64, u64) {
    let bps = u128::from(rate.as_bps().max(1));
    let bits_ns = u128::from(len) * 8_000_000_000;
    let ahead = u128::from(ahead);
    if bits_ns <= ahead {
        // Still inside the nanosecond `t` already stands for.
        return (t, u64::try_from(ahead - bits_ns).unwrap_or(0));
    }
    let d = bits_ns - ahead;
    let step = d.div_ceil(bps);
    // `step·bps − d < bps <= u64::MAX`.
    let rest = u64::try_from(step * bps - d).unwrap_or(0);
    match u64::try_from(step).ok().and_then(|s| t.checked_add(s)) {
        Some(t) => (t, rest),
        None => (u64::MAX, 0),
    }
}

/// `bytes` at `rate` in ns, rounded down (a credit never exceeds the bytes
/// it stands for), saturating.
fn credit_ns(rate: Rate, bytes: u64) -> u64 {
    let t = u128::from(bytes) * 8_000_000_000 / u128::from(rate.as_bps().max(1));
    u64::try_from(t).unwrap_or(u64::MAX)
}

impl Member {
    /// The limiter's credit in ns (see [`next_tx`]).
    #[inline]
    fn limit_credit(&self, rate: Rate, max_len: u64) -> u64 {
        match self.limit_credit {
            Some(c) => c,
            None => rate.tx_time(max_len).as_u64(),
        }
    }
}

/// A wfq/hclock node whose virtual time passes this rebases its children's
/// tags ([`PolicySched::rebase_tags`]): `2^62` leaves `3·2^62` of room, far
/// more than the tags of one round can span (`len·scale/w <= 2^32` each).
const REBASE_TAGS_AT: u64 = 1 << 62;

#[inline]
fn inc(len: u64, scale: u64, w: u32) -> u64 {
    (len * scale).div_ceil(u64::from(w.max(1)))
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
        s.clamped =
            self.nodes.iter().map(|n| n.q.clamped()).sum::<u64>() + self.shaper.q.stats().clamped();
        s
    }

    /// Ranks clamped per node queue (node name, count): non-zero means that
    /// node's `buckets` (or `unit`) is too small for the ranks it sees.
    pub fn clamped_by_node(&self) -> Vec<(&str, u64)> {
        self.nodes
            .iter()
            .zip(&self.policy.nodes)
            .map(|(n, s)| (s.name.as_str(), n.q.clamped()))
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
            + self.shaper.spill.memory_bytes()
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

    fn check(&self, node: usize, cfg: &FlowConfig) -> Result<(), ConfigError> {
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

    #[inline(always)]
    fn member(&self, r: u32) -> &Member {
        if r & NODE != 0 {
            &self.nm[(r & !NODE) as usize]
        } else {
            &self.fm[r as usize]
        }
    }

    #[inline(always)]
    fn member_mut(&mut self, r: u32) -> &mut Member {
        if r & NODE != 0 {
            &mut self.nm[(r & !NODE) as usize]
        } else {
            &mut self.fm[r as usize]
        }
    }

    #[inline(always)]
    fn has_work(&self, r: u32) -> bool {
        if r & NODE != 0 {
            !self.nodes[(r & !NODE) as usize].q.is_empty()
        } else {
            self.flows.hot[r as usize].len != 0
        }
    }

    /// The rank of child `r` in node `n`.
    #[inline]
    fn rank(&self, n: usize, r: u32) -> Rank {
        let m = self.member(r);
        match self.nodes[n].kind {
            Kind::Rr => 0,
            Kind::Prio { .. } => u64::from(m.prio),
            Kind::Wfq { .. } | Kind::Hclock { .. } => m.start,
            Kind::Pfabric { unit } => {
                let rem = match m.size {
                    Some(s) => s.saturating_sub(m.sent),
                    None => m.bytes,
                };
                rem / unit
            }
            Kind::Edf { unit } => {
                let ts = self.head(r).map_or(0, |p| p.0);
                ts.saturating_add(m.deadline) / unit
            }
            Kind::Lstf { unit, link } => {
                let (ts, len) = self.head(r).unwrap_or((0, 0));
                ts.saturating_add(m.slack)
                    .saturating_sub(link.tx_time(len).as_u64())
                    / unit
            }
        }
    }

    /// Arrival time and length of a flow's head packet.
    fn head(&self, r: u32) -> Option<(u64, u64)> {
        if r & NODE != 0 {
            return None;
        }
        self.flows
            .head(FlowId(r))
            .map(|p| (p.ts.as_u64(), u64::from(p.len)))
    }

    /// Puts child `r` (idle, with work) in its parent's queue, or in the
    /// shaper if its rate limit does not allow it at `now`. `fresh`: it
    /// just became backlogged (hclock restarts its reservation clock).
    /// Returns true if it went into the parent's queue.
    #[inline]
    fn enter(&mut self, r: u32, now: u64, fresh: bool) -> bool {
        let m = self.member(r);
        let n = m.parent as usize;
        if m.limit.is_some() && m.next_tx > now {
            let t = m.next_tx;
            let slot = self.shaper.push(t, r);
            if let Slot::Parked(_, true) = slot {
                self.pstats.spilled += 1;
            }
            self.member_mut(r).slot = slot;
            self.pstats.parked += 1;
            self.flows.count_overlimit();
            return false;
        }
        let vt = self.nodes[n].vt;
        let kind = self.nodes[n].kind;
        if let Kind::Wfq { .. } | Kind::Hclock { .. } = kind {
            let m = self.member_mut(r);
            m.start = m.start.max(vt).max(m.finish);
            if fresh {
                let floor = now.saturating_sub(m.res_credit);
                if floor >= m.rtag {
                    // At or past the exact clock (see `next_tx`).
                    (m.rtag, m.rtag_ahead) = (floor, 0);
                }
            }
        }
        let rank = self.rank(n, r);
        let h = self.nodes[n].q.push(rank, r);
        self.member_mut(r).slot = Slot::Queued(h);
        if self.nodes[n].grow.is_some() && self.nodes[n].q.len() > SMALL_MAX {
            self.grow(n);
        }
        let mut res_h = None;
        let (has_res, rtag) = (self.member(r).reservation.is_some(), self.member(r).rtag);
        if let (Some(res), true) = (self.nodes[n].res.as_mut(), has_res) {
            res_h = res.push(rtag, r).ok();
        }
        self.member_mut(r).res_h = res_h;
        true
    }

    /// Moves an automatic node's children from its `SmallPq` into its
    /// kind's queue, in order, and re-points every child's handle.
    #[cold]
    fn grow(&mut self, n: usize) {
        let Some((kind, buckets)) = self.nodes[n].grow.take() else {
            return;
        };
        let mut small = core::mem::replace(&mut self.nodes[n].q, NodeQ::new(kind, buckets));
        while let Some((rank, r)) = small.pop_ranked() {
            let h = self.nodes[n].q.push(rank, r);
            self.member_mut(r).slot = Slot::Queued(h);
        }
    }

    /// Child `r` now has work: enter it and, while that makes a parent go
    /// from empty to non-empty, enter the parent too.
    fn activate(&mut self, mut r: u32, now: u64, mut fresh: bool) {
        loop {
            if self.member(r).slot != Slot::Idle {
                return;
            }
            let n = self.member(r).parent as usize;
            let was_empty = self.nodes[n].q.is_empty();
            if !self.enter(r, now, fresh) || !was_empty || n == self.root {
                return;
            }
            r = n as u32 | NODE;
            fresh = true;
        }
    }

    /// Takes child `r` out of its parent's queue or the shaper; a parent left
    /// empty is taken out of its own parent in turn.
    fn detach(&mut self, mut r: u32) {
        loop {
            let m = self.member(r);
            let n = m.parent as usize;
            match m.slot {
                Slot::Idle => return,
                Slot::Parked(h, spill) => {
                    self.shaper.remove(h, spill);
                    self.member_mut(r).slot = Slot::Idle;
                    return;
                }
                Slot::Queued(h) => {
                    let res_h = m.res_h;
                    self.nodes[n].q.remove(h);
                    if let (Some(rh), Some(res)) = (res_h, self.nodes[n].res.as_mut()) {
                        res.remove(rh);
                    }
                    let m = self.member_mut(r);
                    m.slot = Slot::Idle;
                    m.res_h = None;
                    if !self.nodes[n].q.is_empty() || n == self.root {
                        return;
                    }
                    r = n as u32 | NODE;
                }
            }
        }
    }

    /// Moves every child whose release time has come from the shaper back
    /// into the tree.
    #[inline]
    fn release(&mut self, now: u64) {
        while let Some(r) = self.shaper.pop_due(now) {
            self.member_mut(r).slot = Slot::Idle;
            self.pstats.released += 1;
            self.activate(r, now, false);
        }
    }

    /// Pops node `n`'s next child.
    #[inline]
    fn pop(&mut self, n: usize, now: u64) -> Option<u32> {
        let st = &mut self.nodes[n];
        let (r, by_res) = match st.res.as_mut() {
            Some(res) if res.peek_min_rank().is_some_and(|t| t <= now) => {
                let r = res.pop_min()?.1;
                let h = match self.member(r).slot {
                    Slot::Queued(h) => Some(h),
                    _ => None,
                };
                if let Some(h) = h {
                    self.nodes[n].q.remove(h);
                }
                (r, true)
            }
            _ => {
                let r = st.q.pop()?;
                if let (Some(rh), Some(res)) = (self.member(r).res_h, self.nodes[n].res.as_mut()) {
                    res.remove(rh);
                }
                (r, false)
            }
        };
        let m = self.member_mut(r);
        m.slot = Slot::Idle;
        m.res_h = None;
        m.by_res = by_res;
        Some(r)
    }

    /// Accounts `len` bytes served from child `r` of node `n`.
    #[inline]
    fn served(&mut self, n: usize, r: u32, len: u64, now: u64) {
        let kind = self.nodes[n].kind;
        let mut vt = self.nodes[n].vt;
        let max_len = u64::from(self.policy.max_len);
        let m = self.member_mut(r);
        m.bytes -= len;
        m.sent += len;
        match kind {
            Kind::Wfq { scale } => {
                vt = m.start;
                m.finish = m.start + inc(len, scale, m.weight);
            }
            Kind::Hclock { scale } => {
                if !m.by_res {
                    vt = m.start;
                    m.finish = m.start + inc(len, scale, m.weight);
                }
                if let Some(res) = m.reservation {
                    (m.rtag, m.rtag_ahead) = advance(m.rtag, m.rtag_ahead, res, len);
                }
            }
            _ => {}
        }
        if let Some(rate) = m.limit {
            let credit = m.limit_credit(rate, max_len);
            (m.next_tx, m.next_tx_ahead) =
                next_tx(m.next_tx, m.next_tx_ahead, now, rate, len, credit);
        }
        self.nodes[n].vt = vt;
        if vt > REBASE_TAGS_AT {
            self.rebase_tags(n);
        }
    }

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
    fn rebase_tags(&mut self, n: usize) {
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

impl<T> Scheduler<T> for PolicySched<T> {
    fn name(&self) -> &'static str {
        "policy"
    }

    fn add_flow_at(&mut self, node: usize, cfg: FlowConfig) -> Result<FlowId, ConfigError> {
        PolicySched::add_flow_at(self, node, cfg)
    }

    fn set_flow_params(
        &mut self,
        flow: FlowId,
        params: FlowParams,
        now: Nanos,
    ) -> Result<(), ConfigError> {
        PolicySched::set_flow_params(self, flow, params, now)
    }

    fn limits(&self) -> Limits {
        Limits {
            max_len: u64::from(self.policy.max_len),
            max_flows: (NODE - 1) as u64,
            ..Limits::generic("policy")
        }
    }

    fn add_flow(&mut self, cfg: FlowConfig) -> Result<FlowId, ConfigError> {
        let node = match self.policy.attach {
            Some(n) => n,
            None => {
                let l = self.policy.leaves[self.next_leaf % self.policy.leaves.len()];
                self.next_leaf += 1;
                l
            }
        };
        self.add_flow_at(node, cfg)
    }

    fn change_flow(
        &mut self,
        flow: FlowId,
        cfg: FlowConfig,
        now: Nanos,
    ) -> Result<(), ConfigError> {
        let Some(_) = self.flows.config(flow) else {
            return Err(ConfigError::UnknownFlow(flow));
        };
        let node = self.fm[flow.index()].parent as usize;
        self.check(node, &cfg)?;
        self.flows.check_max_len(flow, cfg.max_len)?;
        let queued = self.fm[flow.index()].slot != Slot::Idle;
        if queued {
            self.detach(flow.0);
        }
        let m = &mut self.fm[flow.index()];
        m.weight = cfg.weight;
        m.prio = cfg.prio;
        self.flows.set_config(flow, cfg);
        if queued {
            self.activate(flow.0, now.as_u64(), false);
        }
        Ok(())
    }

    fn remove_flow(&mut self, flow: FlowId) -> Result<Vec<Pkt<T>>, ConfigError> {
        if !self.flows.contains(flow) {
            return Err(ConfigError::UnknownFlow(flow));
        }
        self.detach(flow.0);
        let bytes = self.fm[flow.index()].bytes;
        let mut n = self.fm[flow.index()].parent;
        while n != NO_PARENT {
            let m = &mut self.nm[n as usize];
            m.bytes -= bytes;
            n = m.parent;
        }
        let pkts: Vec<Pkt<T>> = self.flows.remove(flow);
        Ok(pkts)
    }

    fn enqueue(&mut self, pkt: Pkt<T>, now: Nanos) -> Result<(), Rejected<T>> {
        let (r, len) = (pkt.flow.0, pkt.len);
        let was_empty = self.flows.admit(pkt, false)?;
        // Backlog bytes along the path; children of pFabric nodes are
        // re-ranked (their remaining size changed).
        let len = u64::from(len);
        let mut c = r;
        loop {
            let m = self.member_mut(c);
            m.bytes += len;
            let (p, slot) = (m.parent, m.slot);
            if p == NO_PARENT {
                break;
            }
            if let (Kind::Pfabric { .. }, Slot::Queued(h)) = (self.nodes[p as usize].kind, slot) {
                let n = p as usize;
                self.nodes[n].q.remove(h);
                let rank = self.rank(n, c);
                let h = self.nodes[n].q.push(rank, c);
                self.member_mut(c).slot = Slot::Queued(h);
            }
            c = p | NODE;
        }
        if was_empty {
            self.activate(r, now.as_u64(), true);
        }
        Ok(())
    }

    fn dequeue(&mut self, now: Nanos) -> Option<Pkt<T>> {
        if self.flows.total_queued() == 0 {
            return None;
        }
        let now = now.as_u64();
        self.release(now);
        let root = self.root;
        let rm = &self.nm[root];
        if rm.limit.is_some() && rm.next_tx > now {
            return None;
        }
        let mut n = root;
        let mut path = core::mem::take(&mut self.path);
        path.clear();
        let f = loop {
            let Some(r) = self.pop(n, now) else {
                // Only reachable if the root is empty (all work parked).
                debug_assert!(path.is_empty());
                self.path = path;
                return None;
            };
            path.push((n as u32, r));
            if r & NODE == 0 {
                break r;
            }
            n = (r & !NODE) as usize;
        };
        let (pkt, _) = self.flows.pop(FlowId(f))?;
        let len = u64::from(pkt.len);
        for &(n, r) in path.iter().rev() {
            self.served(n as usize, r, len, now);
            if self.has_work(r) {
                self.enter(r, now, false);
            }
        }
        let rm = &mut self.nm[root];
        rm.bytes -= len;
        rm.sent += len;
        if let Some(rate) = rm.limit {
            let credit = rm.limit_credit(rate, u64::from(self.policy.max_len));
            (rm.next_tx, rm.next_tx_ahead) =
                next_tx(rm.next_tx, rm.next_tx_ahead, now, rate, len, credit);
        }
        self.path = path;
        Some(pkt)
    }

    fn next_ready(&self, now: Nanos) -> Option<Nanos> {
        if self.flows.total_queued() == 0 {
            return None;
        }
        let rm = &self.nm[self.root];
        let root_at = if rm.limit.is_some() { rm.next_tx } else { 0 };
        let t = if !self.nodes[self.root].q.is_empty() {
            Some(root_at.max(now.as_u64()))
        } else {
            self.shaper.next().map(|t| t.max(root_at).max(now.as_u64()))
        };
        t.map(Nanos)
    }

    crate::sched::flow_table_views!(flows);
}

#[cfg(test)]
mod shaper_tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;

    const US: u64 = 1000;

    fn shaper(buckets: usize, unit: u64) -> Shaper {
        Shaper::new(buckets, unit)
    }

    /// Drains everything due at `now`, checking each member against its
    /// release time (`times[r]`): never early, and nothing due left
    /// behind (so late by less than one unit when drained every unit).
    fn drain(s: &mut Shaper, now: u64, times: &[u64], out: &mut Vec<u32>) {
        let from = out.len();
        while let Some(r) = s.pop_due(now) {
            let t = times[r as usize];
            assert!(
                t.div_ceil(s.unit) * s.unit <= now,
                "{r} at {t} released early at {now}"
            );
            out.push(r);
        }
        let ranks: Vec<u64> = out[from..]
            .iter()
            .map(|&r| times[r as usize].div_ceil(s.unit))
            .collect();
        assert!(ranks.is_sorted(), "out of order at {now}: {ranks:?}");
        if let Some(next) = s.next() {
            assert!(next > now, "{next} still queued at {now}");
        }
    }

    /// The review's case (unit 1 µs, 16384 buckets): an empty shaper at
    /// 1,010,000 µs whose first member parks at 1,022,304 µs jumps its
    /// window to 62·16384 = 1,015,808 µs, past `now`. Members parking at
    /// 1,010,013, 1,010,025 and 1,010,005 µs were clamped into its first
    /// bucket and left in push order (the last 20 µs late); now they go
    /// to the exact spill and leave on time, in order.
    #[test]
    fn ranks_below_a_jumped_window_leave_on_time_and_in_order() {
        let mut s = shaper(16_384, US);
        let times = [
            1_022_304 * US,
            1_010_013 * US,
            1_010_025 * US,
            1_010_005 * US,
        ];
        for (r, &t) in times.iter().enumerate() {
            s.push(t, r as u32);
        }
        assert_eq!(s.q.stats().clamped(), 0);
        let mut out = Vec::new();
        for now in (1_010_000..=1_022_304).map(|u| u * US) {
            drain(&mut s, now, &times, &mut out);
            assert_eq!(
                out.len(),
                times.iter().filter(|&&t| t <= now).count(),
                "not all due members released at {now}"
            );
        }
        assert_eq!(out, [3, 1, 2, 0]);
    }

    /// Random parks (up to 2.5 windows ahead) and pops with idle gaps of
    /// up to 100 windows (empty-queue jumps), drained every unit: every
    /// member leaves in its unit, in rank order.
    #[test]
    fn random_parks_with_idle_gaps_leave_in_their_unit() {
        for seed in 0..20u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let (buckets, unit) = (rng.random_range(2..64usize), rng.random_range(1..5u64));
            let span = buckets as u64 * unit;
            let mut s = shaper(buckets, unit);
            let mut times = Vec::new();
            let mut out = Vec::new();
            let mut now = rng.random_range(0..10 * span);
            for _ in 0..3000 {
                if rng.random_bool(0.02) && s.next().is_none() {
                    now += rng.random_range(0..100 * span);
                }
                for _ in 0..rng.random_range(0..4) {
                    let t = now + rng.random_range(0..=5 * span / 2);
                    s.push(t, times.len() as u32);
                    times.push(t);
                }
                now += rng.random_range(1..=unit);
                // Every unit boundary crossed is drained.
                drain(&mut s, now, &times, &mut out);
            }
            while let Some(t) = s.next() {
                now = now.max(t);
                drain(&mut s, now, &times, &mut out);
            }
            assert_eq!(out.len(), times.len(), "seed {seed}");
            assert_eq!(s.q.stats().clamped(), 0, "seed {seed}");
        }
    }
}
