//! A frame too long for a transmit slot is left unsent and counted, and
//! the frames behind it in the batch still go (before, the whole rest of
//! the batch stayed unsent): AF_PACKET's TX ring (slots of 1024 bytes) on
//! g0 → d0, and AF_XDP's TX half (UMEM frames of 2048 bytes, pool buffers
//! of 4096) on d1 → s0, on veths in namespaces of their own (prefix
//! `h11-`), removed even when a test fails. Needs root; skipped otherwise.

use std::time::{Duration, Instant};

use pktsched_io::frame::{build_udp, udp_payload};
use pktsched_io::netns::in_namespace;
use pktsched_io::packet::{FrameRing, PacketSocket, Role, RxRing};
use pktsched_io::xdp::{self, XdpConfig};
use pktsched_io::{BufPool, PacketBuf, PacketIo};

mod common;
use common::{line_udp, on_line, skip};

const MARK: &[u8] = b"h11-oversize";

/// A frame of about `len` bytes whose payload is [`MARK`] and `seq`.
fn frame(pool: &BufPool, seq: u8, len: usize) -> PacketBuf {
    let mut payload = MARK.to_vec();
    payload.push(seq);
    payload.resize(len.saturating_sub(42).max(payload.len()), 0);
    let mut b = pool.get().expect("buffer");
    let n = build_udp(b.spare(), &line_udp(5000, 0, payload)).expect("fits");
    b.set_len(n);
    b
}

/// The batch: small 0, the long one (1), small 2 and 3.
fn batch(pool: &BufPool, long: usize) -> Vec<PacketBuf> {
    vec![
        frame(pool, 0, 100),
        frame(pool, 1, long),
        frame(pool, 2, 100),
        frame(pool, 3, 100),
    ]
}

/// The marked frames `rx` gets within 10 s (a bound on a hang), by seq,
/// until `want` of them came.
fn receive(rx: &mut PacketSocket, want: usize) -> Vec<u8> {
    let pool = BufPool::new(256, 2048).expect("pool");
    let (mut got, mut seqs) = (Vec::new(), Vec::new());
    let until = Instant::now() + Duration::from_secs(10);
    while seqs.len() < want && Instant::now() < until {
        let _ = rx.wait(Duration::from_millis(5));
        rx.recv_batch(&pool, &mut got, 64).expect("receive");
        for b in got.drain(..) {
            if let Some(p) = udp_payload(b.as_slice()).filter(|p| p.starts_with(MARK)) {
                seqs.push(p[MARK.len()]);
            }
            pool.put(b);
        }
    }
    seqs.sort_unstable();
    seqs
}

/// Sends the batch on `tx`, checks what stayed and the counters, and
/// hands the long frame back.
fn send_and_check(tx: &mut dyn PacketIo, pool: &BufPool, long: usize) {
    let mut frames = batch(pool, long);
    let long_len = frames[1].len();
    let sent = tx.send_batch(&mut frames, pool).expect("send");
    assert_eq!(sent, 3, "the frames behind the long one went too");
    assert_eq!(frames.len(), 1, "only the long frame stayed");
    assert_eq!(frames[0].len(), long_len);
    let s = tx.stats();
    assert_eq!(
        (s.tx_packets, s.tx_oversize, s.tx_failed),
        (3, 1, 1),
        "{s:?}"
    );
    for b in frames.drain(..) {
        pool.put(b);
    }
    let p = pool.stats();
    assert_eq!(p.free, p.capacity, "every buffer is back: {p:?}");
}

#[test]
fn af_packet_leaves_a_frame_longer_than_its_slot_and_sends_the_rest() {
    if skip() {
        return;
    }
    on_line("h11-txo-", true, |topo, _| {
        let ring = FrameRing {
            frame_size: 1024,
            frame_count: 64,
        };
        let mut tx = in_namespace(&topo.gen_ns, || {
            PacketSocket::open("g0", Role::Tx(ring), false)
        })
        .expect("namespace")
        .expect("g0 tx");
        let mut rx = in_namespace(&topo.dut_ns, || {
            PacketSocket::open("d0", Role::Rx(RxRing::default()), true)
        })
        .expect("namespace")
        .expect("d0 rx");
        let pool = BufPool::new(16, 2048).expect("pool");
        send_and_check(&mut tx, &pool, 1200);
        assert_eq!(receive(&mut rx, 3), [0, 2, 3], "the long frame never left");
    });
}

#[test]
fn af_xdp_leaves_a_frame_longer_than_its_umem_frame_and_sends_the_rest() {
    if skip() {
        return;
    }
    on_line("h11-txx-", true, |topo, _| {
        let cfg = XdpConfig {
            frame_size: 2048,
            rx_frames: 64,
            tx_frames: 64,
            ..XdpConfig::default()
        };
        // As root on veth AF_XDP opens (copy mode), as in the other
        // AF_XDP tests: a failure is a failure, not a skip.
        let (_xrx, mut tx, _info) = in_namespace(&topo.dut_ns, || xdp::open("d1", &cfg))
            .expect("namespace")
            .expect("AF_XDP on d1");
        let mut rx = in_namespace(&topo.sink_ns, || {
            PacketSocket::open("s0", Role::Rx(RxRing::default()), true)
        })
        .expect("namespace")
        .expect("s0 rx");
        // Buffers longer than a UMEM frame, so a frame can be too long.
        let pool = BufPool::new(16, 4096).expect("pool");
        send_and_check(&mut tx, &pool, 3000);
        assert_eq!(receive(&mut rx, 3), [0, 2, 3], "the long frame never left");
    });
}
