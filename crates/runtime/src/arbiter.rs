//! The PSPAT arbiter, sans I/O: scheduler, emulated link and the arbiter's
//! end of every client mailbox. It owns no thread and reads no clock: `now`
//! is always an argument, so tests drive it with a virtual clock and the
//! threaded [`driver`](crate::driver) (or a daemon with its own event loop)
//! calls the same [`Arbiter::do_scan`].
//!
//! One round ([`Arbiter::do_scan`]) is the paper's loop: collect the clients
//! that rang, drain the mailboxes of recently active clients (each read at
//! most once per `read_interval`, at most `read_batch` packets, stopping at
//! the first drop) into the scheduler, settle and trim clients whose mailbox
//! stayed empty, release packets while the emulated [`Link`] is idle and
//! hand them to the output, the dispatchers' TX mailboxes, or
//! (client-transmit mode) back to their clients.
//!
//! [`Arbiter::stop`] refuses new sends, drains every mailbox, then sends or
//! returns what is queued and reports where every packet went.

use std::collections::VecDeque;

use pktsched_core::{FlowId, Nanos, Pkt};

use crate::barrier;
use crate::client::{
    Client, ClientEnd, ClientMeta, ClientStats, Shared, drop_reason_index, new_client,
};
use crate::config::{BoxedScheduler, Config, RuntimeError, StopMode, dur_nanos};
use crate::doorbell::Doorbell;
use crate::link::Link;
use crate::mailbox::Producer;
use crate::output::Output;
use crate::report::{ArbiterStats, Report, ThreadCounts};
use crate::sync::{Arc, AtomicBool, Ordering};

#[cfg(test)]
mod handoff_tests;
mod lens;
#[cfg(test)]
mod prio_credit_tests;
mod shared;
#[cfg(test)]
mod tests;

pub use shared::SharedArbiter;

/// One round's outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Round {
    /// Packets drained from mailboxes.
    pub drained: usize,
    /// Packets released to the link.
    pub released: usize,
    /// Packets left in the scheduler.
    pub backlog: u64,
    /// When the link is next free (meaningful if `backlog > 0`).
    pub link_free: Nanos,
}

/// Where released packets go.
pub(crate) enum Sink<T, O> {
    /// The arbiter transmits.
    Inline(O),
    /// One TX mailbox (and overflow queue) per dispatcher.
    Dispatch(Vec<DispatchTx<T>>),
    /// Back to the client that sent each packet (`owner[flow]` = the
    /// client whose packet of that flow was last accepted).
    Clients {
        owner: Vec<u32>,
        /// Clients with packets in `ClientEnd::ret_waiting`.
        dirty: Vec<usize>,
    },
}

impl<T, O> Sink<T, O> {
    /// Client-transmit mode's sink, with no owners recorded yet.
    pub(crate) fn clients() -> Self {
        Sink::Clients {
            owner: Vec::new(),
            dirty: Vec::new(),
        }
    }
}

/// The arbiter's end of one dispatcher's TX mailbox.
pub(crate) struct DispatchTx<T> {
    tx: Producer<Pkt<T>>,
    /// Packets released but not yet in the TX mailbox (it was full).
    waiting: VecDeque<Pkt<T>>,
    /// The dispatcher's doorbell (rung after pushes).
    bell: Arc<Doorbell>,
    pushed: bool,
    /// Set (Release) when the arbiter has pushed its last packet.
    done: Arc<AtomicBool>,
}

impl<T> DispatchTx<T> {
    /// The arbiter's end of a dispatcher's TX mailbox `tx`, its doorbell
    /// `bell` and its end-of-stream flag `done`.
    pub(crate) fn new(tx: Producer<Pkt<T>>, bell: Arc<Doorbell>, done: Arc<AtomicBool>) -> Self {
        DispatchTx {
            tx,
            waiting: VecDeque::new(),
            bell,
            pushed: false,
            done,
        }
    }
}

/// What the stop sequence did with the packets still inside the arbiter.
pub(crate) struct Leftovers<T> {
    /// Sent at stop, ignoring the link ([`StopMode::Drain`]).
    flushed: u64,
    /// Handed back (see [`Report::returned`]).
    returned: Vec<Pkt<T>>,
    /// How many of `returned` had already been cleared.
    returned_cleared: u64,
}

