//! Running a scenario the way `pktsched sim` does: with a progress
//! observer, building the report, writing the departures CSV, timing the
//! `--profile` re-runs and deciding the verdict (and exit code). The CLI
//! only parses its arguments, calls these and prints.
//!
//! Drawing the progress is left to the caller ([`ProgressObserver`]): a
//! terminal progress bar is a front end's concern, so this crate does not
//! depend on one.

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use crate::engine::{self, Options, SimError};
use crate::model::SimConfig;
use crate::outcome::{Departure, Outcome};
use crate::report::{self, Report};

/// Runs a scenario with all measurements on and builds its report.
pub fn run(cfg: &SimConfig) -> Result<Report, SimError> {
    let out = engine::simulate(cfg, Options::for_cfg(cfg))?;
    Ok(report::build(cfg, &out))
}

/// How far a run has got, for a progress display.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Virtual time reached, ps (a run that falls back to one thread
    /// starts again from 0).
    pub virtual_ps: u64,
    /// The scenario's duration: arrivals end here, a drain runs beyond.
    pub duration_ps: u64,
    /// Wall time since the run started.
    pub elapsed: Duration,
}

impl Progress {
    /// Virtual time reached, in thousandths of the duration (at most 1000).
    pub fn permille(&self) -> u64 {
        (u128::from(self.virtual_ps) * 1000 / u128::from(self.duration_ps.max(1))).min(1000) as u64
    }

    /// The arrivals have ended: the run is draining the queues.
    pub fn draining(&self) -> bool {
        self.virtual_ps > self.duration_ps
    }
}

/// Is shown how far a run has got: called from a watcher thread, first
/// [`PROGRESS_DELAY`] after the start (short runs show nothing), then every
/// [`PROGRESS_PERIOD`]; [`ProgressObserver::finish`] when the run ends.
pub trait ProgressObserver: Send {
    /// The run has got this far.
    fn progress(&mut self, p: Progress);
    /// The run ended (called even if [`ProgressObserver::progress`] never
    /// was).
    fn finish(&mut self) {}
}

/// How long a run goes before its observer is first called.
pub const PROGRESS_DELAY: Duration = Duration::from_millis(500);
/// How often the observer is called after that.
pub const PROGRESS_PERIOD: Duration = Duration::from_millis(100);

/// A finished run: the raw measurements, the report and the wall time.
#[derive(Debug)]
pub struct Simulation {
    /// What the engine measured.
    pub outcome: Outcome,
    /// The report built from it.
    pub report: Report,
    /// Wall time of the run (the report not included).
    pub wall: Duration,
}

impl Simulation {
    /// `simulated N packets in T s (X M packets/s)`.
    pub fn summary_line(&self) -> String {
        let wall = self.wall.as_secs_f64();
        format!(
            "simulated {} packets in {:.3} s ({:.2} M packets/s)",
            self.outcome.packets,
            wall,
            self.outcome.packets as f64 / wall.max(1e-9) / 1e6
        )
    }
}

/// Runs `cfg` with `opt`, telling `observer` (if any) how far it has got,
/// and builds the report. When `stop` is set during the run (a signal),
/// the run ends at the next safe point and the outcome and report say
/// it is partial.
pub fn simulate(
    cfg: &SimConfig,
    opt: Options,
    observer: Option<&mut dyn ProgressObserver>,
    stop: Option<&AtomicBool>,
) -> Result<Simulation, SimError> {
    struct Silent;
    impl ProgressObserver for Silent {
        fn progress(&mut self, _: Progress) {}
    }
    let t0 = Instant::now();
    let outcome = match (observer, stop) {
        (None, None) => engine::simulate(cfg, opt)?,
        (Some(obs), stop) => simulate_watched(cfg, opt, obs, stop)?,
        (None, stop) => simulate_watched(cfg, opt, &mut Silent, stop)?,
    };
    let wall = t0.elapsed();
    let report = report::build(cfg, &outcome);
    Ok(Simulation {
        outcome,
        report,
        wall,
    })
}

