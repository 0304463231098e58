//! Stepping aside: the arbiter thread leaves the rounds to the clients
//! while that serves more packets than running them itself.
//!
//! PSPAT's arbiter is one more runnable thread. When the machine has a
//! core to spare, that costs nothing; when it has not (another process
//! keeps a core busy, or the arbiter's own core is shared), the arbiter
//! either waits for a core while packets sit in the mailboxes, or holds a
//! core that a client then lacks: a client that loses its core for whole
//! time slices (milliseconds) lets the link idle once its queue is sent.
//! A locked design has no such thread: each client runs the scheduler
//! itself.
//!
//! [`StepAside`] decides from two signals, measured over windows of about
//! a millisecond while the arbiter thread runs its own rounds:
//! * the arbiter's *wait share*: of the wall time it was awake (not in a
//!   voluntary sleep), the part it was not on a core (runnable, waiting);
//! * the clients' *starved share*: the gaps (longer than
//!   `client::STARVED_GAP`) in the sends of clients that were sending
//!   back to back, summed over clients, per wall time.
//!
//! When either is at least [`TRIGGER`], the arbiter steps aside for an
//! away period: it sleeps (rings do not wake it) and sending clients run
//! the rounds under the hand-off lock, backlogged or not (see
//! [`crate::handoff`]; the rounds are the same sequence whoever runs
//! them). At the end of the period it compares the decisions per second
//! while away with those of the present window that triggered it:
//! * away served about as many or more (more than
//!   [`KEEP_SHARE`](super::trial::KEEP_SHARE) of them: the link often
//!   caps both, and a millisecond's window is noisy):
//!   the next away period is twice as long (up to [`MAX_AWAY`]), so the
//!   arbiter comes back less and less often while the machine stays
//!   shared;
//! * otherwise it does not step aside again for a hold-off that doubles
//!   each time (up to [`MAX_HOLDOFF`]): a trigger that does not pay (many
//!   clients on a shared core whose arbiter is busy) costs a shrinking
//!   share of the time.
//!
//! The away periods and hold-offs are a [`Trial`] (shared with humble
//! periods, see `driver::trial`).
//!
//! Pure: the caller measures the windows; tests feed made-up ones.

use super::trial::{Bounds, Trial};

/// Shortest away period, ns.
pub(crate) const MIN_AWAY: u64 = 2_000_000;
/// Longest away period, ns.
pub(crate) const MAX_AWAY: u64 = 32_000_000;
/// An away period ends early once no round has started for this long, ns:
/// no client is sending, and what is queued for a busy link needs the
/// arbiter. Also the longest such a packet waits past its time.
pub(crate) const AWAY_QUIET: u64 = 500_000;
/// Shortest hold-off after an away period that did not pay, ns.
pub(crate) const MIN_HOLDOFF: u64 = 8_000_000;
/// Longest hold-off, ns.
pub(crate) const MAX_HOLDOFF: u64 = 1_000_000_000;
/// Wait or starved share from which the arbiter tries stepping aside.
pub(crate) const TRIGGER: f64 = 0.3;
/// Shortest window any policy judges (stepping aside, humble, the nap
/// gate), ns: shorter ones say too little.
pub(crate) const MIN_WINDOW: u64 = 500_000;

/// What one window measured (differences over the window).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Window {
    /// Wall time, ns.
    pub(crate) wall_ns: u64,
    /// Of it, asleep by choice (on the doorbell, or away), ns.
    pub(crate) slept_ns: u64,
    /// The arbiter thread's CPU time, ns.
    pub(crate) cpu_ns: u64,
    /// Wall time of the arbiter thread's rounds that moved packets, ns
    /// (preemption inside a round included, so it may exceed `cpu_ns`;
    /// see `driver::humble`).
    pub(crate) busy_ns: u64,
    /// Clients' starved gaps, summed, ns.
    pub(crate) starved_ns: u64,
    /// Scheduling decisions (packets released), by anyone.
    pub(crate) decisions: u64,
}

impl Window {
    /// Share of the awake time the arbiter thread was not on a core.
    pub(crate) fn wait_share(&self) -> f64 {
        let awake = self.wall_ns.saturating_sub(self.slept_ns);
        if awake == 0 {
            return 0.0;
        }
        awake.saturating_sub(self.cpu_ns) as f64 / awake as f64
    }

