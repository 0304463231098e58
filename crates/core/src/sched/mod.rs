//! The [`Scheduler`] trait and the flow-based algorithms behind it.
//!
//! Every algorithm here is a [`Discipline`]: it sees flow *heads* only and
//! decides which flow is served next. [`FlowSched`] couples a discipline with
//! the [`FlowTable`] (per-flow FIFOs, configuration, counters) and implements
//! [`Scheduler`] once for all of them, so limits, accounting and live
//! reconfiguration behave identically everywhere.
//!
//! | algorithm | type | cost per packet | guarantee |
//! | --- | --- | --- | --- |
//! | FIFO | [`Fifo`] | O(1) | none |
//! | PRIO | [`Prio`] | O(log64 levels) | strict priority; RR within a level |
//! | RR | [`Rr`] | O(1) | packet round-robin |
//! | DRR | [`Drr`] | O(1) if quantum ≥ max_len | T-WFI (1/φ_min + 1/φ_k + N − 1)·L/R |
//! | WF2Q+ | [`Wf2q`] | O(log N) | B-WFI 2·L_i + 2·φ_i·(L_max − L_i) |
//! | QFQ | [`Qfq`] | O(1) | T-WFI (3·σ_k + 2·L)/R, σ_k < 2·L_k/φ_k |

use crate::flow::{Counters, FlowConfig, FlowId, FlowTable, Pkt, Rejected};
use crate::units::{Bytes, Nanos};

mod drr;
mod exact_div;
mod fifo;
mod prio;
mod qfq;
mod rr;
mod wf2q;

pub use drr::Drr;
pub use fifo::Fifo;
pub use prio::Prio;
pub use qfq::Qfq;
pub use rr::Rr;
pub use wf2q::Wf2q;

// Defined next to the flow table (which reports both); re-exported here,
// where the `Scheduler` trait uses them.
pub use crate::flow::{Backlog, ConfigError};

/// The [`Scheduler`] methods that only read a [`FlowTable`] held in
/// `self.$field` (backlog, stats, flow stats and configs, flow ids), shared by
/// every scheduler built on the flow table.
macro_rules! flow_table_views {
    ($field:ident) => {
        fn backlog(&self) -> $crate::sched::Backlog {
            self.$field.backlog()
        }
        fn stats(&self) -> $crate::flow::Counters {
            self.$field.totals()
        }
        fn flow_stats(&self, flow: $crate::flow::FlowId) -> Option<$crate::flow::Counters> {
            self.$field.stats(flow)
        }
        fn flow_config(&self, flow: $crate::flow::FlowId) -> Option<&$crate::flow::FlowConfig> {
            self.$field.config(flow)
        }
        fn flow_ids(&self) -> Vec<$crate::flow::FlowId> {
            self.$field.ids().collect()
        }
    };
}
pub(crate) use flow_table_views;

/// Supported ranges of an algorithm, enforced on every add/change.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Limits {
    /// Algorithm name.
    pub alg: &'static str,
    /// Largest number of flows.
    pub max_flows: u64,
    /// Largest weight (smallest is always 1).
    pub max_weight: u64,
    /// Largest sum of the weights of all flows.
    pub max_weight_sum: u64,
    /// Largest `max_len` (smallest is always 1).
    pub max_len: u64,
    /// Largest `limit` in packets (smallest is 1).
    pub max_limit: u64,
    /// Number of priority levels (PRIO). Other algorithms ignore `prio`
    /// and accept any value (`levels = 2^32`).
    pub levels: u64,
}

impl Limits {
    /// Generous limits for algorithms without special constraints.
    pub const fn generic(alg: &'static str) -> Limits {
        Limits {
            alg,
            max_flows: 1 << 24,
            max_weight: 1 << 20,
            max_weight_sum: u32::MAX as u64,
            max_len: 1 << 20,
            max_limit: 1 << 24,
            levels: 1 << 32,
        }
    }

