//! `pktsched plot ingress`: the ingress experiment's points, one directory
//! each under `RESULTS/points/` holding
//!
//! - `point.json`: `{"strategy", "sweep": "load"|"share", "load_pps",
//!   "rt_share", "be_budget" (BE packets per poll cycle, null for SQ),
//!   "load_factor" (optional: the load as a multiple of the measured
//!   capacity), "x_ns" (optional: overrides the router's)}`, written by
//!   the script;
//! - `gen.json`: `pktsched gen --json` (what was sent, per flow);
//! - `sink.json`: `pktsched sink --json` with classes `rt` and `be`;
//! - `route.json` (optional): `pktsched route --json`, the router's final
//!   counters, from which the measured per-packet service time `x` is read
//!   (the first number under a key in [`X_KEYS`]);
//! - `router.json` (optional): `pktsched stats --json` read at the end of
//!   the point (else `route.json` is used): the router's per-class latency
//!   from the kernel's receive to the transmit (`classes[]`, `name` `rt`
//!   and `be`, `latency_p50_ns`, `latency_p99_ns`, `ring_wait_p99_ns`),
//!   the `router_*` columns.
//!
//! Two RT p99 figures per point: the sink's (`rt_p99_us`, one-way,
//! generator → the sink's kernel receive, so it holds the generator's and
//! the wire's time too) and the router's (`router_rt_p99_us`, its kernel
//! receive → transmit: the wait in the RT ring the bound is about, plus
//! the service). The targets and the bound table judge the router's when
//! every point has it, else the sink's, and say which.
//!
//! Loss per class is `1 − received / sent`, sent from the generator's
//! report (exact, unlike sequence gaps, which miss a flow's lost tail).
//! The bound is `pktsched calc ingress`'s: the response `(b+ρ)x/(1−ρ) + x`
//! and the published wait `b·x/(1−ρ)`, with `ρ` the offered RT packets/s
//! times the measured `x`. The sink's latency is one-way, generator to
//! sink, so it holds more than the router's wait: the comparison is
//! conservative for the bound.

use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use pktsched_bench::svg::Chart;
use pktsched_core::ingress::bound;
use serde::Serialize;
use serde_json::Value;

use crate::output::Stdout;

mod targets;

/// Keys under which the router's final JSON gives its mean per-packet
/// service time, ns.
pub(crate) const X_KEYS: [&str; 4] = ["x_ns", "service_ns", "per_packet_ns", "service_time_ns"];
/// Most points read.
const MAX_POINTS: usize = 10_000;
/// Largest JSON file read.
const MAX_FILE: u64 = 64 << 20;

/// One measured point.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub(crate) struct Row {
    point: String,
    strategy: String,
    sweep: String,
    load_pps: f64,
    load_factor: Option<f64>,
    rt_share: f64,
    rt_sent: u64,
    be_sent: u64,
    rt_received: u64,
    be_received: u64,
    rt_loss: f64,
    be_loss: f64,
    rt_p50_us: f64,
    rt_p99_us: f64,
    rt_p999_us: f64,
    be_p50_us: f64,
    be_p99_us: f64,
    be_p999_us: f64,
    /// The router's RT latency, kernel receive → transmit, µs.
    router_rt_p50_us: Option<f64>,
    router_rt_p99_us: Option<f64>,
    /// The router's RT ring wait (kernel receive → poller), p99, µs.
    router_rt_ring_wait_p99_us: Option<f64>,
    /// The router's BE latency, kernel receive → transmit, µs.
    router_be_p50_us: Option<f64>,
    router_be_p99_us: Option<f64>,
    x_ns: Option<f64>,
    rho_rt: Option<f64>,
    be_budget: Option<u64>,
    bound_us: Option<f64>,
    paper_bound_us: Option<f64>,
}

fn read_json(path: &Path) -> Result<Value> {
    let text =
        pktsched_run::config::read_capped(path, "result", MAX_FILE).map_err(anyhow::Error::msg)?;
    serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))
}

