//! The PSPAT runtime: clients, the arbiter and dispatchers.
//!
//! ```text
//!  client 0 ─ mailbox ─┐                                ┌─ TX mailbox ─ dispatcher 0 ─ Output
//!  client 1 ─ mailbox ─┼─▶ arbiter: scheduler + link ───┼─ TX mailbox ─ dispatcher 1 ─ Output
//!  client n ─ mailbox ─┘     (one thread)               └─ (or the arbiter's own Output)
//! ```
//!
//! * A [`Client`] is one sending thread's handle with a private lock-free
//!   mailbox; [`Client::send`] never blocks and never takes a lock. After a
//!   push it rings the [`Doorbell`]: its bit is set only if it is clear, so a
//!   busy client touches shared memory once per arbiter round. Its only
//!   barrier is [`barrier::light`] (a compiler fence where `membarrier` is
//!   available).
//! * The [`Arbiter`] is deterministic and does no I/O of its own: its
//!   [`Arbiter::do_scan`] takes `now` and does one round of the paper's loop
//!   — collect the clients that rang, drain the mailboxes of recently active
//!   clients (each read at most once per `read_interval`, at most
//!   `read_batch` packets, stopping at the first drop) into the scheduler,
//!   settle and trim clients whose mailbox stayed empty, release packets
//!   while the emulated [`Link`] is idle and hand them to the output, the
//!   dispatchers' TX mailboxes, or (client-transmit mode) back to their
//!   clients. Tests drive it with a virtual clock.
//! * [`Pspat`] runs the arbiter (and dispatchers) on threads with a real
//!   clock: spin for `spin` when idle, then sleep until a client rings (or
//!   until the link is free when packets wait for it).
//! * [`Pspat::stop`] drains every mailbox, then sends or returns what is
//!   queued, joins the threads and reports where every packet went.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use pktsched_core::{Counters, DropReason, FlowConfig, FlowId, Nanos, Pkt, Rate, Scheduler};
use serde::Serialize;

use crate::barrier;
use crate::doorbell::Doorbell;
use crate::link::Link;
use crate::mailbox::{Consumer, Mailbox, Producer};
use crate::output::Output;
use crate::sync::{Arc, AtomicBool, AtomicU64, Ordering, fence};

/// A scheduler the arbiter thread can own.
pub type BoxedScheduler<T> = Box<dyn Scheduler<T> + Send>;

/// Runtime parameters. `Config::new(rate)` gives the defaults.
#[derive(Clone, Debug)]
pub struct Config {
    /// Rate of the emulated link.
    pub link: Rate,
    /// Δ_A: minimum time between the starts of two arbiter rounds
    /// (zero: back to back).
    pub scan_interval: Duration,
    /// Minimum time between two reads of one client's mailbox (PSPAT reads
    /// each client list at most once per microsecond), so a sending client
    /// fills whole lines before the arbiter pulls them.
    pub read_interval: Duration,
    /// Most packets released in one round (PSPAT: 512), or as many as were
    /// drained in the round if that is more, so an unlimited link keeps up.
    pub round_cap: usize,
    /// Most packets taken from one mailbox per read: bounds a round's length
    /// (and so every client's wait) when many clients are backlogged. A read
    /// also ends at the first packet the scheduler drops.
    pub read_batch: usize,
    /// Capacity of each client mailbox (packets).
    pub mailbox_capacity: usize,
    /// Most clients.
    pub max_clients: usize,
    /// Consecutive empty reads after which a client may leave the active
    /// list (at the next settle).
    pub trim_after: u32,
    /// Minimum time between two settles: a heavy barrier (`membarrier`,
    /// a few µs) after which idle clients whose mailbox is still empty
    /// leave the active list (see `doorbell`). Until then an idle client
    /// costs one empty read per `read_interval`.
    pub settle_interval: Duration,
    /// T_w: how long an idle arbiter (or dispatcher) spins before sleeping.
    pub spin: Duration,
    /// Never sleep (burn the core for the lowest latency).
    pub busy_poll: bool,
    /// Dispatcher threads; 0 = the arbiter transmits cleared packets itself
    /// (or hands them back to their clients: `client_transmit`).
    pub dispatchers: usize,
    /// With 0 dispatchers: hand every cleared packet back to the client
    /// that sent it (through a return mailbox per client, capacity
    /// `tx_capacity`), which transmits it itself — the userspace PSPAT
    /// arrangement. Clients collect them with [`Client::take_cleared`].
    pub client_transmit: bool,
    /// Capacity of each dispatcher's TX mailbox.
    pub tx_capacity: usize,
    /// Pin the arbiter to this core.
    pub arbiter_core: Option<usize>,
    /// Pin dispatcher `i` to `dispatcher_cores[i % len]`.
    pub dispatcher_cores: Vec<usize>,
}

impl Config {
    /// Defaults for a link of rate `link`.
    pub fn new(link: Rate) -> Config {
        Config {
            link,
            scan_interval: Duration::ZERO,
            read_interval: Duration::from_micros(1),
            round_cap: 512,
            read_batch: 64,
            mailbox_capacity: 512,
            max_clients: 128,
            trim_after: 2,
            settle_interval: Duration::from_millis(1),
            spin: Duration::from_micros(100),
            busy_poll: false,
            dispatchers: 0,
            client_transmit: false,
            tx_capacity: 1024,
            arbiter_core: None,
            dispatcher_cores: Vec::new(),
        }
    }

