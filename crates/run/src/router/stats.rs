//! The router's counters: per receive ring (what the kernel and the
//! poller saw), per class (received, forwarded, dropped by reason, still
//! queued, latency and ring wait), and the measured per-packet service
//! time `x`. Text, JSON and Prometheus.
//!
//! Per class, two latency histograms (ns, 1 ns .. 100 s, 3 digits):
//!
//! * `latency`: the kernel's receive of the frame → its transmit, so the
//!   time it waited in its class's receive ring counts (the quantity the
//!   bound T_max = b·x/(1 − ρ_RT) is about). The receive time is the
//!   buffer's [`pktsched_io::PacketBuf::rx_ns`] (XDP metadata stamp or
//!   AF_PACKET ring header); a frame without one is timed from the
//!   moment the poller took it, and `rx_stamped` counts those with one.
//! * `ring_wait`: the kernel's receive → the poller taking the frame
//!   (stamped frames only).
//!
//! A quantile with no sample behind it (no frame transmitted, or none
//! stamped for the ring wait) is unknown, not 0: `—` in the text, `null`
//! in JSON, `NaN` in Prometheus. `latency_samples` and
//! `ring_wait_samples` count the samples each histogram holds; a value
//! beyond its 100 s limit is not recorded, so `ring_wait_samples` can be
//! below `rx_stamped`.
//!
//! Names: JSON `latency_p50_ns` .. `latency_max_ns`, `latency_samples`,
//! `ring_wait_p50_ns` .. `ring_wait_max_ns`, `ring_wait_samples`,
//! `rx_stamped`, and the same class in `pktsched run`'s vocabulary next
//! to them (`class`, `packets`, `drops`, `drops_by_reason`, `qlen`, the
//! latencies in µs as `latency_p50_us` .. `ring_wait_max_us`); the text
//! shows latencies in µs. Prometheus (node_exporter conventions: seconds,
//! bytes, `_total` counters, HELP and TYPE on each family, a `device`
//! label when the interfaces are known, see
//! [`RouterSnapshot::prometheus_on`]):
//! `pktsched_route_class_latency_seconds{class,quantile}` and
//! `…_count{class}`, `pktsched_route_class_ring_wait_seconds{class,quantile}`
//! and `…_count{class}`, `pktsched_route_class_rx_stamped_total{class}`,
//! `pktsched_route_class_{received,packets}_total{class}`,
//! `pktsched_route_class_drops_total{class,reason}`,
//! `pktsched_route_class_backlog_packets{class}`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;
use pktsched_core::route::forward::DropReason;
use serde::Serialize;

/// Why a received frame was not forwarded: the core forwarding step's
/// reasons, then the router's own.
pub const REASONS: [&str; 17] = [
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
    "martian",
    "ttl_expired",
    "no_neighbour",
    "tx_failed",
    "other_host",
    "queue_full",
    "egress_refused",
];
/// Index of `ttl_expired` in [`REASONS`].
pub const TTL_EXPIRED: usize = 11;
/// Index of `no_neighbour`.
pub const NO_NEIGHBOUR: usize = 12;
/// Index of `tx_failed`.
pub const TX_FAILED: usize = 13;
/// Index of `other_host`: the destination MAC is not the receiving
/// interface's (broadcast and multicast included: the router answers no
/// ARP or ND and forwards no multicast).
pub const OTHER_HOST: usize = 14;
/// Index of `queue_full`: the class's egress queue was at its `limit`.
pub const QUEUE_FULL: usize = 15;
/// Index of `egress_refused`: the egress scheduler refused the frame for
/// another reason (longer than the egress's largest frame).
pub const EGRESS_REFUSED: usize = 16;

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
    /// Kernel receive (else the poller's take) → transmit, ns.
    pub latency: Histogram<u64>,
    /// Kernel receive → taken by the poller, ns (stamped frames only).
    pub ring_wait: Histogram<u64>,
    /// Frames taken with a kernel receive time.
    pub rx_stamped: u64,
}

fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("constant histogram bounds are valid")
}

/// Quantile `p` of `h`, 0 if empty.
fn quantile(h: &Histogram<u64>, p: f64) -> u64 {
    if h.is_empty() {
        0
    } else {
        h.value_at_quantile(p)
    }
}

impl ClassAcc {
    /// Zero counters; latencies from 1 ns to 100 s, 3 significant digits.
    pub fn new() -> ClassAcc {
        ClassAcc {
            received: 0,
            forwarded: 0,
            drops: [0; REASONS.len()],
            queued: 0,
            latency: latency_histogram(),
            ring_wait: latency_histogram(),
            rx_stamped: 0,
        }
    }

    /// Counts a frame taken by the poller at `taken` (ns) that the kernel
    /// received at `rx_ns` (0: unknown); returns when its latency starts
    /// (the receive, else `taken`).
    pub fn taken(&mut self, rx_ns: u64, taken: u64) -> u64 {
        if rx_ns == 0 {
            return taken;
        }
        self.rx_stamped += 1;
        let _ = self.ring_wait.record(taken.saturating_sub(rx_ns).max(1));
        rx_ns.min(taken)
    }

    /// The published view.
    pub fn snapshot(&self, name: &str) -> ClassSnapshot {
        let q = |p: f64| quantile(&self.latency, p);
        let w = |p: f64| quantile(&self.ring_wait, p);
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
            latency_samples: self.latency.len(),
            rx_stamped: self.rx_stamped,
            ring_wait_samples: self.ring_wait.len(),
            ring_wait_p50_ns: w(0.5),
            ring_wait_p99_ns: w(0.99),
            ring_wait_p999_ns: w(0.999),
            ring_wait_max_ns: self.ring_wait.max(),
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
    /// Kernel receive (else the poller's take) → transmit latency
    /// percentiles, ns.
    pub latency_p50_ns: u64,
    /// 99th percentile.
    pub latency_p99_ns: u64,
    /// 99.9th percentile.
    pub latency_p999_ns: u64,
    /// Largest.
    pub latency_max_ns: u64,
    /// Frames behind the latency quantiles (those transmitted).
    pub latency_samples: u64,
    /// Frames taken with a kernel receive time (the others' latency
    /// starts when the poller took them).
    pub rx_stamped: u64,
    /// Frames behind the ring-wait quantiles (stamped ones whose wait
    /// fitted the histogram's 100 s).
    pub ring_wait_samples: u64,
    /// Kernel receive → taken by the poller (the wait in the receive
    /// ring) percentiles, ns.
    pub ring_wait_p50_ns: u64,
    /// 99th percentile.
    pub ring_wait_p99_ns: u64,
    /// 99.9th percentile.
    pub ring_wait_p999_ns: u64,
    /// Largest.
    pub ring_wait_max_ns: u64,
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

    /// The class in `pktsched run`'s JSON vocabulary (tc -s -j's names),
    /// added next to the router's own names, which readers of `--json`
    /// use (`pktsched plot ingress`: `name`, `latency_*_ns`): `class`,
    /// `packets` (= `forwarded`), `drops` (all reasons),
    /// `drops_by_reason` (every reason, by name), `qlen` (= `queued`),
    /// and the latencies in µs (floats, `latency_p50_us` ..
    /// `ring_wait_max_us`, the run's unit).
    fn run_vocabulary(&self) -> serde_json::Map<String, serde_json::Value> {
        let by_reason: serde_json::Map<String, serde_json::Value> = REASONS
            .iter()
            .map(|r| {
                (
                    r.to_string(),
                    self.dropped.get(*r).copied().unwrap_or(0).into(),
                )
            })
            .collect();
        let mut m = serde_json::Map::new();
        m.insert("class".into(), self.name.clone().into());
        m.insert("packets".into(), self.forwarded.into());
        m.insert("drops".into(), self.dropped_total().into());
        m.insert("drops_by_reason".into(), by_reason.into());
        m.insert("qlen".into(), self.queued.into());
        for (key, ns) in [
            ("latency_p50_us", self.latency_p50_ns),
            ("latency_p99_us", self.latency_p99_ns),
            ("latency_p999_us", self.latency_p999_ns),
            ("latency_max_us", self.latency_max_ns),
            ("ring_wait_p50_us", self.ring_wait_p50_ns),
            ("ring_wait_p99_us", self.ring_wait_p99_ns),
            ("ring_wait_p999_us", self.ring_wait_p999_ns),
            ("ring_wait_max_us", self.ring_wait_max_ns),
        ] {
            m.insert(key.into(), (ns as f64 / 1e3).into());
        }
        m
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
    /// AF_XDP: times the fill ring was empty. AF_PACKET has no fill
    /// ring: the snapshot shows `—`, JSON `null` and Prometheus no
    /// series there (see [`RouterSnapshot::has_fill_ring`]).
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
    /// ICMP time-exceeded messages due but not sent (forbidden: the
    /// expired frame was an ICMP error or came from or went to an address
    /// that is not one host, RFC 1812 4.3.2.7 / RFC 4443 2.4(e); rate
    /// limit, no buffer, transmit failed).
    pub icmp_not_sent: u64,
    /// Per receive ring of the ingress.
    pub rings: Vec<RingSnapshot>,
    /// Per class, then `reverse` (egress → ingress).
    pub classes: Vec<ClassSnapshot>,
    /// The egress scheduler and link, with `[egress]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress: Option<super::egress::EgressSnapshot>,
}

/// A quantile (held in ns) for text, in µs like `pktsched run`'s: `—`
/// when no sample is behind it.
fn ns_or_dash(samples: u64, ns: u64) -> String {
    if samples == 0 {
        "—".to_string()
    } else {
        format!("{:.1}us", ns as f64 / 1e3)
    }
}

impl RouterSnapshot {
    /// Whether the rings have a fill ring whose emptiness the kernel
    /// counts (AF_XDP); on AF_PACKET `dropped_fill_empty` means nothing.
    pub fn has_fill_ring(&self) -> bool {
        self.backend == "xdp"
    }

    /// Whether the service time `x` was measured: 0 means no visit has
    /// found a frame yet (unknown, not a time of 0).
    fn service_known(&self) -> bool {
        self.service_ns > 0.0
    }

    /// JSON, one object. Quantiles with no sample behind them are `null`,
    /// not 0: the latency's while `latency_samples` is 0, the ring wait's
    /// while `ring_wait_samples` is 0; so is `service_ns` before a frame
    /// was served.
    pub fn json(&self) -> String {
        let mut v = match serde_json::to_value(self) {
            Ok(v) => v,
            Err(e) => return format!("{{\"error\":\"{e}\"}}"),
        };
        if !self.service_known()
            && let Some(map) = v.as_object_mut()
        {
            map.insert("service_ns".into(), serde_json::Value::Null);
        }
        if !self.has_fill_ring()
            && let Some(rings) = v.get_mut("rings").and_then(|r| r.as_array_mut())
        {
            for r in rings.iter_mut().filter_map(|r| r.as_object_mut()) {
                r.insert("dropped_fill_empty".into(), serde_json::Value::Null);
            }
        }
        if let Some(classes) = v.get_mut("classes").and_then(|c| c.as_array_mut()) {
            for (c, snap) in classes.iter_mut().zip(&self.classes) {
                if let Some(map) = c.as_object_mut() {
                    map.extend(snap.run_vocabulary());
                }
                crate::stats::null_without_samples(
                    c,
                    "latency_samples",
                    &[
                        "latency_p50_ns",
                        "latency_p99_ns",
                        "latency_p999_ns",
                        "latency_max_ns",
                        "latency_p50_us",
                        "latency_p99_us",
                        "latency_p999_us",
                        "latency_max_us",
                    ],
                );
                crate::stats::null_without_samples(
                    c,
                    "ring_wait_samples",
                    &[
                        "ring_wait_p50_ns",
                        "ring_wait_p99_ns",
                        "ring_wait_p999_ns",
                        "ring_wait_max_ns",
                        "ring_wait_p50_us",
                        "ring_wait_p99_us",
                        "ring_wait_p999_us",
                        "ring_wait_max_us",
                    ],
                );
            }
        }
        serde_json::to_string_pretty(&v).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// Human-readable text.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "router: strategy {} backend {} up {:.1}s, {} rounds, service time x = {} ns/packet, \
             icmp time exceeded sent {} not sent {}",
            self.strategy,
            self.backend,
            self.uptime_s,
            self.rounds,
            if self.service_known() {
                format!("{:.0}", self.service_ns)
            } else {
                "—".to_string()
            },
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
                if self.has_fill_ring() {
                    r.dropped_fill_empty.to_string()
                } else {
                    "—".to_string()
                },
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
                 (kernel receive -> transmit) p50 {} p99 {} p99.9 {} max {} | ring wait p50 {} \
                 p99 {} p99.9 {} max {} ({} stamped)",
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
                ns_or_dash(c.latency_samples, c.latency_p50_ns),
                ns_or_dash(c.latency_samples, c.latency_p99_ns),
                ns_or_dash(c.latency_samples, c.latency_p999_ns),
                ns_or_dash(c.latency_samples, c.latency_max_ns),
                ns_or_dash(c.ring_wait_samples, c.ring_wait_p50_ns),
                ns_or_dash(c.ring_wait_samples, c.ring_wait_p99_ns),
                ns_or_dash(c.ring_wait_samples, c.ring_wait_p999_ns),
                ns_or_dash(c.ring_wait_samples, c.ring_wait_max_ns),
                c.rx_stamped
            );
        }
        if let Some(e) = &self.egress {
            s += &e.text();
        }
        s
    }

