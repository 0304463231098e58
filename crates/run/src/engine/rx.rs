//! The receive thread: a PSPAT client. It takes a batch of frames from the
//! ingress device, classifies each into its class's flow, stamps it and
//! hands the batch to the arbiter through its mailbox. When the mailbox is
//! full it stops receiving, so the backlog builds in the kernel's ring
//! (whose drops the device counts) rather than in unbounded memory here.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pktsched_core::{Nanos, Pkt};
use pktsched_io::{BufPool, PacketBuf, PacketIo};
use pktsched_runtime::{Client, Clock};

use super::shared::{ClassMap, Shared};
use super::{device_stats, ports::Port};
use crate::frame::Frame;

/// Frames taken from the device per call.
pub(crate) const RX_BATCH: usize = 64;
/// How long a receive waits for the device before checking for stop.
pub(crate) const RX_WAIT: Duration = Duration::from_millis(5);
/// How often a thread publishes its device's counters.
pub(crate) const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// Classifies each frame of `bufs` (emptied) into its class's flow, counts
/// it as received by that flow (and any classifier anomaly), stamps it
/// with `now` and hands it to `out` as a packet of its wire length, with
/// the kernel's receive stamp of the frame (0: none). The batch is counted
/// in the classified total ([`Shared::count_classified`]) with one add at
/// the end: the PSPAT receive thread hands `out`'s frames to the mailbox
/// only after that (the run-to-completion thread enqueues them itself; its
/// loop has no catch-up, the total's only reader).
#[inline]
pub(crate) fn classify_into(
    map: &ClassMap,
    shared: &Shared,
    bufs: &mut Vec<PacketBuf>,
    now: Nanos,
    pool: &'static BufPool,
    mut out: impl FnMut(Pkt<Frame>, u64),
) {
    let mut classified = 0;
    for buf in bufs.drain(..) {
        let verdict = map.classifier.classify(buf.as_slice());
        if let Some(c) = verdict.note.and_then(|a| shared.anomalies.get(a.index())) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        let Some(&flow) = map.flows.get(usize::from(verdict.class)) else {
            pool.put(buf);
            continue; // unreachable: the classifier only returns classes of this map
        };
        if let Some(c) = shared.received.get(flow.index()) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        let len = map.wire_len(buf.len());
        let rx_ns = buf.rx_ns();
        out(Pkt::new(flow, len, now, Frame::new(buf, pool)), rx_ns);
        classified += 1;
    }
    if classified > 0 {
        shared.count_classified(classified);
    }
}

/// Runs until the pipeline stops; returns the device.
pub(crate) fn rx_loop<P: PacketIo>(
    mut port: Port<P>,
    mut client: Client<Frame>,
    shared: Arc<Shared>,
    pool: &'static BufPool,
    clock: Clock,
) -> Port<P> {
    let mut bufs: Vec<PacketBuf> = Vec::with_capacity(RX_BATCH);
    let mut pending: VecDeque<Pkt<Frame>> = VecDeque::with_capacity(4 * RX_BATCH);
    let (mut map, mut generation) = shared.map();
    let mut published = Instant::now();
    while !shared.stopping() {
        if shared.changed_since(generation) {
            (map, generation) = shared.map();
        }
        if pending.is_empty() {
            port.wait(RX_WAIT);
            port.recv(pool, &mut bufs, RX_BATCH);
            let now = clock.now();
            classify_into(&map, &shared, &mut bufs, now, pool, |p, _| {
                pending.push_back(p)
            });
        }
        if !pending.is_empty() {
            match client.send_batch(&mut pending) {
                Ok((0, _)) => std::thread::yield_now(),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        if published.elapsed() >= PUBLISH_EVERY {
            shared.publish_device(device_stats(&port));
            published = Instant::now();
        }
    }
    shared.drop_held_at_stop(pending.iter());
    pending.clear();
    shared.publish_device(device_stats(&port));
    port
}

#[cfg(test)]
mod tests {
    use pktsched_core::{FlowId, Nanos};
    use pktsched_io::BufPool;
    use pktsched_io::classify::Classifier;

    use super::classify_into;
    use crate::engine::shared::{ClassMap, Shared};

    /// Each batch counts its frames per flow and in the total; a reused
    /// flow id's counter restarts, the total does not.
    #[test]
    fn a_batch_is_counted_per_flow_and_in_a_total_no_reload_restarts() {
        let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(8, 2048).expect("pool")));
        let map = ClassMap {
            classifier: Classifier::new(Vec::new(), 0).expect("classifier"),
            flows: vec![FlowId(3)],
            overhead: 0,
            mpu: 0,
        };
        let shared = Shared::new(map, 0);
        let (map, _) = shared.map();
        let mut out = Vec::new();
        for batch in [3, 2] {
            let mut bufs: Vec<_> = (0..batch)
                .map(|_| {
                    let mut b = pool.get().expect("buffer");
                    assert!(b.fill(&[0u8; 60]));
                    b
                })
                .collect();
            classify_into(&map, &shared, &mut bufs, Nanos(0), pool, |p, _| out.push(p));
            assert!(bufs.is_empty());
        }
        assert_eq!(out.len(), 5);
        assert_eq!((shared.received(FlowId(3)), shared.classified()), (5, 5));
        shared.reset_flow(FlowId(3));
        assert_eq!((shared.received(FlowId(3)), shared.classified()), (0, 5));
    }
}