/// The arbiter: scheduler, emulated link, client ends. Deterministic;
/// `now` is always an argument.
pub struct Arbiter<T, O> {
    sched: BoxedScheduler<T>,
    link: Link,
    /// [`Config::burst`]: bytes the link may run ahead of the clock.
    burst: u32,
    /// How far ahead of the clock that is at the link's rate (kept with
    /// `burst` and the rate, not divided out every round).
    lead: Nanos,
    /// The priority credit ([`Arbiter::set_priority_credit`]): the bytes
    /// beyond `burst` the link may run ahead for a frame of an urgent
    /// flow, and that at the link's rate.
    prio_burst: u32,
    prio_lead: Nanos,
    /// The flows that may use the priority credit.
    urgent: Vec<FlowId>,
    /// Frames released on the priority credit.
    prio_released: u64,
    shared: Arc<Shared<T>>,
    /// Every client picked up so far, indexed by id.
    clients: Vec<ClientEnd<T>>,
    /// Ids of the clients whose mailboxes are read each round.
    active: Vec<usize>,
    sink: Sink<T, O>,
    /// Packets released this round, on their way to the sink.
    batch: Vec<Pkt<T>>,
    /// Scratch: one mailbox read on its way into the scheduler (a `Vec`:
    /// the mailbox appends a run to it as one contiguous copy).
    inbox: Vec<Pkt<T>>,
    /// Scratch for the ids taken from the doorbell.
    rung: Vec<usize>,
    read_interval: Nanos,
    round_cap: usize,
    read_batch: usize,
    /// The longest packet drained so far: every packet queued through the
    /// mailboxes is at most this long (the bound [`Arbiter::release`] plans
    /// its runs with); packets put in through [`Arbiter::scheduler`] are
    /// covered by `lent`.
    max_len: pktsched_core::Bytes,
    /// The scheduler has been lent out ([`Arbiter::scheduler`]), so packets
    /// may have entered past the mailboxes, longer than `max_len`: from
    /// then on the release also folds the lengths it sends into it.
    lent: bool,
    trim_after: u32,
    settle_interval: Nanos,
    last_settle: Option<Nanos>,
    /// [`Config::assist_after`], for [`SharedArbiter`].
    assist_after: Option<Nanos>,
    /// [`Config::starved_assist`], for [`SharedArbiter`].
    starved_assist: bool,
    /// The scheduler was empty at the end of the last round: the link has
    /// had nothing to send since, so its idle time is no credit.
    was_empty: bool,
    /// The last release stopped with packets queued that were not due yet
    /// (a shaper held them): the link idled from then on, so when they
    /// become due they start at that round's time (with
    /// `restart_at_arrival`: when they became due, or at what other
    /// classes sent meanwhile), not back-to-back from when the link went
    /// idle.
    held_back: bool,
    /// With `held_back`: when the first held packet becomes due (the
    /// scheduler's next ready time when the hold was found).
    held_until: Nanos,
    /// The last release stopped with packets queued but not because the
    /// scheduler gave nothing (the link was busy past the clock, or the
    /// round's cap was reached): whether what stayed queued was held by a
    /// shaper once the link became free is only known at the next round
    /// (see `Arbiter::find_idle_hold`).
    link_stopped: bool,
    /// [`Arbiter::set_restart_at_arrival`]: an idle link restarts at the
    /// latest arrival stamp of what the round drained, not at `now`.
    restart_at_arrival: bool,
    /// With `restart_at_arrival` after a round that left the link idle
    /// (the scheduler empty, or only packets a shaper held): the latest
    /// `Pkt::ts` this round drained (0: none yet).
    latest: u64,
    stats: ArbiterStats,
}

impl<T, O> std::fmt::Debug for Arbiter<T, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arbiter")
            .field("scheduler", &self.sched.name())
            .field("link", &self.link)
            .field("clients", &self.clients.len())
            .field("active", &self.active)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// Construction and inspection.
