//! Humble: the arbiter thread gives up its raised priority while it holds
//! a core that its clients lack.
//!
//! The arbiter runs at a raised priority (`Config::arbiter_nice` below the
//! nice value it inherited) so that clients sharing its core do not leave
//! it a sliver. But the kernel's load balancer weighs runnable threads by
//! their priority: an arbiter at nice −20 that is always runnable (it waits
//! for the link on the CPU, a yield per departure) counts as some eighty
//! normal threads, so its core looks full, and the balancer puts every
//! other runnable thread on the other cores. When one of those cores is
//! also taken by another busy process, a client there gets half of it, in
//! time slices longer than its mailbox and queue last on the link, and
//! the link idles while the arbiter's core is mostly idle. A locked design
//! has no such thread: its one client gets the free core.
//!
//! [`Humble`] decides from the windows of about a millisecond the arbiter
//! thread already measures for stepping aside ([`Window`]). It lowers the
//! priority (back to the inherited nice value) for a humble period when,
//! in one window:
//! * the clients' starved share is at least [`STARVED_TRIGGER`] (they lost
//!   their cores while sending back to back);
//! * its busy share is below [`MAX_BUSY`] (it mostly waits, for the link
//!   or for work: a busy arbiter is the bottleneck and keeps its
//!   priority);
//! * its wait share is below [`MAX_WAIT`]: it had a core. (With the
//!   bench's threads in one task group, an autogroup or a cgroup, the
//!   kernel splits the group's weight among the cores by the group's load
//!   on each, so a thread at nice −20 also draws the group's weight away
//!   from the clients' cores; lowering it then helps the clients even
//!   while the arbiter waits. But an arbiter that waits for a core and
//!   gives up its weight too leaves the victim's packets in their mailbox
//!   longer: in one loaded run without this limit the victim's p99 at 8
//!   and 64 clients went from 7 and 90 µs to 28 and 37 ms.)
//!
//! The thread keeps running every round meanwhile; only its weight in the
//! kernel's eyes changes, so the balancer can move a client onto its core.
//! At the end of the period it compares the decisions per second of the
//! period with those of the window that triggered it: more than
//! [`KEEP_SHARE`](super::trial::KEEP_SHARE) of them keeps it humble for twice as long (up to
//! [`MAX_HUMBLE`]); otherwise it raises its priority again and does not
//! lower it for a hold-off that doubles each time (up to [`MAX_HOLDOFF`]).
//! The periods are longer than stepping aside's: the balancer moves a
//! thread only after several of its intervals (milliseconds each on a
//! busy core).
//!
//! [`Humble`] is pure; [`HumbleState`] adds the nice values and the
//! lowered period, and sets the priority through a function its caller
//! gives (the arbiter thread: `setpriority`; tests: a recorder). Tests
//! feed made-up windows.

use super::Mark;
use super::step_aside::{MIN_WINDOW, Window};
use super::trial::{Bounds, Trial};

/// Shortest humble period, ns.
pub(crate) const MIN_HUMBLE: u64 = 16_000_000;
/// Longest humble period, ns.
pub(crate) const MAX_HUMBLE: u64 = 1_000_000_000;
/// Shortest hold-off after a humble period that did not pay, ns.
pub(crate) const MIN_HOLDOFF: u64 = 32_000_000;
/// Longest hold-off, ns.
pub(crate) const MAX_HOLDOFF: u64 = 1_000_000_000;
/// Clients' starved share from which the arbiter tries a humble period.
pub(crate) const STARVED_TRIGGER: f64 = 0.3;
/// Highest wait share of the arbiter for a humble period.
pub(crate) const MAX_WAIT: f64 = 0.2;
/// Highest busy share (time in rounds that moved packets, per awake
/// time) for a humble period.
pub(crate) const MAX_BUSY: f64 = 0.5;

/// The humble policy's state: its trigger here, its periods and hold-offs
/// in a [`Trial`] (shared with stepping aside).
#[derive(Clone, Debug)]
pub(crate) struct Humble {
    trial: Trial,
}

