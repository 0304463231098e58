//! The receive thread: a PSPAT client. It takes a batch of frames from the
//! ingress device, classifies each into its class's flow, stamps it and
//! hands the batch to the arbiter through its mailbox. When the mailbox is
//! full it stops receiving, so the backlog builds in the kernel's ring
//! (whose drops the device counts) rather than in unbounded memory here,
//! and backs off ([`FullWait`]: spin, yield, then short sleeps) so the
//! arbiter, which empties the mailbox, gets the core.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pktsched_core::{Nanos, Pkt, Rate};
use pktsched_io::{BufPool, PacketBuf, PacketIo};
use pktsched_runtime::client::{Backoff, Wait};
use pktsched_runtime::{Client, Clock, Stopped};

use super::shared::{ClassMap, Shared};
use super::{device_stats, ports::Port};
use crate::frame::Frame;

/// Frames taken from the device per call.
pub(crate) const RX_BATCH: usize = 64;
/// How long a receive waits for the device before checking for stop.
pub(crate) const RX_WAIT: Duration = Duration::from_millis(5);
/// How often a thread publishes its device's counters.
pub(crate) const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// Classifies each frame of `bufs` (emptied) into its class's flow, counts
/// it as received by that flow (and any classifier anomaly), stamps it
/// with `now` and hands it to `out` as a packet of its wire length, with
/// the kernel's receive stamp of the frame (0: none). The batch is counted
/// in the classified total ([`Shared::count_classified`]) with one add at
/// the end: the PSPAT receive thread hands `out`'s frames to the mailbox
/// only after that (the run-to-completion thread enqueues them itself; its
/// loop has no catch-up, the total's only reader).
#[inline]
pub(crate) fn classify_into(
    map: &ClassMap,
    shared: &Shared,
    bufs: &mut Vec<PacketBuf>,
    now: Nanos,
    pool: &'static BufPool,
    mut out: impl FnMut(Pkt<Frame>, u64),
) {
    let mut classified = 0;
    for buf in bufs.drain(..) {
        let verdict = map.classifier.classify(buf.as_slice());
        if let Some(c) = verdict.note.and_then(|a| shared.anomalies.get(a.index())) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        let Some(&flow) = map.flows.get(usize::from(verdict.class)) else {
            pool.put(buf);
            continue; // unreachable: the classifier only returns classes of this map
        };
        if let Some(c) = shared.received.get(flow.index()) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        let len = map.wire_len(buf.len());
        let rx_ns = buf.rx_ns();
        out(Pkt::new(flow, len, now, Frame::new(buf, pool)), rx_ns);
        classified += 1;
    }
    if classified > 0 {
        shared.count_classified(classified);
    }
}

/// How the receive thread waits while its mailbox is full, and how often
/// it did.
///
/// A full mailbox means the arbiter is behind (it waits for a core) or the
/// class queue is full (the arbiter holds back what the scheduler refused,
/// so the mailbox stays full until the link has sent some). Trying again
/// at once does not help either way, and a thread that yields after every
/// try stays runnable: on a core it shares with the arbiter the kernel
/// splits the core between them, and the arbiter falls further behind. So
/// the thread backs off as the runtime's [`Backoff`] says (spin, yield,
/// then sleeps doubling from 5 µs to 80 µs), each sleep at most `cap`
/// ([`full_wait_cap`]: half the time the link takes to send a full mailbox
/// of the smallest frames, so the mailbox never runs dry while the thread
/// sleeps, however fast the link), and starts from spinning again after a
/// send that took frames.
///
/// Why a cap and not a wake-up from the arbiter when it frees room: the
/// cap costs nothing on the arbiter's path (a wake-up would need a check
/// per mailbox read and a futex call per sleep, on the thread that decides
/// every packet), and it only matters at rates where a full mailbox drains
/// in under 160 µs (above about 3 Gbit/s with 60-byte frames), where the arbiter
/// is the bottleneck in any case. The receive thread's timer slack is 1 µs
/// ([`rx_loop`]), so a sleep ends close to when it was asked to (with the
/// default 50 µs slack a 5 µs sleep took ~70 µs here).
#[derive(Debug)]
pub(crate) struct FullWait {
    backoff: Backoff,
    /// Sends that took nothing (each followed by one wait).
    waits: u64,
    /// The longest sleep.
    cap: Duration,
}

