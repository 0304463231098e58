//! Stopping a bench: SIGINT, SIGTERM or SIGHUP (a closed terminal) ends a
//! long run at its next safe point with what was measured so far, marked
//! partial, and the exit status a shell reports for the signal (130, 143,
//! 129); so does the sink. Also: a bench that cannot produce every row
//! says why in its JSON.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Whether process `pid` has handlers for SIGINT, SIGTERM and SIGHUP (the
/// `SigCgt` mask of /proc/PID/status), i.e. a signal will now stop the
/// bench instead of killing it.
fn handlers_installed(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .unwrap_or(0);
    // Bit N - 1 for signal N.
    let want = [libc_signo::SIGINT, libc_signo::SIGTERM, libc_signo::SIGHUP]
        .iter()
        .fold(0u64, |m, n| m | 1 << (n - 1));
    mask & want == want
}

/// Signal numbers (Linux, every architecture this runs on).
mod libc_signo {
    pub(crate) const SIGHUP: u32 = 1;
    pub(crate) const SIGINT: u32 = 2;
    pub(crate) const SIGTERM: u32 = 15;
}

/// Threads of process `pid` (from /proc).
fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count())
}

/// The ids of the threads of process `pid` other than its main thread.
fn helper_threads(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or_else(
        |_| Vec::new(),
        |d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .filter(|&t| t != pid)
                .collect()
        },
    )
}

/// When to send the signal.
#[derive(Clone, Copy)]
enum When {
    /// `settle` after the handlers are installed and `min_threads` threads
    /// run (a load that need not have produced anything yet).
    Settled(usize, Duration),
    /// Once a run has finished: a bench pspat run's threads (started per
    /// run) were seen and one of them has ended.
    AfterARun,
}

/// Starts `args`, waits as `when` says (60 s at most: a bound on a hang,
/// not a timing goal), sends `sig`; returns (status, stdout, stderr).
fn stop_with(args: &[&str], when: When, sig: &str) -> (Option<i32>, String, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_pktsched"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pktsched");
    let pid = child.id();
    let t0 = Instant::now();
    let min_threads = match when {
        When::Settled(n, _) => n,
        When::AfterARun => 2,
    };
    while !(handlers_installed(pid) && threads(pid) >= min_threads) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{args:?} never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    match when {
        When::Settled(_, settle) => std::thread::sleep(settle),
        When::AfterARun => {
            // Between two runs no helper thread is alive: look again
            // until a run's threads are there (`all` of none is true).
            let mut first = helper_threads(pid);
            while first.is_empty() {
                assert!(
                    t0.elapsed() < Duration::from_secs(60),
                    "no run of {args:?} started"
                );
                std::thread::sleep(Duration::from_millis(1));
                first = helper_threads(pid);
            }
            while first.iter().all(|t| helper_threads(pid).contains(t)) {
                assert!(
                    t0.elapsed() < Duration::from_secs(60),
                    "no run of {args:?} ended"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
    let st = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A `bench pspat` of 100 runs of 100 ms: long enough to be stopped.
const LONG_PSPAT: &[&str] = &[
    "bench",
    "pspat",
    "--clients",
    "1",
    "--archs",
    "none",
    "--phases",
    "throughput",
    "--runs",
    "100",
    "--duration",
    "100ms",
    "--warmup",
    "0s",
];

#[test]
fn sigint_stops_bench_pspat_with_partial_results() {
    let (code, out, err) = stop_with(&[LONG_PSPAT, &["--json"]].concat(), When::AfterARun, "-INT");
    assert_eq!(code, Some(130), "{err}");
    assert!(
        err.contains("interrupted by SIGINT") && err.contains("partial"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["partial"], true, "{out}");
    let runs = v["runs"].as_array().unwrap();
    assert!(!runs.is_empty() && runs.len() < 100, "{out}");
    assert!(runs[0]["decisions_per_s"].as_f64().unwrap() > 0.0, "{out}");
}

#[test]
fn sigint_table_is_marked_partial() {
    let (code, out, err) = stop_with(LONG_PSPAT, When::AfterARun, "-INT");
    assert_eq!(code, Some(130), "{err}");
    assert!(
        out.contains("none Mpps") && out.contains("partial: interrupted by SIGINT"),
        "{out}"
    );
}

#[test]
fn sigterm_stops_bench_sched() {
    let (code, out, err) = stop_with(
        &["bench", "sched", "--alg", "qfq", "-n", "1G", "--json"],
        When::Settled(1, Duration::from_millis(300)),
        "-TERM",
    );
    assert_eq!(code, Some(143), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let last = v.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["partial"], true, "{out}");
    assert_eq!(last["signal"], "SIGTERM", "{out}");
}

#[test]
fn sighup_stops_the_sink_with_what_it_received() {
    // Nothing needs to arrive; the sink takes no port 0, so a free one
    // below the kernel's ephemeral range.
    let port = free_udp_port().to_string();
    let (code, out, err) = stop_with(
        &["sink", "--addr", "127.0.0.1", "--ports", &port, "--json"],
        When::Settled(1, Duration::from_millis(100)),
        "-HUP",
    );
    assert_eq!(code, Some(129), "{err}");
    assert!(err.contains("interrupted by SIGHUP"), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["partial"], true, "{out}");
    assert!(v["flows"].is_array(), "{out}");
}

#[test]
fn sighup_stops_bench_sched() {
    let (code, out, err) = stop_with(
        &["bench", "sched", "--alg", "drr", "-n", "1G", "--json"],
        When::Settled(1, Duration::from_millis(300)),
        "-HUP",
    );
    assert_eq!(code, Some(129), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let last = v.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["signal"], "SIGHUP", "{out}");
}

#[test]
fn bench_shape_json_names_the_rows_it_could_not_measure() {
    let o = Command::new(env!("CARGO_BIN_EXE_pktsched"))
        .args([
            "bench", "shape", "--flows", "1", "-n", "1000", "--len", "1", "--json",
        ])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 3);
    let failed: Vec<_> = rows.iter().filter(|r| r.get("error").is_some()).collect();
    assert_eq!(failed.len(), 2, "{v}");
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .contains("out of range"),
        "{v}"
    );
}

/// A UDP port on 127.0.0.1 free now, below the kernel's ephemeral range
/// (`ip_local_port_range`), so no socket bound to port 0 takes it
/// meanwhile: tried from a place that depends on this process's id.
fn free_udp_port() -> u16 {
    let low: u32 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768);
    let (first, span) = (10_000, low.saturating_sub(10_000).max(1));
    (0..span)
        .map(|i| first + (std::process::id() + i) % span)
        .filter_map(|p| u16::try_from(p).ok())
        .find(|&p| std::net::UdpSocket::bind(("127.0.0.1", p)).is_ok())
        .expect("a free UDP port below the ephemeral range")
}
