//! The PSPAT runtime against the `tc` architecture (one locked scheduler
//! that every client runs itself) and no scheduler at all, side by side
//! (`pktsched bench pspat`).
//!
//! Two phases, each for every number of clients and architecture:
//!
//! * **throughput** — a link far faster than the clients can fill, so the
//!   figure is how many scheduling decisions per second each architecture
//!   makes (PSPAT: the arbiter's; locked: all clients' together);
//! * **overload** — a real link (10 Gbit/s, MTU packets) that the clients
//!   overload, plus one *victim* client with 50× the weight sending at a low
//!   rate: shares of the others vs their weights (Jain's index) and the
//!   victim's latency percentiles against the QFQ delay bound.

use std::io::{self, Write};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use pktsched_core::units::parse_duration;
use pktsched_core::{Algorithm, FlowId, Rate, Scheduler};
use pktsched_runtime::pspat::{ArbiterSched, Config, add_flows, check_arbiter_sched};
use serde::Serialize;

use crate::limits::{self, Range};
use crate::stats::median;

mod arch;
mod breakdown;
mod load;
mod plan;
mod report;
mod targets;
mod threads;

pub use breakdown::{Breakdown, Part};
pub use plan::*;
pub use report::*;
pub use targets::VictimTargets;
pub use threads::{RoleWindow, ThreadsWindow};

/// The victim's latency in one run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Victim {
    samples: u64,
    p50_ns: u64,
    p90_ns: u64,
    p99_ns: u64,
    p999_ns: u64,
    max_ns: u64,
    /// QFQ guarantee for the victim's packet: its own transmission at its
    /// guaranteed rate plus the T-WFI, plus (PSPAT) Δ_A = the read or scan
    /// interval plus two rounds at their 99th percentile (BENCHMARKS.md).
    bound_ns: u64,
    /// Where the latency goes, per part (see `breakdown`).
    breakdown: Option<Breakdown>,
}

/// One run's figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunRes {
    phase: String,
    arch: String,
    clients: usize,
    run: usize,
    /// Packets out of the scheduler (or straight out, `none`) per second.
    decisions_per_s: f64,
    gbit_per_s: f64,
    /// Jain's index of throughput/weight over the non-victim clients.
    jain: f64,
    /// Largest |share/expected − 1| over the non-victim clients.
    max_share_err: f64,
    /// The overload phase's victim; `None` (JSON `null`) there when no
    /// victim packet came out in the measured window (starved).
    victim: Option<Victim>,
    /// Handed to the architecture.
    sent: u64,
    /// Transmitted (whole run).
    delivered: u64,
    /// Dropped by the scheduler (queue full).
    dropped: u64,
    /// Still queued at stop and handed back.
    returned: u64,
    mailbox_full: u64,
    backpressure_events: u64,
    lock_contended: u64,
    arbiter_avg_loop_ns: f64,
    arbiter_max_loop_ns: u64,
    /// 99th percentile of the busy rounds (power-of-two resolution).
    arbiter_p99_loop_ns: u64,
    arbiter_pkts_per_loop: f64,
    arbiter_sleeps: u64,
    /// PSPAT: rounds run by clients because the arbiter was late.
    assisted_rounds: u64,
    /// PSPAT with `--humble on`: humble periods judged by the end of the
    /// window, kept, ms at the lowered priority, and whether it was
    /// lowered at the window's end.
    humble: Option<HumbleRun>,
    /// PSPAT: what the arbiter thread did during the measured window.
    window: Option<ArbiterWindow>,
    /// Every architecture: the threads' time on a core, waiting for one,
    /// and preemptions, during the measured window.
    threads: Option<ThreadsWindow>,
    /// The `tc -s`-style report (PSPAT runs).
    #[serde(skip)]
    tc: Option<String>,
}

/// What `Config::humble` did by the end of a PSPAT run's measured window.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct HumbleRun {
    /// Humble periods judged.
    pub periods: u64,
    /// Of them, kept.
    pub kept: u64,
    /// Time at the lowered priority, ms (periods judged).
    pub humble_ms: f64,
    /// Lowered at the window's end.
    pub lowered: bool,
}