    /// Checks one flow's fields (not the weight sum).
    pub fn check(&self, cfg: &FlowConfig) -> Result<(), ConfigError> {
        let range = |field, value: u64, min, max| {
            if value < min || value > max {
                Err(ConfigError::OutOfRange {
                    alg: self.alg,
                    field,
                    value,
                    min,
                    max,
                })
            } else {
                Ok(())
            }
        };
        range("weight", u64::from(cfg.weight), 1, self.max_weight)?;
        range("max_len", u64::from(cfg.max_len), 1, self.max_len)?;
        range("limit", u64::from(cfg.limit), 1, self.max_limit)?;
        range("prio", u64::from(cfg.prio), 0, self.levels - 1)?;
        if let Some(q) = cfg.quantum {
            range("quantum", u64::from(q), 1, 1 << 30)?;
        }
        Ok(())
    }
}

/// Anything that orders packets. Object safe.
///
/// Every packet handed to `enqueue` is either accepted (and later returned by
/// `dequeue` or by `remove_flow`) or handed straight back in a
/// [`Rejected`] with the reason. Time is always an argument.
pub trait Scheduler<T> {
    /// Short algorithm name (`qfq`, `drr`, ...).
    fn name(&self) -> &'static str;
    /// Supported ranges.
    fn limits(&self) -> Limits;
    /// Adds a flow.
    fn add_flow(&mut self, cfg: FlowConfig) -> Result<FlowId, ConfigError>;
    /// Changes a flow's configuration while packets may be queued; nothing is
    /// dropped. Packets already queued keep their place in the flow's FIFO.
    fn change_flow(&mut self, flow: FlowId, cfg: FlowConfig, now: Nanos)
    -> Result<(), ConfigError>;
    /// Removes a flow, returning its queued packets in FIFO order (counted as
    /// dropped with reason [`DropReason::Removed`](crate::DropReason::Removed)).
    fn remove_flow(&mut self, flow: FlowId) -> Result<Vec<Pkt<T>>, ConfigError>;
    /// Offers a packet.
    fn enqueue(&mut self, pkt: Pkt<T>, now: Nanos) -> Result<(), Rejected<T>>;
    /// Takes the next packet to send, if any is eligible at `now`.
    fn dequeue(&mut self, now: Nanos) -> Option<Pkt<T>>;
    /// Offers the packets of `pkts` in order, exactly as calling
    /// [`enqueue`](Scheduler::enqueue) on each in turn would, and leaves
    /// `pkts` empty (its capacity kept). Stops at the first refusal and
    /// returns it; the packets behind it are appended to `rest`, in order
    /// (offer them again, or hand them back). `rest` is untouched when every
    /// packet is accepted.
    ///
    /// One call per batch: through a `dyn Scheduler`, the per-packet calls
    /// inside are static, and taking the packets in order from a `Vec` costs
    /// a pointer step each. A caller that keeps both buffers allocates
    /// nothing here.
    fn enqueue_batch(
        &mut self,
        pkts: &mut Vec<Pkt<T>>,
        rest: &mut Vec<Pkt<T>>,
        now: Nanos,
    ) -> Result<(), Rejected<T>> {
        let mut taken = pkts.drain(..);
        while let Some(p) = taken.next() {
            if let Err(r) = self.enqueue(p, now) {
                rest.extend(taken);
                return Err(r);
            }
        }
        Ok(())
    }
    /// Appends to `out` the packets that `max` calls of
    /// [`dequeue`](Scheduler::dequeue) at `now` would return, in the same
    /// order, stopping at the first `None`; returns how many.
    fn dequeue_batch(&mut self, now: Nanos, max: usize, out: &mut Vec<Pkt<T>>) -> usize {
        let mut n = 0;
        while n < max {
            let Some(p) = self.dequeue(now) else { break };
            out.push(p);
            n += 1;
        }
        n
    }
    /// Earliest time at which `dequeue` may return a packet: `Some(now)` for a
    /// backlogged work-conserving scheduler, `None` when empty.
    fn next_ready(&self, now: Nanos) -> Option<Nanos>;
    /// Packets and bytes queued.
    fn backlog(&self) -> Backlog;
    /// Scheduler-wide counters.
    fn stats(&self) -> Counters;
    /// Counters of one flow.
    fn flow_stats(&self, flow: FlowId) -> Option<Counters>;
    /// Configuration of one flow.
    fn flow_config(&self, flow: FlowId) -> Option<&FlowConfig>;
    /// Ids of all live flows.
    fn flow_ids(&self) -> Vec<FlowId>;
    /// Adds a flow below node `node` of a policy tree (an index from
    /// [`Policy::node`](crate::policy::Policy::node)). Schedulers without
    /// nodes refuse with [`ConfigError::NoNodes`].
    fn add_flow_at(&mut self, node: usize, cfg: FlowConfig) -> Result<FlowId, ConfigError> {
        let _ = (node, cfg);
        Err(ConfigError::NoNodes { alg: self.name() })
    }
    /// Changes a flow's shaping (rate, reservation, bursts) while packets
    /// may be queued; nothing is dropped. Schedulers without per-flow
    /// shaping refuse with [`ConfigError::NoShaping`].
    fn set_flow_params(
        &mut self,
        flow: FlowId,
        params: crate::policy::FlowParams,
        now: Nanos,
    ) -> Result<(), ConfigError> {
        let _ = (flow, params, now);
        Err(ConfigError::NoShaping { alg: self.name() })
    }
}

