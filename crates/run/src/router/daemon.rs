//! `pktsched route` as a whole: open the devices (the ingress's per-class
//! rings, the egress's ring, a transmit ring on each), bind the control
//! socket and the Prometheus listener, drop privileges, run the forwarding
//! loop on one thread, serve `pktsched stats` (and Prometheus), stop on a
//! signal or after a duration, and hand back the final counters.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pktsched_core::ingress::Poller;
use pktsched_io::classify::Classifier;
use pktsched_io::{BufPool, ClassRx, IoStats, PacketIo};

use super::config::{self, RouteConfig};
use super::egress::Egress;
use super::ports::open_ports;
use super::stats::{RingSnapshot, RouterSnapshot};
use super::table::Table;
use super::worker::Worker;
use crate::control::{ControlServer, ControlThread, Request};
use crate::metrics_http::{MetricsListener, MetricsServer};

/// How the router runs.
#[derive(Debug, Clone)]
pub struct RouteOptions {
    /// The config file.
    pub config: PathBuf,
    /// Stop after this long (`None`: until `stop`).
    pub duration: Option<Duration>,
    /// The control socket instead of the config's.
    pub control: Option<PathBuf>,
    /// Keep the capabilities after the sockets are open.
    pub keep_privileges: bool,
}

/// Loads and fully checks a config (syntax, ranges, the ring plan, the
/// routing table).
pub fn load_checked(path: &std::path::Path) -> Result<RouteConfig, String> {
    let cfg = config::load(path).map_err(|e| e.to_string())?;
    Table::build(&cfg).map_err(|e| format!("{}: {e}", path.display()))?;
    Classifier::new(cfg.rules(), cfg.default_class as u16)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(e) = &cfg.egress {
        Egress::new(e).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(cfg)
}

/// What a snapshot needs besides the worker and the poller.
struct Meta {
    strategy: String,
    backend: String,
    ring_names: Vec<String>,
    class_names: Vec<String>,
    started: Instant,
}

/// A ring's counters. AF_PACKET counts every kernel drop as the ring
/// being full (`tp_drops`); AF_XDP tells ring-full drops from the others.
fn ring_snapshot(
    name: &str,
    budget: u32,
    xdp: bool,
    io: &IoStats,
    p: &pktsched_core::ingress::RingStats,
) -> RingSnapshot {
    let (ring_full, other) = if xdp {
        (
            io.rx_ring_full,
            io.rx_kernel_drops.saturating_sub(io.rx_ring_full),
        )
    } else {
        (io.rx_kernel_drops, 0)
    };
    RingSnapshot {
        name: name.to_string(),
        budget,
        received: io.rx_packets,
        dropped_ring_full: ring_full,
        dropped_fill_empty: io.rx_fill_empty,
        dropped_kernel: other + io.rx_no_buffer + io.rx_oversize,
        visits: p.visits,
        polls: p.polls,
        budget_exhausted: p.budget_exhausted,
        packets_per_poll: p.packets_per_poll(),
    }
}

fn snapshot<R: ClassRx, D: PacketIo>(
    w: &mut Worker<R, D>,
    poller: &Poller,
    m: &Meta,
) -> RouterSnapshot {
    let io = w.rx_mut().class_stats();
    let plan = poller.plan();
    let rings = (0..plan.rings())
        .map(|i| {
            let s = io.get(i).copied().unwrap_or_default();
            ring_snapshot(
                &m.ring_names[i],
                plan.budget(i),
                m.backend == "xdp",
                &s,
                &poller.stats()[i],
            )
        })
        .collect();
    let classes = w
        .acc
        .iter()
        .zip(&m.class_names)
        .map(|(a, n)| a.snapshot(n))
        .collect();
    RouterSnapshot {
        strategy: m.strategy.clone(),
        backend: m.backend.clone(),
        uptime_s: m.started.elapsed().as_secs_f64(),
        rounds: poller.rounds(),
        service_ns: if w.busy_packets == 0 {
            0.0
        } else {
            w.busy_ns as f64 / w.busy_packets as f64
        },
        icmp_sent: w.icmp_sent,
        icmp_not_sent: w.icmp_not_sent,
        rings,
        classes,
        egress: w.egress_snapshot(&m.class_names),
    }
}

/// The forwarding loop: device polls of the poller (rounds until the
/// device budget is spent or a round finds nothing), the reverse direction
/// and the round's end (egress release, transmit, kernel kick) after each,
/// a wait when a device poll found nothing (see [`idle_wait`]; none with
/// busy polling), a snapshot published every 100 ms and at the end.
/// The reverse direction (up to the device budget, each frame with its
/// cost) is outside the RT bound's `b` (`RingPlan::others_per_cycle`):
/// see ARCHITECTURE.md, "The router daemon", for the bound with it.
fn forward_loop<R: ClassRx, D: PacketIo>(
    mut w: Worker<R, D>,
    mut poller: Poller,
    meta: Meta,
    spin: bool,
    stop: &AtomicBool,
    out: &Mutex<RouterSnapshot>,
) {
    let budget = poller.plan().device_budget() as usize;
    let mut visits = Vec::new();
    let mut last = Instant::now();
    while !stop.load(Ordering::Acquire) {
        let n = poller.poll_device(&mut w, &mut visits) + w.serve_reverse(budget);
        w.end_round();
        if n == 0 && !spin {
            idle_wait(&mut w);
        }
        if last.elapsed() >= Duration::from_millis(100) {
            let s = snapshot(&mut w, &poller, &meta);
            if let Ok(mut g) = out.lock() {
                *g = s;
            }
            last = Instant::now();
        }
    }
    let s = snapshot(&mut w, &poller, &meta);
    if let Ok(mut g) = out.lock() {
        *g = s;
    }
}

/// A round found no frame: wait for one on the rings (see [`idle_wait_for`]),
/// or yield the CPU and poll again.
fn idle_wait<R: ClassRx, D: PacketIo>(w: &mut Worker<R, D>) {
    let now = crate::sys::monotonic_ns();
    match idle_wait_for(now, w.egress_due(now)) {
        Some(d) => {
            let _ = w.rx_mut().wait(d);
        }
        None => std::thread::yield_now(),
    }
}

/// How long an idle round may wait in `poll` on the rings: 1 ms, but not
/// past the egress's next departure `due`. The rings' wait has
/// millisecond resolution, so a departure due sooner than 1 ms gives
/// `None`: yield and poll again.
pub(crate) fn idle_wait_for(now: u64, due: Option<u64>) -> Option<Duration> {
    match due {
        Some(due) if due.saturating_sub(now) < 1_000_000 => None,
        _ => Some(Duration::from_millis(1)),
    }
}

/// The snapshot the forwarding thread last published, or why there is
/// none (its lock poisoned: the thread failed).
fn current(snap: &Mutex<RouterSnapshot>) -> Result<RouterSnapshot, String> {
    snap.lock()
        .map(|g| g.clone())
        .map_err(|_| "error: the forwarding thread failed".to_string())
}

/// The router's (ingress, egress) interfaces, the `device` label of its
/// Prometheus series.
type Devices = Arc<(String, String)>;

fn answer(snap: &Mutex<RouterSnapshot>, req: Request, devices: &Devices) -> String {
    let s = match current(snap) {
        Ok(s) => s,
        Err(e) => return e + "\n",
    };
    match req {
        Request::StatsJson => s.json() + "\n",
        Request::Prometheus => s.prometheus_on(Some((&devices.0, &devices.1))),
        Request::Stats | Request::Dump => s.text(),
        Request::Reload => "error: pktsched route does not reload; restart it\n".into(),
    }
}

/// Serves the control socket and, when bound, Prometheus from the
/// snapshot the forwarding thread publishes; a thread that does not start
/// is an error (whichever did start stops when dropped).
fn serve(
    server: ControlServer,
    metrics: Option<MetricsListener>,
    snap: &Arc<Mutex<RouterSnapshot>>,
    devices: &Devices,
) -> Result<(ControlThread, Option<MetricsServer>), String> {
    let (s3, d3) = (snap.clone(), devices.clone());
    let control = ControlThread::spawn(server, move |req| answer(&s3, req, &d3))
        .map_err(|e| format!("cannot start the control thread: {e}"))?;
    let (s4, d4) = (snap.clone(), devices.clone());
    let metrics = metrics
        .map(|m| m.serve(move || prometheus(&s4, &d4)))
        .transpose()
        .map_err(|e| format!("cannot start the Prometheus thread: {e}"))?;
    Ok((control, metrics))
}

/// The counters for Prometheus, or why not (answered as 503).
fn prometheus(snap: &Mutex<RouterSnapshot>, devices: &Devices) -> Result<String, String> {
    current(snap).map(|s| s.prometheus_on(Some((&devices.0, &devices.1))))
}

/// Runs the router until `stop` is set or the duration has passed;
/// returns the final counters.
pub fn run(
    opts: &RouteOptions,
    stop: &AtomicBool,
    log: &mut dyn FnMut(&str),
) -> Result<RouterSnapshot, String> {
    let mut cfg = load_checked(&opts.config)?;
    if let Some(c) = &opts.control {
        cfg.control.socket = c.clone();
    }
    let plan = cfg.plan();
    let table = Table::build(&cfg)?;
    let classifier =
        Classifier::new(cfg.rules(), cfg.default_class as u16).map_err(|e| e.to_string())?;
    let macs = [&cfg.router.ingress, &cfg.router.egress].map(|d| {
        crate::traffic::ifmac::mac_of(d).map_err(|e| format!("{d}: reading its MAC: {e}"))
    });
    let [m0, m1] = macs;
    let macs = [m0?, m1?];
    let (ports, backend, notes) = open_ports(&cfg, &plan)?;
    for n in &notes {
        log(n);
    }
    if let Some(w) = crate::daemon::merged_frames_warning(&cfg.router.ingress, backend) {
        log(&w);
    }
    let pool = BufPool::new(cfg.router.pool_frames as usize, 2048).ok_or_else(|| {
        format!(
            "router.pool_frames = {}: outside the pool's limits",
            cfg.router.pool_frames
        )
    })?;
    let pool: &'static BufPool = Box::leak(Box::new(pool));
    let server = ControlServer::bind(&cfg.control.socket).map_err(|e| e.to_string())?;
    // Bound with the privileges (a port below 1024), before anything runs.
    let metrics = cfg
        .control
        .prometheus
        .map(MetricsListener::bind)
        .transpose()?;
    if opts.keep_privileges {
        log("--keep-privileges: capabilities are kept");
    } else if let Err(e) = crate::sys::drop_capabilities() {
        log(&format!(
            "could not drop capabilities ({e}); running with them"
        ));
    }
    let mut class_names: Vec<String> = cfg.classes.iter().map(|c| c.name.clone()).collect();
    class_names.push("reverse".into());
    let ring_names = if plan.rings() == 1 {
        vec!["all".to_string()]
    } else {
        cfg.classes.iter().map(|c| c.name.clone()).collect()
    };
    let meta = Meta {
        strategy: plan.strategy().name().to_string(),
        backend: backend.to_string(),
        ring_names,
        class_names,
        started: Instant::now(),
    };
    let mut worker = Worker::new(ports, pool, table, cfg.router.cost, &plan, classifier, macs)
        .with_icmp(cfg.router.addresses)
        .with_icmp6(cfg.router.addresses6);
    if let Some(e) = &cfg.egress {
        worker = worker.with_egress(Egress::new(e)?);
    }
    let poller = Poller::from_plan(plan);
    let snap = Arc::new(Mutex::new(RouterSnapshot::default()));
    let halt = Arc::new(AtomicBool::new(false));
    let spin = cfg.router.busy_poll > 0;
    let (s2, h2) = (snap.clone(), halt.clone());
    let fwd = std::thread::Builder::new()
        .name("pktsched-route".into())
        .spawn(move || forward_loop(worker, poller, meta, spin, &h2, &s2))
        .map_err(|e| e.to_string())?;
    let devices: Devices = Arc::new((cfg.router.ingress.clone(), cfg.router.egress.clone()));
    let (control, metrics) = match serve(server, metrics, &snap, &devices) {
        Ok(served) => served,
        Err(e) => {
            halt.store(true, Ordering::Release);
            let _ = fwd.join();
            return Err(e);
        }
    };
    if let Some(m) = &metrics {
        log(&format!("Prometheus metrics on http://{}/metrics", m.addr));
    }
    log(&format!(
        "routing {} <-> {} ({} classes, {}, cost {}); control socket {}",
        cfg.router.ingress,
        cfg.router.egress,
        cfg.classes.len(),
        cfg.router.strategy,
        cfg.router.cost,
        cfg.control.socket.display()
    ));
    let started = Instant::now();
    while !stop.load(Ordering::Acquire) && opts.duration.is_none_or(|d| started.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(20));
        if fwd.is_finished() {
            break;
        }
    }
    halt.store(true, Ordering::Release);
    fwd.join()
        .map_err(|_| "the forwarding thread panicked".to_string())?;
    control.stop();
    if let Some(m) = metrics {
        m.stop();
    }
    let s = snap
        .lock()
        .map_err(|_| "stats lock poisoned".to_string())?
        .clone();
    Ok(s)
}
