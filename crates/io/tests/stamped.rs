//! AF_PACKET end to end, every hop through rings: a generator's TX ring on
//! g0 sends stamped frames of four flows (IPv4 on two ports, IPv6, IPv4
//! inside an 802.1Q tag) with payloads a function of (flow, seq); the
//! test forwards d0 → d1 through a TPACKET_V3 RX ring and a TX ring,
//! classifying each frame; a sink's TPACKET_V2 RX ring (frame slots) on
//! s0 gets them. Checked: every
//! frame accounted for at each hop, each arrives byte for byte as sent
//! (VLAN tags too, which the kernel moves into metadata on receive), in
//! order per flow, with a positive one-way latency, in the class its flow
//! should get; the namespaces are gone afterwards, also after a panic.
//! Needs root (CI runs as root); skipped with the reason otherwise.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use pktsched_io::classify::{Classifier, ClassifyStats, Match, Rule};
use pktsched_io::clock::monotonic_ns;
use pktsched_io::frame::{Stamp, UdpSpec, build_udp, udp_payload};
use pktsched_io::netns::{Topology, in_namespace, namespaces, remove_stale};
use pktsched_io::packet::{FrameRing, PacketSocket, Role, RxRing};
use pktsched_io::{BufPool, PacketBuf, PacketIo};

mod common;
use common::{on_line, skip};

const PER_FLOW: u64 = 1500;
const FLOWS: u16 = 4;
/// Frames in flight (sent, not yet at the sink) at most: far below every
/// ring's room, so a correct forwarder loses nothing.
const WINDOW: u64 = 256;
/// A destination MAC nobody has: the sink's kernel drops the frames early
/// (PACKET_OTHERHOST), its promiscuous ring still sees them.
const DST_MAC: [u8; 6] = [0x02, 0xee, 0, 0, 0, 0x02];
const PREFIX: &str = "pst-st-";

/// Flow `flow`'s frame number `seq`, sent at `tx_ns`.
fn spec(flow: u16, seq: u64, tx_ns: u64) -> UdpSpec {
    let v4 = |last: u8| IpAddr::V4(Ipv4Addr::new(198, 18, 0, last));
    let v6 = |last: u16| IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, last));
    let (src_ip, dst_ip, dport, vlan) = match flow {
        0 => (v4(1), v4(2), 5000, None),
        1 => (v4(1), v4(2), 6000, None),
        2 => (v6(1), v6(2), 6000, None),
        _ => (v4(1), v4(2), 6000, Some(100)),
    };
    // From a minimal frame up to about 1400 bytes of payload.
    let len = Stamp::LEN + (seq as usize * 97 + usize::from(flow) * 31) % 1380;
    let mut payload = vec![0u8; len];
    assert!(Stamp { flow, seq, tx_ns }.write(&mut payload));
    for (i, b) in payload[Stamp::LEN..].iter_mut().enumerate() {
        *b = (seq as usize)
            .wrapping_mul(31)
            .wrapping_add(i * 7 + usize::from(flow)) as u8;
    }
    UdpSpec {
        src_mac: [0x02, 0xee, 0, 0, 0, 0x01],
        dst_mac: DST_MAC,
        vlan,
        src_ip,
        dst_ip,
        sport: 40000 + flow,
        dport,
        dscp: if flow == 0 { 46 } else { 0 },
        ttl: 64,
        payload,
    }
}

/// The class each flow should get: 1 for port 5000 (also EF), 2 for the
/// IPv6 prefix, 3 for VLAN 100, the default 0 for the rest.
fn classifier() -> Classifier {
    let rule = |class, matches| Rule { class, matches };
    Classifier::new(
        vec![
            rule(
                1,
                Match {
                    dport: Some("5000".parse().expect("port")),
                    dscp: Some(46),
                    ..Match::default()
                },
            ),
            rule(
                2,
                Match {
                    dst: Some("2001:db8::/32".parse().expect("prefix")),
                    proto: Some(17),
                    ..Match::default()
                },
            ),
            rule(
                3,
                Match {
                    vlan: Some(100),
                    ..Match::default()
                },
            ),
        ],
        0,
    )
    .expect("classifier")
}

