//! The sending side of the PSPAT runtime: a [`Client`] is one sending
//! thread's handle with a private lock-free mailbox; [`ClientStats`] are its
//! counters. Crate-internal: the state clients share with the arbiter
//! (`Shared`, `ClientMeta`) and what the arbiter keeps of each client
//! (`ClientEnd`).
//!
//! [`Client::send`] never blocks and never takes a lock. After a push it
//! rings the [`Doorbell`]: its bit is set only if it is clear, so a busy
//! client touches shared memory once per arbiter round. Its only barrier is
//! [`barrier::light`] (a compiler fence where `membarrier` is available).

use std::collections::VecDeque;
use std::sync::{Mutex, OnceLock, PoisonError, Weak};

use crossbeam_utils::CachePadded;
use pktsched_core::{DropReason, Nanos, Pkt};
use serde::Serialize;

use crate::barrier::{self, stop};
use crate::config::{Clock, Config, RuntimeError, Sent};
use crate::doorbell::{BellBit, Doorbell};
use crate::mailbox::{Consumer, Mailbox, Producer};
use crate::sync::{Arc, AtomicBool, AtomicU64, Ordering};

/// A packet [`Client::send`] could not take, handed back untouched.
#[derive(Debug, PartialEq, Eq)]
pub enum SendError<T> {
    /// The mailbox is full: the arbiter is behind. Retry or drop.
    Full(Pkt<T>),
    /// The runtime is stopping or stopped.
    Stopped(Pkt<T>),
}

impl<T> SendError<T> {
    /// The packet.
    pub fn into_pkt(self) -> Pkt<T> {
        match self {
            SendError::Full(p) | SendError::Stopped(p) => p,
        }
    }
}

/// [`Client::send_batch`] was refused: the runtime is stopping or stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stopped;

/// Per-client state the client and the arbiter share (one cache line per
/// writer).
#[derive(Debug, Default)]
pub(crate) struct ClientMeta {
    /// Written by the client.
    pub(crate) own: CachePadded<ClientOwn>,
    /// Written by the arbiter: set when the scheduler dropped one of this
    /// client's packets; the client clears it when it reports it.
    pub(crate) backpressure: CachePadded<AtomicBool>,
}

/// The part of [`ClientMeta`] only the client writes.
#[derive(Debug, Default)]
pub(crate) struct ClientOwn {
    /// Inside `send` (between the stop check and the push); see the stop
    /// handshake in [`Arbiter::stop`](crate::arbiter::Arbiter::stop).
    pub(crate) busy: AtomicBool,
    sent: AtomicU64,
    full: AtomicU64,
    refused_stopped: AtomicU64,
    backpressure_events: AtomicU64,
    /// Starved time: gaps longer than [`STARVED_GAP`] in a run of
    /// back-to-back sends, summed, ns (see `driver::step_aside`).
    pub(crate) starved_ns: AtomicU64,
}

/// A gap between two sends of a client that was sending back to back
/// (sends less than [`STREAM_GAP`] apart) longer than this, ns, counts as
/// starved: the thread lost its core (a full mailbox's backoff sleeps at
/// most [`Backoff::MAX_SLEEP`], well below it).
pub(crate) const STARVED_GAP: u64 = 500_000;
/// Sends closer than this, ns, are back to back.
pub(crate) const STREAM_GAP: u64 = 200_000;
/// While the arbiter thread has stepped aside, a client runs a round when
/// none started within this long, ns (or `Config::assist_after`).
pub(crate) const AWAY_AFTER: u64 = 2_000;
/// Without `Config::assist_after`, a client reads the clock (to see its
/// own gaps, or that the arbiter stepped aside) on one send in this many.
const CLOCK_EVERY: u32 = 16;

