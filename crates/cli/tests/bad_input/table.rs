//! The row type of the bad-input table, how one row runs (under `timeout`
//! and `prlimit`) and how a table of rows is checked.

use crate::common::Scratch;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Seconds a row may run.
const TIME_LIMIT_S: u32 = 60;
/// Address space a row may use (bytes).
const MEMORY_LIMIT: u64 = 4 << 30;

/// Where the command's standard output goes.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Stdout {
    /// A pipe that is read to the end.
    Read,
    /// `/dev/full`: every write fails with ENOSPC.
    Full,
    /// A pipe whose reading end is closed before the command writes.
    Closed,
}

/// One case.
pub(crate) struct Row {
    /// The arguments; `{dir}` stands for the row's scratch directory.
    pub(crate) args: &'static [&'static str],
    /// Files to create in the scratch directory first: (name, content).
    pub(crate) files: &'static [(&'static str, &'static str)],
    pub(crate) stdout: Stdout,
    /// The exit status the command must end with.
    pub(crate) status: i32,
    /// Words the standard error must contain (all of them).
    pub(crate) words: &'static [&'static str],
    /// Words it must not contain (none of them).
    pub(crate) absent: &'static [&'static str],
}

/// serde's words for Rust types, which a message about a file's value
/// must not show.
pub(crate) const RUST_TYPE_WORDS: &[&str] =
    &["Raw", "enum", "struct", "u64", "i64", "invalid type"];

pub(crate) const fn row(
    args: &'static [&'static str],
    status: i32,
    words: &'static [&'static str],
) -> Row {
    Row {
        args,
        files: &[],
        stdout: Stdout::Read,
        status,
        words,
        absent: &[],
    }
}

/// Runs one row; returns a description of what went wrong, if anything.
pub(crate) fn check(r: &Row) -> Option<String> {
    // Rows of tables that run in parallel need distinct directories.
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let scratch = Scratch::new(&format!(
        "bad-input-{}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let dir = scratch.path().display().to_string();
    for (name, content) in r.files {
        std::fs::write(scratch.path().join(name), content.replace("{dir}", &dir))
            .expect("row file");
    }
    let args: Vec<String> = r.args.iter().map(|a| a.replace("{dir}", &dir)).collect();
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--as={MEMORY_LIMIT}"))
        .arg("--")
        .arg("timeout")
        .arg("-s")
        .arg("KILL")
        .arg(TIME_LIMIT_S.to_string())
        .arg(env!("CARGO_BIN_EXE_pktsched"))
        .args(&args)
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    match r.stdout {
        Stdout::Read => cmd.stdout(Stdio::piped()),
        Stdout::Full => cmd.stdout(std::fs::File::create("/dev/full").expect("/dev/full")),
        Stdout::Closed => {
            // The reading end is closed before the command starts, so its
            // first write fails whatever the timing (closing it after the
            // spawn raced with short outputs that fit in the pipe).
            let (reader, writer) = std::io::pipe().expect("pipe");
            drop(reader);
            cmd.stdout(writer)
        }
    };
    let child = cmd.spawn().expect("spawn prlimit/timeout/pktsched");
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code();
    let mut problems = Vec::new();
    if code == Some(137) || code.is_none() {
        problems.push(format!("killed (time limit {TIME_LIMIT_S} s or memory)"));
    }
    if code != Some(r.status) {
        problems.push(format!("exit status {code:?}, want {}", r.status));
    }
    if err.contains("panicked") {
        problems.push("panicked".to_string());
    }
    if err.contains(":0:0:") {
        problems.push("a position of 0:0 (none known: print the file alone)".to_string());
    }
    for w in r.words {
        if !err.contains(w) {
            problems.push(format!("stderr lacks {w:?}"));
        }
    }
    for w in r.absent {
        if err.contains(w) {
            problems.push(format!("stderr holds {w:?}"));
        }
    }
    (!problems.is_empty()).then(|| format!("{args:?}: {}\n  stderr: {err}", problems.join("; ")))
}

pub(crate) fn run_table(rows: &[Row]) {
    let failures: Vec<String> = rows.iter().filter_map(check).collect();
    assert!(
        failures.is_empty(),
        "{} rows failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The `[link]` head of a run config, on devices `d0` and `d1`.
pub(crate) const RUN_LINK: &str = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n";
