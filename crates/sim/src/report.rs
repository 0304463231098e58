//! The results of a run: per flow, per `[[flows]]` group and overall, with
//! the bound checks, as a table or JSON.

use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::PS_PER_SEC;
use crate::metrics::{self, ABS_TOL_PS, FlowStat};
use crate::model::{FlowSpec, SimConfig, SourceSpec};
use crate::outcome::Outcome;

/// Delay summary, ns.
#[derive(Copy, Clone, Debug, Default, PartialEq, Serialize)]
pub struct Delay {
    /// Smallest.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

/// The delay summary of histogram `h` (ns) whose exact smallest and
/// largest values are `min_ps` and `max_ps`. A percentile is the top of
/// its histogram bucket (2 or 3 significant digits, ns rounded up), which
/// can lie above the largest delay or below the smallest: it is clamped
/// to `[min, max]` so a table never shows a p99 above its max.
fn delay_of(h: &Histogram<u64>, min_ps: u64, max_ps: u64, mean_ns: f64) -> Delay {
    let (min, max) = (min_ps as f64 / 1e3, max_ps as f64 / 1e3);
    // max(min).min(max), not clamp: clamp panics when min > max.
    let percentile = |q: f64| (h.value_at_quantile(q) as f64).max(min).min(max);
    Delay {
        min,
        p50: percentile(0.5),
        p90: percentile(0.9),
        p99: percentile(0.99),
        p999: percentile(0.999),
        max,
        mean: mean_ns,
    }
}

/// One flow.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowReport {
    /// Flow id.
    pub flow: u32,
    /// Group name.
    pub group: String,
    /// Weight.
    pub weight: u32,
    /// φ = w/Σw.
    pub phi: f64,
    /// Share of the bytes delivered by `duration`.
    pub share: f64,
    /// Throughput over `duration`, bit/s.
    pub throughput_bps: f64,
    /// Packets offered by the source.
    pub offered: u64,
    /// Packets accepted by the scheduler.
    pub accepted: u64,
    /// Packets delivered.
    pub delivered: u64,
    /// Refused: queue full.
    pub dropped_queue_full: u64,
    /// Refused: larger than max_len.
    pub dropped_too_large: u64,
    /// Refused: unknown flow.
    pub dropped_unknown_flow: u64,
    /// Delay percentiles (ns); `None` when per-flow histograms are off
    /// (more than `HIST_FLOWS` flows) or nothing was delivered.
    pub delay_ns: Option<Delay>,
    /// Largest delay, ns.
    pub delay_max_ns: f64,
    /// Largest departure − fluid finish, ns.
    pub lag_max_ns: Option<f64>,
    /// Smallest departure − fluid finish, ns (negative: ahead of GPS).
    pub lag_min_ns: Option<f64>,
    /// Measured T-WFI, ns.
    pub twfi_ns: Option<f64>,
    /// T-WFI bound, ns.
    pub twfi_bound_ns: Option<f64>,
    /// Measured B-WFI, bytes.
    pub bwfi_bytes: f64,
    /// B-WFI bound, bytes.
    pub bwfi_bound_bytes: Option<f64>,
}

/// One `[[flows]]` entry: worst and totals over its flows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupReport {
    /// Name.
    pub name: String,
    /// Number of flows.
    pub flows: u32,
    /// Σφ of its flows.
    pub phi: f64,
    /// Σ share of its flows.
    pub share: f64,
    /// Mean throughput per flow, bit/s.
    pub throughput_bps: f64,
    /// Delay percentiles over all its packets (ns), if histograms are on.
    pub delay_ns: Option<Delay>,
    /// Largest delay, ns.
    pub delay_max_ns: f64,
    /// Largest lag, ns.
    pub lag_max_ns: Option<f64>,
    /// Largest T-WFI of its flows and the bound of that flow, ns.
    pub twfi_ns: Option<f64>,
    /// Bound of the worst flow.
    pub twfi_bound_ns: Option<f64>,
    /// Largest B-WFI, bytes.
    pub bwfi_bytes: f64,
    /// Bound of the worst flow.
    pub bwfi_bound_bytes: Option<f64>,
    /// Drops (all reasons).
    pub dropped: u64,
}

