//! The ingress points as files and tables: `ingress-results.csv` and
//! `.json`, the SVG charts (RT and BE p99 and loss per class against the
//! offered load and against the RT share, a line per strategy), the bound
//! table and `ingress-targets.md`.
//!
//! The bound table judges the RT p99 [`targets::judged_p99`] picks: the
//! router's when every point has it, else the sink's, and says which. The
//! sink's latency is one-way, generator to sink, so it holds more than the
//! router's wait: judged against the bound, it is conservative.

use std::fmt::Write as _;
use std::path::Path;

use super::point::Row;
use super::{IngressError, targets};
use crate::svg::Chart;

/// The rows as CSV.
pub fn csv(rows: &[Row]) -> String {
    let opt = |v: Option<f64>| v.map(|v| format!("{v:.3}")).unwrap_or_default();
    let mut s = String::from(
        "strategy,sweep,load_pps,rt_share,rt_sent,be_sent,rt_received,be_received,rt_loss,be_loss,\
         rt_p50_us,rt_p99_us,rt_p999_us,be_p50_us,be_p99_us,be_p999_us,x_ns,rho_rt,be_budget,bound_us,paper_bound_us,\
         router_rt_p50_us,router_rt_p99_us,router_rt_ring_wait_p99_us,router_be_p50_us,router_be_p99_us\n",
    );
    let us = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_default();
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{:.0},{},{},{},{},{},{:.6},{:.6},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{},{},{},{},{},{},{},{},{},{}",
            r.strategy,
            r.sweep,
            r.load_pps,
            r.rt_share,
            r.rt_sent,
            r.be_sent,
            r.rt_received,
            r.be_received,
            r.rt_loss,
            r.be_loss,
            r.rt_p50_us,
            r.rt_p99_us,
            r.rt_p999_us,
            r.be_p50_us,
            r.be_p99_us,
            r.be_p999_us,
            opt(r.x_ns),
            r.rho_rt.map(|v| format!("{v:.4}")).unwrap_or_default(),
            r.be_budget.map(|b| b.to_string()).unwrap_or_default(),
            opt(r.bound_us),
            opt(r.paper_bound_us),
            us(r.router_rt_p50_us),
            us(r.router_rt_p99_us),
            us(r.router_rt_ring_wait_p99_us),
            us(r.router_be_p50_us),
            us(r.router_be_p99_us),
        );
    }
    s
}

/// A value of a row.
type Field = fn(&Row) -> f64;

