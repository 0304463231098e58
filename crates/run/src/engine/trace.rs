//! The run-to-completion forwarder's account of its own passes: what it
//! was doing while a frame sat in its receive ring.
//!
//! Each pass is cut into contiguous segments on the engine's clock —
//! receive, scheduling (classify, enqueue, release), transmit (the TX
//! kick) and sleep (split by how the sleep ended: a frame woke it, or its
//! timeout) — and the last [`LOG_SEGMENTS`] segment ends are kept in a
//! ring. When a frame the kernel stamped at receive is taken with a ring
//! wait of at least [`TAIL_WAIT`], its wait is decomposed by the segments
//! it overlaps: how much of it the forwarder spent asleep, in a TX kick,
//! receiving or scheduling, and how many receive calls ran after the stamp
//! without finding the frame (it was not yet in the ring: the kernel
//! publishes an XDP batch at the end of its NAPI poll). Besides, per pass:
//! frames received, sleeps asked vs slept, kicks and their duration.
//! Each logged segment end carries running totals (time per phase,
//! receive calls), so a tail frame costs a binary search of the log and a
//! few subtractions, not a walk. Everything is counters, small histograms
//! and the fixed log: no allocation per frame.

use hdrhistogram::Histogram;
use serde::Serialize;

/// What the forwarder was doing in a segment of a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// A receive call on the ingress.
    Rx = 0,
    /// Classify, enqueue, release, control commands.
    Sched = 1,
    /// A TX kick (the send of the waiting frames).
    Tx = 2,
    /// A sleep a frame's arrival ended.
    SleepWoken = 3,
    /// A sleep that ran to its timeout.
    SleepTimeout = 4,
}

const PHASES: usize = 5;
/// Segment ends kept: a few milliseconds of passes.
pub(crate) const LOG_SEGMENTS: usize = 4096;
/// Ring waits at least this long are decomposed (one 1500-byte frame at
/// 100 Mbit/s takes 122 µs on the wire).
pub(crate) const TAIL_WAIT_NS: u64 = 200_000;

/// How the tail frames' ring wait divides (µs summed over those frames).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct TailSplit {
    /// Flow index (class) of the frames.
    pub class: String,
    /// Stamped frames taken with a ring wait ≥ the tail threshold.
    pub frames: u64,
    /// Their ring wait in total.
    pub wait_us: f64,
    /// Of which the forwarder was receiving.
    pub rx_us: f64,
    /// Scheduling.
    pub sched_us: f64,
    /// In a TX kick.
    pub tx_us: f64,
    /// Asleep, in a sleep a frame ended.
    pub sleep_woken_us: f64,
    /// Asleep, in a sleep that ran to its timeout.
    pub sleep_timeout_us: f64,
    /// Older than the segment log (not attributed).
    pub unlogged_us: f64,
    /// Tail frames stamped while the forwarder slept.
    pub stamped_asleep: u64,
    /// Tail frames that one or more receive calls started after their
    /// stamp did not find (not yet published in the ring).
    pub missed_by_rx: u64,
    /// Receive calls that missed them, summed.
    pub missed_rx_calls: u64,
    /// Of the tail frames stamped asleep: the time their sleep asked for
    /// and the time it slept, summed (µs).
    pub asleep_asked_us: f64,
    /// See `asleep_asked_us`.
    pub asleep_slept_us: f64,
}

/// The forwarder's counters, in the stats (`forwarder`).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ForwarderStats {
    /// Passes of the loop.
    pub passes: u64,
    /// Passes that received at least one frame.
    pub passes_with_rx: u64,
    /// Frames received.
    pub frames_received: u64,
    /// Sleeps (waits on the ingress).
    pub sleeps: u64,
    /// Sleeps a frame's arrival ended before their timeout.
    pub sleeps_woken: u64,
    /// Time asked for, over every sleep (µs).
    pub sleep_asked_us: f64,
    /// Time slept, over every sleep (µs).
    pub sleep_slept_us: f64,
    /// p99 / max of how far a sleep that ran to its timeout overshot it.
    pub sleep_overshoot_p99_us: f64,
    /// Max of that overshoot.
    pub sleep_overshoot_max_us: f64,
    /// TX kicks (sends of waiting frames), every one: between passes
    /// and inside a release once `KICK_BATCH` frames wait.
    pub tx_kicks: u64,
    /// Frames those kicks sent (the device took them; refused frames are
    /// the classes' `tx_failed` drops).
    pub tx_kick_frames: u64,
    /// Kicks the trace timed: those between passes (a kick inside a
    /// release is part of that scheduling segment).
    pub tx_kicks_timed: u64,
    /// Time in the timed kicks (µs).
    pub tx_kick_us: f64,
    /// p99 of one timed kick's duration.
    pub tx_kick_p99_us: f64,
    /// Longest timed kick.
    pub tx_kick_max_us: f64,
    /// p99 of one receive call's duration (calls that received).
    pub rx_call_p99_us: f64,
    /// Longest receive call.
    pub rx_call_max_us: f64,
    /// Tail ring waits decomposed, per class with any.
    pub ring_wait_tail: Vec<TailSplit>,
}

