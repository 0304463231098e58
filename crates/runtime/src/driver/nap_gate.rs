//! Napping only while the arbiter thread lacks a core
//! (`Config::nap_when_waiting`).
//!
//! Waiting for the link on the CPU, the arbiter thread yields once per
//! departure (1.2 µs apart for MTU packets at 10 Gbit/s). On a core it
//! shares, each yield hands the core to another runnable thread, and the
//! kernel's fair scheduler (EEVDF) counts a yield against the yielding
//! thread: a thread that yields some 100 000 times a second is picked
//! after the others even at nice −20. Measured under overload at 64
//! clients: the arbiter thread was runnable but not running for 0.5–0.7 of
//! each window, and the victim's packets waited milliseconds in their
//! mailbox. A thread that sleeps instead is placed afresh when it wakes,
//! and a ring or its timer wakes it at once: with the nap (`nap_cover`)
//! its waiting fell to 0.1–0.3 and the victim's p99 to tens of µs. Alone
//! on a core, though, a nap only adds the wake-up (tens of µs on a VM),
//! where a yield returns at once.
//!
//! [`NapGate`] therefore opens the nap for a hold period after a window
//! (about a millisecond, see `step_aside::Window`) in which the thread
//! waited for a core for at least [`OPEN_WAIT`] of its awake time. At the
//! end of the hold it stays open (for twice as long, up to [`MAX_HOLD`])
//! if the last window still shows waiting of at least [`KEEP_WAIT`] (the
//! naps lower the waiting, so the bar to stay is lower than the one to
//! open), and closes otherwise.
//!
//! Pure: the caller measures the windows; tests feed made-up ones.

use super::step_aside::{MIN_WINDOW, Window};

/// Wait share of a window that opens the gate.
pub(crate) const OPEN_WAIT: f64 = 0.25;
/// Wait share of the window at the end of a hold that keeps it open.
pub(crate) const KEEP_WAIT: f64 = 0.05;
/// Shortest hold, ns.
pub(crate) const MIN_HOLD: u64 = 16_000_000;
/// Longest hold, ns.
pub(crate) const MAX_HOLD: u64 = 1_000_000_000;

/// Whether the arbiter thread may nap now.
#[derive(Clone, Debug, Default)]
pub(crate) struct NapGate {
    /// Open until this time, ns (`None`: closed).
    open_until: Option<u64>,
    /// The next hold, ns (0 before the first).
    hold: u64,
    /// Times the gate opened (closed before): `ArbiterStats::nap_gate_opened`.
    pub(crate) opened: u64,
}

impl NapGate {
    /// After the window `w` that ended at `now`: whether the gate is open
    /// until the next window.
    pub(crate) fn after_window(&mut self, now: u64, w: &Window) -> bool {
        if let Some(until) = self.open_until
            && now < until
        {
            return true;
        }
        if w.wall_ns < MIN_WINDOW {
            return self.open_until.is_some();
        }
        let wait = w.wait_share();
        let was_open = self.open_until.is_some();
        if was_open && wait >= KEEP_WAIT {
            self.hold = self.hold.saturating_mul(2).min(MAX_HOLD);
        } else if wait >= OPEN_WAIT {
            self.hold = MIN_HOLD;
            self.opened += 1;
        } else {
            self.open_until = None;
            return false;
        }
        self.open_until = Some(now.saturating_add(self.hold));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A millisecond window in which the thread waited `wait` of the
    /// time it was awake.
    fn window(wait: f64) -> Window {
        Window {
            wall_ns: MS,
            cpu_ns: ((1.0 - wait) * MS as f64) as u64,
            ..Window::default()
        }
    }

    #[test]
    fn a_thread_with_its_core_never_naps() {
        let mut g = NapGate::default();
        for t in 1..100 {
            assert!(!g.after_window(t * MS, &window(0.2)));
        }
        // Asleep most of the window is not waiting.
        let slept = Window {
            slept_ns: 900_000,
            ..window(0.0)
        };
        assert!(!g.after_window(200 * MS, &slept));
        assert_eq!(g.opened, 0);
    }

    #[test]
    fn waiting_opens_for_doubling_holds_while_it_lasts() {
        let mut g = NapGate::default();
        assert!(g.after_window(MS, &window(0.6)));
        // Open through the hold whatever the windows say.
        assert!(g.after_window(2 * MS, &window(0.0)));
        assert!(g.after_window(MS + MIN_HOLD - 1, &window(0.0)));
        // Still some waiting at the end: twice as long.
        assert!(g.after_window(MS + MIN_HOLD, &window(0.1)));
        let mut until = MS + MIN_HOLD + 2 * MIN_HOLD;
        assert!(g.after_window(until - 1, &window(0.0)));
        let mut holds = Vec::new();
        for _ in 0..8 {
            assert!(g.after_window(until, &window(KEEP_WAIT)));
            let next = g.open_until.expect("open");
            holds.push(next - until);
            until = next;
        }
        assert_eq!(holds[..4], [64 * MS, 128 * MS, 256 * MS, 512 * MS]);
        assert_eq!(holds[7], MAX_HOLD);
        assert_eq!(g.opened, 1);
        // No waiting at the end of a hold: closed, and the next opening
        // starts from the shortest hold.
        assert!(!g.after_window(until, &window(0.04)));
        assert!(!g.after_window(until + MS, &window(0.24)));
        assert!(g.after_window(until + 2 * MS, &window(OPEN_WAIT)));
        assert_eq!(g.open_until, Some(until + 2 * MS + MIN_HOLD));
        assert_eq!(g.opened, 2);
    }

    #[test]
    fn a_short_window_changes_nothing() {
        let mut g = NapGate::default();
        let short = Window {
            wall_ns: MIN_WINDOW - 1,
            ..window(1.0)
        };
        assert!(!g.after_window(MS, &short));
        assert!(g.after_window(2 * MS, &window(0.5)));
        assert!(g.after_window(2 * MS + MIN_HOLD, &short));
        assert_eq!(g.open_until, Some(2 * MS + MIN_HOLD));
    }
}
