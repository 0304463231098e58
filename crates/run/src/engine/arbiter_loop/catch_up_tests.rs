//! The PSPAT engine's loop on a virtual clock, with a stand-in receive
//! thread that keeps its mailbox full: an arbiter that is late (it waited
//! for a core) keeps the emulated link's time, so a backlogged link sends
//! exactly rate × time, also after a reload that reused a flow id; idle
//! time is still no credit; only frames already waiting at the last round
//! are caught up; a reload applied on the late arbiter's return changes
//! only the link time from then on.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Sender};

use pktsched_core::{FlowId, Nanos, Pkt};
use pktsched_io::BufPool;
use pktsched_io::classify::Anomaly;
use pktsched_io::mem::MemDevice;
use pktsched_runtime::{Arbiter, Client, Clock, Config};

use super::{ArbiterLoop, Command, RETIRE_AFTER, Ticket};
use crate::config::{RunConfig, parse};
use crate::engine::ports::Port;
use crate::engine::shared::{ClassMap, Shared};
use crate::engine::tx::TxOutput;
use crate::frame::Frame;
use crate::plan;

/// 1 Gbit/s, one class of 200 frames (the test's 2000 scaled down, so a
/// shorter absence empties it).
const CONFIG: &str = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n\
    [scheduler]\nalgorithm = \"drr\"\n\
    [[class]]\nname = \"a\"\nlimit = 200\ndefault = true\n";

/// 1500 bytes: 12 µs at 1 Gbit/s.
const FRAME: u32 = 1500;
const TICK: u64 = 12_000;

struct Rig {
    l: ArbiterLoop<MemDevice>,
    client: Client<Frame>,
    shared: Arc<Shared>,
    /// The flow the frames that arrive are classified into (the first
    /// class's at first).
    flow: FlowId,
    flows: Vec<FlowId>,
    commands: Sender<Command>,
    pool: &'static BufPool,
    /// Frames the stand-in receive thread holds (classified, counted).
    pending: VecDeque<Pkt<Frame>>,
}

fn config(src: &str) -> RunConfig {
    parse(src, "t.toml", None).unwrap_or_else(|e| panic!("{e}"))
}

fn rig() -> Rig {
    rig_of(CONFIG)
}

fn rig_of(src: &str) -> Rig {
    let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(2048, 128).expect("pool")));
    let cfg = config(src);
    let plan = plan::build::<Frame>(&cfg).unwrap_or_else(|e| panic!("{e}"));
    let clock = Clock::new();
    // As the engine builds it.
    let mut rt = Config::new(cfg.link.rate);
    rt.mailbox_capacity = 1024;
    rt.burst = cfg.link.burst;
    let (egress, _wire) = MemDevice::new();
    let out = TxOutput::new(Port::new(egress, "d1", "tx"), pool, clock);
    let arbiter = Arbiter::new(&rt, plan.sched, out).unwrap_or_else(|e| panic!("{e}"));
    let client = arbiter.client().unwrap_or_else(|e| panic!("{e}"));
    let map = ClassMap::new(plan.classifier, plan.flows.clone(), &cfg.link);
    let shared = Shared::new(map, Anomaly::ALL.len());
    let (tx, commands) = mpsc::channel();
    let l = ArbiterLoop::new(arbiter, cfg, &plan.flows, shared.clone(), clock, commands);
    Rig {
        l,
        client,
        shared,
        flow: plan.flows[0],
        flows: plan.flows,
        commands: tx,
        pool,
        pending: VecDeque::new(),
    }
}

impl Rig {
    /// Ten frames at 0, stepped every tick to 1 ms: all ten went, and the
    /// scheduler is empty again.
    fn ten_by_1ms(&mut self) {
        self.arrive(Nanos(0), 10);
        let mut now = 0;
        while now <= 1_000_000 {
            self.l.step(Nanos(now));
            now += TICK;
        }
        assert_eq!(self.sent_bytes(), 10 * u64::from(FRAME), "all ten went");
    }

    /// The receive thread at `now`: `frames` more arrive (up to what the
    /// mailbox and its hands hold), stamped and counted as received, and
    /// go into the mailbox as far as it has room.
    fn arrive(&mut self, now: Nanos, frames: usize) {
        for _ in 0..frames {
            if self.pending.len() >= 64 {
                break;
            }
            let mut buf = self.pool.get().expect("buffer");
            assert!(buf.fill(&[0u8; 60]));
            self.pending
                .push_back(Pkt::new(self.flow, FRAME, now, Frame::new(buf, self.pool)));
            // Counted as the receive thread counts them: per flow and in
            // the total.
            self.shared.received[self.flow.index()].fetch_add(1, Ordering::Relaxed);
            self.shared.count_classified(1);
            if self.pending.len() == 64 {
                self.push();
            }
        }
        self.push();
    }

