//! The egress: the runtime's [`Output`] for real frames. It records per
//! flow each frame's sojourn time (taken from the device → released to
//! the egress) and, for frames the kernel stamped at receive
//! ([`PacketBuf::rx_ns`]: the XDP program's metadata, the AF_PACKET ring
//! header), the split of the rest: `ring_wait` (kernel receive → taken
//! from the device) and `latency` (kernel receive → released to the
//! egress); it sends; frames the device will not take after its retries are dropped,
//! their buffers returned, and counted per flow as `tx_failed`.
//!
//! Kick moderation: each send is a TX kick (`sendto` on AF_XDP), so
//! released frames wait here until [`KICK_BATCH`] of them are waiting or
//! a pass of the engine's loop releases nothing ([`TxOutput::flush`]):
//! frames released back to back share a kick, and a frame waits only
//! while the frames after it are released (the link's pacing is kept:
//! under load too, a pass with nothing due sends what waits). The
//! engine reaches the output only through `&` (the arbiter owns it), so
//! the waiting frames and the port are in a `RefCell`, borrowed by one
//! thread only.

use std::cell::RefCell;

use hdrhistogram::Histogram;
use pktsched_core::Pkt;
use pktsched_io::{BufPool, PacketBuf, PacketIo};
use pktsched_runtime::{Clock, Output};

use super::ports::Port;
use crate::frame::Frame;
use crate::sent::Handed;
use crate::stats::SOJOURN_BUCKETS_S;

/// Released frames kept for one send (one kick) at most.
pub(crate) const KICK_BATCH: usize = 32;

/// Per-flow sojourn times, and the kernel-receive split of stamped frames.
#[derive(Debug, Default)]
pub(crate) struct FlowTx {
    pub(crate) sojourn: Option<Histogram<u64>>,
    pub(crate) sojourn_sum_ns: u128,
    /// Kernel receive → taken from the device (stamped frames).
    pub(crate) ring_wait: Option<Histogram<u64>>,
    /// Kernel receive → released to the egress (stamped frames).
    pub(crate) latency: Option<Histogram<u64>>,
}

/// 1 ns .. 100 s, two significant digits: a few KiB per class.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 2).unwrap_or_else(|_| {
        Histogram::new(2).unwrap_or_else(|_| unreachable!("2 significant digits is valid"))
    })
}

fn record_in(h: &mut Option<Histogram<u64>>, ns: u64) {
    let _ = h.get_or_insert_with(histogram).record(ns.max(1));
}

/// Quantile `q` of `h` in µs (0 when empty).
fn quantile_us(h: &Option<Histogram<u64>>, q: f64) -> f64 {
    h.as_ref()
        .filter(|h| !h.is_empty())
        .map_or(0.0, |h| h.value_at_quantile(q) as f64 / 1e3)
}

/// A flow's kernel-receive split: how many frames had a receive stamp and
/// the p50 / p99 / p999 (µs) of their ring wait and latency.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct RxSplit {
    pub(crate) stamped: u64,
    pub(crate) ring_wait_us: [f64; 3],
    pub(crate) latency_us: [f64; 3],
}

const SPLIT_QUANTILES: [f64; 3] = [0.5, 0.99, 0.999];

impl FlowTx {
    fn record(&mut self, ns: u64) {
        record_in(&mut self.sojourn, ns);
        self.sojourn_sum_ns += u128::from(ns);
    }

    /// A frame the kernel received at `rx` (runtime clock), taken from
    /// the device at `taken` and released at `now`.
    fn record_rx(&mut self, rx: u64, taken: u64, now: u64) {
        record_in(&mut self.ring_wait, taken.saturating_sub(rx));
        record_in(&mut self.latency, now.saturating_sub(rx));
    }

    /// The kernel-receive split.
    pub(crate) fn rx_split(&self) -> RxSplit {
        RxSplit {
            stamped: self.latency.as_ref().map_or(0, |h| h.len()),
            ring_wait_us: SPLIT_QUANTILES.map(|q| quantile_us(&self.ring_wait, q)),
            latency_us: SPLIT_QUANTILES.map(|q| quantile_us(&self.latency, q)),
        }
    }

