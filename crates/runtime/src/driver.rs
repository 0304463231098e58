//! The threaded PSPAT runtime: [`Pspat`] runs the [`Arbiter`] (and
//! `Config::dispatchers` dispatcher threads) on threads with a real
//! [`Clock`].
//!
//! * The arbiter thread calls [`Arbiter::do_scan`] back to back (or every
//!   `scan_interval`); when idle it spins for `spin`, then sleeps until a
//!   client rings (or until the link is free when packets wait for it).
//!   It publishes its counters about every millisecond for
//!   [`Pspat::stats`].
//! * A dispatcher thread drains its TX mailbox into its [`Output`].
//! * Threads are pinned to the configured cores (best effort).
//! * [`Pspat::stop`] drains every mailbox, then sends or returns what is
//!   queued, lets the dispatchers empty their TX mailboxes, joins the
//!   threads and reports where every packet went.

mod humble;
mod nap_gate;
mod step_aside;
mod trial;

use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pktsched_core::{Nanos, Pkt};

use crate::arbiter::{Arbiter, DispatchTx, SharedArbiter, Sink};
use crate::client::{Client, Shared, new_client};
use crate::config::{
    ArbiterSched, BoxedScheduler, Clock, Config, RuntimeError, StopMode, dur_nanos,
};
use crate::doorbell::Doorbell;
use crate::mailbox::{Consumer, Mailbox};
use crate::output::Output;
use crate::report::{ArbiterStats, Report, Stats, ThreadCounts};
use crate::sync::{Arc, AtomicBool, Ordering, fence};
use humble::{HumbleState, Judged};
use nap_gate::NapGate;
use step_aside::{Step, StepAside, Window, away_ends, away_nap};

/// The dispatcher threads, each returning its output when joined.
type DispatcherThreads<O> = Vec<JoinHandle<O>>;

/// The threaded runtime.
pub struct Pspat<T: Send + 'static, O: Output<T>> {
    shared: Arc<Shared<T>>,
    /// The arbiter's counters, as last published by its thread.
    published: Arc<Mutex<ArbiterStats>>,
    clock: Clock,
    arbiter: Option<JoinHandle<Result<Report<T, O>, RuntimeError>>>,
    dispatchers: DispatcherThreads<O>,
    /// What the arbiter thread does at stop with packets still queued.
    mode: Arc<Mutex<StopMode>>,
    /// The arbiter thread's humble periods so far (`Config::humble`).
    humble: Arc<Mutex<HumbleStats>>,
}

/// What [`Config::humble`] did so far ([`Pspat::humble_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HumbleStats {
    /// Humble periods judged (the priority lowered, or kept lowered).
    pub periods: u64,
    /// Of them, kept: the period served more than 0.95× the decisions
    /// per second of the window that triggered it.
    pub kept: u64,
    /// Wall time at the lowered priority, ns (periods judged so far).
    pub humble_ns: u64,
    /// The priority is lowered right now.
    pub lowered: bool,
    /// Humble could engage: on, and the thread runs at a raised priority.
    pub armed: bool,
}

