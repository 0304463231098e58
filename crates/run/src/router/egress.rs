//! The router's optional egress policy (`[egress]`): frames forwarded to
//! the egress interface are enqueued by class into a core scheduler (the
//! one `pktsched run` builds from the same class settings, see
//! [`crate::plan::build`]) and released into the transmit batch only as
//! fast as the emulated egress link allows: the runtime's exact-integer
//! [`Link`] at `[egress] rate`, frames counted at their wire length
//! (`overhead`, `mpu`). A frame never leaves before the link has finished
//! the previous one; idle time is no credit. Class `rate`/`ceil` shaping
//! is the scheduler's own (hClock), so [`Egress::next_due`] is the
//! earlier of the link's free time and the scheduler's next eligible time.
//!
//! Frames of the reverse direction and ICMP messages the router builds
//! are not scheduled (they go out in the output batch directly).

use pktsched_core::{Counters, DropReason, FlowId, Nanos, Pkt};
use pktsched_io::PacketBuf;
use pktsched_runtime::BoxedScheduler;
use pktsched_runtime::link::Link;
use serde::Serialize;

use super::egress_config::EgressSection;

/// Most frames one [`Egress::release`] hands over (the rest wait for the
/// next call, at most one poll round later).
pub const MAX_RELEASE: usize = 256;

/// A frame the egress released: its class, its buffer and when its
/// latency started (the kernel's receive when stamped, else when the
/// poller took it).
#[derive(Debug)]
pub struct Released {
    /// Class index.
    pub class: usize,
    /// The frame.
    pub buf: PacketBuf,
    /// When its latency started (ns, monotonic): the kernel's receive
    /// when the frame was stamped, else when the poller took it.
    pub taken: u64,
}

/// The egress scheduler and link.
pub struct Egress {
    sched: BoxedScheduler<PacketBuf>,
    /// `flows[class]`: the class's flow.
    flows: Vec<FlowId>,
    /// Class index by flow index.
    class_of: Vec<usize>,
    link: Link,
    overhead: u32,
    mpu: u32,
    /// Times a backlog was held back because the link was still busy
    /// (once per frame that had to wait).
    overlimits: u64,
    held: bool,
    algorithm: &'static str,
}

impl std::fmt::Debug for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Egress")
            .field("sched", &self.sched.name())
            .field("rate", &self.link.rate())
            .finish_non_exhaustive()
    }
}

/// One class's egress counters as published.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct EgressClassSnapshot {
    /// The class name.
    pub name: String,
    /// Frames and bytes (wire length) the scheduler released.
    pub sent_packets: u64,
    /// Wire bytes released.
    pub sent_bytes: u64,
    /// Frames refused because the class's queue was full (`limit`).
    pub dropped_queue_full: u64,
    /// Frames waiting in the class's queue now.
    pub backlog_packets: u64,
    /// Wire bytes waiting now.
    pub backlog_bytes: u64,
    /// Times the class's `ceil` held back a backlogged frame.
    pub overlimits: u64,
}

/// The egress as published.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct EgressSnapshot {
    /// The scheduler.
    pub algorithm: String,
    /// The link rate, bits per second.
    pub rate_bps: u64,
    /// Times the link rate held back a backlogged frame.
    pub overlimits: u64,
    /// Per class in `[[class]]` order.
    pub classes: Vec<EgressClassSnapshot>,
}

impl Egress {
    /// The egress of `cfg` (its classes in the route's class order).
    pub fn new(cfg: &EgressSection) -> Result<Egress, String> {
        let run = cfg.as_run_config("ingress", "egress");
        let plan = crate::plan::build::<PacketBuf>(&run).map_err(|e| format!("[egress]: {e}"))?;
        let mut class_of = Vec::new();
        for (class, f) in plan.flows.iter().enumerate() {
            if class_of.len() <= f.index() {
                class_of.resize(f.index() + 1, usize::MAX);
            }
            class_of[f.index()] = class;
        }
        Ok(Egress {
            sched: plan.sched,
            flows: plan.flows,
            class_of,
            link: Link::new(cfg.rate),
            overhead: cfg.overhead,
            mpu: cfg.mpu,
            overlimits: 0,
            held: false,
            algorithm: cfg.algorithm.name(),
        })
    }

