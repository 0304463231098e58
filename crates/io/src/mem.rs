//! In-memory devices: a [`MemDevice`] receives what a test pushes into its
//! [`MemWire`] and records what it sends, so the pipeline is tested
//! without interfaces. Allocation per frame is fine here.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::{BufPool, IoError, IoStats, PacketBuf, PacketIo};

/// The frames in flight towards a device and those it sent.
#[derive(Debug, Default)]
pub struct Wire {
    /// Frames the device will receive, in order.
    pub inbound: VecDeque<Vec<u8>>,
    /// Frames the device sent, in order.
    pub sent: Vec<Vec<u8>>,
    /// Refuse sends beyond this many (a full peer); `None`: no limit.
    pub send_capacity: Option<usize>,
}

/// A shared handle on a [`Wire`].
pub type MemWire = Arc<Mutex<Wire>>;

/// A device backed by a [`MemWire`].
#[derive(Debug)]
pub struct MemDevice {
    wire: MemWire,
    stats: IoStats,
}

impl MemDevice {
    /// A device and the wire the test drives it with.
    pub fn new() -> (MemDevice, MemWire) {
        let wire = MemWire::default();
        (
            MemDevice {
                wire: wire.clone(),
                stats: IoStats::default(),
            },
            wire,
        )
    }
}

fn lock(w: &MemWire) -> std::sync::MutexGuard<'_, Wire> {
    w.lock().unwrap_or_else(PoisonError::into_inner)
}

impl PacketIo for MemDevice {
    fn recv_batch(
        &mut self,
        pool: &BufPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> Result<usize, IoError> {
        let mut wire = lock(&self.wire);
        let mut n = 0;
        while n < max {
            let Some(frame) = wire.inbound.pop_front() else {
                break;
            };
            let Some(mut buf) = pool.get() else {
                self.stats.rx_no_buffer += 1;
                continue;
            };
            if !buf.fill(&frame) {
                self.stats.rx_oversize += 1;
                pool.put(buf);
                continue;
            }
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += frame.len() as u64;
            out.push(buf);
            n += 1;
        }
        Ok(n)
    }

    fn send_batch(
        &mut self,
        frames: &mut Vec<PacketBuf>,
        pool: &BufPool,
    ) -> Result<usize, IoError> {
        let mut wire = lock(&self.wire);
        let room = wire
            .send_capacity
            .map_or(usize::MAX, |c| c.saturating_sub(wire.sent.len()));
        let n = frames.len().min(room);
        for buf in frames.drain(..n) {
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += buf.len() as u64;
            wire.sent.push(buf.as_slice().to_vec());
            pool.put(buf);
        }
        if !frames.is_empty() {
            self.stats.tx_busy += 1;
        }
        Ok(n)
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), IoError> {
        if lock(&self.wire).inbound.is_empty() {
            std::thread::sleep(timeout.min(Duration::from_millis(1)));
        }
        Ok(())
    }

    fn stats(&self) -> IoStats {
        self.stats
    }
}
