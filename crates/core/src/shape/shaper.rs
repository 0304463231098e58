//! [`Shaper`]: the EDT shaping scheduler over any [`TimeQueue`].

use super::{Entry, Pacer, TimeQueue};
use crate::flow::{DropReason, Filer, FlowConfig, FlowId, FlowTable, Pkt, Rejected, Unqueued};
use crate::sched::{ConfigError, Limits, Scheduler};
use crate::units::{Bytes, Nanos, Rate};

/// A flow's shaping state, kept in the flow table's hot record of the
/// flow (one index check reaches the FIFO, the pacer and the generation).
/// The generation and the level come first: they sit on the record's first
/// line with the FIFO's ends and the counters, so a release touches one
/// line of the record; an enqueue also reads the pacer on the second.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct FlowShape {
    generation: u32,
    level: u8,
    pacer: Pacer,
}

impl Default for FlowShape {
    fn default() -> FlowShape {
        FlowShape {
            generation: 0,
            level: 0,
            pacer: Pacer::new(Rate::MAX),
        }
    }
}

// The flow's record is two lines; a field more would make it three.
const _: () = assert!(core::mem::size_of::<crate::flow::Hot<FlowShape>>() == 128);

/// Release statistics of a [`Shaper`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ShapeStats {
    /// Releases that produced at least one packet (a caller sleeping until
    /// `next_ready` wakes this often), including one an enqueue made for a
    /// caller that had not dequeued for longer than the horizon.
    pub wakeups: u64,
    /// Releases at a due slot that produced no packet (only entries of
    /// removed flows, or only entries moved back from a coarser wheel).
    pub empty_wakeups: u64,
    /// Batch sizes: `batches[i]` counts releases of `2^i ..= 2^(i+1) − 1`
    /// packets (the last bucket takes everything larger).
    pub batches: [u64; 16],
    /// Largest batch.
    pub max_batch: u64,
    /// Packets released.
    pub released: u64,
    /// Largest `now − EDT` at dequeue, ns.
    pub max_lateness: u64,
    /// Sum of `now − EDT` at dequeue, ns.
    pub lateness_sum: u128,
    /// Packets refused because their EDT lay beyond the horizon (counted
    /// as `QueueFull` drops).
    pub beyond_horizon: u64,
}

impl ShapeStats {
    /// Counts the batch of a release (`open`) that handed out `n` packets:
    /// a wake-up, or an empty one when every entry it released was stale.
    fn close_batch(&mut self, open: bool, n: u64) {
        if n == 0 {
            self.empty_wakeups += u64::from(open);
            return;
        }
        self.wakeups += 1;
        let b = (63 - n.leading_zeros() as usize).min(15);
        self.batches[b] += 1;
        self.max_batch = self.max_batch.max(n);
    }
}

/// An EDT shaper: every flow has a rate ([`Pacer`]); each accepted packet
/// is stamped and filed in the time queue `Q`; `dequeue(now)` releases
/// packets whose slot time is `<= now`, a whole batch per wake-up.
///
/// Never releases a packet before its EDT; see the [module docs](super)
/// for the lateness bound of each `Q`. The `now` of successive calls must
/// not go back: an enqueue may release what is due by its `now` (after an
/// idle gap longer than the horizon), for the next dequeue to hand out.
/// Flows added through
/// [`Scheduler::add_flow`] get the shaper's default rate; use
/// [`Shaper::add_flow_rate`] / [`Shaper::set_rate`] to choose.
#[derive(Debug)]
pub struct Shaper<Q, T> {
    flows: FlowTable<T, FlowShape>,
    q: Q,
    /// The released count when the open batch was released: the batch is the
    /// packets released since (counted in the statistics when the next
    /// release closes it, or when they are read).
    batch_start: u64,
    /// The open batch came from a release (false before the first one).
    batch_open: bool,

    default_rate: Rate,
    st: ShapeStats,
}

impl<Q: TimeQueue, T> Shaper<Q, T> {
    /// A shaper over `q`; flows added without a rate get `default_rate`.
    pub fn new(q: Q, default_rate: Rate) -> Shaper<Q, T> {
        Shaper {
            flows: FlowTable::default(),
            q,
            batch_start: 0,
            batch_open: false,

            default_rate,
            st: ShapeStats::default(),
        }
    }

    /// The time queue (read only).
    pub fn queue(&self) -> &Q {
        &self.q
    }