/// What PSPAT's arbiter thread did during a run's measured window, from
/// its counters at both ends: where a decision's wall time goes.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct ArbiterWindow {
    /// Share of the window the thread ran on a core (its CPU time).
    pub cpu_share: f64,
    /// Share of the window spent in rounds that moved packets.
    pub busy_share: f64,
    /// Rounds per second, and of them the share that moved nothing.
    pub rounds_per_s: f64,
    /// See `rounds_per_s`.
    pub empty_share: f64,
    /// Packets released per round that moved packets.
    pub pkts_per_busy_round: f64,
    /// Mailbox reads put off by the read interval, per second.
    pub deferred_reads_per_s: f64,
    /// Yields, spins, sleeps and waits for a client's round, per second.
    pub yields_per_s: f64,
    /// See `yields_per_s`.
    pub spins_per_s: f64,
    /// See `yields_per_s`.
    pub sleeps_per_s: f64,
    /// Of `sleeps_per_s`, naps (sleeps while the link is busy with the
    /// backlog and the mailboxes are empty).
    pub naps_per_s: f64,
    /// Times the nap gate opened in the window (`--nap-when-waiting on`).
    pub nap_gate_opened: u64,
    /// See `yields_per_s`.
    pub held_waits_per_s: f64,
    /// Sends that found their mailbox full, per released packet: above 0
    /// the clients wait for the arbiter; near 0 with many empty rounds the
    /// arbiter waits for the clients.
    pub full_per_decision: f64,
}

impl ArbiterWindow {
    /// From counters `a` (start) and `b` (end) over `secs`, with the
    /// clients' mailbox-full counts at both ends.
    pub(crate) fn between(
        a: &pktsched_runtime::pspat::ArbiterStats,
        b: &pktsched_runtime::pspat::ArbiterStats,
        secs: f64,
        full: (u64, u64),
    ) -> ArbiterWindow {
        let d =
            |f: fn(&pktsched_runtime::pspat::ArbiterStats) -> u64| f(b).saturating_sub(f(a)) as f64;
        let secs = secs.max(1e-9);
        let rounds = d(|s| s.loops);
        let busy = d(|s| s.busy_loops);
        let decisions = d(|s| s.decisions);
        ArbiterWindow {
            cpu_share: d(|s| s.cpu_ns) / 1e9 / secs,
            busy_share: d(|s| s.busy_loop_ns) / 1e9 / secs,
            rounds_per_s: rounds / secs,
            empty_share: (rounds - busy) / rounds.max(1.0),
            pkts_per_busy_round: decisions / busy.max(1.0),
            deferred_reads_per_s: d(|s| s.deferred_reads) / secs,
            yields_per_s: d(|s| s.yields) / secs,
            spins_per_s: d(|s| s.spins) / secs,
            sleeps_per_s: d(|s| s.sleeps) / secs,
            naps_per_s: d(|s| s.naps) / secs,
            nap_gate_opened: b.nap_gate_opened.saturating_sub(a.nap_gate_opened),
            held_waits_per_s: d(|s| s.held_waits) / secs,
            full_per_decision: full.1.saturating_sub(full.0) as f64 / decisions.max(1.0),
        }
    }
}

/// Medians over runs of one (phase, arch, clients).
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    phase: String,
    arch: String,
    clients: usize,
    decisions_per_s: f64,
    jain: f64,
    max_share_err: f64,
    /// Medians over runs of the victim's percentiles, a starved run's
    /// counted as unbounded: `None` (JSON `null`) when at least half the
    /// runs starved it (or outside the overload phase).
    victim_p50_ns: Option<f64>,
    victim_p99_ns: Option<f64>,
    victim_p999_ns: Option<f64>,
    victim_bound_ns: Option<f64>,
    /// Overload: runs whose victim got no packet out in the window.
    victim_starved: Option<u64>,
    /// Medians over runs of each part's p50 and p99.
    victim_breakdown: Option<Breakdown>,
    /// PSPAT, overload: the victim's targets counted run by run.
    victim_targets: Option<VictimTargets>,
    drop_from_peak: Option<f64>,
}