impl<T: Send + 'static, O: Output<T>> std::fmt::Debug for Pspat<T, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pspat")
            .field("dispatchers", &self.dispatchers.len())
            .field("running", &self.arbiter.is_some())
            .finish_non_exhaustive()
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
        prio::check_sched(cfg.arbiter_sched)?;
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
        let (sink, dispatchers) = start_sink(cfg, outputs)?;
        let arbiter = Arbiter::build(cfg, sched, sink);
        let shared = arbiter.shared().clone();
        let arbiter = SharedArbiter::with_clock(arbiter, clock, cfg.step_aside || cfg.humble);
        let published = Arc::new(Mutex::new(ArbiterStats::default()));
        let mode = Arc::new(Mutex::new(StopMode::Drain));
        let humble_stats = Arc::new(Mutex::new(HumbleStats::default()));
        let thread = ArbiterThread {
            arbiter,
            shared: shared.clone(),
            clock,
            scan_interval: dur_nanos(cfg.scan_interval),
            policy: IdlePolicy {
                spin: dur_nanos(cfg.spin).0,
                busy_poll: cfg.busy_poll,
                yield_when_idle: cfg.yield_when_idle,
                nap_cover: cfg.nap_cover.map(|d| dur_nanos(d).0),
            },
            published: published.clone(),
            mode: mode.clone(),
            counts: ThreadCounts::default(),
            step: cfg.step_aside.then(StepAside::default),
            nap_gate: (cfg.nap_when_waiting && cfg.nap_cover.is_some()).then(NapGate::default),
            nap_open: cfg.nap_cover.is_some() && !cfg.nap_when_waiting,
            humble: None,
            humble_stats: humble_stats.clone(),
            mark: Mark::default(),
            slept_ns: 0,
        };
        let core = cfg.arbiter_core;
        let nice = cfg.arbiter_nice;
        let sched = cfg.arbiter_sched;
        let humble = cfg.humble && sched == ArbiterSched::Other;
        let handle = std::thread::Builder::new()
            .name("pspat-arbiter".into())
            .spawn(move || {
                pin(core);
                let base = prio::nice();
                prio::set_nice(nice);
                // Checked in a thread of its own above; a refusal now
                // (the limits changed meanwhile) leaves the policy as it
                // was, like a refused nice value.
                let _ = prio::set_sched(sched);
                let mut thread = thread;
                if humble {
                    thread.arm_humble(base, prio::nice());
                }
                thread.run()
            })
            .map_err(|e| RuntimeError::Thread(e.to_string()))?;
        Ok(Pspat {
            shared,
            published,
            clock,
            arbiter: Some(handle),
            dispatchers,
            mode,
            humble: humble_stats,
        })
    }

    /// What [`Config::humble`] did so far.
    pub fn humble_stats(&self) -> HumbleStats {
        *self.humble.lock().unwrap_or_else(PoisonError::into_inner)
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
        let clients = self.shared.client_stats();
        Stats {
            arbiter: *self
                .published
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
            clients,
        }
    }

    /// Stops: new sends are refused, every mailbox is drained, what is
    /// queued is sent at once or returned (`mode`), dispatchers empty their
    /// TX mailboxes, all threads are joined.
    pub fn stop(mut self, mode: StopMode) -> Result<Report<T, O>, RuntimeError> {
        *self.mode.lock().unwrap_or_else(PoisonError::into_inner) = mode;
        wake_to_stop(&self.shared);
        let Some(h) = self.arbiter.take() else {
            return Err(RuntimeError::Stopped);
        };
        // Stepped aside, it sleeps without listening to the doorbell.
        h.thread().unpark();
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
            wake_to_stop(&self.shared);
            h.thread().unpark();
            let _ = h.join();
            for h in self.dispatchers.drain(..) {
                let _ = h.join();
            }
        }
    }
}