/// One class's tail sums (ns).
#[derive(Debug, Clone, Copy, Default)]
struct Tail {
    frames: u64,
    wait: u64,
    by_phase: [u64; PHASES],
    unlogged: u64,
    stamped_asleep: u64,
    missed_by_rx: u64,
    missed_rx_calls: u64,
    asleep_asked: u64,
    asleep_slept: u64,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 2).unwrap_or_else(|_| {
        Histogram::new(2).unwrap_or_else(|_| unreachable!("2 significant digits is valid"))
    })
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// One logged segment: where it ended (engine clock), what it was, the
/// time a sleep asked for, and the running totals at its end (time per
/// phase, receive calls), so the time between two segment ends is a
/// difference of totals.
#[derive(Debug, Clone, Copy)]
struct SegEnd {
    end: u64,
    phase: Phase,
    asked: u64,
    totals: [u64; PHASES],
    rx_calls: u64,
}

const NO_SEGMENT: SegEnd = SegEnd {
    end: 0,
    phase: Phase::Sched,
    asked: 0,
    totals: [0; PHASES],
    rx_calls: 0,
};

/// How one tail frame's wait divides (ns).
struct Split {
    by_phase: [u64; PHASES],
    /// Where the attributed time starts (after the stamp when the stamp
    /// is older than the log).
    covered_from: u64,
    /// Receive calls that began after the stamp, before the one that took
    /// the frame.
    missed: u64,
    /// The sleep the stamp fell in: asked, slept.
    asleep: Option<(u64, u64)>,
}

/// The pass log and counters of one forwarder thread.
pub(crate) struct PassTrace {
    /// Segment ends with running totals, a ring of `LOG_SEGMENTS`.
    ends: Vec<SegEnd>,
    /// Time per phase and receive calls over every segment logged.
    totals: [u64; PHASES],
    rx_calls: u64,
    /// Next slot of `ends`; segments logged in total.
    next: usize,
    logged: u64,
    /// The end of the last segment (the next one starts there).
    last: u64,
    passes: u64,
    passes_with_rx: u64,
    frames: u64,
    sleeps: u64,
    sleeps_woken: u64,
    asked_ns: u64,
    slept_ns: u64,
    overshoot: Histogram<u64>,
    kicks: u64,
    kick_frames: u64,
    kick_ns: u64,
    kick: Histogram<u64>,
    rx_call: Histogram<u64>,
    /// Indexed by flow index.
    tails: Vec<Tail>,
}

impl std::fmt::Debug for PassTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassTrace")
            .field("passes", &self.passes)
            .finish_non_exhaustive()
    }
}

impl PassTrace {
    /// A trace whose first segment starts at `now`.
    pub(crate) fn new(now: u64) -> PassTrace {
        PassTrace {
            ends: vec![NO_SEGMENT; LOG_SEGMENTS],
            totals: [0; PHASES],
            rx_calls: 0,
            next: 0,
            logged: 0,
            last: now,
            passes: 0,
            passes_with_rx: 0,
            frames: 0,
            sleeps: 0,
            sleeps_woken: 0,
            asked_ns: 0,
            slept_ns: 0,
            overshoot: histogram(),
            kicks: 0,
            kick_frames: 0,
            kick_ns: 0,
            kick: histogram(),
            rx_call: histogram(),
            tails: Vec::new(),
        }
    }

    /// Ends the current segment at `end` as `phase`; returns its length.
    pub(crate) fn segment(&mut self, phase: Phase, end: u64) -> u64 {
        self.log(phase, end, 0)
    }

