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
            // The datagram (or the ARP request before it, in the default
            // class's ring) reaches d0's XDP program.
            in_namespace(&gen_ns, || {
                let s = UdpSocket::bind("0.0.0.0:0").expect("bind");
                s.send_to(&[0u8; 64], "198.18.0.2:5000").expect("send")
            })
            .expect("namespace")
        }
    });
    let started = Instant::now();
    devices
        .ingress_rx
        .wait(Duration::from_secs(20))
        .expect("wait");
    let waited = started.elapsed();
    sender.join().expect("sender");
    assert!(
        waited < Duration::from_secs(20),
        "the frame did not end the wait ({waited:?})"
    );
    let n = devices
        .ingress_rx
        .recv_batch(pool, &mut got, 64)
        .expect("recv");
    assert!(n >= 1, "woken, yet no frame in any class ring");
    for b in got.drain(..) {
        pool.put(b);
    }
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
