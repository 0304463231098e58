//! `pktsched route`: a software router whose ingress has one receive ring
//! per traffic class, served by the core ingress [`Poller`] with a device
//! budget and per-ring budgets (SQ, RR, LL-RR, LL-WFQ), so real-time
//! frames do not wait behind best-effort ones when the router's CPU is the
//! bottleneck.
//!
//! * [`config`]: the TOML config (`examples/route.toml`), checked with
//!   positions; [`normalise`] prints it back (`pktsched route --check`);
//! * [`cost`]: the per-packet cost set on purpose (busy loop, ACL);
//! * [`table`]: routes (core LPM) and static neighbours — no ARP or ND is
//!   sent, learnt or answered: the hosts around need static entries for
//!   the router's MACs, and every next hop is a `[[neighbour]]`;
//! * [`worker`]: receive, cost, forward (TTL/hop limit − 1, RFC 1624
//!   checksum), MAC rewrite and batch transmit, implementing the poller's
//!   `Rings`; the output batches and the ingress's one kernel kick at the
//!   end of each round; every frame counted as forwarded or dropped by
//!   reason;
//! * [`icmp`]: ICMPv4 and ICMPv6 time exceeded for expired frames
//!   (rate-limited, when the receiving interface has a configured address
//!   of the frame's family);
//! * [`egress_config`] and [`egress`]: the optional egress policy
//!   (`[egress]`): the classes' frames to the egress interface wait in a
//!   core scheduler and leave at the egress link's exact rate (the
//!   reverse direction and ICMP are not scheduled);
//! * [`stats`]: per ring, per class and the measured service time `x`;
//! * [`daemon`]: devices, control socket, the forwarding thread, stop.
//!
//! The receive side ([`ports`]) is an AF_XDP class group (one socket per
//! class sharing one UMEM, the XDP classifier redirecting into the class's
//! socket) or the AF_PACKET fanout group (one TPACKET_V2 ring of
//! `ring_frames` slots per class, the classic-BPF classifier picking the
//! ring); `auto` tries AF_XDP first. The reverse direction (egress →
//! ingress) is one plain ring served after every round. SQ opens one ring
//! and tells classes apart in user space for the counters.
//!
//! [`Poller`]: pktsched_core::ingress::Poller

pub mod config;
pub mod cost;
pub mod daemon;
pub mod egress;
pub mod egress_config;
pub mod icmp;
pub mod normalise;
pub mod ports;
mod raw;
pub mod stats;
pub mod table;
pub mod worker;

pub use config::{RouteConfig, load, parse};
pub use daemon::{RouteOptions, load_checked, run};
pub use stats::RouterSnapshot;

#[cfg(test)]
mod egress_tests;
#[cfg(test)]
mod tests;
