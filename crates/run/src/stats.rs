//! What `pktsched stats` shows: a snapshot of the pipeline's counters per
//! class (with `tc -s -j`'s field names where they exist), the devices'
//! and the arbiter's, in three forms: `tc -s`-style text, JSON, and the
//! Prometheus text format (node_exporter-style names).

use std::fmt::Write as _;

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
    /// Drops by reason ([`DROP_REASONS`] order).
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
}

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
    /// fragment, ...), by kind.
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
                " Sent {} bytes {} pkt (dropped {}, overlimits {} requeues 0)",
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
            let _ = writeln!(
                s,
                "device {} {}: rx {} tx {} rx_kernel_drops {} rx_no_buffer {} rx_oversize {} \
                 tx_busy {} tx_failed {}",
                d.device,
                d.role,
                d.rx_packets,
                d.tx_packets,
                d.rx_kernel_drops,
                d.rx_no_buffer,
                d.rx_oversize,
                d.tx_busy,
                d.tx_failed
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
        let tx = dev("tx").map_or(0, |d| d.tx_packets);
        let received: u64 = self.classes.iter().map(|c| c.received).sum();
        let anomalies: u64 = self.classify_anomalies.iter().map(|(_, n)| n).sum();
        let _ = writeln!(
            s,
            "[{} rx] {rx} frames (kernel/no-buffer drops {kdrop})\n  -> [classifier] {received}              classified ({anomalies} with anomalies)",
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
            "  -> [{} @ {}] {} decisions -> [{} tx] {tx} frames\n[{} -> {} reverse] {} forwarded,              {} dropped",
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

    /// The Prometheus text exposition format.
    pub fn prometheus(&self) -> String {
        let mut s = String::new();
        let dev = &self.egress;
        let counter = |s: &mut String, name: &str, help: &str, f: &dyn Fn(&ClassStats) -> u64| {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} counter");
            for c in &self.classes {
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
        for c in &self.classes {
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
            for c in &self.classes {
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
        for c in &self.classes {
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
        self.rx_split_metrics(&mut s, dev);
        self.forwarder_metrics(&mut s, dev);
        for d in &self.devices {
            for (metric, v) in [
                ("rx_packets", d.rx_packets),
                ("tx_packets", d.tx_packets),
                ("rx_kernel_drops", d.rx_kernel_drops),
                ("rx_no_buffer", d.rx_no_buffer),
                ("rx_oversize", d.rx_oversize),
                ("tx_busy", d.tx_busy),
                ("tx_failed", d.tx_failed),
            ] {
                let _ = writeln!(
                    s,
                    "pktsched_device_{metric}_total{{device=\"{}\",role=\"{}\"}} {v}",
                    d.device, d.role
                );
            }
        }
        s
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
    fn rx_split_metrics(&self, s: &mut String, dev: &str) {
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
            for c in &self.classes {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Snapshot {
        Snapshot {
            ingress: "d0".into(),
            egress: "d1".into(),
            rate: "100mbit".into(),
            scheduler: "drr".into(),
            classes: vec![ClassStats {
                class: "voip".into(),
                bytes: 1500,
                packets: 1,
                drops: 2,
                drops_by_reason: [2, 0, 0, 0],
                sojourn_buckets: vec![0, 1, 1, 1, 1, 1, 1, 1],
                sojourn_count: 1,
                rate_bps: 12_500_000,
                rx_stamped: 1,
                ring_wait_p50_us: 3.0,
                ring_wait_p99_us: 40.0,
                latency_p99_us: 250.0,
                moved: 4,
                dropped_at_stop: 3,
                ..ClassStats::default()
            }],
            ..Snapshot::default()
        }
    }

    #[test]
    fn text_has_tc_s_fields() {
        let t = sample().text();
        assert!(
            t.contains("class voip\n Sent 1500 bytes 1 pkt (dropped 2, overlimits 0"),
            "{t}"
        );
        assert!(t.contains("rate 12.50Mbit"), "{t}");
        assert!(t.contains("queue_full 2"), "{t}");
        assert!(t.contains(" moved 4 dropped_at_stop 3 drops:"), "{t}");
        assert!(
            t.contains("from kernel receive (1 stamped): ring wait p50 3us p99 40us"),
            "{t}"
        );
        assert!(t.contains("to the egress p50 0us p99 250us"), "{t}");
    }

    #[test]
    fn the_forwarder_counters_are_in_text_and_prometheus() {
        let mut snap = sample();
        assert!(!snap.text().contains("forwarder:"), "no forwarder, no line");
        snap.forwarder = Some(crate::engine::ForwarderStats {
            passes: 9,
            tx_kicks: 5,
            tx_kick_frames: 40,
            ..Default::default()
        });
        let t = snap.text();
        assert!(
            t.contains("forwarder: passes 9 ") && t.contains("tx kicks 5 frames 40"),
            "{t}"
        );
        let p = snap.prometheus();
        assert!(
            p.contains("pktsched_forwarder_passes_total{device=\"d1\"} 9"),
            "{p}"
        );
        assert!(
            p.contains("pktsched_forwarder_tx_kick_frames_total{device=\"d1\"} 40"),
            "{p}"
        );
    }

    #[test]
    fn json_uses_tc_field_names() {
        let v: serde_json::Value = serde_json::from_str(&sample().json()).expect("json");
        let c = &v["classes"][0];
        for k in ["bytes", "packets", "drops", "overlimits", "backlog", "qlen"] {
            assert!(c.get(k).is_some(), "no {k} in {c}");
        }
        assert_eq!(c["drops"], 2);
        assert_eq!(c["ring_wait_p99_us"], 40.0);
        assert_eq!(c["latency_p99_us"], 250.0);
        assert_eq!(c["rx_stamped"], 1);
        assert_eq!(c["sojourn_p99_us"], 0.0);
    }

    #[test]
    fn quantiles_without_samples_are_a_dash_and_null_not_zero() {
        let mut snap = sample();
        snap.classes[0].rx_stamped = 0;
        snap.classes[0].sojourn_count = 0;
        let t = snap.text();
        assert!(
            t.contains("sojourn p50 — p99 —")
                && t.contains(
                    "(0 stamped): ring wait p50 — p99 — p999 —, to the egress p50 — p99 — p999 —"
                ),
            "{t}"
        );
        let v: serde_json::Value = serde_json::from_str(&snap.json()).expect("json");
        let c = &v["classes"][0];
        for k in RX_SPLIT_FIELDS
            .iter()
            .chain(&["sojourn_p50_us", "sojourn_p99_us"])
        {
            assert!(c[*k].is_null(), "{k}: {c}");
        }
        assert_eq!(c["rx_stamped"], 0);
        assert_eq!(c["bytes"], 1500);
    }

    #[test]
    fn prometheus_names_and_histogram() {
        let p = sample().prometheus();
        assert!(p.contains("pktsched_class_bytes_total{device=\"d1\",class=\"voip\"} 1500"));
        assert!(p.contains("pktsched_class_moved_total{device=\"d1\",class=\"voip\"} 4"));
        assert!(
            p.contains("pktsched_class_dropped_at_stop_total{device=\"d1\",class=\"voip\"} 3"),
            "{p}"
        );
        assert!(p.contains(
            "pktsched_class_drops_total{device=\"d1\",class=\"voip\",reason=\"queue_full\"} 2"
        ));
        assert!(p.contains(
            "pktsched_class_sojourn_seconds_bucket{device=\"d1\",class=\"voip\",le=\"+Inf\"} 1"
        ));
        assert!(p.contains(
            "pktsched_class_ring_wait_seconds{device=\"d1\",class=\"voip\",quantile=\"0.99\"} 0.00004"
        ), "{p}");
        assert!(
            p.contains("pktsched_class_rx_latency_seconds_count{device=\"d1\",class=\"voip\"} 1")
        );
        // Every sample line is NAME{LABELS} VALUE.
        for line in p.lines().filter(|l| !l.starts_with('#')) {
            let (_, value) = line.rsplit_once(' ').expect("value");
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
        // A class with no stamped frame has no quantiles, not zeros.
        let mut unstamped = sample();
        unstamped.classes[0].rx_stamped = 0;
        let p = unstamped.prometheus();
        assert!(p.contains(
            "pktsched_class_ring_wait_seconds{device=\"d1\",class=\"voip\",quantile=\"0.99\"} NaN"
        ), "{p}");
    }
}