    fn push(&mut self) {
        self.client.send_batch(&mut self.pending).expect("running");
    }

    /// Keeps the mailbox and the receive thread's hands full.
    fn flood(&mut self, now: Nanos) {
        self.arrive(now, 2048);
    }

    /// Queues a reload to `src` for the next [`ArbiterLoop::step`]; the
    /// reply comes through the receiver once that step ran.
    fn reload(&self, src: &str) -> mpsc::Receiver<Result<Vec<crate::reload::Change>, String>> {
        let (reply, answer) = mpsc::channel();
        let cmd = Command::Reload(Box::new(config(src)), reply, Ticket::default());
        self.commands.send(cmd).expect("arbiter there");
        answer
    }

    /// Bytes sent by the class of [`Rig::flow`].
    fn sent_bytes(&self) -> u64 {
        self.l
            .arbiter
            .scheduler_view()
            .flow_stats(self.flow)
            .map_or(0, |c| c.dequeued.bytes)
    }

    /// Bytes sent by every class.
    fn all_sent_bytes(&self) -> u64 {
        self.l.arbiter.scheduler_view().stats().dequeued.bytes
    }
}

/// Link time, in ns at 1 Gbit/s, of `bytes`.
fn link_ns(bytes: u64) -> u64 {
    bytes * 8
}

/// A backlogged class (the receive thread keeps the mailbox full and
/// the class queue at its limit) whose arbiter is away for 6 ms, longer
/// than its queue lasts (200 frames: 2.4 ms): over the run the link sends
/// exactly rate × time (within the release lead and a frame), as if the
/// arbiter had been on time, because the frames waiting in the mailbox
/// keep the link's time. (Without the catch-up the late round restarted
/// the link at its own time: 16.4 ms of link time sent in 20 ms.)
#[test]
fn a_late_arbiter_of_a_backlogged_link_still_sends_rate_times_time() {
    let mut r = rig();
    let lead = r.l.arbiter.link_lead().0;
    let mut now = 0;
    while now <= 20_000_000 {
        let away = (5_000_000..11_000_000).contains(&now);
        r.flood(Nanos(now));
        if !away {
            r.l.step(Nanos(now));
        }
        now += TICK;
    }
    let end = now - TICK;
    let sent = link_ns(r.sent_bytes());
    assert!(
        sent >= end && sent <= end + lead + link_ns(u64::from(FRAME)),
        "sent {sent} ns of link time in {end} ns (lead {lead} ns); {} catch-up rounds",
        r.l.catch_up_rounds
    );
    assert!(r.l.catch_up_rounds > 0);
    let c =
        r.l.arbiter
            .scheduler_view()
            .flow_stats(r.flow)
            .expect("flow");
    assert!(c.backlog.pkts > 100, "still backlogged: {c:?}");
}

/// The same absence while the mailbox is empty: the frames that arrive
/// just before the arbiter is back find an idle link; they leave at the
/// rate from then on, not in a burst for the time the link was idle.
#[test]
fn idle_time_is_still_no_credit_after_an_absence() {
    let mut r = rig();
    let lead = r.l.arbiter.link_lead().0;
    r.ten_by_1ms();
    // Away until 6 ms; 300 frames arrive at 5.999 ms.
    let back = 6_000_000;
    for _ in 0..5 {
        r.arrive(Nanos(back - 1_000), 64);
    }
    let round = r.l.step(Nanos(back));
    assert_eq!(
        r.l.catch_up_rounds, 0,
        "nothing was waiting at the last round"
    );
    let frames = 1 + lead / TICK;
    assert_eq!(
        round.released as u64, frames,
        "one due now and those within the lead"
    );
    let mut now = back;
    while now < back + 2_400_000 {
        now += TICK;
        r.arrive(Nanos(now), 64);
        r.l.step(Nanos(now));
    }
    let sent = link_ns(r.sent_bytes() - 10 * u64::from(FRAME));
    let span = now - back;
    assert!(
        sent >= span && sent <= span + lead + link_ns(u64::from(FRAME)),
        "sent {sent} ns of link time in the {span} ns since the arbiter came back"
    );
}

/// Runs the flooded link from `start` to about `start + 20 ms` with the
/// arbiter away from 5 to 11 ms into it; returns the time of the last
/// step.
fn backlogged_with_absence(r: &mut Rig, start: u64) -> u64 {
    let mut now = start;
    while now <= start + 20_000_000 {
        let away = (start + 5_000_000..start + 11_000_000).contains(&now);
        r.flood(Nanos(now));
        if !away {
            r.l.step(Nanos(now));
        }
        now += TICK;
    }
    now - TICK
}