    /// p50, p99 (µs), cumulative counts at the buckets, count, sum (s).
    pub(crate) fn summary(&self) -> (f64, f64, Vec<u64>, u64, f64) {
        let Some(h) = &self.sojourn else {
            return (0.0, 0.0, vec![0; SOJOURN_BUCKETS_S.len()], 0, 0.0);
        };
        let buckets = SOJOURN_BUCKETS_S
            .iter()
            .map(|&le| h.count_between(0, (le * 1e9) as u64))
            .collect();
        (
            h.value_at_quantile(0.5) as f64 / 1e3,
            h.value_at_quantile(0.99) as f64 / 1e3,
            buckets,
            h.len(),
            self.sojourn_sum_ns as f64 / 1e9,
        )
    }
}

/// The port and the frames waiting for it.
#[derive(Debug)]
pub(crate) struct TxQueue<P> {
    pub(crate) port: Port<P>,
    bufs: Vec<PacketBuf>,
    flow_of: Vec<usize>,
    /// The buffers of the batch being sent, to tell which the device left.
    handed: Handed,
    /// Frames of each flow the device did not take (`FlowId::index`).
    failed: Vec<u64>,
    /// Sends (kicks) made, wherever they were made.
    pub(crate) sends: u64,
    /// Frames those sends handed to the device and it took.
    pub(crate) sent_frames: u64,
}

/// The egress device as the arbiter's output.
#[derive(Debug)]
pub(crate) struct TxOutput<P> {
    pub(crate) tx: RefCell<TxQueue<P>>,
    pool: &'static BufPool,
    clock: Clock,
    /// CLOCK_MONOTONIC (the kernel's receive stamps) at `clock`'s zero.
    clock_origin_ns: u64,
    /// Indexed by `FlowId::index`.
    pub(crate) flows: Vec<FlowTx>,
}

impl<P> TxOutput<P> {
    pub(crate) fn new(port: Port<P>, pool: &'static BufPool, clock: Clock) -> TxOutput<P> {
        TxOutput {
            tx: RefCell::new(TxQueue {
                port,
                bufs: Vec::with_capacity(512),
                flow_of: Vec::with_capacity(512),
                handed: Handed::with_capacity(512),
                failed: Vec::new(),
                sends: 0,
                sent_frames: 0,
            }),
            pool,
            clock_origin_ns: pktsched_io::clock::monotonic_ns().saturating_sub(clock.now().0),
            clock,
            flows: Vec::new(),
        }
    }

    pub(crate) fn flow(&self, index: usize) -> Option<&FlowTx> {
        self.flows.get(index)
    }

    /// Kicks made (every send: between passes and at [`KICK_BATCH`]
    /// waiting frames) and the frames the device took from them.
    pub(crate) fn kicks(&self) -> (u64, u64) {
        let tx = self.tx.borrow();
        (tx.sends, tx.sent_frames)
    }

    /// Frames of flow `index` the device did not take.
    pub(crate) fn tx_failed(&self, index: usize) -> u64 {
        self.tx.borrow().failed.get(index).copied().unwrap_or(0)
    }

    fn flow_mut(&mut self, index: usize) -> &mut FlowTx {
        if self.flows.len() <= index {
            self.flows.resize_with(index + 1, FlowTx::default);
        }
        &mut self.flows[index]
    }
}

impl<P: PacketIo> TxOutput<P> {
    /// Sends every waiting frame (one kick); what the device refuses is
    /// dropped and counted per flow. Returns the frames handed to the
    /// device (sent or refused).
    pub(crate) fn flush(&self) -> usize {
        let mut tx = self.tx.borrow_mut();
        if tx.bufs.is_empty() {
            return 0;
        }
        let q = &mut *tx;
        let handed = q.bufs.len();
        q.sends += 1;
        q.handed.note(&q.bufs);
        let sent = q.port.send(&mut q.bufs, self.pool);
        q.sent_frames += sent as u64;
        // What the device left may sit anywhere in the batch (a frame too
        // long for its slot stays while the rest go).
        for (flow, ok) in q.flow_of.drain(..).zip(q.handed.sent(&q.bufs)) {
            if ok {
                continue;
            }
            if q.failed.len() <= flow {
                q.failed.resize(flow + 1, 0);
            }
            q.failed[flow] += 1;
        }
        for buf in q.bufs.drain(..) {
            self.pool.put(buf);
        }
        handed
    }
}

