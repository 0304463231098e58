//! `pktsched run` as a program on a real wire: started in a namespace of
//! its own, fed by `pktsched gen`, read by `pktsched sink`, asked for its
//! counters and reloaded over the control socket, stopped by SIGTERM with
//! every frame accounted for. Needs root (CI runs as root); skipped with a
//! message otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::skipped;

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Guard, Scratch};
use pktsched_io::netns::{Topology, is_root};

const BIN: &str = env!("CARGO_BIN_EXE_pktsched");

const METRICS_PORT: u16 = 19465;

fn config(socket: &str, weight: u32) -> String {
    format!(
        "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"50mbit\"\noverhead = 24\n\n\
         [control]\nsocket = \"{socket}\"\nprometheus = \"{METRICS_PORT}\"\n\n\
         [[class]]\nname = \"voice\"\nweight = {weight}\nmatch = [{{ dport = 5000 }}]\n\n\
         [[class]]\nname = \"rest\"\ndefault = true\n"
    )
}

fn in_ns(ns: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, BIN]).args(args);
    c
}

fn output(mut c: Command) -> (i32, String, String) {
    let o = c.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Whether a UDP socket in namespace `ns` is bound to `port` (the local
/// address column of its /proc/net/udp, `ADDR:PORT` in hex).
fn udp_bound(ns: &str, port: u16) -> bool {
    let o = Command::new("ip")
        .args(["netns", "exec", ns, "cat", "/proc/net/udp"])
        .output()
        .unwrap();
    let want = format!(":{port:04X}");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(1))
        .any(|local| local.ends_with(&want))
}

#[test]
fn run_serves_stats_reloads_and_accounts_for_every_frame_on_sigterm() {
    if !is_root() {
        skipped("needs root to create network namespaces");
        return;
    }
    let topo = Topology::line("pst-cli-").expect("topology");
    let scratch = Scratch::new("run-netns");
    let socket = scratch.path().join("ctl.sock").display().to_string();
    let cfg = scratch.file("run.toml", &config(&socket, 3));
    let shaper = in_ns(&topo.dut_ns, &["run", "--config", &cfg])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut guard = Guard(Some(shaper));
    let until = Instant::now() + Duration::from_secs(20);
    while !std::path::Path::new(&socket).exists() {
        assert!(Instant::now() < until, "the control socket never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "control socket is owner-only");
    // Its sockets open, the shaper runs without any capability. The
    // control socket appears a moment before the drop (the Prometheus
    // listener, if any, is bound in between), so look until it has
    // happened (20 s: a bound on a hang, not a timing goal).
    let pid = guard.0.as_ref().unwrap().id();
    let cap_eff = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with("CapEff:")).unwrap();
        line.to_string()
    };
    let until = Instant::now() + Duration::from_secs(20);
    while !cap_eff().ends_with("0000000000000000") && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    let caps = cap_eff();
    assert!(caps.ends_with("0000000000000000"), "{caps}");

    // Traffic: ARP crosses the reverse path, then 2 s of UDP to the sink.
    let sink = in_ns(
        &topo.sink_ns,
        &["sink", "--ports", "5000", "--idle", "1s", "--json"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // The generator starts once the sink listens (its socket in the sink
    // namespace's /proc/net/udp; 20 s: a bound on a hang).
    let until = Instant::now() + Duration::from_secs(20);
    while !udp_bound(&topo.sink_ns, 5000) {
        assert!(Instant::now() < until, "the sink never bound port 5000");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (code, _, err) = output(in_ns(
        &topo.gen_ns,
        &[
            "gen",
            "--dst",
            "198.18.0.2",
            "--flow",
            "dport=5000,rate=10mbit,size=1000",
            "--duration",
            "2s",
        ],
    ));
    assert_eq!(code, 0, "gen: {err}");
    let o = sink.wait_with_output().unwrap();
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let received = s["flows"][0]["received"].as_u64().unwrap();
    assert!(received > 2000, "sink: {s}");
    assert_eq!(s["flows"][0]["lost"], 0, "sink: {s}");

    // Counters over the control socket.
    let (code, out, err) = output({
        let mut c = Command::new(BIN);
        c.args(["stats", "--socket", &socket, "--json"]);
        c
    });
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let voice = &v["classes"][0];
    assert_eq!(voice["class"], "voice");
    assert_eq!(voice["packets"].as_u64().unwrap(), received);
    // Wire lengths: 1000-byte frames count 1024 bytes with overhead 24.
    assert_eq!(voice["bytes"].as_u64().unwrap(), received * 1024);
    let (code, prom, _) = output({
        let mut c = Command::new(BIN);
        c.args(["stats", "--socket", &socket, "--prometheus"]);
        c
    });
    assert_eq!(code, 0);
    assert!(prom.contains("pktsched_class_packets_total{device=\"d1\",class=\"voice\"}"));
    // The same over HTTP, on 127.0.0.1 in the shaper's namespace.
    let http = pktsched_io::netns::in_namespace(&topo.dut_ns, || {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(("127.0.0.1", METRICS_PORT)).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).unwrap();
        body
    })
    .unwrap();
    assert!(http.starts_with("HTTP/1.1 200 OK"), "{http}");
    assert!(
        http.contains("pktsched_class_bytes_total{device=\"d1\",class=\"voice\"}"),
        "{http}"
    );

    // Reload: a changed weight is applied, a broken config is refused.
    std::fs::write(&cfg, config(&socket, 5)).unwrap();
    let (code, out, err) = output({
        let mut c = Command::new(BIN);
        c.args(["reload", "--socket", &socket]);
        c
    });
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("changed class voice: weight"), "{out}");
    // The same as JSON: the change reloaded with another weight.
    std::fs::write(&cfg, config(&socket, 6)).unwrap();
    let (code, out, err) = output({
        let mut c = Command::new(BIN);
        c.args(["reload", "--json", "--socket", &socket]);
        c
    });
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("reload --json is JSON");
    assert_eq!(v["reloaded"], true, "{out}");
    assert_eq!(
        v["changes"],
        serde_json::json!([{ "change": "changed", "class": "voice", "fields": ["weight"] }]),
        "{out}"
    );
    std::fs::write(&cfg, "[link]\nrate = 1\n").unwrap();
    let (code, _, err) = output({
        let mut c = Command::new(BIN);
        c.args(["reload", "--socket", &socket]);
        c
    });
    assert_eq!(code, 2);
    assert!(
        err.contains("reload refused") && err.contains("running config is kept"),
        "{err}"
    );

    // SIGTERM: final counters, every frame accounted for, status 143.
    let mut shaper = guard.0.take().unwrap();
    let pid = shaper.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = shaper.wait().unwrap();
    let mut out = String::new();
    shaper
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(status.code(), Some(143), "{out}");
    assert!(out.contains("class voice\n Sent"), "{out}");
    assert!(out.contains("stop: "), "{out}");
    assert!(
        !std::path::Path::new(&socket).exists(),
        "socket removed at exit"
    );
}

/// `pktsched demo` as root: the live demo shapes real frames between
/// namespaces it creates, prints every class, and leaves no namespace.
#[test]
fn live_demo_runs_and_cleans_up() {
    if !is_root() {
        skipped("needs root to create network namespaces");
        return;
    }
    // A namespace a killed demo left (named after a pid that no longer
    // runs): the demo removes it before it starts.
    let gone = Command::new("true").spawn().unwrap();
    let dead_pid = gone.id();
    let _ = gone.wait_with_output();
    let stale = format!("pktsched-demo-{dead_pid}-0-gen");
    let made = Command::new("ip")
        .args(["netns", "add", &stale])
        .status()
        .unwrap();
    assert!(made.success(), "ip netns add {stale}");
    let _stale_guard = RemoveNs(stale.clone());
    let demo = Command::new(BIN)
        .args(["demo", "--seconds", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = demo.id();
    let o = demo.wait_with_output().unwrap();
    let (code, out, err) = (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert_eq!(code, 0, "{err}");
    for class in ["voice", "video", "web", "bulk"] {
        assert!(out.contains(class), "{out}");
    }
    assert!(out.contains("voice latency through the shaper"), "{out}");
    assert!(err.contains("t= "), "live lines on stderr: {err}");
    // Its own namespaces (named after its pid); another demo's, running
    // or left by a killed one, are not this run's to judge.
    let own = format!("pktsched-demo-{pid}-");
    let left = pktsched_io::netns::namespaces().unwrap();
    assert!(
        !left.iter().any(|n| n.starts_with(&own)),
        "namespaces left: {left:?}"
    );
    assert!(!left.contains(&stale), "the stale {stale} was left");
}

/// Deletes a namespace this test made, also when it fails.
struct RemoveNs(String);

impl Drop for RemoveNs {
    fn drop(&mut self) {
        if pktsched_io::netns::namespaces().is_ok_and(|l| l.contains(&self.0)) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }
}