    /// Release statistics. A batch counts the packets handed out of it so
    /// far (all of them once the next release happens); the open batch is
    /// counted here once it has handed out a packet, or as an empty
    /// wake-up once nothing is queued (it never can).
    pub fn shape_stats(&self) -> ShapeStats {
        let mut st = self.st;
        st.released = self.released();
        let dead = self.batch_open && self.flows.total_queued() == 0;
        st.close_batch(dead, st.released - self.batch_start);
        st
    }

    /// Heap memory: flow table (with the per-flow shaping state), time
    /// queue.
    pub fn memory_bytes(&self) -> usize {
        self.flows.memory_bytes() + self.q.memory_bytes()
    }

    /// Allowed rates (bits/s) for packets of up to `max_len` bytes:
    /// at least one `max_len` packet per horizon, at most one per finest
    /// slot.
    pub fn rate_range(&self, max_len: u32) -> (u64, u64) {
        let bits_ns = u128::from(max_len) * 8_000_000_000;
        let h = u128::from(self.q.horizon().0.max(1));
        let g = u128::from(self.q.min_spacing().0.max(1));
        let min = bits_ns.div_ceil(h).max(1);
        let max = bits_ns / g;
        (
            u64::try_from(min).unwrap_or(u64::MAX),
            u64::try_from(max).unwrap_or(u64::MAX),
        )
    }

    fn check_rate(&self, bps: u64, max_len: u32) -> Result<Rate, ConfigError> {
        let (min, max) = self.rate_range(max_len);
        match Rate::from_bps(bps) {
            Some(r) if bps >= min && bps <= max => Ok(r),
            _ => Err(ConfigError::OutOfRange {
                alg: self.q.name(),
                field: "rate",
                value: bps,
                min,
                max,
            }),
        }
    }

    /// Adds a flow shaped at `rate` bits/s (0 is refused with a
    /// [`ConfigError::OutOfRange`] naming `rate` and the allowed range).
    pub fn add_flow_bps(&mut self, cfg: FlowConfig, bps: u64) -> Result<FlowId, ConfigError> {
        let rate = self.check_rate(bps, cfg.max_len)?;
        Limits::generic(self.q.name()).check(&cfg)?;
        let level = self.q.level_for(rate.tx_time(u64::from(cfg.max_len)));
        let id = self.flows.insert(cfg);
        // A reused index keeps its record's generation: one more makes the
        // entries of the flow it had before stale.
        if let Some(s) = self.flows.ext_mut(id) {
            *s = FlowShape {
                generation: s.generation.wrapping_add(1),
                level,
                pacer: Pacer::new(rate),
            };
        }
        Ok(id)
    }

    /// Adds a flow shaped at `rate`.
    pub fn add_flow_rate(&mut self, cfg: FlowConfig, rate: Rate) -> Result<FlowId, ConfigError> {
        self.add_flow_bps(cfg, rate.as_bps())
    }

    /// Changes a flow's rate at run time: packets already queued keep their
    /// departure times (and the lateness bound of the wheel they were filed
    /// on), later ones are spaced at the new rate. If that moves a
    /// backlogged flow to a finer wheel, its next packet is spaced from
    /// the time its last queued packet's slot comes instead of that
    /// packet's EDT (so its packets leave in order, each with its own
    /// EDT): at most one slot of the old wheel − 1 ns later, and never
    /// later than that packet leaves.
    pub fn set_rate(&mut self, flow: FlowId, bps: u64) -> Result<(), ConfigError> {
        let Some(cfg) = self.flows.config(flow) else {
            return Err(ConfigError::UnknownFlow(flow));
        };
        let rate = self.check_rate(bps, cfg.max_len)?;
        let level = self.q.level_for(rate.tx_time(u64::from(cfg.max_len)));
        if let Some(s) = self.flows.ext_mut(flow) {
            s.pacer.set_rate(rate);
        }
        self.set_level(flow, level);
        Ok(())
    }

    /// Moves a flow to wheel `level`, keeping its packets in order.
    ///
    /// A flow's queued packets are its entries in the time queue, taken in
    /// release order: the k-th entry released hands out the flow's head
    /// packet, with the entry's EDT. That is right as long as a flow's
    /// entries are released in EDT order, which holds on one wheel (ceil
    /// slot times grow with the EDT) and on a coarser one (a later EDT's
    /// coarser ceil slot is no earlier). A finer wheel can release a later
    /// EDT first: its slot may come before the one of the last packet
    /// already queued, at time `T` (that packet's EDT rounded up to the old
    /// wheel's slot). So a backlogged flow moved to a finer wheel has its
    /// clock moved to `T`: its next EDT is after `T`, its slot too, and
    /// the packets leave in order with their own EDTs and bounds. Packets
    /// behind the one leaving at `T` could not leave before it anyway.
    fn set_level(&mut self, flow: FlowId, level: u8) {
        let backlogged = self.flows.queued(flow).is_some_and(|n| n > 0);
        let Some(s) = self.flows.ext_mut(flow) else {
            return;
        };
        if backlogged && level < s.level {
            let g = self.q.granularity(s.level).0.max(1);
            let last = s.pacer.last().0;
            let slot = last.div_ceil(g).saturating_mul(g);
            s.pacer.hold_until(Nanos(slot));
        }
        s.level = level;
    }

