//! The reverse direction (egress → ingress), forwarded untouched and
//! unscheduled so ARP, replies and acknowledgements pass.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use pktsched_io::{BufPool, PacketBuf, PacketIo};

use super::device_stats;
use super::ports::Port;
use super::rx::{PUBLISH_EVERY, RX_BATCH, RX_WAIT};
use super::shared::Shared;

/// Runs until the pipeline stops.
pub(crate) fn reverse_loop<P: PacketIo>(
    mut from: Port<P>,
    mut to: Port<P>,
    shared: Arc<Shared>,
    pool: &'static BufPool,
) {
    let mut bufs: Vec<PacketBuf> = Vec::with_capacity(RX_BATCH);
    let mut published = Instant::now();
    while !shared.stopping() {
        from.wait(RX_WAIT);
        if from.recv(pool, &mut bufs, RX_BATCH) > 0 {
            let sent = to.send(&mut bufs, pool) as u64;
            shared.reverse[0].fetch_add(sent, Ordering::Relaxed);
            shared.reverse[1].fetch_add(bufs.len() as u64, Ordering::Relaxed);
            for b in bufs.drain(..) {
                pool.put(b);
            }
        }
        if published.elapsed() >= PUBLISH_EVERY {
            shared.publish_device(device_stats(&from));
            shared.publish_device(device_stats(&to));
            published = Instant::now();
        }
    }
    shared.publish_device(device_stats(&from));
    shared.publish_device(device_stats(&to));
}
