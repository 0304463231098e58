//! A traffic generator and sink of pktsched's own (`pktsched gen`,
//! `pktsched sink`): UDP flows over ordinary sockets, each datagram
//! carrying a [`Stamp`] (flow, sequence number, send time on
//! CLOCK_MONOTONIC), so the sink measures per-flow throughput, loss,
//! reordering and one-way latency — every network namespace of a machine
//! shares that clock.
//!
//! The kernel has no pktgen here and trafgen aborts when a veth pushes
//! back; a UDP socket simply blocks, so the generator's rate is what left.
//!
//! For the ingress experiment (`scripts/ingress-qos.sh`), [`workload`]
//! turns one offered load and an RT share into Poisson RT and BE flows
//! (their own DSCP and ports), and the sink groups flows into classes by
//! port ([`sink_class`]): received, lost, percentiles and a latency
//! histogram per class.

pub mod gen_flows;
pub mod generator;
pub mod gso_out;
#[allow(unsafe_code)]
pub(crate) mod ifmac;
pub mod ring_out;
#[allow(unsafe_code)]
mod rx_sys;
pub mod sink;
pub mod sink_class;
pub mod workload;

/// The stamp at the start of every generated datagram: the I/O crate's
/// payload codec, so `gen`, `sink` and the ring-level tests agree on one
/// format.
pub use pktsched_io::frame::Stamp;