impl FullWait {
    /// No wait yet; sleeps at most `cap`.
    pub(crate) fn new(cap: Duration) -> FullWait {
        FullWait {
            backoff: Backoff::new(),
            waits: 0,
            cap,
        }
    }

    /// Sleeps at most `cap` from now on (a reload changed the link).
    pub(crate) fn set_cap(&mut self, cap: Duration) {
        self.cap = cap;
    }

    /// Sends that found the mailbox full so far.
    pub(crate) fn waits(&self) -> u64 {
        self.waits
    }

    /// Hands what it can of `pending` to the mailbox; if that was nothing
    /// (the mailbox is full), counts a wait and has `pause` wait it out
    /// ([`pause`] for real; tests record it) before returning it.
    /// `Ok(None)`: frames were taken. `Err` once the runtime stopped.
    pub(crate) fn send<T: Send>(
        &mut self,
        client: &mut Client<T>,
        pending: &mut VecDeque<Pkt<T>>,
        pause: impl FnOnce(Wait),
    ) -> Result<Option<Wait>, Stopped> {
        let (taken, _) = client.send_batch(pending)?;
        if taken > 0 {
            self.backoff.reset();
            return Ok(None);
        }
        self.waits += 1;
        let wait = match self.backoff.next_wait() {
            Wait::Sleep(d) => Wait::Sleep(d.min(self.cap)),
            w => w,
        };
        pause(wait);
        Ok(Some(wait))
    }
}

/// Waits as `wait` says: spins, yields the core, or sleeps.
pub(crate) fn pause(wait: Wait) {
    match wait {
        Wait::Spin(n) => (0..n).for_each(|_| std::hint::spin_loop()),
        Wait::Yield => std::thread::yield_now(),
        Wait::Sleep(d) => std::thread::sleep(d),
    }
}

/// The receive thread's longest full-mailbox sleep: half the time a link
/// of `rate` takes to send `capacity` frames of `smallest` bytes on the
/// wire (the least time in which the arbiter can drain a full mailbox
/// when the link is what empties it), so that a thread that slept finds
/// the mailbox at most half drained; at least 1 µs (a zero sleep would
/// leave the thread runnable, which the backoff is there to avoid).
pub(crate) fn full_wait_cap(capacity: usize, smallest: u32, rate: Rate) -> Duration {
    let bytes = (capacity as u64).saturating_mul(u64::from(smallest));
    Duration::from_nanos(rate.tx_time(bytes).0 / 2).max(Duration::from_micros(1))
}

/// The receive device's counters, with the full-mailbox waits.
fn rx_device_stats<P: PacketIo>(port: &Port<P>, full: &FullWait) -> crate::stats::DeviceStats {
    let mut d = device_stats(port);
    d.rx_mailbox_full = Some(full.waits());
    d
}

