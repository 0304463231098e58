//! The threaded runtime end to end: real threads, real clock, no timing
//! assertions — only that every packet is accounted for and per-flow order
//! is kept.
#![cfg(not(loom))]
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used)]

#[path = "../../io/tests/common/untested.rs"]
mod untested;
use pktsched_core::{Algorithm, FlowId, Nanos, Pkt, Rate};
use pktsched_runtime::output::{Output, VecOutput};
use pktsched_runtime::pspat::{
    ArbiterStats, Client, Clock, Config, Pspat, SendError, StopMode, add_flows,
};
use untested::skipped;

/// Sends packets `0..n` of flow `flow` (numbered `flow << 32 | seq`),
/// yielding while the mailbox is full.
fn send_numbered(c: &mut Client<u64>, flow: u32, len: u32, n: u64) {
    send_numbered_from(c, flow, len, 0, n);
}

/// Sends packets `from..to` of flow `flow`, as [`send_numbered`] does.
fn send_numbered_from(c: &mut Client<u64>, flow: u32, len: u32, from: u64, to: u64) {
    let mut seq = from;
    while seq < to {
        let p = Pkt::new(FlowId(flow), len, Nanos(0), u64::from(flow) << 32 | seq);
        match c.send(p) {
            Ok(_) => seq += 1,
            Err(SendError::Full(_)) => std::thread::yield_now(),
            Err(SendError::Stopped(_)) => unreachable!("not stopped yet"),
        }
    }
}

fn run(dispatchers: usize, mode: StopMode, link: Rate, spin_us: u64) {
    let cfg = Config {
        dispatchers,
        spin: std::time::Duration::from_micros(spin_us),
        ..Config::new(link)
    };
    let mut sched = Algorithm::Qfq.build_send::<u64>();
    add_flows(sched.as_mut(), &[1, 2, 3, 4], 4, 256).unwrap();
    let outputs = (0..dispatchers.max(1))
        .map(|_| VecOutput::default())
        .collect();
    let rt = Pspat::start(&cfg, sched, outputs, Clock::new()).unwrap();
    let per_client = 5_000u64;
    let handles: Vec<_> = (0..4u32)
        .map(|i| {
            let mut c = rt.client().unwrap();
            std::thread::spawn(move || {
                let (mut ok, mut full) = (0u64, 0u64);
                for seq in 0..per_client {
                    let p = Pkt::new(FlowId(i), 200, Nanos(0), u64::from(i) << 32 | seq);
                    match c.send(p) {
                        Ok(_) => ok += 1,
                        Err(SendError::Full(_)) => {
                            full += 1;
                            std::thread::yield_now();
                        }
                        Err(SendError::Stopped(_)) => unreachable!("not stopped yet"),
                    }
                }
                (ok, full)
            })
        })
        .collect();
    let sent: Vec<(u64, u64)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let stats = rt.stats();
    assert_eq!(stats.clients.len(), 4);
    let report = rt.stop(mode).unwrap();
    let mut out: Vec<Pkt<u64>> = Vec::new();
    for mut o in report.outputs {
        out.append(&mut o.pkts);
    }
    for (i, c) in report.clients.iter().enumerate() {
        assert_eq!(c.sent, sent[i].0);
        assert_eq!(c.mailbox_full, sent[i].1);
        assert_eq!(c.drained, c.sent);
    }
    let dropped: u64 = report.clients.iter().map(|c| c.dropped_queue_full).sum();
    let drained: u64 = report.clients.iter().map(|c| c.drained).sum();
    assert_eq!(report.sched.enqueued.pkts + dropped, drained);
    assert_eq!(
        report.sched.enqueued.pkts,
        out.len() as u64 + report.returned.len() as u64
    );
    assert_eq!(out.len() as u64, report.arbiter.decisions + report.flushed);
    // Per-flow order is kept through dispatchers.
    for f in 0..4u64 {
        let seqs: Vec<u64> = out
            .iter()
            .filter(|p| p.item >> 32 == f)
            .map(|p| p.item & 0xffff_ffff)
            .collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "flow {f} reordered");
    }
}

#[test]
fn inline_output_drain() {
    run(0, StopMode::Drain, Rate::gbit(400), 50);
}

#[test]
fn two_dispatchers_return() {
    run(2, StopMode::Return, Rate::gbit(1), 0);
}

#[test]
fn slow_link_sleeps_and_returns_the_backlog() {
    run(1, StopMode::Return, Rate::mbit(10), 10);
}

