//! Packets, flow configuration, counters and the flow table.
//!
//! The flow table owns every queued packet: one FIFO per flow. A scheduling
//! algorithm only decides *which flow's head packet leaves next*; it never
//! touches packets (as dummynet and Linux classful qdiscs do).
//!
//! Each per-flow FIFO is a ring buffer (`VecDeque`) that grows to the flow's
//! peak backlog and then keeps its capacity, so there is no heap allocation
//! per packet in steady state. [`FlowTable::shrink`] gives memory back.

use std::collections::VecDeque;

use serde::Serialize;

use crate::units::{Bytes, Nanos};

/// A dense index into one scheduler's flow table.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct FlowId(pub u32);

impl FlowId {
    /// The index as `usize`.
    #[inline]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl core::fmt::Display for FlowId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A packet as a scheduler sees it. `item` is the caller's handle (a buffer
/// index, a pointer, a test id); the scheduler never looks inside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pkt<T> {
    /// Flow the packet belongs to.
    pub flow: FlowId,
    /// Length in bytes (as the link sees it).
    pub len: Bytes,
    /// Arrival timestamp, set by the caller.
    pub ts: Nanos,
    /// The caller's handle.
    pub item: T,
}

impl<T> Pkt<T> {
    /// A packet of `len` bytes for `flow`, arriving at `ts`.
    pub fn new(flow: FlowId, len: Bytes, ts: Nanos, item: T) -> Pkt<T> {
        Pkt {
            flow,
            len,
            ts,
            item,
        }
    }
}

/// Why a packet was dropped or refused. Every packet handed to a scheduler
/// is dequeued, still queued, or counted under one of these.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// The flow's queue (or the scheduler's total limit) was full.
    QueueFull,
    /// The packet is longer than the flow's `max_len`.
    TooLarge,
    /// The packet named a flow that does not exist.
    UnknownFlow,
    /// The packet was queued when its flow was removed; it was returned to
    /// the caller.
    Removed,
}

impl DropReason {
    /// All reasons, in display order.
    pub const ALL: [DropReason; 4] = [
        DropReason::QueueFull,
        DropReason::TooLarge,
        DropReason::UnknownFlow,
        DropReason::Removed,
    ];

    /// Short name used in stats output.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::QueueFull => "queue_full",
            DropReason::TooLarge => "too_large",
            DropReason::UnknownFlow => "unknown_flow",
            DropReason::Removed => "removed",
        }
    }
    const fn idx(self) -> usize {
        self as usize
    }
}

impl core::fmt::Display for DropReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// A packet the scheduler refused, handed back with the reason.
#[derive(Debug, PartialEq, Eq)]
pub struct Rejected<T> {
    /// The packet, untouched.
    pub pkt: Pkt<T>,
    /// Why it was refused.
    pub reason: DropReason,
}

/// Packets and bytes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counter {
    /// Packets.
    pub pkts: u64,
    /// Bytes.
    pub bytes: u64,
}

impl Counter {
    #[inline]
    pub(crate) fn add(&mut self, len: Bytes) {
        self.pkts += 1;
        self.bytes += u64::from(len);
    }
}

/// Counters kept per flow and for the whole scheduler.
///
/// Invariant (checked in tests): `enqueued = dequeued + dropped(Removed) +
/// backlog`, in packets and in bytes. Refusals at enqueue (`QueueFull`,
/// `TooLarge`, `UnknownFlow`) are never counted as enqueued.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Packets accepted.
    pub enqueued: Counter,
    /// Packets that left through `dequeue`.
    pub dequeued: Counter,
    /// Packets refused or dropped, by reason (index = `DropReason as usize`).
    dropped: [Counter; 4],
    /// Packets currently queued. Derived when counters are read:
    /// `enqueued − dequeued − dropped(Removed)`.
    pub backlog: Counter,
    /// Times a shaper held back a backlogged packet because it was not yet
    /// due (as `overlimits` in `tc -s`). Zero for work-conserving schedulers.
    pub overlimits: u64,
}

