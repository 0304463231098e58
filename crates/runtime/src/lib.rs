//! `pktsched-runtime`: the threaded side of pktsched's PSPAT architecture.
//!
//! Clients hand packets to one arbiter thread through private lock-free
//! mailboxes; the arbiter runs a scheduling algorithm from `pktsched-core`,
//! emulates the link and passes cleared packets to dispatchers.
//!
//! # Module map
//!
//! Lock-free building blocks:
//!
//! * [`mailbox`]: the lock-free SPSC client mailbox (IFFQ style);
//! * [`barrier`]: asymmetric barriers (compiler fence / `membarrier`);
//! * [`doorbell`]: the client lists and the arbiter's sleep/wake-up;
//! * [`handoff`]: the try-lock a late arbiter's round is handed off under;
//! * [`link`]: the emulated link (exact leaky bucket);
//! * [`output`]: where cleared packets go;
//! * `signal`: SIGINT/SIGTERM as a flag long runs poll (Linux).
//!
//! The PSPAT runtime, each module using only those above it
//! (`config ← client ← report ← arbiter ← driver`):
//!
//! * [`config`]: [`Config`], [`RuntimeError`], [`Clock`], [`StopMode`],
//!   [`Sent`] — shared with the `tc` baseline — and [`thread_cpu_ns`];
//! * [`client`]: [`Client`] (a sending thread's handle), its errors and
//!   [`ClientStats`];
//! * [`report`]: [`Report`], [`Stats`], [`ArbiterStats`]; `tc -s`-style text,
//!   JSON through serde;
//! * [`arbiter`]: the sans-I/O [`Arbiter`]: one round
//!   ([`Arbiter::do_scan`]) at an explicit `now`, flush, stop accounting;
//! * [`driver`]: [`Pspat`], the arbiter and dispatcher threads on a real
//!   clock (start/stop, sleep/wake-up, pinning);
//! * [`pspat`]: the front door, re-exporting all of the above (as does the
//!   crate root).
//!
//! And the baseline:
//!
//! * [`locked`]: the `tc` architecture (one lock, every client runs the
//!   scheduler) to compare with; it uses [`config`] only.
//!
//! # Unsafe code
//!
//! `unsafe` is denied crate-wide and allowed only where the tree below says
//! so: [`mailbox`] (moving values in and out of its ring's cells),
//! [`handoff`] (the arbiter state behind its try-lock) and
//! [`barrier`] (the `membarrier` system call) and `signal` (installing the
//! handlers with `sigaction`). Every block has its
//! `// SAFETY:` argument.
//!
//! # Verification
//!
//! * Lock-free code takes its atomics, cells and `Arc` from a private `sync`
//!   facade, so that `RUSTFLAGS="--cfg loom"` swaps in loom's; `ci/loom.sh`
//!   runs the model tests in `tests/loom_mailbox.rs`,
//!   `tests/loom_doorbell.rs`, `tests/loom_handoff.rs`,
//!   `tests/loom_sleep.rs` and `tests/loom_stop.rs`, including
//!   deliberately broken orderings and checks that loom must reject.
//! * `ci/miri.sh` runs the ordinary tests under Miri (it installs a nightly
//!   toolchain with the `miri` component if there is none).

//! # Example
//!
//! (The README's example, compiled and run as a doctest.)
//!
//! ```
//! use pktsched_core::{Algorithm, Nanos, Pkt, Rate};
//! use pktsched_runtime::output::NullOutput;
//! use pktsched_runtime::pspat::{Clock, Config, Pspat, StopMode, add_flows};
//!
//! let mut sched = Algorithm::Qfq.build_send::<u64>();
//! let flows = add_flows(sched.as_mut(), &[1, 2], 2, 256)?; // two flows, weights 1 and 2
//! let rt = Pspat::start(
//!     &Config::new(Rate::gbit(10)),
//!     sched,
//!     vec![NullOutput::default()],
//!     Clock::new(),
//! )?;
//! let mut c = rt.client()?; // move it to the sending thread
//! c.send(Pkt::new(flows[1], 1500, Nanos(0), 7))
//!     .map_err(|e| format!("{e:?}"))?; // Err(Full) hands the packet back
//! let report = rt.stop(StopMode::Drain)?; // where every packet went
//! assert_eq!(report.sched.enqueued.pkts, 1);
//! assert_eq!(report.arbiter.decisions + report.flushed, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[allow(unsafe_code)]
pub mod barrier;
pub mod doorbell;
#[allow(unsafe_code)]
pub mod handoff;
pub mod link;
#[allow(unsafe_code)]
pub mod mailbox;
pub mod output;
mod sync;

#[cfg(not(loom))]
pub mod arbiter;
#[cfg(not(loom))]
pub mod client;
#[cfg(not(loom))]
pub mod config;
#[cfg(not(loom))]
pub mod driver;
#[cfg(not(loom))]
pub mod locked;
#[cfg(not(loom))]
pub mod pspat;
#[cfg(not(loom))]
pub mod report;
#[cfg(all(not(loom), target_os = "linux"))]
#[allow(unsafe_code)]
pub mod signal;

#[cfg(not(loom))]
pub use locked::{Locked, LockedClient, LockedReport};
pub use mailbox::{Consumer, Mailbox, Producer};
pub use output::{NullOutput, Output, VecOutput};
#[cfg(not(loom))]
pub use pspat::{
    Arbiter, ArbiterSched, ArbiterStats, BoxedScheduler, Client, ClientStats, Clock, Config, Pspat,
    Report, Round, RuntimeError, SendError, Sent, SharedArbiter, Stats, StopMode, Stopped,
    add_flows, thread_cpu_ns,
};
