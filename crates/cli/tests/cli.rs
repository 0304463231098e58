//! The command line: good runs produce parseable output, bad input gives a
//! clear error and exit code 2, never a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Scratch;
use common::skipped;
use std::process::{Command, Output};

fn pktsched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pktsched"))
        .args(args)
        .output()
        .expect("run pktsched")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bench_sched_json_has_every_algorithm() {
    let o = pktsched(&[
        "bench",
        "sched",
        "--alg",
        "all",
        "-n",
        "20K",
        "--flowsets",
        "1::8,4::2",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let rows = v.as_array().expect("array");
    let algs: Vec<&str> = rows
        .iter()
        .map(|r| r["alg"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(algs, ["none", "fifo", "prio", "rr", "drr", "wf2q", "qfq"]);
    for r in rows {
        assert_eq!(r["flows"], 10);
        assert_eq!(r["qmin"], 40);
        assert_eq!(r["qmax"], 300);
        assert_eq!(r["loops"], 20_000);
        assert_eq!(r["drops"], 0);
        assert!(r["ns_per_pair"].as_f64().unwrap_or(0.0) > 0.0);
        assert!(r["worst_wfi_bytes"].as_f64().is_some());
    }
    // Weighted algorithms keep the lag small; RR ignores weights.
    let wfi = |a: &str| {
        rows.iter()
            .find(|r| r["alg"] == a)
            .and_then(|r| r["worst_wfi_bytes"].as_f64())
            .unwrap_or(f64::NAN)
    };
    assert!(wfi("drr") < 10_000.0, "drr wfi {}", wfi("drr"));
    assert!(wfi("wf2q") < 10_000.0, "wf2q wfi {}", wfi("wf2q"));
    assert!(wfi("qfq") < 10_000.0, "qfq wfi {}", wfi("qfq"));
    assert!(
        wfi("rr") > wfi("drr"),
        "rr {} drr {}",
        wfi("rr"),
        wfi("drr")
    );
}

#[test]
fn bench_sched_table() {
    let o = pktsched(&[
        "bench",
        "sched",
        "--alg",
        "drr,qfq",
        "-n",
        "10K",
        "--flowsets",
        "1::4",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("ns/pair") && out.contains("drr") && out.contains("qfq"),
        "{out}"
    );
}

#[test]
fn bench_sched_runs_policy_trees_next_to_qfq() {
    // A DOT file without rates (bench sched's clock never moves).
    let scratch = Scratch::new("cli-dot");
    let flat = scratch.path().join("two.dot");
    std::fs::write(
        &flat,
        "digraph { r [kind=wfq] a [kind=wfq weight=3] b [kind=wfq] r -> a  r -> b }",
    )
    .unwrap();
    let arg = format!("qfq,policy:wfq,policy:{}", flat.display());
    let o = pktsched(&[
        "bench",
        "sched",
        "--alg",
        &arg,
        "-n",
        "20K",
        "--flowsets",
        "1::8",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let rows = v.as_array().expect("array");
    let algs: Vec<&str> = rows
        .iter()
        .map(|r| r["alg"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(algs[..2], ["qfq", "policy:wfq"]);
    assert!(algs[2].starts_with("policy:") && algs[2].ends_with("two.dot"));
    // The work-conserving wfq tree is fair like QFQ.
    let wfq = &rows[1];
    assert_eq!(wfq["drops"], 0);
    assert!(wfq["enqueues"].as_u64().unwrap_or(0) > 5_000);
    assert!(wfq["worst_wfi_bytes"].as_f64().unwrap_or(f64::NAN) < 10_000.0);
    // Unknown built-ins, unreadable files and shaped policies (whose
    // releases need a moving clock) are refused by name.
    let hpfq = concat!(env!("CARGO_MANIFEST_DIR"), "/../core/policies/hpfq.dot");
    let shaped = format!("policy:{hpfq}");
    for (bad, want) in [
        ("policy:nope", "no built-in policy"),
        ("policy:/nonexistent/p.toml", "cannot read"),
        (shaped.as_str(), "node `root` has a rate limit"),
    ] {
        let o = pktsched(&["bench", "sched", "--alg", bad, "-n", "1K"]);
        assert!(!o.status.success());
        assert!(stderr(&o).contains(want), "{bad}: {}", stderr(&o));
    }
}

#[test]
fn bad_input_is_refused_with_a_reason() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["bench", "sched", "--alg", "wfq"],
            "unknown algorithm `wfq`",
        ),
        (
            &["bench", "sched", "--flowsets", "1::0"],
            "flows must be at least 1",
        ),
        (&["bench", "sched", "--flowsets", "a::1"], "weight"),
        (
            &["bench", "sched", "--flowsets", "0::1"],
            "weight must be at least 1",
        ),
        (
            &["bench", "sched", "-n", "lots"],
            "-n: `lots` is not a count",
        ),
        (&["bench", "sched", "-n", "0"], "-n: must be at least 1"),
        (
            &["bench", "sched", "--qmin", "30n", "--qmax", "4n"],
            "must be greater than qmin",
        ),
        (&["bench", "sched", "--qmax", "x"], "--qmax"),
        (&["bench", "sched", "--runs", "0"], "--runs"),
        (
            &[
                "bench",
                "sched",
                "--alg",
                "qfq",
                "--flowsets",
                "100000::1",
                "-n",
                "10",
            ],
            "weight = 100000 is out of range for qfq",
        ),
        (
            &[
                "bench",
                "sched",
                "--qmax",
                "18446744073709551615",
                "-n",
                "10",
            ],
            "queue limit",
        ),
        (
            &[
                "bench",
                "sched",
                "--qmax",
                "9000000000000000000n",
                "--flowsets",
                "1::4",
                "-n",
                "10",
            ],
            "--qmax",
        ),
        (
            &[
                "bench",
                "sched",
                "--flowsets",
                "1-18446744073709551615-3::1",
                "-n",
                "10",
            ],
            "does not fit in 32 bits",
        ),
        (
            &[
                "bench",
                "sched",
                "--flowsets",
                "1-65536-65536:1-65536-65536:1",
                "-n",
                "10",
            ],
            "above 16777216",
        ),
        (
            &[
                "bench", "sched", "--alg", "fifo", "--qmax", "20M", "-n", "10",
            ],
            "queue limit",
        ),
        (
            &["rate", "1.0000000000000000000000000000000000000000001bit"],
            "significant digits",
        ),
        (&["rate", "1e99999999999bit"], "too large"),
        (&["rate", "100mbps"], "ambiguous"),
        (&["rate", "0kbit"], "zero"),
        (&["rate", "12"], "no unit"),
    ];
    for (args, want) in cases {
        let o = pktsched(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains(want),
            "{args:?}: stderr {e:?} should contain {want:?}"
        );
        assert!(!e.contains("panicked"), "{args:?} panicked: {e}");
    }
}

#[test]
fn rate_prints_both_units() {
    let o = pktsched(&["rate", "125MB/s", "--len", "1500"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("1gbit = 1000000000 bit/s = 125000000 B/s"),
        "{out}"
    );
    assert!(out.contains("12.000us"), "{out}");
}

/// `check` notes what a valid config sets but will not use here: a class
/// weight under `fifo`, a `link.cpu` this process may not run on; the
/// output, notes included, is still a config `check` accepts.
#[test]
fn check_notes_unused_weights_and_a_cpu_not_here() {
    let dir = Scratch::new("check-notes");
    let path = dir.path().join("c.toml");
    std::fs::write(
        &path,
        "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"10mbit\"\ncpu = 1023\n\
         [scheduler]\nalgorithm = \"fifo\"\n\
         [[class]]\nname = \"a\"\nweight = 3\ndefault = true\n",
    )
    .expect("write");
    let o = pktsched(&["check", path.to_str().expect("utf-8")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        out.contains("# note: class \"a\": weight = 3 is not used by algorithm = \"fifo\""),
        "{out}"
    );
    assert!(
        out.contains("# note: link.cpu = 1023 is not a CPU this process may run on here"),
        "{out}"
    );
    let again = dir.path().join("again.toml");
    std::fs::write(&again, out.as_bytes()).expect("write");
    let o = pktsched(&["check", again.to_str().expect("utf-8")]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// One `bench pspat --json` of the tiny test's shape, measured over
/// `window`: its runs, after checking that each accounts for every packet
/// and has a finite rate, a Jain index in (0, 1] and (under overload) the
/// victim's latency next to its bound. The summary and the plot at `svg`
/// are checked too. Returns (most packets sent by one run, most decisions
/// per second).
fn tiny_pspat_run(window: &str, svg: &std::path::Path) -> (u64, f64) {
    let o = pktsched(&[
        "bench",
        "pspat",
        "--clients",
        "1,3",
        "--duration",
        window,
        "--warmup",
        "10ms",
        "--runs",
        "1",
        "--weights",
        "1,2",
        "--no-pin",
        "--plot",
        svg.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2 * 2 * 3, "phases × clients × archs");
    let mut most_decisions = 0.0f64;
    let mut most_sent = 0;
    for r in runs {
        let (sent, delivered, dropped, returned) = (
            r["sent"].as_u64().unwrap(),
            r["delivered"].as_u64().unwrap(),
            r["dropped"].as_u64().unwrap(),
            r["returned"].as_u64().unwrap(),
        );
        // A starved window (two cores, tests in parallel) may send
        // nothing; every packet sent is accounted for.
        most_sent = most_sent.max(sent);
        assert_eq!(sent, delivered + dropped + returned, "{r}");
        // A run's window may see no decision when the machine starves its
        // threads for the whole (short) window: a rate, never NaN.
        let rate = r["decisions_per_s"].as_f64().unwrap();
        assert!(rate.is_finite() && rate >= 0.0, "{r}");
        most_decisions = most_decisions.max(rate);
        let jain = r["jain"].as_f64().unwrap();
        assert!(jain > 0.0 && jain <= 1.0 + 1e-9, "{r}");
        if r["phase"] == "overload" {
            // A victim that got nothing out in a starved window is null
            // (it fails its targets), never a p99 of 0.
            let vic = &r["victim"];
            if !vic.is_null() {
                assert!(vic["bound_ns"].as_u64().unwrap() > 0, "{r}");
                assert!(vic["p99_ns"].as_u64().unwrap() <= vic["max_ns"].as_u64().unwrap());
            }
        } else {
            assert!(r["victim"].is_null());
        }
    }
    let summary = v["summary"].as_array().unwrap();
    assert_eq!(summary.len(), 12);
    // Every starved (null) victim is counted in its summary's
    // `victim_starved`, and no other.
    for sum in summary.iter().filter(|s| s["phase"] == "overload") {
        let starved = runs
            .iter()
            .filter(|r| {
                (&r["phase"], &r["arch"], &r["clients"])
                    == (&sum["phase"], &sum["arch"], &sum["clients"])
                    && r["victim"].is_null()
            })
            .count() as u64;
        assert_eq!(sum["victim_starved"].as_u64(), Some(starved), "{sum}");
    }
    let plot = std::fs::read_to_string(svg).unwrap();
    assert!(plot.starts_with("<svg") && plot.contains("pspat"), "plot");
    (most_sent, most_decisions)
}

/// A tiny `bench pspat` run: every architecture and phase shows up in the
/// JSON, every run accounts for every packet, and the victim's latency is
/// measured with its bound next to it. Some run must send and some must
/// decide; when none did (every thread kept off a core for every short
/// window, as the client-transmit test saw), the whole run is measured
/// again with a longer window ([`STARVED_RUN_WINDOWS`]).
#[test]
fn bench_pspat_json_accounts_for_every_packet() {
    let scratch = Scratch::new("pspat-plot");
    let svg = scratch.path().join("pspat.svg");
    let mut starved = Vec::new();
    for window in STARVED_RUN_WINDOWS {
        let (most_sent, most_decisions) = tiny_pspat_run(window, &svg);
        if most_sent > 0 && most_decisions > 0.0 {
            return;
        }
        let said = format!(
            "{window} window: most packets sent by a run {most_sent}, most decisions/s \
             {most_decisions}"
        );
        eprintln!("no bench pspat run sent or decided, measuring a longer window: {said}");
        starved.push(said);
    }
    panic!(
        "bench pspat: no run sent a packet or measured a decision even with a {} window: {}",
        STARVED_RUN_WINDOWS[STARVED_RUN_WINDOWS.len() - 1],
        starved.join("; ")
    );
}

/// `--arbiter-sched fifo:N` without CAP_SYS_NICE (dropped from the
/// bounding set by `setpriv`, so even root lacks it) and with no
/// real-time allowance (`prlimit --rtprio=0:0`, so a host whose
/// RLIMIT_RTPRIO would allow priority 50 cannot let it through) is
/// refused before any run, with the policy and the capability named.
#[test]
fn bench_pspat_refuses_a_real_time_arbiter_without_cap_sys_nice() {
    let Ok(o) = Command::new("prlimit")
        .args([
            "--rtprio=0:0",
            "--",
            "setpriv",
            "--inh-caps=-sys_nice",
            "--bounding-set=-sys_nice",
            "--",
            env!("CARGO_BIN_EXE_pktsched"),
            "bench",
            "pspat",
            "--arbiter-sched",
            "fifo:50",
            "--phases",
            "overload",
            "--clients",
            "1",
            "--runs",
            "1",
        ])
        .output()
    else {
        skipped("prlimit (util-linux) is not installed");
        return;
    };
    let e = stderr(&o);
    if e.contains("setpriv:") || e.contains("prlimit:") {
        skipped(&format!(
            "setpriv/prlimit could not drop CAP_SYS_NICE or RLIMIT_RTPRIO: {e}"
        ));
        return;
    }
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("fifo:50") && e.contains("CAP_SYS_NICE") && e.contains("`other`"),
        "{e}"
    );
    assert!(o.stdout.is_empty(), "a run started: {:?}", o.stdout);
}

#[test]
fn bench_pspat_bad_input_is_refused_with_a_reason() {
    let cases: &[(&[&str], &str)] = &[
        (&["--clients", "0"], "allowed: 1..=128"),
        (&["--clients", "200"], "allowed: 1..=128"),
        (&["--clients", "x"], "`x` is not a number"),
        (&["--archs", "mutex"], "unknown architecture `mutex`"),
        (&["--phases", "warp"], "unknown phase `warp`"),
        (&["--alg", "wfq"], "unknown algorithm `wfq`"),
        (&["--weights", "0"], "allowed: integers from 1"),
        (&["--batch", "0"], "--batch 0; allowed: 1..=4096"),
        (&["--limit", "0"], "--limit 0"),
        (&["--link", "fast"], "--link"),
        (&["--overload=-1"], "--overload `-1`"),
        (&["--overload", "fast"], "--overload `fast`"),
        (&["--duration", "5"], "has no unit"),
        (&["--duration", "0s"], "--duration must be above zero"),
        (&["--runs", "0"], "--runs 0"),
        (&["--arbiter-nap", "0ns"], "--arbiter-nap 0ns"),
        (&["--arbiter-nap", "soon"], "or `off`"),
        (
            &["--arbiter-sched", "rr"],
            "--arbiter-sched `rr` is not a policy",
        ),
        (
            &["--arbiter-sched", "fifo:0"],
            "priority `0` is out of range",
        ),
        (&["--arbiter-sched", "fifo:100"], "fifo:N with N in 1..=99"),
        (&["--dispatchers", "100"], "dispatchers"),
        (&["--alg", "qfq", "--len", "70000"], "packet length 70000"),
        (
            &["--client-transmit", "--dispatchers", "2"],
            "0 when client_transmit is set",
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec!["bench", "pspat"];
        args.extend_from_slice(extra);
        let o = pktsched(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(want), "{extra:?}: want `{want}` in: {e}");
        assert!(!e.contains("panicked"), "{extra:?}: {e}");
    }
}

/// Measured windows for `bench pspat` tests whose runs must send,
/// shortest first. A client that runs at all hands over a packet at once
/// (its mailbox starts empty), so a run that sent nothing had no client on
/// a core before the stop: on a loaded two-core machine that happens
/// within 30 ms (seen in CI, and in 4 of 20 client-transmit runs here next
/// to two busy loops), never within a second unless the clients never
/// send.
const STARVED_RUN_WINDOWS: [&str; 3] = ["20ms", "200ms", "1s"];

/// Client-transmit mode, `bench pspat --client-transmit`: clients
/// transmit what the arbiter cleared for them; every packet handed over is
/// delivered, dropped or returned, and every run sends. A window in which
/// some run sent nothing is measured again with a longer one (the
/// clients' time on and off a core, from `--stats`, goes to stderr and
/// into the failure).
#[test]
fn bench_pspat_client_transmit_accounts_for_every_packet() {
    let mut starved = Vec::new();
    for window in STARVED_RUN_WINDOWS {
        let o = pktsched(&[
            "bench",
            "pspat",
            "--clients",
            "3",
            "--archs",
            "pspat",
            "--client-transmit",
            "--duration",
            window,
            "--warmup",
            "10ms",
            "--runs",
            "1",
            "--no-pin",
            "--stats",
            "--json",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let runs = v["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "phases × clients × archs");
        for r in runs {
            let sent = r["sent"].as_u64().unwrap();
            assert_eq!(
                sent,
                r["delivered"].as_u64().unwrap()
                    + r["dropped"].as_u64().unwrap()
                    + r["returned"].as_u64().unwrap(),
                "{r}"
            );
            let rate = r["decisions_per_s"].as_f64().unwrap();
            assert!(rate.is_finite() && rate >= 0.0, "{r}");
        }
        let silent: Vec<String> = runs
            .iter()
            .filter(|r| r["sent"].as_u64() == Some(0))
            .map(|r| {
                format!(
                    "{window} window, phase {}: nothing sent; the clients' threads ran {} and \
                     waited for a core {} (shares of the window, summed over clients)",
                    r["phase"], r["threads"]["clients"]["cpu"], r["threads"]["clients"]["wait"]
                )
            })
            .collect();
        if silent.is_empty() {
            return;
        }
        eprintln!("a client-transmit run sent nothing, measuring a longer window: {silent:?}");
        starved.extend(silent);
    }
    panic!(
        "bench pspat --client-transmit: a run sent nothing even with a {} window (a client that \
         runs sends at once): {}",
        STARVED_RUN_WINDOWS[STARVED_RUN_WINDOWS.len() - 1],
        starved.join("\n")
    );
}

#[test]
fn bench_shape_plots_cost_and_wakeups() {
    let scratch = Scratch::new("shape-plot");
    let prefix = scratch.path().join("shape").display().to_string();
    let o = pktsched(&[
        "bench",
        "shape",
        "--flows",
        "4,64",
        "-n",
        "20000",
        "--stagger",
        "--plot",
        &prefix,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    for s in ["-ns.svg", "-wakeups.svg"] {
        let f = format!("{prefix}{s}");
        let svg = std::fs::read_to_string(&f).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("mltw"), "{f}");
    }
}

/// FlowBundler's point, deterministic (virtual clock, seeded phases): with
/// many slow flows at unsynchronised phases the MLTW releases them in far
/// fewer wake-ups than a fine single wheel, at the same rate accuracy.
#[test]
fn bench_shape_stagger_mltw_batches_slow_flows() {
    let o = pktsched(&[
        "bench",
        "shape",
        "--flows",
        "4000",
        "--rate",
        "1mbit",
        // 100 packets per flow: the MLTW files a 1 Mbit/s flow in the
        // wheel whose slot matches its 12 ms packet gap, so a rate measured
        // over n packets can be off by up to one slot in n.
        "-n",
        "400000",
        "--stagger",
        "--structs",
        "mltw,wheel",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v.as_array().unwrap();
    let get = |s: &str| rows.iter().find(|r| r["structure"] == s).unwrap();
    let (m, w) = (get("mltw"), get("wheel"));
    let (mw, ww) = (
        m["wakeups"].as_u64().unwrap(),
        w["wakeups"].as_u64().unwrap(),
    );
    assert!(mw > 0 && mw * 20 < ww, "mltw {mw} wake-ups vs wheel {ww}");
    for r in [m, w] {
        assert!(r["rate_err_max"].as_f64().unwrap() < 0.01, "{r}");
        assert_eq!(r["pkts"], m["pkts"]);
    }
    // Lateness stays within one slot of the flow's own wheel (≤ its
    // 12 ms packet gap).
    assert!(m["max_lateness_ns"].as_u64().unwrap() < 12_000_000, "{m}");
}

/// `calc ingress`: the largest BE budget for a target, the bound for a
/// budget, and a simulation whose RT maximum stays within the bound.
#[test]
fn calc_ingress_budget_bound_and_simulation() {
    let o = pktsched(&[
        "calc", "ingress", "--x", "1us", "--rho-rt", "0.3", "--m", "8", "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    // (b + 0.3)/0.7 <= 8 → b = 5; wait = 5.3/0.7 us.
    assert_eq!(v["b"], 5);
    assert_eq!(v["x_ps"], 1_000_000);
    let wait = v["wait_ps"].as_f64().unwrap();
    assert!((wait - 5.3e6 / 0.7).abs() < 1.0, "{wait}");
    assert!(wait <= 8e6);
    let o = pktsched(&[
        "calc", "ingress", "--x", "250ns", "--rho-rt", "0.3", "--b", "4",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("BE budget b = 4"), "{text}");
    assert!(
        text.contains("RT wait     <= (b+rho)x/(1-rho) = 1.536us"),
        "{text}"
    );
    let o = pktsched(&[
        "calc",
        "ingress",
        "--x",
        "1us",
        "--rho-rt",
        "0.5",
        "--b",
        "4",
        "--simulate",
        "--packets",
        "20000",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let sim = &v["simulation"];
    assert_eq!(sim["strategy"], "ll-wfq");
    let b = &sim["bound"];
    assert_eq!(b["assumptions_hold"], true);
    let max = b["rt_max_ps"].as_f64().unwrap();
    assert!(
        max > 0.0 && max <= b["response_ps"].as_f64().unwrap(),
        "{b}"
    );
    let arrivals: u64 = sim["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["arrivals"].as_u64().unwrap())
        .sum();
    assert_eq!(arrivals, 20_000);
}

/// `calc ingress --sweep DIR` writes the CSV (a row per strategy, load
/// and class) and both plots.
#[test]
fn calc_ingress_sweep_writes_csv_and_svg() {
    let dir = std::env::temp_dir().join(format!("pktsched-ingress-sweep-{}", std::process::id()));
    let o = pktsched(&[
        "calc",
        "ingress",
        "--x",
        "1us",
        "--sweep",
        dir.to_str().unwrap(),
        "--packets",
        "2000",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(dir.join("ingress-sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 4 * 8 * 2);
    assert!(csv.starts_with("strategy,load,class,p50_us,p99_us,max_us,loss,throughput_pps\n"));
    for f in ["ingress-p99.svg", "ingress-rt-p99.svg", "ingress-loss.svg"] {
        let svg = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(svg.contains("<svg") && svg.contains("ll-wfq RT"), "{f}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `stats` and `reload` document only their own options: `stats --help`
/// says what its `--json` and `--prometheus` print, `reload --help` says
/// what its `--json` prints and nothing of Prometheus or counters.
#[test]
fn stats_and_reload_help_document_their_own_options() {
    let help = |command: &str| {
        let o = pktsched(&[command, "--help"]);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let stats = help("stats");
    assert!(
        stats.contains("--json") && stats.contains("--prometheus"),
        "{stats}"
    );
    assert!(stats.contains("The counters as JSON"), "{stats}");
    assert!(
        !stats.contains("reloaded"),
        "reload's JSON in stats --help: {stats}"
    );
    let reload = help("reload");
    assert!(
        reload.contains("--json") && reload.contains("\"reloaded\": true"),
        "{reload}"
    );
    assert!(
        !reload.contains("--prometheus") && !reload.contains("counters"),
        "stats' options in reload --help: {reload}"
    );
}
