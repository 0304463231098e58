//! The run-to-completion engine: one thread receives a batch from the
//! ingress, classifies and stamps it, enqueues it straight into the
//! scheduler, releases what the emulated link allows (the runtime's
//! sans-I/O [`Arbiter::do_scan`](pktsched_runtime::Arbiter::do_scan), with
//! no client mailbox), transmits, and sleeps in `ppoll` on the ingress
//! until a frame arrives or the next link or shaper deadline. No frame
//! crosses a thread; the control commands are answered between batches by
//! the same [`ArbiterLoop`] the PSPAT engine uses.
//!
//! Busy polling (`link.busy_poll`): the thread never sleeps. On AF_XDP
//! every receive call drives the ingress's NAPI context (the device's
//! busy-poll kick; AF_PACKET has none to drive, the thread spins on its
//! rings),
//! and a pass that finds nothing to receive or release yields the core
//! (`sched_yield`) instead of waiting, so the reverse thread pinned to the
//! same core still runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pktsched_io::{BufPool, PacketBuf, PacketIo};
use pktsched_runtime::Clock;

use super::arbiter_loop::{ArbiterLoop, Due, Stopped};
use super::ports::Port;
use super::rx::{PUBLISH_EVERY, RX_BATCH, RX_WAIT, classify_into};
use super::shared::Shared;
use super::trace::{PassTrace, Phase};
use super::{device_stats, wait};

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
    let mut published = Instant::now();
    // The kernel's receive stamps (CLOCK_MONOTONIC) on the engine's clock.
    let origin = pktsched_io::clock::monotonic_ns().saturating_sub(clock.now().0);
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
        if published.elapsed() >= PUBLISH_EVERY {
            if busy_poll {
                // It never waits on the device otherwise, and the wait is
                // where the kernel's drop counters are read.
                port.wait(Duration::ZERO);
            }
            shared.publish_device(device_stats(&port));
            published = Instant::now();
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
        let asked = match looper.next_due(&round, now) {
            // Idle: the device's own wait (it also refreshes the kernel's
            // drop counters); a command or stop waits at most RX_WAIT.
            None => (!port.rx_ready() && port.wait_due(RX_WAIT, false))
                .then_some(RX_WAIT.as_nanos() as u64),
            Some(due) => sleep_until_frame_or(&mut port, due, &clock),
        };
        // Only a wait that slept is a sleep of the trace.
        if let Some(asked) = asked {
            looper.trace_slept(asked, clock.now().0);
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
