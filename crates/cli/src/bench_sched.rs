//! `pktsched bench sched`: the closed-loop scheduler benchmark.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pktsched_core::harness::{
    Flowset, Harness, NoSched, QBound, RunStats, parse_count, parse_flowsets,
};
use pktsched_core::policy::{Policy, PolicySched};
use pktsched_core::sched::{Drr, Fifo, FlowSched, Prio, Qfq, Rr, Wf2q};
use pktsched_core::{Algorithm, FlowConfig, Scheduler};
use serde::Serialize;

/// Arguments of `bench sched`.
#[derive(Debug, Args)]
pub(crate) struct SchedArgs {
    /// Algorithms, comma-separated: none, fifo, prio, rr, drr, wf2q, qfq,
    /// `all`, or a work-conserving policy tree: `policy:NAME` (built-in:
    /// prio, wfq, pfabric, edf, lstf; hpfq and hclock have rate limits,
    /// which this frozen-clock harness cannot run) or `policy:FILE.toml` /
    /// `policy:FILE.dot`.
    /// Several algorithms run side by side in one invocation.
    #[arg(long, default_value = "qfq")]
    alg: String,
    /// Loop iterations (each one enqueue or one dequeue); suffixes K, M, G
    /// (powers of 1000), k, m (powers of 1024).
    #[arg(short = 'n', long = "ops", default_value = "10M")]
    ops: String,
    /// Backlog at which the harness flips from draining to filling; suffix
    /// `n` = times the number of flows.
    #[arg(long, default_value = "4n")]
    qmin: String,
    /// Backlog at which the harness flips from filling to draining; suffix
    /// `n` = times the number of flows.
    #[arg(long, default_value = "30n")]
    qmax: String,
    /// Flowsets `weight:len:flows[,...]`, ranges `min-max[-steps]`, e.g.
    /// `1::512,8::64` or `1::32768,2::4096,4::2048,8::1024,128::16,1024::1`.
    #[arg(long, default_value = "1::1")]
    flowsets: String,
    /// Timed runs per algorithm; the median is reported. Runs of different
    /// algorithms are interleaved so machine noise hits them alike.
    #[arg(long, default_value_t = 1)]
    runs: u32,
    /// Skip the second, untimed pass that measures the worst byte-WFI.
    #[arg(long)]
    no_wfi: bool,
    /// Report per-thread CPU time instead of wall time (robust when other
    /// processes compete for the cores; both are in the JSON output).
    #[arg(long)]
    cpu: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
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
            let text = std::fs::read_to_string(spec)
                .with_context(|| format!("--alg policy:{spec}: cannot read the policy file"))?;
            Policy::from_named(spec, &text)
                .map_err(|e| anyhow::anyhow!("--alg policy:{spec}: {e}"))?
        } else {
            Policy::builtin(spec).map_err(|e| {
                anyhow::anyhow!("--alg policy:{spec}: {e} (or give a .toml/.dot file)")
            })?
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
                    .map_err(|e| anyhow::anyhow!("--alg: {e}, none, all, or policy:NAME|FILE"))?;
                out.push(Alg::Sched(a));
            }
        }
        out.dedup();
        Ok(out)
    }
}

