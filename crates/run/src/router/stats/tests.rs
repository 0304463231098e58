use super::*;

#[test]
fn ring_counters_are_shown_and_fill_empty_only_on_af_xdp() {
    let ring = RingSnapshot {
        name: "voip".into(),
        dropped_ring_full: 11,
        dropped_fill_empty: 12,
        dropped_kernel: 13,
        ..RingSnapshot::default()
    };
    let xdp = RouterSnapshot {
        backend: "xdp".into(),
        rings: vec![ring.clone()],
        ..RouterSnapshot::default()
    };
    let t = xdp.text();
    assert!(t.contains("ring_full 11 fill_empty 12 kernel 13"), "{t}");
    let v: serde_json::Value = serde_json::from_str(&xdp.json()).expect("json");
    assert_eq!(v["rings"][0]["dropped_ring_full"], 11);
    assert_eq!(v["rings"][0]["dropped_fill_empty"], 12);
    assert_eq!(v["rings"][0]["dropped_kernel"], 13);
    let p = xdp.prometheus();
    for (what, n) in [("ring_full", 11), ("fill_empty", 12), ("kernel_drops", 13)] {
        assert!(
            p.contains(&format!(
                "pktsched_route_ring_{what}_total{{ring=\"voip\"}} {n}\n"
            )),
            "{what} in {p}"
        );
    }
    // AF_PACKET has no fill ring: a dash, null, no series.
    let packet = RouterSnapshot {
        backend: "packet".into(),
        ..xdp
    };
    let t = packet.text();
    assert!(t.contains("ring_full 11 fill_empty — kernel 13"), "{t}");
    let v: serde_json::Value = serde_json::from_str(&packet.json()).expect("json");
    assert!(v["rings"][0]["dropped_fill_empty"].is_null(), "{v}");
    assert_eq!(v["rings"][0]["dropped_ring_full"], 11);
    let p = packet.prometheus();
    assert!(!p.contains("pktsched_route_ring_fill_empty_total"), "{p}");
    assert!(p.contains("pktsched_route_ring_ring_full_total{ring=\"voip\"} 11\n"));
}

#[test]
fn latency_without_a_transmitted_frame_is_a_dash_null_and_nan() {
    let mut c = ClassAcc::new();
    c.received = 1;
    c.queued = 1;
    let all = RouterSnapshot {
        classes: vec![c.snapshot("rt")],
        ..RouterSnapshot::default()
    };
    let t = all.text();
    assert!(
        t.contains("(kernel receive -> transmit) p50 — p99 — p99.9 — max — |"),
        "{t}"
    );
    let v: serde_json::Value = serde_json::from_str(&all.json()).expect("json");
    let class = &v["classes"][0];
    for k in [
        "latency_p50_ns",
        "latency_p99_ns",
        "latency_p999_ns",
        "latency_max_ns",
    ] {
        assert!(class[k].is_null(), "{k}: {class}");
    }
    assert_eq!(class["latency_samples"], 0, "{class}");
    let prom = all.prometheus();
    assert!(
        prom.contains("pktsched_route_class_latency_seconds{class=\"rt\",quantile=\"0.99\"} NaN"),
        "{prom}"
    );
    // One frame transmitted: numbers again.
    let _ = c.latency.record(7_000);
    let snap = c.snapshot("rt");
    assert_eq!(snap.latency_samples, 1);
    let t = RouterSnapshot {
        classes: vec![snap],
        ..RouterSnapshot::default()
    }
    .text();
    assert!(t.contains("max 7"), "{t}");
    assert!(!t.contains("p50 — p99 — p99.9 — max — |"), "{t}");
}

