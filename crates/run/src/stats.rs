//! What `pktsched stats` shows: a snapshot of the pipeline's counters per
//! class (with `tc -s -j`'s field names where they exist), the devices'
//! and the arbiter's, in three forms: `tc -s`-style text, JSON, and the
//! Prometheus text format (node_exporter-style names).

use std::collections::HashMap;
use std::fmt::Write as _;

use pktsched_io::IoStats;
use serde::Serialize;

/// Upper bounds (seconds) of the sojourn-time histogram's buckets.
pub const SOJOURN_BUCKETS_S: [f64; 8] = [10e-6, 50e-6, 100e-6, 500e-6, 1e-3, 5e-3, 10e-3, 100e-3];

/// Drop reasons of a class, in display order.
pub const DROP_REASONS: [&str; 4] = ["queue_full", "too_large", "unknown_flow", "tx_failed"];

/// One class.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ClassStats {
    /// The class name.
    pub class: String,
    /// Frames the classifier put in this class.
    pub received: u64,
    /// Bytes sent (wire lengths: frame + `overhead`, at least `mpu`).
    pub bytes: u64,
    /// Frames sent.
    pub packets: u64,
    /// Frames dropped, all reasons.
    pub drops: u64,
    /// Drops by reason ([`DROP_REASONS`] order); JSON: an object keyed
    /// by reason name (`{"queue_full": 2, "too_large": 0, ...}`).
    #[serde(serialize_with = "drops_by_reason_object")]
    pub drops_by_reason: [u64; 4],
    /// Times a rate limit held back a queued frame.
    pub overlimits: u64,
    /// Bytes queued.
    pub backlog: u64,
    /// Frames queued.
    pub qlen: u64,
    /// Frames that were queued when a reload removed the class, moved to
    /// the default class.
    pub moved: u64,
    /// Frames classified into this class that a receive thread held when
    /// the pipeline stopped (pspat), never scheduled: dropped.
    pub dropped_at_stop: u64,
    /// Removed by a reload (counters final once `qlen` is 0).
    pub removed: bool,
    /// Sent rate over the last second, bits/s.
    pub rate_bps: u64,
    /// Sent rate over the last second, frames/s.
    pub pps: u64,
    /// Sojourn time (received → handed to the egress) percentiles, µs.
    pub sojourn_p50_us: f64,
    /// 99th percentile, µs.
    pub sojourn_p99_us: f64,
    /// Cumulative sojourn counts at [`SOJOURN_BUCKETS_S`].
    pub sojourn_buckets: Vec<u64>,
    /// Number of sojourn samples.
    pub sojourn_count: u64,
    /// Sum of sojourn times, seconds.
    pub sojourn_sum_s: f64,
    /// Frames sent that carried the kernel's receive time (AF_XDP: the
    /// XDP program's stamp; AF_PACKET: the ring header); the `ring_wait`
    /// and `latency` percentiles count only these.
    pub rx_stamped: u64,
    /// Kernel receive → taken from the device (the wait in the receive
    /// ring and the receive call), p50, µs.
    pub ring_wait_p50_us: f64,
    /// 99th percentile, µs.
    pub ring_wait_p99_us: f64,
    /// 99.9th percentile, µs.
    pub ring_wait_p999_us: f64,
    /// Kernel receive → released to the egress (ring wait + sojourn),
    /// p50, µs.
    pub latency_p50_us: f64,
    /// 99th percentile, µs.
    pub latency_p99_us: f64,
    /// 99.9th percentile, µs.
    pub latency_p999_us: f64,
}

