//! The discrete-event loop.
//!
//! Events, in this order when they fall on the same picosecond: fluid
//! departures, the end of a transmission on the link, source arrivals. Only
//! when every event of an instant is done does an idle link take the next
//! packet from the scheduler, so simultaneous arrivals compete fairly.
//!
//! The link sends one packet at a time. Within a busy period the end of
//! the k-th transmission is `start + ⌈bits_so_far·10^12/R⌉` ps, computed
//! incrementally with an exact remainder: the link never drifts from rate R.
//!
//! Greedy flows keep [`GREEDY_DEPTH`] packets queued both in the scheduler
//! and in the fluid system: a new packet arrives whenever either falls
//! below it (after a dequeue or a fluid departure of the flow), so the flow
//! is backlogged in both systems from time 0 to the end of the arrivals.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, Sender};

use hdrhistogram::Histogram;
use pktsched_core::policy::PolicySched;
use pktsched_core::sched::{Algorithm, ConfigError, SchedParams, SchedVisitor};
use pktsched_core::{DropReason, FlowConfig, FlowId, Limits, Nanos, Pkt, Scheduler};

use crate::fluid::Fluid;
use crate::metrics::FlowStat;
use crate::par;
use crate::source::{Ahead, Gen};
use crate::{PS_PER_SEC, SimConfig};

/// Packets a greedy flow keeps queued in each system.
pub const GREEDY_DEPTH: u32 = 2;
/// Per-flow delay histograms are kept up to this many flows (others get
/// min/mean/max; the overall histogram is always kept).
pub const HIST_FLOWS: usize = 256;
/// Time bins of the per-flow rate plot.
pub const BINS: usize = 100;
const NONE: u64 = u64::MAX;

/// A simulation that could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// The algorithm refused a flow.
    #[error("flow {flow}: {err}")]
    Config {
        /// Flow index.
        flow: usize,
        /// The scheduler's reason.
        err: ConfigError,
    },
    /// The algorithm is not available in this build.
    #[error("{0}")]
    Unsupported(String),
    /// The fluid reference left its proven fixed-point range.
    #[error(
        "the fluid reference left its fixed-point range (packet > 64 KiB or weight sum > 2^32?)"
    )]
    FluidRange,
}

/// What to compute besides the scheduler itself (for cost breakdowns).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Run the GPS fluid reference (lag; greedy flows then also stay
    /// backlogged in the fluid system).
    pub fluid: bool,
    /// Keep delay histograms, WFI, rate bins.
    pub metrics: bool,
    /// Keep one row per packet (flow, len, arrival, departure, fluid).
    pub departures: bool,
    /// Record the ends of busy periods of the link and the fluid system.
    pub busy_ends: bool,
    /// Run the fluid reference on a second thread when the scenario allows
    /// it (see [`crate::par`]); the results are the same either way.
    pub fluid_thread: bool,
}

impl Options {
    /// The defaults for `cfg`: everything, except the fluid reference for a
    /// policy tree (flat GPS over the flows' weights is not what a tree
    /// promises, so its lag would mislead).
    pub fn for_cfg(cfg: &SimConfig) -> Options {
        Options {
            fluid: cfg.policy.is_none(),
            ..Options::default()
        }
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            fluid: true,
            metrics: true,
            departures: false,
            busy_ends: false,
            fluid_thread: true,
        }
    }
}

/// One delivered packet (times in ps; `fluid` is `None` if the fluid
/// system had not finished it when the run stopped, or was off).
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Departure {
    /// Flow.
    pub flow: u32,
    /// Bytes.
    pub len: u32,
    /// Arrival, ps.
    pub arrival: u64,
    /// Departure (last bit on the wire), ps.
    pub departure: u64,
    /// GPS fluid finish, ps.
    pub fluid: Option<u64>,
}

/// Everything a run measured.
#[derive(Debug)]
pub struct Outcome {
    /// Per-flow measurements.
    pub flows: Vec<FlowStat>,
    /// Delay histogram of all packets (ns).
    pub hist: Histogram<u64>,
    /// Rows in departure order, if requested.
    pub departures: Vec<Departure>,
    /// Time of the last event, ps.
    pub end_ps: u64,
    /// Packets in the scheduler when the run stopped.
    pub queued_end: u64,
    /// Of `queued_end`: packets still in PSPAT client mailboxes (not yet
    /// seen by the scheduler).
    pub mailbox_end: u64,
    /// Of `queued_end`: packets the PSPAT arbiter released (the scheduler
    /// counted them as dequeued) that wait for a dispatcher or the NIC.
    pub released_end: u64,
    /// Packet on the wire when the run stopped.
    pub on_wire_end: u64,
    /// Packets the fluid system had not finished when the run stopped.
    pub fluid_pending: u64,
    /// Scheduler counters at the end.
    pub counters: pktsched_core::Counters,
    /// Ends of the link's busy periods (if requested).
    pub link_busy_ends: Vec<u64>,
    /// Ends of the fluid system's busy periods (if requested).
    pub fluid_busy_ends: Vec<u64>,
    /// Bytes the fluid system received and served.
    pub fluid_bytes: (u64, u64),
    /// Packets delivered.
    pub packets: u64,
    /// Whether the fluid reference ran on its own thread.
    pub fluid_threaded: bool,
    /// CPU time of the fluid reference's thread, ns (`None` if it ran on
    /// the simulation's thread, or the OS does not say).
    pub fluid_thread_cpu_ns: Option<u64>,
}