/// One algorithm's result.
#[derive(Debug, Serialize)]
struct AlgResult {
    alg: &'static str,
    flowsets: String,
    flows: u64,
    qmin: u64,
    qmax: u64,
    loops: u64,
    enqueues: u64,
    drops: u64,
    /// Completed fill/drain cycles; below 2 the run was too short.
    cycles: u64,
    /// Which clock `ns_per_pair` uses: `wall` or `cpu`.
    clock: &'static str,
    /// Median ns per enqueue+dequeue pair (time ÷ enqueues).
    ns_per_pair: f64,
    /// All runs' ns per pair (same clock).
    runs_ns_per_pair: Vec<f64>,
    /// Median wall-clock ns per pair.
    wall_ns_per_pair: f64,
    /// Median per-thread CPU ns per pair, if the OS reports it.
    cpu_ns_per_pair: Option<f64>,
    /// Ratio to the first algorithm listed.
    ratio_to_first: f64,
    worst_wfi_bytes: Option<f64>,
    worst_wfi_flow: Option<u32>,
    worst_wfi_flow_weight: Option<u32>,
    worst_wfi_flow_len: Option<u32>,
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

fn new_sched<S: Scheduler<u64>>(
    s: S,
    fs: &[Flowset],
    qmin: QBound,
    qmax: QBound,
) -> Result<Harness<S>> {
    Harness::new(s, fs, qmin, qmax).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Wall and CPU nanoseconds per enqueue+dequeue pair of one timed pass.
#[derive(Copy, Clone, Debug)]
struct Timing {
    wall: f64,
    cpu: Option<f64>,
}

/// Runs `loops` iterations in chunks, reporting progress between chunks.
fn run_chunked<S: Scheduler<u64>>(
    h: &mut Harness<S>,
    loops: u64,
    prog: &mut Progress,
    name: &'static str,
) {
    let mut left = loops;
    while left > 0 {
        let n = left.min(CHUNK);
        h.run(n);
        left -= n;
        prog.step(n, name);
    }
}

/// Runs one timed pass (and optionally one WFI pass) of a harness.
fn pass<S: Scheduler<u64>>(
    mk: &dyn Fn() -> Result<Harness<S>>,
    loops: u64,
    wfi: bool,
    prog: &mut Progress,
    name: &'static str,
) -> Result<(Timing, RunStats)> {
    let mut h = mk()?;
    let c0 = pktsched_sim::thread_cpu_ns();
    let t0 = Instant::now();
    run_chunked(&mut h, loops, prog, name);
    let dt = t0.elapsed();
    let c1 = pktsched_sim::thread_cpu_ns();
    let st = h.stats();
    if st.enqueues == 0 {
        bail!("no packet was enqueued; use more operations (-n)");
    }
    let per = |ns: f64| ns / st.enqueues as f64;
    let ns = Timing {
        wall: per(dt.as_nanos() as f64),
        cpu: c0.zip(c1).map(|(a, b)| per(b.saturating_sub(a) as f64)),
    };
    let mut out = st;
    if wfi {
        let mut h = mk()?;
        h.track_wfi();
        run_chunked(&mut h, loops, prog, name);
        let w = h.stats();
        out.worst_wfi_bytes = w.worst_wfi_bytes;
        out.worst_wfi_flow = w.worst_wfi_flow;
    }
    Ok((ns, out))
}

fn run_alg(
    alg: Alg,
    fs: &[Flowset],
    qmin: QBound,
    qmax: QBound,
    loops: u64,
    wfi: bool,
    prog: &mut Progress,
) -> Result<(Timing, RunStats)> {
    let name = alg.name();
    macro_rules! go {
        ($e:expr) => {
            pass(&|| new_sched($e, fs, qmin, qmax), loops, wfi, prog, name)
        };
    }
    match alg {
        Alg::None => go!(NoSched::default()),
        Alg::Sched(Algorithm::Fifo) => go!(FlowSched::new(Fifo::new())),
        Alg::Sched(Algorithm::Prio) => {
            // dummynet's prio takes the priority from the weight; here
            // distinct weights map to distinct levels, higher weight first.
            let mut ws: Vec<u32> = fs.iter().map(|f| f.weight).collect();
            ws.sort_unstable_by(|a, b| b.cmp(a));
            ws.dedup();
            let levels = ws.len() as u32;
            pass(
                &|| prio_harness(fs, &ws, levels, qmin, qmax),
                loops,
                wfi,
                prog,
                name,
            )
        }
        Alg::Sched(Algorithm::Rr) => go!(FlowSched::new(Rr::new())),
        Alg::Sched(Algorithm::Drr) => {
            let base = fs
                .iter()
                .map(|f| f.len)
                .max()
                .unwrap_or(FlowConfig::DEFAULT_MAX_LEN);
            go!(FlowSched::new(Drr::new(base)))
        }
        Alg::Sched(Algorithm::Wf2q) => go!(FlowSched::new(Wf2q::new())),
        Alg::Sched(Algorithm::Qfq) => go!(FlowSched::new(Qfq::new())),
        Alg::Policy(p) => go!(PolicySched::<u64>::new(&p.policy)),
    }
}

/// PRIO needs the level per flow, which the generic harness does not set:
/// flows are added through a wrapper that maps weight → level.
fn prio_harness(
    fs: &[Flowset],
    ws: &[u32],
    levels: u32,
    qmin: QBound,
    qmax: QBound,
) -> Result<Harness<PrioByWeight>> {
    let inner = FlowSched::new(Prio::new(levels));
    new_sched(
        PrioByWeight {
            inner,
            ws: ws.to_vec(),
        },
        fs,
        qmin,
        qmax,
    )
}

/// A PRIO scheduler whose flows get their level from their weight.
#[derive(Debug)]
struct PrioByWeight {
    inner: FlowSched<Prio, u64>,
    ws: Vec<u32>,
}

impl Scheduler<u64> for PrioByWeight {
    fn name(&self) -> &'static str {
        "prio"
    }
    fn limits(&self) -> pktsched_core::Limits {
        self.inner.limits()
    }
    fn add_flow(
        &mut self,
        cfg: FlowConfig,
    ) -> Result<pktsched_core::FlowId, pktsched_core::ConfigError> {
        let level = self.ws.iter().position(|&w| w == cfg.weight).unwrap_or(0) as u32;
        self.inner.add_flow(cfg.with_prio(level))
    }
    fn change_flow(
        &mut self,
        f: pktsched_core::FlowId,
        cfg: FlowConfig,
        now: pktsched_core::Nanos,
    ) -> Result<(), pktsched_core::ConfigError> {
        self.inner.change_flow(f, cfg, now)
    }
    fn remove_flow(
        &mut self,
        f: pktsched_core::FlowId,
    ) -> Result<Vec<pktsched_core::Pkt<u64>>, pktsched_core::ConfigError> {
        self.inner.remove_flow(f)
    }
    #[inline]
    fn enqueue(
        &mut self,
        p: pktsched_core::Pkt<u64>,
        now: pktsched_core::Nanos,
    ) -> Result<(), pktsched_core::Rejected<u64>> {
        self.inner.enqueue(p, now)
    }
    #[inline]
    fn dequeue(&mut self, now: pktsched_core::Nanos) -> Option<pktsched_core::Pkt<u64>> {
        self.inner.dequeue(now)
    }
    fn next_ready(&self, now: pktsched_core::Nanos) -> Option<pktsched_core::Nanos> {
        self.inner.next_ready(now)
    }
    fn backlog(&self) -> pktsched_core::Backlog {
        self.inner.backlog()
    }
    fn stats(&self) -> pktsched_core::Counters {
        self.inner.stats()
    }
    fn flow_stats(&self, f: pktsched_core::FlowId) -> Option<pktsched_core::Counters> {
        self.inner.flow_stats(f)
    }
    fn flow_config(&self, f: pktsched_core::FlowId) -> Option<&FlowConfig> {
        self.inner.flow_config(f)
    }
    fn flow_ids(&self) -> Vec<pktsched_core::FlowId> {
        self.inner.flow_ids()
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

pub(crate) fn run(a: &SchedArgs, out: &mut crate::output::Stdout) -> Result<()> {
    let results = measure(a)?;
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&results)?)?;
        return crate::partial::finish(out);
    }
    print_table(a, &results, out)?;
    crate::partial::finish(out)
}

