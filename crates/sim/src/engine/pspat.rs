//! The PSPAT model: clients post packets to mailboxes; an arbiter wakes
//! every Δ_A, enqueues what the mailboxes hold and releases packets while
//! its emulated link would start them before its next round; dispatchers,
//! served every Δ_D, move released packets to the NIC's FIFO, whose front
//! is the packet on the wire.

use std::collections::VecDeque;

use super::state::{NO_TIME, OnWire};
use crate::model::PspatParams;
use crate::source::tx_ps;

/// A packet in a client mailbox, not yet seen by the arbiter.
#[derive(Copy, Clone, Debug)]
pub(super) struct MailboxEntry {
    pub(super) id: u32,
    pub(super) flow: u32,
    pub(super) len: u32,
    pub(super) arrival: u64,
}

/// A packet the arbiter released, waiting for a dispatcher.
#[derive(Copy, Clone, Debug)]
pub(super) struct ReleasedPacket {
    pub(super) id: u32,
    pub(super) flow: u32,
    pub(super) len: u32,
    pub(super) released_at: u64,
}

/// The PSPAT model's state (see the module docs).
#[derive(Debug)]
pub(super) struct PspatModel {
    /// Δ_A: the arbiter's round period, ps.
    arbiter_ps: u64,
    /// Δ_D: the dispatchers' period, ps.
    dispatcher_ps: u64,
    mailbox: VecDeque<MailboxEntry>,
    last_round: Option<u64>,
    /// When the arbiter's emulated link is next idle.
    emulated_link_free: u64,
    released: VecDeque<ReleasedPacket>,
    /// NIC FIFO; its front is the link's packet on the wire.
    nic: VecDeque<OnWire>,
    /// When the NIC has sent everything it holds.
    nic_free: u64,
    /// Per flow: bytes released or in the NIC, not yet sent.
    out_bytes: Vec<u64>,
}

/// The smallest multiple of `d` at or after `t`.
fn ceil_mult(t: u64, d: u64) -> u64 {
    t.div_ceil(d).saturating_mul(d)
}

impl PspatModel {
    /// The model with `p`'s periods for `flows` flows.
    pub(super) fn new(p: PspatParams, flows: usize) -> PspatModel {
        PspatModel {
            arbiter_ps: p.arbiter_ps,
            dispatcher_ps: p.dispatcher_ps,
            mailbox: VecDeque::new(),
            last_round: None,
            emulated_link_free: 0,
            released: VecDeque::new(),
            nic: VecDeque::new(),
            nic_free: 0,
            out_bytes: vec![0; flows],
        }
    }

    /// Time of the next arbiter round ([`NO_TIME`] if it has nothing to
    /// do), given the packets in the scheduler.
    pub(super) fn next_round(&self, now: u64, sched_queued: u64) -> u64 {
        let da = self.arbiter_ps;
        if sched_queued > 0 {
            self.last_round.map_or(ceil_mult(now, da), |r| r + da)
        } else if let Some(m) = self.mailbox.front() {
            let c = ceil_mult(m.arrival, da);
            self.last_round.map_or(c, |r| c.max(r + da))
        } else {
            NO_TIME
        }
    }

    /// Time a dispatcher next takes a released packet ([`NO_TIME`]: none).
    pub(super) fn next_dispatch(&self) -> u64 {
        self.released
            .front()
            .map_or(NO_TIME, |r| ceil_mult(r.released_at, self.dispatcher_ps))
    }

    /// A client posts a packet.
    pub(super) fn post(&mut self, m: MailboxEntry) {
        self.mailbox.push_back(m);
    }

    /// Starts an arbiter round at `t`: empties the mailboxes.
    pub(super) fn begin_round(&mut self, t: u64) -> Vec<MailboxEntry> {
        self.last_round = Some(t);
        self.mailbox.drain(..).collect()
    }

    /// Whether the arbiter, in its round at `t`, still releases: its
    /// emulated link would start a packet before the next round.
    #[inline]
    pub(super) fn may_release(&self, t: u64) -> bool {
        self.emulated_link_free.max(t) < t + self.arbiter_ps
    }

    /// The arbiter releases a packet at `t` (link rate `bps`).
    pub(super) fn release(&mut self, id: u32, flow: u32, len: u32, t: u64, bps: u64) {
        self.emulated_link_free = self.emulated_link_free.max(t) + tx_ps(len, bps);
        self.released.push_back(ReleasedPacket {
            id,
            flow,
            len,
            released_at: t,
        });
        self.out_bytes[flow as usize] += u64::from(len);
    }

    /// A dispatcher at `t`: released packets go to the NIC FIFO. Returns
    /// the NIC's front (the packet on the wire once the link is idle).
    pub(super) fn dispatch(&mut self, t: u64, bps: u64) -> Option<OnWire> {
        while let Some(&r) = self.released.front() {
            if r.released_at > t {
                break;
            }
            self.released.pop_front();
            let done = self.nic_free.max(t) + tx_ps(r.len, bps);
            self.nic_free = done;
            self.nic.push_back(OnWire {
                id: r.id,
                flow: r.flow,
                done,
            });
        }
        self.nic.front().copied()
    }

    /// The NIC sent its front packet (`len` bytes of `flow`); returns the
    /// next packet on the wire.
    pub(super) fn transmitted(&mut self, flow: u32, len: u32) -> Option<OnWire> {
        self.nic.pop_front();
        self.out_bytes[flow as usize] -= u64::from(len);
        self.nic.front().copied()
    }

    /// Bytes of `flow` released or in the NIC, not yet sent.
    #[inline]
    pub(super) fn out_bytes(&self, flow: usize) -> u64 {
        self.out_bytes[flow]
    }

    /// Packets in the mailboxes.
    pub(super) fn in_mailboxes(&self) -> u64 {
        self.mailbox.len() as u64
    }

    /// Packets released or in the NIC (the packet on the wire included).
    pub(super) fn released_or_in_nic(&self) -> u64 {
        (self.released.len() + self.nic.len()) as u64
    }
}
