//! The PSPAT runtime against the `tc` architecture (one locked scheduler
//! that every client runs itself) and no scheduler at all, side by side
//! (`pktsched bench pspat`).
//!
//! Two phases, each for every number of clients and architecture:
//!
//! * **throughput** — a link far faster than the clients can fill, so the
//!   figure is how many scheduling decisions per second each architecture
//!   makes (PSPAT: the arbiter's; locked: all clients' together);
//! * **overload** — a real link (10 Gbit/s, MTU packets) that the clients
//!   overload, plus one *victim* client with 50× the weight sending at a low
//!   rate: shares of the others vs their weights (Jain's index) and the
//!   victim's latency percentiles against the QFQ delay bound.

use std::io::{self, Write};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use pktsched_core::units::parse_duration;
use pktsched_core::{Algorithm, FlowId, Rate, Scheduler};
use pktsched_runtime::pspat::{ArbiterSched, Config, add_flows, check_arbiter_sched};
use serde::Serialize;

use crate::limits::{self, Range};
use crate::stats::median;

mod arch;
mod breakdown;
mod load;
mod targets;
mod threads;

pub use breakdown::{Breakdown, Part};
pub use targets::VictimTargets;
pub use threads::{RoleWindow, ThreadsWindow};

/// Runs per configuration (`--runs`).
pub const RUNS: Range<u64> = Range::new("--runs", 1, 100);
/// Packets per hand-over (`--batch`).
pub const BATCH: Range<u64> = Range::new("--batch", 1, 4096);
/// Per-flow queue limit (`--limit`).
pub const LIMIT: Range<u64> = Range::new("--limit", 1, 100_000);
/// Packet lengths (`--len`, `--overload-len`).
pub const LEN: Range<u64> = Range::new("--len", 1, 1_000_000);
/// The victim's weight (`--victim-weight`).
pub const VICTIM_WEIGHT: Range<u64> = Range::new("--victim-weight", 1, 1 << 20);
/// Dispatcher threads (`--dispatchers`).
pub const DISPATCHERS: Range<u64> = Range::new("--dispatchers", 0, 64);
/// Measured time per run (`--duration`), ns.
pub const DURATION: Range<u64> = Range::new("--duration", 1_000_000, 3_600_000_000_000);
/// Warm-up per run (`--warmup`), ns.
pub const WARMUP: Range<u64> = Range::new("--warmup", 0, 600_000_000_000);
/// Arbiter intervals (`--scan-interval`, `--read-interval`), ns.
pub const INTERVAL: Range<u64> = Range::new("--scan-interval", 0, 1_000_000_000);
/// The arbiter's nap cover (`--arbiter-nap`), ns.
pub const NAP: Range<u64> = Range::new("--arbiter-nap", 1, 1_000_000_000);
/// Link and victim rates, bits/s.
pub const RATE: Range<u64> = Range::new("--link", 1_000, 100_000_000_000_000);
/// Packets a link must be able to send in `--duration` for the run to
/// measure a rate.
pub const MIN_PKTS: u64 = 100;
/// Packets the victim must send in `--duration` for its latency
/// percentiles to have samples.
pub const MIN_VICTIM_PKTS: u64 = 10;
/// Most values in a list (`--clients`, `--weights`).
pub const MAX_LIST: usize = 64;

/// The flags of `bench pspat`, as given (one field per flag, same name;
/// [`Plan::new`] parses and checks them).
#[derive(Clone, Debug)]
pub struct PspatOptions {
    pub clients: String,
    pub archs: String,
    pub phases: String,
    pub alg: String,
    pub weights: String,
    pub batch: String,
    pub limit: String,
    pub link: String,
    pub len: String,
    pub overload_link: String,
    pub overload_len: String,
    pub overload: String,
    pub victim_weight: String,
    pub victim_rate: String,
    pub duration: String,
    pub warmup: String,
    pub runs: String,
    pub dispatchers: String,
    pub client_transmit: bool,
    pub scan_interval: String,
    pub read_interval: String,
    pub placement: String,
    /// PSPAT's arbiter thread's nice value (`none` or -20..=19).
    pub arbiter_nice: String,
    /// PSPAT's arbiter thread's policy: `other` or `fifo:N`.
    pub arbiter_sched: String,
    /// How PSPAT's arbiter waits on the CPU: `yield` or `spin`.
    pub arbiter_wait: String,
    /// PSPAT hand-off: `off`, or how long after the last arbiter round a
    /// client runs one itself.
    pub assist_after: String,
    /// PSPAT nap: `off`, or the backlog's link time from which the
    /// arbiter naps while its mailboxes are empty.
    pub arbiter_nap: String,
    /// PSPAT step aside: `on` (the arbiter thread leaves the rounds to
    /// the clients while it or they lack a core) or `off`.
    pub step_aside: String,
    /// PSPAT starved assist: `on` (a client that lost its core runs a
    /// late round itself, the arbiter thread present or not) or `off`.
    pub starved_assist: String,
    /// PSPAT humble: `on` (the arbiter thread gives up its raised nice
    /// value while its clients lack a core and it has one to spare) or
    /// `off`.
    pub humble: String,
    /// PSPAT nap gate: `on` (with `--arbiter-nap`: nap only while the
    /// arbiter thread waits for a core) or `off`.
    pub nap_when_waiting: String,
    /// A thread that spins on this core through every run of every
    /// architecture (`off`: none): the busy-core case, a process that
    /// takes one core.
    pub busy_core: String,
    /// Shorthand for `placement = none`.
    pub no_pin: bool,
    /// Read every thread's scheduling counters at both ends of each
    /// measured window (`--stats`); off otherwise, since reading them
    /// (three /proc files per thread) is work inside the window.
    pub thread_counters: bool,
}