impl<T: Send + 'static, O: Output<T>> Arbiter<T, O> {
    /// An arbiter without threads, transmitting into `output` itself; make
    /// clients with [`Arbiter::client`] and call [`Arbiter::do_scan`].
    pub fn new(cfg: &Config, sched: BoxedScheduler<T>, output: O) -> Result<Self, RuntimeError> {
        cfg.validate()?;
        if cfg.client_transmit {
            return Err(RuntimeError::Config {
                field: "client_transmit",
                value: "true".into(),
                allowed: "false for Arbiter::new (use Arbiter::new_client_transmit)",
            });
        }
        Ok(Self::build(cfg, sched, Sink::Inline(output)))
    }

    /// A thread-less arbiter in client-transmit mode
    /// ([`Config::client_transmit`] must be set): cleared packets go back to
    /// their clients ([`Client::take_cleared`]); `O` is unused.
    pub fn new_client_transmit(
        cfg: &Config,
        sched: BoxedScheduler<T>,
    ) -> Result<Self, RuntimeError> {
        cfg.validate()?;
        if !cfg.client_transmit {
            return Err(RuntimeError::Config {
                field: "client_transmit",
                value: "false".into(),
                allowed: "true for Arbiter::new_client_transmit",
            });
        }
        Ok(Self::build(cfg, sched, Sink::clients()))
    }

    /// An arbiter for `cfg` (already validated) releasing into `sink`.
    pub(crate) fn build(cfg: &Config, sched: BoxedScheduler<T>, sink: Sink<T, O>) -> Self {
        Arbiter {
            sched,
            link: Link::new(cfg.link),
            burst: cfg.burst,
            lead: cfg.link.tx_time(u64::from(cfg.burst)),
            prio_burst: 0,
            prio_lead: Nanos::ZERO,
            urgent: Vec::new(),
            prio_released: 0,
            shared: Arc::new(Shared::new(cfg)),
            clients: Vec::new(),
            active: Vec::new(),
            sink,
            batch: Vec::with_capacity(cfg.round_cap),
            inbox: Vec::with_capacity(cfg.read_batch),
            rung: Vec::new(),
            read_interval: dur_nanos(cfg.read_interval),
            round_cap: cfg.round_cap,
            read_batch: cfg.read_batch,
            max_len: 0,
            lent: false,
            trim_after: cfg.trim_after,
            settle_interval: dur_nanos(cfg.settle_interval),
            last_settle: None,
            assist_after: cfg.assist_after.map(dur_nanos),
            starved_assist: cfg.starved_assist,
            was_empty: true,
            held_back: false,
            held_until: Nanos(0),
            link_stopped: false,
            restart_at_arrival: false,
            latest: 0,
            stats: ArbiterStats::default(),
        }
    }

    /// A new client handle (callable from any thread through
    /// [`Pspat::client`](crate::driver::Pspat::client)).
    pub fn client(&self) -> Result<Client<T>, RuntimeError> {
        new_client(&self.shared)
    }

    /// The scheduler, to change (add or remove flows, put packets in past
    /// the mailboxes). Packets put in this way may be longer than any the
    /// mailboxes gave, so from this call until the scheduler is next empty
    /// the release folds each sent packet's length into its bound (a few
    /// instructions per packet); to read, use [`Arbiter::scheduler_view`].
    pub fn scheduler(&mut self) -> &mut BoxedScheduler<T> {
        self.lent = true;
        &mut self.sched
    }

    /// The scheduler, to read (stats, flow configs, the next ready time).
    pub fn scheduler_view(&self) -> &BoxedScheduler<T> {
        &self.sched
    }

    /// The arbiter's counters.
    pub fn stats(&self) -> ArbiterStats {
        self.stats
    }

    /// Rounds run so far (by the arbiter thread or by clients).
    pub(crate) fn rounds(&self) -> u64 {
        self.stats.loops
    }

    /// The emulated link's rate.
    pub fn link_rate(&self) -> pktsched_core::Rate {
        self.link.rate()
    }

    /// How long after a mailbox's last read it is read again
    /// ([`Config::read_interval`](crate::Config::read_interval)).
    pub fn read_interval(&self) -> Nanos {
        self.read_interval
    }

    /// How far ahead of `now` the emulated link may be when a packet is
    /// released ([`Config::burst`] bytes at the link's rate).
    pub fn link_lead(&self) -> Nanos {
        self.lead
    }

    /// Changes [`Config::burst`] live.
    pub fn set_burst(&mut self, bytes: u32) {
        self.burst = bytes;
        self.lead = self.link.rate().tx_time(u64::from(bytes));
    }

    /// Changes the emulated link's rate (live reconfiguration): packets
    /// released from now on are paced at `rate`.
    pub fn set_link_rate(&mut self, rate: pktsched_core::Rate) {
        self.link.set_rate(rate);
        self.lead = rate.tx_time(u64::from(self.burst));
        self.prio_lead = rate.tx_time(u64::from(self.prio_burst));
    }

    /// The link's settings changed at `now` (a reload: rate, burst): with
    /// nothing queued the link restarts no earlier than `now`, so what the
    /// next round drains is not timed at the new rate on link time from
    /// before the change (a link left behind the clock by a round that
    /// emptied the scheduler, see [`Arbiter::set_restart_at_arrival`]).
    /// With a backlog the link carries on where it is.
    pub fn link_settings_changed(&mut self, now: Nanos) {
        if self.sched.backlog().pkts == 0 {
            self.link.idle(now);
        }
    }

    /// The priority credit: while a frame of one of the `urgent` flows is
    /// queued, the link may run up to `bytes` further ahead of the clock
    /// than [`Config::burst`] allows, and the next frame released on that
    /// credit is the urgent one; every other frame still waits until the
    /// link is back within `burst`. So an urgent frame does not wait for
    /// the frame the link is sending, and over any interval `t` the bytes
    /// released stay ≤ `rate·t + burst + bytes` + one frame (the link's
    /// free time never runs further ahead of the clock than the two leads
    /// and the frame just released); the other classes pay the urgent
    /// bytes back at once.
    ///
    /// The caller promises that the scheduler serves `urgent` first
    /// whenever one of them is backlogged (strict priority with these
    /// flows alone on its top level, none of them shaped); `bytes` 0 or no
    /// flow turns the credit off.
    pub fn set_priority_credit(&mut self, bytes: u32, urgent: Vec<FlowId>) {
        self.prio_burst = bytes;
        self.prio_lead = self.link.rate().tx_time(u64::from(bytes));
        self.urgent = urgent;
    }

    /// The priority credit's lead: how much further ahead than
    /// [`Arbiter::link_lead`] the link may be for an urgent frame.
    pub fn priority_lead(&self) -> Nanos {
        self.prio_lead
    }

    /// Frames released on the priority credit so far.
    pub fn priority_releases(&self) -> u64 {
        self.prio_released
    }

    /// How far ahead of the clock the link may be for the frame the
    /// scheduler sends next: [`Arbiter::link_lead`], plus
    /// [`Arbiter::priority_lead`] while an urgent frame is queued (for
    /// a caller that sleeps until `link_free − release_lead`).
    pub fn release_lead(&self) -> Nanos {
        if self.urgent_queued() {
            Nanos(self.lead.0.saturating_add(self.prio_lead.0))
        } else {
            self.lead
        }
    }

    /// Whether a frame of an urgent flow is queued (the credit is on).
    fn urgent_queued(&self) -> bool {
        self.prio_lead.0 > 0
            && self
                .urgent
                .iter()
                .any(|&f| self.sched.flow_stats(f).is_some_and(|c| c.backlog.pkts > 0))
    }

    /// Whether the next frame may start on the priority credit at `now`
    /// (the link is within both leads and an urgent frame is queued).
    fn urgent_may_start(&self, now: Nanos) -> bool {
        let by = now
            .0
            .saturating_add(self.lead.0)
            .saturating_add(self.prio_lead.0);
        !self.urgent.is_empty() && self.link.ready(Nanos(by)) && self.urgent_queued()
    }

    /// Raises the length bound the release plans its runs with (see
    /// `max_len`) to at least `len`: a caller that puts packets in through
    /// [`Arbiter::scheduler`] and knows their largest length (a wire's
    /// largest frame) gives it here, so the first run after a longer packet
    /// than any sent before cannot take the link past `burst`.
    pub fn raise_len_bound(&mut self, len: pktsched_core::Bytes) {
        self.max_len = self.max_len.max(len);
    }

    /// Where an idle link restarts. Off (the default): at the time of the
    /// round that finds packets after the scheduler was empty (or held
    /// only packets a shaper held back), so the time the arbiter was away
    /// (slept past a deadline, waited for a core) is lost to the link.
    /// On: at the latest arrival stamp
    /// ([`Pkt::ts`]) among the packets that round drained, never before
    /// the link was free nor after `now`: by then every one of them had
    /// arrived, so starting them back to back from it gives the link no
    /// credit for time when they were not all there, and the time from
    /// the last arrival to the late round is not lost. (The earliest
    /// stamp would not do: packets that arrived later in the absence
    /// would start on link time from before they arrived, a burst.) A
    /// round whose release empties the scheduler then leaves the link's
    /// free time where it is (even behind the clock), so the packets the
    /// next round drains continue from it if they arrived before then.
    /// The same holds while a shaper holds packets back (the link idles
    /// from the round that found none of them due): what other classes
    /// sent meanwhile restarts the link at its latest arrival, and so do
    /// held packets that became due by the round that drains it (they
    /// were there before; the shaper judged them due at `now`, and the
    /// link's own bound, no more than rate × t + one frame over any
    /// interval of link time, holds whatever the restart). Without such
    /// arrivals held packets start when the first of them became due (the
    /// scheduler's next ready time when the hold was found), never after
    /// the round's time: they waited since, as a backlog does (with the
    /// option off, at the round's time).
    ///
    /// Only for senders that stamp every packet with its arrival on the
    /// clock `now` comes from. Costs a comparison per mailbox read after
    /// an empty round, none per packet: a client's packets arrive in
    /// stamp order, so the last of each read is its latest.
    pub fn set_restart_at_arrival(&mut self, on: bool) {
        self.restart_at_arrival = on;
    }

    /// The output, when the arbiter transmits itself.
    pub fn output(&self) -> Option<&O> {
        match &self.sink {
            Sink::Inline(o) => Some(o),
            Sink::Dispatch(_) | Sink::Clients { .. } => None,
        }
    }

    /// Ids of the clients in the active list (tests and stats).
    pub fn active_clients(&self) -> Vec<usize> {
        let mut v = self.active.clone();
        v.sort_unstable();
        v
    }

    /// The state shared with clients (for the driver's stop and sleep).
    pub(crate) fn shared(&self) -> &Arc<Shared<T>> {
        &self.shared
    }

    /// Counts a busy round that took `ns` (measured by the driver).
    pub(crate) fn record_busy_round(&mut self, ns: u64) {
        self.stats.record_busy_round(ns);
    }

    /// Counts a sleep of the driver's arbiter thread.
    pub(crate) fn record_sleep(&mut self) {
        self.stats.sleeps += 1;
    }

    /// Records the driver thread's own counters (how it waited between
    /// rounds, its CPU time) for the final report.
    pub(crate) fn record_thread(&mut self, t: &ThreadCounts) {
        t.fill(&mut self.stats);
    }

    /// Packets released but still waiting for a full TX (or return) mailbox.
    pub(crate) fn tx_waiting(&self) -> usize {
        match &self.sink {
            Sink::Inline(_) => 0,
            Sink::Dispatch(txs) => txs.iter().map(|d| d.waiting.len()).sum(),
            Sink::Clients { dirty, .. } => dirty
                .iter()
                .filter_map(|&o| self.clients.get(o))
                .map(|c| c.ret_waiting.len())
                .sum(),
        }
    }

    /// How long the emulated link stays busy at `now` with what is queued:
    /// the packet in transmission, then the scheduler's backlog at the
    /// link's rate (0 when nothing is queued).
    pub fn busy_ahead(&self, now: Nanos) -> Nanos {
        let queued = self.sched.backlog().bytes;
        if queued == 0 {
            return Nanos::ZERO;
        }
        let sending = self.link.free_at().0.saturating_sub(now.0);
        Nanos(sending.saturating_add(self.link.rate().tx_time(queued).0))
    }

    /// `true` if any client has something in its mailbox (looks at all of
    /// them, not only the active ones; used before sleeping).
    pub(crate) fn any_mail(&self) -> bool {
        self.clients.iter().any(|c| !c.no_mail())
    }

    fn pick_up_clients(&mut self) {
        self.shared.pick_up_clients(&mut self.clients);
    }
}

