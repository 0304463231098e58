//! Packets, flow configuration, counters and the flow table.
//!
//! The flow table owns every queued packet: one FIFO per flow. A scheduling
//! algorithm only decides *which flow's head packet leaves next*; it never
//! touches packets (as dummynet and Linux classful qdiscs do).
//!
//! Packets sit in one pool of slots shared by all flows; each flow's FIFO is
//! a linked list through it and free slots are reused last-in first-out
//! (a table in arrival order, for FIFO, keeps one ring of packets instead).
//! The pool (or ring) grows to the peak backlog and then keeps its size, so
//! there is no heap allocation per packet in steady state.

use std::collections::VecDeque;

use serde::Serialize;

use crate::units::{Bytes, Nanos, Rate};

mod arrival;
use arrival::ArrivalRec;
#[cfg(test)]
mod tests;

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

/// What [`FlowTable::admit_filed`] asks of its caller for an admissible
/// packet, before queueing it: to file it, with the flow's own state.
pub(crate) trait Filer<X> {
    /// Files the packet using the flow's `ext`; false if it cannot (then
    /// nothing may have changed).
    fn file(self, ext: &mut X) -> bool;
}

/// Why [`FlowTable::admit_filed`] did not queue a packet.
#[derive(Debug)]
pub(crate) enum Unqueued<T> {
    /// The flow table refused it (counted).
    Refused(Rejected<T>),
    /// The caller's `file` did not take it (not counted: the caller says
    /// why).
    Unfiled(Pkt<T>),
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

/// The per-packet part of a flow, on one 64-byte cache line: its FIFO's
/// head and tail in the packet pool, the admission limits, the queue length
/// and the counters. A packet costs five counter updates here: `len`,
/// `enq_pkts` and `enq_bytes` on arrival, `len` and `deq_bytes` on
/// departure. Departed packets are derived: `enq_pkts − len`, since a live
/// flow never drops a packet it accepted.
///
/// The counters one end updates together are not adjacent (`deq_bytes`
/// sits between the two arrival counters): two neighbouring 64-bit adds
/// are compiled into a 128-bit vector add that takes three times the
/// instructions of two scalar adds to memory (the constant, the packing,
/// the load and the store).
///
/// `ext` is the owning scheduler's own per-flow state, reached through the
/// same index check as the FIFO (`()` for most schedulers; the shaper
/// keeps its pacer and generation there). It starts in the 16 bytes after
/// the counters, so an `ext` of up to 16 bytes keeps the record on one
/// line and the first 16 bytes of a larger one share the FIFO's line.
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub(crate) struct Hot<X = ()> {
    head: u32,
    tail: u32,
    /// Packets queued.
    pub(crate) len: u32,
    /// Length of the head packet (0 when empty), so algorithms never touch
    /// the pool to learn it. Kept in per-flow order only.
    pub(crate) head_len: Bytes,
    pub(crate) max_len: Bytes,
    /// Queue limit in packets; 0 marks a dead flow (a live flow's limit is
    /// at least 1).
    pub(crate) limit: u32,
    /// Packets accepted.
    pub(crate) enq_pkts: u64,
    /// Bytes that left through a dequeue.
    pub(crate) deq_bytes: u64,
    /// Bytes accepted.
    pub(crate) enq_bytes: u64,
    /// The scheduler's own per-flow state (kept when a flow's index is
    /// reused: the scheduler sets it after [`FlowTable::insert`]).
    pub(crate) ext: X,
}

impl<X> Hot<X> {
    fn new(cfg: &FlowConfig, ext: X) -> Hot<X> {
        Hot {
            head: NIL,
            tail: NIL,
            len: 0,
            head_len: 0,
            max_len: cfg.max_len,
            limit: cfg.limit.max(1),
            enq_pkts: 0,
            deq_bytes: 0,
            enq_bytes: 0,
            ext,
        }
    }
}

/// Scheduler-wide arrivals and departures, each updated once per packet.
/// The backlog is derived: `enq − deq − dropped(Removed)`. In arrival order
/// the ring's length is the backlog, so departed packets are derived
/// instead and `deq_pkts` stays 0. Packets and
/// bytes of one end are not adjacent, so each is one scalar add to memory
/// (see [`Hot`]).
#[derive(Debug, Default, Clone, Copy)]
#[repr(C)]
struct Totals {
    enq_pkts: u64,
    deq_pkts: u64,
    enq_bytes: u64,
    deq_bytes: u64,
}

impl Totals {
    fn enq(&self) -> Counter {
        Counter {
            pkts: self.enq_pkts,
            bytes: self.enq_bytes,
        }
    }
}

const NIL: u32 = u32::MAX;

/// A slot of the shared packet pool. A queued packet also records the
/// length of its successor in the flow, so a dequeue learns the new head's
/// length without touching another slot.
///
/// A struct, not an enum with a `Free` and a `Used` variant: putting a packet
/// into an enum slot made the compiler assemble the whole variant on the
/// stack and copy it in with misaligned overlapping moves, and every enqueue
/// stalled on a failed store-to-load forward (measured ~12 ns of a 20 ns
/// FIFO enqueue). Here the packet is moved straight into its field.
#[derive(Debug)]
struct Slot<T> {
    /// `None` when the slot is free.
    pkt: Option<Pkt<T>>,
    /// Used: the next slot of the flow's list; free: the next free slot.
    next: u32,
    /// Used: length of the packet in `next` (0 if none).
    next_len: Bytes,
}

/// The rarely touched part: configuration and drops.
#[derive(Debug)]
pub(crate) struct Cold {
    pub(crate) cfg: FlowConfig,
    pub(crate) dropped: Counters,
    /// Arrival order: packets accepted, above the 32 bits kept in the
    /// flow's record.
    enq_pkts_hi: u64,
}

/// The flow table: configuration, FIFO and counters of every flow, split
/// by access frequency, and one pool of packet slots shared by all flows
/// (see ARCHITECTURE.md).
///
/// Packets are kept in one of two orders, fixed when the table is made:
/// - per flow (the default): each flow's FIFO is a singly linked list
///   through the pool, so an algorithm can serve any flow's head;
/// - arrival order (`FlowTable::in_arrival_order`, for FIFO): one ring of
///   packets for all flows (the pool stays empty), so an enqueue appends
///   and a dequeue takes the oldest with no links, no free list and no
///   per-slot tag: the same memory per packet as a plain queue. Per-flow
///   lengths, limits and counters are kept in a 32-byte record (no head,
///   tail or head length: two flows per cache line, see `arrival.rs`), and
///   the rare per-flow walks (removal, `packets`) filter the ring.
///
/// A scheduler-wide packet limit caps the pool (or the ring): an arrival
/// that finds no free slot and no room to grow is refused as a full queue,
/// with no separate test of the backlog on the packet path.
///
/// Free slots form a LIFO list, so the slot a new packet takes is the one
/// most recently freed: in steady state the pool is swept in order and
/// stays warm, the way dummynet's mbuf free list behaves, instead of every
/// flow owning a ring scattered through memory. The pool grows to the peak
/// backlog and then never allocates again.
///
/// `X` is per-flow state of the owning scheduler kept in each flow's hot
/// record (see `Hot`): one index check reaches both (`()` by default).
#[derive(Debug)]
pub struct FlowTable<T, X = ()> {
    /// Per-flow order: the flows' hot records (empty in arrival order).
    pub(crate) hot: Vec<Hot<X>>,
    /// Arrival order: the flows' records (empty in per-flow order).
    arr: Vec<ArrivalRec>,
    cold: Vec<Cold>,
    pool: Vec<Slot<T>>,
    free_slot: u32,
    /// Most slots the pool may have: a scheduler-wide packet limit in
    /// per-flow order (every queued packet holds one slot and free slots
    /// are reused first, so a full pool is a reached limit).
    pool_cap: usize,
    free: Vec<u32>,
    live: usize,
    /// Scheduler-wide arrivals and departures.
    totals: Totals,
    /// Scheduler-wide drops (by reason) and overlimits.
    rare: Counters,
    /// True for a table in arrival order (see [`FlowTable::in_arrival_order`]).
    arrival_order: bool,
    /// Arrival order: every queued packet, oldest first (always empty in
    /// per-flow order). Grows to the peak backlog, then keeps its size.
    ring: VecDeque<Pkt<T>>,
    /// Arrival order: the most packets the ring may hold (a scheduler-wide
    /// limit, at most [`FlowTable::ARRIVAL_CAP`]).
    arrival_cap: u64,
    /// Arrival order: `min(ring capacity, arrival_cap)`, so one compare of
    /// the ring's length finds both a full ring and a reached cap.
    ring_room: u64,
}

impl<T, X> Default for FlowTable<T, X> {
    fn default() -> Self {
        FlowTable {
            hot: Vec::new(),
            arr: Vec::new(),
            cold: Vec::new(),
            pool: Vec::new(),
            free_slot: NIL,
            pool_cap: NIL as usize,
            free: Vec::new(),
            live: 0,
            totals: Totals::default(),
            rare: Counters::default(),
            arrival_order: false,
            ring: VecDeque::new(),
            arrival_cap: Self::ARRIVAL_CAP,
            ring_room: 0,
        }
    }
}

impl<T, X> FlowTable<T, X> {
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
        self.hot.len().max(self.arr.len())
    }
    /// The id the next insert will use.
    pub(crate) fn next_id(&self) -> FlowId {
        FlowId(self.free.last().copied().unwrap_or(self.capacity() as u32))
    }
    pub(crate) fn insert(&mut self, cfg: FlowConfig) -> FlowId
    where
        X: Default,
    {
        self.live += 1;
        let cold = Cold {
            cfg,
            dropped: Counters::default(),
            enq_pkts_hi: 0,
        };
        if let Some(i) = self.free.pop() {
            if self.arrival_order {
                self.arr[i as usize] = ArrivalRec::new(&cfg);
            } else {
                let h = &mut self.hot[i as usize];
                *h = Hot::new(&cfg, core::mem::take(&mut h.ext));
            }
            self.cold[i as usize] = cold;
            FlowId(i)
        } else {
            if self.arrival_order {
                self.arr.push(ArrivalRec::new(&cfg));
            } else {
                self.hot.push(Hot::new(&cfg, X::default()));
            }
            self.cold.push(cold);
            FlowId(self.cold.len() as u32 - 1)
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
        // (A full pool is found where the pool grows: see `store` and `grow`.)
        if pkt.len > h.max_len || h.len >= h.limit || extra_full {
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
    /// Counts a refused packet (in total and, if the flow exists, per flow)
    /// and hands it back with the reason.
    #[cold]
    #[inline(never)]
    pub(crate) fn refuse(&mut self, pkt: Pkt<T>, reason: DropReason) -> Rejected<T> {
        self.rare.drop(reason, pkt.len);
        self.count_drop(pkt.flow, reason, pkt.len);
        Rejected { pkt, reason }
    }
    /// Counts and hands back a packet that failed the admission test (the
    /// reason is worked out here, off the packet path).
    #[cold]
    #[inline(never)]
    fn refuse_checked(&mut self, pkt: Pkt<T>, extra_full: bool) -> Rejected<T> {
        let r = if self.arrival_order {
            self.arrival_refusal(&pkt, extra_full)
        } else {
            self.refusal(&pkt, extra_full)
        };
        let r = r.unwrap_or(DropReason::QueueFull);
        self.refuse(pkt, r)
    }
    /// [`FlowTable::refuse_checked`] (no caller's limit) for a packet
    /// handed over as its fields, which arrive in registers.
    #[cold]
    #[inline(never)]
    fn refuse_parts(&mut self, flow: FlowId, len: Bytes, ts: Nanos, item: T) -> Rejected<T> {
        self.refuse_checked(Pkt::new(flow, len, ts, item), false)
    }
    /// Checks and queues a packet: whether its flow was empty before, or the
    /// packet back with the reason (counted; `extra_full`: a limit of the
    /// caller's is reached). A full pool (the scheduler-wide limit) refuses
    /// it as [`DropReason::QueueFull`].
    ///
    /// The admission test and the queueing share one lookup of the flow's
    /// hot record; the reason of a refusal is found on the cold path.
    #[inline(always)]
    pub(crate) fn admit(&mut self, pkt: Pkt<T>, extra_full: bool) -> Result<bool, Rejected<T>> {
        self.admit_with(pkt, extra_full, true)
    }
    /// [`FlowTable::admit`], keeping head lengths only if `lens` (a
    /// constant of the caller's: false for an algorithm that never reads
    /// them, whose flows' `head_len` then stays 0).
    #[inline(always)]
    pub(crate) fn admit_with(
        &mut self,
        pkt: Pkt<T>,
        extra_full: bool,
        lens: bool,
    ) -> Result<bool, Rejected<T>> {
        debug_assert!(!self.arrival_order);
        let len = pkt.len;
        let Some(h) = self.hot.get_mut(pkt.flow.index()) else {
            return Err(self.refuse_checked(pkt, extra_full));
        };
        // A dead flow has limit 0, so it fails the limit test. A reached
        // scheduler-wide limit is a full pool (see `set_pool_cap`);
        // `extra_full` is a caller's own limit (a constant `false` folds away).
        if len > h.max_len || h.len >= h.limit || extra_full {
            return Err(self.refuse_checked(pkt, extra_full));
        }
        let i = match Self::store(&mut self.pool, &mut self.free_slot, self.pool_cap, pkt) {
            Ok(i) => i,
            Err(p) => return Err(self.refuse(p, DropReason::QueueFull)),
        };
        h.tail = match self.pool.get_mut(h.tail as usize) {
            // The flow was backlogged: link the packet behind its tail.
            Some(t) => {
                t.next = i;
                if lens {
                    t.next_len = len;
                }
                i
            }
            // An empty flow's tail is NIL, which no slot has.
            None => {
                h.head = i;
                if lens {
                    h.head_len = len;
                }
                Self::count_in(&mut self.totals, h, len);
                h.tail = i;
                return Ok(true);
            }
        };
        Self::count_in(&mut self.totals, h, len);
        Ok(false)
    }
    /// Checks a packet, then lets `filer` act on its flow's `ext` (the
    /// shaper stamps and files it there), then queues it, with no head
    /// lengths (see [`FlowTable::pop_if`]): one index check for all three.
    /// The filer runs only for an admissible packet that has a pool slot
    /// waiting, so once it has filed the packet nothing can refuse it; when
    /// it says no, the packet comes back as [`Unqueued::Unfiled`], not
    /// counted, and the table is as it was. (A filer that panics leaves the
    /// packet in the free slot it was written to: it is dropped when the
    /// slot is reused or the table dropped, and counted nowhere.)
    #[inline(always)]
    pub(crate) fn admit_filed(
        &mut self,
        pkt: Pkt<T>,
        filer: impl Filer<X>,
    ) -> Result<(), Unqueued<T>> {
        debug_assert!(!self.arrival_order);
        // Taken apart at once: the cold paths get the fields as scalars
        // (`refuse_parts`), so the packet is never put on the stack to be
        // passed to them and goes from registers into its slot.
        let Pkt {
            flow,
            len,
            ts,
            item,
        } = pkt;
        let Some(h) = self.hot.get_mut(flow.index()) else {
            return Err(Unqueued::Refused(self.refuse_parts(flow, len, ts, item)));
        };
        // A dead flow has limit 0, so it fails the limit test.
        if len > h.max_len || h.len >= h.limit {
            return Err(Unqueued::Refused(self.refuse_parts(flow, len, ts, item)));
        }
        let i = self.free_slot;
        // No free slot (NIL is past the end): the pool grows, or is full.
        let Some(s) = self.pool.get_mut(i as usize) else {
            core::hint::cold_path();
            let pkt = Pkt::new(flow, len, ts, item);
            return self.admit_filed_grown(pkt, filer);
        };
        // The packet goes into its slot before the filing, so its fields
        // are not kept (on the stack) across it; the slot stays on the free
        // list until the filing succeeds, and is emptied if it fails.
        s.pkt = Some(Pkt::new(flow, len, ts, item));
        if !filer.file(&mut h.ext) {
            core::hint::cold_path();
            let Some(p) = s.pkt.take() else {
                unreachable!("the packet was put in its slot above");
            };
            return Err(Unqueued::Unfiled(p));
        }
        self.free_slot = s.next;
        s.next = NIL;
        Self::link_tail(&mut self.pool, &mut self.totals, h, i, len);
        Ok(())
    }
    /// [`FlowTable::admit_filed`] for an admissible packet that finds no
    /// free slot: a new one if the pool may grow (its cap is the
    /// scheduler-wide limit), else refused as [`DropReason::QueueFull`].
    ///
    /// Inlined (behind a `cold_path` hint), so the filer is never put in
    /// memory to be passed to it.
    #[inline(always)]
    fn admit_filed_grown(&mut self, pkt: Pkt<T>, filer: impl Filer<X>) -> Result<(), Unqueued<T>> {
        if self.pool.len() >= self.pool_cap {
            return Err(Unqueued::Refused(self.refuse(pkt, DropReason::QueueFull)));
        }
        let len = pkt.len;
        let Some(h) = self.hot.get_mut(pkt.flow.index()) else {
            // Not reached: the caller found the flow.
            return Err(Unqueued::Refused(self.refuse(pkt, DropReason::UnknownFlow)));
        };
        if !filer.file(&mut h.ext) {
            return Err(Unqueued::Unfiled(pkt));
        }
        self.pool.push(Slot {
            pkt: Some(pkt),
            next: NIL,
            next_len: 0,
        });
        // `pool_cap <= NIL`: the new index is below NIL.
        let i = (self.pool.len() - 1) as u32;
        Self::link_tail(&mut self.pool, &mut self.totals, h, i, len);
        Ok(())
    }
    /// Links slot `i` (holding a `len`-byte packet) behind flow `h`'s tail
    /// and counts the arrival (no head lengths).
    #[inline(always)]
    fn link_tail(pool: &mut [Slot<T>], totals: &mut Totals, h: &mut Hot<X>, i: u32, len: Bytes) {
        match pool.get_mut(h.tail as usize) {
            // The flow was backlogged: link the packet behind its tail.
            Some(t) => t.next = i,
            // An empty flow's tail is NIL, which no slot has.
            None => h.head = i,
        }
        h.tail = i;
        Self::count_in(totals, h, len);
    }
    /// Packets queued in all flows.
    #[inline(always)]
    pub fn total_queued(&self) -> u64 {
        if self.arrival_order {
            self.arrival_queued()
        } else {
            self.totals.enq_pkts - self.totals.deq_pkts - self.rare.dropped_after_enqueue().pkts
        }
    }
    /// Packets that left through a dequeue, scheduler-wide (not those of
    /// removed flows).
    pub(crate) fn departed(&self) -> u64 {
        self.deq_pkts()
    }
    /// Packets that left through a dequeue, scheduler-wide.
    fn deq_pkts(&self) -> u64 {
        if self.arrival_order {
            let removed = self.rare.dropped_after_enqueue().pkts;
            self.totals.enq_pkts - removed - self.arrival_queued()
        } else {
            self.totals.deq_pkts
        }
    }
    /// Scheduler-wide counters (`backlog` derived).
    pub fn totals(&self) -> Counters {
        Counters {
            enqueued: self.totals.enq(),
            dequeued: Counter {
                pkts: self.deq_pkts(),
                bytes: self.totals.deq_bytes,
            },
            ..self.rare
        }
        .with_backlog()
    }
    /// Packets and bytes queued in all flows.
    pub fn backlog(&self) -> Backlog {
        let b = self.totals().backlog;
        Backlog {
            pkts: b.pkts,
            bytes: b.bytes,
        }
    }
    /// Counts a dequeue attempt that found packets but none due (a shaper's
    /// `overlimits`).
    pub(crate) fn count_overlimit(&mut self) {
        self.rare.overlimits += 1;
    }
    /// Caps the pool at `pkts` slots: a scheduler-wide packet limit in
    /// per-flow order, found where the pool would grow, so the packet path
    /// has no test of its own. Set on a new table: slots the pool already
    /// holds stay in use.
    pub(crate) fn set_pool_cap(&mut self, pkts: u64) {
        self.pool_cap = usize::try_from(pkts).map_or(NIL as usize, |p| p.min(NIL as usize));
    }
    /// Puts `pkt` in a free slot, or hands it back when the pool is full
    /// (it holds at most `cap` slots: the scheduler-wide limit, and at most
    /// u32 indices, NIL reserved).
    ///
    /// Takes the pool and the free list only (not `self`), so the caller's
    /// bounds check on `hot` still holds after it.
    #[inline(always)]
    fn store(
        pool: &mut Vec<Slot<T>>,
        free_slot: &mut u32,
        cap: usize,
        pkt: Pkt<T>,
    ) -> Result<u32, Pkt<T>> {
        let i = *free_slot;
        if let Some(s) = pool.get_mut(i as usize) {
            *free_slot = s.next;
            s.pkt = Some(pkt);
            s.next = NIL;
            Ok(i)
        } else {
            Self::grow(pool, cap, pkt)
        }
    }
    #[cold]
    #[inline(never)]
    fn grow(pool: &mut Vec<Slot<T>>, cap: usize, pkt: Pkt<T>) -> Result<u32, Pkt<T>> {
        if pool.len() >= cap {
            return Err(pkt);
        }
        pool.push(Slot {
            pkt: Some(pkt),
            next: NIL,
            next_len: 0,
        });
        Ok(pool.len() as u32 - 1)
    }
    /// Counts an arrival of `len` bytes in flow `h`.
    #[inline(always)]
    fn count_in(totals: &mut Totals, h: &mut Hot<X>, len: Bytes) {
        h.len += 1;
        h.enq_pkts += 1;
        h.enq_bytes += u64::from(len);
        totals.enq_pkts += 1;
        totals.enq_bytes += u64::from(len);
    }
    /// Counts a departure of `len` bytes from flow `h`.
    #[inline(always)]
    fn count_out(totals: &mut Totals, h: &mut Hot<X>, len: Bytes) {
        h.len -= 1;
        h.deq_bytes += u64::from(len);
        totals.deq_pkts += 1;
        totals.deq_bytes += u64::from(len);
    }
    /// Takes the head packet of a flow, with the new head's length.
    ///
    /// An empty (or dead) flow's head is `NIL`, which no slot has: the
    /// pool lookup finds it, with no separate test of the queue length.
    #[inline(always)]
    pub(crate) fn pop(&mut self, id: FlowId) -> Option<(Pkt<T>, Option<Bytes>)> {
        self.pop_with(id, true)
    }
    /// [`FlowTable::pop`], keeping head lengths only if `lens` (see
    /// [`FlowTable::admit_with`]); without them a flow left backlogged
    /// reports `Some(0)`.
    #[inline(always)]
    pub(crate) fn pop_with(&mut self, id: FlowId, lens: bool) -> Option<(Pkt<T>, Option<Bytes>)> {
        self.pop_if_with(id, |_| true, lens)
    }
    /// Takes the head packet of a flow if `take` says so of the flow's
    /// `ext` (one index check for both), keeping no head lengths: for a
    /// scheduler that never reads them (its flows' `head_len` stays 0).
    #[inline(always)]
    pub(crate) fn pop_if(&mut self, id: FlowId, take: impl FnOnce(&X) -> bool) -> Option<Pkt<T>> {
        self.pop_if_with(id, take, false).map(|(p, _)| p)
    }
    /// [`FlowTable::pop_with`], the packet pushed onto `out` straight from
    /// its slot (one move, no copy through a returned tuple): its length
    /// and the new head's length (`None`: the flow is empty now).
    #[inline(always)]
    pub(crate) fn pop_onto(
        &mut self,
        id: FlowId,
        lens: bool,
        out: &mut Vec<Pkt<T>>,
    ) -> Option<(Bytes, Option<Bytes>)> {
        self.take_head(id, |_| true, lens, |p| out.push(p))
            .map(|((), len, next)| (len, next))
    }
    /// [`FlowTable::pop_with`] when `take` says yes of the flow's `ext`.
    #[inline(always)]
    fn pop_if_with(
        &mut self,
        id: FlowId,
        take: impl FnOnce(&X) -> bool,
        lens: bool,
    ) -> Option<(Pkt<T>, Option<Bytes>)> {
        self.take_head(id, take, lens, |p| p)
            .map(|(p, _, next)| (p, next))
    }
    /// Unlinks flow `id`'s head packet if `take` says yes of the flow's
    /// `ext`, hands it to `put` (moved once, out of its slot) and counts
    /// the departure: `put`'s result, the packet's length and the new
    /// head's length (`None`: the flow is empty now; `Some(0)` without
    /// head lengths).
    ///
    /// An empty (or dead) flow's head is `NIL`, which no slot has: the
    /// pool lookup finds it, with no separate test of the queue length.
    #[inline(always)]
    fn take_head<R>(
        &mut self,
        id: FlowId,
        take: impl FnOnce(&X) -> bool,
        lens: bool,
        put: impl FnOnce(Pkt<T>) -> R,
    ) -> Option<(R, Bytes, Option<Bytes>)> {
        debug_assert!(!self.arrival_order);
        let h = self.hot.get_mut(id.index())?;
        if !take(&h.ext) {
            return None;
        }
        let i = h.head;
        // A flow's list only links used slots; a free slot here (a broken
        // invariant) is refused before it can corrupt the free list.
        let s = self.pool.get_mut(i as usize)?;
        let pkt = s.pkt.take()?;
        let len = pkt.len;
        // Handed on at once, so its bytes go from the slot to `put`'s place
        // without a stop on the stack.
        let r = put(pkt);
        let next = s.next;
        let next_len = if lens { s.next_len } else { 0 };
        s.next = self.free_slot;
        self.free_slot = i;
        Self::count_out(&mut self.totals, h, len);
        // The tail's `next` is NIL: the flow is empty now.
        h.head = next;
        if next == NIL {
            h.tail = NIL;
            if lens {
                h.head_len = 0;
            }
            Some((r, len, None))
        } else {
            if lens {
                h.head_len = next_len;
            }
            Some((r, len, Some(next_len)))
        }
    }
    /// The scheduler's own state of flow record `id` (live or dead).
    #[inline]
    pub(crate) fn ext(&self, id: FlowId) -> Option<&X> {
        self.hot.get(id.index()).map(|h| &h.ext)
    }
    /// [`FlowTable::ext`], to change.
    #[inline]
    pub(crate) fn ext_mut(&mut self, id: FlowId) -> Option<&mut X> {
        self.hot.get_mut(id.index()).map(|h| &mut h.ext)
    }
    /// Marks the flow dead and returns its packets in FIFO order, counted
    /// as dropped with reason [`DropReason::Removed`].
    pub(crate) fn remove(&mut self, id: FlowId) -> Vec<Pkt<T>> {
        let mut out = Vec::with_capacity(self.queued(id).unwrap_or(0));
        if self.arrival_order {
            self.unlink_arrivals(id, &mut out);
        } else {
            while let Some((p, _)) = self.pop(id) {
                out.push(p);
            }
        }
        for p in &out {
            // The packet was counted as a departure; it is a removal.
            if !self.arrival_order {
                self.totals.deq_pkts -= 1;
            }
            self.totals.deq_bytes -= u64::from(p.len);
            self.rare.drop(DropReason::Removed, p.len);
        }
        if let Some(r) = self.arr.get_mut(id.index()) {
            r.kill();
        }
        if let Some(h) = self.hot.get_mut(id.index()) {
            h.limit = 0;
        }
        self.live -= 1;
        self.free.push(id.0);
        out
    }
    /// True if `id` names a live flow.
    #[inline]
    pub fn contains(&self, id: FlowId) -> bool {
        self.limit_of(id.index()) != 0
    }
    /// The queue limit of record `i` (0: dead or never added).
    fn limit_of(&self, i: usize) -> u32 {
        if self.arrival_order {
            self.arr.get(i).map_or(0, ArrivalRec::limit)
        } else {
            self.hot.get(i).map_or(0, |h| h.limit)
        }
    }
    pub(crate) fn set_config(&mut self, id: FlowId, cfg: FlowConfig) {
        if let Some(r) = self.arr.get_mut(id.index()) {
            r.set_limits(&cfg);
        }
        if let Some(h) = self.hot.get_mut(id.index()) {
            h.max_len = cfg.max_len;
            h.limit = cfg.limit.max(1);
        }
        self.cold[id.index()].cfg = cfg;
    }
    #[inline]
    pub(crate) fn count_drop(&mut self, id: FlowId, r: DropReason, len: Bytes) {
        if self.contains(id) {
            self.cold[id.index()].dropped.drop(r, len);
        }
    }
    /// The packets queued in a live flow, head first.
    pub fn packets(&self, id: FlowId) -> impl Iterator<Item = &Pkt<T>> + '_ {
        let live = self.contains(id);
        let mut i = if live && !self.arrival_order {
            self.hot[id.index()].head
        } else {
            NIL
        };
        let walk = core::iter::from_fn(move || {
            let s = self.pool.get(i as usize)?;
            i = s.next;
            s.pkt.as_ref()
        });
        // In arrival order the ring holds every flow's packets (in per-flow
        // order it is empty).
        let ring = self.ring.iter().filter(move |p| live && p.flow == id);
        ring.chain(walk)
    }
    /// Refuses a `max_len` below a packet already queued in `id`.
    pub(crate) fn check_max_len(&self, id: FlowId, max_len: Bytes) -> Result<(), ConfigError> {
        match self.packets(id).map(|p| p.len).max() {
            Some(queued) if queued > max_len => Err(ConfigError::MaxLenBelowQueued {
                flow: id,
                max_len,
                queued,
            }),
            _ => Ok(()),
        }
    }
    /// The head packet of a live flow.
    pub fn head(&self, id: FlowId) -> Option<&Pkt<T>> {
        self.packets(id).next()
    }
    /// Length of the head packet of a flow (0 if it has none, and always 0
    /// under an algorithm that reads no head lengths: see
    /// `Discipline::HEAD_LEN`).
    #[inline(always)]
    pub fn head_len(&self, id: FlowId) -> Bytes {
        self.hot.get(id.index()).map_or(0, |h| h.head_len)
    }
    /// Configuration of a live flow.
    pub fn config(&self, id: FlowId) -> Option<&FlowConfig> {
        self.contains(id).then(|| &self.cold[id.index()].cfg)
    }
    /// Counters of a live flow (`backlog` derived).
    pub fn stats(&self, id: FlowId) -> Option<Counters> {
        self.contains(id).then(|| {
            let cold = &self.cold[id.index()];
            let (enq_pkts, len, enq_bytes, deq_bytes) = match self.arr.get(id.index()) {
                Some(r) => {
                    let (e, d) = r.bytes();
                    (r.enq_pkts(cold), r.len(), e, d)
                }
                None => {
                    let h = &self.hot[id.index()];
                    (h.enq_pkts, h.len, h.enq_bytes, h.deq_bytes)
                }
            };
            let mut c = cold.dropped;
            c.enqueued = Counter {
                pkts: enq_pkts,
                bytes: enq_bytes,
            };
            c.dequeued = Counter {
                pkts: enq_pkts - u64::from(len),
                bytes: deq_bytes,
            };
            c.with_backlog()
        })
    }
    /// Packets queued in a live flow.
    pub fn queued(&self, id: FlowId) -> Option<usize> {
        self.contains(id).then(|| match self.arr.get(id.index()) {
            Some(r) => r.len() as usize,
            None => self.hot[id.index()].len as usize,
        })
    }
    /// Ids of all live flows, in index order.
    pub fn ids(&self) -> impl Iterator<Item = FlowId> + '_ {
        (0..self.capacity())
            .filter(|&i| self.limit_of(i) != 0)
            .map(|i| FlowId(i as u32))
    }
    /// Slots in the packet pool, or in the arrival ring (at least the peak
    /// backlog so far).
    pub fn pool_slots(&self) -> usize {
        self.pool.len().max(self.ring.capacity())
    }
    /// Approximate heap memory held by the table, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.hot.capacity() * core::mem::size_of::<Hot<X>>()
            + self.arr.capacity() * core::mem::size_of::<ArrivalRec>()
            + self.cold.capacity() * core::mem::size_of::<Cold>()
            + self.pool.capacity() * core::mem::size_of::<Slot<T>>()
            + self.ring.capacity() * core::mem::size_of::<Pkt<T>>()
            + self.free.capacity() * 4
    }
}

