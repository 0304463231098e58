//! `pktsched-runtime`: the threaded side of pktsched's PSPAT architecture.
//!
//! Clients hand packets to one arbiter thread through private lock-free
//! mailboxes; the arbiter runs a scheduling algorithm from `pktsched-core`,
//! emulates the link and passes cleared packets to dispatchers.
//!
//! * [`mailbox`]: the lock-free SPSC client mailbox (IFFQ style);
//! * [`barrier`]: asymmetric barriers (compiler fence / `membarrier`);
//! * [`doorbell`]: the client lists and the arbiter's sleep/wake-up;
//! * [`link`]: the emulated link (exact leaky bucket);
//! * [`pspat`]: clients, the arbiter loop, dispatchers, stop and stats;
//! * [`locked`]: the `tc` architecture (one lock, every client runs the
//!   scheduler) as the baseline to compare with;
//! * [`output`]: where cleared packets go;
//! * `signal`: SIGINT/SIGTERM as a flag long runs poll (Linux).
//!
//! # Verification
//!
//! * Lock-free code takes its atomics, cells and `Arc` from a private `sync`
//!   facade, so that `RUSTFLAGS="--cfg loom"` swaps in loom's; `ci/loom.sh`
//!   runs the model tests in `tests/loom_mailbox.rs`, including deliberately
//!   broken orderings that loom must reject.
//! * `ci/miri.sh` runs the ordinary tests under Miri (it installs a nightly
//!   toolchain with the `miri` component if there is none).

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod barrier;
pub mod doorbell;
pub mod link;
#[cfg(not(loom))]
pub mod locked;
pub mod mailbox;
pub mod output;
#[cfg(not(loom))]
pub mod pspat;
#[cfg(all(not(loom), target_os = "linux"))]
#[allow(unsafe_code)]
pub mod signal;
mod sync;

pub use mailbox::{Consumer, Mailbox, Producer};
