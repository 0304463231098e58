//! The performance targets from the ingress points, per strategy,
//! as a Markdown table:
//!
//! - **maximum loss-free throughput**: the highest load of the load sweep
//!   whose total loss (RT and BE together) is at most [`LOSS_FREE`] (as
//!   RFC 2544's throughput: a lossy point below it, one run on a noisy
//!   machine, does not lower it); also the load where a straight line
//!   between that point and the next, lossy one crosses [`LOSS_FREE`]
//!   (linear in loss between two measured points, nothing more); each as
//!   a ratio to SQ's (target: ≥ 0.95, judged on the interpolated loads
//!   when both have one, else on the points);
//! - **overload**: the load-sweep point at [`OVERLOAD`] × capacity with
//!   [`OVERLOAD_RT_SHARE`] RT (else the share-sweep point with that share,
//!   which runs at overload): RT p99 and RT loss, each over SQ's (targets:
//!   LL-WFQ ≤ 1/3 and ≤ 1/10; no loss ratio when SQ lost no RT packet);
//! - **the bound**: of the points with ρ_RT ≤ [`BOUND_RHO`] and a bound,
//!   how many have their measured RT p99 within it.
//!
//! The RT p99 judged ([`judged_p99`]) is the router's (kernel receive →
//! transmit) when every point has it, else the sink's (one-way); the
//! table and the lines say which, and the sink's overload RT p99 is
//! shown next to it either way.

use std::fmt::Write as _;

use super::point::{Row, loss};

/// Total loss at or below which a point counts as loss-free.
pub const LOSS_FREE: f64 = 0.001;
/// The overload point's load, a multiple of the measured capacity.
pub const OVERLOAD: f64 = 1.5;
/// The overload point's RT share.
pub const OVERLOAD_RT_SHARE: f64 = 0.3;
/// The bound is checked on points with ρ_RT at most this.
pub const BOUND_RHO: f64 = 0.5;
/// Loss-free throughput at least this fraction of SQ's.
const THROUGHPUT_TARGET: f64 = 0.95;
/// LL-WFQ's overload RT p99 at most this fraction of SQ's.
const P99_TARGET: f64 = 1.0 / 3.0;
/// LL-WFQ's overload RT loss at most this fraction of SQ's.
const LOSS_TARGET: f64 = 0.1;

/// One strategy's figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Targets {
    pub strategy: String,
    /// Offered packets/s of the last loss-free load point.
    pub loss_free_pps: Option<f64>,
    /// Where the loss crosses [`LOSS_FREE`], interpolated.
    pub interpolated_pps: Option<f64>,
    /// The judged RT p99 at overload ([`judged_p99`]).
    pub overload_rt_p99_us: Option<f64>,
    /// The sink's RT p99 at overload.
    pub overload_sink_rt_p99_us: Option<f64>,
    pub overload_rt_loss: Option<f64>,
    /// Points with ρ_RT ≤ [`BOUND_RHO`] and a bound: (within, all).
    pub bound_within: (usize, usize),
}

/// What the targets call a point's RT p99: the router's (kernel receive
/// → transmit) if every point has it, else the sink's; with its label.
pub fn judged_p99(rows: &[Row]) -> (fn(&Row) -> f64, &'static str) {
    if !rows.is_empty() && rows.iter().all(|r| r.router_rt_p99_us.is_some()) {
        (
            |r| r.router_rt_p99_us.unwrap_or(f64::NAN),
            "the router's (kernel receive -> transmit)",
        )
    } else {
        (
            |r| r.rt_p99_us,
            "the sink's (one-way, generator -> sink; no router figure for every point)",
        )
    }
}

/// RT and BE loss together.
pub fn total_loss(r: &Row) -> f64 {
    let sent = r.rt_sent + r.be_sent;
    loss(sent, r.rt_received + r.be_received)
}

