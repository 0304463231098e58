//! `pktsched run`, `check`, `stats` and `reload`: thin shells over
//! `pktsched-run` (config, pipeline, control socket) and `pktsched-io`
//! (the devices).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use pktsched_run::control::{self, ControlServer, ControlThread, Request};
use pktsched_run::metrics_http::MetricsServer;
use pktsched_run::{Pipeline, RunConfig, config, plan};

use crate::output::Stdout;

/// `pktsched run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The config file (see `pktsched check --help` and the README).
    #[arg(long, short = 'c')]
    config: PathBuf,
    /// Print the pipeline (devices → classifier → classes → scheduler → TX)
    /// with its counters every second.
    #[arg(long)]
    dump: bool,
    /// Stop after this long (e.g. `30s`); default: until SIGINT/SIGTERM.
    #[arg(long)]
    duration: Option<String>,
    /// Print the final counters as JSON.
    #[arg(long)]
    json: bool,
    /// Keep the process's capabilities after the sockets are open (by
    /// default every capability is dropped then: nothing later needs one).
    #[arg(long)]
    keep_privileges: bool,
}

/// `pktsched check`.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The config file to validate.
    config: PathBuf,
}

/// `pktsched stats` / `pktsched reload`: which running shaper.
#[derive(Debug, Args)]
pub(crate) struct ControlArgs {
    /// The control socket (default: from `--config`, else
    /// /run/pktsched-EGRESS.sock needs `--config` to know EGRESS).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// The running shaper's config file (to find its control socket).
    #[arg(long, short = 'c')]
    config: Option<PathBuf>,
    /// JSON instead of text (`stats` only).
    #[arg(long)]
    json: bool,
    /// The Prometheus text format (`stats` only).
    #[arg(long, conflicts_with = "json")]
    prometheus: bool,
}

/// Loads and fully checks a config: syntax, ranges, and the scheduler's
/// own limits (by building it).
fn load_checked(path: &Path) -> Result<RunConfig> {
    let cfg = config::load(path)?;
    plan::build::<()>(&cfg).with_context(|| format!("{}", path.display()))?;
    Ok(cfg)
}

pub(crate) fn check(a: &CheckArgs, out: &mut Stdout) -> Result<()> {
    let cfg = load_checked(&a.config)?;
    writeln!(out, "# {}: ok", a.config.display())?;
    write!(out, "{cfg}")?;
    Ok(())
}

fn socket_of(a: &ControlArgs) -> Result<PathBuf> {
    match (&a.socket, &a.config) {
        (Some(s), _) => Ok(s.clone()),
        (None, Some(c)) => Ok(config::load(c)?.control.socket),
        (None, None) => {
            bail!("--socket PATH or --config FILE is needed to find the running shaper")
        }
    }
}

pub(crate) fn stats(a: &ControlArgs, out: &mut Stdout) -> Result<()> {
    let req = if a.json {
        Request::StatsJson
    } else if a.prometheus {
        Request::Prometheus
    } else {
        Request::Stats
    };
    let answer = control::request(&socket_of(a)?, req)?;
    write!(out, "{answer}")?;
    Ok(())
}

pub(crate) fn reload(a: &ControlArgs, out: &mut Stdout) -> Result<()> {
    let answer = control::request(&socket_of(a)?, Request::Reload)?;
    if let Some(e) = answer.strip_prefix("error: ") {
        bail!("reload refused: {}", e.trim_end());
    }
    write!(out, "{answer}")?;
    Ok(())
}

/// Re-reads `path` and applies it; the answer lists the changes.
fn apply_reload(pipeline: &Pipeline, path: &Path) -> String {
    let new = match load_checked(path) {
        Ok(c) => c,
        Err(e) => return format!("error: {e:#} (the running config is kept)\n"),
    };
    match pipeline.reload(new) {
        Ok(changes) if changes.is_empty() => "reloaded: no changes\n".into(),
        Ok(changes) => {
            let lines: Vec<String> = changes.iter().map(|c| format!("  {c}\n")).collect();
            format!("reloaded:\n{}", lines.concat())
        }
        Err(e) => format!("error: {e}\n"),
    }
}

