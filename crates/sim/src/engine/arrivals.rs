//! Timed source arrivals, earliest first: the queue both the engine and the
//! fluid thread replay their sources through.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A source's next packet: when it arrives, for which flow, how long.
/// Ordered by time, then flow, then length (the order simultaneous
/// arrivals are taken in).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct PendingArrival {
    /// Arrival time, ps.
    pub(super) t_ps: u64,
    /// Flow.
    pub(super) flow: u32,
    /// Bytes.
    pub(super) len: u32,
}

/// Pending arrivals of all timed (non-greedy) sources, earliest first.
#[derive(Debug, Default)]
pub(super) struct ArrivalQueue {
    heap: BinaryHeap<Reverse<PendingArrival>>,
}

impl ArrivalQueue {
    /// Adds an arrival.
    #[inline]
    pub(super) fn push(&mut self, t_ps: u64, flow: u32, len: u32) {
        self.heap.push(Reverse(PendingArrival { t_ps, flow, len }));
    }

    /// Time of the earliest arrival, if any.
    #[inline]
    pub(super) fn next_time(&self) -> Option<u64> {
        self.heap.peek().map(|r| r.0.t_ps)
    }

    /// Takes the earliest arrival.
    #[inline]
    pub(super) fn pop(&mut self) -> Option<PendingArrival> {
        self.heap.pop().map(|r| r.0)
    }
}
