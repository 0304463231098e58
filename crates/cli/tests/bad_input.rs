//! The bad-input table, in the spirit of the kernel's tdc: one row per
//! case — a command line (and the files it reads), where its output goes,
//! the exit status it must end with and the words its message must hold.
//!
//! Every row runs under `timeout` and `prlimit` (wall-clock and address
//! space limits), so a hang or an unbounded allocation fails the row
//! instead of the machine, and any panic fails it too. Add a row for every
//! bug fixed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Scratch;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Seconds a row may run.
const TIME_LIMIT_S: u32 = 60;
/// Address space a row may use (bytes).
const MEMORY_LIMIT: u64 = 4 << 30;

/// Where the command's standard output goes.
#[derive(Copy, Clone, Debug)]
enum Stdout {
    /// A pipe that is read to the end.
    Read,
    /// `/dev/full`: every write fails with ENOSPC.
    Full,
    /// A pipe whose reading end is closed before the command writes.
    Closed,
}

/// One case.
struct Row {
    /// The arguments; `{dir}` stands for the row's scratch directory.
    args: &'static [&'static str],
    /// Files to create in the scratch directory first: (name, content).
    files: &'static [(&'static str, &'static str)],
    stdout: Stdout,
    /// The exit status the command must end with.
    status: i32,
    /// Words the standard error must contain (all of them).
    words: &'static [&'static str],
    /// Words it must not contain (none of them).
    absent: &'static [&'static str],
}

/// serde's words for Rust types, which a message about a file's value
/// must not show.
const RUST_TYPE_WORDS: &[&str] = &["Raw", "enum", "struct", "u64", "i64", "invalid type"];