#[test]
fn ring_wait_without_a_stamped_frame_is_a_dash_and_null() {
    let mut c = ClassAcc::new();
    assert_eq!(c.taken(0, 5_000), 5_000, "no stamp");
    let all = RouterSnapshot {
        classes: vec![c.snapshot("be")],
        ..RouterSnapshot::default()
    };
    let t = all.text();
    assert!(
        t.contains("ring wait p50 — p99 — p99.9 — max — (0 stamped)"),
        "{t}"
    );
    let v: serde_json::Value = serde_json::from_str(&all.json()).expect("json");
    let class = &v["classes"][0];
    for k in [
        "ring_wait_p50_ns",
        "ring_wait_p99_ns",
        "ring_wait_p999_ns",
        "ring_wait_max_ns",
    ] {
        assert!(class[k].is_null(), "{k}: {class}");
    }
    assert_eq!(class["rx_stamped"], 0, "{class}");
}

#[test]
fn ring_wait_beyond_the_histogram_is_counted_stamped_but_not_as_a_sample() {
    let mut c = ClassAcc::new();
    // Waited 200 s: over the histogram's 100 s, so not recorded.
    assert_eq!(c.taken(1, 200_000_000_001), 1);
    let snap = c.snapshot("be");
    assert_eq!((snap.rx_stamped, snap.ring_wait_samples), (1, 0));
    let all = RouterSnapshot {
        classes: vec![snap],
        ..RouterSnapshot::default()
    };
    let t = all.text();
    assert!(
        t.contains("ring wait p50 — p99 — p99.9 — max — (1 stamped)"),
        "{t}"
    );
    let v: serde_json::Value = serde_json::from_str(&all.json()).expect("json");
    let class = &v["classes"][0];
    assert!(class["ring_wait_max_ns"].is_null(), "{class}");
    assert_eq!(class["ring_wait_samples"], 0, "{class}");
    let prom = all.prometheus();
    assert!(
        prom.contains("pktsched_route_class_ring_wait_seconds{class=\"be\",quantile=\"0.99\"} NaN")
            && prom.contains("pktsched_route_class_ring_wait_seconds_count{class=\"be\"} 0")
            && prom.contains("pktsched_route_class_latency_seconds_count{class=\"be\"} 0")
            && prom.contains("pktsched_route_class_rx_stamped_total{class=\"be\"} 1"),
        "{prom}"
    );
}

#[test]
fn latency_starts_at_the_kernel_receive_when_known() {
    let mut c = ClassAcc::new();
    assert_eq!(c.taken(0, 5_000), 5_000, "no stamp: from the take");
    assert_eq!(c.taken(4_000, 5_000), 4_000, "stamped: from the receive");
    assert_eq!(
        c.taken(9_000, 5_000),
        5_000,
        "a stamp after the take is clamped"
    );
    assert_eq!(c.rx_stamped, 2);
    let _ = c.latency.record(7_000);
    let snap = c.snapshot("rt");
    assert_eq!(snap.ring_wait_max_ns, 1_000);
    assert_eq!(snap.ring_wait_p50_ns, 1, "the clamped one waited ~0");
    assert_eq!(snap.rx_stamped, 2);
    let all = RouterSnapshot {
        classes: vec![snap],
        ..RouterSnapshot::default()
    };
    let prom = all.prometheus();
    assert!(
        prom.contains(
            "pktsched_route_class_ring_wait_seconds{class=\"rt\",quantile=\"0.99\"} 0.000001"
        ) && prom.contains("pktsched_route_class_rx_stamped_total{class=\"rt\"} 2")
            && prom.contains("pktsched_route_class_ring_wait_seconds_count{class=\"rt\"} 2")
            && prom.contains("pktsched_route_class_latency_seconds_count{class=\"rt\"} 1")
            && prom
                .contains("pktsched_route_class_latency_seconds{class=\"rt\",quantile=\"0.5\"} "),
        "{prom}"
    );
    // The median itself, to the histogram's precision (7 µs recorded).
    let p50: f64 = prom
        .lines()
        .find_map(|l| {
            l.strip_prefix("pktsched_route_class_latency_seconds{class=\"rt\",quantile=\"0.5\"} ")
        })
        .and_then(|v| v.trim().parse().ok())
        .expect("the p50 line");
    assert!((7e-6..=7.007e-6).contains(&p50), "p50 {p50} s");
    let json = all.json();
    assert!(
        json.contains("\"ring_wait_p99_ns\"") && json.contains("\"rx_stamped\": 2"),
        "{json}"
    );
    assert!(
        all.text().contains("ring wait p50 0.0us p99 1.0us"),
        "{}",
        all.text()
    );
}

