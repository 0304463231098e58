//! `rx_ready`: the in-memory check of a receive ring (AF_PACKET block
//! status, AF_XDP producer index) that a forwarder makes before sleeping,
//! on a real wire (veths in namespaces of their own, prefix `fw-rdy-`):
//! false on an empty ring, true once a frame sent on g0 is in d0's ring,
//! false again after the receive took it. Needs root (CI runs as root);
//! skipped with the reason otherwise.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use pktsched_io::frame::{UdpSpec, build_udp};
use pktsched_io::netns::{Topology, in_namespace, missing_privileges, namespaces, remove_stale};
use pktsched_io::packet::{FrameRing, PacketSocket, Role, RxRing};
use pktsched_io::xdp::{self, XdpConfig};
use pktsched_io::{BufPool, PacketIo};

fn skip() -> bool {
    match missing_privileges() {
        Some(why) => {
            eprintln!("skipped: {why}");
            true
        }
        None => false,
    }
}

/// Sends one UDP frame on g0 through `tx`.
fn send_one(tx: &mut PacketSocket, pool: &BufPool) {
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
        payload: vec![7; 64],
    };
    let mut b = pool.get().expect("buffer");
    let n = build_udp(b.spare(), &spec).expect("fits");
    b.set_len(n);
    let mut batch = vec![b];
    assert_eq!(tx.send_batch(&mut batch, pool).expect("g0 send"), 1);
}

/// Runs `check(rx, g0)` on a fresh line topology named `prefix`, then
/// checks the namespaces are gone (also when `check` panicked: the
/// topology is dropped while unwinding).
fn on_wire(prefix: &str, check: impl FnOnce(&Topology, &mut PacketSocket, &BufPool)) {
    let _ = remove_stale(prefix);
    let names;
    {
        let topo = Topology::line(prefix).expect("topology");
        topo.quiet().expect("quiet");
        names = [
            topo.gen_ns.clone(),
            topo.dut_ns.clone(),
            topo.sink_ns.clone(),
        ];
        let mut gen_tx = in_namespace(&topo.gen_ns, || {
            PacketSocket::open("g0", Role::Tx(FrameRing::default()), false)
        })
        .expect("namespace")
        .expect("g0 tx");
        let pool = BufPool::new(64, 2048).expect("pool");
        check(&topo, &mut gen_tx, &pool);
    }
    let left = namespaces().expect("list");
    for n in names {
        assert!(!left.contains(&n), "{n} was not removed");
    }
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
    on_wire("fw-rdy-p-", |topo, g0, pool| {
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
    on_wire("fw-rdy-x-", |topo, g0, pool| {
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
