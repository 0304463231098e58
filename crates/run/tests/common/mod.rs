//! Shared by the real-wire tests: the kernel's counters along the line
//! `gen` → g0 → d0 (pktsched) d1 → s0 → sink, read after a run, so that a
//! failing test says at which hop frames went missing and whose loss it
//! was; and the configs the tests on that line share.
// Each test binary that includes this module uses part of it.
#![allow(dead_code)]

use pktsched_io::frame::{UdpSpec, build_udp};
use pktsched_io::netns::Topology;

/// A UDP frame of `len` bytes (at least 42, the headers) from 198.18.0.1
/// port 1234 to 198.18.0.2 port `dport`, for the in-memory devices.
pub(crate) fn udp_frame(dport: u16, len: usize) -> Vec<u8> {
    let spec = UdpSpec {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        vlan: None,
        src_ip: "198.18.0.1".parse().expect("ip"),
        dst_ip: "198.18.0.2".parse().expect("ip"),
        sport: 1234,
        dport,
        dscp: 0,
        ttl: 64,
        payload: vec![0; len - 42],
    };
    let mut buf = vec![0u8; 2048];
    let n = build_udp(&mut buf, &spec).expect("fits");
    buf.truncate(n);
    buf
}

/// The kernel's view of one run, outside pktsched: what left the
/// generator's namespace, what veth dropped on the way in and out, and
/// what the sink's namespace received and dropped.
#[derive(Debug, Default, Clone)]
pub(crate) struct WireCounters {
    /// Frames g0 transmitted (the generator's frames that left it).
    pub(crate) g0_tx_packets: u64,
    /// Frames veth dropped at g0's transmit: d0's receive backlog was
    /// full, before pktsched's socket saw them (the host's loss).
    pub(crate) g0_tx_dropped: u64,
    /// Frames d1 transmitted (pktsched's egress).
    pub(crate) d1_tx_packets: u64,
    /// Frames veth dropped at d1's transmit (s0's backlog full).
    pub(crate) d1_tx_dropped: u64,
    /// Frames s0 received in the sink's namespace.
    pub(crate) s0_rx_packets: u64,
    /// Datagrams the sink namespace's UDP dropped for a full socket
    /// buffer (`RcvbufErrors` in its /proc/net/snmp): the sink's loss.
    pub(crate) sink_rcvbuf_errors: u64,
    /// Counters that could not be read, by name (named in [`Self::text`]).
    pub(crate) unreadable: Vec<String>,
}

impl WireCounters {
    /// Reads the counters of `topo`'s devices (call after the run, before
    /// the topology is dropped).
    pub(crate) fn read(topo: &Topology) -> WireCounters {
        let mut w = WireCounters::default();
        let mut get = |ns: &str, dev: &str, name: &str| {
            Topology::counter(ns, dev, name).unwrap_or_else(|e| {
                w.unreadable.push(format!("{dev} {name}: {e}"));
                0
            })
        };
        let g0_tx_packets = get(&topo.gen_ns, "g0", "tx_packets");
        let g0_tx_dropped = get(&topo.gen_ns, "g0", "tx_dropped");
        let d1_tx_packets = get(&topo.dut_ns, "d1", "tx_packets");
        let d1_tx_dropped = get(&topo.dut_ns, "d1", "tx_dropped");
        let s0_rx_packets = get(&topo.sink_ns, "s0", "rx_packets");
        w.g0_tx_packets = g0_tx_packets;
        w.g0_tx_dropped = g0_tx_dropped;
        w.d1_tx_packets = d1_tx_packets;
        w.d1_tx_dropped = d1_tx_dropped;
        w.s0_rx_packets = s0_rx_packets;
        match udp_rcvbuf_errors(&topo.sink_ns) {
            Ok(n) => w.sink_rcvbuf_errors = n,
            Err(e) => w.unreadable.push(format!("sink Udp RcvbufErrors: {e}")),
        }
        w
    }

    /// One line per hop, for a failure message.
    pub(crate) fn text(&self) -> String {
        let mut s = format!(
            "wire: g0 sent {} and dropped {} at its transmit (d0's backlog, before pktsched); \
             d1 sent {} and dropped {} at its transmit; s0 received {}; \
             the sink's UDP dropped {} for a full socket buffer",
            self.g0_tx_packets,
            self.g0_tx_dropped,
            self.d1_tx_packets,
            self.d1_tx_dropped,
            self.s0_rx_packets,
            self.sink_rcvbuf_errors
        );
        if !self.unreadable.is_empty() {
            s += &format!("; unreadable: {}", self.unreadable.join(", "));
        }
        s
    }
}

/// `RcvbufErrors` of the `Udp:` lines of `/proc/net/snmp` in namespace
/// `ns`.
fn udp_rcvbuf_errors(ns: &str) -> std::io::Result<u64> {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "cat", "/proc/net/snmp"])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(names), Some(values)) = (udp.next(), udp.next()) else {
        return Err(std::io::Error::other("no Udp: lines in /proc/net/snmp"));
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "RcvbufErrors")
        .ok_or_else(|| std::io::Error::other("no RcvbufErrors in the Udp: lines"))?
        .1
        .parse()
        .map_err(|e| std::io::Error::other(format!("RcvbufErrors: {e}")))
}

#[path = "../../../io/tests/common/untested.rs"]
mod untested;
#[allow(unused_imports)]
pub(crate) use untested::{skipped, untested};

/// Two strict-priority classes for a victim next to an overload: `bulk`
/// (priority 1, the default) and `victim` (priority 0, UDP to port 5000),
/// 200 packets each.
pub(crate) const BULK_AND_VICTIM: &str = r#"
[[class]]
name = "bulk"
prio = 1
limit = 200
default = true

[[class]]
name = "victim"
prio = 0
limit = 200
match = [{ proto = "udp", dport = 5000 }]
"#;

/// A `pktsched run` config on the line topology: d0 → d1 at 100 Mbit/s,
/// strict priority, on `backend`, with `link_extra` (whole lines) added to
/// its `[link]` table, then `classes` (its `[[class]]` tables).
pub(crate) fn prio_line_config(backend: &str, link_extra: &str, classes: &str) -> String {
    format!(
        r#"
[link]
ingress = "d0"
egress = "d1"
rate = "100mbit"
backend = "{backend}"
{link_extra}
[scheduler]
algorithm = "prio"

[control]
socket = "/tmp/unused.sock"
{classes}"#
    )
}