const fn row(args: &'static [&'static str], status: i32, words: &'static [&'static str]) -> Row {
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
fn check(r: &Row) -> Option<String> {
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

fn run_table(rows: &[Row]) {
    let failures: Vec<String> = rows.iter().filter_map(check).collect();
    assert!(
        failures.is_empty(),
        "{} rows failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Output that cannot be written: a full disk is an error, a closed pipe
/// ends the program quietly with 141 (128 + SIGPIPE, as a shell reports a
/// C tool in the same place).
#[test]
fn output_errors() {
    run_table(&[
        Row {
            stdout: Stdout::Full,
            ..row(
                &["rate", "10gbit"],
                2,
                &["cannot write to standard output", "No space left on device"],
            )
        },
        Row {
            stdout: Stdout::Full,
            ..row(&["algorithms"], 2, &["No space left on device"])
        },
        Row {
            stdout: Stdout::Full,
            ..row(&["algorithms", "--json"], 2, &["No space left on device"])
        },
        Row {
            stdout: Stdout::Closed,
            ..row(&["algorithms"], 141, &[])
        },
    ]);
}

/// Rates and durations: the value, what is wrong and what is allowed.
#[test]
fn units() {
    run_table(&[
        row(&["rate", "100mbps"], 2, &["ambiguous", "100mbit"]),
        row(&["rate", "--", "-1gbit"], 2, &["negative"]),
        row(&["rate", "-1gbit"], 2, &["unexpected argument", "--"]),
        row(&["rate", "12"], 2, &["no unit", "kbit"]),
        row(&["rate", ""], 2, &["empty rate"]),
        row(&["rate", "1e99999999999bit"], 2, &["too large"]),
        row(&["rate", "10gbit", "--len", "x"], 2, &["--len", "x"]),
        row(
            &["rate", "10gbit", "--len", "0"],
            2,
            &["--len", "0", "1..=1000000"],
        ),
    ]);
}

/// Scenario files: position, field, value, allowed range; caps on what a
/// file can make the simulator allocate or compute.
#[test]
fn sim_scenarios() {
    run_table(&[
        row(
            &["sim", "examples/scenarios/bench-qfq-10k.toml", "--seed=-1"],
            2,
            &[
                "'-1'",
                "--seed",
                "allowed a whole number 0..=18446744073709551615",
            ],
        ),
        row(
            &[
                "sim",
                concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../../examples/scenarios/drr-worst-case.toml"
                ),
                "--departures",
                "/proc/no/such/d.csv",
            ],
            2,
            &["--departures", "/proc/no/such/d.csv", "No such file"],
        ),
        row(
            &[
                "sim",
                concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../../examples/scenarios/drr-worst-case.toml"
                ),
                "--plot",
                "/proc/no/such/p",
            ],
            2,
            &[
                "--plot /proc/no/such/p",
                "is not a directory",
                "PREFIX-rate.svg",
            ],
        ),
        row(
            &["sim", "/nonexistent/s.toml"],
            2,
            &["cannot read scenario"],
        ),
        row(
            &["sim", "/dev/zero"],
            2,
            &["scenario `/dev/zero`", "a device, not a regular file"],
        ),
        Row {
            files: &[(
                "s.toml",
                "link = \"1gbit\"\nalgorithm = \"qfq\"\nduration = \"1ms\"\n[[flows]]\nname = \"a\"\n[[flows]]\nname = \"a\"\n",
            )],
            ..row(
                &["sim", "{dir}/s.toml"],
                2,
                &["s.toml:7:8", "must be unique"],
            )
        },
        Row {
            files: &[(
                "s.toml",
                "link = \"18446744073709551615bit\"\nalgorithm = \"qfq\"\nduration = \"1ms\"\n[[flows]]\n",
            )],
            ..row(
                &["sim", "{dir}/s.toml"],
                2,
                &["s.toml:1:8", "allowed 1bit..=1tbit"],
            )
        },
        Row {
            files: &[(
                "s.toml",
                "link = \"1gbit\"\nalgorithm = \"qfq\"\nduration = \"-1ms\"\n[[flows]]\n",
            )],
            ..row(&["sim", "{dir}/s.toml"], 2, &["s.toml:3:12", "negative"])
        },
        Row {
            files: &[(
                "s.toml",
                "link = \"1gbit\"\nalgorithm = \"qfq\"\nduration = \"1ms\"\ntrace = \"/dev/zero\"\n[[flows]]\nsource = { type = \"trace\" }\n",
            )],
            ..row(
                &["sim", "{dir}/s.toml"],
                2,
                &["trace `/dev/zero`: it is a device, not a regular file"],
            )
        },
        Row {
            files: &[(
                "s.toml",
                "link = \"1gbit\"\nalgorithm = \"policy\"\npolicy = \"/dev/zero\"\nduration = \"1ms\"\n[[flows]]\n",
            )],
            ..row(
                &["sim", "{dir}/s.toml"],
                2,
                &["policy `/dev/zero`: it is a device, not a regular file"],
            )
        },
    ]);
}

/// The head of a scenario that is right up to its flows.
macro_rules! scenario {
    ($rest:literal) => {
        concat!(
            "link = \"1gbit\"\nalgorithm = \"qfq\"\nduration = \"1ms\"\n",
            $rest
        )
    };
}

/// A scenario row: `s.toml` holds `text`; the message must hold `words`
/// and no Rust type name.
fn sim_row(text: &'static str, words: &'static [&'static str]) -> Row {
    Row {
        files: vec![("s.toml", text)].leak(),
        absent: RUST_TYPE_WORDS,
        ..row(&["sim", "{dir}/s.toml"], 2, words)
    }
}

/// The start of what a scenario's `source` allows.
const SOURCE_FORMS: &str =
    "allowed `{ type = \"greedy\" }`, `{ type = \"cbr\", rate = \"10mbit\" }`";

/// A value of the wrong type, a missing field or a wrong header in a
/// scenario: the field, the value, its kind and the forms allowed, never
/// serde's Rust type names.
#[test]
fn sim_scenario_types() {
    let rows = [
        // Unknown keys in a source or a size table are refused, not
        // ignored (an internally tagged unit variant and an untagged
        // enum's struct variants would let them through).
        sim_row(
            scenario!("[[flows]]\nsource = { type = \"greedy\", rate = \"1mbit\" }\n"),
            &["s.toml:5:10", "unknown field `rate`", SOURCE_FORMS],
        ),
        sim_row(
            scenario!("[[flows]]\nsize = { min = 64, mx = 1500 }\n"),
            &[
                "`flows[0].size = { min = 64, mx = 1500 }`: unknown field `mx`",
                "`{ min = 64, max = 1500 }`",
            ],
        ),
        // A size table names what is missing or clashing.
        sim_row(
            scenario!("[[flows]]\nsize = { min = 64 }\n"),
            &["`flows[0].size = { min = 64 }`: missing field `max`"],
        ),
        sim_row(
            scenario!("[[flows]]\nsize = {}\n"),
            &[
                "`flows[0].size = {}`: an empty table",
                "`{ mix = [[64, 7], [1500, 3]] }`",
            ],
        ),
        sim_row(
            scenario!("[[flows]]\nsize = { min = 64, max = 100, mix = [[64, 1]] }\n"),
            &["`mix` with `min` or `max`: give `{ min, max }` or `{ mix }`, not both"],
        ),
        sim_row(
            scenario!("[[flows]]\nsize = 9999999999999999999\n"),
            &[
                "9999999999999999999 is above every length allowed",
                "lengths 1..=65536",
            ],
        ),
        sim_row(
            scenario!("sed = 2\n[[flows]]\n"),
            &[
                "`sed = 2`: unknown field `sed`; allowed `name`, `link`",
                "or `flows`",
            ],
        ),
        sim_row(
            scenario!("[[flows]]\nsource = 5\n"),
            &[
                "s.toml:5:10",
                "`flows[0].source = 5`: the value is a whole number",
                SOURCE_FORMS,
            ],
        ),
        sim_row(
            scenario!("[flows]\nname = \"a\"\n"),
            &[
                "s.toml:4:1",
                "`[flows]` is a single table, but flows is a list: allowed `[[flows]]`",
            ],
        ),
        sim_row(
            "link = 5\nalgorithm = \"qfq\"\nduration = \"1ms\"\n[[flows]]\n",
            &[
                "s.toml:1:8",
                "`link = 5`: the value is a whole number; allowed a rate with its unit",
            ],
        ),
        sim_row(
            scenario!("seed = \"x\"\n[[flows]]\n"),
            &[
                "s.toml:4:8",
                "`seed = \"x\"`: the value is a string; allowed a whole number from 0",
            ],
        ),
        sim_row(
            scenario!("drain = 1\n[[flows]]\n"),
            &["`drain = 1`: the value is a whole number; allowed true or false"],
        ),
        sim_row(
            scenario!("pspat = 5\n[[flows]]\n"),
            &["`pspat = 5`: the value is a whole number; allowed a table: `[pspat]`"],
        ),
        sim_row(
            scenario!("[pspat]\narbiter = 1\ndispatcher = \"1us\"\n[[flows]]\n"),
            &[
                "s.toml:5:11",
                "`pspat.arbiter = 1`",
                "a duration with its unit",
            ],
        ),
        sim_row(
            scenario!("[pspat]\narbiter = \"1us\"\n[[flows]]\n"),
            &["`pspat.dispatcher` is missing; allowed a duration"],
        ),
        sim_row(
            "algorithm = \"qfq\"\nduration = \"1ms\"\n[[flows]]\n",
            &["`link` is missing; allowed a rate with its unit"],
        ),
        sim_row(
            scenario!(""),
            &["`flows` is missing; allowed `[[flows]]` before each flow group"],
        ),
        sim_row(
            scenario!("flows = 5\n"),
            &["`flows = 5`: the value is a whole number; allowed `[[flows]]`"],
        ),
        sim_row(
            scenario!("[[flows]]\n[[flows]]\ncount = \"x\"\n"),
            &[
                "s.toml:6:9",
                "`flows[1].count = \"x\"`: the value is a string; allowed a whole number",
            ],
        ),
        sim_row(
            scenario!("[[flows]]\nmax_delay = 5\n"),
            &["`flows[0].max_delay = 5`", "a duration with its unit"],
        ),
        sim_row(
            scenario!("[[flows]]\nsize = \"big\"\n"),
            &[
                "`flows[0].size = \"big\"`: the value is a string",
                "`{ min = 64, max = 1500 }`",
            ],
        ),
        sim_row(
            scenario!("[[flows]]\nsource = { type = \"cbr\", rate = 5 }\n"),
            &[
                "a field in it is a whole number where a string is wanted",
                SOURCE_FORMS,
            ],
        ),
        sim_row(
            scenario!("[[flows]]\nsource = { type = \"warp\" }\n"),
            &[
                "`flows[0].source.type`: unknown variant `warp`",
                SOURCE_FORMS,
            ],
        ),
        sim_row(
            scenario!("[[flows]]\nsource = { rate = \"1mbit\" }\n"),
            &["missing field `type`", SOURCE_FORMS],
        ),
    ];
    run_table(&rows);
}

/// The bench commands: every size a user controls has a stated range
/// (option, value and range in the message), parse errors say what is
/// allowed, and a command that cannot produce every row fails.
#[test]
fn bench_commands() {
    run_table(&[
        // bench sched, bench table: the harness's backlog bounds, the count.
        row(
            &["bench", "sched", "--qmin", "10", "--qmax", "5"],
            2,
            &[
                "qmax (5 packets) must be greater than qmin (10 packets)",
                "--qmax above --qmin",
            ],
        ),
        row(
            &["bench", "sched", "--qmax", "x"],
            2,
            &["--qmax", "`x` is not a count"],
        ),
        row(
            &["bench", "table", "-n", "0"],
            2,
            &["-n", "at least 1", "got 0"],
        ),
        // bench shape: granularities and structures.
        row(&["bench", "shape", "--gran", "0"], 2, &["--gran 0", "1..="]),
        row(
            &["bench", "shape", "--mltw-gran", "0"],
            2,
            &["--mltw-gran 0", "1..="],
        ),
        row(
            &["bench", "shape", "--structs", "heap"],
            2,
            &["unknown structure `heap`", "mltw, wheel, cffs"],
        ),
        row(
            &["bench", "shape", "--structs", "mltw,mltw"],
            2,
            &["--structs mltw,mltw", "given twice", "once"],
        ),
        // An output path in no directory is refused before the run.
        row(
            &["bench", "shape", "--plot", "/proc/no/such/p"],
            2,
            &["--plot /proc/no/such/p", "is not a directory"],
        ),
        row(
            &["bench", "pspat", "--plot", "/proc/no/such/p.svg"],
            2,
            &["--plot /proc/no/such/p.svg", "is not a directory"],
        ),
        row(
            &["bench", "sched", "--flowsets", "1::1-5-2"],
            2,
            &[
                "flowset `1::1-5-2`",
                "weight and len may be ranges",
                "flows a count",
            ],
        ),
        // bench pspat: every option with a value.
        row(
            &["bench", "pspat", "--weights", "0"],
            2,
            &["--weights", "`0`", "from 1"],
        ),
        row(
            &["bench", "pspat", "--overload", "0"],
            2,
            &["--overload `0`", "(0, 1000]", "max"],
        ),
        row(
            &["bench", "pspat", "--dispatchers", "999"],
            2,
            &["--dispatchers 999", "0..=64"],
        ),
        row(
            &["bench", "pspat", "--scan-interval", "x"],
            2,
            &["--scan-interval x", "0ns..=1s"],
        ),
        row(
            &["bench", "pspat", "--read-interval", "0"],
            2,
            &["--read-interval 0", "no unit"],
        ),
        row(
            &["bench", "pspat", "--placement", "pinned"],
            2,
            &["--placement `pinned`", "float, reserve, none"],
        ),
        row(
            &["bench", "pspat", "--arbiter-wait", "sleep"],
            2,
            &["--arbiter-wait `sleep`", "yield, spin"],
        ),
        row(
            &["bench", "pspat", "--assist-after", "x"],
            2,
            &["--assist-after x", "0ns..=1s"],
        ),
        row(
            &["bench", "pspat", "--arbiter-nap", "2s"],
            2,
            &["--arbiter-nap 2s", "1ns..=1s", "`off`"],
        ),
        row(
            &["bench", "pspat", "--starved-assist", "maybe"],
            2,
            &["--starved-assist `maybe`", "on, off"],
        ),
        // demo: the live demo's seconds, checked whichever demo runs.
        row(
            &["demo", "--seconds", "0"],
            2,
            &["'0'", "--seconds", "1..=3600"],
        ),
        row(
            &["demo", "--seconds", "4000"],
            2,
            &["'4000'", "--seconds", "1..=3600"],
        ),
        row(
            &["demo", "--synthetic", "--seconds", "3"],
            2,
            &["--synthetic", "cannot be used with", "--seconds"],
        ),
        row(
            &["demo", "-n", "1k", "--seconds", "3"],
            2,
            &["--ops", "cannot be used with", "--seconds"],
        ),
        row(&["demo", "-n", "1x"], 2, &["-n", "`1x` is not a count"]),
        // bench shape: sizes.
        row(
            &["bench", "shape", "--flows", "0"],
            2,
            &["--flows 0", "1..=1000000"],
        ),
        row(
            &["bench", "shape", "--flows", "99999999999"],
            2,
            &["--flows 99999999999", "1..=1000000"],
        ),
        row(
            &["bench", "shape", "--flows", "10000000"],
            2,
            &["--flows 10000000", "1..=1000000"],
        ),
        row(
            &["bench", "shape", "--flows", "x"],
            2,
            &["--flows `x`", "not a whole number", "allowed"],
        ),
        row(
            &["bench", "shape", "--outstanding", "0"],
            2,
            &["--outstanding 0", "1..=1024"],
        ),
        row(
            &["bench", "shape", "-n", "0"],
            2,
            &["-n 0", "1..=100000000"],
        ),
        row(
            &["bench", "shape", "--len", "0"],
            2,
            &["--len 0", "1..=65535"],
        ),
        row(
            &["bench", "shape", "--len", "x"],
            2,
            &["--len `x`", "allowed"],
        ),
        row(
            &["bench", "shape", "--rate", "1bit"],
            2,
            &["--rate 1bit", "1kbit"],
        ),
        row(
            &["bench", "shape", "--max-memory", "99999999999999"],
            2,
            &["--max-memory", "allowed"],
        ),
        row(
            &[
                "bench",
                "shape",
                "--flows",
                "1000000",
                "--outstanding",
                "1024",
            ],
            2,
            &["flows × outstanding", "16000000"],
        ),
        // A structure that refuses a setting: the reason, and a failure.
        row(
            &["bench", "shape", "--flows", "1", "-n", "1000", "--len", "1"],
            2,
            &["out of range for wheel", "could not be measured"],
        ),
        row(
            &[
                "bench", "shape", "--flows", "1", "-n", "1000", "--len", "1", "--json",
            ],
            2,
            &["out of range for cffs", "could not be measured"],
        ),
        // bench pspat.
        row(
            &["bench", "pspat", "--len", "0"],
            2,
            &["--len 0", "allowed"],
        ),
        row(
            &["bench", "pspat", "--overload-len", "0"],
            2,
            &["--overload-len 0"],
        ),
        row(
            &["bench", "pspat", "--link", "1bit"],
            2,
            &["--link 1bit", "1kbit"],
        ),
        row(
            &["bench", "pspat", "--link", "1mbit", "--duration", "1ms"],
            2,
            &["--link 1mbit", "at least 100"],
        ),
        row(
            &["bench", "pspat", "--overload-link", "1bit"],
            2,
            &["--overload-link 1bit", "1kbit"],
        ),
        row(
            &["bench", "pspat", "--overload-link", "10kbit"],
            2,
            &["--overload-link 10kbit", "--duration"],
        ),
        row(
            &["bench", "pspat", "--victim-rate", "1bit"],
            2,
            &["--victim-rate 1bit"],
        ),
        row(
            &["bench", "pspat", "--victim-rate", "10kbit"],
            2,
            &["--victim-rate 10kbit", "at least 10"],
        ),
        row(
            &["bench", "pspat", "--duration", "1ps"],
            2,
            &["--duration 1ps", "1 ns", "1ms"],
        ),
        row(
            &["bench", "pspat", "--duration", "2h"],
            2,
            &["--duration 2h", "3600s"],
        ),
        row(
            &["bench", "pspat", "--warmup", "1h"],
            2,
            &["--warmup 1h", "600s"],
        ),
        row(
            &["bench", "pspat", "--batch", "x"],
            2,
            &["--batch `x`", "1..=4096"],
        ),
        row(
            &["bench", "pspat", "--limit", "9999999"],
            2,
            &["--limit 9999999", "1..=100000"],
        ),
        row(
            &["bench", "pspat", "--runs", "1000"],
            2,
            &["--runs 1000", "1..=100"],
        ),
        row(
            &["bench", "pspat", "--victim-weight", "y"],
            2,
            &["--victim-weight `y`"],
        ),
        // The arbiter's and the bench's switches name their forms.
        row(
            &["bench", "pspat", "--busy-core", "99"],
            2,
            &[
                "--busy-core `99`",
                "allowed: off, or a core this process may run on",
            ],
        ),
        row(
            &["bench", "pspat", "--humble", "maybe"],
            2,
            &["--humble `maybe`", "allowed: on, off"],
        ),
        row(
            &["bench", "pspat", "--humble", "on", "--arbiter-nice", "none"],
            2,
            &[
                "--humble on with --arbiter-nice none",
                "allowed with --arbiter-nice -20..=-1",
            ],
        ),
        row(
            &[
                "bench",
                "pspat",
                "--humble",
                "on",
                "--arbiter-sched",
                "fifo:50",
            ],
            2,
            &[
                "--humble on with --arbiter-sched fifo:50",
                "allowed with --arbiter-sched other",
            ],
        ),
        row(
            &["bench", "pspat", "--nap-when-waiting", "maybe"],
            2,
            &["--nap-when-waiting `maybe`", "allowed: on, off"],
        ),
        row(
            &["bench", "pspat", "--nap-when-waiting", "on"],
            2,
            &[
                "--nap-when-waiting on with --arbiter-nap off",
                "allowed with an --arbiter-nap cover",
            ],
        ),
        row(
            &["bench", "pspat", "--step-aside", "maybe"],
            2,
            &["--step-aside `maybe`", "allowed: on, off"],
        ),
        row(
            &["bench", "pspat", "--arbiter-nice", "-30"],
            2,
            &["--arbiter-nice `-30`", "allowed: none or -20..=19"],
        ),
        row(
            &["bench", "pspat", "--arbiter-sched", "fifo:100"],
            2,
            &["--arbiter-sched `fifo:100`", "fifo:N with N in 1..=99"],
        ),
        // A slow link is paced by sleeps that still honour --duration.
        row(
            &[
                "bench",
                "pspat",
                "--phases",
                "overload",
                "--overload-link",
                "2mbit",
                "--victim-rate",
                "2mbit",
                "--clients",
                "1",
                "--archs",
                "none,locked",
                "--runs",
                "1",
                "--duration",
                "1s",
                "--warmup",
                "0s",
            ],
            0,
            &[],
        ),
        // bench sched and table.
        row(
            &["bench", "sched", "--runs", "x"],
            2,
            &["--runs", "allowed: 1..=1000"],
        ),
        row(
            &["bench", "sched", "-n", "2G"],
            2,
            &["-n", "at most 1000000000"],
        ),
        row(
            &["bench", "table", "--runs", "0"],
            2,
            &["--runs", "allowed: 1..=1000"],
        ),
    ]);
}

/// Policy files named on the command line are read with the same cap as
/// scenario files.
#[test]
fn policy_files() {
    run_table(&[row(
        &[
            "bench",
            "sched",
            "--alg",
            "policy:/nonexistent/p.toml",
            "-n",
            "10",
        ],
        2,
        &["cannot read policy"],
    )]);
}

/// A policy row: `p.toml` (or `p.dot`) holds `text`, read by `bench
/// sched --alg policy:FILE` and by a scenario's `policy = "FILE"`; both
/// messages must hold `words` and no Rust type name.
fn policy_rows(file: &'static str, text: &'static str, words: &'static [&'static str]) -> [Row; 2] {
    let alg: &'static str = format!("policy:{{dir}}/{file}").leak();
    let scenario: &'static str = format!(
        "link = \"1gbit\"\nalgorithm = \"policy\"\npolicy = \"{file}\"\nduration = \"1ms\"\n[[flows]]\n"
    )
    .leak();
    let files: &'static [(&'static str, &'static str)] =
        vec![(file, text), ("s.toml", scenario)].leak();
    let bench: &'static [&'static str] = vec!["bench", "sched", "--alg", alg, "-n", "10"].leak();
    [
        Row {
            files,
            absent: RUST_TYPE_WORDS,
            ..row(bench, 2, words)
        },
        Row {
            files,
            absent: RUST_TYPE_WORDS,
            ..row(&["sim", "{dir}/s.toml"], 2, words)
        },
    ]
}

