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
//!
//! Time is always an argument (`now: Nanos`), so everything here runs the
//! same under a virtual clock in tests and simulations.
#![deny(unsafe_op_in_unsafe_fn)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bitmap;
pub mod flow;
pub mod harness;
pub mod policy;
pub mod pq;
pub mod sched;
pub mod shape;
pub mod units;

pub use flow::{Counter, Counters, DropReason, FlowConfig, FlowId, FlowTable, Pkt, Rejected};
pub use sched::{
    Algorithm, Backlog, ConfigError, Discipline, FlowSched, Limits, SchedParams, SchedVisitor,
    Scheduler,
};
pub use units::{Bytes, Nanos, Rate, RateError};
