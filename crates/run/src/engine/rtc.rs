//! The run-to-completion engine: one thread receives a batch from the
//! ingress, classifies and stamps it, enqueues it straight into the
//! scheduler, releases what the emulated link allows (the runtime's
//! sans-I/O [`Arbiter::do_scan`](pktsched_runtime::Arbiter::do_scan), with
//! no client mailbox), transmits, and sleeps in `ppoll` on the ingress
//! until a frame arrives or the next link or shaper deadline. No frame
//! crosses a thread; the control commands are answered between batches by
//! the same [`ArbiterLoop`] the PSPAT engine uses.
//!
//! Under load it polls before it sleeps ([`SpinRule`]): when a pass finds
//! nothing to do while frames have been arriving less than [`SPIN_NS`]
//! apart, the thread reads the receive rings in memory for up to that
//! long before it waits in `ppoll`. At these rates the next frame comes
//! within the poll, so the thread neither sleeps nor is woken: no
//! `ppoll`, context switch or wake-up IPI on the DUT core, and no wake-up
//! (`sock_def_readable` → `try_to_wake_up`) in the ingress's receive
//! softirq on the core that sent the frame. At lower rates (or after a
//! pause in the stream) it sleeps at once, as before.
//!
//! Busy polling (`link.busy_poll`): the thread never sleeps. On AF_XDP
//! every receive call drives the ingress's NAPI context (the device's
//! busy-poll kick; AF_PACKET has none to drive, the thread spins on its
//! rings),
//! and a pass that finds nothing to receive or release yields the core
//! (`sched_yield`) instead of waiting, so the reverse thread pinned to the
//! same core still runs.

use std::sync::Arc;
use std::time::Duration;

use pktsched_io::{BufPool, PacketBuf, PacketIo};
use pktsched_runtime::Clock;

use super::arbiter_loop::{ArbiterLoop, Due, Stopped};
use super::ports::Port;
use super::rx::{PUBLISH_EVERY, RX_BATCH, RX_WAIT, classify_into};
use super::shared::Shared;
use super::trace::{PassTrace, Phase};
use super::{device_stats, wait};

/// The longest poll of the receive rings before an idle sleep (ns): about
/// what a sleep and its wake-up cost the DUT core in this VM (~12 µs,
/// perf log 17:14), so a poll that catches nothing costs no more than the
/// sleep it then takes anyway.
pub(crate) const SPIN_NS: u64 = 10_000;
/// Polls keep the core at most this long (ns) since the thread last slept;
/// then the next idle wait sleeps, so the core's other threads (the
/// reverse direction, the kernel's workers) still get it under a stream
/// that never pauses.
pub(crate) const SPIN_HOLD_NS: u64 = 5_000_000;

/// When an idle pass polls the receive rings before it sleeps: while
/// frames arrive less than [`SPIN_NS`] apart on average (an average over
/// about the last eight passes that received), the last of them less
/// than `SPIN_NS` ago, and the thread slept within [`SPIN_HOLD_NS`].
#[derive(Debug, Default, Clone)]
pub(crate) struct SpinRule {
    /// When a pass last received frames (engine clock, ns; 0: never).
    last_rx: u64,
    /// Average time between passes that received (ns; 0: not known yet).
    gap: u64,
    /// When the thread last slept.
    last_sleep: u64,
}

impl SpinRule {
    /// A pass received frames at `now`.
    pub(crate) fn received(&mut self, now: u64) {
        if self.last_rx != 0 {
            let gap = now.saturating_sub(self.last_rx);
            self.gap = if self.gap == 0 {
                gap
            } else {
                self.gap - self.gap / 8 + gap / 8
            };
        }
        self.last_rx = now;
    }

    /// The thread slept until `now`.
    pub(crate) fn slept(&mut self, now: u64) {
        self.last_sleep = now;
    }

    /// How long an idle pass at `now` polls before it sleeps (ns; 0:
    /// sleep at once).
    pub(crate) fn budget(&self, now: u64) -> u64 {
        let streaming = self.last_rx != 0
            && self.gap != 0
            && self.gap <= SPIN_NS
            && now.saturating_sub(self.last_rx) <= SPIN_NS;
        let held = now.saturating_sub(self.last_sleep) > SPIN_HOLD_NS;
        if streaming && !held { SPIN_NS } else { 0 }
    }
}