impl ClassStats {
    /// Adds `other`'s counters, gauges and sojourn histogram (another
    /// entry of the same class name) to these; the rates and quantiles
    /// stay these (the receive-split quantiles become `other`'s when these
    /// have no stamped frame).
    fn fold(&mut self, other: &ClassStats) {
        if self.rx_stamped == 0 {
            // No stamped frame here: the quantiles are the other's.
            self.ring_wait_p50_us = other.ring_wait_p50_us;
            self.ring_wait_p99_us = other.ring_wait_p99_us;
            self.ring_wait_p999_us = other.ring_wait_p999_us;
            self.latency_p50_us = other.latency_p50_us;
            self.latency_p99_us = other.latency_p99_us;
            self.latency_p999_us = other.latency_p999_us;
        }
        for (a, b) in [
            (&mut self.received, other.received),
            (&mut self.bytes, other.bytes),
            (&mut self.packets, other.packets),
            (&mut self.drops, other.drops),
            (&mut self.overlimits, other.overlimits),
            (&mut self.backlog, other.backlog),
            (&mut self.qlen, other.qlen),
            (&mut self.moved, other.moved),
            (&mut self.dropped_at_stop, other.dropped_at_stop),
            (&mut self.sojourn_count, other.sojourn_count),
            (&mut self.rx_stamped, other.rx_stamped),
        ] {
            *a += b;
        }
        for (a, b) in self.drops_by_reason.iter_mut().zip(other.drops_by_reason) {
            *a += b;
        }
        if self.sojourn_buckets.len() < other.sojourn_buckets.len() {
            self.sojourn_buckets.resize(other.sojourn_buckets.len(), 0);
        }
        for (a, b) in self.sojourn_buckets.iter_mut().zip(&other.sojourn_buckets) {
            *a += b;
        }
        self.sojourn_sum_s += other.sojourn_sum_s;
    }
}

/// `drops_by_reason` as a JSON object keyed by [`DROP_REASONS`] (the
/// names the text and Prometheus forms use), every reason present.
fn drops_by_reason_object<S: serde::Serializer>(by: &[u64; 4], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(DROP_REASONS.iter().zip(by))
}

/// `classify_anomalies` as a JSON object keyed by anomaly kind.
fn anomalies_object<S: serde::Serializer>(
    kinds: &[(String, u64)],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_map(kinds.iter().map(|(k, n)| (k, n)))
}

/// One device direction's packet I/O counters.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct DeviceStats {
    /// Interface name.
    pub device: String,
    /// Which socket: `rx` or `tx` (the scheduled direction), `reverse rx` or
    /// `reverse tx` (egress → ingress, forwarded untouched).
    pub role: String,
    /// Frames received.
    pub rx_packets: u64,
    /// Frames transmitted.
    pub tx_packets: u64,
    /// Frames the kernel dropped because the receive ring was full.
    pub rx_kernel_drops: u64,
    /// Frames dropped because no buffer was free.
    pub rx_no_buffer: u64,
    /// Frames longer than `max_frame`, dropped.
    pub rx_oversize: u64,
    /// Transmit attempts that found the ring or the peer full (retried).
    pub tx_busy: u64,
    /// Frames that could not be transmitted, dropped.
    pub tx_failed: u64,
    /// Frames the kernel dropped because the receive ring had no room
    /// (also in `rx_kernel_drops`): AF_XDP's `rx_ring_full`, AF_PACKET's
    /// `tp_drops`. `None` (JSON `null`, no Prometheus series) for a
    /// socket without a kernel receive ring (a transmit socket).
    pub rx_ring_full: Option<u64>,
    /// AF_XDP: times the kernel found the fill ring empty (the reader
    /// returns frames too slowly). `None` on AF_PACKET, which has no fill
    /// ring, and without a receive ring.
    pub rx_fill_empty: Option<u64>,
    /// AF_PACKET TPACKET_V3: times the kernel froze the receive queue
    /// because user space held every block. `None` on AF_XDP and V2
    /// rings, which have no such state.
    pub rx_freezes: Option<u64>,
    /// AF_XDP: transmit descriptors the kernel refused as invalid
    /// (`tx_invalid_descs`; those frames were not sent). `None` on
    /// AF_PACKET and without an AF_XDP transmit ring.
    pub tx_invalid: Option<u64>,
    /// The pspat engine's receive thread: times it found the arbiter's
    /// mailbox full and waited (spin, yield, then short sleeps) before
    /// handing frames on. `None` for every other socket.
    pub rx_mailbox_full: Option<u64>,
}

