//! The back-off that humble periods and stepping aside share: a trial
//! period whose length doubles while it pays, and a hold-off that doubles
//! while it does not.
//!
//! Both policies try something for a period (the arbiter thread at its
//! inherited priority, or asleep while clients run the rounds), then
//! compare the decisions per second of the period with those of the
//! window that triggered it. [`Trial`] keeps what that comparison needs
//! and what follows from it; what triggers a period, and what happens
//! after one that paid (humble goes on at once, stepping aside first
//! comes back for a window), stays with each policy.
//!
//! Pure: the caller measures the windows; tests feed made-up ones.

use super::step_aside::Window;

/// The bounds of a [`Trial`]'s periods and hold-offs, ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Bounds {
    /// Shortest and longest period.
    pub(crate) min_len: u64,
    /// See `min_len`.
    pub(crate) max_len: u64,
    /// Shortest and longest hold-off after a period that did not pay.
    pub(crate) min_holdoff: u64,
    /// See `min_holdoff`.
    pub(crate) max_holdoff: u64,
}

/// Share of the triggering window's decisions per second that a period
/// must beat to be kept: not worse, within a millisecond window's noise.
/// (A margin above 1 kept almost no away period when the link was the
/// limit: 3 of 12 with a busy core at one client, 0.49–0.64× locked.)
pub(crate) const KEEP_SHARE: f64 = 0.95;

/// One policy's periods: their next length, the hold-off, the rate to
/// beat, and how many were judged and kept.
#[derive(Clone, Debug)]
pub(crate) struct Trial {
    bounds: Bounds,
    /// The next period, ns.
    len: u64,
    /// The next hold-off, ns.
    holdoff_len: u64,
    /// No period starts before this time, ns.
    holdoff_until: u64,
    /// Decisions per second in the window that started the current run
    /// of periods.
    trigger_rate: f64,
    /// Periods judged, and of them kept (they served more than
    /// [`KEEP_SHARE`] of the triggering window's rate).
    pub(crate) periods: u64,
    /// See `periods`.
    pub(crate) kept: u64,
}

impl Trial {
    /// No period tried yet: the shortest period and hold-off.
    pub(crate) fn new(bounds: Bounds) -> Self {
        Trial {
            bounds,
            len: bounds.min_len,
            holdoff_len: bounds.min_holdoff,
            holdoff_until: 0,
            trigger_rate: 0.0,
            periods: 0,
            kept: 0,
        }
    }

    /// Whether a period may start at `now` (no hold-off running).
    pub(crate) fn may_start(&self, now: u64) -> bool {
        now >= self.holdoff_until
    }

    /// Starts a run of periods triggered by the window `w`: its rate is
    /// the one to beat; returns the length of the period, ns.
    pub(crate) fn start(&mut self, w: &Window) -> u64 {
        self.trigger_rate = w.rate();
        self.len
    }

    /// Judges the period `w` that ended at `now`: if it served more than
    /// [`KEEP_SHARE`] of the triggering window's rate, the next period is
    /// twice as long (up to the bound) and its length is returned; else
    /// the next period is the shortest, none starts for the hold-off
    /// (twice as long as the last, up to the bound), and `None`.
    pub(crate) fn judge(&mut self, now: u64, w: &Window) -> Option<u64> {
        self.periods += 1;
        if w.decisions > 0 && w.rate() > self.trigger_rate * KEEP_SHARE {
            self.kept += 1;
            self.holdoff_len = self.bounds.min_holdoff;
            self.len = self.len.saturating_mul(2).min(self.bounds.max_len);
            return Some(self.len);
        }
        self.len = self.bounds.min_len;
        self.holdoff_until = now.saturating_add(self.holdoff_len);
        self.holdoff_len = self
            .holdoff_len
            .saturating_mul(2)
            .min(self.bounds.max_holdoff);
        None
    }

    /// When the running hold-off ends, ns (0: none ran yet).
    #[cfg(test)]
    pub(crate) fn holdoff_until(&self) -> u64 {
        self.holdoff_until
    }

    /// The next hold-off's length, ns.
    #[cfg(test)]
    pub(crate) fn holdoff_len(&self) -> u64 {
        self.holdoff_len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const BOUNDS: Bounds = Bounds {
        min_len: 2 * MS,
        max_len: 16 * MS,
        min_holdoff: 5 * MS,
        max_holdoff: 40 * MS,
    };

    fn window(wall_ns: u64, decisions: u64) -> Window {
        Window {
            wall_ns,
            decisions,
            ..Window::default()
        }
    }

    #[test]
    fn kept_periods_double_to_the_bound_and_reset_the_holdoff() {
        let mut t = Trial::new(BOUNDS);
        assert!(t.may_start(0));
        // Triggered at 100 decisions per ms.
        assert_eq!(t.start(&window(MS, 100)), 2 * MS);
        let mut lens = Vec::new();
        for _ in 0..5 {
            // 100 per ms again: a tie is kept.
            lens.push(t.judge(10 * MS, &window(MS, 100)).expect("kept"));
        }
        assert_eq!(lens, [4 * MS, 8 * MS, 16 * MS, 16 * MS, 16 * MS]);
        assert_eq!((t.periods, t.kept), (5, 5));
        // A period that did not pay sets the shortest length again and
        // holds off for the shortest hold-off.
        assert_eq!(t.judge(20 * MS, &window(MS, 94)), None);
        assert_eq!(t.holdoff_until(), 25 * MS);
        assert!(!t.may_start(25 * MS - 1));
        assert!(t.may_start(25 * MS));
        assert_eq!(t.start(&window(MS, 100)), 2 * MS);
        assert_eq!((t.periods, t.kept), (6, 5));
    }

    #[test]
    fn unpaid_periods_double_the_holdoff_to_the_bound() {
        let mut t = Trial::new(BOUNDS);
        let mut now = 0;
        let mut holdoffs = Vec::new();
        for _ in 0..6 {
            assert!(t.may_start(now));
            assert_eq!(t.start(&window(MS, 100)), 2 * MS);
            now += 2 * MS;
            // 90 per ms against 100: under 0.95×.
            assert_eq!(t.judge(now, &window(2 * MS, 180)), None);
            holdoffs.push(t.holdoff_until() - now);
            now = t.holdoff_until();
        }
        assert_eq!(
            holdoffs,
            [5 * MS, 10 * MS, 20 * MS, 40 * MS, 40 * MS, 40 * MS]
        );
        assert_eq!((t.periods, t.kept), (6, 0));
        // One kept period brings the hold-off back to the shortest.
        t.start(&window(MS, 100));
        assert!(t.judge(now + 2 * MS, &window(MS, 200)).is_some());
        assert_eq!(t.holdoff_len(), 5 * MS);
    }

    #[test]
    fn a_period_without_decisions_is_never_kept() {
        let mut t = Trial::new(BOUNDS);
        // A trigger with no decisions has a rate of 0 to beat: 0 does not.
        t.start(&window(MS, 0));
        assert_eq!(t.judge(3 * MS, &window(2 * MS, 0)), None);
        assert_eq!((t.periods, t.kept), (1, 0));
    }
}
