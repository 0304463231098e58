//! The closed-loop scheduler benchmark (`pktsched bench sched`, `bench
//! table`, `demo`): dummynet's harness ([`pktsched_core::harness`]) run on
//! each algorithm, timed, medians over interleaved runs.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pktsched_core::harness::{
    Flowset, Harness, NoSched, QBound, RunStats, parse_count, parse_flowsets,
};
use pktsched_core::policy::{Policy, PolicySched};
use pktsched_core::sched::{SchedParams, SchedVisitor};
use pktsched_core::{Algorithm, FlowConfig, FlowId, Nanos, Pkt, Scheduler};
use serde::Serialize;

use crate::stats::{median, thread_cpu_ns};

/// Most loop iterations (`-n`) per pass: about a minute per pass at the
/// slowest algorithms' cost.
pub const MAX_OPS: u64 = 1_000_000_000;
/// Most timed runs per algorithm.
pub const MAX_RUNS: u32 = 1000;

/// What to measure (the flags of `bench sched`, unparsed where they have
/// their own syntax).
#[derive(Clone, Debug)]
pub struct SchedOptions {
    /// `--alg`: algorithms, comma separated.
    pub alg: String,
    /// `-n`: loop iterations, a count with suffixes.
    pub ops: String,
    /// `--qmin`.
    pub qmin: String,
    /// `--qmax`.
    pub qmax: String,
    /// `--flowsets`.
    pub flowsets: String,
    /// `--runs`.
    pub runs: u32,
    /// `--no-wfi`.
    pub no_wfi: bool,
    /// `--cpu`.
    pub cpu: bool,
}

#[derive(Copy, Clone, Debug)]
enum Alg {
    None,
    Sched(Algorithm),
    /// A policy tree and the name it was given on the command line.
    Policy(&'static NamedPolicy),
}

/// A policy loaded for this run (leaked: one per `--alg` entry, alive for
/// the whole process, so results can name it with a `&'static str`).
#[derive(Debug)]
struct NamedPolicy {
    name: &'static str,
    policy: Policy,
}

impl PartialEq for Alg {
    fn eq(&self, o: &Alg) -> bool {
        self.name() == o.name()
    }
}

impl Alg {
    fn name(self) -> &'static str {
        match self {
            Alg::None => "none",
            Alg::Sched(a) => a.name(),
            Alg::Policy(p) => p.name,
        }
    }

    /// `policy:NAME` (a built-in) or `policy:FILE` (TOML, or DOT by its
    /// extension).
    fn load_policy(spec: &str) -> Result<Alg> {
        let policy = if std::path::Path::new(spec).extension().is_some() {
            let text = pktsched_sim::input_file::read_capped(
                std::path::Path::new(spec),
                "policy",
                pktsched_sim::input_file::MAX_CONFIG_BYTES,
            )
            .map_err(|e| anyhow!("--alg policy:{spec}: {e}"))?;
            Policy::from_named(spec, &text).map_err(|e| anyhow!("--alg policy:{spec}: {e}"))?
        } else {
            Policy::builtin(spec)
                .map_err(|e| anyhow!("--alg policy:{spec}: {e} (or give a .toml/.dot file)"))?
        };
        if let Some(node) = policy.shaped_node() {
            bail!(
                "--alg policy:{spec}: node `{node}` has a rate limit; bench sched runs on a frozen clock (dummynet's harness), where a shaped policy never releases: measure it with `pktsched sim` (algorithm = \"policy\") or drop the rates"
            );
        }
        let name = Box::leak(format!("policy:{spec}").into_boxed_str());
        Ok(Alg::Policy(Box::leak(Box::new(NamedPolicy {
            name,
            policy,
        }))))
    }

