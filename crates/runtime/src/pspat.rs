//! The PSPAT runtime's front door: every public item of the runtime's
//! [`config`](crate::config), [`client`](crate::client),
//! [`arbiter`](crate::arbiter), [`driver`](crate::driver) and
//! [`report`](crate::report) modules, re-exported under one path (they are
//! also at the crate root).
//!
//! ```text
//!  client 0 ─ mailbox ─┐                                ┌─ TX mailbox ─ dispatcher 0 ─ Output
//!  client 1 ─ mailbox ─┼─▶ arbiter: scheduler + link ───┼─ TX mailbox ─ dispatcher 1 ─ Output
//!  client n ─ mailbox ─┘     (one thread)               └─ (or the arbiter's own Output)
//! ```
//!
//! * A [`Client`] is one sending thread's handle with a private lock-free
//!   mailbox; [`Client::send`] never blocks and never takes a lock.
//! * The [`Arbiter`] is deterministic and does no I/O of its own: its
//!   [`Arbiter::do_scan`] takes `now` and does one round of the paper's
//!   loop. Tests drive it with a virtual clock.
//! * [`Pspat`] runs the arbiter (and dispatchers) on threads with a real
//!   [`Clock`].
//! * [`Pspat::stop`] (or [`Arbiter::stop`]) drains every mailbox, then sends
//!   or returns what is queued and reports where every packet went
//!   ([`Report`]).

pub use crate::arbiter::{Arbiter, Round, SharedArbiter};
pub use crate::client::{Client, ClientStats, SendError, Stopped};
pub use crate::config::{
    ArbiterSched, BoxedScheduler, Clock, Config, RuntimeError, Sent, StopMode, add_flows,
    thread_cpu_ns,
};
pub use crate::driver::{HumbleStats, Pspat, check_arbiter_sched};
pub use crate::report::{ArbiterStats, Report, Stats};