/// A value of the wrong type, a missing field or a wrong header in a
/// policy file: the field, the value, its kind and the forms allowed.
#[test]
fn policy_file_types() {
    let rows = [
        policy_rows(
            "p.toml",
            "[[node]]\nname = \"r\"\nkind = \"wfq\"\nwieght = 3\n",
            &["`node.wieght = 3`: unknown field `wieght`; allowed `name`, `parent`"],
        ),
        policy_rows(
            "p.toml",
            "[polcy]\n[[node]]\nname = \"r\"\nkind = \"wfq\"\n",
            &["`[polcy]`: unknown table `polcy`; allowed `policy` or `node`"],
        ),
        policy_rows(
            "p.toml",
            "[[node]]\nname = \"r\"\nkind = \"wfq\"\nweight = \"x\"\n",
            &[
                "line 4, column 10",
                "`node.weight = \"x\"`: the value is a string; allowed a whole number from 0",
            ],
        ),
        policy_rows(
            "p.toml",
            "[node]\nname = \"r\"\nkind = \"wfq\"\n",
            &["`[node]` is a single table, but node is a list: allowed `[[node]]`"],
        ),
        policy_rows(
            "p.toml",
            "[policy]\nmax_len = -1\n[[node]]\nname = \"r\"\nkind = \"wfq\"\n",
            &["`policy.max_len = -1`: the value is a negative whole number"],
        ),
        policy_rows(
            "p.toml",
            "[[node]]\nname = \"r\"\nkind = 5\n",
            &["`node.kind = 5`: the value is a whole number; allowed one of \"rr\""],
        ),
        policy_rows(
            "p.toml",
            "[[node]]\nname = \"r\"\n",
            &["`node.kind` is missing; allowed one of \"rr\""],
        ),
        policy_rows(
            "p.toml",
            "[[node]]\nname = \"r\"\nkind = \"wfq\"\nqueue = 5\n",
            &["`node.queue = 5`", "\"cffs\", \"hffs\""],
        ),
        policy_rows(
            "p.dot",
            "digraph { r [kind=wfq, weight=\"x\"] }\n",
            &[
                "attribute `weight`",
                "the value is a string; allowed a whole number from 0",
            ],
        ),
    ];
    run_table(&rows.into_iter().flatten().collect::<Vec<_>>());
}

const RUN_LINK: &str = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n";

