//! The router's counters: per receive ring (what the kernel and the
//! poller saw), per class (received, forwarded, dropped by reason, still
//! queued, latency from the poller's receive to the transmit), and the
//! measured per-packet service time `x`. Text, JSON and Prometheus.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;
use pktsched_core::route::forward::DropReason;
use serde::Serialize;

/// Why a received frame was not forwarded: the core forwarding step's
/// reasons, then the router's own.
pub const REASONS: [&str; 16] = [
    "truncated",
    "not_ip",
    "bad_version",
    "bad_ihl",
    "bad_total_length",
    "bad_checksum",
    "fragment",
    "ipv6_ext_header",
    "acl_denied",
    "no_route",
    "ttl_expired",
    "no_neighbour",
    "tx_failed",
    "other_host",
    "queue_full",
    "egress_refused",
];
/// Index of `ttl_expired` in [`REASONS`].
pub const TTL_EXPIRED: usize = 10;
/// Index of `no_neighbour`.
pub const NO_NEIGHBOUR: usize = 11;
/// Index of `tx_failed`.
pub const TX_FAILED: usize = 12;
/// Index of `other_host`: the destination MAC is not the receiving
/// interface's (broadcast and multicast included: the router answers no
/// ARP or ND and forwards no multicast).
pub const OTHER_HOST: usize = 13;
/// Index of `queue_full`: the class's egress queue was at its `limit`.
pub const QUEUE_FULL: usize = 14;
/// Index of `egress_refused`: the egress scheduler refused the frame for
/// another reason (longer than the egress's largest frame).
pub const EGRESS_REFUSED: usize = 15;

/// The [`REASONS`] index of a core drop reason.
pub fn reason_index(r: DropReason) -> usize {
    DropReason::ALL.iter().position(|x| *x == r).unwrap_or(0)
}

/// Counters of one class (or of the reverse direction), kept by the
/// poller thread.
#[derive(Debug)]
pub struct ClassAcc {
    /// Frames taken from a ring for this class.
    pub received: u64,
    /// Frames sent.
    pub forwarded: u64,
    /// Drops by [`REASONS`] index.
    pub drops: [u64; REASONS.len()],
    /// Frames taken but not yet sent or dropped.
    pub queued: u64,
    /// Receive → transmit, ns.
    pub latency: Histogram<u64>,
}

impl ClassAcc {
    /// Zero counters; latencies from 1 ns to 100 s, 3 significant digits.
    pub fn new() -> ClassAcc {
        ClassAcc {
            received: 0,
            forwarded: 0,
            drops: [0; REASONS.len()],
            queued: 0,
            latency: Histogram::new_with_bounds(1, 100_000_000_000, 3)
                .expect("constant histogram bounds are valid"),
        }
    }

    /// The published view.
    pub fn snapshot(&self, name: &str) -> ClassSnapshot {
        let q = |p: f64| {
            if self.latency.is_empty() {
                0
            } else {
                self.latency.value_at_quantile(p)
            }
        };
        ClassSnapshot {
            name: name.to_string(),
            received: self.received,
            forwarded: self.forwarded,
            dropped: REASONS
                .iter()
                .zip(self.drops)
                .filter(|(_, n)| *n > 0)
                .map(|(r, n)| (r.to_string(), n))
                .collect(),
            queued: self.queued,
            latency_p50_ns: q(0.5),
            latency_p99_ns: q(0.99),
            latency_p999_ns: q(0.999),
            latency_max_ns: self.latency.max(),
        }
    }
}

impl Default for ClassAcc {
    fn default() -> Self {
        ClassAcc::new()
    }
}

/// One class as published.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ClassSnapshot {
    /// The class name (`reverse` for the egress → ingress direction).
    pub name: String,
    /// Frames taken from the rings.
    pub received: u64,
    /// Frames sent.
    pub forwarded: u64,
    /// Drops by reason (reasons with none left out).
    pub dropped: BTreeMap<String, u64>,
    /// Taken, not yet sent or dropped.
    pub queued: u64,
    /// Receive → transmit latency percentiles, ns.
    pub latency_p50_ns: u64,
    /// 99th percentile.
    pub latency_p99_ns: u64,
    /// 99.9th percentile.
    pub latency_p999_ns: u64,
    /// Largest.
    pub latency_max_ns: u64,
}

impl ClassSnapshot {
    /// Dropped frames, all reasons.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.values().sum()
    }

    /// received = forwarded + dropped + queued.
    pub fn conserved(&self) -> bool {
        self.received == self.forwarded + self.dropped_total() + self.queued
    }
}

/// One receive ring as published.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct RingSnapshot {
    /// The ring's class name(s).
    pub name: String,
    /// The ring's budget.
    pub budget: u32,
    /// Frames received from the ring.
    pub received: u64,
    /// Frames the kernel dropped because the ring was full.
    pub dropped_ring_full: u64,
    /// AF_XDP: times the fill ring was empty.
    pub dropped_fill_empty: u64,
    /// Other kernel drops (and frames with no pool buffer or too long).
    pub dropped_kernel: u64,
    /// Visits by the poller.
    pub visits: u64,
    /// Visits that found frames.
    pub polls: u64,
    /// Visits that took their whole quota.
    pub budget_exhausted: u64,
    /// Mean frames per non-empty visit.
    pub packets_per_poll: f64,
}

