//! Where the victim's latency goes: each victim packet is stamped at four
//! points on its way and the output splits its latency into the parts
//! between them.
//!
//! * `made` — the generator creates the packet (the packet's own `ts`);
//! * `handed` — the client calls `send` (PSPAT: the push into its mailbox;
//!   locked: before it takes the lock);
//! * `enqueued` — the scheduler accepts it (PSPAT: the arbiter has read the
//!   mailbox; locked: the client holds the lock);
//! * `dequeued` — the scheduler releases it (the emulated link was free);
//! * `out` — the output transmits it (after the round's other packets, or
//!   through a dispatcher).
//!
//! Parts: `client` = handed − made, `handover` = enqueued − handed
//! (PSPAT: waiting in the mailbox for the arbiter's read; locked: waiting
//! for the lock), `scheduler` = dequeued − enqueued (queued behind other
//! flows and the link), `dispatch` = out − dequeued. A missing or
//! out-of-order stamp (clocks read on different threads) is clamped to the
//! previous one, so the four parts add up to the total exactly.
//!
//! Only the victim's packets are stamped (one clock read at each point,
//! behind a flow-id compare): the other flows' path gains that compare and
//! one indirect call per scheduler operation, the same for every
//! architecture.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Result, anyhow};
use hdrhistogram::Histogram;
use pktsched_core::{
    Backlog, ConfigError, Counters, FlowConfig, FlowId, Limits, Nanos, Pkt, Rejected, Scheduler,
};
use pktsched_runtime::pspat::Clock;
use serde::Serialize;

/// Victim packets in flight the table can tell apart (a power of two);
/// far more than a mailbox and a flow's queue hold.
const SLOTS: usize = 1 << 13;

/// Names of the parts, in path order.
pub(crate) const PARTS: [&str; 4] = ["client", "handover", "scheduler", "dispatch"];

/// Stamps of victim packets, indexed by sequence number (`Pkt::item`)
/// modulo [`SLOTS`]: handed, enqueued, dequeued (0 = not stamped).
pub(crate) struct Stamps {
    slots: Vec<[AtomicU64; 3]>,
    clock: Clock,
}

impl Stamps {
    pub(crate) fn new(clock: Clock) -> Arc<Stamps> {
        Arc::new(Stamps {
            slots: (0..SLOTS)
                .map(|_| [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)])
                .collect(),
            clock,
        })
    }

    fn slot(&self, seq: u64) -> &[AtomicU64; 3] {
        &self.slots[(seq as usize) & (SLOTS - 1)]
    }

    /// Stamps point `i` (0 handed, 1 enqueued, 2 dequeued) of packet `seq`
    /// with the clock now. Relaxed: the packet's own hand-offs (mailbox
    /// push and pop, lock, TX mailbox) order the stamp before its reader.
    pub(crate) fn stamp(&self, seq: u64, i: usize) {
        self.slot(seq)[i].store(self.clock.now().0, Ordering::Relaxed);
    }

    /// Takes the stamps of packet `seq` (clearing them for the slot's next
    /// packet).
    fn take(&self, seq: u64) -> [u64; 3] {
        let s = self.slot(seq);
        [0, 1, 2].map(|i| s[i].swap(0, Ordering::Relaxed))
    }
}

/// The four parts of one packet's latency from its stamps: `made` and
/// `out` bound it; a missing (0) or earlier stamp counts as the previous
/// point, so the parts are never negative and add up to `out − made`.
pub(crate) fn split(made: u64, mid: [u64; 3], out: u64) -> [u64; 4] {
    let out = out.max(made);
    let mut prev = made;
    let mut parts = [0u64; 4];
    for (i, &t) in mid.iter().enumerate() {
        let t = t.clamp(prev, out);
        parts[i] = t - prev;
        prev = t;
    }
    parts[3] = out - prev;
    parts
}

/// One histogram per part.
pub(crate) struct PartHists {
    pub(crate) stamps: Arc<Stamps>,
    hists: [Histogram<u64>; 4],
}

impl PartHists {
    pub(crate) fn new(stamps: Arc<Stamps>) -> Result<PartHists> {
        let h = || Histogram::<u64>::new(3).map_err(|e| anyhow!("histogram: {e}"));
        Ok(PartHists {
            stamps,
            hists: [h()?, h()?, h()?, h()?],
        })
    }

    /// Records the parts of victim packet `seq`, made at `made` and
    /// transmitted at `out`; `measured`: inside the measured window (the
    /// stamps are cleared either way).
    pub(crate) fn record(&mut self, seq: u64, made: u64, out: u64, measured: bool) {
        let mid = self.stamps.take(seq);
        if measured {
            for (h, v) in self.hists.iter_mut().zip(split(made, mid, out)) {
                let _ = h.record(v);
            }
        }
    }