    fn parse_list(s: &str) -> Result<Vec<Alg>> {
        let mut out = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            if part.eq_ignore_ascii_case("all") {
                out.push(Alg::None);
                out.extend(Algorithm::ALL.into_iter().map(Alg::Sched));
            } else if part.eq_ignore_ascii_case("none") {
                out.push(Alg::None);
            } else if let Some(p) = part.strip_prefix("policy:") {
                out.push(Alg::load_policy(p)?);
            } else {
                let a = Algorithm::parse(part)
                    .map_err(|e| anyhow!("--alg: {e}, none, all, or policy:NAME|FILE"))?;
                out.push(Alg::Sched(a));
            }
        }
        out.dedup();
        Ok(out)
    }

    /// Builds this algorithm's scheduler for the flowsets `fs` and hands it
    /// to `v` (the one Algorithm → type dispatch is
    /// [`Algorithm::with_sched`]).
    fn visit<V: SchedVisitor<u64>>(self, fs: &[Flowset], v: V) -> V::Output {
        match self {
            Alg::None => v.visit(NoSched::default()),
            Alg::Policy(p) => v.visit(PolicySched::<u64>::new(&p.policy)),
            Alg::Sched(Algorithm::Prio) => {
                // dummynet's prio takes the priority from the weight; here
                // distinct weights map to distinct levels, higher weight
                // first.
                let mut ws: Vec<u32> = fs.iter().map(|f| f.weight).collect();
                ws.sort_unstable_by(|a, b| b.cmp(a));
                ws.dedup();
                let params = SchedParams {
                    prio_levels: ws.len() as u32,
                    ..SchedParams::default()
                };
                Algorithm::Prio.with_sched(params, ByWeight { ws, v })
            }
            Alg::Sched(a) => {
                let drr_quantum = fs
                    .iter()
                    .map(|f| f.len)
                    .max()
                    .unwrap_or(FlowConfig::DEFAULT_MAX_LEN);
                let params = SchedParams {
                    drr_quantum,
                    ..SchedParams::default()
                };
                a.with_sched(params, v)
            }
        }
    }
}

/// Wraps the scheduler in [`PrioByWeight`] before visiting it.
struct ByWeight<V> {
    ws: Vec<u32>,
    v: V,
}

impl<V: SchedVisitor<u64>> SchedVisitor<u64> for ByWeight<V> {
    type Output = V::Output;
    fn visit<S: Scheduler<u64> + Send + 'static>(self, inner: S) -> V::Output {
        self.v.visit(PrioByWeight { inner, ws: self.ws })
    }
}

/// A priority scheduler whose flows get their level from their weight
/// (the harness sets weights only): the `i`-th largest distinct weight in
/// `ws` is level `i`.
#[derive(Debug)]
pub struct PrioByWeight<S> {
    /// The priority scheduler.
    pub inner: S,
    /// Distinct weights, largest first.
    pub ws: Vec<u32>,
}

