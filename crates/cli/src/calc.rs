//! `pktsched calc ingress`: the RT latency bound of the ingress poller
//! and the largest best-effort budget for a target, optionally next to a
//! simulation (`--simulate`) or a load sweep of every strategy
//! (`--sweep DIR`). The arithmetic is `pktsched_core::ingress::bound`,
//! the model `pktsched_sim::ingress`, the sweep's files
//! `pktsched_bench::ingress::sweep`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Result, anyhow, bail};
use clap::Args;
use pktsched_core::ingress::bound::{self, Bound};
use pktsched_core::ingress::{DEFAULT_DEVICE_BUDGET, IngressConfig, MAX_DEVICE_BUDGET};
use pktsched_core::units::parse_duration_ps;
use pktsched_sim::ingress::{
    Arrivals, ClassLoad, IngressOutcome, IngressParam, IngressSim, IngressSimError,
};

use crate::output::Stdout;

/// `pktsched calc ingress`. The simulation's flags need `--simulate` or
/// `--sweep` (clap refuses them otherwise, naming both), and `--sweep`
/// takes none of the single bound's (`--m`, `--target`, `--b`,
/// `--rho-rt`, `--simulate`): a flag that would be ignored is an error.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("model").args(["simulate", "sweep"]).multiple(false)))]
pub(crate) struct IngressArgs {
    /// Longest per-packet service time of the poller, e.g. `1us`, `250ns`.
    #[arg(long, value_name = "DURATION")]
    x: String,
    /// RT load: RT packets per second × x (0 <= rho < 1).
    #[arg(long = "rho-rt", value_name = "RHO", default_value_t = 0.0)]
    rho_rt: f64,
    /// Target RT wait in units of x: prints the largest BE budget.
    #[arg(long, conflicts_with_all = ["target", "b"])]
    m: Option<f64>,
    /// Target RT wait as a duration (e.g. `20us`): the largest BE budget.
    #[arg(long, value_name = "DURATION", conflicts_with = "b")]
    target: Option<String>,
    /// BE packets per poll cycle: prints the bound.
    #[arg(long)]
    b: Option<u64>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Also simulate LL-WFQ (RT budget max(64 − b, the bound's minimum))
    /// with these values and print the measured RT latency.
    #[arg(long)]
    simulate: bool,
    /// RT arrivals of the simulation: periodic (the bound's envelope) or
    /// poisson.
    #[arg(long, default_value = "periodic", value_parser = ["periodic", "poisson"], requires = "simulate")]
    rt_arrivals: String,
    /// BE offered load of the simulation, as a fraction of 1/x.
    #[arg(long, default_value_t = 1.0, requires = "simulate")]
    be_load: f64,
    /// Arrivals to simulate (per run, or per sweep point).
    #[arg(long, default_value_t = 200_000, requires = "model")]
    packets: u64,
    /// Service time spread: uniform in [x(1 − jitter), x].
    #[arg(long, default_value_t = 0.0, requires = "simulate")]
    jitter: f64,
    /// Seed of the simulation.
    #[arg(long, default_value_t = 1, requires = "model", value_parser = crate::output::parse_seed)]
    seed: u64,
    /// Ring capacity per class (packets) of the simulation.
    #[arg(long, default_value_t = 512, requires = "model")]
    ring: usize,
    /// Sweep SQ, RR, LL-RR and LL-WFQ over offered loads 0.2..1.6 and
    /// write DIR/ingress-sweep.csv, DIR/ingress-p99.svg (both classes),
    /// DIR/ingress-rt-p99.svg (RT only) and DIR/ingress-loss.svg.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["m", "target", "b", "rho_rt"])]
    sweep: Option<PathBuf>,
    /// RT share of the offered load in the sweep (default 0.3).
    // Checked by hand: clap waives `requires = "sweep"` when a flag that
    // conflicts with `--sweep` is present.
    #[arg(long)]
    rt_share: Option<f64>,
}

/// The sweep's RT share of the offered load unless `--rt-share` says.
const DEFAULT_RT_SHARE: f64 = 0.3;

/// The simulation's range error with the flag that set the value
/// (`load of class 1` is `--be-load`).
fn flag_error(e: IngressSimError) -> anyhow::Error {
    let IngressSimError::Range {
        field,
        value,
        allowed,
    } = e
    else {
        return e.into();
    };
    let flag = match field {
        IngressParam::Load(0) => "--rho-rt".to_string(),
        IngressParam::Load(1) => "--be-load".to_string(),
        IngressParam::Ring(_) => "--ring".to_string(),
        IngressParam::X => "--x".to_string(),
        IngressParam::Jitter => "--jitter".to_string(),
        IngressParam::Packets => "--packets".to_string(),
        IngressParam::RtShare => "--rt-share".to_string(),
        other => other.to_string(),
    };
    anyhow!("{flag} = {value}: allowed {allowed}")
}

fn dur(flag: &str, s: &str) -> Result<u64> {
    parse_duration_ps(s).map_err(|e| anyhow!("--{flag}: {e}"))
}

/// `7.143us`: a time in ps written with a readable unit.
fn show(ps: f64) -> String {
    let (v, u) = match ps {
        p if p >= 1e12 => (p / 1e12, "s"),
        p if p >= 1e9 => (p / 1e9, "ms"),
        p if p >= 1e6 => (p / 1e6, "us"),
        p if p >= 1e3 => (p / 1e3, "ns"),
        p => (p, "ps"),
    };
    format!("{v:.3}{u}")
}

pub(crate) fn ingress(a: &IngressArgs, out: &mut Stdout) -> Result<()> {
    let x_ps = dur("x", &a.x)?;
    if x_ps == 0 {
        bail!(
            "--x = {}: the per-packet service time must be positive",
            a.x
        );
    }
    if let Some(dir) = &a.sweep {
        return sweep(a, x_ps, dir, out);
    }
    if let Some(share) = a.rt_share {
        bail!("--rt-share = {share}: the RT share of a sweep's load, it needs --sweep DIR");
    }
    let (b, m) = match (a.m, &a.target, a.b) {
        (Some(m), _, _) => (bound::largest_b(m, a.rho_rt)?, Some(m)),
        (_, Some(t), _) => {
            let t = dur("target", t)?;
            let m = t as f64 / x_ps as f64;
            (bound::largest_b_for_target(t, x_ps, a.rho_rt)?, Some(m))
        }
        (_, _, Some(b)) => (b, None),
        _ => bail!(
            "give one of --m (target in units of x), --target DURATION or --b PACKETS (or --sweep DIR)"
        ),
    };
    let bd = bound::bound(b, x_ps, a.rho_rt)?;
    let paper_b = m.map(|m| bound::paper_largest_b(m, a.rho_rt)).transpose()?;
    let sim = if a.simulate {
        Some(simulate(a, &bd)?)
    } else {
        None
    };
    if a.json {
        let v = serde_json::json!({
            "x_ps": x_ps, "rho_rt": a.rho_rt, "m": m, "b": b,
            "wait_ps": bd.wait_ps, "response_ps": bd.response_ps,
            "paper_wait_ps": bd.paper_wait_ps, "paper_b": paper_b,
            "min_rt_budget": bd.min_rt_budget, "simulation": sim,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    writeln!(out, "x = {}, rho_rt = {}", show(x_ps as f64), a.rho_rt)?;
    if let (Some(m), Some(pb)) = (m, paper_b) {
        writeln!(out, "target wait = {m:.3} x = {}", show(m * x_ps as f64))?;
        writeln!(
            out,
            "largest BE budget b = {b}  ((b+rho)/(1-rho) <= m; the published rule b <= m(1-rho) gives {pb})"
        )?;
    } else {
        writeln!(out, "BE budget b = {b}")?;
    }
    writeln!(
        out,
        "RT wait     <= (b+rho)x/(1-rho) = {}",
        show(bd.wait_ps)
    )?;
    writeln!(
        out,
        "RT response <= wait + x         = {}",
        show(bd.response_ps)
    )?;
    writeln!(
        out,
        "published form b*x/(1-rho)      = {}",
        show(bd.paper_wait_ps)
    )?;
    writeln!(
        out,
        "assumes: RT budget >= {}, budgets summing to <= the device budget, RT arrivals <= 1 + rho*t/x in any t",
        bd.min_rt_budget
    )?;
    if let Some(o) = &sim {
        print_sim(o, out)?;
    }
    Ok(())
}

fn simulate(a: &IngressArgs, bd: &Bound) -> Result<IngressOutcome> {
    let be = u32::try_from(bd.b)
        .map_err(|_| anyhow!("--b = {}: too large to simulate (max {})", bd.b, u32::MAX))?;
    let rt = u32::try_from(bd.min_rt_budget)
        .unwrap_or(u32::MAX)
        .max(DEFAULT_DEVICE_BUDGET.saturating_sub(be))
        .max(1);
    let device = (rt.saturating_add(be)).max(DEFAULT_DEVICE_BUDGET);
    if device > MAX_DEVICE_BUDGET {
        bail!(
            "--simulate with b = {be}: the RT budget {rt} plus b is {device}, above the largest device budget {MAX_DEVICE_BUDGET}"
        );
    }
    if a.rho_rt <= 0.0 {
        bail!(
            "--simulate needs --rho-rt > 0 (the RT load), got {}",
            a.rho_rt
        );
    }
    let arrivals = if a.rt_arrivals == "poisson" {
        Arrivals::Poisson
    } else {
        Arrivals::Periodic
    };
    let sim = IngressSim {
        poller: IngressConfig::ll_wfq(&[rt, be]).with_device_budget(device),
        x_ps: bd.x_ps,
        jitter: a.jitter,
        classes: vec![
            ClassLoad {
                load: a.rho_rt,
                arrivals,
                ring: a.ring,
            },
            ClassLoad {
                load: a.be_load,
                arrivals: Arrivals::Poisson,
                ring: a.ring,
            },
        ],
        packets: a.packets,
        seed: a.seed,
    };
    sim.run().map_err(flag_error)
}

fn print_sim(o: &IngressOutcome, out: &mut Stdout) -> Result<()> {
    writeln!(
        out,
        "\nsimulation ({}, virtual {}):",
        o.strategy,
        show(o.duration_ps as f64)
    )?;
    writeln!(
        out,
        "{:<6} {:>10} {:>10} {:>8} {:>12} {:>12} {:>12} {:>12}",
        "class", "arrivals", "served", "loss", "p50", "p99", "p99.9", "max"
    )?;
    for c in &o.classes {
        writeln!(
            out,
            "{:<6} {:>10} {:>10} {:>8.4} {:>12} {:>12} {:>12} {:>12}",
            if c.class == 0 {
                "RT".to_string()
            } else {
                format!("BE{}", c.class)
            },
            c.arrivals,
            c.served,
            c.loss,
            show(c.p50_ps as f64),
            show(c.p99_ps as f64),
            show(c.p999_ps as f64),
            show(c.max_ps as f64)
        )?;
    }
    if let Some(b) = &o.bound {
        let met = b.rt_max_ps as f64 <= b.response_ps;
        writeln!(
            out,
            "RT max {} p99 {} vs bound {} (response): {}{}",
            show(b.rt_max_ps as f64),
            show(b.rt_p99_ps as f64),
            show(b.response_ps),
            if met { "within" } else { "EXCEEDED" },
            if b.assumptions_hold {
                ""
            } else {
                " (the bound's assumptions do not hold in this run)"
            }
        )?;
    }
    Ok(())
}

fn sweep(a: &IngressArgs, x_ps: u64, dir: &std::path::Path, out: &mut Stdout) -> Result<()> {
    let loads: Vec<f64> = (1..=8).map(|i| f64::from(i) * 0.2).collect();
    let rt_share = a.rt_share.unwrap_or(DEFAULT_RT_SHARE);
    let pts = pktsched_sim::ingress::sweep(x_ps, &loads, rt_share, a.packets, a.ring, a.seed)
        .map_err(flag_error)?;
    let csv = pktsched_bench::ingress::sweep::write(&pts, rt_share, &show(x_ps as f64), dir)?;
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&pts)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<7} {:>5} {:>5} {:>10} {:>10} {:>8}",
        "strategy", "load", "class", "p99 us", "max us", "loss"
    )?;
    for p in &pts {
        writeln!(
            out,
            "{:<7} {:>5.1} {:>5} {:>10.2} {:>10.2} {:>8.4}",
            p.strategy,
            p.load,
            if p.class == 0 { "RT" } else { "BE" },
            p.p99_us,
            p.max_us,
            p.loss
        )?;
    }
    writeln!(
        out,
        "wrote {}, ingress-p99.svg, ingress-rt-p99.svg, ingress-loss.svg",
        csv.display()
    )?;
    Ok(())
}