    fn log(&mut self, phase: Phase, end: u64, asked: u64) -> u64 {
        let end = end.max(self.last);
        let len = end - self.last;
        self.totals[phase as usize] += len;
        self.rx_calls += u64::from(phase == Phase::Rx);
        self.ends[self.next] = SegEnd {
            end,
            phase,
            asked,
            totals: self.totals,
            rx_calls: self.rx_calls,
        };
        self.next = (self.next + 1) % LOG_SEGMENTS;
        self.logged += 1;
        self.last = end;
        len
    }

    /// A pass began.
    pub(crate) fn pass(&mut self) {
        self.passes += 1;
    }

    /// A receive call ended at `end` with `frames`.
    pub(crate) fn received(&mut self, end: u64, frames: usize) {
        let len = self.segment(Phase::Rx, end);
        if frames > 0 {
            self.passes_with_rx += 1;
            self.frames += frames as u64;
            let _ = self.rx_call.record(len.max(1));
        }
    }

    /// A timed TX kick that handed `frames` to the device ended at `end`
    /// (none: the segment is scheduling).
    pub(crate) fn kicked(&mut self, end: u64, frames: usize) {
        if frames == 0 {
            self.segment(Phase::Sched, end);
            return;
        }
        let len = self.segment(Phase::Tx, end);
        self.kicks += 1;
        self.kick_frames += frames as u64;
        self.kick_ns += len;
        let _ = self.kick.record(len.max(1));
    }

    /// A sleep of `asked` ns ended at `end`; it ended early (a frame woke
    /// it) when it slept less than asked.
    pub(crate) fn slept(&mut self, asked: u64, end: u64) {
        let start = self.last;
        let slept = end.saturating_sub(start);
        let woken = slept < asked;
        let phase = if woken {
            Phase::SleepWoken
        } else {
            Phase::SleepTimeout
        };
        self.log(phase, end, asked);
        self.sleeps += 1;
        self.asked_ns += asked;
        self.slept_ns += slept;
        if woken {
            self.sleeps_woken += 1;
        } else {
            let _ = self.overshoot.record((slept - asked).max(1));
        }
    }

    /// A frame of flow `flow` stamped by the kernel at `stamp` was taken
    /// by the receive segment that ended last. Long waits are decomposed.
    pub(crate) fn taken(&mut self, flow: usize, stamp: u64) {
        let taken = self.last;
        if stamp == 0 || taken.saturating_sub(stamp) < TAIL_WAIT_NS {
            return;
        }
        if self.tails.len() <= flow {
            self.tails.resize(flow + 1, Tail::default());
        }
        let split = self.split(stamp);
        let t = &mut self.tails[flow];
        t.frames += 1;
        t.wait += taken - stamp;
        for (sum, add) in t.by_phase.iter_mut().zip(split.by_phase) {
            *sum += add;
        }
        t.unlogged += split.covered_from.saturating_sub(stamp);
        if let Some((asked, slept)) = split.asleep {
            t.stamped_asleep += 1;
            t.asleep_asked += asked;
            t.asleep_slept += slept;
        }
        if split.missed > 0 {
            t.missed_by_rx += 1;
            t.missed_rx_calls += split.missed;
        }
    }

    /// Logical segment `i` (0: the oldest kept).
    fn seg(&self, i: usize, kept: usize) -> SegEnd {
        self.ends[(self.next + LOG_SEGMENTS - kept + i) % LOG_SEGMENTS]
    }