impl<S: Scheduler<u64>> Scheduler<u64> for PrioByWeight<S> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn limits(&self) -> pktsched_core::Limits {
        self.inner.limits()
    }
    fn add_flow(&mut self, cfg: FlowConfig) -> Result<FlowId, pktsched_core::ConfigError> {
        let cfg = self.leveled(cfg);
        self.inner.add_flow(cfg)
    }
    fn change_flow(
        &mut self,
        f: FlowId,
        cfg: FlowConfig,
        now: Nanos,
    ) -> Result<(), pktsched_core::ConfigError> {
        let cfg = self.leveled(cfg);
        self.inner.change_flow(f, cfg, now)
    }
    fn remove_flow(&mut self, f: FlowId) -> Result<Vec<Pkt<u64>>, pktsched_core::ConfigError> {
        self.inner.remove_flow(f)
    }
    // Always inlined: the wrapper only maps weights to levels when flows
    // are added, and must not add a call per packet to PRIO's figures.
    #[inline(always)]
    fn enqueue(&mut self, p: Pkt<u64>, now: Nanos) -> Result<(), pktsched_core::Rejected<u64>> {
        self.inner.enqueue(p, now)
    }
    #[inline(always)]
    fn dequeue(&mut self, now: Nanos) -> Option<Pkt<u64>> {
        self.inner.dequeue(now)
    }
    // The batch moves too: a caller that batches (the PSPAT arbiter) gets
    // the scheduler's own batch paths, not the trait's packet-by-packet
    // defaults through this wrapper.
    #[inline(always)]
    fn enqueue_batch(
        &mut self,
        pkts: &mut Vec<Pkt<u64>>,
        rest: &mut Vec<Pkt<u64>>,
        now: Nanos,
    ) -> Result<(), pktsched_core::Rejected<u64>> {
        self.inner.enqueue_batch(pkts, rest, now)
    }
    #[inline(always)]
    fn dequeue_batch(&mut self, now: Nanos, max: usize, out: &mut Vec<Pkt<u64>>) -> usize {
        self.inner.dequeue_batch(now, max, out)
    }
    fn next_ready(&self, now: Nanos) -> Option<Nanos> {
        self.inner.next_ready(now)
    }
    fn backlog(&self) -> pktsched_core::Backlog {
        self.inner.backlog()
    }
    fn stats(&self) -> pktsched_core::Counters {
        self.inner.stats()
    }
    fn flow_stats(&self, f: FlowId) -> Option<pktsched_core::Counters> {
        self.inner.flow_stats(f)
    }
    fn flow_config(&self, f: FlowId) -> Option<&FlowConfig> {
        self.inner.flow_config(f)
    }
    fn flow_ids(&self) -> Vec<FlowId> {
        self.inner.flow_ids()
    }
}

impl<S> PrioByWeight<S> {
    /// `cfg` with the level of its weight (the `i`-th largest distinct
    /// weight is level `i`; a weight not in `ws` is level 0).
    fn leveled(&self, cfg: FlowConfig) -> FlowConfig {
        let level = self.ws.iter().position(|&w| w == cfg.weight).unwrap_or(0) as u32;
        cfg.with_prio(level)
    }
}

/// One algorithm's result.
#[derive(Debug, Serialize)]
pub struct AlgResult {
    /// Algorithm name.
    pub alg: &'static str,
    /// The flowsets as given.
    pub flowsets: String,
    /// Flows in all.
    pub flows: u64,
    /// Resolved qmin.
    pub qmin: u64,
    /// Resolved qmax.
    pub qmax: u64,
    /// Loop iterations.
    pub loops: u64,
    /// Packets offered.
    pub enqueues: u64,
    /// Packets refused.
    pub drops: u64,
    /// Completed fill/drain cycles; below 2 the run was too short.
    pub cycles: u64,
    /// Which clock `ns_per_pair` uses: `wall` or `cpu`.
    pub clock: &'static str,
    /// Median ns per enqueue+dequeue pair (time ÷ enqueues).
    pub ns_per_pair: f64,
    /// All runs' ns per pair (same clock).
    pub runs_ns_per_pair: Vec<f64>,
    /// Median wall-clock ns per pair.
    pub wall_ns_per_pair: f64,
    /// Median per-thread CPU ns per pair, if the OS reports it.
    pub cpu_ns_per_pair: Option<f64>,
    /// Ratio to the first algorithm listed.
    pub ratio_to_first: f64,
    /// Worst per-flow byte-WFI.
    pub worst_wfi_bytes: Option<f64>,
    /// The flow with the worst byte-WFI.
    pub worst_wfi_flow: Option<u32>,
    /// Its weight.
    pub worst_wfi_flow_weight: Option<u32>,
    /// Its packet length.
    pub worst_wfi_flow_len: Option<u32>,
}

/// Results of one `bench sched` measurement.
#[derive(Debug)]
pub struct SchedReport {
    /// One per algorithm that completed at least one timed run.
    pub results: Vec<AlgResult>,
    /// Stopped early (by the stop flag): fewer runs than asked for, or
    /// algorithms missing.
    pub partial: bool,
}

const CHUNK: u64 = 1 << 20;

