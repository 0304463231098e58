//! The PSPAT engine's loop on a virtual clock, with a stand-in receive
//! thread that keeps its mailbox full: an arbiter that is late (it waited
//! for a core) keeps the emulated link's time, so a backlogged link sends
//! exactly rate × time; idle time is still no credit.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;

use pktsched_core::{FlowId, Nanos, Pkt};
use pktsched_io::BufPool;
use pktsched_io::classify::Anomaly;
use pktsched_io::mem::MemDevice;
use pktsched_runtime::{Arbiter, Client, Clock, Config};

use super::ArbiterLoop;
use crate::config::parse;
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
    flow: FlowId,
    pool: &'static BufPool,
    /// Frames the stand-in receive thread holds (classified, counted).
    pending: VecDeque<Pkt<Frame>>,
}

fn rig() -> Rig {
    let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(2048, 128).expect("pool")));
    let cfg = parse(CONFIG, "t.toml", None).unwrap_or_else(|e| panic!("{e}"));
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
    let map = ClassMap {
        classifier: plan.classifier,
        flows: plan.flows.clone(),
        overhead: cfg.link.overhead,
        mpu: cfg.link.mpu,
    };
    let shared = Shared::new(map, Anomaly::ALL.len());
    let (_tx, commands) = mpsc::channel();
    let l = ArbiterLoop::new(arbiter, cfg, &plan.flows, shared.clone(), clock, commands);
    Rig {
        l,
        client,
        shared,
        flow: plan.flows[0],
        pool,
        pending: VecDeque::new(),
    }
}

impl Rig {
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
            self.shared.received[self.flow.index()].fetch_add(1, Ordering::Relaxed);
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

    fn sent_bytes(&self) -> u64 {
        self.l
            .arbiter
            .scheduler_view()
            .flow_stats(self.flow)
            .map_or(0, |c| c.dequeued.bytes)
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
    r.arrive(Nanos(0), 10);
    let mut now = 0;
    while now <= 1_000_000 {
        r.l.step(Nanos(now));
        now += TICK;
    }
    assert_eq!(r.sent_bytes(), 10 * u64::from(FRAME), "all ten went");
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
