//! `pktsched`: benchmarks, simulation and scheduling from the command line.

#![forbid(unsafe_code)]

use std::io::Write;

use anyhow::Result;
use clap::{Parser, Subcommand};

mod bench_pspat;
mod bench_sched;
mod bench_shape;
mod calc;
mod live_demo;
mod output;
mod plot;
mod plot_ingress;
mod progress;
mod route;
mod shaper;
mod sim;
mod stop;
mod traffic;

/// pktsched — a userspace packet scheduler: fair queueing, priorities and
/// shaping with exact accounting.
#[derive(Debug, Parser)]
#[command(name = "pktsched", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// The main job on a built-in default. As root: builds three network
    /// namespaces, shapes real frames between them (4 classes, 100 Mbit/s)
    /// and shows each class converging to its share, then removes
    /// everything. Otherwise (or with --synthetic): every algorithm on a
    /// few standard flowsets in memory (a short `bench sched --alg all`).
    Demo {
        /// Loop iterations per algorithm and flowset of the in-memory demo
        /// (at least 200 per flow; default 2M). Giving it selects the
        /// in-memory demo.
        #[arg(short = 'n', long = "ops")]
        ops: Option<String>,
        /// Print JSON instead of tables.
        #[arg(long)]
        json: bool,
        /// Run the in-memory demo even as root.
        #[arg(long)]
        synthetic: bool,
        /// Live demo: seconds of traffic (1..=3600, default 6).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=3600),
              conflicts_with_all = ["synthetic", "ops"])]
        seconds: Option<u64>,
    },
    /// Lists the algorithms with their supported ranges (weight, weight sum,
    /// packet length, flows, queue limit, priority levels).
    #[command(alias = "algs")]
    Algorithms {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Runs a scenario in virtual time against the exact GPS fluid
    /// reference and checks each flow's WFI against the algorithm's bound.
    Sim(sim::SimArgs),
    /// Shapes real traffic: frames received on the config's ingress
    /// interface are classified, scheduled at the configured rate and sent
    /// on its egress interface (the reverse direction passes untouched).
    /// Stop with SIGINT/SIGTERM; SIGHUP (or `pktsched reload`) applies a
    /// changed config.
    Run(shaper::RunArgs),
    /// A software router with one receive ring per traffic class on the
    /// ingress, polled with per-ring budgets (sq, rr, ll-rr, ll-wfq).
    Route(route::RouteArgs),
    /// Validates a `run` config and prints it normalised, every default
    /// filled in (like `nginx -t`), with `# note:` lines for settings it
    /// will not use here (a weight the algorithm ignores, a `link.cpu`
    /// this machine does not allow).
    Check(shaper::CheckArgs),
    /// The running shaper's or router's counters (`tc -s` style, --json,
    /// --prometheus).
    Stats(route::StatsArgs),
    /// Makes the running shaper re-read its config and apply the changes
    /// by class name, keeping queued frames (a removed class's go to the
    /// default class, counted as drops there only beyond its limit).
    Reload(route::ReloadArgs),
    /// Sends paced UDP flows with stamps (sequence numbers and send times)
    /// for `pktsched sink`.
    Gen(traffic::GenArgs),
    /// Receives stamped UDP flows; reports throughput, loss, reordering
    /// and one-way latency per flow.
    Sink(traffic::SinkArgs),
    /// Charts and tables from the measurement scripts' results.
    #[command(subcommand)]
    Plot(plot::PlotCmd),
    /// Calculators (the ingress poller's RT latency bound and budgets).
    #[command(subcommand)]
    Calc(CalcCmd),
    /// Parses a rate and prints it in bits/s and bytes/s, with the time one
    /// packet takes at that rate.
    Rate {
        /// A rate such as `10gbit`, `1.5mbit`, `125MB/s`.
        rate: String,
        /// Packet length in bytes for the transmission-time line
        /// (1..=1000000).
        #[arg(long, default_value_t = 1500,
              value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        len: u64,
    },
}

#[derive(Debug, Subcommand)]
enum CalcCmd {
    /// The RT latency bound (b+ρ)·x/(1−ρ) of per-class receive rings
    /// polled with budgets, the largest BE budget for a target, and
    /// optionally a simulation (--simulate) or a sweep of SQ, RR, LL-RR
    /// and LL-WFQ (--sweep DIR).
    Ingress(Box<calc::IngressArgs>),
}

