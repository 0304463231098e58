//! The forwarding loop's state: the devices, the table, the cost and the
//! counters. It implements the core poller's [`Rings`] over the ingress's
//! per-class rings, so the core [`Poller`](pktsched_core::ingress::Poller)
//! picks the ring and the quota and a visit receives, processes and
//! transmits one batch (run to completion: nothing stays queued between
//! visits).
//!
//! Per frame: a destination MAC other than the receiving interface's is
//! dropped as `other_host`; then the cost ([`Cost`]), the core forwarding step (checks,
//! access list, LPM, martian destinations and sources, TTL / hop limit − 1 with the
//! checksum update), the
//! next hop's MAC (static neighbours), the source MAC of the outgoing
//! interface; frames go out in batches of [`TX_BATCH`] per interface and
//! what is left at the end of the poll round ([`Worker::end_round`], which
//! also makes the ingress's one kernel kick of the round), so a round
//! makes at most one transmit call per interface besides the full
//! batches. With several rings the first class's ring (RT, the one the
//! bound is about) is urgent: after a visit that took frames from it the
//! output batches go out at once, so an RT frame does not wait for up to
//! [`TX_BATCH`] − 1 best-effort frames to be processed behind it (one
//! transmit call more per device poll that served RT). Every frame taken
//! from a ring is counted as forwarded or dropped with a reason (TTL ≤ 1 is
//! `ttl_expired`; it also gets an ICMP or ICMPv6 time exceeded when its
//! interface has an address of its family and the frame may be answered,
//! see [`super::icmp`]).

use std::net::{Ipv4Addr, Ipv6Addr};

use pktsched_core::Nanos;
use pktsched_core::ingress::{RingPlan, Rings};
use pktsched_core::route::forward::Verdict;
use pktsched_io::classify::Classifier;
use pktsched_io::{BufPool, ClassRx, PacketBuf, PacketIo};

use super::cost::Cost;
use super::egress::{Egress, EgressSnapshot, MAX_RELEASE, Released};
use super::icmp::{RateLimit, answerable, time_exceeded, time_exceeded6};
use super::stats::{
    ClassAcc, EGRESS_REFUSED, NO_NEIGHBOUR, OTHER_HOST, QUEUE_FULL, TTL_EXPIRED, TX_FAILED,
    reason_index,
};
use super::table::{Port, Table};
use crate::sent::Handed;
use crate::sys::monotonic_ns;

/// The devices of a router: the ingress's class rings, the egress's
/// plain ring, and a transmit device per interface.
#[derive(Debug)]
pub struct RouterPorts<R, D> {
    /// Per-class receive rings of the ingress.
    pub rx: R,
    /// The egress's receive ring (the reverse direction).
    pub reverse_rx: D,
    /// Transmit on the ingress interface.
    pub ingress_tx: D,
    /// Transmit on the egress interface.
    pub egress_tx: D,
}

/// Frames an output batch collects before it is sent within a round (a
/// round's last frames go out at its end): a frame waits for at most this
/// many others' processing, plus the rest of its round, before it leaves.
pub const TX_BATCH: usize = 8;

/// The `who` of an ICMP message the router built (no class's frame).
const ICMP: usize = usize::MAX;

/// Who a frame in an output batch is counted for.
#[derive(Copy, Clone, Debug)]
struct Tag {
    /// Class index, or `classes` for the reverse direction.
    who: usize,
    /// The interface it arrived on.
    from: Port,
    /// When its latency starts, ns: the kernel's receive if the buffer
    /// has it, else when the poller took it from its ring.
    taken: u64,
}

/// The forwarding state (owned by the poller thread).
#[derive(Debug)]
pub struct Worker<R, D> {
    ports: RouterPorts<R, D>,
    pool: &'static BufPool,
    table: Table,
    cost: Cost,
    /// With one ring (SQ) the class of each frame for the counters.
    classifier: Option<Classifier>,
    macs: [[u8; 6]; 2],
    /// Per class, then the reverse direction last.
    pub(crate) acc: Vec<ClassAcc>,
    batch: Vec<PacketBuf>,
    out: [Vec<PacketBuf>; 2],
    tags: [Vec<Tag>; 2],
    /// Time spent in visits that found frames, ns, and the frames.
    pub(crate) busy_ns: u64,
    pub(crate) busy_packets: u64,
    /// Receive or transmit errors of the devices (the visit took 0).
    pub(crate) io_errors: u64,
    /// Each interface's IPv4 address, for ICMP time exceeded.
    addresses: [Option<Ipv4Addr>; 2],
    /// Each interface's IPv6 address, for ICMPv6 time exceeded.
    addresses6: [Option<Ipv6Addr>; 2],
    pub(crate) icmp_limit: RateLimit,
    /// ICMP time-exceeded messages sent, and those not sent (rate limit,
    /// no buffer, transmit failed).
    pub(crate) icmp_sent: u64,
    pub(crate) icmp_not_sent: u64,
    tx_calls: u64,
    /// Ring 0 is urgent (several rings): flush after its visits.
    urgent_ring0: bool,
    /// When the current visit's receive call returned (ns): the `now` of
    /// every frame of the batch the egress scheduler takes (one clock
    /// read per batch, not per frame).
    visit_ns: u64,
    /// With `[egress]`: the scheduler and link the classes' frames to the
    /// egress interface wait in.
    egress: Option<Egress>,
    released: Vec<Released>,
    /// The buffers of the batch being sent, to tell which the device left.
    handed: Handed,
}