impl Counters {
    /// Drops for one reason.
    pub fn dropped(&self, r: DropReason) -> Counter {
        self.dropped[r.idx()]
    }
    /// All drops, every reason.
    pub fn dropped_total(&self) -> Counter {
        let mut c = Counter::default();
        for d in &self.dropped {
            c.pkts += d.pkts;
            c.bytes += d.bytes;
        }
        c
    }
    /// Drops of packets that had been accepted (only `Removed` today).
    pub fn dropped_after_enqueue(&self) -> Counter {
        self.dropped(DropReason::Removed)
    }
    #[inline]
    pub(crate) fn drop(&mut self, r: DropReason, len: Bytes) {
        self.dropped[r.idx()].add(len);
    }
    /// These counters with `backlog` filled in from the others (the hot path
    /// only counts arrivals and departures).
    pub fn with_backlog(mut self) -> Counters {
        let d = self.dropped_after_enqueue();
        self.backlog = Counter {
            pkts: self.enqueued.pkts - self.dequeued.pkts - d.pkts,
            bytes: self.enqueued.bytes - self.dequeued.bytes - d.bytes,
        };
        self
    }
    /// Checks `enqueued = dequeued + dropped_after_enqueue + backlog`.
    /// Schedulers derive `backlog` this way, so tests compare it with the
    /// packets actually queued (see `FlowTable::queued`).
    pub fn conserved(&self) -> bool {
        let d = self.dropped_after_enqueue();
        self.enqueued.pkts == self.dequeued.pkts + d.pkts + self.backlog.pkts
            && self.enqueued.bytes == self.dequeued.bytes + d.bytes + self.backlog.bytes
    }
    /// Adds another set of counters (for aggregating flows).
    pub fn merge(&mut self, o: &Counters) {
        let add = |a: &mut Counter, b: &Counter| {
            a.pkts += b.pkts;
            a.bytes += b.bytes;
        };
        add(&mut self.enqueued, &o.enqueued);
        add(&mut self.dequeued, &o.dequeued);
        add(&mut self.backlog, &o.backlog);
        for (a, b) in self.dropped.iter_mut().zip(o.dropped.iter()) {
            add(a, b);
        }
        self.overlimits += o.overlimits;
    }
}

/// Configuration of one flow. Which fields matter depends on the algorithm:
/// `weight` for DRR/WF2Q+/QFQ, `quantum` for DRR, `prio` for PRIO.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FlowConfig {
    /// Relative weight (share = weight / sum of weights). At least 1.
    pub weight: u32,
    /// DRR quantum in bytes; `None` means `weight × base quantum` of the
    /// scheduler.
    pub quantum: Option<u32>,
    /// Largest packet the flow may send, in bytes. Longer packets are refused
    /// with [`DropReason::TooLarge`].
    pub max_len: Bytes,
    /// Queue limit in packets. Arrivals beyond it are refused with
    /// [`DropReason::QueueFull`].
    pub limit: u32,
    /// Priority level for PRIO: 0 is served first.
    pub prio: u32,
}

impl FlowConfig {
    /// Default maximum packet length (bytes).
    pub const DEFAULT_MAX_LEN: Bytes = 1514;
    /// Default per-flow queue limit (packets).
    pub const DEFAULT_LIMIT: u32 = 1024;

    /// A config with the given weight and defaults elsewhere.
    pub fn weight(weight: u32) -> FlowConfig {
        FlowConfig {
            weight,
            ..FlowConfig::default()
        }
    }
    /// Sets the maximum packet length.
    pub fn with_max_len(mut self, max_len: Bytes) -> FlowConfig {
        self.max_len = max_len;
        self
    }
    /// Sets the queue limit.
    pub fn with_limit(mut self, limit: u32) -> FlowConfig {
        self.limit = limit;
        self
    }
    /// Sets the priority level.
    pub fn with_prio(mut self, prio: u32) -> FlowConfig {
        self.prio = prio;
        self
    }
    /// Sets the DRR quantum.
    pub fn with_quantum(mut self, quantum: u32) -> FlowConfig {
        self.quantum = Some(quantum);
        self
    }
}

