//! `pktsched-runtime`: the threaded side of pktsched's PSPAT architecture.
//!
//! Clients hand packets to one arbiter thread through private lock-free
//! mailboxes; the arbiter runs a scheduling algorithm from `pktsched-core`,
//! emulates the link and passes cleared packets to dispatchers.
//!
//! So far this crate has the mailbox ([`mailbox`]); the client lists, the
//! arbiter loop and the dispatchers come next.
//!
//! # Verification
//!
//! * Lock-free code takes its atomics, cells and `Arc` from a private `sync`
//!   facade, so that `RUSTFLAGS="--cfg loom"` swaps in loom's; `ci/loom.sh`
//!   runs the model tests in `tests/loom_mailbox.rs`, including deliberately
//!   broken orderings that loom must reject.
//! * `cargo +nightly miri test -p pktsched-runtime` runs the ordinary tests
//!   under Miri where the `miri` component is installed.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod mailbox;
mod sync;

pub use mailbox::{Consumer, Mailbox, Producer};