/// A file a point may lack (the router's `route.json` / `router.json`):
/// absent is `None`; present but unreadable or not JSON is an error, not a
/// silent fall-back to the sink's figures.
fn read_optional_json(path: &Path) -> Result<Option<Value>> {
    match path.try_exists() {
        Ok(false) => Ok(None),
        _ => read_json(path).map(Some),
    }
}

/// The first number under one of `keys`, depth first.
pub(crate) fn find_number(v: &Value, keys: &[&str]) -> Option<f64> {
    match v {
        Value::Object(m) => {
            for k in keys {
                if let Some(x) = m.get(*k).and_then(Value::as_f64) {
                    return Some(x);
                }
            }
            m.values().find_map(|c| find_number(c, keys))
        }
        Value::Array(a) => a.iter().find_map(|c| find_number(c, keys)),
        _ => None,
    }
}

fn num(v: &Value, key: &str, file: &Path) -> Result<f64> {
    v.get(key)
        .and_then(Value::as_f64)
        .with_context(|| format!("{}: no number {key:?}", file.display()))
}

/// A sink class by name, and its port range.
fn class<'a>(sink: &'a Value, name: &str, file: &Path) -> Result<(&'a Value, u16, u16)> {
    let c = sink
        .get("classes")
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .find(|c| c.get("class").and_then(Value::as_str) == Some(name))
        })
        .with_context(|| format!("{}: no class {name:?}", file.display()))?;
    let ports = c.get("ports").and_then(Value::as_str).unwrap_or("");
    let (lo, hi) = ports
        .split_once('-')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .with_context(|| format!("{}: class {name} ports {ports:?}", file.display()))?;
    Ok((c, lo, hi))
}

/// Datagrams the generator sent to ports `lo..=hi`.
fn sent_to(gen_report: &Value, lo: u16, hi: u16) -> u64 {
    let flows = gen_report.get("flows").and_then(Value::as_array);
    flows
        .into_iter()
        .flatten()
        .filter(|f| {
            let port = f
                .get("dst")
                .and_then(Value::as_str)
                .and_then(|d| d.rsplit(':').next())
                .and_then(|p| p.parse::<u16>().ok());
            port.is_some_and(|p| (lo..=hi).contains(&p))
        })
        .filter_map(|f| f.get("sent").and_then(Value::as_u64))
        .sum()
}

fn loss(sent: u64, received: u64) -> f64 {
    if sent == 0 {
        0.0
    } else {
        sent.saturating_sub(received) as f64 / sent as f64
    }
}

/// The router's class `name` in a `pktsched stats --json` (or `route
/// --json`) report: the object with that `name` in `classes`.
fn router_class<'a>(router: Option<&'a Value>, name: &str) -> Option<&'a Value> {
    router?
        .get("classes")?
        .as_array()?
        .iter()
        .find(|c| c.get("name").and_then(Value::as_str) == Some(name))
}

/// A router class's figure `key` (ns) in µs.
fn router_us(class: Option<&Value>, key: &str) -> Option<f64> {
    class?.get(key)?.as_f64().map(|ns| ns / 1e3)
}