    /// Checks the parameters; the error names the field and what is allowed.
    pub fn validate(&self) -> Result<(), RuntimeError> {
        let bad = |field: &'static str, value: String, allowed: &'static str| {
            Err(RuntimeError::Config {
                field,
                value,
                allowed,
            })
        };
        if self.round_cap == 0 || self.round_cap > 1 << 20 {
            return bad("round_cap", self.round_cap.to_string(), "1..=1048576");
        }
        if self.read_batch == 0 || self.read_batch > 1 << 20 {
            return bad("read_batch", self.read_batch.to_string(), "1..=1048576");
        }
        if self.mailbox_capacity == 0 || self.mailbox_capacity > 1 << 24 {
            return bad(
                "mailbox_capacity",
                self.mailbox_capacity.to_string(),
                "1..=16777216",
            );
        }
        if self.max_clients == 0 || self.max_clients > 4096 {
            return bad("max_clients", self.max_clients.to_string(), "1..=4096");
        }
        if self.trim_after == 0 {
            return bad("trim_after", "0".into(), "at least 1");
        }
        if self.dispatchers > 64 {
            return bad("dispatchers", self.dispatchers.to_string(), "0..=64");
        }
        if self.client_transmit && self.dispatchers > 0 {
            return bad(
                "dispatchers",
                self.dispatchers.to_string(),
                "0 when client_transmit is set (clients transmit themselves)",
            );
        }
        if self.tx_capacity == 0 || self.tx_capacity > 1 << 24 {
            return bad("tx_capacity", self.tx_capacity.to_string(), "1..=16777216");
        }
        if self.scan_interval > Duration::from_secs(1) {
            return bad(
                "scan_interval",
                format!("{:?}", self.scan_interval),
                "at most 1s",
            );
        }
        if self.settle_interval > Duration::from_secs(1) {
            return bad(
                "settle_interval",
                format!("{:?}", self.settle_interval),
                "at most 1s",
            );
        }
        if self.read_interval > Duration::from_secs(1) {
            return bad(
                "read_interval",
                format!("{:?}", self.read_interval),
                "at most 1s",
            );
        }
        Ok(())
    }
}

/// Errors of the runtime's API.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RuntimeError {
    /// A configuration value is out of range.
    #[error("invalid runtime setting `{field}` = {value}; allowed: {allowed}")]
    Config {
        /// Field name.
        field: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        allowed: &'static str,
    },
    /// All client slots are taken.
    #[error("too many clients: at most {max} (raise `max_clients`)")]
    TooManyClients {
        /// The limit.
        max: usize,
    },
    /// The number of outputs does not match the dispatchers.
    #[error("{given} outputs given for {dispatchers} dispatchers; need {need}")]
    Outputs {
        /// Outputs given.
        given: usize,
        /// Dispatchers configured.
        dispatchers: usize,
        /// Outputs needed (dispatchers, or 1 with none, or 0 when clients
        /// transmit).
        need: usize,
    },
    /// The runtime was stopped.
    #[error("the runtime is stopped")]
    Stopped,
    /// A runtime thread could not be started or panicked.
    #[error("runtime thread failed: {0}")]
    Thread(String),
}

/// What [`Client::send`] did with an accepted packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// Queued in the mailbox.
    Queued,
    /// Queued, and since the previous send the scheduler dropped at least
    /// one of this client's packets: slow down (like `NET_XMIT_CN`).
    Backpressure,
}

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
struct ClientMeta {
    /// Written by the client.
    own: CachePadded<ClientOwn>,
    /// Written by the arbiter: set when the scheduler dropped one of this
    /// client's packets; the client clears it when it reports it.
    backpressure: CachePadded<AtomicBool>,
}

#[derive(Debug, Default)]
struct ClientOwn {
    /// Inside `send` (between the stop check and the push); see
    /// [`Pspat::stop`].
    busy: AtomicBool,
    sent: AtomicU64,
    full: AtomicU64,
    refused_stopped: AtomicU64,
    backpressure_events: AtomicU64,
}

/// What the arbiter keeps of a client.
struct ClientEnd<T> {
    rx: Consumer<Pkt<T>>,
    meta: Arc<ClientMeta>,
    last_read: Option<Nanos>,
    empty_reads: u32,
    active: bool,
    drained: u64,
    dropped: [u64; 4],
    /// Client-transmit mode: the return mailbox and what did not fit in it.
    ret: Option<Producer<Pkt<T>>>,
    ret_waiting: VecDeque<Pkt<T>>,
}

/// State shared by clients, the arbiter thread and the [`Pspat`] handle.
struct Shared<T> {
    doorbell: Doorbell,
    stop: AtomicBool,
    /// Clients created and not yet picked up by the arbiter.
    registry: Mutex<Vec<ClientEnd<T>>>,
    /// Ids handed out so far.
    next_id: AtomicU64,
    /// Everything of each client that clients write (for stats).
    metas: Mutex<Vec<Arc<ClientMeta>>>,
    /// Arbiter statistics, published every millisecond or so.
    published: Mutex<ArbiterStats>,
    mailbox_capacity: usize,
    max_clients: usize,
    /// Return mailbox capacity, or 0 when clients do not transmit.
    return_capacity: usize,
}

