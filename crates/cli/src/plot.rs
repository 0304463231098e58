//! `pktsched plot`: charts and tables from the measurement scripts' result
//! directories (the reading, the arithmetic, the drawing and the verdicts
//! live in `pktsched_bench::ingress`; [`crate::plot_ingress`] calls them
//! and prints).

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::output::Stdout;

/// `pktsched plot`.
#[derive(Debug, Subcommand)]
pub(crate) enum PlotCmd {
    /// The ingress experiment (`scripts/ingress-qos.sh`): reads
    /// RESULTS/points/*/{point,gen,sink,route}.json, writes
    /// OUT/ingress-results.csv and .json, SVGs of RT and BE p99 latency
    /// and loss per class vs offered load (one line per strategy) and of
    /// RT p99 vs RT share, prints the analytic RT bound with the
    /// router's measured per-packet time x next to the measured RT p99,
    /// and prints and writes (OUT/ingress-targets.md) the router's targets
    /// per strategy: loss-free throughput (total loss ≤ 0.1 %) vs SQ's,
    /// RT p99 and RT loss at 1.5 × capacity vs SQ's, RT p99 within the
    /// bound at ρ_RT ≤ 0.5.
    Ingress(IngressPlotArgs),
}

/// `pktsched plot ingress`.
#[derive(Debug, Args)]
pub(crate) struct IngressPlotArgs {
    /// The results directory.
    results: PathBuf,
    /// Where the CSV, JSON and SVGs go (default: RESULTS).
    #[arg(long)]
    out: Option<PathBuf>,
}

pub(crate) fn run(cmd: &PlotCmd, out: &mut Stdout) -> Result<()> {
    match cmd {
        PlotCmd::Ingress(a) => {
            let dir = a.out.as_ref().unwrap_or(&a.results);
            crate::plot_ingress::run(&a.results, dir, out)
        }
    }
}