/// Where the bench's threads run: one policy for every architecture, so
/// the clients of PSPAT and of the locked baseline get the same cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// Clients (the victim too) are not pinned: the OS places them on any
    /// core, in every architecture. PSPAT's arbiter is pinned to core 0,
    /// dispatchers to core 1.
    Float,
    /// Core 0 is kept for PSPAT's arbiter: the clients of every
    /// architecture are pinned to the other cores (client `i` to core
    /// `1 + i mod (cores − 1)`), dispatchers to core 1.
    Reserve,
    /// Nothing is pinned (also `--no-pin`).
    None,
}

impl Placement {
    fn parse(s: &str) -> Result<Placement> {
        match s {
            "float" => Ok(Placement::Float),
            "reserve" => Ok(Placement::Reserve),
            "none" => Ok(Placement::None),
            _ => bail!("--placement `{s}`; allowed: float, reserve, none"),
        }
    }

    /// The core of client `i` (`cores` cores on the machine).
    fn client_core(self, i: usize, cores: usize) -> Option<usize> {
        match self {
            Placement::Reserve if cores >= 2 => Some(1 + i % (cores - 1)),
            _ => None,
        }
    }

    /// The core of PSPAT's arbiter and of its dispatchers.
    fn runtime_cores(self, cores: usize) -> (Option<usize>, Vec<usize>) {
        match self {
            Placement::Float | Placement::Reserve if cores >= 2 => (Some(0), vec![1]),
            _ => (None, Vec::new()),
        }
    }
}

/// An architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// The PSPAT runtime.
    Pspat,
    /// One locked scheduler (the `tc` way).
    Locked,
    /// No scheduler.
    None,
}

impl Arch {
    fn name(self) -> &'static str {
        match self {
            Arch::Pspat => "pspat",
            Arch::Locked => "locked",
            Arch::None => "none",
        }
    }
}

/// A phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// A link faster than the clients.
    Throughput,
    /// An overloaded link with a victim.
    Overload,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Throughput => "throughput",
            Phase::Overload => "overload",
        }
    }
}

/// Everything parsed and checked.
#[derive(Debug)]
pub struct Plan {
    /// Numbers of clients.
    pub clients: Vec<usize>,
    /// Architectures.
    pub archs: Vec<Arch>,
    /// Phases.
    pub phases: Vec<Phase>,
    alg: Algorithm,
    weights: Vec<u32>,
    batch: usize,
    limit: u32,
    link: Rate,
    len: u32,
    overload_link: Rate,
    overload_len: u32,
    /// `None`: as fast as possible.
    overload: Option<f64>,
    victim_weight: u32,
    victim_rate: Rate,
    duration: Duration,
    warmup: Duration,
    runs: usize,
    dispatchers: usize,
    client_transmit: bool,
    scan_interval: Duration,
    read_interval: Duration,
    /// Where threads run.
    pub placement: Placement,
    /// Cores on the machine.
    cores: usize,
    arbiter_nice: Option<i32>,
    /// `Config::arbiter_sched`.
    arbiter_sched: ArbiterSched,
    /// The arbiter yields (rather than spins) while it waits.
    arbiter_yield: bool,
    /// Hand-off threshold (`None`: clients never run rounds).
    assist_after: Option<Duration>,
    /// Nap cover (`None`: the arbiter never naps).
    nap_cover: Option<Duration>,
    /// `Config::step_aside`.
    step_aside: bool,
    /// `Config::starved_assist`.
    starved_assist: bool,
    /// `Config::humble`.
    humble: bool,
    /// `Config::nap_when_waiting`.
    nap_when_waiting: bool,
    /// [`PspatOptions::busy_core`].
    pub busy_core: Option<usize>,
    /// [`PspatOptions::thread_counters`].
    thread_counters: bool,
}

/// A switch's value: `on` or `off`.
fn on_off(flag: &str, value: &str) -> Result<bool> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        s => bail!("{flag} `{s}`; allowed: on, off"),
    }
}

