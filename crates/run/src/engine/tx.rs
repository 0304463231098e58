//! The egress: the runtime's [`Output`] for real frames. It records each
//! frame's sojourn time (received → handed to the device) per flow and
//! sends the batch; frames the device will not take after its retries are
//! dropped, their buffers returned, and counted per flow as `tx_failed`.

use hdrhistogram::Histogram;
use pktsched_core::Pkt;
use pktsched_io::{BufPool, PacketBuf, PacketIo};
use pktsched_runtime::{Clock, Output};

use super::ports::Port;
use crate::frame::Frame;
use crate::stats::SOJOURN_BUCKETS_S;

/// Per-flow sojourn times and transmit failures.
#[derive(Debug, Default)]
pub(crate) struct FlowTx {
    pub(crate) sojourn: Option<Histogram<u64>>,
    pub(crate) sojourn_sum_ns: u128,
    pub(crate) tx_failed: u64,
}

impl FlowTx {
    fn record(&mut self, ns: u64) {
        let h = self.sojourn.get_or_insert_with(|| {
            // 1 ns .. 100 s, two significant digits: a few KiB per class.
            Histogram::new_with_bounds(1, 100_000_000_000, 2).unwrap_or_else(|_| {
                Histogram::new(2).unwrap_or_else(|_| unreachable!("2 significant digits is valid"))
            })
        });
        let _ = h.record(ns.max(1));
        self.sojourn_sum_ns += u128::from(ns);
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

/// The egress device as the arbiter's output.
#[derive(Debug)]
pub(crate) struct TxOutput<P> {
    pub(crate) port: Port<P>,
    pool: &'static BufPool,
    clock: Clock,
    bufs: Vec<PacketBuf>,
    flow_of: Vec<usize>,
    /// Indexed by `FlowId::index`.
    pub(crate) flows: Vec<FlowTx>,
}

impl<P> TxOutput<P> {
    pub(crate) fn new(port: Port<P>, pool: &'static BufPool, clock: Clock) -> TxOutput<P> {
        TxOutput {
            port,
            pool,
            clock,
            bufs: Vec::with_capacity(512),
            flow_of: Vec::with_capacity(512),
            flows: Vec::new(),
        }
    }

    pub(crate) fn flow(&self, index: usize) -> Option<&FlowTx> {
        self.flows.get(index)
    }

    fn flow_mut(&mut self, index: usize) -> &mut FlowTx {
        if self.flows.len() <= index {
            self.flows.resize_with(index + 1, FlowTx::default);
        }
        &mut self.flows[index]
    }
}

impl<P: PacketIo + Send + 'static> Output<Frame> for TxOutput<P> {
    fn transmit(&mut self, batch: &mut Vec<Pkt<Frame>>) {
        let now = self.clock.now();
        for pkt in batch.drain(..) {
            let flow = pkt.flow.index();
            let ns = now.0.saturating_sub(pkt.ts.0);
            self.flow_mut(flow).record(ns);
            if let Some(buf) = pkt.item.into_buf() {
                self.bufs.push(buf);
                self.flow_of.push(flow);
            }
        }
        let sent = self.port.send(&mut self.bufs, self.pool);
        let failed: Vec<usize> = self.flow_of.drain(..).skip(sent).collect();
        for flow in failed {
            self.flow_mut(flow).tx_failed += 1;
        }
        for buf in self.bufs.drain(..) {
            self.pool.put(buf);
        }
    }
}
