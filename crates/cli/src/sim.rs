//! `pktsched sim SCENARIO.toml`: arguments, progress bar and printing; the
//! run, CSV, `--profile` and verdict are `pktsched_sim::session`.

use std::io::{IsTerminal as _, Write, stderr};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use pktsched_sim::engine::Options;
use pktsched_sim::session::{self, Progress, ProgressObserver};

/// Arguments of `pktsched sim`.
#[derive(Debug, clap::Args)]
pub(crate) struct SimArgs {
    /// Scenario file (TOML); see examples/scenarios/.
    scenario: PathBuf,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Write one CSV row per packet: flow,len,arrival_ns,departure_ns,fluid_finish_ns
    /// (departure = end of its transmission).
    #[arg(long, value_name = "FILE.csv")]
    departures: Option<PathBuf>,
    /// Write SVG plots PREFIX-rate.svg, PREFIX-delay-cdf.svg, PREFIX-wfi.svg.
    #[arg(long, value_name = "PREFIX")]
    plot: Option<PathBuf>,
    /// Also time the run three ways (full; without the fluid reference;
    /// scheduler, sources and link only) and print the cost split.
    #[arg(long)]
    profile: bool,
    /// Override the scenario's seed.
    #[arg(long, value_parser = crate::output::parse_seed)]
    seed: Option<u64>,
    /// Compute the fluid reference on the simulation's own thread instead
    /// of a second one (same results).
    #[arg(long)]
    one_thread: bool,
}

pub(crate) fn run(a: &SimArgs, out: &mut crate::output::Stdout) -> Result<()> {
    let mut cfg = pktsched_sim::scenario::load(&a.scenario)?;
    if let Some(s) = a.seed {
        cfg.seed = s;
    }
    let opt = Options {
        departures: a.departures.is_some(),
        fluid_thread: !a.one_thread,
        ..Options::for_cfg(&cfg)
    };
    // The output files are opened (departures) or their directory checked
    // (plots) before the run, so a mistyped path does not cost it.
    let departures = a
        .departures
        .as_ref()
        .map(|p| {
            std::fs::File::create(p)
                .with_context(|| format!("--departures: creating {}", p.display()))
                .map(|f| (p, f))
        })
        .transpose()?;
    if let Some(prefix) = &a.plot {
        crate::output::check_output_dir(
            "--plot",
            prefix,
            "the plots are PREFIX-rate.svg, PREFIX-delay-cdf.svg, PREFIX-wfi.svg",
        )?;
    }
    let mut bar = Bar(None);
    let stop = crate::stop::stop_flag()?;
    let sim = session::simulate(
        &cfg,
        opt,
        stderr().is_terminal().then_some(&mut bar as _),
        Some(stop),
    )?;
    if let Some((p, f)) = departures {
        session::write_departures_csv(std::io::BufWriter::new(f), &sim.outcome.departures)
            .with_context(|| format!("--departures: writing {}", p.display()))?;
    }
    if let Some(p) = &a.plot {
        let files = pktsched_sim::plot::write_all(p, &cfg, &sim.outcome, &sim.report)
            .map_err(anyhow::Error::msg)?;
        for f in files {
            eprintln!("wrote {}", f.display());
        }
    }
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&sim.report)?)?;
    } else {
        write!(out, "{}", sim.report.table())?;
    }
    if a.profile {
        eprint!("{}", session::profile(&cfg, sim.outcome.packets)?);
    } else {
        eprintln!("{}", sim.summary_line());
    }
    crate::stop::interrupted(sim.report.partial)?;
    let verdict = session::verdict(&sim.report);
    if !verdict.passed() {
        bail!("{verdict}");
    }
    Ok(())
}

/// How far the virtual clock has got (arrivals end at 100 %; a drain
/// after that shows as "draining"), once the run takes a while.
struct Bar(Option<indicatif::ProgressBar>);

impl ProgressObserver for Bar {
    fn progress(&mut self, p: Progress) {
        let b = self.0.get_or_insert_with(|| {
            let style = "{bar:40} {percent:>3}% of the virtual time {msg} (eta {eta})";
            indicatif::ProgressBar::new(1000).with_style(
                indicatif::ProgressStyle::with_template(style)
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            )
        });
        b.set_position(p.permille());
        if p.draining() {
            b.set_message("(draining)");
        }
    }

    fn finish(&mut self) {
        if let Some(b) = self.0.take() {
            b.finish_and_clear();
        }
    }
}