impl<R: ClassRx, D: PacketIo> Worker<R, D> {
    /// A worker for `classes` classes; `macs`: the ingress's and the
    /// egress's own MACs (the source of forwarded frames).
    pub fn new(
        ports: RouterPorts<R, D>,
        pool: &'static BufPool,
        table: Table,
        cost: Cost,
        plan: &RingPlan,
        classifier: Classifier,
        macs: [[u8; 6]; 2],
    ) -> Worker<R, D> {
        let classes = plan.classes();
        let cap = plan.device_budget() as usize;
        Worker {
            ports,
            pool,
            table,
            cost,
            classifier: (plan.rings() == 1 && classes > 1).then_some(classifier),
            macs,
            acc: (0..=classes).map(|_| ClassAcc::new()).collect(),
            batch: Vec::with_capacity(cap),
            out: [Vec::with_capacity(cap), Vec::with_capacity(cap)],
            tags: [Vec::with_capacity(cap), Vec::with_capacity(cap)],
            busy_ns: 0,
            busy_packets: 0,
            io_errors: 0,
            addresses: [None, None],
            addresses6: [None, None],
            icmp_limit: RateLimit::new(monotonic_ns()),
            icmp_sent: 0,
            icmp_not_sent: 0,
            tx_calls: 0,
            urgent_ring0: plan.rings() > 1,
            visit_ns: 0,
            egress: None,
            released: Vec::new(),
            handed: Handed::with_capacity(cap),
        }
    }

    /// Schedules the classes' frames to the egress interface through
    /// `egress` (see [`super::egress`]).
    pub fn with_egress(mut self, egress: Egress) -> Self {
        self.egress = Some(egress);
        self
    }

    /// When the egress's next frame may leave (`None`: no egress policy or
    /// nothing queued).
    pub fn egress_due(&self, now: u64) -> Option<u64> {
        self.egress
            .as_ref()
            .and_then(|e| e.next_due(Nanos(now)))
            .map(|n| n.0)
    }

    /// The egress's counters (`names[i]`: class `i`).
    pub fn egress_snapshot(&self, names: &[String]) -> Option<EgressSnapshot> {
        self.egress.as_ref().map(|e| e.snapshot(names))
    }

    /// Sends ICMP time exceeded out of an interface with an address
    /// (ingress, egress) for the frames whose TTL ran out there.
    pub fn with_icmp(mut self, addresses: [Option<Ipv4Addr>; 2]) -> Self {
        self.addresses = addresses;
        self
    }

    /// Sends ICMPv6 time exceeded out of an interface with an IPv6
    /// address (ingress, egress) for the frames whose hop limit ran out.
    pub fn with_icmp6(mut self, addresses: [Option<Ipv6Addr>; 2]) -> Self {
        self.addresses6 = addresses;
        self
    }

    /// Access-list rules checked so far, all frames together.
    pub fn table_rules_checked(&self) -> u64 {
        self.table.router.stats().acl_rules_checked
    }

    /// The ingress's class rings (for their counters).
    pub fn rx_mut(&mut self) -> &mut R {
        &mut self.ports.rx
    }

    /// Serves the reverse direction: up to `max` frames.
    pub fn serve_reverse(&mut self, max: usize) -> usize {
        self.batch.clear();
        let n = match self
            .ports
            .reverse_rx
            .recv_batch(self.pool, &mut self.batch, max)
        {
            Ok(n) => n,
            Err(_) => {
                self.io_errors += 1;
                0
            }
        };
        if n == 0 {
            return 0;
        }
        let who = self.acc.len() - 1;
        let got = monotonic_ns();
        self.visit_ns = got;
        let mut batch = std::mem::take(&mut self.batch);
        for buf in batch.drain(..) {
            self.acc[who].received += 1;
            let taken = self.acc[who].taken(buf.rx_ns(), got);
            self.process(
                buf,
                Tag {
                    who,
                    from: Port::Egress,
                    taken,
                },
            );
        }
        self.batch = batch;
        n
    }

