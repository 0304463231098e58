//! The Prometheus endpoint of `pktsched run` and `pktsched route` is bound
//! next to the control socket, before the daemon drops its capabilities
//! and before anything runs: a port below 1024 is served by a daemon that
//! has dropped them, and a taken address stops the daemon with an error
//! naming it, no control socket left behind. The daemons run on a thread
//! of their own in namespaces of their own (prefix `h11-`; the capability
//! drop is per thread), removed even when a test fails. Needs root;
//! skipped otherwise.

#[path = "../../io/tests/common/untested.rs"]
mod untested;
use untested::skipped;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pktsched_io::netns::{Topology, in_namespace, is_root};
use pktsched_run::daemon::{self, DaemonEvents, DaemonOptions};
use pktsched_run::router::daemon::{self as route, RouteOptions};

const PREFIX: &str = "h11-pb-";

struct Log;
impl DaemonEvents for Log {
    fn log(&mut self, line: &str) {
        eprintln!("daemon: {line}");
    }
}

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("{PREFIX}{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run_config(dir: &Path, prometheus: &str) -> PathBuf {
    let text = format!(
        "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"100mbit\"\nbackend = \"packet\"\n\n\
         [control]\nsocket = \"{}/ctl.sock\"\nprometheus = \"{prometheus}\"\n\n\
         [[class]]\nname = \"a\"\ndefault = true\n",
        dir.display()
    );
    let path = dir.join("run.toml");
    std::fs::write(&path, text).expect("config");
    path
}

fn route_config(dir: &Path, prometheus: &str) -> PathBuf {
    let text = format!(
        "[router]\ningress = \"d0\"\negress = \"d1\"\nbackend = \"packet\"\n\n\
         [[class]]\nname = \"be\"\n\n\
         [[route]]\nprefix = \"198.18.0.2/32\"\ndev = \"d1\"\n\n\
         [control]\nsocket = \"{}/ctl.sock\"\nprometheus = \"{prometheus}\"\n",
        dir.display()
    );
    let path = dir.join("route.toml");
    std::fs::write(&path, text).expect("config");
    path
}

fn run_opts(config: PathBuf) -> DaemonOptions {
    DaemonOptions {
        config,
        // A bound on a hang; the tests stop it.
        duration: Some(Duration::from_secs(60)),
        keep_privileges: false,
        user: None,
        threads: Default::default(),
    }
}

fn route_opts(config: PathBuf) -> RouteOptions {
    RouteOptions {
        config,
        duration: Some(Duration::from_secs(60)),
        control: None,
        keep_privileges: false,
    }
}

/// `GET /metrics` on `addr` in namespace `ns`; `None` if nobody answers.
fn get_metrics(ns: &str, addr: SocketAddr) -> Option<String> {
    in_namespace(ns, || {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        Some(out)
    })
    .ok()
    .flatten()
}

/// Asks for the metrics until they come or the daemon ended (60 s: a
/// bound on a hang, not a timing goal); then stops the daemon.
fn scrape_then_stop<T>(
    ns: &str,
    addr: SocketAddr,
    daemon: std::thread::JoinHandle<T>,
    stop: &AtomicBool,
) -> (Option<String>, T) {
    let until = Instant::now() + Duration::from_secs(60);
    let mut answer = None;
    while answer.is_none() && !daemon.is_finished() && Instant::now() < until {
        answer = get_metrics(ns, addr);
        if answer.is_none() {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    stop.store(true, Ordering::Release);
    (answer, daemon.join().expect("the daemon's thread"))
}

const PRIVILEGED: &str = "127.0.0.1:81";

/// The two daemons with a Prometheus endpoint.
#[derive(Clone, Copy)]
enum Daemon {
    Run,
    Route,
}

impl Daemon {
    /// Runs the daemon with its Prometheus endpoint on `prometheus` and its
    /// control socket in `dir`, in this thread, until `stop`.
    fn run(self, dir: &Path, prometheus: &str, stop: &AtomicBool) -> Result<(), String> {
        match self {
            Daemon::Run => daemon::run(
                &run_opts(run_config(dir, prometheus)),
                stop,
                &|| false,
                false,
                &mut Log,
            )
            .map(drop),
            Daemon::Route => route::run(
                &route_opts(route_config(dir, prometheus)),
                stop,
                &mut |l: &str| eprintln!("route: {l}"),
            )
            .map(drop),
        }
    }
}

/// `which` serves its metrics (series named `series_prefix`…) on port 81
/// after dropping its capabilities.
fn serves_prometheus_below_1024(which: Daemon, scratch: &str, series_prefix: &str) {
    if !is_root() {
        skipped("needs root to create network namespaces");
        return;
    }
    let topo = Topology::line(PREFIX).expect("topology");
    let dir = Scratch::new(scratch);
    let stop = Arc::new(AtomicBool::new(false));
    let (ns, flag, path) = (topo.dut_ns.clone(), stop.clone(), dir.0.clone());
    let daemon =
        std::thread::spawn(move || in_namespace(&ns, || which.run(&path, PRIVILEGED, &flag)));
    let (answer, ran) = scrape_then_stop(
        &topo.dut_ns,
        PRIVILEGED.parse().expect("addr"),
        daemon,
        &stop,
    );
    ran.expect("namespace").expect("the daemon ran");
    let answer = answer.expect("the endpoint answered");
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.contains(series_prefix), "{answer}");
}

#[test]
fn run_serves_prometheus_on_a_port_below_1024_without_its_capabilities() {
    serves_prometheus_below_1024(Daemon::Run, "run81", "pktsched_");
}

#[test]
fn route_serves_prometheus_on_a_port_below_1024_without_its_capabilities() {
    serves_prometheus_below_1024(Daemon::Route, "route81", "pktsched_route_");
}

/// A listener on a free port of `ns`'s loopback, kept open (the daemon's
/// address is taken).
fn taken_port(ns: &str) -> TcpListener {
    in_namespace(ns, || TcpListener::bind("127.0.0.1:0"))
        .expect("namespace")
        .expect("bind")
}

/// `which`, given a Prometheus address already taken, stops with an error
/// naming it and leaves no control socket.
fn a_taken_address_stops(which: Daemon, scratch: &str) {
    if !is_root() {
        skipped("needs root to create network namespaces");
        return;
    }
    let topo = Topology::line(PREFIX).expect("topology");
    let dir = Scratch::new(scratch);
    let taken = taken_port(&topo.dut_ns);
    let addr = taken.local_addr().expect("addr");
    let stop = AtomicBool::new(false);
    let e = in_namespace(&topo.dut_ns, || which.run(&dir.0, &addr.to_string(), &stop))
        .expect("namespace")
        .expect_err("the address is taken");
    assert!(e.contains(&format!("control.prometheus {addr}")), "{e}");
    assert!(
        !dir.0.join("ctl.sock").exists(),
        "the control socket is removed (nothing serves on)"
    );
}

#[test]
fn a_taken_prometheus_address_stops_run_naming_it_with_nothing_left() {
    a_taken_address_stops(Daemon::Run, "run-taken");
}

#[test]
fn a_taken_prometheus_address_stops_route_naming_it_with_nothing_left() {
    a_taken_address_stops(Daemon::Route, "route-taken");
}
