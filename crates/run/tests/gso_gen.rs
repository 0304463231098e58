//! The generator's UDP GSO backend on real veths: `gen --backend gso` in
//! one namespace, a kernel bridge (d0 ↔ d1) in the middle, the sink in the
//! third. Every datagram leaves g0 as its own frame (the kernel cuts each
//! batch at g0, whose offloads are off) and the sink counts every one,
//! stamped, none lost or reordered. Needs root (CI runs as root); skipped
//! with a message otherwise. The namespaces are removed even when the test
//! fails (the topology's Drop).

mod common;
use common::skipped;

use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::Duration;

use pktsched_io::netns::{Topology, in_namespace, is_root};
use pktsched_run::traffic::gen_flows::FlowSpec;
use pktsched_run::traffic::generator::{GenBackend, generate_with};
use pktsched_run::traffic::sink::Sink;

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_gso_frame_crosses_a_bridge_stamped_and_in_order() {
    if !is_root() {
        skipped("needs root to create network namespaces");
        return;
    }
    let topo = Topology::line("gs13-").expect("topology");
    topo.quiet().expect("no IPv6 chatter");
    topo.static_neighbours().expect("neighbours");
    let dut = topo.dut_ns.as_str();
    ip(&["-n", dut, "link", "add", "br0", "type", "bridge"]);
    ip(&["-n", dut, "link", "set", "d0", "master", "br0"]);
    ip(&["-n", dut, "link", "set", "d1", "master", "br0"]);
    ip(&["-n", dut, "link", "set", "br0", "up"]);

    let ports = [7000u16, 7001];
    let (ready_tx, ready_rx) = mpsc::channel();
    let sink_ns = topo.sink_ns.clone();
    let sink = std::thread::spawn(move || {
        in_namespace(&sink_ns, move || {
            let bound = Sink::bind("198.18.0.2".parse().expect("addr"), &ports).expect("bind");
            ready_tx.send(()).expect("ready");
            let never = AtomicBool::new(false);
            bound.run(
                Some(Duration::from_secs(15)),
                Duration::from_millis(700),
                &never,
            )
        })
        .expect("sink namespace")
    });
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("sink bound");
    let g0_before = Topology::counter(&topo.gen_ns, "g0", "tx_packets").expect("g0");
    let dst = "198.18.0.2".parse().expect("addr");
    let flows: Vec<FlowSpec> = [
        "dport=7000,rate=20mbit,size=64",
        "dport=7001,rate=20mbit,size=64:3+300:1+1500:1",
    ]
    .iter()
    .map(|s| FlowSpec::parse_cli(s, &FlowSpec::new(dst)).expect("spec"))
    .collect();
    let sent = in_namespace(&topo.gen_ns, move || {
        let stop = AtomicBool::new(false);
        generate_with(
            &GenBackend::Gso,
            &flows,
            Duration::from_secs(1),
            3,
            &stop,
            &mut |_| {},
        )
    })
    .expect("gen namespace")
    .expect("generate");
    let received = sink.join().expect("sink thread");
    let g0_sent = Topology::counter(&topo.gen_ns, "g0", "tx_packets").expect("g0") - g0_before;
    let text = format!("{}\n{}", sent.text(), received.text());

    let total: u64 = sent.flows.iter().map(|f| f.sent).sum();
    // One frame on g0 per datagram: the batches were cut before the veth.
    assert_eq!(g0_sent, total, "{text}");
    assert_eq!(received.unstamped, 0, "{text}");
    for (g, port) in sent.flows.iter().zip(ports) {
        assert!(g.sent > 1000 && g.errors == 0, "{g:?}");
        let s = received
            .flows
            .iter()
            .find(|s| s.port == port)
            .unwrap_or_else(|| panic!("port {port} did not arrive: {text}"));
        assert_eq!(s.received, g.sent, "port {port}: {text}");
        assert_eq!((s.lost, s.reordered), (0, 0), "port {port}: {text}");
        assert_eq!(s.payload_bytes, g.frame_bytes - 42 * g.sent, "{text}");
    }
}