/// Two rings, two classes (one with a drop and samples, one without),
/// an `[egress]`.
fn full() -> RouterSnapshot {
    let mut rt = ClassAcc::new();
    (rt.received, rt.forwarded, rt.queued) = (5, 3, 1);
    rt.drops[QUEUE_FULL] = 1;
    let _ = rt.latency.record(2_000);
    assert_eq!(rt.taken(1_000, 1_500), 1_000);
    let ring = |name: &str| RingSnapshot {
        name: name.into(),
        received: 7,
        ..RingSnapshot::default()
    };
    let eg = |name: &str| super::super::egress::EgressClassSnapshot {
        name: name.into(),
        sent_bytes: 1500,
        backlog_packets: 2,
        ..Default::default()
    };
    RouterSnapshot {
        backend: "xdp".into(),
        service_ns: 250.0,
        icmp_sent: 1,
        rings: vec![ring("rt"), ring("be")],
        classes: vec![rt.snapshot("rt"), ClassAcc::new().snapshot("be")],
        egress: Some(super::super::egress::EgressSnapshot {
            algorithm: "drr".into(),
            rate_bps: 8_000_000,
            overlimits: 3,
            classes: vec![eg("rt"), eg("be")],
        }),
        ..RouterSnapshot::default()
    }
}

/// One `pktsched stats --json` vocabulary: a route class also has the
/// run's names (`class`, `packets`, `drops`, `drops_by_reason` by
/// name, `qlen`) and its latencies in µs; the router's own names stay
/// (readers use them).
#[test]
fn route_json_has_the_run_vocabulary_and_units() {
    let v: serde_json::Value = serde_json::from_str(&full().json()).expect("json");
    let rt = &v["classes"][0];
    assert_eq!(rt["class"], "rt", "{rt}");
    assert_eq!(rt["packets"], 3, "{rt}");
    assert_eq!(rt["drops"], 1, "{rt}");
    assert_eq!(rt["qlen"], 1, "{rt}");
    assert_eq!(rt["drops_by_reason"]["queue_full"], 1, "{rt}");
    assert_eq!(rt["drops_by_reason"]["no_route"], 0, "{rt}");
    assert_eq!(
        rt["drops_by_reason"].as_object().map(|m| m.len()),
        Some(REASONS.len())
    );
    let p50 = rt["latency_p50_us"].as_f64().expect("a µs float");
    assert!((2.0..=2.002).contains(&p50), "{rt}");
    assert_eq!(rt["ring_wait_max_us"], 0.5, "{rt}");
    // The router's names are still there.
    assert_eq!((&rt["name"], &rt["forwarded"]), (&"rt".into(), &3.into()));
    assert_eq!(rt["dropped"]["queue_full"], 1, "{rt}");
    assert!(rt["latency_p50_ns"].is_u64(), "{rt}");
    // No sample: null in µs as in ns.
    let be = &v["classes"][1];
    for k in ["latency_p99_us", "ring_wait_p99_us", "latency_max_us"] {
        assert!(be[k].is_null(), "{k}: {be}");
    }
}