fn near(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

/// Where the straight line through `(load, loss)` points `below` and
/// `above` reaches the loss `level`: linear between two measured points,
/// nothing more (outside them when `level` is not between their losses;
/// not finite when their losses are equal).
pub fn crossing(below: (f64, f64), above: (f64, f64), level: f64) -> f64 {
    let ((x1, l1), (x2, l2)) = (below, above);
    let t = (level - l1) / (l2 - l1);
    x1 + t * (x2 - x1)
}

/// The loss-free point (the highest load with total loss at most
/// [`LOSS_FREE`]) and the interpolated [`crossing`] to the next, lossy
/// point, of `rows` (one strategy's load sweep, ascending).
pub fn loss_free(rows: &[&Row]) -> (Option<f64>, Option<f64>) {
    let Some(i) = rows.iter().rposition(|r| total_loss(r) <= LOSS_FREE) else {
        return (None, None);
    };
    let last_free = rows[i];
    let Some(&lossy) = rows.get(i + 1) else {
        return (Some(last_free.load_pps), None);
    };
    let pps = crossing(
        (last_free.load_pps, total_loss(last_free)),
        (lossy.load_pps, total_loss(lossy)),
        LOSS_FREE,
    );
    (Some(last_free.load_pps), Some(pps))
}

/// The overload point of one strategy's rows.
fn overload<'a>(rows: &[&'a Row]) -> Option<&'a Row> {
    let share_ok = |r: &Row| near(r.rt_share, OVERLOAD_RT_SHARE);
    rows.iter()
        .find(|r| {
            r.sweep == "load" && share_ok(r) && r.load_factor.is_some_and(|f| near(f, OVERLOAD))
        })
        .or_else(|| rows.iter().find(|r| r.sweep == "share" && share_ok(r)))
        .copied()
}

/// Each strategy's figures, strategies in name order.
pub fn targets(rows: &[Row]) -> Vec<Targets> {
    let (p99, _) = judged_p99(rows);
    let mut names: Vec<&str> = rows.iter().map(|r| r.strategy.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|st| {
            let mine: Vec<&Row> = rows.iter().filter(|r| r.strategy == st).collect();
            let mut sweep: Vec<&Row> = mine.iter().copied().filter(|r| r.sweep == "load").collect();
            sweep.sort_by(|a, b| a.load_pps.total_cmp(&b.load_pps));
            let (loss_free_pps, interpolated_pps) = loss_free(&sweep);
            let over = overload(&mine);
            let checked: Vec<bool> = mine
                .iter()
                .filter(|r| r.rho_rt.is_some_and(|rho| rho <= BOUND_RHO))
                .filter_map(|r| r.bound_us.map(|b| p99(r) <= b))
                .collect();
            Targets {
                strategy: st.to_string(),
                loss_free_pps,
                interpolated_pps,
                overload_rt_p99_us: over.map(p99),
                overload_sink_rt_p99_us: over.map(|r| r.rt_p99_us),
                overload_rt_loss: over.map(|r| r.rt_loss),
                bound_within: (checked.iter().filter(|ok| **ok).count(), checked.len()),
            }
        })
        .collect()
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn cell(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "—".to_string(), |v| format!("{v:.prec$}"))
}

fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "missed" }
}

/// The table and one line per target.
pub fn markdown(rows: &[Row]) -> String {
    let all = targets(rows);
    let (_, source) = judged_p99(rows);
    let sq = all.iter().find(|t| t.strategy == "sq");
    let mut s = format!(
        "RT p99 below: {source}.\n\n\
         | strategy | max loss-free load, pps (total loss ≤ {:.1} %) | interpolated, pps | ÷ SQ (point / interp.) \
         | overload RT p99, µs | ÷ SQ | sink's overload RT p99, µs | ÷ SQ | overload RT loss, % | ÷ SQ | RT p99 ≤ bound (ρ_RT ≤ {BOUND_RHO}) |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        LOSS_FREE * 100.0
    );
    for t in &all {
        let p = ratio(t.loss_free_pps, sq.and_then(|q| q.loss_free_pps));
        let i = ratio(t.interpolated_pps, sq.and_then(|q| q.interpolated_pps));
        let loss_ratio = match (t.overload_rt_loss, sq.and_then(|q| q.overload_rt_loss)) {
            (Some(_), Some(q)) if q <= 0.0 => "SQ lost 0".to_string(),
            (a, b) => cell(ratio(a, b), 3),
        };
        let (within, n) = t.bound_within;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} / {} | {} | {} | {} | {} | {} | {} | {} |",
            t.strategy,
            cell(t.loss_free_pps, 0),
            cell(t.interpolated_pps, 0),
            cell(p, 3),
            cell(i, 3),
            cell(t.overload_rt_p99_us, 1),
            cell(
                ratio(t.overload_rt_p99_us, sq.and_then(|q| q.overload_rt_p99_us)),
                3
            ),
            cell(t.overload_sink_rt_p99_us, 1),
            cell(
                ratio(
                    t.overload_sink_rt_p99_us,
                    sq.and_then(|q| q.overload_sink_rt_p99_us)
                ),
                3
            ),
            cell(t.overload_rt_loss.map(|l| l * 100.0), 3),
            loss_ratio,
            if n == 0 {
                "no bound".to_string()
            } else {
                format!("{within} of {n}")
            },
        );
    }
    s.push('\n');
    verdicts(&mut s, &all, sq, source);
    s
}