    /// The rate of a flow.
    pub fn rate(&self, flow: FlowId) -> Option<Rate> {
        self.live_shape(flow).map(|s| s.pacer.rate())
    }

    /// The wheel level a flow's packets are filed under.
    pub fn level(&self, flow: FlowId) -> Option<u8> {
        self.live_shape(flow).map(|s| s.level)
    }

    /// The shaping state of a live flow.
    fn live_shape(&self, flow: FlowId) -> Option<&FlowShape> {
        self.flows
            .contains(flow)
            .then(|| self.flows.ext(flow))
            .flatten()
    }

    /// Lateness bound of a flow's packets when dequeued at `next_ready`:
    /// its slot width − 1 ns. Packets queued before a change of the flow's
    /// rate or `max_len` keep the bound of the wheel they were filed on.
    pub fn lateness_bound(&self, flow: FlowId) -> Option<Nanos> {
        self.level(flow)
            .map(|l| Nanos(self.q.granularity(l).0.saturating_sub(1)))
    }

    /// Like [`Scheduler::dequeue`], also returning the EDT the packet was
    /// filed with.
    #[inline]
    pub fn dequeue_edt(&mut self, now: Nanos) -> Option<(Pkt<T>, Nanos)> {
        loop {
            let e = self.next_entry(now)?;
            let Some(pkt) = self.pop_for(e) else {
                continue;
            };
            self.count_release(now, e.edt);
            return Some((pkt, Nanos(e.edt)));
        }
    }

    /// Packets released so far: the flow table's departures (a shaper's
    /// packets leave only through its releases; a removal's are not
    /// counted there), so a release does not count them a second time.
    #[inline(always)]
    fn released(&self) -> u64 {
        self.flows.departed()
    }

    /// Counts one packet released at `now` that was filed for `edt` (its
    /// departure is counted by the flow table's pop).
    #[inline(always)]
    fn count_release(&mut self, now: Nanos, edt: u64) {
        let late = now.0.saturating_sub(edt);
        self.st.lateness_sum += u128::from(late);
        self.st.max_lateness = self.st.max_lateness.max(late);
    }

    /// The next entry of the time queue's ready list, releasing the next
    /// batch when it has run dry; `None` when nothing is due (see
    /// [`Shaper::refill`]).
    #[inline(always)]
    fn next_entry(&mut self, now: Nanos) -> Option<Entry> {
        match self.q.pop_ready() {
            Some(e) => Some(e),
            None => {
                if !self.refill(now) {
                    return None;
                }
                self.q.pop_ready()
            }
        }
    }

    /// The packet an entry stands for: its flow's head, unless the entry is
    /// stale. A matching generation means the flow is live: removing a flow
    /// and adding one under the same index each bump it, so entries filed
    /// before a removal never match again.
    #[inline(always)]
    fn pop_for(&mut self, e: Entry) -> Option<Pkt<T>> {
        self.flows
            .pop_if(FlowId(e.flow), |s| s.generation == e.generation)
    }

    /// Like [`Scheduler::dequeue_batch`], also giving each packet's EDT:
    /// appends to `out` what `max` calls of [`Shaper::dequeue_edt`] at
    /// `now` would return, in the same order, stopping at the first
    /// `None`; returns how many.
    pub fn dequeue_batch_edt(
        &mut self,
        now: Nanos,
        max: usize,
        out: &mut Vec<(Pkt<T>, Nanos)>,
    ) -> usize {
        self.release_into(now, max, |p, edt| out.push((p, edt)))
    }

