//! Traffic shaping with earliest departure times (EDT): per-flow pacing,
//! time-indexed queues and a shaping [`Scheduler`](crate::Scheduler).
//!
//! - [`Pacer`] stamps each packet with `EDT_i = max(now, EDT_{i−1}) + L_i/R`
//!   in exact integer arithmetic (picosecond remainders carried, so long runs
//!   do not drift); the rate can change at any time.
//! - [`TimeQueue`] is what orders stamped packets by time. Three
//!   implementations: [`Wheels`] with one level (Carousel's timing wheel)
//!   or many (FlowBundler's multi-level timing wheel, MLTW), and
//!   [`CffsShaper`] (Eiffel's cFFS over departure times).
//! - [`Shaper`] couples a time queue with the flow table and implements the
//!   [`Scheduler`](crate::Scheduler) trait.
//! - [`TokenBucket`] / [`Tbf`]: the classic token-bucket baseline (rate,
//!   burst, limit).
//! - [`DestClassifier`] and [`RateEstimator`]: hashed destination
//!   classification and an EWMA rate estimate for aggregates whose rate is
//!   not configured.
//!
//! # Release policy (all time queues)
//!
//! An entry with departure time `e` is filed under its **ceil slot time**:
//! the first multiple of its slot width `g` that is `>= e`. A slot is
//! released when `now` reaches its time, so **no packet ever leaves before
//! its EDT**, and a packet released at `next_ready()` is late by at most
//! `g − 1` ns (plus whatever delay the caller adds by calling late):
//!
//! | structure | slot width `g` of a packet | lateness bound |
//! | --- | --- | --- |
//! | single wheel | the wheel's granularity | `g − 1` |
//! | cFFS shaper | the bucket width | `g − 1` |
//! | MLTW | `g0·2^q` of the flow's wheel `q` (`q = fls(MTU/R / g0) − 1`, so `g ≤ MTU/R`) | `g0·2^q − 1 < MTU/R` |
//!
//! Since a flow's wheel has slots no wider than one MTU's transmission time,
//! a flow releases at most the bytes due in one slot plus one packet at a
//! time: an **intra-flow burst of at most 2 MTU**. Stamps are exact, so
//! lateness never accumulates: the long-run rate is exact.
//!
//! A flow's packets are its entries, taken in release order: an entry
//! hands out the flow's head packet with the entry's EDT, so a flow's
//! entries must leave in EDT order. They do on one wheel, on a coarser one
//! after a rate decrease, and in a slot that entries parked in a coarser
//! wheel come back to (they go before their flow's later entries there).
//! A rate increase (or a smaller `max_len`) that moves a backlogged flow
//! to a finer wheel would let its next entries' slots come before its
//! last queued one's; so its clock moves forward to that slot's time `T`
//! first (at most one old slot − 1 ns, and its packets could not leave
//! before the one leaving at `T` anyway). Each packet keeps the bound of
//! the wheel it was filed on. A caller that releases late, several slot
//! times at once, gets them in one batch, level by level: a flow's packets
//! in that batch may carry each other's EDTs (the batch's EDTs are the
//! right ones).
//!
//! # Horizon
//!
//! The wheels measure their horizon from their last release, which moves
//! only when something is due; the cFFS's window moves when its first
//! half is empty. A packet they cannot file (after an idle gap longer than
//! the horizon, on a fresh shaper whose clock does not start near 0, or
//! behind stale entries of removed flows) makes the [`Shaper`] measure the
//! horizon from `now` ([`TimeQueue::catch_up`]; stale entries dropped with
//! [`TimeQueue::reset`] when nothing is queued; entries due by `now`
//! released first, as the next dequeue would) and file it again, once, off
//! the packet path. Only a packet whose own EDT lies beyond `now` + the
//! horizon (its flow queued that far ahead) is refused, counted in
//! [`ShapeStats::beyond_horizon`].
//!
//! # MLTW
//!
//! Level `i` is a wheel of `N` slots of `g0·2^i` ns. A packet for a flow on
//! wheel `q` whose ceil slot is `a` goes to wheel `q + k` slot `a >> k` with
//! `k = min(ctz(a), top − q)`: a slot time shared by several levels always
//! lives in the coarsest of them, so one release takes every packet due at
//! that instant from one slot (inter-flow batching). A packet beyond its
//! wheel's horizon (`N` slots) is parked in the first coarser wheel that
//! reaches it, at its floor slot, and goes back to its own wheel when that
//! slot comes (never clamped, never early, no extra lateness). `release`
//! takes every slot whose time is `<= now` from every level as one batch.
//!
//! # Memory
//!
//! | structure | fixed memory |
//! | --- | --- |
//! | single wheel | `S · 8 + S/8` bytes, `S = horizon / g` rounded up to a power of two |
//! | cFFS | `2 · n · 8 + 2 · n/8` bytes, `n = horizon / g` |
//! | MLTW | `L · (N · 8 + N/8)` bytes, `L = log2(horizon / (g0·N)) + 1` |
//!
//! plus 24 bytes (wheels) or the arena's node size (cFFS) per queued packet.
//! At 1 ns granularity and a 256 s horizon the MLTW with `N = 1024` needs
//! 29 levels, about 240 KB; a single wheel would need 2^38 slots (≈ 2.2 TB)
//! and the cFFS about 4.4 TB, so both are refused by the memory cap.
//!
//! # Configuration errors
//!
//! Structures are checked when built ([`ShapeConfigError`] names the
//! field, the value and the allowed range: granularity, slots, levels,
//! memory above the cap) and flow rates when a flow is added or its rate
//! changed ([`ConfigError::OutOfRange`](crate::ConfigError) with field
//! `rate`: zero, faster than one `max_len` packet per slot of the finest
//! granularity, or slower than one `max_len` packet per horizon).