/// One line per target: the figure, met or missed, or why there is none.
fn verdicts(s: &mut String, all: &[Targets], sq: Option<&Targets>, source: &str) {
    let Some(sq) = sq else {
        s.push_str("No SQ points: no ratios to SQ.\n");
        return;
    };
    for t in all.iter().filter(|t| t.strategy != "sq") {
        let (r, how) = match ratio(t.interpolated_pps, sq.interpolated_pps) {
            Some(r) => (Some(r), "interpolated"),
            None => (ratio(t.loss_free_pps, sq.loss_free_pps), "load points"),
        };
        let _ = match r {
            Some(r) => writeln!(
                s,
                "- {} loss-free throughput ÷ SQ's = {r:.3} ({how}; target ≥ {THROUGHPUT_TARGET}): {}",
                t.strategy,
                met(r >= THROUGHPUT_TARGET)
            ),
            None => writeln!(
                s,
                "- {} loss-free throughput: no loss-free point to compare",
                t.strategy
            ),
        };
    }
    let Some(wfq) = all.iter().find(|t| t.strategy == "ll-wfq") else {
        s.push_str("No LL-WFQ points: no overload targets.\n");
        return;
    };
    let _ = match ratio(wfq.overload_rt_p99_us, sq.overload_rt_p99_us) {
        Some(r) => writeln!(
            s,
            "- LL-WFQ overload RT p99 ÷ SQ's = {r:.3} (target ≤ 1/3; {source}): {}",
            met(r <= P99_TARGET)
        ),
        None => writeln!(
            s,
            "- LL-WFQ overload RT p99: no overload point ({OVERLOAD} × capacity, {OVERLOAD_RT_SHARE} RT) for both"
        ),
    };
    let _ = match (wfq.overload_rt_loss, sq.overload_rt_loss) {
        (Some(w), Some(q)) if q <= 0.0 => writeln!(
            s,
            "- LL-WFQ overload RT loss: SQ lost 0 RT packets, no ratio (LL-WFQ lost {:.3} %)",
            w * 100.0
        ),
        (Some(w), Some(q)) => writeln!(
            s,
            "- LL-WFQ overload RT loss ÷ SQ's = {:.3} (target ≤ 1/10): {}",
            w / q,
            met(w / q <= LOSS_TARGET)
        ),
        _ => writeln!(s, "- LL-WFQ overload RT loss: no overload point for both"),
    };
    if let Some(r) = ratio(wfq.overload_sink_rt_p99_us, sq.overload_sink_rt_p99_us) {
        let _ = writeln!(
            s,
            "- for reference, the sink's (one-way) LL-WFQ overload RT p99 ÷ SQ's = {r:.3}"
        );
    }
    let (within, n) = wfq.bound_within;
    let _ = writeln!(
        s,
        "- LL-WFQ RT p99 ({source}) within the bound at ρ_RT ≤ {BOUND_RHO}: {within} of {n} points{}",
        if n == 0 {
            ""
        } else if within == n {
            ": met"
        } else {
            ": missed"
        }
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A point: load sweep unless `share` names the share sweep; `lost`
    /// of 1000 sent per class; RT p99 and its bound.
    fn row(st: &str, load: f64, lost: (u64, u64), p99: f64, bound: Option<f64>) -> Row {
        Row {
            strategy: st.into(),
            sweep: "load".into(),
            load_pps: load,
            load_factor: Some(load / 100_000.0),
            rt_share: 0.3,
            rt_sent: 1000,
            be_sent: 1000,
            rt_received: 1000 - lost.0,
            be_received: 1000 - lost.1,
            rt_loss: lost.0 as f64 / 1000.0,
            be_loss: lost.1 as f64 / 1000.0,
            rt_p99_us: p99,
            rho_rt: Some(load * 0.3 * 10e-6),
            bound_us: bound,
            ..Row::default()
        }
    }

    fn rows() -> Vec<Row> {
        vec![
            row("sq", 90_000.0, (0, 1), 100.0, None),
            // 2 of 2000 = 0.1 %: still loss-free (≤).
            row("sq", 100_000.0, (1, 1), 200.0, None),
            row("sq", 110_000.0, (11, 11), 900.0, None),
            row("sq", 150_000.0, (300, 300), 3000.0, None),
            row("ll-wfq", 90_000.0, (0, 0), 50.0, Some(60.0)),
            row("ll-wfq", 100_000.0, (0, 4), 55.0, Some(50.0)),
            row("ll-wfq", 110_000.0, (0, 20), 58.0, Some(70.0)),
            row("ll-wfq", 150_000.0, (3, 600), 600.0, Some(80.0)),
        ]
    }

    #[test]
    fn loss_free_throughput_is_the_highest_point_within_the_threshold() {
        let t = targets(&rows());
        assert_eq!(t[0].strategy, "ll-wfq");
        // 90 kpps loss-free, 100 kpps 0.2 %: crossing at 0.001/0.002 of the way.
        assert_eq!(t[0].loss_free_pps, Some(90_000.0));
        let i = t[0].interpolated_pps.expect("interpolated");
        assert!((i - 95_000.0).abs() < 1e-6, "{i}");
        assert_eq!(t[1].loss_free_pps, Some(100_000.0));
        // 100 kpps 0.1 %, 110 kpps 1.1 %: at 0.1 %, exactly 100 kpps.
        let i = t[1].interpolated_pps.expect("interpolated");
        assert!((i - 100_000.0).abs() < 1e-6, "{i}");
    }

    /// One lossy point below loss-free ones (a blip of one run) does not
    /// lower the loss-free throughput.
    #[test]
    fn a_lossy_point_below_a_loss_free_one_is_passed_over() {
        let blip = vec![
            row("sq", 10.0, (0, 0), 1.0, None),
            row("sq", 20.0, (3, 3), 1.0, None),
            row("sq", 30.0, (0, 0), 1.0, None),
            row("sq", 40.0, (0, 200), 1.0, None),
        ];
        let t = targets(&blip);
        assert_eq!(t[0].loss_free_pps, Some(30.0));
        let i = t[0].interpolated_pps.expect("interpolated");
        assert!(i > 30.0 && i < 40.0, "{i}");
    }

    #[test]
    fn overload_and_bound_figures() {
        let t = targets(&rows());
        assert_eq!(t[0].overload_rt_p99_us, Some(600.0));
        assert_eq!(t[0].overload_rt_loss, Some(0.003));
        assert_eq!(t[1].overload_rt_loss, Some(0.3));
        // ρ = load × 0.3 × 10 µs: 0.27, 0.3, 0.33 checked (≤ 0.5), 0.45 too;
        // within: 50 ≤ 60 and 58 ≤ 70; 55 > 50 and 600 > 80.
        assert_eq!(t[0].bound_within, (2, 4));
        assert_eq!(t[1].bound_within, (0, 0));
        let md = markdown(&rows());
        assert!(md.contains("| ll-wfq | 90000 | 95000 | 0.900 / 0.950 | 600.0 | 0.200 | 600.0 | 0.200 | 0.300 | 0.010 | 2 of 4 |"), "{md}");
        assert!(md.starts_with("RT p99 below: the sink's"), "{md}");
        assert!(
            md.contains("throughput ÷ SQ's = 0.950 (interpolated; target ≥ 0.95): met"),
            "{md}"
        );
        assert!(
            md.contains("RT p99 ÷ SQ's = 0.200 (target ≤ 1/3; the sink's (one-way")
                && md.contains("no router figure for every point)): met"),
            "{md}"
        );
        assert!(
            md.contains("RT loss ÷ SQ's = 0.010 (target ≤ 1/10): met"),
            "{md}"
        );
        assert!(md.contains("2 of 4 points: missed"), "{md}");
    }

    #[test]
    fn no_sq_loss_no_lossy_point_and_a_lossy_start_are_said() {
        let mut r = rows();
        r.retain(|r| r.load_pps < 150_000.0 || r.strategy == "ll-wfq");
        // SQ's overload from the share sweep, without RT loss.
        let mut share = row("sq", 150_000.0, (0, 500), 4000.0, None);
        share.sweep = "share".into();
        share.load_factor = None;
        r.push(share);
        let md = markdown(&r);
        assert!(
            md.contains("SQ lost 0 RT packets, no ratio (LL-WFQ lost 0.300 %)"),
            "{md}"
        );
        assert!(md.contains("RT p99 ÷ SQ's = 0.150"), "{md}");
        // Never lossy: the highest point, no crossing.
        let never = vec![
            row("sq", 1.0, (0, 0), 1.0, None),
            row("sq", 2.0, (0, 0), 1.0, None),
        ];
        assert_eq!(targets(&never)[0].loss_free_pps, Some(2.0));
        assert_eq!(targets(&never)[0].interpolated_pps, None);
        // Lossy from the first point: none.
        let lossy = vec![row("ll-rr", 1.0, (5, 0), 1.0, None)];
        assert_eq!(targets(&lossy)[0].loss_free_pps, None);
        assert!(markdown(&lossy).contains("No SQ points"));
    }

    /// With the router's figure on every point, the targets judge it (a
    /// tenth of the sink's here): all four bound points within, and the
    /// sink's overload RT p99 still shown; one point without it and the
    /// sink's is judged again.
    #[test]
    fn the_routers_rt_p99_is_judged_when_every_point_has_it() {
        let mut r = rows();
        for row in &mut r {
            row.router_rt_p99_us = Some(row.rt_p99_us / 10.0);
        }
        let t = targets(&r);
        assert_eq!(t[0].overload_rt_p99_us, Some(60.0));
        assert_eq!(t[0].overload_sink_rt_p99_us, Some(600.0));
        assert_eq!(t[0].bound_within, (4, 4));
        let md = markdown(&r);
        assert!(
            md.starts_with("RT p99 below: the router's (kernel receive -> transmit)"),
            "{md}"
        );
        assert!(md.contains("| 60.0 | 0.200 | 600.0 | 0.200 |"), "{md}");
        assert!(md.contains("4 of 4 points: met"), "{md}");
        r[0].router_rt_p99_us = None;
        assert_eq!(targets(&r)[0].bound_within, (2, 4), "back to the sink's");
    }

    #[test]
    fn the_crossing_is_linear_between_the_two_points() {
        // 0 % at 10 kpps, 1 % at 20 kpps: 0.1 % at a tenth of the way.
        assert!((crossing((10e3, 0.0), (20e3, 0.01), 0.001) - 11e3).abs() < 1e-6);
        assert!((crossing((10e3, 0.0005), (20e3, 0.0015), 0.001) - 15e3).abs() < 1e-6);
        assert!(!crossing((1.0, 0.01), (2.0, 0.01), 0.001).is_finite());
        let (a, b) = (
            row("sq", 10e3, (0, 0), 1.0, None),
            row("sq", 20e3, (10, 10), 1.0, None),
        );
        // 20 of 2000 = 1 % at 20 kpps.
        assert_eq!(loss_free(&[&a, &b]), (Some(10e3), Some(11e3)));
        assert_eq!(loss_free(&[&b]), (None, None));
        assert!((total_loss(&b) - 0.01).abs() < 1e-12);
    }

    /// Every target missed: each verdict line says so with its figure.
    #[test]
    fn missed_targets_are_said_missed() {
        let r = vec![
            row("sq", 100_000.0, (0, 0), 100.0, None),
            row("sq", 150_000.0, (100, 100), 200.0, None),
            row("ll-wfq", 50_000.0, (0, 0), 90.0, Some(10.0)),
            row("ll-wfq", 100_000.0, (50, 50), 90.0, None),
            row("ll-wfq", 150_000.0, (50, 300), 190.0, None),
        ];
        // Crossings: SQ at 100.5 kpps (10 % at 150), LL-WFQ at 51 kpps (5 % at 100).
        let md = markdown(&r);
        assert!(
            md.contains(
                "- ll-wfq loss-free throughput ÷ SQ's = 0.507 (interpolated; target ≥ 0.95): missed"
            ),
            "{md}"
        );
        assert!(
            md.contains("RT p99 ÷ SQ's = 0.950 (target ≤ 1/3;") && md.contains("): missed"),
            "{md}"
        );
        assert!(
            md.contains("RT loss ÷ SQ's = 0.500 (target ≤ 1/10): missed"),
            "{md}"
        );
        assert!(
            md.contains("within the bound at ρ_RT ≤ 0.5: 0 of 1 points: missed"),
            "{md}"
        );
        assert!(!md.contains(": met"), "{md}");
    }
}