/// `--busy-core`: `off`, or a core this machine has.
fn parse_busy_core(s: &str) -> Result<Option<usize>> {
    if s == "off" {
        return Ok(None);
    }
    let ids: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .iter()
        .map(|c| c.id)
        .collect();
    match s.parse::<usize>() {
        Ok(c) if ids.contains(&c) => Ok(Some(c)),
        _ => bail!(
            "--busy-core `{s}`; allowed: off, or a core this process may run on ({})",
            ids.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn list<T>(name: &str, s: &str, f: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>> {
    limits::list(name, s, MAX_LIST, |x| {
        f(x).map_err(|e| anyhow!("{name}: {e}"))
    })
}

fn named(r: Range<u64>, name: &'static str) -> Range<u64> {
    Range { name, ..r }
}

impl Plan {
    /// Parses and checks the options, including the scheduler's and the
    /// runtime's own ranges (so a run does not fail half way).
    pub fn new(a: &PspatOptions) -> Result<Plan> {
        let clients = list("--clients", &a.clients, |s| {
            let n: usize = s
                .parse()
                .map_err(|_| format!("`{s}` is not a number; allowed: 1..=128"))?;
            if !(1..=128).contains(&n) {
                return Err(format!("{n} clients; allowed: 1..=128 (plus the victim)"));
            }
            Ok(n)
        })?;
        let archs = list("--archs", &a.archs, |s| match s {
            "pspat" => Ok(Arch::Pspat),
            "locked" | "tc" => Ok(Arch::Locked),
            "none" => Ok(Arch::None),
            _ => Err(format!(
                "unknown architecture `{s}`; allowed: pspat, locked, none"
            )),
        })?;
        let phases = list("--phases", &a.phases, |s| match s {
            "throughput" => Ok(Phase::Throughput),
            "overload" => Ok(Phase::Overload),
            _ => Err(format!(
                "unknown phase `{s}`; allowed: throughput, overload"
            )),
        })?;
        let alg = Algorithm::parse(&a.alg).map_err(|e| anyhow!("--alg: {e}"))?;
        let weights = list("--weights", &a.weights, |s| {
            s.parse::<u32>()
                .ok()
                .filter(|&w| w >= 1)
                .ok_or_else(|| format!("weight `{s}`; allowed: integers from 1"))
        })?;
        let overload = match a.overload.as_str() {
            "max" => None,
            s => match s.parse::<f64>() {
                Ok(x) if x > 0.0 && x <= 1000.0 => Some(x),
                _ => bail!("--overload `{s}`; allowed: a factor in (0, 1000] or `max`"),
            },
        };
        let plan = Plan {
            clients,
            archs,
            phases,
            alg,
            weights,
            batch: BATCH.parse_as(&a.batch)?,
            limit: LIMIT.parse_as(&a.limit)?,
            link: RATE.rate(&a.link)?,
            len: LEN.parse_as(&a.len)?,
            overload_link: named(RATE, "--overload-link").rate(&a.overload_link)?,
            overload_len: named(LEN, "--overload-len").parse_as(&a.overload_len)?,
            overload,
            victim_weight: VICTIM_WEIGHT.parse_as(&a.victim_weight)?,
            victim_rate: named(RATE, "--victim-rate").rate(&a.victim_rate)?,
            duration: if parse_duration(&a.duration).is_ok_and(|d| d.0 == 0) {
                bail!(
                    "--duration must be above zero; {}",
                    DURATION.allowed_duration()
                );
            } else {
                DURATION.duration(&a.duration)?
            },
            warmup: WARMUP.duration(&a.warmup)?,
            runs: RUNS.parse_as(&a.runs)?,
            dispatchers: DISPATCHERS.parse_as(&a.dispatchers)?,
            client_transmit: a.client_transmit,
            scan_interval: INTERVAL.duration(&a.scan_interval)?,
            read_interval: named(INTERVAL, "--read-interval").duration(&a.read_interval)?,
            placement: if a.no_pin {
                Placement::None
            } else {
                Placement::parse(&a.placement)?
            },
            cores: core_affinity::get_core_ids().map_or(1, |c| c.len()),
            arbiter_nice: match a.arbiter_nice.as_str() {
                "none" => None,
                s => match s.parse::<i32>() {
                    Ok(n) if (-20..=19).contains(&n) => Some(n),
                    _ => bail!("--arbiter-nice `{s}`; allowed: none or -20..=19"),
                },
            },
            arbiter_sched: a
                .arbiter_sched
                .parse()
                .map_err(|e| anyhow!("--arbiter-sched {e}"))?,
            arbiter_yield: match a.arbiter_wait.as_str() {
                "yield" => true,
                "spin" => false,
                s => bail!("--arbiter-wait `{s}`; allowed: yield, spin"),
            },
            assist_after: match a.assist_after.as_str() {
                "off" => None,
                s => Some(named(INTERVAL, "--assist-after").duration(s)?),
            },
            nap_cover: match a.arbiter_nap.as_str() {
                "off" => None,
                s => Some(NAP.duration(s).map_err(|e| anyhow!("{e}, or `off`"))?),
            },
            step_aside: on_off("--step-aside", &a.step_aside)?,
            starved_assist: on_off("--starved-assist", &a.starved_assist)?,
            humble: on_off("--humble", &a.humble)?,
            nap_when_waiting: on_off("--nap-when-waiting", &a.nap_when_waiting)?,
            busy_core: parse_busy_core(&a.busy_core)?,
            thread_counters: a.thread_counters,
        };
        plan.check_arbiter_switches(a)?;
        plan.check_rates(a)?;
        if plan.archs.contains(&Arch::Pspat) {
            check_arbiter_sched(plan.arbiter_sched)
                .map_err(|e| anyhow!("--arbiter-sched {}: {e}", plan.arbiter_sched))?;
        }
        // Let the scheduler and the runtime check their own ranges now,
        // with the flags' names, rather than in the middle of a run.
        for ph in &plan.phases {
            let n = plan.clients.iter().copied().max().unwrap_or(1);
            let mut s = plan.alg.build_send::<u64>();
            let (len, _) = plan.flow_shape(*ph);
            plan.add_flows(s.as_mut(), n, *ph)
                .map_err(|e| anyhow!("{n} clients with --weights/--victim-weight: {e}"))?;
            if u64::from(len) > s.limits().max_len {
                bail!(
                    "packet length {len} is above what {} accepts (max_len {})",
                    plan.alg.name(),
                    s.limits().max_len
                );
            }
            plan.config(*ph)
                .validate()
                .map_err(|e| anyhow!("runtime settings: {e}"))?;
        }
        Ok(plan)
    }

    /// The arbiter's switches that need another one: the humble arbiter
    /// a raised nice value under the normal policy, the nap gate a nap.
    fn check_arbiter_switches(&self, a: &PspatOptions) -> Result<()> {
        if self.humble && self.arbiter_sched != ArbiterSched::Other {
            bail!(
                "--humble on with --arbiter-sched {}: the humble arbiter gives up a raised nice \
                 value, which a real-time thread does not use; allowed with --arbiter-sched other",
                a.arbiter_sched
            );
        }
        if self.humble && self.arbiter_nice.is_none_or(|n| n >= 0) {
            bail!(
                "--humble on with --arbiter-nice {}: the humble arbiter gives up a raised \
                 priority and there is none; allowed with --arbiter-nice -20..=-1 (the default -20)",
                a.arbiter_nice
            );
        }
        if self.nap_when_waiting && self.nap_cover.is_none() {
            bail!(
                "--nap-when-waiting on with --arbiter-nap off: the gate opens and shuts the nap, \
                 and there is none; allowed with an --arbiter-nap cover (e.g. 200us), or \
                 --nap-when-waiting off"
            );
        }
        Ok(())
    }

    /// A link too slow to send [`MIN_PKTS`] packets in `--duration`
    /// measures nothing (0 packets/s, NaN shares), a victim slower than
    /// [`MIN_VICTIM_PKTS`] has no latency: refused.
    fn check_rates(&self, a: &PspatOptions) -> Result<()> {
        let mut rates = Vec::new();
        for ph in &self.phases {
            let (len, link) = self.flow_shape(*ph);
            match ph {
                Phase::Throughput => rates.push(("--link", &a.link, link, len, MIN_PKTS)),
                Phase::Overload => {
                    rates.push(("--overload-link", &a.overload_link, link, len, MIN_PKTS));
                    rates.push((
                        "--victim-rate",
                        &a.victim_rate,
                        self.victim_rate,
                        len,
                        MIN_VICTIM_PKTS,
                    ));
                }
            }
        }
        for (name, text, rate, len, min) in rates {
            let bits = rate.as_bps() as f64 * self.duration.as_secs_f64();
            let pkts = bits / (f64::from(len) * 8.0);
            if pkts < min as f64 {
                bail!(
                    "{name} {text}: sends {pkts:.1} packets of {len} bytes in --duration {:?}; a run needs at least {min}: raise the rate or --duration",
                    self.duration
                );
            }
        }
        Ok(())
    }

    /// Packet length and link of a phase.
    fn flow_shape(&self, ph: Phase) -> (u32, Rate) {
        match ph {
            Phase::Throughput => (self.len, self.link),
            Phase::Overload => (self.overload_len, self.overload_link),
        }
    }

    /// Flows 0..n for the clients, flow n for the victim (overload).
    fn add_flows(
        &self,
        s: &mut dyn Scheduler<u64>,
        n: usize,
        ph: Phase,
    ) -> Result<Vec<FlowId>, pktsched_core::ConfigError> {
        let mut ids = add_flows(s, &self.weights, n, self.limit)?;
        if ph == Phase::Overload {
            ids.extend(add_flows(s, &[self.victim_weight], 1, self.limit)?);
        }
        Ok(ids)
    }

    fn config(&self, ph: Phase) -> Config {
        let (_, link) = self.flow_shape(ph);
        Config {
            scan_interval: self.scan_interval,
            read_interval: self.read_interval,
            dispatchers: self.dispatchers,
            client_transmit: self.client_transmit,
            arbiter_core: self.placement.runtime_cores(self.cores).0,
            dispatcher_cores: self.placement.runtime_cores(self.cores).1,
            max_clients: 129,
            arbiter_nice: self.arbiter_nice,
            arbiter_sched: self.arbiter_sched,
            yield_when_idle: self.arbiter_yield,
            assist_after: self.assist_after,
            nap_cover: self.nap_cover,
            step_aside: self.step_aside,
            starved_assist: self.starved_assist,
            humble: self.humble,
            nap_when_waiting: self.nap_when_waiting,
            ..Config::new(link)
        }
    }

    /// Runs in all.
    pub fn total_runs(&self) -> u64 {
        (self.phases.len() * self.clients.len() * self.archs.len() * self.runs) as u64
    }
}

/// The victim's latency in one run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Victim {
    samples: u64,
    p50_ns: u64,
    p90_ns: u64,
    p99_ns: u64,
    p999_ns: u64,
    max_ns: u64,
    /// QFQ guarantee for the victim's packet: its own transmission at its
    /// guaranteed rate plus the T-WFI, plus (PSPAT) Δ_A = the read or scan
    /// interval plus two rounds at their 99th percentile (BENCHMARKS.md).
    bound_ns: u64,
    /// Where the latency goes, per part (see `breakdown`).
    breakdown: Option<Breakdown>,
}

/// One run's figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunRes {
    phase: String,
    arch: String,
    clients: usize,
    run: usize,
    /// Packets out of the scheduler (or straight out, `none`) per second.
    decisions_per_s: f64,
    gbit_per_s: f64,
    /// Jain's index of throughput/weight over the non-victim clients.
    jain: f64,
    /// Largest |share/expected − 1| over the non-victim clients.
    max_share_err: f64,
    victim: Option<Victim>,
    /// Handed to the architecture.
    sent: u64,
    /// Transmitted (whole run).
    delivered: u64,
    /// Dropped by the scheduler (queue full).
    dropped: u64,
    /// Still queued at stop and handed back.
    returned: u64,
    mailbox_full: u64,
    backpressure_events: u64,
    lock_contended: u64,
    arbiter_avg_loop_ns: f64,
    arbiter_max_loop_ns: u64,
    /// 99th percentile of the busy rounds (power-of-two resolution).
    arbiter_p99_loop_ns: u64,
    arbiter_pkts_per_loop: f64,
    arbiter_sleeps: u64,
    /// PSPAT: rounds run by clients because the arbiter was late.
    assisted_rounds: u64,
    /// PSPAT with `--humble on`: humble periods judged by the end of the
    /// window, kept, ms at the lowered priority, and whether it was
    /// lowered at the window's end.
    humble: Option<HumbleRun>,
    /// PSPAT: what the arbiter thread did during the measured window.
    window: Option<ArbiterWindow>,
    /// Every architecture: the threads' time on a core, waiting for one,
    /// and preemptions, during the measured window.
    threads: Option<ThreadsWindow>,
    /// The `tc -s`-style report (PSPAT runs).
    #[serde(skip)]
    tc: Option<String>,
}

/// What `Config::humble` did by the end of a PSPAT run's measured window.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct HumbleRun {
    /// Humble periods judged.
    pub periods: u64,
    /// Of them, kept.
    pub kept: u64,
    /// Time at the lowered priority, ms (periods judged).
    pub humble_ms: f64,
    /// Lowered at the window's end.
    pub lowered: bool,
}

/// What PSPAT's arbiter thread did during a run's measured window, from
/// its counters at both ends: where a decision's wall time goes.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct ArbiterWindow {
    /// Share of the window the thread ran on a core (its CPU time).
    pub cpu_share: f64,
    /// Share of the window spent in rounds that moved packets.
    pub busy_share: f64,
    /// Rounds per second, and of them the share that moved nothing.
    pub rounds_per_s: f64,
    /// See `rounds_per_s`.
    pub empty_share: f64,
    /// Packets released per round that moved packets.
    pub pkts_per_busy_round: f64,
    /// Mailbox reads put off by the read interval, per second.
    pub deferred_reads_per_s: f64,
    /// Yields, spins, sleeps and waits for a client's round, per second.
    pub yields_per_s: f64,
    /// See `yields_per_s`.
    pub spins_per_s: f64,
    /// See `yields_per_s`.
    pub sleeps_per_s: f64,
    /// Of `sleeps_per_s`, naps (sleeps while the link is busy with the
    /// backlog and the mailboxes are empty).
    pub naps_per_s: f64,
    /// Times the nap gate opened in the window (`--nap-when-waiting on`).
    pub nap_gate_opened: u64,
    /// See `yields_per_s`.
    pub held_waits_per_s: f64,
    /// Sends that found their mailbox full, per released packet: above 0
    /// the clients wait for the arbiter; near 0 with many empty rounds the
    /// arbiter waits for the clients.
    pub full_per_decision: f64,
}