impl Default for FlowConfig {
    fn default() -> FlowConfig {
        FlowConfig {
            weight: 1,
            quantum: None,
            max_len: FlowConfig::DEFAULT_MAX_LEN,
            limit: FlowConfig::DEFAULT_LIMIT,
            prio: 0,
        }
    }
}

/// The per-packet part of a flow, on one 64-byte cache line: its FIFO, the
/// admission limits and arrival counters. Departures are derived:
/// `dequeued = enqueued − queued` (packets) and `enqueued.bytes − backlog`
/// (bytes), since a live flow never drops a packet it accepted.
#[derive(Debug)]
#[repr(align(64))]
pub(crate) struct Hot<T> {
    pub(crate) q: VecDeque<Pkt<T>>,
    pub(crate) enq: Counter,
    pub(crate) backlog_bytes: u64,
    pub(crate) max_len: Bytes,
    /// Queue limit in packets; 0 marks a dead flow (a live flow's limit is
    /// at least 1).
    pub(crate) limit: u32,
}

/// The rarely touched part: configuration and drops.
#[derive(Debug)]
pub(crate) struct Cold {
    pub(crate) cfg: FlowConfig,
    pub(crate) dropped: Counters,
}

/// The flow table: configuration, FIFO and counters of every flow, split
/// by access frequency (see ARCHITECTURE.md).
#[derive(Debug)]
pub struct FlowTable<T> {
    pub(crate) hot: Vec<Hot<T>>,
    cold: Vec<Cold>,
    free: Vec<u32>,
    live: usize,
}

impl<T> Default for FlowTable<T> {
    fn default() -> Self {
        FlowTable {
            hot: Vec::new(),
            cold: Vec::new(),
            free: Vec::new(),
            live: 0,
        }
    }
}