/// Runs until the pipeline stops; returns the device.
pub(crate) fn rx_loop<P: PacketIo>(
    mut port: Port<P>,
    mut client: Client<Frame>,
    shared: Arc<Shared>,
    pool: &'static BufPool,
    clock: Clock,
) -> Port<P> {
    let mut bufs: Vec<PacketBuf> = Vec::with_capacity(RX_BATCH);
    let mut pending: VecDeque<Pkt<Frame>> = VecDeque::with_capacity(4 * RX_BATCH);
    let (mut map, mut generation) = shared.map();
    let mut published = Instant::now();
    let mut full = FullWait::new(map.full_wait_cap);
    // Short sleeps end when asked, not up to 50 µs later (see `FullWait`).
    crate::sys::set_timer_slack(1000);
    while !shared.stopping() {
        if shared.changed_since(generation) {
            (map, generation) = shared.map();
            full.set_cap(map.full_wait_cap);
        }
        if pending.is_empty() {
            port.wait(RX_WAIT);
            port.recv(pool, &mut bufs, RX_BATCH);
            let now = clock.now();
            classify_into(&map, &shared, &mut bufs, now, pool, |p, _| {
                pending.push_back(p)
            });
        }
        if !pending.is_empty() && full.send(&mut client, &mut pending, pause).is_err() {
            break;
        }
        if published.elapsed() >= PUBLISH_EVERY {
            shared.publish_device(rx_device_stats(&port, &full));
            published = Instant::now();
        }
    }
    shared.drop_held_at_stop(pending.iter());
    pending.clear();
    shared.publish_device(rx_device_stats(&port, &full));
    port
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::time::Duration;

    use pktsched_core::{Algorithm, FlowId, Nanos, Pkt, Rate};
    use pktsched_io::BufPool;
    use pktsched_io::classify::Classifier;
    use pktsched_runtime::client::Wait;
    use pktsched_runtime::{Arbiter, Config, NullOutput, add_flows};

    use super::{FullWait, classify_into, full_wait_cap};
    use crate::engine::shared::{ClassMap, Shared};

    /// Each batch counts its frames per flow and in the total; a reused
    /// flow id's counter restarts, the total does not.
    #[test]
    fn a_batch_is_counted_per_flow_and_in_a_total_no_reload_restarts() {
        let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(8, 2048).expect("pool")));
        let map = ClassMap {
            classifier: Classifier::new(Vec::new(), 0).expect("classifier"),
            flows: vec![FlowId(3)],
            overhead: 0,
            mpu: 0,
            full_wait_cap: Duration::from_micros(80),
        };
        let shared = Shared::new(map, 0);
        let (map, _) = shared.map();
        let mut out = Vec::new();
        for batch in [3, 2] {
            let mut bufs: Vec<_> = (0..batch)
                .map(|_| {
                    let mut b = pool.get().expect("buffer");
                    assert!(b.fill(&[0u8; 60]));
                    b
                })
                .collect();
            classify_into(&map, &shared, &mut bufs, Nanos(0), pool, |p, _| out.push(p));
            assert!(bufs.is_empty());
        }
        assert_eq!(out.len(), 5);
        assert_eq!((shared.received(FlowId(3)), shared.classified()), (5, 5));
        shared.reset_flow(FlowId(3));
        assert_eq!((shared.received(FlowId(3)), shared.classified()), (0, 5));
    }

    /// A one-flow FIFO arbiter on 1 Gbit/s with a mailbox of 4, its
    /// client, and more frames than the mailbox holds.
    fn full_mailbox() -> (
        Arbiter<u32, NullOutput>,
        pktsched_runtime::Client<u32>,
        VecDeque<Pkt<u32>>,
    ) {
        let mut cfg = Config::new(Rate::gbit(1));
        cfg.mailbox_capacity = 4;
        let mut sched = Algorithm::Fifo.build_send::<u32>();
        let flow = add_flows(&mut *sched, &[1], 1, 4096).expect("flow")[0];
        let arb = Arbiter::new(&cfg, sched, NullOutput::default()).expect("arbiter");
        let client = arb.client().expect("client");
        let pending = (0..4096)
            .map(|i| Pkt::new(flow, 100, Nanos(0), i))
            .collect();
        (arb, client, pending)
    }

    /// A receive thread whose mailbox stays full backs off to sleeping
    /// (it used to yield after every try, staying runnable) and counts
    /// every wait; once a send takes frames it starts from spinning again.
    /// The waits are recorded, not slept.
    #[test]
    fn a_full_mailbox_is_waited_out_with_a_backoff_and_counted() {
        let (mut arb, mut client, mut pending) = full_mailbox();
        let mut full = FullWait::new(Duration::from_secs(1));
        let mut paused = Vec::new();
        let mut send = |full: &mut FullWait, pending: &mut VecDeque<Pkt<u32>>| {
            full.send(&mut client, pending, |w| paused.push(w))
        };
        assert_eq!(send(&mut full, &mut pending), Ok(None), "some fit");
        let left = pending.len();
        assert!(left > 0, "the mailbox is full");
        let waits: Vec<Wait> = (0..7)
            .map(|_| send(&mut full, &mut pending).expect("running"))
            .map(|w| w.expect("the mailbox is still full"))
            .collect();
        let us = Duration::from_micros;
        assert_eq!(
            waits,
            [
                Wait::Spin(32),
                Wait::Spin(64),
                Wait::Yield,
                Wait::Yield,
                Wait::Sleep(us(5)),
                Wait::Sleep(us(10)),
                Wait::Sleep(us(20)),
            ]
        );
        assert_eq!((full.waits(), pending.len()), (7, left));
        arb.do_scan(Nanos(1_000_000));
        assert_eq!(send(&mut full, &mut pending), Ok(None), "room again");
        assert!(pending.len() < left);
        assert_eq!(
            send(&mut full, &mut pending),
            Ok(Some(Wait::Spin(32))),
            "full again: spinning first"
        );
        assert_eq!(full.waits(), 8);
        // Every wait returned was the one waited, and only those.
        assert_eq!(paused.len(), 8);
        assert_eq!(&paused[..7], &waits[..]);
    }

    /// The sleeps are capped: with a 24.576 µs cap the doubling stops
    /// there (5, 10, 20, then the cap), a smaller cap (as a reload to a
    /// faster link sets) applies from the next sleep on, and a send that
    /// takes frames starts from spinning again.
    #[test]
    fn full_mailbox_sleeps_are_capped_and_the_cap_follows_a_reload() {
        let (mut arb, mut client, mut pending) = full_mailbox();
        let ns = Duration::from_nanos;
        let mut full = FullWait::new(ns(24_576));
        let mut send = |full: &mut FullWait, pending: &mut VecDeque<Pkt<u32>>| {
            full.send(&mut client, pending, |_| {}).expect("running")
        };
        assert_eq!(send(&mut full, &mut pending), None, "some fit");
        let waits: Vec<Option<Wait>> = (0..8).map(|_| send(&mut full, &mut pending)).collect();
        let us = Duration::from_micros;
        let sleeps: Vec<Wait> = waits.iter().flatten().copied().skip(4).collect();
        assert_eq!(
            sleeps,
            [
                Wait::Sleep(us(5)),
                Wait::Sleep(us(10)),
                Wait::Sleep(us(20)),
                Wait::Sleep(ns(24_576)),
            ]
        );
        full.set_cap(ns(2_458));
        assert_eq!(send(&mut full, &mut pending), Some(Wait::Sleep(ns(2_458))));
        arb.do_scan(Nanos(1_000_000));
        assert_eq!(send(&mut full, &mut pending), None, "room again");
        assert_eq!(send(&mut full, &mut pending), Some(Wait::Spin(32)));
    }

    /// The cap is half the time the link sends a full mailbox of the
    /// smallest wire frames in, at least 1 µs.
    #[test]
    fn the_sleep_cap_is_half_a_full_mailbox_of_small_frames_at_the_link_rate() {
        let ns = Duration::from_nanos;
        // 1024 frames of 60 bytes: 491 520 bits.
        let bits = 1024 * 60 * 8;
        assert_eq!(full_wait_cap(1024, 60, Rate::gbit(1)), ns(bits / 2));
        assert_eq!(full_wait_cap(1024, 60, Rate::gbit(10)), ns(bits / 10 / 2));
        // 4915.2 ns, rounded up as the link does, then halved.
        assert_eq!(full_wait_cap(1024, 60, Rate::gbit(100)), ns(4_916 / 2));
        // 24 bytes of overhead: 84 on the wire.
        assert_eq!(
            full_wait_cap(1024, 84, Rate::gbit(1)),
            ns(1024 * 84 * 8 / 2)
        );
        // A terabit link would drain it in 492 ns: the floor.
        assert_eq!(
            full_wait_cap(1024, 60, Rate::gbit(1000)),
            Duration::from_micros(1)
        );
        // The run's map computes it from its link (MIN_FRAME plus
        // overhead, or mpu).
        for (extra, want) in [
            ("", ns(bits / 2)),
            ("overhead = 24\n", ns(1024 * 84 * 8 / 2)),
            ("mpu = 128\n", ns(1024 * 128 * 8 / 2)),
        ] {
            let src = format!(
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n{extra}\n\
                 [[class]]\nname = \"a\"\ndefault = true\n"
            );
            let cfg = crate::config::parse(&src, "t.toml", None).expect("config");
            let map = ClassMap::new(
                Classifier::new(Vec::new(), 0).expect("classifier"),
                vec![FlowId(0)],
                &cfg.link,
            );
            assert_eq!(map.full_wait_cap, want, "{extra}");
        }
    }
}