/// What the arbiter keeps of a client: the consumer end of its mailbox and
/// the arbiter's per-client bookkeeping (written by the arbiter only).
pub(crate) struct ClientEnd<T> {
    pub(crate) rx: Consumer<Pkt<T>>,
    pub(crate) meta: Arc<ClientMeta>,
    /// When the mailbox was last read (reads are `read_interval` apart).
    pub(crate) last_read: Option<Nanos>,
    /// Consecutive reads that found the mailbox empty.
    pub(crate) empty_reads: u32,
    /// In the arbiter's active list.
    pub(crate) active: bool,
    /// Packets taken out of the mailbox.
    pub(crate) drained: u64,
    /// Of those, dropped by the scheduler, by [`drop_reason_index`].
    pub(crate) dropped: [u64; 4],
    /// Client-transmit mode: the return mailbox and what did not fit in it.
    pub(crate) ret: Option<Producer<Pkt<T>>>,
    pub(crate) ret_waiting: VecDeque<Pkt<T>>,
    /// Packets taken from the mailbox behind one the scheduler dropped:
    /// the next read offers them first. They count as pending for the
    /// client (see [`Consumer::report_held`]).
    pub(crate) held: Vec<Pkt<T>>,
}

impl<T> ClientEnd<T> {
    /// `true` if nothing of this client waits for the arbiter: the mailbox
    /// is empty and no packet is held back from the last read.
    pub(crate) fn no_mail(&self) -> bool {
        self.held.is_empty() && self.rx.is_empty()
    }

    /// The client's counters with the arbiter's drain and drop counts.
    pub(crate) fn stats(&self) -> ClientStats {
        ClientStats {
            drained: self.drained,
            dropped_queue_full: self.dropped[0],
            dropped_too_large: self.dropped[1],
            dropped_unknown_flow: self.dropped[2],
            ..meta_stats(&self.meta)
        }
    }
}

/// Index of a drop reason in [`ClientEnd::dropped`].
pub(crate) fn drop_reason_index(r: DropReason) -> usize {
    match r {
        DropReason::QueueFull => 0,
        DropReason::TooLarge => 1,
        DropReason::UnknownFlow => 2,
        DropReason::Removed => 3,
    }
}

/// State shared by clients, the arbiter and the threaded runtime's handle.
pub(crate) struct Shared<T> {
    /// Where clients ring to wake the arbiter.
    pub(crate) doorbell: Doorbell,
    /// Set when the runtime stops: sends are refused from then on.
    pub(crate) stop: AtomicBool,
    /// Set while the arbiter thread has stepped aside: sending clients
    /// run the rounds, backlogged or not (see `driver::step_aside`).
    pub(crate) away: AtomicBool,
    /// Clients created and not yet picked up by the arbiter.
    registry: Mutex<Vec<ClientEnd<T>>>,
    /// Ids handed out so far.
    next_id: AtomicU64,
    /// Everything of each client that clients write (for stats).
    pub(crate) metas: Mutex<Vec<Arc<ClientMeta>>>,
    mailbox_capacity: usize,
    max_clients: usize,
    /// Return mailbox capacity, or 0 when clients do not transmit.
    return_capacity: usize,
    /// The arbiter behind its hand-off lock, once it is there (clients
    /// made after that may run late rounds).
    assist: OnceLock<AssistSetup>,
}

/// A round clients can run when the arbiter is late: implemented by the
/// arbiter behind its hand-off lock ([`crate::handoff::RoundLock`]).
pub(crate) trait LateRound: Send + Sync {
    /// When the last round started (ns).
    fn last_round(&self) -> u64;
    /// Runs one round at `now` if the lock is free and the arbiter is
    /// still late; `true` if it ran.
    fn try_late_round(&self, now: Nanos, after: u64) -> bool;
}

