//! Reloads on the arbiter's side, on a virtual clock: a reload its caller
//! gave up on (cancelled before the arbiter took it) is never applied; a
//! removed class's queue that the full default class refuses is counted as
//! that class's `queue_full` drops, every buffer back in the pool; a
//! reload refused at its last step leaves the scheduler as it was; a class
//! added on a removed class's flow id starts at zero.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Sender};

use pktsched_core::{FlowId, Nanos, Pkt};
use pktsched_io::BufPool;
use pktsched_io::classify::Anomaly;
use pktsched_io::mem::{MemDevice, MemWire};
use pktsched_runtime::{Arbiter, Clock, Config};

use super::{ArbiterLoop, Command, RETIRE_AFTER, Ticket};
use crate::config::{RunConfig, parse};
use crate::engine::ports::Port;
use crate::engine::shared::{ClassMap, Shared};
use crate::engine::tx::TxOutput;
use crate::frame::Frame;
use crate::plan;
use crate::stats::ClassStats;

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
    let (l, flows, tx, _wire) = looper_on_wire(cfg, pool);
    (l, flows, tx)
}

/// [`looper`] and the egress's wire.
fn looper_on_wire(
    cfg: &RunConfig,
    pool: &'static BufPool,
) -> (
    ArbiterLoop<MemDevice>,
    Vec<FlowId>,
    Sender<Command>,
    MemWire,
) {
    let plan = plan::build::<Frame>(cfg).unwrap_or_else(|e| panic!("{e}"));
    let clock = Clock::new();
    let (egress, wire) = MemDevice::new();
    let out = TxOutput::new(Port::new(egress, "d1", "tx"), pool, clock);
    let arbiter = Arbiter::new(&Config::new(cfg.link.rate), plan.sched, out)
        .unwrap_or_else(|e| panic!("{e}"));
    let map = ClassMap::new(plan.classifier, plan.flows.clone(), &cfg.link);
    let shared = Shared::new(map, Anomaly::ALL.len());
    let (tx, commands) = mpsc::channel();
    let l = ArbiterLoop::new(arbiter, cfg.clone(), &plan.flows, shared, clock, commands);
    (l, plan.flows, tx, wire)
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
    // As the receive thread counts them (the catch-up's upstream total).
    l.shared.count_classified(n);
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

/// One class's counters in a snapshot of `l` at `now`.
fn class_now(l: &mut ArbiterLoop<MemDevice>, name: &str, now: Nanos) -> ClassStats {
    let s = l.snapshot(now);
    s.classes
        .iter()
        .find(|c| c.class == name && !c.removed)
        .cloned()
        .unwrap_or_else(|| panic!("{name} in {s:?}"))
}

fn adds_up(c: &ClassStats) -> bool {
    c.received == c.packets + c.drops + c.qlen
}

#[test]
fn a_class_added_on_a_removed_class_s_flow_id_starts_at_zero_and_adds_up() {
    let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(64, 2048).expect("pool")));
    let (mut l, flows, _commands, wire) = looper_on_wire(&config(CONFIG), pool);
    // The device takes 3 frames and refuses the rest: video has sent
    // frames, transmit failures and sojourn samples.
    wire.lock().expect("wire").send_capacity = Some(3);
    enqueue(&mut l, pool, flows[0], 6);
    l.flush();
    l.flush_tx();
    let video = class_now(&mut l, "video", Nanos(0));
    assert_eq!((video.packets, video.drops, video.sojourn_count), (3, 3, 6));
    l.reload(config(WITHOUT_VIDEO), Nanos(0))
        .expect("remove video");
    l.retire_due(RETIRE_AFTER);
    // A class of another name: the scheduler gives it video's freed id.
    let audio_cfg = config(&CONFIG.replace("video", "audio"));
    l.reload(audio_cfg, RETIRE_AFTER).expect("add audio");
    let audio_flow = l.classes[0].flow;
    assert_eq!(
        audio_flow, flows[0],
        "the id is reused (what this test is about)"
    );
    let audio = class_now(&mut l, "audio", RETIRE_AFTER);
    assert_eq!(
        (
            audio.received,
            audio.packets,
            audio.drops,
            audio.sojourn_count
        ),
        (0, 0, 0, 0),
        "nothing of video's: {audio:?}"
    );
    assert_eq!(audio.drops_by_reason, [0; 4]);
    enqueue(&mut l, pool, audio_flow, 2);
    assert!(adds_up(&class_now(&mut l, "audio", RETIRE_AFTER)));
    // Sent now: the full device refuses both.
    l.flush();
    l.flush_tx();
    let audio = class_now(&mut l, "audio", RETIRE_AFTER);
    assert_eq!((audio.received, audio.drops, audio.qlen), (2, 2, 0));
    assert_eq!((audio.drops_by_reason[3], audio.sojourn_count), (2, 2));
    assert!(adds_up(&audio), "{audio:?}");
    // The removed class keeps its own final counters.
    let s = l.snapshot(RETIRE_AFTER);
    let gone = s.classes.iter().find(|c| c.removed).expect("video");
    assert_eq!(
        (gone.class.as_str(), gone.received, gone.drops),
        ("video", 6, 3)
    );
}