/// Progress reporting that only appears when the whole job takes over a
/// second.
struct Progress {
    bar: ProgressBar,
    start: Instant,
    shown: bool,
}

impl Progress {
    fn new(total: u64) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg:12} [{bar:40}] {percent:>3}% eta {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        Progress {
            bar,
            start: Instant::now(),
            shown: false,
        }
    }
    fn step(&mut self, n: u64, msg: &'static str) {
        self.bar.inc(n);
        if !self.shown && self.start.elapsed() > Duration::from_secs(1) {
            self.shown = true;
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        if self.shown {
            self.bar.set_message(msg);
        }
    }
    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Wall and CPU nanoseconds per enqueue+dequeue pair of one timed pass.
#[derive(Copy, Clone, Debug)]
struct Timing {
    wall: f64,
    cpu: Option<f64>,
}

/// One pass of the harness over a scheduler: timed, or tracking the WFI.
struct Pass<'a> {
    fs: &'a [Flowset],
    qmin: QBound,
    qmax: QBound,
    loops: u64,
    wfi: bool,
    prog: &'a mut Progress,
    name: &'static str,
    stop: &'a AtomicBool,
}

impl SchedVisitor<u64> for Pass<'_> {
    /// `None`: stopped before the end.
    type Output = Result<Option<(Timing, RunStats)>>;
    fn visit<S: Scheduler<u64> + Send + 'static>(self, s: S) -> Self::Output {
        let mut h = Harness::new(s, self.fs, self.qmin, self.qmax).map_err(|e| match e {
            pktsched_core::harness::HarnessError::Bounds { .. } => anyhow!(
                "{e}: allowed --qmax above --qmin once both are resolved for the flowset's \
                 flows (`4n` is 4 × the flows)"
            ),
            other => anyhow!("{other}"),
        })?;
        if self.wfi {
            h.track_wfi();
        }
        let c0 = thread_cpu_ns();
        let t0 = Instant::now();
        let mut left = self.loops;
        while left > 0 {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            let n = left.min(CHUNK);
            h.run(n);
            left -= n;
            self.prog.step(n, self.name);
        }
        let dt = t0.elapsed();
        let c1 = thread_cpu_ns();
        let st = h.stats();
        if st.enqueues == 0 {
            bail!("no packet was enqueued; use more operations (-n)");
        }
        let per = |ns: f64| ns / st.enqueues as f64;
        let t = Timing {
            wall: per(dt.as_nanos() as f64),
            cpu: c0.zip(c1).map(|(a, b)| per(b.saturating_sub(a) as f64)),
        };
        Ok(Some((t, st)))
    }
}

/// Parsed and checked options.
struct Plan {
    algs: Vec<Alg>,
    loops: u64,
    qmin: QBound,
    qmax: QBound,
    fs: Vec<Flowset>,
}

fn plan(a: &SchedOptions) -> Result<Plan> {
    let algs = Alg::parse_list(&a.alg)?;
    let loops = parse_count(&a.ops).map_err(|e| anyhow!("-n: {e}"))?;
    if !(1..=MAX_OPS).contains(&loops) {
        bail!("-n: must be at least 1 and at most {MAX_OPS}, got {loops}");
    }
    let qmin = QBound::parse(&a.qmin).map_err(|e| anyhow!("--qmin: {e}"))?;
    let qmax = QBound::parse(&a.qmax).map_err(|e| anyhow!("--qmax: {e}"))?;
    let fs = parse_flowsets(&a.flowsets).context("--flowsets")?;
    if a.runs == 0 || a.runs > MAX_RUNS {
        bail!("--runs: {} is out of range 1..={MAX_RUNS}", a.runs);
    }
    Ok(Plan {
        algs,
        loops,
        qmin,
        qmax,
        fs,
    })
}

