//! `pktsched route`: a thin shell over `pktsched_run::router` (config,
//! devices, forwarding loop, control socket); and `pktsched stats` /
//! `reload`, which find either daemon's control socket from its config.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use pktsched_run::config::{MAX_CONFIG_BYTES, read_capped};
use pktsched_run::control::{self, Request};
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
    /// Stop after this long (e.g. `30s`); default: until SIGINT, SIGTERM or SIGHUP (route does not reload).
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
        refuse_other_kind(file, ConfigKind::Route, true)?;
        let cfg = router::load_checked(file).map_err(anyhow::Error::msg)?;
        writeln!(out, "# {}: ok", file.display())?;
        write!(out, "{cfg}")?;
        return Ok(());
    }
    let Some(config) = &a.config else {
        bail!("--config FILE (run the router) or --check FILE (validate) is needed");
    };
    refuse_other_kind(config, ConfigKind::Route, false)?;
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

/// `pktsched stats` / `pktsched reload`: which daemon to ask, by its
/// control socket or by its config (a `pktsched route` or a `pktsched
/// run` config).
#[derive(Debug, Args)]
pub(crate) struct DaemonArgs {
    /// The control socket.
    #[arg(long)]
    socket: Option<PathBuf>,
    /// The running shaper's or router's config file (to find its
    /// control socket; which kind it is is told by its `[router]` or
    /// `[link]` table).
    #[arg(long, short = 'c', conflicts_with = "socket")]
    config: Option<PathBuf>,
}

/// `pktsched stats`: the daemon and the form of its counters.
#[derive(Debug, Args)]
pub(crate) struct StatsArgs {
    #[command(flatten)]
    daemon: DaemonArgs,
    /// The counters as JSON (`pktsched run`'s vocabulary: `class`,
    /// `bytes`, `packets`, `drops`, `drops_by_reason`, `qlen`, latencies
    /// in µs; a counter not kept is `null`).
    #[arg(long)]
    json: bool,
    /// The counters in the Prometheus text format (what `GET /metrics`
    /// answers with `control.prometheus` set).
    #[arg(long, conflicts_with = "json")]
    prometheus: bool,
}

/// `pktsched reload`: the daemon and the form of what changed.
#[derive(Debug, Args)]
pub(crate) struct ReloadArgs {
    #[command(flatten)]
    daemon: DaemonArgs,
    /// What the reload changed as JSON: `{"reloaded": true, "changes":
    /// [{"change": "added" | "removed" | "changed" | "link", "class":
    /// NAME, "fields": [...]}], "notes": [...]}` (notes: settings of the
    /// new config that will not be used, as `check` prints them).
    #[arg(long)]
    json: bool,
    /// Not a reload option (hidden): refused with a pointer to `pktsched
    /// stats --prometheus`, rather than clap's bare "unexpected argument".
    #[arg(long, hide = true)]
    prometheus: bool,
}

/// What kind of daemon a config file is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConfigKind {
    /// `pktsched route` (`[router]`).
    Route,
    /// `pktsched run` (`[link]`).
    Run,
}

/// Refuses a config of the other kind before its own parser's messages
/// (an unknown field `router` or `limit`) could hide what is wrong: the
/// error names the command that takes it (its validating one when
/// `validating`: `check` or `route --check`). A file that is neither, or
/// not TOML, is left to the parser, whose messages name the line.
pub(crate) fn refuse_other_kind(path: &Path, want: ConfigKind, validating: bool) -> Result<()> {
    // (the other kind, its daemon and table, this command and table)
    let (other, its_cmd, its_table, cmd, table) = match (want, validating) {
        (ConfigKind::Route, false) => (ConfigKind::Run, "run", "[link]", "route", "[router]"),
        (ConfigKind::Route, true) => (
            ConfigKind::Run,
            "run",
            "[link]",
            "route --check",
            "[router]",
        ),
        (ConfigKind::Run, false) => (ConfigKind::Route, "route", "[router]", "run", "[link]"),
        (ConfigKind::Run, true) => (ConfigKind::Route, "route", "[router]", "check", "[link]"),
    };
    let suggest = match (other, validating) {
        (_, false) => format!("pktsched {its_cmd} --config"),
        (ConfigKind::Run, true) => "pktsched check".to_string(),
        (ConfigKind::Route, true) => "pktsched route --check".to_string(),
    };
    match config_kind(path) {
        Ok(kind) if kind == other => bail!(
            "{path}: a `pktsched {its_cmd}` config (it has {its_table}); `pktsched {cmd}` \
             takes configs with {table}: allowed `{suggest} {path}`",
            path = path.display()
        ),
        _ => Ok(()),
    }
}

