//! `bench pspat`'s output: the tables (per phase, the targets, the
//! victim's latency by part, the arbiter's and threads' windows) and the
//! plot.

use super::*;

/// The tables: one per phase, a row per number of clients.
pub fn write_tables(out: &mut dyn Write, p: &Plan, sums: &[Summary]) -> io::Result<()> {
    let get = |ph: &str, arch: &str, n: usize| {
        sums.iter()
            .find(|s| s.phase == ph && s.arch == arch && s.clients == n)
    };
    let archs: Vec<&str> = p.archs.iter().map(|a| a.name()).collect();
    let has = |a: &str| archs.contains(&a);
    for ph in &p.phases {
        let phn = ph.name();
        let (len, link) = p.flow_shape(*ph);
        writeln!(
            out,
            "\n{phn}: {} on {link}, {len}-byte packets, batch {}, medians of {} runs of {:?}",
            p.alg.name(),
            p.batch,
            p.runs,
            p.duration
        )?;
        let mut head = format!("{:>7}", "clients");
        for a in &archs {
            head += &format!(" {:>11}", format!("{a} Mpps"));
        }
        if has("pspat") && has("locked") {
            head += &format!(" {:>13}", "pspat/locked");
        }
        for a in archs.iter().filter(|a| **a != "none") {
            head += &format!(" {:>12}", format!("{a} jain"));
        }
        if *ph == Phase::Overload {
            for a in archs.iter().filter(|a| **a != "none") {
                head += &format!(" {:>16}", format!("{a} victim p99"));
            }
            head += &format!(" {:>9}", "bound");
        } else if has("pspat") {
            head += &format!(" {:>10}", "pspat drop");
        }
        writeln!(out, "{head}")?;
        for &n in &p.clients {
            let mut line = format!("{n:>7}");
            for a in &archs {
                let v = get(phn, a, n).map_or(f64::NAN, |s| s.decisions_per_s / 1e6);
                line += &format!(" {v:>11.2}");
            }
            if has("pspat") && has("locked") {
                let r = match (get(phn, "pspat", n), get(phn, "locked", n)) {
                    (Some(a), Some(b)) => a.decisions_per_s / b.decisions_per_s,
                    _ => f64::NAN,
                };
                line += &format!(" {r:>12.2}×");
            }
            for a in archs.iter().filter(|a| **a != "none") {
                let v = get(phn, a, n).map_or(f64::NAN, |s| s.jain);
                line += &format!(" {v:>12.4}");
            }
            if *ph == Phase::Overload {
                let mut bound = f64::NAN;
                for a in archs.iter().filter(|a| **a != "none") {
                    let s = get(phn, a, n);
                    if *a == "pspat" {
                        bound = s.and_then(|s| s.victim_bound_ns).unwrap_or(f64::NAN);
                    }
                    line += &format!(" {:>16}", victim_p99_cell(s));
                }
                line += &format!(" {:>6.1} µs", bound / 1e3);
            } else if has("pspat") {
                let d = get(phn, "pspat", n)
                    .and_then(|s| s.drop_from_peak)
                    .unwrap_or(f64::NAN);
                line += &format!(" {:>9.1}%", d * 100.0);
            }
            writeln!(out, "{line}")?;
        }
        if *ph == Phase::Overload {
            let starved = sums
                .iter()
                .any(|s| s.phase == phn && s.victim_starved.unwrap_or(0) > 0);
            if starved {
                writeln!(
                    out,
                    "victim p99: a run that got no victim packet out (starved) counts as unbounded; `starved` = the median is, `*` = some runs were"
                )?;
            }
            write_targets(out, p, sums)?;
            write_breakdown(out, p, sums)?;
        }
    }
    Ok(())
}

/// A victim p99 median for the overload table: µs, `starved` when at
/// least half the runs got no victim packet out (the median is then
/// unbounded), with `*` when some (fewer) did.
fn victim_p99_cell(s: Option<&Summary>) -> String {
    let Some(s) = s else {
        return "NaN µs".into();
    };
    let starved = s.victim_starved.unwrap_or(0);
    match s.victim_p99_ns {
        None if starved > 0 => "starved".into(),
        None => "NaN µs".into(),
        Some(v) if starved > 0 => format!("{:.1} µs*", v / 1e3),
        Some(v) => format!("{:.1} µs", v / 1e3),
    }
}

