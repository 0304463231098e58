//! The ingress's ring counters go from the kernel through `IoStats` and
//! `DeviceStats::from_io` into the stats' text, JSON and Prometheus forms
//! (the daemon and its control socket are not started here): on
//! real veths in namespaces of their own (prefix `c7-`), frames arrive on
//! d0 while nobody reads its receive ring (a stopped or slow forwarder),
//! four times as many as the ring holds; then the reader catches up. Every
//! frame sent is then read or counted lost, exactly: by the socket
//! (`rx_kernel_drops`: AF_XDP's ring full plus fill ring empty, one or the
//! other per frame; AF_PACKET's `tp_drops`, as ring full) or by veth
//! before the socket (g0's `tx_dropped`). IPv6 is off, so every frame on
//! the wire is the test's. The counters are in the device's stats and
//! in the stats' text, JSON and Prometheus forms, and the
//! counters the backend has not are a dash, `null` and no series. Needs
//! root (CI runs as root); skipped with a message otherwise. The
//! namespaces are removed even when a test fails.

mod common;
use common::skipped;

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use pktsched_io::frame::{UdpSpec, build_udp};
use pktsched_io::netns::{Topology, in_namespace, missing_privileges};
use pktsched_io::packet::{FrameRing, PacketSocket, Role};
use pktsched_io::{BufPool, PacketIo};
use pktsched_run::config::parse;
use pktsched_run::devices::{LinkDevice, open_devices};
use pktsched_run::stats::{DeviceStats, Snapshot};

/// One class for every frame.
const ALL: &str = r#"
[[class]]
name = "all"
prio = 0
limit = 200
default = true
"#;

/// The ingress ring's slots (both backends' single-ring default).
const RING: u64 = 4096;
const BURST: u64 = 256;

fn frame(pool: &BufPool) -> pktsched_io::PacketBuf {
    let spec = UdpSpec {
        src_mac: [0x02, 0xee, 0, 0, 0, 0x01],
        dst_mac: [0x02, 0xee, 0, 0, 0, 0x02],
        vlan: None,
        src_ip: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
        dst_ip: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
        sport: 40000,
        dport: 5000,
        dscp: 0,
        ttl: 64,
        payload: vec![0u8; 64],
    };
    let mut b = pool.get().expect("buffer");
    let n = build_udp(b.spare(), &spec).expect("fits");
    b.set_len(n);
    b
}

/// Reads every frame the ring holds (the forwarder catching up), until
/// it stays empty; the idle waits bring AF_PACKET's kernel counters in.
fn drain(rx: &mut LinkDevice, pool: &BufPool) -> u64 {
    let (mut got, mut bufs) = (0, Vec::new());
    let mut idle = 0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while idle < 3 && Instant::now() < deadline {
        rx.wait(Duration::from_millis(5)).expect("wait");
        let n = rx.recv_batch(pool, &mut bufs, 64).expect("recv");
        idle = if n == 0 { idle + 1 } else { 0 };
        got += n as u64;
        bufs.drain(..).for_each(|b| pool.put(b));
    }
    got
}

/// Reads the ring until every one of the `sent` frames is read or
/// counted lost (the socket's kernel drops since `before`, veth's drops
/// at g0 as `veth_dropped` says) or 5 s passed; returns the frames read.
/// The waits bring AF_PACKET's kernel counters in; frames still behind a
/// deferred NAPI run land meanwhile. `kick` sends what the sender's
/// transmit ring still holds (frames a loaded host did not take at the
/// last send go at the next kick).
fn drain_until_accounted(
    rx: &mut LinkDevice,
    pool: &BufPool,
    sent: u64,
    before: &pktsched_io::IoStats,
    veth_dropped: impl Fn() -> u64,
    mut kick: impl FnMut(),
) -> u64 {
    let (mut got, mut bufs) = (0, Vec::new());
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        kick();
        rx.wait(Duration::from_millis(5)).expect("wait");
        let n = rx.recv_batch(pool, &mut bufs, 64).expect("recv");
        got += n as u64;
        bufs.drain(..).for_each(|b| pool.put(b));
        let lost = rx.stats().rx_kernel_drops - before.rx_kernel_drops;
        if n == 0 && got + lost + veth_dropped() >= sent {
            break;
        }
    }
    got
}