/// Sets the stop flag and wakes the arbiter thread to see it.
fn wake_to_stop<T>(shared: &Shared<T>) {
    shared.stop.store(true, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    shared.doorbell.ring(usize::MAX);
}

/// Whether the arbiter thread may run under `sched` here: what
/// [`Pspat::start`] checks first, for callers that want to know before
/// they set anything else up (a short-lived thread tries the policy).
pub fn check_arbiter_sched(sched: ArbiterSched) -> Result<(), RuntimeError> {
    prio::check_sched(sched)
}

/// Pins the calling thread to `core`, if any.
fn pin(core: Option<usize>) {
    if let Some(c) = core {
        // Best effort: an unknown core leaves the thread unpinned.
        let _ = core_affinity::set_for_current(core_affinity::CoreId { id: c });
    }
}

/// The arbiter thread's priority and policy (with `cpu`, the driver's
/// unsafe calls).
#[allow(unsafe_code)]
mod prio {
    use crate::config::{ArbiterSched, RuntimeError};

    /// Whether a thread may run under `sched`: a short-lived thread of its
    /// own tries it (capabilities and limits are per thread, and the
    /// caller's policy stays as it is), so a refusal is an error at start,
    /// before any thread of the runtime runs.
    pub(super) fn check_sched(sched: ArbiterSched) -> Result<(), RuntimeError> {
        if sched == ArbiterSched::Other {
            return Ok(());
        }
        std::thread::Builder::new()
            .name("pspat-sched-check".into())
            .spawn(move || set_sched(sched))
            .map_err(|e| RuntimeError::Thread(e.to_string()))?
            .join()
            .map_err(|_| RuntimeError::Thread("policy check panicked".into()))?
    }

    /// Puts the calling thread under `sched` (`Other`: leaves it as it
    /// is); the error names the policy and the kernel's answer.
    pub(super) fn set_sched(sched: ArbiterSched) -> Result<(), RuntimeError> {
        let ArbiterSched::Fifo(p) = sched else {
            return Ok(());
        };
        #[cfg(target_os = "linux")]
        {
            let param = libc::sched_param {
                sched_priority: i32::from(p),
            };
            // SAFETY: `param` is a valid sched_param for the call's
            // duration; pid 0 is the calling thread, and the call only
            // reads it.
            let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
            if rc != 0 {
                return Err(RuntimeError::Sched {
                    policy: sched,
                    reason: std::io::Error::last_os_error().to_string(),
                });
            }
            Ok(())
        }
        #[cfg(not(target_os = "linux"))]
        Err(RuntimeError::Sched {
            policy: sched,
            reason: format!("real-time priority {p} is supported on Linux only"),
        })
    }

    /// The calling thread's nice value (`None` where unknown).
    pub(super) fn nice() -> Option<i32> {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: gettid has no preconditions; getpriority only reads
            // its integer arguments. -1 is also a valid nice value, so
            // errno is cleared first and read after.
            unsafe {
                let tid = libc::gettid();
                *libc::__errno_location() = 0;
                let n = libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t);
                if n == -1 && *libc::__errno_location() != 0 {
                    return None;
                }
                Some(n)
            }
        }
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// Sets the calling thread's nice value, if any; `false` when the
    /// kernel refused it (no `CAP_SYS_NICE` or `RLIMIT_NICE` to raise it:
    /// the thread keeps its own).
    pub(super) fn set_nice(nice: Option<i32>) -> bool {
        #[cfg(target_os = "linux")]
        if let Some(n) = nice {
            // SAFETY: gettid has no preconditions; setpriority only reads
            // its integer arguments. On Linux, PRIO_PROCESS with a thread
            // id sets that one thread's nice value.
            return unsafe {
                let tid = libc::gettid();
                libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, n) == 0
            };
        }
        #[cfg(not(target_os = "linux"))]
        let _ = nice;
        true
    }
}

/// The calling thread's CPU time (one `clock_gettime`, unlike reading
/// `/proc`: cheap enough for every publication of the counters).
#[allow(unsafe_code)]
mod cpu {
    /// CPU time of the calling thread, ns (0 where unknown).
    pub(super) fn thread_ns() -> u64 {
        #[cfg(target_os = "linux")]
        {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is a valid, writable timespec for the call's
            // duration; CLOCK_THREAD_CPUTIME_ID needs nothing else.
            let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            if rc != 0 {
                return 0;
            }
            let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
            let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
            secs.saturating_mul(1_000_000_000).saturating_add(nanos)
        }
        #[cfg(not(target_os = "linux"))]
        0
    }
}

/// Where the arbiter's released packets go for `cfg` (`outputs` already
/// checked against it), starting one dispatcher thread per output if
/// `cfg.dispatchers > 0`.
fn start_sink<T: Send + 'static, O: Output<T>>(
    cfg: &Config,
    mut outputs: Vec<O>,
) -> Result<(Sink<T, O>, DispatcherThreads<O>), RuntimeError> {
    if cfg.client_transmit {
        return Ok((Sink::clients(), Vec::new()));
    }
    if cfg.dispatchers == 0 {
        let Some(o) = outputs.pop() else {
            return Err(RuntimeError::Outputs {
                given: 0,
                dispatchers: 0,
                need: 1,
            });
        };
        return Ok((Sink::Inline(o), Vec::new()));
    }
    let mut txs = Vec::new();
    let mut handles = Vec::new();
    for (i, out) in outputs.into_iter().enumerate() {
        let (tx, handle) = start_dispatcher(cfg, i, out)?;
        txs.push(tx);
        handles.push(handle);
    }
    Ok((Sink::Dispatch(txs), handles))
}

/// Starts dispatcher `i` transmitting into `out`; returns the arbiter's end
/// of its TX mailbox and its thread.
fn start_dispatcher<T: Send + 'static, O: Output<T>>(
    cfg: &Config,
    i: usize,
    out: O,
) -> Result<(DispatchTx<T>, JoinHandle<O>), RuntimeError> {
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
    let handle = std::thread::Builder::new()
        .name(format!("pspat-dispatch-{i}"))
        .spawn(move || {
            pin(core);
            d.run()
        })
        .map_err(|e| RuntimeError::Thread(e.to_string()))?;
    Ok((DispatchTx::new(tx, bell, done), handle))
}