/// `run`, `check`, `stats`, `reload`, `gen`, `sink`: config files with
/// positions, devices that do not exist, traffic specs.
#[test]
fn shaper_and_traffic() {
    run_table(&[
        row(
            &["check", "/nonexistent/c.toml"],
            2,
            &["cannot read config"],
        ),
        row(
            &["check", "/dev/zero"],
            2,
            &[
                "config `/dev/zero`: it is a device, not a regular file",
                "allowed a regular file of at most 16777216 bytes",
            ],
        ),
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbps\"\n",
            )],
            ..row(&["check", "{dir}/c.toml"], 2, &["c.toml:4:8", "ambiguous"])
        },
        Row {
            files: &[("c.toml", RUN_LINK)],
            ..row(&["check", "{dir}/c.toml"], 2, &["no [[class]]"])
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\nbackend = \"xdp\"\n[[class]]\nname = \"a\"\ndefault = true\nmatch = [{ vlan = 7 }]\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:5:11", "matching on vlan", "backend = \"packet\""],
            )
        },
        // The `prio` algorithm has 8 levels: 8 is the first refused.
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[scheduler]\nalgorithm = \"prio\"\n[[class]]\nname = \"a\"\ndefault = true\nprio = 8\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:10:8", "class \"a\": prio = 8", "allowed 0..=7"],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nweight = 0\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:8:10", "weight = 0", "1..=65536"],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nmatch = [{ dport = \"9-1\" }]\n",
            )],
            ..row(&["check", "{dir}/c.toml"], 2, &["match.dport", "LO <= HI"])
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nburst = 3000\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &[
                    "c.toml:8:9",
                    "class \"a\": burst = 3000",
                    "burst needs rate",
                ],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\nmax_frame = 9000\n[[class]]\nname = \"a\"\ndefault = true\nrate = \"1mbit\"\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:9:8", "rate = 1mbit", "allowed 4.396mbit", "horizon"],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nceil = 100\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &[
                    "c.toml:8:8",
                    "`class.ceil = 100`",
                    "a rate with its unit",
                    "ambiguous",
                ],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nrate = \"10mbit\"\ncburst = \"3k\"\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:9:10", "cburst needs ceil"],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nrate = \"10mbit\"\nburst = 0\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:9:9", "burst = 0", "1..=1048576 bytes"],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nrate = \"10mbit\"\nburst = \"4m\"\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["burst = \"4m\" (4194304 bytes)", "1..=1048576 bytes"],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nrate = \"10mbit\"\nburst = \"15kbit\"\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["\"15kbit\" is a rate, not a size", "\"15k\""],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nrate = \"10mbit\"\nburst = \"15 kilo\"\n",
            )],
            ..row(
                &["run", "--config", "{dir}/c.toml"],
                2,
                &["c.toml:9:9", "\"15 kilo\" is not a size", "k, kb, kib"],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"nosuch0\"\negress = \"nosuch1\"\nrate = \"1gbit\"\n[control]\nsocket = \"{dir}/s.sock\"\n[[class]]\nname = \"a\"\ndefault = true\n",
            )],
            ..row(
                &["run", "--config", "{dir}/c.toml"],
                2,
                &["nosuch0", "no such interface"],
            )
        },
        Row {
            files: &[("c.toml", RUN_LINK)],
            ..row(
                &[
                    "run",
                    "--config",
                    "{dir}/c.toml",
                    "--user",
                    "no-such-user-vc",
                ],
                2,
                &["--user", "\"no-such-user-vc\"", "no such user"],
            )
        },
        row(
            &["run", "--config", "/nonexistent/c.toml", "--user", ""],
            2,
            &["--user \"\"", "1..=256"],
        ),
        row(
            &[
                "run",
                "--config",
                "c.toml",
                "--user",
                "nobody",
                "--keep-privileges",
            ],
            2,
            &["--user", "--keep-privileges", "cannot be used with"],
        ),
        row(&["stats"], 2, &["--socket PATH or --config FILE"]),
        row(
            &["stats", "--socket", "/nonexistent/s.sock"],
            2,
            &["cannot reach pktsched"],
        ),
        row(
            &["reload", "--socket", "/nonexistent/s.sock"],
            2,
            &["cannot reach pktsched"],
        ),
        row(
            &["gen", "--dst", "127.0.0.1", "--flow", "rate=0bit"],
            2,
            &["--flow", "zero"],
        ),
        row(
            &["gen", "--dst", "127.0.0.1", "--flow", "size=10"],
            2,
            &["size", "60..=9216"],
        ),
        row(
            &["gen", "--dst", "127.0.0.1", "--flow", "color=red"],
            2,
            &["unknown key", "dport"],
        ),
        row(
            &[
                "gen",
                "--dst",
                "127.0.0.1",
                "--flow",
                "count=1000",
                "--flow",
                "count=1000",
            ],
            2,
            &["at most 1024"],
        ),
        row(
            &["gen", "--dst", "127.0.0.1", "--duration", "0s"],
            2,
            &["--duration", "above 0"],
        ),
        row(
            &["gen", "--dst", "127.0.0.1", "--duration", "100000s"],
            2,
            &["at most 24h"],
        ),
        row(&["gen"], 2, &["--dst"]),
        row(
            &["gen", "--dst", "127.0.0.1", "--backend", "dpdk"],
            2,
            &["--backend \"dpdk\"", "allowed socket, gso", "or packet"],
        ),
        row(
            &[
                "gen",
                "--dst",
                "127.0.0.1",
                "--backend",
                "gso",
                "--device",
                "lo",
            ],
            2,
            &[
                "--device and --dst-mac go with --backend packet",
                "(not gso)",
            ],
        ),
        row(
            &[
                "gen",
                "--dst",
                "127.0.0.1",
                "--backend",
                "gso",
                "--dst-mac",
                "02:00:00:00:00:01",
            ],
            2,
            &[
                "--device and --dst-mac go with --backend packet",
                "(not gso)",
            ],
        ),
        row(
            &["gen", "--dst", "127.0.0.1", "--backend", "packet"],
            2,
            &["--backend packet needs --device"],
        ),
        row(
            &["gen", "--dst", "127.0.0.1", "--device", "lo"],
            2,
            &["--device and --dst-mac go with --backend packet"],
        ),
        row(
            &[
                "gen",
                "--dst",
                "127.0.0.1",
                "--backend",
                "packet",
                "--device",
                "lo",
                "--dst-mac",
                "02:00:zz:00:00:01",
            ],
            2,
            &["--dst-mac \"02:00:zz:00:00:01\"", "six hex bytes"],
        ),
        row(
            &[
                "gen",
                "--dst",
                "127.0.0.1",
                "--backend",
                "packet",
                "--device",
                "no/such/dev",
            ],
            2,
            &["--device \"no/such/dev\"", "interface name"],
        ),
        row(
            &[
                "gen",
                "--dst",
                "127.0.0.1",
                "--backend",
                "packet",
                "--device",
                "pscnodev0",
                "--duration",
                "1s",
            ],
            2,
            &["pscnodev0", "no such interface"],
        ),
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\nengine = \"threads\"\n[[class]]\nname = \"a\"\ndefault = true\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:5:10", "link.engine", "run-to-completion, pspat"],
            )
        },
        row(
            &[
                "run",
                "--config",
                "/nonexistent/c.toml",
                "--rt-priority",
                "0",
            ],
            2,
            &["--rt-priority", "priority 0", "1..=99"],
        ),
        row(
            &[
                "run",
                "--config",
                "/nonexistent/c.toml",
                "--rt-priority",
                "100",
            ],
            2,
            &["--rt-priority", "priority 100", "1..=99"],
        ),
        row(
            &[
                "run",
                "--config",
                "/nonexistent/c.toml",
                "--rt-priority",
                "x",
            ],
            2,
            &["--rt-priority", "'x'"],
        ),
        row(
            &["run", "--config", "/nonexistent/c.toml", "--busy-poll", "0"],
            2,
            &["--busy-poll", "budget 0", "1..=1024"],
        ),
        row(
            &["run", "--config", "/nonexistent/c.toml", "--busy-poll=x"],
            2,
            &["--busy-poll \"x\" is not a number", "1..=1024"],
        ),
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\nbusy_poll = 5000\n[[class]]\nname = \"a\"\ndefault = true\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:5:13", "link.busy_poll = 5000", "1..=1024"],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"fwnodev0\"\negress = \"fwnodev1\"\nrate = \"1gbit\"\nbusy_poll = true\n[[class]]\nname = \"a\"\ndefault = true\n",
            )],
            ..row(
                &["run", "--config", "{dir}/c.toml"],
                2,
                &["link.busy_poll needs a pinned core", "link.cpu", "--cpu"],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"fwnodev0\"\negress = \"fwnodev1\"\nrate = \"1gbit\"\nengine = \"pspat\"\n[[class]]\nname = \"a\"\ndefault = true\n",
            )],
            ..row(
                &[
                    "run",
                    "--config",
                    "{dir}/c.toml",
                    "--busy-poll",
                    "--cpu",
                    "0",
                ],
                2,
                &[
                    "--busy-poll needs link.engine = \"run-to-completion\"",
                    "\"pspat\"",
                ],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\nengine = \"pspat\"\ncpu = 0\nbusy_poll = true\n[[class]]\nname = \"a\"\ndefault = true\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &[
                    "c.toml:7",
                    "link.busy_poll needs link.engine = \"run-to-completion\"",
                    "\"pspat\"",
                ],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"fwnodev0\"\negress = \"fwnodev1\"\nrate = \"1gbit\"\ncpu = 0\nbusy_poll = true\n[[class]]\nname = \"a\"\ndefault = true\n",
            )],
            ..row(
                &["run", "--config", "{dir}/c.toml", "--user", "nobody"],
                2,
                &["busy polling with --user nobody", "CAP_NET_ADMIN"],
            )
        },
        row(
            &["run", "--config", "/nonexistent/c.toml", "--cpu", "5000"],
            2,
            &["--cpu 5000", "0..=1023"],
        ),
        row(
            &["run", "--config", "/nonexistent/c.toml", "--cpu=-1"],
            2,
            &["--cpu", "'-1'"],
        ),
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\nsched = \"fifo:0\"\ncpu = 9999\n[[class]]\nname = \"a\"\ndefault = true\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:6:7", "link.cpu = 9999", "0..=1023"],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\nsched = \"fifo\"\n[[class]]\nname = \"a\"\ndefault = true\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:5:9", "link.sched", "\"fifo\" is unknown", "fifo:N"],
            )
        },
        row(&["sink", "--ports", "10-1"], 2, &["--ports", "LO <= HI"]),
        row(
            &["sink", "--ports", "70000"],
            2,
            &["--ports \"70000\": not a port", "allowed a port 1..=65535"],
        ),
        row(&["sink", "--ports", "1-2000"], 2, &["at most 1024"]),
        row(
            &["sink", "--ports", "0"],
            2,
            &["--ports \"0\": port 0", "allowed 1..=65535"],
        ),
        row(
            &["sink", "--ports", "0-3"],
            2,
            &["--ports \"0-3\": port 0", "allowed 1..=65535"],
        ),
        row(
            &["sink", "--class", "x=0"],
            2,
            &["--class x=0: port 0", "allowed 1..=65535"],
        ),
        row(&["sink", "--idle", "x"], 2, &["--idle"]),
    ]);
}