    /// The Prometheus text format, without a `device` label (a snapshot
    /// does not know its interfaces' names): see [`Self::prometheus_on`].
    pub fn prometheus(&self) -> String {
        self.prometheus_on(None)
    }

    /// The Prometheus text format as node_exporter writes it: base units
    /// (seconds, bytes), counters named `…_total`, `# HELP` and `# TYPE`
    /// on every family and each family's samples together. With
    /// `devices` (ingress, egress), each series carries the `device` it
    /// is about: the ingress for the router's own counters (its class
    /// rings, the poller, ICMP sent back to the sender), the egress for
    /// the `[egress]` scheduler's.
    pub fn prometheus_on(&self, devices: Option<(&str, &str)>) -> String {
        let mut p = Families::default();
        let ingress = devices.map(|d| d.0);
        p.family(
            "pktsched_route_service_seconds",
            "gauge",
            "Measured mean per-packet service time (receive, cost, forward, transmit).",
        );
        // Not measured yet: NaN, not a time of 0.
        let x = if self.service_known() {
            self.service_ns / 1e9
        } else {
            f64::NAN
        };
        p.sample("pktsched_route_service_seconds", ingress, &[], x);
        p.counter(
            "pktsched_route_rounds_total",
            "Poll rounds.",
            ingress,
            &[],
            self.rounds,
        );
        p.counter(
            "pktsched_route_icmp_sent_total",
            "ICMP time-exceeded messages sent.",
            ingress,
            &[],
            self.icmp_sent,
        );
        p.counter(
            "pktsched_route_icmp_not_sent_total",
            "ICMP time-exceeded messages due but not sent (forbidden by RFC 1812/4443, rate limit, \
             no buffer, transmit failed).",
            ingress,
            &[],
            self.icmp_not_sent,
        );
        self.ring_metrics(&mut p, ingress);
        self.class_metrics(&mut p, ingress);
        if let Some(e) = &self.egress {
            egress_metrics(e, &mut p, devices.map(|d| d.1));
        }
        p.text
    }