/// Supported ranges of `a` as the simulator builds it.
pub fn limits_of(a: Algorithm) -> Limits {
    a.build::<u32>().limits()
}

/// Adds the flows of `cfg` to a scheduler of its algorithm (or policy);
/// the first refusal is returned with the flow index.
pub fn check_with_algorithm(cfg: &SimConfig) -> Result<(), (usize, ConfigError)> {
    match &cfg.policy {
        Some(p) => add_policy_flows(&mut PolicySched::new(&p.policy), cfg, p),
        None => add_flows(&mut *cfg.algorithm.build::<u32>(), cfg),
    }
}

/// Attaches every flow of `cfg` to its node of the policy tree.
fn add_policy_flows(
    s: &mut PolicySched<u32>,
    cfg: &SimConfig,
    p: &crate::SimPolicy,
) -> Result<(), (usize, ConfigError)> {
    for (i, f) in cfg.flows.iter().enumerate() {
        let mut c = FlowConfig::weight(f.weight)
            .with_max_len(f.size.max())
            .with_limit(f.limit);
        c.prio = p.prio.get(i).copied().unwrap_or(0);
        let r = match p.node.get(i).copied().flatten() {
            Some(n) => s.add_flow_at(n, c),
            None => s.add_flow(c),
        };
        r.map_err(|e| (i, e))?;
    }
    Ok(())
}

fn add_flows<S: Scheduler<u32> + ?Sized>(
    s: &mut S,
    cfg: &SimConfig,
) -> Result<(), (usize, ConfigError)> {
    let l = u64::from(lmax(cfg));
    let wmin = u64::from(cfg.flows.iter().map(|f| f.weight).min().unwrap_or(1).max(1));
    for (i, f) in cfg.flows.iter().enumerate() {
        let mut c = FlowConfig::weight(f.weight)
            .with_max_len(f.size.max())
            .with_limit(f.limit);
        if cfg.algorithm == Algorithm::Drr {
            // quantum_k = L·w_k/w_min: the smallest quantum is one maximum
            // packet, as the DRR bound assumes.
            let q = (u64::from(f.weight) * l).div_ceil(wmin);
            const QMAX: u64 = 1 << 30;
            if q > QMAX {
                return Err((
                    i,
                    ConfigError::OutOfRange {
                        alg: "drr",
                        field: "quantum (largest packet × weight / smallest weight)",
                        value: q,
                        min: 1,
                        max: QMAX,
                    },
                ));
            }
            c.quantum = Some(q as u32);
        }
        s.add_flow(c).map_err(|e| (i, e))?;
    }
    Ok(())
}

fn lmax(cfg: &SimConfig) -> u32 {
    cfg.flows.iter().map(|f| f.size.max()).max().unwrap_or(1)
}

/// Runs a scenario with all measurements on.
pub fn run(cfg: &SimConfig) -> Result<crate::Report, SimError> {
    let out = simulate(cfg, Options::for_cfg(cfg))?;
    Ok(crate::report::build(cfg, &out))
}

/// Runs a scenario and returns the raw measurements. With
/// [`Options::fluid_thread`] the fluid reference runs on a second thread
/// when the scenario allows it; if a packet is refused the premise of that
/// thread fails and the scenario runs again on one thread (same results).
pub fn simulate(cfg: &SimConfig, opt: Options) -> Result<Outcome, SimError> {
    simulate_observed(cfg, opt, &AtomicU64::new(0))
}

/// [`simulate`], storing the virtual time reached (ps) in `progress` every
/// few thousand events and at the end, for a progress bar on another
/// thread. A run that falls back to one thread starts again from 0.
pub fn simulate_observed(
    cfg: &SimConfig,
    opt: Options,
    progress: &AtomicU64,
) -> Result<Outcome, SimError> {
    let threaded = opt.fluid && opt.fluid_thread && !opt.busy_ends && cfg.pspat.is_none();
    if threaded && let Some(out) = simulate_fresh(cfg, opt, true, progress)? {
        return Ok(out);
    }
    simulate_fresh(cfg, opt, false, progress)?
        .ok_or_else(|| SimError::Unsupported("a single-threaded run did not finish".into()))
}

/// Builds the scheduler of `cfg` and runs it (`None`: the fluid thread's
/// premise failed).
fn simulate_fresh(
    cfg: &SimConfig,
    opt: Options,
    threaded: bool,
    progress: &AtomicU64,
) -> Result<Option<Outcome>, SimError> {
    if let Some(p) = &cfg.policy {
        let mut s = PolicySched::new(&p.policy);
        add_policy_flows(&mut s, cfg, p).map_err(|(flow, err)| SimError::Config { flow, err })?;
        return simulate_added(cfg, opt, &mut s, threaded, progress);
    }
    // DRR with quantum_k = L·w_k/w_min (set per flow in `add_flows`),
    // so every selection is O(1) and the T-WFI bound applies.
    let params = SchedParams {
        drr_quantum: lmax(cfg),
        ..SchedParams::default()
    };
    let run = RunOn {
        cfg,
        opt,
        threaded,
        progress,
    };
    cfg.algorithm.with_sched(params, run)
}