/// The "allowed" part of [`ConfigError::RateBeyondHorizon`]'s message.
fn allowed_above_horizon(field: &str, slowest: Option<Rate>) -> String {
    match slowest {
        Some(s) => format!(
            "allowed {field} >= {s} (or a longer horizon: policy.shaper_buckets, shaper_unit_ns)"
        ),
        None => "no rate fits a horizon of zero: allowed policy.shaper_buckets >= 3".to_string(),
    }
}

/// A configuration change that was refused. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A field is outside the algorithm's supported range.
    #[error("{field} = {value} is out of range for {alg}: allowed {min}..={max}")]
    OutOfRange {
        /// Algorithm name.
        alg: &'static str,
        /// Field name (`weight`, `max_len`, ...).
        field: &'static str,
        /// The value given.
        value: u64,
        /// Smallest allowed.
        min: u64,
        /// Largest allowed.
        max: u64,
    },
    /// A rate so slow that one packet of the largest size would take
    /// longer than the shaper's horizon.
    #[error(
        "{field} = {value} is too slow for {alg}'s shaper: a {max_len}-byte packet would take longer than its horizon of {horizon}; {}",
        allowed_above_horizon(field, *slowest)
    )]
    RateBeyondHorizon {
        /// Algorithm name.
        alg: &'static str,
        /// Field name (`rate`).
        field: &'static str,
        /// The rate given.
        value: Rate,
        /// The slowest rate allowed (`None`: the horizon is zero, no rate
        /// fits).
        slowest: Option<Rate>,
        /// The largest packet, in bytes.
        max_len: u32,
        /// The shaper's horizon.
        horizon: Nanos,
    },
    /// The sum of weights would exceed the algorithm's maximum.
    #[error("sum of weights would be {sum}, above {alg}'s maximum of {max}")]
    WeightSum {
        /// Algorithm name.
        alg: &'static str,
        /// The sum after the change.
        sum: u64,
        /// The maximum.
        max: u64,
    },
    /// Too many flows.
    #[error("{alg} supports at most {max} flows")]
    TooManyFlows {
        /// Algorithm name.
        alg: &'static str,
        /// The maximum.
        max: u64,
    },
    /// The flow does not exist.
    #[error("flow {0} does not exist")]
    UnknownFlow(FlowId),
    /// A flow was to be placed below a node, but the scheduler is not a
    /// policy tree.
    #[error("{alg} has no nodes: a flow can be placed below a node only in a policy tree")]
    NoNodes {
        /// Algorithm name.
        alg: &'static str,
    },
    /// A flow's shaping (rate, reservation, bursts) was to be changed, but
    /// the scheduler keeps no shaping per flow.
    #[error("{alg} keeps no per-flow shaping: rates and bursts belong to a policy tree")]
    NoShaping {
        /// Algorithm name.
        alg: &'static str,
    },
    /// `max_len` would be smaller than a packet already queued in the flow.
    #[error(
        "max_len = {max_len} is smaller than a {queued}-byte packet queued in flow {flow}; wait for it to leave or choose max_len >= {queued}"
    )]
    MaxLenBelowQueued {
        /// The flow.
        flow: FlowId,
        /// The requested max_len.
        max_len: Bytes,
        /// The largest queued packet.
        queued: Bytes,
    },
}

/// Backlog of a scheduler.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Backlog {
    /// Packets queued.
    pub pkts: u64,
    /// Bytes queued.
    pub bytes: u64,
}