/// How clients of a runtime reach its late rounds.
pub(crate) struct AssistSetup {
    /// Weak: the arbiter's state holds `Shared`, which holds this.
    pub(crate) round: Weak<dyn LateRound>,
    /// The runtime's clock; `None` (sans I/O): only
    /// [`Client::assist_at`] with an explicit `now` runs rounds.
    pub(crate) clock: Option<Clock>,
    /// Lateness threshold, ns; `None`: clients run rounds only while the
    /// arbiter thread has stepped aside.
    pub(crate) after: Option<u64>,
    /// `Config::starved_assist`.
    pub(crate) starved: bool,
    /// Every client may run late rounds (`Config::assist_after`,
    /// `step_aside`, `humble` or `starved_assist` is set); otherwise only
    /// a client that asked for it ([`Client::set_assist_after`]).
    pub(crate) for_all: bool,
}

impl AssistSetup {
    /// A client's end of the setup with lateness threshold `after`; `None`
    /// once the arbiter is gone.
    fn client_end(&self, after: Option<u64>) -> Option<Assist> {
        Some(Assist {
            round: self.round.upgrade()?,
            clock: self.clock,
            after,
            starved: self.starved,
            own: false,
            last_send: 0,
            streaming: false,
            unclocked: 0,
            seen: 0,
        })
    }
}

/// A client's end of [`AssistSetup`].
struct Assist {
    round: std::sync::Arc<dyn LateRound>,
    clock: Option<Clock>,
    after: Option<u64>,
    /// `Config::starved_assist`: a starved gap lets this client run a
    /// round while the arbiter thread is present.
    starved: bool,
    /// Asked for by the client itself ([`Client::set_assist_after`]): it
    /// runs a late round whatever its mailbox holds.
    own: bool,
    /// When this client last read the clock in a send, ns.
    last_send: u64,
    /// That send came less than [`STREAM_GAP`] after the one before.
    streaming: bool,
    /// Sends since the clock was last read.
    unclocked: u32,
    /// The last round's start as this client last read it. Rounds start
    /// later and later, so while this copy says "not late" the arbiter is
    /// not late, and the shared stamp (a line the round runner writes
    /// every round) is not read.
    seen: u64,
}

impl<T: Send> Shared<T> {
    /// The shared state of a runtime configured by `cfg` (already
    /// validated).
    pub(crate) fn new(cfg: &Config) -> Self {
        Shared {
            doorbell: Doorbell::new(cfg.max_clients),
            stop: AtomicBool::new(false),
            away: AtomicBool::new(false),
            registry: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
            metas: Mutex::new(Vec::new()),
            mailbox_capacity: cfg.mailbox_capacity,
            max_clients: cfg.max_clients,
            return_capacity: if cfg.client_transmit {
                cfg.tx_capacity
            } else {
                0
            },
            assist: OnceLock::new(),
        }
    }

    /// Lets clients made from now on run late rounds through `setup`
    /// (once; later calls are ignored).
    pub(crate) fn set_assist(&self, setup: AssistSetup) {
        let _ = self.assist.set(setup);
    }

    /// Moves the clients created since the last call to the end of
    /// `clients` (their ids are their indices there).
    pub(crate) fn pick_up_clients(&self, clients: &mut Vec<ClientEnd<T>>) {
        let mut reg = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
        clients.append(&mut reg);
    }

    /// Every client's starved time so far, summed, ns.
    pub(crate) fn clients_starved_ns(&self) -> u64 {
        let metas = self.metas.lock().unwrap_or_else(PoisonError::into_inner);
        metas
            .iter()
            .map(|m| m.own.starved_ns.load(Ordering::Relaxed))
            .sum()
    }

    /// Every client's own counters (without the arbiter's drain and drop
    /// counts, which only the final report has).
    pub(crate) fn client_stats(&self) -> Vec<ClientStats> {
        let metas = self
            .metas
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        metas.iter().map(|m| meta_stats(m)).collect()
    }
}

