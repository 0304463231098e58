//! The kernel's receive time on received buffers ([`PacketBuf::rx_ns`]):
//! frames sent on g0 after `t0` reach d0 with `t0 ≤ rx_ns ≤` the time the
//! receive call returned, on every receive path: AF_XDP (native and
//! generic XDP, the redirect program and the class group's classifier)
//! and AF_PACKET (a TPACKET_V3 ring and a classified fanout group). An
//! unknown time (0) fails. Needs root (CI runs as root); skipped with the
//! reason otherwise. Namespaces are prefixed `ts-rx-`.

use std::time::{Duration, Instant};

use pktsched_io::bpf::sys::AttachMode;
use pktsched_io::class_rx::ClassRx;
use pktsched_io::classify::{Match, PortRange, Rule};
use pktsched_io::clock::monotonic_ns;
use pktsched_io::fanout::FanoutGroup;
use pktsched_io::frame::build_udp;
use pktsched_io::netns::{Topology, in_namespace, remove_stale};
use pktsched_io::packet::{FrameRing, PacketSocket, Role, RxRing};
use pktsched_io::xdp::{self, AttachPref, BindMode, XdpConfig};
use pktsched_io::{BufPool, PacketBuf, PacketIo};

mod common;
use common::{line_udp, skip};

const PREFIX: &str = "ts-rx-";
const N: usize = 64;

fn frame(out: &mut [u8]) -> usize {
    let spec = line_udp(5001, 46, vec![7u8; 32]);
    build_udp(out, &spec).expect("fits")
}

/// Class 1 for the frames sent here, class 0 for the rest.
fn rules() -> Vec<Rule> {
    vec![Rule {
        class: 1,
        matches: Match {
            dport: Some(PortRange { lo: 5001, hi: 5001 }),
            ..Match::default()
        },
    }]
}

/// Sends `N` frames on g0 after `t0`, then calls `recv` until all came
/// (or 10 s); each buffer's receive time must lie between `t0` and the
/// end of the call that returned it.
fn sent_after_t0_received_before_read(
    topo: &Topology,
    mut recv: impl FnMut(&BufPool, &mut Vec<PacketBuf>),
) {
    let mut tx = in_namespace(&topo.gen_ns, || {
        PacketSocket::open("g0", Role::Tx(FrameRing::default()), false)
    })
    .expect("namespace")
    .expect("g0 tx");
    let pool = BufPool::new(512, 2048).expect("pool");
    let t0 = monotonic_ns();
    let mut batch = Vec::new();
    for _ in 0..N {
        let mut b = pool.get().expect("buffer");
        let n = frame(b.spare());
        b.set_len(n);
        batch.push(b);
    }
    assert_eq!(tx.send_batch(&mut batch, &pool).expect("send"), N);
    let (mut got, mut bufs) = (0, Vec::new());
    let deadline = Instant::now() + Duration::from_secs(10);
    while got < N && Instant::now() < deadline {
        recv(&pool, &mut bufs);
        let read = monotonic_ns();
        for b in bufs.drain(..) {
            // Only the test's frames (UDP to 5001): a stray frame (ND,
            // LLDP) must neither count for a lost one nor fail the check.
            if b.as_slice().get(36..38) != Some(&5001u16.to_be_bytes()[..]) {
                pool.put(b);
                continue;
            }
            let rx = b.rx_ns();
            assert!(
                t0 <= rx && rx <= read,
                "frame {got}: sent after {t0}, read by {read}, received at {rx}"
            );
            got += 1;
            pool.put(b);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(got, N, "every frame arrived");
}

fn line() -> Topology {
    let _ = remove_stale(PREFIX);
    let topo = Topology::line(PREFIX).expect("topology");
    topo.quiet().expect("quiet");
    topo
}

fn af_xdp(attach: AttachMode) {
    let topo = line();
    let cfg = XdpConfig {
        bind: BindMode::Copy,
        attach: AttachPref::Only(attach),
        ..XdpConfig::default()
    };
    let (mut rx, _tx, info) = in_namespace(&topo.dut_ns, || xdp::open("d0", &cfg))
        .expect("namespace")
        .expect("d0 AF_XDP");
    assert_eq!(info.attach, attach);
    sent_after_t0_received_before_read(&topo, |pool, out| {
        rx.recv_batch(pool, out, 256).expect("recv");
    });
}

#[test]
fn af_xdp_native_stamps_each_frame() {
    if skip() {
        return;
    }
    af_xdp(AttachMode::Native);
}

#[test]
fn af_xdp_generic_stamps_each_frame() {
    if skip() {
        return;
    }
    af_xdp(AttachMode::Generic);
}

#[test]
fn af_xdp_class_group_stamps_each_frame_and_keeps_its_class() {
    if skip() {
        return;
    }
    let topo = line();
    let cfg = XdpConfig {
        rx_frames: 1024,
        ..XdpConfig::default()
    };
    let (mut group, _tx, _info) = in_namespace(&topo.dut_ns, || {
        xdp::open_class_group("d0", &cfg, &rules(), 0, &[256, 256])
    })
    .expect("namespace")
    .expect("d0 class group");
    sent_after_t0_received_before_read(&topo, |pool, out| {
        assert_eq!(group.recv_class(0, pool, out, 256).expect("class 0"), 0);
        group.recv_class(1, pool, out, 256).expect("class 1");
        group.end_round();
    });
}

#[test]
fn af_xdp_classified_socket_reads_class_and_stamp() {
    if skip() {
        return;
    }
    let topo = line();
    let cfg = XdpConfig::default();
    let (mut rx, _tx, _info) = in_namespace(&topo.dut_ns, || {
        xdp::open_classified("d0", &cfg, &rules(), 0)
    })
    .expect("namespace")
    .expect("d0 classified");
    let mut classes = Vec::new();
    sent_after_t0_received_before_read(&topo, |pool, out| {
        rx.recv_classified(pool, out, &mut classes, 256);
    });
    assert_eq!(classes, vec![Some(1); N], "the class still reads right");
}

#[test]
fn af_packet_ring_stamps_each_frame() {
    if skip() {
        return;
    }
    let topo = line();
    let mut rx = in_namespace(&topo.dut_ns, || {
        PacketSocket::open("d0", Role::Rx(RxRing::default()), true)
    })
    .expect("namespace")
    .expect("d0 AF_PACKET");
    sent_after_t0_received_before_read(&topo, |pool, out| {
        rx.recv_batch(pool, out, 256).expect("recv");
    });
}

#[test]
fn af_packet_fanout_class_stamps_each_frame() {
    if skip() {
        return;
    }
    let topo = line();
    let rings = [Role::Rx(RxRing::default()), Role::Rx(RxRing::default())];
    let mut group = in_namespace(&topo.dut_ns, || {
        FanoutGroup::open_classified("d0", &rings, &rules(), 0, true)
    })
    .expect("namespace")
    .expect("d0 fanout");
    sent_after_t0_received_before_read(&topo, |pool, out| {
        group.recv_class(1, pool, out, 256).expect("class 1");
    });
}
