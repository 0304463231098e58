//! `pktsched bench pspat`: the PSPAT runtime against the `tc` architecture
//! (one locked scheduler that every client runs itself) and no scheduler
//! at all, side by side in one invocation.
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

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use std::io::Write;

use anyhow::{Result, anyhow, bail};
use hdrhistogram::Histogram;
use pktsched_core::{Algorithm, FlowId, Nanos, Pkt, Rate, Scheduler};
use pktsched_runtime::locked::Locked;
use pktsched_runtime::output::Output;
use pktsched_runtime::pspat::{Clock, Config, Pspat, StopMode, Stopped, add_flows};
use serde::Serialize;

/// Arguments of `bench pspat`.
#[derive(Debug, clap::Args)]
pub(crate) struct PspatArgs {
    /// Numbers of (non-victim) clients, comma separated (1..=128).
    #[arg(long, default_value = "1,2,4,8,16,32,64,128")]
    clients: String,
    /// Architectures: pspat, locked (the tc way), none (no scheduler).
    #[arg(long, default_value = "pspat,locked,none")]
    archs: String,
    /// Phases: throughput, overload.
    #[arg(long, default_value = "throughput,overload")]
    phases: String,
    /// Scheduling algorithm (fifo, prio, rr, drr, wf2q, qfq).
    #[arg(long, default_value = "qfq")]
    alg: String,
    /// Weights of the clients' flows, comma separated, cycled.
    #[arg(long, default_value = "1")]
    weights: String,
    /// Packets a client hands over at once (one lock, or one mailbox
    /// handshake, per batch); 1 is how `tc` works: one lock per packet.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Per-flow queue limit in the scheduler (packets).
    #[arg(long, default_value_t = 256)]
    limit: u32,
    /// Throughput phase: link rate (far above what the clients can send).
    #[arg(long, default_value = "10tbit")]
    link: String,
    /// Throughput phase: packet length (bytes).
    #[arg(long, default_value_t = 64)]
    len: u32,
    /// Overload phase: link rate.
    #[arg(long, default_value = "10gbit")]
    overload_link: String,
    /// Overload phase: packet length of every client (bytes).
    #[arg(long, default_value_t = 1500)]
    overload_len: u32,
    /// Overload phase: offered load of the clients together, as a multiple
    /// of the link rate (split in proportion to the weights), or `max` for
    /// clients that send as fast as they can.
    #[arg(long, default_value = "2")]
    overload: String,
    /// Overload phase: the victim's weight (the others' are `--weights`).
    #[arg(long, default_value_t = 50)]
    victim_weight: u32,
    /// Overload phase: the victim's sending rate.
    #[arg(long, default_value = "100mbit")]
    victim_rate: String,
    /// Measured time per run (after the warm-up), e.g. `500ms`, `2s`.
    #[arg(long, default_value = "500ms")]
    duration: String,
    /// Warm-up per run before measuring.
    #[arg(long, default_value = "100ms")]
    warmup: String,
    /// Runs per configuration; the tables show medians.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// PSPAT dispatcher threads (0: the arbiter transmits).
    #[arg(long, default_value_t = 0)]
    dispatchers: usize,
    /// PSPAT: clients transmit their own cleared packets (the userspace
    /// PSPAT arrangement) instead of the arbiter; needs 0 dispatchers.
    #[arg(long)]
    client_transmit: bool,
    /// PSPAT Δ_A: minimum time between arbiter rounds (`0` back to back).
    #[arg(long, default_value = "0ns")]
    scan_interval: String,
    /// PSPAT: minimum time between two reads of one mailbox.
    #[arg(long, default_value = "1us")]
    read_interval: String,
    /// Do not pin threads (default: arbiter on core 0, PSPAT clients and
    /// dispatchers on core 1; locked and none clients are never pinned).
    #[arg(long)]
    no_pin: bool,
    /// Write the throughput-vs-clients plot here (SVG).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Print JSON (every run, then the medians) instead of tables.
    #[arg(long)]
    json: bool,
    /// After the tables, print every PSPAT run's counters the way `tc -s`
    /// does (sent, dropped by reason, backlog, where the rest went) plus
    /// the arbiter's and each client's.
    #[arg(long)]
    stats: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Arch {
    Pspat,
    Locked,
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Phase {
    Throughput,
    Overload,
}

/// Everything parsed and checked.
#[derive(Debug)]
struct Plan {
    clients: Vec<usize>,
    archs: Vec<Arch>,
    phases: Vec<Phase>,
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
    pin: bool,
}

fn list<T>(name: &str, s: &str, f: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>> {
    let v: Vec<T> = s
        .split(',')
        .map(|x| f(x.trim()).map_err(|e| anyhow!("--{name}: {e}")))
        .collect::<Result<_>>()?;
    if v.is_empty() {
        bail!("--{name} is empty");
    }
    Ok(v)
}

fn duration(name: &str, s: &str) -> Result<Duration> {
    let d = pktsched_core::units::parse_duration(s).map_err(|e| anyhow!("--{name}: {e}"))?;
    Ok(Duration::from_nanos(d.as_u64()))
}

fn rate(name: &str, s: &str) -> Result<Rate> {
    Rate::parse(s).map_err(|e| anyhow!("--{name}: {e}"))
}

impl Plan {
    fn new(a: &PspatArgs) -> Result<Plan> {
        let clients = list("clients", &a.clients, |s| {
            let n: usize = s
                .parse()
                .map_err(|_| format!("`{s}` is not a number; allowed: 1..=128"))?;
            if !(1..=128).contains(&n) {
                return Err(format!("{n} clients; allowed: 1..=128 (plus the victim)"));
            }
            Ok(n)
        })?;
        let archs = list("archs", &a.archs, |s| match s {
            "pspat" => Ok(Arch::Pspat),
            "locked" | "tc" => Ok(Arch::Locked),
            "none" => Ok(Arch::None),
            _ => Err(format!(
                "unknown architecture `{s}`; allowed: pspat, locked, none"
            )),
        })?;
        let phases = list("phases", &a.phases, |s| match s {
            "throughput" => Ok(Phase::Throughput),
            "overload" => Ok(Phase::Overload),
            _ => Err(format!(
                "unknown phase `{s}`; allowed: throughput, overload"
            )),
        })?;
        let alg = Algorithm::parse(&a.alg).map_err(|e| anyhow!("--alg: {e}"))?;
        let weights = list("weights", &a.weights, |s| {
            s.parse::<u32>()
                .ok()
                .filter(|&w| (1..=65536).contains(&w))
                .ok_or_else(|| format!("weight `{s}`; allowed: 1..=65536"))
        })?;
        if !(1..=4096).contains(&a.batch) {
            bail!("--batch {}; allowed: 1..=4096", a.batch);
        }
        if a.limit == 0 {
            bail!("--limit 0; allowed: at least 1 packet");
        }
        let overload = match a.overload.as_str() {
            "max" => None,
            s => match s.parse::<f64>() {
                Ok(x) if x > 0.0 && x <= 1000.0 => Some(x),
                _ => bail!("--overload `{s}`; allowed: a factor in (0, 1000] or `max`"),
            },
        };
        if a.runs == 0 {
            bail!("--runs 0; allowed: at least 1");
        }
        let plan = Plan {
            clients,
            archs,
            phases,
            alg,
            weights,
            batch: a.batch,
            limit: a.limit,
            link: rate("link", &a.link)?,
            len: a.len,
            overload_link: rate("overload-link", &a.overload_link)?,
            overload_len: a.overload_len,
            overload,
            victim_weight: a.victim_weight,
            victim_rate: rate("victim-rate", &a.victim_rate)?,
            duration: duration("duration", &a.duration)?,
            warmup: duration("warmup", &a.warmup)?,
            runs: a.runs,
            dispatchers: a.dispatchers,
            client_transmit: a.client_transmit,
            scan_interval: duration("scan-interval", &a.scan_interval)?,
            read_interval: duration("read-interval", &a.read_interval)?,
            pin: !a.no_pin && core_affinity::get_core_ids().is_some_and(|c| c.len() >= 2),
        };
        plan.check_sizes(a)?;
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

    /// Stated limits of every size, and rates at which a run can measure
    /// something in its duration.
    fn check_sizes(&self, a: &PspatArgs) -> Result<()> {
        use crate::args::within;
        within("len", u64::from(a.len), 64, 65535)?;
        within("overload-len", u64::from(a.overload_len), 64, 65535)?;
        within("runs", a.runs as u64, 1, 1000)?;
        within("limit", u64::from(a.limit), 1, 1 << 20)?;
        within("victim-weight", u64::from(a.victim_weight), 1, 65536)?;
        within("dispatchers", a.dispatchers as u64, 0, 64)?;
        for (flag, d) in [("duration", self.duration), ("warmup", self.warmup)] {
            if d > Duration::from_secs(3600) {
                bail!("--{flag} {d:?}: allowed at most 1h");
            }
        }
        if self.duration < Duration::from_millis(10) {
            bail!(
                "--duration {:?}: too short to measure: allowed 10ms..=1h",
                self.duration
            );
        }
        for ph in &self.phases {
            let (len, link) = self.flow_shape(*ph);
            let flag = match ph {
                Phase::Throughput => "link",
                Phase::Overload => "overload-link",
            };
            // Packets the link can carry in the measured time.
            let fit = link.as_bps() as f64 * self.duration.as_secs_f64() / (f64::from(len) * 8.0);
            if fit < 100.0 {
                let need = Rate::from_bps(
                    (100.0 * f64::from(len) * 8.0 / self.duration.as_secs_f64()).ceil() as u64,
                )
                .unwrap_or(Rate::MAX);
                bail!(
                    "--{flag} {link}: only {fit:.1} packets of {len} bytes fit in --duration \
                     {:?}; allowed rates of at least {need} (100 packets), or a longer duration",
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
            arbiter_core: self.pin.then_some(0),
            dispatcher_cores: if self.pin { vec![1] } else { Vec::new() },
            max_clients: 129,
            ..Config::new(link)
        }
    }
}

/// The output every architecture transmits into: per-flow packet counters
/// the main thread samples (one writer per counter), and the victim's
/// latency histogram.
struct BenchOut {
    counts: Arc<Vec<AtomicU64>>,
    local: Vec<u64>,
    clock: Clock,
    victim: Option<u32>,
    /// Latency is recorded for packets stamped at or after this time.
    from: Nanos,
    hist: Histogram<u64>,
}

impl BenchOut {
    fn new(flows: usize, clock: Clock, victim: Option<u32>, from: Nanos) -> Result<BenchOut> {
        Ok(BenchOut {
            counts: Arc::new((0..flows).map(|_| AtomicU64::new(0)).collect()),
            local: vec![0; flows],
            clock,
            victim,
            from,
            hist: Histogram::new(3).map_err(|e| anyhow!("histogram: {e}"))?,
        })
    }
}

impl Output<u64> for BenchOut {
    fn transmit(&mut self, batch: &mut Vec<Pkt<u64>>) {
        let now = if self.victim.is_some() {
            self.clock.now()
        } else {
            Nanos::ZERO
        };
        for p in batch.drain(..) {
            let f = p.flow.0 as usize;
            if let (Some(c), Some(a)) = (self.local.get_mut(f), self.counts.get(f)) {
                *c += 1;
                a.store(*c, Ordering::Relaxed);
            }
            if self.victim == Some(p.flow.0) && p.ts >= self.from {
                let _ = self.hist.record(now.0.saturating_sub(p.ts.0).max(1));
            }
        }
    }
}

/// One generator thread's recipe.
#[derive(Clone, Copy, Debug)]
struct Gen {
    flow: FlowId,
    len: u32,
    batch: usize,
    /// Packets per second; `None` = greedy.
    pps: Option<f64>,
    /// Most packets sent at once to catch up after a late wake-up (1 for
    /// the victim: strictly paced).
    burst: u64,
    /// Stamp packets with the clock (only the victim needs it).
    stamp: bool,
    /// The only generator on its core: spin, rather than yield, while the
    /// mailbox is full.
    alone: bool,
    /// Call `send` with nothing to send while waiting to be due, so a
    /// client that transmits its own cleared packets does so while idle.
    poll_idle: bool,
}

/// What a generator did.
#[derive(Clone, Copy, Debug, Default)]
struct GenDone {
    /// Packets handed over (not counting any still in its hands at stop).
    sent: u64,
}

/// Runs a generator until `stop`; `send` hands over the front of the queue
/// and returns how many it took, or `None` when the runtime refuses.
///
/// A paced generator sends what is due since it started (`pps · t`), in
/// batches of at most `batch`, catching up by at most `burst` packets.
fn generate(
    g: Gen,
    stop: &AtomicBool,
    clock: Clock,
    mut send: impl FnMut(&mut VecDeque<Pkt<u64>>) -> Option<usize>,
) -> GenDone {
    let mut q: VecDeque<Pkt<u64>> = VecDeque::with_capacity(g.batch);
    let mut made = 0u64;
    let mut sent = 0u64;
    let t0 = clock.now().0;
    // Packets owed but skipped because they were more than `burst` late.
    let mut skipped = 0u64;
    let mut full_tries = 0u32;
    while !stop.load(Ordering::Relaxed) {
        if q.is_empty() {
            let mut n = g.batch as u64;
            if let Some(pps) = g.pps {
                let now = clock.now().0;
                let due = ((now - t0) as f64 * pps / 1e9) as u64;
                let owed = due.saturating_sub(made + skipped);
                if owed == 0 {
                    if g.poll_idle {
                        let _ = send(&mut q);
                    }
                    // Next packet in `wait` ns.
                    let next = t0 + ((made + skipped + 1) as f64 * 1e9 / pps) as u64;
                    let wait = next.saturating_sub(now);
                    if wait > 200_000 {
                        std::thread::sleep(Duration::from_nanos(wait - 100_000));
                    } else {
                        std::thread::yield_now();
                    }
                    continue;
                }
                if owed > g.burst {
                    skipped += owed - g.burst;
                }
                n = n.min(owed.min(g.burst));
            }
            let ts = if g.stamp { clock.now() } else { Nanos::ZERO };
            for _ in 0..n {
                q.push_back(Pkt::new(g.flow, g.len, ts, made));
                made += 1;
            }
        }
        match send(&mut q) {
            None => break,
            Some(0) => {
                // Full: a client alone on its core waits on the CPU (the
                // arbiter frees a line within a round; a yield would let
                // the mailbox run dry and the two threads then share the
                // line being written); otherwise let the other clients run.
                full_tries += 1;
                if g.alone && full_tries < 64 {
                    for _ in 0..32 {
                        std::hint::spin_loop();
                    }
                } else {
                    full_tries = 0;
                    std::thread::yield_now();
                }
            }
            Some(n) => {
                full_tries = 0;
                sent += n as u64;
            }
        }
    }
    GenDone { sent }
}

/// Pins the calling thread when asked.
fn pin(core: Option<usize>) {
    if let Some(id) = core {
        let _ = core_affinity::set_for_current(core_affinity::CoreId { id });
    }
}

#[derive(Clone, Debug, Default, Serialize)]
struct Victim {
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
}

#[derive(Clone, Debug, Default, Serialize)]
struct RunRes {
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
    /// The `tc -s`-style report (PSPAT runs).
    #[serde(skip)]
    tc: Option<String>,
}

fn sample(outs: &[Arc<Vec<AtomicU64>>], flows: usize) -> Vec<u64> {
    let mut v = vec![0u64; flows];
    for o in outs {
        for (i, c) in o.iter().enumerate().take(flows) {
            v[i] += c.load(Ordering::Relaxed);
        }
    }
    v
}

fn jain_and_err(counts: &[u64], weights: &[u32]) -> (f64, f64) {
    let x: Vec<f64> = counts
        .iter()
        .zip(weights)
        .map(|(&c, &w)| c as f64 / f64::from(w))
        .collect();
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    let jain = if s2 > 0.0 {
        s * s / (x.len() as f64 * s2)
    } else {
        0.0
    };
    let total: f64 = counts.iter().map(|&c| c as f64).sum();
    let wsum: f64 = weights.iter().map(|&w| f64::from(w)).sum();
    let err = counts
        .iter()
        .zip(weights)
        .map(|(&c, &w)| {
            let share = c as f64 / total.max(1.0);
            let want = f64::from(w) / wsum;
            (share / want - 1.0).abs()
        })
        .fold(0.0, f64::max);
    (jain, err)
}

/// One measured run of one architecture.
fn run_one(p: &Plan, ph: Phase, arch: Arch, n: usize, run: usize) -> Result<RunRes> {
    let (len, link) = p.flow_shape(ph);
    let flows = n + usize::from(ph == Phase::Overload);
    let weights: Vec<u32> = (0..n).map(|i| p.weights[i % p.weights.len()]).collect();
    let clock = Clock::new();
    let from = Nanos(u64::try_from(p.warmup.as_nanos()).unwrap_or(u64::MAX));
    let victim = (ph == Phase::Overload).then_some(n as u32);
    let stop = Arc::new(AtomicBool::new(false));
    // Generators.
    // Offered load f × link, split in proportion to the weights, so that
    // with f > 1 every client is backlogged and its share is its weight's.
    let wsum: f64 = weights.iter().map(|&w| f64::from(w)).sum();
    let pps_of = |i: usize| match (ph, p.overload) {
        (Phase::Overload, Some(f)) => {
            Some(link.as_bps() as f64 * f * f64::from(weights[i]) / wsum / (f64::from(len) * 8.0))
        }
        _ => None,
    };
    let mut gens: Vec<Gen> = (0..n)
        .map(|i| Gen {
            flow: FlowId(i as u32),
            len,
            batch: p.batch,
            pps: pps_of(i),
            burst: 256,
            stamp: false,
            alone: n == 1 && ph == Phase::Throughput,
            poll_idle: p.client_transmit,
        })
        .collect();
    if ph == Phase::Overload {
        gens.push(Gen {
            flow: FlowId(n as u32),
            len,
            batch: 1,
            pps: Some(p.victim_rate.as_bps().max(1) as f64 / (f64::from(len) * 8.0)),
            burst: 1,
            stamp: true,
            alone: false,
            poll_idle: p.client_transmit,
        });
    }
    let mut sched = p.alg.build_send::<u64>();
    p.add_flows(sched.as_mut(), n, ph)
        .map_err(|e| anyhow!("flows: {e}"))?;
    let client_core = p.pin.then_some(1);
    let mut res = RunRes {
        phase: format!("{ph:?}").to_lowercase(),
        arch: format!("{arch:?}").to_lowercase(),
        clients: n,
        run,
        ..RunRes::default()
    };
    let measure = |outs: &[Arc<Vec<AtomicU64>>]| -> (Vec<u64>, Vec<u64>, f64) {
        std::thread::sleep(p.warmup);
        let t0 = clock.now();
        let c0 = sample(outs, flows);
        std::thread::sleep(p.duration);
        let t1 = clock.now();
        let c1 = sample(outs, flows);
        (c0, c1, (t1.0 - t0.0) as f64 / 1e9)
    };
    let (c0, c1, secs, hist);
    match arch {
        Arch::Pspat => {
            let cfg = p.config(ph);
            let ct = cfg.client_transmit;
            let mut outs = Vec::new();
            let mut counters = Vec::new();
            for _ in 0..if ct { 0 } else { cfg.dispatchers.max(1) } {
                let o = BenchOut::new(flows, clock, victim, from)?;
                counters.push(o.counts.clone());
                outs.push(o);
            }
            let rt = Pspat::start(&cfg, sched, outs, clock).map_err(|e| anyhow!("{e}"))?;
            let mut handles = Vec::new();
            for g in gens {
                let mut c = rt.client().map_err(|e| anyhow!("{e}"))?;
                // Client-transmit: each client has its own output.
                let mut out = if ct {
                    let o = BenchOut::new(flows, clock, victim, from)?;
                    counters.push(o.counts.clone());
                    Some(o)
                } else {
                    None
                };
                let stop = stop.clone();
                handles.push(std::thread::spawn(move || {
                    pin(client_core);
                    let mut cleared = Vec::new();
                    let done = generate(g, &stop, clock, |q| {
                        let r = match c.send_batch(q) {
                            Ok((k, _)) => Some(k),
                            Err(Stopped) => None,
                        };
                        if let Some(o) = out.as_mut()
                            && c.take_cleared(&mut cleared) > 0
                        {
                            o.transmit(&mut cleared);
                        }
                        r
                    });
                    (done, c, out)
                }));
            }
            (c0, c1, secs) = measure(&counters);
            stop.store(true, Ordering::Relaxed);
            let mut done = Vec::new();
            for h in handles {
                done.push(h.join().map_err(|_| anyhow!("client thread panicked"))?);
            }
            let r = rt.stop(StopMode::Return).map_err(|e| anyhow!("{e}"))?;
            // Client-transmit: what is left in the return mailboxes.
            let mut client_outs = Vec::new();
            for (_, c, out) in &mut done {
                if let Some(o) = out.as_mut() {
                    let mut cleared = Vec::new();
                    c.take_cleared(&mut cleared);
                    o.transmit(&mut cleared);
                }
                if let Some(o) = out.take() {
                    client_outs.push(o);
                }
            }
            res.sent = done.iter().map(|d| d.0.sent).sum();
            res.delivered = r.arbiter.decisions + r.flushed - r.returned_cleared;
            res.dropped = r.arbiter.dropped;
            res.returned = r.returned.len() as u64;
            res.mailbox_full = r.clients.iter().map(|c| c.mailbox_full).sum();
            res.backpressure_events = r.clients.iter().map(|c| c.backpressure_events).sum();
            res.arbiter_avg_loop_ns = r.arbiter.avg_loop_ns();
            res.arbiter_max_loop_ns = r.arbiter.max_loop_ns;
            res.arbiter_p99_loop_ns = r.arbiter.loop_ns_quantile(0.99);
            res.arbiter_pkts_per_loop = r.arbiter.pkts_per_loop();
            res.arbiter_sleeps = r.arbiter.sleeps;
            res.tc = Some(r.tc_style(p.alg.name()));
            let mut h = Histogram::<u64>::new(3).map_err(|e| anyhow!("{e}"))?;
            for o in r.outputs.iter().chain(&client_outs) {
                h.add(&o.hist).map_err(|e| anyhow!("{e}"))?;
            }
            hist = h;
            let out_total: u64 = r
                .outputs
                .iter()
                .chain(&client_outs)
                .flat_map(|o| o.local.iter())
                .sum();
            if out_total != res.delivered {
                bail!(
                    "pspat lost track of packets: {} cleared and not handed back, but outputs saw {out_total}",
                    res.delivered
                );
            }
        }
        Arch::Locked => {
            let cfg = p.config(ph);
            let out = BenchOut::new(flows, clock, victim, from)?;
            let counters = vec![out.counts.clone()];
            let lk = Locked::new(&cfg, sched, out, clock).map_err(|e| anyhow!("{e}"))?;
            let mut handles = Vec::new();
            for g in gens {
                let mut c = lk.client();
                let stop = stop.clone();
                handles.push(std::thread::spawn(move || {
                    let mut scratch = Vec::with_capacity(g.batch);
                    let done = generate(g, &stop, clock, |q| {
                        let k = q.len();
                        scratch.extend(q.drain(..));
                        c.send_batch(&mut scratch);
                        Some(k)
                    });
                    (done, c.contended)
                }));
            }
            (c0, c1, secs) = measure(&counters);
            stop.store(true, Ordering::Relaxed);
            let done: Vec<(GenDone, u64)> = handles
                .into_iter()
                .map(|h| h.join().map_err(|_| anyhow!("client thread panicked")))
                .collect::<Result<_>>()?;
            let r = lk.stop(StopMode::Return).map_err(|e| anyhow!("{e}"))?;
            res.sent = done.iter().map(|d| d.0.sent).sum();
            res.lock_contended = done.iter().map(|d| d.1).sum();
            res.delivered = r.decisions + r.flushed;
            res.dropped = r.dropped.iter().map(|d| d.iter().sum::<u64>()).sum();
            res.returned = r.returned.len() as u64;
            hist = r.output.hist;
        }
        Arch::None => {
            let mut counters = Vec::new();
            let mut handles = Vec::new();
            for g in gens {
                let mut out = BenchOut::new(flows, clock, victim, from)?;
                counters.push(out.counts.clone());
                let stop = stop.clone();
                handles.push(std::thread::spawn(move || {
                    let mut scratch = Vec::with_capacity(g.batch);
                    let done = generate(g, &stop, clock, |q| {
                        let k = q.len();
                        scratch.extend(q.drain(..));
                        out.transmit(&mut scratch);
                        Some(k)
                    });
                    (done, out.hist)
                }));
            }
            (c0, c1, secs) = measure(&counters);
            stop.store(true, Ordering::Relaxed);
            let mut h = Histogram::<u64>::new(3).map_err(|e| anyhow!("{e}"))?;
            for t in handles {
                let (d, hh) = t.join().map_err(|_| anyhow!("client thread panicked"))?;
                res.sent += d.sent;
                h.add(&hh).map_err(|e| anyhow!("{e}"))?;
            }
            res.delivered = res.sent;
            hist = h;
        }
    }
    // Nothing lost: every packet handed over was delivered, dropped with a
    // reason, or handed back at stop.
    if res.sent != res.delivered + res.dropped + res.returned {
        bail!(
            "{arch:?}: accounting mismatch: sent {} != delivered {} + dropped {} + returned {}",
            res.sent,
            res.delivered,
            res.dropped,
            res.returned
        );
    }
    let window: Vec<u64> = c1.iter().zip(&c0).map(|(b, a)| b - a).collect();
    let total: u64 = window.iter().sum();
    res.decisions_per_s = total as f64 / secs.max(1e-9);
    res.gbit_per_s = res.decisions_per_s * f64::from(len) * 8.0 / 1e9;
    (res.jain, res.max_share_err) = jain_and_err(&window[..n], &weights);
    if ph == Phase::Overload {
        let phi = f64::from(p.victim_weight) / (wsum + f64::from(p.victim_weight));
        let l_over_r = f64::from(len) * 8e9 / link.as_bps().max(1) as f64;
        // Own packet at the guaranteed rate + QFQ's T-WFI (3·σ_k + 2·L)/R
        // (all packets the same length) + Δ_A.
        // Δ_A for PSPAT: a packet may arrive just after its mailbox was
        // read, wait out the read (or scan) interval and the round in
        // progress, then the round that releases it: the interval plus two
        // rounds, taken at their 99th percentile.
        let delta_a = if arch == Arch::Pspat {
            p.scan_interval.max(p.read_interval).as_nanos() as f64
                + 2.0 * res.arbiter_p99_loop_ns as f64
        } else {
            0.0
        };
        let wsum_total =
            weights.iter().map(|&w| u64::from(w)).sum::<u64>() + u64::from(p.victim_weight);
        let twfi_ns = pktsched_sim::metrics::qfq_twfi_ps(
            p.victim_weight,
            len,
            wsum_total,
            len,
            link.as_bps().max(1),
        ) / 1000.0;
        let bound = l_over_r / phi + twfi_ns + delta_a;
        let q = |x: f64| hist.value_at_quantile(x);
        res.victim = Some(Victim {
            samples: hist.len(),
            p50_ns: q(0.5),
            p90_ns: q(0.9),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            max_ns: hist.max(),
            bound_ns: bound.ceil() as u64,
        });
    }
    Ok(res)
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Medians over runs of one (phase, arch, clients).
#[derive(Clone, Debug, Serialize)]
struct Summary {
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
    drop_from_peak: Option<f64>,
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
            let m = |f: &dyn Fn(&RunRes) -> f64| median(rs.iter().map(|r| f(r)).collect());
            let vm = |f: &dyn Fn(&Victim) -> u64| {
                let v: Vec<f64> = rs
                    .iter()
                    .filter_map(|r| r.victim.as_ref().map(|v| f(v) as f64))
                    .collect();
                (!v.is_empty()).then(|| median(v))
            };
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
                drop_from_peak: None,
            }
        })
        .collect();
    // Drop from the peak, per (phase, arch).
    let peaks: Vec<(String, String, f64)> = out
        .iter()
        .map(|s| {
            let peak = out
                .iter()
                .filter(|o| o.phase == s.phase && o.arch == s.arch)
                .map(|o| o.decisions_per_s)
                .fold(0.0, f64::max);
            (s.phase.clone(), s.arch.clone(), peak)
        })
        .collect();
    for (s, (_, _, peak)) in out.iter_mut().zip(peaks) {
        if peak > 0.0 {
            s.drop_from_peak = Some(1.0 - s.decisions_per_s / peak);
        }
    }
    out
}

fn print_tables(p: &Plan, sums: &[Summary], out: &mut crate::output::Stdout) -> Result<()> {
    let get = |ph: &str, arch: &str, n: usize| {
        sums.iter()
            .find(|s| s.phase == ph && s.arch == arch && s.clients == n)
    };
    let archs: Vec<String> = p
        .archs
        .iter()
        .map(|a| format!("{a:?}").to_lowercase())
        .collect();
    for ph in &p.phases {
        let phn = format!("{ph:?}").to_lowercase();
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
        if archs.iter().any(|a| a == "pspat") && archs.iter().any(|a| a == "locked") {
            head += &format!(" {:>13}", "pspat/locked");
        }
        for a in &archs {
            if a != "none" {
                head += &format!(" {:>12}", format!("{a} jain"));
            }
        }
        if *ph == Phase::Overload {
            for a in &archs {
                if a != "none" {
                    head += &format!(" {:>16}", format!("{a} victim p99"));
                }
            }
            head += &format!(" {:>9}", "bound");
        } else if archs.iter().any(|a| a == "pspat") {
            head += &format!(" {:>10}", "pspat drop");
        }
        writeln!(out, "{head}")?;
        for &n in &p.clients {
            let mut line = format!("{n:>7}");
            for a in &archs {
                let v = get(&phn, a, n).map_or(f64::NAN, |s| s.decisions_per_s / 1e6);
                line += &format!(" {v:>11.2}");
            }
            if archs.iter().any(|a| a == "pspat") && archs.iter().any(|a| a == "locked") {
                let r = match (get(&phn, "pspat", n), get(&phn, "locked", n)) {
                    (Some(a), Some(b)) => a.decisions_per_s / b.decisions_per_s,
                    _ => f64::NAN,
                };
                line += &format!(" {r:>12.2}×");
            }
            for a in &archs {
                if a != "none" {
                    let v = get(&phn, a, n).map_or(f64::NAN, |s| s.jain);
                    line += &format!(" {v:>12.4}");
                }
            }
            if *ph == Phase::Overload {
                let mut bound = f64::NAN;
                for a in &archs {
                    if a != "none" {
                        let s = get(&phn, a, n);
                        let v = s.and_then(|s| s.victim_p99_ns).unwrap_or(f64::NAN);
                        if a == "pspat" {
                            bound = s.and_then(|s| s.victim_bound_ns).unwrap_or(f64::NAN);
                        }
                        line += &format!(" {:>13.1} µs", v / 1e3);
                    }
                }
                line += &format!(" {:>6.1} µs", bound / 1e3);
            } else if archs.iter().any(|a| a == "pspat") {
                let d = get(&phn, "pspat", n)
                    .and_then(|s| s.drop_from_peak)
                    .unwrap_or(f64::NAN);
                line += &format!(" {:>9.1}%", d * 100.0);
            }
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

fn plot(file: &std::path::Path, p: &Plan, sums: &[Summary]) -> Result<()> {
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
            .map(|a| {
                let name = format!("{a:?}").to_lowercase();
                let s = pts(&name);
                (name, s)
            })
            .collect(),
    }
    .draw(file)
}

pub(crate) fn run(a: &PspatArgs, out: &mut crate::output::Stdout) -> Result<()> {
    let p = Plan::new(a)?;
    let total = (p.phases.len() * p.clients.len() * p.archs.len() * p.runs) as u64;
    let bar = if a.json {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(total)
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} (eta {eta})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut runs = Vec::new();
    pktsched_runtime::signal::install()?;
    let stop = pktsched_runtime::signal::stop_flag();
    // Runs interleave architectures so drift on a noisy machine hits all.
    // A signal stops at the next run boundary: what was measured is kept.
    'all: for run in 0..p.runs {
        for &ph in &p.phases {
            for &n in &p.clients {
                for &arch in &p.archs {
                    if stop.load(std::sync::atomic::Ordering::Acquire) {
                        break 'all;
                    }
                    bar.set_message(format!("{ph:?} {arch:?} {n} clients"));
                    runs.push(run_one(&p, ph, arch, n, run)?);
                    bar.inc(1);
                }
            }
        }
    }
    bar.finish_and_clear();
    let partial = crate::partial::note(runs.len(), total as usize, "runs");
    let sums = summarize(&runs);
    if let Some(f) = &a.plot {
        if p.phases.contains(&Phase::Throughput) {
            plot(f, &p, &sums)?;
        } else {
            eprintln!("--plot: skipped, it needs the throughput phase");
        }
    }
    if a.json {
        #[derive(Serialize)]
        struct All<'a> {
            runs: &'a [RunRes],
            summary: &'a [Summary],
            #[serde(skip_serializing_if = "Option::is_none")]
            partial: Option<&'a str>,
        }
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&All {
                runs: &runs,
                summary: &sums,
                partial: partial.as_deref(),
            })?
        )?;
        return crate::partial::finish(out);
    }
    print_tables(&p, &sums, out)?;
    if a.stats {
        for r in &runs {
            if let Some(t) = &r.tc {
                writeln!(
                    out,
                    "\n{} phase, {} clients, run {}:\n{t}",
                    r.phase, r.clients, r.run
                )?;
            }
        }
    }
    if let Some(f) = &a.plot {
        writeln!(out, "\nplot: {}", f.display())?;
    }
    if let Some(note) = &partial {
        writeln!(out, "\n{note}")?;
    }
    crate::partial::finish(out)
}