/// Every packet, accounted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Accounting {
    /// Packets the sources offered.
    pub offered: u64,
    /// Accepted by the scheduler.
    pub accepted: u64,
    /// Delivered on the link.
    pub delivered: u64,
    /// Refused: queue full.
    pub dropped_queue_full: u64,
    /// Refused: larger than max_len.
    pub dropped_too_large: u64,
    /// Refused: unknown flow.
    pub dropped_unknown_flow: u64,
    /// Still in the scheduler at the end.
    pub queued_end: u64,
    /// On the wire at the end.
    pub on_wire_end: u64,
    /// Not yet finished by the fluid reference at the end.
    pub fluid_pending: u64,
    /// `offered = accepted + dropped`, `accepted = delivered + queued +
    /// on_wire`, and the scheduler's own counters agree.
    pub conserved: bool,
}

/// A whole run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// Scenario name.
    pub scenario: String,
    /// Algorithm.
    pub algorithm: String,
    /// Link rate.
    pub link: String,
    /// Link rate, bit/s.
    pub link_bps: u64,
    /// Duration of the arrivals, ns.
    pub duration_ns: f64,
    /// Seed.
    pub seed: u64,
    /// Time of the last event, ns.
    pub end_ns: f64,
    /// Jain's index of x_i/w_i over the greedy flows (all flows if none).
    pub jain: f64,
    /// Link utilisation over `duration`.
    pub utilisation: f64,
    /// Delay of all packets (ns).
    pub delay_ns: Option<Delay>,
    /// Per `[[flows]]` entry.
    pub groups: Vec<GroupReport>,
    /// Per flow.
    pub flows: Vec<FlowReport>,
    /// Packet accounting.
    pub accounting: Accounting,
    /// Measurements above their bound (empty if all passed).
    pub violations: Vec<String>,
    /// How many measurements were checked against a bound (T-WFI, B-WFI,
    /// `max_delay`, per flow). Zero means nothing was checked: the
    /// algorithm (FIFO, a policy tree) has no published bound and no
    /// `max_delay` was set, so "no violation" says nothing.
    pub checks: u64,
    /// [`Report::verdict_line`], for JSON readers.
    pub verdict: String,
    /// Stopped early by a signal at `end_ns`: the figures cover the run up
    /// to then (the accounting still holds).
    pub partial: bool,
}

impl Report {
    /// The closing line: what was checked and how it went.
    pub fn verdict_line(&self) -> String {
        let line = self.verdict_of_checks();
        if self.partial {
            format!(
                "partial: stopped at {:.3} ms of virtual time; {line}",
                self.end_ns / 1e6
            )
        } else {
            line
        }
    }

    fn verdict_of_checks(&self) -> String {
        if !self.violations.is_empty() {
            return format!("{} measurements above their bounds", self.violations.len());
        }
        if self.checks > 0 {
            return format!("all {} measurements within their bounds", self.checks);
        }
        if self.algorithm.starts_with("policy ") {
            "no published bound for a policy tree: nothing checked (lag and bounds columns are \
             empty)"
                .into()
        } else {
            format!("no bound for {}: nothing checked", self.algorithm)
        }
    }
}

fn opt_ns(ps: i64, valid: bool) -> Option<f64> {
    valid.then_some(ps as f64 / 1e3)
}

/// What every flow's figures are measured against: the link, the weights
/// and the packet sizes of all flows.
struct Totals {
    /// Number of flows.
    n: usize,
    /// Link rate, bit/s.
    bps: u64,
    /// Σ weights.
    wsum: u64,
    /// Smallest weight.
    wmin: u32,
    /// Largest packet of all flows, bytes.
    lmax: u32,
    /// `duration`, s.
    dur_s: f64,
    /// Bytes all flows delivered by `duration`.
    window_total: u64,
}

impl Totals {
    fn of(cfg: &SimConfig, out: &Outcome) -> Totals {
        Totals {
            n: cfg.flows.len(),
            bps: cfg.rate.as_bps(),
            wsum: cfg.flows.iter().map(|f| u64::from(f.weight)).sum(),
            wmin: cfg.flows.iter().map(|f| f.weight).min().unwrap_or(1),
            lmax: cfg.flows.iter().map(|f| f.size.max()).max().unwrap_or(1),
            dur_s: cfg.duration_ps as f64 / PS_PER_SEC as f64,
            window_total: out.flows.iter().map(|f| f.window_bytes).sum(),
        }
    }
}

