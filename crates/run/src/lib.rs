//! `pktsched run`: the scheduler on real interfaces. Frames received on the
//! ingress device are classified into the config's classes, scheduled by
//! any algorithm or policy tree at the configured rate (with link-layer
//! overhead accounting) and sent on the egress device; the reverse
//! direction is forwarded untouched, so ARP and replies work.
//!
//! * [`config`]: the TOML config, checked with positions, printed back
//!   normalised (`pktsched check`);
//! * [`plan`]: config → scheduler (one flow per class) and classifier, no
//!   I/O;
//! * [`engine`]: the threads over any [`pktsched_io::PacketIo`] devices —
//!   run-to-completion (one thread receives, classifies, schedules on the
//!   emulated link and transmits; the default) or on the PSPAT runtime (a
//!   receive thread as client, the arbiter thread), plus the reverse
//!   thread;
//! * [`reload`]: what a changed config changes, applied live by class name
//!   keeping queued frames (a removed class's go to the default class);
//! * [`stats`]: `tc -s`-style, JSON and Prometheus counters;
//! * [`control`]: the owner-only Unix socket `pktsched stats` and `reload`
//!   talk to; [`metrics_http`]: the optional Prometheus endpoint;
//! * [`router`]: `pktsched route`, a software router whose ingress has
//!   one receive ring per traffic class, polled with per-ring budgets
//!   (config, cost model, routing table, forwarding worker, counters,
//!   daemon);
//! * [`daemon`]: `pktsched run` as a whole (devices, privileges, pipeline,
//!   control, reloads, stop); [`demo`]: the live demo; [`traffic`]: `gen`
//!   and `sink` (with the ingress experiment's RT/BE workload and
//!   per-class results).
//!
//! `unsafe` is denied except in `sys` (`prctl`, `clock_gettime`, `capset`),
//! `engine::wait` (`ppoll` with a nanosecond timeout), `traffic::ifmac`
//! (`SIOCGIFHWADDR`, `SIOCETHTOOL`), `traffic::rx_sys` (the sink's `poll`
//! and `SO_RCVBUFFORCE`) and `traffic::gso_out` (`setsockopt
//! UDP_SEGMENT`).

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod config;
pub mod control;
pub mod daemon;
mod deadline;
pub mod demo;
pub mod devices;
pub mod engine;
pub mod frame;
pub mod metrics_http;
pub mod plan;
pub mod reload;
pub mod router;
mod sent;
pub mod stats;
#[allow(unsafe_code)]
pub mod sys;
pub mod traffic;

pub use config::{ConfigError, RunConfig};
pub use engine::{Devices, Final, Pipeline};