/// Reads `port`'s receive rings in memory until one holds a frame (`true`)
/// or the clock reaches `until` (`false`, also for a device that cannot
/// tell without a system call).
fn poll_rings_until<P: PacketIo + 'static>(port: &mut Port<P>, clock: &Clock, until: u64) -> bool {
    loop {
        match port.frames_waiting() {
            Some(true) => return true,
            None => return false,
            Some(false) => {}
        }
        if clock.now().0 >= until {
            return false;
        }
        for _ in 0..16 {
            std::hint::spin_loop();
        }
    }
}

/// Runs until the pipeline stops, then the stop sequence (what is queued
/// is sent at once; nothing is held outside the scheduler at that point).
pub(crate) fn rtc_loop<P: PacketIo + Send + 'static>(
    mut looper: ArbiterLoop<P>,
    mut port: Port<P>,
    shared: Arc<Shared>,
    pool: &'static BufPool,
    clock: Clock,
    busy_poll: bool,
) -> Stopped<P> {
    crate::sys::set_timer_slack(1000);
    let mut bufs: Vec<PacketBuf> = Vec::with_capacity(RX_BATCH);
    let (mut map, mut generation) = shared.map();
    // When the device's counters were last published (engine clock, ns):
    // the pass's own clock read, not one more per pass.
    let mut published = clock.now().0;
    // The kernel's receive stamps (CLOCK_MONOTONIC) on the engine's clock.
    let origin = pktsched_io::clock::monotonic_ns().saturating_sub(clock.now().0);
    let mut spin = SpinRule::default();
    while !shared.stopping() {
        let now = clock.now();
        looper.housekeeping(now);
        if shared.changed_since(generation) {
            (map, generation) = shared.map();
        }
        // The trace starts at the first pass.
        let trace = looper.trace.get_or_insert_with(|| PassTrace::new(now.0));
        trace.pass();
        trace.segment(Phase::Sched, now.0);
        let received = port.recv(pool, &mut bufs, RX_BATCH);
        let now = clock.now();
        trace.received(now.0, received);
        if received > 0 {
            spin.received(now.0);
        }
        let sched = looper.arbiter.scheduler();
        // A refused frame is counted by the scheduler under its class and
        // reason; dropping it returns its buffer.
        classify_into(&map, &shared, &mut bufs, now, pool, |p, rx_ns| {
            if rx_ns != 0 {
                trace.taken(p.flow.index(), rx_ns.saturating_sub(origin));
            }
            drop(sched.enqueue(p, now));
        });
        let round = looper.arbiter.do_scan(now);
        if now.0.saturating_sub(published) >= PUBLISH_EVERY.as_nanos() as u64 {
            if busy_poll {
                // It never waits on the device otherwise, and the wait is
                // where the kernel's drop counters are read.
                port.wait(Duration::ZERO);
            }
            shared.publish_device(device_stats(&port));
            published = now.0;
        }
        let mut kicked = 0;
        if round.released == 0 {
            looper.trace_segment(Phase::Sched, clock.now().0);
            // Nothing more is due now: what earlier passes released goes
            // out (under load too, so the link's pacing is kept; back to
            // back releases still share a kick).
            kicked = looper.flush_tx();
        }
        looper.trace_kicked(clock.now().0, kicked);
        if received >= RX_BATCH || round.released > 0 {
            continue; // more may be waiting: no sleep
        }
        if busy_poll {
            if received == 0 {
                std::thread::yield_now();
            }
            continue;
        }
        let due = looper.next_due(&round, now);
        if due.is_none() {
            // Idle under a stream: poll the rings a little first; the
            // next pass takes what arrived (its time is traced as the
            // next pass's scheduling segment).
            let at = clock.now().0;
            let budget = spin.budget(at);
            if budget > 0 && poll_rings_until(&mut port, &clock, at + budget) {
                continue;
            }
        }
        let asked = match due {
            // Idle: the device's own wait (it also refreshes the kernel's
            // drop counters); a command or stop waits at most RX_WAIT.
            None => (!port.rx_ready() && port.wait_due(RX_WAIT, false))
                .then_some(RX_WAIT.as_nanos() as u64),
            Some(due) => sleep_until_frame_or(&mut port, due, &clock),
        };
        // Only a wait that slept is a sleep of the trace.
        if let Some(asked) = asked {
            let end = clock.now().0;
            looper.trace_slept(asked, end);
            spin.slept(end);
        }
    }
    looper.flush_tx();
    port.wait(Duration::ZERO); // the kernel's last drop counters
    shared.publish_device(device_stats(&port));
    looper.stop_sequence()
}