/// The whole scrape (rings, classes, `[egress]`): every family has
/// HELP and TYPE and its samples together, counters end in `_total`,
/// base units (seconds, bytes), no series twice.
#[test]
fn the_route_scrape_follows_the_exposition_conventions() {
    let snap = full();
    for p in [snap.prometheus(), snap.prometheus_on(Some(("d0", "d1")))] {
        assert_eq!(
            crate::stats::exposition::problems(&p),
            Vec::<String>::new(),
            "{p}"
        );
    }
    let p = snap.prometheus();
    for line in [
        "pktsched_route_service_seconds 0.00000025\n",
        "pktsched_route_icmp_sent_total 1\n",
        "pktsched_route_class_packets_total{class=\"rt\"} 3\n",
        "pktsched_route_class_drops_total{class=\"rt\",reason=\"queue_full\"} 1\n",
        "pktsched_route_class_drops_total{class=\"be\",reason=\"queue_full\"} 0\n",
        "pktsched_route_class_backlog_packets{class=\"rt\"} 1\n",
        "pktsched_route_egress_rate_bytes_per_second 1000000\n",
        "pktsched_route_egress_class_bytes_total{class=\"be\"} 1500\n",
        "pktsched_route_egress_backlog_packets{class=\"rt\"} 2\n",
        "# TYPE pktsched_route_icmp_not_sent_total counter\n",
    ] {
        assert!(p.contains(line), "{line} in\n{p}");
    }
}

/// No frame served yet: the service time is unknown (`—`, `null`,
/// NaN), not 0.
#[test]
fn an_unmeasured_service_time_is_a_dash_null_and_nan() {
    let snap = RouterSnapshot {
        service_ns: 0.0,
        ..full()
    };
    assert!(
        snap.text().contains("service time x = — ns/packet"),
        "{}",
        snap.text()
    );
    let v: serde_json::Value = serde_json::from_str(&snap.json()).expect("json");
    assert!(v["service_ns"].is_null(), "{v}");
    assert!(
        snap.prometheus()
            .contains("pktsched_route_service_seconds NaN\n")
    );
    let measured = full();
    assert!(measured.text().contains("service time x = 250 ns/packet"));
    let v: serde_json::Value = serde_json::from_str(&measured.json()).expect("json");
    assert_eq!(v["service_ns"], 250.0);
}

/// An interface named with a quote or a backslash (Linux allows both)
/// is escaped in the `device` label, so the scrape still parses.
#[test]
fn route_device_labels_are_escaped() {
    let p = full().prometheus_on(Some(("a\\b", "d\"1")));
    assert_eq!(
        crate::stats::exposition::problems(&p),
        Vec::<String>::new(),
        "{p}"
    );
    assert!(
        p.contains("pktsched_route_rounds_total{device=\"a\\\\b\"} 0\n"),
        "{p}"
    );
    assert!(
        p.contains("pktsched_route_egress_overlimits_total{device=\"d\\\"1\"} 3\n"),
        "{p}"
    );
}

/// Given the interfaces, each series names its device: the ingress for
/// the router's counters, the egress for the egress scheduler's.
#[test]
fn route_series_carry_the_device_they_are_about() {
    let p = full().prometheus_on(Some(("d0", "d1")));
    for line in [
        "pktsched_route_rounds_total{device=\"d0\"} 0\n",
        "pktsched_route_ring_received_total{device=\"d0\",ring=\"be\"} 7\n",
        "pktsched_route_class_received_total{device=\"d0\",class=\"rt\"} 5\n",
        "pktsched_route_class_latency_seconds_count{device=\"d0\",class=\"rt\"} 1\n",
        "pktsched_route_egress_overlimits_total{device=\"d1\"} 3\n",
        "pktsched_route_egress_class_drops_total{device=\"d1\",class=\"rt\",reason=\"queue_full\"} 0\n",
    ] {
        assert!(p.contains(line), "{line} in\n{p}");
    }
    let unlabelled = p
        .lines()
        .filter(|l| !l.starts_with('#') && !l.contains("device=\""))
        .count();
    assert_eq!(unlabelled, 0, "{p}");
}
