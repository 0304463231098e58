//! The `tc` architecture, as the baseline PSPAT is measured against: one
//! scheduler behind one lock; every sending thread takes the lock, enqueues,
//! and then runs the scheduler itself, releasing packets while the emulated
//! link is idle (Linux's `qdisc_run` under the qdisc lock).
//!
//! Same scheduler, same [`Link`] emulation, same [`Output`] and same
//! [`Config`] as the PSPAT runtime ([`crate::pspat`]), so a benchmark
//! compares architectures, not algorithms. It depends only on
//! [`crate::config`], not on the PSPAT client, arbiter or driver.

use std::sync::{Arc, Mutex, PoisonError};

use pktsched_core::{Counters, DropReason, Nanos, Pkt};

use crate::config::{BoxedScheduler, Clock, Config, RuntimeError, Sent, StopMode};
use crate::link::Link;
use crate::output::Output;

struct Inner<T, O> {
    sched: BoxedScheduler<T>,
    link: Link,
    out: O,
    batch: Vec<Pkt<T>>,
    round_cap: usize,
    decisions: u64,
    /// The last release ended with the scheduler having nothing to send
    /// at its time (e.g. a shaper's packets not yet due): the link idled
    /// since, so what the next sender brings starts at its own time, not
    /// back then (idle time is no credit, as in the PSPAT arbiter). An
    /// empty scheduler at the next send means the same.
    ran_dry: bool,
    /// Per client: drops by reason (queue_full, too_large, unknown_flow).
    dropped: Vec<[u64; 3]>,
}

/// The locked scheduler shared by its clients.
pub struct Locked<T, O> {
    inner: Arc<Mutex<Inner<T, O>>>,
    clock: Clock,
}

impl<T, O> std::fmt::Debug for Locked<T, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locked").finish_non_exhaustive()
    }
}

/// One sending thread's handle.
pub struct LockedClient<T, O> {
    id: usize,
    inner: Arc<Mutex<Inner<T, O>>>,
    clock: Clock,
    /// Times the lock was already taken when this client wanted it.
    pub contended: u64,
    /// Packets handed to `send`.
    pub sent: u64,
}

impl<T, O> std::fmt::Debug for LockedClient<T, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockedClient")
            .field("id", &self.id)
            .field("sent", &self.sent)
            .field("contended", &self.contended)
            .finish_non_exhaustive()
    }
}

/// Where every packet went (`sent = enqueued + dropped`,
/// `enqueued = decisions + flushed + returned`).
#[derive(Debug)]
pub struct LockedReport<T, O> {
    /// Packets released to the output while running.
    pub decisions: u64,
    /// Per client: drops by reason (queue_full, too_large, unknown_flow).
    pub dropped: Vec<[u64; 3]>,
    /// The scheduler's counters.
    pub sched: Counters,
    /// Packets sent at stop, ignoring the link.
    pub flushed: u64,
    /// Packets handed back at stop.
    pub returned: Vec<Pkt<T>>,
    /// The output.
    pub output: O,
}

impl<T: Send + 'static, O: Output<T>> Locked<T, O> {
    /// A locked scheduler on the link of `cfg` (only `link` and `round_cap`
    /// are used).
    pub fn new(
        cfg: &Config,
        sched: BoxedScheduler<T>,
        out: O,
        clock: Clock,
    ) -> Result<Self, RuntimeError> {
        cfg.validate()?;
        Ok(Locked {
            inner: Arc::new(Mutex::new(Inner {
                sched,
                link: Link::new(cfg.link),
                out,
                batch: Vec::with_capacity(cfg.round_cap),
                round_cap: cfg.round_cap,
                decisions: 0,
                ran_dry: true,
                dropped: Vec::new(),
            })),
            clock,
        })
    }

    /// A new client handle.
    pub fn client(&self) -> LockedClient<T, O> {
        let mut locked = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let id = locked.dropped.len();
        locked.dropped.push([0; 3]);
        LockedClient {
            id,
            inner: self.inner.clone(),
            clock: self.clock,
            contended: 0,
            sent: 0,
        }
    }

    /// Stops: sends (ignoring the link) or returns what is queued.
    pub fn stop(self, mode: StopMode) -> Result<LockedReport<T, O>, RuntimeError> {
        let inner = Arc::try_unwrap(self.inner).map_err(|_| {
            RuntimeError::Thread("locked scheduler stopped while clients still exist".into())
        })?;
        let mut locked = inner.into_inner().unwrap_or_else(PoisonError::into_inner);
        let now = self.clock.now();
        let mut flushed = 0;
        let mut returned = Vec::new();
        while let Some(p) = locked.sched.dequeue(now) {
            match mode {
                StopMode::Drain => {
                    flushed += 1;
                    locked.batch.push(p);
                }
                StopMode::Return => returned.push(p),
            }
        }
        let Inner {
            sched,
            mut out,
            mut batch,
            decisions,
            dropped,
            ..
        } = locked;
        out.transmit(&mut batch);
        Ok(LockedReport {
            decisions,
            dropped,
            sched: sched.stats(),
            flushed,
            returned,
            output: out,
        })
    }
}

