//! `pktsched sim`: exit status and messages.
#![allow(clippy::unwrap_used)]

use std::process::Command;

fn sim(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_pktsched"))
        .arg("sim")
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

mod common;
use common::Scratch;

#[test]
fn example_scenario_runs_with_json_departures_and_plots() {
    let scratch = Scratch::new("example_scenario_runs_with_json_departures_and_plots");
    let dir = env!("CARGO_MANIFEST_DIR");
    let scen = format!("{dir}/../../examples/scenarios/bursty-onoff.toml");
    let csv = scratch.file("deps.csv", "");
    let prefix = scratch.file("plot", "");
    let (code, out, err) = sim(&[&scen, "--json", "--departures", &csv, "--plot", &prefix]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["accounting"]["conserved"], true);
    let rows = std::fs::read_to_string(&csv).unwrap();
    assert!(rows.starts_with("flow,len,arrival_ns,departure_ns,fluid_finish_ns\n"));
    assert_eq!(
        rows.lines().count() as u64 - 1,
        v["accounting"]["delivered"].as_u64().unwrap()
    );
    for s in ["-rate.svg", "-delay-cdf.svg", "-wfi.svg"] {
        let svg = std::fs::read_to_string(format!("{prefix}{s}")).unwrap();
        assert!(svg.starts_with("<svg"), "{s}");
    }
}

#[test]
fn bad_scenario_fails_with_position() {
    let dir = Scratch::new("bad_scenario_fails_with_position");
    let p = dir.file(
        "bad.toml",
        "link = \"1gbit\"\nalgorithm = \"qfq\"\nduration = \"1ms\"\n[[flows]]\nweight = -3\n",
    );
    let (code, _, err) = sim(&[&p]);
    assert_ne!(code, 0);
    assert!(
        err.contains(":5:10: flows[0].weight = -3 is out of range: allowed 1..=65536"),
        "{err}"
    );
}

#[test]
fn a_measurement_above_its_bound_fails_loudly() {
    let dir = Scratch::new("a_measurement_above_its_bound_fails_loudly");
    // A delay target that the low-weight Poisson flow cannot meet next to
    // a greedy flow of weight 11.
    let p = dir.file(
        "viol.toml",
        "link = \"1gbit\"\nalgorithm = \"wf2q\"\nduration = \"1ms\"\nseed = 14896835110339716174\n\
         [[flows]]\nweight = 1\nsize = 173\n\
         [[flows]]\nname = \"victim\"\nweight = 1\nsize = { mix = [[64, 3], [1500, 1]] }\nsource = { type = \"poisson\", rate = \"41mbit\" }\nmax_delay = \"50us\"\n\
         [[flows]]\nweight = 11\nsize = { mix = [[64, 3], [1500, 1]] }\n",
    );
    let (code, out, err) = sim(&[&p]);
    assert_ne!(code, 0);
    assert!(out.contains("VIOLATION"), "{out}");
    assert!(
        err.contains("exceed their bound") && err.contains("flow 1 (victim): a packet waited"),
        "{err}"
    );
}

#[test]
fn departures_without_drain_list_every_delivered_packet() {
    let dir = Scratch::new("departures_without_drain_list_every_delivered_packet");
    // drain = false: some delivered packets have no fluid finish yet; they
    // must still get a row (with an empty fluid field).
    let scen = dir.file(
        "nodrain.toml",
        "link = \"1gbit\"\nalgorithm = \"wf2q\"\nduration = \"100us\"\ndrain = false\n[[flows]]\nweight = 1\nsource = { type = \"greedy\" }\n[[flows]]\nweight = 1\nsource = { type = \"greedy\" }\n[[flows]]\nweight = 1\nsize = 64\nsource = { type = \"poisson\", rate = \"100mbit\" }\n",
    );
    let csv = dir.file("nodrain.csv", "");
    let (code, out, err) = sim(&[&scen, "--json", "--departures", &csv]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(
        rows.lines().count() as u64 - 1,
        v["accounting"]["delivered"].as_u64().unwrap()
    );
    assert!(
        rows.lines().skip(1).any(|l| l.ends_with(',')),
        "a row with no fluid finish"
    );
}

#[test]
fn policy_scenario_runs_with_plots_and_departures() {
    let scratch = Scratch::new("policy_scenario_runs_with_plots_and_departures");
    let dir = env!("CARGO_MANIFEST_DIR");
    let scen = format!("{dir}/../../examples/scenarios/hpfq-policy.toml");
    let csv = scratch.file("policy-deps.csv", "");
    let prefix = scratch.file("policy-plot", "");
    let (code, out, err) = sim(&[&scen, "--departures", &csv, "--plot", &prefix]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("policy ../../crates/core/policies/hpfq.toml"),
        "{out}"
    );
    assert!(
        out.contains("no published bound for a policy tree"),
        "{out}"
    );
    // No fluid reference for a policy: the column is empty, not wrong.
    let rows = std::fs::read_to_string(&csv).unwrap();
    let first = rows.lines().nth(1).unwrap();
    assert!(first.ends_with(','), "{first}");
    for s in ["-rate.svg", "-delay-cdf.svg"] {
        let svg = std::fs::read_to_string(format!("{prefix}{s}")).unwrap();
        assert!(svg.starts_with("<svg"), "{s}");
    }
}

/// An algorithm without a published bound: the run says nothing was
/// checked (text and JSON) instead of "all within bounds", and exits 0.
#[test]
fn fifo_says_nothing_was_checked() {
    let dir = Scratch::new("fifo_says_nothing_was_checked");
    let p = dir.file(
        "fifo.toml",
        "link = \"1gbit\"\nalgorithm = \"fifo\"\nduration = \"1ms\"\n[[flows]]\ncount = 2\n",
    );
    let (code, out, err) = sim(&[&p]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("no bound for fifo: nothing checked"), "{out}");
    assert!(!out.contains("within their bounds"), "{out}");
    assert!(
        out.lines().any(|l| l.trim_end().ends_with(" -")),
        "ok column: {out}"
    );
    let (code, out, err) = sim(&[&p, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["checks"], 0);
    assert_eq!(v["verdict"], "no bound for fifo: nothing checked");
    // With a bound, the count of checks is stated.
    let q = dir.file(
        "qfq.toml",
        "link = \"1gbit\"\nalgorithm = \"qfq\"\nduration = \"1ms\"\n[[flows]]\ncount = 2\n",
    );
    let (code, out, _) = sim(&[&q]);
    assert_eq!(code, 0);
    assert!(out.contains("measurements within their bounds"), "{out}");
}

/// SIGINT during a long simulation: the report so far, marked partial
/// (text), with the accounting; exit 130.
#[test]
fn sigint_stops_a_long_simulation_with_a_partial_report() {
    use std::io::Read;
    let dir = Scratch::new("sigint_stops_a_long_simulation");
    let p = dir.file(
        "long.toml",
        "link = \"10gbit\"\nalgorithm = \"qfq\"\nduration = \"1000s\"\n[[flows]]\ncount = 64\n",
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_pktsched"))
        .args(["sim", &p])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the handlers are installed (SigCgt shows SIGINT, bit 2),
    // then signal.
    let status = format!("/proc/{}/status", child.id());
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let s = std::fs::read_to_string(&status).unwrap_or_default();
        let caught = s
            .lines()
            .find(|l| l.starts_with("SigCgt:"))
            .and_then(|l| u64::from_str_radix(l.split_whitespace().nth(1)?, 16).ok())
            .unwrap_or(0);
        if caught & (1 << 1) != 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "handlers never installed"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let code = child.wait().unwrap().code();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(code, Some(130), "{err}");
    assert!(out.contains("partial: stopped at "), "{out}");
    assert!(out.contains("conserved"), "{out}");
}
