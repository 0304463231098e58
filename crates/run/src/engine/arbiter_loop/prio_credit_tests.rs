//! The engine's side of the priority credit, on a virtual clock: which
//! flows get `link.prio_burst` (at start, after a reload), and that the
//! forwarder wakes for an urgent frame when the link is within both leads
//! instead of `burst` alone. The release rule itself is tested in the
//! runtime's `arbiter/prio_credit_tests.rs`.

use std::sync::mpsc;

use pktsched_core::{FlowId, Nanos, Pkt, Rate};
use pktsched_io::BufPool;
use pktsched_io::classify::Anomaly;
use pktsched_io::mem::MemDevice;
use pktsched_runtime::{Arbiter, Clock, Config};

use super::ArbiterLoop;
use crate::config::{RunConfig, parse};
use crate::engine::ports::Port;
use crate::engine::shared::{ClassMap, Shared};
use crate::engine::tx::TxOutput;
use crate::frame::Frame;
use crate::plan;

/// A 10 Mbit/s link, strict priority: `voice` (prio 0) above `bulk`.
const CONFIG: &str = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"10mbit\"\n\
    overhead = 24\nmpu = 84\n[scheduler]\nalgorithm = \"prio\"\n\
    [[class]]\nname = \"voice\"\nprio = 0\nmatch = [{ dport = 6008 }]\n\
    [[class]]\nname = \"bulk\"\nprio = 1\ndefault = true\n";

fn config(src: &str) -> RunConfig {
    parse(src, "t.toml", None).unwrap_or_else(|e| panic!("{e}"))
}

fn looper(cfg: &RunConfig, pool: &'static BufPool) -> (ArbiterLoop<MemDevice>, Vec<FlowId>) {
    let plan = plan::build::<Frame>(cfg).unwrap_or_else(|e| panic!("{e}"));
    let clock = Clock::new();
    let mut rt = Config::new(cfg.link.rate);
    rt.burst = cfg.link.burst;
    let (egress, _wire) = MemDevice::new();
    let out = TxOutput::new(Port::new(egress, "d1", "tx"), pool, clock);
    let arbiter = Arbiter::new(&rt, plan.sched, out).unwrap_or_else(|e| panic!("{e}"));
    let map = ClassMap::new(plan.classifier, plan.flows.clone(), &cfg.link);
    let shared = Shared::new(map, Anomaly::ALL.len());
    let (_tx, commands) = mpsc::channel();
    let l = ArbiterLoop::new(arbiter, cfg.clone(), &plan.flows, shared, clock, commands);
    (l, plan.flows)
}

fn enqueue(l: &mut ArbiterLoop<MemDevice>, pool: &'static BufPool, flow: FlowId, len: u32) {
    let buf = pool.get().unwrap_or_else(|| panic!("no buffer"));
    let p = Pkt::new(flow, len, Nanos(0), Frame::new(buf, pool));
    if l.arbiter.scheduler().enqueue(p, Nanos(0)).is_err() {
        panic!("refused");
    }
}