/// The bound partly used: 10 frames are still in the mailbox at the last
/// round before the arbiter is away, and 300 more arrive while it is. On
/// its return one catch-up round reads the 10 (with the rest of a read
/// batch, 54 of the later ones) at the time the queue ran out, and no
/// more: the later frames are not backdated round after round; the link
/// restarts at the return.
#[test]
fn only_the_frames_waiting_at_the_last_round_are_caught_up() {
    let mut r = rig();
    let lead = r.l.arbiter.link_lead().0;
    // 74 frames: the round at 0 reads a read batch (64), 10 stay.
    r.arrive(Nanos(0), 64);
    r.arrive(Nanos(0), 10);
    r.l.step(Nanos(0));
    assert_eq!(r.l.upstream, 10, "waiting at the last round");
    r.arrive(Nanos(1_000_000), 300);
    let back = 2_000_000;
    let enqueued = |r: &Rig| r.l.arbiter.scheduler_view().stats().enqueued.pkts;
    assert_eq!(r.l.catch_up(Nanos(back)), 1, "one round reads the 10");
    assert_eq!(enqueued(&r), 128, "the 10 and 54 later ones with them");
    assert_eq!(r.l.upstream, 0);
    let round = r.l.step(Nanos(back));
    assert_eq!(r.l.catch_up_rounds, 1, "no further catch-up");
    assert_eq!(enqueued(&r), 192, "one read at the return");
    assert!(
        round.link_free.0 >= back && round.link_free.0 <= back + lead + TICK,
        "the link restarted at the return: free at {} ns",
        round.link_free.0
    );
}

/// Two classes, `b` (dport 1) and the default `a`.
const TWO: &str = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n\
    [scheduler]\nalgorithm = \"drr\"\n\
    [[class]]\nname = \"b\"\nlimit = 200\nmatch = [{ dport = 1 }]\n\
    [[class]]\nname = \"a\"\nlimit = 200\ndefault = true\n";

/// [`TWO`] without `b`.
const WITHOUT_B: &str = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n\
    [scheduler]\nalgorithm = \"drr\"\n\
    [[class]]\nname = \"a\"\nlimit = 200\ndefault = true\n";

/// A reload removes `b` (which received thousands of frames) and a later
/// one adds `c`, which the scheduler gives `b`'s flow id, so `b`'s
/// receive counter restarts at zero: a late arbiter of a backlogged `c`
/// still catches up (the frames waiting upstream are counted by a total
/// no reload restarts), and the link sends rate × time.
#[test]
fn a_late_arbiter_still_catches_up_after_a_reload_reused_a_flow_id() {
    let mut r = rig_of(TWO);
    let b = r.flows[0];
    // `b` backlogged for 30 ms, then everything it holds drains.
    let mut now = 0;
    while now < 30_000_000 {
        r.flood(Nanos(now));
        r.l.step(Nanos(now));
        now += TICK;
    }
    while now < 50_000_000 {
        r.arrive(Nanos(now), 0);
        r.l.step(Nanos(now));
        now += TICK;
    }
    assert!(
        r.shared.received(b) > 5_000,
        "b received {}",
        r.shared.received(b)
    );
    assert_eq!(r.l.arbiter.scheduler_view().backlog().pkts, 0, "drained");
    let answer = r.reload(WITHOUT_B);
    r.l.step(Nanos(now));
    assert!(answer.recv().expect("answered").is_ok(), "b removed");
    now += RETIRE_AFTER.0;
    r.l.step(Nanos(now));
    let answer = r.reload(&TWO.replace("\"b\"", "\"c\""));
    r.l.step(Nanos(now));
    assert!(answer.recv().expect("answered").is_ok(), "c added");
    assert_eq!(r.l.classes[0].name, "c");
    assert_eq!(r.l.classes[0].flow, b, "b's id reused (the point here)");
    assert_eq!(r.shared.received(b), 0, "c counts only its own");
    // `c` backlogged, its arbiter away for 6 ms.
    let start = now + TICK;
    let before = r.all_sent_bytes();
    let lead = r.l.arbiter.link_lead().0;
    let end = backlogged_with_absence(&mut r, start);
    let sent = link_ns(r.all_sent_bytes() - before);
    let span = end - start;
    assert!(
        sent >= span && sent <= span + lead + link_ns(u64::from(FRAME)),
        "sent {sent} ns of link time in {span} ns (lead {lead} ns); {} catch-up rounds",
        r.l.catch_up_rounds
    );
    assert!(r.l.catch_up_rounds > 0);
}