/// One point directory as a row.
pub(crate) fn read_point(dir: &Path) -> Result<Row> {
    let pf = dir.join("point.json");
    let point = read_json(&pf)?;
    let sf = dir.join("sink.json");
    let sink = read_json(&sf)?;
    let gen_report = read_json(&dir.join("gen.json"))?;
    let route = read_optional_json(&dir.join("route.json"))?;
    let stats = read_optional_json(&dir.join("router.json"))?;
    let router = stats.as_ref().or(route.as_ref());
    let (r_rt, r_be) = (router_class(router, "rt"), router_class(router, "be"));
    let (rt, rt_lo, rt_hi) = class(&sink, "rt", &sf)?;
    let (be, be_lo, be_hi) = class(&sink, "be", &sf)?;
    let (rt_sent, be_sent) = (
        sent_to(&gen_report, rt_lo, rt_hi),
        sent_to(&gen_report, be_lo, be_hi),
    );
    let got = |c: &Value, k: &str| -> Result<f64> {
        let name = c.get("class").and_then(Value::as_str).unwrap_or("?");
        c.get(k)
            .and_then(Value::as_f64)
            .with_context(|| format!("{}: class {name:?} has no number {k:?}", sf.display()))
    };
    let (rt_received, be_received) = (got(rt, "received")? as u64, got(be, "received")? as u64);
    let load_pps = num(&point, "load_pps", &pf)?;
    let rt_share = num(&point, "rt_share", &pf)?;
    let be_budget = point.get("be_budget").and_then(Value::as_u64);
    let x_ns = point
        .get("x_ns")
        .and_then(Value::as_f64)
        .or_else(|| route.as_ref().and_then(|r| find_number(r, &X_KEYS)))
        .filter(|x| x.is_finite() && *x > 0.0);
    let rho_rt = x_ns.map(|x| load_pps * rt_share * x / 1e9);
    let bd = match (x_ns, rho_rt, be_budget) {
        (Some(x), Some(rho), Some(b)) => bound::bound(b, (x * 1e3).round() as u64, rho).ok(),
        _ => None,
    };
    let text = |k: &str| {
        point
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string()
    };
    Ok(Row {
        point: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        strategy: text("strategy"),
        sweep: text("sweep"),
        load_pps,
        load_factor: point.get("load_factor").and_then(Value::as_f64),
        rt_share,
        rt_sent,
        be_sent,
        rt_received,
        be_received,
        rt_loss: loss(rt_sent, rt_received),
        be_loss: loss(be_sent, be_received),
        rt_p50_us: got(rt, "latency_p50_us")?,
        rt_p99_us: got(rt, "latency_p99_us")?,
        rt_p999_us: got(rt, "latency_p999_us")?,
        be_p50_us: got(be, "latency_p50_us")?,
        be_p99_us: got(be, "latency_p99_us")?,
        be_p999_us: got(be, "latency_p999_us")?,
        router_rt_p50_us: router_us(r_rt, "latency_p50_ns"),
        router_rt_p99_us: router_us(r_rt, "latency_p99_ns"),
        router_rt_ring_wait_p99_us: router_us(r_rt, "ring_wait_p99_ns"),
        router_be_p50_us: router_us(r_be, "latency_p50_ns"),
        router_be_p99_us: router_us(r_be, "latency_p99_ns"),
        x_ns,
        rho_rt,
        be_budget,
        bound_us: bd.map(|b| b.response_ps / 1e6),
        paper_bound_us: bd.map(|b| b.paper_wait_ps / 1e6),
    })
}