/// An output that panics if used after a check fails is not needed: this
/// one just counts, to show `Output` is implementable outside the crate.
struct Count(u64);
impl Output<u64> for Count {
    fn transmit(&mut self, batch: &mut Vec<Pkt<u64>>) {
        self.0 += batch.len() as u64;
        batch.clear();
    }
}

#[test]
fn idle_runtime_stops_cleanly() {
    let rt = Pspat::start(
        &Config::new(Rate::gbit(1)),
        Algorithm::Fifo.build_send::<u64>(),
        vec![Count(0)],
        Clock::new(),
    )
    .unwrap();
    // Until it has slept once (a hang guard, not a timing goal).
    for _ in 0..10_000 {
        if rt.stats().arbiter.sleeps > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let r = rt.stop(StopMode::Drain).unwrap();
    assert_eq!(r.outputs[0].0, 0);
    assert!(r.arbiter.loops > 0);
    // The thread's own counters reach the report: idle, it first waits on
    // the CPU (yielding, the default) for `spin`, then sleeps; it ran.
    let a = r.arbiter;
    assert!(a.sleeps > 0 && a.yields > 0 && a.spins == 0, "{a:?}");
    assert!(a.cpu_ns > 0, "{a:?}");
    assert!(a.loops > a.busy_loops, "{a:?}");
}

/// Client-transmit mode on real threads: every packet comes back to the
/// client that sent it (or, if its return mailbox was full at stop, in the
/// report), in order, and nothing is lost.
#[test]
fn clients_transmit_their_own_cleared_packets() {
    let cfg = Config {
        client_transmit: true,
        tx_capacity: 256,
        spin: std::time::Duration::from_micros(20),
        ..Config::new(Rate::gbit(400))
    };
    let mut sched = Algorithm::Qfq.build_send::<u64>();
    add_flows(sched.as_mut(), &[1, 2, 3], 3, 100_000).unwrap();
    let rt: Pspat<u64, VecOutput<u64>> =
        Pspat::start(&cfg, sched, Vec::new(), Clock::new()).unwrap();
    let per_client = 3_000u64;
    let handles: Vec<_> = (0..3u32)
        .map(|i| {
            let mut c = rt.client().unwrap();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                let mut seq = 0;
                while seq < per_client {
                    let p = Pkt::new(FlowId(i), 200, Nanos(0), u64::from(i) << 32 | seq);
                    match c.send(p) {
                        Ok(_) => seq += 1,
                        Err(SendError::Full(_)) => std::thread::yield_now(),
                        Err(SendError::Stopped(_)) => unreachable!("not stopped yet"),
                    }
                    // Transmit what was cleared meanwhile, as a client would.
                    c.take_cleared(&mut got);
                }
                (c, got)
            })
        })
        .collect();
    let mut done: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let report = rt.stop(StopMode::Drain).unwrap();
    assert!(report.outputs.is_empty());
    for (i, (c, got)) in done.iter_mut().enumerate() {
        c.take_cleared(got);
        let mut all: Vec<u64> = got.iter().map(|p| p.item).collect();
        all.extend(
            report
                .returned
                .iter()
                .filter(|p| p.flow == FlowId(i as u32))
                .map(|p| p.item),
        );
        let want: Vec<u64> = (0..per_client).map(|s| (i as u64) << 32 | s).collect();
        assert_eq!(all, want, "client {i}: every packet back, in order");
        assert!(got.iter().all(|p| p.flow == FlowId(i as u32)));
    }
    assert_eq!(report.sched.enqueued.pkts, 3 * per_client);
    assert_eq!(
        report.sched.enqueued.pkts,
        report.arbiter.decisions + report.flushed + report.returned.len() as u64
            - report.returned_cleared
    );
}