/// Builds the report of `out`.
pub fn build(cfg: &SimConfig, out: &Outcome) -> Report {
    let totals = Totals::of(cfg, out);
    let mut violations = Vec::new();
    let mut checks = 0u64;
    let flows: Vec<FlowReport> = cfg
        .flows
        .iter()
        .zip(&out.flows)
        .enumerate()
        .map(|(i, (spec, fs))| {
            let b = flow_bounds(cfg, spec, &totals);
            let r = flow_report(cfg, i, spec, fs, b, &totals);
            checks += check_flow(cfg, spec, &r, fs, b, &mut violations);
            r
        })
        .collect();
    let groups = cfg
        .groups
        .iter()
        .map(|g| group_report(g, &flows, &out.flows))
        .collect();
    let accounting = accounting_of(out);
    let delivered = accounting.delivered;
    let mut report = Report {
        scenario: cfg.name.clone(),
        algorithm: cfg.scheduler_name(),
        link: cfg.rate.to_string(),
        link_bps: totals.bps,
        duration_ns: cfg.duration_ps as f64 / 1e3,
        seed: cfg.seed,
        end_ns: out.end_ps as f64 / 1e3,
        jain: jain_of(cfg, &flows),
        utilisation: totals.window_total as f64 * 8.0 / totals.dur_s / totals.bps as f64,
        delay_ns: (delivered > 0 && !out.hist.is_empty())
            .then(|| all_packets_delay(out, delivered)),
        groups,
        flows,
        accounting,
        violations,
        checks,
        verdict: String::new(),
        partial: out.stopped,
    };
    report.verdict = report.verdict_line();
    report
}

/// The published bounds of a flow (none under a policy tree), with the
/// PSPAT composition when the scenario models it.
fn flow_bounds(cfg: &SimConfig, spec: &FlowSpec, t: &Totals) -> metrics::Bounds {
    let mut b = if cfg.policy.is_some() {
        // A policy tree has no published bound.
        metrics::Bounds::default()
    } else {
        metrics::bounds(
            cfg.algorithm,
            spec.weight,
            spec.size.max(),
            t.wsum,
            t.wmin,
            t.lmax,
            t.n,
            t.bps,
        )
    };
    if let Some(p) = cfg.pspat {
        // PSPAT composition (k = 1 dispatcher): T-WFI_SA + Δ_A + (2 + k)·Δ_D.
        b.twfi_ps = b
            .twfi_ps
            .map(|x| x + (p.arbiter_ps + 3 * p.dispatcher_ps) as f64);
        b.bwfi_bytes = None;
    }
    b
}

/// The figures of flow `i`.
fn flow_report(
    cfg: &SimConfig,
    i: usize,
    spec: &FlowSpec,
    fs: &FlowStat,
    b: metrics::Bounds,
    t: &Totals,
) -> FlowReport {
    let group = cfg
        .groups
        .get(spec.group as usize)
        .map_or_else(|| format!("g{}", spec.group), |g| g.name.clone());
    let mean = if fs.delivered.0 > 0 {
        fs.delay_sum as f64 / fs.delivered.0 as f64 / 1e3
    } else {
        0.0
    };
    FlowReport {
        flow: i as u32,
        group,
        weight: spec.weight,
        phi: f64::from(spec.weight) / t.wsum as f64,
        share: if t.window_total > 0 {
            fs.window_bytes as f64 / t.window_total as f64
        } else {
            0.0
        },
        throughput_bps: fs.window_bytes as f64 * 8.0 / t.dur_s,
        offered: fs.offered.0,
        accepted: fs.accepted,
        delivered: fs.delivered.0,
        dropped_queue_full: fs.dropped[0],
        dropped_too_large: fs.dropped[1],
        dropped_unknown_flow: fs.dropped[2],
        delay_ns: fs
            .hist
            .as_ref()
            .filter(|_| fs.delivered.0 > 0)
            .map(|h| delay_of(h, fs.delay_min, fs.delay_max, mean)),
        delay_max_ns: fs.delay_max as f64 / 1e3,
        lag_max_ns: opt_ns(fs.lag_max, fs.lag_n > 0),
        lag_min_ns: opt_ns(fs.lag_min, fs.lag_n > 0),
        twfi_ns: opt_ns(fs.twfi_max, fs.delivered.0 > 0),
        twfi_bound_ns: b.twfi_ps.map(|v| v / 1e3),
        bwfi_bytes: fs.bwfi_scaled as f64 / t.wsum as f64,
        bwfi_bound_bytes: b.bwfi_bytes,
    }
}