/// The algorithm part of a flow-based scheduler: decides which backlogged
/// flow is served next. It never sees packets, only flow ids and lengths.
///
/// Call protocol (kept by [`FlowSched`]):
/// - `add`/`remove` bracket a flow's life; `change` may come in between.
/// - `activate(f, head)` when `f` goes from empty to backlogged;
///   `arrive(f, len)` on every accepted packet (after `activate`).
/// - `pick` returns `None` exactly when no flow is backlogged (so the caller
///   needs no emptiness test of its own); a `Some(f)` is followed by exactly
///   one `depart(f, len, next)`, where `next` is the new head length or
///   `None` if `f` became empty.
/// - `deactivate(f)` takes a backlogged flow out (for removal or a change).
pub trait Discipline {
    /// True if packets leave in arrival order across all flows (FIFO): the
    /// flow table then links them in one list and the scheduler takes the
    /// oldest directly, calling none of `activate`, `arrive`, `pick`,
    /// `depart` or `deactivate`.
    const ARRIVAL_ORDER: bool = false;
    /// False if `pick` never calls its `head` argument and `depart` reads
    /// only whether `next` is `None`: the flow table then keeps no head
    /// lengths (a store and a load per packet fewer), `head` returns 0 and
    /// `next` is `Some(0)` for a flow left backlogged.
    const HEAD_LEN: bool = true;
    /// Short name.
    fn name(&self) -> &'static str;
    /// Supported ranges.
    fn limits(&self) -> Limits;
    /// Checks a config for flow `id`; `old` is its current config when it is
    /// being changed. Weight-sum checks go here.
    fn check(
        &self,
        id: FlowId,
        cfg: &FlowConfig,
        old: Option<&FlowConfig>,
    ) -> Result<(), ConfigError> {
        let _ = (id, old);
        self.limits().check(cfg)
    }
    /// A flow was added.
    fn add(&mut self, id: FlowId, cfg: &FlowConfig);
    /// A flow's config changed. `head` is its head length if backlogged.
    /// The default takes the flow out and puts it back in with the new config.
    fn change(
        &mut self,
        id: FlowId,
        old: &FlowConfig,
        new: &FlowConfig,
        head: Option<Bytes>,
        now: Nanos,
    ) {
        if head.is_some() {
            self.deactivate(id);
        }
        self.remove(id, old);
        self.add(id, new);
        if let Some(h) = head {
            self.activate(id, h, now);
        }
    }
    /// A flow was removed (it was deactivated first if it was backlogged).
    fn remove(&mut self, id: FlowId, cfg: &FlowConfig);
    /// Flow `id` became backlogged with a head packet of `head` bytes.
    fn activate(&mut self, id: FlowId, head: Bytes, now: Nanos);
    /// A packet was accepted for `id` (called after `activate` if any).
    #[inline]
    fn arrive(&mut self, id: FlowId, len: Bytes) {
        let _ = (id, len);
    }
    /// Takes a backlogged flow out of the schedule.
    fn deactivate(&mut self, id: FlowId);
    /// The flow whose head packet leaves next, `None` if no flow is
    /// backlogged. `head(f)` gives the head length of any backlogged flow.
    fn pick<H: Fn(FlowId) -> Bytes>(&mut self, head: H) -> Option<FlowId>;
    /// The head of `id` (`len` bytes) left; `next` is the new head length.
    fn depart(&mut self, id: FlowId, len: Bytes, next: Option<Bytes>);
    /// Heap memory held by the discipline's own state, in bytes.
    fn memory_bytes(&self) -> usize {
        0
    }
}