/// One round.
impl<T: Send + 'static, O: Output<T>> Arbiter<T, O> {
    /// One round of the arbiter loop at time `now`.
    pub fn do_scan(&mut self, now: Nanos) -> Round {
        let mut round = Round::default();
        // 1. Clients that rang join the active list.
        self.admit_rung_clients();
        // 2. Drain the active clients' mailboxes (rate-limited), trim idle ones.
        if self.link_stopped && !self.was_empty {
            self.find_idle_hold(now);
        }
        self.latest = 0;
        let idle = self.read_mailboxes(now, &mut round);
        if idle > 0 {
            self.settle_and_trim(now);
        }
        // 3. Release while the emulated link is idle.
        self.release(now, &mut round);
        self.stats.decisions += round.released as u64;
        self.stats.drained += round.drained as u64;
        self.stats.loops += 1;
        if round.drained + round.released > 0 {
            self.stats.busy_loops += 1;
        }
        self.flush();
        round.backlog = self.sched.backlog().pkts;
        round.link_free = self.link.free_at();
        self.was_empty = round.backlog == 0;
        // Stopped on the round's cap with packets queued: as on a busy
        // link, a shaper may hold them all by the time the link is free.
        self.link_stopped |= !self.held_back && !self.was_empty;
        if self.was_empty {
            // Nothing queued came in past the mailboxes any more; a lender
            // calls `scheduler()` again before it can add more.
            self.lent = false;
        }
        round
    }

    /// The last release stopped on a busy link or on the round's cap with
    /// packets queued: if the link has become free before `now` and a
    /// shaper held every queued
    /// packet then (the scheduler's next ready time is later), the link
    /// has idled since, just as if that release had found them held:
    /// `held_back`, so the round restarts it (at `now`, or at what other
    /// classes sent meanwhile) instead of letting packets start back to
    /// back from when it became free. One call through the scheduler per
    /// such round, none per packet.
    fn find_idle_hold(&mut self, now: Nanos) {
        let free = self.link.free_at();
        if free < now
            && let Some(due) = self.sched.next_ready(free).filter(|&t| t > free)
        {
            self.held_back = true;
            self.held_until = due;
        }
    }

    /// Moves the clients that rang the doorbell into the active list.
    fn admit_rung_clients(&mut self) {
        let mut rung = std::mem::take(&mut self.rung);
        self.shared.doorbell.take(|id| rung.push(id));
        for &id in &rung {
            if id >= self.clients.len() {
                self.pick_up_clients();
            }
            if let Some(c) = self.clients.get_mut(id)
                && !c.active
            {
                c.active = true;
                c.empty_reads = 0;
                self.active.push(id);
            }
        }
        rung.clear();
        self.rung = rung;
    }

    /// Reads the mailboxes of the active clients not read within
    /// `read_interval` into the scheduler; returns how many of them have
    /// been empty for `trim_after` reads.
    fn read_mailboxes(&mut self, now: Nanos, round: &mut Round) -> usize {
        let mut idle = 0;
        let mut i = 0;
        // The link idles (nothing queued, or only what a shaper holds):
        // this round's arrivals say where it restarts.
        let track = self.restart_at_arrival && (self.was_empty || self.held_back);
        while i < self.active.len() {
            let id = self.active[i];
            let Some(c) = self.clients.get_mut(id) else {
                self.active.swap_remove(i);
                continue;
            };
            if c.last_read
                .is_some_and(|t| now.0 < t.0.saturating_add(self.read_interval.0))
            {
                self.stats.deferred_reads += 1;
                i += 1;
                continue;
            }
            c.last_read = Some(now);
            self.stats.mailbox_reads += 1;
            let n = read_one(
                c,
                id,
                &mut self.inbox,
                ReadCtx {
                    sched: &mut self.sched,
                    sink: &mut self.sink,
                    stats: &mut self.stats,
                    max_len: &mut self.max_len,
                    read_batch: self.read_batch,
                    now,
                    latest: track.then_some(&mut self.latest),
                },
            );
            round.drained += n;
            if n == 0 {
                c.empty_reads = c.empty_reads.saturating_add(1);
                if c.empty_reads >= self.trim_after {
                    idle += 1;
                }
            } else {
                c.empty_reads = 0;
            }
            i += 1;
        }
        idle
    }

    /// Trim: if the last settle is `settle_interval` old, settle (heavy
    /// barrier), then drop the idle clients whose mailbox is still empty; a
    /// packet published before the barrier is seen here, one published
    /// after it rings again (see `doorbell`).
    fn settle_and_trim(&mut self, now: Nanos) {
        if self
            .last_settle
            .is_some_and(|t| now.0 < t.0.saturating_add(self.settle_interval.0))
        {
            return;
        }
        self.shared.doorbell.settle();
        self.last_settle = Some(now);
        self.stats.settles += 1;
        let mut i = 0;
        while i < self.active.len() {
            let id = self.active[i];
            if let Some(c) = self.clients.get_mut(id)
                && c.empty_reads >= self.trim_after
            {
                if c.no_mail() {
                    c.active = false;
                    self.active.swap_remove(i);
                    continue;
                }
                c.empty_reads = 0;
            }
            i += 1;
        }
    }

    /// Dequeues into the batch while the emulated link is idle (within
    /// `burst` of the clock, or within the priority credit for an urgent
    /// frame), at most `round_cap` packets (or as many as were drained, if
    /// more).
    ///
    /// Exactly the packets a `dequeue` per packet would release, in runs:
    /// [`Link::starts_by`] bounds how many packets of the longest length
    /// drained so far surely start in time, and one
    /// [`dequeue_batch`](pktsched_core::Scheduler::dequeue_batch) takes
    /// that many (one call through the `dyn Scheduler` per run).
    fn release(&mut self, now: Nanos, round: &mut Round) {
        if self.was_empty || self.held_back {
            // Nothing was queued since the last round, or only what a
            // shaper held: the link idled, and what arrived since (or has
            // become due) starts now, or when the last of what this round
            // drained arrived (see `set_restart_at_arrival`; `latest` is 0
            // with it off), never before the link was free: not back then.
            let restart = if self.latest != 0 {
                // A held packet that has become due by now may be served
                // before the arrivals: the link restarts no earlier than
                // it became due either (never early in link time; an
                // arrival served first then starts a little late).
                let due = if self.held_back && self.held_until <= now {
                    self.held_until.0
                } else {
                    0
                };
                self.latest.max(due).min(now.0)
            } else if self.held_back && self.restart_at_arrival {
                // Only held packets: the first became due at `held_until`
                // and has waited since; the link is theirs from then (a
                // late round catches up, as while backlogged).
                self.held_until.0.min(now.0)
            } else {
                now.0
            };
            self.link.idle(Nanos(restart));
        }
        self.held_back = false;
        self.link_stopped = false;
        let cap = self.round_cap.max(round.drained);
        let ahead = Nanos(now.0.saturating_add(self.lead.0));
        while round.released < cap {
            let mut want = self
                .link
                .starts_by(ahead, self.max_len)
                .min(cap - round.released);
            let mut credit = false;
            if want == 0 {
                // Past `burst`: only an urgent frame, on the priority
                // credit, one at a time (the scheduler sends it first).
                if !self.urgent_may_start(now) {
                    self.link_stopped = true;
                    break;
                }
                (want, credit) = (1, true);
            }
            let first = self.batch.len();
            let got = self.sched.dequeue_batch(now, want, &mut self.batch);
            let run = &self.batch[first..];
            if let [p] = run {
                self.link.send(p.len);
                self.stats.bytes += u64::from(p.len);
                self.max_len = self.max_len.max(p.len);
            } else {
                let bytes = lens::total_bytes(run);
                // All of them start in time (`starts_by`): one addition.
                self.link.send_run(bytes);
                self.stats.bytes += bytes;
                // Only a packet put into the scheduler past the mailboxes
                // (through `scheduler()`) can be longer; the bound grows.
                if self.lent {
                    self.max_len = lens::longest(run, self.max_len);
                }
            }
            round.released += got;
            if credit {
                self.prio_released += got as u64;
            }
            if got < want {
                // Nothing more may leave now. Still queued (a shaper holds
                // it): the link idles until now. Empty, restarting at
                // arrivals: the next round's drain decides (above).
                let holding = self.sched.backlog().pkts > 0;
                if !self.restart_at_arrival || holding {
                    self.link.idle(now);
                }
                self.held_back = holding;
                if holding {
                    self.held_until = self.sched.next_ready(now).unwrap_or(now);
                }
                break;
            }
        }
    }
}

