use pktsched_io::{RxRingKind, TxRingKind};

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
        devices: sample_devices(),
        ..Snapshot::default()
    }
}

/// Every device counter, by name, with a distinct value on an AF_XDP
/// device (its receive and transmit rings).
const XDP_RX_COUNTERS: [(&str, u64); 12] = [
    ("rx_packets", 101),
    ("tx_packets", 102),
    ("rx_kernel_drops", 103),
    ("rx_ring_full", 104),
    ("rx_fill_empty", 105),
    ("rx_freezes", 106),
    ("rx_no_buffer", 107),
    ("rx_oversize", 108),
    ("tx_busy", 109),
    ("tx_failed", 110),
    ("tx_invalid", 112),
    ("rx_mailbox_full", 113),
];

/// An AF_XDP receive socket (no freeze counter) and an AF_PACKET
/// transmit socket (no ring counters).
fn sample_devices() -> Vec<DeviceStats> {
    let v = |name: &str| {
        XDP_RX_COUNTERS
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, v)| *v)
    };
    let xdp = IoStats {
        rx_ring: RxRingKind::Xdp,
        tx_ring: TxRingKind::Xdp,
        rx_packets: v("rx_packets"),
        tx_packets: v("tx_packets"),
        rx_kernel_drops: v("rx_kernel_drops"),
        rx_ring_full: v("rx_ring_full"),
        rx_fill_empty: v("rx_fill_empty"),
        rx_freezes: v("rx_freezes"),
        rx_no_buffer: v("rx_no_buffer"),
        rx_oversize: v("rx_oversize"),
        tx_busy: v("tx_busy"),
        tx_failed: v("tx_failed"),
        tx_invalid: v("tx_invalid"),
        ..IoStats::default()
    };
    let tx = IoStats {
        tx_packets: 7,
        ..IoStats::default()
    };
    // As the pspat engine's receive thread reports it.
    let rx = DeviceStats {
        rx_mailbox_full: Some(v("rx_mailbox_full")),
        ..DeviceStats::from_io("d0", "rx", &xdp)
    };
    vec![rx, DeviceStats::from_io("d1", "tx", &tx)]
}

/// The counters the AF_XDP socket has (all but the freezes).
fn xdp_rx_counters() -> impl Iterator<Item = (&'static str, u64)> {
    XDP_RX_COUNTERS
        .into_iter()
        .filter(|(n, _)| *n != "rx_freezes")
}

#[test]
fn a_device_has_the_ring_counters_its_kind_of_ring_has() {
    let io = IoStats {
        rx_ring_full: 5,
        rx_fill_empty: 6,
        rx_freezes: 7,
        ..IoStats::default()
    };
    let of = |rx_ring| {
        let d = DeviceStats::from_io("d0", "rx", &IoStats { rx_ring, ..io });
        (d.rx_ring_full, d.rx_fill_empty, d.rx_freezes)
    };
    assert_eq!(of(RxRingKind::Xdp), (Some(5), Some(6), None));
    assert_eq!(of(RxRingKind::PacketBlocks), (Some(5), None, Some(7)));
    assert_eq!(of(RxRingKind::PacketSlots), (Some(5), None, None));
    assert_eq!(of(RxRingKind::None), (None, None, None));
}

#[test]
fn only_an_af_xdp_transmit_ring_has_an_invalid_descriptor_counter() {
    let io = IoStats {
        tx_invalid: 4,
        ..IoStats::default()
    };
    let of = |rx_ring, tx_ring| {
        let io = IoStats {
            rx_ring,
            tx_ring,
            ..io
        };
        DeviceStats::from_io("d1", "tx", &io).tx_invalid
    };
    assert_eq!(of(RxRingKind::None, TxRingKind::Xdp), Some(4));
    assert_eq!(of(RxRingKind::Xdp, TxRingKind::Other), None);
    assert_eq!(of(RxRingKind::PacketSlots, TxRingKind::Other), None);
}

#[test]
fn every_device_counter_is_in_text_json_and_prometheus() {
    let snap = sample();
    let t = snap.text();
    let v: serde_json::Value = serde_json::from_str(&snap.json()).expect("json");
    let p = snap.prometheus();
    assert!(
        t.contains("device d0 rx: rx 101 tx 102 rx_kernel_drops 103 "),
        "{t}"
    );
    for (name, n) in xdp_rx_counters() {
        if !name.ends_with("_packets") {
            assert!(t.contains(&format!(" {name} {n}")), "{name} in {t}");
        }
        assert_eq!(v["devices"][0][name], n, "{name} in {v}");
        assert!(
            p.contains(&format!(
                "pktsched_device_{name}_total{{device=\"d0\",role=\"rx\"}} {n}\n"
            )),
            "{name} in {p}"
        );
        assert!(
            p.contains(&format!("# TYPE pktsched_device_{name}_total counter\n")),
            "{name} in {p}"
        );
    }
    // Counters the device has not: a dash, null, no series.
    assert!(t.contains(" rx_freezes — "), "{t}");
    assert!(v["devices"][0]["rx_freezes"].is_null(), "{v}");
    assert!(!p.contains("pktsched_device_rx_freezes_total{"), "{p}");
    assert!(
        t.contains(
            "device d1 tx: rx 0 tx 7 rx_kernel_drops 0 rx_ring_full — rx_fill_empty — rx_freezes — "
        ),
        "{t}"
    );
    for name in [
        "rx_ring_full",
        "rx_fill_empty",
        "rx_freezes",
        "tx_invalid",
        "rx_mailbox_full",
    ] {
        assert!(v["devices"][1][name].is_null(), "{name} in {v}");
        assert!(
            !p.contains(&format!("pktsched_device_{name}_total{{device=\"d1\"")),
            "{p}"
        );
    }
    assert!(p.contains("pktsched_device_tx_packets_total{device=\"d1\",role=\"tx\"} 7\n"));
}

