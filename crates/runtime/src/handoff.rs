//! The arbiter's hand-off lock: whoever holds it runs the next arbiter
//! round, the arbiter thread or a client that found the arbiter late.
//!
//! PSPAT's arbiter owns the scheduler alone; on a machine where it shares
//! a core, its next round can wait for a time slice while packets sit in
//! the mailboxes. [`RoundLock`] lets a client run that round instead: the
//! arbiter's whole state lives in the lock, the arbiter thread takes it
//! for each round, and a client *tries* it (never waits) when the last
//! round started longer ago than the lateness threshold. One holder at a
//! time and a happens-before edge from each holder to the next (Acquire
//! on taking, Release on giving back) make the rounds one sequence, as if
//! a single thread ran them: no packet is reordered or lost, and every
//! scheduling decision is the one the arbiter would have taken at that
//! `now`. A round's `now` is read before the lock, so the arbiter
//! thread's is raised to the last round's start when a client's round ran
//! meanwhile (a client runs only when later than that start): the rounds'
//! times never go back.
//!
//! [`RoundLock::stamp_round`] records when a round starts; clients compare
//! it with their clock ([`RoundLock::is_late`]). The stamp is a hint (a
//! stale stamp costs one failed or one extra round), so it is `Relaxed`.
//!
//! `tests/loom_handoff.rs` model-checks the hand-off, including a variant
//! with `Relaxed` taking and giving back that loom must reject.
//!
//! # Sleeping while clients run rounds
//!
//! The arbiter thread sleeps (until rung, with or without a timeout) only
//! when nothing is left to do: it announces sleep on the [`Doorbell`] (heavy barrier), then looks at
//! the doorbell's bits and, under the lock, at every mailbox
//! ([`SleepCheck::has_news`]). A client's round in the window between the
//! arbiter's last round and that look takes the doorbell's bits and empties
//! the mailboxes, yet may leave packets queued for a busy link that no
//! client will ring about again. So the look also compares the rounds run
//! so far with the count after the arbiter's own last round
//! ([`SleepCheck::rounds`]): if someone ran a round since, the arbiter runs
//! another one and decides again ([`RoundLock::announce_sleep_if_quiet`]).
//! `tests/loom_sleep.rs` model-checks this, with a variant without the
//! round count that loom must catch as a lost wake-up.

use crate::doorbell::Doorbell;
use crate::sync::{AtomicBool, AtomicU64, Ordering, UnsafeCell};

/// What the round runner's thread looks at, under the lock, before it
/// sleeps (with or without a timeout).
pub trait SleepCheck {
    /// Rounds run so far, by anyone.
    fn rounds(&self) -> u64;
    /// Work the doorbell's bits may not show: packets in a mailbox (or held
    /// back from one), or a stop request.
    fn has_news(&self) -> bool;
}

/// A try-lock around the arbiter state `A`, with the time the last round
/// started.
pub struct RoundLock<A> {
    /// Set while someone runs a round.
    held: AtomicBool,
    /// When the last round started (ns, the runtime's clock).
    last_round: AtomicU64,
    value: UnsafeCell<A>,
    #[cfg(loom)]
    take: Ordering,
    #[cfg(loom)]
    give: Ordering,
    /// Loom builds only: sleep without comparing round counts (a
    /// deliberate bug).
    #[cfg(loom)]
    ignore_rounds: bool,
}

// SAFETY: `value` is only reached through `try_with` / `with`, which hand
// it to one holder at a time (the `held` flag, taken with Acquire and
// given back with Release); `A: Send` is all that moving the access
// between threads needs.
unsafe impl<A: Send> Sync for RoundLock<A> {}

impl<A> std::fmt::Debug for RoundLock<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoundLock")
            .field("held", &self.held.load(Ordering::Relaxed))
            .field("last_round", &self.last_round.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Gives the lock back when the holder is done (also on unwinding).
struct Holder<'a, A> {
    lock: &'a RoundLock<A>,
}

impl<A> Drop for Holder<'_, A> {
    fn drop(&mut self) {
        self.lock.held.store(false, self.lock.give_ordering());
    }
}

impl<A> RoundLock<A> {
    /// `value` behind a free lock; the last round "started" at 0.
    pub fn new(value: A) -> Self {
        RoundLock {
            held: AtomicBool::new(false),
            last_round: AtomicU64::new(0),
            value: UnsafeCell::new(value),
            #[cfg(loom)]
            take: Ordering::Acquire,
            #[cfg(loom)]
            give: Ordering::Release,
            #[cfg(loom)]
            ignore_rounds: false,
        }
    }