/// A [`Scheduler`] made of a [`FlowTable`] and a [`Discipline`].
#[derive(Debug)]
pub struct FlowSched<D, T> {
    flows: FlowTable<T>,
    disc: D,
    /// Sum of the weights of all flows.
    weight_sum: u64,
}

impl<D: Discipline, T> FlowSched<D, T> {
    /// A scheduler with no flows and no scheduler-wide packet limit.
    pub fn new(disc: D) -> FlowSched<D, T> {
        FlowSched {
            flows: if D::ARRIVAL_ORDER {
                FlowTable::in_arrival_order()
            } else {
                FlowTable::default()
            },
            disc,
            weight_sum: 0,
        }
    }
    /// Sets a scheduler-wide packet limit, on top of the per-flow limits
    /// (for a new scheduler, before packets are queued). The packet path
    /// never tests it: the flow table's packet store holds at most this
    /// many packets (the pool's slots, or the arrival ring's length), and an
    /// arrival that finds it full is refused as a full queue.
    pub fn with_total_limit(mut self, pkts: u64) -> FlowSched<D, T> {
        let cap = pkts.max(1);
        self.flows.set_arrival_cap(cap);
        self.flows.set_pool_cap(cap);
        self
    }
    /// The flow table (read only).
    pub fn flows(&self) -> &FlowTable<T> {
        &self.flows
    }
    /// The discipline (read only).
    pub fn discipline(&self) -> &D {
        &self.disc
    }
    /// Heap memory of the table and the discipline, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.flows.memory_bytes() + self.disc.memory_bytes()
    }

    /// Sum of the weights of all flows.
    pub fn weight_sum(&self) -> u64 {
        self.weight_sum
    }

    fn check_weight_sum(&self, lim: &Limits, new: u64, old: u64) -> Result<(), ConfigError> {
        let sum = self.weight_sum - old + new;
        if sum > lim.max_weight_sum {
            return Err(ConfigError::WeightSum {
                alg: lim.alg,
                sum,
                max: lim.max_weight_sum,
            });
        }
        Ok(())
    }
}

