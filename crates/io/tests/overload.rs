//! Every frame accounted for when a receive ring overflows: a generator
//! sends bursts into d0 while nobody reads d0's (deliberately tiny) ring;
//! afterwards the frames read plus the drops the kernel counted (ring
//! full: `tp_drops`; its input backlog: d0's `rx_dropped`) equal the
//! frames sent, exactly, for both receive ring kinds, read a few frames
//! at a time (a V3 block is resumed mid-way). IPv6 is off in the
//! topology, so every frame on the wire is the test's. Needs root.

#[path = "common/untested.rs"]
mod untested;
use std::time::{Duration, Instant};
use untested::skipped;

use pktsched_io::clock::monotonic_ns;
use pktsched_io::frame::{Stamp, UdpSpec, build_udp, udp_payload};
use pktsched_io::netns::{Topology, in_namespace, missing_privileges};
use pktsched_io::packet::{FrameRing, PacketSocket, Role, RxRing};
use pktsched_io::{BufPool, PacketIo, RxRingKind};

const BURSTS: u64 = 20;
const BURST: u64 = 200;

fn frame(seq: u64) -> UdpSpec {
    let mut payload = vec![0u8; Stamp::LEN];
    let stamp = Stamp {
        flow: 9,
        seq,
        tx_ns: monotonic_ns(),
    };
    assert!(stamp.write(&mut payload));
    UdpSpec {
        src_mac: [2, 0xee, 0, 0, 0, 1],
        dst_mac: [2, 0xee, 0, 0, 0, 2],
        vlan: None,
        src_ip: "198.18.0.1".parse().expect("ip"),
        dst_ip: "198.18.0.2".parse().expect("ip"),
        sport: 1,
        dport: 2,
        dscp: 0,
        ttl: 64,
        payload,
    }
}

fn overflow(rx_role: Role) {
    let topo = Topology::line("pst-ov-").expect("topology");
    topo.quiet().expect("IPv6 off");
    let mut rx = in_namespace(&topo.dut_ns, || PacketSocket::open("d0", rx_role, true))
        .expect("namespace")
        .expect("d0");
    let mut gen_tx = in_namespace(&topo.gen_ns, || {
        PacketSocket::open("g0", Role::Tx(FrameRing::default()), false)
    })
    .expect("namespace")
    .expect("g0");
    let pool = BufPool::new(1024, 2048).expect("pool");
    let mut bufs = Vec::new();
    // Whatever the kernels sent before IPv6 went off: read and forget.
    std::thread::sleep(Duration::from_millis(20));
    while rx.recv_batch(&pool, &mut bufs, 1024).expect("recv") > 0 {
        bufs.drain(..).for_each(|b| pool.put(b));
    }
    let before = rx.refresh_stats();
    let backlog_before = Topology::counter(&topo.dut_ns, "d0", "rx_dropped").expect("sysfs");

    let mut seq = 0;
    for _ in 0..BURSTS {
        for _ in 0..BURST {
            let mut b = pool.get().expect("buffer");
            let n = build_udp(b.spare(), &frame(seq)).expect("fits");
            b.set_len(n);
            bufs.push(b);
            seq += 1;
        }
        let n = bufs.len();
        assert_eq!(gen_tx.send_batch(&mut bufs, &pool).expect("send"), n);
    }
    // Now read all that fit, in order.
    let mut got = 0u64;
    let mut last = None;
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        rx.wait(Duration::from_millis(3)).expect("wait");
        // Five at a time: a V3 block (~28 of these frames) is left and
        // resumed mid-way, exercising the reader's cursor.
        if rx.recv_batch(&pool, &mut bufs, 5).expect("recv") == 0 && got > 0 {
            break;
        }
        for b in bufs.drain(..) {
            let s = udp_payload(b.as_slice())
                .and_then(Stamp::read)
                .expect("only our frames are on the wire");
            assert!(last.is_none_or(|l| s.seq > l), "in order");
            last = Some(s.seq);
            got += 1;
            pool.put(b);
        }
    }
    let after = rx.refresh_stats();
    let ring_drops = after.rx_kernel_drops - before.rx_kernel_drops;
    let backlog =
        Topology::counter(&topo.dut_ns, "d0", "rx_dropped").expect("sysfs") - backlog_before;
    let sent = gen_tx.stats().tx_packets;
    eprintln!(
        "{rx_role:?}: sent {sent}, read {got}, ring drops {ring_drops}, backlog drops {backlog}, \
         freezes {}",
        after.rx_freezes
    );
    assert_eq!(sent, BURSTS * BURST);
    assert!(ring_drops > 0, "the ring is small enough to overflow");
    assert_eq!(
        got + ring_drops + backlog,
        sent,
        "every frame accounted for"
    );
    assert_eq!(after.rx_packets - before.rx_packets, got);
    assert_eq!((after.rx_no_buffer, after.rx_oversize), (0, 0));
    // pktsched counts the socket's `tp_drops` as ring full (on a ring
    // socket the kernel raises it only when the ring has no room): the
    // ring-full delta is the drops this test saw, and the ring kind is
    // the socket's.
    assert_eq!(
        after.rx_ring_full - before.rx_ring_full,
        ring_drops,
        "{after:?}"
    );
    let kind = match rx_role {
        Role::Rx(_) => RxRingKind::PacketBlocks,
        _ => RxRingKind::PacketSlots,
    };
    assert_eq!(after.rx_ring, kind);
    assert_eq!(after.rx_fill_empty, 0, "no fill ring");
    assert_eq!(pool.stats().free, 1024);
}

#[test]
fn overflowing_rings_count_every_dropped_frame() {
    if let Some(why) = missing_privileges() {
        skipped(&why);
        return;
    }
    overflow(Role::Rx(RxRing {
        block_size: 4096,
        block_count: 2,
        timeout_ms: 1,
    }));
    overflow(Role::RxFrames(FrameRing {
        frame_size: 2048,
        frame_count: 16,
    }));
}