    /// Ends a poll round: sends what the output batches hold and lets the
    /// ingress make its kernel kick (one per round at most).
    pub fn end_round(&mut self) {
        self.release_egress();
        if self.out.iter().any(|o| !o.is_empty()) {
            let t0 = monotonic_ns();
            self.flush();
            self.busy_ns += monotonic_ns().saturating_sub(t0);
        }
        self.ports.rx.end_round();
    }

    /// Moves what the egress link allows by now into the egress's output
    /// batch, [`TX_BATCH`] at a time (at most [`MAX_RELEASE`] per call):
    /// a full batch is sent before more is released, so the device pushes
    /// back before the link is charged for frames it could not take.
    fn release_egress(&mut self) {
        let e = Port::Egress as usize;
        let mut left = MAX_RELEASE;
        while left > 0 {
            let Some(egress) = &mut self.egress else {
                return;
            };
            let room = TX_BATCH.saturating_sub(self.out[e].len()).clamp(1, left);
            let n = egress.release_at_most(Nanos(monotonic_ns()), &mut self.released, room);
            for r in self.released.drain(..) {
                self.out[e].push(r.buf);
                self.tags[e].push(Tag {
                    who: r.class,
                    from: Port::Ingress,
                    taken: r.taken,
                });
            }
            if n < room {
                return;
            }
            left -= n;
            self.flush();
        }
    }

    /// Hands a class's frame for the egress interface to the egress
    /// scheduler; a refused frame is dropped with its reason.
    fn enqueue_egress(&mut self, buf: PacketBuf, tag: Tag) {
        let Some(egress) = &mut self.egress else {
            return self.drop_frame(buf, tag.who, EGRESS_REFUSED);
        };
        match egress.enqueue(tag.who, buf, tag.taken, Nanos(self.visit_ns)) {
            Ok(()) => self.acc[tag.who].queued += 1,
            Err((buf, reason)) => {
                let why = match reason {
                    pktsched_core::DropReason::QueueFull => QUEUE_FULL,
                    _ => EGRESS_REFUSED,
                };
                self.drop_frame(buf, tag.who, why);
            }
        }
    }

    /// Transmit calls made (`send_batch`, both interfaces).
    pub fn tx_calls(&self) -> u64 {
        self.tx_calls
    }

    fn serve_ring(&mut self, ring: usize, max: usize) -> usize {
        let t0 = monotonic_ns();
        self.batch.clear();
        let n = match self
            .ports
            .rx
            .recv_class(ring, self.pool, &mut self.batch, max)
        {
            Ok(n) => n,
            Err(_) => {
                self.io_errors += 1;
                0
            }
        };
        if n == 0 {
            return 0;
        }
        // Taken when the receive call returned: a frame the kernel put in
        // the ring during the call has its receive time after `t0`.
        let got = monotonic_ns();
        self.visit_ns = got;
        let mut batch = std::mem::take(&mut self.batch);
        for buf in batch.drain(..) {
            let who = match &self.classifier {
                Some(c) => usize::from(c.classify(buf.as_slice()).class),
                None => ring,
            };
            self.acc[who].received += 1;
            let taken = self.acc[who].taken(buf.rx_ns(), got);
            self.process(
                buf,
                Tag {
                    who,
                    from: Port::Ingress,
                    taken,
                },
            );
        }
        self.batch = batch;
        self.busy_ns += monotonic_ns().saturating_sub(t0);
        self.busy_packets += n as u64;
        n
    }

    fn drop_frame(&mut self, buf: PacketBuf, who: usize, reason: usize) {
        self.acc[who].drops[reason] += 1;
        self.pool.put(buf);
    }

    fn process(&mut self, mut buf: PacketBuf, tag: Tag) {
        if buf.as_slice().get(0..6) != Some(&self.macs[tag.from as usize][..]) {
            return self.drop_frame(buf, tag.who, OTHER_HOST);
        }
        self.cost.spin();
        let hop = match self.table.router.forward(buf.as_mut_slice()) {
            Verdict::Forward(hop) => hop,
            Verdict::TimeExceeded => {
                self.time_exceeded(&buf, tag);
                return self.drop_frame(buf, tag.who, TTL_EXPIRED);
            }
            Verdict::Drop(r) => return self.drop_frame(buf, tag.who, reason_index(r)),
        };
        let Some(dst) = self.table.next_mac(&hop, buf.as_slice()) else {
            return self.drop_frame(buf, tag.who, NO_NEIGHBOUR);
        };
        let out = hop.port as usize;
        let frame = buf.as_mut_slice();
        frame[0..6].copy_from_slice(&dst);
        frame[6..12].copy_from_slice(&self.macs[out]);
        // The classes' frames to the egress wait in its scheduler; the
        // reverse direction (the last counter) is not scheduled.
        if out == Port::Egress as usize && self.egress.is_some() && tag.who + 1 < self.acc.len() {
            return self.enqueue_egress(buf, tag);
        }
        self.acc[tag.who].queued += 1;
        self.out[out].push(buf);
        self.tags[out].push(tag);
        if self.out[out].len() >= TX_BATCH {
            self.flush();
        }
    }