    /// Runs `f` on the value if the lock is free; `None` (and `f` not run)
    /// if someone holds it. Never waits.
    pub fn try_with<R>(&self, f: impl FnOnce(&mut A) -> R) -> Option<R> {
        if self.held.load(Ordering::Relaxed)
            || self
                .held
                .compare_exchange(false, true, self.take_ordering(), Ordering::Relaxed)
                .is_err()
        {
            return None;
        }
        let _holder = Holder { lock: self };
        // SAFETY: the compare-exchange above set `held` (Acquire), so no
        // other thread is inside `try_with` or `with` until `_holder`
        // stores `false` (Release) after `f` returns; the previous
        // holder's accesses happen before ours.
        Some(self.value.with_mut(|p| f(unsafe { &mut *p })))
    }

    /// Runs `f` on the value, waiting (spinning, then yielding) while
    /// someone else holds the lock. Holders never wait for anything, so
    /// the wait is one round at most.
    pub fn with<R>(&self, mut f: impl FnMut(&mut A) -> R) -> R {
        let mut tries = 0u32;
        loop {
            if let Some(r) = self.try_with(&mut f) {
                return r;
            }
            tries = tries.saturating_add(1);
            // (Loom explores a wait only through a yield.)
            if tries < 64 && !cfg!(loom) {
                std::hint::spin_loop();
            } else {
                crate::sync::yield_now();
            }
        }
    }

    /// Records that a round starts at `now`.
    #[inline]
    pub fn stamp_round(&self, now: u64) {
        self.last_round.store(now, Ordering::Relaxed);
    }

    /// When the last round started.
    #[inline]
    pub fn last_round(&self) -> u64 {
        self.last_round.load(Ordering::Relaxed)
    }

    /// `true` if the last round started more than `after` ns before `now`.
    #[inline]
    pub fn is_late(&self, now: u64, after: u64) -> bool {
        now.saturating_sub(self.last_round()) > after
    }

    /// `true` while someone holds the lock.
    pub fn is_held(&self) -> bool {
        self.held.load(Ordering::Relaxed)
    }

    #[inline(always)]
    fn take_ordering(&self) -> Ordering {
        #[cfg(loom)]
        {
            self.take
        }
        #[cfg(not(loom))]
        {
            Ordering::Acquire
        }
    }

    #[inline(always)]
    fn give_ordering(&self) -> Ordering {
        #[cfg(loom)]
        {
            self.give
        }
        #[cfg(not(loom))]
        {
            Ordering::Release
        }
    }

    /// Loom builds only: take and give back the lock with `Relaxed` — a
    /// deliberate bug the model checker must catch.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_weaken(&mut self) {
        self.take = Ordering::Relaxed;
        self.give = Ordering::Relaxed;
    }

    /// Loom builds only: [`RoundLock::announce_sleep_if_quiet`] without the
    /// round count — a deliberate bug the model checker must catch.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_ignore_rounds(&mut self) {
        self.ignore_rounds = true;
    }
}

impl<A: SleepCheck> RoundLock<A> {
    /// The round runner's thread, about to sleep until a ring, after its
    /// own round left the count at `rounds_seen`: announces sleep on
    /// `bell`, then looks at the bits and, under the lock, at the state.
    /// If nothing rang, nothing waits and no one ran a round since, runs
    /// `then` on the state (still under the lock) and returns its result:
    /// the caller then sleeps ([`Doorbell::sleep`]), and any later ring
    /// wakes it. Otherwise the announcement is cancelled and `None` says
    /// to run another round first.
    pub fn announce_sleep_if_quiet<R>(
        &self,
        bell: &Doorbell,
        rounds_seen: u64,
        then: impl FnOnce(&mut A) -> R,
    ) -> Option<R> {
        bell.announce_sleep();
        let r = if bell.any() {
            None
        } else {
            self.try_with(|a| {
                let moved = a.rounds() != rounds_seen && !self.rounds_ignored();
                (!moved && !a.has_news()).then(|| then(a))
            })
            .flatten()
        };
        if r.is_none() {
            bell.cancel_sleep();
        }
        r
    }

    #[inline(always)]
    fn rounds_ignored(&self) -> bool {
        #[cfg(loom)]
        {
            self.ignore_rounds
        }
        #[cfg(not(loom))]
        {
            false
        }
    }
}
