//! The bench commands (and `demo`): every size a user controls has a
//! stated range (option, value and range in the message), parse errors say
//! what is allowed, and a command that cannot produce every row fails.

use crate::table::{row, run_table};

/// `bench sched` and `bench table`: the harness's backlog bounds, flowsets,
/// runs and counts.
#[test]
fn bench_sched_and_table() {
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
        row(
            &["bench", "sched", "--flowsets", "1::1-5-2"],
            2,
            &[
                "flowset `1::1-5-2`",
                "weight and len may be ranges",
                "flows a count",
            ],
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

/// `bench shape`: granularities, structures, sizes, and a structure that
/// refuses a setting.
#[test]
fn bench_shape_structures_and_sizes() {
    run_table(&[
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
    ]);
}

/// An output path in no directory is refused before the run.
#[test]
fn bench_plot_paths_in_no_directory() {
    run_table(&[
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
    ]);
}

/// `bench pspat`: every option with a value.
#[test]
fn bench_pspat_options() {
    run_table(&[
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
            &["bench", "pspat", "--victim-assist-after", "5s"],
            2,
            &["--victim-assist-after 5s", "0ns..=1s"],
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
    ]);
}

/// `bench pspat`: lengths, link and victim rates, durations, counts.
#[test]
fn bench_pspat_sizes_rates_and_durations() {
    run_table(&[
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
    ]);
}

/// `bench pspat`: the arbiter's and the bench's switches name their forms;
/// a slow link is paced within `--duration`.
#[test]
fn bench_pspat_switches() {
    run_table(&[
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
    ]);
}

/// `demo`: the live demo's seconds and counts.
#[test]
fn demo_seconds() {
    run_table(&[
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
    ]);
}