    /// Clients' starved time per wall time (can exceed 1 with many
    /// clients).
    pub(crate) fn starved_share(&self) -> f64 {
        self.starved_ns as f64 / self.wall_ns.max(1) as f64
    }

    /// Decisions per second.
    pub(crate) fn rate(&self) -> f64 {
        self.decisions as f64 * 1e9 / self.wall_ns.max(1) as f64
    }
}

/// What the arbiter thread does after a present window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Keep running the rounds.
    Stay,
    /// Step aside for this long, ns.
    Away(u64),
}

/// The step-aside policy's state: its trigger here, its away periods and
/// hold-offs in a [`Trial`].
#[derive(Clone, Debug)]
pub(crate) struct StepAside {
    trial: Trial,
}

impl Default for StepAside {
    fn default() -> Self {
        StepAside {
            trial: Trial::new(Bounds {
                min_len: MIN_AWAY,
                max_len: MAX_AWAY,
                min_holdoff: MIN_HOLDOFF,
                max_holdoff: MAX_HOLDOFF,
            }),
        }
    }
}

/// While away, at `now`: whether the away period ends (its `deadline`
/// passed, or no round started since `last_round` for [`AWAY_QUIET`]).
pub(crate) fn away_ends(now: u64, deadline: u64, last_round: u64) -> bool {
    now >= deadline || now.saturating_sub(last_round) >= AWAY_QUIET
}

/// How long an away thread sleeps before it looks again, ns (at least 1).
pub(crate) fn away_nap(now: u64, deadline: u64) -> u64 {
    deadline.saturating_sub(now).clamp(1, AWAY_QUIET)
}

impl StepAside {
    /// After a present window `w` that ended at `now`: step aside or not.
    /// (After an away period that paid, the next one, if the trigger
    /// holds again, is twice as long.)
    pub(crate) fn after_present(&mut self, now: u64, w: &Window) -> Step {
        if w.wall_ns < MIN_WINDOW || !self.trial.may_start(now) {
            return Step::Stay;
        }
        if w.wait_share() < TRIGGER && w.starved_share() < TRIGGER {
            return Step::Stay;
        }
        Step::Away(self.trial.start(w))
    }

    /// After an away period `w` that ended at `now`: keeps stepping aside
    /// (longer) if it served more than `driver::trial::KEEP_SHARE` of the
    /// present window's rate, else holds off (longer).
    pub(crate) fn after_away(&mut self, now: u64, w: &Window) {
        // A kept period's doubled length is used at the next trigger;
        // `judge` keeps it, so the returned length is not needed here.
        let _ = self.trial.judge(now, w);
    }

    /// Away periods judged.
    #[cfg(test)]
    pub(crate) fn periods(&self) -> u64 {
        self.trial.periods
    }