/// QFQ (weights sum to at most 2^20): class `a` (weight 1), `big0` ..
/// `big{n-1}` (weight 65536 each) and the default class `rest`.
fn qfq_classes(a_weight: u32, bigs: impl Iterator<Item = usize>) -> RunConfig {
    let mut src = String::from(
        "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"10mbit\"\n\
         [scheduler]\nalgorithm = \"qfq\"\n\
         [[class]]\nname = \"rest\"\ndefault = true\n",
    );
    src.push_str(&format!(
        "[[class]]\nname = \"a\"\nweight = {a_weight}\nmatch = [{{ dport = 1 }}]\n"
    ));
    for i in bigs {
        src.push_str(&format!(
            "[[class]]\nname = \"big{i}\"\nweight = 65536\nmatch = [{{ dport = {} }}]\n",
            100 + i
        ));
    }
    config(&src)
}

#[test]
fn a_reload_refused_at_its_last_step_leaves_the_scheduler_as_it_was() {
    let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(16, 2048).expect("pool")));
    let running = qfq_classes(1, 0..15);
    let (mut l, flows, _commands) = looper(&running, pool);
    let a = flows[1];
    // The new config is valid on its own (15 big classes), but big14,
    // removed, keeps its flow and weight until it retires: adding big15
    // (the last step) passes QFQ's weight sum.
    let new = qfq_classes(2, (0..14).chain([15]));
    let (_, generation) = l.shared.map();
    let before = l.arbiter.scheduler_view().flow_ids();
    let e = l.reload(new, Nanos(0)).expect_err("the weight sum is full");
    assert!(e.contains("big15") && e.contains("weight"), "{e}");
    assert_eq!(
        l.arbiter.scheduler_view().flow_config(a).map(|c| c.weight),
        Some(1),
        "a's weight change was undone"
    );
    assert_eq!(
        l.arbiter.scheduler_view().flow_ids(),
        before,
        "no flow added"
    );
    assert!(
        !l.shared.changed_since(generation),
        "the receive side's map is kept"
    );
    assert_eq!((l.reloads, l.classes.len(), l.retiring.len()), (0, 17, 0));
    assert_eq!(l.cfg.class("a").map(|c| c.weight), Some(1));
    // Once big14 is gone, the same config applies.
    let without_big14 = qfq_classes(1, 0..14);
    l.reload(without_big14, Nanos(0)).expect("remove big14");
    l.retire_due(RETIRE_AFTER);
    l.reload(qfq_classes(2, (0..14).chain([15])), RETIRE_AFTER)
        .expect("room again");
    assert_eq!(
        l.arbiter.scheduler_view().flow_config(a).map(|c| c.weight),
        Some(2)
    );
}

