//! `pktsched demo` as root: the shaper on real frames between namespaces
//! (`pktsched_run::demo`), shown live.

use std::io::Write;

use anyhow::{Result, anyhow};
use pktsched_run::demo::{DEMO_FLOWS, expected_shares, live};
use pktsched_run::stats::Snapshot;

fn line(s: &Snapshot) -> String {
    let parts: Vec<String> = s
        .classes
        .iter()
        .map(|c| format!("{} {:6.2}", c.class, c.rate_bps as f64 / 1e6))
        .collect();
    format!("t={:4.1}s  Mbit/s: {}", s.uptime_s, parts.join("  "))
}

/// Whether `e` says the demo's namespaces could not be built (a missing
/// tool), as opposed to a failure while it ran.
pub(crate) fn could_not_build(e: &anyhow::Error) -> bool {
    e.to_string().contains("topology:")
}

/// Seconds of traffic unless `--seconds` says (clap keeps that to 1..=3600).
pub(crate) const DEFAULT_SECONDS: u64 = 6;

pub(crate) fn run(seconds: u64, json: bool, out: &mut crate::output::Stdout) -> Result<()> {
    let stop = crate::stop::stop_flag()?;
    eprintln!(
        "demo: 3 namespaces, gen → pktsched run (QFQ, 100 Mbit/s, weights voice 10, video 6, \
         web 3, bulk 1) → sink; traffic: {}",
        DEMO_FLOWS.join(" | ")
    );
    let report = live(seconds, stop, &|s| {
        eprintln!("{}", line(s));
    })
    .map_err(|e| anyhow!("live demo: {e}"))?;
    let last = report.samples.last();
    if json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "last_second": last,
                "sink": report.sink,
            }))?
        )?;
        return crate::stop::interrupted(true);
    }
    writeln!(
        out,
        "\n{:<8} {:>16} {:>16}",
        "class", "last second", "expected (wire)"
    )?;
    for (name, want) in expected_shares().map_err(|e| anyhow!("the demo's shares: {e}"))? {
        let got = last
            .and_then(|s| s.classes.iter().find(|c| c.class == name))
            .map_or(0.0, |c| c.rate_bps as f64 / 1e6);
        writeln!(out, "{name:<8} {got:>11.2} Mbit {want:>11.2} Mbit")?;
    }
    if let Some(v) = report.sink.flows.iter().find(|f| f.port == 5000) {
        writeln!(
            out,
            "voice latency through the shaper: p50 {:.0} us, p99 {:.0} us, max {:.0} us, lost {}",
            v.latency_p50_us, v.latency_p99_us, v.latency_max_us, v.lost
        )?;
    }
    writeln!(out, "(namespaces removed)")?;
    crate::stop::mark_partial(out, pktsched_runtime::signal::received().is_some())?;
    crate::stop::interrupted(true)
}