impl<D: Discipline, T> Scheduler<T> for FlowSched<D, T> {
    fn name(&self) -> &'static str {
        self.disc.name()
    }

    fn limits(&self) -> Limits {
        self.disc.limits()
    }

    fn add_flow(&mut self, cfg: FlowConfig) -> Result<FlowId, ConfigError> {
        let lim = self.disc.limits();
        if self.flows.len() as u64 >= lim.max_flows {
            return Err(ConfigError::TooManyFlows {
                alg: lim.alg,
                max: lim.max_flows,
            });
        }
        let id = self.flows.next_id();
        self.disc.check(id, &cfg, None)?;
        self.check_weight_sum(&lim, u64::from(cfg.weight), 0)?;
        let got = self.flows.insert(cfg);
        debug_assert_eq!(got, id);
        self.disc.add(id, &cfg);
        self.weight_sum += u64::from(cfg.weight);
        Ok(id)
    }

    fn change_flow(
        &mut self,
        flow: FlowId,
        cfg: FlowConfig,
        now: Nanos,
    ) -> Result<(), ConfigError> {
        let Some(&old) = self.flows.config(flow) else {
            return Err(ConfigError::UnknownFlow(flow));
        };
        self.disc.check(flow, &cfg, Some(&old))?;
        self.check_weight_sum(
            &self.disc.limits(),
            u64::from(cfg.weight),
            u64::from(old.weight),
        )?;
        self.flows.check_max_len(flow, cfg.max_len)?;
        let head = self.flows.head(flow).map(|p| p.len);
        // A lower limit never drops what is queued: arrivals are refused
        // until the queue drains below it.
        self.disc.change(flow, &old, &cfg, head, now);
        self.flows.set_config(flow, cfg);
        self.weight_sum = self.weight_sum - u64::from(old.weight) + u64::from(cfg.weight);
        Ok(())
    }

    fn remove_flow(&mut self, flow: FlowId) -> Result<Vec<Pkt<T>>, ConfigError> {
        let Some(&cfg) = self.flows.config(flow) else {
            return Err(ConfigError::UnknownFlow(flow));
        };
        if !D::ARRIVAL_ORDER && self.flows.queued(flow).is_some_and(|n| n > 0) {
            self.disc.deactivate(flow);
        }
        self.disc.remove(flow, &cfg);
        self.weight_sum -= u64::from(cfg.weight);
        let pkts: Vec<Pkt<T>> = self.flows.remove(flow);
        Ok(pkts)
    }

    #[inline(always)]
    fn enqueue(&mut self, pkt: Pkt<T>, now: Nanos) -> Result<(), Rejected<T>> {
        if D::ARRIVAL_ORDER {
            // The ring's length is the backlog: the table compares it with
            // the scheduler-wide limit (set in `with_total_limit`).
            return self.flows.admit_arrival(pkt);
        }
        let (id, len) = (pkt.flow, pkt.len);
        if self.flows.admit_with(pkt, false, D::HEAD_LEN)? {
            self.disc.activate(id, len, now);
        }
        self.disc.arrive(id, len);
        Ok(())
    }

    #[inline(always)]
    fn dequeue(&mut self, _now: Nanos) -> Option<Pkt<T>> {
        if D::ARRIVAL_ORDER {
            return self.flows.pop_arrival();
        }
        // The discipline knows when nothing is backlogged: no separate
        // emptiness test.
        let flows = &self.flows;
        let id = self.disc.pick(|f| flows.head_len(f))?;
        let (pkt, next) = self.flows.pop_with(id, D::HEAD_LEN)?;
        self.disc.depart(id, pkt.len, next);
        Some(pkt)
    }

    /// One emptiness check for the whole batch: `min(max, backlog)`
    /// packets leave, each picked as `dequeue` would.
    fn dequeue_batch(&mut self, _now: Nanos, max: usize, out: &mut Vec<Pkt<T>>) -> usize {
        let n = usize::try_from(self.flows.total_queued()).map_or(max, |q| q.min(max));
        out.reserve(n);
        for k in 0..n {
            // A backlogged table always yields a packet; stop if not.
            if D::ARRIVAL_ORDER {
                let Some(p) = self.flows.pop_arrival() else {
                    return k;
                };
                out.push(p);
            } else {
                let flows = &self.flows;
                let Some(id) = self.disc.pick(|f| flows.head_len(f)) else {
                    return k;
                };
                // The packet goes from its pool slot straight into `out`.
                let Some((len, next)) = self.flows.pop_onto(id, D::HEAD_LEN, out) else {
                    return k;
                };
                self.disc.depart(id, len, next);
            }
        }
        n
    }

    fn next_ready(&self, now: Nanos) -> Option<Nanos> {
        (self.flows.total_queued() > 0).then_some(now)
    }

    crate::sched::flow_table_views!(flows);
}