/// How a round ended, as the idle policy sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RoundEnd {
    /// The round drained or released packets.
    pub(crate) did_work: bool,
    /// Packets wait for the link (or for a dispatcher).
    pub(crate) waiting: bool,
    /// Until the link is free, ns (meaningful when `waiting`).
    pub(crate) link_wait: u64,
    /// Since the arbiter last had anything to do, ns.
    pub(crate) idle_for: u64,
    /// How long the link stays busy with what is queued, ns, when the
    /// round did nothing, packets wait and every mailbox is empty (0
    /// otherwise, or when napping is off: not worked out).
    pub(crate) idle_ahead: u64,
}

/// What the arbiter thread does before its next round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// The next round at once.
    Round,
    /// One spin-loop hint, then the next round.
    Spin,
    /// Give the core to any other runnable thread, then the next round.
    Yield,
    /// Sleep until a client rings, or at most this long (ns).
    Sleep(Option<u64>),
    /// Sleep until a client rings, or at most this long (ns), while the
    /// link is busy with the backlog ([`Config::nap_cover`]).
    Nap(u64),
}

/// The arbiter thread's idle policy (see `Config::spin`, `busy_poll`,
/// `yield_when_idle`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct IdlePolicy {
    /// T_w, ns.
    pub(crate) spin: u64,
    pub(crate) busy_poll: bool,
    pub(crate) yield_when_idle: bool,
    /// [`Config::nap_cover`], ns.
    pub(crate) nap_cover: Option<u64>,
}

impl IdlePolicy {
    /// What to do after a round that ended as `r`:
    /// * work done: the next round at once;
    /// * `busy_poll`: never sleep;
    /// * waiting for the link: sleep until it is free if that is further
    ///   than T_w; nap for half the backlog's link time if the mailboxes
    ///   are empty and that time is at least the nap cover; else wait for
    ///   it on the CPU;
    /// * nothing to do: wait on the CPU for T_w, then sleep until a ring.
    ///
    /// "On the CPU" is a spin, or with `yield_when_idle` a yield, so a
    /// client (or anything else) runnable on the arbiter's core runs
    /// meanwhile instead of waiting for the arbiter's time slice to end;
    /// alone on its core the yield returns at once (a system call, well
    /// under a packet's time), so the arbiter is late by at most what the
    /// other thread runs before it blocks, yields or is preempted.
    pub(crate) fn after(&self, r: RoundEnd) -> Next {
        let on_cpu = if self.yield_when_idle {
            Next::Yield
        } else {
            Next::Spin
        };
        if r.did_work {
            Next::Round
        } else if self.busy_poll {
            Next::Spin
        } else if r.waiting {
            if r.link_wait > self.spin {
                Next::Sleep(Some(r.link_wait))
            } else if self.nap_cover.is_some_and(|c| r.idle_ahead >= c) {
                Next::Nap((r.idle_ahead / 2).min(self.nap_cover.unwrap_or(0)))
            } else {
                on_cpu
            }
        } else if r.idle_for < self.spin {
            on_cpu
        } else {
            Next::Sleep(None)
        }
    }
}

/// How long the arbiter thread waits on the CPU for a client's round
/// before it yields, ns: several times a full round (`round_cap` packets).
const HOLDER_SPIN: u64 = 20_000;

/// The arbiter thread: the arbiter with the real clock and the loop's
/// timing parameters.
struct ArbiterThread<T, O> {
    /// Behind the hand-off lock: clients run the rounds it is late for.
    arbiter: SharedArbiter<T, O>,
    shared: Arc<Shared<T>>,
    clock: Clock,
    /// Δ_A: minimum time between the starts of two rounds.
    scan_interval: Nanos,
    /// What to do between rounds.
    policy: IdlePolicy,
    /// Where the counters are published for [`Pspat::stats`].
    published: Arc<Mutex<ArbiterStats>>,
    mode: Arc<Mutex<StopMode>>,
    /// How the thread waited between rounds, its CPU time.
    counts: ThreadCounts,
    /// Stepping aside (`None`: `Config::step_aside` is off).
    step: Option<StepAside>,
    /// `Config::nap_when_waiting` (`None`: off, the nap follows
    /// `nap_cover` alone).
    nap_gate: Option<NapGate>,
    /// The nap may be taken now (`nap_cover` set, and the gate open if
    /// there is one).
    nap_open: bool,
    /// Humble periods (`None`: `Config::humble` is off, or the thread
    /// runs at no raised priority to give up).
    humble: Option<HumbleState>,
    /// Where [`Pspat::humble_stats`] reads what humble did.
    humble_stats: Arc<Mutex<HumbleStats>>,
    /// Where the current window of [`StepAside`] and [`humble::Humble`]
    /// started.
    mark: Mark,
    /// Time asleep by choice so far, ns.
    slept_ns: u64,
}

