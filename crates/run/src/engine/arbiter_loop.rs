//! The arbiter thread: runs the runtime's sans-I/O [`Arbiter`] round after
//! round on the real clock, transmits through the egress, and between
//! rounds answers the control commands (stats, reload). Reconfiguration
//! happens here, on the thread that owns the scheduler, so it needs no
//! lock and loses no queued frame.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::time::Duration;

use pktsched_core::policy::FlowParams;
use pktsched_core::{DropReason, FlowConfig, FlowId, Nanos, Pkt};
use pktsched_io::PacketIo;
use pktsched_io::classify::Anomaly;
use pktsched_runtime::{Arbiter, Clock, Report, Round, StopMode};

use super::shared::{ClassMap, FLOW_SLOTS, Shared, TxBase};
use super::trace::{PassTrace, Phase};
use super::tx::{RxSplit, TxOutput};
use crate::config::{ClassConfig, RunConfig};
use crate::frame::Frame;
use crate::plan::{self, flow_config};
use crate::reload::{Change, by_name, diff};
use crate::stats::{ClassStats, SOJOURN_BUCKETS_S, Snapshot};

#[cfg(test)]
mod catch_up_tests;
#[cfg(test)]
mod prio_credit_tests;
#[cfg(test)]
mod reload_tests;

/// What the arbiter thread ends with.
pub(crate) struct Stopped<P: PacketIo + Send + 'static> {
    /// Counters when the stop began.
    pub(crate) before: Snapshot,
    /// Counters after everything queued was sent.
    pub(crate) after: Snapshot,
    /// Frames sent during the stop sequence.
    pub(crate) flushed: u64,
    /// The runtime's final report.
    pub(crate) report: Report<Frame, TxOutput<P>>,
}

/// A request to the arbiter thread.
#[derive(Debug)]
pub(crate) enum Command {
    /// Reply with a snapshot of the counters.
    Snapshot(Sender<Snapshot>),
    /// Apply a new config, unless its ticket was cancelled first; reply
    /// with the changes or why not.
    Reload(Box<RunConfig>, Sender<Result<Vec<Change>, String>>, Ticket),
}

/// Decides, once, between the arbiter applying a queued reload and its
/// caller giving up on it: whichever comes first wins, so a caller that
/// stopped waiting either knows the reload will never be applied or knows
/// it is being applied.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ticket(Arc<AtomicU8>);

const PENDING: u8 = 0;
const TAKEN: u8 = 1;
const CANCELLED: u8 = 2;