    /// How the time from `stamp` to the end of the last segment (the
    /// receive call that took the frame) divides, from the running totals:
    /// a binary search for the segment the stamp falls in, then
    /// differences of totals (O(log n) per frame). The oldest kept
    /// segment's start is unknown: time before its end is unlogged.
    fn split(&self, stamp: u64) -> Split {
        let mut split = Split {
            by_phase: [0; PHASES],
            covered_from: self.last,
            missed: 0,
            asleep: None,
        };
        let kept = self.logged.min(LOG_SEGMENTS as u64) as usize;
        if kept < 2 {
            return split;
        }
        let last = self.seg(kept - 1, kept);
        // The first kept segment ending after the stamp (it holds it).
        let (mut lo, mut hi) = (0, kept - 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.seg(mid, kept).end <= stamp {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let holder = lo;
        // Whole segments after the holder (after the oldest kept one when
        // the stamp is older than its end).
        let from_seg = self.seg(holder, kept);
        for (p, out) in split.by_phase.iter_mut().enumerate() {
            *out = last.totals[p] - from_seg.totals[p];
        }
        let before_last = self.seg(kept - 2, kept).rx_calls;
        split.missed = before_last.saturating_sub(from_seg.rx_calls);
        if holder == 0 {
            split.covered_from = from_seg.end;
            return split;
        }
        // The holder: from the stamp to its end.
        let start = self.seg(holder - 1, kept).end;
        split.by_phase[from_seg.phase as usize] += from_seg.end - stamp;
        split.covered_from = stamp;
        if matches!(from_seg.phase, Phase::SleepWoken | Phase::SleepTimeout) {
            split.asleep = Some((from_seg.asked, from_seg.end - start));
        }
        split
    }

    /// The counters, with `name(flow)` naming each class; the kicks are
    /// the timed ones only (the output counts them all:
    /// [`ForwarderStats::tx_kicks`] is replaced by the caller).
    pub(crate) fn stats(&self, name: impl Fn(usize) -> String) -> ForwarderStats {
        let q = |h: &Histogram<u64>, q: f64| {
            if h.is_empty() {
                0.0
            } else {
                us(h.value_at_quantile(q))
            }
        };
        ForwarderStats {
            passes: self.passes,
            passes_with_rx: self.passes_with_rx,
            frames_received: self.frames,
            sleeps: self.sleeps,
            sleeps_woken: self.sleeps_woken,
            sleep_asked_us: us(self.asked_ns),
            sleep_slept_us: us(self.slept_ns),
            sleep_overshoot_p99_us: q(&self.overshoot, 0.99),
            sleep_overshoot_max_us: q(&self.overshoot, 1.0),
            tx_kicks: self.kicks,
            tx_kick_frames: self.kick_frames,
            tx_kicks_timed: self.kicks,
            tx_kick_us: us(self.kick_ns),
            tx_kick_p99_us: q(&self.kick, 0.99),
            tx_kick_max_us: q(&self.kick, 1.0),
            rx_call_p99_us: q(&self.rx_call, 0.99),
            rx_call_max_us: q(&self.rx_call, 1.0),
            ring_wait_tail: self
                .tails
                .iter()
                .enumerate()
                .filter(|(_, t)| t.frames > 0)
                .map(|(flow, t)| TailSplit {
                    class: name(flow),
                    frames: t.frames,
                    wait_us: us(t.wait),
                    rx_us: us(t.by_phase[Phase::Rx as usize]),
                    sched_us: us(t.by_phase[Phase::Sched as usize]),
                    tx_us: us(t.by_phase[Phase::Tx as usize]),
                    sleep_woken_us: us(t.by_phase[Phase::SleepWoken as usize]),
                    sleep_timeout_us: us(t.by_phase[Phase::SleepTimeout as usize]),
                    unlogged_us: us(t.unlogged),
                    stamped_asleep: t.stamped_asleep,
                    missed_by_rx: t.missed_by_rx,
                    missed_rx_calls: t.missed_rx_calls,
                    asleep_asked_us: us(t.asleep_asked),
                    asleep_slept_us: us(t.asleep_slept),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{LOG_SEGMENTS, PassTrace, Phase, TAIL_WAIT_NS};

    /// Times in µs on a virtual clock.
    const US: u64 = 1_000;

    #[test]
    fn a_tail_frame_stamped_in_a_sleep_that_ran_late_is_charged_to_that_sleep() {
        let mut t = PassTrace::new(0);
        t.pass();
        t.received(5 * US, 0);
        t.kicked(20 * US, 1); // a kick of 15 µs
        t.slept(60 * US, 900 * US); // asked 60 µs, slept 880 µs
        t.received(910 * US, 1);
        t.taken(0, 100 * US); // stamped at 100 µs, taken at 910 µs
        t.taken(0, 800 * US); // 110 µs: not a tail frame
        let s = t.stats(|_| "victim".to_string());
        assert_eq!(
            (s.sleeps, s.sleeps_woken, s.tx_kicks, s.frames_received),
            (1, 0, 1, 1)
        );
        // Two significant digits: 820 µs reads back within 1 %.
        let over = s.sleep_overshoot_max_us;
        assert!((820.0..=828.2).contains(&over), "{over}");
        assert_eq!(s.ring_wait_tail.len(), 1);
        let v = &s.ring_wait_tail[0];
        assert_eq!(v.class, "victim");
        assert_eq!(v.frames, 1);
        assert_eq!(v.wait_us, 810.0);
        assert_eq!((v.sleep_timeout_us, v.rx_us), (800.0, 10.0));
        assert_eq!(
            (v.tx_us, v.sched_us, v.sleep_woken_us, v.unlogged_us),
            (0.0, 0.0, 0.0, 0.0)
        );
        assert_eq!(
            (v.stamped_asleep, v.asleep_asked_us, v.asleep_slept_us),
            (1, 60.0, 880.0)
        );
        assert_eq!(v.missed_by_rx, 0);
    }

    #[test]
    fn receive_calls_after_the_stamp_that_did_not_find_the_frame_are_counted() {
        let mut t = PassTrace::new(0);
        t.received(10 * US, 0);
        t.segment(Phase::Sched, 20 * US);
        t.received(30 * US, 0); // began at 20 µs, after the stamp: missed it
        t.kicked(260 * US, 4); // a long kick
        t.received(300 * US, 1);
        t.taken(3, 15 * US);
        let s = t.stats(|f| format!("flow {f}"));
        let v = &s.ring_wait_tail[0];
        assert_eq!(v.class, "flow 3");
        assert_eq!((v.missed_by_rx, v.missed_rx_calls), (1, 1));
        assert_eq!(v.wait_us, 285.0);
        assert_eq!((v.rx_us, v.sched_us, v.tx_us), (50.0, 5.0, 230.0));
        assert_eq!(v.stamped_asleep, 0, "stamped while scheduling");
        assert_eq!(s.tx_kick_frames, 4);
    }

    #[test]
    fn a_wait_older_than_the_log_is_counted_unlogged_and_short_waits_are_not_split() {
        let mut t = PassTrace::new(0);
        for i in 1..=(LOG_SEGMENTS as u64 + 10) {
            t.segment(Phase::Sched, i * US);
        }
        let now = (LOG_SEGMENTS as u64 + 11) * US;
        t.received(now, 2);
        t.taken(0, now - TAIL_WAIT_NS + 1); // shorter than the tail
        t.taken(0, 0); // no stamp
        t.taken(1, US / 2); // stamped before the oldest kept segment
        let s = t.stats(|f| f.to_string());
        assert_eq!(s.ring_wait_tail.len(), 1);
        let v = &s.ring_wait_tail[0];
        assert_eq!(v.class, "1");
        assert!(v.unlogged_us > 10.0, "{v:?}");
        let parts = v.rx_us + v.sched_us + v.unlogged_us;
        assert!((parts - v.wait_us).abs() < 1e-6, "{v:?}");
    }

    /// The split by a walk over every kept segment, newest first: what
    /// the running totals must reproduce.
    fn walked(t: &PassTrace, stamp: u64) -> ([u64; 5], u64, u64, Option<(u64, u64)>) {
        let kept = t.logged.min(LOG_SEGMENTS as u64) as usize;
        let (mut by_phase, mut covered_from, mut missed, mut asleep) = ([0; 5], t.last, 0, None);
        for i in (1..kept).rev() {
            let (seg, start) = (t.seg(i, kept), t.seg(i - 1, kept).end);
            let from = start.max(stamp);
            by_phase[seg.phase as usize] += seg.end.saturating_sub(from);
            covered_from = from;
            if start <= stamp {
                if matches!(seg.phase, Phase::SleepWoken | Phase::SleepTimeout) {
                    asleep = Some((seg.asked, seg.end - start));
                }
                break;
            }
            missed += u64::from(seg.phase == Phase::Rx && i < kept - 1);
        }
        (by_phase, covered_from, missed, asleep)
    }

    #[test]
    fn the_split_from_running_totals_equals_a_walk_over_the_log() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(15);
        let phases = [
            Phase::Rx,
            Phase::Sched,
            Phase::Tx,
            Phase::SleepWoken,
            Phase::SleepTimeout,
        ];
        let mut t = PassTrace::new(0);
        let mut now = 0u64;
        for round in 0..3 * LOG_SEGMENTS {
            now += rng.random_range(0..300) * US / 10;
            let phase = phases[rng.random_range(0..phases.len())];
            t.log(phase, now, rng.random_range(0..100) * US);
            if round % 7 == 0 {
                let back = rng.random_range(0..(now + 1).min(40_000 * US));
                let stamp = now - back;
                let s = t.split(stamp);
                let want = walked(&t, stamp);
                let got = (s.by_phase, s.covered_from, s.missed, s.asleep);
                assert_eq!(got, want, "stamp {stamp} at {now}, round {round}");
            }
        }
    }
}