/// The counters at the start of a step-aside window.
#[derive(Clone, Copy, Debug, Default)]
struct Mark {
    at: u64,
    slept_ns: u64,
    cpu_ns: u64,
    busy_ns: u64,
    starved_ns: u64,
    decisions: u64,
}

impl Mark {
    /// The window from this mark to `now`, where the counters are `to`.
    fn window_to(&self, to: &Mark) -> Window {
        Window {
            wall_ns: to.at.saturating_sub(self.at),
            slept_ns: to.slept_ns.saturating_sub(self.slept_ns),
            cpu_ns: to.cpu_ns.saturating_sub(self.cpu_ns),
            busy_ns: to.busy_ns.saturating_sub(self.busy_ns),
            starved_ns: to.starved_ns.saturating_sub(self.starved_ns),
            decisions: to.decisions.saturating_sub(self.decisions),
        }
    }
}

impl<T: Send + 'static, O: Output<T>> ArbiterThread<T, O> {
    /// The thread's body: rounds until stop, then the stop sequence.
    fn run(mut self) -> Result<Report<T, O>, RuntimeError> {
        self.run_rounds();
        let mode = *self.mode.lock().unwrap_or_else(PoisonError::into_inner);
        // From here on clients run no round.
        let Some(mut arbiter) = self.arbiter.take() else {
            return Err(RuntimeError::Stopped);
        };
        let left = arbiter.close_and_empty(mode, self.clock.now());
        // Everything is in the TX mailboxes or waiting: push the rest.
        while arbiter.tx_waiting() > 0 {
            arbiter.flush();
            std::thread::yield_now();
        }
        arbiter.mark_dispatchers_done();
        self.counts.cpu_ns = cpu::thread_ns();
        arbiter.record_thread(&self.counts);
        self.publish_now(arbiter.stats());
        Ok(arbiter.into_report(left))
    }

    /// The arbiter loop: rounds until stop. A round is skipped while a
    /// client runs one (the arbiter was late, see `handoff`).
    fn run_rounds(&mut self) {
        self.shared.doorbell.register_consumer();
        self.counts.cpu_ns = cpu::thread_ns();
        self.mark = self.mark_at(self.clock.now(), 0, 0);
        let mut idle_since: Option<Nanos> = None;
        let mut next_publish = Nanos(0);
        // The end of a round that is followed at once by the next one is
        // that round's start: one clock read per round, not two.
        let mut fresh: Option<Nanos> = None;
        loop {
            let start = fresh.take().unwrap_or_else(|| self.clock.now());
            let clock = self.clock;
            let napping = self.nap_open;
            let step = self.arbiter.try_scan_then(start, |a, r| {
                let end = clock.now();
                let did_work = r.drained + r.released > 0;
                if did_work {
                    a.record_busy_round(end.0.saturating_sub(start.0));
                }
                let waiting = r.backlog > 0 || a.tx_waiting() > 0;
                // Not while released packets wait for a dispatcher: it does not
                // ring the arbiter when it frees room.
                let idle_ahead =
                    if napping && waiting && !did_work && a.tx_waiting() == 0 && !a.any_mail() {
                        a.busy_ahead(end).0
                    } else {
                        0
                    };
                let stats = (end >= next_publish).then(|| a.stats());
                (r, did_work, waiting, idle_ahead, end, stats, a.rounds())
            });
            let (r, did_work, waiting, idle_ahead, end, stats, rounds) = match step {
                Some(Some(s)) => s,
                // Stopped from outside the loop: nothing left to run.
                Some(None) => return,
                // A client is running a round.
                None => {
                    if self.shared.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    self.wait_for_client_round();
                    continue;
                }
            };
            // Publishing (and the step-aside judgement, which may sleep)
            // takes time of its own: the next round reads the clock.
            let reuse_end = stats.is_none();
            if let Some(st) = stats {
                self.publish(st);
                next_publish = Nanos(end.0 + 1_000_000);
                self.judge_window(end, st.decisions, st.busy_loop_ns);
            }
            if self.shared.stop.load(Ordering::Relaxed) {
                return;
            }
            if did_work {
                idle_since = None;
            }
            let since = if did_work || waiting {
                end
            } else {
                *idle_since.get_or_insert(end)
            };
            let state = RoundEnd {
                did_work,
                waiting,
                link_wait: r.link_free.0.saturating_sub(end.0),
                idle_for: end.0.saturating_sub(since.0),
                idle_ahead,
            };
            match self.policy.after(state) {
                Next::Round => fresh = reuse_end.then_some(end),
                Next::Spin => {
                    self.counts.spins += 1;
                    std::hint::spin_loop();
                }
                Next::Yield => {
                    self.counts.yields += 1;
                    std::thread::yield_now();
                }
                Next::Sleep(t) => {
                    self.sleep(t.map(Duration::from_nanos), rounds);
                    idle_since = None;
                }
                Next::Nap(t) => {
                    if self.sleep(Some(Duration::from_nanos(t)), rounds) {
                        self.counts.naps += 1;
                    }
                }
            }
            if self.scan_interval.0 > 0 {
                let next = start.0.saturating_add(self.scan_interval.0);
                while self.clock.now().0 < next {
                    std::hint::spin_loop();
                }
                fresh = None;
            }
        }
    }

    /// The counters now (`end`), with `decisions` and `busy_ns` (time in
    /// busy rounds) so far.
    fn mark_at(&self, end: Nanos, decisions: u64, busy_ns: u64) -> Mark {
        Mark {
            at: end.0,
            slept_ns: self.slept_ns,
            cpu_ns: self.counts.cpu_ns,
            busy_ns,
            starved_ns: self.shared.clients_starved_ns(),
            decisions,
        }
    }

    /// With [`Config::humble`]: arms the policy if the thread runs at a
    /// raised priority (`now` below the inherited `base`).
    fn arm_humble(&mut self, base: Option<i32>, now: Option<i32>) {
        let Some((base, raised)) = humble::arms(base, now) else {
            return;
        };
        self.humble = Some(HumbleState::new(base, raised));
        self.publish_humble();
    }

    /// About every millisecond (after a publication, which read the
    /// thread's CPU time): judges the window since the last one, lowers
    /// or raises the priority if [`humble::Humble`] says so, and (at the raised
    /// priority) steps aside if [`StepAside`] says so.
    fn judge_window(&mut self, end: Nanos, decisions: u64, busy_ns: u64) {
        if self.step.is_none() && self.humble.is_none() && self.nap_gate.is_none() {
            return;
        }
        let now = self.mark_at(end, decisions, busy_ns);
        let w = self.mark.window_to(&now);
        self.mark = now;
        if let Some(g) = self.nap_gate.as_mut() {
            self.nap_open = g.after_window(end.0, &w);
            self.counts.nap_gate_opened = g.opened;
        }
        if self.judge_humble(&now, &w) {
            return;
        }
        let step = self.step.as_mut().map(|s| s.after_present(end.0, &w));
        if let Some(Step::Away(len)) = step {
            self.step_aside(len, decisions);
        }
    }

    /// Humble's part of [`ArbiterThread::judge_window`] for the window `w`
    /// that ends at `now` (see [`HumbleState::judge`]); `true` while the
    /// priority is lowered, and for the window that ended a lowered
    /// period.
    fn judge_humble(&mut self, now: &Mark, w: &Window) -> bool {
        let Some(h) = self.humble.as_mut() else {
            return false;
        };
        match h.judge(now, w, |nice| prio::set_nice(Some(nice))) {
            Judged::Lowered => true,
            Judged::Changed { holds, disarm } => {
                self.publish_humble();
                if disarm {
                    self.humble = None;
                }
                holds
            }
        }
    }

    /// Copies the humble counters for [`Pspat::humble_stats`].
    fn publish_humble(&self) {
        let Some(h) = &self.humble else {
            return;
        };
        let mut p = self
            .humble_stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *p = HumbleStats {
            periods: h.policy.periods(),
            kept: h.policy.kept(),
            humble_ns: h.humble_ns,
            lowered: h.is_lowered(),
            armed: true,
        };
    }

    /// Steps aside for `len` ns: clients run the rounds meanwhile (the
    /// doorbell does not wake the thread; stop unparks it), then judges
    /// the away period against the present window.
    fn step_aside(&mut self, len: u64, decisions: u64) {
        self.arbiter.set_away(true);
        let t0 = self.clock.now().0;
        let deadline = t0.saturating_add(len);
        loop {
            let now = self.clock.now().0;
            let last = self.arbiter.last_round().0;
            if away_ends(now, deadline, last) || self.shared.stop.load(Ordering::Relaxed) {
                break;
            }
            std::thread::park_timeout(Duration::from_nanos(away_nap(now, deadline)));
            // The clients' rounds move the counters: readers see them at
            // least every nap, not only when the period ends.
            if let Some(st) = self.arbiter.try_with(|a| a.stats()) {
                self.publish(st);
            }
        }
        self.arbiter.set_away(false);
        let end = self.clock.now();
        let away_ns = end.0.saturating_sub(t0);
        self.slept_ns += away_ns;
        self.counts.away_ns += away_ns;
        self.counts.away_periods += 1;
        let (after, busy_ns) = self
            .arbiter
            .with(|a| {
                let stats = a.stats();
                (stats.decisions, stats.busy_loop_ns)
            })
            .unwrap_or((decisions, self.mark.busy_ns));
        let w = Window {
            wall_ns: away_ns,
            decisions: after.saturating_sub(decisions),
            ..Window::default()
        };
        if let Some(s) = self.step.as_mut() {
            s.after_away(end.0, &w);
            self.counts.away_kept = s.kept();
        }
        self.counts.cpu_ns = cpu::thread_ns();
        self.mark = self.mark_at(end, after, busy_ns);
    }

    /// Waits while a client runs a round: on the CPU for a round's time
    /// ([`HOLDER_SPIN`]), then, if the client still holds the lock, it has
    /// likely lost its core, maybe to this thread: yield, so that spinning
    /// at the arbiter's priority does not keep it (and every round) from
    /// running.
    ///
    /// It stamps the lock as a round would: the arbiter thread is on its
    /// core, so clients need not run the rounds after this one.
    fn wait_for_client_round(&mut self) {
        self.counts.held_waits += 1;
        let t0 = self.clock.now().0;
        self.arbiter.stamp_alive(t0);
        while self.arbiter.is_held() {
            if self.clock.now().0.saturating_sub(t0) > HOLDER_SPIN {
                std::thread::yield_now();
                return;
            }
            std::hint::spin_loop();
        }
    }

    /// Sleeps until a client rings (or `timeout`), unless something arrived
    /// since the last round, a client is running a round, or one ran a
    /// round since this thread's (`rounds` is the count after it): that
    /// round took the doorbell's bits and may have left packets queued for
    /// a busy link, so the thread runs a round of its own and decides again
    /// (see `handoff`, "Sleeping while clients run rounds").
    /// Returns whether it slept.
    fn sleep(&mut self, timeout: Option<Duration>, rounds: u64) -> bool {
        let bell = &self.shared.doorbell;
        let quiet = self.arbiter.announce_sleep_if_quiet(bell, rounds, |a| {
            a.record_sleep();
            a.stats()
        });
        let Some(stats) = quiet else {
            return false;
        };
        self.publish_now(stats);
        let bell = &self.shared.doorbell;
        let t0 = self.clock.now().0;
        match timeout {
            Some(t) => bell.sleep_timeout(t),
            None => bell.sleep(),
        }
        self.slept_ns += self.clock.now().0.saturating_sub(t0);
        true
    }

    /// Publishes the counters (with the thread's own) if no reader holds
    /// them right now (the hot loop must never wait).
    fn publish(&mut self, mut stats: ArbiterStats) {
        self.counts.cpu_ns = cpu::thread_ns();
        self.counts.fill(&mut stats);
        if let Ok(mut p) = self.published.try_lock() {
            *p = stats;
        }
    }

    /// Publishes the counters, waiting for a reader if need be: before a
    /// sleep, so what readers see is never older than the last activity.
    fn publish_now(&mut self, mut stats: ArbiterStats) {
        self.counts.cpu_ns = cpu::thread_ns();
        self.counts.fill(&mut stats);
        *self
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = stats;
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

#[cfg(test)]
mod tests {
    use pktsched_core::{Algorithm, Rate};

    use super::Pspat;
    use crate::arbiter::Arbiter;
    use crate::config::{Clock, Config, RuntimeError};
    use crate::output::NullOutput;

    #[test]
    fn idle_policy_waits_on_the_cpu_then_sleeps() {
        use super::{IdlePolicy, Next, RoundEnd};
        let p = IdlePolicy {
            spin: 100,
            busy_poll: false,
            yield_when_idle: true,
            nap_cover: None,
        };
        let end = |did_work, waiting, link_wait, idle_for| RoundEnd {
            did_work,
            waiting,
            link_wait,
            idle_for,
            idle_ahead: 0,
        };
        assert_eq!(p.after(end(true, true, 1000, 0)), Next::Round);
        // Waiting for the link: yield while it is near, sleep until it is
        // free when it is far.
        assert_eq!(p.after(end(false, true, 50, 0)), Next::Yield);
        assert_eq!(p.after(end(false, true, 100, 0)), Next::Yield);
        assert_eq!(p.after(end(false, true, 101, 0)), Next::Sleep(Some(101)));
        // Nothing to do: yield for T_w, then sleep until a ring.
        assert_eq!(p.after(end(false, false, 0, 99)), Next::Yield);
        assert_eq!(p.after(end(false, false, 0, 100)), Next::Sleep(None));
        let spin = IdlePolicy {
            yield_when_idle: false,
            ..p
        };
        assert_eq!(spin.after(end(false, true, 50, 0)), Next::Spin);
        assert_eq!(spin.after(end(false, false, 0, 5)), Next::Spin);
        assert_eq!(spin.after(end(false, false, 0, 500)), Next::Sleep(None));
        let poll = IdlePolicy {
            busy_poll: true,
            ..p
        };
        assert_eq!(poll.after(end(false, true, 10_000, 0)), Next::Spin);
        assert_eq!(poll.after(end(false, false, 0, 10_000)), Next::Spin);
    }

    #[test]
    fn idle_policy_naps_only_with_empty_mailboxes_and_a_long_backlog() {
        use super::{IdlePolicy, Next, RoundEnd};
        let p = IdlePolicy {
            spin: 100,
            busy_poll: false,
            yield_when_idle: true,
            nap_cover: Some(1_000),
        };
        let end = |did_work, link_wait, idle_ahead| RoundEnd {
            did_work,
            waiting: true,
            link_wait,
            idle_for: 0,
            idle_ahead,
        };
        // The link is busy for at least the cover: nap for half of it.
        assert_eq!(p.after(end(false, 50, 1_000)), Next::Nap(500));
        // At most the cover itself, so a nap never outlasts it.
        assert_eq!(p.after(end(false, 50, 8_000)), Next::Nap(1_000));
        // Below the cover (or mail waiting: `idle_ahead` 0): on the CPU.
        assert_eq!(p.after(end(false, 50, 999)), Next::Yield);
        assert_eq!(p.after(end(false, 50, 0)), Next::Yield);
        // Work done: the next round; a far link: sleep until it is free.
        assert_eq!(p.after(end(true, 50, 8_000)), Next::Round);
        assert_eq!(p.after(end(false, 200, 8_000)), Next::Sleep(Some(200)));
        // Napping off, or busy polling: never.
        let off = IdlePolicy {
            nap_cover: None,
            ..p
        };
        assert_eq!(off.after(end(false, 50, 8_000)), Next::Yield);
        let poll = IdlePolicy {
            busy_poll: true,
            ..p
        };
        assert_eq!(poll.after(end(false, 50, 8_000)), Next::Spin);
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
            nap_cover: Some(std::time::Duration::ZERO),
            ..Config::new(Rate::gbit(1))
        };
        let e = cfg.validate().err().map(|e| e.to_string());
        assert!(
            e.as_deref().is_some_and(|e| e.contains("nap_cover")),
            "{e:?}"
        );
        // The nap gate without a nap to gate.
        let cfg = Config {
            nap_when_waiting: true,
            ..Config::new(Rate::gbit(1))
        };
        let e = cfg.validate().err().map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("nap_when_waiting") && e.contains("nap_cover")),
            "{e:?}"
        );
        let cfg = Config {
            nap_when_waiting: true,
            nap_cover: Some(std::time::Duration::from_micros(200)),
            ..Config::new(Rate::gbit(1))
        };
        assert!(cfg.validate().is_ok());
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
}
