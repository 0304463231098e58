//! A received frame longer than an AF_PACKET receive slot reaches the ring
//! cut short: it is dropped and counted in `rx_oversize`, never passed on
//! as if whole, and the frames around it still arrive. g0 → d0 with a
//! 4000-byte MTU and d0's TPACKET_V2 slots of 2048 bytes, on veths in
//! namespaces of their own (prefix `h14-rxt-`), removed even when the test
//! fails. Needs root; skipped otherwise.

use std::process::Command;
use std::time::{Duration, Instant};

use pktsched_io::frame::{build_udp, udp_payload};
use pktsched_io::netns::in_namespace;
use pktsched_io::packet::{FrameRing, PacketSocket, Role};
use pktsched_io::{BufPool, PacketBuf, PacketIo};

mod common;
use common::{line_udp, on_line, skip};

const MARK: &[u8] = b"h14-truncated";

/// A frame of `len` bytes whose payload starts with [`MARK`] and `seq`.
fn frame(pool: &BufPool, seq: u8, len: usize) -> PacketBuf {
    let mut payload = MARK.to_vec();
    payload.push(seq);
    payload.resize(len - 42, 0);
    let mut b = pool.get().expect("buffer");
    let n = build_udp(b.spare(), &line_udp(5000, 0, payload)).expect("fits");
    assert_eq!(n, len);
    b.set_len(n);
    b
}

fn set_mtu(ns: &str, dev: &str, mtu: u32) {
    let ok = Command::new("ip")
        .args(["-n", ns, "link", "set", dev, "mtu", &mtu.to_string()])
        .status()
        .expect("ip")
        .success();
    assert!(ok, "mtu {mtu} on {ns}:{dev}");
}

#[test]
fn af_packet_drops_and_counts_a_frame_cut_short_by_its_slot() {
    if skip() {
        return;
    }
    on_line("h14-rxt-", true, |topo, _| {
        set_mtu(&topo.gen_ns, "g0", 4000);
        set_mtu(&topo.dut_ns, "d0", 4000);
        let slots = |frame_size| FrameRing {
            frame_size,
            frame_count: 64,
        };
        let mut tx = in_namespace(&topo.gen_ns, || {
            PacketSocket::open("g0", Role::Tx(slots(8192)), false)
        })
        .expect("namespace")
        .expect("g0 tx");
        let mut rx = in_namespace(&topo.dut_ns, || {
            PacketSocket::open("d0", Role::RxFrames(slots(2048)), true)
        })
        .expect("namespace")
        .expect("d0 rx");
        let pool = BufPool::new(16, 8192).expect("pool");
        // Small 0, the long 1 (3 000 bytes: more than a 2 048-byte slot
        // holds), small 2.
        let mut frames = vec![
            frame(&pool, 0, 100),
            frame(&pool, 1, 3000),
            frame(&pool, 2, 100),
        ];
        assert_eq!(tx.send_batch(&mut frames, &pool).expect("send"), 3);
        let (mut got, mut seqs) = (Vec::new(), Vec::new());
        let until = Instant::now() + Duration::from_secs(10);
        while seqs.len() < 2 && Instant::now() < until {
            let _ = rx.wait(Duration::from_millis(5));
            rx.recv_batch(&pool, &mut got, 64).expect("receive");
            for b in got.drain(..) {
                if let Some(p) = udp_payload(b.as_slice()).filter(|p| p.starts_with(MARK)) {
                    seqs.push((p[MARK.len()], b.len()));
                }
                pool.put(b);
            }
        }
        // The frame behind the long one came after it: once it is here the
        // long one has been through the ring.
        assert_eq!(seqs, [(0, 100), (2, 100)], "only the whole frames");
        let s = rx.stats();
        assert_eq!(s.rx_oversize, 1, "the cut frame is counted: {s:?}");
        assert_eq!(s.rx_packets, 2, "{s:?}");
    });
}