impl ArbiterWindow {
    /// From counters `a` (start) and `b` (end) over `secs`, with the
    /// clients' mailbox-full counts at both ends.
    pub(crate) fn between(
        a: &pktsched_runtime::pspat::ArbiterStats,
        b: &pktsched_runtime::pspat::ArbiterStats,
        secs: f64,
        full: (u64, u64),
    ) -> ArbiterWindow {
        let d =
            |f: fn(&pktsched_runtime::pspat::ArbiterStats) -> u64| f(b).saturating_sub(f(a)) as f64;
        let secs = secs.max(1e-9);
        let rounds = d(|s| s.loops);
        let busy = d(|s| s.busy_loops);
        let decisions = d(|s| s.decisions);
        ArbiterWindow {
            cpu_share: d(|s| s.cpu_ns) / 1e9 / secs,
            busy_share: d(|s| s.busy_loop_ns) / 1e9 / secs,
            rounds_per_s: rounds / secs,
            empty_share: (rounds - busy) / rounds.max(1.0),
            pkts_per_busy_round: decisions / busy.max(1.0),
            deferred_reads_per_s: d(|s| s.deferred_reads) / secs,
            yields_per_s: d(|s| s.yields) / secs,
            spins_per_s: d(|s| s.spins) / secs,
            sleeps_per_s: d(|s| s.sleeps) / secs,
            naps_per_s: d(|s| s.naps) / secs,
            nap_gate_opened: b.nap_gate_opened.saturating_sub(a.nap_gate_opened),
            held_waits_per_s: d(|s| s.held_waits) / secs,
            full_per_decision: full.1.saturating_sub(full.0) as f64 / decisions.max(1.0),
        }
    }
}