/// A sending thread's handle. `Send`, not `Clone`: one per thread.
pub struct Client<T> {
    id: usize,
    /// This client's bit in the doorbell.
    bell: BellBit,
    tx: Producer<Pkt<T>>,
    /// Client-transmit mode: packets the arbiter cleared for this client.
    ret: Option<Consumer<Pkt<T>>>,
    meta: Arc<ClientMeta>,
    shared: Arc<Shared<T>>,
    sent: u64,
    /// Late rounds (`None`: the arbiter is not behind a hand-off lock, or
    /// neither the runtime's settings nor [`Client::set_assist_after`]
    /// asked for them).
    assist: Option<Assist>,
    /// Rounds this client ran.
    assisted: u64,
}

impl<T: Send> Client<T> {
    /// This client's id (0, 1, …, in creation order).
    pub fn id(&self) -> usize {
        self.id
    }

    /// Hands `pkt` to the arbiter. Never blocks; `Err` returns the packet.
    #[inline]
    pub fn send(&mut self, pkt: Pkt<T>) -> Result<Sent, SendError<T>> {
        let own = &self.meta.own;
        // Stop handshake (see `barrier::stop` and `Arbiter::close_and_drain`):
        // announce, light barrier, look.
        let light = barrier::Light::mode();
        if !stop::enter(&own.busy, light, || &self.shared.stop) {
            own.refused_stopped.fetch_add(1, Ordering::Relaxed);
            return Err(SendError::Stopped(pkt));
        }
        let pushed = self.tx.try_push(pkt);
        stop::leave(&own.busy);
        if let Err(pkt) = pushed {
            own.full.fetch_add(1, Ordering::Relaxed);
            // Its mailbox full while the arbiter is away: no one else may
            // empty it (as `send_batch` does with nothing taken).
            self.assist_if_late(0);
            return Err(SendError::Full(pkt));
        }
        self.sent += 1;
        own.sent.store(self.sent, Ordering::Relaxed);
        self.shared.doorbell.ring_bit_with(self.bell, light);
        self.assist_if_late(1);
        let bp = &self.meta.backpressure;
        if bp.load(Ordering::Relaxed) && bp.swap(false, Ordering::Relaxed) {
            let own = &self.meta.own;
            own.backpressure_events.fetch_add(1, Ordering::Relaxed);
            return Ok(Sent::Backpressure);
        }
        Ok(Sent::Queued)
    }

    /// Hands packets from the front of `pkts` to the arbiter, as many as fit
    /// in the mailbox, with one stop check and one doorbell ring for the
    /// whole batch. Returns how many were taken; what did not fit stays in
    /// `pkts` (and counts one mailbox-full event). `Err` if stopped (`pkts`
    /// untouched).
    pub fn send_batch(&mut self, pkts: &mut VecDeque<Pkt<T>>) -> Result<(usize, Sent), Stopped> {
        let own = &self.meta.own;
        let light = barrier::Light::mode();
        if !stop::enter(&own.busy, light, || &self.shared.stop) {
            own.refused_stopped
                .fetch_add(pkts.len() as u64, Ordering::Relaxed);
            return Err(Stopped);
        }
        let n = self
            .tx
            .try_push_many(&mut std::iter::from_fn(|| pkts.pop_front()));
        stop::leave(&own.busy);
        if !pkts.is_empty() {
            own.full.fetch_add(1, Ordering::Relaxed);
        }
        if n == 0 {
            self.assist_if_late(0);
            return Ok((0, Sent::Queued));
        }
        self.sent += n as u64;
        own.sent.store(self.sent, Ordering::Relaxed);
        self.shared.doorbell.ring_bit_with(self.bell, light);
        self.assist_if_late(n);
        let bp = &self.meta.backpressure;
        if bp.load(Ordering::Relaxed) && bp.swap(false, Ordering::Relaxed) {
            let own = &self.meta.own;
            own.backpressure_events.fetch_add(1, Ordering::Relaxed);
            return Ok((n, Sent::Backpressure));
        }
        Ok((n, Sent::Queued))
    }