impl DeviceStats {
    /// The counters of `io`, for `device` in `role`; the ring counters
    /// the kernel does not keep for that kind of ring are `None`.
    pub fn from_io(device: &str, role: &str, io: &IoStats) -> DeviceStats {
        let kind = io.rx_ring;
        DeviceStats {
            device: device.to_string(),
            role: role.to_string(),
            rx_packets: io.rx_packets,
            tx_packets: io.tx_packets,
            rx_kernel_drops: io.rx_kernel_drops,
            rx_no_buffer: io.rx_no_buffer,
            rx_oversize: io.rx_oversize,
            tx_busy: io.tx_busy,
            tx_failed: io.tx_failed,
            rx_ring_full: kind.counts_ring_full().then_some(io.rx_ring_full),
            rx_fill_empty: kind.counts_fill_empty().then_some(io.rx_fill_empty),
            rx_freezes: kind.counts_freezes().then_some(io.rx_freezes),
            tx_invalid: io.tx_ring.counts_invalid().then_some(io.tx_invalid),
            rx_mailbox_full: None,
        }
    }

    /// The counters with a name, in display order: `None` for a counter
    /// this device does not have.
    pub fn counters(&self) -> [(&'static str, Option<u64>); 12] {
        [
            ("rx_packets", Some(self.rx_packets)),
            ("tx_packets", Some(self.tx_packets)),
            ("rx_kernel_drops", Some(self.rx_kernel_drops)),
            ("rx_ring_full", self.rx_ring_full),
            ("rx_fill_empty", self.rx_fill_empty),
            ("rx_freezes", self.rx_freezes),
            ("rx_no_buffer", Some(self.rx_no_buffer)),
            ("rx_oversize", Some(self.rx_oversize)),
            ("tx_busy", Some(self.tx_busy)),
            ("tx_failed", Some(self.tx_failed)),
            ("tx_invalid", self.tx_invalid),
            ("rx_mailbox_full", self.rx_mailbox_full),
        ]
    }
}

/// Help text of each device counter's Prometheus metric.
const DEVICE_HELP: [(&str, &str); 12] = [
    ("rx_packets", "Frames received."),
    ("tx_packets", "Frames transmitted."),
    (
        "rx_kernel_drops",
        "Frames the kernel dropped on receive, all reasons.",
    ),
    (
        "rx_ring_full",
        "Frames the kernel dropped because the receive ring had no room (AF_XDP rx_ring_full, AF_PACKET tp_drops).",
    ),
    (
        "rx_fill_empty",
        "Times the kernel found the AF_XDP fill ring empty.",
    ),
    (
        "rx_freezes",
        "Times the kernel froze the AF_PACKET TPACKET_V3 receive queue (every block held by user space).",
    ),
    ("rx_no_buffer", "Frames dropped because no buffer was free."),
    ("rx_oversize", "Frames longer than max_frame, dropped."),
    (
        "tx_busy",
        "Transmit attempts that found the ring or the peer full (retried).",
    ),
    (
        "tx_failed",
        "Frames that could not be transmitted, dropped.",
    ),
    (
        "tx_invalid",
        "AF_XDP transmit descriptors the kernel refused as invalid (not sent).",
    ),
    (
        "rx_mailbox_full",
        "pspat engine: times the receive thread found the arbiter's mailbox full and waited.",
    ),
];

/// The whole pipeline.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Snapshot {
    /// Ingress interface.
    pub ingress: String,
    /// Egress interface.
    pub egress: String,
    /// The shaped rate.
    pub rate: String,
    /// Algorithm or policy.
    pub scheduler: String,
    /// Seconds since start.
    pub uptime_s: f64,
    /// Per class, in config order.
    pub classes: Vec<ClassStats>,
    /// Ingress and egress devices.
    pub devices: Vec<DeviceStats>,
    /// Frames forwarded egress → ingress untouched.
    pub reverse_forwarded: u64,
    /// Reverse-direction frames that could not be sent.
    pub reverse_dropped: u64,
    /// Frames the classifier saw with an anomaly (runt, truncated header,
    /// fragment, ...), by kind; JSON: an object keyed by kind
    /// (`{"runt": 1}`).
    #[serde(serialize_with = "anomalies_object")]
    pub classify_anomalies: Vec<(String, u64)>,
    /// Arbiter rounds.
    pub arbiter_loops: u64,
    /// Frames the arbiter released.
    pub arbiter_decisions: u64,
    /// Reloads applied.
    pub reloads: u64,
    /// The run-to-completion forwarder's own account of its passes
    /// (absent with the pspat engine).
    pub forwarder: Option<crate::engine::ForwarderStats>,
}