impl Ticket {
    /// The arbiter: `true` if it may apply the reload (not cancelled);
    /// from then on it can no longer be cancelled.
    pub(crate) fn take(&self) -> bool {
        self.0
            .compare_exchange(PENDING, TAKEN, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The caller: `true` if the reload is cancelled (the arbiter had not
    /// taken it, and never will); `false` if it is being applied.
    pub(crate) fn cancel(&self) -> bool {
        self.0
            .compare_exchange(PENDING, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// How long a flow removed by a reload lives on (so frames classified just
/// before the switch still find it), before its queue moves to the default
/// class.
const RETIRE_AFTER: Nanos = Nanos(200_000_000);
/// Longest sleep of an idle arbiter.
const IDLE_SLEEP: Duration = Duration::from_micros(50);
/// Waits for the link shorter than this yield the core instead of
/// sleeping: a sleep's wake-up on a shared VM can overshoot by more than
/// the `burst` lead (one frame: 12 µs at 1 Gbit/s), and the time the
/// emulated link loses that way is capacity lost for good.
const YIELD_BELOW: Duration = Duration::from_micros(20);
/// Removed classes whose final counters are kept in the stats.
const MAX_REMOVED: usize = 256;
/// Most rounds one [`ArbiterLoop::catch_up`] runs: each reads every
/// mailbox once more (at most the runtime's `read_batch`, 64 frames), so
/// 256 rounds read far more than a full mailbox (1024 frames) and the
/// pass still ends soon enough to answer commands.
const MAX_CATCH_UP: usize = 256;

/// A class as the arbiter tracks it.
#[derive(Debug, Clone)]
struct ClassSlot {
    name: String,
    flow: FlowId,
    /// Sent bytes and frames at the last rate sample.
    last: (u64, u64),
    /// Rate over the last sample period (bits/s, frames/s).
    rate: (u64, u64),
    /// The flow slot's transmit counters when the class got it, if a
    /// removed class had it before.
    tx_base: Option<Arc<TxBase>>,
}

/// A step of a reload to undo if a later one is refused.
enum Undo {
    /// A kept class's flow had `config` (and, with class rates, `params`).
    Changed {
        flow: FlowId,
        config: Option<FlowConfig>,
        params: Option<FlowParams>,
    },
    /// A new class's flow was added.
    Added(FlowId),
}

/// When the next queued frame may leave ([`ArbiterLoop::next_due`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Due {
    /// The engine-clock time.
    pub(crate) at: Nanos,
    /// The emulated link is busy until then (false: a shaper set it and
    /// the link is free, so a frame of another class could leave now).
    pub(crate) link_busy: bool,
}

/// The arbiter thread's state.
pub(crate) struct ArbiterLoop<P: PacketIo + Send + 'static> {
    pub(crate) arbiter: Arbiter<Frame, TxOutput<P>>,
    pub(crate) cfg: RunConfig,
    classes: Vec<ClassSlot>,
    /// Classes removed by a reload, still served until their time is up.
    retiring: Vec<(ClassSlot, Nanos)>,
    /// Final counters of removed classes (the last [`MAX_REMOVED`]).
    removed: Vec<ClassStats>,
    shared: Arc<Shared>,
    clock: Clock,
    commands: Receiver<Command>,
    last_sample: Nanos,
    reloads: u64,
    /// The run-to-completion thread's pass log and counters.
    pub(crate) trace: Option<PassTrace>,
    /// The time and outcome of the last round [`ArbiterLoop::step`] ran.
    last_round: (Nanos, Round),
    /// [`ArbiterLoop::upstream_frames`] at the last round at the clock's
    /// time, less what catch-up rounds have read since.
    upstream: u64,
    /// Rounds run by [`ArbiterLoop::catch_up`] in all.
    pub(crate) catch_up_rounds: u64,
    /// The runtime's `read_interval`: a mailbox is read again only in a
    /// round at least this much later.
    read_interval: Nanos,
}

impl<P: PacketIo + Send + 'static> ArbiterLoop<P> {
    /// The loop over `arbiter`, whose idle link restarts at the first
    /// arrival it drains ([`Arbiter::set_restart_at_arrival`]): the
    /// receive threads stamp every frame when they classify it, on
    /// `clock`, so frames that arrived while this thread was away take
    /// the link time they would have had.
    pub(crate) fn new(
        mut arbiter: Arbiter<Frame, TxOutput<P>>,
        cfg: RunConfig,
        flows: &[FlowId],
        shared: Arc<Shared>,
        clock: Clock,
        commands: Receiver<Command>,
    ) -> Self {
        let classes = cfg
            .classes
            .iter()
            .zip(flows)
            .map(|(c, &flow)| ClassSlot {
                name: c.name.clone(),
                flow,
                last: (0, 0),
                rate: (0, 0),
                tx_base: None,
            })
            .collect();
        let read_interval = arbiter.read_interval();
        arbiter.set_restart_at_arrival(true);
        // The run-to-completion engine puts frames in past the mailboxes:
        // the release plans with the wire's largest frame from the start,
        // not only after a run has shown one.
        arbiter.raise_len_bound(cfg.link.wire_len(cfg.link.max_frame));
        let mut looper = ArbiterLoop {
            arbiter,
            cfg,
            classes,
            retiring: Vec::new(),
            removed: Vec::new(),
            shared,
            clock,
            commands,
            last_sample: Nanos(0),
            reloads: 0,
            trace: None,
            last_round: (Nanos(0), Round::default()),
            upstream: 0,
            catch_up_rounds: 0,
            read_interval,
        };
        looper.apply_priority_credit();
        looper
    }

    /// Gives `link.prio_burst` to the flows on the scheduler's most urgent
    /// level among the classes (retiring ones included: a strict-priority
    /// scheduler serves that level first whichever class it belongs to).
    /// The config allows a credit only with strict priority and no class
    /// rates ([`RunConfig::urgent_level`]), the arbiter's promise.
    fn apply_priority_credit(&mut self) {
        let bytes = self.cfg.link.prio_burst;
        let flows: Vec<FlowId> = self
            .classes
            .iter()
            .chain(self.retiring.iter().map(|(s, _)| s))
            .map(|s| s.flow)
            .collect();
        let sched = self.arbiter.scheduler_view();
        let levels: Vec<Option<u32>> = flows
            .iter()
            .map(|&f| sched.flow_config(f).map(|c| c.prio))
            .collect();
        let top = levels.iter().flatten().min().copied();
        let urgent = if bytes == 0 || top.is_none() {
            Vec::new()
        } else {
            flows
                .into_iter()
                .zip(levels)
                .filter(|&(_, l)| l == top)
                .map(|(f, _)| f)
                .collect()
        };
        self.arbiter.set_priority_credit(bytes, urgent);
    }

    /// Rounds until the pipeline stops, then the stop sequence: with the
    /// receive threads ended, every mailbox is drained and what is queued
    /// is sent at once (ignoring the rate), through the same rounds so the
    /// per-class counters include it. Returns the counters before and
    /// after, the frames sent at stop, and the runtime's report.
    pub(crate) fn run(mut self) -> Stopped<P> {
        crate::sys::set_timer_slack(1000);
        loop {
            let now = self.clock.now();
            let round = self.step(now);
            if self.shared.arbiter_stop.load(Ordering::Acquire) {
                break;
            }
            if round.released == 0 {
                // Nothing more is due now: what earlier rounds released
                // goes out, also while the mailboxes keep the arbiter busy.
                self.flush_tx();
            }
            if round.drained == 0 && round.released == 0 {
                match self.next_due(&round, now).map(|d| d.at) {
                    Some(due)
                        if Duration::from_nanos(due.0.saturating_sub(now.0)) < YIELD_BELOW =>
                    {
                        std::thread::yield_now();
                    }
                    Some(due) => {
                        let wait = Duration::from_nanos(due.0.saturating_sub(now.0));
                        std::thread::sleep(wait.min(IDLE_SLEEP));
                    }
                    None => std::thread::sleep(IDLE_SLEEP),
                }
            }
        }
        self.stop_sequence()
    }

    /// One pass of the PSPAT engine's loop at `now`: the rounds a late
    /// arbiter missed ([`ArbiterLoop::catch_up`], all before `now`), the
    /// round at `now`, then the control commands and rate samples. So a
    /// reload's new rate and weights apply from `now` on (within the
    /// release lead): never to link time before it, which the rounds up to
    /// `now` have released at the rates of then, and the scheduler's time
    /// never goes back.
    pub(crate) fn step(&mut self, now: Nanos) -> Round {
        self.catch_up(now);
        let round = self.arbiter.do_scan(now);
        self.last_round = (now, round);
        self.housekeeping(now);
        self.upstream = self.upstream_frames();
        round
    }

    /// Frames the receive threads have classified that the scheduler has
    /// not been offered yet (in their hands or in the mailboxes): all of
    /// them arrived before now. Both totals only grow (a reload restarts a
    /// reused flow id's `received`, not [`Shared::classified`]), and the
    /// total is one load however many flow slots there are.
    fn upstream_frames(&self) -> u64 {
        let classified = self.shared.classified();
        let c = self.arbiter.scheduler_view().stats();
        let offered = c.enqueued.pkts + c.dropped_total().pkts - c.dropped_after_enqueue().pkts;
        classified.saturating_sub(offered)
    }

    /// The rounds a late arbiter missed (it waited for a core, or slept
    /// past its deadline). With the emulated link behind the clock a round
    /// releases up to `round_cap` (512) frames but reads at most
    /// `read_batch` (64) from a mailbox, so the round at `now` alone would
    /// release all the scheduler holds, find it empty and restart the link
    /// at `now` (the runtime's rule: idle time is no credit), although
    /// frames that arrived before then were waiting in the mailbox: that
    /// link time would be lost for good. Instead, while the frames
    /// queued keep the link busy only until before `now`, a round runs at
    /// the time they run out (less the release lead; at least the
    /// runtime's `read_interval` after the last round, so it reads again):
    /// it reads the mailboxes and releases only what was due by then, so
    /// the link stays busy from frame to frame as if the arbiter had been
    /// on time. Only frames that were already upstream at the last round
    /// ([`ArbiterLoop::upstream_frames`], read then) are caught up: the
    /// rounds stop once that many were read (the last read may take up to
    /// a read batch of later frames with them), when a round reads
    /// nothing, when the queue covers `now` or after [`MAX_CATCH_UP`]
    /// rounds. The same frames leave in the same order; the link keeps
    /// its time (a catch-up of at most the time the arbiter was away, as
    /// with a deep queue), and never runs ahead of the clock by more than
    /// the release lead. Returns the rounds run.
    pub(crate) fn catch_up(&mut self, now: Nanos) -> usize {
        let rate = self.arbiter.link_rate();
        let mut rounds = 0;
        while rounds < MAX_CATCH_UP && self.upstream > 0 {
            let (at, last) = self.last_round;
            let queued = self.arbiter.scheduler_view().backlog().bytes;
            let runs_out = last.link_free.0.saturating_add(rate.tx_time(queued).0);
            let t = runs_out
                .saturating_sub(self.arbiter.release_lead().0)
                .max(at.0.saturating_add(self.read_interval.0));
            if t >= now.0 {
                break;
            }
            let round = self.arbiter.do_scan(Nanos(t));
            self.last_round = (Nanos(t), round);
            self.upstream = self.upstream.saturating_sub(round.drained as u64);
            rounds += 1;
            if round.drained == 0 {
                break;
            }
        }
        self.catch_up_rounds += rounds as u64;
        rounds
    }

    /// Sends the frames released and waiting in the output (one kick):
    /// before any sleep or yield. Returns the frames handed to the device.
    pub(crate) fn flush_tx(&self) -> usize {
        self.arbiter.output().map_or(0, |o| o.flush())
    }

    /// Ends the trace's current segment (see [`PassTrace::segment`]).
    pub(crate) fn trace_segment(&mut self, phase: Phase, end: u64) {
        if let Some(t) = &mut self.trace {
            t.segment(phase, end);
        }
    }

    /// A TX kick of `frames` ended (see [`PassTrace::kicked`]).
    pub(crate) fn trace_kicked(&mut self, end: u64, frames: usize) {
        if let Some(t) = &mut self.trace {
            t.kicked(end, frames);
        }
    }

    /// A sleep ended (see [`PassTrace::slept`]).
    pub(crate) fn trace_slept(&mut self, asked: u64, end: u64) {
        if let Some(t) = &mut self.trace {
            t.slept(asked, end);
        }
    }

    /// Between rounds: a control command (one per round, so a reply
    /// always describes the state after the previous round, also when
    /// the next command arrives at once), retired classes whose time is
    /// up, the per-class rate samples.
    pub(crate) fn housekeeping(&mut self, now: Nanos) {
        if let Ok(cmd) = self.commands.try_recv() {
            self.command(cmd, now);
        }
        self.retire_due(now);
        self.sample_rates(now);
    }

    /// When the next queued frame may leave after `round` (at `now`): the
    /// later of the emulated link's free time (less the `burst` lead, and
    /// the priority credit's while an urgent frame is queued) and
    /// the scheduler's own next eligible time (shapers), and whether the
    /// link is busy until then (false: only a shaper holds the frames);
    /// `None` when nothing is queued.
    pub(crate) fn next_due(&mut self, round: &Round, now: Nanos) -> Option<Due> {
        if round.backlog == 0 {
            return None;
        }
        let link = round
            .link_free
            .0
            .saturating_sub(self.arbiter.release_lead().0);
        let sched = self
            .arbiter
            .scheduler_view()
            .next_ready(now)
            .map_or(now.0, |t| t.0);
        Some(Due {
            at: Nanos(link.max(sched)),
            link_busy: link >= sched,
        })
    }

    /// The stop sequence (the frames' sources have ended): the counters
    /// before, everything queued sent at once, the counters after, and the
    /// runtime's report.
    pub(crate) fn stop_sequence(mut self) -> Stopped<P> {
        self.flush_tx();
        let before = self.snapshot(self.clock.now());
        let flushed = self.flush();
        self.flush_tx();
        let after = self.snapshot(self.clock.now());
        let report = self.arbiter.stop(StopMode::Drain, self.clock.now());
        Stopped {
            before,
            after,
            flushed: flushed + report.flushed,
            report,
        }
    }

    /// Rounds on a clock that jumps to whenever the emulated link is free,
    /// until mailboxes and scheduler are empty: everything queued is sent
    /// now. Returns the frames sent.
    fn flush(&mut self) -> u64 {
        let mut virtual_now = self.clock.now();
        let mut sent = 0u64;
        loop {
            let round = self.arbiter.do_scan(virtual_now);
            sent += round.released as u64;
            if round.drained == 0 && round.released == 0 && round.backlog == 0 {
                return sent;
            }
            // Past the read interval and the link's next free time.
            virtual_now = Nanos(virtual_now.0.max(round.link_free.0) + 1_000_000);
        }
    }

    fn command(&mut self, cmd: Command, now: Nanos) {
        match cmd {
            Command::Snapshot(reply) => {
                let _ = reply.send(self.snapshot(now));
            }
            Command::Reload(new, reply, ticket) => {
                // A reload its caller gave up on is not applied.
                if ticket.take() {
                    let _ = reply.send(self.reload(*new, now));
                }
            }
        }
    }

    /// Applies `new` in place: link rate and accounting, changed classes
    /// (`change_flow` and, with class rates, `set_flow_params` keep their
    /// queues), new classes, removed classes retired; then the receive
    /// threads switch to the new class map. Every check runs first
    /// ([`Self::prepare_reload`]); should the scheduler still refuse a
    /// class change, the ones made are undone: a refused reload leaves the
    /// running config and scheduler as they were.
    fn reload(&mut self, new: RunConfig, now: Nanos) -> Result<Vec<Change>, String> {
        let (changes, classifier) = self.prepare_reload(&new)?;
        let mut undo = Vec::new();
        let slots = match self.apply_classes(&new, now, &mut undo) {
            Ok(slots) => slots,
            Err(e) => {
                self.undo_classes(undo, now);
                return Err(self.refusal_note(&new, e));
            }
        };
        let new_classes = by_name(&new);
        for old in &self.classes {
            if !new_classes.contains_key(old.name.as_str()) {
                self.retiring
                    .push((old.clone(), Nanos(now.0 + RETIRE_AFTER.0)));
            }
        }
        self.arbiter.set_link_rate(new.link.rate);
        self.arbiter.set_burst(new.link.burst);
        // The new rate never times link time before the reload, and a
        // larger wire frame (overhead, mpu) bounds the runs from now on.
        self.arbiter.link_settings_changed(now);
        self.arbiter
            .raise_len_bound(new.link.wire_len(new.link.max_frame));
        self.shared.set_map(ClassMap::new(
            classifier,
            slots.iter().map(|s| s.flow).collect(),
            &new.link,
        ));
        self.classes = slots;
        self.cfg = new;
        self.apply_priority_credit();
        self.reloads += 1;
        Ok(changes)
    }

    /// Every check of a reload to `new` that needs no change: what
    /// [`diff`] refuses, the kernel's receive split with class rings, the
    /// classifier, each class against the scheduler's limits, the new
    /// config's scheduler built aside (nodes, weight sum, shaping), and
    /// room for the flows of the new classes next to those still retiring.
    /// Returns the changes and the new classifier.
    fn prepare_reload(
        &self,
        new: &RunConfig,
    ) -> Result<(Vec<Change>, pktsched_io::classify::Classifier), String> {
        let changes = diff(&self.cfg, new).map_err(|e| e.to_string())?;
        if self.shared.class_rings() {
            super::class_rings::split_kept(&self.cfg, new).map_err(|e| e.to_string())?;
        }
        let classifier = plan::classifier(new).map_err(|e| e.to_string())?;
        let limits = self.arbiter.scheduler_view().limits();
        for c in &new.classes {
            limits
                .check(&flow_config(new, c))
                .map_err(|e| format!("class {:?}: {e}", c.name))?;
        }
        plan::build::<()>(new).map_err(|e| e.to_string())?;
        let running = by_name(&self.cfg);
        let added = new
            .classes
            .iter()
            .filter(|c| !running.contains_key(c.name.as_str()))
            .count();
        let held = self.classes.len() + self.retiring.len() + added;
        if held > FLOW_SLOTS {
            return Err(format!(
                "classes: {} kept or added and {} removed ones still retiring need {held} flows; \
                 at most {FLOW_SLOTS} are counted: try again in {} ms, once the removed \
                 classes have retired (the running config is kept)",
                new.classes.len(),
                held - new.classes.len(),
                RETIRE_AFTER.0 / 1_000_000
            ));
        }
        Ok((changes, classifier))
    }

    /// Changes the kept classes (the weights that drop first, so the
    /// scheduler's weight sum in between never exceeds the new one) and
    /// adds the new ones, each step noted in `undo`; a new class's flow
    /// slot starts its counters at zero. The classes' slots in `new`'s
    /// order, or the scheduler's refusal.
    fn apply_classes(
        &mut self,
        new: &RunConfig,
        now: Nanos,
        undo: &mut Vec<Undo>,
    ) -> Result<Vec<ClassSlot>, String> {
        let rated = new.has_class_rates();
        let running: HashMap<&str, &ClassSlot> =
            self.classes.iter().map(|s| (s.name.as_str(), s)).collect();
        let running_cfg = by_name(&self.cfg);
        let mut kept: Vec<(&ClassConfig, &ClassConfig, FlowId)> = new
            .classes
            .iter()
            .filter_map(|c| {
                let slot = running.get(c.name.as_str())?;
                Some((*running_cfg.get(c.name.as_str())?, c, slot.flow))
            })
            .collect();
        kept.sort_by_key(|&(old, c, _)| {
            i64::from(flow_config(new, c).weight) - i64::from(flow_config(&self.cfg, old).weight)
        });
        let sched = self.arbiter.scheduler();
        for (old, c, flow) in kept {
            undo.push(Undo::Changed {
                flow,
                config: sched.flow_config(flow).copied(),
                params: rated.then(|| plan::class_params(old)),
            });
            sched
                .change_flow(flow, flow_config(new, c), now)
                .map_err(|e| format!("class {:?}: {e}", c.name))?;
            if rated {
                sched
                    .set_flow_params(flow, plan::class_params(c), now)
                    .map_err(|e| format!("class {:?}: rate/ceil/burst: {e}", c.name))?;
            }
        }
        let mut slots = Vec::with_capacity(new.classes.len());
        for c in &new.classes {
            if let Some(s) = running.get(c.name.as_str()) {
                slots.push((*s).clone());
                continue;
            }
            let flow =
                plan::add_class(self.arbiter.scheduler(), new, c).map_err(|e| e.to_string())?;
            undo.push(Undo::Added(flow));
            slots.push(ClassSlot {
                name: c.name.clone(),
                flow,
                last: (0, 0),
                rate: (0, 0),
                tx_base: self
                    .arbiter
                    .output()
                    .and_then(|o| TxBase::of(o, flow.index()))
                    .map(Arc::new),
            });
        }
        for step in undo.iter() {
            if let Undo::Added(flow) = step {
                self.shared.reset_flow(*flow);
            }
        }
        Ok(slots)
    }

    /// Undoes a refused reload's class changes, last first: each flow gets
    /// back the settings it had (states the scheduler held a moment ago),
    /// and the flows added (empty) are removed.
    fn undo_classes(&mut self, undo: Vec<Undo>, now: Nanos) {
        let sched = self.arbiter.scheduler();
        for step in undo.into_iter().rev() {
            match step {
                Undo::Added(flow) => {
                    let _ = sched.remove_flow(flow);
                }
                Undo::Changed {
                    flow,
                    config,
                    params,
                } => {
                    if let Some(c) = config {
                        let _ = sched.change_flow(flow, c, now);
                    }
                    if let Some(p) = params {
                        let _ = sched.set_flow_params(flow, p, now);
                    }
                }
            }
        }
    }

    /// A refusal's answer: with classes retiring (removed ones keep their
    /// flow and weight for [`RETIRE_AFTER`]), says when to try again.
    fn refusal_note(&self, new: &RunConfig, why: String) -> String {
        let new_classes = by_name(new);
        let retiring = self.retiring.len()
            + self
                .classes
                .iter()
                .filter(|s| !new_classes.contains_key(s.name.as_str()))
                .count();
        if retiring == 0 {
            return format!("{why} (the running config is kept)");
        }
        format!(
            "{why} (the running config is kept; {retiring} removed class(es) keep their flows \
             until {} ms after the reload that removes them: try again then)",
            RETIRE_AFTER.0 / 1_000_000
        )
    }

    /// Removes retired classes whose grace period is over; their queued
    /// frames move to the default class: counted as `moved` on the removed
    /// class and as received by the default one. What the default class
    /// refuses (full: `queue_full`) the scheduler counts as that class's
    /// drop with its reason, and the frame's buffer goes back to the pool,
    /// so its counters still add up.
    fn retire_due(&mut self, now: Nanos) {
        if self.retiring.iter().all(|(_, t)| *t > now) {
            return;
        }
        let default_flow = self.classes[self.cfg.default_class()].flow;
        let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.retiring)
            .into_iter()
            .partition(|(_, t)| *t <= now);
        self.retiring = keep;
        for (slot, _) in due {
            let mut last = self.class_stats(&slot);
            let Ok(queued) = self.arbiter.scheduler().remove_flow(slot.flow) else {
                continue;
            };
            last.moved = queued.len() as u64;
            (last.qlen, last.backlog, last.removed) = (0, 0, true);
            if let Some(c) = self.shared.received.get(default_flow.index()) {
                c.fetch_add(last.moved, Ordering::Relaxed);
            }
            // Offered to the scheduler once more, below.
            self.shared.count_classified(last.moved);
            let sched = self.arbiter.scheduler();
            for p in queued {
                if let Err(refused) =
                    sched.enqueue(Pkt::new(default_flow, p.len, p.ts, p.item), now)
                {
                    // Counted by the scheduler under the default class;
                    // dropping the frame returns its buffer.
                    drop(refused);
                }
            }
            if self.removed.len() == MAX_REMOVED {
                self.removed.remove(0);
            }
            self.removed.push(last);
        }
        self.apply_priority_credit();
    }

    /// One class's counters now.
    fn class_stats(&mut self, s: &ClassSlot) -> ClassStats {
        let tx = self
            .arbiter
            .output()
            .and_then(|o| TxBase::since(o, s.flow.index(), s.tx_base.as_deref()));
        let ((p50, p99, buckets, count, sum), split, tx_failed) = tx.unwrap_or((
            (0.0, 0.0, vec![0; SOJOURN_BUCKETS_S.len()], 0, 0.0),
            RxSplit::default(),
            0,
        ));
        let c = self
            .arbiter
            .scheduler()
            .flow_stats(s.flow)
            .unwrap_or_default();
        let by_reason = [
            c.dropped(DropReason::QueueFull).pkts,
            c.dropped(DropReason::TooLarge).pkts,
            c.dropped(DropReason::UnknownFlow).pkts,
            tx_failed,
        ];
        ClassStats {
            class: s.name.clone(),
            received: self.shared.received(s.flow),
            bytes: c.dequeued.bytes,
            packets: c.dequeued.pkts.saturating_sub(tx_failed),
            drops: by_reason.iter().sum(),
            drops_by_reason: by_reason,
            overlimits: c.overlimits,
            backlog: c.backlog.bytes,
            qlen: c.backlog.pkts,
            moved: 0,
            dropped_at_stop: self.shared.dropped_at_stop(s.flow),
            removed: false,
            rate_bps: s.rate.0,
            pps: s.rate.1,
            sojourn_p50_us: p50,
            sojourn_p99_us: p99,
            sojourn_buckets: buckets,
            sojourn_count: count,
            sojourn_sum_s: sum,
            rx_stamped: split.stamped,
            ring_wait_p50_us: split.ring_wait_us[0],
            ring_wait_p99_us: split.ring_wait_us[1],
            ring_wait_p999_us: split.ring_wait_us[2],
            latency_p50_us: split.latency_us[0],
            latency_p99_us: split.latency_us[1],
            latency_p999_us: split.latency_us[2],
        }
    }

    /// Once a second: each class's sent rate over the last second.
    fn sample_rates(&mut self, now: Nanos) {
        let period = now.0.saturating_sub(self.last_sample.0);
        if period < 1_000_000_000 {
            return;
        }
        let sched = self.arbiter.scheduler_view();
        for s in &mut self.classes {
            let sent = sched
                .flow_stats(s.flow)
                .map_or((0, 0), |c| (c.dequeued.bytes, c.dequeued.pkts));
            let per_s = |d: u64| (u128::from(d) * 1_000_000_000 / u128::from(period)) as u64;
            s.rate = (
                per_s(sent.0.saturating_sub(s.last.0)) * 8,
                per_s(sent.1.saturating_sub(s.last.1)),
            );
            s.last = sent;
        }
        self.last_sample = now;
    }

    /// The counters now.
    pub(crate) fn snapshot(&mut self, now: Nanos) -> Snapshot {
        let tx_device = self.arbiter.output().map(super::tx_device_stats);
        let slots: Vec<ClassSlot> = self.classes.clone();
        let mut classes: Vec<ClassStats> = slots.iter().map(|s| self.class_stats(s)).collect();
        let retiring: Vec<ClassSlot> = self.retiring.iter().map(|(s, _)| s.clone()).collect();
        for s in &retiring {
            let mut c = self.class_stats(s);
            c.removed = true;
            classes.push(c);
        }
        classes.extend(self.removed.iter().cloned());
        let mut devices = self
            .shared
            .devices
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        devices.extend(tx_device);
        let stats = self.arbiter.stats();
        let kicks = self.arbiter.output().map_or((0, 0), |o| o.kicks());
        let forwarder = self.trace.as_ref().map(|t| {
            let mut f = t.stats(|flow| {
                self.classes
                    .iter()
                    .find(|c| c.flow.index() == flow)
                    .map_or_else(|| format!("flow {flow}"), |c| c.name.clone())
            });
            (f.tx_kicks, f.tx_kick_frames) = kicks;
            f
        });
        Snapshot {
            ingress: self.cfg.link.ingress.clone(),
            egress: self.cfg.link.egress.clone(),
            rate: self.cfg.link.rate.to_string(),
            scheduler: self.arbiter.scheduler_view().name().to_string(),
            uptime_s: now.0 as f64 / 1e9,
            classes,
            devices,
            reverse_forwarded: self.shared.reverse[0].load(Ordering::Relaxed),
            reverse_dropped: self.shared.reverse[1].load(Ordering::Relaxed),
            classify_anomalies: Anomaly::ALL
                .iter()
                .zip(&self.shared.anomalies)
                .map(|(a, n)| (a.name().to_string(), n.load(Ordering::Relaxed)))
                .filter(|(_, n)| *n > 0)
                .collect(),
            arbiter_loops: stats.loops,
            arbiter_decisions: stats.decisions,
            reloads: self.reloads,
            forwarder,
        }
    }
}
