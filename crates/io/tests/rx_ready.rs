//! `rx_ready`: the in-memory check of a receive ring (AF_PACKET block
//! status, AF_XDP producer index) that a forwarder makes before sleeping,
//! on a real wire (veths in namespaces of their own, prefix `fw-rdy-`):
//! false on an empty ring, true once a frame sent on g0 is in d0's ring,
//! false again after the receive took it. Needs root (CI runs as root);
//! skipped with the reason otherwise.

use std::time::{Duration, Instant};

use pktsched_io::frame::build_udp;
use pktsched_io::netns::in_namespace;
use pktsched_io::packet::{PacketSocket, Role, RxRing};
use pktsched_io::xdp::{self, XdpConfig};
use pktsched_io::{BufPool, PacketIo};

mod common;
use common::{line_udp, on_line, skip};

/// Sends one UDP frame on g0 through `tx`.
fn send_one(tx: &mut PacketSocket, pool: &BufPool) {
    let spec = line_udp(5000, 0, vec![7; 64]);
    let mut b = pool.get().expect("buffer");
    let n = build_udp(b.spare(), &spec).expect("fits");
    b.set_len(n);
    let mut batch = vec![b];
    assert_eq!(tx.send_batch(&mut batch, pool).expect("g0 send"), 1);
}

/// Polls `ready` until it says true, for at most 5 s.
fn becomes_ready(mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if ready() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

#[test]
fn an_af_packet_ring_says_ready_only_while_it_holds_a_frame() {
    if skip() {
        return;
    }
    on_line("fw-rdy-p-", true, |topo, g0| {
        let pool = &BufPool::new(64, 2048).expect("pool");
        let mut rx = in_namespace(&topo.dut_ns, || {
            PacketSocket::open("d0", Role::Rx(RxRing::default()), true)
        })
        .expect("namespace")
        .expect("d0 rx");
        assert!(!rx.rx_ready(), "nothing was sent yet");
        send_one(g0, pool);
        assert!(becomes_ready(|| rx.rx_ready()), "the frame never showed");
        let mut got = Vec::new();
        let n = rx.recv_batch(pool, &mut got, 64).expect("recv");
        assert!(n >= 1, "a ready ring gave nothing");
        assert!(!rx.rx_ready(), "the ring was emptied");
        for b in got {
            pool.put(b);
        }
    });
}

#[test]
fn an_af_xdp_ring_says_ready_only_while_it_holds_a_frame() {
    if skip() {
        return;
    }
    on_line("fw-rdy-x-", true, |topo, g0| {
        let pool = &BufPool::new(64, 2048).expect("pool");
        let (mut rx, _tx, _info) =
            in_namespace(&topo.dut_ns, || xdp::open("d0", &XdpConfig::default()))
                .expect("namespace")
                .expect("d0 AF_XDP");
        assert!(!rx.rx_ready(), "nothing was sent yet");
        send_one(g0, pool);
        assert!(becomes_ready(|| rx.rx_ready()), "the frame never showed");
        let mut got = Vec::new();
        assert_eq!(rx.recv_batch(pool, &mut got, 64).expect("recv"), 1);
        assert!(!rx.rx_ready(), "the ring was emptied");
        for b in got {
            pool.put(b);
        }
    });
}
