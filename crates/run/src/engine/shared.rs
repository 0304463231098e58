//! State the pipeline's threads share: the current class map (swapped
//! whole on reload), per-flow receive counters, the stop flag and the
//! devices' counters as last published by the threads that own them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use hdrhistogram::Histogram;
use pktsched_core::{FlowId, Pkt};
use pktsched_io::classify::Classifier;

use super::tx::{FlowTx, RxSplit, TxOutput};
use crate::frame::Frame;
use crate::stats::DeviceStats;

/// Most flow slots counted (classes plus classes being retired).
pub(crate) const FLOW_SLOTS: usize = 2 * crate::config::MAX_CLASSES + 64;

/// What a receive thread needs to turn a frame into a packet.
#[derive(Debug)]
pub(crate) struct ClassMap {
    /// Frame → class index.
    pub(crate) classifier: Classifier,
    /// Class index → the scheduler's flow.
    pub(crate) flows: Vec<FlowId>,
    /// Bytes added to each frame's length on the wire.
    pub(crate) overhead: u32,
    /// Smallest wire length.
    pub(crate) mpu: u32,
    /// The longest sleep of the receive thread while its mailbox is full
    /// ([`super::rx::full_wait_cap`] of the link's rate and wire lengths).
    pub(crate) full_wait_cap: std::time::Duration,
}

impl ClassMap {
    /// The map of `classifier`'s classes onto `flows`, with `link`'s
    /// wire-length rule (overhead, minimum) and the receive thread's
    /// longest full-mailbox sleep at `link`'s rate (a reload makes a new
    /// map, so a new rate or wire length changes it too).
    pub(crate) fn new(
        classifier: Classifier,
        flows: Vec<FlowId>,
        link: &crate::config::LinkConfig,
    ) -> ClassMap {
        ClassMap {
            classifier,
            flows,
            overhead: link.overhead,
            mpu: link.mpu,
            full_wait_cap: super::rx::full_wait_cap(
                super::MAILBOX_CAPACITY,
                link.wire_len(crate::config::MIN_FRAME),
                link.rate,
            ),
        }
    }

    /// The wire length of a frame of `len` bytes.
    #[inline]
    pub(crate) fn wire_len(&self, len: usize) -> u32 {
        (len as u32 + self.overhead).max(self.mpu)
    }
}

/// Shared by every thread of one pipeline.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Set to stop the receive and reverse threads.
    pub(crate) stop: AtomicBool,
    /// Set (after the receive threads have ended) to stop the arbiter.
    pub(crate) arbiter_stop: AtomicBool,
    /// Bumped when `map` is replaced.
    generation: AtomicU64,
    map: Mutex<Arc<ClassMap>>,
    /// Frames classified into each flow (index = `FlowId::index`).
    pub(crate) received: Vec<AtomicU64>,
    /// Frames offered to the scheduler or on their way (classified by a
    /// receive thread, or moved from a removed class's queue to the
    /// default class), in all: one total that only grows (unlike
    /// `received`, which [`Shared::reset_flow`] restarts), so the arbiter
    /// reads what is upstream of the scheduler with one load.
    classified: AtomicU64,
    /// Classifier anomalies by kind (index = the anomaly's position in
    /// `pktsched_io::classify::Anomaly::ALL`).
    pub(crate) anomalies: Vec<AtomicU64>,
    /// Frames a receive thread held when the pipeline stopped (never
    /// reached the scheduler), dropped and counted here.
    pub(crate) rx_dropped_at_stop: AtomicU64,
    /// The same per flow (index = `FlowId::index`).
    pub(crate) rx_dropped_at_stop_by_flow: Vec<AtomicU64>,
    /// Device counters: [ingress rx, egress rx] as published by the receive
    /// and reverse threads.
    pub(crate) devices: Mutex<Vec<DeviceStats>>,
    /// Reverse direction: forwarded, dropped.
    pub(crate) reverse: [AtomicU64; 2],
    /// The ingress receives on one kernel ring per class (set at start):
    /// a reload must keep that split.
    class_rings: AtomicBool,
}