    /// Lets this client run a round itself when none started within
    /// `after` (on any send, or a poll with nothing to send), whatever
    /// `Config::assist_after` says for the others: for a light,
    /// latency-sensitive sender whose packet should not wait for an arbiter
    /// thread that lost its core (the host took the vCPU, or a thread
    /// shares it). The round is the arbiter's own, under its hand-off lock.
    /// Returns `false` (nothing changes) where the runtime has no hand-off
    /// lock (a sans-I/O `Arbiter` without a clock) or its arbiter is gone;
    /// after stop a client that asked runs no round (the lock is empty).
    pub fn set_assist_after(&mut self, after: std::time::Duration) -> bool {
        let ns = Some(u64::try_from(after.as_nanos()).unwrap_or(u64::MAX));
        if self.assist.is_none() {
            self.assist = self.shared.assist.get().and_then(|s| s.client_end(ns));
        }
        let Some(a) = &mut self.assist else {
            return false;
        };
        a.after = ns;
        a.own = true;
        true
    }

    /// Client-transmit mode ([`Config::client_transmit`]): moves the
    /// packets the arbiter has cleared for this client (in release order)
    /// into `out`, for the client to transmit; returns how many. Works after
    /// stop too, until the return mailbox is empty. Always 0 in the other
    /// modes.
    pub fn take_cleared(&mut self, out: &mut Vec<Pkt<T>>) -> usize {
        match &mut self.ret {
            Some(r) => r.pop_into(out, usize::MAX),
            None => 0,
        }
    }

    /// Hand-off: if no arbiter round started within
    /// `Config::assist_after` before `now` (while the arbiter thread has
    /// stepped aside: within 2 µs (`AWAY_AFTER`) at most), and no one is running one, runs
    /// one round at `now` on this thread; `true` if it ran. The round is the
    /// arbiter's own (same scheduler, link and order), so the packets and
    /// decisions are those the arbiter would have produced at `now`.
    /// [`Client::send`] and [`Client::send_batch`] call this with the
    /// runtime's clock when what they pushed is all the mailbox holds
    /// (the client is not backlogged) or the arbiter stepped aside, and
    /// `send_batch` with an empty batch does too, so an idle client can
    /// poll; call it directly with a virtual clock. Always `false` without
    /// a hand-off lock.
    pub fn assist_at(&mut self, now: Nanos) -> bool {
        let away = self.shared.away.load(Ordering::Relaxed);
        let Some(a) = &self.assist else {
            return false;
        };
        let Some(after) = lateness(a.after, away) else {
            return false;
        };
        self.late_round(now, after)
    }

    /// Runs one round at `now` if none started within `after` before it
    /// and no one is running one; `true` if it ran.
    fn late_round(&mut self, now: Nanos, after: u64) -> bool {
        let Some(a) = &mut self.assist else {
            return false;
        };
        let late = |seen: u64| now.0.saturating_sub(seen) > after;
        if !late(a.seen) {
            return false;
        }
        a.seen = a.round.last_round();
        if !late(a.seen) || !a.round.try_late_round(now, after) {
            return false;
        }
        a.seen = now.0;
        self.assisted += 1;
        true
    }

    /// Rounds this client has run for a late arbiter.
    pub fn assisted_rounds(&self) -> u64 {
        self.assisted
    }

    /// After this client pushed `pushed` packets: reads the runtime's
    /// clock (nothing sans I/O; without `assist_after`, on one send in
    /// [`CLOCK_EVERY`] unless the arbiter stepped aside), counts a
    /// starved gap, and runs [`Client::assist_at`] if what was pushed is
    /// all the mailbox holds or the arbiter stepped aside: a client with
    /// older packets still waiting is backlogged (its packets wait for
    /// their share, not for the arbiter), and while the arbiter thread
    /// runs rounds, a backlogged client running them only takes the core
    /// from it and the other clients (and may lose it holding the lock).
    #[inline]
    fn assist_if_late(&mut self, pushed: usize) {
        let Some(a) = &mut self.assist else {
            return;
        };
        let Some(clock) = a.clock else {
            return;
        };
        let away = self.shared.away.load(Ordering::Relaxed);
        if a.after.is_none() && !away {
            a.unclocked += 1;
            if a.unclocked < CLOCK_EVERY {
                return;
            }
        }
        a.unclocked = 0;
        let now = clock.now().0;
        self.clocked_send(pushed, now, away);
    }