/// One chart: the rows of one sweep, x against one or more values (a
/// line per strategy and value, the value's suffix on its name).
struct Plot {
    file: &'static str,
    title: &'static str,
    sweep: &'static str,
    x: Field,
    x_desc: &'static str,
    y_desc: &'static str,
    ys: Vec<(&'static str, Field)>,
}

impl Plot {
    fn series(&self, rows: &[Row]) -> Vec<(String, Vec<(f64, f64)>)> {
        let mut strategies: Vec<&str> = rows.iter().map(|r| r.strategy.as_str()).collect();
        strategies.dedup();
        let mut out = Vec::new();
        for st in strategies {
            for (suffix, y) in &self.ys {
                let pts: Vec<(f64, f64)> = rows
                    .iter()
                    .filter(|r| r.strategy == st && r.sweep == self.sweep)
                    .map(|r| ((self.x)(r), y(r)))
                    // A class that received nothing has no latency.
                    .filter(|(_, y)| y.is_finite())
                    .collect();
                if !pts.is_empty() {
                    out.push((format!("{st}{suffix}"), pts));
                }
            }
        }
        out
    }
}

fn plots() -> [Plot; 5] {
    let (kpps, share): (Field, Field) = (|r| r.load_pps / 1e3, |r| r.rt_share * 100.0);
    let (load_x, share_x) = ("offered load (kpps)", "RT share of the offered load (%)");
    let (p99, loss) = ("p99 latency (us)", "loss (%)");
    let losses: Vec<(&str, Field)> = vec![
        (" RT", |r| r.rt_loss * 100.0),
        (" BE", |r| r.be_loss * 100.0),
    ];
    [
        Plot {
            file: "ingress-rt-p99.svg",
            title: "RT p99 latency vs offered load",
            sweep: "load",
            x: kpps,
            x_desc: load_x,
            y_desc: p99,
            ys: vec![("", |r| r.rt_p99_us)],
        },
        Plot {
            file: "ingress-be-p99.svg",
            title: "BE p99 latency vs offered load",
            sweep: "load",
            x: kpps,
            x_desc: load_x,
            y_desc: p99,
            ys: vec![("", |r| r.be_p99_us)],
        },
        Plot {
            file: "ingress-loss.svg",
            title: "loss per class vs offered load",
            sweep: "load",
            x: kpps,
            x_desc: load_x,
            y_desc: loss,
            ys: losses.clone(),
        },
        Plot {
            file: "ingress-share-rt-p99.svg",
            title: "RT p99 latency vs RT share (overload)",
            sweep: "share",
            x: share,
            x_desc: share_x,
            y_desc: p99,
            ys: vec![("", |r| r.rt_p99_us)],
        },
        Plot {
            file: "ingress-share-loss.svg",
            title: "loss per class vs RT share (overload)",
            sweep: "share",
            x: share,
            x_desc: share_x,
            y_desc: loss,
            ys: losses,
        },
    ]
}

/// Draws the charts that have points into `out_dir`; returns their file
/// names.
pub fn charts(rows: &[Row], out_dir: &Path) -> Result<Vec<String>, IngressError> {
    let mut written = Vec::new();
    for p in plots() {
        let series = p.series(rows);
        if series.is_empty() {
            continue;
        }
        let chart = Chart {
            title: p.title.to_string(),
            x_desc: p.x_desc,
            y_desc: p.y_desc,
            log_x: false,
            series,
        };
        super::draw(&chart, &out_dir.join(p.file))?;
        written.push(p.file.to_string());
    }
    Ok(written)
}

/// The bound next to the measured RT p99s (the router's, kernel receive
/// → transmit, and the sink's, one-way), one line per point with a
/// bound; "above the bound" judges the figure [`targets::judged_p99`]
/// picks.
pub fn bound_table(rows: &[Row]) -> String {
    let (_, source) = targets::judged_p99(rows);
    let mut s = format!(
        "RT p99 judged against the bound: {source}\n\
         {:<8} {:<6} {:>10} {:>6} {:>9} {:>7} {:>4} {:>11} {:>13} {:>15} {:>13}\n",
        "strategy",
        "sweep",
        "load pps",
        "rt",
        "x ns",
        "rho_rt",
        "b",
        "bound us",
        "published us",
        "router p99 us",
        "sink p99 us"
    );
    let (judged, _) = targets::judged_p99(rows);
    for r in rows {
        let (Some(x), Some(rho), Some(b), Some(bd), Some(pb)) =
            (r.x_ns, r.rho_rt, r.be_budget, r.bound_us, r.paper_bound_us)
        else {
            continue;
        };
        let _ = writeln!(
            s,
            "{:<8} {:<6} {:>10.0} {:>6.2} {:>9.1} {:>7.3} {:>4} {:>11.1} {:>13.1} {:>15} {:>13.1}{}",
            r.strategy,
            r.sweep,
            r.load_pps,
            r.rt_share,
            x,
            rho,
            b,
            bd,
            pb,
            r.router_rt_p99_us
                .map_or_else(|| "—".to_string(), |v| format!("{v:.1}")),
            r.rt_p99_us,
            if judged(r) <= bd {
                ""
            } else {
                "  above the bound"
            }
        );
    }
    s
}

/// Creates `out_dir` and writes `ingress-results.csv` and
/// `ingress-results.json` there.
pub fn write_results(rows: &[Row], out_dir: &Path) -> Result<(), IngressError> {
    std::fs::create_dir_all(out_dir).map_err(IngressError::io(out_dir.to_path_buf()))?;
    let csv_path = out_dir.join("ingress-results.csv");
    std::fs::write(&csv_path, csv(rows)).map_err(IngressError::io(csv_path))?;
    let json_path = out_dir.join("ingress-results.json");
    let json = serde_json::to_string_pretty(rows)?;
    std::fs::write(&json_path, json).map_err(IngressError::io(json_path))?;
    Ok(())
}

/// Writes [`targets::markdown`] to `out_dir/ingress-targets.md` and
/// returns it.
pub fn write_targets(rows: &[Row], out_dir: &Path) -> Result<String, IngressError> {
    let targets = targets::markdown(rows);
    let md_path = out_dir.join("ingress-targets.md");
    std::fs::write(&md_path, &targets).map_err(IngressError::io(md_path))?;
    Ok(targets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingress::read_points;
    use serde_json::Value;

    fn write(dir: &Path, name: &str, v: Value) {
        std::fs::write(dir.join(name), v.to_string()).expect("write");
    }

    #[test]
    fn a_point_reads_sent_received_loss_and_the_bound() {
        let root = std::env::temp_dir().join(format!("ig-plot-{}", std::process::id()));
        let p = root.join("points/ll-wfq-load-1");
        std::fs::create_dir_all(&p).expect("mkdir");
        write(
            &p,
            "point.json",
            serde_json::json!({
                "strategy": "ll-wfq", "sweep": "load", "load_pps": 100000.0, "rt_share": 0.3, "be_budget": 4
            }),
        );
        write(
            &p,
            "gen.json",
            serde_json::json!({"flows": [
                {"dst": "10.0.0.2:5001", "sent": 30000},
                {"dst": "10.0.0.2:5002", "sent": 35000},
                {"dst": "10.0.0.2:5003", "sent": 35000}
            ]}),
        );
        write(
            &p,
            "sink.json",
            serde_json::json!({"classes": [
                {"class": "rt", "ports": "5001-5001", "received": 29970,
                 "latency_p50_us": 8.0, "latency_p99_us": 12.5, "latency_p999_us": 20.0},
                {"class": "be", "ports": "5002-5009", "received": 35000,
                 "latency_p50_us": 300.0, "latency_p99_us": 900.0, "latency_p999_us": 950.0}
            ]}),
        );
        write(
            &p,
            "route.json",
            serde_json::json!({"router": {"x_ns": 2000.0}}),
        );
        write(
            &p,
            "router.json",
            serde_json::json!({"service_ns": 2000.0, "classes": [
                {"name": "rt", "latency_p50_ns": 4000, "latency_p99_ns": 9000, "ring_wait_p99_ns": 6000},
                {"name": "be", "latency_p50_ns": 50000, "latency_p99_ns": 700000}
            ]}),
        );
        std::fs::create_dir_all(root.join("points/broken")).expect("mkdir");
        let points = read_points(&root).expect("rows");
        assert_eq!(points.left_out.len(), 1, "{:?}", points.left_out);
        assert!(points.left_out[0].dir.ends_with("broken"));
        let rows = points.rows;
        let svgs = charts(&rows, &root).expect("charts");
        // One load point: the load charts, not the share ones.
        assert_eq!(
            svgs,
            [
                "ingress-rt-p99.svg",
                "ingress-be-p99.svg",
                "ingress-loss.svg"
            ]
        );
        let svg = std::fs::read_to_string(root.join("ingress-loss.svg")).expect("svg");
        assert!(svg.contains("<svg") && svg.contains("ll-wfq RT"), "{svg}");
        std::fs::remove_dir_all(&root).expect("clean");
        assert_eq!(rows.len(), 1, "the broken point is left out");
        let r = &rows[0];
        assert_eq!((r.rt_sent, r.be_sent, r.rt_received), (30000, 70000, 29970));
        assert!((r.rt_loss - 0.001).abs() < 1e-12);
        assert!((r.be_loss - 0.5).abs() < 1e-12);
        // rho = 30 kpps × 2 µs = 0.06; response bound (4 + 0.06)·2/(0.94) + 2 µs.
        assert!((r.rho_rt.expect("rho") - 0.06).abs() < 1e-12);
        let want = (4.0 + 0.06) * 2.0 / 0.94 + 2.0;
        assert!((r.bound_us.expect("bound") - want).abs() < 1e-6, "{r:?}");
        assert!((r.paper_bound_us.expect("paper") - 8.0 / 0.94).abs() < 1e-6);
        assert_eq!(
            (
                r.router_rt_p50_us,
                r.router_rt_p99_us,
                r.router_rt_ring_wait_p99_us
            ),
            (Some(4.0), Some(9.0), Some(6.0))
        );
        assert_eq!(
            (r.router_be_p50_us, r.router_be_p99_us),
            (Some(50.0), Some(700.0))
        );
        // The router's 9 µs is judged (within ~10.6 µs), not the sink's 12.5.
        let t = bound_table(&rows);
        assert!(
            t.contains("ll-wfq") && !t.contains("above the bound"),
            "{t}"
        );
        assert!(
            t.starts_with("RT p99 judged against the bound: the router's"),
            "{t}"
        );
        let mut sink_only = rows.clone();
        sink_only[0].router_rt_p99_us = None;
        assert!(bound_table(&sink_only).contains("above the bound"));
        let c = csv(&rows);
        assert_eq!(c.lines().count(), 2);
        assert!(
            c.lines()
                .nth(1)
                .expect("row")
                .starts_with("ll-wfq,load,100000,0.3,30000,70000"),
            "{c}"
        );
        assert!(
            c.lines().next().expect("header").ends_with(
                ",router_rt_p50_us,router_rt_p99_us,router_rt_ring_wait_p99_us,router_be_p50_us,router_be_p99_us"
            ),
            "{c}"
        );
        assert!(
            c.lines()
                .nth(1)
                .expect("row")
                .ends_with(",4.0,9.0,6.0,50.0,700.0"),
            "{c}"
        );
    }

    /// The files land in the out directory, created if need be, and hold
    /// what `csv`, the JSON of the rows and `targets::markdown` say; an
    /// out directory that cannot be made is named.
    #[test]
    fn the_results_and_targets_are_written_where_asked() {
        let root = std::env::temp_dir().join(format!("ig-report-{}", std::process::id()));
        let out = root.join("a/b");
        let rows = vec![Row {
            strategy: "sq".into(),
            sweep: "load".into(),
            load_pps: 1000.0,
            rt_sent: 10,
            rt_received: 10,
            ..Row::default()
        }];
        write_results(&rows, &out).expect("results");
        let md = write_targets(&rows, &out).expect("targets");
        let read = |f: &str| std::fs::read_to_string(out.join(f)).expect(f);
        let (c, j, m) = (
            read("ingress-results.csv"),
            read("ingress-results.json"),
            read("ingress-targets.md"),
        );
        std::fs::remove_dir_all(&root).expect("clean");
        assert_eq!(c, csv(&rows));
        let back: Value = serde_json::from_str(&j).expect("json");
        assert_eq!(back[0]["strategy"], "sq");
        assert_eq!(back[0]["rt_received"], 10);
        assert_eq!(
            (m.as_str(), md.as_str()),
            (targets::markdown(&rows).as_str(), m.as_str())
        );
        let e = write_results(&rows, Path::new("/proc/no/such")).expect_err("no dir");
        assert!(e.to_string().starts_with("/proc/no/such"), "{e}");
    }
}
