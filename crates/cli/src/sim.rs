//! `pktsched sim SCENARIO.toml`: runs a scenario in virtual time and prints
//! per-flow service guarantees next to their bounds.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use pktsched_sim::engine::{self, Options};
use pktsched_sim::{report, scenario};

/// Arguments of `pktsched sim`.
#[derive(Debug, clap::Args)]
pub(crate) struct SimArgs {
    /// Scenario file (TOML); see examples/scenarios/.
    scenario: PathBuf,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Write one CSV row per packet: flow,len,arrival_ns,departure_ns,fluid_finish_ns.
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
    #[arg(long)]
    seed: Option<u64>,
    /// Compute the fluid reference on the simulation's own thread instead
    /// of a second one (same results).
    #[arg(long)]
    one_thread: bool,
}

pub(crate) fn run(a: &SimArgs) -> Result<()> {
    let mut cfg = scenario::load(&a.scenario)?;
    if let Some(s) = a.seed {
        cfg.seed = s;
    }
    let opt = Options {
        departures: a.departures.is_some(),
        fluid_thread: !a.one_thread,
        ..Options::for_cfg(&cfg)
    };
    let t0 = Instant::now();
    let out = run_with_bar(&cfg, opt)?;
    let wall = t0.elapsed();
    let rep = report::build(&cfg, &out);
    if let Some(p) = &a.departures {
        let f = std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?;
        let mut w = std::io::BufWriter::new(f);
        writeln!(w, "flow,len,arrival_ns,departure_ns,fluid_finish_ns")?;
        for d in &out.departures {
            let fl = d.fluid.map_or_else(String::new, ns);
            writeln!(
                w,
                "{},{},{},{},{}",
                d.flow,
                d.len,
                ns(d.arrival),
                ns(d.departure),
                fl
            )?;
        }
        w.flush()?;
    }
    if let Some(p) = &a.plot {
        let files =
            pktsched_sim::plot::write_all(p, &cfg, &out, &rep).map_err(anyhow::Error::msg)?;
        for f in files {
            eprintln!("wrote {}", f.display());
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
    } else {
        print!("{}", rep.table());
    }
    if a.profile {
        // CPU time of this thread (Linux schedstat, ns): these machines are
        // shared, and wall time counts the time other processes ran.
        let time = |o: Options| -> Result<(f64, f64, Option<Option<u64>>)> {
            let (t, c) = (Instant::now(), pktsched_sim::thread_cpu_ns());
            let out = engine::simulate(&cfg, o)?;
            let wall = t.elapsed().as_secs_f64();
            let cpu = match (c, pktsched_sim::thread_cpu_ns()) {
                (Some(a), Some(b)) => (b - a) as f64 / 1e9,
                _ => wall,
            };
            Ok((
                wall,
                cpu,
                out.fluid_threaded.then_some(out.fluid_thread_cpu_ns),
            ))
        };
        let one = Options {
            fluid_thread: false,
            ..Options::default()
        };
        let (two_wall, two_cpu, fluid_cpu) = time(Options::default())?;
        let (_, full, _) = time(one)?;
        let (_, nofluid, _) = time(Options {
            fluid: false,
            ..one
        })?;
        let (_, bare, _) = time(Options {
            fluid: false,
            metrics: false,
            ..one
        })?;
        let pk = out.packets as f64;
        let per = |s: f64| s / pk * 1e9;
        match fluid_cpu {
            Some(Some(f)) => eprintln!(
                "profile, fluid reference on a second thread: {} packets in {two_wall:.3} s wall = {:.2} M packets/s; simulation thread {two_cpu:.3} s CPU ({:.0} ns/pkt), fluid thread {:.3} s CPU ({:.0} ns/pkt)",
                out.packets,
                pk / two_wall / 1e6,
                per(two_cpu),
                f as f64 / 1e9,
                per(f as f64 / 1e9),
            ),
            Some(None) => eprintln!(
                "profile, fluid reference on a second thread: {two_wall:.3} s wall (no per-thread CPU time on this system)"
            ),
            None => eprintln!("profile: this scenario runs on one thread ({two_wall:.3} s wall)"),
        }
        eprintln!(
            "profile, one thread ({}): full {full:.3} s = {:.2} M packets/s; scheduler+sources+link {bare:.3} s ({:.0} ns/pkt), metrics {:.3} s ({:.0} ns/pkt), fluid reference {:.3} s ({:.0} ns/pkt)",
            if pktsched_sim::thread_cpu_ns().is_some() {
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
        );
    } else {
        eprintln!(
            "simulated {} packets in {:.3} s ({:.2} M packets/s)",
            out.packets,
            wall.as_secs_f64(),
            out.packets as f64 / wall.as_secs_f64().max(1e-9) / 1e6
        );
    }
    if !rep.accounting.conserved {
        bail!("packet accounting does not add up (see the packets line above): this is a bug");
    }
    if !rep.violations.is_empty() {
        bail!(
            "{} measurement(s) exceed their bound:\n  {}",
            rep.violations.len(),
            rep.violations.join("\n  ")
        );
    }
    Ok(())
}

fn ns(ps: u64) -> String {
    format!("{}.{:03}", ps / 1000, ps % 1000)
}

/// Runs the scenario; if it takes more than half a second and stderr is a
/// terminal, shows how far the virtual clock has got (arrivals end at
/// 100 %; a drain after that shows as "draining").
fn run_with_bar(cfg: &pktsched_sim::SimConfig, opt: Options) -> Result<engine::Outcome> {
    use std::io::IsTerminal as _;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
    let progress = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let show = std::io::stderr().is_terminal();
    let out = std::thread::scope(|sc| {
        if show {
            sc.spawn(|| {
                let t0 = Instant::now();
                let mut bar: Option<indicatif::ProgressBar> = None;
                while !done.load(Relaxed) {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                    if t0.elapsed().as_millis() < 500 {
                        continue;
                    }
                    let b = bar.get_or_insert_with(|| {
                        let b = indicatif::ProgressBar::new(1000);
                        b.set_style(
                            indicatif::ProgressStyle::with_template(
                                "{bar:40} {percent:>3}% of the virtual time {msg} (eta {eta})",
                            )
                            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                        );
                        b
                    });
                    let t = progress.load(Relaxed);
                    b.set_position(
                        (u128::from(t) * 1000 / u128::from(cfg.duration_ps.max(1))).min(1000)
                            as u64,
                    );
                    if t > cfg.duration_ps {
                        b.set_message("(draining)");
                    }
                }
                if let Some(b) = bar {
                    b.finish_and_clear();
                }
            });
        }
        let r = engine::simulate_observed(cfg, opt, &progress);
        done.store(true, Relaxed);
        r
    });
    Ok(out?)
}