    /// Adds another output's histograms.
    pub(crate) fn add(&mut self, o: &PartHists) -> Result<()> {
        for (a, b) in self.hists.iter_mut().zip(&o.hists) {
            a.add(b).map_err(|e| anyhow!("{e}"))?;
        }
        Ok(())
    }

    /// p50 and p99 of each part.
    pub(crate) fn summary(&self) -> Breakdown {
        let q = |i: usize| Part {
            p50_ns: self.hists[i].value_at_quantile(0.5),
            p99_ns: self.hists[i].value_at_quantile(0.99),
        };
        Breakdown {
            client: q(0),
            handover: q(1),
            scheduler: q(2),
            dispatch: q(3),
        }
    }
}

/// One part's percentiles.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Part {
    pub p50_ns: u64,
    pub p99_ns: u64,
}

/// The victim's latency by part (see the module docs).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Breakdown {
    /// Made → handed to `send`.
    pub client: Part,
    /// Handed → in the scheduler (PSPAT: the mailbox until the arbiter's
    /// read; locked: the lock).
    pub handover: Part,
    /// In the scheduler, until the link takes it.
    pub scheduler: Part,
    /// Released → transmitted by the output.
    pub dispatch: Part,
}

impl Breakdown {
    pub(crate) fn parts(&self) -> [Part; 4] {
        [self.client, self.handover, self.scheduler, self.dispatch]
    }
}

/// A scheduler that stamps the victim flow's packets as it enqueues and
/// dequeues them (and is otherwise the scheduler it wraps).
pub(crate) struct Stamped {
    inner: Box<dyn Scheduler<u64> + Send>,
    victim: FlowId,
    stamps: Arc<Stamps>,
}

impl Stamped {
    pub(crate) fn new(
        inner: Box<dyn Scheduler<u64> + Send>,
        victim: FlowId,
        stamps: Arc<Stamps>,
    ) -> Stamped {
        Stamped {
            inner,
            victim,
            stamps,
        }
    }
}

impl Scheduler<u64> for Stamped {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn limits(&self) -> Limits {
        self.inner.limits()
    }
    fn add_flow(&mut self, cfg: FlowConfig) -> Result<FlowId, ConfigError> {
        self.inner.add_flow(cfg)
    }
    fn change_flow(
        &mut self,
        flow: FlowId,
        cfg: FlowConfig,
        now: Nanos,
    ) -> Result<(), ConfigError> {
        self.inner.change_flow(flow, cfg, now)
    }
    fn remove_flow(&mut self, flow: FlowId) -> Result<Vec<Pkt<u64>>, ConfigError> {
        self.inner.remove_flow(flow)
    }
    #[inline]
    fn enqueue(&mut self, pkt: Pkt<u64>, now: Nanos) -> Result<(), Rejected<u64>> {
        if pkt.flow == self.victim {
            self.stamps.stamp(pkt.item, 1);
        }
        self.inner.enqueue(pkt, now)
    }
    #[inline]
    fn dequeue(&mut self, now: Nanos) -> Option<Pkt<u64>> {
        let p = self.inner.dequeue(now);
        if let Some(p) = &p
            && p.flow == self.victim
        {
            self.stamps.stamp(p.item, 2);
        }
        p
    }
    // The arbiter's batches go to the scheduler's own batch paths (one
    // call through `inner` each, as without the victim), the victim's
    // packets stamped on their way.
    fn enqueue_batch(
        &mut self,
        pkts: &mut Vec<Pkt<u64>>,
        rest: &mut Vec<Pkt<u64>>,
        now: Nanos,
    ) -> Result<(), Rejected<u64>> {
        let victim = self.victim;
        pkts.iter()
            .filter(|p| p.flow == victim)
            .for_each(|p| self.stamps.stamp(p.item, 1));
        // What the scheduler leaves in `rest` (behind a drop) is stamped
        // again when it is offered again.
        self.inner.enqueue_batch(pkts, rest, now)
    }
    fn dequeue_batch(&mut self, now: Nanos, max: usize, out: &mut Vec<Pkt<u64>>) -> usize {
        let first = out.len();
        let n = self.inner.dequeue_batch(now, max, out);
        let victim = self.victim;
        out[first..]
            .iter()
            .filter(|p| p.flow == victim)
            .for_each(|p| self.stamps.stamp(p.item, 2));
        n
    }
    fn next_ready(&self, now: Nanos) -> Option<Nanos> {
        self.inner.next_ready(now)
    }
    fn backlog(&self) -> Backlog {
        self.inner.backlog()
    }
    fn stats(&self) -> Counters {
        self.inner.stats()
    }
    fn flow_stats(&self, flow: FlowId) -> Option<Counters> {
        self.inner.flow_stats(flow)
    }
    fn flow_config(&self, flow: FlowId) -> Option<&FlowConfig> {
        self.inner.flow_config(flow)
    }
    fn flow_ids(&self) -> Vec<FlowId> {
        self.inner.flow_ids()
    }
    fn add_flow_at(&mut self, node: usize, cfg: FlowConfig) -> Result<FlowId, ConfigError> {
        self.inner.add_flow_at(node, cfg)
    }
}