/// The victim's targets run by run: PSPAT's p99 within its bound, and at
/// most the locked baseline's in the run measured next to it.
pub(super) fn write_targets(out: &mut dyn Write, p: &Plan, sums: &[Summary]) -> io::Result<()> {
    let counts: Vec<(usize, VictimTargets)> = p
        .clients
        .iter()
        .filter_map(|&n| {
            sums.iter()
                .find(|s| s.phase == "overload" && s.arch == "pspat" && s.clients == n)
                .and_then(|s| s.victim_targets)
                .map(|t| (n, t))
        })
        .collect();
    if counts.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\npspat victim p99, run by run (against the locked run of the same index, measured next to it):"
    )?;
    for (n, t) in counts {
        let mut line = format!(
            "{n:>7} clients: within the bound in {} of {} runs",
            t.in_bound, t.runs
        );
        if t.paired > 0 {
            line += &format!(", at most locked's in {} of {}", t.le_locked, t.paired);
        }
        if t.starved > 0 {
            line += &format!(
                "; starved (no victim packet out, a failure) in {} of {}",
                t.starved, t.runs
            );
        }
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// The victim's latency by part: p50 / p99 of each, µs (medians over runs).
pub(super) fn write_breakdown(out: &mut dyn Write, p: &Plan, sums: &[Summary]) -> io::Result<()> {
    writeln!(
        out,
        "\nvictim latency by part, p50 / p99 µs (client: made → send; handover: mailbox until read, or the lock; scheduler: until the link takes it; dispatch: released → output)"
    )?;
    let mut head = format!("{:>7} {:>7}", "clients", "arch");
    for name in breakdown::PARTS {
        head += &format!(" {name:>17}");
    }
    writeln!(out, "{head}")?;
    for &n in &p.clients {
        for a in p.archs.iter().filter(|a| **a != Arch::None) {
            let Some(b) = sums
                .iter()
                .find(|s| s.phase == "overload" && s.arch == a.name() && s.clients == n)
                .and_then(|s| s.victim_breakdown)
            else {
                continue;
            };
            let mut line = format!("{n:>7} {:>7}", a.name());
            for part in b.parts() {
                let cell = format!(
                    "{:.1} / {:.1}",
                    part.p50_ns as f64 / 1e3,
                    part.p99_ns as f64 / 1e3
                );
                line += &format!(" {cell:>17}");
            }
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// Every PSPAT run's `tc -s`-style counters, then what the arbiter
/// thread did in each run's measured window, and where every run's
/// threads spent it.
pub fn write_stats(out: &mut dyn Write, runs: &[RunRes]) -> io::Result<()> {
    write_windows(out, runs)?;
    write_threads(out, runs)?;
    for r in runs {
        if let Some(t) = &r.tc {
            writeln!(
                out,
                "\n{} phase, {} clients, run {}:\n{t}",
                r.phase, r.clients, r.run
            )?;
            if let Some(h) = &r.humble {
                writeln!(
                    out,
                    " humble: {} periods ({} kept, {:.1} ms), lowered at the window's end: {}",
                    h.periods,
                    h.kept,
                    h.humble_ms,
                    if h.lowered { "yes" } else { "no" }
                )?;
            }
        }
    }
    Ok(())
}

/// One row per PSPAT run: the arbiter thread's time in the window.
pub(super) fn write_windows(out: &mut dyn Write, runs: &[RunRes]) -> io::Result<()> {
    if runs.iter().all(|r| r.window.is_none()) {
        return Ok(()); // no PSPAT run: no table
    }
    writeln!(
        out,
        "\npspat arbiter in the measured window: cpu = share of wall time on a core, busy = in rounds that moved packets, empty = rounds that moved nothing; per second: rounds, yields, spins, sleeps (of them naps), reads put off; gate = times the nap gate opened; full = mailbox-full sends per decision"
    )?;
    writeln!(
        out,
        "{:>10} {:>7} {:>3} {:>5} {:>5} {:>6} {:>7} {:>8} {:>8} {:>8} {:>7} {:>7} {:>8} {:>5} {:>6}",
        "phase",
        "clients",
        "run",
        "cpu",
        "busy",
        "empty",
        "pkts/r",
        "rounds/s",
        "yields/s",
        "spins/s",
        "sleep/s",
        "naps/s",
        "putoff/s",
        "gate",
        "full"
    )?;
    for r in runs {
        let Some(w) = &r.window else { continue };
        let k = |x: f64| format!("{:.0}k", x / 1e3);
        writeln!(
            out,
            "{:>10} {:>7} {:>3} {:>5.2} {:>5.2} {:>6.2} {:>7.1} {:>8} {:>8} {:>8} {:>7.0} {:>7.0} {:>8} {:>5} {:>6.3}",
            r.phase,
            r.clients,
            r.run,
            w.cpu_share,
            w.busy_share,
            w.empty_share,
            w.pkts_per_busy_round,
            k(w.rounds_per_s),
            k(w.yields_per_s),
            k(w.spins_per_s),
            w.sleeps_per_s,
            w.naps_per_s,
            k(w.deferred_reads_per_s),
            w.nap_gate_opened,
            w.full_per_decision
        )?;
    }
    Ok(())
}

/// One row per run: its threads' time on a core and waiting for one
/// (shares of the window, summed over a role's threads) and preemptions.
pub(super) fn write_threads(out: &mut dyn Write, runs: &[RunRes]) -> io::Result<()> {
    if runs.iter().all(|r| r.threads.is_none()) {
        return Ok(());
    }
    writeln!(
        out,
        "\nthreads in the measured window (kernel schedstat): on = share of wall time on a core, wait = runnable but waiting for one, pre/s = involuntary switches per second; clients summed; @ = the cores the role's threads last ran on at the window's end"
    )?;
    writeln!(
        out,
        "{:>10} {:>7} {:>7} {:>3} {:>28} {:>28} {:>28}",
        "phase",
        "arch",
        "clients",
        "run",
        "arbiter on/wait/pre/s",
        "clients on/wait/pre/s",
        "victim on/wait/pre/s"
    )?;
    let cell = |r: &RoleWindow| {
        let cores: Vec<String> = (0..64)
            .filter(|n| r.cores >> n & 1 == 1)
            .map(|n| n.to_string())
            .collect();
        format!(
            "{:.2}/{:.2}/{:.0} @{}",
            r.cpu,
            r.wait,
            r.preempted_per_s,
            cores.join(",")
        )
    };
    for r in runs {
        let Some(t) = &r.threads else { continue };
        writeln!(
            out,
            "{:>10} {:>7} {:>7} {:>3} {:>28} {:>28} {:>28}",
            r.phase,
            r.arch,
            r.clients,
            r.run,
            cell(&t.arbiter),
            cell(&t.clients),
            cell(&t.victim)
        )?;
    }
    Ok(())
}

/// Whether the plan has the throughput phase (the plot's data).
pub fn has_throughput(p: &Plan) -> bool {
    p.phases.contains(&Phase::Throughput)
}

/// The throughput-vs-clients plot.
pub fn plot(file: &std::path::Path, p: &Plan, sums: &[Summary]) -> Result<()> {
    let pts = |arch: &str| -> Vec<(f64, f64)> {
        p.clients
            .iter()
            .filter_map(|&n| {
                sums.iter()
                    .find(|s| s.phase == "throughput" && s.arch == arch && s.clients == n)
                    .map(|s| (n as f64, s.decisions_per_s / 1e6))
            })
            .collect()
    };
    crate::svg::Chart {
        title: format!(
            "{} decisions/s vs clients ({}-byte packets, batch {})",
            p.alg.name(),
            p.len,
            p.batch
        ),
        x_desc: "clients",
        y_desc: "million packets/s",
        log_x: true,
        series: p
            .archs
            .iter()
            .map(|a| (a.name().to_string(), pts(a.name())))
            .collect(),
    }
    .draw(file)
}

#[cfg(test)]
mod tests {
    use super::{Summary, victim_p99_cell};

    fn summary(p99: Option<f64>, starved: Option<u64>) -> Summary {
        Summary {
            phase: "overload".into(),
            arch: "pspat".into(),
            clients: 8,
            decisions_per_s: 1.0,
            jain: 1.0,
            max_share_err: 0.0,
            victim_p50_ns: p99,
            victim_p99_ns: p99,
            victim_p999_ns: p99,
            victim_bound_ns: Some(1e4),
            victim_starved: starved,
            victim_breakdown: None,
            victim_targets: None,
            drop_from_peak: None,
        }
    }

    #[test]
    fn a_starved_victim_shows_as_starved_not_as_zero() {
        assert_eq!(
            victim_p99_cell(Some(&summary(Some(2500.0), Some(0)))),
            "2.5 µs"
        );
        assert_eq!(
            victim_p99_cell(Some(&summary(Some(2500.0), Some(1)))),
            "2.5 µs*"
        );
        assert_eq!(victim_p99_cell(Some(&summary(None, Some(3)))), "starved");
        assert_eq!(victim_p99_cell(None), "NaN µs");
        // JSON: null, not 0.
        let json = serde_json::to_value(summary(None, Some(3))).unwrap();
        assert!(json["victim_p99_ns"].is_null(), "{json}");
        assert_eq!(json["victim_starved"], 3);
    }
}