impl Default for Humble {
    fn default() -> Self {
        Humble {
            trial: Trial::new(Bounds {
                min_len: MIN_HUMBLE,
                max_len: MAX_HUMBLE,
                min_holdoff: MIN_HOLDOFF,
                max_holdoff: MAX_HOLDOFF,
            }),
        }
    }
}

/// Whether the policy arms for a thread whose inherited nice value is
/// `base` and whose present one is `now`: only at a raised priority
/// (`now` below `base`), as `(base, raised)`; `None` when either is
/// unknown or nothing was raised (there is nothing to give up).
pub(crate) fn arms(base: Option<i32>, now: Option<i32>) -> Option<(i32, i32)> {
    match (base, now) {
        (Some(base), Some(raised)) if raised < base => Some((base, raised)),
        _ => None,
    }
}

/// Share of the awake time in rounds that moved packets.
fn busy_share(w: &Window) -> f64 {
    let awake = w.wall_ns.saturating_sub(w.slept_ns);
    if awake == 0 {
        return 0.0;
    }
    w.busy_ns as f64 / awake as f64
}

impl Humble {
    /// After a window `w` at the raised priority that ended at `now`: the
    /// length of a humble period to start now, or `None`. (A run of
    /// periods ends only with one that did not pay, which sets the
    /// shortest length again: a new run starts with it.)
    pub(crate) fn after_present(&mut self, now: u64, w: &Window) -> Option<u64> {
        if w.wall_ns < MIN_WINDOW || !self.trial.may_start(now) {
            return None;
        }
        if w.starved_share() < STARVED_TRIGGER
            || busy_share(w) >= MAX_BUSY
            || w.wait_share() >= MAX_WAIT
        {
            return None;
        }
        Some(self.trial.start(w))
    }

    /// After a humble period `w` that ended at `now`: the length of the
    /// next humble period if this one served more than
    /// [`super::trial::KEEP_SHARE`] of the triggering window's rate (twice
    /// as long), else `None` (raise the priority again and hold off,
    /// longer each time).
    pub(crate) fn after_humble(&mut self, now: u64, w: &Window) -> Option<u64> {
        self.trial.judge(now, w)
    }

    /// Humble periods judged.
    pub(crate) fn periods(&self) -> u64 {
        self.trial.periods
    }

    /// Of them, kept.
    pub(crate) fn kept(&self) -> u64 {
        self.trial.kept
    }

    /// When the running hold-off ends, ns.
    #[cfg(test)]
    pub(crate) fn holdoff_until(&self) -> u64 {
        self.trial.holdoff_until()
    }
}

/// The arbiter thread's humble state ([`crate::Config::humble`]).
#[derive(Debug)]
pub(crate) struct HumbleState {
    pub(crate) policy: Humble,
    /// The nice value it inherited (humble) and the one it runs at
    /// (raised, lower).
    base: i32,
    raised: i32,
    /// While lowered: when the period ends (ns) and the counters at its
    /// start.
    lowered: Option<(u64, Mark)>,
    /// Wall time lowered, in periods judged, ns.
    pub(crate) humble_ns: u64,
}

/// What [`HumbleState::judge`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Judged {
    /// In a lowered period that has not ended: nothing changed.
    Lowered,
    /// A window judged: `holds` while the priority is lowered, or the
    /// window ended a lowered period (it was measured at the lowered
    /// priority: stepping aside waits for one at the raised one);
    /// `disarm` when the kernel would not give the raised priority back
    /// (the policy has nothing left to give up: it ends here).
    Changed { holds: bool, disarm: bool },
}

impl HumbleState {
    /// Armed at the raised nice value `raised`, below the inherited `base`
    /// (see [`arms`]).
    pub(crate) fn new(base: i32, raised: i32) -> Self {
        HumbleState {
            policy: Humble::default(),
            base,
            raised,
            lowered: None,
            humble_ns: 0,
        }
    }

    /// The priority is lowered now.
    pub(crate) fn is_lowered(&self) -> bool {
        self.lowered.is_some()
    }