/// The algorithms by name, for command lines and config files.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    /// First in, first out across all flows.
    Fifo,
    /// Strict priority.
    Prio,
    /// Packet round-robin.
    Rr,
    /// Deficit round-robin.
    Drr,
    /// WF2Q+.
    Wf2q,
    /// Quick Fair Queueing.
    Qfq,
}

/// Parameters of the algorithms that take one at construction; the rest
/// take none. [`SchedParams::default`] is what [`Algorithm::build`] uses.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SchedParams {
    /// PRIO: number of priority levels (default 8).
    pub prio_levels: u32,
    /// DRR: the base quantum in bytes, the quantum of a weight-1 flow
    /// (default [`FlowConfig::DEFAULT_MAX_LEN`], so every selection is O(1)
    /// while packets are at most that long).
    pub drr_quantum: u32,
}

impl Default for SchedParams {
    fn default() -> SchedParams {
        SchedParams {
            prio_levels: 8,
            drr_quantum: FlowConfig::DEFAULT_MAX_LEN,
        }
    }
}

/// Generic code to run on the concrete scheduler an [`Algorithm`] names,
/// so the packet path is monomorphised (no dynamic dispatch per packet).
/// See [`Algorithm::with_sched`].
pub trait SchedVisitor<T> {
    /// What the visit returns.
    type Output;
    /// Called once with a new, empty scheduler.
    fn visit<S: Scheduler<T> + Send + 'static>(self, sched: S) -> Self::Output;
}

/// Boxes the scheduler: the visitor behind [`Algorithm::build_send`].
struct BoxSend;

impl<T: Send + 'static> SchedVisitor<T> for BoxSend {
    type Output = Box<dyn Scheduler<T> + Send>;
    fn visit<S: Scheduler<T> + Send + 'static>(self, sched: S) -> Self::Output {
        Box::new(sched)
    }
}

impl Algorithm {
    /// All algorithms.
    pub const ALL: [Algorithm; 6] = [
        Algorithm::Fifo,
        Algorithm::Prio,
        Algorithm::Rr,
        Algorithm::Drr,
        Algorithm::Wf2q,
        Algorithm::Qfq,
    ];

    /// Name as accepted by [`Algorithm::parse`].
    pub const fn name(self) -> &'static str {
        match self {
            Algorithm::Fifo => "fifo",
            Algorithm::Prio => "prio",
            Algorithm::Rr => "rr",
            Algorithm::Drr => "drr",
            Algorithm::Wf2q => "wf2q",
            Algorithm::Qfq => "qfq",
        }
    }

    /// Parses a name (`wf2q+` and `wf2qp` are accepted for WF2Q+).
    pub fn parse(s: &str) -> Result<Algorithm, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "fifo" => Algorithm::Fifo,
            "prio" => Algorithm::Prio,
            "rr" => Algorithm::Rr,
            "drr" => Algorithm::Drr,
            "wf2q" | "wf2q+" | "wf2qp" => Algorithm::Wf2q,
            "qfq" => Algorithm::Qfq,
            _ => {
                return Err(format!(
                    "unknown algorithm `{s}`; allowed: fifo, prio, rr, drr, wf2q, qfq"
                ));
            }
        })
    }

    /// The one dispatch from an algorithm's name to its concrete type:
    /// builds the scheduler with `params` and hands it to `visitor`, whose
    /// generic `visit` is compiled for each type.
    ///
    /// ```
    /// use pktsched_core::sched::{SchedParams, SchedVisitor};
    /// use pktsched_core::{Algorithm, Scheduler};
    ///
    /// struct NameOf;
    /// impl SchedVisitor<u64> for NameOf {
    ///     type Output = &'static str;
    ///     fn visit<S: Scheduler<u64> + Send + 'static>(self, s: S) -> &'static str {
    ///         s.name()
    ///     }
    /// }
    /// assert_eq!(Algorithm::Qfq.with_sched(SchedParams::default(), NameOf), "qfq");
    /// ```
    pub fn with_sched<T: Send + 'static, V: SchedVisitor<T>>(
        self,
        params: SchedParams,
        visitor: V,
    ) -> V::Output {
        match self {
            Algorithm::Fifo => visitor.visit(FlowSched::new(Fifo::new())),
            Algorithm::Prio => visitor.visit(FlowSched::new(Prio::new(params.prio_levels))),
            Algorithm::Rr => visitor.visit(FlowSched::new(Rr::new())),
            Algorithm::Drr => visitor.visit(FlowSched::new(Drr::new(params.drr_quantum))),
            Algorithm::Wf2q => visitor.visit(FlowSched::new(Wf2q::new())),
            Algorithm::Qfq => visitor.visit(FlowSched::new(Qfq::new())),
        }
    }

    /// A boxed scheduler of this kind with default parameters
    /// (PRIO: 8 levels; DRR: base quantum 1514 bytes).
    pub fn build<T: Send + 'static>(self) -> Box<dyn Scheduler<T>> {
        self.build_send()
    }

    /// [`Algorithm::build`] for a scheduler that moves to another thread
    /// (the PSPAT arbiter's).
    pub fn build_send<T: Send + 'static>(self) -> Box<dyn Scheduler<T> + Send> {
        self.with_sched(SchedParams::default(), BoxSend)
    }

    /// [`Algorithm::build_send`] with explicit parameters.
    pub fn build_send_with<T: Send + 'static>(
        self,
        params: SchedParams,
    ) -> Box<dyn Scheduler<T> + Send> {
        self.with_sched(params, BoxSend)
    }
}