    /// The part of [`Client::assist_if_late`] after the clock read, at
    /// `now` (ns): counts a starved gap and runs a round if the arbiter is
    /// late. With `Config::starved_assist`, a starved gap counts as the
    /// arbiter being away: the client, back on a core after losing it,
    /// runs the round if none started within [`AWAY_AFTER`], backlogged
    /// or not.
    pub(crate) fn clocked_send(&mut self, pushed: usize, now: u64, away: bool) {
        let Some(a) = &mut self.assist else {
            return;
        };
        let (starved, streaming) = starved_gap(a.streaming, a.last_send, now);
        if starved > 0 {
            self.meta
                .own
                .starved_ns
                .fetch_add(starved, Ordering::Relaxed);
        }
        a.streaming = streaming;
        a.last_send = now;
        let urgent = away || (a.starved && starved > 0);
        let Some(after) = lateness(a.after, urgent) else {
            return;
        };
        // A backlogged client leaves the rounds to the arbiter, unless it
        // asked for its own (`set_assist_after`): its packets are still in
        // its mailbox when it polls with nothing to send.
        let backlogged = !a.own && self.tx.len_estimate() > pushed;
        if now.saturating_sub(a.seen) <= after || (!urgent && backlogged) {
            return;
        }
        self.late_round(Nanos(now), after);
    }

    /// Approximate number of packets waiting in this client's mailbox.
    /// (When a send finds it full, wait with a [`Backoff`].)
    pub fn pending(&self) -> usize {
        self.tx.len_estimate()
    }
}

/// A client's send at `now` after one at `last` (`streaming`: that one
/// came back to back after the one before): the starved time to count
/// (the gap if it is longer than [`STARVED_GAP`] and the client was
/// streaming, else 0), and whether this send is back to back.
fn starved_gap(streaming: bool, last: u64, now: u64) -> (u64, bool) {
    let gap = now.saturating_sub(last);
    let starved = if streaming && gap > STARVED_GAP {
        gap
    } else {
        0
    };
    (starved, gap < STREAM_GAP)
}

/// The lateness from which a client runs a round: `after`, and while the
/// arbiter stepped aside at most [`AWAY_AFTER`] (a longer `after` would
/// let no round run within the away period's quiet limit); `None`: never.
fn lateness(after: Option<u64>, away: bool) -> Option<u64> {
    match (after, away) {
        (Some(a), true) => Some(a.min(AWAY_AFTER)),
        (Some(a), false) => Some(a),
        (None, true) => Some(AWAY_AFTER),
        (None, false) => None,
    }
}

/// What a client whose mailbox is full does next ([`Backoff::next_wait`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Spin this many times (the arbiter frees room within a round).
    Spin(u32),
    /// Give the core to another runnable thread.
    Yield,
    /// Sleep: the arbiter is behind, or the client sends above its share.
    Sleep(std::time::Duration),
}

/// How a sending thread waits while its mailbox is full: spin briefly,
/// then yield, then sleep for doubling times up to a cap; [`Backoff::reset`]
/// after a send that took packets.
///
/// A full mailbox means the arbiter is behind or the client sends above
/// its share (the scheduler drops what it cannot queue, and the arbiter
/// leaves the rest in the mailbox). Either way more attempts do not help,
/// and a client that keeps spinning or yielding stays runnable: on a core
/// it shares with the arbiter, the kernel then splits the core among all
/// such clients and the arbiter, which gets a sliver and falls further
/// behind. A sleeping client is not runnable, so the arbiter gets the core.
/// The longest sleep ([`Backoff::MAX_SLEEP`]) is well below the time the
/// link takes to send a full mailbox at the default sizes (512 MTU
/// packets at 10 Gbit/s: 600 µs), so a client that slept does not leave
/// the link idle.
#[derive(Clone, Debug, Default)]
pub struct Backoff {
    fails: u32,
}