    /// Judges the window `w` that ends at `now`: starts, goes on with or
    /// ends a humble period, calling `set_nice` with the inherited nice
    /// value to lower the priority and with the raised one to raise it
    /// again (it returns whether the kernel took it; a refused lowering
    /// changes nothing here, a refused raise disarms).
    pub(crate) fn judge(
        &mut self,
        now: &Mark,
        w: &Window,
        mut set_nice: impl FnMut(i32) -> bool,
    ) -> Judged {
        let next = match self.lowered {
            None => self.policy.after_present(now.at, w),
            Some((until, _)) if now.at < until => return Judged::Lowered,
            Some((_, start)) => {
                let period = start.window_to(now);
                self.humble_ns += period.wall_ns;
                self.policy.after_humble(now.at, &period)
            }
        };
        let was_lowered = self.lowered.is_some();
        self.lowered = next.map(|len| (now.at.saturating_add(len), *now));
        let raised_back = match (was_lowered, self.lowered.is_some()) {
            (false, true) => {
                let _ = set_nice(self.base);
                true
            }
            (true, false) => set_nice(self.raised),
            _ => true,
        };
        Judged::Changed {
            holds: was_lowered || next.is_some(),
            disarm: !raised_back,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A window of `wall` ns with the arbiter on a core for `cpu` of it,
    /// in busy rounds for `busy`, clients starved `starved`.
    fn window(wall: u64, cpu: u64, busy: u64, starved: u64, decisions: u64) -> Window {
        Window {
            wall_ns: wall,
            slept_ns: 0,
            cpu_ns: cpu,
            busy_ns: busy,
            starved_ns: starved,
            decisions,
        }
    }

    #[test]
    fn it_arms_only_over_a_raised_priority() {
        assert_eq!(arms(Some(0), Some(-20)), Some((0, -20)));
        assert_eq!(arms(Some(5), Some(-1)), Some((5, -1)));
        assert_eq!(arms(Some(0), Some(0)), None, "nothing raised");
        assert_eq!(arms(Some(-20), Some(0)), None, "lower than inherited");
        assert_eq!(arms(None, Some(-20)), None);
        assert_eq!(arms(Some(0), None), None);
    }

    #[test]
    fn only_an_idle_arbiter_with_a_core_beside_starved_clients_lowers_its_priority() {
        // The busy-core case: on its core all the window, busy 5 % of it,
        // the client starved 60 %.
        let busy_core = window(MS, MS, 50_000, 600_000, 300);
        assert_eq!(
            Humble::default().after_present(MS, &busy_core),
            Some(MIN_HUMBLE)
        );
        // Clients not starved (below the trigger): stay.
        let fed = window(MS, MS, 50_000, 290_000, 800);
        assert_eq!(Humble::default().after_present(MS, &fed), None);
        // The arbiter waited for a core 20 % of the window: stay.
        let waits = window(MS, 800_000, 50_000, 600_000, 300);
        assert_eq!(Humble::default().after_present(MS, &waits), None);
        // Busy half the window (the throughput phase's arbiter): stay.
        let busy = window(MS, MS, 500_000, 600_000, 30_000);
        assert_eq!(Humble::default().after_present(MS, &busy), None);
        // At the trigger and just under the busy and wait limits: lowers.
        let edge = window(MS, 800_001, 499_999, 300_000, 300);
        assert_eq!(Humble::default().after_present(MS, &edge), Some(MIN_HUMBLE));
        // Asleep most of the window: the sleep is neither wait nor busy.
        let slept = Window {
            slept_ns: 900_000,
            ..window(MS, 100_000, 10_000, 600_000, 10)
        };
        assert_eq!(
            Humble::default().after_present(MS, &slept),
            Some(MIN_HUMBLE)
        );
        // Too short a window says nothing.
        let short = window(MS / 4, MS / 4, 0, MS, 10);
        assert_eq!(Humble::default().after_present(MS, &short), None);
    }

    #[test]
    fn humble_periods_that_serve_as_much_grow_up_to_the_cap() {
        let mut h = Humble::default();
        let mut now = MS;
        let Some(mut len) = h.after_present(now, &window(MS, MS, 0, 700_000, 300)) else {
            panic!("no humble period");
        };
        let mut lens = vec![len];
        for _ in 0..8 {
            now += len;
            // 800 decisions per ms against the trigger's 300.
            let Some(next) = h.after_humble(now, &window(len, len, 0, 0, 800 * len / MS)) else {
                panic!("not kept at {now}");
            };
            len = next;
            lens.push(len);
        }
        assert_eq!(
            lens,
            vec![
                16 * MS,
                32 * MS,
                64 * MS,
                128 * MS,
                256 * MS,
                512 * MS,
                MAX_HUMBLE,
                MAX_HUMBLE,
                MAX_HUMBLE
            ]
        );
        assert_eq!((h.periods(), h.kept()), (8, 8));
    }

    #[test]
    fn humble_periods_that_do_not_pay_hold_off_doubling() {
        let mut h = Humble::default();
        let starved = window(MS, MS, 0, 700_000, 4000);
        let mut now = MS;
        let mut holdoffs = Vec::new();
        for _ in 0..8 {
            let Some(len) = h.after_present(now, &starved) else {
                panic!("no humble period at {now}");
            };
            assert_eq!(len, MIN_HUMBLE, "an unpaid period never grows");
            now += len;
            // 3 000 per ms against 4 000: not kept.
            assert_eq!(
                h.after_humble(now, &window(len, len, 0, 0, 3000 * len / MS)),
                None
            );
            let until = h.holdoff_until();
            holdoffs.push(until - now);
            assert_eq!(h.after_present(until - 1, &starved), None);
            now = until;
        }
        assert_eq!(holdoffs[..4], [32 * MS, 64 * MS, 128 * MS, 256 * MS]);
        assert_eq!(holdoffs[7], MAX_HOLDOFF);
        assert_eq!((h.periods(), h.kept()), (8, 0));
        // A tie is kept; 5 % worse is not; no decisions is not.
        let mut h = Humble::default();
        assert!(h.after_present(MS, &starved).is_some());
        assert!(
            h.after_humble(17 * MS, &window(MS, MS, 0, 0, 4000))
                .is_some()
        );
        let mut h = Humble::default();
        assert!(h.after_present(MS, &starved).is_some());
        assert!(
            h.after_humble(17 * MS, &window(MS, MS, 0, 0, 3800))
                .is_none()
        );
        let mut h = Humble::default();
        assert!(
            h.after_present(MS, &window(MS, MS, 0, 700_000, 0))
                .is_some()
        );
        assert!(
            h.after_humble(17 * MS, &window(16 * MS, 0, 0, 0, 0))
                .is_none()
        );
        // A kept run that then stops paying starts over from the shortest
        // period after its hold-off.
        let mut h = Humble::default();
        assert!(h.after_present(MS, &starved).is_some());
        assert!(
            h.after_humble(17 * MS, &window(16 * MS, 0, 0, 0, 80_000))
                .is_some()
        );
        assert!(
            h.after_humble(49 * MS, &window(32 * MS, 0, 0, 0, 1))
                .is_none()
        );
        assert_eq!(
            h.after_present(49 * MS + MIN_HOLDOFF, &starved),
            Some(MIN_HUMBLE)
        );
    }

    /// Cumulative counters at `at` ms, as the arbiter thread marks them.
    fn mark(at_ms: u64, starved: u64, decisions: u64) -> Mark {
        Mark {
            at: at_ms * MS,
            slept_ns: 0,
            cpu_ns: at_ms * MS,
            busy_ns: at_ms * MS / 20,
            starved_ns: starved,
            decisions,
        }
    }

    /// Judges the window from `from` to `to`, recording the nice values
    /// set (each answered with `answer`).
    fn judge_between(
        h: &mut HumbleState,
        from: &Mark,
        to: &Mark,
        answer: bool,
        calls: &mut Vec<i32>,
    ) -> Judged {
        h.judge(to, &from.window_to(to), |nice| {
            calls.push(nice);
            answer
        })
    }

    #[test]
    fn the_thread_lowers_keeps_raises_holds_off_and_disarms_in_order() {
        let mut h = HumbleState::new(0, -20);
        let mut calls = Vec::new();
        let changed = |holds, disarm| Judged::Changed { holds, disarm };
        // 0 → 1 ms: the client starved 60 %, 300 decisions: lowered (to
        // the inherited 0) for 16 ms.
        let (m0, m1) = (mark(0, 0, 0), mark(1, 600_000, 300));
        assert_eq!(
            judge_between(&mut h, &m0, &m1, true, &mut calls),
            changed(true, false)
        );
        assert_eq!(calls, [0]);
        assert!(h.is_lowered());
        // Inside the period: nothing changes, nothing is set.
        let m2 = mark(2, 600_000, 700);
        assert_eq!(
            judge_between(&mut h, &m1, &m2, true, &mut calls),
            Judged::Lowered
        );
        let m16 = mark(16, 600_000, 6_000);
        assert_eq!(
            judge_between(&mut h, &m2, &m16, true, &mut calls),
            Judged::Lowered
        );
        // 17 ms: the period (1 → 17 ms) served 400 per ms against 300:
        // kept, lowered for 32 ms more, no call.
        let m17 = mark(17, 600_000, 300 + 16 * 400);
        assert_eq!(
            judge_between(&mut h, &m16, &m17, true, &mut calls),
            changed(true, false)
        );
        assert_eq!(calls, [0]);
        assert_eq!((h.policy.periods(), h.policy.kept()), (1, 1));
        // 49 ms: the period (17 → 49 ms) served 100 per ms: raised again
        // (to −20), held off for 32 ms. The window was measured lowered,
        // so it still holds stepping aside back.
        let m49 = mark(49, 600_000, m17.decisions + 32 * 100);
        assert_eq!(
            judge_between(&mut h, &m17, &m49, true, &mut calls),
            changed(true, false)
        );
        assert_eq!(calls, [0, -20]);
        assert!(!h.is_lowered());
        assert_eq!(h.humble_ns, 48 * MS);
        assert_eq!(h.policy.holdoff_until(), 81 * MS);
        // 49 → 50 ms and up to 81 ms: starved again, but held off.
        let m50 = mark(50, 1_200_000, m49.decisions + 300);
        assert_eq!(
            judge_between(&mut h, &m49, &m50, true, &mut calls),
            changed(false, false)
        );
        let m80 = mark(80, 1_800_000, m50.decisions + 300);
        let m80_1 = mark(80, 2_400_000, m80.decisions + 300);
        let m80_1 = Mark {
            at: 81 * MS - 1,
            ..m80_1
        };
        assert_eq!(
            judge_between(&mut h, &m80, &m80_1, true, &mut calls),
            changed(false, false)
        );
        assert_eq!(calls, [0, -20]);
        // 81 ms − 1 → 82 ms: lowered again, for the shortest period.
        let m82 = mark(82, 3_000_000, m80_1.decisions + 300);
        assert_eq!(
            judge_between(&mut h, &m80_1, &m82, true, &mut calls),
            changed(true, false)
        );
        assert_eq!(calls, [0, -20, 0]);
        // 98 ms: the period did not pay and the kernel refuses −20:
        // disarmed.
        let m98 = mark(98, 3_000_000, m82.decisions + 16);
        assert_eq!(
            judge_between(&mut h, &m82, &m98, false, &mut calls),
            changed(true, true)
        );
        assert_eq!(calls, [0, -20, 0, -20]);
        assert_eq!(h.humble_ns, 64 * MS);
        assert_eq!((h.policy.periods(), h.policy.kept()), (3, 1));
    }

    #[test]
    fn a_refused_lowering_still_starts_the_period() {
        // The kernel refused the inherited nice value (as the thread sets
        // it, it rarely can): the period runs and is judged as any other.
        let mut h = HumbleState::new(5, -1);
        let mut calls = Vec::new();
        let (m0, m1) = (mark(0, 0, 0), mark(1, 600_000, 300));
        assert_eq!(
            judge_between(&mut h, &m0, &m1, false, &mut calls),
            Judged::Changed {
                holds: true,
                disarm: false
            }
        );
        assert_eq!(calls, [5]);
        assert!(h.is_lowered());
    }
}