/// What one mailbox read needs of the arbiter besides the client.
struct ReadCtx<'a, T, O> {
    sched: &'a mut BoxedScheduler<T>,
    sink: &'a mut Sink<T, O>,
    stats: &'a mut ArbiterStats,
    max_len: &'a mut pktsched_core::Bytes,
    read_batch: usize,
    now: Nanos,
    /// Raised to the read's latest stamp, if the round tracks it.
    latest: Option<&'a mut u64>,
}

/// One read of client `id`'s mailbox: what was held back from its last
/// read, then the mailbox, at most `read_batch` packets in all, offered to
/// the scheduler as one batch (`inbox` is the scratch queue, left empty).
/// The read stops at the first drop: the packets behind it are held back
/// for the next read, counted as pending for the client, so an overloading
/// client finds its mailbox full (and stops, at no cost to the arbiter)
/// instead of making every round long with drops. Returns the packets
/// offered (accepted or dropped).
fn read_one<T, O>(
    c: &mut ClientEnd<T>,
    id: usize,
    inbox: &mut Vec<Pkt<T>>,
    cx: ReadCtx<'_, T, O>,
) -> usize {
    if !c.held.is_empty() {
        inbox.append(&mut c.held);
    }
    let room = cx.read_batch.saturating_sub(inbox.len());
    c.rx.pop_many(inbox, room);
    if inbox.is_empty() {
        return 0;
    }
    *cx.max_len = lens::longest(inbox, *cx.max_len);
    if let (Some(l), Some(last)) = (cx.latest, inbox.last()) {
        // The client sent in stamp order (`held` came before the rest).
        *l = (*l).max(last.ts.0);
    }
    // Client-transmit: remember who sent each flow's packets.
    if let Sink::Clients { owner, .. } = cx.sink {
        for p in inbox.iter() {
            let flow = p.flow.index();
            if owner.len() <= flow {
                owner.resize(flow + 1, u32::MAX);
            }
            owner[flow] = id as u32;
        }
    }
    let offered = inbox.len();
    // `held` was emptied above: what the scheduler refuses and what is
    // behind it wait there; `inbox` comes back empty.
    let r = cx.sched.enqueue_batch(inbox, &mut c.held, cx.now);
    let n = offered - c.held.len();
    c.drained += n as u64;
    if let Err(rej) = r {
        c.dropped[drop_reason_index(rej.reason)] += 1;
        cx.stats.dropped += 1;
        c.meta.backpressure.store(true, Ordering::Relaxed);
        c.rx.report_held(c.held.len());
    }
    n
}