/// Checks flow `r` against its bounds `b` and its group's `max_delay`;
/// pushes what is above onto `violations` and returns how many
/// measurements were checked.
fn check_flow(
    cfg: &SimConfig,
    spec: &FlowSpec,
    r: &FlowReport,
    fs: &FlowStat,
    b: metrics::Bounds,
    violations: &mut Vec<String>,
) -> u64 {
    let (i, group) = (r.flow, &r.group);
    let target = cfg
        .groups
        .get(spec.group as usize)
        .and_then(|g| g.max_delay_ps);
    let checks = u64::from(r.twfi_ns.is_some() && b.twfi_ps.is_some())
        + u64::from(b.bwfi_bytes.is_some())
        + u64::from(target.is_some() && fs.delivered.0 > 0);
    if let (Some(m), Some(bound)) = (r.twfi_ns, b.twfi_ps)
        && !metrics::within(m * 1e3, bound, ABS_TOL_PS)
    {
        violations.push(format!(
            "flow {i} ({group}): T-WFI {:.3} us exceeds the {} bound {:.3} us",
            m / 1e3,
            cfg.scheduler_name(),
            bound / 1e6
        ));
    }
    if let Some(bound) = b.bwfi_bytes
        && !metrics::within(r.bwfi_bytes, bound, 1.0)
    {
        violations.push(format!(
            "flow {i} ({group}): B-WFI {:.1} bytes exceeds the {} bound {bound:.1} bytes",
            r.bwfi_bytes,
            cfg.scheduler_name()
        ));
    }
    if let Some(target) = target
        && fs.delivered.0 > 0
        && fs.delay_max > target
    {
        violations.push(format!(
            "flow {i} ({group}): a packet waited {:.3} us, above the scenario's max_delay {:.3} us",
            fs.delay_max as f64 / 1e6,
            target as f64 / 1e6
        ));
    }
    checks
}

/// Jain's index of x_i/w_i over the greedy flows (all flows if none).
fn jain_of(cfg: &SimConfig, flows: &[FlowReport]) -> f64 {
    let greedy: Vec<f64> = cfg
        .flows
        .iter()
        .zip(flows)
        .filter(|(s, _)| matches!(s.source, SourceSpec::Greedy))
        .map(|(s, f)| f.throughput_bps / f64::from(s.weight))
        .collect();
    if greedy.is_empty() {
        metrics::jain(
            &cfg.flows
                .iter()
                .zip(flows)
                .map(|(s, f)| f.throughput_bps / f64::from(s.weight))
                .collect::<Vec<_>>(),
        )
    } else {
        metrics::jain(&greedy)
    }
}

/// Every packet accounted for: the flows' totals, and whether they agree
/// with each other and with the scheduler's own counters.
fn accounting_of(out: &Outcome) -> Accounting {
    let sum = |g: &dyn Fn(&FlowStat) -> u64| out.flows.iter().map(g).sum::<u64>();
    let offered = sum(&|f| f.offered.0);
    let accepted = sum(&|f| f.accepted);
    let delivered = sum(&|f| f.delivered.0);
    let d = [
        sum(&|f| f.dropped[0]),
        sum(&|f| f.dropped[1]),
        sum(&|f| f.dropped[2]),
    ];
    let c = &out.counters;
    let conserved = offered == accepted + d[0] + d[1] + d[2]
        && accepted == delivered + out.queued_end + out.on_wire_end
        && c.enqueued.pkts == accepted.saturating_sub(out.mailbox_end)
        && c.dequeued.pkts == delivered + out.on_wire_end + out.released_end
        && c.backlog.pkts
            == out
                .queued_end
                .saturating_sub(out.mailbox_end + out.released_end)
        && c.conserved();
    Accounting {
        offered,
        accepted,
        delivered,
        dropped_queue_full: d[0],
        dropped_too_large: d[1],
        dropped_unknown_flow: d[2],
        queued_end: out.queued_end,
        on_wire_end: out.on_wire_end,
        fluid_pending: out.fluid_pending,
        conserved,
    }
}

