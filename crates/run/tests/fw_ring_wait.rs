//! The AF_XDP class rings' wait on real veths (namespaces of its own,
//! prefix `fw-`): the class sockets' descriptors, duplicated for the
//! ingress's `ppoll`, end an idle wait when a frame arrives. Needs root
//! (CI runs as root); skipped with a message otherwise. The namespaces
//! are removed even when the test fails.

mod common;
use common::skipped;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use pktsched_io::netns::{Topology, in_namespace, is_root};
use pktsched_io::{PacketBuf, PacketIo};
use pktsched_run::config::parse;
use pktsched_run::devices::open_devices;

#[test]
fn a_frame_on_a_class_socket_ends_the_ingress_wait() {
    if !is_root() {
        skipped("needs root to create network namespaces");
        return;
    }
    let topo = Topology::line("fw-wait-").expect("topology");
    // Nothing on the wire but the test's datagram: no IPv6 chatter, and
    // no ARP request ahead of it (which would land in the default class's
    // ring and wake the wait instead).
    topo.quiet().expect("quiet");
    topo.static_neighbours().expect("neighbours");
    let src = common::prio_line_config("xdp", "", common::BULK_AND_VICTIM);
    let cfg = parse(&src, "test.toml", None).expect("config");
    let (mut devices, pool, choice) = in_namespace(&topo.dut_ns, || open_devices(&cfg))
        .expect("namespace")
        .expect("devices");
    assert!(
        choice
            .rings
            .starts_with("one receive ring per class (AF_XDP"),
        "{}",
        choice.rings
    );
    let board = choice.ring_board.clone().expect("class rings have a board");
    // Whatever the namespaces sent on their own while they came up.
    let mut got: Vec<PacketBuf> = Vec::new();
    while devices
        .ingress_rx
        .recv_batch(pool, &mut got, 64)
        .expect("recv")
        > 0
    {}
    for b in got.drain(..) {
        pool.put(b);
    }
    let sender = std::thread::spawn({
        let gen_ns = topo.gen_ns.clone();
        move || {
            std::thread::sleep(Duration::from_millis(200));
            // The datagram (to the victim's port) reaches d0's XDP
            // program; returns when it was handed to the kernel.
            in_namespace(&gen_ns, || {
                let s = UdpSocket::bind("0.0.0.0:0").expect("bind");
                let sent_at = Instant::now();
                s.send_to(&[0u8; 64], "198.18.0.2:5000").expect("send");
                sent_at
            })
            .expect("namespace")
        }
    });
    let started = Instant::now();
    devices
        .ingress_rx
        .wait(Duration::from_secs(20))
        .expect("wait");
    let ended = Instant::now();
    let sent_at = sender.join().expect("sender");
    // A wait that returned at once (a descriptor wrongly readable, or not
    // waited on at all) ends before the sender, 200 ms later, sends.
    assert!(
        ended >= sent_at,
        "the wait ended {:?} before the frame was sent (after {:?})",
        sent_at.duration_since(ended),
        ended.duration_since(started)
    );
    assert!(
        ended.duration_since(started) < Duration::from_secs(20),
        "the frame did not end the wait ({:?})",
        ended.duration_since(started)
    );
    let n = devices
        .ingress_rx
        .recv_batch(pool, &mut got, 64)
        .expect("recv");
    assert_eq!(n, 1, "woken: the test's one datagram in the class rings");
    let dport = got[0]
        .as_slice()
        .get(36..38)
        .map(|p| u16::from_be_bytes([p[0], p[1]]));
    assert_eq!(
        dport,
        Some(5000),
        "the victim's datagram (IPv4, no options)"
    );
    for b in got.drain(..) {
        pool.put(b);
    }
    // The rings publish their counters when they close: the datagram came
    // through the victim's ring.
    drop(devices);
    let rings = board.read();
    let victim = rings
        .iter()
        .find(|d| d.role == "rx ring victim")
        .unwrap_or_else(|| panic!("no victim ring on the board: {rings:?}"));
    assert_eq!(victim.rx_packets, 1, "{rings:?}");
}

/// One class: a single receive ring, which says in memory (no system
/// call) whether a receive would find frames, so the forwarder skips a
/// `ppoll` that would return at once (and does not count it a sleep).
fn single_ring_reports_ready(backend: &str, prefix: &str) {
    let topo = Topology::line(prefix).expect("topology");
    topo.quiet().expect("quiet");
    // The datagram itself, not an ARP request (whose retry a second later
    // could refill the ring before the last check).
    topo.static_neighbours().expect("neighbours");
    let config = format!(
        "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"100mbit\"\nbackend = \"{backend}\"\n\
         [scheduler]\nalgorithm = \"fifo\"\n[control]\nsocket = \"/tmp/unused.sock\"\n\
         [[class]]\nname = \"all\"\ndefault = true\n"
    );
    let cfg = parse(&config, "test.toml", None).expect("config");
    let (mut devices, pool, _choice) = in_namespace(&topo.dut_ns, || open_devices(&cfg))
        .expect("namespace")
        .expect("devices");
    let rx = &mut devices.ingress_rx;
    let mut got: Vec<PacketBuf> = Vec::new();
    while rx.recv_batch(pool, &mut got, 64).expect("recv") > 0 {}
    assert_eq!(rx.rx_ready(), Some(false), "{backend}: drained ring");
    in_namespace(&topo.gen_ns, || {
        let s = UdpSocket::bind("0.0.0.0:0").expect("bind");
        s.send_to(&[0u8; 64], "198.18.0.2:5000").expect("send")
    })
    .expect("namespace");
    let deadline = Instant::now() + Duration::from_secs(5);
    while rx.rx_ready() != Some(true) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        rx.rx_ready(),
        Some(true),
        "{backend}: the frame never showed"
    );
    assert!(rx.recv_batch(pool, &mut got, 64).expect("recv") >= 1);
    while rx.recv_batch(pool, &mut got, 64).expect("recv") > 0 {}
    assert_eq!(rx.rx_ready(), Some(false), "{backend}: taken");
    for b in got.drain(..) {
        pool.put(b);
    }
}

#[test]
fn a_single_ring_says_in_memory_whether_frames_wait() {
    if !is_root() {
        skipped("needs root to create network namespaces");
        return;
    }
    single_ring_reports_ready("xdp", "fw-rdyx-");
    single_ring_reports_ready("packet", "fw-rdyp-");
}
