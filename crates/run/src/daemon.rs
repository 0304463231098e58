//! `pktsched run` as a whole: open the devices, bind the control socket
//! and the Prometheus listener (so both are bound with the privileges and
//! a taken address stops the daemon before anything runs), drop
//! privileges, start the pipeline, serve the control socket (and
//! Prometheus), apply reloads (SIGHUP or `pktsched reload`), stop on a
//! signal or after a duration, and hand back the final counters. The CLI
//! only parses arguments and prints.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use crate::config::{self, BusyPolling, Engine, RunConfig, ThreadSched};
use crate::control::{ControlServer, ControlThread, Request};
use crate::devices::open_devices;
use crate::engine::{Final, Pipeline};
use crate::metrics_http::MetricsListener;
use crate::plan;
use crate::stats::Snapshot;
use crate::sys;

/// How the daemon runs.
#[derive(Debug, Clone)]
pub struct DaemonOptions {
    /// The config file (re-read on reload).
    pub config: PathBuf,
    /// Stop after this long (`None`: until `stop`).
    pub duration: Option<Duration>,
    /// Keep the capabilities after the sockets are open.
    pub keep_privileges: bool,
    /// Run as this user (and its group) once the sockets are open.
    pub user: Option<String>,
    /// Placement of the forwarder's threads given on the command line,
    /// over the config's `link.cpu` / `link.sched`.
    pub threads: ThreadOverrides,
}

/// `--cpu`, `--rt-priority` and `--busy-poll`: they replace the config's
/// `link.cpu`, `link.sched` and `link.busy_poll` at start and at every
/// reload (so a reload does not see them as a change).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadOverrides {
    /// Pin the forwarder's threads to this CPU.
    pub cpu: Option<u32>,
    /// Their policy.
    pub sched: Option<ThreadSched>,
    /// Busy-poll the ingress.
    pub busy_poll: Option<BusyPolling>,
}

impl ThreadOverrides {
    /// Puts the command line's settings over `cfg`'s.
    pub fn apply(&self, cfg: &mut RunConfig) {
        if let Some(cpu) = self.cpu {
            cfg.link.cpu = Some(cpu);
        }
        if let Some(s) = self.sched {
            cfg.link.sched = s;
        }
        if let Some(b) = self.busy_poll {
            cfg.link.busy_poll = Some(b);
        }
    }

    /// Busy polling burns its core whole: it needs a pinned core and the
    /// run-to-completion engine (the pspat engine's two threads would
    /// share that core, one spinning). The error names both settings and
    /// where each came from.
    pub fn check_busy_poll(&self, cfg: &RunConfig) -> Result<(), String> {
        if cfg.link.busy_poll.is_none() {
            return Ok(());
        }
        let bp = match self.busy_poll {
            Some(_) => "--busy-poll".to_string(),
            None => format!("{}: link.busy_poll", cfg.file),
        };
        if cfg.link.cpu.is_none() {
            return Err(format!(
                "{bp} needs a pinned core, and no CPU is given: set link.cpu in {} or \
                 --cpu N (busy polling never sleeps: it takes that core whole)",
                cfg.file
            ));
        }
        if cfg.link.engine != Engine::RunToCompletion {
            return Err(format!(
                "{bp} needs link.engine = \"run-to-completion\", and {}: link.engine is \
                 {:?} (its receive and arbiter threads would share the pinned core, one \
                 spinning)",
                cfg.file,
                cfg.link.engine.name()
            ));
        }
        Ok(())
    }

    /// Where a setting came from, for errors.
    fn origin(&self, cfg: &RunConfig) -> String {
        let cpu = match self.cpu {
            Some(_) => "--cpu".to_string(),
            None => format!("{}: link.cpu", cfg.file),
        };
        let sched = match self.sched {
            Some(_) => "--rt-priority".to_string(),
            None => format!("{}: link.sched", cfg.file),
        };
        format!("{cpu} / {sched}")
    }
}

/// What the daemon tells its caller while it runs.
pub trait DaemonEvents {
    /// A line for the log (stderr).
    fn log(&mut self, line: &str);
    /// Once a second, when the caller asked for it (`run --dump`).
    fn second(&mut self, _snapshot: &Snapshot) {}
}

