//! `pktsched bench sched`, `bench table` and `demo`: the closed-loop
//! scheduler benchmark.

use std::io::Write;

use anyhow::Result;
use clap::Args;
use pktsched_bench::sched::{self, SchedOptions};

use crate::output::Stdout;

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
    #[arg(long, default_value = "1", value_parser = runs)]
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

/// `--runs`: a whole number in 1..=MAX_RUNS.
fn runs(s: &str) -> Result<u32, String> {
    s.parse()
        .ok()
        .filter(|r| (1..=sched::MAX_RUNS).contains(r))
        .ok_or_else(|| format!("--runs {s}; allowed: 1..={}", sched::MAX_RUNS))
}

impl SchedArgs {
    fn options(&self) -> SchedOptions {
        SchedOptions {
            alg: self.alg.clone(),
            ops: self.ops.clone(),
            qmin: self.qmin.clone(),
            qmax: self.qmax.clone(),
            flowsets: self.flowsets.clone(),
            runs: self.runs,
            no_wfi: self.no_wfi,
            cpu: self.cpu,
        }
    }
}

fn warn(results: &[sched::AlgResult]) {
    for w in sched::warnings(results) {
        eprintln!("{w}");
    }
}

/// Measures and prints one `bench sched`; whether it was cut short.
fn measure_and_print(o: &SchedOptions, json: bool, out: &mut Stdout) -> Result<bool> {
    let rep = sched::measure(o, crate::stop::stop_flag()?)?;
    if json {
        crate::stop::write_json(out, &rep.results, rep.partial)?;
    } else {
        warn(&rep.results);
        sched::write_table(out, o, &rep.results)?;
        crate::stop::mark_partial(out, rep.partial)?;
    }
    out.flush()?;
    Ok(rep.partial)
}

pub(crate) fn run(a: &SchedArgs, out: &mut Stdout) -> Result<()> {
    let partial = measure_and_print(&a.options(), a.json, out)?;
    crate::stop::interrupted(partial)
}

/// `pktsched demo`: every algorithm on every standard flowset.
pub(crate) fn demo(ops: &str, json: bool, out: &mut Stdout) -> Result<()> {
    for fs in sched::STANDARD_FLOWSETS {
        let partial = measure_and_print(&sched::demo_options(fs, ops)?, json, out)?;
        crate::stop::interrupted(partial)?;
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
    #[arg(long, default_value = "3", value_parser = runs)]
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
pub(crate) fn table(t: &TableArgs, out: &mut Stdout) -> Result<()> {
    let mut all = Vec::new();
    let mut partial = false;
    for fs in sched::STANDARD_FLOWSETS {
        let o = sched::table_options(fs, &t.alg, &t.ops, t.runs, t.cpu);
        let r = sched::measure(&o, crate::stop::stop_flag()?)?;
        warn(&r.results);
        partial = r.partial;
        if !r.results.is_empty() {
            all.push((fs, r.results));
        }
        if partial {
            break;
        }
    }
    if t.json {
        let v: Vec<_> = all.iter().flat_map(|(_, r)| r.iter()).collect();
        crate::stop::write_json(out, &v, partial)?;
    } else {
        sched::write_markdown(out, &all)?;
        crate::stop::mark_partial(out, partial)?;
    }
    crate::stop::interrupted(partial)
}
