//! The discrete-event engine.
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
//!
//! Files: this one holds the public API (options, errors, entry points)
//! and builds the scheduler; `options` the run options and errors;
//! `event_loop` the `Engine` and
//! its loop; `packet_path` the event handlers; `state` the engine's
//! state, one struct per concern; `pspat` the PSPAT arbiter/dispatcher
//! model; `fluid_stream` the fluid reference on a second thread (both
//! ends); `arrivals` the timed-arrival queue the engine and that thread
//! share.

mod arrivals;
mod event_loop;
mod fluid_stream;
mod options;
mod packet_path;
mod pspat;
mod state;

use std::sync::atomic::AtomicU64;

use pktsched_core::policy::PolicySched;
use pktsched_core::sched::{Algorithm, ConfigError, SchedParams, SchedVisitor};
use pktsched_core::{FlowConfig, Limits, Scheduler};

use event_loop::Engine;
pub use options::{HIST_FLOWS, Options, SimError};

pub use crate::model::GREEDY_DEPTH;
use crate::model::{SimConfig, SimPolicy};
pub use crate::outcome::{BINS, Departure, Outcome};

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
    p: &SimPolicy,
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

/// The value a watcher stores in the progress atomic of
/// [`simulate_observed`] to stop the run at the next safe point (the
/// outcome then has `stopped` set).
pub const STOP_REQUEST: u64 = u64::MAX;

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
    Engine::new(cfg, opt, threaded)?.run(s, progress)
}
