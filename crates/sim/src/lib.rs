//! pktsched-sim: a deterministic discrete-event simulator in virtual time.
//!
//! A link of rate `R` serves one packet at a time from a `pktsched-core`
//! scheduler; per-flow traffic sources (greedy, CBR, Poisson, on/off, CSV
//! trace) feed it. On the very same arrivals the exact GPS fluid reference
//! ([`fluid::Fluid`]) computes the fluid finish time of every packet. The
//! [`engine`] measures per flow: throughput and share, Jain's index, delay
//! percentiles, lag behind the fluid system, B-WFI and T-WFI, and compares
//! them with the algorithm's published bound ([`metrics`]).
//!
//! Time is virtual, in picoseconds (`u64`); randomness comes from seeded
//! ChaCha streams, one per flow; nothing reads a clock. The same scenario
//! and seed always give the same result.
//!
//! # Modules
//!
//! - [`model`]: the data model (`SimConfig`, `FlowSpec`, `SizeDist`,
//!   `SourceSpec`, `Group`, `PspatParams`, `SimPolicy`), re-exported here.
//! - [`scenario`]: TOML scenarios → [`SimConfig`], with positioned errors.
//! - [`source`]: the seeded traffic sources.
//! - [`fluid`]: the exact GPS fluid reference.
//! - [`metrics`]: per-flow measurements and the published bounds.
//! - [`engine`]: the discrete-event engine (a directory: event loop,
//!   event handlers, state, PSPAT model, fluid stream on a second thread).
//! - [`outcome`]: what a run measured ([`Outcome`],
//!   [`Departure`]), shared by engine, report and plot.
//! - [`report`]: the [`Report`] built from an outcome (table, JSON).
//! - [`plot`]: SVG plots of an outcome.
//! - [`session`]: a run the way `pktsched sim` does it: progress observer,
//!   departures CSV, `--profile` re-runs, the exit verdict.
//! - [`ingress`]: the ingress polling model (per-class receive rings
//!   served by core's `ingress::Poller` with budgets) and its load sweep
//!   (`ingress_sweep`, private, re-exported from [`ingress`]); separate
//!   from the engine, with its own entry point `IngressSim::run`.
//! - `prefetch` (private): the crate's only `unsafe` code, a cache hint.
//!
//! # Module dependencies
//!
//! Who imports whom (`a → b, c`); the graph is acyclic. The crate root
//! only declares modules and re-exports, plus two items that import
//! nothing from the crate ([`PS_PER_SEC`], [`thread_cpu_ns`]), which
//! modules reach as `crate::…` and which are left out below.
//!
//! - `model`, `fluid`, `metrics`, `prefetch` → (nothing)
//! - `ingress` ↔ `ingress_sweep` (nothing else of the crate)
//! - `source` → `model`
//! - `outcome` → `metrics`
//! - `engine` → `model`, `outcome`, `metrics`, `fluid`, `source`,
//!   `prefetch`; inside it (`mod` is `engine/mod.rs`):
//!   - `mod` → `options`, `event_loop`
//!   - `event_loop` → `options`, `state`, `pspat`, `fluid_stream`,
//!     `arrivals`
//!   - `packet_path` → `event_loop` (the `Engine` type), `state`, `pspat`,
//!     `fluid_stream`
//!   - `state` → `fluid_stream`; `pspat` → `state`
//!   - `fluid_stream` → `arrivals` (not the rest of the engine)
//!   - `options`, `arrivals` → (nothing)
//! - `scenario` → `model`, `source`, `engine`
//! - `report` → `model`, `outcome`, `metrics`
//! - `plot` → `model`, `outcome`, `report`
//! - `session` → `model`, `engine`, `outcome`, `report`

#![deny(unsafe_code)]

pub mod engine;
pub mod fluid;
pub mod ingress;
mod ingress_sweep;
pub mod input_file;
pub mod metrics;
pub mod model;
pub mod outcome;
pub mod plot;
#[allow(unsafe_code)]
mod prefetch;
pub mod report;
pub mod scenario;
pub mod session;
pub mod source;
mod toml_error;

pub use engine::SimError;
pub use model::{
    FlowSpec, GREEDY_DEPTH, Group, PspatParams, PspatParams as Pspat, SimConfig, SimPolicy,
    SizeDist, SourceSpec,
};
pub use outcome::{Departure, Outcome};
pub use report::Report;
pub use session::run;

/// Picoseconds per second.
pub const PS_PER_SEC: u64 = 1_000_000_000_000;

/// CPU time of the calling thread, ns (first field of Linux
/// `/proc/thread-self/schedstat`; `None` elsewhere). Unlike wall time it
/// does not count time the thread waited for a core while other processes
/// ran (the machines these figures come from are shared). Used by every
/// `pktsched` benchmark and by the fluid thread's report.
pub fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}