    /// Hands every packet due at `now` to `f` with its EDT, in the order
    /// repeated [`Shaper::dequeue_edt`] calls at `now` would return them and
    /// counted as they count them, until one would return `None`; `f` gets
    /// the shaper back and may enqueue (a closed loop's refill). Returns
    /// how many, or `f`'s first error (that packet counted as released).
    /// One loop, so the packet goes from the flow table to `f` with no
    /// `Option` in between to test again.
    #[inline(always)]
    pub fn release_each<E>(
        &mut self,
        now: Nanos,
        mut f: impl FnMut(&mut Self, Pkt<T>, Nanos) -> Result<(), E>,
    ) -> Result<u64, E> {
        let mut n = 0u64;
        while let Some(e) = self.next_entry(now) {
            let Some(pkt) = self.pop_for(e) else {
                continue;
            };
            self.count_release(now, e.edt);
            n += 1;
            f(self, pkt, Nanos(e.edt))?;
        }
        Ok(n)
    }

    /// The release loop behind every dequeue: hands up to `max` due packets
    /// to `emit` (with their EDTs), refilling the ready batch from the time
    /// queue whenever it runs dry, and stops at the first dequeue that would
    /// return `None` (counting it as `dequeue` does). The lateness
    /// statistics are summed locally and stored once.
    #[inline(always)]
    fn release_into(
        &mut self,
        now: Nanos,
        max: usize,
        mut emit: impl FnMut(Pkt<T>, Nanos),
    ) -> usize {
        let (mut n, mut late_sum, mut late_max) = (0usize, 0u128, self.st.max_lateness);
        while n < max {
            let Some(e) = self.next_entry(now) else {
                break;
            };
            let Some(pkt) = self.pop_for(e) else {
                continue;
            };
            let late = now.0.saturating_sub(e.edt);
            late_sum += u128::from(late);
            late_max = late_max.max(late);
            emit(pkt, Nanos(e.edt));
            n += 1;
        }
        self.st.lateness_sum += late_sum;
        self.st.max_lateness = late_max;
        n
    }

    /// The ready list is empty: closes the open batch and releases every
    /// entry due at `now` into it (one wake-up). `false` when there is
    /// none, the outcome a `dequeue` returning `None` counts: nothing
    /// queued, nothing due yet (an overlimit), or a due slot with only
    /// entries moved back to a finer wheel (an empty wake-up).
    #[inline(always)]
    fn refill(&mut self, now: Nanos) -> bool {
        if self.flows.total_queued() == 0 {
            return false;
        }
        if self.q.next_due().is_none_or(|t| t > now) {
            self.flows.count_overlimit();
            return false;
        }
        let released = self.released();
        self.st
            .close_batch(self.batch_open, released - self.batch_start);
        self.batch_start = released;
        self.batch_open = self.q.release_ready(now);
        if !self.batch_open {
            self.st.empty_wakeups += 1;
        }
        self.batch_open
    }
}

impl<Q: TimeQueue, T> Shaper<Q, T> {
    /// An admissible packet the time queue did not file: its EDT lies
    /// beyond the horizon as measured from the queue's last release, which
    /// moves only when something is due. After an idle gap longer than the
    /// horizon, or on a fresh shaper whose clock does not start near 0,
    /// that release lies too far back: the horizon is measured from `now`
    /// instead and the packet filed again, once.
    ///
    /// - Nothing queued: every entry left is a removed flow's (stale);
    ///   they are dropped and the queue starts again at `now`.
    /// - Something due by `now` (a caller that has not dequeued for that
    ///   long): it is released, as the next dequeue at `now` would release
    ///   it (a wake-up; joined to the open batch if that still has packets
    ///   to hand out), and handed out by that dequeue.
    /// - Otherwise the queue measures its horizon from `now`.
    ///
    /// A packet refused then lies beyond `now` + the horizon (its flow is
    /// queued that far ahead): refused as `QueueFull`, counted in
    /// `beyond_horizon`. Off the packet path: only a refusal comes here.
    #[cold]
    #[inline(never)]
    fn file_unfiled(&mut self, pkt: Pkt<T>, now: Nanos) -> Result<(), Rejected<T>> {
        if self.flows.total_queued() == 0 {
            self.q.reset(now);
        } else if self.q.next_due().is_some_and(|t| t <= now) {
            if self.q.has_ready() {
                self.q.release_ready(now);
            } else {
                self.refill(now);
            }
        } else {
            self.q.catch_up(now);
        }
        let stamp = Stamp {
            q: &mut self.q,
            flow: pkt.flow.0,
            len: pkt.len,
            now,
        };
        match self.flows.admit_filed(pkt, stamp) {
            Ok(()) => Ok(()),
            Err(Unqueued::Refused(r)) => Err(r),
            Err(Unqueued::Unfiled(p)) => {
                self.st.beyond_horizon += 1;
                Err(self.flows.refuse(p, DropReason::QueueFull))
            }
        }
    }
}

