//! The arbiter behind its hand-off lock ([`RoundLock`]): the arbiter
//! thread takes the lock for each round, and a client that finds the
//! arbiter late (no round started within `Config::assist_after`) tries it
//! and runs the round itself (see [`crate::handoff`]).

use std::sync::Arc;

use pktsched_core::Nanos;

use super::{Arbiter, Round};
use crate::client::{AssistSetup, Client, LateRound, Shared};
use crate::config::{Clock, RuntimeError, StopMode};
use crate::doorbell::Doorbell;
use crate::handoff::{RoundLock, SleepCheck};
use crate::output::Output;
use crate::report::Report;

/// The arbiter state behind the lock; `None` once stop has taken it out.
type Slot<T, O> = RoundLock<Option<Arbiter<T, O>>>;

impl<T: Send + 'static, O: Output<T>> LateRound for Slot<T, O> {
    fn last_round(&self) -> u64 {
        RoundLock::last_round(self)
    }

    fn try_late_round(&self, now: Nanos, after: u64) -> bool {
        self.try_with(|slot| {
            // A round may have started between the caller's look and the
            // lock: then the arbiter is not late any more.
            let Some(a) = slot.as_mut() else {
                return false;
            };
            if !RoundLock::is_late(self, now.0, after) {
                return false;
            }
            stamped_round(self, a, now);
            a.stats.assisted_rounds += 1;
            true
        })
        .unwrap_or(false)
    }
}

/// One round of `a` (behind `lock`, held by the caller) at `now`, raised to
/// the last round's start if that is later: `now` was read before the
/// lock, and another holder's round may have run at a later time
/// meanwhile. Rounds never go back in time. Stamps the round's start for
/// clients that look for a late arbiter.
fn stamped_round<T: Send + 'static, O: Output<T>>(
    lock: &Slot<T, O>,
    a: &mut Arbiter<T, O>,
    now: Nanos,
) -> Round {
    let now = Nanos(now.0.max(lock.last_round()));
    lock.stamp_round(now.0);
    a.do_scan(now)
}

/// Stopped (taken out): never quiet, so the thread does not sleep.
impl<T: Send + 'static, O: Output<T>> SleepCheck for Option<Arbiter<T, O>> {
    fn rounds(&self) -> u64 {
        self.as_ref().map_or(u64::MAX, Arbiter::rounds)
    }

    fn has_news(&self) -> bool {
        self.as_ref()
            .is_none_or(|a| a.any_mail() || a.shared().stop.load(crate::sync::Ordering::Relaxed))
    }
}

/// An [`Arbiter`] that clients may run late rounds of. Sans I/O when made
/// with [`SharedArbiter::new`]: clients then run rounds only through
/// [`Client::assist_at`] with an explicit `now`.
pub struct SharedArbiter<T, O> {
    slot: Arc<Slot<T, O>>,
    /// What clients share with the arbiter (the step-aside mark).
    shared: crate::sync::Arc<Shared<T>>,
}