/// Sleeps until a frame arrives on `port` or the clock reaches `due`,
/// with nanosecond precision when the device has a descriptor. Returns
/// the time asked for (ns), or `None` when it did not sleep (the time was
/// up, or the receive ring or per-class rings already held frames: a
/// frame that arrived since the pass's receive, e.g. during its TX kick,
/// is taken by the next pass without a `ppoll` that would return at
/// once).
fn sleep_until_frame_or<P: PacketIo + 'static>(
    port: &mut Port<P>,
    due: Due,
    clock: &Clock,
) -> Option<u64> {
    let left = due.at.0.saturating_sub(clock.now().0);
    if left == 0 {
        return None;
    }
    let timeout = Duration::from_nanos(left).min(RX_WAIT);
    if port.rx_ready() {
        return None;
    }
    let waited = match port.io.poll_fd() {
        Some(fd) => wait::readable_within(fd, timeout).map(|_| true),
        None => Ok(port.wait_due(timeout, due.link_busy)),
    };
    let slept = waited.unwrap_or_else(|e| {
        port.errors += 1;
        port.last_error = Some(format!("ppoll: {e}"));
        std::thread::sleep(timeout);
        true
    });
    slept.then_some(timeout.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::{SPIN_HOLD_NS, SPIN_NS, SpinRule};

    /// Passes that received at `times` (ns), after a sleep at `slept`.
    fn rule(slept: u64, times: &[u64]) -> SpinRule {
        let mut r = SpinRule::default();
        r.slept(slept);
        for &t in times {
            r.received(t);
        }
        r
    }

    #[test]
    fn a_stream_of_close_arrivals_polls_a_slow_one_sleeps_at_once() {
        // Every 4 µs (250 k frames/s): poll.
        let fast: Vec<u64> = (1..=20).map(|i| 1_000_000 + i * 4_000).collect();
        let r = rule(1_000_000, &fast);
        assert_eq!(r.budget(1_082_000), SPIN_NS);
        // Every 70 µs (14 k frames/s, the victim runs): sleep at once.
        let slow: Vec<u64> = (1..=20).map(|i| 1_000_000 + i * 70_000).collect();
        let r = rule(2_000_000, &slow);
        assert_eq!(r.budget(2_401_000), 0);
        // One frame is no stream yet.
        assert_eq!(rule(1_000_000, &[1_000_000]).budget(1_001_000), 0);
        assert_eq!(SpinRule::default().budget(5_000), 0, "nothing received");
    }

    #[test]
    fn a_pause_in_the_stream_or_a_long_hold_of_the_core_ends_the_polls() {
        let fast: Vec<u64> = (1..=20).map(|i| 1_000_000 + i * 4_000).collect();
        let r = rule(1_000_000, &fast);
        let last = 1_080_000;
        assert_eq!(
            r.budget(last + SPIN_NS),
            SPIN_NS,
            "the last frame is recent"
        );
        assert_eq!(r.budget(last + SPIN_NS + 1), 0, "the stream paused");
        // Frames kept coming every 4 µs, but the thread has not slept for
        // longer than the hold.
        let mut held = r.clone();
        let mut t = last;
        while t <= 1_000_000 + SPIN_HOLD_NS {
            t += 4_000;
            held.received(t);
        }
        assert_eq!(held.budget(t + 1_000), 0, "held the core since the sleep");
        held.slept(t + 1_000);
        held.received(t + 4_000);
        assert_eq!(
            held.budget(t + 5_000),
            SPIN_NS,
            "after a sleep it polls again"
        );
    }

    #[test]
    fn the_average_gap_follows_the_rate_within_a_few_passes() {
        // Slow, then fast: after ~20 fast passes the average is under SPIN_NS.
        let mut times: Vec<u64> = (1..=10).map(|i| i * 100_000).collect();
        let start = 1_000_000;
        let fast: Vec<u64> = (1..=24).map(|i| start + i * 3_000).collect();
        times.extend(&fast);
        let r = rule(start, &times);
        assert_eq!(r.budget(start + 24 * 3_000 + 1_000), SPIN_NS);
        // ... but not after the first few.
        let r = rule(start, &times[..13]);
        assert_eq!(r.budget(start + 3 * 3_000 + 1_000), 0);
    }
}