/// Medians over `rs` of each part's percentiles.
fn median_breakdown(rs: &[&RunRes]) -> Option<Breakdown> {
    let bs: Vec<Breakdown> = rs
        .iter()
        .filter_map(|r| r.victim.as_ref().and_then(|v| v.breakdown))
        .collect();
    if bs.is_empty() {
        return None;
    }
    let med = |f: &dyn Fn(&Breakdown) -> u64| {
        median(&bs.iter().map(|b| f(b) as f64).collect::<Vec<_>>()).map_or(0, |m| m as u64)
    };
    let part = |i: usize| Part {
        p50_ns: med(&|b| b.parts()[i].p50_ns),
        p99_ns: med(&|b| b.parts()[i].p99_ns),
    };
    Some(Breakdown {
        client: part(0),
        handover: part(1),
        scheduler: part(2),
        dispatch: part(3),
    })
}

/// The median of `v` with `None` above every value (a starved victim's
/// unbounded latency): `None` when the median falls on one, or when `v`
/// is empty.
fn median_none_last(v: &[Option<f64>]) -> Option<f64> {
    let mut s = v.to_vec();
    // `None` sorts last; values by total order.
    s.sort_by(|a, b| match (a, b) {
        (Some(a), Some(b)) => a.total_cmp(b),
        (a, b) => b.is_some().cmp(&a.is_some()),
    });
    let n = s.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => s[n / 2],
        _ => Some((s[n / 2 - 1]? + s[n / 2]?) / 2.0),
    }
}

fn summarize(runs: &[RunRes]) -> Vec<Summary> {
    let mut keys: Vec<(String, String, usize)> = Vec::new();
    for r in runs {
        let k = (r.phase.clone(), r.arch.clone(), r.clients);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut out: Vec<Summary> = keys
        .into_iter()
        .map(|(phase, arch, clients)| {
            let rs: Vec<&RunRes> = runs
                .iter()
                .filter(|r| r.phase == phase && r.arch == arch && r.clients == clients)
                .collect();
            let m = |f: &dyn Fn(&RunRes) -> f64| {
                median(&rs.iter().map(|r| f(r)).collect::<Vec<_>>()).unwrap_or(f64::NAN)
            };
            let overload = phase == "overload";
            // Starved runs count as unbounded latency.
            let vm = |f: &dyn Fn(&Victim) -> u64| {
                let v: Vec<Option<f64>> = rs
                    .iter()
                    .map(|r| r.victim.as_ref().map(|v| f(v) as f64))
                    .collect();
                median_none_last(&v)
            };
            let bound: Vec<f64> = rs
                .iter()
                .filter_map(|r| r.victim.as_ref().map(|v| v.bound_ns as f64))
                .collect();
            let starved = rs.iter().filter(|r| r.victim.is_none()).count() as u64;
            let victim_targets = (arch == "pspat")
                .then(|| targets::victim_targets(runs, clients))
                .flatten();
            Summary {
                phase,
                arch,
                clients,
                decisions_per_s: m(&|r| r.decisions_per_s),
                jain: m(&|r| r.jain),
                max_share_err: m(&|r| r.max_share_err),
                victim_p50_ns: vm(&|v| v.p50_ns),
                victim_p99_ns: vm(&|v| v.p99_ns),
                victim_p999_ns: vm(&|v| v.p999_ns),
                victim_bound_ns: median(&bound),
                victim_starved: overload.then_some(starved),
                victim_breakdown: median_breakdown(&rs),
                victim_targets,
                drop_from_peak: None,
            }
        })
        .collect();
    // Drop from the peak, per (phase, arch).
    let peaks: Vec<f64> = out
        .iter()
        .map(|s| {
            out.iter()
                .filter(|o| o.phase == s.phase && o.arch == s.arch)
                .map(|o| o.decisions_per_s)
                .fold(0.0, f64::max)
        })
        .collect();
    for (s, peak) in out.iter_mut().zip(peaks) {
        if peak > 0.0 {
            s.drop_from_peak = Some(1.0 - s.decisions_per_s / peak);
        }
    }
    out
}

/// Every run and the medians.
#[derive(Debug, Serialize)]
pub struct PspatReport {
    /// Every run measured.
    pub runs: Vec<RunRes>,
    /// Medians per (phase, arch, clients).
    pub summary: Vec<Summary>,
    /// Stopped early by the stop flag: fewer runs than planned.
    #[serde(skip)]
    pub partial: bool,
}

/// Runs every (run, phase, clients, arch) in that order (architectures
/// interleaved, so drift on a noisy machine hits all); `progress` hears
/// of each run before it starts. `stop` ends the run in progress early
/// (its window cut short) and skips the rest.
pub fn run(p: &Plan, stop: &AtomicBool, mut progress: impl FnMut(&str)) -> Result<PspatReport> {
    let mut runs = Vec::new();
    let mut partial = false;
    'all: for run in 0..p.runs {
        for &ph in &p.phases {
            for &n in &p.clients {
                for &arch in &p.archs {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        partial = true;
                        break 'all;
                    }
                    progress(&format!("{ph:?} {arch:?} {n} clients"));
                    if let Some(r) = arch::run_one(p, ph, arch, n, run, stop)? {
                        runs.push(r);
                    }
                }
            }
        }
    }
    partial |= stop.load(std::sync::atomic::Ordering::Relaxed);
    let summary = summarize(&runs);
    Ok(PspatReport {
        runs,
        summary,
        partial,
    })
}