#[cfg(test)]
mod tests {
    use rand_chacha::ChaCha8Rng;
    use rand_chacha::rand_core::{RngCore, SeedableRng};

    use super::{PartHists, Stamped, Stamps, split};
    use pktsched_core::{Algorithm, FlowConfig, FlowId, Nanos, Pkt, Scheduler};
    use pktsched_runtime::pspat::Clock;

    /// The batch paths stamp the victim's packets, and only those: at the
    /// enqueue (all offered) and at the dequeue (all released).
    #[test]
    fn batches_stamp_the_victims_packets_only() {
        let stamps = Stamps::new(Clock::new());
        let mut s = Stamped::new(
            Algorithm::Fifo.build_send::<u64>(),
            FlowId(1),
            stamps.clone(),
        );
        for w in [1, 1] {
            s.add_flow(FlowConfig::weight(w))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        // Items: flow 0 takes 0, 2, 4; the victim (flow 1) 1, 3, 5.
        let mut pkts: Vec<Pkt<u64>> = (0..6)
            .map(|i| Pkt::new(FlowId((i % 2) as u32), 100, Nanos(0), i))
            .collect();
        let mut rest = Vec::new();
        assert!(s.enqueue_batch(&mut pkts, &mut rest, Nanos(1)).is_ok());
        assert!(rest.is_empty());
        let mut out = vec![Pkt::new(FlowId(0), 100, Nanos(0), 99)];
        assert_eq!(s.dequeue_batch(Nanos(2), 4, &mut out), 4);
        for i in 0..6u64 {
            let [handed, enqueued, dequeued] = stamps.take(i);
            assert_eq!(handed, 0, "item {i}");
            let victim = i % 2 == 1;
            assert_eq!(enqueued > 0, victim, "item {i}: {enqueued}");
            // FIFO releases items 0..4 first: victims 1 and 3 are out.
            assert_eq!(dequeued > 0, victim && i < 4, "item {i}: {dequeued}");
        }
    }

    #[test]
    fn parts_add_up_to_the_total_whatever_the_stamps() {
        // In order, missing, out of order, beyond `out`: the parts are
        // never negative and always sum to out − made.
        assert_eq!(split(100, [110, 150, 190], 200), [10, 40, 40, 10]);
        assert_eq!(split(100, [0, 150, 0], 200), [0, 50, 0, 50]);
        assert_eq!(split(100, [160, 150, 170], 200), [60, 0, 10, 30]);
        assert_eq!(split(100, [110, 250, 0], 200), [10, 90, 0, 0]);
        assert_eq!(split(100, [50, 60, 70], 90), [0, 0, 0, 0]);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..10_000 {
            let mut r = || rng.next_u64() % 1000;
            let made = r();
            let out = r();
            let mid = [r(), r(), r()];
            let parts = split(made, mid, out);
            let total: u64 = parts.iter().sum();
            assert_eq!(total, out.saturating_sub(made), "{made} {mid:?} {out}");
        }
    }

    #[test]
    fn stamps_are_read_once_per_packet_and_only_measured_ones_count() {
        let stamps = Stamps::new(Clock::new());
        let mut h = PartHists::new(stamps.clone()).unwrap_or_else(|e| panic!("{e}"));
        stamps.stamp(5, 0);
        stamps.stamp(5, 1);
        stamps.stamp(5, 2);
        let s = stamps.take(5);
        assert!(s.iter().all(|&t| t > 0), "{s:?}");
        assert_eq!(stamps.take(5), [0, 0, 0]);
        h.record(6, 10, 30, false);
        assert_eq!(h.hists[0].len(), 0);
        h.record(6, 10, 30, true);
        assert_eq!(h.hists.iter().map(|x| x.len()).sum::<u64>(), 4);
        // No stamps: everything is the last part.
        assert_eq!(h.summary().dispatch.p50_ns, 20);
        assert_eq!(h.summary().client.p99_ns, 0);
    }
}
