//! Snapshot tests of every example scenario's summary table: any change in
//! scheduling behaviour shows up in review.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

fn run(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/scenarios")
        .join(name);
    let cfg = pktsched_sim::scenario::load(&p).unwrap();
    let rep = pktsched_sim::run(&cfg).unwrap();
    assert!(rep.accounting.conserved, "{}", rep.table());
    assert!(rep.violations.is_empty(), "{}", rep.table());
    rep.table()
}

#[test]
fn pspat_victim() {
    insta::assert_snapshot!(run("pspat-victim.toml"));
}

#[test]
fn pspat_victim_arbiter() {
    insta::assert_snapshot!(run("pspat-victim-arbiter.toml"));
}

#[test]
fn qfq_weight_mix() {
    insta::assert_snapshot!(run("qfq-weight-mix.toml"));
}

#[test]
fn qfq_jumbo() {
    insta::assert_snapshot!(run("qfq-jumbo.toml"));
}

#[test]
fn qfq_jumbo_64k() {
    insta::assert_snapshot!(run("qfq-jumbo-64k.toml"));
}

#[test]
fn drr_worst_case() {
    insta::assert_snapshot!(run("drr-worst-case.toml"));
}

#[test]
fn bursty_onoff() {
    insta::assert_snapshot!(run("bursty-onoff.toml"));
}

#[test]
fn trace_replay() {
    insta::assert_snapshot!(run("trace-replay.toml"));
}

#[test]
fn same_seed_same_result_and_bench_scenario_parses() {
    assert_eq!(run("bursty-onoff.toml"), run("bursty-onoff.toml"));
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/scenarios/bench-qfq-10k.toml");
    let cfg = pktsched_sim::scenario::load(&p).unwrap();
    assert_eq!(cfg.flows.len(), 10_000);
}

#[test]
fn hpfq_policy() {
    insta::assert_snapshot!(run("hpfq-policy.toml"));
}

/// The HPFQ tree on a 1 Gbit/s link: silver capped at 200 Mbit/s (its bulk
/// class at 50), gold takes the other 800 (its bulk class capped at 300).
/// Exercises a shaped scheduler in the simulator: the link idles while
/// every backlogged class waits for its rate limit.
#[test]
fn hpfq_policy_rates_follow_the_tree() {
    let p =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios/hpfq-policy.toml");
    let cfg = pktsched_sim::scenario::load(&p).unwrap();
    let rep = pktsched_sim::run(&cfg).unwrap();
    assert!(rep.accounting.conserved);
    let want = [
        ("gold.web", 500e6),
        ("gold.bulk", 300e6),
        ("silver.web", 150e6),
        ("silver.bulk", 50e6),
    ];
    for (g, rate) in want {
        let gr = rep.groups.iter().find(|x| x.name == g).unwrap();
        // Two flows per class, each with half of it.
        let total = gr.throughput_bps * f64::from(gr.flows);
        assert!(
            (total / rate - 1.0).abs() < 0.01,
            "{g}: {total} bit/s, want {rate}"
        );
    }
    // The same scenario with the DOT drawing of the policy gives the same
    // departures.
    let dot = std::fs::read_to_string(&p)
        .unwrap()
        .replace("hpfq.toml", "hpfq.dot");
    let cfg2 = pktsched_sim::scenario::parse(&dot, "dot.toml", p.parent()).unwrap();
    assert_eq!(
        pktsched_sim::run(&cfg2)
            .unwrap()
            .table()
            .replace("hpfq.dot", "hpfq.toml"),
        rep.table()
    );
}