/// The per-class quantiles that count only stamped frames.
const RX_SPLIT_FIELDS: [&str; 6] = [
    "ring_wait_p50_us",
    "ring_wait_p99_us",
    "ring_wait_p999_us",
    "latency_p50_us",
    "latency_p99_us",
    "latency_p999_us",
];

/// Sets `fields` of the JSON object `obj` to `null` when its sample count
/// `count` is 0 (a quantile of nothing is unknown, not 0).
pub(crate) fn null_without_samples(obj: &mut serde_json::Value, count: &str, fields: &[&str]) {
    if obj.get(count).and_then(serde_json::Value::as_u64) != Some(0) {
        return;
    }
    if let Some(map) = obj.as_object_mut() {
        for f in fields {
            if let Some(x) = map.get_mut(*f) {
                *x = serde_json::Value::Null;
            }
        }
    }
}

/// A quantile in µs for text: `—` when there is no sample behind it.
fn us_or_dash(samples: u64, us: f64) -> String {
    if samples == 0 {
        "—".to_string()
    } else {
        format!("{us:.0}us")
    }
}

/// A counter for text: `—` for one the device does not have.
fn count_or_dash(v: Option<u64>) -> String {
    v.map_or_else(|| "—".to_string(), |n| n.to_string())
}

fn rate_text(bps: u64) -> String {
    match bps {
        b if b >= 1_000_000_000 => format!("{:.2}Gbit", b as f64 / 1e9),
        b if b >= 1_000_000 => format!("{:.2}Mbit", b as f64 / 1e6),
        b if b >= 1_000 => format!("{:.1}Kbit", b as f64 / 1e3),
        b => format!("{b}bit"),
    }
}