impl Backoff {
    /// Full mailboxes answered by spinning.
    pub const SPINS: u32 = 2;
    /// Then by yielding.
    pub const YIELDS: u32 = 2;
    /// First sleep.
    pub const MIN_SLEEP: std::time::Duration = std::time::Duration::from_micros(5);
    /// Longest sleep.
    pub const MAX_SLEEP: std::time::Duration = std::time::Duration::from_micros(80);

    /// A backoff that has seen no full mailbox.
    pub fn new() -> Backoff {
        Backoff { fails: 0 }
    }

    /// The send took packets: start again from spinning.
    pub fn reset(&mut self) {
        self.fails = 0;
    }

    /// The mailbox was full: what to do before the next attempt.
    pub fn next_wait(&mut self) -> Wait {
        let k = self.fails;
        self.fails = self.fails.saturating_add(1);
        if k < Self::SPINS {
            return Wait::Spin(32 << k);
        }
        if k < Self::SPINS + Self::YIELDS {
            return Wait::Yield;
        }
        let doublings = (k - Self::SPINS - Self::YIELDS).min(16);
        Wait::Sleep((Self::MIN_SLEEP * (1 << doublings)).min(Self::MAX_SLEEP))
    }

    /// Waits as [`Backoff::next_wait`] says.
    pub fn wait(&mut self) {
        match self.next_wait() {
            Wait::Spin(n) => {
                for _ in 0..n {
                    std::hint::spin_loop();
                }
            }
            Wait::Yield => std::thread::yield_now(),
            Wait::Sleep(d) => std::thread::sleep(d),
        }
    }
}

/// Per-client counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClientStats {
    /// Packets accepted into the mailbox.
    pub sent: u64,
    /// Sends (or batches, for `send_batch`) that found the mailbox full.
    pub mailbox_full: u64,
    /// Sends refused because the runtime was stopping.
    pub refused_stopped: u64,
    /// Sends that reported [`Sent::Backpressure`].
    pub backpressure_events: u64,
    /// Packets the arbiter took out of the mailbox (final report only).
    pub drained: u64,
    /// Of those, dropped by the scheduler: queue_full, too_large,
    /// unknown_flow (final report only).
    pub dropped_queue_full: u64,
    /// See `dropped_queue_full`.
    pub dropped_too_large: u64,
    /// See `dropped_queue_full`.
    pub dropped_unknown_flow: u64,
}

impl<T> std::fmt::Debug for Client<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.id)
            .field("sent", &self.sent)
            .finish_non_exhaustive()
    }
}

/// A client's own counters.
pub(crate) fn meta_stats(m: &ClientMeta) -> ClientStats {
    ClientStats {
        sent: m.own.sent.load(Ordering::Relaxed),
        mailbox_full: m.own.full.load(Ordering::Relaxed),
        refused_stopped: m.own.refused_stopped.load(Ordering::Relaxed),
        backpressure_events: m.own.backpressure_events.load(Ordering::Relaxed),
        ..ClientStats::default()
    }
}