    /// Each ring counter as `pktsched_route_ring_<counter>_total{ring}`;
    /// no fill-empty series without a fill ring (AF_PACKET).
    fn ring_metrics(&self, p: &mut Families, device: Option<&str>) {
        type Pick = fn(&RingSnapshot) -> u64;
        let counters: [(&str, &str, Pick); 7] = [
            ("received", "Frames received from the ring.", |r| r.received),
            (
                "ring_full",
                "Frames the kernel dropped because the ring was full.",
                |r| r.dropped_ring_full,
            ),
            (
                "fill_empty",
                "Times the kernel found the AF_XDP fill ring empty.",
                |r| r.dropped_fill_empty,
            ),
            (
                "kernel_drops",
                "Other kernel drops (and frames with no pool buffer or too long).",
                |r| r.dropped_kernel,
            ),
            ("polls", "Visits by the poller that found frames.", |r| {
                r.polls
            }),
            ("visits", "Visits by the poller.", |r| r.visits),
            (
                "budget_exhausted",
                "Visits that took the ring's whole budget.",
                |r| r.budget_exhausted,
            ),
        ];
        for (what, help, pick) in counters {
            if what == "fill_empty" && !self.has_fill_ring() {
                continue;
            }
            let name = format!("pktsched_route_ring_{what}_total");
            p.family(&name, "counter", help);
            for r in &self.rings {
                p.sample(&name, device, &[("ring", &r.name)], pick(r));
            }
        }
    }