/// Runs the benchmark: `runs` timed passes per algorithm (interleaved)
/// and one WFI pass with the last, checking `stop` between chunks of the
/// loop; a stopped measurement reports the passes completed.
pub fn measure(a: &SchedOptions, stop: &AtomicBool) -> Result<SchedReport> {
    let p = plan(a)?;
    let nflows: u64 = p.fs.iter().map(|f| u64::from(f.flows)).sum();
    let passes = u64::from(a.runs) + u64::from(!a.no_wfi);
    let mut prog = Progress::new(
        p.loops
            .saturating_mul(passes)
            .saturating_mul(p.algs.len() as u64),
    );
    let mut times: Vec<Vec<Timing>> = vec![Vec::new(); p.algs.len()];
    let mut stats: Vec<Option<RunStats>> = vec![None; p.algs.len()];
    let mut partial = false;
    'runs: for r in 0..a.runs {
        for (i, &alg) in p.algs.iter().enumerate() {
            let mut pass = |wfi: bool| {
                let pass = Pass {
                    fs: &p.fs,
                    qmin: p.qmin,
                    qmax: p.qmax,
                    loops: p.loops,
                    wfi,
                    prog: &mut prog,
                    name: alg.name(),
                    stop,
                };
                alg.visit(&p.fs, pass)
                    .with_context(|| format!("algorithm {}", alg.name()))
            };
            let Some((t, st)) = pass(false)? else {
                partial = true;
                break 'runs;
            };
            times[i].push(t);
            // The WFI pass runs once, with the last timed run.
            if !a.no_wfi && r + 1 == a.runs {
                let Some((_, w)) = pass(true)? else {
                    stats[i].get_or_insert(st);
                    partial = true;
                    break 'runs;
                };
                stats[i] = Some(RunStats {
                    worst_wfi_bytes: w.worst_wfi_bytes,
                    worst_wfi_flow: w.worst_wfi_flow,
                    ..st
                });
            } else if stats[i].is_none() {
                stats[i] = Some(st);
            }
        }
    }
    prog.finish();
    let chosen = |t: &[Timing]| -> Vec<f64> {
        t.iter()
            .map(|x| {
                if a.cpu {
                    x.cpu.unwrap_or(x.wall)
                } else {
                    x.wall
                }
            })
            .collect()
    };
    let first = times.iter().find_map(|t| median(&chosen(t))).unwrap_or(0.0);
    let mut results = Vec::new();
    for (i, &alg) in p.algs.iter().enumerate() {
        let (Some(st), Some(ns)) = (stats[i].clone(), median(&chosen(&times[i]))) else {
            continue;
        };
        let wall: Vec<f64> = times[i].iter().map(|t| t.wall).collect();
        let cpu: Option<Vec<f64>> = times[i].iter().map(|t| t.cpu).collect();
        let (w, l) = st.worst_wfi_flow.map(|f| flow_info(&p.fs, f)).unzip();
        results.push(AlgResult {
            alg: alg.name(),
            flowsets: a.flowsets.clone(),
            flows: nflows,
            qmin: p.qmin.resolve(nflows),
            qmax: p.qmax.resolve(nflows),
            loops: st.loops,
            enqueues: st.enqueues,
            drops: st.drops,
            cycles: st.cycles,
            clock: if a.cpu { "cpu" } else { "wall" },
            ns_per_pair: ns,
            runs_ns_per_pair: chosen(&times[i]),
            wall_ns_per_pair: median(&wall).unwrap_or(f64::NAN),
            cpu_ns_per_pair: cpu.and_then(|c| median(&c)),
            ratio_to_first: if first > 0.0 { ns / first } else { 0.0 },
            worst_wfi_bytes: st.worst_wfi_bytes,
            worst_wfi_flow: st.worst_wfi_flow,
            worst_wfi_flow_weight: w,
            worst_wfi_flow_len: l,
        });
    }
    Ok(SchedReport { results, partial })
}

/// Weight and packet length of flow `f` of the flowsets.
fn flow_info(fs: &[Flowset], f: u32) -> (u32, u32) {
    let mut base = 0u32;
    for s in fs {
        if f < base + s.flows {
            return (s.weight, s.len);
        }
        base += s.flows;
    }
    (0, 0)
}