impl core::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// An intrusive circular doubly linked list of flow ids with a cursor at
/// its head, stored in two index arrays (`Links`). Used for active lists (RR,
/// PRIO levels): no allocation, O(1) unlink of any flow, and `rotate`
/// (head to tail) is a single cursor step.
#[derive(Clone, Debug)]
pub(crate) struct FlowList {
    head: u32,
}

impl Default for FlowList {
    fn default() -> Self {
        FlowList::new()
    }
}

/// Links shared by several [`FlowList`]s (a flow is in at most one list).
#[derive(Clone, Debug, Default)]
pub(crate) struct Links {
    next: Vec<u32>,
    prev: Vec<u32>,
}

pub(crate) const NIL: u32 = u32::MAX;

impl Links {
    pub(crate) fn ensure(&mut self, id: FlowId) {
        let n = id.index() + 1;
        if self.next.len() < n {
            self.next.resize(n, NIL);
            self.prev.resize(n, NIL);
        }
    }
    pub(crate) fn memory_bytes(&self) -> usize {
        (self.next.capacity() + self.prev.capacity()) * 4
    }
    /// The flow after `i` in its list (`NIL` if `i` is in no list or out
    /// of range).
    #[inline(always)]
    pub(crate) fn next_of(&self, i: u32) -> u32 {
        self.next.get(i as usize).copied().unwrap_or(NIL)
    }
}

