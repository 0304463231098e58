//! `pktsched run --busy-poll` writes the ingress's NAPI settings
//! (`napi_defer_hard_irqs`, `gro_flush_timeout`) and must put them back
//! however it ends: killed with SIGKILL, the next run finds the state file
//! and puts them back (saying so); sent SIGINT and SIGTERM at once, the
//! second writes them back before the process dies of it. A second
//! busy-polling run on the same device is refused, naming the first. In
//! namespaces of their own (prefixes `hdbp-`, `hdbq-`); need root (CI runs as
//! root), skipped otherwise; a run that does not write the settings
//! fails them (unless `PKTSCHED_ALLOW_UNWRITTEN_NAPI` is set).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::skipped;

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{Guard, Scratch};
use pktsched_io::netns::{Topology, is_root};

const BIN: &str = env!("CARGO_BIN_EXE_pktsched");

/// `DEV`'s sysfs file `name` in namespace `ns`, trimmed.
fn sysfs(ns: &str, name: &str) -> String {
    let o = Command::new("ip")
        .args(["netns", "exec", ns, "cat"])
        .arg(format!("/sys/class/net/d0/{name}"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Starts the shaper with busy polling in `ns` and waits until its log
/// says the settings are written; its stderr lines keep coming on the
/// returned channel. `None` when it runs without writing them, which
/// fails the test unless `PKTSCHED_ALLOW_UNWRITTEN_NAPI` is set.
fn start(ns: &str, cfg: &str) -> (Guard, mpsc::Receiver<String>, Option<Vec<String>>) {
    // Guarded at once: a panic below kills it.
    let mut guard = Guard(Some(
        Command::new("ip")
            .args(["netns", "exec", ns, BIN, "run", "--config", cfg])
            .args(["--busy-poll", "--cpu", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let (tx, rx) = mpsc::channel();
    let err = guard.0.as_mut().unwrap().stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            eprintln!("shaper: {line}");
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let written = loop {
        let Ok(line) = rx.recv_timeout(Duration::from_secs(20)) else {
            panic!("the shaper did not start: {seen:?}");
        };
        seen.push(line.clone());
        if line.contains("napi_defer_hard_irqs 2") {
            break true;
        }
        if line.contains("busy polling d0") {
            break false;
        }
    };
    if !written {
        // The daemon ran on and logged why it did not write them: in CI
        // (root, backend xdp on veth) that is a regression, not the
        // machine's limit, so it fails unless the environment says this
        // machine cannot write them.
        let why = format!("the device settings were not written: {seen:?}");
        assert!(
            std::env::var_os(ALLOW_UNWRITTEN).is_some(),
            "{why} (set {ALLOW_UNWRITTEN}=1 where sysfs cannot be written)"
        );
        skipped(&why);
    }
    (guard, rx, written.then_some(seen))
}

/// Set where the device's NAPI settings cannot be written (a read-only
/// sysfs): the tests then say they went untested instead of failing.
const ALLOW_UNWRITTEN: &str = "PKTSCHED_ALLOW_UNWRITTEN_NAPI";

#[test]
fn busy_poll_settings_come_back_after_sigkill_and_a_second_sigterm() {
    if !is_root() {
        skipped("needs root to create network namespaces");
        return;
    }
    let topo = Topology::line("hdbp-").expect("topology");
    let ns = &topo.dut_ns;
    let scratch = Scratch::new("busy-poll-restore");
    let socket = scratch.path().join("ctl.sock").display().to_string();
    let cfg = scratch.file(
        "run.toml",
        &format!(
            "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"100mbit\"\nbackend = \"xdp\"\n\
             [control]\nsocket = \"{socket}\"\n[[class]]\nname = \"a\"\ndefault = true\n"
        ),
    );
    let before = (
        sysfs(ns, "napi_defer_hard_irqs"),
        sysfs(ns, "gro_flush_timeout"),
    );
    // SIGKILL: nothing of the process runs; the settings stay.
    let (mut guard, _log, written) = start(ns, &cfg);
    if written.is_none() {
        return;
    }
    let mut child = guard.0.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        sysfs(ns, "napi_defer_hard_irqs"),
        "2",
        "left by the killed run"
    );
    // The next run puts them back before writing its own, and says so.
    let (mut guard, log, seen) = start(ns, &cfg);
    let seen = seen.expect("written again");
    assert!(
        seen.iter().any(|l| l.contains("ended without putting back")
            && l.contains(&format!("napi_defer_hard_irqs {}", before.0))),
        "{seen:?}"
    );
    let state = seen
        .iter()
        .find_map(|l| l.split_once("put back from ").map(|(_, r)| r))
        .and_then(|r| r.split_once(": "))
        .map(|(path, _)| std::path::PathBuf::from(path))
        .expect("the state file named");
    assert!(state.exists(), "{} held by the live run", state.display());
    // Two signals at once: stopped first, so that SIGINT and SIGTERM (two
    // different signals) are both pending when it resumes and the clean
    // stop cannot finish before the second arrives. The second ends the
    // process, and the handler writes the settings back first.
    let pid = guard.0.as_ref().unwrap().id().to_string();
    // `ip netns exec` execs the shaper: the child's pid is the shaper's.
    for sig in ["-STOP", "-INT", "-TERM", "-CONT"] {
        let ok = Command::new("kill").args([sig, &pid]).status().unwrap();
        assert!(ok.success(), "kill {sig} {pid}");
    }
    let status = guard.0.take().unwrap().wait().unwrap();
    drop(log);
    assert!(
        status.signal().is_some(),
        "died of the second signal, not a clean stop: {status:?}"
    );
    assert_eq!(
        (
            sysfs(ns, "napi_defer_hard_irqs"),
            sysfs(ns, "gro_flush_timeout")
        ),
        before,
        "put back ({status:?})"
    );
    assert!(
        !state.exists(),
        "{} removed by the handler",
        state.display()
    );
    drop(guard);
    drop(topo);
}

/// A run config on `d0` → `d1` over AF_XDP with its control socket in
/// `scratch` (named `sock`).
fn xdp_config(scratch: &Scratch, name: &str, sock: &str) -> String {
    let socket = scratch.path().join(sock).display().to_string();
    scratch.file(
        name,
        &format!(
            "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"100mbit\"\nbackend = \"xdp\"\n\
             [control]\nsocket = \"{socket}\"\n[[class]]\nname = \"a\"\ndefault = true\n"
        ),
    )
}

#[test]
fn a_second_busy_polling_run_on_the_same_device_is_refused_naming_the_first() {
    if !is_root() {
        skipped("needs root to create network namespaces");
        return;
    }
    let topo = Topology::line("hdbq-").expect("topology");
    let ns = &topo.dut_ns;
    let scratch = Scratch::new("busy-poll-second");
    let (guard, _log, written) = start(ns, &xdp_config(&scratch, "one.toml", "one.sock"));
    if written.is_none() {
        return;
    }
    let first = guard.0.as_ref().unwrap().id();
    // Its own control socket, so only the device is shared; a duration, so
    // a second run that is not refused ends (and fails the test) by itself.
    let second = Command::new("ip")
        .args(["netns", "exec", ns, BIN, "run", "--config"])
        .arg(xdp_config(&scratch, "two.toml", "two.sock"))
        .args(["--busy-poll", "--cpu", "0", "--duration", "3s"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "refused: {err}");
    assert!(
        err.contains(&format!("another pktsched (pid {first}) busy-polls d0"))
            && err.contains("allowed one busy-polling run per device"),
        "{err}"
    );
    assert!(
        !err.contains("is taken by another AF_XDP socket"),
        "refused before its sockets are opened: {err}"
    );
    drop(guard);
    drop(topo);
}