    /// Per class: received, sent (`packets`), drops by reason (every
    /// reason), queued (`backlog_packets`), and the latency and ring-wait
    /// summaries in seconds (`NaN` quantiles without a sample).
    fn class_metrics(&self, p: &mut Families, device: Option<&str>) {
        type Pick = fn(&ClassSnapshot) -> u64;
        let counters: [(&str, &str, Pick); 3] = [
            (
                "pktsched_route_class_received_total",
                "Frames taken from the class's rings (received = packets + drops + backlog_packets).",
                |c| c.received,
            ),
            ("pktsched_route_class_packets_total", "Frames sent.", |c| {
                c.forwarded
            }),
            (
                "pktsched_route_class_rx_stamped_total",
                "Frames taken with a kernel receive time.",
                |c| c.rx_stamped,
            ),
        ];
        for (name, help, pick) in counters {
            p.family(name, "counter", help);
            for c in &self.classes {
                p.sample(name, device, &[("class", &c.name)], pick(c));
            }
        }
        let name = "pktsched_route_class_drops_total";
        p.family(name, "counter", "Frames dropped, by reason.");
        for c in &self.classes {
            for r in REASONS {
                let n = c.dropped.get(r).copied().unwrap_or(0);
                p.sample(name, device, &[("class", &c.name), ("reason", r)], n);
            }
        }
        let name = "pktsched_route_class_backlog_packets";
        p.family(name, "gauge", "Frames taken, not yet sent or dropped.");
        for c in &self.classes {
            p.sample(name, device, &[("class", &c.name)], c.queued);
        }
        type Quantiles = fn(&ClassSnapshot) -> (u64, [u64; 3]);
        let summaries: [(&str, &str, Quantiles); 2] = [
            (
                "pktsched_route_class_latency_seconds",
                "Kernel receive (else the poller's take) to transmit.",
                |c| {
                    let q = [c.latency_p50_ns, c.latency_p99_ns, c.latency_p999_ns];
                    (c.latency_samples, q)
                },
            ),
            (
                "pktsched_route_class_ring_wait_seconds",
                "Kernel receive to taken by the poller (stamped frames).",
                |c| {
                    let q = [c.ring_wait_p50_ns, c.ring_wait_p99_ns, c.ring_wait_p999_ns];
                    (c.ring_wait_samples, q)
                },
            ),
        ];
        for (name, help, pick) in summaries {
            p.family(name, "summary", help);
            for c in &self.classes {
                let (samples, qs) = pick(c);
                for (q, ns) in ["0.5", "0.99", "0.999"].into_iter().zip(qs) {
                    // No sample: no quantile (Prometheus' NaN), not 0.
                    let v = if samples == 0 {
                        f64::NAN
                    } else {
                        ns as f64 / 1e9
                    };
                    p.sample(name, device, &[("class", &c.name), ("quantile", q)], v);
                }
                let count = format!("{name}_count");
                p.sample(&count, device, &[("class", &c.name)], samples);
            }
        }
    }
}