    /// Queues `buf` (its latency started at `taken`) for `class` at `now`;
    /// a refused frame comes back with the reason.
    pub fn enqueue(
        &mut self,
        class: usize,
        buf: PacketBuf,
        taken: u64,
        now: Nanos,
    ) -> Result<(), (PacketBuf, DropReason)> {
        let Some(&flow) = self.flows.get(class) else {
            return Err((buf, DropReason::UnknownFlow));
        };
        if self.sched.backlog().pkts == 0 {
            // The link was idle until now: no credit for the idle time.
            self.link.idle(now);
        }
        let len = (buf.len() as u32 + self.overhead).max(self.mpu);
        self.sched
            .enqueue(Pkt::new(flow, len, Nanos(taken), buf), now)
            .map_err(|r| (r.pkt.item, r.reason))
    }

    /// Moves into `out` what the link allows by `now` (at most
    /// [`MAX_RELEASE`] frames); returns how many.
    pub fn release(&mut self, now: Nanos, out: &mut Vec<Released>) -> usize {
        self.release_at_most(now, out, MAX_RELEASE)
    }

    /// [`Egress::release`], at most `max` frames (a transmit batch's room:
    /// a frame the link has been charged for should find a place in the
    /// device's next send).
    pub fn release_at_most(&mut self, now: Nanos, out: &mut Vec<Released>, max: usize) -> usize {
        let mut n = 0;
        while n < max.min(MAX_RELEASE) {
            if self.sched.backlog().pkts == 0 {
                self.link.idle(now);
                break;
            }
            if !self.link.ready(now) {
                if !self.held {
                    self.overlimits += 1;
                    self.held = true;
                }
                break;
            }
            let Some(p) = self.sched.dequeue(now) else {
                // Every backlogged class is above its ceil: the link idles.
                self.link.idle(now);
                break;
            };
            self.held = false;
            self.link.send(p.len);
            let class = self.class_of.get(p.flow.index()).copied().unwrap_or(0);
            out.push(Released {
                class,
                buf: p.item,
                taken: p.ts.0,
            });
            n += 1;
        }
        n
    }

    /// When the next frame may leave (`None`: nothing queued). At or
    /// before `now` means a frame may leave now.
    pub fn next_due(&self, now: Nanos) -> Option<Nanos> {
        if self.sched.backlog().pkts == 0 {
            return None;
        }
        let link = self.link.free_at();
        if link > now {
            return Some(link);
        }
        Some(self.sched.next_ready(now).unwrap_or(now).max(link))
    }

    /// Frames queued, all classes.
    pub fn backlog_packets(&self) -> u64 {
        self.sched.backlog().pkts
    }

    /// The class's scheduler counters.
    pub fn class_counters(&self, class: usize) -> Counters {
        self.flows
            .get(class)
            .and_then(|&f| self.sched.flow_stats(f))
            .unwrap_or_default()
    }

    /// The published view; `names[i]` is class `i`'s name.
    pub fn snapshot(&self, names: &[String]) -> EgressSnapshot {
        let classes = (0..self.flows.len())
            .map(|i| {
                let c = self.class_counters(i);
                EgressClassSnapshot {
                    name: names.get(i).cloned().unwrap_or_default(),
                    sent_packets: c.dequeued.pkts,
                    sent_bytes: c.dequeued.bytes,
                    dropped_queue_full: c.dropped(DropReason::QueueFull).pkts,
                    backlog_packets: c.backlog.pkts,
                    backlog_bytes: c.backlog.bytes,
                    overlimits: c.overlimits,
                }
            })
            .collect();
        EgressSnapshot {
            algorithm: self.algorithm.to_string(),
            rate_bps: self.link.rate().as_bps(),
            overlimits: self.overlimits,
            classes,
        }
    }
}

impl EgressSnapshot {
    /// Human-readable lines (tc -s words: sent, dropped, overlimits,
    /// backlog).
    pub fn text(&self) -> String {
        let mut s = format!(
            "egress: {} at {} bit/s, link overlimits {}\n",
            self.algorithm, self.rate_bps, self.overlimits
        );
        for c in &self.classes {
            s += &format!(
                "egress class {}: sent {} bytes {} pkt (dropped {}, overlimits {}) backlog {}b {}p\n",
                c.name,
                c.sent_bytes,
                c.sent_packets,
                c.dropped_queue_full,
                c.overlimits,
                c.backlog_bytes,
                c.backlog_packets
            );
        }
        s
    }
}