/// The delay of all `delivered` packets.
fn all_packets_delay(out: &Outcome, delivered: u64) -> Delay {
    let max_ps: u64 = out.flows.iter().map(|f| f.delay_max).max().unwrap_or(0);
    let min_ps: u64 = out.flows.iter().map(|f| f.delay_min).min().unwrap_or(0);
    let sum_ps: u128 = out.flows.iter().map(|f| f.delay_sum).sum();
    delay_of(
        &out.hist,
        min_ps,
        max_ps,
        sum_ps as f64 / delivered as f64 / 1e3,
    )
}

fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn group_report(g: &crate::model::Group, flows: &[FlowReport], stats: &[FlowStat]) -> GroupReport {
    let r = g.first as usize..(g.first + g.count) as usize;
    let fl = &flows[r.clone()];
    let group_stats = &stats[r];
    let mut hist: Option<Histogram<u64>> = None;
    let mut have_all = true;
    for s in group_stats {
        match (s.hist.as_deref(), &mut hist) {
            (Some(h), Some(acc)) => {
                let _ = acc.add(h);
            }
            (Some(h), None) => hist = Some(h.clone()),
            (None, _) => have_all = false,
        }
    }
    let delivered: u64 = group_stats.iter().map(|s| s.delivered.0).sum();
    let dsum: u128 = group_stats.iter().map(|s| s.delay_sum).sum();
    let dmin = group_stats.iter().map(|s| s.delay_min).min().unwrap_or(0);
    let dmax = group_stats.iter().map(|s| s.delay_max).max().unwrap_or(0);
    // Worst flow by T-WFI relative to its bound (or absolute if no bound).
    let worst_t = fl.iter().filter(|f| f.twfi_ns.is_some()).max_by(|a, b| {
        let k = |f: &FlowReport| f.twfi_ns.unwrap_or(0.0) / f.twfi_bound_ns.unwrap_or(1.0);
        k(a).total_cmp(&k(b))
    });
    let worst_b = fl
        .iter()
        .max_by(|a, b| a.bwfi_bytes.total_cmp(&b.bwfi_bytes));
    GroupReport {
        name: g.name.clone(),
        flows: g.count,
        phi: fl.iter().map(|f| f.phi).sum(),
        share: fl.iter().map(|f| f.share).sum(),
        throughput_bps: fl.iter().map(|f| f.throughput_bps).sum::<f64>() / fl.len().max(1) as f64,
        delay_ns: hist
            .filter(|h| have_all && delivered > 0 && !h.is_empty())
            .map(|h| delay_of(&h, dmin, dmax, dsum as f64 / delivered as f64 / 1e3)),
        delay_max_ns: dmax as f64 / 1e3,
        lag_max_ns: fl.iter().fold(None, |a, f| max_opt(a, f.lag_max_ns)),
        twfi_ns: worst_t.and_then(|f| f.twfi_ns),
        twfi_bound_ns: worst_t.and_then(|f| f.twfi_bound_ns),
        bwfi_bytes: worst_b.map_or(0.0, |f| f.bwfi_bytes),
        bwfi_bound_bytes: worst_b.and_then(|f| f.bwfi_bound_bytes),
        dropped: fl
            .iter()
            .map(|f| f.dropped_queue_full + f.dropped_too_large + f.dropped_unknown_flow)
            .sum(),
    }
}

fn us(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{:.3}", x / 1e3))
}

fn rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.3}G", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.3}M", bps / 1e6)
    } else {
        format!("{:.3}k", bps / 1e3)
    }
}

