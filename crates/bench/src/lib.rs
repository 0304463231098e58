//! pktsched's benchmark machinery, as a library: what `pktsched bench`,
//! `pktsched demo` and `pktsched plot` run, without the command line.
//!
//! - [`sched`]: the closed-loop scheduler benchmark (dummynet's harness)
//!   for every algorithm and policy tree, and the BENCHMARKS.md table;
//! - [`shape`]: the closed-loop EDT shaping benchmark (MLTW, timing wheel,
//!   cFFS) on core's [`ClosedLoop`](pktsched_core::shape::ClosedLoop);
//! - [`pspat`]: the PSPAT runtime against the `tc` architecture and no
//!   scheduler, with its load generator and latency recording;
//! - [`ingress`]: the ingress router's experiment: its result points read
//!   (loss, latency, the bound), written as CSV, JSON and charts, and
//!   judged against the targets (`pktsched plot ingress`), and
//!   the simulated sweep's files (`pktsched calc ingress --sweep`);
//! - [`stats`]: medians, quantiles and Jain's index with one convention
//!   for empty input;
//! - [`limits`]: the ranges of every size a user controls, checked with
//!   messages naming the option, the value and the range.
//!
//! Measurements return data; the tables are written to any
//! [`std::io::Write`]. Long measurements take a stop flag
//! (`pktsched_runtime::signal::stop_flag`) checked at safe points, and
//! report what they measured before it was set, marked partial.
#![forbid(unsafe_code)]

pub mod ingress;
pub mod limits;
pub mod pspat;
pub mod sched;
pub mod shape;
pub mod stats;
pub mod svg;

pub use stats::thread_cpu_ns;