/// With per-class receive rings, a reload that would need another kernel
/// split is refused by name and changes nothing; one that keeps it applies.
#[test]
fn with_class_rings_a_reload_keeps_the_kernel_split_or_is_refused() {
    let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(16, 2048).expect("pool")));
    let (mut l, _, _commands) = looper(&config(CONFIG), pool);
    l.shared.set_class_rings(true);
    let with_audio = format!("{CONFIG}[[class]]\nname = \"audio\"\nmatch = [{{ dport = 7000 }}]\n");
    let e = l
        .reload(config(&with_audio), Nanos(0))
        .expect_err("a new ring");
    assert!(
        e.starts_with("classes (the ingress's per-class rings"),
        "{e}"
    );
    assert!(
        e.contains("video, rest") && e.contains("takes a restart"),
        "{e}"
    );
    let e = l
        .reload(config(&CONFIG.replace("6000", "6001")), Nanos(0))
        .expect_err("another filter");
    assert!(e.contains("class match") && e.contains("dport 6001"), "{e}");
    assert_eq!((l.reloads, l.classes.len()), (0, 2));
    // A limit is outside the split.
    l.reload(
        config(&CONFIG.replace("limit = 1000", "limit = 10")),
        Nanos(0),
    )
    .expect("live");
    // Without class rings the same reloads apply.
    l.shared.set_class_rings(false);
    l.reload(config(&with_audio), Nanos(0))
        .expect("no rings to keep");
    assert_eq!((l.reloads, l.classes.len()), (2, 3));
}

/// `n` classes named `{prefix}{i}` (one port each) and the default class.
fn many_classes(prefix: &str, n: usize) -> RunConfig {
    let mut src = String::from(
        "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"10mbit\"\n\
         [[class]]\nname = \"rest\"\ndefault = true\n",
    );
    for i in 0..n {
        src.push_str(&format!(
            "[[class]]\nname = \"{prefix}{i}\"\nmatch = [{{ dport = {} }}]\n",
            1000 + i
        ));
    }
    config(&src)
}

/// Classes replaced twice within the grace period would hold more flows
/// than the per-flow counters count: the second reload is refused (saying
/// when to retry) and applies once the first one's classes have retired.
#[test]
fn a_reload_that_would_outgrow_the_flow_counters_waits_for_the_retiring_classes() {
    use crate::engine::shared::FLOW_SLOTS;
    let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(16, 2048).expect("pool")));
    let n = crate::config::MAX_CLASSES - 1;
    let (mut l, _, _commands) = looper(&many_classes("a", n), pool);
    l.reload(many_classes("b", n), Nanos(0))
        .expect("a's retire");
    assert_eq!(l.retiring.len(), n);
    assert!(
        l.classes.len() + l.retiring.len() + n > FLOW_SLOTS,
        "the case"
    );
    let e = l
        .reload(many_classes("c", n), Nanos(1))
        .expect_err("no room while a's retire");
    assert!(e.contains("try again in 200 ms"), "{e}");
    assert_eq!((l.reloads, l.classes[1].name.as_str()), (1, "b0"));
    l.retire_due(RETIRE_AFTER);
    l.reload(many_classes("c", n), RETIRE_AFTER)
        .expect("room again");
    let top = l.classes.iter().map(|s| s.flow.index()).max().unwrap_or(0);
    assert!(top < FLOW_SLOTS, "every class is counted: flow {top}");
}

/// A reload to a faster link (or other wire lengths) gives the receive
/// thread a new longest full-mailbox sleep with the new class map: half
/// the time the new link sends a full mailbox of the smallest frames in.
#[test]
fn a_reload_recomputes_the_receive_thread_s_sleep_cap() {
    let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(16, 2048).expect("pool")));
    let (mut l, _, _commands) = looper(&config(CONFIG), pool);
    let cap = |l: &ArbiterLoop<MemDevice>| l.shared.map().0.full_wait_cap;
    let mailbox_bits = |wire: u64| crate::engine::MAILBOX_CAPACITY as u64 * wire * 8;
    // 10 Mbit/s: 100 ns a bit.
    assert_eq!(
        cap(&l),
        std::time::Duration::from_nanos(mailbox_bits(60) * 100 / 2)
    );
    let faster = CONFIG.replace("rate = \"10mbit\"", "rate = \"10gbit\"\noverhead = 24");
    l.reload(config(&faster), Nanos(0)).expect("reload");
    assert_eq!(
        cap(&l),
        std::time::Duration::from_nanos(mailbox_bits(84) / 10 / 2)
    );
}