/// Warnings about results that do not measure what they claim to.
pub fn warnings(results: &[AlgResult]) -> Vec<String> {
    let mut w: Vec<String> = results
        .iter()
        .filter(|r| r.drops > 0)
        .map(|r| format!(
            "warning: {} refused {} of {} packets; ns/pair divides by offered packets, so this run does not measure pairs",
            r.alg, r.drops, r.enqueues
        ))
        .collect();
    if let Some(r) = results.iter().find(|r| r.cycles < 2) {
        w.push(format!(
            "warning: only {} fill/drain cycle(s) in {} loops with {} flows: the backlog never settled between qmin and qmax; use a larger -n (at least {})",
            r.cycles,
            r.loops,
            r.flows,
            r.qmax.saturating_mul(4)
        ));
    }
    w
}

/// The `bench sched` table.
pub fn write_table(out: &mut dyn Write, a: &SchedOptions, results: &[AlgResult]) -> io::Result<()> {
    let Some(r0) = results.first() else {
        return Ok(());
    };
    writeln!(
        out,
        "flowsets {}  flows {}  qmin {} ({})  qmax {} ({})  loops {}  runs {}",
        a.flowsets, r0.flows, a.qmin, r0.qmin, a.qmax, r0.qmax, r0.loops, a.runs
    )?;
    let w = results
        .iter()
        .map(|r| r.alg.len())
        .max()
        .unwrap_or(3)
        .max(6);
    writeln!(
        out,
        "{:<w$} {:>10} {:>8} {:>10} {:>10} {:>14}  (flow, weight, len)",
        "alg", "ns/pair", "ratio", "enqueues", "drops", "worst B-WFI"
    )?;
    for r in results {
        let wfi = r
            .worst_wfi_bytes
            .map_or("-".to_string(), |w| format!("{w:.0} B"));
        let who = match (
            r.worst_wfi_flow,
            r.worst_wfi_flow_weight,
            r.worst_wfi_flow_len,
        ) {
            (Some(f), Some(w), Some(l)) if r.worst_wfi_bytes.unwrap_or(0.0) > 0.0 => {
                format!("({f}, {w}, {l} B)")
            }
            _ => String::new(),
        };
        writeln!(
            out,
            "{:<w$} {:>10.2} {:>8.2} {:>10} {:>10} {:>14}  {}",
            r.alg, r.ns_per_pair, r.ratio_to_first, r.enqueues, r.drops, wfi, who
        )?;
    }
    Ok(())
}

/// The flowsets of the benchmark table.
pub const STANDARD_FLOWSETS: [&str; 6] = [
    "1::1",
    "1::64",
    "1::512,8::64",
    "1::4096",
    "1::32768",
    "1::32768,2::4096,4::2048,8::1024,128::16,1024::1",
];

/// The options `demo` runs on flowset `fs`: every algorithm, enough loops
/// for a few fill/drain cycles between 4n and 30n (at least `min_ops`).
pub fn demo_options(fs: &str, min_ops: &str) -> Result<SchedOptions> {
    let min_ops = parse_count(min_ops).map_err(|e| anyhow!("-n: {e}"))?;
    let flows: u64 = parse_flowsets(fs)?.iter().map(|f| u64::from(f.flows)).sum();
    Ok(table_options(
        fs,
        "all",
        &min_ops.max(200 * flows).to_string(),
        1,
        false,
    ))
}

/// The options `bench table` runs on flowset `fs`.
pub fn table_options(fs: &str, alg: &str, ops: &str, runs: u32, cpu: bool) -> SchedOptions {
    SchedOptions {
        alg: alg.into(),
        ops: ops.into(),
        qmin: "4n".into(),
        qmax: "30n".into(),
        flowsets: fs.into(),
        runs,
        no_wfi: false,
        cpu,
    }
}

