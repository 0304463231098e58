//! The arbiter on a virtual clock: every round is driven with an explicit
//! `now`.

use std::collections::VecDeque;
use std::sync::PoisonError;

use pktsched_core::{Algorithm, FlowId, Nanos, Pkt, Rate};

use super::Arbiter;
use crate::client::{SendError, Stopped, meta_stats};
use crate::config::{Config, Sent, StopMode, add_flows};
use crate::output::{NullOutput, VecOutput};

fn arbiter(
    alg: Algorithm,
    link: Rate,
    weights: &[u32],
    limit: u32,
) -> Arbiter<u64, VecOutput<u64>> {
    let cfg = Config::new(link);
    let mut a = Arbiter::new(&cfg, alg.build_send::<u64>(), VecOutput::default())
        .unwrap_or_else(|e| panic!("{e}"));
    add_flows(a.scheduler().as_mut(), weights, weights.len(), limit)
        .unwrap_or_else(|e| panic!("{e}"));
    a
}

/// A one-flow FIFO arbiter on `cfg`'s link.
fn fifo_arbiter(cfg: &Config) -> Arbiter<u64, VecOutput<u64>> {
    let mut a = Arbiter::new(
        cfg,
        Algorithm::Fifo.build_send::<u64>(),
        VecOutput::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    add_flows(a.scheduler().as_mut(), &[1], 1, 1024).unwrap_or_else(|e| panic!("{e}"));
    a
}

/// A FIFO arbiter on 1 Gbit/s that restarts an idle link at arrivals, its
/// client, and an empty first round at 0 (the link idle from then on).
fn restarting_at_arrival() -> (Arbiter<u64, VecOutput<u64>>, crate::client::Client<u64>) {
    let mut a = arbiter(Algorithm::Fifo, Rate::gbit(1), &[1], 1024);
    a.set_restart_at_arrival(true);
    let c = a.client().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.do_scan(Nanos(0)).released, 0);
    (a, c)
}

fn pkt(flow: u32, len: u32, seq: u64) -> Pkt<u64> {
    Pkt::new(FlowId(flow), len, Nanos(0), seq)
}

#[test]
fn packets_flow_from_clients_through_the_link_in_order() {
    let mut a = arbiter(Algorithm::Fifo, Rate::gbit(1), &[1], 1024);
    let mut c = a.client().unwrap_or_else(|e| panic!("{e}"));
    for i in 0..10 {
        assert_eq!(c.send(pkt(0, 125, i)), Ok(Sent::Queued));
    }
    // 125 bytes at 1 Gbit/s = 1 µs each: at t = 0 only the first leaves.
    let r = a.do_scan(Nanos(0));
    assert_eq!((r.drained, r.released, r.backlog), (10, 1, 9));
    assert_eq!(r.link_free, Nanos(1000));
    let r = a.do_scan(Nanos(999));
    assert_eq!(r.released, 0);
    // Packets may start at 1, 2, 3 and 4 µs.
    let r = a.do_scan(Nanos(4000));
    assert_eq!(r.released, 4);
    let r = a.do_scan(Nanos(100_000));
    assert_eq!(r.released, 5);
    let out = a
        .output()
        .map(|o| o.pkts.iter().map(|p| p.item).collect::<Vec<_>>());
    assert_eq!(out, Some((0..10).collect()));
    assert_eq!(a.stats().decisions, 10);
}

/// A burst lets the link run ahead of the clock by that many bytes, never
/// more, and the long-run rate stays exact.
#[test]
fn a_burst_releases_ahead_of_the_clock_by_at_most_its_bytes() {
    let mut cfg = Config::new(Rate::gbit(1));
    cfg.burst = 250; // two 125-byte packets: 2 µs at 1 Gbit/s
    let mut a = fifo_arbiter(&cfg);
    assert_eq!(a.link_lead(), Nanos(2000));
    let mut c = a.client().unwrap_or_else(|e| panic!("{e}"));
    for i in 0..100 {
        assert_eq!(c.send(pkt(0, 125, i)), Ok(Sent::Queued));
    }
    // At t = 0: the packet due now and the two that start within 2 µs.
    let r = a.do_scan(Nanos(0));
    assert_eq!((r.released, r.link_free), (3, Nanos(3000)));
    assert_eq!(a.do_scan(Nanos(500)).released, 0);
    // Later rounds keep the lead and no more: the link is never more than
    // 2 µs (plus the packet in hand) ahead of the clock.
    for t in (1_000..100_000).step_by(1_000) {
        let r = a.do_scan(Nanos(t));
        assert!(
            r.link_free.0 <= t + 3_000,
            "t {t}: link free at {}",
            r.link_free.0
        );
    }
    // 100 packets of 1 µs each: the last started at 99 µs at the latest.
    let r = a.do_scan(Nanos(100_000));
    assert_eq!(r.backlog, 0);
    assert_eq!(a.stats().decisions, 100);
    assert!(
        Config {
            burst: 1 << 25,
            ..Config::new(Rate::gbit(1))
        }
        .validate()
        .is_err()
    );
}

