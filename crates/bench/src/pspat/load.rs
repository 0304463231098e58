//! The PSPAT bench's load: paced or greedy generator threads, and the
//! output every architecture transmits into (per-flow counters and the
//! victim's latency histogram).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Result, anyhow};
use hdrhistogram::Histogram;
use pktsched_core::{FlowId, Nanos, Pkt};
use pktsched_runtime::client::Backoff;
use pktsched_runtime::output::Output;
use pktsched_runtime::pspat::Clock;

use super::breakdown::{PartHists, Stamps};

/// Longest a paced generator sleeps before it looks at its stop flag
/// again (a slow rate must not outlive `--duration`).
const MAX_NAP: Duration = Duration::from_millis(1);

/// The output every architecture transmits into: per-flow packet counters
/// the main thread samples (one writer per counter), and the victim's
/// latency histogram.
pub(crate) struct BenchOut {
    pub(crate) counts: Arc<Vec<AtomicU64>>,
    pub(crate) local: Vec<u64>,
    clock: Clock,
    victim: Option<u32>,
    /// Latency is recorded for packets stamped at or after this time.
    from: Nanos,
    pub(crate) hist: Histogram<u64>,
    /// The victim's latency by part (overload phase).
    pub(crate) parts: Option<PartHists>,
}

impl BenchOut {
    pub(crate) fn new(
        flows: usize,
        clock: Clock,
        victim: Option<u32>,
        from: Nanos,
        stamps: Option<&Arc<Stamps>>,
    ) -> Result<BenchOut> {
        Ok(BenchOut {
            counts: Arc::new((0..flows).map(|_| AtomicU64::new(0)).collect()),
            local: vec![0; flows],
            clock,
            victim,
            from,
            hist: Histogram::new(3).map_err(|e| anyhow!("histogram: {e}"))?,
            parts: stamps.map(|s| PartHists::new(s.clone())).transpose()?,
        })
    }
}

impl Output<u64> for BenchOut {
    fn transmit(&mut self, batch: &mut Vec<Pkt<u64>>) {
        let now = if self.victim.is_some() {
            self.clock.now()
        } else {
            Nanos::ZERO
        };
        for p in batch.drain(..) {
            let f = p.flow.0 as usize;
            if let (Some(c), Some(a)) = (self.local.get_mut(f), self.counts.get(f)) {
                *c += 1;
                a.store(*c, Ordering::Relaxed);
            }
            if self.victim == Some(p.flow.0) {
                let measured = p.ts >= self.from;
                if measured {
                    let _ = self.hist.record(now.0.saturating_sub(p.ts.0).max(1));
                }
                if let Some(parts) = &mut self.parts {
                    parts.record(p.item, p.ts.0, now.0, measured);
                }
            }
        }
    }
}

/// Sums per-flow counters of several outputs.
pub(crate) fn sample(outs: &[Arc<Vec<AtomicU64>>], flows: usize) -> Vec<u64> {
    let mut v = vec![0u64; flows];
    for o in outs {
        for (i, c) in o.iter().enumerate().take(flows) {
            v[i] += c.load(Ordering::Relaxed);
        }
    }
    v
}

/// One generator thread's recipe.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Gen {
    pub(crate) flow: FlowId,
    pub(crate) len: u32,
    pub(crate) batch: usize,
    /// Packets per second; `None` = greedy.
    pub(crate) pps: Option<f64>,
    /// Most packets sent at once to catch up after a late wake-up (1 for
    /// the victim: strictly paced).
    pub(crate) burst: u64,
    /// Stamp packets with the clock (only the victim needs it).
    pub(crate) stamp: bool,
    /// The only generator on its core: spin, rather than yield, while the
    /// mailbox is full.
    pub(crate) alone: bool,
    /// Call `send` with nothing to send while waiting to be due, so a
    /// client that transmits its own cleared packets does so while idle.
    pub(crate) poll_idle: bool,
}

/// What a generator did.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct GenDone {
    /// Packets handed over (not counting any still in its hands at stop).
    pub(crate) sent: u64,
}

/// Runs a generator until `stop`; `send` hands over the front of the queue
/// and returns how many it took, or `None` when the runtime refuses.
///
/// A paced generator sends what is due since it started (`pps · t`), in
/// batches of at most `batch`, catching up by at most `burst` packets.
pub(crate) fn generate(
    g: Gen,
    stop: &AtomicBool,
    clock: Clock,
    mut send: impl FnMut(&mut VecDeque<Pkt<u64>>) -> Option<usize>,
) -> GenDone {
    let mut q: VecDeque<Pkt<u64>> = VecDeque::with_capacity(g.batch);
    let mut made = 0u64;
    let mut sent = 0u64;
    let t0 = clock.now().0;
    // Packets owed but skipped because they were more than `burst` late.
    let mut skipped = 0u64;
    let mut full_tries = 0u32;
    let mut backoff = Backoff::new();
    while !stop.load(Ordering::Relaxed) {
        if q.is_empty() {
            let mut n = g.batch as u64;
            if let Some(pps) = g.pps {
                let now = clock.now().0;
                let due = ((now - t0) as f64 * pps / 1e9) as u64;
                let owed = due.saturating_sub(made + skipped);
                if owed == 0 {
                    if g.poll_idle {
                        let _ = send(&mut q);
                    }
                    // Next packet in `wait` ns.
                    let next = t0 + ((made + skipped + 1) as f64 * 1e9 / pps) as u64;
                    let wait = next.saturating_sub(now);
                    if wait > 200_000 {
                        std::thread::sleep(Duration::from_nanos(wait - 100_000).min(MAX_NAP));
                    } else {
                        std::thread::yield_now();
                    }
                    continue;
                }
                if owed > g.burst {
                    skipped += owed - g.burst;
                }
                n = n.min(owed.min(g.burst));
            }
            let ts = if g.stamp { clock.now() } else { Nanos::ZERO };
            for _ in 0..n {
                q.push_back(Pkt::new(g.flow, g.len, ts, made));
                made += 1;
            }
        }
        match send(&mut q) {
            None => break,
            Some(0) => {
                // Full: a client alone on its core waits on the CPU (the
                // arbiter frees a line within a round; a yield would let
                // the mailbox run dry and the two threads then share the
                // line being written); otherwise back off (spin, yield,
                // then sleep) so the arbiter gets the core.
                full_tries += 1;
                if g.alone && full_tries < 64 {
                    for _ in 0..32 {
                        std::hint::spin_loop();
                    }
                } else if g.alone {
                    full_tries = 0;
                    std::thread::yield_now();
                } else {
                    backoff.wait();
                }
            }
            Some(n) => {
                full_tries = 0;
                backoff.reset();
                sent += n as u64;
            }
        }
    }
    GenDone { sent }
}

/// Pins the calling thread when asked.
pub(crate) fn pin(core: Option<usize>) {
    if let Some(id) = core {
        let _ = core_affinity::set_for_current(core_affinity::CoreId { id });
    }
}