/// Every point under `results/points`, sorted by strategy, sweep, load
/// and share; a point that cannot be read is named on stderr and left out.
pub(crate) fn read_points(results: &Path) -> Result<Vec<Row>> {
    let dir = results.join("points");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("{}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .take(MAX_POINTS + 1)
        .collect();
    if dirs.len() > MAX_POINTS {
        bail!("{}: more than {MAX_POINTS} points", dir.display());
    }
    dirs.sort();
    let mut rows = Vec::new();
    for d in dirs {
        match read_point(&d) {
            Ok(r) => rows.push(r),
            Err(e) => eprintln!("pktsched plot ingress: left out {}: {e:#}", d.display()),
        }
    }
    if rows.is_empty() {
        bail!(
            "{}: no readable points (point.json, gen.json, sink.json)",
            dir.display()
        );
    }
    rows.sort_by(|a, b| {
        (&a.strategy, &a.sweep)
            .cmp(&(&b.strategy, &b.sweep))
            .then(a.load_pps.total_cmp(&b.load_pps))
            .then(a.rt_share.total_cmp(&b.rt_share))
    });
    Ok(rows)
}

/// The rows as CSV.
pub(crate) fn csv(rows: &[Row]) -> String {
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

fn charts(rows: &[Row], out_dir: &Path) -> Result<Vec<String>> {
    let mut written = Vec::new();
    for p in plots() {
        let series = p.series(rows);
        if series.is_empty() {
            continue;
        }
        Chart {
            title: p.title.to_string(),
            x_desc: p.x_desc,
            y_desc: p.y_desc,
            log_x: false,
            series,
        }
        .draw(&out_dir.join(p.file))?;
        written.push(p.file.to_string());
    }
    Ok(written)
}

/// The bound next to the measured RT p99s (the router's, kernel receive
/// → transmit, and the sink's, one-way), one line per point with a
/// bound; "above the bound" judges the figure [`targets::judged_p99`]
/// picks.
pub(crate) fn bound_table(rows: &[Row]) -> String {
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

pub(crate) fn run(results: &Path, out_dir: &Path, out: &mut Stdout) -> Result<()> {
    let rows = read_points(results)?;
    std::fs::create_dir_all(out_dir).with_context(|| format!("{}", out_dir.display()))?;
    let csv_path = out_dir.join("ingress-results.csv");
    std::fs::write(&csv_path, csv(&rows)).with_context(|| format!("{}", csv_path.display()))?;
    let json_path = out_dir.join("ingress-results.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&rows)?)
        .with_context(|| format!("{}", json_path.display()))?;
    let svgs = charts(&rows, out_dir)?;
    write!(out, "{}", bound_table(&rows))?;
    let targets = targets::markdown(&rows);
    let md_path = out_dir.join("ingress-targets.md");
    std::fs::write(&md_path, &targets).with_context(|| format!("{}", md_path.display()))?;
    write!(out, "\n{targets}")?;
    writeln!(
        out,
        "{} points; wrote ingress-results.csv, ingress-results.json, ingress-targets.md and {} in {}",
        rows.len(),
        svgs.join(", "),
        out_dir.display()
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let rows = read_points(&root).expect("rows");
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

    /// A point whose router file is corrupt, or whose sink class lacks a
    /// figure, is an error naming the file and the field (the point is
    /// left out with that message), not the sink's figures or zeros.
    #[test]
    fn a_corrupt_router_file_or_a_missing_sink_figure_is_named() {
        let root = std::env::temp_dir().join(format!("ig-plot-bad-{}", std::process::id()));
        let p = root.join("points/p");
        std::fs::create_dir_all(&p).expect("mkdir");
        let point = serde_json::json!({"strategy": "sq", "sweep": "load", "load_pps": 1000.0, "rt_share": 0.3});
        write(&p, "point.json", point);
        write(&p, "gen.json", serde_json::json!({"flows": []}));
        let class = |name: &str, ports: &str| {
            serde_json::json!({"class": name, "ports": ports, "received": 10,
                "latency_p50_us": 1.0, "latency_p99_us": 2.0, "latency_p999_us": 3.0})
        };
        let sink =
            serde_json::json!({"classes": [class("rt", "5001-5001"), class("be", "5002-5009")]});
        write(&p, "sink.json", sink.clone());
        assert!(read_point(&p).is_ok(), "the complete point reads");
        std::fs::write(
            p.join("router.json"),
            "error: the forwarding thread failed\n",
        )
        .expect("write");
        let e = format!("{:#}", read_point(&p).expect_err("corrupt router.json"));
        assert!(e.contains("router.json") && e.contains("not JSON"), "{e}");
        std::fs::remove_file(p.join("router.json")).expect("rm");
        let mut no_p99 = sink;
        no_p99["classes"][1]
            .as_object_mut()
            .expect("class")
            .remove("latency_p99_us");
        write(&p, "sink.json", no_p99);
        let e = format!("{:#}", read_point(&p).expect_err("no p99"));
        std::fs::remove_dir_all(&root).expect("clean");
        assert!(
            e.contains("sink.json") && e.contains("class \"be\"") && e.contains("latency_p99_us"),
            "{e}"
        );
    }

    #[test]
    fn x_is_found_under_any_of_its_keys() {
        let v = serde_json::json!({"a": [{"b": {"service_ns": 750}}]});
        assert_eq!(find_number(&v, &X_KEYS), Some(750.0));
        assert_eq!(find_number(&serde_json::json!({"x": 1}), &X_KEYS), None);
    }
}