/// The `bench table` Markdown: ns per pair, then the worst byte-WFI, one
/// row per flowset.
pub fn write_markdown(out: &mut dyn Write, all: &[(&str, Vec<AlgResult>)]) -> io::Result<()> {
    let Some((_, r0)) = all.first() else {
        return Ok(());
    };
    let algs: Vec<&str> = r0.iter().map(|r| r.alg).collect();
    let has = |a: &str| algs.contains(&a);
    let ratio = has("qfq") && has("drr");
    let name = |fs: &str| {
        if fs.len() > 20 {
            "mix".to_string()
        } else {
            fs.to_string()
        }
    };
    let head = |out: &mut dyn Write, first: &str, flows: bool, extra: bool| -> io::Result<()> {
        write!(out, "| {first} |")?;
        for a in &algs {
            write!(out, " {a} |")?;
        }
        if extra {
            write!(out, " qfq/drr |")?;
        }
        writeln!(out)?;
        write!(out, "| --- |{}", if flows { " ---: |" } else { "" })?;
        for _ in &algs {
            write!(out, " ---: |")?;
        }
        if extra {
            write!(out, " ---: |")?;
        }
        writeln!(out)
    };
    head(out, "flowset | flows", true, ratio)?;
    for (fs, rs) in all {
        write!(
            out,
            "| `{}` | {} |",
            name(fs),
            rs.first().map_or(0, |r| r.flows)
        )?;
        for r in rs {
            write!(out, " {:.1} |", r.ns_per_pair)?;
        }
        let get = |a: &str| rs.iter().find(|r| r.alg == a).map(|r| r.ns_per_pair);
        if let (Some(q), Some(d)) = (get("qfq"), get("drr")) {
            write!(out, " {:.2} |", q / d)?;
        }
        writeln!(out)?;
    }
    writeln!(out)?;
    writeln!(out, "Worst per-flow byte-WFI (bytes):")?;
    writeln!(out)?;
    head(out, "flowset", false, false)?;
    for (fs, rs) in all {
        write!(out, "| `{}` |", name(fs))?;
        for r in rs {
            write!(out, " {:.0} |", r.worst_wfi_bytes.unwrap_or(f64::NAN))?;
        }
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use pktsched_core::sched::Prio;
    use pktsched_core::{FlowConfig, FlowId, FlowSched, Nanos, Pkt, Scheduler};

    use super::PrioByWeight;

    /// A weight maps to its level when a flow is added and when it is
    /// changed, and the batch paths serve by level.
    #[test]
    fn weights_map_to_levels_on_add_and_change() {
        let mut s = PrioByWeight {
            inner: FlowSched::<_, u64>::new(Prio::new(2)),
            ws: vec![5, 1],
        };
        let low = s
            .add_flow(FlowConfig::weight(1))
            .unwrap_or_else(|e| panic!("{e}"));
        let high = s
            .add_flow(FlowConfig::weight(5))
            .unwrap_or_else(|e| panic!("{e}"));
        let prio = |s: &PrioByWeight<_>, f: FlowId| s.flow_config(f).map(|c| c.prio);
        assert_eq!((prio(&s, low), prio(&s, high)), (Some(1), Some(0)));
        s.change_flow(high, FlowConfig::weight(1), Nanos(0))
            .unwrap_or_else(|e| panic!("{e}"));
        s.change_flow(low, FlowConfig::weight(5), Nanos(0))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((prio(&s, low), prio(&s, high)), (Some(0), Some(1)));
        let mut pkts = vec![
            Pkt::new(high, 100, Nanos(0), 0),
            Pkt::new(low, 100, Nanos(0), 1),
        ];
        let mut rest = Vec::new();
        assert!(s.enqueue_batch(&mut pkts, &mut rest, Nanos(0)).is_ok());
        let mut out = Vec::new();
        assert_eq!(s.dequeue_batch(Nanos(0), 2, &mut out), 2);
        // `low` is level 0 now: it goes first.
        assert_eq!(out.iter().map(|p| p.item).collect::<Vec<_>>(), vec![1, 0]);
    }
}