/// The `[egress]` scheduler's counters: `pktsched_route_egress_…`, per
/// class with the run's names (`bytes`, `packets`, `drops{reason}`,
/// `backlog_bytes`, `backlog_packets`, `overlimits`).
fn egress_metrics(e: &super::egress::EgressSnapshot, p: &mut Families, device: Option<&str>) {
    let name = "pktsched_route_egress_rate_bytes_per_second";
    p.family(name, "gauge", "The egress link rate.");
    p.sample(name, device, &[], e.rate_bps as f64 / 8.0);
    p.counter(
        "pktsched_route_egress_overlimits_total",
        "Times the link rate held back a backlogged frame.",
        device,
        &[],
        e.overlimits,
    );
    type Pick = fn(&super::egress::EgressClassSnapshot) -> u64;
    let per_class: [(&str, &str, &str, Pick); 5] = [
        (
            "pktsched_route_egress_class_bytes_total",
            "counter",
            "Wire bytes the scheduler released.",
            |c| c.sent_bytes,
        ),
        (
            "pktsched_route_egress_class_packets_total",
            "counter",
            "Frames the scheduler released.",
            |c| c.sent_packets,
        ),
        (
            "pktsched_route_egress_class_overlimits_total",
            "counter",
            "Times the class's ceil held back a backlogged frame.",
            |c| c.overlimits,
        ),
        (
            "pktsched_route_egress_backlog_bytes",
            "gauge",
            "Wire bytes waiting in the class's queue.",
            |c| c.backlog_bytes,
        ),
        (
            "pktsched_route_egress_backlog_packets",
            "gauge",
            "Frames waiting in the class's queue.",
            |c| c.backlog_packets,
        ),
    ];
    for (name, kind, help, pick) in per_class {
        p.family(name, kind, help);
        for c in &e.classes {
            p.sample(name, device, &[("class", &c.name)], pick(c));
        }
    }
    let name = "pktsched_route_egress_class_drops_total";
    p.family(
        name,
        "counter",
        "Frames the egress scheduler dropped, by reason.",
    );
    for c in &e.classes {
        let labels = [("class", c.name.as_str()), ("reason", "queue_full")];
        p.sample(name, device, &labels, c.dropped_queue_full);
    }
}

/// A Prometheus exposition being written, family by family.
#[derive(Default)]
struct Families {
    text: String,
}

impl Families {
    /// Starts family `name`: its `# HELP` and `# TYPE` lines.
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// One sample of `name` with the `device` label (when known) and
    /// `labels`.
    fn sample(
        &mut self,
        name: &str,
        device: Option<&str>,
        labels: &[(&str, &str)],
        value: impl std::fmt::Display,
    ) {
        let all: Vec<String> = device
            .map(|d| ("device", d))
            .into_iter()
            .chain(labels.iter().copied())
            .map(|(k, v)| format!("{k}=\"{}\"", crate::stats::label_value(v)))
            .collect();
        // f64's NaN prints as `NaN`, Prometheus' spelling.
        if all.is_empty() {
            let _ = writeln!(self.text, "{name} {value}");
        } else {
            let _ = writeln!(self.text, "{name}{{{}}} {value}", all.join(","));
        }
    }

    /// A family of one counter sample.
    fn counter(
        &mut self,
        name: &str,
        help: &str,
        device: Option<&str>,
        labels: &[(&str, &str)],
        v: u64,
    ) {
        self.family(name, "counter", help);
        self.sample(name, device, labels, v);
    }
}

#[cfg(test)]
mod tests;