fn answer(pipeline: &Pipeline, path: &Path, req: Request) -> String {
    if req == Request::Reload {
        let text = apply_reload(pipeline, path);
        eprint!("pktsched: {text}");
        return text;
    }
    match pipeline.snapshot() {
        Ok(s) => match req {
            Request::StatsJson => s.json() + "\n",
            Request::Prometheus => s.prometheus(),
            Request::Dump => s.pipeline_text(),
            Request::Stats | Request::Reload => s.text(),
        },
        Err(e) => format!("error: {e}\n"),
    }
}

pub(crate) fn run(a: &RunArgs, out: &mut Stdout) -> Result<()> {
    let cfg = load_checked(&a.config)?;
    let limit = match &a.duration {
        Some(d) => Some(Duration::from_nanos(
            pktsched_core::units::parse_duration(d)
                .map_err(|e| anyhow::anyhow!("--duration {d:?}: {e}"))?
                .0,
        )),
        None => None,
    };
    crate::stop::stop_flag()?;
    pktsched_runtime::signal::install_reload()?;
    let (devices, pool, backend) = pktsched_run::devices::open_packet_devices(&cfg.link)?;
    if let Some(why) = &backend.reason {
        eprintln!("pktsched: {why}");
    }
    let server = ControlServer::bind(&cfg.control.socket)?;
    // Every socket that needs privilege is open: run on without any (the
    // threads started below inherit the empty sets).
    if a.keep_privileges {
        eprintln!("pktsched: --keep-privileges: capabilities are kept");
    } else if let Err(e) = pktsched_run::sys::drop_capabilities() {
        eprintln!("pktsched: could not drop capabilities ({e}); running with them");
    }
    let pipeline = Arc::new(Pipeline::start(cfg.clone(), devices, pool)?);
    let (p, path) = (pipeline.clone(), a.config.clone());
    let control = ControlThread::spawn(server, move |req| answer(&p, &path, req))?;
    let metrics = match cfg.control.prometheus {
        Some(addr) => {
            let p = pipeline.clone();
            let m = MetricsServer::start(addr, move || {
                p.snapshot().map(|s| s.prometheus()).unwrap_or_default()
            })
            .with_context(|| format!("control.prometheus {addr}"))?;
            eprintln!("pktsched: Prometheus metrics on http://{}/metrics", m.addr);
            Some(m)
        }
        None => None,
    };
    eprintln!(
        "pktsched: shaping {} -> {} at {} ({} classes); control socket {}",
        cfg.link.ingress,
        cfg.link.egress,
        cfg.link.rate,
        cfg.classes.len(),
        cfg.control.socket.display()
    );
    let started = std::time::Instant::now();
    let mut last_dump = started;
    loop {
        std::thread::sleep(Duration::from_millis(50));
        if pktsched_runtime::signal::received().is_some()
            || limit.is_some_and(|l| started.elapsed() >= l)
        {
            break;
        }
        if pktsched_runtime::signal::take_reload() {
            eprint!("pktsched: SIGHUP: {}", apply_reload(&pipeline, &a.config));
        }
        if a.dump && last_dump.elapsed() >= Duration::from_secs(1) {
            write!(out, "{}", pipeline.snapshot()?.pipeline_text())?;
            out.flush()?;
            last_dump = std::time::Instant::now();
        }
    }
    control.stop();
    if let Some(m) = metrics {
        m.stop();
    }
    let pipeline = Arc::try_unwrap(pipeline)
        .map_err(|_| anyhow::anyhow!("the control thread still holds the pipeline"))?;
    let fin = pipeline.stop()?;
    if a.json {
        writeln!(out, "{}", fin.after_stop.json())?;
    } else {
        write!(out, "{}", fin.after_stop.text())?;
        writeln!(
            out,
            "stop: {} queued frames sent at once, {} held by the receive thread dropped",
            fin.flushed_at_stop, fin.rx_dropped_at_stop
        )?;
    }
    out.flush()?;
    crate::stop::interrupted(true)
}
