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
    /// Frames longer than this are left unsent in the batch, in order,
    /// and counted `tx_oversize` and `tx_failed`, while the frames behind
    /// them still go (a transmit slot too short, as the real rings treat
    /// it); `None`: no limit.
    pub send_max_len: Option<usize>,
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
        let mut room = wire
            .send_capacity
            .map_or(usize::MAX, |c| c.saturating_sub(wire.sent.len()));
        let max_len = wire.send_max_len.unwrap_or(usize::MAX);
        let (mut left, mut n, mut full) = (Vec::new(), 0, false);
        for buf in frames.drain(..) {
            if buf.len() > max_len {
                self.stats.tx_oversize += 1;
                self.stats.tx_failed += 1;
                left.push(buf);
            } else if room == 0 {
                full = true;
                left.push(buf);
            } else {
                room -= 1;
                n += 1;
                self.stats.tx_packets += 1;
                self.stats.tx_bytes += buf.len() as u64;
                wire.sent.push(buf.as_slice().to_vec());
                pool.put(buf);
            }
        }
        *frames = left;
        if full {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame longer than the slot stays, counted, and the frames behind
    /// it still go until the peer is full; what stays keeps its order.
    #[test]
    fn long_frames_and_a_full_peer_leave_frames_in_order() {
        let pool = BufPool::new(8, 2048).expect("pool");
        let (mut device, wire) = MemDevice::new();
        {
            let mut w = lock(&wire);
            w.send_max_len = Some(500);
            w.send_capacity = Some(2);
        }
        let mut frames = Vec::new();
        for len in [100, 900, 200, 300] {
            let mut b = pool.get().expect("buffer");
            assert!(b.fill(&vec![len as u8; len]));
            frames.push(b);
        }
        assert_eq!(device.send_batch(&mut frames, &pool).expect("send"), 2);
        let left: Vec<usize> = frames.iter().map(PacketBuf::len).collect();
        assert_eq!(left, [900, 300]);
        let sent: Vec<usize> = lock(&wire).sent.iter().map(Vec::len).collect();
        assert_eq!(sent, [100, 200]);
        let s = device.stats();
        assert_eq!(
            (s.tx_packets, s.tx_oversize, s.tx_failed, s.tx_busy),
            (2, 1, 1, 1)
        );
        for b in frames {
            pool.put(b);
        }
        assert_eq!(pool.stats().free, 8);
    }
}
