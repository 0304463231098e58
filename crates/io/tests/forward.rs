//! AF_PACKET on a real wire: frames sent by a UDP socket in one namespace
//! are received on d0, forwarded to d1 by this test through the TX ring,
//! and arrive whole at a UDP socket in a third namespace. Needs root (CI
//! runs as root); skipped with a message otherwise.

#[path = "common/untested.rs"]
mod untested;
use std::net::UdpSocket;
use std::time::{Duration, Instant};
use untested::skipped;

use pktsched_io::classify::{Classifier, Match, Rule};
use pktsched_io::netns::{Topology, in_namespace, is_root, namespaces};
use pktsched_io::packet::{FrameRing, PacketSocket, Role, RxRing};
use pktsched_io::{BufPool, PacketIo};

const N: usize = 3000;

#[test]
fn frames_cross_a_forwarder_between_two_veths() {
    if !is_root() {
        skipped("needs root to create network namespaces");
        return;
    }
    let names;
    {
        let topo = Topology::line("pst-io-").expect("topology");
        names = [
            topo.gen_ns.clone(),
            topo.dut_ns.clone(),
            topo.sink_ns.clone(),
        ];
        topo.static_neighbours().expect("neighbours");
        let (mut rx, mut tx) = in_namespace(&topo.dut_ns, || {
            (
                PacketSocket::open("d0", Role::Rx(RxRing::default()), true),
                PacketSocket::open("d1", Role::Tx(FrameRing::default()), false),
            )
        })
        .expect("namespace");
        let (rx, tx) = (rx.as_mut().expect("rx"), tx.as_mut().expect("tx"));
        let sink = in_namespace(&topo.sink_ns, || UdpSocket::bind("198.18.0.2:5000"))
            .expect("namespace")
            .expect("bind");
        sink.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        let sender = in_namespace(&topo.gen_ns, || UdpSocket::bind("198.18.0.1:0"))
            .expect("namespace")
            .expect("bind");
        let pool = BufPool::new(4096, 2048).expect("pool");
        let rule = Rule {
            class: 1,
            matches: Match {
                dport: Some("5000".parse().expect("port")),
                ..Match::default()
            },
        };
        let classifier = Classifier::new(vec![rule], 0).expect("classifier");
        let (mut forwarded, mut class1, mut got) = (0usize, 0usize, 0usize);
        let mut bufs = Vec::new();
        let mut seen = vec![false; N];
        let mut payload = [0u8; 100];
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut sent = 0;
        while got < N && Instant::now() < deadline {
            // Send a few, forward what arrived, read what crossed.
            for _ in 0..16 {
                if sent < N {
                    payload[..8].copy_from_slice(&(sent as u64).to_le_bytes());
                    sender.send_to(&payload, "198.18.0.2:5000").expect("send");
                    sent += 1;
                }
            }
            rx.wait(Duration::from_millis(2)).expect("wait");
            rx.recv_batch(&pool, &mut bufs, 64).expect("recv");
            for b in &bufs {
                if classifier.classify(b.as_slice()).class == 1 {
                    class1 += 1;
                }
            }
            let n = bufs.len();
            assert_eq!(tx.send_batch(&mut bufs, &pool).expect("send"), n);
            forwarded += n;
            sink.set_nonblocking(true).expect("nonblocking");
            let mut buf = [0u8; 2048];
            while let Ok(len) = sink.recv(&mut buf) {
                assert_eq!(len, payload.len());
                let seq = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes")) as usize;
                assert!(!seen[seq], "duplicate {seq}");
                seen[seq] = true;
                got += 1;
            }
        }
        assert_eq!(got, N, "every datagram crossed");
        assert!(class1 >= N, "the classifier saw the UDP flow ({class1})");
        let (rs, ts) = (rx.stats(), tx.stats());
        assert_eq!(rs.rx_packets as usize, forwarded);
        assert_eq!(ts.tx_packets as usize, forwarded);
        assert_eq!((rs.rx_no_buffer, rs.rx_oversize, ts.tx_failed), (0, 0, 0));
        assert_eq!(pool.stats().free, 4096, "every buffer is back");
    }
    let left = namespaces().expect("list");
    for n in names {
        assert!(!left.contains(&n), "{n} was not removed");
    }
}
