//! Helpers shared by the real-wire tests (each test binary includes this
//! module and uses part of it).
#![allow(dead_code)]

mod untested;
#[allow(unused_imports)]
pub(crate) use untested::{skipped, untested};

use std::net::{IpAddr, Ipv4Addr};

use pktsched_io::frame::UdpSpec;
use pktsched_io::netns::{Topology, in_namespace, missing_privileges, namespaces, remove_stale};
use pktsched_io::packet::{FrameRing, PacketSocket, Role};

/// True (with the reason printed) when this process may not create
/// namespaces; the test then returns early.
pub(crate) fn skip() -> bool {
    match missing_privileges() {
        Some(why) => {
            skipped(&why);
            true
        }
        None => false,
    }
}

/// Runs `check(topology, g0's transmit socket)` on a fresh line topology
/// named `prefix` (offloads off if `quiet`), then checks its namespaces
/// are gone, also when `check` panicked: the topology is dropped while
/// unwinding.
pub(crate) fn on_line(prefix: &str, quiet: bool, check: impl FnOnce(&Topology, &mut PacketSocket)) {
    let _ = remove_stale(prefix);
    let names;
    {
        let topo = Topology::line(prefix).expect("topology");
        if quiet {
            topo.quiet().expect("quiet");
        }
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
        check(&topo, &mut gen_tx);
    }
    let left = namespaces().expect("list");
    for n in names {
        assert!(!left.contains(&n), "{n} was not removed");
    }
}

/// An IPv4/UDP frame from g0 (198.18.0.1, port 40000) to s0 (198.18.0.2)
/// on the line topology's MACs, TTL 64, no VLAN tag.
pub(crate) fn line_udp(dport: u16, dscp: u8, payload: Vec<u8>) -> UdpSpec {
    UdpSpec {
        src_mac: [0x02, 0xee, 0, 0, 0, 0x01],
        dst_mac: [0x02, 0xee, 0, 0, 0, 0x02],
        vlan: None,
        src_ip: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
        dst_ip: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
        sport: 40000,
        dport,
        dscp,
        ttl: 64,
        payload,
    }
}