const CLASS_OF_FLOW: [u16; FLOWS as usize] = [1, 0, 2, 3];

/// The stamp of a frame, if it is one of ours.
fn stamp_of(frame: &[u8]) -> Option<Stamp> {
    udp_payload(frame)
        .and_then(Stamp::read)
        .filter(|s| s.flow < FLOWS && s.seq < PER_FLOW)
}

#[test]
fn stamped_frames_cross_three_rings_whole_in_order_and_classified() {
    if skip() {
        return;
    }
    on_line(PREFIX, false, |topo, gen_tx| {
        let (rx, tx) = in_namespace(&topo.dut_ns, || {
            (
                PacketSocket::open("d0", Role::Rx(RxRing::default()), true),
                PacketSocket::open("d1", Role::Tx(FrameRing::default()), false),
            )
        })
        .expect("namespace");
        let (mut rx, mut tx) = (rx.expect("d0 rx"), tx.expect("d1 tx"));
        let mut sink_rx = in_namespace(&topo.sink_ns, || {
            PacketSocket::open("s0", Role::RxFrames(FrameRing::default()), true)
        })
        .expect("namespace")
        .expect("s0 rx");

        let edge_pool = BufPool::new(1024, 2048).expect("pool");
        let dut_pool = BufPool::new(1024, 2048).expect("pool");
        let classifier = classifier();
        let mut anomalies = ClassifyStats::default();
        let total = PER_FLOW * u64::from(FLOWS);
        let mut next_seq = [0u64; FLOWS as usize];
        let mut last_seen: [Option<u64>; FLOWS as usize] = [None; FLOWS as usize];
        let (mut sent, mut got, mut forwarded) = (0u64, 0u64, 0u64);
        let (mut ours_at_dut, mut misclassified) = (0u64, 0u64);
        let mut latencies = Vec::with_capacity(total as usize);
        let (mut batch, mut fwd, mut arrived): (Vec<PacketBuf>, Vec<PacketBuf>, Vec<PacketBuf>) =
            (Vec::new(), Vec::new(), Vec::new());
        let deadline = Instant::now() + Duration::from_secs(8);
        while got < total && Instant::now() < deadline {
            // Generate: round robin over the flows, up to the window.
            while sent < total && sent - got < WINDOW && batch.len() < 64 {
                let flow = (sent % u64::from(FLOWS)) as u16;
                let seq = next_seq[usize::from(flow)];
                next_seq[usize::from(flow)] += 1;
                let mut buf = edge_pool.get().expect("generator buffer");
                let n = build_udp(buf.spare(), &spec(flow, seq, monotonic_ns())).expect("fits");
                buf.set_len(n);
                batch.push(buf);
                sent += 1;
            }
            let n = batch.len();
            assert_eq!(gen_tx.send_batch(&mut batch, &edge_pool).expect("g0"), n);

            // Forward, classifying.
            rx.wait(Duration::from_millis(2)).expect("wait");
            rx.recv_batch(&dut_pool, &mut fwd, 256).expect("d0");
            for b in &fwd {
                let v = classifier.classify(b.as_slice());
                anomalies.record(v.note);
                if let Some(s) = stamp_of(b.as_slice()) {
                    ours_at_dut += 1;
                    misclassified += u64::from(v.class != CLASS_OF_FLOW[usize::from(s.flow)]);
                }
            }
            let n = fwd.len();
            assert_eq!(tx.send_batch(&mut fwd, &dut_pool).expect("d1"), n);
            forwarded += n as u64;

            // Sink: check each frame against what was sent.
            sink_rx.wait(Duration::from_millis(1)).expect("wait");
            sink_rx
                .recv_batch(&edge_pool, &mut arrived, 256)
                .expect("s0");
            let now = monotonic_ns();
            for b in arrived.drain(..) {
                if let Some(s) = stamp_of(b.as_slice()) {
                    let mut want = [0u8; 2048];
                    let n = build_udp(&mut want, &spec(s.flow, s.seq, s.tx_ns)).expect("fits");
                    assert_eq!(b.as_slice(), &want[..n], "flow {} seq {}", s.flow, s.seq);
                    let last = &mut last_seen[usize::from(s.flow)];
                    assert!(
                        last.is_none_or(|l| s.seq == l + 1),
                        "flow {}: seq {} after {last:?}",
                        s.flow,
                        s.seq
                    );
                    *last = Some(s.seq);
                    assert!(now > s.tx_ns, "latency must be positive");
                    latencies.push(now - s.tx_ns);
                    got += 1;
                }
                edge_pool.put(b);
            }
        }

        let (g, r, t, s) = (gen_tx.stats(), rx.stats(), tx.stats(), sink_rx.stats());
        assert_eq!(got, total, "every frame reached the sink (sent {sent})");
        assert_eq!(g.tx_packets, total);
        // Each hop: what it received is what it forwarded plus its counted
        // drops (none expected in lockstep).
        let drops = |s: &pktsched_io::IoStats| s.rx_kernel_drops + s.rx_no_buffer + s.rx_oversize;
        assert_eq!(r.rx_packets, forwarded);
        assert_eq!(t.tx_packets, forwarded);
        assert_eq!((drops(&r), drops(&s)), (0, 0), "{r:?} {s:?}");
        assert_eq!((g.tx_failed, t.tx_failed, r.rx_freezes), (0, 0, 0));
        assert!(
            ours_at_dut == total && forwarded >= total,
            "{ours_at_dut} {forwarded}"
        );
        assert_eq!(misclassified, 0, "every flow in its class");
        assert_eq!(anomalies.get(pktsched_io::classify::Anomaly::Truncated), 0);
        assert_eq!(edge_pool.stats().free, 1024, "every edge buffer is back");
        assert_eq!(
            dut_pool.stats().free,
            1024,
            "every forwarder buffer is back"
        );
        assert_eq!(edge_pool.stats().foreign + dut_pool.stats().foreign, 0);
        latencies.sort_unstable();
        eprintln!(
            "{total} frames; one-way latency p50 {} µs, p99 {} µs; tx_busy g0 {} d1 {}; \
             forwarded {forwarded} (beyond ours: the kernel's own frames); {anomalies}",
            latencies[latencies.len() / 2] / 1000,
            latencies[latencies.len() * 99 / 100] / 1000,
            g.tx_busy,
            t.tx_busy,
        );
    });
}