impl Report {
    /// The readable summary table (deterministic: used by snapshot tests).
    pub fn table(&self) -> String {
        let mut s = String::new();
        let flows: u32 = self.groups.iter().map(|g| g.flows).sum();
        let _ = writeln!(
            s,
            "scenario {}: {} on {}, {} flows, arrivals for {:.3} ms, seed {}",
            self.scenario,
            self.algorithm,
            self.link,
            flows,
            self.duration_ns / 1e6,
            self.seed
        );
        let _ = writeln!(
            s,
            "{:<12} {:>6} {:>8} {:>8} {:>11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>8} {:>8} {:>6}",
            "group",
            "flows",
            "phi",
            "share",
            "rate/flow",
            "p50 us",
            "p99 us",
            "max us",
            "lag us",
            "T-WFI us",
            "bound us",
            "B-WFI B",
            "bound B",
            "drops",
            "ok"
        );
        for g in &self.groups {
            let has_bound = g.twfi_bound_ns.is_some() || g.bwfi_bound_bytes.is_some();
            let ok_t = match (g.twfi_ns, g.twfi_bound_ns) {
                (Some(m), Some(b)) => metrics::within(m * 1e3, b * 1e3, ABS_TOL_PS),
                _ => true,
            };
            let ok_b = g
                .bwfi_bound_bytes
                .is_none_or(|b| g.bwfi_bytes <= b * (1.0 + metrics::REL_TOL) + 1.0);
            let _ = writeln!(
                s,
                "{:<12} {:>6} {:>8.5} {:>8.5} {:>11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10.1} {:>8} {:>8} {:>6}",
                g.name,
                g.flows,
                g.phi,
                g.share,
                rate(g.throughput_bps),
                us(g.delay_ns.map(|d| d.p50)),
                us(g.delay_ns.map(|d| d.p99)),
                us(Some(g.delay_max_ns)),
                us(g.lag_max_ns),
                us(g.twfi_ns),
                us(g.twfi_bound_ns),
                g.bwfi_bytes,
                g.bwfi_bound_bytes
                    .map_or_else(|| "-".into(), |b| format!("{b:.0}")),
                g.dropped,
                match (has_bound, ok_t && ok_b) {
                    (false, _) => "-",
                    (true, true) => "yes",
                    (true, false) => "NO",
                }
            );
        }
        if let Some(d) = self.delay_ns {
            let _ = writeln!(
                s,
                "all packets: delay min {:.3} p50 {:.3} p90 {:.3} p99 {:.3} p99.9 {:.3} max {:.3} us",
                d.min / 1e3,
                d.p50 / 1e3,
                d.p90 / 1e3,
                d.p99 / 1e3,
                d.p999 / 1e3,
                d.max / 1e3
            );
        }
        let a = &self.accounting;
        let _ = writeln!(
            s,
            "utilisation {:.4}, Jain's index on x/w {:.6}",
            self.utilisation, self.jain
        );
        let _ = writeln!(
            s,
            "packets: offered {} = accepted {} + queue_full {} + too_large {} + unknown_flow {}; accepted = delivered {} + queued {} + on wire {}; fluid pending {}; {}",
            a.offered,
            a.accepted,
            a.dropped_queue_full,
            a.dropped_too_large,
            a.dropped_unknown_flow,
            a.delivered,
            a.queued_end,
            a.on_wire_end,
            a.fluid_pending,
            if a.conserved {
                "conserved"
            } else {
                "NOT CONSERVED"
            }
        );
        for v in &self.violations {
            let _ = writeln!(s, "VIOLATION: {v}");
        }
        let _ = writeln!(s, "{}", self.verdict_line());
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_stay_within_min_and_max() {
        // 2 significant digits: 72 000 ns falls in a bucket whose top is
        // above 72 000, which the table showed as "p99 72.191 max 72.000".
        let mut h = Histogram::<u64>::new(2).unwrap();
        h.record(72_000).unwrap();
        assert!(h.value_at_quantile(0.99) > 72_000, "the bucket is exact");
        let d = delay_of(&h, 72_000_000, 72_000_000, 72_000.0);
        for p in [d.p50, d.p90, d.p99, d.p999] {
            assert_eq!(p, 72_000.0, "{d:?}");
        }
        // Delays are recorded in whole ns rounded up: 1.5 ns counts as 2.
        let mut h = Histogram::<u64>::new(2).unwrap();
        h.record(2).unwrap();
        let d = delay_of(&h, 1_500, 1_600, 1.55);
        assert_eq!((d.p50, d.p999), (1.6, 1.6), "{d:?}");
        // A summary whose min is above its max does not panic.
        let d = delay_of(&h, 3_000, 1_000, 2.0);
        assert!(d.p50.is_finite(), "{d:?}");
    }
}