/// Runs the simulation on the concrete scheduler the algorithm names.
struct RunOn<'a> {
    cfg: &'a SimConfig,
    opt: Options,
    threaded: bool,
    progress: &'a AtomicU64,
}

impl SchedVisitor<u32> for RunOn<'_> {
    type Output = Result<Option<Outcome>, SimError>;
    fn visit<S: Scheduler<u32> + Send + 'static>(self, mut sched: S) -> Self::Output {
        with_sched(self.cfg, self.opt, &mut sched, self.threaded, self.progress)
    }
}

/// Adds the flows of `cfg` to `s` and runs it (monomorphised per scheduler).
fn with_sched<S: Scheduler<u32> + ?Sized>(
    cfg: &SimConfig,
    opt: Options,
    s: &mut S,
    threaded: bool,
    progress: &AtomicU64,
) -> Result<Option<Outcome>, SimError> {
    add_flows(s, cfg).map_err(|(flow, err)| SimError::Config { flow, err })?;
    simulate_added(cfg, opt, s, threaded, progress)
}

/// Per-flow constants of the packet path.
#[derive(Copy, Clone, Debug)]
struct Hot {
    /// ps of queued bytes per 1/φ: 8e12·Σw/(w·R).
    ps_per_byte_phi: f64,
    weight: u32,
    limit: u32,
    greedy: bool,
}

#[derive(Copy, Clone, Debug)]
struct Rec {
    arr: u64,
    dep: u64,
    fin: u64,
    allow: f64,
    len: u32,
    flow: u32,
    /// Next packet of the flow in the fluid system (fluid thread only).
    fnext: u32,
}

struct St<'c> {
    cfg: &'c SimConfig,
    opt: Options,
    bps: u64,
    wsum: u64,
    /// What the packet path reads of each flow's configuration, packed (16
    /// bytes a flow; the scenario's `FlowSpec`s are far larger).
    hot: Vec<Hot>,
    gens: Vec<Gen>,
    /// Greedy flows' next lengths (32 bytes a flow).
    ahead: Vec<Ahead>,
    st: Vec<FlowStat>,
    recs: Vec<Rec>,
    free: Vec<u32>,
    fluid: Fluid,
    src: BinaryHeap<Reverse<(u64, u32, u32)>>,
    hist: Histogram<u64>,
    total_served: u64,
    sched_q: u64,
    /// (id, flow, done) of the packet on the wire.
    wire: Option<(u32, u32, u64)>,
    /// When a shaped scheduler that held its packets back lets the next
    /// one go (ps).
    wake: Option<u64>,
    /// Busy period: start, ps so far (floor) and remainder (in 1/R units).
    link_ps: u64,
    link_rem: u64,
    last_done: u64,
    bin_ps: u64,
    deps: Vec<Departure>,
    link_ends: Vec<u64>,
    fluid_ends: Vec<u64>,
    packets: u64,
    overflow: bool,
    ps: Option<Ps>,
    /// The fluid reference's stream when it runs on its own thread.
    par: Option<Par>,
}

/// The engine's side of a fluid reference on another thread.
struct Par {
    rx: Receiver<Vec<par::Item>>,
    buf: Vec<par::Item>,
    pos: usize,
    /// Taken when the greedy flows' counts have been sent.
    counts: Option<Sender<Vec<u64>>>,
    /// The end-of-arrivals marker was passed: send the counts before
    /// waiting for more.
    counts_due: bool,
    /// The stream ended.
    done: bool,
    handle: Option<std::thread::JoinHandle<par::Summary>>,
    /// Per flow, on one cache line with its neighbours.
    flows: Vec<ParFlow>,
    bytes_in: u64,
    bytes_out: u64,
    /// A packet was refused, or a departure came for a flow with nothing
    /// in the fluid system: the premise of the fluid thread failed (run
    /// again on one thread).
    broken: bool,
}

const NIL: u32 = u32::MAX;
/// How many fluid departures ahead the engine touches a packet record.
const LOOKAHEAD: usize = 8;

/// A flow as the engine sees it in the fluid system: packets given to it,
/// packets still there, and the oldest and newest of those (ids, linked
/// through `Rec::fnext`).
#[derive(Copy, Clone, Debug)]
struct ParFlow {
    arrived: u64,
    queued: u32,
    head: u32,
    tail: u32,
}

impl Par {
    /// Order time of the next fluid departure if it is at or before
    /// `bound`, else `NONE`. Blocks until the stream says.
    fn peek(&mut self, bound: u64) -> u64 {
        loop {
            if let Some(it) = self.buf.get(self.pos) {
                if it.flow != par::MARK {
                    return if it.order <= bound { it.order } else { NONE };
                }
                if it.order > bound {
                    return NONE;
                }
                self.pos += 1;
                self.counts_due = true;
                continue;
            }
            if self.done {
                return NONE;
            }
            if self.counts_due
                && let Some(tx) = self.counts.take()
            {
                // Every event before the end of the arrivals is done, so
                // the counts are final; the fluid thread waits for them.
                let _ = tx.send(self.flows.iter().map(|f| f.arrived).collect());
            }
            match self.rx.recv() {
                Ok(b) => {
                    self.buf = b;
                    self.pos = 0;
                }
                Err(_) => self.done = true,
            }
        }
    }
}

