//! The `tc` architecture, as the baseline PSPAT is measured against: one
//! scheduler behind one lock; every sending thread takes the lock, enqueues,
//! and then runs the scheduler itself, releasing packets while the emulated
//! link is idle (Linux's `qdisc_run` under the qdisc lock).
//!
//! Same scheduler, same [`Link`] emulation, same [`Output`] and same
//! [`Config`] as the PSPAT runtime ([`crate::pspat`]), so a benchmark
//! compares architectures, not algorithms. It depends only on
//! [`crate::config`], not on the PSPAT client, arbiter or driver.

use std::sync::{Arc, Mutex, PoisonError};

use pktsched_core::{Counters, DropReason, Pkt};

use crate::config::{BoxedScheduler, Clock, Config, RuntimeError, Sent, StopMode};
use crate::link::Link;
use crate::output::Output;

struct Inner<T, O> {
    sched: BoxedScheduler<T>,
    link: Link,
    out: O,
    batch: Vec<Pkt<T>>,
    round_cap: usize,
    decisions: u64,
    /// Per client: drops by reason (queue_full, too_large, unknown_flow).
    dropped: Vec<[u64; 3]>,
}

/// The locked scheduler shared by its clients.
pub struct Locked<T, O> {
    inner: Arc<Mutex<Inner<T, O>>>,
    clock: Clock,
}

impl<T, O> std::fmt::Debug for Locked<T, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locked").finish_non_exhaustive()
    }
}

/// One sending thread's handle.
pub struct LockedClient<T, O> {
    id: usize,
    inner: Arc<Mutex<Inner<T, O>>>,
    clock: Clock,
    /// Times the lock was already taken when this client wanted it.
    pub contended: u64,
    /// Packets handed to `send`.
    pub sent: u64,
}

impl<T, O> std::fmt::Debug for LockedClient<T, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockedClient")
            .field("id", &self.id)
            .field("sent", &self.sent)
            .field("contended", &self.contended)
            .finish_non_exhaustive()
    }
}

/// Where every packet went (`sent = enqueued + dropped`,
/// `enqueued = decisions + flushed + returned`).
#[derive(Debug)]
pub struct LockedReport<T, O> {
    /// Packets released to the output while running.
    pub decisions: u64,
    /// Per client: drops by reason (queue_full, too_large, unknown_flow).
    pub dropped: Vec<[u64; 3]>,
    /// The scheduler's counters.
    pub sched: Counters,
    /// Packets sent at stop, ignoring the link.
    pub flushed: u64,
    /// Packets handed back at stop.
    pub returned: Vec<Pkt<T>>,
    /// The output.
    pub output: O,
}

impl<T: Send + 'static, O: Output<T>> Locked<T, O> {
    /// A locked scheduler on the link of `cfg` (only `link` and `round_cap`
    /// are used).
    pub fn new(
        cfg: &Config,
        sched: BoxedScheduler<T>,
        out: O,
        clock: Clock,
    ) -> Result<Self, RuntimeError> {
        cfg.validate()?;
        Ok(Locked {
            inner: Arc::new(Mutex::new(Inner {
                sched,
                link: Link::new(cfg.link),
                out,
                batch: Vec::with_capacity(cfg.round_cap),
                round_cap: cfg.round_cap,
                decisions: 0,
                dropped: Vec::new(),
            })),
            clock,
        })
    }

    /// A new client handle.
    pub fn client(&self) -> LockedClient<T, O> {
        let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let id = g.dropped.len();
        g.dropped.push([0; 3]);
        LockedClient {
            id,
            inner: self.inner.clone(),
            clock: self.clock,
            contended: 0,
            sent: 0,
        }
    }

    /// Stops: sends (ignoring the link) or returns what is queued.
    pub fn stop(self, mode: StopMode) -> Result<LockedReport<T, O>, RuntimeError> {
        let inner = Arc::try_unwrap(self.inner).map_err(|_| {
            RuntimeError::Thread("locked scheduler stopped while clients still exist".into())
        })?;
        let mut g = inner.into_inner().unwrap_or_else(PoisonError::into_inner);
        let now = self.clock.now();
        let mut flushed = 0;
        let mut returned = Vec::new();
        while let Some(p) = g.sched.dequeue(now) {
            match mode {
                StopMode::Drain => {
                    flushed += 1;
                    g.batch.push(p);
                }
                StopMode::Return => returned.push(p),
            }
        }
        let Inner {
            sched,
            mut out,
            mut batch,
            decisions,
            dropped,
            ..
        } = g;
        out.transmit(&mut batch);
        Ok(LockedReport {
            decisions,
            dropped,
            sched: sched.stats(),
            flushed,
            returned,
            output: out,
        })
    }
}

impl<T: Send + 'static, O: Output<T>> LockedClient<T, O> {
    /// This client's id.
    pub fn id(&self) -> usize {
        self.id
    }

    /// Takes the lock, enqueues `pkt`, and releases what the link allows.
    /// `Sent::Backpressure` means the scheduler dropped this packet
    /// (counted per client and reason).
    pub fn send(&mut self, pkt: Pkt<T>) -> Sent {
        if self.enqueue_locked(std::iter::once(pkt)) > 0 {
            Sent::Backpressure
        } else {
            Sent::Queued
        }
    }

    /// Takes the lock once for every packet of `pkts` (emptying it),
    /// enqueues them, and releases what the link allows; returns how many
    /// the scheduler dropped (counted per client and reason).
    pub fn send_batch(&mut self, pkts: &mut Vec<Pkt<T>>) -> usize {
        self.enqueue_locked(pkts.drain(..))
    }

    fn enqueue_locked(&mut self, pkts: impl ExactSizeIterator<Item = Pkt<T>>) -> usize {
        self.sent += pkts.len() as u64;
        let mut g = match self.inner.try_lock() {
            Ok(g) => g,
            Err(_) => {
                self.contended += 1;
                self.inner.lock().unwrap_or_else(PoisonError::into_inner)
            }
        };
        let now = self.clock.now();
        let g = &mut *g;
        let mut dropped = 0;
        for pkt in pkts {
            if let Err(rej) = g.sched.enqueue(pkt, now) {
                let i = match rej.reason {
                    DropReason::QueueFull | DropReason::Removed => 0,
                    DropReason::TooLarge => 1,
                    DropReason::UnknownFlow => 2,
                };
                if let Some(d) = g.dropped.get_mut(self.id) {
                    d[i] += 1;
                }
                dropped += 1;
            }
        }
        let mut n = 0;
        while n < g.round_cap && g.link.ready(now) {
            match g.sched.dequeue(now) {
                Some(p) => {
                    g.link.send(p.len);
                    g.batch.push(p);
                    n += 1;
                }
                None => {
                    g.link.idle(now);
                    break;
                }
            }
        }
        g.decisions += n as u64;
        if !g.batch.is_empty() {
            g.out.transmit(&mut g.batch);
            g.batch.clear();
        }
        dropped
    }
}
