//! The traffic tools: `gen` (flows, backends, `--load`, `--flows-file`),
//! `sink` (ports, classes) and `plot ingress`.

use crate::common::Scratch;
use crate::table::{Row, row, run_table};

/// The start of every `gen` row.
const GEN: [&str; 3] = ["gen", "--dst", "127.0.0.1"];

/// A `gen` row: [`GEN`] and the given arguments.
macro_rules! gen_row {
    ([$($a:expr),*], $status:expr, $words:expr) => {
        row(&[GEN[0], GEN[1], GEN[2], $($a),*], $status, $words)
    };
}

/// `gen`: flow specs, durations, backends and devices.
#[test]
fn gen_flows_durations_and_backends() {
    run_table(&[
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
    ]);
}

/// `sink`: port ranges and the idle time.
#[test]
fn sink_ports() {
    run_table(&[
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

/// `gen --load` (the ingress workload): rates, shares, ports, DSCPs, flows
/// and sizes.
#[test]
fn gen_load_workload() {
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
}

/// `gen --flows-file`, `gen --rt-pattern`, `sink --class` and `plot
/// ingress`.
#[test]
fn gen_flows_file_sink_classes_and_plot() {
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