/// PSPAT model state (see the module docs).
#[derive(Debug, Default)]
struct Ps {
    da: u64,
    dd: u64,
    /// Client mailbox: (id, flow, len, arrival), not yet seen by the arbiter.
    mailbox: VecDeque<(u32, u32, u32, u64)>,
    last_round: Option<u64>,
    /// When the arbiter's emulated link is next idle.
    elink: u64,
    /// Released to the dispatcher: (id, flow, len, release time).
    released: VecDeque<(u32, u32, u32, u64)>,
    /// NIC FIFO: (id, flow, done); its front is `St::wire`.
    nic: VecDeque<(u32, u32, u64)>,
    nic_free: u64,
    /// Per flow: bytes released or in the NIC, not yet sent.
    out_bytes: Vec<u64>,
}

fn ceil_mult(t: u64, d: u64) -> u64 {
    t.div_ceil(d).saturating_mul(d)
}

impl St<'_> {
    fn alloc(&mut self, r: Rec) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.recs[i as usize] = r;
                i
            }
            None => {
                self.recs.push(r);
                (self.recs.len() - 1) as u32
            }
        }
    }

    #[inline]
    fn g(&self, f: usize) -> i128 {
        i128::from(self.hot[f].weight) * i128::from(self.total_served)
            - i128::from(self.wsum) * i128::from(self.st[f].served)
    }

    /// Flow `f` becomes backlogged at `t`: the B-WFI interval starts.
    /// The part of the packet on the wire that has already left counts as
    /// served (rounded down, so the measurement errs by < φ_k bytes on the
    /// safe side).
    fn start_period(&mut self, f: usize, t: u64) {
        let sent = match self.wire {
            Some((wid, _, done)) => {
                let len = u128::from(self.recs[wid as usize].len);
                let rem = (u128::from(done.saturating_sub(t)) * u128::from(self.bps))
                    .div_ceil(8 * u128::from(PS_PER_SEC));
                len.saturating_sub(rem) as i128
            }
            None => 0,
        };
        let g = self.g(f) + i128::from(self.hot[f].weight) * sent;
        self.st[f].min_g = g;
    }

    /// Offers a packet; returns whether it was accepted.
    fn arrive<S: Scheduler<u32> + ?Sized>(
        &mut self,
        s: &mut S,
        flow: u32,
        len: u32,
        t: u64,
        direct: bool,
    ) -> bool {
        let f = flow as usize;
        let out = match &self.ps {
            Some(p) => {
                let own = match self.wire {
                    Some((wid, wf, _)) if wf == flow => u64::from(self.recs[wid as usize].len),
                    _ => 0,
                };
                p.out_bytes[f] - own
            }
            None => 0,
        };
        let wire_rem = match self.wire {
            Some((_, wf, done)) if wf == flow => Some(done - t),
            _ => None,
        };
        let fs = &mut self.st[f];
        fs.offered.0 += 1;
        fs.offered.1 += u64::from(len);
        let k = self.hot[f].ps_per_byte_phi;
        let allow = (fs.q_bytes + out + u64::from(len)) as f64 * k
            + wire_rem.map_or(0.0, |r| {
                r as f64 * self.wsum as f64 / f64::from(self.hot[f].weight)
            });
        let idle = fs.q_pkts == 0 && out == 0 && wire_rem.is_none();
        let id = self.alloc(Rec {
            arr: t,
            dep: NONE,
            fin: NONE,
            allow,
            len,
            flow,
            fnext: NIL,
        });
        if let Some(p) = &mut self.ps
            && !direct
        {
            // PSPAT: into the client mailbox; the arbiter enqueues it at its
            // next round. The flow's limit is applied here, at arrival.
            let fs = &mut self.st[f];
            if fs.q_pkts >= self.hot[f].limit {
                fs.dropped[0] += 1;
                self.free.push(id);
                return false;
            }
            p.mailbox.push_back((id, flow, len, t));
            if idle {
                self.start_period(f, t);
            }
            let fs = &mut self.st[f];
            fs.accepted += 1;
            fs.q_pkts += 1;
            fs.q_bytes += u64::from(len);
            self.fluid_arrive(flow, len, t, id);
            return true;
        }
        let now = Nanos(t / 1000);
        match s.enqueue(Pkt::new(FlowId(flow), len, now, id), now) {
            Ok(()) => {}
            Err(rej) => {
                let i = match rej.reason {
                    DropReason::QueueFull => 0,
                    DropReason::TooLarge => 1,
                    _ => 2,
                };
                self.st[f].dropped[i] += 1;
                if let Some(p) = &mut self.par {
                    // The fluid thread counted on this packet: its premise
                    // failed, stop here and run again on one thread.
                    p.broken = true;
                }
                self.free.push(id);
                return false;
            }
        }
        if idle {
            self.start_period(f, t);
        }
        let fs = &mut self.st[f];
        fs.accepted += 1;
        fs.q_pkts += 1;
        fs.q_bytes += u64::from(len);
        self.sched_q += 1;
        // A new packet may be eligible before a pending wake-up.
        self.wake = None;
        self.fluid_arrive(flow, len, t, id);
        true
    }

    fn refill<S: Scheduler<u32> + ?Sized>(&mut self, s: &mut S, flow: u32, t: u64) {
        if !self.hot[flow as usize].greedy || t >= self.cfg.duration_ps {
            return;
        }
        for _ in 0..GREEDY_DEPTH {
            let fq = if let Some(p) = &self.par {
                p.flows[flow as usize].queued
            } else if self.opt.fluid {
                self.fluid.queued(flow) as u32
            } else {
                GREEDY_DEPTH
            };
            if self.st[flow as usize].q_pkts >= GREEDY_DEPTH && fq >= GREEDY_DEPTH {
                break;
            }
            let f = flow as usize;
            let len = self.ahead[f].next(&mut self.gens[f]);
            if !self.arrive(s, flow, len, t, true) {
                break;
            }
        }
    }

    fn start_tx<S: Scheduler<u32> + ?Sized>(&mut self, s: &mut S, now: u64) {
        let Some(p) = s.dequeue(Nanos(now / 1000)) else {
            // A shaped scheduler holds packets it may not send yet: wake the
            // link when it says. A time not in the future (a work-conserving
            // scheduler with nothing to give) means nothing is left.
            match s.next_ready(Nanos(now / 1000)) {
                Some(t) if t.as_u64().saturating_mul(1000) > now => {
                    self.wake = Some(t.as_u64().saturating_mul(1000));
                }
                _ => self.sched_q = 0,
            }
            return;
        };
        let id = p.item;
        let flow = p.flow.0;
        let len = p.len;
        // The packet's record is read when its transmission ends, several
        // events from now: start loading it.
        if let Some(r) = self.recs.get(id as usize) {
            par::prefetch(r);
        }
        let fs = &mut self.st[flow as usize];
        fs.q_pkts -= 1;
        fs.q_bytes -= u64::from(len);
        self.sched_q -= 1;
        if now != self.last_done {
            // A new busy period.
            self.link_ps = now;
            self.link_rem = 0;
        }
        let num = u64::from(len) * 8 * PS_PER_SEC;
        self.link_ps += num / self.bps;
        self.link_rem += num % self.bps;
        if self.link_rem >= self.bps {
            self.link_ps += 1;
            self.link_rem -= self.bps;
        }
        let done = self.link_ps + u64::from(self.link_rem > 0);
        self.wire = Some((id, flow, done));
        self.refill(s, flow, now);
    }

    fn complete(&mut self, t: u64) {
        let Some((id, flow, _)) = self.wire.take() else {
            return;
        };
        if let Some(p) = &mut self.ps {
            p.nic.pop_front();
            p.out_bytes[flow as usize] -= u64::from(self.recs[id as usize].len);
            self.wire = p.nic.front().copied();
        }
        self.last_done = t;
        self.packets += 1;
        let f = flow as usize;
        let r = self.recs[id as usize];
        let len = u64::from(r.len);
        if self.opt.metrics {
            let g_pre = self.g(f);
            let fs = &mut self.st[f];
            let cand = g_pre - fs.min_g;
            if cand > fs.bwfi_scaled {
                fs.bwfi_scaled = cand;
            }
        }
        self.total_served += len;
        self.st[f].served += len;
        let g_post = self.g(f);
        let in_window = t <= self.cfg.duration_ps;
        let bin = ((t / self.bin_ps) as usize).min(BINS - 1);
        let fs = &mut self.st[f];
        if g_post < fs.min_g {
            fs.min_g = g_post;
        }
        fs.delivered.0 += 1;
        fs.delivered.1 += len;
        if in_window {
            fs.window_bytes += len;
        }
        if self.opt.metrics {
            let delay = t - r.arr;
            fs.delay_min = fs.delay_min.min(delay);
            fs.delay_max = fs.delay_max.max(delay);
            fs.delay_sum += u128::from(delay);
            let ns = delay.div_ceil(1000).max(1);
            if let Some(h) = &mut fs.hist {
                let _ = h.record(ns);
            }
            let _ = self.hist.record(ns);
            let tw = (delay as f64 - r.allow) as i64;
            if tw > fs.twfi_max {
                fs.twfi_max = tw;
            }
            if in_window {
                fs.bins[bin] += len;
            }
        }
        if self.opt.busy_ends && self.sched_q == 0 {
            self.link_ends.push(t);
        }
        self.recs[id as usize].dep = t;
        if r.fin != NONE || !self.opt.fluid {
            self.finish(id);
        }
    }

    /// PSPAT arbiter round at `t`: enqueue what the mailbox holds, then
    /// release packets while the emulated link starts them before `t + Δ_A`.
    fn round<S: Scheduler<u32> + ?Sized>(&mut self, s: &mut S, t: u64) {
        let Some(p) = &mut self.ps else {
            return;
        };
        p.last_round = Some(t);
        let now = Nanos(t / 1000);
        let mail: Vec<_> = p.mailbox.drain(..).collect();
        for (id, flow, len, _) in mail {
            match s.enqueue(Pkt::new(FlowId(flow), len, now, id), now) {
                Ok(()) => self.sched_q += 1,
                Err(_) => {
                    // Cannot happen (the limit was applied at arrival);
                    // counted so the accounting check reports it.
                    let fs = &mut self.st[flow as usize];
                    fs.q_pkts -= 1;
                    fs.q_bytes -= u64::from(len);
                    fs.dropped[2] += 1;
                }
            }
        }
        loop {
            let Some(p) = &self.ps else { return };
            if self.sched_q == 0 || p.elink.max(t) >= t + p.da {
                break;
            }
            let Some(pkt) = s.dequeue(now) else {
                self.sched_q = 0;
                break;
            };
            let (id, flow, len) = (pkt.item, pkt.flow.0, pkt.len);
            let fs = &mut self.st[flow as usize];
            fs.q_pkts -= 1;
            fs.q_bytes -= u64::from(len);
            self.sched_q -= 1;
            let bps = self.bps;
            if let Some(p) = &mut self.ps {
                p.elink = p.elink.max(t) + crate::source::tx_ps(len, bps);
                p.released.push_back((id, flow, len, t));
                p.out_bytes[flow as usize] += u64::from(len);
            }
            self.refill(s, flow, t);
        }
    }

    /// PSPAT dispatcher at `t`: released packets go to the NIC FIFO.
    fn dispatch(&mut self, t: u64) {
        let bps = self.bps;
        let Some(p) = &mut self.ps else {
            return;
        };
        while let Some(&(id, flow, len, rel)) = p.released.front() {
            if rel > t {
                break;
            }
            p.released.pop_front();
            let done = p.nic_free.max(t) + crate::source::tx_ps(len, bps);
            p.nic_free = done;
            p.nic.push_back((id, flow, done));
        }
        if self.wire.is_none() {
            self.wire = p.nic.front().copied();
        }
    }

    /// A packet enters the fluid system.
    fn fluid_arrive(&mut self, flow: u32, len: u32, t: u64, id: u32) {
        if let Some(p) = &mut self.par {
            self.recs[id as usize].fnext = NIL;
            let pf = &mut p.flows[flow as usize];
            match pf.tail {
                NIL => pf.head = id,
                last => self.recs[last as usize].fnext = id,
            }
            pf.tail = id;
            pf.queued += 1;
            pf.arrived += 1;
            p.bytes_in += u64::from(len);
        } else if self.opt.fluid {
            self.fluid.arrive(flow, len, t, id);
        }
    }

    /// The next departure of the fluid thread's stream.
    fn par_event<S: Scheduler<u32> + ?Sized>(&mut self, s: &mut S) {
        let Some(p) = &mut self.par else {
            return;
        };
        let Some(&it) = p.buf.get(p.pos) else {
            return;
        };
        p.pos += 1;
        // The stream says which flows leave next: prefetch their state
        // (2·LOOKAHEAD departures ahead) and then their oldest packet
        // record (LOOKAHEAD ahead), so those misses overlap with the work
        // of the departures in between.
        if let Some(far) = p.buf.get(p.pos + 2 * LOOKAHEAD)
            && let Some(pf) = p.flows.get(far.flow as usize)
        {
            par::prefetch(pf);
            if let Some(fs) = self.st.get(far.flow as usize) {
                // Its statistics, which a greedy refill (an arrival)
                // updates.
                par::prefetch(&fs.offered);
            }
        }
        if let Some(ahead) = p.buf.get(p.pos + LOOKAHEAD)
            && let Some(pf) = p.flows.get(ahead.flow as usize)
            && let Some(r) = self.recs.get(pf.head as usize)
        {
            par::prefetch(r);
        }
        let Some(pf) = p
            .flows
            .get_mut(it.flow as usize)
            .filter(|pf| pf.head != NIL)
        else {
            p.broken = true;
            return;
        };
        let id = pf.head;
        let r = &mut self.recs[id as usize];
        pf.head = r.fnext;
        if pf.head == NIL {
            pf.tail = NIL;
        }
        pf.queued -= 1;
        p.bytes_out += u64::from(r.len);
        r.fin = it.t_ps;
        if r.dep != NONE {
            self.finish(id);
        }
        self.refill(s, it.flow, it.t_ps);
    }

    fn fluid_event<S: Scheduler<u32> + ?Sized>(&mut self, s: &mut S) {
        let Some(d) = self.fluid.pop() else {
            return;
        };
        if self.fluid.overflowed() {
            self.overflow = true;
        }
        if self.opt.busy_ends && self.fluid.is_idle() {
            self.fluid_ends.push(d.t_ps);
        }
        let r = &mut self.recs[d.id as usize];
        r.fin = d.t_ps;
        if r.dep != NONE {
            self.finish(d.id);
        }
        self.refill(s, d.flow, d.t_ps);
    }

    fn finish(&mut self, id: u32) {
        let r = self.recs[id as usize];
        if r.fin != NONE {
            let lag = r.dep as i64 - r.fin as i64;
            let fs = &mut self.st[r.flow as usize];
            fs.lag_max = fs.lag_max.max(lag);
            fs.lag_min = fs.lag_min.min(lag);
            fs.lag_n += 1;
        }
        if self.opt.departures {
            self.deps.push(Departure {
                flow: r.flow,
                len: r.len,
                arrival: r.arr,
                departure: r.dep,
                fluid: (r.fin != NONE).then_some(r.fin),
            });
        }
        self.free.push(id);
    }
}