#[test]
fn every_device_counter_has_a_prometheus_help() {
    let names: Vec<&str> = DeviceStats::default()
        .counters()
        .iter()
        .map(|c| c.0)
        .collect();
    let helped: Vec<&str> = DEVICE_HELP.iter().map(|h| h.0).collect();
    assert_eq!(names, helped);
    let listed: Vec<&str> = XDP_RX_COUNTERS.iter().map(|c| c.0).collect();
    assert_eq!(names, listed);
}

#[test]
fn the_pipeline_dump_shows_the_ingress_ring_counters() {
    let mut snap = sample();
    let d = snap.pipeline_text();
    assert!(
        d.contains(
            "[d0 rx] 101 frames (kernel/no-buffer drops 210; ring full 104, fill ring empty 105)"
        ),
        "{d}"
    );
    snap.devices[0].rx_fill_empty = None;
    let d = snap.pipeline_text();
    assert!(d.contains("ring full 104, fill ring empty —)"), "{d}");
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

/// pktsched keeps no requeue counter (nothing is handed back to a
/// queue after its dequeue; a busy transmit ring is the devices'
/// `tx_busy`): the text keeps tc's field, unknown, not a 0.
#[test]
fn requeues_are_a_dash_not_a_fake_zero() {
    let t = sample().text();
    assert!(t.contains("overlimits 0 requeues —)"), "{t}");
    assert!(!t.contains("requeues 0"), "{t}");
}

#[test]
fn json_drops_and_anomalies_are_objects_keyed_by_name() {
    let mut snap = sample();
    snap.classes[0].drops_by_reason = [2, 0, 0, 5];
    snap.classify_anomalies = vec![("runt".into(), 1), ("fragment".into(), 4)];
    let v: serde_json::Value = serde_json::from_str(&snap.json()).expect("json");
    let by = &v["classes"][0]["drops_by_reason"];
    assert_eq!(
        by,
        &serde_json::json!({"queue_full": 2, "too_large": 0, "unknown_flow": 0, "tx_failed": 5}),
        "{v}"
    );
    assert_eq!(
        v["classify_anomalies"],
        serde_json::json!({"runt": 1, "fragment": 4}),
        "{v}"
    );
    // The same names as the text.
    let t = snap.text();
    assert!(
        t.contains("drops: queue_full 2, too_large 0, unknown_flow 0, tx_failed 5"),
        "{t}"
    );
    assert!(
        t.contains("classifier anomalies: runt 1, fragment 4;"),
        "{t}"
    );
}

/// The text's last line in Prometheus: reverse direction, anomalies
/// by kind, arbiter rounds and decisions, reloads.
#[test]
fn prometheus_has_the_pipeline_counters() {
    let mut snap = sample();
    (snap.reverse_forwarded, snap.reverse_dropped) = (9, 1);
    (snap.arbiter_loops, snap.arbiter_decisions, snap.reloads) = (40, 30, 2);
    snap.classify_anomalies = vec![("runt".into(), 3)];
    let p = snap.prometheus();
    for line in [
        "pktsched_reverse_forwarded_total{device=\"d0\"} 9\n",
        "pktsched_reverse_dropped_total{device=\"d0\"} 1\n",
        "pktsched_arbiter_loops_total{device=\"d1\"} 40\n",
        "pktsched_arbiter_decisions_total{device=\"d1\"} 30\n",
        "pktsched_reloads_total{device=\"d1\"} 2\n",
        "pktsched_classify_anomalies_total{device=\"d0\",kind=\"runt\"} 3\n",
    ] {
        assert!(p.contains(line), "{line} in\n{p}");
    }
    assert_eq!(super::exposition::problems(&p), Vec::<String>::new(), "{p}");
}

/// received = sent + dropped + queued (+ moved, dropped at stop) can
/// be checked from a scrape.
#[test]
fn prometheus_has_the_received_counter_of_each_class() {
    let mut snap = sample();
    snap.classes[0].received = 12;
    let p = snap.prometheus();
    assert!(
        p.contains("# TYPE pktsched_class_received_total counter\n")
            && p.contains("pktsched_class_received_total{device=\"d1\",class=\"voip\"} 12\n"),
        "{p}"
    );
}

/// The whole scrape, with a forwarder, a removed class and one
/// without samples: every family has HELP and TYPE and its samples
/// together, counters end in `_total`, base units, no series twice.
#[test]
fn the_prometheus_scrape_follows_the_exposition_conventions() {
    let mut snap = sample();
    snap.forwarder = Some(crate::engine::ForwarderStats::default());
    snap.classes.push(ClassStats {
        class: "web".into(),
        sojourn_buckets: vec![0; 8],
        ..ClassStats::default()
    });
    snap.classes.push(ClassStats {
        removed: true,
        ..snap.classes[0].clone()
    });
    let p = snap.prometheus();
    assert_eq!(super::exposition::problems(&p), Vec::<String>::new(), "{p}");
}

/// Linux lets an interface be named `d"1` or `a\b`: the label values
/// are escaped, so the scrape still parses.
#[test]
fn device_names_with_quotes_and_backslashes_are_escaped() {
    let mut snap = sample();
    snap.ingress = "a\\b".into();
    snap.egress = "d\"1".into();
    for d in &mut snap.devices {
        d.device = "d\"1".into();
    }
    snap.forwarder = Some(crate::engine::ForwarderStats::default());
    let p = snap.prometheus();
    assert_eq!(super::exposition::problems(&p), Vec::<String>::new(), "{p}");
    assert!(
        p.contains("pktsched_class_packets_total{device=\"d\\\"1\",class=\"voip\"} 1\n"),
        "{p}"
    );
    assert!(
        p.contains("pktsched_reverse_forwarded_total{device=\"a\\\\b\"}"),
        "{p}"
    );
    assert!(!p.contains("device=\"d\"1\""), "{p}");
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
    assert!(p.contains("pktsched_class_rx_latency_seconds_count{device=\"d1\",class=\"voip\"} 1"));
    // Every sample line is NAME{LABELS} VALUE.
    for line in p.lines().filter(|l| !l.starts_with('#')) {
        let (_, value) = line.rsplit_once(' ').expect("value");
        assert!(value.parse::<f64>().is_ok(), "{line}");
    }
    // A class with no stamped frame has no quantiles, not zeros.
    let mut unstamped = sample();
    unstamped.classes[0].rx_stamped = 0;
    let p = unstamped.prometheus();
    assert!(
        p.contains(
            "pktsched_class_ring_wait_seconds{device=\"d1\",class=\"voip\",quantile=\"0.99\"} NaN"
        ),
        "{p}"
    );
}

/// A class removed by a reload and added again (or removed twice) is
/// one series per metric: its entries add up under its name, the
/// quantiles are the live class's.
#[test]
fn a_removed_and_re_added_class_is_one_prometheus_series() {
    let mut snap = sample();
    let live = snap.classes[0].clone();
    let gone = |bytes, moved| ClassStats {
        class: "voip".into(),
        bytes,
        packets: 1,
        moved,
        removed: true,
        sojourn_buckets: vec![1; 8],
        sojourn_count: 1,
        rx_stamped: 1,
        ring_wait_p99_us: 900.0,
        ..ClassStats::default()
    };
    snap.classes.push(ClassStats {
        class: "web".into(),
        sojourn_buckets: vec![0; 8],
        ..ClassStats::default()
    });
    snap.classes.push(gone(100, 2));
    snap.classes.push(gone(10, 1));
    let p = snap.prometheus();
    let mut seen = std::collections::HashSet::new();
    for line in p.lines().filter(|l| !l.starts_with('#')) {
        let (series, _) = line.rsplit_once(' ').expect("value");
        assert!(seen.insert(series.to_string()), "{series} twice:\n{p}");
    }
    let value = |series: &str| {
        p.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("{series} in\n{p}"))
            .to_string()
    };
    let voip = "{device=\"d1\",class=\"voip\"}";
    assert_eq!(
        value(&format!("pktsched_class_bytes_total{voip}")),
        (live.bytes + 110).to_string()
    );
    assert_eq!(
        value(&format!("pktsched_class_moved_total{voip}")),
        (live.moved + 3).to_string()
    );
    assert_eq!(
        value(&format!("pktsched_class_sojourn_seconds_count{voip}")),
        "3"
    );
    assert_eq!(
        value("pktsched_class_ring_wait_seconds{device=\"d1\",class=\"voip\",quantile=\"0.99\"}"),
        "0.00004",
        "the live class's quantile"
    );
    assert_eq!(
        value(&format!("pktsched_class_rx_latency_seconds_count{voip}")),
        "3"
    );
    // The text and JSON keep every entry, marked removed.
    assert_eq!(snap.text().matches("class voip (removed)").count(), 2);
}
