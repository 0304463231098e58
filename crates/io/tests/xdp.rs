//! AF_XDP on a real wire (veths in namespaces of their own): frames sent
//! on g0 arrive through an AF_XDP socket on d0 byte for byte, every one
//! accounted for; a forwarder moves them d0 (AF_XDP RX) → d1 (AF_XDP TX)
//! to a ring on s0. Needs root (CI runs as root); skipped with the reason
//! otherwise.

use std::time::{Duration, Instant};

use pktsched_io::bpf::sys::AttachMode;
use pktsched_io::classify::{Classifier, Match, Rule};
use pktsched_io::frame::{Stamp, build_udp, udp_payload};
use pktsched_io::netns::{Topology, in_namespace};
use pktsched_io::packet::{FrameRing, PacketSocket, Role};
use pktsched_io::xdp::{self, AttachPref, BindMode, BusyPoll, XdpConfig};
use pktsched_io::{BufPool, PacketBuf, PacketIo};

mod common;
use common::{line_udp, on_line, skip};

const PREFIX: &str = "pst-xdp-";
const N: u64 = 6000;
/// Frames in flight at most: far below every ring's room.
const WINDOW: u64 = 256;

/// Frame `seq`: IPv4/UDP from 60 bytes up to about 1500, payload a
/// function of `seq`.
fn frame(seq: u64, out: &mut [u8]) -> usize {
    let len = Stamp::LEN + (seq as usize * 131) % 1440;
    let mut payload = vec![0u8; len];
    assert!(
        Stamp {
            flow: 0,
            seq,
            tx_ns: 0
        }
        .write(&mut payload)
    );
    for (i, b) in payload[Stamp::LEN..].iter_mut().enumerate() {
        *b = (seq as usize).wrapping_mul(7).wrapping_add(i) as u8;
    }
    let spec = line_udp(5000, 0, payload);
    build_udp(out, &spec).expect("fits")
}

fn seq_of(b: &[u8]) -> Option<u64> {
    udp_payload(b).and_then(Stamp::read).map(|s| s.seq)
}

/// Checks that `b` is frame `expect` byte for byte.
fn check(b: &PacketBuf, expect: u64) {
    let mut want = [0u8; 2048];
    let n = frame(expect, &mut want);
    assert_eq!(seq_of(b.as_slice()), Some(expect), "in order");
    assert_eq!(b.as_slice(), &want[..n], "frame {expect} byte for byte");
}

/// Sends the next frames from g0, up to the window.
fn generate(tx: &mut PacketSocket, pool: &BufPool, sent: &mut u64, got: u64) {
    let mut batch = Vec::new();
    while *sent < N && *sent - got < WINDOW && batch.len() < 64 {
        let mut b = pool.get().expect("generator buffer");
        let n = frame(*sent, b.spare());
        b.set_len(n);
        batch.push(b);
        *sent += 1;
    }
    let n = batch.len();
    assert_eq!(tx.send_batch(&mut batch, pool).expect("g0"), n);
}

/// Sends `N` frames on g0 and checks each arrives through an AF_XDP
/// socket on d0 opened with `cfg`, byte for byte and in order, with no
/// drop anywhere; the namespaces are gone afterwards.
fn receive_all(cfg: XdpConfig, want_attach: Option<AttachMode>) {
    on_line(PREFIX, true, |topo, gen_tx| {
        let (mut rx, _tx, info) = in_namespace(&topo.dut_ns, || xdp::open("d0", &cfg))
            .expect("namespace")
            .expect("d0 AF_XDP");
        if let Some(m) = want_attach {
            assert_eq!(info.attach, m, "{info:?}");
        }
        let pool = BufPool::new(1024, 2048).expect("pool");
        let (mut sent, mut got) = (0u64, 0u64);
        let mut bufs = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while got < N && Instant::now() < deadline {
            generate(gen_tx, &pool, &mut sent, got);
            rx.wait(Duration::from_millis(2)).expect("wait");
            rx.recv_batch(&pool, &mut bufs, 256).expect("recv");
            for b in bufs.drain(..) {
                check(&b, got);
                got += 1;
                pool.put(b);
            }
        }
        let s = rx.stats();
        assert_eq!(got, N, "every frame arrived ({s:?})");
        assert_eq!(
            (
                s.rx_packets,
                s.rx_kernel_drops,
                s.rx_no_buffer,
                s.rx_oversize
            ),
            (N, 0, 0, 0)
        );
        assert_eq!(pool.stats().free, 1024, "every buffer is back");
    });
}

#[test]
fn frames_sent_on_g0_arrive_whole_through_an_af_xdp_socket() {
    if skip() {
        return;
    }
    // veth offers native XDP; zero-copy is refused and copy mode taken.
    receive_all(XdpConfig::default(), Some(AttachMode::Native));
}

#[test]
fn generic_xdp_copy_mode_and_busy_polling_deliver_the_same() {
    if skip() {
        return;
    }
    let cfg = XdpConfig {
        bind: BindMode::Copy,
        attach: AttachPref::Only(AttachMode::Generic),
        need_wakeup: false,
        busy_poll: Some(BusyPoll {
            usecs: 50,
            budget: 64,
        }),
        rx_frames: 512,
        ..XdpConfig::default()
    };
    receive_all(cfg, Some(AttachMode::Generic));
}