/// The urgent class's frame leaves in the round after it arrives while
/// the bulk class keeps the link a frame beyond `burst`; the forwarder's
/// next wake-up moves earlier by the credit while it is queued.
#[test]
fn the_urgent_class_gets_the_credit_and_the_forwarder_wakes_for_it() {
    let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(64, 2048).expect("pool")));
    let cfg = config(CONFIG);
    assert_eq!(cfg.link.prio_burst, 1538);
    let (mut l, flows) = looper(&cfg, pool);
    let (voice, bulk) = (flows[0], flows[1]);
    let frame = Rate::mbit(10).tx_time(1538);
    assert_eq!(l.arbiter.priority_lead(), frame, "one frame: 1.23 ms");
    for _ in 0..6 {
        enqueue(&mut l, pool, bulk, 1538);
    }
    let r = l.arbiter.do_scan(Nanos(0));
    assert_eq!(r.released, 2, "the frame due now and the one within burst");
    let lead = l.arbiter.link_lead();
    let bulk_due = l.next_due(&r, Nanos(0)).map(|d| d.at);
    assert_eq!(bulk_due, Some(Nanos(r.link_free.0 - lead.0)));
    // The voice frame arrives 100 µs later: the link is still more than
    // `burst` ahead (1.13 ms of the bulk frame left), within the credit.
    let at = Nanos(100_000);
    enqueue(&mut l, pool, voice, 200);
    assert_eq!(l.arbiter.release_lead().0, lead.0 + frame.0);
    // The link is within both leads: due at once (it was due at 1.23 ms
    // for the bulk class).
    let due = l.next_due(&r, at).map(|d| d.at);
    assert_eq!(due, Some(at));
    let r = l.arbiter.do_scan(at);
    assert_eq!((r.released, l.arbiter.priority_releases()), (1, 1));
    let voice_sent = l
        .arbiter
        .scheduler()
        .flow_stats(voice)
        .map(|c| c.dequeued.pkts);
    assert_eq!(voice_sent, Some(1));
    // Nothing urgent queued: the next wake-up is the bulk class's again.
    let due = l.next_due(&r, at).map(|d| d.at);
    assert_eq!(due, Some(Nanos(r.link_free.0 - lead.0)));
}

/// Without the credit (`prio_burst = 0`) the same frame waits for the
/// link to come within `burst`; a reload that moves the most urgent level
/// to another class moves the credit with it.
#[test]
fn the_credit_follows_the_config_and_reloads() {
    let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(64, 2048).expect("pool")));
    let off = CONFIG.replace("mpu = 84", "mpu = 84\nprio_burst = 0");
    let (mut l, flows) = looper(&config(&off), pool);
    assert_eq!(l.arbiter.priority_lead(), Nanos::ZERO);
    for _ in 0..6 {
        enqueue(&mut l, pool, flows[1], 1538);
    }
    let r = l.arbiter.do_scan(Nanos(0));
    enqueue(&mut l, pool, flows[0], 200);
    assert_eq!(l.arbiter.do_scan(Nanos(100_000)).released, 0, "waits");
    let lead = l.arbiter.link_lead();
    let due = l.next_due(&r, Nanos(100_000)).map(|d| d.at);
    assert_eq!(due, Some(Nanos(r.link_free.0 - lead.0)));
    // Reload: the credit on, and a new class above voice takes it.
    let above = CONFIG.replace(
        "[[class]]\nname = \"voice\"",
        "[[class]]\nname = \"alarm\"\nprio = 0\nmatch = [{ dport = 7000 }]\n\
         [[class]]\nname = \"voice\"",
    );
    let above = above.replace("name = \"voice\"\nprio = 0", "name = \"voice\"\nprio = 1");
    let above = above.replace("name = \"bulk\"\nprio = 1", "name = \"bulk\"\nprio = 2");
    let new = config(&above);
    assert_eq!(new.urgent_level(), Some(0));
    l.reload(new, Nanos(200_000))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(l.arbiter.priority_lead(), Rate::mbit(10).tx_time(1538));
    // Voice (now level 1) is queued but not urgent: no credit for it.
    assert_eq!(l.arbiter.release_lead(), lead);
    assert_eq!(l.arbiter.do_scan(Nanos(200_000)).released, 0);
    let alarm = l.classes[0].flow;
    enqueue(&mut l, pool, alarm, 200);
    assert_eq!(
        l.arbiter.release_lead().0,
        lead.0 + l.arbiter.priority_lead().0
    );
    assert_eq!(l.arbiter.do_scan(Nanos(200_001)).released, 1);
    let sent = l
        .arbiter
        .scheduler()
        .flow_stats(alarm)
        .map(|c| c.dequeued.pkts);
    assert_eq!(sent, Some(1));
}