impl Shared {
    pub(crate) fn new(map: ClassMap, anomaly_kinds: usize) -> Arc<Shared> {
        Arc::new(Shared {
            stop: AtomicBool::new(false),
            arbiter_stop: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            map: Mutex::new(Arc::new(map)),
            received: (0..FLOW_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            classified: AtomicU64::new(0),
            anomalies: (0..anomaly_kinds).map(|_| AtomicU64::new(0)).collect(),
            rx_dropped_at_stop: AtomicU64::new(0),
            rx_dropped_at_stop_by_flow: (0..FLOW_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            devices: Mutex::new(Vec::new()),
            reverse: [AtomicU64::new(0), AtomicU64::new(0)],
            class_rings: AtomicBool::new(false),
        })
    }

    /// The current map and its generation.
    pub(crate) fn map(&self) -> (Arc<ClassMap>, u64) {
        let guard = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        (guard.clone(), self.generation.load(Ordering::Acquire))
    }

    /// Has the map changed since `generation`? (one relaxed load per batch)
    #[inline]
    pub(crate) fn changed_since(&self, generation: u64) -> bool {
        self.generation.load(Ordering::Acquire) != generation
    }

    /// Installs a new map.
    pub(crate) fn set_map(&self, map: ClassMap) {
        let mut guard = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        *guard = Arc::new(map);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Publishes one device's counters (replacing its previous entry).
    pub(crate) fn publish_device(&self, d: DeviceStats) {
        let mut v = self.devices.lock().unwrap_or_else(PoisonError::into_inner);
        match v
            .iter_mut()
            .find(|x| x.device == d.device && x.role == d.role)
        {
            Some(x) => *x = d,
            None => v.push(d),
        }
    }

    /// Frames received into `flow`.
    pub(crate) fn received(&self, flow: FlowId) -> u64 {
        self.received
            .get(flow.index())
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Counts `frames` more classified (or moved) frames in the total
    /// (one relaxed add per batch): before they are handed on, so the
    /// total never lags what the scheduler was offered.
    #[inline]
    pub(crate) fn count_classified(&self, frames: u64) {
        self.classified.fetch_add(frames, Ordering::Relaxed);
    }

    /// Frames classified (or moved) in all, never reset.
    #[inline]
    pub(crate) fn classified(&self) -> u64 {
        self.classified.load(Ordering::Relaxed)
    }

    /// Counts `frames`, held by a receive thread at stop, as dropped:
    /// in total and under each one's flow.
    pub(crate) fn drop_held_at_stop<'a>(&self, frames: impl Iterator<Item = &'a Pkt<Frame>>) {
        for p in frames {
            self.rx_dropped_at_stop.fetch_add(1, Ordering::Relaxed);
            if let Some(c) = self.rx_dropped_at_stop_by_flow.get(p.flow.index()) {
                c.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Frames of `flow` a receive thread held at stop.
    pub(crate) fn dropped_at_stop(&self, flow: FlowId) -> u64 {
        self.rx_dropped_at_stop_by_flow
            .get(flow.index())
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Starts flow slot `flow`'s receive counters at zero: a new class
    /// the scheduler gave a removed class's id to counts only its own.
    /// The total ([`Shared::classified`]) is left as it is.
    pub(crate) fn reset_flow(&self, flow: FlowId) {
        for counters in [&self.received, &self.rx_dropped_at_stop_by_flow] {
            if let Some(c) = counters.get(flow.index()) {
                c.store(0, Ordering::Relaxed);
            }
        }
    }

    /// Records whether the ingress receives on per-class kernel rings
    /// (`Pipeline::with_ring_board`'s board is there).
    pub(crate) fn set_class_rings(&self, on: bool) {
        self.class_rings.store(on, Ordering::Relaxed);
    }

    /// Does the ingress receive on per-class kernel rings?
    pub(crate) fn class_rings(&self) -> bool {
        self.class_rings.load(Ordering::Relaxed)
    }

    /// Stopping?
    #[inline]
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}

/// A flow's sojourn summary as [`FlowTx::summary`] gives it.
pub(crate) type Sojourn = (f64, f64, Vec<u64>, u64, f64);

/// What a flow slot's transmit counters held when a reload gave it to a
/// new class (they were a removed class's, whose id the scheduler reused):
/// the new class's own counters are those since.
#[derive(Debug, Default)]
pub(crate) struct TxBase {
    failed: u64,
    sojourn: Option<Histogram<u64>>,
    sojourn_sum_ns: u128,
    ring_wait: Option<Histogram<u64>>,
    latency: Option<Histogram<u64>>,
}

/// `now` less `base` (both from the same flow slot, `base` earlier).
fn since(now: &Option<Histogram<u64>>, base: &Option<Histogram<u64>>) -> Option<Histogram<u64>> {
    let mut h = now.clone()?;
    if let Some(b) = base {
        // `base` is a subset of `now`: the subtraction cannot go below 0.
        let _ = h.subtract(b);
    }
    Some(h)
}

impl TxBase {
    /// Flow slot `index`'s transmit counters in `out` now; `None` when it
    /// has none (an id never used before).
    pub(crate) fn of<P>(out: &TxOutput<P>, index: usize) -> Option<TxBase> {
        let failed = out.tx_failed(index);
        let flow = out.flow(index);
        if failed == 0 && flow.is_none() {
            return None;
        }
        Some(TxBase {
            failed,
            sojourn: flow.and_then(|f| f.sojourn.clone()),
            sojourn_sum_ns: flow.map_or(0, |f| f.sojourn_sum_ns),
            ring_wait: flow.and_then(|f| f.ring_wait.clone()),
            latency: flow.and_then(|f| f.latency.clone()),
        })
    }

    /// Flow slot `index`'s sojourn summary, receive split and transmit
    /// failures in `out` since `base` (all of them without one); `None`
    /// when the slot has no transmit counters.
    pub(crate) fn since<P>(
        out: &TxOutput<P>,
        index: usize,
        base: Option<&TxBase>,
    ) -> Option<(Sojourn, RxSplit, u64)> {
        let failed = out
            .tx_failed(index)
            .saturating_sub(base.map_or(0, |b| b.failed));
        let flow = out.flow(index)?;
        let Some(b) = base else {
            return Some((flow.summary(), flow.rx_split(), failed));
        };
        let own = FlowTx {
            sojourn: since(&flow.sojourn, &b.sojourn),
            sojourn_sum_ns: flow.sojourn_sum_ns.saturating_sub(b.sojourn_sum_ns),
            ring_wait: since(&flow.ring_wait, &b.ring_wait),
            latency: since(&flow.latency, &b.latency),
        };
        Some((own.summary(), own.rx_split(), failed))
    }
}

#[cfg(test)]
mod tests {
    use pktsched_core::{FlowId, Nanos, Pkt};
    use pktsched_io::BufPool;
    use pktsched_io::classify::Classifier;

    use super::{ClassMap, Shared};
    use crate::frame::Frame;

    #[test]
    fn frames_held_at_stop_are_counted_under_their_own_flow() {
        let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(8, 2048).expect("pool")));
        let map = ClassMap {
            classifier: Classifier::new(Vec::new(), 0).expect("classifier"),
            flows: vec![FlowId(0), FlowId(1)],
            overhead: 0,
            mpu: 0,
            full_wait_cap: pktsched_runtime::client::Backoff::MAX_SLEEP,
        };
        let shared = Shared::new(map, 0);
        let held: Vec<Pkt<Frame>> = [1u32, 0, 1]
            .iter()
            .map(|&f| {
                let b = pool.get().expect("buffer");
                Pkt::new(FlowId(f), 60, Nanos(0), Frame::new(b, pool))
            })
            .collect();
        shared.drop_held_at_stop(held.iter());
        assert_eq!(shared.dropped_at_stop(FlowId(0)), 1);
        assert_eq!(shared.dropped_at_stop(FlowId(1)), 2);
        assert_eq!(shared.dropped_at_stop(FlowId(5)), 0);
        assert_eq!(
            shared
                .rx_dropped_at_stop
                .load(std::sync::atomic::Ordering::Relaxed),
            3
        );
        drop(held);
        assert_eq!(pool.stats().free, 8, "the buffers went back");
    }
}