/// `calc ingress`: the value, what is wrong and what is allowed.
#[test]
fn calc_ingress() {
    let c = |rest: &'static [&'static str]| rest;
    run_table(&[
        row(
            c(&["calc", "ingress", "--x", "1us", "--rho-rt", "1", "--m", "8"]),
            2,
            &["rho_rt = 1", "0 <= rho_rt < 1"],
        ),
        row(
            c(&["calc", "ingress", "--x", "1us", "--rho-rt=-0.5", "--b", "4"]),
            2,
            &["rho_rt = -0.5"],
        ),
        row(
            c(&["calc", "ingress", "--x", "1us", "--rho-rt", "x", "--b", "4"]),
            2,
            &["--rho-rt", "'x'"],
        ),
        row(
            c(&["calc", "ingress", "--x", "0us", "--b", "4"]),
            2,
            &["--x = 0us", "positive"],
        ),
        row(
            c(&["calc", "ingress", "--x", "1", "--b", "4"]),
            2,
            &["--x", "`1` has no unit"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "340282366920938463463374607.999999999999s",
                "--b",
                "4",
            ]),
            2,
            &[
                "--x",
                "340282366920938463463374607.999999999999s",
                "too long",
            ],
        ),
        row(
            c(&["calc", "ingress", "--x", "1us", "--target", "5parsecs"]),
            2,
            &["--target", "unknown unit"],
        ),
        row(
            c(&["calc", "ingress", "--x", "1us", "--rho-rt", "0.3"]),
            2,
            &["give one of --m", "--target", "--b"],
        ),
        row(
            c(&[
                "calc", "ingress", "--x", "1us", "--rho-rt", "0.3", "--m", "1.5",
            ]),
            2,
            &["b = 1 needs m >= 1.857"],
        ),
        row(
            c(&["calc", "ingress", "--x", "1us", "--m", "0"]),
            2,
            &["m = 0", "> 0"],
        ),
        row(
            c(&["calc", "ingress", "--x", "1us", "--b", "0"]),
            2,
            &["b = 0", "allowed 1..="],
        ),
        row(
            c(&["calc", "ingress", "--x", "1us", "--m", "8", "--b", "4"]),
            2,
            &["cannot be used with"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--rho-rt",
                "0.3",
                "--b",
                "4",
                "--simulate",
                "--packets",
                "0",
            ]),
            2,
            &["packets = 0", "1..=100000000"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--rho-rt",
                "0.3",
                "--b",
                "4",
                "--simulate",
                "--jitter",
                "1",
            ]),
            2,
            &["jitter = 1", "0 <= jitter < 1"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--rho-rt",
                "0.3",
                "--b",
                "70000",
                "--simulate",
            ]),
            2,
            &["b = 70000", "largest device budget 65536"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--rho-rt",
                "0",
                "--b",
                "4",
                "--simulate",
            ]),
            2,
            &["--rho-rt > 0"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--sweep",
                "{dir}/s",
                "--rt-share",
                "1",
            ]),
            2,
            &["--rt-share = 1", "0 < rt_share < 1"],
        ),
        // A flag that would be ignored is refused, naming what it needs.
        row(
            c(&["calc", "ingress", "--x", "1us", "--b", "4", "--ring", "0"]),
            2,
            &["--simulate", "--sweep"],
        ),
        row(
            c(&["calc", "ingress", "--x", "1us", "--b", "4", "--seed", "3"]),
            2,
            &["--simulate", "--sweep"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--b",
                "4",
                "--be-load",
                "0.5",
            ]),
            2,
            &["--simulate"],
        ),
        row(
            c(&[
                "calc", "ingress", "--x", "1us", "--b", "4", "--jitter", "0.5",
            ]),
            2,
            &["--simulate"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--b",
                "4",
                "--rt-share",
                "0.5",
            ]),
            2,
            &["--rt-share = 0.5", "needs --sweep"],
        ),
        row(
            c(&[
                "calc", "ingress", "--x", "1us", "--sweep", "{dir}/s", "--m", "3",
            ]),
            2,
            &["--sweep", "cannot be used with", "--m"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--sweep",
                "{dir}/s",
                "--simulate",
            ]),
            2,
            &["--sweep", "cannot be used with", "--simulate"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--rho-rt",
                "0.3",
                "--b",
                "4",
                "--simulate",
                "--be-load=-1",
            ]),
            2,
            &["--be-load = -1", "0 < load <= 100"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--rho-rt",
                "0.3",
                "--b",
                "4",
                "--simulate",
                "--ring",
                "0",
            ]),
            2,
            &["--ring = 0", "1..="],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--rho-rt",
                "0.3",
                "--b",
                "4",
                "--simulate",
                "--rt-arrivals",
                "bursty",
            ]),
            2,
            &["bursty", "periodic", "poisson"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--sweep",
                "/proc/no/such",
                "--packets",
                "10",
            ]),
            2,
            &["/proc/no/such"],
        ),
        Row {
            stdout: Stdout::Full,
            ..row(
                c(&["calc", "ingress", "--x", "1us", "--b", "4"]),
                2,
                &["No space left on device"],
            )
        },
    ]);
}

/// `gen --load` (the ingress workload), `sink --class` and `plot ingress`.
#[test]
fn gen_workload_sink_classes_and_plot() {
    const GEN: [&str; 3] = ["gen", "--dst", "127.0.0.1"];
    macro_rules! gen_row {
        ([$($a:expr),*], $status:expr, $words:expr) => {
            row(&[GEN[0], GEN[1], GEN[2], $($a),*], $status, $words)
        };
    }
    run_table(&[
        gen_row!(
            ["--seed", "x"],
            2,
            &["'x'", "--seed", "allowed a whole number"]
        ),
        gen_row!(
            ["--load", "10kpps", "--be-dscp", "64"],
            2,
            &["--be-dscp", "\"64\"", "0..=63"]
        ),
        gen_row!(
            ["--load", "10kpps", "--rt-port", "0"],
            2,
            &["RT ports 0-0", "1..=65535"]
        ),
        gen_row!(
            ["--load", "10kpps", "--rt-port", "70000"],
            2,
            &["'70000'", "--rt-port", "0..=65535"]
        ),
        row(
            &["sink", "--addr", "300.1.1.1"],
            2,
            &["'300.1.1.1'", "--addr", "invalid IP address"],
        ),
        gen_row!(
            ["--load", "10kpps", "--rt-share", "1.5"],
            2,
            &["--rt-share 1.5", "0..=1"]
        ),
        gen_row!(
            ["--load", "10kpps", "--rt-share=-0.1"],
            2,
            &["--rt-share -0.1", "0..=1"]
        ),
        gen_row!(["--load", "fast"], 2, &["--load \"fast\"", "200kpps"]),
        gen_row!(["--load", "0kpps"], 2, &["--load \"0kpps\"", "positive"]),
        gen_row!(["--load", "500mpps"], 2, &["at most 100mpps"]),
        gen_row!(
            ["--load", "5mpps"],
            2,
            &[
                "socket backend offers at most",
                "--backend gso",
                "--backend packet"
            ]
        ),
        gen_row!(["--load", "5bit"], 2, &["below 1 bit/s per flow"]),
        gen_row!(
            ["--load", "1kpps", "--be-flows", "0"],
            2,
            &["BE flows 0", "1..=512"]
        ),
        gen_row!(
            ["--load", "1kpps", "--rt-flows", "3"],
            2,
            &["overlap", "5001-5003"]
        ),
        gen_row!(
            ["--load", "1kpps", "--be-port", "65530"],
            2,
            &["BE ports 65530-65537"]
        ),
        gen_row!(
            ["--load", "1kpps", "--rt-dscp", "ef2"],
            2,
            &["--rt-dscp", "0..=63"]
        ),
        gen_row!(
            ["--load", "1kpps", "--size", "20"],
            2,
            &["--size", "60..=9216"]
        ),
        gen_row!(
            ["--load", "1kpps", "--flow", "rate=1mbit"],
            2,
            &["--load", "--flow"]
        ),
        gen_row!(["--rt-share", "0.5"], 2, &["--load"]),
    ]);
    // `gen --flows-file`: each error names file:line:col, the flow and
    // what is allowed.
    let flows_file = |text: &'static str, words: &'static [&'static str]| Row {
        files: vec![("g.toml", text)].leak(),
        ..row(
            &["gen", "--dst", "127.0.0.1", "--flows-file", "{dir}/g.toml"],
            2,
            words,
        )
    };
    run_table(&[
        flows_file(
            "[[flow]]\nrate = \"1mbit\"\ndprot = 5000\n",
            &["g.toml:3:1: flow[0]: unknown key \"dprot\": allowed dst, dport"],
        ),
        flows_file(
            "[[flow]]\nrate = \"1mbit\"\n[[flow]]\nrate = 5\n",
            &["g.toml:4:8: flow[1]: rate = \"5\"", "has no unit"],
        ),
        flows_file(
            "[[flow]]\nrate = 1.5\n",
            &["g.toml:2:8: flow[0].rate = 1.5: the value is a fractional number"],
        ),
        flows_file(
            "[flow]\nrate = \"1mbit\"\n",
            &[
                "g.toml:1:1: `[flow]` is a single table",
                "allowed `[[flow]]`",
            ],
        ),
        flows_file(
            "flows = 1\n",
            &["g.toml:1:1: unknown table or key \"flows\": allowed only `[[flow]]`"],
        ),
        flows_file("# none\n", &["no `[[flow]]` tables"]),
        flows_file(
            "[[flow]]\nsize = 40\n",
            &["g.toml:2:8: flow[0]: size = \"40\"", "60..=9216"],
        ),
        flows_file("[[flow]\n", &["g.toml", "TOML parse error"]),
        gen_row!(
            ["--load", "1kpps", "--rt-pattern", "burst"],
            2,
            &["--rt-pattern", "cbr or poisson"]
        ),
        row(&["sink", "--class", "rt"], 2, &["--class", "NAME=PORT"]),
        row(&["sink", "--class", "r:t=5001"], 2, &["class name \"r:t\""]),
        row(
            &["sink", "--class", "rt=9-1"],
            2,
            &["class rt ports", "LO <= HI"],
        ),
        row(
            &["sink", "--class", "rt=5001", "--class", "be=5001-5009"],
            2,
            &["share ports"],
        ),
        row(
            &["sink", "--class", "rt=5001", "--class", "rt=5002"],
            2,
            &["class \"rt\" given twice"],
        ),
        row(
            &["sink", "--class", "rt=5001", "--ports", "6000"],
            2,
            &["class rt port 5001", "not among the ports"],
        ),
        row(&["sink", "--class", "x=1-2000"], 2, &["at most 1024"]),
        row(
            &["plot", "ingress", "/nonexistent/ig"],
            2,
            &["/nonexistent/ig/points"],
        ),
        Row {
            files: &[("points", "not a directory")],
            ..row(
                &["plot", "ingress", "{dir}"],
                2,
                &["points", "Not a directory"],
            )
        },
    ]);
}