/// Shares under overload follow the weights (QFQ, virtual clock).
#[test]
fn shares_follow_weights_under_overload() {
    let weights = [1u32, 2, 4, 8];
    let mut a = arbiter(Algorithm::Qfq, Rate::gbit(10), &weights, 64);
    let mut clients: Vec<_> = (0..4)
        .map(|_| a.client().unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let mut now = Nanos(0);
    let mut seq = 0;
    for _ in 0..20_000 {
        for (i, c) in clients.iter_mut().enumerate() {
            // Keep every client's mailbox topped up: overload.
            while c.pending() < 32 {
                seq += 1;
                match c.send(pkt(i as u32, 1500, seq)) {
                    Ok(_) => {}
                    Err(e) => panic!("mailbox full: {:?}", e.into_pkt().item),
                }
            }
        }
        now = Nanos(now.0 + 1200); // one 1500-byte packet time at 10 Gbit/s
        a.do_scan(now);
    }
    let out = a.output().map(|o| o.pkts.clone()).unwrap_or_default();
    let mut per = [0u64; 4];
    // Skip the start-up transient.
    for p in &out[1000..] {
        per[p.flow.0 as usize] += 1;
    }
    let total: u64 = per.iter().sum();
    for (i, w) in weights.iter().enumerate() {
        let share = per[i] as f64 / total as f64;
        let want = f64::from(*w) / 15.0;
        assert!(
            (share - want).abs() / want < 0.01,
            "flow {i}: {share} vs {want}"
        );
    }
    // The scheduler's queues overflowed: drops were reported as backpressure.
    let report = a.stop(StopMode::Return, now);
    let bp: u64 = report.clients.iter().map(|c| c.dropped_queue_full).sum();
    assert!(bp > 0);
}

#[test]
fn backpressure_is_reported_on_the_next_send() {
    let mut a = arbiter(Algorithm::Fifo, Rate::mbit(1), &[1], 2);
    let mut c = a.client().unwrap_or_else(|e| panic!("{e}"));
    for i in 0..4 {
        assert_eq!(c.send(pkt(0, 100, i)), Ok(Sent::Queued));
    }
    a.do_scan(Nanos(0)); // 1 released, 2 queued, 1 dropped (limit 2)
    assert_eq!(c.send(pkt(0, 100, 9)), Ok(Sent::Backpressure));
    assert_eq!(c.send(pkt(0, 100, 10)), Ok(Sent::Queued));
    let r = a.stop(StopMode::Return, Nanos(1));
    assert_eq!(r.clients[0].backpressure_events, 1);
    assert_eq!(r.clients[0].dropped_queue_full, 1 + 2);
}

#[test]
fn full_mailbox_hands_the_packet_back() {
    let cfg = Config {
        mailbox_capacity: 28,
        ..Config::new(Rate::gbit(1))
    };
    let a: Arbiter<u64, NullOutput> =
        Arbiter::new(&cfg, Algorithm::Fifo.build_send(), NullOutput::default())
            .unwrap_or_else(|e| panic!("{e}"));
    let mut c = a.client().unwrap_or_else(|e| panic!("{e}"));
    let mut n = 0;
    let err = loop {
        match c.send(pkt(0, 100, n)) {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(n, 28);
    assert_eq!(err, SendError::Full(pkt(0, 100, 28)));
    let r = a.stop(StopMode::Drain, Nanos(0));
    assert_eq!(r.clients[0].mailbox_full, 1);
    assert_eq!(r.clients[0].sent, 28);
}

fn client_transmit_arbiter(tx_capacity: usize) -> Arbiter<u64, NullOutput> {
    let cfg = Config {
        client_transmit: true,
        tx_capacity,
        ..Config::new(Rate::gbit(100))
    };
    let mut a: Arbiter<u64, NullOutput> =
        Arbiter::new_client_transmit(&cfg, Algorithm::Drr.build_send())
            .unwrap_or_else(|e| panic!("{e}"));
    add_flows(a.scheduler().as_mut(), &[1, 1], 2, 1000).unwrap_or_else(|e| panic!("{e}"));
    a
}

#[test]
fn cleared_packets_go_back_to_the_client_that_sent_them() {
    let mut a = client_transmit_arbiter(1024);
    let mut c0 = a.client().unwrap_or_else(|e| panic!("{e}"));
    let mut c1 = a.client().unwrap_or_else(|e| panic!("{e}"));
    for i in 0..3 {
        c0.send(pkt(0, 100, i)).unwrap_or_else(|_| panic!("send"));
        c1.send(pkt(1, 100, 10 + i))
            .unwrap_or_else(|_| panic!("send"));
    }
    // The first leaves at 1 ms (the link idled until then: no credit),
    // the other five within the next microsecond (8 ns each).
    a.do_scan(Nanos(1_000_000));
    a.do_scan(Nanos(1_001_000));
    assert_eq!(a.stats().decisions, 6);
    let (mut got0, mut got1) = (Vec::new(), Vec::new());
    assert_eq!(c0.take_cleared(&mut got0), 3);
    assert_eq!(c1.take_cleared(&mut got1), 3);
    let items = |v: &[Pkt<u64>]| v.iter().map(|p| p.item).collect::<Vec<_>>();
    assert_eq!(items(&got0), vec![0, 1, 2]);
    assert_eq!(items(&got1), vec![10, 11, 12]);
    assert_eq!(c0.take_cleared(&mut got0), 0);
    let r = a.stop(StopMode::Drain, Nanos(1_000_001));
    assert!(r.outputs.is_empty());
    assert_eq!(r.returned_cleared, 0);
}

#[test]
fn a_full_return_mailbox_holds_packets_back_and_stop_hands_them_over() {
    let mut a = client_transmit_arbiter(28);
    let mut c = a.client().unwrap_or_else(|e| panic!("{e}"));
    for i in 0..40 {
        c.send(pkt(0, 100, i)).unwrap_or_else(|_| panic!("send"));
    }
    a.do_scan(Nanos(1_000_000));
    a.do_scan(Nanos(1_001_000));
    assert_eq!(a.stats().decisions, 40);
    assert!(a.stats().tx_full > 0);
    let mut got = Vec::new();
    let first = c.take_cleared(&mut got);
    assert!(first > 0 && first < 40, "{first}");
    // The next round pushes more of what waited.
    a.do_scan(Nanos(1_001_000));
    let second = c.take_cleared(&mut got);
    assert!(second > 0);
    // Never collected again: stop hands the rest back.
    let r = a.stop(StopMode::Return, Nanos(1_002_000));
    let after = c.take_cleared(&mut got);
    let items: Vec<u64> = got
        .iter()
        .chain(r.returned.iter())
        .map(|p| p.item)
        .collect();
    assert_eq!(items, (0..40).collect::<Vec<_>>(), "in order, none lost");
    assert_eq!(r.returned_cleared, 40 - (first + second + after) as u64);
    assert_eq!(
        r.sched.enqueued.pkts,
        r.arbiter.decisions + r.flushed + r.returned.len() as u64 - r.returned_cleared
    );
}

#[test]
fn report_reads_like_tc_s() {
    let mut a = arbiter(Algorithm::Fifo, Rate::kbit(1), &[1], 2);
    let mut c = a.client().unwrap_or_else(|e| panic!("{e}"));
    for i in 0..4 {
        c.send(pkt(0, 100, i))
            .unwrap_or_else(|_| panic!("send {i}"));
    }
    a.do_scan(Nanos(0));
    let r = a.stop(StopMode::Return, Nanos(1));
    let text = r.tc_style("fifo");
    for want in [
        "qdisc fifo (pspat arbiter)",
        "Sent 100 bytes 1 pkt (dropped 1, queue_full 1, overlimits 0)",
        // p1 was queued, p3 was still in the mailbox: both handed back.
        "returned at stop 2p",
        "arbiter: 1 decisions",
        "client 0: sent 4 (mailbox full 0, backpressure 0, refused at stop 0) drained 4 \
         dropped queue_full 1 too_large 0 unknown_flow 0",
    ] {
        assert!(text.contains(want), "missing `{want}` in:\n{text}");
    }
}

#[test]
fn batch_send_takes_what_fits_and_keeps_the_rest() {
    let cfg = Config {
        mailbox_capacity: 28,
        ..Config::new(Rate::gbit(1))
    };
    let mut a: Arbiter<u64, VecOutput<u64>> =
        Arbiter::new(&cfg, Algorithm::Fifo.build_send(), VecOutput::default())
            .unwrap_or_else(|e| panic!("{e}"));
    add_flows(a.scheduler().as_mut(), &[1], 1, 1000).unwrap_or_else(|e| panic!("{e}"));
    let mut c = a.client().unwrap_or_else(|e| panic!("{e}"));
    let mut q: VecDeque<Pkt<u64>> = (0..34).map(|i| pkt(0, 100, i)).collect();
    assert_eq!(c.send_batch(&mut q), Ok((28, Sent::Queued)));
    assert_eq!(q.len(), 6);
    assert_eq!(
        q.front().map(|p| p.item),
        Some(28),
        "the rest stays in order"
    );
    assert_eq!(c.send_batch(&mut q), Ok((0, Sent::Queued)));
    a.do_scan(Nanos(0));
    assert_eq!(c.send_batch(&mut q), Ok((6, Sent::Queued)));
    assert!(q.is_empty());
    let r = a.stop(StopMode::Drain, Nanos(1_000_000));
    assert_eq!(r.clients[0].sent, 34);
    assert_eq!(r.clients[0].mailbox_full, 2);
    let out = r
        .outputs
        .first()
        .map(|o| o.pkts.iter().map(|p| p.item).collect::<Vec<_>>());
    assert_eq!(out, Some((0..34).collect()));
    let mut q: VecDeque<Pkt<u64>> = (0..3).map(|i| pkt(0, 100, i)).collect();
    assert_eq!(c.send_batch(&mut q), Err(Stopped));
    assert_eq!(q.len(), 3, "a refused batch is left untouched");
}

#[test]
fn a_read_stops_at_the_first_drop_and_leaves_the_rest_queued() {
    let mut a = arbiter(Algorithm::Fifo, Rate::kbit(1), &[1], 2);
    let mut c = a.client().unwrap_or_else(|e| panic!("{e}"));
    for i in 0..10 {
        c.send(pkt(0, 100, i))
            .unwrap_or_else(|_| panic!("send {i}"));
    }
    let r = a.do_scan(Nanos(0));
    // Two fit the flow's queue, the third is dropped, seven wait.
    assert_eq!(r.drained, 3);
    assert_eq!(r.released, 1, "the idle link takes one at once");
    assert_eq!(a.stats().dropped, 1);
    assert_eq!(c.pending(), 7);
    assert_eq!(
        c.send(pkt(0, 100, 10)).unwrap_or_else(|_| panic!("send")),
        Sent::Backpressure
    );
    let rep = a.stop(StopMode::Return, Nanos(1));
    let cs = &rep.clients[0];
    assert_eq!(cs.sent, 11);
    assert_eq!(cs.drained, 11);
    assert_eq!(cs.dropped_queue_full + rep.sched.enqueued.pkts, 11);
}

#[test]
fn idle_clients_are_trimmed_at_settles_and_come_back_when_they_send() {
    let mut a = arbiter(Algorithm::Rr, Rate::gbit(100), &[1, 1], 64);
    let mut c0 = a.client().unwrap_or_else(|e| panic!("{e}"));
    let mut c1 = a.client().unwrap_or_else(|e| panic!("{e}"));
    assert!(a.active_clients().is_empty());
    c0.send(pkt(0, 64, 1)).unwrap_or_else(|_| panic!("send"));
    c1.send(pkt(1, 64, 2)).unwrap_or_else(|_| panic!("send"));
    a.do_scan(Nanos(0));
    assert_eq!(a.active_clients(), vec![0, 1]);
    // read_interval is 1 µs: reads at 2, 4 µs find nothing → trimmed.
    c1.send(pkt(1, 64, 3)).unwrap_or_else(|_| panic!("send"));
    a.do_scan(Nanos(2000));
    a.do_scan(Nanos(4000));
    assert_eq!(a.active_clients(), vec![1]);
    assert_eq!(a.stats().settles, 1);
    // Client 1 is idle from 8 µs, but settles (heavy barriers) are at
    // least settle_interval = 1 ms apart: it leaves at 1.004 ms.
    a.do_scan(Nanos(6000));
    a.do_scan(Nanos(8000));
    assert_eq!(a.active_clients(), vec![1]);
    a.do_scan(Nanos(1_003_000));
    assert_eq!(a.active_clients(), vec![1]);
    a.do_scan(Nanos(1_004_000));
    assert!(a.active_clients().is_empty());
    assert_eq!(a.stats().settles, 2);
    c0.send(pkt(0, 64, 4)).unwrap_or_else(|_| panic!("send"));
    let r = a.do_scan(Nanos(1_010_000));
    assert_eq!(r.drained, 1);
    assert_eq!(a.active_clients(), vec![0]);
    // A mailbox is not read twice within read_interval.
    c0.send(pkt(0, 64, 5)).unwrap_or_else(|_| panic!("send"));
    assert_eq!(a.do_scan(Nanos(1_010_500)).drained, 0);
    assert_eq!(a.do_scan(Nanos(1_011_000)).drained, 1);
}

/// A read that stops at a drop, with packets held behind it, took only
/// one packet: the next read still waits out `read_interval` (1 µs), and
/// then offers the held packet first.
#[test]
fn a_read_that_holds_packets_back_waits_out_the_read_interval() {
    // 125 bytes at 1 Mbit/s: 1 ms on the link; one packet per flow queue.
    let mut a = arbiter(Algorithm::Fifo, Rate::mbit(1), &[1], 1);
    let mut c = a.client().unwrap_or_else(|e| panic!("{e}"));
    c.send(pkt(0, 125, 0)).unwrap_or_else(|_| panic!("send"));
    assert_eq!(a.do_scan(Nanos(0)).released, 1);
    c.send(pkt(0, 125, 1)).unwrap_or_else(|_| panic!("send"));
    // Queued behind the link.
    assert_eq!(a.do_scan(Nanos(1_000)).drained, 1);
    for i in 2..4 {
        c.send(pkt(0, 125, i)).unwrap_or_else(|_| panic!("send"));
    }
    // Packet 2 is dropped (the queue holds one), packet 3 held back.
    assert_eq!(a.do_scan(Nanos(2_000)).drained, 1);
    let deferred = a.stats().deferred_reads;
    assert_eq!(a.do_scan(Nanos(2_500)).drained, 0);
    assert_eq!(a.stats().deferred_reads, deferred + 1);
    // 1 µs after that read, the held packet is offered again (and dropped:
    // the link is still busy with packet 0).
    assert_eq!(a.do_scan(Nanos(3_000)).drained, 1);
    assert_eq!(a.stats().dropped, 2);
}

/// Every packet offered is accounted for, in both stop modes.
#[test]
fn stop_accounts_for_every_packet() {
    for mode in [StopMode::Drain, StopMode::Return] {
        let mut a = arbiter(Algorithm::Drr, Rate::mbit(10), &[1, 3], 50);
        let mut c = a.client().unwrap_or_else(|e| panic!("{e}"));
        let mut offered = 0u64;
        let mut full = 0u64;
        for i in 0..2000u64 {
            offered += 1;
            let len = if i % 3 == 0 { 2000 } else { 700 }; // 2000 > max_len: too_large
            let flow = if i % 7 == 0 { 9 } else { (i % 2) as u32 }; // 9: unknown
            if c.send(pkt(flow, len, i)).is_err() {
                full += 1;
            }
            if i % 50 == 0 {
                a.do_scan(Nanos(i * 1000));
            }
        }
        let r = a.stop(mode, Nanos(2_000_000));
        let cs = r.clients[0];
        assert_eq!(cs.sent + cs.mailbox_full, offered);
        assert_eq!(cs.mailbox_full, full);
        assert_eq!(cs.drained, cs.sent);
        let dropped = cs.dropped_queue_full + cs.dropped_too_large + cs.dropped_unknown_flow;
        assert!(cs.dropped_too_large > 0 && cs.dropped_unknown_flow > 0);
        assert_eq!(r.sched.enqueued.pkts + dropped, cs.drained);
        let out = r.outputs[0].pkts.len() as u64;
        assert_eq!(r.sched.enqueued.pkts, out + r.returned.len() as u64);
        assert_eq!(out, r.arbiter.decisions + r.flushed);
        match mode {
            StopMode::Drain => assert!(r.flushed > 0 && r.returned.is_empty()),
            StopMode::Return => assert!(r.flushed == 0 && !r.returned.is_empty()),
        }
        assert_eq!(r.sched.with_backlog().backlog.pkts, 0);
    }
}

#[test]
fn sends_after_stop_are_refused_and_counted() {
    let a = arbiter(Algorithm::Fifo, Rate::gbit(1), &[1], 16);
    let mut c = a.client().unwrap_or_else(|e| panic!("{e}"));
    let shared = a.shared.clone();
    let r = a.stop(StopMode::Drain, Nanos(0));
    assert_eq!(r.clients[0].sent, 0);
    assert!(matches!(c.send(pkt(0, 64, 1)), Err(SendError::Stopped(_))));
    assert_eq!(
        meta_stats(&shared.metas.lock().unwrap_or_else(PoisonError::into_inner)[0]).refused_stopped,
        1
    );
}

/// The arbiter's batched reads and releases decide exactly what the
/// per-packet loop decides: a reference runs that loop (read up to
/// `read_batch` packets in order, stop at the first drop and leave the rest
/// queued; release while the link, `burst` bytes ahead, is ready) with its
/// own scheduler and link on the same packets at the same instants, and
/// every round must release the same packets. Seeded random lengths,
/// bursts, gaps and small limits (so drops and held packets occur).
#[test]
fn batched_rounds_match_the_per_packet_loop() {
    use rand::{Rng, SeedableRng};

    use crate::link::Link;

    for (seed, alg) in [
        Algorithm::Qfq,
        Algorithm::Drr,
        Algorithm::Fifo,
        Algorithm::Wf2q,
    ]
    .into_iter()
    .enumerate()
    {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed as u64);
        let rate = Rate::mbit(rng.random_range(100..2000));
        let burst = [0u32, 1500, 9000][seed % 3];
        let weights = [1u32, 2, 5, 1];
        let mut cfg = Config::new(rate);
        cfg.read_interval = std::time::Duration::ZERO;
        cfg.burst = burst;
        cfg.read_batch = 16;
        cfg.round_cap = 24;
        let mut a = Arbiter::new(&cfg, alg.build_send::<u64>(), VecOutput::default())
            .unwrap_or_else(|e| panic!("{e}"));
        add_flows(a.scheduler().as_mut(), &weights, 4, 12).unwrap_or_else(|e| panic!("{e}"));
        let mut reference = alg.build_send::<u64>();
        add_flows(reference.as_mut(), &weights, 4, 12).unwrap_or_else(|e| panic!("{e}"));
        let mut link = Link::new(rate);
        let lead = rate.tx_time(u64::from(burst));
        let mut c = a.client().unwrap_or_else(|e| panic!("{e}"));
        let (mut queued, mut want_out) = (VecDeque::new(), Vec::new());
        let (mut now, mut seq, mut drops) = (0u64, 0u64, 0u64);
        // The scheduler was empty after the last round: the link idled.
        let mut was_empty = true;
        for round in 0..4000 {
            for _ in 0..rng.random_range(0..12) {
                let p = pkt(rng.random_range(0..4), rng.random_range(60..=1500), seq);
                seq += 1;
                if c.send(p.clone()).is_ok() {
                    queued.push_back(p);
                }
            }
            now += rng.random_range(0..30_000);
            let t = Nanos(now);
            // The per-packet loop.
            let mut drained = 0;
            while drained < cfg.read_batch {
                let Some(p) = queued.pop_front() else { break };
                drained += 1;
                if reference.enqueue(p, t).is_err() {
                    drops += 1;
                    break;
                }
            }
            let (cap, mut released) = (cfg.round_cap.max(drained), 0);
            if was_empty {
                link.idle(t);
            }
            while released < cap && link.ready(Nanos(now + lead.0)) {
                let Some(p) = reference.dequeue(t) else {
                    link.idle(t);
                    break;
                };
                link.send(p.len);
                want_out.push(p.item);
                released += 1;
            }
            let r = a.do_scan(t);
            assert_eq!(
                (r.drained, r.released),
                (drained, released),
                "{alg:?} round {round}"
            );
            assert_eq!(r.link_free, link.free_at(), "{alg:?} round {round}");
            was_empty = reference.backlog().pkts == 0;
            // Held packets count as pending; the estimate is clamped to the
            // mailbox's capacity.
            let cap = a.clients[0].rx.capacity();
            assert_eq!(c.pending(), queued.len().min(cap), "{alg:?} round {round}");
        }
        let got: Vec<u64> = a
            .output()
            .map(|o| o.pkts.iter().map(|p| p.item).collect())
            .unwrap_or_default();
        assert_eq!(got, want_out, "{alg:?}");
        assert_eq!(a.stats().dropped, drops, "{alg:?}");
        assert!(
            drops > 0 && want_out.len() > 5_000,
            "{alg:?}: {drops} drops, {} out",
            want_out.len()
        );
    }
}

/// What the nap is sized by: the packet in transmission plus the backlog
/// at the link's rate, and nothing once the scheduler is empty.
#[test]
fn busy_ahead_is_the_link_time_of_what_is_queued() {
    let mut a = arbiter(Algorithm::Fifo, Rate::gbit(1), &[1], 1024);
    assert_eq!(a.busy_ahead(Nanos(0)), Nanos(0));
    let mut c = a.client().unwrap_or_else(|e| panic!("{e}"));
    for i in 0..10 {
        assert_eq!(c.send(pkt(0, 125, i)), Ok(Sent::Queued));
    }
    // One packet leaves at 0 (busy until 1 µs), nine queued: 9 µs more.
    a.do_scan(Nanos(0));
    assert_eq!(a.busy_ahead(Nanos(0)), Nanos(10_000));
    assert_eq!(a.busy_ahead(Nanos(400)), Nanos(9_600));
    // At 2.5 µs the packets due at 1 and 2 µs leave (the link catches
    // up); the next starts at 3 µs, seven are queued.
    let r = a.do_scan(Nanos(2_500));
    assert_eq!(r.released, 2);
    assert_eq!(a.busy_ahead(Nanos(2_500)), Nanos(7_500));
    a.do_scan(Nanos(1_000_000));
    assert_eq!(a.busy_ahead(Nanos(1_000_000)), Nanos(0));
}

/// A link that idled with nothing queued (the arbiter slept) gives no
/// credit: packets that arrive later leave one per transmission time from
/// the round that drains them, not back to back as if they had been
/// queued since the link went idle.
#[test]
fn an_idle_link_is_not_caught_up_after_the_scheduler_was_empty() {
    let mut a = arbiter(Algorithm::Fifo, Rate::gbit(1), &[1], 1024);
    let mut c = a.client().unwrap_or_else(|e| panic!("{e}"));
    // An empty round at 0 (the link idle from then on), then nothing
    // until 1 ms.
    assert_eq!(a.do_scan(Nanos(0)).released, 0);
    for i in 0..10 {
        assert_eq!(c.send(pkt(0, 125, i)), Ok(Sent::Queued));
    }
    let r = a.do_scan(Nanos(1_000_000));
    assert_eq!((r.drained, r.released), (10, 1));
    assert_eq!(r.link_free, Nanos(1_001_000));
    // With a backlog the link does catch up after a late round.
    let r = a.do_scan(Nanos(1_003_500));
    assert_eq!(r.released, 3);
}

/// Packets put into the scheduler directly (through `scheduler()`), longer
/// than any the mailboxes brought: once a run of them has been released,
/// the arbiter plans its next runs with their length, so the next packet
/// still starts within `burst` of the clock (a bound of the shorter
/// length would let two start at 13 µs, the second at 32 µs).
#[test]
fn packets_lent_in_past_the_mailboxes_raise_the_release_bound() {
    let mut cfg = Config::new(Rate::gbit(1));
    cfg.burst = 1250; // 10 µs at 1 Gbit/s
    cfg.round_cap = 2;
    let mut a = fifo_arbiter(&cfg);
    let mut c = a.client().unwrap_or_else(|e| panic!("{e}"));
    // A 125-byte packet through the mailbox: the bound is 125 bytes.
    assert_eq!(c.send(pkt(0, 125, 0)), Ok(Sent::Queued));
    assert_eq!(a.do_scan(Nanos(0)).released, 1);
    for i in 1..=5 {
        a.scheduler()
            .enqueue(pkt(0, 1250, i), Nanos(1000))
            .unwrap_or_else(|e| panic!("{e:?}"));
    }
    // Link idle from 2 µs: two of the round's cap start at 2 and 12 µs.
    let r = a.do_scan(Nanos(2000));
    assert_eq!((r.released, r.link_free), (2, Nanos(22_000)));
    // At 13 µs the link may run until 23 µs: one 10 µs packet starts (at
    // 22 µs), not two.
    let r = a.do_scan(Nanos(13_000));
    assert_eq!((r.released, r.link_free), (1, Nanos(32_000)));
    let r = a.do_scan(Nanos(100_000));
    assert_eq!((r.released, r.backlog), (2, 0));
}

/// `pkt` stamped at `ts`.
fn pkt_at(flow: u32, len: u32, seq: u64, ts: u64) -> Pkt<u64> {
    Pkt::new(FlowId(flow), len, Nanos(ts), seq)
}

/// Restarting at arrivals: packets that arrived at 0.5 ms while the link
/// idled (the arbiter away until 1 ms) take the link from 0.5 ms, not
/// from the round that drains them (as `an_idle_link_is_not_caught_up_
/// after_the_scheduler_was_empty` does without it); never before the
/// link was free, never before the packets arrived, never after `now`.
#[test]
fn an_idle_link_restarts_at_the_last_arrival_never_before_it_was_free() {
    let (mut a, mut c) = restarting_at_arrival();
    for i in 0..10 {
        assert_eq!(c.send(pkt_at(0, 125, i, 500_000)), Ok(Sent::Queued));
    }
    // 1 µs each: all ten started by 1 ms, the link free at 0.51 ms.
    let r = a.do_scan(Nanos(1_000_000));
    assert_eq!((r.drained, r.released, r.backlog), (10, 10, 0));
    assert_eq!(r.link_free, Nanos(510_000));
    // A 12 µs packet keeps the link busy from 1.51 to 1.522 ms; ten
    // that arrived at 1.515 ms (while it was busy) follow it from then.
    assert_eq!(c.send(pkt_at(0, 1500, 10, 1_510_000)), Ok(Sent::Queued));
    let r = a.do_scan(Nanos(1_510_000));
    assert_eq!((r.released, r.link_free), (1, Nanos(1_522_000)));
    for i in 11..21 {
        assert_eq!(c.send(pkt_at(0, 125, i, 1_515_000)), Ok(Sent::Queued));
    }
    let r = a.do_scan(Nanos(3_000_000));
    assert_eq!((r.released, r.link_free), (10, Nanos(1_532_000)));
    // Arrivals at 4 ms after the link was free at 1.532 ms: from 4 ms
    // (no credit for the idle time in between), one per µs.
    for i in 21..31 {
        assert_eq!(c.send(pkt_at(0, 125, i, 4_000_000)), Ok(Sent::Queued));
    }
    let r = a.do_scan(Nanos(4_003_500));
    assert_eq!((r.released, r.link_free), (4, Nanos(4_004_000)));
    a.do_scan(Nanos(5_000_000));
    // Stamped after the round's clock (another thread's clock read): the
    // link starts at the round's time, never ahead of it.
    for i in 31..33 {
        assert_eq!(c.send(pkt_at(0, 125, i, 7_000_000)), Ok(Sent::Queued));
    }
    let r = a.do_scan(Nanos(6_000_000));
    assert_eq!((r.released, r.link_free), (1, Nanos(6_001_000)));
}

/// Restarting at arrivals, one round drains a 125-byte packet that arrived
/// at 1 µs and 63 of 1500 bytes that arrived at 900 µs: the link restarts
/// at 900 µs, when all of them were there, so ten start by 1 ms (900, 901,
/// 913, ... 997 µs). From the first arrival (1 µs) all 64 would have left
/// at once on link time from before the 63 arrived.
#[test]
fn an_idle_link_restarts_when_the_last_of_a_round_s_packets_arrived() {
    let (mut a, mut c) = restarting_at_arrival();
    assert_eq!(c.send(pkt_at(0, 125, 0, 1_000)), Ok(Sent::Queued));
    for i in 1..64 {
        assert_eq!(c.send(pkt_at(0, 1500, i, 900_000)), Ok(Sent::Queued));
    }
    let r = a.do_scan(Nanos(1_000_000));
    assert_eq!((r.drained, r.released), (64, 10));
    assert_eq!(r.link_free, Nanos(1_009_000));
}

/// Restarting at arrivals, 300 packets that arrived at 1 ms are drained
/// from 10 ms on, a read batch (64) a round: every round releases all it
/// read and empties the scheduler, and the next one continues the link
/// from where those left it, so the 300 occupy the link from 1 ms on
/// without a gap (the link restarting at each round's time would lose
/// the 9 ms again after every read batch).
#[test]
fn rounds_that_empty_the_scheduler_leave_the_link_to_the_next_arrivals() {
    let (mut a, mut c) = restarting_at_arrival();
    for i in 0..300 {
        assert_eq!(c.send(pkt_at(0, 125, i, 1_000_000)), Ok(Sent::Queued));
    }
    let mut now = 10_000_000;
    let mut released = Vec::new();
    let mut free = Vec::new();
    let mut r = a.do_scan(Nanos(now));
    while r.drained > 0 {
        released.push(r.released);
        free.push(r.link_free.0);
        now += 1_000;
        r = a.do_scan(Nanos(now));
    }
    assert_eq!(released, [64, 64, 64, 64, 44]);
    // 1 µs each, back to back from 1 ms.
    assert_eq!(
        free,
        [1_064_000, 1_128_000, 1_192_000, 1_256_000, 1_300_000]
    );
    // A round that drained nothing: the link idles from its time on.
    assert_eq!((r.released, r.link_free), (0, Nanos(now)));
    // Later arrivals find the link idle since then: from their arrival.
    assert_eq!(c.send(pkt_at(0, 125, 300, 12_000_000)), Ok(Sent::Queued));
    let r = a.do_scan(Nanos(12_500_000));
    assert_eq!((r.released, r.link_free), (1, Nanos(12_001_000)));
}

/// Client-transmit: a packet put in past the mailboxes (no client sent
/// it) has no client to go back to; it is counted, not lost silently.
#[test]
fn an_unowned_packet_in_client_transmit_is_counted() {
    let mut a = client_transmit_arbiter(1024);
    let _c = a.client().unwrap_or_else(|e| panic!("{e}"));
    assert!(a.scheduler().enqueue(pkt(0, 100, 7), Nanos(0)).is_ok());
    a.do_scan(Nanos(1_000_000));
    assert_eq!((a.stats().decisions, a.stats().unowned_dropped), (1, 1));
}

/// A caller that puts packets in past the mailboxes and gives the wire's
/// largest frame (`raise_len_bound`) gets runs planned with it from the
/// start: after a 64-byte packet, 1250-byte ones go one at a time within
/// the 10 µs burst, not as a run planned for 64-byte packets.
#[test]
fn a_raised_length_bound_plans_the_first_runs() {
    for (bound, released) in [(0, 5), (1250, 1)] {
        let mut cfg = Config::new(Rate::gbit(1));
        cfg.burst = 1250; // 10 µs at 1 Gbit/s
        let mut a = fifo_arbiter(&cfg);
        a.raise_len_bound(bound);
        assert!(a.scheduler().enqueue(pkt(0, 64, 0), Nanos(0)).is_ok());
        assert_eq!(a.do_scan(Nanos(0)).released, 1);
        for i in 1..=5 {
            assert!(a.scheduler().enqueue(pkt(0, 1250, i), Nanos(0)).is_ok());
        }
        assert_eq!(a.do_scan(Nanos(0)).released, released, "bound {bound}");
    }
}

/// Packets a shaper held (not due) start when they become due, not on
/// credit from when the link went idle: two flows capped at 100 Mbit/s
/// (1500 bytes every 120 µs, no credit ahead) on a 1 Gbit/s link (12 µs
/// per packet).
#[test]
fn packets_a_shaper_held_start_when_due_not_on_idle_credit() {
    use pktsched_core::policy::{FlowParams, Policy, PolicySched};
    let policy = Policy::from_toml(
        "[policy]\nmax_len = 1514\n\n[[node]]\nname = \"classes\"\nkind = \"hclock\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut sched = PolicySched::<u64>::new(&policy);
    let mut flows = Vec::new();
    for _ in 0..2 {
        let f = pktsched_core::Scheduler::add_flow(&mut sched, Default::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let params = FlowParams {
            rate: Some(Rate::mbit(100)),
            cburst: Some(0),
            ..FlowParams::default()
        };
        pktsched_core::Scheduler::set_flow_params(&mut sched, f, params, Nanos(0))
            .unwrap_or_else(|e| panic!("{e}"));
        flows.push(f);
    }
    let mut a = Arbiter::new(
        &Config::new(Rate::gbit(1)),
        Box::new(sched),
        VecOutput::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    a.raise_len_bound(1500);
    for (i, f) in flows.iter().enumerate() {
        for k in 0..2u64 {
            let p = Pkt::new(*f, 1500, Nanos(0), 10 * i as u64 + k);
            assert!(a.scheduler().enqueue(p, Nanos(0)).is_ok());
        }
    }
    // A's first at 0, B's at 12 µs (the link busy until 24 µs); A's
    // second is due at 120 µs, B's at 132 µs.
    assert_eq!(a.do_scan(Nanos(0)).released, 1);
    assert_eq!(a.do_scan(Nanos(12_000)).released, 1);
    assert_eq!(a.do_scan(Nanos(60_000)).released, 0);
    let r = a.do_scan(Nanos(120_000));
    // It starts at 120 µs: the link is busy until 132, not until 36 (as
    // if it had started when the link went idle, at 24).
    assert_eq!((r.released, r.link_free), (1, Nanos(132_000)));
    let r = a.do_scan(Nanos(132_000));
    assert_eq!((r.released, r.backlog, r.link_free), (1, 0, Nanos(144_000)));
}

/// Restarting at arrivals, a round that empties the scheduler leaves the
/// link behind the clock (free at 1.01 ms at the 2 ms round); a change of
/// the link's settings at 3 ms moves it to 3 ms, so a packet stamped
/// 2.5 ms and drained at 4 ms starts at 3 ms, at the new rate, not on
/// link time from before the change.
#[test]
fn a_settings_change_restarts_an_empty_link_no_earlier_than_the_change() {
    let (mut a, mut c) = restarting_at_arrival();
    assert_eq!(c.send(pkt_at(0, 1250, 0, 1_000_000)), Ok(Sent::Queued));
    let r = a.do_scan(Nanos(2_000_000));
    assert_eq!((r.released, r.link_free), (1, Nanos(1_010_000)));
    a.set_link_rate(Rate::mbit(100));
    a.link_settings_changed(Nanos(3_000_000));
    assert_eq!(c.send(pkt_at(0, 1250, 1, 2_500_000)), Ok(Sent::Queued));
    let r = a.do_scan(Nanos(4_000_000));
    assert_eq!((r.released, r.link_free), (1, Nanos(3_100_000)));
}

/// Restarting at arrivals on 1 Gbit/s (8 ns a byte), an hclock with class
/// A capped at 10 Mbit/s (1500 bytes every 1.2 ms, no credit ahead) and
/// class B uncapped, and their client; rounds release at most
/// `round_cap` packets (or as many as they drained).
fn held_and_free(
    round_cap: usize,
) -> (
    Arbiter<u64, VecOutput<u64>>,
    crate::client::Client<u64>,
    FlowId,
    FlowId,
) {
    use pktsched_core::policy::{FlowParams, Policy, PolicySched};
    let policy = Policy::from_toml(
        "[policy]\nmax_len = 1514\n\n[[node]]\nname = \"classes\"\nkind = \"hclock\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut sched = PolicySched::<u64>::new(&policy);
    let mut add = |rate: Option<Rate>| {
        let f = pktsched_core::Scheduler::add_flow(&mut sched, Default::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let params = FlowParams {
            rate,
            cburst: Some(0),
            ..FlowParams::default()
        };
        pktsched_core::Scheduler::set_flow_params(&mut sched, f, params, Nanos(0))
            .unwrap_or_else(|e| panic!("{e}"));
        f
    };
    let (held, free) = (add(Some(Rate::mbit(10))), add(None));
    let mut cfg = Config::new(Rate::gbit(1));
    cfg.round_cap = round_cap;
    let mut a =
        Arbiter::new(&cfg, Box::new(sched), VecOutput::default()).unwrap_or_else(|e| panic!("{e}"));
    a.set_restart_at_arrival(true);
    let c = a.client().unwrap_or_else(|e| panic!("{e}"));
    (a, c, held, free)
}

/// Restarting at arrivals while a shaper holds packets back, where the
/// held packet became due after the arrival: A1 is due at 1.2 ms, a B
/// packet was stamped 1.15 ms, the round is at 1.3 ms. Whichever the
/// scheduler serves first, the link restarts at 1.2 ms, so A1 never starts
/// in link time before it was due: the two 1500-byte packets (12 µs each)
/// leave the link free at 1.224 ms (from B's stamp it would be 1.174 ms).
#[test]
fn a_held_packet_due_after_an_arrival_restarts_the_link_when_due() {
    let (mut a, mut c, held, free) = held_and_free(512);
    for seq in 0..2 {
        assert_eq!(
            c.send(Pkt::new(held, 1500, Nanos(1), seq)),
            Ok(Sent::Queued)
        );
    }
    let r = a.do_scan(Nanos(0));
    assert_eq!((r.released, r.backlog), (1, 1));
    assert_eq!(
        c.send(Pkt::new(free, 1500, Nanos(1_150_000), 100)),
        Ok(Sent::Queued)
    );
    let r = a.do_scan(Nanos(1_300_000));
    assert_eq!(
        (r.drained, r.released, r.backlog, r.link_free),
        (1, 2, 0, Nanos(1_224_000))
    );
}

/// Restarting at arrivals while a shaper holds packets back: packets of
/// another class that arrived during the hold restart the idle link at
/// their (latest) arrival, as after an empty round, never before the link
/// was free and never after the round's time; held packets that became
/// due meanwhile share that restart. Without arrivals held packets start
/// when they became due (never after the round's time). The hold is found
/// whether the last release saw it (it found nothing due) or stopped on
/// the busy link before (the link became free between rounds). Every start below is computed here from
/// the stamps, the link's free time and 8 ns a byte (burst 0: a packet is
/// released if it starts by the round's time).
#[test]
fn an_idle_link_held_by_a_shaper_restarts_at_other_classes_arrivals() {
    let (mut a, mut c, held, free) = held_and_free(512);
    let tx = |bytes: u64| bytes * 8;
    let restart = |link_free: u64, latest: u64, now: u64| link_free.max(latest.min(now));
    // Packets that start back to back from `start` by `now`, of `n`.
    let started = |start: u64, bytes: u64, n: u64, now: u64| n.min((now - start) / tx(bytes) + 1);
    let mut b_seq = 100;
    let mut send_b = |c: &mut crate::client::Client<u64>, n: u64, len: u32, ts: u64| {
        for _ in 0..n {
            let p = Pkt::new(free, len, Nanos(ts), b_seq);
            assert_eq!(c.send(p), Ok(Sent::Queued));
            b_seq += 1;
        }
    };
    // A0..A3 at 1 ns: A0 starts at 0 (the link free at 12 µs, the release
    // stops on it); A1 is due at 1.2 ms.
    for seq in 0..4 {
        assert_eq!(
            c.send(Pkt::new(held, 1500, Nanos(1), seq)),
            Ok(Sent::Queued)
        );
    }
    let r = a.do_scan(Nanos(0));
    assert_eq!(
        (r.released, r.backlog, r.link_free),
        (1, 3, Nanos(tx(1500)))
    );
    // The link became free at 12 µs with A1 held: it idled. Eight B
    // packets stamped 50 µs, drained at 100 µs, start from 50 µs (not
    // back to back from 12 µs, before they arrived): five by 100 µs.
    send_b(&mut c, 8, 1500, 50_000);
    let start = restart(tx(1500), 50_000, 100_000);
    assert_eq!((start, started(start, 1500, 8, 100_000)), (50_000, 5));
    let r = a.do_scan(Nanos(100_000));
    assert_eq!((r.drained, r.released), (8, 5));
    assert_eq!(r.link_free, Nanos(start + 5 * tx(1500)));
    // The other three follow (from 110 µs: B was queued, the link busy);
    // then only A is left, held: the link idles from the round's time.
    let r = a.do_scan(Nanos(200_000));
    assert_eq!((r.released, r.backlog, r.link_free), (3, 3, Nanos(200_000)));
    // A release that found A held: ten 125-byte B packets stamped 350 µs
    // and drained at 400 µs start from 350 µs, all by 400 µs (the round's
    // time would start one); the link then idles from 400 µs.
    send_b(&mut c, 10, 125, 350_000);
    let start = restart(200_000, 350_000, 400_000);
    assert_eq!((start, started(start, 125, 10, 400_000)), (350_000, 10));
    let r = a.do_scan(Nanos(400_000));
    assert_eq!(
        (r.drained, r.released, r.link_free),
        (10, 10, Nanos(400_000))
    );
    // Nothing arrived: A1 starts when it became due, at 1.2 ms (it has
    // waited since; from the round's time it would end at 1.312 ms), and
    // with A2 held the link idles from the round's time.
    let r = a.do_scan(Nanos(1_300_000));
    assert_eq!((r.released, r.link_free), (1, Nanos(1_300_000)));
    // A2 is due by 2.5 ms. Six B packets stamped 2.55 ms, the arbiter away
    // until 2.6 ms: A2 and the six start back to back from 2.55 ms, five
    // of the seven by 2.6 ms (from 1.312 ms all seven would).
    send_b(&mut c, 6, 1500, 2_550_000);
    let start = restart(1_300_000, 2_550_000, 2_600_000);
    assert_eq!((start, started(start, 1500, 7, 2_600_000)), (2_550_000, 5));
    let r = a.do_scan(Nanos(2_600_000));
    assert_eq!((r.drained, r.released), (6, 5));
    assert_eq!(r.link_free, Nanos(start + 5 * tx(1500)));
    // The other two follow; A3 (due 1.2 ms after A2) is held.
    let r = a.do_scan(Nanos(2_700_000));
    assert_eq!(
        (r.released, r.backlog, r.link_free),
        (2, 1, Nanos(2_700_000))
    );
    // Stamped after the round (another thread's clock): from the round's
    // time, never ahead of it.
    send_b(&mut c, 1, 1500, 3_000_000);
    let start = restart(2_700_000, 3_000_000, 2_750_000);
    assert_eq!(start, 2_750_000);
    let r = a.do_scan(Nanos(2_750_000));
    assert_eq!((r.released, r.link_free), (1, Nanos(start + tx(1500))));
    // Stamped 2.76 ms, before the link was free (2.762 ms): from 2.762 ms,
    // both by 2.8 ms; then A3 alone, held: the link idles from 2.8 ms.
    send_b(&mut c, 2, 1500, 2_760_000);
    let start = restart(2_750_000 + tx(1500), 2_760_000, 2_800_000);
    assert_eq!((start, started(start, 1500, 2, 2_800_000)), (2_762_000, 2));
    let r = a.do_scan(Nanos(2_800_000));
    assert_eq!(
        (r.released, r.backlog, r.link_free),
        (2, 1, Nanos(2_800_000))
    );
    // Every packet went out once, in order within each class.
    let sent: Vec<u64> = a
        .output()
        .map(|o| o.pkts.iter().map(|p| p.item).collect())
        .unwrap_or_default();
    let of = |lo: u64, hi: u64| -> Vec<u64> {
        sent.iter()
            .copied()
            .filter(|s| (lo..hi).contains(s))
            .collect()
    };
    assert_eq!(of(0, 4), [0, 1, 2]);
    assert_eq!(of(100, 200), (100..b_seq).collect::<Vec<_>>());
    assert_eq!(sent.len() as u64, 3 + (b_seq - 100));
}

/// A release that ends on the round's cap with only held packets left
/// leaves the link to idle just as one that found them held: A0 starts at
/// 0, B0 at the next round (one packet a round: the cap), then only A1 is
/// queued, due at 1.2 ms; at the 2 ms round it starts when it became due
/// (1.2 ms: it has waited since), not back to back at 24 µs from when the
/// link became free (link time from before it was due) nor at 2 ms (link
/// time lost while it waited).
#[test]
fn a_release_ending_on_the_round_cap_still_sees_the_hold() {
    let (mut a, mut c, held, free) = held_and_free(1);
    for (flow, seq) in [(held, 0), (held, 1), (free, 100)] {
        assert_eq!(
            c.send(Pkt::new(flow, 1500, Nanos(1), seq)),
            Ok(Sent::Queued)
        );
    }
    // Drained 3 (the cap is 3 for this round); the link is busy after A0.
    let r = a.do_scan(Nanos(0));
    assert_eq!((r.released, r.backlog, r.link_free), (1, 2, Nanos(12_000)));
    // B0 from 12 µs; the round stops on its cap of one.
    let r = a.do_scan(Nanos(100_000));
    assert_eq!((r.released, r.backlog, r.link_free), (1, 1, Nanos(24_000)));
    let r = a.do_scan(Nanos(2_000_000));
    assert_eq!((r.released, r.link_free), (1, Nanos(1_212_000)));
}
