//! `bench pspat`'s options, checked and resolved into a [`Plan`]: the
//! architectures, phases, client counts and runtime settings to run.

use super::*;

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
    /// PSPAT: `off`, or how long after the last arbiter round the victim's
    /// client runs one itself (`Client::set_assist_after`; the other
    /// clients follow `assist_after`).
    pub victim_assist_after: String,
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
    pub(super) fn parse(s: &str) -> Result<Placement> {
        match s {
            "float" => Ok(Placement::Float),
            "reserve" => Ok(Placement::Reserve),
            "none" => Ok(Placement::None),
            _ => bail!("--placement `{s}`; allowed: float, reserve, none"),
        }
    }

    /// The core of client `i` (`cores` cores on the machine).
    pub(super) fn client_core(self, i: usize, cores: usize) -> Option<usize> {
        match self {
            Placement::Reserve if cores >= 2 => Some(1 + i % (cores - 1)),
            _ => None,
        }
    }

    /// The core of PSPAT's arbiter and of its dispatchers.
    pub(super) fn runtime_cores(self, cores: usize) -> (Option<usize>, Vec<usize>) {
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
    pub(super) fn name(self) -> &'static str {
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
    pub(super) fn name(self) -> &'static str {
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
    pub(super) alg: Algorithm,
    pub(super) weights: Vec<u32>,
    pub(super) batch: usize,
    pub(super) limit: u32,
    pub(super) link: Rate,
    pub(super) len: u32,
    pub(super) overload_link: Rate,
    pub(super) overload_len: u32,
    /// `None`: as fast as possible.
    pub(super) overload: Option<f64>,
    pub(super) victim_weight: u32,
    pub(super) victim_rate: Rate,
    pub(super) duration: Duration,
    pub(super) warmup: Duration,
    pub(super) runs: usize,
    pub(super) dispatchers: usize,
    pub(super) client_transmit: bool,
    pub(super) scan_interval: Duration,
    pub(super) read_interval: Duration,
    /// Where threads run.
    pub placement: Placement,
    /// Cores on the machine.
    pub(super) cores: usize,
    pub(super) arbiter_nice: Option<i32>,
    /// `Config::arbiter_sched`.
    pub(super) arbiter_sched: ArbiterSched,
    /// The arbiter yields (rather than spins) while it waits.
    pub(super) arbiter_yield: bool,
    /// Hand-off threshold (`None`: clients never run rounds).
    pub(super) assist_after: Option<Duration>,
    /// The victim's own hand-off threshold (`None`: as the others).
    pub(super) victim_assist_after: Option<Duration>,
    /// Nap cover (`None`: the arbiter never naps).
    pub(super) nap_cover: Option<Duration>,
    /// `Config::step_aside`.
    pub(super) step_aside: bool,
    /// `Config::starved_assist`.
    pub(super) starved_assist: bool,
    /// `Config::humble`.
    pub(super) humble: bool,
    /// `Config::nap_when_waiting`.
    pub(super) nap_when_waiting: bool,
    /// [`PspatOptions::busy_core`].
    pub busy_core: Option<usize>,
    /// [`PspatOptions::thread_counters`].
    pub(super) thread_counters: bool,
}

/// A switch's value: `on` or `off`.
pub(super) fn on_off(flag: &str, value: &str) -> Result<bool> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        s => bail!("{flag} `{s}`; allowed: on, off"),
    }
}

/// `--busy-core`: `off`, or a core this machine has.
pub(super) fn parse_busy_core(s: &str) -> Result<Option<usize>> {
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

pub(super) fn list<T>(
    name: &str,
    s: &str,
    f: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>> {
    limits::list(name, s, MAX_LIST, |x| {
        f(x).map_err(|e| anyhow!("{name}: {e}"))
    })
}

pub(super) fn named(r: Range<u64>, name: &'static str) -> Range<u64> {
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
            victim_assist_after: match a.victim_assist_after.as_str() {
                "off" => None,
                s => Some(named(INTERVAL, "--victim-assist-after").duration(s)?),
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
    pub(super) fn check_arbiter_switches(&self, a: &PspatOptions) -> Result<()> {
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
    pub(super) fn check_rates(&self, a: &PspatOptions) -> Result<()> {
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
    pub(super) fn flow_shape(&self, ph: Phase) -> (u32, Rate) {
        match ph {
            Phase::Throughput => (self.len, self.link),
            Phase::Overload => (self.overload_len, self.overload_link),
        }
    }

    /// Flows 0..n for the clients, flow n for the victim (overload).
    pub(super) fn add_flows(
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

    pub(super) fn config(&self, ph: Phase) -> Config {
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
