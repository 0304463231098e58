//! The pipeline between two devices, on the runtime's sans-I/O arbiter
//! (scheduler + emulated link), in one of two engines (`link.engine`):
//!
//! ```text
//!  run-to-completion (default):
//!  ingress ──rtc thread (receive, classify, stamp, enqueue, release)──► egress
//!
//!  pspat:
//!  ingress ──rx thread (client: classify, stamp)──► mailbox ──► arbiter thread
//!                                                     scheduler + emulated link
//!                                                     ──► egress (TxOutput)
//!
//!  both:
//!  ingress ◄──────────── reverse thread (untouched) ◄──── egress
//! ```
//!
//! [`Pipeline::start`] opens nothing itself: it takes the four sockets
//! ([`Devices`]), so tests drive it with in-memory devices and `pktsched
//! run` with AF_PACKET ones. [`Pipeline::stop`] stops the receive side,
//! drains every mailbox, sends what is queued and returns the final
//! counters with the accounting per class.

mod arbiter_loop;
mod class_rings;
mod ports;
mod reverse;
mod rtc;
mod rx;
mod shared;
mod trace;
mod tx;
#[allow(unsafe_code)]
mod wait;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use pktsched_io::classify::Anomaly;
use pktsched_io::{BufPool, PacketIo};
use pktsched_runtime::{Arbiter, Clock, Config};

pub use self::class_rings::{
    BULK_BUDGET, BULK_RING_FRAMES, CLASS_GROUP_RX_FRAMES, ClassRingPlan, ClassRings, DEVICE_BUDGET,
    MAX_CLASS_RINGS, RingBoard, SingleRing, URGENT_RING_FRAMES, class_ring_plan,
};

use self::arbiter_loop::{ArbiterLoop, Command, Stopped, Ticket};
use self::ports::Port;
use self::shared::{ClassMap, Shared};
pub use self::trace::{ForwarderStats, TailSplit};
use self::tx::TxOutput;
use crate::config::{Engine, RunConfig};
use crate::plan;
use crate::reload::Change;
use crate::stats::{DeviceStats, Snapshot};

/// The four sockets of a pipeline.
#[derive(Debug)]
pub struct Devices<P> {
    /// Receives the frames to schedule (on `link.ingress`).
    pub ingress_rx: P,
    /// Sends them (on `link.egress`).
    pub egress_tx: P,
    /// Receives the reverse direction (on `link.egress`).
    pub egress_rx: P,
    /// Sends the reverse direction (on `link.ingress`).
    pub ingress_tx: P,
}

/// How long [`Pipeline::reload`] waits for the arbiter to take a reload
/// (and again for its answer once taken).
pub const RELOAD_WAIT: Duration = Duration::from_secs(5);

/// Why the pipeline could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The config could not become a scheduler.
    #[error(transparent)]
    Plan(#[from] plan::PlanError),
    /// The runtime refused its parameters.
    #[error("runtime: {0}")]
    Runtime(#[from] pktsched_runtime::RuntimeError),
    /// A thread could not be started.
    #[error("cannot start thread: {0}")]
    Thread(#[from] std::io::Error),
    /// The arbiter thread is gone (it panicked).
    #[error("the arbiter thread is gone")]
    ArbiterGone,
    /// A receive or reverse thread panicked before the stop: the frames
    /// it had received and not yet handed on are in no counter.
    #[error(
        "thread {thread} panicked ({message}): frames it had received and not handed on are \
         not accounted for"
    )]
    ThreadPanicked {
        /// The thread's name (`pktsched-rx`, `pktsched-reverse`).
        thread: String,
        /// Its panic message.
        message: String,
    },
    /// The arbiter thread is there but did not answer in time.
    #[error(
        "the arbiter did not answer within {} ms (busy or stalled; the counters were not read, \
         try again)",
        .0.as_millis()
    )]
    NoAnswer(Duration),
}

/// How long a counters request waits for the arbiter's answer.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(5);
/// Frames each receive thread's mailbox to the arbiter holds (pspat).
pub(crate) const MAILBOX_CAPACITY: usize = 1024;

/// The arbiter's answer on `rx` within `wait`: a thread that dropped its
/// end is gone, one that kept it and did not answer is only late (said
/// apart, so a slow arbiter is not reported as a dead one).
fn await_answer<A>(rx: &mpsc::Receiver<A>, wait: Duration) -> Result<A, EngineError> {
    rx.recv_timeout(wait).map_err(|e| match e {
        RecvTimeoutError::Timeout => EngineError::NoAnswer(wait),
        RecvTimeoutError::Disconnected => EngineError::ArbiterGone,
    })
}

/// Where every frame went, per class, when the pipeline stopped.
#[derive(Debug, Clone)]
pub struct Final {
    /// The counters just before the stop sequence.
    pub before_stop: Snapshot,
    /// The counters after it (queues sent).
    pub after_stop: Snapshot,
    /// Frames queued in the scheduler at stop and sent then, ignoring the
    /// rate.
    pub flushed_at_stop: u64,
    /// Frames a receive thread held at stop, never scheduled (dropped).
    pub rx_dropped_at_stop: u64,
}