use std::collections::VecDeque;

use crate::units::Nanos;

mod cffs;
mod classify;
mod closed_loop;
mod edt;
mod shaper;
mod tbf;
mod wheel;

#[cfg(test)]
mod edge_tests;
#[cfg(test)]
mod tests;

pub use cffs::CffsShaper;
pub use classify::{DestClassifier, RateEstimator};
pub use closed_loop::{ClosedLoop, FlowRecord, LoopError, LoopItem};
pub use edt::{Pacer, PacerClock};
pub use shaper::{ShapeStats, Shaper};
pub use tbf::{Tbf, TokenBucket};
pub use wheel::{WheelConfig, WheelTicket, Wheels};

/// One stamped packet as a time queue sees it: its departure time, its
/// flow and the flow's generation (entries of a removed flow are skipped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Earliest departure time, ns.
    pub edt: u64,
    /// Flow index.
    pub flow: u32,
    /// Generation of the flow when the entry was made.
    pub generation: u32,
}

/// A time-indexed queue of stamped packets.
pub trait TimeQueue {
    /// Short name (`wheel`, `mltw`, `cffs`).
    fn name(&self) -> &'static str;
    /// The level (wheel) for a flow whose `max_len` packet takes `spacing`
    /// ns; 0 for single-level structures.
    fn level_for(&self, spacing: Nanos) -> u8;
    /// Slot width of `level`: packets there are late by at most this − 1 ns.
    fn granularity(&self, level: u8) -> Nanos;
    /// Smallest per-packet spacing a flow may have (the finest slot).
    fn min_spacing(&self) -> Nanos;
    /// How far ahead of the last release an entry can be filed.
    fn horizon(&self) -> Nanos;
    /// A filing prepared by [`TimeQueue::reserve`].
    type Ticket: Copy;
    /// Prepares to file an entry for a flow on `level`: everything that
    /// can refuse it happens here (`None`: it lies beyond the horizon).
    /// The ticket must be committed or cancelled before the queue is used
    /// otherwise.
    fn reserve(&mut self, e: Entry, level: u8) -> Option<Self::Ticket>;
    /// Files a reserved entry.
    fn commit(&mut self, t: Self::Ticket);
    /// Gives a reservation up: the entry is not filed.
    fn cancel(&mut self, t: Self::Ticket);
    /// Files an entry; it comes back if it lies beyond the horizon.
    fn push(&mut self, e: Entry, level: u8) -> Result<(), Entry> {
        let t = self.reserve(e, level).ok_or(e)?;
        self.commit(t);
        Ok(())
    }
    /// Appends every entry whose slot time is `<= now` to `out` (one batch),
    /// after any entries still in the ready list; returns how many.
    fn release_to(&mut self, now: Nanos, out: &mut Vec<Entry>) -> usize;
    /// Moves every entry whose slot time is `<= now` to the queue's ready
    /// list (one batch, after what is still there), to be taken with
    /// [`TimeQueue::pop_ready`]; true if the ready list is not empty.
    fn release_ready(&mut self, now: Nanos) -> bool;
    /// Takes the first entry of the ready list.
    fn pop_ready(&mut self) -> Option<Entry>;
    /// True if the ready list is not empty.
    fn has_ready(&self) -> bool;
    /// [`TimeQueue::release_to`] into a `VecDeque`.
    fn release(&mut self, now: Nanos, out: &mut VecDeque<Entry>) -> usize {
        let mut batch = Vec::new();
        let n = self.release_to(now, &mut batch);
        out.extend(batch);
        n
    }
    /// Time of the first non-empty slot, if any (the ready list aside).
    fn next_due(&self) -> Option<Nanos>;
    /// Measures the horizon from `now` from here on, for a caller that has
    /// found nothing due by `now` ([`TimeQueue::next_due`] later or
    /// `None`): a queue that has released nothing for longer than its
    /// horizon files entries near `now` again. Changes nothing else.
    fn catch_up(&mut self, now: Nanos);
    /// Drops every entry, filed or ready, and measures the horizon from
    /// `now`: for a caller whose entries are all stale. Cold; the memory
    /// stays allocated.
    fn reset(&mut self, now: Nanos);
    /// Entries filed or ready, not yet taken.
    fn len(&self) -> usize;
    /// True if nothing is filed.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Heap memory in bytes.
    fn memory_bytes(&self) -> usize;
}

/// A bad shaping-structure parameter, naming the field, the value and what
/// is allowed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{structure}: {field} = {value} is out of range: allowed {allowed}")]
pub struct ShapeConfigError {
    /// The structure (`wheel`, `mltw`, `cffs`, `tbf`).
    pub structure: &'static str,
    /// The parameter.
    pub field: &'static str,
    /// The value given, printed.
    pub value: String,
    /// What is allowed, printed.
    pub allowed: String,
}

impl ShapeConfigError {
    pub(crate) fn new(
        structure: &'static str,
        field: &'static str,
        value: impl ToString,
        allowed: impl ToString,
    ) -> ShapeConfigError {
        ShapeConfigError {
            structure,
            field,
            value: value.to_string(),
            allowed: allowed.to_string(),
        }
    }
}