/// Medians over runs of one (phase, arch, clients).
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    phase: String,
    arch: String,
    clients: usize,
    decisions_per_s: f64,
    jain: f64,
    max_share_err: f64,
    victim_p50_ns: Option<f64>,
    victim_p99_ns: Option<f64>,
    victim_p999_ns: Option<f64>,
    victim_bound_ns: Option<f64>,
    /// Medians over runs of each part's p50 and p99.
    victim_breakdown: Option<Breakdown>,
    /// PSPAT, overload: the victim's targets counted run by run.
    victim_targets: Option<VictimTargets>,
    drop_from_peak: Option<f64>,
}

/// Medians over `rs` of each part's percentiles.
fn median_breakdown(rs: &[&RunRes]) -> Option<Breakdown> {
    let bs: Vec<Breakdown> = rs
        .iter()
        .filter_map(|r| r.victim.as_ref().and_then(|v| v.breakdown))
        .collect();
    if bs.is_empty() {
        return None;
    }
    let med = |f: &dyn Fn(&Breakdown) -> u64| {
        median(&bs.iter().map(|b| f(b) as f64).collect::<Vec<_>>()).map_or(0, |m| m as u64)
    };
    let part = |i: usize| Part {
        p50_ns: med(&|b| b.parts()[i].p50_ns),
        p99_ns: med(&|b| b.parts()[i].p99_ns),
    };
    Some(Breakdown {
        client: part(0),
        handover: part(1),
        scheduler: part(2),
        dispatch: part(3),
    })
}