/// Registers a new client with the runtime behind `shared`: its mailbox
/// (and return mailbox in client-transmit mode), its [`ClientEnd`] for the
/// arbiter to pick up, and its handle.
pub(crate) fn new_client<T: Send>(shared: &Arc<Shared<T>>) -> Result<Client<T>, RuntimeError> {
    let mut reg = shared
        .registry
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let id = shared.next_id.load(Ordering::Relaxed) as usize;
    if id >= shared.max_clients {
        return Err(RuntimeError::TooManyClients {
            max: shared.max_clients,
        });
    }
    if shared.stop.load(Ordering::SeqCst) {
        return Err(RuntimeError::Stopped);
    }
    let (tx, rx) = Mailbox::with_capacity::<Pkt<T>>(shared.mailbox_capacity);
    let (ret_tx, ret_rx) = if shared.return_capacity > 0 {
        let (t, r) = Mailbox::with_capacity::<Pkt<T>>(shared.return_capacity);
        (Some(t), Some(r))
    } else {
        (None, None)
    };
    let meta = Arc::new(ClientMeta::default());
    reg.push(ClientEnd {
        rx,
        meta: meta.clone(),
        last_read: None,
        empty_reads: 0,
        active: false,
        drained: 0,
        dropped: [0; 4],
        ret: ret_tx,
        ret_waiting: VecDeque::new(),
        held: Vec::new(),
    });
    shared.next_id.store(id as u64 + 1, Ordering::Relaxed);
    shared
        .metas
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(meta.clone());
    drop(reg);
    let assist = shared
        .assist
        .get()
        .filter(|s| s.for_all)
        .and_then(|s| s.client_end(s.after));
    Ok(Client {
        id,
        bell: BellBit::of(id),
        tx,
        ret: ret_rx,
        meta,
        shared: shared.clone(),
        sent: 0,
        assist,
        assisted: 0,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{AWAY_AFTER, Backoff, STARVED_GAP, STREAM_GAP, Wait, lateness, starved_gap};

    #[test]
    fn only_a_long_gap_in_back_to_back_sends_counts_as_starved() {
        let t = 10_000_000;
        // Back to back, then a gap just over the threshold: counted whole.
        assert_eq!(
            starved_gap(true, t, t + STARVED_GAP + 1),
            (STARVED_GAP + 1, false)
        );
        // At the threshold: not counted.
        assert_eq!(starved_gap(true, t, t + STARVED_GAP), (0, false));
        // A client that was not streaming (a paced or idle one) pauses.
        assert_eq!(starved_gap(false, t, t + 10 * STARVED_GAP), (0, false));
        // Sends close together make it streaming; at the threshold not.
        assert_eq!(starved_gap(false, t, t + STREAM_GAP - 1), (0, true));
        assert_eq!(starved_gap(true, t, t + STREAM_GAP), (0, false));
        // A clock that went back (copies of one epoch never do) is no gap.
        assert_eq!(starved_gap(true, t, t - 1), (0, true));
    }

    #[test]
    fn clients_run_rounds_without_assist_after_only_while_the_arbiter_is_away() {
        assert_eq!(lateness(None, false), None);
        assert_eq!(lateness(None, true), Some(AWAY_AFTER));
        assert_eq!(lateness(Some(7), false), Some(7));
        assert_eq!(lateness(Some(7), true), Some(7));
        // A long hand-off lateness is cut to AWAY_AFTER while away only.
        assert_eq!(lateness(Some(10 * AWAY_AFTER), true), Some(AWAY_AFTER));
        assert_eq!(
            lateness(Some(10 * AWAY_AFTER), false),
            Some(10 * AWAY_AFTER)
        );
    }

    #[test]
    fn backoff_spins_then_yields_then_sleeps_doubling_up_to_the_cap() {
        let mut b = Backoff::new();
        let seq: Vec<Wait> = (0..12).map(|_| b.next_wait()).collect();
        let us = |n| Wait::Sleep(Duration::from_micros(n));
        assert_eq!(
            seq,
            vec![
                Wait::Spin(32),
                Wait::Spin(64),
                Wait::Yield,
                Wait::Yield,
                us(5),
                us(10),
                us(20),
                us(40),
                us(80),
                us(80),
                us(80),
                us(80),
            ]
        );
        // Long runs of full mailboxes neither overflow nor exceed the cap.
        for _ in 0..100_000 {
            assert!(matches!(b.next_wait(), Wait::Sleep(d) if d == Backoff::MAX_SLEEP));
        }
        b.reset();
        assert_eq!(b.next_wait(), Wait::Spin(32));
    }
}