impl<T, O> std::fmt::Debug for SharedArbiter<T, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedArbiter")
            .field("lock", &self.slot)
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static, O: Output<T>> SharedArbiter<T, O> {
    /// Puts `arbiter` behind the hand-off lock. Clients made from now on
    /// (with [`SharedArbiter::client`]) may run its late rounds: when
    /// none started within `Config::assist_after`, or within
    /// `client::AWAY_AFTER` at most while it is marked as stepped aside
    /// ([`SharedArbiter::set_away`]).
    pub fn new(arbiter: Arbiter<T, O>) -> Self {
        Self::build(arbiter, None, true)
    }

    /// As [`SharedArbiter::new`]; clients' sends read `clock` to see
    /// whether the arbiter is late. With `step_aside`, clients also run
    /// rounds while the arbiter thread has stepped aside (even without
    /// `Config::assist_after`) and count their starved gaps (which
    /// `Config::humble` needs as well).
    pub(crate) fn with_clock(arbiter: Arbiter<T, O>, clock: Clock, step_aside: bool) -> Self {
        Self::build(arbiter, Some(clock), step_aside)
    }

    fn build(arbiter: Arbiter<T, O>, clock: Option<Clock>, step_aside: bool) -> Self {
        let shared = arbiter.shared().clone();
        let after = arbiter.assist_after.map(|a| a.0);
        let starved = arbiter.starved_assist;
        let slot = Arc::new(RoundLock::new(Some(arbiter)));
        let for_all = after.is_some() || step_aside || starved;
        // With a clock, a client may ask for late rounds of its own
        // (`Client::set_assist_after`) even if the others run none.
        if for_all || clock.is_some() {
            let weak = Arc::downgrade(&slot);
            shared.set_assist(AssistSetup {
                round: weak,
                clock,
                after,
                starved,
                for_all,
            });
        }
        SharedArbiter { slot, shared }
    }

    /// A new client handle.
    pub fn client(&self) -> Result<Client<T>, RuntimeError> {
        self.with(|a| a.client())
            .unwrap_or(Err(RuntimeError::Stopped))
    }

    /// One round at `now`, waiting while a client runs one; `None` once
    /// stopped.
    pub fn do_scan(&self, now: Nanos) -> Option<Round> {
        self.slot.with(|slot| self.round(slot, now))
    }

    /// One round at `now` if no client is running one: `None` if the lock
    /// was held, `Some(None)` once stopped.
    pub fn try_do_scan(&self, now: Nanos) -> Option<Option<Round>> {
        self.try_scan_then(now, |_, r| r)
    }

    /// As [`SharedArbiter::try_do_scan`], then `f` on the arbiter and the
    /// round within the same hold of the lock.
    pub(crate) fn try_scan_then<R>(
        &self,
        now: Nanos,
        f: impl FnOnce(&mut Arbiter<T, O>, Round) -> R,
    ) -> Option<Option<R>> {
        self.slot.try_with(|slot| {
            let r = self.round(slot, now)?;
            Some(f(slot.as_mut()?, r))
        })
    }

    fn round(&self, slot: &mut Option<Arbiter<T, O>>, now: Nanos) -> Option<Round> {
        Some(stamped_round(&self.slot, slot.as_mut()?, now))
    }

    /// The arbiter thread, about to sleep until a ring after a round that
    /// left the count at `rounds_seen`: see
    /// [`RoundLock::announce_sleep_if_quiet`]. `Some` (with what `then`
    /// returned) means sleep now.
    pub(crate) fn announce_sleep_if_quiet<R>(
        &self,
        bell: &Doorbell,
        rounds_seen: u64,
        then: impl FnOnce(&mut Arbiter<T, O>) -> R,
    ) -> Option<R> {
        self.slot
            .announce_sleep_if_quiet(bell, rounds_seen, |slot| slot.as_mut().map(then))
            .flatten()
    }

    /// Runs `f` on the arbiter, waiting while a client runs a round;
    /// `None` once stopped.
    pub fn with<R>(&self, mut f: impl FnMut(&mut Arbiter<T, O>) -> R) -> Option<R> {
        self.slot.with(|slot| slot.as_mut().map(&mut f))
    }

    /// Runs `f` on the arbiter if no client is running a round: `None` if
    /// the lock was held or the arbiter is stopped.
    pub fn try_with<R>(&self, f: impl FnOnce(&mut Arbiter<T, O>) -> R) -> Option<R> {
        self.slot.try_with(|slot| slot.as_mut().map(f)).flatten()
    }

    /// `true` while a round (or a `with`) runs.
    pub fn is_held(&self) -> bool {
        self.slot.is_held()
    }

    /// Records that the arbiter thread is running at `now` (as the start
    /// of a round does): clients see it as not late.
    pub(crate) fn stamp_alive(&self, now: u64) {
        self.slot.stamp_round(now);
    }

    /// Marks the arbiter thread as stepped aside (`true`: clients run the
    /// rounds, backlogged or not) or back (see `driver::step_aside`).
    pub fn set_away(&self, away: bool) {
        self.shared.away.store(away, crate::sync::Ordering::Relaxed);
    }

    /// When the last round started.
    pub fn last_round(&self) -> Nanos {
        Nanos(self.slot.last_round())
    }

    /// Takes the arbiter out (clients run no round from then on); `None`
    /// if it was taken already.
    pub fn take(&self) -> Option<Arbiter<T, O>> {
        self.slot.with(Option::take)
    }

    /// Stops as [`Arbiter::stop`]; `None` if the arbiter was taken out.
    pub fn stop(self, mode: StopMode, now: Nanos) -> Option<Report<T, O>> {
        self.take().map(|a| a.stop(mode, now))
    }
}