/// Floods d0 on `backend` with its ring unread, then checks the stats;
/// returns the ingress's and the egress's counters.
fn ring_full_shows_in_the_stats(prefix: &str, backend: &str) -> (DeviceStats, DeviceStats) {
    let topo = Topology::line(prefix).expect("topology");
    topo.quiet().expect("IPv6 off");
    let cfg = parse(
        &common::prio_line_config(backend, "", ALL),
        "test.toml",
        None,
    )
    .expect("config");
    let (mut devices, pool, choice) = in_namespace(&topo.dut_ns, || open_devices(&cfg))
        .expect("namespace")
        .expect("devices");
    assert_eq!(choice.backend, backend);
    let mut g0 = in_namespace(&topo.gen_ns, || {
        PacketSocket::open("g0", Role::Tx(FrameRing::default()), false)
    })
    .expect("namespace")
    .expect("g0");
    let rx = &mut devices.ingress_rx;
    drain(rx, pool);
    let before = rx.stats();
    let g0_dropped = || Topology::counter(&topo.gen_ns, "g0", "tx_dropped").expect("sysfs");
    let g0_before = g0_dropped();

    let mut sent = 0;
    let mut frames = Vec::new();
    for _ in 0..16 * RING / BURST {
        if sent >= 4 * RING {
            break;
        }
        let n = BURST.min(4 * RING - sent);
        frames.extend((0..n).map(|_| frame(pool)));
        sent += g0.send_batch(&mut frames, pool).expect("g0") as u64;
        frames.drain(..).for_each(|b| pool.put(b));
    }
    let kick = || {
        g0.send_batch(&mut Vec::new(), pool).expect("g0 kick");
    };
    let read = drain_until_accounted(rx, pool, sent, &before, || g0_dropped() - g0_before, kick);
    let io = rx.stats();
    let veth = g0_dropped() - g0_before;
    let lost = io.rx_kernel_drops - before.rx_kernel_drops;
    let ring_full = io.rx_ring_full - before.rx_ring_full;
    let fill_empty = io.rx_fill_empty - before.rx_fill_empty;
    eprintln!(
        "{backend}: sent {sent}, read {read}, kernel drops {lost} (ring full {ring_full}, fill \
         ring empty {fill_empty}), dropped at g0's transmit {veth}"
    );
    assert_eq!(sent, 4 * RING, "g0 took every frame");
    assert_eq!(
        read + lost + veth,
        sent,
        "every frame read or counted lost: {io:?}"
    );
    assert_eq!(io.rx_packets - before.rx_packets, read, "{io:?}");
    // Four rings' worth, unread: the socket itself lost some.
    assert!(
        lost > 0 && read < sent,
        "{sent} frames into a {RING}-slot ring: read {read}, socket lost {lost}, veth {veth}"
    );
    // Each socket loss is counted once, as ring full or fill ring empty
    // (AF_XDP: `rx_dropped` is the fill ring found empty for these
    // frames, which all fit a UMEM frame; AF_PACKET: `tp_drops` is both
    // kernel drops and ring full, and there is no fill ring).
    assert_eq!(
        ring_full + fill_empty,
        lost,
        "socket losses, each as ring full or fill empty: {io:?}"
    );

    let mut snap = Snapshot {
        ingress: "d0".into(),
        egress: "d1".into(),
        devices: vec![
            DeviceStats::from_io("d0", "rx", &io),
            DeviceStats::from_io("d1", "tx", &devices.egress_tx.stats()),
        ],
        ..Snapshot::default()
    };
    let d0 = snap.devices[0].clone();
    let t = snap.text();
    let json: serde_json::Value = serde_json::from_str(&snap.json()).expect("json");
    let prom = snap.prometheus();
    let full = d0.rx_ring_full.expect("a receive ring counts ring full");
    assert_eq!(full, io.rx_ring_full);
    assert!(t.contains(&format!(" rx_ring_full {full} ")), "{t}");
    assert_eq!(json["devices"][0]["rx_ring_full"], full, "{json}");
    assert!(
        prom.contains(&format!(
            "pktsched_device_rx_ring_full_total{{device=\"d0\",role=\"rx\"}} {full}\n"
        )),
        "{prom}"
    );
    match d0.rx_fill_empty {
        Some(n) => {
            assert!(t.contains(&format!(" rx_fill_empty {n} ")), "{t}");
            assert_eq!(json["devices"][0]["rx_fill_empty"], n, "{json}");
        }
        None => {
            assert!(t.contains(" rx_fill_empty — "), "{t}");
            assert!(json["devices"][0]["rx_fill_empty"].is_null(), "{json}");
            assert!(
                !prom.contains("pktsched_device_rx_fill_empty_total{"),
                "{prom}"
            );
        }
    }
    // The egress's transmit socket has no receive ring.
    assert_eq!(snap.devices[1].rx_ring_full, None, "{t}");
    assert!(json["devices"][1]["rx_ring_full"].is_null(), "{json}");
    let d1 = snap.devices[1].clone();
    snap.devices.truncate(1);
    eprintln!("{}", snap.text());
    (d0, d1)
}

fn skip() -> bool {
    if let Some(why) = missing_privileges() {
        skipped(&why);
        return true;
    }
    false
}

#[test]
fn an_unread_af_xdp_ring_shows_its_losses_in_the_stats() {
    if skip() {
        return;
    }
    let (d0, d1) = ring_full_shows_in_the_stats("c7-xdp-", "xdp");
    let (full, empty) = (d0.rx_ring_full.unwrap_or(0), d0.rx_fill_empty);
    assert!(empty.is_some(), "AF_XDP has a fill ring: {d0:?}");
    assert!(full + empty.unwrap_or(0) > 0, "{d0:?}");
    assert_eq!(d0.rx_freezes, None, "AF_XDP has no queue freezes: {d0:?}");
    // The AF_XDP transmit ring counts the descriptors the kernel refused:
    // none here (pktsched hands it only its own UMEM's frames).
    assert_eq!(d1.tx_invalid, Some(0), "{d1:?}");
}

#[test]
fn an_unread_af_packet_ring_shows_tp_drops_as_ring_full() {
    if skip() {
        return;
    }
    let (d0, d1) = ring_full_shows_in_the_stats("c7-pkt-", "packet");
    assert!(d0.rx_ring_full.is_some_and(|n| n > 0), "{d0:?}");
    // The mapping, not the kernel's meaning: pktsched adds `tp_drops` to
    // both counters, and nothing else to either on this socket.
    assert_eq!(
        d0.rx_ring_full,
        Some(d0.rx_kernel_drops),
        "tp_drops: {d0:?}"
    );
    assert_eq!(d0.rx_fill_empty, None, "AF_PACKET has no fill ring: {d0:?}");
    // The ingress is a TPACKET_V2 frame-slot ring: no V3 queue freezes.
    assert_eq!(d0.rx_freezes, None, "{d0:?}");
    // AF_PACKET keeps no invalid-descriptor count.
    assert_eq!(d1.tx_invalid, None, "{d1:?}");
}