/// A running pipeline.
#[derive(Debug)]
pub struct Pipeline {
    shared: Arc<Shared>,
    commands: Sender<Command>,
    rx: Vec<JoinHandle<()>>,
    reverse: Option<JoinHandle<()>>,
    arbiter: Option<JoinHandle<Final>>,
    /// The ingress's per-class ring counters, when it has class rings.
    ring_board: Option<RingBoard>,
    /// The ingress receives through AF_XDP (`with_backend`): a reload to a
    /// config with a `vlan` rule is refused, as at start.
    xdp_ingress: bool,
}

fn spawn<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<JoinHandle<T>> {
    std::thread::Builder::new().name(name.into()).spawn(f)
}

impl Pipeline {
    /// Starts the threads of `cfg.link.engine` and the reverse thread.
    pub fn start<P: PacketIo + Send + 'static>(
        cfg: RunConfig,
        devices: Devices<P>,
        pool: &'static BufPool,
    ) -> Result<Pipeline, EngineError> {
        let plan = plan::build::<crate::frame::Frame>(&cfg)?;
        let clock = Clock::new();
        let link = &cfg.link;
        let map = ClassMap::new(plan.classifier, plan.flows.clone(), link);
        let shared = Shared::new(map, Anomaly::ALL.len());
        let mut rt = Config::new(link.rate);
        rt.mailbox_capacity = MAILBOX_CAPACITY;
        rt.burst = link.burst;
        let out = TxOutput::new(
            Port::new(devices.egress_tx, &link.egress, "tx"),
            pool,
            clock,
        );
        let arbiter = Arbiter::new(&rt, plan.sched, out)?;
        let (commands, receiver) = mpsc::channel();
        let port = Port::new(devices.ingress_rx, &link.ingress, "rx");
        let mut rx = Vec::new();
        let arbiter = match link.engine {
            Engine::RunToCompletion => {
                let looper = ArbiterLoop::new(
                    arbiter,
                    cfg.clone(),
                    &plan.flows,
                    shared.clone(),
                    clock,
                    receiver,
                );
                let sh = shared.clone();
                let busy = link.busy_poll.is_some();
                spawn("pktsched-rtc", move || {
                    finish(
                        rtc::rtc_loop(looper, port, sh.clone(), pool, clock, busy),
                        &sh,
                    )
                })?
            }
            Engine::Pspat => {
                let client = arbiter.client()?;
                let looper = ArbiterLoop::new(
                    arbiter,
                    cfg.clone(),
                    &plan.flows,
                    shared.clone(),
                    clock,
                    receiver,
                );
                let sh = shared.clone();
                let handle = spawn("pktsched-arbiter", move || finish(looper.run(), &sh))?;
                let sh = shared.clone();
                rx.push(spawn("pktsched-rx", move || {
                    rx::rx_loop(port, client, sh, pool, clock);
                })?);
                handle
            }
        };
        let from = Port::new(devices.egress_rx, &link.egress, "reverse rx");
        let to = Port::new(devices.ingress_tx, &link.ingress, "reverse tx");
        let sh = shared.clone();
        let reverse = spawn("pktsched-reverse", move || {
            reverse::reverse_loop(from, to, sh, pool)
        })?;
        Ok(Pipeline {
            shared,
            commands,
            rx,
            reverse: Some(reverse),
            arbiter: Some(arbiter),
            ring_board: None,
            xdp_ingress: false,
        })
    }

    /// Says which backend the ingress runs on (`"xdp"` or `"packet"`,
    /// [`crate::devices::BackendChoice::backend`]), for the reloads' checks.
    pub fn with_backend(mut self, backend: &str) -> Pipeline {
        self.xdp_ingress = backend == "xdp";
        self
    }

    /// Shows `board`'s per-class receive ring counters among the
    /// devices of every snapshot (see [`ClassRings::board`]).
    pub fn with_ring_board(mut self, board: Option<RingBoard>) -> Pipeline {
        // Reloads that would need another kernel split are refused then.
        self.shared.set_class_rings(board.is_some());
        self.ring_board = board;
        self
    }

    fn add_rings(&self, s: &mut Snapshot) {
        if let Some(b) = &self.ring_board {
            s.devices.extend(b.read());
        }
    }

    /// The counters now.
    pub fn snapshot(&self) -> Result<Snapshot, EngineError> {
        let (tx, rx) = mpsc::channel();
        self.commands
            .send(Command::Snapshot(tx))
            .map_err(|_| EngineError::ArbiterGone)?;
        let mut s = await_answer(&rx, SNAPSHOT_WAIT)?;
        self.add_rings(&mut s);
        Ok(s)
    }

    /// Applies a new config live (see [`crate::reload`]); on error the
    /// running config is kept. The arbiter takes the reload between two
    /// rounds; if it has not within [`RELOAD_WAIT`] the reload is
    /// cancelled (never applied later) and the error says so; once taken,
    /// its answer is awaited for as long again.
    pub fn reload(&self, new: RunConfig) -> Result<Vec<Change>, String> {
        if self.xdp_ingress
            && let Some(class) = new.vlan_class()
        {
            return Err(format!(
                "{}: class {class:?} matches on vlan and the ingress runs on AF_XDP: {}; \
                 allowed with backend = \"packet\", which takes a restart (the running config \
                 is kept)",
                new.file,
                crate::config::XDP_NO_VLAN
            ));
        }
        let (tx, rx) = mpsc::channel();
        let ticket = Ticket::default();
        self.commands
            .send(Command::Reload(Box::new(new), tx, ticket.clone()))
            .map_err(|_| EngineError::ArbiterGone.to_string())?;
        let secs = RELOAD_WAIT.as_secs();
        match rx.recv_timeout(RELOAD_WAIT) {
            Ok(answer) => answer,
            Err(RecvTimeoutError::Disconnected) => Err(EngineError::ArbiterGone.to_string()),
            Err(RecvTimeoutError::Timeout) if ticket.cancel() => Err(format!(
                "the arbiter did not take the reload within {secs} s; it is cancelled \
                 (the running config is kept)"
            )),
            Err(RecvTimeoutError::Timeout) => match rx.recv_timeout(RELOAD_WAIT) {
                Ok(answer) => answer,
                Err(RecvTimeoutError::Disconnected) => Err(EngineError::ArbiterGone.to_string()),
                Err(RecvTimeoutError::Timeout) => Err(format!(
                    "the reload is being applied but was not confirmed within {} s; \
                     see `pktsched stats` for the running config",
                    2 * secs
                )),
            },
        }
    }

    /// Stops: receive threads first (what they hold is counted), then the
    /// arbiter drains every mailbox and sends what is queued (the
    /// run-to-completion thread stops receiving and sends what is queued).
    /// A receive or reverse thread that panicked is an error naming it
    /// (after the arbiter has stopped too): its frames are not all
    /// accounted for.
    pub fn stop(mut self) -> Result<Final, EngineError> {
        self.shared.stop.store(true, Ordering::Release);
        let mut panicked = None;
        let helpers = self.rx.drain(..).chain(self.reverse.take());
        for h in helpers {
            let thread = h.thread().name().unwrap_or("unnamed").to_string();
            if let Err(payload) = h.join() {
                panicked.get_or_insert(EngineError::ThreadPanicked {
                    thread,
                    message: panic_message(payload.as_ref()),
                });
            }
        }
        self.shared.arbiter_stop.store(true, Ordering::Release);
        let arbiter = self.arbiter.take().ok_or(EngineError::ArbiterGone)?;
        let mut last = arbiter.join().map_err(|_| EngineError::ArbiterGone)?;
        if let Some(e) = panicked {
            return Err(e);
        }
        self.add_rings(&mut last.after_stop);
        Ok(last)
    }
}