/// A sending thread's handle. `Send`, not `Clone`: one per thread.
pub struct Client<T> {
    id: usize,
    tx: Producer<Pkt<T>>,
    /// Client-transmit mode: packets the arbiter cleared for this client.
    ret: Option<Consumer<Pkt<T>>>,
    meta: Arc<ClientMeta>,
    shared: Arc<Shared<T>>,
    sent: u64,
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
        // Stop handshake (see `close_and_drain`): announce, light barrier,
        // look.
        own.busy.store(true, Ordering::Relaxed);
        barrier::light();
        if self.shared.stop.load(Ordering::Relaxed) {
            own.busy.store(false, Ordering::Release);
            own.refused_stopped.fetch_add(1, Ordering::Relaxed);
            return Err(SendError::Stopped(pkt));
        }
        let pushed = self.tx.try_push(pkt);
        own.busy.store(false, Ordering::Release);
        if let Err(pkt) = pushed {
            own.full.fetch_add(1, Ordering::Relaxed);
            return Err(SendError::Full(pkt));
        }
        self.sent += 1;
        own.sent.store(self.sent, Ordering::Relaxed);
        self.shared.doorbell.ring(self.id);
        let bp = &self.meta.backpressure;
        if bp.load(Ordering::Relaxed) && bp.swap(false, Ordering::Relaxed) {
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
        own.busy.store(true, Ordering::Relaxed);
        barrier::light();
        if self.shared.stop.load(Ordering::Relaxed) {
            own.busy.store(false, Ordering::Release);
            own.refused_stopped
                .fetch_add(pkts.len() as u64, Ordering::Relaxed);
            return Err(Stopped);
        }
        let n = self
            .tx
            .try_push_many(&mut std::iter::from_fn(|| pkts.pop_front()));
        own.busy.store(false, Ordering::Release);
        if !pkts.is_empty() {
            own.full.fetch_add(1, Ordering::Relaxed);
        }
        if n == 0 {
            return Ok((0, Sent::Queued));
        }
        self.sent += n as u64;
        own.sent.store(self.sent, Ordering::Relaxed);
        self.shared.doorbell.ring(self.id);
        let bp = &self.meta.backpressure;
        if bp.load(Ordering::Relaxed) && bp.swap(false, Ordering::Relaxed) {
            own.backpressure_events.fetch_add(1, Ordering::Relaxed);
            return Ok((n, Sent::Backpressure));
        }
        Ok((n, Sent::Queued))
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

    /// Approximate number of packets waiting in this client's mailbox.
    pub fn pending(&self) -> usize {
        self.tx.len_estimate()
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

/// The arbiter's own counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ArbiterStats {
    /// Rounds (`do_scan` calls).
    pub loops: u64,
    /// Rounds that moved at least one packet.
    pub busy_loops: u64,
    /// Packets drained from client mailboxes.
    pub drained: u64,
    /// Scheduling decisions: packets released to the link.
    pub decisions: u64,
    /// Bytes released.
    pub bytes: u64,
    /// Packets the scheduler refused (by reason: see the final report).
    pub dropped: u64,
    /// Mailbox reads (one per client per round it was read).
    pub mailbox_reads: u64,
    /// Sum and maximum of the busy rounds' duration, ns (threaded runs).
    pub busy_loop_ns: u64,
    /// See `busy_loop_ns`.
    pub max_loop_ns: u64,
    /// Busy rounds by duration: entry `i` counts rounds of `[2^i, 2^(i+1))`
    /// ns (threaded runs).
    pub loop_ns_log2: [u64; 32],
    /// Settles (heavy barriers before trimming idle clients).
    pub settles: u64,
    /// Times the arbiter went to sleep.
    pub sleeps: u64,
    /// Times a TX mailbox was full (the packet waited in the arbiter).
    pub tx_full: u64,
}

impl ArbiterStats {
    /// Mean packets released per busy round.
    pub fn pkts_per_loop(&self) -> f64 {
        self.decisions as f64 / self.busy_loops.max(1) as f64
    }
    /// Upper bound of the `q` quantile (0..=1) of the busy rounds'
    /// duration, ns (a power of two: the histogram's resolution).
    pub fn loop_ns_quantile(&self, q: f64) -> u64 {
        let total: u64 = self.loop_ns_log2.iter().sum();
        if total == 0 {
            return 0;
        }
        let want = (q.clamp(0.0, 1.0) * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &n) in self.loop_ns_log2.iter().enumerate() {
            seen += n;
            if seen >= want {
                return 1u64 << (i + 1).min(63);
            }
        }
        u64::MAX
    }
    /// Mean duration of a busy round, ns.
    pub fn avg_loop_ns(&self) -> f64 {
        self.busy_loop_ns as f64 / self.busy_loops.max(1) as f64
    }
}

/// A snapshot of a running runtime.
#[derive(Clone, Debug, Serialize)]
pub struct Stats {
    /// The arbiter's counters (published about every millisecond).
    pub arbiter: ArbiterStats,
    /// Each client's counters (drop fields are filled in the final report).
    pub clients: Vec<ClientStats>,
}

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
enum Sink<T, O> {
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

struct DispatchTx<T> {
    tx: Producer<Pkt<T>>,
    /// Packets released but not yet in the TX mailbox (it was full).
    waiting: VecDeque<Pkt<T>>,
    bell: Arc<Doorbell>,
    pushed: bool,
    /// Set (Release) when the arbiter has pushed its last packet.
    done: Arc<AtomicBool>,
}

impl<T> std::fmt::Debug for Client<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.id)
            .field("sent", &self.sent)
            .finish_non_exhaustive()
    }
}

/// The arbiter: scheduler, emulated link, client ends. Deterministic;
/// `now` is always an argument.
pub struct Arbiter<T, O> {
    sched: BoxedScheduler<T>,
    link: Link,
    shared: Arc<Shared<T>>,
    clients: Vec<ClientEnd<T>>,
    active: Vec<usize>,
    sink: Sink<T, O>,
    batch: Vec<Pkt<T>>,
    rung: Vec<usize>,
    read_interval: Nanos,
    round_cap: usize,
    read_batch: usize,
    trim_after: u32,
    settle_interval: Nanos,
    last_settle: Option<Nanos>,
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

fn dur_nanos(d: Duration) -> Nanos {
    Nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn reason_index(r: DropReason) -> usize {
    match r {
        DropReason::QueueFull => 0,
        DropReason::TooLarge => 1,
        DropReason::UnknownFlow => 2,
        DropReason::Removed => 3,
    }
}

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
        Ok(Self::build(
            cfg,
            sched,
            Sink::Clients {
                owner: Vec::new(),
                dirty: Vec::new(),
            },
        ))
    }

    fn build(cfg: &Config, sched: BoxedScheduler<T>, sink: Sink<T, O>) -> Self {
        let shared = Arc::new(Shared {
            doorbell: Doorbell::new(cfg.max_clients),
            stop: AtomicBool::new(false),
            registry: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
            metas: Mutex::new(Vec::new()),
            published: Mutex::new(ArbiterStats::default()),
            mailbox_capacity: cfg.mailbox_capacity,
            max_clients: cfg.max_clients,
            return_capacity: if cfg.client_transmit {
                cfg.tx_capacity
            } else {
                0
            },
        });
        Arbiter {
            sched,
            link: Link::new(cfg.link),
            shared,
            clients: Vec::new(),
            active: Vec::new(),
            sink,
            batch: Vec::with_capacity(cfg.round_cap),
            rung: Vec::new(),
            read_interval: dur_nanos(cfg.read_interval),
            round_cap: cfg.round_cap,
            read_batch: cfg.read_batch,
            trim_after: cfg.trim_after,
            settle_interval: dur_nanos(cfg.settle_interval),
            last_settle: None,
            stats: ArbiterStats::default(),
        }
    }