    /// Of them, kept.
    pub(crate) fn kept(&self) -> u64 {
        self.trial.kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn window(wall_ns: u64, cpu_ns: u64, starved_ns: u64, decisions: u64) -> Window {
        Window {
            wall_ns,
            slept_ns: 0,
            cpu_ns,
            busy_ns: 0,
            starved_ns,
            decisions,
        }
    }

    #[test]
    fn an_away_period_ends_at_its_deadline_or_when_no_round_runs() {
        // Clients running rounds: away until the deadline.
        assert!(!away_ends(10 * MS, 12 * MS, 10 * MS - 1_000));
        assert!(away_ends(12 * MS, 12 * MS, 12 * MS - 1_000));
        // No round for AWAY_QUIET: back before the deadline.
        assert!(!away_ends(10 * MS, 32 * MS, 10 * MS - AWAY_QUIET + 1));
        assert!(away_ends(10 * MS, 32 * MS, 10 * MS - AWAY_QUIET));
        // It looks at least every AWAY_QUIET, and never naps for 0.
        assert_eq!(away_nap(0, 32 * MS), AWAY_QUIET);
        assert_eq!(away_nap(MS, MS + 10), 10);
        assert_eq!(away_nap(2 * MS, MS), 1);
    }

    #[test]
    fn a_thread_alone_on_its_core_stays() {
        let mut s = StepAside::default();
        // On a core the whole window, clients never starved.
        assert_eq!(s.after_present(MS, &window(MS, MS, 0, 1000)), Step::Stay);
        // Just under the trigger on both signals.
        let w = window(MS, 710_000, 290_000, 1000);
        assert_eq!(s.after_present(2 * MS, &w), Step::Stay);
        // Slept most of the window: the sleep is not waiting.
        let w = Window {
            slept_ns: 900_000,
            ..window(MS, 100_000, 0, 10)
        };
        assert_eq!(w.wait_share(), 0.0);
        assert_eq!(s.after_present(3 * MS, &w), Step::Stay);
        // Too short a window says nothing.
        assert_eq!(
            s.after_present(4 * MS, &window(MS / 4, 0, 0, 1)),
            Step::Stay
        );
        assert_eq!(s.periods(), 0);
    }

    #[test]
    fn a_waiting_arbiter_or_starved_clients_trigger_an_away_period() {
        let mut s = StepAside::default();
        // Waited 40 % of the window.
        assert_eq!(
            s.after_present(MS, &window(MS, 600_000, 0, 100)),
            Step::Away(MIN_AWAY)
        );
        let mut s = StepAside::default();
        // A client lost 1.5 ms of its sending over 2 ms.
        assert_eq!(
            s.after_present(2 * MS, &window(2 * MS, 2 * MS, 1_500_000, 100)),
            Step::Away(MIN_AWAY)
        );
        // Counted once judged.
        assert_eq!(s.periods(), 0);
        s.after_away(4 * MS, &window(MIN_AWAY, 0, 0, 200));
        assert_eq!((s.periods(), s.kept()), (1, 1));
    }

    #[test]
    fn away_periods_that_serve_more_grow_up_to_the_cap() {
        let mut s = StepAside::default();
        let mut now = 0;
        let mut lens = Vec::new();
        for _ in 0..7 {
            now += MS;
            // Present: 250 decisions per ms, starved clients.
            let Step::Away(len) = s.after_present(now, &window(MS, MS, 800_000, 250)) else {
                panic!("no away period at {now}");
            };
            lens.push(len);
            now += len;
            // Away: 830 per ms.
            s.after_away(now, &window(len, 0, 0, 830 * len / MS));
        }
        assert_eq!(
            lens,
            vec![2 * MS, 4 * MS, 8 * MS, 16 * MS, 32 * MS, 32 * MS, 32 * MS]
        );
        assert_eq!(s.kept(), 7);
    }

    #[test]
    fn away_periods_that_do_not_pay_hold_off_doubling() {
        let mut s = StepAside::default();
        let starved = window(MS, MS, 5 * MS, 4000);
        let mut now = MS;
        let mut holdoffs = Vec::new();
        for _ in 0..10 {
            let Step::Away(len) = s.after_present(now, &starved) else {
                panic!("no away period at {now}");
            };
            assert_eq!(len, MIN_AWAY, "an unpaid period never grows");
            now += len;
            // Away served 1 500 per ms: less than present's 4 000.
            s.after_away(now, &window(len, 0, 0, 3000));
            let until = s.trial.holdoff_until();
            holdoffs.push(until - now);
            // Held off until then, not a ns longer.
            assert_eq!(s.after_present(until - 1, &starved), Step::Stay);
            now = until;
        }
        assert_eq!(holdoffs[..4], [8 * MS, 16 * MS, 32 * MS, 64 * MS]);
        assert_eq!(holdoffs[9], MAX_HOLDOFF);
        assert_eq!(s.kept(), 0);
        assert_eq!(s.trial.holdoff_len(), MAX_HOLDOFF);
        // A tie is kept (the link often caps both); 5 % worse is not.
        let mut s = StepAside::default();
        assert!(matches!(s.after_present(MS, &starved), Step::Away(_)));
        s.after_away(3 * MS, &window(MS, 0, 0, 4000));
        assert_eq!(s.kept(), 1);
        let mut s = StepAside::default();
        assert!(matches!(s.after_present(MS, &starved), Step::Away(_)));
        s.after_away(3 * MS, &window(MS, 0, 0, 3800));
        assert_eq!(s.kept(), 0);
        assert_eq!(s.after_present(4 * MS, &starved), Step::Stay);
        assert_eq!(
            s.after_present(3 * MS + MIN_HOLDOFF - 1, &starved),
            Step::Stay
        );
        assert!(matches!(
            s.after_present(3 * MS + MIN_HOLDOFF, &starved),
            Step::Away(_)
        ));
        // No decisions while away (nothing to send): not kept.
        let mut s = StepAside::default();
        let _ = s.after_present(MS, &window(MS, 0, 0, 0));
        s.after_away(3 * MS, &window(2 * MS, 0, 0, 0));
        assert_eq!(s.kept(), 0);
    }
}