impl Snapshot {
    /// `tc -s class show`-style text.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "pktsched {} -> {} rate {} scheduler {} up {:.1}s reloads {}",
            self.ingress, self.egress, self.rate, self.scheduler, self.uptime_s, self.reloads
        );
        for c in &self.classes {
            let _ = writeln!(
                s,
                "class {}{}",
                c.class,
                if c.removed { " (removed)" } else { "" }
            );
            let _ = writeln!(
                s,
                " Sent {} bytes {} pkt (dropped {}, overlimits {} requeues —)",
                c.bytes, c.packets, c.drops, c.overlimits
            );
            let _ = writeln!(
                s,
                " rate {} {}pps backlog {}b {}p sojourn p50 {} p99 {}",
                rate_text(c.rate_bps),
                c.pps,
                c.backlog,
                c.qlen,
                us_or_dash(c.sojourn_count, c.sojourn_p50_us),
                us_or_dash(c.sojourn_count, c.sojourn_p99_us)
            );
            let stamped = |us| us_or_dash(c.rx_stamped, us);
            let _ = writeln!(
                s,
                " from kernel receive ({} stamped): ring wait p50 {} p99 {} p999 {}, to the \
                 egress p50 {} p99 {} p999 {}",
                c.rx_stamped,
                stamped(c.ring_wait_p50_us),
                stamped(c.ring_wait_p99_us),
                stamped(c.ring_wait_p999_us),
                stamped(c.latency_p50_us),
                stamped(c.latency_p99_us),
                stamped(c.latency_p999_us)
            );
            let reasons: Vec<String> = DROP_REASONS
                .iter()
                .zip(c.drops_by_reason)
                .map(|(r, n)| format!("{r} {n}"))
                .collect();
            let _ = writeln!(
                s,
                " received {} moved {} dropped_at_stop {} drops: {}",
                c.received,
                c.moved,
                c.dropped_at_stop,
                reasons.join(", ")
            );
        }
        for d in &self.devices {
            let counters: Vec<String> = d
                .counters()
                .iter()
                .filter(|(name, _)| !matches!(*name, "rx_packets" | "tx_packets"))
                .map(|(name, v)| format!("{name} {}", count_or_dash(*v)))
                .collect();
            let _ = writeln!(
                s,
                "device {} {}: rx {} tx {} {}",
                d.device,
                d.role,
                d.rx_packets,
                d.tx_packets,
                counters.join(" ")
            );
        }
        let anomalies: Vec<String> = self
            .classify_anomalies
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let _ = writeln!(
            s,
            "reverse: forwarded {} dropped {}; classifier anomalies: {}; arbiter: loops {} \
             decisions {}",
            self.reverse_forwarded,
            self.reverse_dropped,
            if anomalies.is_empty() {
                "none".to_string()
            } else {
                anomalies.join(", ")
            },
            self.arbiter_loops,
            self.arbiter_decisions
        );
        self.forwarder_text(&mut s);
        s
    }

    /// The pipeline as a graph with counters at each stage (`pktsched run
    /// --dump`, like `bessctl show pipeline`).
    pub fn pipeline_text(&self) -> String {
        let mut s = String::new();
        let dev = |role: &str| self.devices.iter().find(|d| d.role == role);
        let rx = dev("rx").map_or(0, |d| d.rx_packets);
        let kdrop = dev("rx").map_or(0, |d| d.rx_kernel_drops + d.rx_no_buffer);
        let ring_full = count_or_dash(dev("rx").and_then(|d| d.rx_ring_full));
        let fill_empty = count_or_dash(dev("rx").and_then(|d| d.rx_fill_empty));
        let tx = dev("tx").map_or(0, |d| d.tx_packets);
        let received: u64 = self.classes.iter().map(|c| c.received).sum();
        let anomalies: u64 = self.classify_anomalies.iter().map(|(_, n)| n).sum();
        let _ = writeln!(
            s,
            "[{} rx] {rx} frames (kernel/no-buffer drops {kdrop}; ring full {ring_full}, fill ring \
             empty {fill_empty})\n  -> [classifier] {received} classified ({anomalies} with anomalies)",
            self.ingress
        );
        for c in &self.classes {
            let _ = writeln!(
                s,
                "       -> [class {}] {} in, {} queued, {} dropped -> [{}]",
                c.class, c.received, c.qlen, c.drops, self.scheduler
            );
        }
        let _ = writeln!(
            s,
            "  -> [{} @ {}] {} decisions -> [{} tx] {tx} frames\n[{} -> {} reverse] {} forwarded, {} dropped",
            self.scheduler,
            self.rate,
            self.arbiter_decisions,
            self.egress,
            self.egress,
            self.ingress,
            self.reverse_forwarded,
            self.reverse_dropped
        );
        s
    }

    /// JSON (one object). A quantile with no sample behind it is `null`,
    /// not 0: the ring-wait and kernel-receive latency quantiles of a class
    /// with no stamped frame (`rx_stamped` 0), the sojourn quantiles of a
    /// class with no sojourn sample (`sojourn_count` 0).
    pub fn json(&self) -> String {
        let mut v = match serde_json::to_value(self) {
            Ok(v) => v,
            Err(e) => return format!("{{\"error\":\"{e}\"}}"),
        };
        if let Some(classes) = v.get_mut("classes").and_then(|c| c.as_array_mut()) {
            for c in classes {
                null_without_samples(c, "rx_stamped", &RX_SPLIT_FIELDS);
                null_without_samples(c, "sojourn_count", &["sojourn_p50_us", "sojourn_p99_us"]);
            }
        }
        serde_json::to_string_pretty(&v).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The classes as Prometheus series: one per class name. A class a
    /// reload removed (retiring, or final counters kept) and a live class
    /// of the same name, or a name removed twice, would otherwise be the
    /// same series more than once in a scrape: their counters, gauges and
    /// histograms add up under the name, and the quantiles are the first
    /// entry's (the live class's: live classes come first). The counters
    /// stay monotonic across a removal and re-add while the removed
    /// class's final counters are kept (the last 256 removals): an older
    /// one dropped makes its name's counters step down, which Prometheus
    /// reads as a counter reset.
    fn class_series(&self) -> Vec<ClassStats> {
        let mut series: Vec<ClassStats> = Vec::with_capacity(self.classes.len());
        let mut at: HashMap<&str, usize> = HashMap::with_capacity(self.classes.len());
        for c in &self.classes {
            match at.get(c.class.as_str()) {
                Some(&i) => series[i].fold(c),
                None => {
                    at.insert(c.class.as_str(), series.len());
                    series.push(c.clone());
                }
            }
        }
        series
    }

    /// The Prometheus text exposition format.
    pub fn prometheus(&self) -> String {
        let mut s = String::new();
        let dev = label_value(&self.egress);
        let classes = self.class_series();
        let counter = |s: &mut String, name: &str, help: &str, f: &dyn Fn(&ClassStats) -> u64| {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} counter");
            for c in &classes {
                let _ = writeln!(
                    s,
                    "{name}{{device=\"{dev}\",class=\"{}\"}} {}",
                    c.class,
                    f(c)
                );
            }
        };
        counter(
            &mut s,
            "pktsched_class_received_total",
            "Frames the classifier put in the class (received = packets + drops + backlog_packets \
             + moved + dropped_at_stop once no frame is on its way to the scheduler).",
            &|c| c.received,
        );
        counter(
            &mut s,
            "pktsched_class_bytes_total",
            "Bytes sent (wire lengths).",
            &|c| c.bytes,
        );
        counter(
            &mut s,
            "pktsched_class_packets_total",
            "Frames sent.",
            &|c| c.packets,
        );
        counter(
            &mut s,
            "pktsched_class_overlimits_total",
            "Frames held back by a rate limit.",
            &|c| c.overlimits,
        );
        counter(
            &mut s,
            "pktsched_class_moved_total",
            "Frames queued when a reload removed the class, moved to the default class.",
            &|c| c.moved,
        );
        counter(
            &mut s,
            "pktsched_class_dropped_at_stop_total",
            "Frames classified into the class but held by a receive thread when the pipeline stopped, never scheduled.",
            &|c| c.dropped_at_stop,
        );
        let _ = writeln!(
            s,
            "# HELP pktsched_class_drops_total Frames dropped, by reason.\n# TYPE pktsched_class_drops_total counter"
        );
        for c in &classes {
            for (r, n) in DROP_REASONS.iter().zip(c.drops_by_reason) {
                let _ = writeln!(
                    s,
                    "pktsched_class_drops_total{{device=\"{dev}\",class=\"{}\",reason=\"{r}\"}} {n}",
                    c.class
                );
            }
        }
        for (name, help, f) in [
            (
                "pktsched_class_backlog_bytes",
                "Bytes queued.",
                (|c: &ClassStats| c.backlog) as fn(&ClassStats) -> u64,
            ),
            (
                "pktsched_class_backlog_packets",
                "Frames queued.",
                |c: &ClassStats| c.qlen,
            ),
        ] {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} gauge");
            for c in &classes {
                let _ = writeln!(
                    s,
                    "{name}{{device=\"{dev}\",class=\"{}\"}} {}",
                    c.class,
                    f(c)
                );
            }
        }
        let name = "pktsched_class_sojourn_seconds";
        let _ = writeln!(
            s,
            "# HELP {name} Time from reception to the egress.\n# TYPE {name} histogram"
        );
        for c in &classes {
            let labels = format!("device=\"{dev}\",class=\"{}\"", c.class);
            for (le, n) in SOJOURN_BUCKETS_S.iter().zip(&c.sojourn_buckets) {
                let _ = writeln!(s, "{name}_bucket{{{labels},le=\"{le}\"}} {n}");
            }
            let _ = writeln!(
                s,
                "{name}_bucket{{{labels},le=\"+Inf\"}} {}",
                c.sojourn_count
            );
            let _ = writeln!(s, "{name}_sum{{{labels}}} {}", c.sojourn_sum_s);
            let _ = writeln!(s, "{name}_count{{{labels}}} {}", c.sojourn_count);
        }
        Self::rx_split_metrics(&classes, &mut s, &dev);
        self.pipeline_metrics(&mut s);
        self.forwarder_metrics(&mut s, &dev);
        self.device_metrics(&mut s);
        s
    }

    /// Each device counter as `pktsched_device_<counter>_total{device,
    /// role}`, grouped by metric; a device without the counter (see
    /// [`DeviceStats`]) has no series rather than an invented 0.
    fn device_metrics(&self, s: &mut String) {
        for (metric, help) in DEVICE_HELP {
            let name = format!("pktsched_device_{metric}_total");
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} counter");
            for d in &self.devices {
                let value = d.counters().into_iter().find(|(n, _)| *n == metric);
                if let Some((_, Some(v))) = value {
                    let _ = writeln!(
                        s,
                        "{name}{{device=\"{}\",role=\"{}\"}} {v}",
                        label_value(&d.device),
                        d.role
                    );
                }
            }
        }
    }

    /// The counters of the text's last line: the reverse direction
    /// (`device` the ingress, where its frames are sent), the
    /// classifier's anomalies by kind (a kind none was seen of has no
    /// series yet), the arbiter's rounds and decisions and the reloads
    /// (`device` the egress).
    fn pipeline_metrics(&self, s: &mut String) {
        let (ingress, egress) = (label_value(&self.ingress), label_value(&self.egress));
        let (ingress, egress) = (&*ingress, &*egress);
        for (name, help, device, v) in [
            (
                "pktsched_reverse_forwarded_total",
                "Frames forwarded egress to ingress untouched.",
                ingress,
                self.reverse_forwarded,
            ),
            (
                "pktsched_reverse_dropped_total",
                "Reverse-direction frames that could not be sent.",
                ingress,
                self.reverse_dropped,
            ),
            (
                "pktsched_arbiter_loops_total",
                "Arbiter rounds.",
                egress,
                self.arbiter_loops,
            ),
            (
                "pktsched_arbiter_decisions_total",
                "Frames the arbiter released.",
                egress,
                self.arbiter_decisions,
            ),
            (
                "pktsched_reloads_total",
                "Reloads applied.",
                egress,
                self.reloads,
            ),
        ] {
            let _ = writeln!(
                s,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name}{{device=\"{device}\"}} {v}"
            );
        }
        let name = "pktsched_classify_anomalies_total";
        let _ = writeln!(
            s,
            "# HELP {name} Frames the classifier saw with an anomaly (runt, truncated header, \
             fragment, ...), by kind.\n# TYPE {name} counter"
        );
        for (kind, n) in &self.classify_anomalies {
            let _ = writeln!(s, "{name}{{device=\"{ingress}\",kind=\"{kind}\"}} {n}");
        }
    }

    /// The run-to-completion forwarder's counters (none with the PSPAT
    /// engine): `pktsched_forwarder_<counter>_total`.
    fn forwarder_metrics(&self, s: &mut String, dev: &str) {
        let Some(f) = &self.forwarder else {
            return;
        };
        for (metric, help, v) in [
            ("passes", "Passes of the forwarder's loop.", f.passes),
            ("frames_received", "Frames received.", f.frames_received),
            ("sleeps", "Waits on the ingress that slept.", f.sleeps),
            (
                "sleeps_woken",
                "Sleeps a frame's arrival ended.",
                f.sleeps_woken,
            ),
            (
                "tx_kicks",
                "TX kicks (sends of waiting frames).",
                f.tx_kicks,
            ),
            (
                "tx_kick_frames",
                "Frames the TX kicks sent.",
                f.tx_kick_frames,
            ),
        ] {
            let name = format!("pktsched_forwarder_{metric}_total");
            let _ = writeln!(
                s,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name}{{device=\"{dev}\"}} {v}"
            );
        }
    }

    /// The forwarder's counters as one text line (none with the PSPAT
    /// engine).
    fn forwarder_text(&self, s: &mut String) {
        let Some(f) = &self.forwarder else {
            return;
        };
        let _ = writeln!(
            s,
            "forwarder: passes {} (with rx {}) frames {} sleeps {} (woken {}) asked {:.0}us \
             slept {:.0}us tx kicks {} frames {} (timed {}: {:.0}us, p99 {:.0}us)",
            f.passes,
            f.passes_with_rx,
            f.frames_received,
            f.sleeps,
            f.sleeps_woken,
            f.sleep_asked_us,
            f.sleep_slept_us,
            f.tx_kicks,
            f.tx_kick_frames,
            f.tx_kicks_timed,
            f.tx_kick_us,
            f.tx_kick_p99_us
        );
    }

    /// The kernel-receive split per class as summaries (seconds, by
    /// quantile): `pktsched_class_ring_wait_seconds`,
    /// `pktsched_class_rx_latency_seconds`, and
    /// `pktsched_class_rx_stamped_total`.
    fn rx_split_metrics(classes: &[ClassStats], s: &mut String, dev: &str) {
        type Pick = fn(&ClassStats) -> [f64; 3];
        let split: [(&str, &str, Pick); 2] = [
            (
                "pktsched_class_ring_wait_seconds",
                "Kernel receive to taken from the device (stamped frames).",
                |c| [c.ring_wait_p50_us, c.ring_wait_p99_us, c.ring_wait_p999_us],
            ),
            (
                "pktsched_class_rx_latency_seconds",
                "Kernel receive to released to the egress (stamped frames).",
                |c| [c.latency_p50_us, c.latency_p99_us, c.latency_p999_us],
            ),
        ];
        for (name, help, pick) in split {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} summary");
            for c in classes {
                for (q, us) in ["0.5", "0.99", "0.999"].iter().zip(pick(c)) {
                    // No stamped frame yet: no quantile (Prometheus' NaN),
                    // not a latency of 0.
                    let value = if c.rx_stamped == 0 {
                        "NaN".to_string()
                    } else {
                        (us / 1e6).to_string()
                    };
                    let _ = writeln!(
                        s,
                        "{name}{{device=\"{dev}\",class=\"{}\",quantile=\"{q}\"}} {value}",
                        c.class,
                    );
                }
                let _ = writeln!(
                    s,
                    "{name}_count{{device=\"{dev}\",class=\"{}\"}} {}",
                    c.class, c.rx_stamped
                );
            }
        }
    }
}

/// `value` as a Prometheus label value: `\`, `"` and a line feed
/// escaped (an interface may be named `d"1`; class names cannot hold
/// them).
pub(crate) fn label_value(value: &str) -> std::borrow::Cow<'_, str> {
    if !value.contains(['\\', '"', '\n']) {
        return value.into();
    }
    let mut escaped = String::with_capacity(value.len() + 2);
    for c in value.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            c => escaped.push(c),
        }
    }
    escaped.into()
}

/// A checker of the Prometheus text exposition format as node_exporter
/// writes it, for the run's and the router's tests.
#[cfg(test)]
pub(crate) mod exposition;

#[cfg(test)]
mod tests;