impl<T> FlowTable<T> {
    /// Number of live flows.
    pub fn len(&self) -> usize {
        self.live
    }
    /// True if there are no flows.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }
    /// One past the largest flow id ever handed out (ids of removed flows
    /// are reused).
    pub fn capacity(&self) -> usize {
        self.hot.len()
    }
    /// The id the next insert will use.
    pub(crate) fn next_id(&self) -> FlowId {
        FlowId(self.free.last().copied().unwrap_or(self.hot.len() as u32))
    }
    pub(crate) fn insert(&mut self, cfg: FlowConfig) -> FlowId {
        self.live += 1;
        let cold = Cold {
            cfg,
            dropped: Counters::default(),
        };
        if let Some(i) = self.free.pop() {
            let h = &mut self.hot[i as usize];
            h.enq = Counter::default();
            h.backlog_bytes = 0;
            h.max_len = cfg.max_len;
            h.limit = cfg.limit.max(1);
            self.cold[i as usize] = cold;
            FlowId(i)
        } else {
            self.hot.push(Hot {
                q: VecDeque::new(),
                enq: Counter::default(),
                backlog_bytes: 0,
                max_len: cfg.max_len,
                limit: cfg.limit.max(1),
            });
            self.cold.push(cold);
            FlowId(self.hot.len() as u32 - 1)
        }
    }
    /// Why `pkt` cannot be queued now, if it cannot (`extra_full`: a
    /// scheduler-wide limit is reached).
    #[inline(always)]
    pub(crate) fn refusal(&self, pkt: &Pkt<T>, extra_full: bool) -> Option<DropReason> {
        let Some(h) = self.hot.get(pkt.flow.index()) else {
            return Some(DropReason::UnknownFlow);
        };
        // A dead flow has limit 0, so it fails the length or the limit test.
        if pkt.len > h.max_len || h.q.len() >= h.limit as usize || extra_full {
            return Some(if h.limit == 0 {
                DropReason::UnknownFlow
            } else if pkt.len > h.max_len {
                DropReason::TooLarge
            } else {
                DropReason::QueueFull
            });
        }
        None
    }
    /// Queues a packet that passed [`FlowTable::refusal`]; returns whether
    /// the flow was empty before.
    #[inline(always)]
    pub(crate) fn push(&mut self, pkt: Pkt<T>) -> bool {
        let len = pkt.len;
        let h = &mut self.hot[pkt.flow.index()];
        let was_empty = h.q.is_empty();
        h.q.push_back(pkt);
        h.enq.add(len);
        h.backlog_bytes += u64::from(len);
        was_empty
    }
    /// Takes the head packet of a flow, with the new head's length.
    #[inline(always)]
    pub(crate) fn pop(&mut self, id: FlowId) -> Option<(Pkt<T>, Option<Bytes>)> {
        let h = &mut self.hot[id.index()];
        let pkt = h.q.pop_front()?;
        h.backlog_bytes -= u64::from(pkt.len);
        Some((pkt, h.q.front().map(|p| p.len)))
    }
    /// Marks the flow dead and returns its packets (the caller counts them).
    pub(crate) fn remove(&mut self, id: FlowId) -> VecDeque<Pkt<T>> {
        let h = &mut self.hot[id.index()];
        h.limit = 0;
        h.backlog_bytes = 0;
        self.live -= 1;
        self.free.push(id.0);
        core::mem::take(&mut h.q)
    }
    /// True if `id` names a live flow.
    #[inline]
    pub fn contains(&self, id: FlowId) -> bool {
        self.hot.get(id.index()).is_some_and(|h| h.limit != 0)
    }
    pub(crate) fn set_config(&mut self, id: FlowId, cfg: FlowConfig) {
        let h = &mut self.hot[id.index()];
        h.max_len = cfg.max_len;
        h.limit = cfg.limit.max(1);
        self.cold[id.index()].cfg = cfg;
    }
    #[inline]
    pub(crate) fn count_drop(&mut self, id: FlowId, r: DropReason, len: Bytes) {
        if self.contains(id) {
            self.cold[id.index()].dropped.drop(r, len);
        }
    }
    /// The FIFO of a live flow.
    pub(crate) fn queue(&self, id: FlowId) -> Option<&VecDeque<Pkt<T>>> {
        self.contains(id).then(|| &self.hot[id.index()].q)
    }
    /// Length of the head packet of a flow (0 if it has none).
    #[inline]
    pub fn head_len(&self, id: FlowId) -> Bytes {
        match self.hot[id.index()].q.front() {
            Some(p) => p.len,
            None => 0,
        }
    }
    /// Configuration of a live flow.
    pub fn config(&self, id: FlowId) -> Option<&FlowConfig> {
        self.contains(id).then(|| &self.cold[id.index()].cfg)
    }
    /// Counters of a live flow (`backlog` derived).
    pub fn stats(&self, id: FlowId) -> Option<Counters> {
        self.contains(id).then(|| {
            let h = &self.hot[id.index()];
            let mut c = self.cold[id.index()].dropped;
            c.enqueued = h.enq;
            c.dequeued = Counter {
                pkts: h.enq.pkts - h.q.len() as u64,
                bytes: h.enq.bytes - h.backlog_bytes,
            };
            c.with_backlog()
        })
    }
    /// Packets queued in a live flow (read from the FIFO itself, not from
    /// the counters).
    pub fn queued(&self, id: FlowId) -> Option<usize> {
        self.queue(id).map(VecDeque::len)
    }
    /// Ids of all live flows, in index order.
    pub fn ids(&self) -> impl Iterator<Item = FlowId> + '_ {
        self.hot
            .iter()
            .enumerate()
            .filter(|(_, h)| h.limit != 0)
            .map(|(i, _)| FlowId(i as u32))
    }
    /// Releases the spare capacity of every per-flow ring.
    pub fn shrink(&mut self) {
        for h in &mut self.hot {
            h.q.shrink_to_fit();
        }
    }
    /// Approximate heap memory held by the table, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.hot.capacity() * core::mem::size_of::<Hot<T>>()
            + self.cold.capacity() * core::mem::size_of::<Cold>()
            + self
                .hot
                .iter()
                .map(|h| h.q.capacity() * core::mem::size_of::<Pkt<T>>())
                .sum::<usize>()
            + self.free.capacity() * 4
    }
}