#[cfg(test)]
mod tests {
    use pktsched_runtime::pspat::ArbiterStats;

    use super::{ArbiterWindow, median_none_last};

    #[test]
    fn a_starved_run_counts_as_unbounded_in_the_medians() {
        assert_eq!(median_none_last(&[]), None);
        assert_eq!(median_none_last(&[Some(3.0), None, Some(1.0)]), Some(3.0));
        assert_eq!(median_none_last(&[None, Some(2.0), None]), None);
        assert_eq!(median_none_last(&[Some(4.0), Some(2.0)]), Some(3.0));
        // The upper middle one starved: no median.
        assert_eq!(median_none_last(&[Some(2.0), None]), None);
        assert_eq!(
            median_none_last(&[None, Some(5.0), Some(1.0), Some(9.0)]),
            Some(7.0)
        );
    }

    #[test]
    fn the_window_is_the_difference_of_the_counters_over_its_length() {
        let a = ArbiterStats {
            loops: 1_000,
            busy_loops: 400,
            decisions: 4_000,
            busy_loop_ns: 1_000_000,
            cpu_ns: 5_000_000,
            yields: 10,
            ..ArbiterStats::default()
        };
        let b = ArbiterStats {
            loops: 3_000,
            busy_loops: 1_400,
            decisions: 54_000,
            busy_loop_ns: 251_000_000,
            cpu_ns: 405_000_000,
            yields: 1_010,
            sleeps: 5,
            ..a
        };
        let w = ArbiterWindow::between(&a, &b, 0.5, (100, 600));
        assert!((w.cpu_share - 0.8).abs() < 1e-9, "{w:?}");
        assert!((w.busy_share - 0.5).abs() < 1e-9, "{w:?}");
        assert!((w.rounds_per_s - 4_000.0).abs() < 1e-9, "{w:?}");
        assert!((w.empty_share - 0.5).abs() < 1e-9, "{w:?}");
        assert!((w.pkts_per_busy_round - 50.0).abs() < 1e-9, "{w:?}");
        assert!((w.yields_per_s - 2_000.0).abs() < 1e-9, "{w:?}");
        assert!((w.sleeps_per_s - 10.0).abs() < 1e-9, "{w:?}");
        assert!((w.full_per_decision - 0.01).abs() < 1e-9, "{w:?}");
        // Counters that went back (a run that restarted) give no negatives.
        let back = ArbiterWindow::between(&b, &a, 0.5, (600, 100));
        assert!(back.rounds_per_s == 0.0 && back.full_per_decision == 0.0);
    }
}