#[test]
fn namespaces_are_removed_when_a_test_panics() {
    if skip() {
        return;
    }
    let mut names = Vec::new();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let topo = Topology::line(PREFIX).expect("topology");
        names = vec![
            topo.gen_ns.clone(),
            topo.dut_ns.clone(),
            topo.sink_ns.clone(),
        ];
        panic!("a failing test");
    }));
    assert!(outcome.is_err());
    assert_eq!(names.len(), 3);
    let left = namespaces().expect("list");
    for n in &names {
        assert!(!left.contains(n), "{n} was not removed");
    }
}

#[test]
fn namespaces_of_dead_processes_are_cleared() {
    if skip() {
        return;
    }
    // A pid above pid_max: no process can have it.
    let pid_max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4_194_304);
    // This run's own prefix (its pid in it), so parallel runs do not
    // share names; first, what runs killed before their cleanup left
    // (`pst-stale-<their pid>-...`, their pid gone).
    let _ = remove_stale("pst-stale-");
    let prefix = &format!("pst-stale-{}-", std::process::id());
    let dead = format!("{prefix}{}-0-gen", pid_max + 1);
    let alive = format!("{prefix}{}-0-gen", std::process::id());
    for ns in [&dead, &alive] {
        let ok = std::process::Command::new("ip")
            .args(["netns", "add", ns])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "ip netns add {ns}");
    }
    let removed = remove_stale(prefix).expect("remove_stale");
    let left = namespaces().expect("list");
    let _ = std::process::Command::new("ip")
        .args(["netns", "del", &alive])
        .status();
    assert_eq!(removed, vec![dead.clone()]);
    assert!(!left.contains(&dead), "{dead} is still there");
    assert!(
        left.contains(&alive),
        "a live process's namespace was removed"
    );
}