/// Most loop iterations of one run.
const MAX_OPS: u64 = 10_000_000_000;

fn measure(a: &SchedArgs) -> Result<Vec<AlgResult>> {
    let algs = Alg::parse_list(&a.alg)?;
    let loops = parse_count(&a.ops).map_err(|e| anyhow::anyhow!("-n: {e}"))?;
    if !(1..=MAX_OPS).contains(&loops) {
        bail!("-n {loops}: out of range: allowed 1..={MAX_OPS} (10G: minutes per algorithm)");
    }
    let qmin = QBound::parse(&a.qmin).map_err(|e| anyhow::anyhow!("--qmin: {e}"))?;
    let qmax = QBound::parse(&a.qmax).map_err(|e| anyhow::anyhow!("--qmax: {e}"))?;
    let fs = parse_flowsets(&a.flowsets).context("--flowsets")?;
    if a.runs == 0 || a.runs > 1000 {
        bail!("--runs: {} is out of range 1..=1000", a.runs);
    }
    let nflows: u64 = fs.iter().map(|f| u64::from(f.flows)).sum();
    let passes = u64::from(a.runs) + u64::from(!a.no_wfi);
    let mut prog = Progress::new(
        loops
            .saturating_mul(passes)
            .saturating_mul(algs.len() as u64),
    );
    let mut times: Vec<Vec<Timing>> = vec![Vec::new(); algs.len()];
    let mut stats: Vec<Option<RunStats>> = vec![None; algs.len()];
    pktsched_runtime::signal::install()?;
    let stop = pktsched_runtime::signal::stop_flag();
    let mut done = 0;
    'all: for r in 0..a.runs {
        for (i, &alg) in algs.iter().enumerate() {
            // A signal stops at the next run boundary.
            if stop.load(std::sync::atomic::Ordering::Acquire) {
                break 'all;
            }
            done += 1;
            // The WFI pass runs once, with the last timed run.
            let wfi = !a.no_wfi && r + 1 == a.runs;
            let (ns, st) = run_alg(alg, &fs, qmin, qmax, loops, wfi, &mut prog)
                .with_context(|| format!("algorithm {}", alg.name()))?;
            times[i].push(ns);
            if wfi || stats[i].is_none() {
                stats[i] = Some(st);
            }
        }
    }
    prog.finish();
    crate::partial::note(done, a.runs as usize * algs.len(), "runs");
    let mut results = Vec::new();
    // Per-flow weight/len for the worst-WFI flow.
    let flow_info = |f: u32| {
        let mut base = 0u32;
        for s in &fs {
            if f < base + s.flows {
                return (s.weight, s.len);
            }
            base += s.flows;
        }
        (0, 0)
    };
    for (i, &alg) in algs.iter().enumerate() {
        if times[i].is_empty() {
            continue; // stopped before its first run
        }
        let st = stats[i].clone().unwrap_or_default();
        let wall: Vec<f64> = times[i].iter().map(|t| t.wall).collect();
        let cpu: Option<Vec<f64>> = times[i].iter().map(|t| t.cpu).collect();
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
        let runs = chosen(&times[i]);
        let ns = median(&runs);
        let first = median(&chosen(&times[0]));
        let (w, l) = st.worst_wfi_flow.map(flow_info).unzip();
        results.push(AlgResult {
            alg: alg.name(),
            flowsets: a.flowsets.clone(),
            flows: nflows,
            qmin: qmin.resolve(nflows),
            qmax: qmax.resolve(nflows),
            loops: st.loops,
            enqueues: st.enqueues,
            drops: st.drops,
            cycles: st.cycles,
            clock: if a.cpu { "cpu" } else { "wall" },
            ns_per_pair: ns,
            runs_ns_per_pair: runs,
            wall_ns_per_pair: median(&wall),
            cpu_ns_per_pair: cpu.map(|c| median(&c)),
            ratio_to_first: if first > 0.0 { ns / first } else { 0.0 },
            worst_wfi_bytes: st.worst_wfi_bytes,
            worst_wfi_flow: st.worst_wfi_flow,
            worst_wfi_flow_weight: w,
            worst_wfi_flow_len: l,
        });
    }
    Ok(results)
}