/// Handing released packets on.
impl<T: Send + 'static, O: Output<T>> Arbiter<T, O> {
    /// Hands the batch to the output, the TX mailboxes or the clients'
    /// return mailboxes.
    pub(crate) fn flush(&mut self) {
        match &mut self.sink {
            Sink::Inline(o) => {
                if !self.batch.is_empty() {
                    o.transmit(&mut self.batch);
                    self.batch.clear();
                }
            }
            Sink::Dispatch(txs) => flush_to_dispatchers(&mut self.batch, txs, &mut self.stats),
            Sink::Clients { owner, dirty } => flush_to_clients(
                &mut self.batch,
                owner,
                dirty,
                &mut self.clients,
                &mut self.stats,
            ),
        }
    }

    /// Tells every dispatcher that the last packet is in its TX mailbox.
    pub(crate) fn mark_dispatchers_done(&self) {
        if let Sink::Dispatch(txs) = &self.sink {
            for d in txs {
                d.done.store(true, Ordering::Release);
                d.bell.ring(0);
            }
        }
    }

    /// Client-transmit mode, at stop: packets cleared but still waiting
    /// for room in their client's return mailbox.
    fn take_unclaimed(&mut self) -> Vec<Pkt<T>> {
        let mut v = Vec::new();
        if let Sink::Clients { dirty, .. } = &mut self.sink {
            for o in dirty.drain(..) {
                if let Some(c) = self.clients.get_mut(o) {
                    v.extend(c.ret_waiting.drain(..));
                }
            }
        }
        v
    }
}