/// A panic's message, when it is text.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|m| (*m).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.arbiter_stop.store(true, Ordering::Release);
    }
}

/// The final counters of a stopped arbiter (either engine).
fn finish<P: PacketIo + Send + 'static>(stopped: Stopped<P>, shared: &Shared) -> Final {
    // What the runtime's own stop released is still waiting in the
    // output: send it before the device goes.
    for out in &stopped.report.outputs {
        let _ = out.flush();
    }
    drop(stopped.report);
    Final {
        flushed_at_stop: stopped.flushed,
        rx_dropped_at_stop: shared.rx_dropped_at_stop.load(Ordering::Relaxed),
        before_stop: stopped.before,
        after_stop: stopped.after,
    }
}

/// A port's counters as the stats show them.
pub(crate) fn device_stats<P: PacketIo>(port: &Port<P>) -> DeviceStats {
    DeviceStats::from_io(&port.device, port.role, &port.io.stats())
}

/// The egress's counters.
pub(crate) fn tx_device_stats<P: PacketIo>(out: &TxOutput<P>) -> DeviceStats {
    device_stats(&out.tx.borrow().port)
}

#[cfg(test)]
mod answer_tests {
    use super::*;

    #[test]
    fn a_late_arbiter_is_told_apart_from_a_gone_one() {
        let wait = Duration::from_millis(20);
        let (tx, rx) = mpsc::channel::<u32>();
        assert!(matches!(await_answer(&rx, wait), Err(EngineError::NoAnswer(w)) if w == wait));
        let late = await_answer(&rx, wait).expect_err("late").to_string();
        assert!(late.contains("did not answer within 20 ms"), "{late}");
        tx.send(7).expect("send");
        assert_eq!(await_answer(&rx, wait).expect("answered"), 7);
        drop(tx);
        assert!(matches!(
            await_answer(&rx, wait),
            Err(EngineError::ArbiterGone)
        ));
    }
}