    /// Queues an ICMP (IPv4) or ICMPv6 time exceeded for `expired` on the
    /// interface it came from, if that interface has an address of the
    /// frame's family, the frame may be answered ([`answerable`]) and the
    /// rate allows.
    fn time_exceeded(&mut self, expired: &PacketBuf, tag: Tag) {
        let port = tag.from as usize;
        let (v4, v6) = (self.addresses[port], self.addresses6[port]);
        let due = match expired.as_slice().get(12..14) {
            Some([0x08, 0x00]) => v4.is_some(),
            Some([0x86, 0xDD]) => v6.is_some(),
            _ => false,
        };
        if !due {
            return;
        }
        // Never an error about an ICMP error, or to a source or for a
        // destination that is not one host (RFC 1812 §4.3.2.7, RFC 4443
        // §2.4(e)): counted as not sent, before the rate, so such frames
        // take no token from the replies that are allowed.
        if !answerable(expired.as_slice()) {
            self.icmp_not_sent += 1;
            return;
        }
        // The rate first: a buffer taken and then refused would be lost
        // to the pool for good (a `PacketBuf` dropped is not returned).
        if !self.icmp_limit.allow(monotonic_ns()) {
            self.icmp_not_sent += 1;
            return;
        }
        let Some(mut reply) = self.pool.get() else {
            self.icmp_not_sent += 1;
            return;
        };
        let (frame, mac) = (expired.as_slice(), self.macs[port]);
        let built = match (v4, v6) {
            (Some(a), _) if frame[12] == 0x08 => time_exceeded(frame, mac, a, reply.spare()),
            (_, Some(a)) => time_exceeded6(frame, mac, a, reply.spare()),
            _ => None,
        };
        match built {
            Some(len) => {
                reply.set_len(len);
                self.out[port].push(reply);
                self.tags[port].push(Tag { who: ICMP, ..tag });
            }
            None => {
                self.icmp_not_sent += 1;
                self.pool.put(reply);
            }
        }
    }

    /// Sends both output batches; what a device could not send (after its
    /// retries, or too long for its transmit slot) is dropped as
    /// `tx_failed`, the frames behind it sent all the same.
    fn flush(&mut self) {
        for port in [Port::Ingress, Port::Egress] {
            let i = port as usize;
            if self.out[i].is_empty() {
                continue;
            }
            let dev = match port {
                Port::Ingress => &mut self.ports.ingress_tx,
                Port::Egress => &mut self.ports.egress_tx,
            };
            self.tx_calls += 1;
            self.handed.note(&self.out[i]);
            if dev.send_batch(&mut self.out[i], self.pool).is_err() {
                self.io_errors += 1;
            }
            let now = monotonic_ns();
            let mut tags = std::mem::take(&mut self.tags[i]);
            // What the device left may sit anywhere in the batch (a frame
            // too long for its slot stays while the rest go).
            let outcomes = self.handed.sent(&self.out[i]);
            for (tag, sent) in tags.drain(..).zip(outcomes) {
                if tag.who == ICMP {
                    if sent {
                        self.icmp_sent += 1;
                    } else {
                        self.icmp_not_sent += 1;
                    }
                    continue;
                }
                let acc = &mut self.acc[tag.who];
                acc.queued -= 1;
                if sent {
                    acc.forwarded += 1;
                    let _ = acc.latency.record(now.saturating_sub(tag.taken).max(1));
                } else {
                    acc.drops[TX_FAILED] += 1;
                }
            }
            self.tags[i] = tags;
            for buf in self.out[i].drain(..) {
                self.pool.put(buf);
            }
        }
    }
}

impl<R: ClassRx, D: PacketIo> Rings for Worker<R, D> {
    fn waiting(&self, ring: usize) -> usize {
        // A ring that cannot tell is tried (recv_class returns 0 if empty).
        self.ports.rx.waiting(ring).unwrap_or(1)
    }

    fn take(&mut self, ring: usize, max: usize) -> usize {
        let n = self.serve_ring(ring, max);
        if n > 0 && ring == 0 && self.urgent_ring0 {
            self.release_egress();
            let t0 = monotonic_ns();
            self.flush();
            self.busy_ns += monotonic_ns().saturating_sub(t0);
        }
        n
    }
}