/// Spreads `batch` over the dispatchers' TX mailboxes (a flow always goes
/// to one dispatcher, so per-flow order is kept) and rings those that got
/// packets; what does not fit waits in order.
fn flush_to_dispatchers<T>(
    batch: &mut Vec<Pkt<T>>,
    txs: &mut [DispatchTx<T>],
    stats: &mut ArbiterStats,
) {
    let k = txs.len();
    for p in batch.drain(..) {
        let d = &mut txs[p.flow.0 as usize % k];
        d.waiting.push_back(p);
    }
    for d in txs.iter_mut() {
        while let Some(p) = d.waiting.pop_front() {
            if let Err(p) = d.tx.try_push(p) {
                d.waiting.push_front(p);
                stats.tx_full += 1;
                break;
            }
            d.pushed = true;
        }
        if d.pushed {
            d.pushed = false;
            d.bell.ring(0);
        }
    }
}

/// Client-transmit mode: hands each packet of `batch` back to the client
/// that sent its flow's packets (`owner`), through its return mailbox;
/// what does not fit waits in order, and `dirty` lists those clients.
fn flush_to_clients<T>(
    batch: &mut Vec<Pkt<T>>,
    owner: &[u32],
    dirty: &mut Vec<usize>,
    clients: &mut [ClientEnd<T>],
    stats: &mut ArbiterStats,
) {
    for p in batch.drain(..) {
        // A packet from a mailbox was accepted after its owner was
        // recorded, so its owner exists.
        let o = owner.get(p.flow.index()).copied().unwrap_or(u32::MAX) as usize;
        if let Some(c) = clients.get_mut(o) {
            if c.ret_waiting.is_empty() {
                dirty.push(o);
            }
            c.ret_waiting.push_back(p);
        } else {
            // Put in past the mailboxes: no client sent it.
            stats.unowned_dropped += 1;
        }
    }
    dirty.retain(|&o| {
        let Some(c) = clients.get_mut(o) else {
            return false;
        };
        let Some(ret) = c.ret.as_mut() else {
            return false;
        };
        while let Some(p) = c.ret_waiting.pop_front() {
            if let Err(p) = ret.try_push(p) {
                c.ret_waiting.push_front(p);
                stats.tx_full += 1;
                return true;
            }
        }
        false
    });
}