/// Loads and fully checks a config: syntax, ranges, and the scheduler's
/// own limits (by building it once).
pub fn load_checked(path: &Path) -> Result<RunConfig, String> {
    let cfg = config::load(path).map_err(|e| e.to_string())?;
    plan::build::<()>(&cfg).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(cfg)
}

/// What `check` notes about a valid config (and `run` logs at start):
/// settings its scheduler does not use, and a `link.cpu` this process may
/// not run on here (`run` would refuse it on this machine).
pub fn check_notes(cfg: &RunConfig) -> Vec<String> {
    let mut notes = cfg.unused_settings();
    if let (Some(cpu), Ok(allowed)) = (cfg.link.cpu, sys::allowed_cpus())
        && !allowed.contains(&cpu)
    {
        notes.push(format!(
            "link.cpu = {cpu} is not a CPU this process may run on here (allowed {}): `run` \
             would refuse it on this machine",
            sys::cpu_list(&allowed)
        ));
    }
    notes
}

/// Re-reads `path` and applies it (with the command line's thread
/// placement over it); the answer lists the changes and the new config's
/// notes (`note: ...`, as `run` logs them at start), or says why not
/// (`error: ...`, the running config kept).
pub fn apply_reload(pipeline: &Pipeline, path: &Path, threads: ThreadOverrides) -> String {
    reload_noted(pipeline, path, threads).0
}

/// [`apply_reload`]'s answer, and the notes of the config it applied
/// (none when the reload was refused).
fn reload_noted(
    pipeline: &Pipeline,
    path: &Path,
    threads: ThreadOverrides,
) -> (String, Vec<String>) {
    let mut new = match load_checked(path) {
        Ok(c) => c,
        Err(e) => {
            return (
                format!("error: {e} (the running config is kept)\n"),
                Vec::new(),
            );
        }
    };
    threads.apply(&mut new);
    let notes = new.unused_settings();
    match pipeline.reload(new) {
        Ok(changes) => (crate::reload::answer_text(&changes, &notes), notes),
        Err(e) => (format!("error: {e}\n"), Vec::new()),
    }
}

/// [`answer`], with the notes of a reload it applied sent to `notes`, so
/// the daemon logs them as it does at start (the control thread has no
/// log of its own).
fn answer_noting(
    pipeline: &Pipeline,
    path: &Path,
    threads: ThreadOverrides,
    req: Request,
    notes: &mpsc::Sender<String>,
) -> String {
    if req != Request::Reload {
        return answer(pipeline, path, threads, req);
    }
    let (text, applied) = reload_noted(pipeline, path, threads);
    for n in applied {
        // The daemon's loop holds the receiver until the control thread
        // has stopped.
        let _ = notes.send(n);
    }
    text
}

/// Logs the notes of the reloads applied through the control socket
/// since the last call, each as `reload: <note>`.
fn log_reload_notes(notes: &mpsc::Receiver<String>, events: &mut dyn DaemonEvents) {
    for n in notes.try_iter() {
        events.log(&format!("reload: {n}"));
    }
}