fn summarize(runs: &[RunRes]) -> Vec<Summary> {
    let mut keys: Vec<(String, String, usize)> = Vec::new();
    for r in runs {
        let k = (r.phase.clone(), r.arch.clone(), r.clients);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut out: Vec<Summary> = keys
        .into_iter()
        .map(|(phase, arch, clients)| {
            let rs: Vec<&RunRes> = runs
                .iter()
                .filter(|r| r.phase == phase && r.arch == arch && r.clients == clients)
                .collect();
            let m = |f: &dyn Fn(&RunRes) -> f64| {
                median(&rs.iter().map(|r| f(r)).collect::<Vec<_>>()).unwrap_or(f64::NAN)
            };
            let vm = |f: &dyn Fn(&Victim) -> u64| {
                let v: Vec<f64> = rs
                    .iter()
                    .filter_map(|r| r.victim.as_ref().map(|v| f(v) as f64))
                    .collect();
                median(&v)
            };
            let victim_targets = (arch == "pspat")
                .then(|| targets::victim_targets(runs, clients))
                .flatten();
            Summary {
                phase,
                arch,
                clients,
                decisions_per_s: m(&|r| r.decisions_per_s),
                jain: m(&|r| r.jain),
                max_share_err: m(&|r| r.max_share_err),
                victim_p50_ns: vm(&|v| v.p50_ns),
                victim_p99_ns: vm(&|v| v.p99_ns),
                victim_p999_ns: vm(&|v| v.p999_ns),
                victim_bound_ns: vm(&|v| v.bound_ns),
                victim_breakdown: median_breakdown(&rs),
                victim_targets,
                drop_from_peak: None,
            }
        })
        .collect();
    // Drop from the peak, per (phase, arch).
    let peaks: Vec<f64> = out
        .iter()
        .map(|s| {
            out.iter()
                .filter(|o| o.phase == s.phase && o.arch == s.arch)
                .map(|o| o.decisions_per_s)
                .fold(0.0, f64::max)
        })
        .collect();
    for (s, peak) in out.iter_mut().zip(peaks) {
        if peak > 0.0 {
            s.drop_from_peak = Some(1.0 - s.decisions_per_s / peak);
        }
    }
    out
}

/// Every run and the medians.
#[derive(Debug, Serialize)]
pub struct PspatReport {
    /// Every run measured.
    pub runs: Vec<RunRes>,
    /// Medians per (phase, arch, clients).
    pub summary: Vec<Summary>,
    /// Stopped early by the stop flag: fewer runs than planned.
    #[serde(skip)]
    pub partial: bool,
}

/// Runs every (run, phase, clients, arch) in that order (architectures
/// interleaved, so drift on a noisy machine hits all); `progress` hears
/// of each run before it starts. `stop` ends the run in progress early
/// (its window cut short) and skips the rest.
pub fn run(p: &Plan, stop: &AtomicBool, mut progress: impl FnMut(&str)) -> Result<PspatReport> {
    let mut runs = Vec::new();
    let mut partial = false;
    'all: for run in 0..p.runs {
        for &ph in &p.phases {
            for &n in &p.clients {
                for &arch in &p.archs {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        partial = true;
                        break 'all;
                    }
                    progress(&format!("{ph:?} {arch:?} {n} clients"));
                    if let Some(r) = arch::run_one(p, ph, arch, n, run, stop)? {
                        runs.push(r);
                    }
                }
            }
        }
    }
    partial |= stop.load(std::sync::atomic::Ordering::Relaxed);
    let summary = summarize(&runs);
    Ok(PspatReport {
        runs,
        summary,
        partial,
    })
}

/// The tables: one per phase, a row per number of clients.
pub fn write_tables(out: &mut dyn Write, p: &Plan, sums: &[Summary]) -> io::Result<()> {
    let get = |ph: &str, arch: &str, n: usize| {
        sums.iter()
            .find(|s| s.phase == ph && s.arch == arch && s.clients == n)
    };
    let archs: Vec<&str> = p.archs.iter().map(|a| a.name()).collect();
    let has = |a: &str| archs.contains(&a);
    for ph in &p.phases {
        let phn = ph.name();
        let (len, link) = p.flow_shape(*ph);
        writeln!(
            out,
            "\n{phn}: {} on {link}, {len}-byte packets, batch {}, medians of {} runs of {:?}",
            p.alg.name(),
            p.batch,
            p.runs,
            p.duration
        )?;
        let mut head = format!("{:>7}", "clients");
        for a in &archs {
            head += &format!(" {:>11}", format!("{a} Mpps"));
        }
        if has("pspat") && has("locked") {
            head += &format!(" {:>13}", "pspat/locked");
        }
        for a in archs.iter().filter(|a| **a != "none") {
            head += &format!(" {:>12}", format!("{a} jain"));
        }
        if *ph == Phase::Overload {
            for a in archs.iter().filter(|a| **a != "none") {
                head += &format!(" {:>16}", format!("{a} victim p99"));
            }
            head += &format!(" {:>9}", "bound");
        } else if has("pspat") {
            head += &format!(" {:>10}", "pspat drop");
        }
        writeln!(out, "{head}")?;
        for &n in &p.clients {
            let mut line = format!("{n:>7}");
            for a in &archs {
                let v = get(phn, a, n).map_or(f64::NAN, |s| s.decisions_per_s / 1e6);
                line += &format!(" {v:>11.2}");
            }
            if has("pspat") && has("locked") {
                let r = match (get(phn, "pspat", n), get(phn, "locked", n)) {
                    (Some(a), Some(b)) => a.decisions_per_s / b.decisions_per_s,
                    _ => f64::NAN,
                };
                line += &format!(" {r:>12.2}×");
            }
            for a in archs.iter().filter(|a| **a != "none") {
                let v = get(phn, a, n).map_or(f64::NAN, |s| s.jain);
                line += &format!(" {v:>12.4}");
            }
            if *ph == Phase::Overload {
                let mut bound = f64::NAN;
                for a in archs.iter().filter(|a| **a != "none") {
                    let s = get(phn, a, n);
                    let v = s.and_then(|s| s.victim_p99_ns).unwrap_or(f64::NAN);
                    if *a == "pspat" {
                        bound = s.and_then(|s| s.victim_bound_ns).unwrap_or(f64::NAN);
                    }
                    line += &format!(" {:>13.1} µs", v / 1e3);
                }
                line += &format!(" {:>6.1} µs", bound / 1e3);
            } else if has("pspat") {
                let d = get(phn, "pspat", n)
                    .and_then(|s| s.drop_from_peak)
                    .unwrap_or(f64::NAN);
                line += &format!(" {:>9.1}%", d * 100.0);
            }
            writeln!(out, "{line}")?;
        }
        if *ph == Phase::Overload {
            write_targets(out, p, sums)?;
            write_breakdown(out, p, sums)?;
        }
    }
    Ok(())
}