/// A reload that lowers the link rate (1 Gbit/s to 100 Mbit/s) is queued
/// while the arbiter of a backlogged link is away: on its return the link
/// time it missed is caught up at the old rate (the rate the link had
/// then), and the new one applies from the return on.
#[test]
fn a_reload_on_a_late_arbiter_s_return_applies_from_then_on() {
    let mut r = rig();
    let back = 11_000_000;
    let mut now = 0;
    while now < back {
        r.flood(Nanos(now));
        if now < 5_000_000 {
            r.l.step(Nanos(now));
        }
        now += TICK;
    }
    let answer = r.reload(&CONFIG.replace("1gbit", "100mbit"));
    r.flood(Nanos(back));
    r.l.step(Nanos(back));
    assert!(answer.recv().expect("answered").is_ok());
    assert_eq!(r.l.arbiter.link_rate().to_string(), "100mbit");
    assert!(r.l.catch_up_rounds > 0);
    // At 1 Gbit/s until the return: 11 ms of link time (less the last
    // frame, which may leave at the new rate).
    let sent = link_ns(r.sent_bytes());
    let lead = r.l.arbiter.link_lead().0;
    assert!(
        sent + link_ns(u64::from(FRAME)) >= back && sent <= back + lead,
        "sent {sent} ns of link time at 1 Gbit/s by {back} ns (lead {lead} ns)"
    );
}

/// A removed class's queue moved to the default class is offered to the
/// scheduler once more, and counted once more upstream: the frames still
/// in the mailbox are counted exactly after the move (were the moved
/// frames not counted, they would hide as many waiting frames, and a late
/// arbiter would not catch those up).
#[test]
fn a_removed_class_s_moved_queue_leaves_the_upstream_count_exact() {
    // At 1 Mbit/s (12 ms a frame) b still holds most of its 100 frames
    // when it is retired.
    let mbit = |src: &str| src.replace("1gbit", "1mbit");
    let mut r = rig_of(&mbit(TWO));
    r.flow = r.flows[0]; // b
    r.arrive(Nanos(0), 64);
    r.arrive(Nanos(0), 36);
    r.l.step(Nanos(0));
    r.l.step(Nanos(1_000));
    assert_eq!(r.l.upstream, 0, "b's 100 frames are all in the scheduler");
    let answer = r.reload(&mbit(WITHOUT_B));
    r.l.step(Nanos(2_000));
    assert!(answer.recv().expect("answered").is_ok(), "b removed");
    let retired = 2_000 + RETIRE_AFTER.0;
    r.flow = r.flows[1]; // a
    r.arrive(Nanos(retired - 1_000), 64);
    r.arrive(Nanos(retired - 1_000), 36);
    r.l.step(Nanos(retired));
    let moved = r.l.removed.first().map_or(0, |c| c.moved);
    assert!(moved > 36, "b's queue moved to a: {moved} frames");
    assert_eq!(r.l.upstream, 36, "a read batch of a's 100 was read");
}

/// The link idle (its queue drained) when the arbiter goes away for 6
/// ms; 320 frames arrive 1 ms into the absence. On its return they take
/// the link from their arrival on (3.84 ms of it, over by the return), as
/// if the arbiter had been there: the first round restarts the link when
/// they arrived (the last of them; all came at once), not at the return, and the rounds after it (the next
/// pass's catch-up rounds, which read the rest of the mailbox) continue
/// from there. (With
/// the link restarting at the return they left at the rate from then on:
/// two frames in the first round.)
#[test]
fn frames_that_arrived_while_the_arbiter_was_away_take_the_idle_link_s_time() {
    let mut r = rig();
    r.ten_by_1ms();
    let arrived = 2_000_000;
    for _ in 0..5 {
        r.arrive(Nanos(arrived), 64);
    }
    let back = 7_000_000;
    let round = r.l.step(Nanos(back));
    assert_eq!(round.released, 64, "the first read batch, from 2 ms");
    assert_eq!(round.link_free, Nanos(arrived + 64 * TICK));
    // The next pass's catch-up rounds read the other 256, a read batch
    // each, continuing the link.
    assert_eq!(r.l.catch_up(Nanos(back + TICK)), 4);
    assert_eq!(r.sent_bytes(), 330 * u64::from(FRAME), "all went");
    assert_eq!(
        r.l.last_round.1.link_free,
        Nanos(arrived + 320 * TICK),
        "back to back from their arrival"
    );
}