/// Runs `cfg` while a watcher thread reports its progress to `obs`.
fn simulate_watched(
    cfg: &SimConfig,
    opt: Options,
    obs: &mut dyn ProgressObserver,
    stop: Option<&AtomicBool>,
) -> Result<Outcome, SimError> {
    let progress = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            let t0 = Instant::now();
            while !done.load(Relaxed) {
                std::thread::sleep(PROGRESS_PERIOD);
                if stop.is_some_and(|s| s.load(Relaxed)) {
                    progress.store(engine::STOP_REQUEST, Relaxed);
                    continue;
                }
                let elapsed = t0.elapsed();
                if elapsed < PROGRESS_DELAY {
                    continue;
                }
                obs.progress(Progress {
                    virtual_ps: progress.load(Relaxed),
                    duration_ps: cfg.duration_ps,
                    elapsed,
                });
            }
            obs.finish();
        });
        let r = engine::simulate_observed(cfg, opt, &progress);
        done.store(true, Relaxed);
        r
    })
}

/// Header of the departures CSV.
pub const DEPARTURES_CSV_HEADER: &str = "flow,len,arrival_ns,departure_ns,fluid_finish_ns";

/// Writes `departures` as CSV to `w` (then flushes it): the header
/// [`DEPARTURES_CSV_HEADER`], then one row per packet in departure order,
/// times in ns with three decimals (exact ps). `departure_ns` is the END
/// of the packet's transmission (its last bit on the wire), not when the
/// scheduler picked it; `fluid_finish_ns` is its GPS fluid finish, empty
/// if the fluid reference was off or had not finished it.
pub fn write_departures_csv<W: Write>(mut w: W, departures: &[Departure]) -> io::Result<()> {
    writeln!(w, "{DEPARTURES_CSV_HEADER}")?;
    for d in departures {
        let fluid = d.fluid.map_or_else(String::new, ns);
        writeln!(
            w,
            "{},{},{},{},{}",
            d.flow,
            d.len,
            ns(d.arrival),
            ns(d.departure),
            fluid
        )?;
    }
    w.flush()
}

/// ps as ns with three decimals.
fn ns(ps: u64) -> String {
    format!("{}.{:03}", ps / 1000, ps % 1000)
}

/// The fluid reference's thread in the two-thread profile run.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FluidThreadCpu {
    /// The scenario runs on one thread (PSPAT model, or no thread).
    NotThreaded,
    /// It ran on its own thread; the OS gives no per-thread CPU time.
    Unknown,
    /// It ran on its own thread for this much CPU time, ns.
    Ns(u64),
}

/// `--profile`: the scenario timed again, with the default options (the
/// fluid reference on a second thread), then on one thread three ways:
/// full, without the fluid reference, and scheduler + sources + link only
/// (no metrics). Times in s.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Profile {
    /// Packets the figures are per (the reported run's).
    pub packets: u64,
    /// Two threads: wall time.
    pub two_thread_wall: f64,
    /// Two threads: the simulation thread's CPU time (wall time if the OS
    /// does not say).
    pub two_thread_sim_cpu: f64,
    /// Two threads: the fluid thread.
    pub fluid_thread: FluidThreadCpu,
    /// Whether the one-thread figures are thread CPU time (else wall).
    pub one_thread_cpu_clock: bool,
    /// One thread, everything.
    pub one_thread_full: f64,
    /// One thread, without the fluid reference.
    pub one_thread_no_fluid: f64,
    /// One thread, scheduler, sources and link only.
    pub one_thread_bare: f64,
}

/// One timed run: wall time, this thread's CPU time (wall if unknown),
/// and the fluid thread.
fn timed(cfg: &SimConfig, opt: Options) -> Result<(f64, f64, FluidThreadCpu), SimError> {
    let (t, c) = (Instant::now(), crate::thread_cpu_ns());
    let out = engine::simulate(cfg, opt)?;
    let wall = t.elapsed().as_secs_f64();
    let cpu = match (c, crate::thread_cpu_ns()) {
        (Some(a), Some(b)) => (b - a) as f64 / 1e9,
        _ => wall,
    };
    let fluid = match (out.fluid_threaded, out.fluid_thread_cpu_ns) {
        (false, _) => FluidThreadCpu::NotThreaded,
        (true, None) => FluidThreadCpu::Unknown,
        (true, Some(ns)) => FluidThreadCpu::Ns(ns),
    };
    Ok((wall, cpu, fluid))
}