#[derive(Debug, Subcommand)]
enum BenchCmd {
    /// Closed-loop scheduler benchmark with the semantics of dummynet's
    /// userspace `test` program: ns per enqueue+dequeue pair.
    Sched(bench_sched::SchedArgs),
    /// The BENCHMARKS.md table: every algorithm on the standard flowsets
    /// (1, 64, 512+64, 4096, 32768 flows and the QFQ paper's mix), medians
    /// of several interleaved runs, in Markdown.
    Table(bench_sched::TableArgs),
    /// Closed-loop EDT shaping benchmark: MLTW, timing wheel and cFFS side
    /// by side.
    Shape(bench_shape::ShapeArgs),
    /// The PSPAT runtime vs the tc architecture (clients lock one scheduler)
    /// vs no scheduler: decisions/s vs clients, shares under overload, and a
    /// high-weight victim's latency against the QFQ bound.
    Pspat(Box<bench_pspat::PspatArgs>),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let mut out = output::Stdout::new();
    match run(cli, &mut out).and_then(|()| Ok(out.flush()?)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if output::is_broken_stdout(&e) => {
            std::process::ExitCode::from(output::BROKEN_PIPE_STATUS)
        }
        Err(e) if e.is::<stop::Interrupted>() => {
            let code = e
                .downcast_ref::<stop::Interrupted>()
                .map_or(130, |i| i.0.exit_code());
            if let Err(f) = out.flush()
                && output::is_broken_stdout(&f.into())
            {
                return std::process::ExitCode::from(output::BROKEN_PIPE_STATUS);
            }
            eprintln!("{e}");
            std::process::ExitCode::from(code)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

fn run(cli: Cli, out: &mut output::Stdout) -> Result<()> {
    match cli.cmd {
        Cmd::Bench(BenchCmd::Sched(a)) => bench_sched::run(&a, out),
        Cmd::Bench(BenchCmd::Table(t)) => bench_sched::table(&t, out),
        Cmd::Sim(a) => sim::run(&a, out),
        Cmd::Bench(BenchCmd::Shape(s)) => bench_shape::run(&s, out),
        Cmd::Bench(BenchCmd::Pspat(a)) => bench_pspat::run(&a, out),
        Cmd::Demo {
            ops,
            json,
            synthetic,
            seconds,
        } => {
            let synthetic = synthetic || ops.is_some();
            let ops = ops.unwrap_or_else(|| "2M".into());
            if synthetic || !pktsched_io::netns::is_root() {
                if !synthetic {
                    eprintln!(
                        "demo: in memory (run as root for the live demo: real frames between \
                         network namespaces it creates and removes){}",
                        if seconds.is_some() {
                            "; --seconds is the live demo's"
                        } else {
                            ""
                        }
                    );
                }
                bench_sched::demo(&ops, json, out)
            } else {
                match live_demo::run(seconds.unwrap_or(live_demo::DEFAULT_SECONDS), json, out) {
                    Err(e) if live_demo::could_not_build(&e) => {
                        eprintln!(
                            "demo: {e:#}; running the in-memory demo instead (the live one \
                             needs iproute2 and ethtool: ci/deps.sh installs them)"
                        );
                        bench_sched::demo(&ops, json, out)
                    }
                    other => other,
                }
            }
        }
        Cmd::Calc(CalcCmd::Ingress(a)) => calc::ingress(&a, out),
        Cmd::Run(a) => shaper::run(&a, out),
        Cmd::Route(a) => route::route(&a, out),
        Cmd::Check(a) => shaper::check(&a, out),
        Cmd::Stats(a) => route::stats(&a, out),
        Cmd::Reload(a) => route::reload(&a, out),
        Cmd::Gen(a) => traffic::generate(&a, out),
        Cmd::Sink(a) => traffic::sink(&a, out),
        Cmd::Plot(p) => plot::run(&p, out),
        Cmd::Algorithms { json } => {
            let lims: Vec<pktsched_core::Limits> = pktsched_core::Algorithm::ALL
                .iter()
                .map(|a| a.build::<u64>().limits())
                .collect();
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&lims)?)?;
                return Ok(());
            }
            writeln!(
                out,
                "{:<6} {:>10} {:>12} {:>14} {:>10} {:>10} {:>8}",
                "alg",
                "max flows",
                "max weight",
                "max weight sum",
                "max_len",
                "max limit",
                "levels"
            )?;
            for l in lims {
                let levels = if l.levels >= 1 << 32 {
                    "-".to_string()
                } else {
                    l.levels.to_string()
                };
                writeln!(
                    out,
                    "{:<6} {:>10} {:>12} {:>14} {:>10} {:>10} {:>8}",
                    l.alg,
                    l.max_flows,
                    l.max_weight,
                    l.max_weight_sum,
                    l.max_len,
                    l.max_limit,
                    levels
                )?;
            }
            Ok(())
        }
        Cmd::Rate { rate, len } => {
            let r = pktsched_core::Rate::parse(&rate).map_err(|e| anyhow::anyhow!("{e}"))?;
            writeln!(
                out,
                "{r} = {} bit/s = {} B/s",
                r.as_bps(),
                r.as_bps() as f64 / 8.0
            )?;
            writeln!(
                out,
                "a {len}-byte packet takes {} (rounded up to whole ns)",
                r.tx_time(len)
            )?;
            Ok(())
        }
    }
}