#[test]
fn a_forwarder_moves_frames_from_af_xdp_rx_to_af_xdp_tx() {
    if skip() {
        return;
    }
    let topo = Topology::line(PREFIX).expect("topology");
    topo.quiet().expect("quiet");
    let mut gen_tx = in_namespace(&topo.gen_ns, || {
        PacketSocket::open("g0", Role::Tx(FrameRing::default()), false)
    })
    .expect("namespace")
    .expect("g0 tx");
    let cfg = XdpConfig::default();
    let ((mut rx, _t0, _), (_r1, mut tx, _)) = in_namespace(&topo.dut_ns, || {
        (
            xdp::open("d0", &cfg).expect("d0"),
            xdp::open("d1", &cfg).expect("d1"),
        )
    })
    .expect("namespace");
    let mut sink = in_namespace(&topo.sink_ns, || {
        PacketSocket::open("s0", Role::RxFrames(FrameRing::default()), true)
    })
    .expect("namespace")
    .expect("s0 rx");
    let (edge, dut) = (
        BufPool::new(1024, 2048).expect("pool"),
        BufPool::new(1024, 2048).expect("pool"),
    );
    let (mut sent, mut got, mut forwarded) = (0u64, 0u64, 0u64);
    let (mut fwd, mut arrived) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + Duration::from_secs(20);
    while got < N && Instant::now() < deadline {
        generate(&mut gen_tx, &edge, &mut sent, got);
        rx.wait(Duration::from_millis(1)).expect("wait");
        rx.recv_batch(&dut, &mut fwd, 256).expect("d0");
        let n = fwd.len();
        assert_eq!(tx.send_batch(&mut fwd, &dut).expect("d1"), n);
        forwarded += n as u64;
        sink.wait(Duration::from_millis(1)).expect("wait");
        sink.recv_batch(&edge, &mut arrived, 256).expect("s0");
        for b in arrived.drain(..) {
            if seq_of(b.as_slice()).is_some() {
                check(&b, got);
                got += 1;
            }
            edge.put(b);
        }
    }
    let (rs, ts) = (rx.stats(), tx.stats());
    assert_eq!(got, N, "every frame crossed (rx {rs:?} tx {ts:?})");
    assert_eq!((rs.rx_packets, ts.tx_packets), (forwarded, forwarded));
    assert_eq!((rs.rx_kernel_drops, ts.tx_failed, ts.tx_invalid), (0, 0, 0));
    assert_eq!(dut.stats().free, 1024, "every buffer is back");
}

#[test]
fn the_compiled_classifier_marks_each_frame_with_its_class_on_the_wire() {
    if skip() {
        return;
    }
    let rule = |class, dport: &str| Rule {
        class,
        matches: Match {
            dport: Some(dport.parse().expect("port")),
            ..Match::default()
        },
    };
    let rules = vec![rule(1, "5000"), rule(2, "5001")];
    let userspace = Classifier::new(rules.clone(), 7).expect("rules");
    let topo = Topology::line(PREFIX).expect("topology");
    topo.quiet().expect("quiet");
    let mut gen_tx = in_namespace(&topo.gen_ns, || {
        PacketSocket::open("g0", Role::Tx(FrameRing::default()), false)
    })
    .expect("namespace")
    .expect("g0 tx");
    let (mut rx, _tx, _) = in_namespace(&topo.dut_ns, || {
        xdp::open_classified("d0", &XdpConfig::default(), &rules, 7)
    })
    .expect("namespace")
    .expect("d0 AF_XDP with the classifier");
    let pool = BufPool::new(1024, 2048).expect("pool");
    const FRAMES: u64 = 600;
    let mut batch = Vec::new();
    for seq in 0..FRAMES {
        let mut b = pool.get().expect("buffer");
        let n = frame(seq, b.spare());
        // dport 5000, 5001 or 5002 (checksums do not matter here).
        b.set_len(n);
        b.as_mut_slice()[36..38].copy_from_slice(&(5000 + (seq % 3) as u16).to_be_bytes());
        batch.push(b);
    }
    while !batch.is_empty() {
        let mut part: Vec<PacketBuf> = batch.drain(..batch.len().min(64)).collect();
        let n = part.len();
        assert_eq!(gen_tx.send_batch(&mut part, &pool).expect("g0"), n);
    }
    let (mut bufs, mut classes) = (Vec::new(), Vec::new());
    let mut seen = [0u64; 8];
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = 0;
    while got < FRAMES && Instant::now() < deadline {
        rx.wait(Duration::from_millis(2)).expect("wait");
        rx.recv_classified(&pool, &mut bufs, &mut classes, 256);
        assert_eq!(bufs.len(), classes.len(), "one class per frame");
        for (b, c) in bufs.drain(..).zip(classes.drain(..)) {
            let want = userspace.classify(b.as_slice()).class;
            assert_eq!(c, Some(want), "frame {got}");
            seen[usize::from(want)] += 1;
            got += 1;
            pool.put(b);
        }
    }
    assert_eq!(got, FRAMES, "every frame arrived ({:?})", rx.stats());
    assert_eq!((seen[1], seen[2], seen[7]), (200, 200, 200));
}

/// A queue held by a live AF_XDP socket: a second socket's bind is retried
/// (a socket whose process just exited frees its queue a few ms later),
/// then refused with a message naming the queue and what holds it.
#[test]
fn a_queue_held_by_a_live_socket_is_named_as_taken() {
    if skip() {
        return;
    }
    on_line(PREFIX, false, |topo, _gen_tx| {
        let cfg = XdpConfig::default();
        let held = in_namespace(&topo.dut_ns, || xdp::open("d0", &cfg))
            .expect("namespace")
            .expect("the first socket");
        let second = in_namespace(&topo.dut_ns, || xdp::open("d0", &cfg)).expect("namespace");
        let Err(e) = second else {
            panic!("a second socket bound the held queue");
        };
        let text = e.to_string();
        assert!(
            text.contains("queue 0 is taken by another AF_XDP socket") && text.contains("d0"),
            "{text}"
        );
        drop(held);
    });
}