/// Times `cfg` four ways (see [`Profile`]); `packets` is the reported
/// run's packet count, which the per-packet figures divide by.
pub fn profile(cfg: &SimConfig, packets: u64) -> Result<Profile, SimError> {
    let one = Options {
        fluid_thread: false,
        ..Options::default()
    };
    let (two_thread_wall, two_thread_sim_cpu, fluid_thread) = timed(cfg, Options::default())?;
    let (_, one_thread_full, _) = timed(cfg, one)?;
    let no_fluid = Options {
        fluid: false,
        ..one
    };
    let (_, one_thread_no_fluid, _) = timed(cfg, no_fluid)?;
    let bare = Options {
        metrics: false,
        ..no_fluid
    };
    let (_, one_thread_bare, _) = timed(cfg, bare)?;
    Ok(Profile {
        packets,
        two_thread_wall,
        two_thread_sim_cpu,
        fluid_thread,
        one_thread_cpu_clock: crate::thread_cpu_ns().is_some(),
        one_thread_full,
        one_thread_no_fluid,
        one_thread_bare,
    })
}

/// Two lines, each ending in a newline: the two-thread run, then the
/// one-thread cost split.
impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pk = self.packets as f64;
        let per = |s: f64| s / pk * 1e9;
        let (wall, cpu) = (self.two_thread_wall, self.two_thread_sim_cpu);
        match self.fluid_thread {
            FluidThreadCpu::Ns(ns) => {
                let fl = ns as f64 / 1e9;
                writeln!(
                    f,
                    "profile, fluid reference on a second thread: {} packets in {wall:.3} s wall = {:.2} M packets/s; simulation thread {cpu:.3} s CPU ({:.0} ns/pkt), fluid thread {fl:.3} s CPU ({:.0} ns/pkt)",
                    self.packets,
                    pk / wall / 1e6,
                    per(cpu),
                    per(fl),
                )?;
            }
            FluidThreadCpu::Unknown => writeln!(
                f,
                "profile, fluid reference on a second thread: {wall:.3} s wall (no per-thread CPU time on this system)"
            )?,
            FluidThreadCpu::NotThreaded => writeln!(
                f,
                "profile: this scenario runs on one thread ({wall:.3} s wall)"
            )?,
        }
        let (full, nofluid, bare) = (
            self.one_thread_full,
            self.one_thread_no_fluid,
            self.one_thread_bare,
        );
        writeln!(
            f,
            "profile, one thread ({}): full {full:.3} s = {:.2} M packets/s; scheduler+sources+link {bare:.3} s ({:.0} ns/pkt), metrics {:.3} s ({:.0} ns/pkt), fluid reference {:.3} s ({:.0} ns/pkt)",
            if self.one_thread_cpu_clock {
                "thread CPU time"
            } else {
                "wall time"
            },
            pk / full / 1e6,
            per(bare),
            nofluid - bare,
            per(nofluid - bare),
            full - nofluid,
            per(full - nofluid)
        )
    }
}

/// What a run's report means for its caller: pass, or why not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every packet is accounted for and no measurement exceeds its bound.
    Pass,
    /// The packet accounting does not add up: a bug in the simulator.
    AccountingBroken,
    /// These measurements exceed their bounds (or delay targets).
    BoundsExceeded(Vec<String>),
}

/// Exit code of a failed verdict: the one `pktsched` uses for every error.
pub const FAILURE_EXIT_CODE: u8 = 2;

impl Verdict {
    /// Whether the run passed.
    pub fn passed(&self) -> bool {
        *self == Verdict::Pass
    }

    /// Process exit code: 0 on a pass, else [`FAILURE_EXIT_CODE`].
    pub fn exit_code(&self) -> u8 {
        if self.passed() { 0 } else { FAILURE_EXIT_CODE }
    }
}

/// The message a failed verdict is reported with.
impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Pass => write!(f, "every measurement within its bound"),
            Verdict::AccountingBroken => write!(
                f,
                "packet accounting does not add up (see the packets line above): this is a bug"
            ),
            Verdict::BoundsExceeded(v) => write!(
                f,
                "{} measurement(s) exceed their bound:\n  {}",
                v.len(),
                v.join("\n  ")
            ),
        }
    }
}

/// The exit policy: a broken packet accounting fails first, then any
/// measurement above its bound; otherwise the run passes.
pub fn verdict(report: &Report) -> Verdict {
    if !report.accounting.conserved {
        Verdict::AccountingBroken
    } else if !report.violations.is_empty() {
        Verdict::BoundsExceeded(report.violations.clone())
    } else {
        Verdict::Pass
    }
}