impl<T: Send + 'static, O: Output<T>> LockedClient<T, O> {
    /// This client's id.
    pub fn id(&self) -> usize {
        self.id
    }

    /// Takes the lock, enqueues `pkt`, and releases what the link allows.
    /// `Sent::Backpressure` means the scheduler dropped this packet
    /// (counted per client and reason).
    pub fn send(&mut self, pkt: Pkt<T>) -> Sent {
        if self.enqueue_locked(std::iter::once(pkt)) > 0 {
            Sent::Backpressure
        } else {
            Sent::Queued
        }
    }

    /// Takes the lock once for every packet of `pkts` (emptying it),
    /// enqueues them, and releases what the link allows; returns how many
    /// the scheduler dropped (counted per client and reason).
    pub fn send_batch(&mut self, pkts: &mut Vec<Pkt<T>>) -> usize {
        self.enqueue_locked(pkts.drain(..))
    }

    fn enqueue_locked(&mut self, pkts: impl ExactSizeIterator<Item = Pkt<T>>) -> usize {
        self.enqueue_locked_with(pkts, |clock| clock.now())
    }

    /// [`Self::enqueue_locked`] at the time `now_of` reads once the lock is
    /// held (tests pass a virtual time).
    fn enqueue_locked_with(
        &mut self,
        pkts: impl ExactSizeIterator<Item = Pkt<T>>,
        now_of: impl FnOnce(&Clock) -> Nanos,
    ) -> usize {
        self.sent += pkts.len() as u64;
        let mut guard = match self.inner.try_lock() {
            Ok(guard) => guard,
            Err(_) => {
                self.contended += 1;
                self.inner.lock().unwrap_or_else(PoisonError::into_inner)
            }
        };
        let now = now_of(&self.clock);
        let locked = &mut *guard;
        if locked.ran_dry || locked.sched.backlog().pkts == 0 {
            locked.link.idle(now);
            locked.ran_dry = false;
        }
        let mut dropped = 0;
        for pkt in pkts {
            if let Err(rej) = locked.sched.enqueue(pkt, now) {
                let i = match rej.reason {
                    DropReason::QueueFull | DropReason::Removed => 0,
                    DropReason::TooLarge => 1,
                    DropReason::UnknownFlow => 2,
                };
                if let Some(d) = locked.dropped.get_mut(self.id) {
                    d[i] += 1;
                }
                dropped += 1;
            }
        }
        let mut n = 0;
        while n < locked.round_cap && locked.link.ready(now) {
            match locked.sched.dequeue(now) {
                Some(p) => {
                    locked.link.send(p.len);
                    locked.batch.push(p);
                    n += 1;
                }
                None => {
                    locked.link.idle(now);
                    locked.ran_dry = true;
                    break;
                }
            }
        }
        locked.decisions += n as u64;
        if !locked.batch.is_empty() {
            locked.out.transmit(&mut locked.batch);
            locked.batch.clear();
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    //! Deterministic: the locked scheduler reads a real clock, so these tests
    //! assert only orders and counts. Where the link matters it is so slow
    //! (1 bit/s: 800 s for a 100-byte packet) that only the very first
    //! packet is released while sending, and stop releases the rest.

    use pktsched_core::{Algorithm, DropReason, FlowId, Nanos, Pkt, Rate};

    use super::{Locked, LockedReport};
    use crate::config::{Clock, Config, RuntimeError, Sent, StopMode, add_flows};
    use crate::output::VecOutput;

    fn locked(
        alg: Algorithm,
        link: Rate,
        weights: &[u32],
        flows: usize,
        limit: u32,
    ) -> Locked<u64, VecOutput<u64>> {
        let mut sched = alg.build_send::<u64>();
        add_flows(sched.as_mut(), weights, flows, limit).unwrap_or_else(|e| panic!("{e}"));
        Locked::new(
            &Config::new(link),
            sched,
            VecOutput::default(),
            Clock::new(),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn pkt(flow: u32, len: u32, seq: u64) -> Pkt<u64> {
        Pkt::new(FlowId(flow), len, Nanos(0), seq)
    }

    fn items(r: &LockedReport<u64, VecOutput<u64>>) -> Vec<u64> {
        r.output.pkts.iter().map(|p| p.item).collect()
    }

    /// Three clients send interleaved into six flows; what comes out is
    /// exactly what the same scheduler, fed the same packets, dequeues.
    #[test]
    fn packets_from_several_clients_come_out_in_scheduler_order() {
        let weights = [1, 2, 3];
        for alg in [
            Algorithm::Fifo,
            Algorithm::Rr,
            Algorithm::Drr,
            Algorithm::Wf2q,
            Algorithm::Qfq,
        ] {
            let l = locked(alg, Rate::bps(1), &weights, 6, 1000);
            let mut clients: Vec<_> = (0..3).map(|_| l.client()).collect();
            let mut sent = Vec::new();
            for i in 0..300u64 {
                let k = (i % 3) as usize;
                let flow = k as u32 + 3 * ((i / 3) % 2) as u32;
                let p = pkt(flow, 64 + (i * 37 % 1400) as u32, i);
                sent.push(p.clone());
                assert_eq!(clients[k].send(p), Sent::Queued);
            }
            assert_eq!(clients.iter().map(|c| c.sent).sum::<u64>(), 300);
            drop(clients);
            let r = l.stop(StopMode::Drain).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                r.decisions, 1,
                "{alg:?}: the idle link takes only the first"
            );
            assert_eq!(r.flushed, 299);

            // The reference: the first packet alone, then all the others.
            let mut reference = alg.build_send::<u64>();
            add_flows(reference.as_mut(), &weights, 6, 1000).unwrap_or_else(|e| panic!("{e}"));
            let mut want = Vec::new();
            let mut sent = sent.into_iter();
            for p in sent.by_ref().take(1) {
                assert!(reference.enqueue(p, Nanos(0)).is_ok());
            }
            want.extend(reference.dequeue(Nanos(0)).map(|p| p.item));
            for p in sent {
                assert!(reference.enqueue(p, Nanos(0)).is_ok());
            }
            while let Some(p) = reference.dequeue(Nanos(0)) {
                want.push(p.item);
            }
            assert_eq!(items(&r), want, "{alg:?}");
        }
    }

    /// As in the PSPAT arbiter, idle time is no credit: a sender that
    /// finds the scheduler run dry since the last release (at 1 µs) starts
    /// the link at its own time (1 ms), so of ten packets brought then one
    /// starts at once and the link is busy for the rest; a link that
    /// counted the idle millisecond as credit would send all ten at once.
    #[test]
    fn an_idle_link_is_not_caught_up_after_the_scheduler_ran_dry() {
        let l = locked(Algorithm::Fifo, Rate::gbit(1), &[1], 1, 1024);
        let mut c = l.client();
        let at = |t: u64| move |_: &crate::config::Clock| Nanos(t);
        assert_eq!(
            c.enqueue_locked_with(std::iter::once(pkt(0, 125, 0)), at(0)),
            0
        );
        let ten: Vec<_> = (1..=10).map(|i| pkt(0, 125, i)).collect();
        assert_eq!(c.enqueue_locked_with(ten.into_iter(), at(1_000_000)), 0);
        // 2 µs later the link has sent two more 1 µs packets' worth.
        assert_eq!(c.enqueue_locked_with(std::iter::empty(), at(1_002_000)), 0);
        drop(c);
        let r = l.stop(StopMode::Drain).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.decisions, r.flushed), (4, 7));
    }

    /// Four backlogged flows of weights 1, 2, 4, 8: while all are
    /// backlogged, each gets its weight's share of the link.
    #[test]
    fn shares_under_overload_follow_weights() {
        let weights = [1u32, 2, 4, 8];
        for alg in [Algorithm::Drr, Algorithm::Wf2q, Algorithm::Qfq] {
            let l = locked(alg, Rate::bps(1), &weights, 4, 2000);
            let mut clients: Vec<_> = (0..4).map(|_| l.client()).collect();
            for seq in 0..1000u64 {
                for (i, c) in clients.iter_mut().enumerate() {
                    assert_eq!(c.send(pkt(i as u32, 1000, seq)), Sent::Queued);
                }
            }
            drop(clients);
            let r = l.stop(StopMode::Drain).unwrap_or_else(|e| panic!("{e}"));
            // In the first 1500 packets flow 3 (weight 8) gets ~800 of its
            // 1000: every flow stays backlogged.
            let mut per = [0u64; 4];
            for p in &r.output.pkts[..1500] {
                per[p.flow.0 as usize] += 1;
            }
            for (i, w) in weights.iter().enumerate() {
                let share = per[i] as f64 / 1500.0;
                let want = f64::from(*w) / 15.0;
                assert!(
                    (share - want).abs() / want < 0.02,
                    "{alg:?} flow {i}: {share} vs {want}"
                );
            }
        }
    }

    /// A packet the scheduler refuses is reported as backpressure and
    /// counted per client under its reason.
    #[test]
    fn a_refused_packet_is_reported_and_counted_by_reason() {
        let l = locked(Algorithm::Fifo, Rate::bps(1), &[1], 1, 2);
        let mut c0 = l.client();
        let mut c1 = l.client();
        assert_eq!((c0.id(), c1.id()), (0, 1));
        // The first leaves at once, the next two fill the flow's queue.
        for i in 0..3 {
            assert_eq!(c0.send(pkt(0, 100, i)), Sent::Queued);
        }
        assert_eq!(c0.send(pkt(0, 100, 3)), Sent::Backpressure);
        assert_eq!(c1.send(pkt(0, 100, 4)), Sent::Backpressure);
        assert_eq!(c1.send(pkt(0, 2000, 5)), Sent::Backpressure, "too large");
        assert_eq!(c1.send(pkt(9, 100, 6)), Sent::Backpressure, "unknown flow");
        let mut batch: Vec<_> = (7..10).map(|i| pkt(0, 100, i)).collect();
        assert_eq!(c1.send_batch(&mut batch), 3, "the queue is still full");
        assert!(batch.is_empty());
        assert_eq!((c0.sent, c1.sent), (4, 6));
        drop((c0, c1));
        let r = l.stop(StopMode::Return).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.dropped, vec![[1, 0, 0], [4, 1, 1]]);
        assert_eq!(r.sched.dropped(DropReason::QueueFull).pkts, 5);
        assert_eq!(r.sched.dropped(DropReason::TooLarge).pkts, 1);
        assert_eq!(r.sched.dropped(DropReason::UnknownFlow).pkts, 1);
        assert_eq!(items(&r), vec![0]);
        let returned: Vec<u64> = r.returned.iter().map(|p| p.item).collect();
        assert_eq!(returned, vec![1, 2]);
    }

    /// `sent = enqueued + dropped` and `enqueued = decisions + flushed +
    /// returned`, in both stop modes, with nothing left queued.
    #[test]
    fn stop_accounts_for_every_packet() {
        for mode in [StopMode::Drain, StopMode::Return] {
            let l = locked(Algorithm::Drr, Rate::mbit(10), &[1, 3], 2, 50);
            let mut clients: Vec<_> = (0..3).map(|_| l.client()).collect();
            let mut batch = Vec::new();
            let mut batch_drops = 0;
            for i in 0..3000u64 {
                let len = if i % 3 == 0 { 2000 } else { 700 }; // 2000 > max_len
                let flow = if i % 7 == 0 { 9 } else { (i % 2) as u32 }; // 9: unknown
                let c = &mut clients[(i % 3) as usize];
                if i % 10 == 0 {
                    batch.push(pkt(flow, len, i));
                    batch_drops += c.send_batch(&mut batch);
                } else {
                    let _ = c.send(pkt(flow, len, i));
                }
            }
            assert!(batch_drops > 0);
            let sent: u64 = clients.iter().map(|c| c.sent).sum();
            assert_eq!(sent, 3000);
            drop(clients);
            let r = l.stop(mode).unwrap_or_else(|e| panic!("{e}"));
            let dropped: u64 = r.dropped.iter().flatten().sum();
            let by_reason = |k: usize| r.dropped.iter().map(|d| d[k]).sum::<u64>();
            assert!(by_reason(1) > 0 && by_reason(2) > 0);
            assert_eq!(dropped, r.sched.dropped_total().pkts);
            assert_eq!(r.sched.enqueued.pkts + dropped, sent);
            assert_eq!(
                r.sched.enqueued.pkts,
                r.decisions + r.flushed + r.returned.len() as u64
            );
            assert_eq!(r.output.pkts.len() as u64, r.decisions + r.flushed);
            assert_eq!(r.sched.with_backlog().backlog.pkts, 0);
            match mode {
                StopMode::Drain => assert!(r.returned.is_empty()),
                StopMode::Return => assert_eq!(r.flushed, 0),
            }
        }
    }

    #[test]
    fn bad_settings_are_refused_by_name() {
        let cfg = Config {
            round_cap: 0,
            ..Config::new(Rate::gbit(1))
        };
        let e = Locked::new(
            &cfg,
            Algorithm::Fifo.build_send::<u64>(),
            VecOutput::default(),
            Clock::new(),
        )
        .err();
        match e {
            Some(RuntimeError::Config { field, .. }) => assert_eq!(field, "round_cap"),
            other => panic!("round_cap = 0 accepted: {other:?}"),
        }
        let e = e.map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("round_cap") && e.contains("1..="), "{e}");
    }

    #[test]
    fn stop_is_refused_while_a_client_is_alive() {
        let l = locked(Algorithm::Fifo, Rate::gbit(1), &[1], 1, 16);
        let _c = l.client();
        let e = l.stop(StopMode::Drain).err().map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("clients still exist")),
            "{e:?}"
        );
    }
}