/// `plot ingress` on a point whose sink class received datagrams but
/// reports no p99 (`null`): the file and the figure are named; only a
/// class that received nothing may have null latencies.
#[test]
fn plot_ingress_names_a_null_latency_with_datagrams() {
    let scratch = Scratch::new("plot-null-latency");
    let point = scratch.path().join("results/points/p1");
    std::fs::create_dir_all(&point).unwrap();
    let files = [
        (
            "point.json",
            r#"{"strategy": "sq", "sweep": "load", "load_pps": 1000.0, "rt_share": 0.3}"#,
        ),
        ("gen.json", r#"{"flows": []}"#),
        (
            "sink.json",
            r#"{"classes": [
                {"class": "rt", "ports": "5001-5001", "received": 10, "latency_p50_us": 1.0,
                 "latency_p99_us": 2.0, "latency_p999_us": 3.0},
                {"class": "be", "ports": "5002-5009", "received": 10, "latency_p50_us": 1.0,
                 "latency_p99_us": null, "latency_p999_us": 3.0}]}"#,
        ),
    ];
    for (name, text) in files {
        std::fs::write(point.join(name), text).unwrap();
    }
    let results = scratch.path().join("results").display().to_string();
    run_table(&[row(
        Box::leak(Box::new([
            "plot",
            "ingress",
            Box::leak(results.into_boxed_str()),
        ])),
        2,
        &["sink.json", "class \"be\"", "latency_p99_us"],
    )]);
}

/// The `[router]` head of the route rows, on interfaces that do not exist.
const RT_HEAD: &str = "[router]\ningress = \"rtnosuch0\"\negress = \"rtnosuch1\"\n";

/// `pktsched route`: configs and flags.
#[test]
fn route_configs_and_flags() {
    const CLASS: &str = "[[class]]\nname = \"be\"\n";
    const ROUTE: &str = "[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"rtnosuch1\"\n";
    let check = |words| row(&["route", "--check", "{dir}/r.toml"], 2, words);
    let file = |content: &'static str| -> &'static [(&'static str, &'static str)] {
        Box::leak(Box::new([("r.toml", content)]))
    };
    let cat = |parts: &[&str]| -> &'static str { Box::leak(parts.concat().into_boxed_str()) };
    run_table(&[
        row(
            &["route", "--check", "/nonexistent/r.toml"],
            2,
            &["cannot read config"],
        ),
        row(&["route"], 2, &["--config FILE", "--check FILE"]),
        row(
            &["route", "--config", "a.toml", "--check", "b.toml"],
            2,
            &["cannot be used with"],
        ),
        Row {
            files: file(cat(&[RT_HEAD, "backend = \"packet\"\n", CLASS, ROUTE])),
            ..row(
                &[
                    "route",
                    "--config",
                    "{dir}/r.toml",
                    "--control",
                    "{dir}/c.sock",
                ],
                2,
                &["rtnosuch0", "no such interface"],
            )
        },
        Row {
            files: file(cat(&[RT_HEAD, CLASS, ROUTE])),
            ..row(
                &["route", "--config", "{dir}/r.toml", "--duration", "soon"],
                2,
                &["--duration \"soon\""],
            )
        },
        Row {
            files: file(cat(&[RT_HEAD, "strategy = \"wfq\"\n", CLASS, ROUTE])),
            ..check(&["r.toml:4:12", "`wfq`", "sq, rr, ll-rr, ll-wfq"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                "backend = \"xdp\"\n",
                "[[class]]\nname = \"v\"\nmatch = [{ vlan = 7 }]\n",
                CLASS,
                ROUTE,
            ])),
            ..check(&[
                "r.toml:4:11",
                "class \"v\" matching on vlan",
                "backend = \"packet\"",
            ])
        },
        Row {
            files: file(cat(&[RT_HEAD, CLASS, "budget = 0\n", ROUTE])),
            ..check(&["r.toml:6:10", "budget = 0", "1..=64"])
        },
        Row {
            files: file(cat(&[RT_HEAD, "device_budget = 0\n", CLASS, ROUTE])),
            ..check(&["router.device_budget = 0", "1..=65536"])
        },
        Row {
            files: file(cat(&[RT_HEAD, "cost = \"20uss\"\n", CLASS, ROUTE])),
            ..check(&["router.cost = \"20uss\"", "\"none\"", "acl:N"])
        },
        Row {
            files: file(cat(&[RT_HEAD, "cost = \"acl:0\"\n", CLASS, ROUTE])),
            ..check(&["acl rule count", "1..=1048576"])
        },
        Row {
            files: file(cat(&[RT_HEAD, CLASS, CLASS, ROUTE])),
            ..check(&["class \"be\" is defined twice", "unique"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                CLASS,
                "[[route]]\nprefix = \"10.0.0.0/33\"\ndev = \"rtnosuch1\"\n",
            ])),
            ..check(&["route.prefix = \"10.0.0.0/33\"", "ADDRESS/LEN"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                CLASS,
                "[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"10.0.0.1\"\ndev = \"rtnosuch1\"\n",
            ])),
            ..check(&["via = 10.0.0.1 is not a [[neighbour]]"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                CLASS,
                "[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"eth7\"\n",
            ])),
            ..check(&["route.dev = \"eth7\"", "router's interfaces"])
        },
        Row {
            files: file(cat(&[RT_HEAD, CLASS])),
            ..check(&["[[route]] entries", "1..=65536"])
        },
        Row {
            files: file(cat(&["[router]\ningress = \"rtnosuch0\"\n", CLASS, ROUTE])),
            ..check(&["`router.egress` is missing", "an interface name"])
        },
        Row {
            files: file(cat(&[RT_HEAD, "ring_frames = 3\n", CLASS, ROUTE])),
            ..check(&["router.ring_frames = 3", "16..=65536"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                "[[class]]\nname = \"rt\"\nmatch = [{ dscp = \"xf\" }]\n",
                ROUTE,
            ])),
            ..check(&["match.dscp", "ef"])
        },
        Row {
            files: file(cat(&[RT_HEAD, "busy_poll = -1\n", CLASS, ROUTE])),
            ..check(&["router.busy_poll = -1", "0..=10000"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                "ingress_address6 = \"10.1.0.1\"\n",
                CLASS,
                ROUTE,
            ])),
            ..check(&["router.ingress_address6 = \"10.1.0.1\"", "unicast IPv6"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                "egress_address6 = \"ff02::1\"\n",
                CLASS,
                ROUTE,
            ])),
            ..check(&["router.egress_address6 = \"ff02::1\"", "unicast IPv6"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                CLASS,
                ROUTE,
                "[egress]\nrate = \"10mbit\"\n[[egress.class]]\nname = \"voip\"\n",
            ])),
            ..check(&[
                "r.toml:12:8",
                "egress.class name \"voip\"",
                "allowed \"be\"",
            ])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                CLASS,
                ROUTE,
                "[egress]\nrate = \"0kbit\"\n",
            ])),
            ..check(&["r.toml:10:8", "egress.rate", "`0kbit` is zero"])
        },
        Row {
            files: file(cat(&[RT_HEAD, CLASS, ROUTE, "[egress]\nrate = \"10MB\"\n"])),
            ..check(&["egress.rate", "10MB"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                CLASS,
                ROUTE,
                "[egress]\nrate = \"10mbit\"\nalgorithm = \"htb\"\n",
            ])),
            ..check(&[
                "egress.algorithm",
                "`htb`",
                "fifo, prio, rr, drr, wf2q, qfq",
            ])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                CLASS,
                ROUTE,
                "[egress]\nrate = \"10mbit\"\n[[egress.class]]\nname = \"be\"\nlimit = 0\n",
            ])),
            ..check(&["class \"be\": limit = 0", "1..=1048576"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                CLASS,
                ROUTE,
                "[egress]\nrate = \"1gbit\"\nalgorithm = \"prio\"\n",
                "[[egress.class]]\nname = \"be\"\nprio = 9\n",
            ])),
            ..check(&["r.toml:14:8", "prio = 9", "allowed 0..=7"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                CLASS,
                ROUTE,
                "[egress]\nrate = \"1gbit\"\nalgorithm = \"prio\"\n",
                "[[egress.class]]\nname = \"be\"\nprio = 8\n",
            ])),
            ..check(&["r.toml:14:8", "prio = 8", "allowed 0..=7"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                "pool_frames = 1025\n",
                CLASS,
                ROUTE,
                "[egress]\nrate = \"10mbit\"\n",
            ])),
            ..check(&[
                "r.toml:10:1",
                "router.pool_frames = 1025",
                "at least 80",
                "at most 945",
            ])
        },
    ]);
}