/// Runs `cfg` on the scheduler `s` (which must have no flows yet).
pub fn simulate_with<S: Scheduler<u32> + ?Sized>(
    cfg: &SimConfig,
    opt: Options,
    s: &mut S,
) -> Result<Outcome, SimError> {
    with_sched(cfg, opt, s, false, &AtomicU64::new(0))?
        .ok_or_else(|| SimError::Unsupported("a single-threaded run did not finish".into()))
}

/// Runs `cfg` on `s`, whose flows were added already (flow `i` of `cfg`
/// is `FlowId(i)`), with the fluid reference on another thread if
/// `threaded` (`None`: that thread's premise failed, run again without).
fn simulate_added<S: Scheduler<u32> + ?Sized>(
    cfg: &SimConfig,
    opt: Options,
    s: &mut S,
    threaded: bool,
    progress: &AtomicU64,
) -> Result<Option<Outcome>, SimError> {
    let n = cfg.flows.len();
    let bps = cfg.rate.as_bps();
    let wsum: u64 = cfg.flows.iter().map(|f| u64::from(f.weight)).sum();
    let weights: Vec<u32> = cfg.flows.iter().map(|f| f.weight).collect();
    let hist_per_flow = opt.metrics && n <= HIST_FLOWS;
    let gens: Vec<Gen> = cfg
        .flows
        .iter()
        .enumerate()
        .map(|(i, f)| Gen::new(cfg.seed, i as u32, &f.size, &f.source))
        .collect();
    let par = if threaded {
        start_fluid_thread(cfg, bps, &weights, &gens)
    } else {
        None
    };
    let in_engine = opt.fluid && par.is_none();
    let mut st = St {
        cfg,
        opt,
        bps,
        wsum,
        hot: cfg
            .flows
            .iter()
            .map(|f| Hot {
                ps_per_byte_phi: 8.0 * PS_PER_SEC as f64 * wsum as f64
                    / (f64::from(f.weight) * bps as f64),
                weight: f.weight,
                limit: f.limit,
                greedy: matches!(f.source, crate::SourceSpec::Greedy),
            })
            .collect(),
        gens,
        ahead: vec![Ahead::new(); n],
        st: (0..n)
            .map(|_| FlowStat::new(if opt.metrics { BINS } else { 0 }, hist_per_flow))
            .collect(),
        recs: Vec::new(),
        free: Vec::new(),
        fluid: Fluid::new(
            if in_engine { bps } else { 1 },
            if in_engine { &weights } else { &[] },
        ),
        src: BinaryHeap::new(),
        hist: Histogram::new(3).map_err(|e| SimError::Unsupported(e.to_string()))?,
        total_served: 0,
        sched_q: 0,
        wire: None,
        wake: None,
        link_ps: 0,
        link_rem: 0,
        last_done: NONE,
        bin_ps: cfg.duration_ps.div_ceil(BINS as u64).max(1),
        deps: Vec::new(),
        link_ends: Vec::new(),
        fluid_ends: Vec::new(),
        packets: 0,
        overflow: false,
        ps: cfg.pspat.map(|p| Ps {
            da: p.arbiter_ps,
            dd: p.dispatcher_ps,
            out_bytes: vec![0; n],
            ..Ps::default()
        }),
        par,
    };
    for i in 0..n {
        if let Some((t, len)) = st.gens[i].first()
            && t < cfg.duration_ps
        {
            st.src.push(Reverse((t, i as u32, len)));
        }
    }
    for i in 0..n {
        st.refill(s, i as u32, 0);
    }
    let mut now = 0u64;
    let mut events = 0u32;
    loop {
        events = events.wrapping_add(1);
        if events.is_multiple_of(4096) {
            progress.store(now, Relaxed);
        }
        if st.par.as_ref().is_some_and(|p| p.broken) {
            // Dropping the stream and the counts' sender ends the thread.
            return Ok(None);
        }
        let ts = st.src.peek().map_or(NONE, |r| r.0.0);
        let tl = st.wire.map_or(NONE, |w| w.2);
        let (ta, td) = match &st.ps {
            Some(p) => {
                let ta = if st.sched_q > 0 {
                    p.last_round.map_or(ceil_mult(now, p.da), |r| r + p.da)
                } else if let Some(m) = p.mailbox.front() {
                    let c = ceil_mult(m.3, p.da);
                    p.last_round.map_or(c, |r| c.max(r + p.da))
                } else {
                    NONE
                };
                let td = p.released.front().map_or(NONE, |r| ceil_mult(r.3, p.dd));
                (ta, td)
            }
            None => (NONE, NONE),
        };
        let tw = st.wake.unwrap_or(NONE);
        let start = st.ps.is_none() && st.wire.is_none() && st.sched_q > 0 && st.wake.is_none();
        let other = ts.min(tl).min(ta).min(td).min(tw);
        let tf = if let Some(p) = &mut st.par {
            // Only whether a departure comes first matters (at `now` when
            // the idle link is about to take a packet).
            p.peek(if start { now } else { other })
        } else if opt.fluid {
            st.fluid.next_time().unwrap_or(NONE)
        } else {
            NONE
        };
        let t = other.min(tf);
        if start && t > now {
            st.start_tx(s, now);
            continue;
        }
        if t == NONE || (!cfg.drain && t > cfg.duration_ps) {
            break;
        }
        now = t;
        if tw == t {
            // The idle link tries the scheduler again once this instant's
            // other events are done.
            st.wake = None;
            continue;
        }
        if tf == t {
            if st.par.is_some() {
                st.par_event(s);
            } else {
                st.fluid_event(s);
            }
        } else if tl == t {
            st.complete(t);
        } else if ts == t
            && let Some(Reverse((t, flow, len))) = st.src.pop()
        {
            st.arrive(s, flow, len, t, false);
            if let Some((t2, l2)) = st.gens[flow as usize].next(t, len)
                && t2 < cfg.duration_ps
            {
                st.src.push(Reverse((t2, flow, l2)));
            }
        } else if ta == t {
            st.round(s, t);
        } else if td == t {
            st.dispatch(t);
        }
    }
    progress.store(now, Relaxed);
    let threaded_ok = st.par.is_some();
    // The fluid thread's per-flow backlog at the end and its CPU time.
    let mut par_queued = Vec::new();
    let mut fluid_cpu = None;
    if let Some(mut p) = st.par.take() {
        // Hang up (a thread waiting for counts or room returns), then check
        // the premise: nothing refused, no departure without a packet.
        drop(p.counts.take());
        let Par {
            rx,
            handle,
            flows,
            bytes_in,
            bytes_out,
            broken,
            ..
        } = p;
        drop(rx);
        let sum = handle.and_then(|h| h.join().ok());
        let refused: u64 = st.st.iter().map(|f| f.dropped.iter().sum::<u64>()).sum();
        match sum {
            // A drained run must also agree on the bytes in and out.
            Some(sum)
                if !broken
                    && refused == 0
                    && sum.excess == 0
                    && (!cfg.drain || (sum.bytes_in, sum.bytes_out) == (bytes_in, bytes_out)) =>
            {
                st.overflow |= sum.overflow;
                st.fluid.bytes_in = bytes_in;
                st.fluid.bytes_out = bytes_out;
                par_queued = flows.iter().map(|f| f.queued).collect();
                fluid_cpu = sum.cpu_ns;
            }
            _ => return Ok(None),
        }
    }
    if st.overflow || st.fluid.overflowed() {
        return Err(SimError::FluidRange);
    }
    // Packets that left the link but that the fluid system had not finished
    // when the run stopped (drain = false): report them without a fluid time.
    if opt.fluid {
        let mut freed = vec![false; st.recs.len()];
        for &i in &st.free {
            freed[i as usize] = true;
        }
        let open: Vec<u32> = freed
            .iter()
            .enumerate()
            .filter(|&(i, &f)| !f && st.recs[i].dep != NONE)
            .map(|(i, _)| i as u32)
            .collect();
        for i in open {
            st.finish(i);
        }
    }
    // B-WFI of periods still open at the end.
    for f in 0..n {
        if st.st[f].q_pkts > 0 {
            let g = st.g(f);
            let fs = &mut st.st[f];
            fs.bwfi_scaled = fs.bwfi_scaled.max(g - fs.min_g);
        }
    }
    let fluid_pending = if threaded_ok {
        par_queued.iter().map(|&q| u64::from(q)).sum()
    } else if opt.fluid {
        (0..n).map(|f| st.fluid.queued(f as u32) as u64).sum()
    } else {
        0
    };
    st.deps.sort_by_key(|d| (d.departure, d.flow));
    Ok(Some(Outcome {
        flows: st.st,
        hist: st.hist,
        departures: st.deps,
        end_ps: now,
        queued_end: st.sched_q
            + st.ps.as_ref().map_or(0, |p| {
                (p.mailbox.len() + p.released.len() + p.nic.len()) as u64
                    - u64::from(st.wire.is_some())
            }),
        mailbox_end: st.ps.as_ref().map_or(0, |p| p.mailbox.len() as u64),
        released_end: st.ps.as_ref().map_or(0, |p| {
            (p.released.len() + p.nic.len()) as u64 - u64::from(st.wire.is_some())
        }),
        on_wire_end: u64::from(st.wire.is_some()),
        fluid_pending,
        counters: s.stats(),
        link_busy_ends: st.link_ends,
        fluid_busy_ends: st.fluid_ends,
        fluid_bytes: (st.fluid.bytes_in, st.fluid.bytes_out),
        packets: st.packets,
        fluid_threaded: threaded_ok,
        fluid_thread_cpu_ns: fluid_cpu,
    }))
}

/// Starts the fluid reference of `cfg` on its own thread (`None` if the
/// thread cannot be started: the engine then runs it itself).
fn start_fluid_thread(cfg: &SimConfig, bps: u64, weights: &[u32], gens: &[Gen]) -> Option<Par> {
    let n = cfg.flows.len();
    let (tx, rx) = std::sync::mpsc::sync_channel(par::DEPTH);
    let (ctx, crx) = std::sync::mpsc::channel();
    let job = par::Job {
        bps,
        weights: weights.to_vec(),
        gens: gens.to_vec(),
        greedy: gens.iter().map(Gen::is_greedy).collect(),
        duration_ps: cfg.duration_ps,
    };
    let handle = std::thread::Builder::new()
        .name("pktsched-fluid".into())
        .spawn(move || par::run(job, &tx, &crx))
        .ok()?;
    Some(Par {
        rx,
        buf: Vec::new(),
        pos: 0,
        counts: Some(ctx),
        counts_due: false,
        done: false,
        handle: Some(handle),
        flows: vec![
            ParFlow {
                arrived: 0,
                queued: 0,
                head: NIL,
                tail: NIL,
            };
            n
        ],
        bytes_in: 0,
        bytes_out: 0,
        broken: false,
    })
}
