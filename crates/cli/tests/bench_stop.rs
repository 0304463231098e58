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

/// Starts `args`, waits until it has its signal handlers and runs
/// `min_threads` threads (a PSPAT bench's load has started), then `settle`
/// more, sends `sig`; returns (status, stdout, stderr).
fn stop_with(
    args: &[&str],
    min_threads: usize,
    sig: &str,
    settle: Duration,
) -> (Option<i32>, String, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_pktsched"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pktsched");
    let pid = child.id();
    let t0 = Instant::now();
    while !(handlers_installed(pid) && threads(pid) >= min_threads)
        && t0.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(settle);
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
    let t0 = Instant::now();
    let (code, out, err) = stop_with(
        &[LONG_PSPAT, &["--json"]].concat(),
        2,
        "-INT",
        Duration::from_millis(300),
    );
    assert_eq!(code, Some(130), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(8), "did not stop soon");
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
    let (code, out, err) = stop_with(LONG_PSPAT, 2, "-INT", Duration::from_millis(300));
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
        1,
        "-TERM",
        Duration::from_millis(300),
    );
    assert_eq!(code, Some(143), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let last = v.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["partial"], true, "{out}");
    assert_eq!(last["signal"], "SIGTERM", "{out}");
}

#[test]
fn sighup_stops_the_sink_with_what_it_received() {
    // A port of its own per test process (nothing needs to arrive).
    let port = (40_000 + std::process::id() % 20_000).to_string();
    let (code, out, err) = stop_with(
        &["sink", "--addr", "127.0.0.1", "--ports", &port, "--json"],
        1,
        "-HUP",
        Duration::from_millis(100),
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
        1,
        "-HUP",
        Duration::from_millis(300),
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