/// Tells a route config from a run config by its top-level tables.
pub(crate) fn config_kind(path: &Path) -> Result<ConfigKind> {
    let text = read_capped(path, "config", MAX_CONFIG_BYTES).map_err(anyhow::Error::msg)?;
    let table: toml::Table = toml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}: not a TOML file: {}", path.display(), e.message()))?;
    match (table.contains_key("router"), table.contains_key("link")) {
        (true, false) => Ok(ConfigKind::Route),
        (false, true) => Ok(ConfigKind::Run),
        (true, true) => bail!(
            "{}: has both [router] (a `pktsched route` config) and [link] (a `pktsched run` \
             config): allowed one of them",
            path.display()
        ),
        (false, false) => bail!(
            "{}: neither a `pktsched route` config (no [router] table) nor a `pktsched run` \
             config (no [link] table)",
            path.display()
        ),
    }
}

/// The control socket named by `--socket`, else by the config's
/// `[control] socket` (route or run config).
fn socket_of(a: &DaemonArgs) -> Result<PathBuf> {
    match (&a.socket, &a.config) {
        (Some(s), _) => Ok(s.clone()),
        (None, Some(c)) => match config_kind(c)? {
            ConfigKind::Route => Ok(router::load(c)?.control.socket),
            ConfigKind::Run => Ok(pktsched_run::config::load(c)?.control.socket),
        },
        (None, None) => {
            bail!("--socket PATH or --config FILE is needed to find the running shaper or router")
        }
    }
}

/// `pktsched stats` for either daemon.
pub(crate) fn stats(a: &StatsArgs, out: &mut Stdout) -> Result<()> {
    let req = if a.json {
        Request::StatsJson
    } else if a.prometheus {
        Request::Prometheus
    } else {
        Request::Stats
    };
    let socket = socket_of(&a.daemon)?;
    let answer = control::request(&socket, req)?;
    write!(out, "{}", daemon_answer("stats", &socket, &answer)?)?;
    Ok(())
}

/// The daemon's answer to `command`, or an error when there was none (the
/// daemon closed the connection) or it was an `error: …` line: either way
/// the command fails (exit status 2) instead of printing it as the result.
fn daemon_answer<'a>(command: &str, socket: &Path, answer: &'a str) -> Result<&'a str> {
    if answer.trim().is_empty() {
        bail!(
            "{command}: no answer from pktsched on {}: the daemon closed the connection without \
             one (is it stopping?)",
            socket.display()
        );
    }
    if let Some(e) = answer.strip_prefix("error: ") {
        let verb = if command == "reload" {
            "refused"
        } else {
            "failed"
        };
        bail!("{command} {verb}: {}", e.trim_end());
    }
    Ok(answer)
}

/// `pktsched reload` for either daemon: prints what changed, as text or
/// (`--json`) one JSON object; a refusal is an error either way.
pub(crate) fn reload(a: &ReloadArgs, out: &mut Stdout) -> Result<()> {
    if a.prometheus {
        bail!(
            "--prometheus: `pktsched reload` prints what changed as text or --json; \
             --prometheus is allowed with `pktsched stats`"
        );
    }
    let socket = socket_of(&a.daemon)?;
    let answer = control::request(&socket, Request::Reload)?;
    let answer = daemon_answer("reload", &socket, &answer)?;
    if a.json {
        let json = pktsched_run::reload::answer_json(answer)
            .map_err(|e| anyhow::anyhow!("reload: {e}"))?;
        writeln!(out, "{json}")?;
    } else {
        write!(out, "{answer}")?;
    }
    Ok(())
}
