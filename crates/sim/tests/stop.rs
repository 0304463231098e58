//! A run asked to stop (SIGINT in `pktsched sim`) ends at the next safe
//! point with a partial but fully accounted outcome.

use std::sync::atomic::{AtomicU64, Ordering};

use pktsched_sim::engine::{Options, STOP_REQUEST, simulate_observed};
use pktsched_sim::report;

#[test]
fn a_stop_request_ends_the_run_early_with_the_accounting_intact() {
    let cfg = pktsched_sim::scenario::parse(
        "link = \"1gbit\"\nalgorithm = \"qfq\"\nduration = \"10s\"\n[[flows]]\ncount = 8\n",
        "long.toml",
        None,
    )
    .expect("scenario");
    for threaded in [false, true] {
        let progress = AtomicU64::new(STOP_REQUEST);
        let opt = Options {
            fluid_thread: threaded,
            ..Options::for_cfg(&cfg)
        };
        let out = simulate_observed(&cfg, opt, &progress).expect("run");
        assert!(out.stopped, "threaded {threaded}");
        // Stopped at the first safe point, long before 10 s of virtual time.
        assert!(out.end_ps < cfg.duration_ps / 100, "{}", out.end_ps);
        assert_ne!(progress.load(Ordering::Relaxed), STOP_REQUEST);
        let r = report::build(&cfg, &out);
        assert!(r.partial);
        assert!(r.accounting.conserved, "{:?}", r.accounting);
        assert!(
            r.verdict.starts_with("partial: stopped at "),
            "{}",
            r.verdict
        );
    }
    // Without a request the same run is not partial.
    let short = pktsched_sim::scenario::parse(
        "link = \"1gbit\"\nalgorithm = \"qfq\"\nduration = \"1ms\"\n[[flows]]\ncount = 8\n",
        "short.toml",
        None,
    )
    .expect("scenario");
    let out = simulate_observed(&short, Options::for_cfg(&short), &AtomicU64::new(0)).expect("run");
    assert!(!out.stopped);
}