fn warn_short(results: &[AlgResult]) {
    for r in results.iter().filter(|r| r.drops > 0) {
        eprintln!(
            "warning: {} refused {} of {} packets; ns/pair divides by offered packets, so this run does not measure pairs",
            r.alg, r.drops, r.enqueues
        );
    }
    if let Some(r) = results.iter().find(|r| r.cycles < 2) {
        eprintln!(
            "warning: only {} fill/drain cycle(s) in {} loops with {} flows: the backlog never settled between qmin and qmax; use a larger -n (at least {})",
            r.cycles,
            r.loops,
            r.flows,
            r.qmax.saturating_mul(4)
        );
    }
}

fn print_table(
    a: &SchedArgs,
    results: &[AlgResult],
    out: &mut crate::output::Stdout,
) -> Result<()> {
    warn_short(results);
    let (qmin, qmax) = (results[0].qmin, results[0].qmax);
    let nflows = results[0].flows;
    let loops = results[0].loops;
    writeln!(
        out,
        "flowsets {}  flows {}  qmin {} ({})  qmax {} ({})  loops {}  runs {}",
        a.flowsets, nflows, a.qmin, qmin, a.qmax, qmax, loops, a.runs
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
pub(crate) const STANDARD_FLOWSETS: [&str; 6] = [
    "1::1",
    "1::64",
    "1::512,8::64",
    "1::4096",
    "1::32768",
    "1::32768,2::4096,4::2048,8::1024,128::16,1024::1",
];

/// `pktsched demo`: every algorithm on every standard flowset.
pub(crate) fn demo(ops: &str, json: bool, out: &mut crate::output::Stdout) -> Result<()> {
    let min_ops = parse_count(ops).map_err(|e| anyhow::anyhow!("-n: {e}"))?;
    if !(1..=MAX_OPS).contains(&min_ops) {
        bail!("-n {min_ops}: out of range: allowed 1..={MAX_OPS}");
    }
    for fs in STANDARD_FLOWSETS {
        // Enough loops for a few fill/drain cycles between 4n and 30n.
        let flows: u64 = parse_flowsets(fs)?.iter().map(|f| u64::from(f.flows)).sum();
        let a = SchedArgs {
            alg: "all".into(),
            ops: min_ops.max(200 * flows).to_string(),
            qmin: "4n".into(),
            qmax: "30n".into(),
            flowsets: fs.into(),
            runs: 1,
            no_wfi: false,
            cpu: false,
            json,
        };
        run(&a, out)?;
        if !json {
            writeln!(out)?;
        }
    }
    Ok(())
}

/// Arguments of `bench table`.
#[derive(Debug, Args)]
pub(crate) struct TableArgs {
    /// Loop iterations per algorithm, flowset and run.
    #[arg(short = 'n', long = "ops", default_value = "50M")]
    ops: String,
    /// Runs per algorithm and flowset (interleaved); medians are reported.
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// Algorithms (as for `bench sched`).
    #[arg(long, default_value = "all")]
    alg: String,
    /// Report per-thread CPU time instead of wall time.
    #[arg(long)]
    cpu: bool,
    /// Print JSON instead of Markdown.
    #[arg(long)]
    json: bool,
}

/// `pktsched bench table`: the BENCHMARKS.md table — every algorithm on
/// every standard flowset with `--qmin 4n --qmax 30n`, medians of `runs`,
/// QFQ/DRR ratio per flowset, in Markdown.
pub(crate) fn table(t: &TableArgs, out: &mut crate::output::Stdout) -> Result<()> {
    let mut all = Vec::new();
    for fs in STANDARD_FLOWSETS {
        let a = SchedArgs {
            alg: t.alg.clone(),
            ops: t.ops.clone(),
            qmin: "4n".into(),
            qmax: "30n".into(),
            flowsets: fs.into(),
            runs: t.runs,
            no_wfi: false,
            cpu: t.cpu,
            json: false,
        };
        let r = measure(&a)?;
        warn_short(&r);
        all.push((fs, r));
    }
    if t.json {
        let v: Vec<_> = all.iter().flat_map(|(_, r)| r.iter()).collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return crate::partial::finish(out);
    }
    let algs: Vec<&str> = all[0].1.iter().map(|r| r.alg).collect();
    let has = |a: &str| algs.contains(&a);
    write!(out, "| flowset | flows |")?;
    for a in &algs {
        write!(out, " {a} |")?;
    }
    if has("qfq") && has("drr") {
        write!(out, " qfq/drr |")?;
    }
    writeln!(out)?;
    write!(out, "| --- | ---: |")?;
    for _ in &algs {
        write!(out, " ---: |")?;
    }
    if has("qfq") && has("drr") {
        write!(out, " ---: |")?;
    }
    writeln!(out)?;
    for (fs, rs) in &all {
        let name = if fs.len() > 20 { "mix" } else { fs };
        write!(out, "| `{name}` | {} |", rs[0].flows)?;
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
    write!(out, "| flowset |")?;
    for a in &algs {
        write!(out, " {a} |")?;
    }
    writeln!(out)?;
    write!(out, "| --- |")?;
    for _ in &algs {
        write!(out, " ---: |")?;
    }
    writeln!(out)?;
    for (fs, rs) in &all {
        let name = if fs.len() > 20 { "mix" } else { fs };
        write!(out, "| `{name}` |")?;
        for r in rs {
            write!(out, " {:.0} |", r.worst_wfi_bytes.unwrap_or(f64::NAN))?;
        }
        writeln!(out)?;
    }
    crate::partial::finish(out)
}