/// `pktsched stats` / `reload --config`: a route config is told from a run
/// config and its control socket asked.
#[test]
fn stats_and_reload_find_the_route_socket() {
    const RT: &str = "[router]\ningress = \"rtnosuch0\"\negress = \"rtnosuch1\"\n[[class]]\nname = \"be\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"rtnosuch1\"\n[control]\nsocket = \"{dir}/rt-gone.sock\"\n";
    let with = |content: &'static str, args: &'static [&'static str], words| Row {
        files: Box::leak(Box::new([("c.toml", content)])),
        ..row(args, 2, words)
    };
    run_table(&[
        with(
            RT,
            &["stats", "--config", "{dir}/c.toml"],
            &["cannot reach pktsched", "rt-gone.sock"],
        ),
        with(
            RT,
            &["reload", "--config", "{dir}/c.toml"],
            &["cannot reach pktsched", "rt-gone.sock"],
        ),
        with(
            "[scheduler]\nkind = \"drr\"\n",
            &["stats", "--config", "{dir}/c.toml"],
            &["c.toml", "neither", "[router]", "[link]"],
        ),
        with(
            "[router]\n[link]\n",
            &["stats", "--config", "{dir}/c.toml"],
            &["both [router]", "[link]", "allowed one of them"],
        ),
        with(
            "[router\n",
            &["stats", "--config", "{dir}/c.toml"],
            &["c.toml", "not a TOML file"],
        ),
        with(
            "[router]\ningress = 7\n",
            &["stats", "--config", "{dir}/c.toml"],
            &[
                "c.toml:2:11",
                "`router.ingress = 7`",
                "a whole number",
                "allowed an interface name in quotes, e.g. \"eth0\"",
            ],
        ),
        row(
            &["stats", "--config", "/nonexistent/c.toml"],
            2,
            &["cannot read config"],
        ),
        // A config of the other daemon: named, with the command it is for.
        with(
            RT,
            &["run", "--config", "{dir}/c.toml"],
            &[
                "a `pktsched route` config",
                "allowed `pktsched route --config",
            ],
        ),
        with(
            "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nlimit = 5\n",
            &["route", "--check", "{dir}/c.toml"],
            &[
                "a `pktsched run` config",
                "`pktsched route --check` takes configs with [router]",
                "allowed `pktsched check",
            ],
        ),
        with(
            "[link]\n",
            &["route", "--config", "{dir}/c.toml"],
            &[
                "a `pktsched run` config",
                "`pktsched route` takes configs with [router]",
            ],
        ),
    ]);
}

/// A config with `extra` under `[link]` and one default class.
fn link_with(extra: &str) -> &'static [(&'static str, &'static str)] {
    let text = format!("{RUN_LINK}{extra}\n[[class]]\nname = \"a\"\ndefault = true\n");
    Box::leak(Box::new([("c.toml", &*Box::leak(text.into_boxed_str()))]))
}

/// Odd config files for `check`, `run` and `route --check`: wrong types
/// name the dotted field, the value's kind and the accepted forms; empty,
/// binary, huge, negative, unknown and duplicated values and files that
/// are not files are named; nothing prints a position of 0:0.
#[test]
fn odd_config_files() {
    let check = |files, words| Row {
        files,
        ..row(&["check", "{dir}/c.toml"], 2, words)
    };
    let route = |content: &'static str, words| Row {
        files: Box::leak(Box::new([("r.toml", content)])),
        ..row(&["route", "--check", "{dir}/r.toml"], 2, words)
    };
    run_table(&[
        check(
            &[(
                "c.toml",
                "# no rate\n[link]\ningress = \"d0\"\negress = \"d1\"\n",
            )],
            &[
                "c.toml:2:1",
                "`link.rate` is missing",
                "a rate with its unit in quotes",
            ],
        ),
        check(
            &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = 10\n",
            )],
            &[
                "c.toml:4:8",
                "`link.rate = 10`: the value is a whole number",
                "a rate with its unit",
                "\"100mbit\"",
            ],
        ),
        check(
            link_with("busy_poll = \"yes\""),
            &[
                "c.toml:5:13",
                "`link.busy_poll = \"yes\"`: the value is a string",
                "allowed true, false or a whole number",
            ],
        ),
        // Non-ASCII text before a syntax error: the position and no panic.
        check(link_with("egress = \"é=1\" x"), &["c.toml:5:"]),
        check(
            link_with("burst = 1.5"),
            &[
                "`link.burst = 1.5`: the value is a fractional number",
                "allowed a whole number",
            ],
        ),
        check(
            link_with("backend = { x = 1 }"),
            &[
                "`link.backend = { x = 1 }`: the value is a table",
                "allowed \"auto\", \"xdp\" or \"packet\"",
            ],
        ),
        check(
            link_with("sched = 5"),
            &[
                "c.toml:5:9",
                "`link.sched = 5`: the value is a whole number",
                "allowed \"other\" or \"fifo:N\" with N in 1..=99",
            ],
        ),
        check(
            link_with("[scheduler]\nalgorithm = 5"),
            &[
                "c.toml:6:13",
                "`scheduler.algorithm = 5`",
                "allowed one of fifo, prio, rr, drr, wf2q, qfq in quotes",
            ],
        ),
        check(
            &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[class]\nname = \"a\"\n",
            )],
            &[
                "c.toml:5:1",
                "`[class]` is a single table, but class is a list: allowed `[[class]]`",
            ],
        ),
        check(
            &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nburst = 1.5\n",
            )],
            &[
                "c.toml:8:9",
                "`class.burst = 1.5`: the value is a fractional number",
                "allowed bytes, e.g. `burst = 15360` or `burst = \"15k\"`",
            ],
        ),
        check(
            link_with("promiscuous = \"no\""),
            &["`link.promiscuous = \"no\"`", "allowed true or false"],
        ),
        check(
            link_with("buffers = 99999999999999999999"),
            &["link.buffers", "a whole number too large"],
        ),
        check(
            link_with("overhead = -1"),
            &["c.toml:5:12", "link.overhead = -1", "0..=256"],
        ),
        check(
            link_with("rate = \"2gbit\""),
            &["c.toml:5:1", "`link.rate = \"2gbit\"`: duplicate key"],
        ),
        check(
            &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\n[[class]]\nname = \"a\"\n",
            )],
            &[
                "c.toml:9:8",
                "class \"a\" is defined twice (first at line 6)",
            ],
        ),
        check(
            link_with("colour = \"red\""),
            &["c.toml:5:1", "unknown field `colour`", "`ingress`"],
        ),
        // An unknown key inside an inline table is named through it, and
        // an unknown table by its header.
        check(
            &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nmatch = [{ dprt = 5 }]\n",
            )],
            &[
                "c.toml:8:",
                "`class.match.dprt`: unknown field `dprt`; allowed `src`, `dst`",
                "`dscp` or `vlan`",
            ],
        ),
        check(
            &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[classes]\nname = \"a\"\n",
            )],
            &[
                "`[classes]`: unknown table `classes`; allowed `link`",
                "`class`",
            ],
        ),
        check(
            &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nmatch = [{ dport = 1.5 }]\n",
            )],
            &[
                "c.toml:8:20",
                "`class.match.dport",
                "a fractional number",
                "allowed a port or a range, e.g. `dport = 80` or `dport = \"1000-2000\"`",
            ],
        ),
        check(
            &[("c.toml", "")],
            &["c.toml: the file holds no settings", "[link]", "[[class]]"],
        ),
        check(
            &[("c.toml", "# only a comment\n\n")],
            &["holds no settings"],
        ),
        check(
            &[("c.toml", "\u{1}\u{2}\u{3}garbage\u{7f}")],
            &["c.toml:1:1"],
        ),
        row(
            &["check", "/bin/true"],
            2,
            &["/bin/true: config", "is not UTF-8 text"],
        ),
        row(
            &["check", "/tmp"],
            2,
            &[
                "/tmp: cannot read config",
                "a directory, not a regular file",
            ],
        ),
        row(&["check", ""], 2, &["a value is required", "<CONFIG>"]),
        route(
            "",
            &[
                "r.toml: the file holds no settings",
                "[router]",
                "[[route]]",
            ],
        ),
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\nbusy_poll = true\n",
            &[
                "`router.busy_poll = true`: the value is a boolean",
                "allowed a whole number",
            ],
        ),
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\nstrategy = 5\n",
            &[
                "r.toml:4:12",
                "`router.strategy = 5`: the value is a whole number",
                "allowed \"sq\", \"rr\", \"ll-rr\" or \"ll-wfq\"",
            ],
        ),
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\n[[class]]\nname = \"be\"\n[route]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n",
            &[
                "r.toml:6:1",
                "`[route]` is a single table, but route is a list: allowed `[[route]]`",
            ],
        ),
        row(
            &["route", "--check", "/tmp"],
            2,
            &["a directory, not a regular file"],
        ),
        Row {
            files: Box::leak(Box::new([(
                "r.toml",
                "[router]\ningress = \"a0\"\negress = \"a1\"\n[[class]]\nname = \"be\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n",
            )])),
            ..row(
                &["check", "{dir}/r.toml"],
                2,
                &[
                    "r.toml: a `pktsched route` config",
                    "pktsched route --check",
                ],
            )
        },
        row(
            &["stats", "--socket", "/nonexistent/s", "--config", "c.toml"],
            2,
            &["--config", "cannot be used with", "--socket"],
        ),
    ]);
}

