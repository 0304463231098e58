//! `pktsched run` and `check`: thin shells over
//! `pktsched-run` (config, pipeline, control socket) and `pktsched-io`
//! (the devices).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use pktsched_run::config::{BusyPolling, DEFAULT_BUSY_POLL_BUDGET, MAX_CPU, ThreadSched};
use pktsched_run::daemon::{self, DaemonEvents, DaemonOptions, ThreadOverrides};

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
    /// Once the sockets are open, run as this user and its group (the
    /// control socket is handed to it; every capability is dropped). A
    /// reload then reads the config file as that user.
    #[arg(long, value_name = "NAME", conflicts_with = "keep_privileges")]
    user: Option<String>,
    /// Pin the forwarding threads to this CPU (over the config's
    /// `link.cpu`); the control threads keep every CPU.
    #[arg(long, value_name = "N")]
    cpu: Option<u32>,
    /// Run the forwarding threads under SCHED_FIFO at this priority
    /// (1..=99, over the config's `link.sched`; needs CAP_SYS_NICE). The
    /// forwarder sleeps when idle but polls without sleeping under load,
    /// when normal threads on its CPU get only the kernel's real-time
    /// throttling share; pair with `--cpu` to give it a core of its own
    /// (with the pspat engine, its threads then share that core).
    #[arg(long, value_name = "N")]
    rt_priority: Option<u32>,
    /// Busy-poll the ingress (over the config's `link.busy_poll`): the
    /// forwarder never sleeps and drives the ingress's NAPI itself
    /// (`SO_PREFER_BUSY_POLL`), BUDGET frames per poll (default 64,
    /// 1..=1024). It takes its core whole: needs `--cpu` (or `link.cpu`)
    /// and the run-to-completion engine.
    #[arg(long, value_name = "BUDGET", num_args = 0..=1,
          default_missing_value = DEFAULT_BUSY_POLL_BUDGET_TEXT)]
    busy_poll: Option<String>,
}

/// [`DEFAULT_BUSY_POLL_BUDGET`] as clap's default text.
const DEFAULT_BUSY_POLL_BUDGET_TEXT: &str = "64";

/// `--busy-poll [BUDGET]`: the error names the value and what is allowed.
fn busy_poll_arg(v: Option<&str>) -> Result<Option<BusyPolling>> {
    let Some(v) = v else {
        return Ok(None);
    };
    let n: u32 = v.parse().map_err(|_| {
        anyhow::anyhow!(
            "--busy-poll {v:?} is not a number: allowed a budget of 1..=1024 frames per poll \
             (default {DEFAULT_BUSY_POLL_BUDGET})"
        )
    })?;
    BusyPolling::with_budget(n)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("--busy-poll: {e}"))
}

/// `pktsched check`.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The config file to validate.
    config: PathBuf,
}

pub(crate) fn check(a: &CheckArgs, out: &mut Stdout) -> Result<()> {
    // A route config is checked by `route --check`; the run config's
    // messages (an unknown `route` field) would not say so.
    crate::route::refuse_other_kind(&a.config, crate::route::ConfigKind::Run, true)?;
    let cfg = daemon::load_checked(&a.config).map_err(anyhow::Error::msg)?;
    writeln!(out, "# {}: ok", a.config.display())?;
    for note in daemon::check_notes(&cfg) {
        writeln!(out, "# note: {note}")?;
    }
    write!(out, "{cfg}")?;
    Ok(())
}

/// Daemon events: log lines on stderr, `--dump` pipelines on stdout.
struct Events<'a> {
    out: &'a mut Stdout,
}

impl DaemonEvents for Events<'_> {
    fn log(&mut self, line: &str) {
        eprintln!("pktsched: {line}");
    }

    fn second(&mut self, snapshot: &pktsched_run::stats::Snapshot) {
        // A closed stdout ends the dump, not the shaper.
        let _ = write!(self.out, "{}", snapshot.pipeline_text()).and_then(|()| self.out.flush());
    }
}

pub(crate) fn run(a: &RunArgs, out: &mut Stdout) -> Result<()> {
    crate::route::refuse_other_kind(&a.config, crate::route::ConfigKind::Run, false)?;
    let duration = match &a.duration {
        Some(d) => Some(Duration::from_nanos(
            pktsched_core::units::parse_duration(d)
                .map_err(|e| anyhow::anyhow!("--duration {d:?}: {e}"))?
                .0,
        )),
        None => None,
    };
    let sched = a
        .rt_priority
        .map(ThreadSched::fifo)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--rt-priority: {e}"))?;
    if let Some(cpu) = a.cpu.filter(|&c| c > MAX_CPU) {
        anyhow::bail!("--cpu {cpu} is out of range: allowed 0..={MAX_CPU}");
    }
    let busy_poll = busy_poll_arg(a.busy_poll.as_deref())?;
    let stop = crate::stop::stop_flag()?;
    pktsched_runtime::signal::install_reload()?;
    let opts = DaemonOptions {
        config: a.config.clone(),
        duration,
        keep_privileges: a.keep_privileges,
        user: a.user.clone(),
        threads: ThreadOverrides {
            cpu: a.cpu,
            sched,
            busy_poll,
        },
    };
    let fin = daemon::run(
        &opts,
        stop,
        &pktsched_runtime::signal::take_reload,
        a.dump,
        &mut Events { out },
    )
    .map_err(anyhow::Error::msg)?;
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
