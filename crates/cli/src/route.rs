//! `pktsched route`: a thin shell over `pktsched_run::router` (config,
//! devices, forwarding loop, control socket).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use pktsched_run::router::{self, RouteOptions};

use crate::output::Stdout;

/// `pktsched route`.
#[derive(Debug, Args)]
pub(crate) struct RouteArgs {
    /// The router config (see examples/route.toml).
    #[arg(long, short = 'c', conflicts_with = "check")]
    config: Option<PathBuf>,
    /// Validate FILE and print it normalised, every default filled in.
    #[arg(long, value_name = "FILE")]
    check: Option<PathBuf>,
    /// Print the final counters as JSON.
    #[arg(long)]
    json: bool,
    /// Stop after this long (e.g. `30s`); default: until SIGINT/SIGTERM.
    #[arg(long)]
    duration: Option<String>,
    /// The control socket (default: the config's control.socket).
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,
    /// Keep the process's capabilities after the sockets are open.
    #[arg(long)]
    keep_privileges: bool,
}

pub(crate) fn route(a: &RouteArgs, out: &mut Stdout) -> Result<()> {
    if let Some(file) = &a.check {
        let cfg = router::load_checked(file).map_err(anyhow::Error::msg)?;
        writeln!(out, "# {}: ok", file.display())?;
        write!(out, "{cfg}")?;
        return Ok(());
    }
    let Some(config) = &a.config else {
        bail!("--config FILE (run the router) or --check FILE (validate) is needed");
    };
    let duration = match &a.duration {
        Some(d) => Some(Duration::from_nanos(
            pktsched_core::units::parse_duration(d)
                .map_err(|e| anyhow::anyhow!("--duration {d:?}: {e}"))?
                .0,
        )),
        None => None,
    };
    if let Some(c) = &a.control
        && (c.as_os_str().is_empty() || c.as_os_str().len() > 100)
    {
        bail!(
            "--control {:?}: allowed a path of 1 to 100 bytes (sun_path)",
            c.display()
        );
    }
    let stop = crate::stop::stop_flag()?;
    let opts = RouteOptions {
        config: config.clone(),
        duration,
        control: a.control.clone(),
        keep_privileges: a.keep_privileges,
    };
    let snap = router::run(&opts, stop, &mut |line| eprintln!("pktsched: {line}"))
        .map_err(anyhow::Error::msg)?;
    if a.json {
        writeln!(out, "{}", snap.json())?;
    } else {
        write!(out, "{}", snap.text())?;
    }
    out.flush()?;
    crate::stop::interrupted(true)
}