/// Stopping and the final report.
impl<T: Send + 'static, O: Output<T>> Arbiter<T, O> {
    /// Stops a thread-less arbiter: drains every mailbox, then sends
    /// (ignoring the link) or returns what is queued.
    ///
    /// No packet is stranded by a client sending concurrently: a client
    /// stores `busy ← true`, light barrier, loads `stop`; the arbiter
    /// stores `stop ← true`, heavy barrier, loads each `busy`. The pair
    /// orders like two `SeqCst` fences, so either the client sees `stop`
    /// (and refuses the packet) or the arbiter sees `busy` and waits for the
    /// client's Release of `busy`, after its push — the drain then sees the
    /// packet. (The steps are [`barrier::stop`]'s, which
    /// `tests/loom_stop.rs` model-checks.)
    pub fn stop(mut self, mode: StopMode, now: Nanos) -> Report<T, O> {
        let left = self.close_and_empty(mode, now);
        self.into_report(left)
    }

    /// The stop sequence up to the report: refuse new sends, drain every
    /// mailbox, then send or return what is queued, and take back what
    /// clients' return mailboxes could not take.
    pub(crate) fn close_and_empty(&mut self, mode: StopMode, now: Nanos) -> Leftovers<T> {
        self.close_and_drain(now);
        let (flushed, mut returned) = self.empty_scheduler(mode, now);
        // Clients may never collect: what their return mailboxes cannot
        // take is handed back.
        let unclaimed = self.take_unclaimed();
        let returned_cleared = unclaimed.len() as u64;
        returned.extend(unclaimed);
        Leftovers {
            flushed,
            returned,
            returned_cleared,
        }
    }

    /// The final report, after [`Arbiter::close_and_empty`].
    pub(crate) fn into_report(self, left: Leftovers<T>) -> Report<T, O> {
        let clients = self.client_stats();
        let sched = self.sched.stats();
        let outputs = match self.sink {
            Sink::Inline(o) => vec![o],
            Sink::Dispatch(_) | Sink::Clients { .. } => Vec::new(),
        };
        Report {
            arbiter: self.stats,
            clients,
            sched,
            flushed: left.flushed,
            returned: left.returned,
            returned_cleared: left.returned_cleared,
            outputs,
        }
    }

    /// Stop sequence, part 1: refuse new sends, wait for senders inside
    /// `send`, then drain every mailbox into the scheduler (see
    /// [`Arbiter::stop`] for why no packet is stranded).
    fn close_and_drain(&mut self, now: Nanos) {
        barrier::stop::close(&self.shared.stop);
        self.pick_up_clients();
        let metas: Vec<Arc<ClientMeta>> = self.clients.iter().map(|c| c.meta.clone()).collect();
        for m in metas {
            barrier::stop::wait_idle(&m.own.busy);
        }
        let read_interval = self.read_interval;
        self.read_interval = Nanos(0);
        self.active = (0..self.clients.len()).collect();
        for c in &mut self.clients {
            c.active = true;
            c.last_read = None;
            c.empty_reads = 0;
        }
        // Drain without releasing: enqueue everything, ignoring the link.
        loop {
            let mut moved = 0u64;
            for c in &mut self.clients {
                let held = std::mem::take(&mut c.held);
                for pkt in held.into_iter().chain(std::iter::from_fn(|| c.rx.pop())) {
                    moved += 1;
                    c.drained += 1;
                    self.stats.drained += 1;
                    if let Err(rej) = self.sched.enqueue(pkt, now) {
                        c.dropped[drop_reason_index(rej.reason)] += 1;
                        self.stats.dropped += 1;
                    }
                }
            }
            if moved == 0 {
                break;
            }
        }
        self.read_interval = read_interval;
    }

    /// Stop sequence, part 2: send (ignoring the link) or return everything
    /// still queued; returns how many were sent and those returned.
    fn empty_scheduler(&mut self, mode: StopMode, now: Nanos) -> (u64, Vec<Pkt<T>>) {
        let mut flushed = 0;
        let mut returned = Vec::new();
        while let Some(p) = self.sched.dequeue(now) {
            match mode {
                StopMode::Drain => {
                    flushed += 1;
                    self.batch.push(p);
                    if self.batch.len() >= self.round_cap {
                        self.flush();
                    }
                }
                StopMode::Return => returned.push(p),
            }
        }
        self.flush();
        (flushed, returned)
    }

    fn client_stats(&self) -> Vec<ClientStats> {
        self.clients.iter().map(ClientEnd::stats).collect()
    }
}
