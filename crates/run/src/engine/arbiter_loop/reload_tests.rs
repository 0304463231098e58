//! Reloads on the arbiter's side, on a virtual clock: a reload its caller
//! gave up on (cancelled before the arbiter took it) is never applied; a
//! removed class's queue that the full default class refuses is counted as
//! that class's `queue_full` drops, every buffer back in the pool.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Sender};

use pktsched_core::{FlowId, Nanos, Pkt};
use pktsched_io::BufPool;
use pktsched_io::classify::Anomaly;
use pktsched_io::mem::MemDevice;
use pktsched_runtime::{Arbiter, Clock, Config};

use super::{ArbiterLoop, Command, RETIRE_AFTER, Ticket};
use crate::config::{RunConfig, parse};
use crate::engine::ports::Port;
use crate::engine::shared::{ClassMap, Shared};
use crate::engine::tx::TxOutput;
use crate::frame::Frame;
use crate::plan;

/// `video` (room for 1000 frames) and the default class `rest`, which
/// holds 4.
const CONFIG: &str = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"10mbit\"\n\
    [[class]]\nname = \"video\"\nlimit = 1000\nmatch = [{ dport = 6000 }]\n\
    [[class]]\nname = \"rest\"\nlimit = 4\ndefault = true\n";

/// [`CONFIG`] without `video`.
const WITHOUT_VIDEO: &str = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"10mbit\"\n\
    [[class]]\nname = \"rest\"\nlimit = 4\ndefault = true\n";

fn config(src: &str) -> RunConfig {
    parse(src, "t.toml", None).unwrap_or_else(|e| panic!("{e}"))
}

fn looper(
    cfg: &RunConfig,
    pool: &'static BufPool,
) -> (ArbiterLoop<MemDevice>, Vec<FlowId>, Sender<Command>) {
    let plan = plan::build::<Frame>(cfg).unwrap_or_else(|e| panic!("{e}"));
    let clock = Clock::new();
    let (egress, _wire) = MemDevice::new();
    let out = TxOutput::new(Port::new(egress, "d1", "tx"), pool, clock);
    let arbiter = Arbiter::new(&Config::new(cfg.link.rate), plan.sched, out)
        .unwrap_or_else(|e| panic!("{e}"));
    let map = ClassMap {
        classifier: plan.classifier,
        flows: plan.flows.clone(),
        overhead: cfg.link.overhead,
        mpu: cfg.link.mpu,
    };
    let shared = Shared::new(map, Anomaly::ALL.len());
    let (tx, commands) = mpsc::channel();
    let l = ArbiterLoop::new(arbiter, cfg.clone(), &plan.flows, shared, clock, commands);
    (l, plan.flows, tx)
}

/// Queues `n` frames on `flow`, counted as received as a receive thread
/// would.
fn enqueue(l: &mut ArbiterLoop<MemDevice>, pool: &'static BufPool, flow: FlowId, n: u64) {
    for _ in 0..n {
        let buf = pool.get().unwrap_or_else(|| panic!("no buffer"));
        let p = Pkt::new(flow, 500, Nanos(0), Frame::new(buf, pool));
        if l.arbiter.scheduler().enqueue(p, Nanos(0)).is_err() {
            panic!("refused");
        }
    }
    l.shared.received[flow.index()].fetch_add(n, Ordering::Relaxed);
}

#[test]
fn a_reload_cancelled_before_the_arbiter_takes_it_is_never_applied() {
    let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(16, 2048).expect("pool")));
    let (mut l, _, commands) = looper(&config(CONFIG), pool);
    let (reply, answer) = mpsc::channel();
    let ticket = Ticket::default();
    let new = Box::new(config(WITHOUT_VIDEO));
    commands
        .send(Command::Reload(new.clone(), reply, ticket.clone()))
        .expect("send");
    assert!(ticket.cancel(), "not taken yet: the caller cancels it");
    l.housekeeping(Nanos(0));
    assert!(answer.recv().is_err(), "no answer: it was not applied");
    assert_eq!(l.reloads, 0);
    assert_eq!(l.classes.len(), 2, "video is still there");
    // One the arbiter takes is applied, and can no longer be cancelled.
    let (reply, answer) = mpsc::channel();
    let ticket = Ticket::default();
    commands
        .send(Command::Reload(new, reply, ticket.clone()))
        .expect("send");
    l.housekeeping(Nanos(0));
    assert!(answer.recv().expect("answered").is_ok());
    assert!(!ticket.cancel(), "taken: too late to cancel");
    assert_eq!((l.reloads, l.classes.len()), (1, 1));
}

#[test]
fn a_removed_class_queue_the_full_default_class_refuses_is_counted_as_queue_full() {
    let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(64, 2048).expect("pool")));
    let (mut l, flows, _commands) = looper(&config(CONFIG), pool);
    let (video, rest) = (flows[0], flows[1]);
    enqueue(&mut l, pool, video, 10);
    enqueue(&mut l, pool, rest, 4);
    l.reload(config(WITHOUT_VIDEO), Nanos(0)).expect("reload");
    l.retire_due(Nanos(RETIRE_AFTER.0 - 1));
    assert_eq!(l.retiring.len(), 1, "still in its grace period");
    l.retire_due(RETIRE_AFTER);
    let s = l.snapshot(RETIRE_AFTER);
    let find = |name: &str| {
        s.classes
            .iter()
            .find(|c| c.class == name)
            .unwrap_or_else(|| panic!("{name} in {s:?}"))
    };
    let (gone, default) = (find("video"), find("rest"));
    assert!(gone.removed);
    assert_eq!((gone.moved, gone.qlen), (10, 0));
    assert_eq!(default.received, 14, "its own 4 and the 10 moved");
    assert_eq!(default.qlen, 4, "full");
    assert_eq!(default.drops, 10);
    assert_eq!(default.drops_by_reason[0], 10, "queue_full");
    assert_eq!(
        default.received,
        default.packets + default.drops + default.qlen,
        "the default class's counters add up"
    );
    assert_eq!(
        pool.stats().free,
        pool.stats().capacity - 4,
        "every refused frame's buffer is back"
    );
}