impl FlowList {
    pub(crate) const fn new() -> FlowList {
        FlowList { head: NIL }
    }
    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        self.head == NIL
    }
    #[inline(always)]
    pub(crate) fn front(&self) -> Option<FlowId> {
        if self.head == NIL {
            None
        } else {
            Some(FlowId(self.head))
        }
    }
    /// Moves the cursor to `id`, which must be in this list (a list whose
    /// cursor was kept elsewhere while it was stepped).
    #[inline(always)]
    pub(crate) fn set_head(&mut self, id: FlowId) {
        self.head = id.0;
    }
    /// Appends `id` at the tail (just before the head).
    #[inline(always)]
    pub(crate) fn push_back(&mut self, l: &mut Links, id: FlowId) {
        let i = id.0;
        if self.head == NIL {
            l.next[i as usize] = i;
            l.prev[i as usize] = i;
            self.head = i;
        } else {
            let h = self.head;
            let t = l.prev[h as usize];
            l.next[i as usize] = h;
            l.prev[i as usize] = t;
            l.next[t as usize] = i;
            l.prev[h as usize] = i;
        }
    }
    /// Removes `id`, which must be in this list.
    #[inline(always)]
    pub(crate) fn unlink(&mut self, l: &mut Links, id: FlowId) {
        let i = id.0;
        let n = l.next[i as usize];
        if n == i {
            self.head = NIL;
        } else {
            let p = l.prev[i as usize];
            l.next[p as usize] = n;
            l.prev[n as usize] = p;
            if self.head == i {
                self.head = n;
            }
        }
        l.next[i as usize] = NIL;
        l.prev[i as usize] = NIL;
    }
    /// Moves the head to the tail: one cursor step.
    #[inline(always)]
    pub(crate) fn rotate(&mut self, l: &Links) {
        if self.head != NIL {
            self.head = l.next[self.head as usize];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In per-flow order the scheduler-wide limit is the pool's cap: an
    /// arrival at the limit is refused as a full queue (and counted), one
    /// departure or a removal makes room again, and the pool never holds
    /// more slots than the limit. RR keeps no head lengths, DRR does; both
    /// behave the same.
    #[test]
    fn total_limit_caps_the_pool_in_per_flow_order() {
        use crate::flow::DropReason;
        fn check<D: Discipline>(disc: D) {
            let mut s = FlowSched::<_, u64>::new(disc).with_total_limit(5);
            let cfg = FlowConfig::default().with_limit(4);
            let (a, b) = (s.add_flow(cfg).unwrap(), s.add_flow(cfg).unwrap());
            let t = Nanos::ZERO;
            for i in 0..5u64 {
                let f = if i < 3 { a } else { b };
                s.enqueue(Pkt::new(f, 100, t, i), t).unwrap();
            }
            let r = s.enqueue(Pkt::new(b, 100, t, 5), t).unwrap_err();
            assert_eq!(r.reason, DropReason::QueueFull);
            // A too-long packet keeps its own reason at the limit.
            let r = s.enqueue(Pkt::new(b, 2000, t, 6), t).unwrap_err();
            assert_eq!(r.reason, DropReason::TooLarge);
            assert!(s.dequeue(t).is_some());
            s.enqueue(Pkt::new(b, 100, t, 7), t).unwrap();
            assert_eq!(
                s.enqueue(Pkt::new(a, 100, t, 8), t).unwrap_err().reason,
                DropReason::QueueFull
            );
            assert_eq!(s.remove_flow(b).unwrap().len(), 3);
            for i in 9..11u64 {
                s.enqueue(Pkt::new(a, 100, t, i), t).unwrap();
            }
            assert!(s.flows().pool_slots() <= 5);
            let st = s.stats();
            assert_eq!(st.dropped(DropReason::QueueFull).pkts, 2);
            assert_eq!(st.backlog.pkts, 4);
            assert!(st.conserved());
            let mut n = 0;
            while s.dequeue(t).is_some() {
                n += 1;
            }
            assert_eq!(n, 4);
        }
        check(Rr::new());
        check(Drr::new(1514));
        check(Prio::new(2));
    }

    #[test]
    fn flow_list_matches_a_vecdeque() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut links = Links::default();
        links.ensure(FlowId(31));
        let mut list = FlowList::new();
        let mut model: std::collections::VecDeque<u32> = Default::default();
        for _ in 0..20_000 {
            match rng.random_range(0..3) {
                0 => {
                    let f = rng.random_range(0..32u32);
                    if !model.contains(&f) {
                        list.push_back(&mut links, FlowId(f));
                        model.push_back(f);
                    }
                }
                1 => {
                    if let Some(&f) = model.get(rng.random_range(0..model.len().max(1))) {
                        list.unlink(&mut links, FlowId(f));
                        model.retain(|&x| x != f);
                    }
                }
                _ => {
                    list.rotate(&links);
                    model.rotate_left(usize::from(!model.is_empty()));
                }
            }
            assert_eq!(list.front().map(|f| f.0), model.front().copied());
            assert_eq!(list.is_empty(), model.is_empty());
        }
    }
}
