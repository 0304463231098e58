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