/// The victim's targets run by run: PSPAT's p99 within its bound, and at
/// most the locked baseline's in the run measured next to it.
fn write_targets(out: &mut dyn Write, p: &Plan, sums: &[Summary]) -> io::Result<()> {
    let counts: Vec<(usize, VictimTargets)> = p
        .clients
        .iter()
        .filter_map(|&n| {
            sums.iter()
                .find(|s| s.phase == "overload" && s.arch == "pspat" && s.clients == n)
                .and_then(|s| s.victim_targets)
                .map(|t| (n, t))
        })
        .collect();
    if counts.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\npspat victim p99, run by run (against the locked run of the same index, measured next to it):"
    )?;
    for (n, t) in counts {
        let mut line = format!(
            "{n:>7} clients: within the bound in {} of {} runs",
            t.in_bound, t.runs
        );
        if t.paired > 0 {
            line += &format!(", at most locked's in {} of {}", t.le_locked, t.paired);
        }
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// The victim's latency by part: p50 / p99 of each, µs (medians over runs).
fn write_breakdown(out: &mut dyn Write, p: &Plan, sums: &[Summary]) -> io::Result<()> {
    writeln!(
        out,
        "\nvictim latency by part, p50 / p99 µs (client: made → send; handover: mailbox until read, or the lock; scheduler: until the link takes it; dispatch: released → output)"
    )?;
    let mut head = format!("{:>7} {:>7}", "clients", "arch");
    for name in breakdown::PARTS {
        head += &format!(" {name:>17}");
    }
    writeln!(out, "{head}")?;
    for &n in &p.clients {
        for a in p.archs.iter().filter(|a| **a != Arch::None) {
            let Some(b) = sums
                .iter()
                .find(|s| s.phase == "overload" && s.arch == a.name() && s.clients == n)
                .and_then(|s| s.victim_breakdown)
            else {
                continue;
            };
            let mut line = format!("{n:>7} {:>7}", a.name());
            for part in b.parts() {
                let cell = format!(
                    "{:.1} / {:.1}",
                    part.p50_ns as f64 / 1e3,
                    part.p99_ns as f64 / 1e3
                );
                line += &format!(" {cell:>17}");
            }
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// Every PSPAT run's `tc -s`-style counters, then what the arbiter
/// thread did in each run's measured window, and where every run's
/// threads spent it.
pub fn write_stats(out: &mut dyn Write, runs: &[RunRes]) -> io::Result<()> {
    write_windows(out, runs)?;
    write_threads(out, runs)?;
    for r in runs {
        if let Some(t) = &r.tc {
            writeln!(
                out,
                "\n{} phase, {} clients, run {}:\n{t}",
                r.phase, r.clients, r.run
            )?;
            if let Some(h) = &r.humble {
                writeln!(
                    out,
                    " humble: {} periods ({} kept, {:.1} ms), lowered at the window's end: {}",
                    h.periods,
                    h.kept,
                    h.humble_ms,
                    if h.lowered { "yes" } else { "no" }
                )?;
            }
        }
    }
    Ok(())
}

/// One row per PSPAT run: the arbiter thread's time in the window.
fn write_windows(out: &mut dyn Write, runs: &[RunRes]) -> io::Result<()> {
    if runs.iter().all(|r| r.window.is_none()) {
        return Ok(()); // no PSPAT run: no table
    }
    writeln!(
        out,
        "\npspat arbiter in the measured window: cpu = share of wall time on a core, busy = in rounds that moved packets, empty = rounds that moved nothing; per second: rounds, yields, spins, sleeps (of them naps), reads put off; gate = times the nap gate opened; full = mailbox-full sends per decision"
    )?;
    writeln!(
        out,
        "{:>10} {:>7} {:>3} {:>5} {:>5} {:>6} {:>7} {:>8} {:>8} {:>8} {:>7} {:>7} {:>8} {:>5} {:>6}",
        "phase",
        "clients",
        "run",
        "cpu",
        "busy",
        "empty",
        "pkts/r",
        "rounds/s",
        "yields/s",
        "spins/s",
        "sleep/s",
        "naps/s",
        "putoff/s",
        "gate",
        "full"
    )?;
    for r in runs {
        let Some(w) = &r.window else { continue };
        let k = |x: f64| format!("{:.0}k", x / 1e3);
        writeln!(
            out,
            "{:>10} {:>7} {:>3} {:>5.2} {:>5.2} {:>6.2} {:>7.1} {:>8} {:>8} {:>8} {:>7.0} {:>7.0} {:>8} {:>5} {:>6.3}",
            r.phase,
            r.clients,
            r.run,
            w.cpu_share,
            w.busy_share,
            w.empty_share,
            w.pkts_per_busy_round,
            k(w.rounds_per_s),
            k(w.yields_per_s),
            k(w.spins_per_s),
            w.sleeps_per_s,
            w.naps_per_s,
            k(w.deferred_reads_per_s),
            w.nap_gate_opened,
            w.full_per_decision
        )?;
    }
    Ok(())
}

/// One row per run: its threads' time on a core and waiting for one
/// (shares of the window, summed over a role's threads) and preemptions.
fn write_threads(out: &mut dyn Write, runs: &[RunRes]) -> io::Result<()> {
    if runs.iter().all(|r| r.threads.is_none()) {
        return Ok(());
    }
    writeln!(
        out,
        "\nthreads in the measured window (kernel schedstat): on = share of wall time on a core, wait = runnable but waiting for one, pre/s = involuntary switches per second; clients summed; @ = the cores the role's threads last ran on at the window's end"
    )?;
    writeln!(
        out,
        "{:>10} {:>7} {:>7} {:>3} {:>28} {:>28} {:>28}",
        "phase",
        "arch",
        "clients",
        "run",
        "arbiter on/wait/pre/s",
        "clients on/wait/pre/s",
        "victim on/wait/pre/s"
    )?;
    let cell = |r: &RoleWindow| {
        let cores: Vec<String> = (0..64)
            .filter(|n| r.cores >> n & 1 == 1)
            .map(|n| n.to_string())
            .collect();
        format!(
            "{:.2}/{:.2}/{:.0} @{}",
            r.cpu,
            r.wait,
            r.preempted_per_s,
            cores.join(",")
        )
    };
    for r in runs {
        let Some(t) = &r.threads else { continue };
        writeln!(
            out,
            "{:>10} {:>7} {:>7} {:>3} {:>28} {:>28} {:>28}",
            r.phase,
            r.arch,
            r.clients,
            r.run,
            cell(&t.arbiter),
            cell(&t.clients),
            cell(&t.victim)
        )?;
    }
    Ok(())
}

/// Whether the plan has the throughput phase (the plot's data).
pub fn has_throughput(p: &Plan) -> bool {
    p.phases.contains(&Phase::Throughput)
}

/// The throughput-vs-clients plot.
pub fn plot(file: &std::path::Path, p: &Plan, sums: &[Summary]) -> Result<()> {
    let pts = |arch: &str| -> Vec<(f64, f64)> {
        p.clients
            .iter()
            .filter_map(|&n| {
                sums.iter()
                    .find(|s| s.phase == "throughput" && s.arch == arch && s.clients == n)
                    .map(|s| (n as f64, s.decisions_per_s / 1e6))
            })
            .collect()
    };
    crate::svg::Chart {
        title: format!(
            "{} decisions/s vs clients ({}-byte packets, batch {})",
            p.alg.name(),
            p.len,
            p.batch
        ),
        x_desc: "clients",
        y_desc: "million packets/s",
        log_x: true,
        series: p
            .archs
            .iter()
            .map(|a| (a.name().to_string(), pts(a.name())))
            .collect(),
    }
    .draw(file)
}

#[cfg(test)]
mod tests {
    use pktsched_runtime::pspat::ArbiterStats;

    use super::ArbiterWindow;

    #[test]
    fn the_window_is_the_difference_of_the_counters_over_its_length() {
        let a = ArbiterStats {
            loops: 1_000,
            busy_loops: 400,
            decisions: 4_000,
            busy_loop_ns: 1_000_000,
            cpu_ns: 5_000_000,
            yields: 10,
            ..ArbiterStats::default()
        };
        let b = ArbiterStats {
            loops: 3_000,
            busy_loops: 1_400,
            decisions: 54_000,
            busy_loop_ns: 251_000_000,
            cpu_ns: 405_000_000,
            yields: 1_010,
            sleeps: 5,
            ..a
        };
        let w = ArbiterWindow::between(&a, &b, 0.5, (100, 600));
        assert!((w.cpu_share - 0.8).abs() < 1e-9, "{w:?}");
        assert!((w.busy_share - 0.5).abs() < 1e-9, "{w:?}");
        assert!((w.rounds_per_s - 4_000.0).abs() < 1e-9, "{w:?}");
        assert!((w.empty_share - 0.5).abs() < 1e-9, "{w:?}");
        assert!((w.pkts_per_busy_round - 50.0).abs() < 1e-9, "{w:?}");
        assert!((w.yields_per_s - 2_000.0).abs() < 1e-9, "{w:?}");
        assert!((w.sleeps_per_s - 10.0).abs() < 1e-9, "{w:?}");
        assert!((w.full_per_decision - 0.01).abs() < 1e-9, "{w:?}");
        // Counters that went back (a run that restarted) give no negatives.
        let back = ArbiterWindow::between(&b, &a, 0.5, (600, 100));
        assert!(back.rounds_per_s == 0.0 && back.full_per_decision == 0.0);
    }
}