impl<P: PacketIo + Send + 'static> Output<Frame> for TxOutput<P> {
    fn transmit(&mut self, batch: &mut Vec<Pkt<Frame>>) {
        let now = self.clock.now();
        let mut waiting = 0;
        for pkt in batch.drain(..) {
            let flow = pkt.flow.index();
            let ns = now.0.saturating_sub(pkt.ts.0);
            let origin = self.clock_origin_ns;
            let f = self.flow_mut(flow);
            f.record(ns);
            let Some(buf) = pkt.item.into_buf() else {
                continue;
            };
            if buf.rx_ns() != 0 {
                f.record_rx(buf.rx_ns().saturating_sub(origin), pkt.ts.0, now.0);
            }
            let tx = self.tx.get_mut();
            tx.bufs.push(buf);
            tx.flow_of.push(flow);
            waiting = tx.bufs.len();
        }
        if waiting >= KICK_BATCH {
            let _ = self.flush();
        }
    }
}

impl<P> Drop for TxOutput<P> {
    fn drop(&mut self) {
        // Frames still waiting go back to the pool (the engines flush
        // before they stop; this only keeps the buffers).
        for buf in self.tx.get_mut().bufs.drain(..) {
            self.pool.put(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use pktsched_core::{FlowId, Nanos, Pkt};
    use pktsched_io::{BufPool, IoError, IoStats, PacketBuf, PacketIo};
    use pktsched_runtime::{Clock, Output};

    use super::{KICK_BATCH, TxOutput};
    use crate::engine::ports::Port;
    use crate::frame::Frame;

    /// A device that takes every frame (or none, `refuse_all`) and counts
    /// its sends (kicks) and the frames it took.
    #[derive(Debug, Default)]
    struct Counting {
        sends: usize,
        frames: usize,
        refuse_all: bool,
        /// Frames longer stay unsent, in place; the others go.
        max_len: Option<usize>,
    }

    impl PacketIo for Counting {
        fn recv_batch(
            &mut self,
            _: &BufPool,
            _: &mut Vec<PacketBuf>,
            _: usize,
        ) -> Result<usize, IoError> {
            Ok(0)
        }
        fn send_batch(
            &mut self,
            frames: &mut Vec<PacketBuf>,
            pool: &BufPool,
        ) -> Result<usize, IoError> {
            self.sends += 1;
            if self.refuse_all {
                return Ok(0);
            }
            if let Some(max) = self.max_len {
                let (mut kept, mut n) = (Vec::new(), 0);
                for b in frames.drain(..) {
                    if b.len() > max {
                        kept.push(b);
                    } else {
                        n += 1;
                        pool.put(b);
                    }
                }
                *frames = kept;
                self.frames += n;
                return Ok(n);
            }
            let n = frames.len();
            self.frames += n;
            for b in frames.drain(..) {
                pool.put(b);
            }
            Ok(n)
        }
        fn wait(&mut self, _: Duration) -> Result<(), IoError> {
            Ok(())
        }
        fn stats(&self) -> IoStats {
            IoStats::default()
        }
    }

    fn batch(pool: &'static BufPool, n: usize, flow: u32) -> Vec<Pkt<Frame>> {
        (0..n)
            .map(|_| {
                let mut b = pool.get().expect("buffer");
                assert!(b.fill(&[0u8; 60]));
                Pkt::new(FlowId(flow), 60, Nanos(0), Frame::new(b, pool))
            })
            .collect()
    }

    fn output(pool: &'static BufPool, dev: Counting) -> TxOutput<Counting> {
        TxOutput::new(Port::new(dev, "t0", "tx"), pool, Clock::new())
    }

    #[test]
    fn released_frames_wait_for_a_full_batch_or_a_flush_one_send_each() {
        let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(256, 2048).expect("pool")));
        let mut out = output(pool, Counting::default());
        for _ in 0..3 {
            out.transmit(&mut batch(pool, 5, 0));
        }
        assert_eq!(out.tx.borrow().port.io.sends, 0, "15 frames wait");
        out.flush();
        out.flush();
        let (sends, frames) = {
            let t = out.tx.borrow();
            (t.port.io.sends, t.port.io.frames)
        };
        assert_eq!((sends, frames), (1, 15), "one kick for the three rounds");
        out.transmit(&mut batch(pool, KICK_BATCH, 1));
        assert_eq!(
            out.tx.borrow().port.io.sends,
            2,
            "a full batch goes at once"
        );
        assert_eq!(out.tx.borrow().port.io.frames, 15 + KICK_BATCH);
        assert_eq!(
            out.kicks(),
            (2, 15 + KICK_BATCH as u64),
            "the kick at a full batch is counted too"
        );
        assert_eq!(pool.stats().free, 256, "every buffer is back");
    }

    #[test]
    fn frames_the_device_refuses_are_counted_per_flow_at_the_flush() {
        let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(64, 2048).expect("pool")));
        let dev = Counting {
            refuse_all: true,
            ..Counting::default()
        };
        let mut out = output(pool, dev);
        out.transmit(&mut batch(pool, 3, 2));
        out.transmit(&mut batch(pool, 2, 0));
        assert_eq!((out.tx_failed(2), out.tx_failed(0)), (0, 0));
        out.flush();
        assert_eq!(
            (out.tx_failed(2), out.tx_failed(0), out.tx_failed(1)),
            (3, 2, 0)
        );
        assert_eq!(
            out.kicks(),
            (1, 0),
            "a kick the device refused sent nothing"
        );
        assert_eq!(pool.stats().free, 64);
    }

    #[test]
    fn a_frame_the_device_leaves_mid_batch_is_counted_for_its_own_flow() {
        let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(64, 2048).expect("pool")));
        let dev = Counting {
            max_len: Some(500),
            ..Counting::default()
        };
        let mut out = output(pool, dev);
        let mut b = pool.get().expect("buffer");
        assert!(b.fill(&[0u8; 1000]));
        let long = Pkt::new(FlowId(1), 1000, Nanos(0), Frame::new(b, pool));
        let mut frames = batch(pool, 2, 0);
        frames.push(long);
        frames.extend(batch(pool, 2, 2));
        out.transmit(&mut frames);
        out.flush();
        assert_eq!(
            (out.tx_failed(0), out.tx_failed(1), out.tx_failed(2)),
            (0, 1, 0),
            "the long frame's flow, not the batch's last"
        );
        assert_eq!(out.kicks(), (1, 4), "the frames behind it went");
        assert_eq!(pool.stats().free, 64, "every buffer is back");
    }

    #[test]
    fn stamped_frames_split_into_ring_wait_and_latency_unstamped_ones_do_not() {
        let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(64, 2048).expect("pool")));
        let mut out = output(pool, Counting::default());
        // Received by the kernel at 1 µs on the engine's clock, taken from
        // the device at 5 µs: 4 µs in the ring.
        let mut b = pool.get().expect("buffer");
        assert!(b.fill(&[0u8; 60]));
        b.set_rx_ns(out.clock_origin_ns + 1_000);
        let stamped = Pkt::new(FlowId(1), 60, Nanos(5_000), Frame::new(b, pool));
        let mut batch_ = vec![stamped];
        batch_.extend(batch(pool, 2, 1)); // no stamp
        // Released after it was taken: the output's clock is past 5 µs.
        std::thread::sleep(Duration::from_micros(10));
        out.transmit(&mut batch_);
        let flow = out.flow(1).expect("flow 1");
        let split = flow.rx_split();
        assert_eq!(split.stamped, 1, "only the stamped frame is split");
        // Two significant digits: 4 µs reads back within 1 %.
        for w in split.ring_wait_us {
            assert!((4.0..=4.04).contains(&w), "{split:?}");
        }
        assert!(split.latency_us[0] >= 4.0, "{split:?}");
        assert_eq!(flow.summary().3, 3, "every frame has a sojourn");
        out.flush();
    }
}