/// An idle arbiter stops spinning and sleeps (no core burnt on an idle
/// system), and the next send wakes it: the packet is released without any
/// other event. Waits for events with a generous cap (a hang guard, not a
/// timing goal).
#[test]
fn idle_arbiter_sleeps_and_a_send_wakes_it() {
    let cfg = Config {
        spin: std::time::Duration::from_micros(50),
        ..Config::new(Rate::gbit(10))
    };
    let mut sched = Algorithm::Fifo.build_send::<u64>();
    add_flows(sched.as_mut(), &[1], 1, 64).unwrap();
    let rt = Pspat::start(&cfg, sched, vec![Count(0)], Clock::new()).unwrap();
    let wait_for = |what: &str, f: &dyn Fn() -> bool| {
        for _ in 0..10_000 {
            if f() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("gave up waiting for: {what}: {:?}", rt.stats().arbiter);
    };
    wait_for("the arbiter to sleep", &|| rt.stats().arbiter.sleeps >= 1);
    // Asleep now (it publishes its counters before it parks).
    let slept = rt.stats().arbiter.sleeps;
    let mut c = rt.client().unwrap();
    c.send(Pkt::new(FlowId(0), 1500, Nanos(0), 1)).unwrap();
    wait_for("the packet to be released", &|| {
        rt.stats().arbiter.decisions == 1
    });
    // Idle again: it goes back to sleep.
    wait_for("the arbiter to sleep again", &|| {
        rt.stats().arbiter.sleeps > slept
    });
    let r = rt.stop(StopMode::Drain).unwrap();
    assert_eq!(r.outputs[0].0, 1);
    assert_eq!(r.flushed, 0, "released at the link's pace, not at stop");
}

/// An arbiter thread that runs one round every 200 ms (`scan_interval`)
/// is late for almost every send: the clients run the rounds themselves
/// (the hand-off), packets leave while the arbiter waits, nothing is lost
/// and per-flow order is kept.
#[test]
fn clients_run_the_rounds_of_a_stalled_arbiter() {
    let cfg = Config {
        scan_interval: std::time::Duration::from_millis(200),
        assist_after: Some(std::time::Duration::from_micros(2)),
        ..Config::new(Rate::gbit(400))
    };
    let mut sched = Algorithm::Qfq.build_send::<u64>();
    // Limits above what is sent: the stop's drain enqueues every mailbox
    // at once, and this test wants no drop.
    add_flows(sched.as_mut(), &[1, 2], 2, 8192).unwrap();
    let rt = Pspat::start(&cfg, sched, vec![VecOutput::default()], Clock::new()).unwrap();
    let per_client = 3_000u64;
    let handles: Vec<_> = (0..2u32)
        .map(|i| {
            let mut c = rt.client().unwrap();
            std::thread::spawn(move || {
                send_numbered(&mut c, i, 200, per_client);
                c.assisted_rounds()
            })
        })
        .collect();
    let by_clients: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let report = rt.stop(StopMode::Drain).unwrap();
    assert!(by_clients > 0, "no client ran a round");
    assert_eq!(report.arbiter.assisted_rounds, by_clients);
    // The clients' rounds released packets (not only the stop's flush).
    assert!(report.arbiter.decisions > 0, "{:?}", report.arbiter);
    let out: Vec<Pkt<u64>> = report.outputs.into_iter().flat_map(|o| o.pkts).collect();
    assert_eq!(report.arbiter.dropped, 0);
    assert_eq!(out.len() as u64, 2 * per_client);
    assert_eq!(out.len() as u64, report.arbiter.decisions + report.flushed);
    for f in 0..2u64 {
        let seqs: Vec<u64> = out
            .iter()
            .filter(|p| p.item >> 32 == f)
            .map(|p| p.item & 0xffff_ffff)
            .collect();
        assert_eq!(seqs, (0..per_client).collect::<Vec<_>>(), "flow {f}");
    }
}

/// Records when each packet reached the output.
struct ReleaseTimes {
    clock: Clock,
    at: Vec<u64>,
}

impl Output<u64> for ReleaseTimes {
    fn transmit(&mut self, batch: &mut Vec<Pkt<u64>>) {
        let now = self.clock.now().0;
        self.at.extend(batch.drain(..).map(|_| now));
    }
}

/// Sends a backlog of `n` 1500-byte packets through one FIFO flow at
/// 1 Gbit/s (12 µs each) under `cfg`, waits until the arbiter has decided
/// them all (a hang guard, not a timing goal), and checks that none was
/// left for the stop's flush and that each left at or after its slot at
/// the link's rate; returns the arbiter's counters.
fn backlog_leaves_at_the_links_pace(cfg: &Config, n: u64) -> ArbiterStats {
    let clock = Clock::new();
    let mut sched = Algorithm::Fifo.build_send::<u64>();
    add_flows(sched.as_mut(), &[1], 1, 256).unwrap();
    let out = ReleaseTimes {
        clock,
        at: Vec::new(),
    };
    let rt = Pspat::start(cfg, sched, vec![out], clock).unwrap();
    let mut c = rt.client().unwrap();
    for i in 0..n {
        c.send(Pkt::new(FlowId(0), 1500, Nanos(0), i)).unwrap();
    }
    for _ in 0..10_000 {
        if rt.stats().arbiter.decisions == n {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let r = rt.stop(StopMode::Drain).unwrap();
    assert_eq!(r.flushed, 0, "every packet left at the link's pace");
    let at = &r.outputs[0].at;
    assert_eq!(at.len() as u64, n);
    // The first packet's round started at most one round before it
    // reached the output; packet k may start 12 µs × k after that.
    let start = at[0].saturating_sub(r.arbiter.max_loop_ns);
    for (k, &t) in at.iter().enumerate() {
        let slot = start + 12_000 * k as u64;
        assert!(t >= slot, "packet {k} left at {t}, before its slot {slot}");
    }
    r.arbiter
}

/// A client that queued a long backlog and went quiet, with napping on
/// (the arbiter may sleep while the link is busy instead of waiting on the
/// CPU for each departure): the link neither runs early nor loses a
/// packet — each leaves at or after its slot at the link's rate, and all
/// leave without the stop's flush (2.4 ms of link time in all). Whether
/// it napped here depends on the machine (an arbiter kept off its core
/// for the 2.4 ms finds every packet due and has nothing to nap over), so
/// it is not checked; when it naps is the idle policy's unit test
/// (`idle_policy_naps_only_with_empty_mailboxes_and_a_long_backlog`, in
/// `driver.rs`).
#[test]
fn a_quiet_backlog_with_naps_keeps_the_link_exact() {
    let cfg = Config {
        nap_cover: Some(std::time::Duration::from_micros(200)),
        ..Config::new(Rate::gbit(1))
    };
    let a = backlog_leaves_at_the_links_pace(&cfg, 200);
    eprintln!("{} naps", a.naps);
}

/// With the nap gated (`nap_when_waiting`), the arbiter naps only after a
/// window in which it waited for a core, which this test cannot arrange
/// (it depends on the machine's load): whether it naps or not, every
/// packet leaves at or after its slot and none is left for the stop, and
/// it never naps without the gate having opened.
#[test]
fn a_gated_nap_keeps_the_link_exact() {
    let cfg = Config {
        nap_cover: Some(std::time::Duration::from_micros(200)),
        nap_when_waiting: true,
        ..Config::new(Rate::gbit(1))
    };
    let a = backlog_leaves_at_the_links_pace(&cfg, 200);
    assert!(a.naps == 0 || a.nap_gate_opened > 0, "{a:?}");
}

/// With napping off the arbiter waits for the same backlog on the CPU:
/// the same packets leave, and it never naps.
#[test]
fn without_naps_the_same_backlog_leaves_without_any() {
    let cfg = Config {
        nap_cover: None,
        ..Config::new(Rate::gbit(1))
    };
    let a = backlog_leaves_at_the_links_pace(&cfg, 100);
    assert_eq!(a.naps, 0, "{a:?}");
}

/// Counts the packets that reached it (shared with the sending threads)
/// and keeps them.
struct CountedOutput {
    pkts: Vec<Pkt<u64>>,
    out: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Output<u64> for CountedOutput {
    fn transmit(&mut self, batch: &mut Vec<Pkt<u64>>) {
        self.out
            .fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
        self.pkts.append(batch);
    }
}

/// The arbiter pinned to a core that a spinning thread also wants: it gets
/// about half of it, steps aside, and the sending clients run the rounds
/// while it is away (without `assist_after`). Every packet leaves, in
/// order, and the stop's unpark ends an away period at once (the test
/// would otherwise wait up to an away period per stop, not fail). Whether
/// away paid is the bench's question (`bench pspat --step-aside`).
///
/// The clients keep sending (not polling with empty batches) until each
/// has run a round: the arbiter judges its windows only while it runs
/// rounds, so on a loaded machine whose first windows did not trigger
/// (or whose first away period did not pay and started a hold-off), an
/// arbiter that had drained the first packets would sleep and never
/// judge again. At most [`IN_FLIGHT`] packets are between the clients
/// and the output at any time, so the queues never reach their limits.
#[test]
fn an_arbiter_that_shares_its_core_steps_aside_and_clients_run_the_rounds() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    /// Most packets sent and not yet at the output, all clients together.
    const IN_FLIGHT: u64 = 2_000;
    let core = core_affinity::get_core_ids()
        .and_then(|c| c.first().copied())
        .map(|c| c.id);
    if core.is_none() {
        skipped("no core to pin the arbiter and the spinner to");
        return;
    }
    let cfg = Config {
        arbiter_core: core,
        step_aside: true,
        ..Config::new(Rate::gbit(1))
    };
    let spinning = Arc::new(AtomicBool::new(true));
    let spinner = {
        let spinning = spinning.clone();
        std::thread::spawn(move || {
            if let Some(c) = core {
                let _ = core_affinity::set_for_current(core_affinity::CoreId { id: c });
            }
            while spinning.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    };
    let mut sched = Algorithm::Qfq.build_send::<u64>();
    add_flows(sched.as_mut(), &[1, 2], 2, 8192).unwrap();
    let reached = Arc::new(AtomicU64::new(0));
    let out = CountedOutput {
        pkts: Vec::new(),
        out: reached.clone(),
    };
    let rt = Pspat::start(&cfg, sched, vec![out], Clock::new()).unwrap();
    let sent_all = Arc::new(AtomicU64::new(0));
    // 1 000-byte packets on 1 Gbit/s: 8 µs each, 2 × 3 000 take 48 ms.
    let at_least = 3_000u64;
    let handles: Vec<_> = (0..2u32)
        .map(|i| {
            let mut c = rt.client().unwrap();
            let (sent_all, reached) = (sent_all.clone(), reached.clone());
            std::thread::spawn(move || {
                // The deadline is a hang guard: the arbiter steps aside
                // within a few ms of sharing its core.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
                let mut seq = 0u64;
                while (seq < at_least || c.assisted_rounds() == 0)
                    && std::time::Instant::now() < deadline
                {
                    let ahead = sent_all.load(Ordering::Relaxed);
                    if ahead.saturating_sub(reached.load(Ordering::Relaxed)) >= IN_FLIGHT {
                        // Poll: while the arbiter is away this runs rounds.
                        let _ = c.send_batch(&mut std::collections::VecDeque::new());
                        std::thread::yield_now();
                        continue;
                    }
                    send_numbered_from(&mut c, i, 1_000, seq, seq + 1);
                    seq += 1;
                    sent_all.fetch_add(1, Ordering::Relaxed);
                }
                (seq, c.assisted_rounds())
            })
        })
        .collect();
    let per_client: Vec<(u64, u64)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let by_clients: u64 = per_client.iter().map(|&(_, r)| r).sum();
    let report = rt.stop(StopMode::Drain).unwrap();
    spinning.store(false, Ordering::Relaxed);
    spinner.join().unwrap();
    let a = &report.arbiter;
    assert!(a.away_periods > 0, "never stepped aside: {a:?}");
    assert!(a.away_kept <= a.away_periods);
    assert!(
        per_client.iter().all(|&(_, r)| r > 0),
        "a client ran no round while the arbiter was away: {per_client:?}"
    );
    assert_eq!(a.assisted_rounds, by_clients);
    let out: Vec<Pkt<u64>> = report.outputs.into_iter().flat_map(|o| o.pkts).collect();
    assert_eq!(a.dropped, 0);
    let sent: u64 = per_client.iter().map(|&(n, _)| n).sum();
    assert_eq!(out.len() as u64, sent);
    assert_eq!(out.len() as u64, a.decisions + report.flushed);
    for (f, &(n, _)) in per_client.iter().enumerate() {
        let seqs: Vec<u64> = out
            .iter()
            .filter(|p| p.item >> 32 == f as u64)
            .map(|p| p.item & 0xffff_ffff)
            .collect();
        assert_eq!(seqs, (0..n).collect::<Vec<_>>(), "flow {f}");
    }
}

/// `Config::humble` gives up a raised priority only: with the inherited
/// nice value (`arbiter_nice: None`) or a lower priority than it (nice 19:
/// always allowed) there is nothing to give up, and it never arms, so no
/// humble period runs however the clients fare. Packets flow either way.
#[test]
fn humble_arms_only_over_a_raised_priority() {
    for nice in [None, Some(19)] {
        let cfg = Config {
            humble: true,
            arbiter_nice: nice,
            ..Config::new(Rate::gbit(10))
        };
        let mut sched = Algorithm::Fifo.build_send::<u64>();
        add_flows(sched.as_mut(), &[1], 1, 1024).unwrap();
        let rt = Pspat::start(&cfg, sched, vec![VecOutput::default()], Clock::new()).unwrap();
        let mut c = rt.client().unwrap();
        send_numbered(&mut c, 0, 100, 200);
        // The arbiter thread arms (or not) before its first round: wait
        // until its published counters show a decision.
        let t0 = std::time::Instant::now();
        while rt.stats().arbiter.decisions == 0 {
            assert!(t0.elapsed().as_secs() < 10, "{nice:?}: no decision in 10 s");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let h = rt.humble_stats();
        assert!(!h.armed && !h.lowered && h.periods == 0, "{nice:?}: {h:?}");
        drop(c);
        let r = rt.stop(StopMode::Drain).unwrap();
        let seqs: Vec<u64> = r.outputs[0].pkts.iter().map(|p| p.item).collect();
        assert_eq!(seqs, (0..200).collect::<Vec<u64>>(), "{nice:?}");
    }
}