    /// A new client handle (callable from any thread through
    /// [`Pspat::client`]).
    pub fn client(&self) -> Result<Client<T>, RuntimeError> {
        new_client(&self.shared)
    }

    /// The scheduler (to add flows before traffic starts, read stats).
    pub fn scheduler(&mut self) -> &mut BoxedScheduler<T> {
        &mut self.sched
    }

    /// The arbiter's counters.
    pub fn stats(&self) -> ArbiterStats {
        self.stats
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

    fn pick_up_clients(&mut self) {
        let mut reg = self
            .shared
            .registry
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.clients.append(&mut reg);
    }

    /// One round of the arbiter loop at time `now`.
    pub fn do_scan(&mut self, now: Nanos) -> Round {
        let mut round = Round::default();
        // 1. Clients that rang join the active list.
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
        // 2. Drain the active clients' mailboxes (rate-limited), trim idle ones.
        // Client-transmit: remember who sent each flow's packets.
        let mut owners = match &mut self.sink {
            Sink::Clients { owner, .. } => Some(owner),
            _ => None,
        };
        let mut idle = 0;
        let mut i = 0;
        while i < self.active.len() {
            let id = self.active[i];
            let Some(c) = self.clients.get_mut(id) else {
                self.active.swap_remove(i);
                continue;
            };
            if c.last_read
                .is_some_and(|t| now.0 < t.0.saturating_add(self.read_interval.0))
            {
                i += 1;
                continue;
            }
            c.last_read = Some(now);
            self.stats.mailbox_reads += 1;
            let mut n = 0;
            while n < self.read_batch {
                let Some(pkt) = c.rx.pop() else { break };
                n += 1;
                if let Some(owner) = owners.as_deref_mut() {
                    let flow = pkt.flow.index();
                    if owner.len() <= flow {
                        owner.resize(flow + 1, u32::MAX);
                    }
                    owner[flow] = id as u32;
                }
                if let Err(rej) = self.sched.enqueue(pkt, now) {
                    c.dropped[reason_index(rej.reason)] += 1;
                    self.stats.dropped += 1;
                    c.meta.backpressure.store(true, Ordering::Relaxed);
                    // Leave the rest in the mailbox until the next read:
                    // an overloading client then finds its mailbox full
                    // (and stops, at no cost to the arbiter) instead of
                    // making every round long with drops.
                    break;
                }
            }
            c.drained += n as u64;
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
        // Trim: settle (heavy barrier), then drop the idle clients whose
        // mailbox is still empty; a packet published before the barrier is
        // seen here, one published after it rings again (see `doorbell`).
        if idle > 0
            && self
                .last_settle
                .is_none_or(|t| now.0 >= t.0.saturating_add(self.settle_interval.0))
        {
            self.shared.doorbell.settle();
            self.last_settle = Some(now);
            self.stats.settles += 1;
            let mut i = 0;
            while i < self.active.len() {
                let id = self.active[i];
                if let Some(c) = self.clients.get_mut(id)
                    && c.empty_reads >= self.trim_after
                {
                    if c.rx.is_empty() {
                        c.active = false;
                        self.active.swap_remove(i);
                        continue;
                    }
                    c.empty_reads = 0;
                }
                i += 1;
            }
        }
        // 3. Release while the emulated link is idle.
        let cap = self.round_cap.max(round.drained);
        while round.released < cap && self.link.ready(now) {
            match self.sched.dequeue(now) {
                Some(p) => {
                    self.link.send(p.len);
                    self.stats.bytes += u64::from(p.len);
                    self.batch.push(p);
                    round.released += 1;
                }
                None => {
                    self.link.idle(now);
                    break;
                }
            }
        }
        self.stats.decisions += round.released as u64;
        self.stats.drained += round.drained as u64;
        self.stats.loops += 1;
        if round.drained + round.released > 0 {
            self.stats.busy_loops += 1;
        }
        self.flush();
        round.backlog = self.sched.backlog().pkts;
        round.link_free = self.link.free_at();
        round
    }

    /// Hands the batch to the output or the TX mailboxes.
    fn flush(&mut self) {
        match &mut self.sink {
            Sink::Inline(o) => {
                if !self.batch.is_empty() {
                    o.transmit(&mut self.batch);
                    self.batch.clear();
                }
            }
            Sink::Dispatch(txs) => {
                let k = txs.len();
                for p in self.batch.drain(..) {
                    // Per-flow order is kept: a flow always goes to one dispatcher.
                    let d = &mut txs[p.flow.0 as usize % k];
                    d.waiting.push_back(p);
                }
                for d in txs.iter_mut() {
                    while let Some(p) = d.waiting.pop_front() {
                        if let Err(p) = d.tx.try_push(p) {
                            d.waiting.push_front(p);
                            self.stats.tx_full += 1;
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
            Sink::Clients { owner, dirty } => {
                for p in self.batch.drain(..) {
                    // Every released packet was accepted after its owner was
                    // recorded, so the owner exists.
                    let o = owner.get(p.flow.index()).copied().unwrap_or(u32::MAX) as usize;
                    if let Some(c) = self.clients.get_mut(o) {
                        if c.ret_waiting.is_empty() {
                            dirty.push(o);
                        }
                        c.ret_waiting.push_back(p);
                    }
                }
                dirty.retain(|&o| {
                    let Some(c) = self.clients.get_mut(o) else {
                        return false;
                    };
                    let Some(ret) = c.ret.as_mut() else {
                        return false;
                    };
                    while let Some(p) = c.ret_waiting.pop_front() {
                        if let Err(p) = ret.try_push(p) {
                            c.ret_waiting.push_front(p);
                            self.stats.tx_full += 1;
                            return true;
                        }
                    }
                    false
                });
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

    /// Packets released but still waiting for a full TX mailbox.
    fn tx_waiting(&self) -> usize {
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

    /// `true` if any client has something in its mailbox (looks at all of
    /// them, not only the active ones; used before sleeping).
    fn any_mail(&self) -> bool {
        self.clients.iter().any(|c| !c.rx.is_empty())
    }

    /// Stop sequence, part 1: refuse new sends, wait for senders inside
    /// `send`, then drain every mailbox into the scheduler.
    ///
    /// Why no packet is stranded: a client stores `busy ← true`, light
    /// barrier, loads `stop`; the arbiter stores `stop ← true`, heavy
    /// barrier, loads each `busy`. The pair orders like two `SeqCst` fences,
    /// so either the client sees `stop` (and refuses the packet) or the
    /// arbiter sees `busy` and waits for the client's Release of `busy`,
    /// after its push — the drain below then sees the packet.
    fn close_and_drain(&mut self, now: Nanos) {
        self.shared.stop.store(true, Ordering::Relaxed);
        barrier::heavy();
        self.pick_up_clients();
        let metas: Vec<Arc<ClientMeta>> = self.clients.iter().map(|c| c.meta.clone()).collect();
        for m in metas {
            while m.own.busy.load(Ordering::Acquire) {
                std::hint::spin_loop();
                #[cfg(not(loom))]
                std::thread::yield_now();
            }
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
                while let Some(pkt) = c.rx.pop() {
                    moved += 1;
                    c.drained += 1;
                    self.stats.drained += 1;
                    if let Err(rej) = self.sched.enqueue(pkt, now) {
                        c.dropped[reason_index(rej.reason)] += 1;
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
    /// still queued.
    fn finish(&mut self, mode: StopMode, now: Nanos) -> (u64, Vec<Pkt<T>>) {
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
        self.clients
            .iter()
            .map(|c| {
                let mut s = meta_stats(&c.meta);
                s.drained = c.drained;
                s.dropped_queue_full = c.dropped[0];
                s.dropped_too_large = c.dropped[1];
                s.dropped_unknown_flow = c.dropped[2];
                s
            })
            .collect()
    }

    /// Stops a thread-less arbiter: drains every mailbox, then sends
    /// (ignoring the link) or returns what is queued.
    pub fn stop(mut self, mode: StopMode, now: Nanos) -> Report<T, O> {
        self.close_and_drain(now);
        let (flushed, mut returned) = self.finish(mode, now);
        let unclaimed = self.take_unclaimed();
        let returned_cleared = unclaimed.len() as u64;
        returned.extend(unclaimed);
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
            flushed,
            returned,
            returned_cleared,
            outputs,
        }
    }
}

fn meta_stats(m: &ClientMeta) -> ClientStats {
    ClientStats {
        sent: m.own.sent.load(Ordering::Relaxed),
        mailbox_full: m.own.full.load(Ordering::Relaxed),
        refused_stopped: m.own.refused_stopped.load(Ordering::Relaxed),
        backpressure_events: m.own.backpressure_events.load(Ordering::Relaxed),
        ..ClientStats::default()
    }
}

fn new_client<T: Send>(shared: &Arc<Shared<T>>) -> Result<Client<T>, RuntimeError> {
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
    });
    shared.next_id.store(id as u64 + 1, Ordering::Relaxed);
    shared
        .metas
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(meta.clone());
    drop(reg);
    Ok(Client {
        id,
        tx,
        ret: ret_rx,
        meta,
        shared: shared.clone(),
        sent: 0,
    })
}

/// What [`Pspat::stop`] does with packets still queued in the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopMode {
    /// Transmit them at once, ignoring the link rate.
    Drain,
    /// Hand them back in [`Report::returned`].
    Return,
}

/// Where every packet went. For each client:
/// `sent = drained` and `drained = scheduler enqueued + dropped`; overall
/// `scheduler enqueued = decisions + flushed + returned − returned_cleared`.
/// In client-transmit mode the cleared packets are in the clients' return
/// mailboxes, except the `returned_cleared` ones.
#[derive(Debug)]
pub struct Report<T, O> {
    /// The arbiter's counters.
    pub arbiter: ArbiterStats,
    /// Per client.
    pub clients: Vec<ClientStats>,
    /// The scheduler's `tc -s` counters.
    pub sched: Counters,
    /// Packets transmitted during stop, ignoring the link ([`StopMode::Drain`]).
    pub flushed: u64,
    /// Packets handed back: still queued in the scheduler
    /// ([`StopMode::Return`]), then, in client-transmit mode, cleared
    /// packets whose client's return mailbox had no room.
    pub returned: Vec<Pkt<T>>,
    /// How many of `returned` had already been cleared (counted in
    /// `arbiter.decisions` or `flushed`).
    pub returned_cleared: u64,
    /// The outputs (one per dispatcher, or the arbiter's).
    pub outputs: Vec<O>,
}

impl<T, O> Report<T, O> {
    /// The report in the style of `tc -s qdisc`: what was sent at the link's
    /// rate, dropped (by reason), held back and still held, what stop
    /// flushed or handed back, then the arbiter's own counters and one line
    /// per client.
    pub fn tc_style(&self, alg: &str) -> String {
        use std::fmt::Write as _;
        let c = &self.sched;
        let a = &self.arbiter;
        let mut s = String::new();
        let d = c.dropped_total();
        let _ = write!(
            s,
            "qdisc {alg} (pspat arbiter)\n Sent {} bytes {} pkt (dropped {}",
            a.bytes, a.decisions, d.pkts
        );
        for r in DropReason::ALL {
            let n = c.dropped(r).pkts;
            if n > 0 {
                let _ = write!(s, ", {} {n}", r.name());
            }
        }
        let _ = writeln!(
            s,
            ", overlimits {})\n backlog {}b {}p  flushed at stop {}p  returned at stop {}p",
            c.overlimits,
            c.backlog.bytes,
            c.backlog.pkts,
            self.flushed,
            self.returned.len()
        );
        let _ = writeln!(
            s,
            " arbiter: {} decisions, {} rounds ({} busy, {:.1} pkts/busy round, \
             avg {:.0} ns, max {} ns), {} mailbox reads, {} settles, {} sleeps, \
             {} tx-full",
            a.decisions,
            a.loops,
            a.busy_loops,
            a.pkts_per_loop(),
            a.avg_loop_ns(),
            a.max_loop_ns,
            a.mailbox_reads,
            a.settles,
            a.sleeps,
            a.tx_full
        );
        for (i, cl) in self.clients.iter().enumerate() {
            let _ = writeln!(
                s,
                " client {i}: sent {} (mailbox full {}, backpressure {}, refused at stop {}) \
                 drained {} dropped queue_full {} too_large {} unknown_flow {}",
                cl.sent,
                cl.mailbox_full,
                cl.backpressure_events,
                cl.refused_stopped,
                cl.drained,
                cl.dropped_queue_full,
                cl.dropped_too_large,
                cl.dropped_unknown_flow
            );
        }
        s
    }
}

/// A monotonic clock in nanoseconds since its creation; copies share the
/// epoch, so timestamps from clients and outputs compare.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    epoch: Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

impl Clock {
    /// A clock starting now.
    pub fn new() -> Clock {
        Clock {
            epoch: Instant::now(),
        }
    }
    /// Nanoseconds since the epoch.
    #[inline]
    pub fn now(&self) -> Nanos {
        Nanos(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }
}

/// The threaded runtime.
pub struct Pspat<T: Send + 'static, O: Output<T>> {
    shared: Arc<Shared<T>>,
    clock: Clock,
    arbiter: Option<JoinHandle<Result<Report<T, O>, RuntimeError>>>,
    dispatchers: Vec<JoinHandle<O>>,
    mode: Arc<Mutex<StopMode>>,
}

impl<T: Send + 'static, O: Output<T>> std::fmt::Debug for Pspat<T, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pspat")
            .field("dispatchers", &self.dispatchers.len())
            .field("running", &self.arbiter.is_some())
            .finish_non_exhaustive()
    }
}

fn pin(core: Option<usize>) {
    if let Some(c) = core {
        // Best effort: an unknown core leaves the thread unpinned.
        let _ = core_affinity::set_for_current(core_affinity::CoreId { id: c });
    }
}

impl<T: Send + 'static, O: Output<T>> Pspat<T, O> {
    /// Starts the arbiter (and `cfg.dispatchers` dispatcher threads) with
    /// `sched`, which should already have its flows. `outputs` has one
    /// output per dispatcher, or exactly one when there are none.
    pub fn start(
        cfg: &Config,
        sched: BoxedScheduler<T>,
        outputs: Vec<O>,
        clock: Clock,
    ) -> Result<Pspat<T, O>, RuntimeError> {
        cfg.validate()?;
        let need = if cfg.client_transmit {
            0
        } else {
            cfg.dispatchers.max(1)
        };
        if outputs.len() != need {
            return Err(RuntimeError::Outputs {
                given: outputs.len(),
                dispatchers: cfg.dispatchers,
                need,
            });
        }
        let mut outputs = outputs;
        let mut dispatchers = Vec::new();
        let sink = if cfg.client_transmit {
            Sink::Clients {
                owner: Vec::new(),
                dirty: Vec::new(),
            }
        } else if cfg.dispatchers == 0 {
            let Some(o) = outputs.pop() else {
                return Err(RuntimeError::Outputs {
                    given: 0,
                    dispatchers: 0,
                    need: 1,
                });
            };
            Sink::Inline(o)
        } else {
            let mut txs = Vec::new();
            for (i, out) in outputs.into_iter().enumerate() {
                let (tx, rx) = Mailbox::with_capacity::<Pkt<T>>(cfg.tx_capacity);
                let bell = Arc::new(Doorbell::new(1));
                let done = Arc::new(AtomicBool::new(false));
                let core = if cfg.dispatcher_cores.is_empty() {
                    None
                } else {
                    Some(cfg.dispatcher_cores[i % cfg.dispatcher_cores.len()])
                };
                let d = Dispatcher {
                    rx,
                    out,
                    bell: bell.clone(),
                    done: done.clone(),
                    spin: cfg.spin,
                    busy_poll: cfg.busy_poll,
                };
                let h = std::thread::Builder::new()
                    .name(format!("pspat-dispatch-{i}"))
                    .spawn(move || {
                        pin(core);
                        d.run()
                    })
                    .map_err(|e| RuntimeError::Thread(e.to_string()))?;
                dispatchers.push(h);
                txs.push(DispatchTx {
                    tx,
                    waiting: VecDeque::new(),
                    bell,
                    pushed: false,
                    done,
                });
            }
            Sink::Dispatch(txs)
        };
        let mut arb = Arbiter::build(cfg, sched, sink);
        let shared = arb.shared.clone();
        let mode = Arc::new(Mutex::new(StopMode::Drain));
        let mode2 = mode.clone();
        let (scan_interval, spin, busy_poll, core) = (
            dur_nanos(cfg.scan_interval),
            cfg.spin,
            cfg.busy_poll,
            cfg.arbiter_core,
        );
        let handle = std::thread::Builder::new()
            .name("pspat-arbiter".into())
            .spawn(move || {
                pin(core);
                arb.run(clock, scan_interval, spin, busy_poll);
                let mode = *mode2.lock().unwrap_or_else(PoisonError::into_inner);
                let now = clock.now();
                arb.close_and_drain(now);
                let (flushed, mut returned) = arb.finish(mode, now);
                // Clients may never collect: what their return mailboxes
                // cannot take is handed back.
                let unclaimed = arb.take_unclaimed();
                let returned_cleared = unclaimed.len() as u64;
                returned.extend(unclaimed);
                // Everything is in the TX mailboxes or waiting: push the rest.
                while arb.tx_waiting() > 0 {
                    arb.flush();
                    std::thread::yield_now();
                }
                if let Sink::Dispatch(txs) = &arb.sink {
                    for d in txs {
                        d.done.store(true, Ordering::Release);
                        d.bell.ring(0);
                    }
                }
                arb.publish_now();
                Ok(Report {
                    arbiter: arb.stats,
                    clients: arb.client_stats(),
                    sched: arb.sched.stats(),
                    flushed,
                    returned,
                    returned_cleared,
                    outputs: match arb.sink {
                        Sink::Inline(o) => vec![o],
                        Sink::Dispatch(_) | Sink::Clients { .. } => Vec::new(),
                    },
                })
            })
            .map_err(|e| RuntimeError::Thread(e.to_string()))?;
        Ok(Pspat {
            shared,
            clock,
            arbiter: Some(handle),
            dispatchers,
            mode,
        })
    }

    /// A new client handle; move it to the sending thread.
    pub fn client(&self) -> Result<Client<T>, RuntimeError> {
        new_client(&self.shared)
    }

    /// The runtime's clock.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        let metas = self
            .shared
            .metas
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Stats {
            arbiter: *self
                .shared
                .published
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
            clients: metas.iter().map(|m| meta_stats(m)).collect(),
        }
    }

    /// Stops: new sends are refused, every mailbox is drained, what is
    /// queued is sent at once or returned (`mode`), dispatchers empty their
    /// TX mailboxes, all threads are joined.
    pub fn stop(mut self, mode: StopMode) -> Result<Report<T, O>, RuntimeError> {
        *self.mode.lock().unwrap_or_else(PoisonError::into_inner) = mode;
        self.shared.stop.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        self.shared.doorbell.ring(usize::MAX);
        let Some(h) = self.arbiter.take() else {
            return Err(RuntimeError::Stopped);
        };
        let mut report = h
            .join()
            .map_err(|_| RuntimeError::Thread("arbiter panicked".into()))??;
        for h in self.dispatchers.drain(..) {
            report.outputs.push(
                h.join()
                    .map_err(|_| RuntimeError::Thread("dispatcher panicked".into()))?,
            );
        }
        Ok(report)
    }
}

impl<T: Send + 'static, O: Output<T>> Drop for Pspat<T, O> {
    fn drop(&mut self) {
        // Dropped without `stop`: stop the threads (packets are dropped with
        // them; `stop` is the way to account for them).
        if let Some(h) = self.arbiter.take() {
            self.shared.stop.store(true, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            self.shared.doorbell.ring(usize::MAX);
            let _ = h.join();
            for h in self.dispatchers.drain(..) {
                let _ = h.join();
            }
        }
    }
}

impl<T: Send + 'static, O: Output<T>> Arbiter<T, O> {
    /// Publishes the counters if no reader holds them right now (the hot
    /// loop must never wait).
    fn publish(&mut self) {
        if let Ok(mut p) = self.shared.published.try_lock() {
            *p = self.stats;
        }
    }

    /// Publishes the counters, waiting for a reader if need be: before a
    /// sleep, so what readers see is never older than the last activity.
    fn publish_now(&mut self) {
        *self
            .shared
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = self.stats;
    }

    /// The thread loop: rounds until stop.
    fn run(&mut self, clock: Clock, scan_interval: Nanos, spin: Duration, busy_poll: bool) {
        self.shared.doorbell.register_consumer();
        let spin = dur_nanos(spin);
        let mut idle_since: Option<Nanos> = None;
        let mut next_publish = Nanos(0);
        loop {
            let start = clock.now();
            let r = self.do_scan(start);
            let end = clock.now();
            if end >= next_publish {
                self.publish();
                next_publish = Nanos(end.0 + 1_000_000);
            }
            if self.shared.stop.load(Ordering::Relaxed) {
                return;
            }
            if r.drained + r.released > 0 {
                let d = end.0.saturating_sub(start.0);
                self.stats.busy_loop_ns += d;
                self.stats.max_loop_ns = self.stats.max_loop_ns.max(d);
                let b = (63 - d.max(1).leading_zeros()) as usize;
                self.stats.loop_ns_log2[b.min(31)] += 1;
                idle_since = None;
            } else if r.backlog > 0 || self.tx_waiting() > 0 {
                // Waiting for the link (or a dispatcher): sleep if it is far.
                let wait = r.link_free.0.saturating_sub(end.0);
                if !busy_poll && wait > spin.0 {
                    self.sleep(Some(Duration::from_nanos(wait)));
                } else {
                    std::hint::spin_loop();
                }
            } else if busy_poll {
                std::hint::spin_loop();
            } else {
                let since = *idle_since.get_or_insert(end);
                if end.0.saturating_sub(since.0) < spin.0 {
                    std::hint::spin_loop();
                } else {
                    self.sleep(None);
                    idle_since = None;
                }
            }
            if scan_interval.0 > 0 {
                let next = start.0.saturating_add(scan_interval.0);
                while clock.now().0 < next {
                    std::hint::spin_loop();
                }
            }
        }
    }

    fn sleep(&mut self, timeout: Option<Duration>) {
        let shared = self.shared.clone();
        let bell = &shared.doorbell;
        bell.announce_sleep();
        if bell.any() || self.any_mail() || self.shared.stop.load(Ordering::Relaxed) {
            bell.cancel_sleep();
            return;
        }
        self.stats.sleeps += 1;
        self.publish_now();
        match timeout {
            Some(t) => bell.sleep_timeout(t),
            None => bell.sleep(),
        }
    }
}

/// A dispatcher thread: drains its TX mailbox into its output.
struct Dispatcher<T, O> {
    rx: Consumer<Pkt<T>>,
    out: O,
    bell: Arc<Doorbell>,
    done: Arc<AtomicBool>,
    spin: Duration,
    busy_poll: bool,
}

impl<T: Send + 'static, O: Output<T>> Dispatcher<T, O> {
    fn run(mut self) -> O {
        self.bell.register_consumer();
        let mut batch = Vec::with_capacity(64);
        let mut idle_since: Option<Instant> = None;
        loop {
            // The arbiter rings after every push; clear the bit before
            // reading so a later ring is not missed.
            self.bell.take(|_| {});
            let n = self.rx.pop_into(&mut batch, 64);
            if n > 0 {
                self.out.transmit(&mut batch);
                batch.clear();
                idle_since = None;
                continue;
            }
            // The arbiter set `done` (Release) after its last push, so once
            // we see it (Acquire) an empty mailbox stays empty.
            if self.done.load(Ordering::Acquire) {
                if self.rx.is_empty() {
                    return self.out;
                }
                continue;
            }
            if self.busy_poll {
                std::hint::spin_loop();
                continue;
            }
            let since = *idle_since.get_or_insert_with(Instant::now);
            if since.elapsed() < self.spin {
                std::hint::spin_loop();
                continue;
            }
            self.bell.announce_sleep();
            if self.bell.any() || !self.rx.is_empty() || self.done.load(Ordering::Acquire) {
                self.bell.cancel_sleep();
                continue;
            }
            self.bell.sleep();
            idle_since = None;
        }
    }
}

/// Adds `n` flows of weight `weights[i % len]` (default config otherwise),
/// returning their ids — a helper for benches and tests.
pub fn add_flows<T>(
    sched: &mut dyn Scheduler<T>,
    weights: &[u32],
    n: usize,
    limit: u32,
) -> Result<Vec<FlowId>, pktsched_core::ConfigError> {
    (0..n)
        .map(|i| {
            let w = weights.get(i % weights.len().max(1)).copied().unwrap_or(1);
            sched.add_flow(FlowConfig::weight(w).with_limit(limit))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::{NullOutput, VecOutput};
    use pktsched_core::Algorithm;

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
            mailbox_capacity: 14,
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
        assert_eq!(n, 14);
        assert_eq!(err, SendError::Full(pkt(0, 100, 14)));
        let r = a.stop(StopMode::Drain, Nanos(0));
        assert_eq!(r.clients[0].mailbox_full, 1);
        assert_eq!(r.clients[0].sent, 14);
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
        // Late enough for the link to have room for all six.
        a.do_scan(Nanos(1_000_000));
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
        let mut a = client_transmit_arbiter(14);
        let mut c = a.client().unwrap_or_else(|e| panic!("{e}"));
        for i in 0..40 {
            c.send(pkt(0, 100, i)).unwrap_or_else(|_| panic!("send"));
        }
        a.do_scan(Nanos(1_000_000));
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
    fn client_transmit_settings_are_checked() {
        let cfg = Config {
            client_transmit: true,
            dispatchers: 2,
            ..Config::new(Rate::gbit(1))
        };
        let e = cfg.validate().map(|_| ()).unwrap_err().to_string();
        assert!(
            e.contains("dispatchers") && e.contains("client_transmit"),
            "{e}"
        );
        let cfg = Config {
            client_transmit: true,
            ..Config::new(Rate::gbit(1))
        };
        let e = Arbiter::new(
            &cfg,
            Algorithm::Fifo.build_send::<u64>(),
            NullOutput::default(),
        )
        .map(|_| ())
        .unwrap_err()
        .to_string();
        assert!(e.contains("new_client_transmit"), "{e}");
        let e = Pspat::start(
            &cfg,
            Algorithm::Fifo.build_send::<u64>(),
            vec![NullOutput::default()],
            Clock::new(),
        )
        .map(|_| ())
        .unwrap_err()
        .to_string();
        assert!(e.contains("need 0"), "{e}");
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
            mailbox_capacity: 14,
            ..Config::new(Rate::gbit(1))
        };
        let mut a: Arbiter<u64, VecOutput<u64>> =
            Arbiter::new(&cfg, Algorithm::Fifo.build_send(), VecOutput::default())
                .unwrap_or_else(|e| panic!("{e}"));
        add_flows(a.scheduler().as_mut(), &[1], 1, 1000).unwrap_or_else(|e| panic!("{e}"));
        let mut c = a.client().unwrap_or_else(|e| panic!("{e}"));
        let mut q: VecDeque<Pkt<u64>> = (0..20).map(|i| pkt(0, 100, i)).collect();
        assert_eq!(c.send_batch(&mut q), Ok((14, Sent::Queued)));
        assert_eq!(q.len(), 6);
        assert_eq!(
            q.front().map(|p| p.item),
            Some(14),
            "the rest stays in order"
        );
        assert_eq!(c.send_batch(&mut q), Ok((0, Sent::Queued)));
        a.do_scan(Nanos(0));
        assert_eq!(c.send_batch(&mut q), Ok((6, Sent::Queued)));
        assert!(q.is_empty());
        let r = a.stop(StopMode::Drain, Nanos(1_000_000));
        assert_eq!(r.clients[0].sent, 20);
        assert_eq!(r.clients[0].mailbox_full, 2);
        let out = r
            .outputs
            .first()
            .map(|o| o.pkts.iter().map(|p| p.item).collect::<Vec<_>>());
        assert_eq!(out, Some((0..20).collect()));
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
    fn bad_settings_are_refused_by_name() {
        let mut cfg = Config::new(Rate::gbit(1));
        cfg.round_cap = 0;
        let e = cfg
            .validate()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("round_cap") && e.contains("1..="), "{e}");
        let cfg = Config {
            max_clients: 1,
            ..Config::new(Rate::gbit(1))
        };
        let a: Arbiter<u64, NullOutput> =
            Arbiter::new(&cfg, Algorithm::Fifo.build_send(), NullOutput::default())
                .unwrap_or_else(|e| panic!("{e}"));
        assert!(a.client().is_ok());
        assert_eq!(
            a.client().err(),
            Some(RuntimeError::TooManyClients { max: 1 })
        );
        let cfg = Config {
            dispatchers: 2,
            ..Config::new(Rate::gbit(1))
        };
        let e = Pspat::<u64, NullOutput>::start(
            &cfg,
            Algorithm::Fifo.build_send(),
            vec![NullOutput::default()],
            Clock::new(),
        );
        assert_eq!(
            e.err().map(|e| e.to_string()),
            Some("1 outputs given for 2 dispatchers; need 2".into())
        );
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
            meta_stats(&shared.metas.lock().unwrap_or_else(PoisonError::into_inner)[0])
                .refused_stopped,
            1
        );
    }
}
