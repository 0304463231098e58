//! Ingress QoS for a software router whose CPU is the bottleneck:
//! packets are classified into per-class receive rings, and one poller
//! serves the rings with per-ring budgets inside a device budget.
//!
//! - [`config`]: [`Strategy`] (SQ, RR, LL-RR, LL-WFQ), [`IngressConfig`]
//!   and its validation into a [`RingPlan`] (rings, budgets, class → ring).
//! - [`poller`]: the [`Poller`] over any [`Rings`] (a daemon's real rings,
//!   the simulator's model, a test's counters), visit by visit
//!   ([`Poller::step`]), a round at a time ([`Poller::poll`]) or a device
//!   poll at a time ([`Poller::poll_device`]), with
//!   per-ring [`RingStats`].
//! - [`bound`]: the RT latency bound `(b+ρ)·x/(1−ρ)` with its derivation,
//!   and the largest best-effort budget for a target.
//!
//! No I/O, no clocks: a driver decides what a visit costs in time.
//!
//! ```
//! use pktsched_core::ingress::{IngressConfig, Poller, Rings, Take};
//!
//! struct Counts([usize; 2]);
//! impl Rings for Counts {
//!     fn waiting(&self, r: usize) -> usize { self.0[r] }
//!     fn take(&mut self, r: usize, max: usize) -> usize {
//!         let k = self.0[r].min(max);
//!         self.0[r] -= k;
//!         k
//!     }
//! }
//! let mut poller = Poller::new(&IngressConfig::ll_wfq(&[60, 4]))?;
//! let mut rings = Counts([100, 100]);
//! let mut visits = Vec::new();
//! assert_eq!(poller.poll(&mut rings, &mut visits), 64);
//! assert_eq!(visits[1], Take { ring: 1, quota: 4, packets: 4 });
//! # Ok::<(), pktsched_core::ingress::IngressError>(())
//! ```

pub mod bound;
pub mod config;
pub mod poller;

pub use bound::{Bound, BoundError};
pub use config::{
    DEFAULT_DEVICE_BUDGET, IngressConfig, IngressError, MAX_CLASSES, MAX_DEVICE_BUDGET, RingPlan,
    Strategy,
};
pub use poller::{Poller, RingStats, Rings, Step, Take};

#[cfg(test)]
mod tests;
