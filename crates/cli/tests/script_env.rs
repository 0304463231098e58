//! The measurement scripts' environment variables, table-driven like
//! the bad-input table (`tests/bad_input/`): each bad value is refused before the script builds,
//! creates a namespace or runs anything (exit status 2, a message naming
//! the variable, its value and what is allowed). `compare-htb.sh` runs as
//! root, so a value that would reach `$(( ))` unchecked is a command
//! injection: the first rows check nothing was executed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The workspace's `scripts/` folder.
fn scripts() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts")
}

/// Runs `script` with one variable set and checks it is refused.
fn refused(script: &str, var: &str, value: &str, words: &[&str]) -> Option<String> {
    let out = Command::new("timeout")
        // TERM first, so a script that wrongly runs on removes what it
        // created (its EXIT trap); every row should end within a second.
        .args(["-k", "10", "30", "bash"])
        .arg(scripts().join(script))
        .arg("1")
        // The built binary (no cargo build), unless the row sets it.
        .env("PKTSCHED_BIN", env!("CARGO_BIN_EXE_pktsched"))
        .env(var, value)
        .stdin(Stdio::null())
        .output()
        .expect("bash");
    let err = String::from_utf8_lossy(&out.stderr);
    let wrong = if out.status.code() != Some(2) {
        Some(format!("exit status {:?}", out.status.code()))
    } else {
        words
            .iter()
            .find(|w| !err.contains(*w))
            .map(|w| format!("no {w:?} in the message"))
    };
    wrong.map(|why| format!("{script} with {var}={value:?}: {why}; stderr:\n{err}"))
}

#[test]
fn scripts_refuse_bad_environment_values_before_running() {
    let marker = std::env::temp_dir().join(format!("pktsched-script-env-{}", std::process::id()));
    let injected = format!("a[$(touch {})]", marker.display());
    let rows: Vec<(&str, &str, &str, Vec<&str>)> = vec![
        (
            "compare-htb.sh",
            "PKTSCHED_RT",
            &injected,
            vec!["PKTSCHED_RT=", "1..99"],
        ),
        (
            "compare-htb.sh",
            "DUT_NAPI_PRIO",
            &injected,
            vec!["DUT_NAPI_PRIO=", "-99..99"],
        ),
        (
            "compare-htb.sh",
            "PKTSCHED_RT",
            "0",
            vec!["PKTSCHED_RT=0", "1..99"],
        ),
        (
            "compare-htb.sh",
            "PKTSCHED_RT",
            "100",
            vec!["PKTSCHED_RT=100", "1..99"],
        ),
        (
            "compare-htb.sh",
            "PKTSCHED_BUSY_POLL",
            "yes",
            vec!["PKTSCHED_BUSY_POLL=yes", "0 (off"],
        ),
        (
            "compare-htb.sh",
            "PKTSCHED_BACKEND",
            "xdp\"\nx = 1",
            vec!["PKTSCHED_BACKEND=", "auto (the default), xdp or packet"],
        ),
        (
            "compare-htb.sh",
            "NS_PREFIX",
            "../x",
            vec!["NS_PREFIX=../x", "a-z, 0-9 and -"],
        ),
        (
            "compare-htb.sh",
            "SAT_SINK",
            "pipe",
            vec!["SAT_SINK=pipe", "socket or none"],
        ),
        (
            "compare-htb.sh",
            "SAT_GEN",
            "ring",
            vec!["SAT_GEN=ring", "packet or gso"],
        ),
        (
            "compare-htb.sh",
            "DUT_NAPI",
            "irq",
            vec!["DUT_NAPI=irq", "thread or softirq"],
        ),
        (
            "compare-htb.sh",
            "VICTIM_RATE",
            "1mbit",
            vec!["VICTIM_RATE=1mbit", "at least 2"],
        ),
        (
            "compare-htb.sh",
            "ROUNDS",
            "0",
            vec!["ROUNDS=0", "at least 1"],
        ),
        (
            "compare-htb.sh",
            "ONLY",
            "sat speed",
            vec!["\"speed\"", "allowed: rate"],
        ),
        (
            "compare-htb.sh",
            "PKTSCHED_BIN",
            "/nonexistent/pktsched",
            vec!["PKTSCHED_BIN=/nonexistent/pktsched", "no such file"],
        ),
        (
            "compare-peers.sh",
            "PKTSCHED_BIN",
            "/nonexistent/pktsched",
            vec!["PKTSCHED_BIN=/nonexistent/pktsched", "no such file"],
        ),
        (
            "compare-peers.sh",
            "PKTSCHED_BIN",
            "/dev/null",
            vec!["PKTSCHED_BIN=/dev/null", "not an executable file"],
        ),
    ];
    let failures: Vec<String> = rows
        .iter()
        .filter_map(|(script, var, value, words)| refused(script, var, value, words))
        .collect();
    let ran = marker.exists();
    let _ = std::fs::remove_file(&marker);
    assert!(!ran, "an injected command ran: {} exists", marker.display());
    assert!(
        failures.is_empty(),
        "{} rows failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
