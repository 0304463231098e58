//! State the pipeline's threads share: the current class map (swapped
//! whole on reload), per-flow receive counters, the stop flag and the
//! devices' counters as last published by the threads that own them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use pktsched_core::{FlowId, Pkt};
use pktsched_io::classify::Classifier;

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
}

impl ClassMap {
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
}

impl Shared {
    pub(crate) fn new(map: ClassMap, anomaly_kinds: usize) -> Arc<Shared> {
        Arc::new(Shared {
            stop: AtomicBool::new(false),
            arbiter_stop: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            map: Mutex::new(Arc::new(map)),
            received: (0..FLOW_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            anomalies: (0..anomaly_kinds).map(|_| AtomicU64::new(0)).collect(),
            rx_dropped_at_stop: AtomicU64::new(0),
            rx_dropped_at_stop_by_flow: (0..FLOW_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            devices: Mutex::new(Vec::new()),
            reverse: [AtomicU64::new(0), AtomicU64::new(0)],
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

    /// Stopping?
    #[inline]
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
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