/// Everything, as `pktsched stats --json` prints it.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct RouterSnapshot {
    /// The strategy.
    pub strategy: String,
    /// The backend in use.
    pub backend: String,
    /// Seconds since the start.
    pub uptime_s: f64,
    /// Poll rounds.
    pub rounds: u64,
    /// Measured mean per-packet service time (receive, cost, forward,
    /// transmit), ns.
    pub service_ns: f64,
    /// ICMP time-exceeded messages sent.
    pub icmp_sent: u64,
    /// ICMP time-exceeded messages due but not sent (rate limit, no
    /// buffer, transmit failed).
    pub icmp_not_sent: u64,
    /// Per receive ring of the ingress.
    pub rings: Vec<RingSnapshot>,
    /// Per class, then `reverse` (egress → ingress).
    pub classes: Vec<ClassSnapshot>,
    /// The egress scheduler and link, with `[egress]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress: Option<super::egress::EgressSnapshot>,
}

impl RouterSnapshot {
    /// JSON, one object.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// Human-readable text.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "router: strategy {} backend {} up {:.1}s, {} rounds, service time x = {:.0} ns/packet, \
             icmp time exceeded sent {} not sent {}",
            self.strategy,
            self.backend,
            self.uptime_s,
            self.rounds,
            self.service_ns,
            self.icmp_sent,
            self.icmp_not_sent
        );
        for r in &self.rings {
            let _ = writeln!(
                s,
                "ring {} budget {}: received {} ring_full {} fill_empty {} kernel {} | polls {}/{} \
                 visits, budget exhausted {}, {:.1} packets/poll",
                r.name,
                r.budget,
                r.received,
                r.dropped_ring_full,
                r.dropped_fill_empty,
                r.dropped_kernel,
                r.polls,
                r.visits,
                r.budget_exhausted,
                r.packets_per_poll
            );
        }
        for c in &self.classes {
            let drops: Vec<String> = c.dropped.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(
                s,
                "class {}: received {} = forwarded {} + dropped {} [{}] + queued {}{} | latency \
                 p50 {} p99 {} p99.9 {} max {} ns",
                c.name,
                c.received,
                c.forwarded,
                c.dropped_total(),
                drops.join(", "),
                c.queued,
                if c.conserved() {
                    ""
                } else {
                    " (NOT CONSERVED)"
                },
                c.latency_p50_ns,
                c.latency_p99_ns,
                c.latency_p999_ns,
                c.latency_max_ns
            );
        }
        if let Some(e) = &self.egress {
            s += &e.text();
        }
        s
    }

    /// The Prometheus text format.
    pub fn prometheus(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "# TYPE pktsched_route_service_ns gauge\npktsched_route_service_ns {}",
            self.service_ns
        );
        let _ = writeln!(
            s,
            "# TYPE pktsched_route_rounds_total counter\npktsched_route_rounds_total {}",
            self.rounds
        );
        let _ = writeln!(
            s,
            "pktsched_route_icmp_sent_total {}\npktsched_route_icmp_not_sent_total {}",
            self.icmp_sent, self.icmp_not_sent
        );
        for r in &self.rings {
            for (what, v) in [
                ("received", r.received),
                ("ring_full", r.dropped_ring_full),
                ("fill_empty", r.dropped_fill_empty),
                ("kernel_drops", r.dropped_kernel),
                ("polls", r.polls),
                ("visits", r.visits),
                ("budget_exhausted", r.budget_exhausted),
            ] {
                let _ = writeln!(
                    s,
                    "pktsched_route_ring_{what}_total{{ring=\"{}\"}} {v}",
                    r.name
                );
            }
        }
        for c in &self.classes {
            let _ = writeln!(
                s,
                "pktsched_route_class_received_total{{class=\"{}\"}} {}\n\
                 pktsched_route_class_forwarded_total{{class=\"{}\"}} {}",
                c.name, c.received, c.name, c.forwarded
            );
            for (reason, v) in &c.dropped {
                let _ = writeln!(
                    s,
                    "pktsched_route_class_dropped_total{{class=\"{}\",reason=\"{reason}\"}} {v}",
                    c.name
                );
            }
            for (q, v) in [
                ("0.5", c.latency_p50_ns),
                ("0.99", c.latency_p99_ns),
                ("0.999", c.latency_p999_ns),
            ] {
                let _ = writeln!(
                    s,
                    "pktsched_route_class_latency_ns{{class=\"{}\",quantile=\"{q}\"}} {v}",
                    c.name
                );
            }
        }
        if let Some(e) = &self.egress {
            s += &e.prometheus();
        }
        s
    }
}