/// The shaper's part of an enqueue, run by the flow table once the packet
/// is admissible: stamp it with the flow's pacer and file it in the time
/// queue. The pacer's clock moves at once and is set back if the time
/// queue refuses the entry: what lives across the filing is then the old
/// clock (loaded by the stamp anyway, stored back only on a refusal), not
/// the new one, which was kept on the stack and read back to be stored
/// after the push (−3 instructions per packet). Only its exact part (two
/// words) is kept: the rounded stamp is derived on a rewind.
struct Stamp<'a, Q> {
    q: &'a mut Q,
    flow: u32,
    len: Bytes,
    now: Nanos,
}

impl<Q: TimeQueue> Filer<FlowShape> for Stamp<'_, Q> {
    #[inline(always)]
    fn file(self, s: &mut FlowShape) -> bool {
        let before = s.pacer.clock_parts();
        let edt = s.pacer.stamp(self.len, self.now);
        let e = Entry {
            edt: edt.0,
            flow: self.flow,
            generation: s.generation,
        };
        if self.q.push(e, s.level).is_err() {
            s.pacer.rewind(before);
            return false;
        }
        true
    }
}

impl<Q: TimeQueue, T> Scheduler<T> for Shaper<Q, T> {
    fn name(&self) -> &'static str {
        self.q.name()
    }

    fn limits(&self) -> Limits {
        Limits::generic(self.q.name())
    }

    fn add_flow(&mut self, cfg: FlowConfig) -> Result<FlowId, ConfigError> {
        self.add_flow_bps(cfg, self.default_rate.as_bps())
    }

    fn change_flow(
        &mut self,
        flow: FlowId,
        cfg: FlowConfig,
        _now: Nanos,
    ) -> Result<(), ConfigError> {
        if self.flows.config(flow).is_none() {
            return Err(ConfigError::UnknownFlow(flow));
        }
        Limits::generic(self.q.name()).check(&cfg)?;
        self.flows.check_max_len(flow, cfg.max_len)?;
        let Some(rate) = self.rate(flow) else {
            return Err(ConfigError::UnknownFlow(flow));
        };
        self.check_rate(rate.as_bps(), cfg.max_len)?;
        let level = self.q.level_for(rate.tx_time(u64::from(cfg.max_len)));
        self.flows.set_config(flow, cfg);
        self.set_level(flow, level);
        Ok(())
    }

    fn remove_flow(&mut self, flow: FlowId) -> Result<Vec<Pkt<T>>, ConfigError> {
        if !self.flows.contains(flow) {
            return Err(ConfigError::UnknownFlow(flow));
        }
        // Entries still filed for this flow are skipped when released.
        if let Some(s) = self.flows.ext_mut(flow) {
            s.generation = s.generation.wrapping_add(1);
        }
        let pkts: Vec<Pkt<T>> = self.flows.remove(flow);
        Ok(pkts)
    }

    /// Lets the flow table admit the packet, stamping and filing it in
    /// the time queue from inside the admission (`Stamp`: one lookup of
    /// the flow's record for the tests, the pacer and the queueing).
    #[inline(always)]
    fn enqueue(&mut self, pkt: Pkt<T>, now: Nanos) -> Result<(), Rejected<T>> {
        let stamp = Stamp {
            q: &mut self.q,
            flow: pkt.flow.0,
            len: pkt.len,
            now,
        };
        match self.flows.admit_filed(pkt, stamp) {
            Ok(()) => Ok(()),
            Err(Unqueued::Refused(r)) => Err(r),
            Err(Unqueued::Unfiled(p)) => self.file_unfiled(p, now),
        }
    }

    #[inline]
    fn dequeue(&mut self, now: Nanos) -> Option<Pkt<T>> {
        self.dequeue_edt(now).map(|(p, _)| p)
    }

    /// One release loop for the batch (see [`Shaper::dequeue_batch_edt`]).
    fn dequeue_batch(&mut self, now: Nanos, max: usize, out: &mut Vec<Pkt<T>>) -> usize {
        self.release_into(now, max, |p, _| out.push(p))
    }

    fn next_ready(&self, now: Nanos) -> Option<Nanos> {
        if self.flows.total_queued() == 0 {
            return None;
        }
        if self.q.has_ready() {
            return Some(now);
        }
        self.q.next_due().map(|t| t.max(now))
    }

    crate::sched::flow_table_views!(flows);
}