/// The answer to one control request.
pub fn answer(pipeline: &Pipeline, path: &Path, threads: ThreadOverrides, req: Request) -> String {
    if req == Request::Reload {
        return apply_reload(pipeline, path, threads);
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

/// Hands the control socket to `user` (so `pktsched stats` works as that
/// user) and switches the process to it; a refusal is an error (running on
/// as root when a user was asked for would be a surprise).
fn switch_user(user: &sys::User, control: &Path) -> Result<(), String> {
    std::os::unix::fs::chown(control, Some(user.uid), Some(user.gid)).map_err(|e| {
        format!(
            "--user {}: cannot hand the control socket {} to it: {e}",
            user.name,
            control.display()
        )
    })?;
    sys::become_user(user).map_err(|e| {
        format!(
            "--user {}: cannot switch to uid {} gid {}: {e} (needs root or CAP_SETUID/CAP_SETGID)",
            user.name, user.uid, user.gid
        )
    })
}

/// Runs until `stop` is set or the duration has passed; `reload_requested`
/// is polled (SIGHUP); `dump` asks for [`DaemonEvents::second`].
pub fn run(
    opts: &DaemonOptions,
    stop: &AtomicBool,
    reload_requested: &dyn Fn() -> bool,
    dump: bool,
    events: &mut dyn DaemonEvents,
) -> Result<Final, String> {
    let user = opts.user.as_deref().map(sys::lookup_user).transpose()?;
    let mut cfg = load_checked(&opts.config)?;
    opts.threads.apply(&mut cfg);
    opts.threads.check_busy_poll(&cfg)?;
    if cfg.link.busy_poll.is_some() && user.is_some() {
        return Err(format!(
            "busy polling with --user {}: switching user drops CAP_NET_ADMIN, and the \
             ingress's NAPI settings could not be written back at exit; run busy polling \
             without --user (it keeps CAP_NET_ADMIN only) or --user without busy polling",
            opts.user.as_deref().unwrap_or_default()
        ));
    }
    if cfg.link.busy_poll.is_some() {
        sys::refuse_if_held(Path::new(sys::STATE_DIR), &cfg.link.ingress)?;
    }
    let (devices, pool, backend) = open_devices(&cfg).map_err(|e| e.to_string())?;
    // Restored when dropped: at the end of this function, also on error.
    let napi = busy_poll_device_settings(&cfg, backend.backend, events)?;
    // The pipeline's threads inherit this thread's CPU and policy; it goes
    // back once they are started (`placed` dropped), before the control
    // threads start.
    let placed = sys::place_calling_thread(cfg.link.cpu, cfg.link.sched)
        .map_err(|e| format!("{}: {e}", opts.threads.origin(&cfg)))?;
    if cfg.link.cpu.is_some() || cfg.link.sched != ThreadSched::Other {
        events.log(&format!(
            "forwarder threads: cpu {}, policy {}",
            cfg.link.cpu.map_or("any".into(), |c| c.to_string()),
            cfg.link.sched
        ));
    }
    if let Some(why) = &backend.reason {
        events.log(why);
    }
    events.log(&format!("{}: {}", cfg.link.ingress, backend.rings));
    if let Some(warning) = merged_frames_warning(&cfg.link.ingress, backend.backend) {
        events.log(&warning);
    }
    for note in cfg.unused_settings() {
        events.log(&note);
    }
    let server = ControlServer::bind(&cfg.control.socket).map_err(|e| e.to_string())?;
    // Bound with the privileges (a port below 1024), before anything runs:
    // a taken address stops here, with nothing to clean up but the files.
    let metrics = cfg
        .control
        .prometheus
        .map(MetricsListener::bind)
        .transpose()?;
    // Every socket that needs privilege is open: run on without any (the
    // threads started below inherit the empty sets).
    drop_privileges(opts, user.as_ref(), &cfg, napi.is_some(), events)?;
    let pipeline = Pipeline::start(cfg.clone(), devices, pool)
        .map_err(|e| e.to_string())?
        .with_backend(backend.backend)
        .with_ring_board(backend.ring_board);
    drop(placed);
    let last = serve(
        opts,
        pipeline,
        server,
        metrics,
        &cfg,
        stop,
        reload_requested,
        dump,
        events,
    );
    if let Some(Err(e)) = napi.map(sys::NapiSettings::restore) {
        events.log(&format!("restoring the busy-poll device settings: {e}"));
    }
    last
}

/// Switches to `user` if one is given, then drops every capability but
/// `CAP_NET_ADMIN` when busy polling wrote device settings (restoring them
/// at exit needs it), unless `--keep-privileges`.
fn drop_privileges(
    opts: &DaemonOptions,
    user: Option<&sys::User>,
    cfg: &RunConfig,
    keep_net_admin: bool,
    events: &mut dyn DaemonEvents,
) -> Result<(), String> {
    if let Some(u) = user {
        switch_user(u, &cfg.control.socket)?;
        events.log(&format!(
            "running as user {} (uid {}, gid {})",
            u.name, u.uid, u.gid
        ));
    }
    let keep = if keep_net_admin {
        sys::CAP_NET_ADMIN
    } else {
        0
    };
    if opts.keep_privileges {
        events.log("--keep-privileges: capabilities are kept");
    } else if let Err(e) = sys::drop_capabilities_except(keep) {
        events.log(&format!(
            "could not drop capabilities ({e}); running with them"
        ));
    }
    Ok(())
}

/// Serves the control socket (and Prometheus) for the running `pipeline`,
/// applies reloads, and stops it when `stop` is set or the duration has
/// passed; returns its final counters. Should a serving thread not start,
/// the pipeline is stopped before the error is returned.
#[allow(clippy::too_many_arguments)]
fn serve(
    opts: &DaemonOptions,
    pipeline: Pipeline,
    server: ControlServer,
    metrics: Option<MetricsListener>,
    cfg: &RunConfig,
    stop: &AtomicBool,
    reload_requested: &dyn Fn() -> bool,
    dump: bool,
    events: &mut dyn DaemonEvents,
) -> Result<Final, String> {
    let pipeline = Arc::new(pipeline);
    let (p, path, threads) = (pipeline.clone(), opts.config.clone(), opts.threads);
    let (note_tx, notes) = mpsc::channel();
    let control = match ControlThread::spawn(server, move |req| {
        answer_noting(&p, &path, threads, req, &note_tx)
    }) {
        Ok(c) => c,
        Err(e) => return Err(abandon(pipeline, "the control thread", &e)),
    };
    let p = pipeline.clone();
    let metrics = metrics.map(|m| {
        m.serve(move || {
            p.snapshot()
                .map(|s| s.prometheus())
                .map_err(|e| format!("error: {e}"))
        })
    });
    let metrics = match metrics.transpose() {
        Ok(m) => m,
        Err(e) => {
            control.stop();
            return Err(abandon(pipeline, "the Prometheus thread", &e));
        }
    };
    if let Some(m) = &metrics {
        events.log(&format!("Prometheus metrics on http://{}/metrics", m.addr));
    }
    events.log(&format!(
        "shaping {} -> {} at {} ({} classes); control socket {}",
        cfg.link.ingress,
        cfg.link.egress,
        cfg.link.rate,
        cfg.classes.len(),
        cfg.control.socket.display()
    ));
    let started = Instant::now();
    let mut last_dump = started;
    while !stop.load(Ordering::Acquire) && opts.duration.is_none_or(|d| started.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(50));
        log_reload_notes(&notes, events);
        if reload_requested() {
            events.log(&format!(
                "SIGHUP: {}",
                apply_reload(&pipeline, &opts.config, opts.threads).trim_end()
            ));
        }
        if dump && last_dump.elapsed() >= Duration::from_secs(1) {
            if let Ok(s) = pipeline.snapshot() {
                events.second(&s);
            }
            last_dump = Instant::now();
        }
    }
    control.stop();
    log_reload_notes(&notes, events);
    if let Some(m) = metrics {
        m.stop();
    }
    let pipeline = Arc::try_unwrap(pipeline)
        .map_err(|_| "the control thread still holds the pipeline".to_string())?;
    pipeline.stop().map_err(|e| e.to_string())
}

/// A serving thread did not start: stops the pipeline (its threads are
/// not left running) and says why.
fn abandon(pipeline: Arc<Pipeline>, what: &str, e: &std::io::Error) -> String {
    if let Ok(p) = Arc::try_unwrap(pipeline) {
        let _ = p.stop();
    }
    format!("cannot start {what}: {e}")
}

/// On AF_PACKET, a receive offload that merges frames (GRO, LRO) hands
/// the ring frames longer than a slot, each dropped and counted in
/// `rx_oversize`: said at start, with the fix. AF_XDP sees frames before
/// GRO.
pub(crate) fn merged_frames_warning(ingress: &str, backend: &str) -> Option<String> {
    if backend != "packet" {
        return None;
    }
    let on = crate::traffic::ifmac::merging_offloads(ingress).ok()?;
    merged_frames_text(ingress, &on)
}

/// The warning for `ingress` with the merging offloads `on` (none: no
/// warning).
fn merged_frames_text(ingress: &str, on: &[&str]) -> Option<String> {
    (!on.is_empty()).then(|| {
        let list = on.join(" and ");
        format!(
            "{ingress} has {list} on: frames it merges are longer than a receive slot and \
             are dropped (counted in rx_oversize); turn it off with `ethtool -K {ingress} \
             {}` for a shaper on AF_PACKET",
            on.iter()
                .map(|o| format!("{o} off"))
                .collect::<Vec<_>>()
                .join(" ")
        )
    })
}

/// With busy polling: the ingress's NAPI settings written (and logged); an
/// error when another live run busy-polls the device.
fn busy_poll_device_settings(
    cfg: &RunConfig,
    backend: &str,
    events: &mut dyn DaemonEvents,
) -> Result<Option<sys::NapiSettings>, String> {
    let Some(b) = cfg.link.busy_poll else {
        return Ok(None);
    };
    let dev = &cfg.link.ingress;
    if backend != "xdp" {
        // AF_PACKET sockets record no NAPI instance: deferring the device's
        // interrupts would only leave frames to the flush timer.
        events.log(&format!(
            "busy polling {dev}: backend {backend} has no NAPI to drive; the forwarder \
             spins on its rings, the device's settings are left as they are"
        ));
        return Ok(None);
    }
    let index = pktsched_io::packet::if_index(dev).map_err(|e| format!("busy polling: {e}"))?;
    let state_dir = Path::new(sys::STATE_DIR);
    let applied = sys::NapiSettings::apply(
        Path::new("/sys/class/net"),
        dev,
        Some(index),
        Some(state_dir),
    );
    let napi = match applied {
        Ok(n) if n.notes.is_empty() => Some(n),
        Ok(n) => {
            for note in &n.notes {
                events.log(note);
            }
            Some(n)
        }
        // Another live run busy-polls the device: this one stops here.
        Err(sys::ApplyError::Refused(why)) => return Err(format!("busy polling {dev}: {why}")),
        Err(sys::ApplyError::NotWritten(why)) => {
            events.log(&format!(
                "busy polling {dev}: device settings not written: {why}"
            ));
            None
        }
    };
    events.log(&format!(
        "busy polling {dev}: budget {} frames{}; the forwarder never sleeps",
        b.budget,
        match napi {
            Some(_) => format!(
                ", napi_defer_hard_irqs {}, gro_flush_timeout {} ns (restored at exit)",
                sys::BUSY_POLL_DEFER_HARD_IRQS,
                sys::BUSY_POLL_GRO_FLUSH_NS
            ),
            None => String::new(),
        }
    ));
    Ok(napi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_offloads_are_warned_of_on_af_packet_only() {
        assert_eq!(
            merged_frames_text("eth1", &["gro", "lro"]).as_deref(),
            Some(
                "eth1 has gro and lro on: frames it merges are longer than a receive slot and \
                 are dropped (counted in rx_oversize); turn it off with `ethtool -K eth1 gro off \
                 lro off` for a shaper on AF_PACKET"
            )
        );
        assert_eq!(merged_frames_text("eth1", &[]), None);
        // Whatever loopback has on here, AF_XDP and a missing device get
        // no warning.
        assert_eq!(merged_frames_warning("lo", "xdp"), None);
        assert_eq!(merged_frames_warning("pscnodev0", "packet"), None);
    }

    fn cfg(extra: &str) -> RunConfig {
        let src = format!(
            "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n{extra}\n\n\
             [[class]]\nname = \"a\"\ndefault = true\n"
        );
        config::parse(&src, "t.toml", None).expect("config")
    }

    #[test]
    fn busy_polling_needs_a_pinned_core_and_the_rtc_engine_naming_both_settings() {
        let none = ThreadOverrides::default();
        none.check_busy_poll(&cfg(""))
            .expect("off: nothing to check");
        none.check_busy_poll(&cfg("busy_poll = true\ncpu = 1"))
            .expect("pinned, rtc");
        let e = none
            .check_busy_poll(&cfg("busy_poll = true"))
            .expect_err("no cpu");
        assert!(
            e.contains("t.toml: link.busy_poll needs a pinned core") && e.contains("--cpu N"),
            "{e}"
        );
        // In the file, the pair is refused when the config is read.
        let src = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n\
                   busy_poll = 8\ncpu = 1\nengine = \"pspat\"\n[[class]]\nname = \"a\"\n\
                   default = true\n";
        let e = config::parse(src, "t.toml", None)
            .expect_err("pspat")
            .to_string();
        assert!(
            e.contains("run-to-completion") && e.contains("link.engine is \"pspat\""),
            "{e}"
        );
        // From the command line: named as such, and --cpu satisfies it.
        let cli = ThreadOverrides {
            busy_poll: Some(BusyPolling { budget: 8 }),
            ..ThreadOverrides::default()
        };
        let mut c = cfg("");
        cli.apply(&mut c);
        let e = cli.check_busy_poll(&c).expect_err("no cpu");
        assert!(e.starts_with("--busy-poll needs a pinned core"), "{e}");
        let pinned = ThreadOverrides {
            cpu: Some(0),
            ..cli
        };
        let mut c = cfg("");
        pinned.apply(&mut c);
        pinned.check_busy_poll(&c).expect("pinned by --cpu");
        assert_eq!(c.link.busy_poll, Some(BusyPolling { budget: 8 }));
    }

    /// The daemon's log, recorded.
    #[derive(Default)]
    struct Log(Vec<String>);

    impl DaemonEvents for Log {
        fn log(&mut self, line: &str) {
            self.0.push(line.to_string());
        }
    }

    /// A reload through the control socket to a config whose scheduler
    /// ignores a weight answers with the note and hands it to the daemon's
    /// log (`reload: ...`, as `run` logs notes at start); a refused reload
    /// notes nothing, and neither does a stats request.
    #[test]
    fn a_reload_s_notes_are_answered_and_logged() {
        use pktsched_io::BufPool;
        use pktsched_io::mem::MemDevice;
        let dir = std::env::temp_dir().join(format!("pktsched-rx14-notes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("run.toml");
        let src = |weight: u32| {
            format!(
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n\n\
                 [scheduler]\nalgorithm = \"fifo\"\n\n[[class]]\nname = \"a\"\n\
                 weight = {weight}\nmatch = [{{ dport = 80 }}]\n\n[[class]]\nname = \"b\"\n\
                 default = true\n"
            )
        };
        std::fs::write(&path, src(1)).expect("write");
        let cfg = load_checked(&path).expect("config");
        assert_eq!(cfg.unused_settings(), Vec::<String>::new());
        let (ingress_rx, _ingress) = MemDevice::new();
        let (egress_tx, _egress) = MemDevice::new();
        let (egress_rx, _reverse_in) = MemDevice::new();
        let (ingress_tx, _reverse_out) = MemDevice::new();
        let devices = crate::engine::Devices {
            ingress_rx,
            egress_tx,
            egress_rx,
            ingress_tx,
        };
        let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(64, 2048).expect("pool")));
        let pipeline = Pipeline::start(cfg, devices, pool).expect("start");
        let threads = ThreadOverrides::default();
        let (tx, notes) = mpsc::channel();
        let mut log = Log::default();

        std::fs::write(&path, src(5)).expect("write");
        let text = answer_noting(&pipeline, &path, threads, Request::Reload, &tx);
        let note = "class \"a\": weight = 5 is not used by algorithm = \"fifo\" (drr, wf2q and \
                    qfq share by weight)";
        assert_eq!(
            text,
            format!("reloaded:\n  changed class a: weight\nnote: {note}\n")
        );
        log_reload_notes(&notes, &mut log);
        assert_eq!(log.0, [format!("reload: {note}")]);

        std::fs::write(&path, "[link]\nrate = 1\n").expect("write");
        let text = answer_noting(&pipeline, &path, threads, Request::Reload, &tx);
        assert!(text.starts_with("error: "), "{text}");
        let text = answer_noting(&pipeline, &path, threads, Request::Stats, &tx);
        assert!(!text.contains("note"), "{text}");
        log_reload_notes(&notes, &mut log);
        assert_eq!(log.0.len(), 1, "{:?}", log.0);

        pipeline.stop().expect("stop");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
