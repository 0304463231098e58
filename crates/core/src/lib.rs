//! pktsched-core: deterministic, single-threaded packet scheduling with no
//! I/O and no clocks.
//!
//! - [`units`]: [`Nanos`], [`Rate`] (bits/s, exact integer conversions) and
//!   the rate parser/printer.
//! - [`flow`]: packets ([`Pkt`]), flow configuration, counters and the flow
//!   table with live add/change/remove.
//! - [`sched`]: the [`Scheduler`] trait and the algorithms FIFO, PRIO, RR,
//!   DRR, WF2Q+ and QFQ.
//! - [`bitmap`]: the hierarchical find-first-set bitmap they share.
//! - [`pq`]: Eiffel's integer priority queues (FFS, hierarchical and
//!   circular FFS, gradient queue, bucket heap) behind one trait.
//! - [`policy`]: programmable policy trees (Eiffel): per-node rank
//!   functions over integer priority queues and one shared shaper.
//! - [`shape`]: EDT pacing, timing wheels (single and multi-level), the
//!   cFFS shaper and the shaping scheduler.
//! - [`harness`]: the dummynet-style closed-loop benchmark harness.
//! - [`ingress`]: per-class receive rings polled with budgets (SQ, RR,
//!   LL-RR, LL-WFQ) and the RT latency bound.
//! - [`route`]: longest-prefix match (IPv4, IPv6), the forwarding step
//!   on an Ethernet frame and a per-packet access list.
//!
//! Time is always an argument (`now: Nanos`), so everything here runs the
//! same under a virtual clock in tests and simulations.
//!
//! # Examples
//!
//! (The README's examples, compiled and run as doctests.)
//!
//! Any algorithm behind one trait, with exact accounting:
//!
//! ```
//! use pktsched_core::{Algorithm, FlowConfig, Nanos, Pkt};
//!
//! let mut sched = Algorithm::Drr.build::<u32>(); // quantum = weight × 1514 bytes
//! let a = sched.add_flow(FlowConfig::weight(1))?;
//! let b = sched.add_flow(FlowConfig::weight(3))?;
//! for i in 0..8 {
//!     sched.enqueue(Pkt::new(a, 1500, Nanos(0), i), Nanos(0)).map_err(|r| format!("{:?}", r.reason))?;
//!     sched.enqueue(Pkt::new(b, 1500, Nanos(0), i), Nanos(0)).map_err(|r| format!("{:?}", r.reason))?;
//! }
//! let first_four: Vec<_> = (0..4)
//!     .filter_map(|_| sched.dequeue(Nanos(0)))
//!     .map(|p| p.flow)
//!     .collect();
//! assert_eq!(first_four.iter().filter(|&&f| f == b).count(), 3); // 3 : 1 by weight
//! assert_eq!(sched.backlog().pkts, 12);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A policy tree (Eiffel), with a flow placed below a named node:
//!
//! ```
//! use pktsched_core::policy::{Policy, PolicySched};
//! use pktsched_core::FlowConfig;
//!
//! let src = r#"
//! [[node]]
//! name = "root"
//! kind = "wfq"
//!
//! [[node]]
//! name = "gold"
//! parent = "root"
//! kind = "rr"
//! weight = 3
//! "#;
//! let policy = Policy::from_toml(src)?; // errors name the node, line and column
//! let mut sched: PolicySched<u64> = PolicySched::new(&policy);
//! let gold = policy.node("gold").expect("declared above");
//! let flow = sched.add_flow_at(gold, FlowConfig::weight(2))?;
//! assert_eq!(sched.flow_node(flow), Some(gold));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bitmap;
pub mod flow;
pub mod harness;
pub mod ingress;
pub mod policy;
pub mod pq;
pub mod route;
pub mod sched;
pub mod shape;
pub mod toml_error;
pub mod units;

pub use flow::{Counter, Counters, DropReason, FlowConfig, FlowId, FlowTable, Pkt, Rejected};
pub use sched::{
    Algorithm, Backlog, ConfigError, Discipline, FlowSched, Limits, SchedParams, SchedVisitor,
    Scheduler,
};
pub use units::{Bytes, Nanos, Rate, RateError};