/// Class names in a route config: too long, defined twice, with a
/// control character, or `reverse` (taken by the egress → ingress
/// counters) are named with what is allowed; a class, route, neighbour
/// or egress class given twice names the first one's line too.
#[test]
fn route_class_names() {
    let route = |content: &'static str, words| Row {
        files: Box::leak(Box::new([("r.toml", content)])),
        ..row(&["route", "--check", "{dir}/r.toml"], 2, words)
    };
    run_table(&[
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\n[[class]]\nname = \"ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n",
            &["r.toml:5:8", "(87 bytes): allowed 1 to 64 bytes"],
        ),
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\n[[class]]\nname = \"be\"\n[[class]]\nname = \"be\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n",
            &[
                "r.toml:7:8",
                "class \"be\" is defined twice (first at line 5)",
            ],
        ),
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\n[[class]]\nname = \"be\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n",
            &[
                "r.toml:10:10",
                "route.prefix = \"10.0.0.0/8\" is given twice (first at line 7)",
            ],
        ),
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\n[[class]]\nname = \"be\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n[[neighbour]]\nip = \"10.0.0.1\"\nmac = \"02:00:00:00:00:01\"\n[[neighbour]]\nip = \"10.0.0.1\"\nmac = \"02:00:00:00:00:02\"\n",
            &[
                "r.toml:13:6",
                "neighbour.ip = 10.0.0.1 is given twice (first at line 10)",
            ],
        ),
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\n[[class]]\nname = \"be\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n[egress]\nrate = \"10mbit\"\n[[egress.class]]\nname = \"be\"\n[[egress.class]]\nname = \"be\"\n",
            &[
                "r.toml:14:8",
                "egress.class \"be\" is given twice (first at line 12)",
            ],
        ),
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\n[[class]]\nname = \"a\\nb\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n",
            &["class name \"a\\nb\"", "control characters"],
        ),
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\n[[class]]\nname = \"reverse\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n",
            &["r.toml:5:8", "\"reverse\": reserved"],
        ),
    ]);
}

/// Control sockets that are not sockets: named, never connected to.
#[test]
fn control_paths_that_are_not_sockets() {
    run_table(&[
        Row {
            files: &[("s.sock", "a regular file")],
            ..row(
                &["stats", "--socket", "{dir}/s.sock"],
                2,
                &["s.sock is a regular file, not a socket"],
            )
        },
        row(
            &["stats", "--socket", "/tmp"],
            2,
            &["/tmp is a directory, not a socket"],
        ),
        row(
            &["reload", "--socket", "/dev/null"],
            2,
            &["/dev/null is a device or other special file, not a socket"],
        ),
    ]);
}

/// Every command that reads a file, given one that is not a regular file
/// of a sane size: a FIFO nobody writes (no hang), a 2 GiB sparse file
/// (no 2 GiB allocation), `/dev/zero`, a directory, a socket. Each is
/// named by what it is and the limit; nothing is read.
#[test]
fn files_that_are_not_regular_or_are_huge() {
    let scratch = Scratch::new("special-files");
    let dir = scratch.path();
    let fifo = dir.join("fifo.toml");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success(),
        "mkfifo"
    );
    let huge = dir.join("huge.toml");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    let sock = dir.join("sock.toml");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    // A results directory whose point.json is a FIFO.
    let results = dir.join("results");
    std::fs::create_dir_all(results.join("points/p1")).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(results.join("points/p1/point.json"))
            .status()
            .unwrap()
            .success()
    );
    let leak = |p: &std::path::Path| &*Box::leak(p.display().to_string().into_boxed_str());
    let (fifo, huge, sock, results) = (leak(&fifo), leak(&huge), leak(&sock), leak(&results));
    let fifo_says: &'static [&'static str] = &["a FIFO (named pipe), not a regular file"];
    let huge_says: &'static [&'static str] = &["is larger than", "at least 2147483648"];
    let mut rows = Vec::new();
    for (path, says) in [
        (fifo, fifo_says),
        (huge, huge_says),
        (sock, &["a socket, not a regular file"][..]),
        ("/dev/zero", &["a device, not a regular file"][..]),
        ("/", &["a directory, not a regular file"][..]),
    ] {
        let leak_args = |a: Vec<&'static str>| &*Box::leak(a.into_boxed_slice());
        for args in [
            vec!["check", path],
            vec!["run", "--config", path],
            vec!["route", "--check", path],
            vec!["route", "--config", path],
            vec!["stats", "--config", path],
            vec!["reload", "--config", path],
            vec!["gen", "--dst", "127.0.0.1", "--flows-file", path],
            vec!["sim", path],
        ] {
            rows.push(row(leak_args(args), 2, says));
        }
    }
    rows.push(row(
        Box::leak(Box::new(["plot", "ingress", results])),
        2,
        &["point.json", "a FIFO (named pipe), not a regular file"],
    ));
    // Control sockets: one others may use (mode 0666), one nobody answers.
    let open_sock = dir.join("open.sock");
    let _open = std::os::unix::net::UnixListener::bind(&open_sock).unwrap();
    std::fs::set_permissions(&open_sock, PermissionsExt::from_mode(0o666)).unwrap();
    let dead_sock = dir.join("dead.sock");
    drop(std::os::unix::net::UnixListener::bind(&dead_sock).unwrap());
    std::fs::set_permissions(&dead_sock, PermissionsExt::from_mode(0o600)).unwrap();
    let (open_sock, dead_sock) = (leak(&open_sock), leak(&dead_sock));
    rows.push(row(
        Box::leak(Box::new(["stats", "--socket", open_sock])),
        2,
        &["has mode 0666: allowed 0600 (owner only)"],
    ));
    rows.push(row(
        Box::leak(Box::new(["reload", "--json", "--socket", dead_sock])),
        2,
        &["cannot reach pktsched on", "Connection refused"],
    ));
    rows.push(row(
        Box::leak(Box::new(["reload", "--prometheus", "--socket", dead_sock])),
        2,
        &["--prometheus", "allowed with `pktsched stats`"],
    ));
    // Two forms asked for: a clap conflict naming both, not one picked.
    rows.push(row(
        Box::leak(Box::new([
            "stats",
            "--json",
            "--prometheus",
            "--socket",
            dead_sock,
        ])),
        2,
        &["--json", "cannot be used with", "--prometheus"],
    ));
    rows.push(row(
        Box::leak(Box::new([
            "stats",
            "--prometheus",
            "--json",
            "--socket",
            dead_sock,
        ])),
        2,
        &["--prometheus", "cannot be used with", "--json"],
    ));
    run_table(&rows);
}

/// A daemon that answers `error: …` or closes the connection without an
/// answer: `stats` and `reload` fail naming it instead of printing the
/// error text as their result with exit status 0 (scripts such as
/// `ingress-qos.sh` rely on the status).
#[test]
fn daemon_errors_fail_stats_and_reload() {
    use std::io::{BufRead, BufReader, Write};
    let scratch = Scratch::new("daemon-errors");
    let serve = |name: &str, answer: &'static str| -> &'static str {
        let path = scratch.path().join(name);
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        std::fs::set_permissions(&path, PermissionsExt::from_mode(0o600)).unwrap();
        std::thread::spawn(move || {
            for mut conn in listener.incoming().map_while(Result::ok) {
                let mut line = String::new();
                let _ = BufReader::new(&conn).read_line(&mut line);
                let _ = conn.write_all(answer.as_bytes());
            }
        });
        Box::leak(path.display().to_string().into_boxed_str())
    };
    let failing = serve("failing.sock", "error: the forwarding thread failed\n");
    let silent = serve("silent.sock", "");
    let mut rows = Vec::new();
    for args in [
        vec!["stats", "--socket", failing],
        vec!["stats", "--json", "--socket", failing],
        vec!["stats", "--prometheus", "--socket", failing],
    ] {
        rows.push(row(
            Box::leak(args.into_boxed_slice()),
            2,
            &["stats failed", "the forwarding thread failed"],
        ));
    }
    rows.push(row(
        Box::leak(Box::new(["reload", "--socket", failing])),
        2,
        &["reload refused", "the forwarding thread failed"],
    ));
    for command in ["stats", "reload"] {
        rows.push(row(
            Box::leak(Box::new([command, "--socket", silent])),
            2,
            &[
                "no answer from pktsched on",
                "silent.sock",
                "closed the connection",
            ],
        ));
    }
    run_table(&rows);
}

/// Paths that are not UTF-8: named (lossily), never a panic.
#[test]
fn paths_that_are_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let scratch = Scratch::new("non-utf8");
    let garbage = scratch
        .path()
        .join(std::ffi::OsStr::from_bytes(b"c\xff.toml"));
    std::fs::write(&garbage, "\u{1}\u{2}garbage").unwrap();
    let missing = scratch
        .path()
        .join(std::ffi::OsStr::from_bytes(b"m\xfe.toml"));
    for (args, says) in [
        (
            vec!["check".into(), garbage.clone().into_os_string()],
            "c\u{fffd}.toml:1:1",
        ),
        (
            vec!["check".into(), missing.clone().into_os_string()],
            "No such file",
        ),
        (
            vec!["route".into(), "--check".into(), garbage.into_os_string()],
            "c\u{fffd}.toml:1:1",
        ),
        (
            vec!["sim".into(), missing.clone().into_os_string()],
            "cannot read scenario",
        ),
        (
            vec!["stats".into(), "--socket".into(), missing.into_os_string()],
            "cannot reach pktsched on",
        ),
    ] {
        let out = Command::new("timeout")
            .args(["-s", "KILL", "60", env!("CARGO_BIN_EXE_pktsched")])
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(says) && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
}
