//! One point directory of the ingress experiment, under
//! `RESULTS/points/`, holding
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
//! the service).
//!
//! Loss per class is `1 − received / sent`, sent from the generator's
//! report (exact, unlike sequence gaps, which miss a flow's lost tail).
//! The bound is `pktsched calc ingress`'s: the response `(b+ρ)x/(1−ρ) + x`
//! and the published wait `b·x/(1−ρ)`, with `ρ` the offered RT packets/s
//! times the measured `x`.

use std::path::{Path, PathBuf};

use pktsched_core::ingress::bound;
use serde::Serialize;
use serde_json::Value;

use super::IngressError;

/// Keys under which the router's final JSON gives its mean per-packet
/// service time, ns.
pub const X_KEYS: [&str; 4] = ["x_ns", "service_ns", "per_packet_ns", "service_time_ns"];
/// Most points read.
pub const MAX_POINTS: usize = 10_000;
/// Largest JSON file read.
const MAX_FILE: u64 = 64 << 20;

/// One measured point (a row of `ingress-results.csv` and `.json`).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Row {
    /// The point's directory name.
    pub point: String,
    pub strategy: String,
    /// `load` or `share`.
    pub sweep: String,
    pub load_pps: f64,
    /// The load as a multiple of the measured capacity.
    pub load_factor: Option<f64>,
    pub rt_share: f64,
    pub rt_sent: u64,
    pub be_sent: u64,
    pub rt_received: u64,
    pub be_received: u64,
    /// `1 − received / sent` ([`loss`]).
    pub rt_loss: f64,
    pub be_loss: f64,
    /// The sink's (one-way) latency, µs.
    pub rt_p50_us: f64,
    pub rt_p99_us: f64,
    pub rt_p999_us: f64,
    pub be_p50_us: f64,
    pub be_p99_us: f64,
    pub be_p999_us: f64,
    /// The router's RT latency, kernel receive → transmit, µs.
    pub router_rt_p50_us: Option<f64>,
    pub router_rt_p99_us: Option<f64>,
    /// The router's RT ring wait (kernel receive → poller), p99, µs.
    pub router_rt_ring_wait_p99_us: Option<f64>,
    /// The router's BE latency, kernel receive → transmit, µs.
    pub router_be_p50_us: Option<f64>,
    pub router_be_p99_us: Option<f64>,
    /// The measured per-packet service time, ns.
    pub x_ns: Option<f64>,
    /// Offered RT packets/s × `x`.
    pub rho_rt: Option<f64>,
    /// BE packets per poll cycle (none for SQ).
    pub be_budget: Option<u64>,
    /// The RT response bound, µs.
    pub bound_us: Option<f64>,
    /// The published wait bound `b·x/(1−ρ)`, µs.
    pub paper_bound_us: Option<f64>,
}

/// A point directory left out of [`read_points`], and why.
#[derive(Debug)]
pub struct LeftOut {
    pub dir: PathBuf,
    pub error: IngressError,
}

/// `DIR: why`, with the error's causes after it (`: cause`).
impl std::fmt::Display for LeftOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.dir.display(), self.error)?;
        let mut cause = std::error::Error::source(&self.error);
        while let Some(c) = cause {
            write!(f, ": {c}")?;
            cause = c.source();
        }
        Ok(())
    }
}

/// The readable points of a results directory and those left out.
#[derive(Debug)]
pub struct Points {
    /// Sorted by strategy, sweep, load and share.
    pub rows: Vec<Row>,
    /// In directory-name order.
    pub left_out: Vec<LeftOut>,
}

fn read_json(path: &Path) -> Result<Value, IngressError> {
    let text =
        pktsched_run::config::read_capped(path, "result", MAX_FILE).map_err(IngressError::Read)?;
    serde_json::from_str(&text).map_err(|source| IngressError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// A file a point may lack (the router's `route.json` / `router.json`):
/// absent is `None`; present but unreadable or not JSON is an error, not a
/// silent fall-back to the sink's figures.
fn read_optional_json(path: &Path) -> Result<Option<Value>, IngressError> {
    match path.try_exists() {
        Ok(false) => Ok(None),
        _ => read_json(path).map(Some),
    }
}

/// The first number under one of `keys`, depth first.
pub fn find_number(v: &Value, keys: &[&str]) -> Option<f64> {
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

fn num(v: &Value, key: &'static str, file: &Path) -> Result<f64, IngressError> {
    v.get(key)
        .and_then(Value::as_f64)
        .ok_or_else(|| IngressError::NoNumber {
            path: file.to_path_buf(),
            key,
        })
}

/// A sink class by name, and its port range.
fn class<'a>(
    sink: &'a Value,
    name: &'static str,
    file: &Path,
) -> Result<(&'a Value, u16, u16), IngressError> {
    let c = sink
        .get("classes")
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .find(|c| c.get("class").and_then(Value::as_str) == Some(name))
        })
        .ok_or_else(|| IngressError::NoClass {
            path: file.to_path_buf(),
            class: name,
        })?;
    let ports = c.get("ports").and_then(Value::as_str).unwrap_or("");
    let (lo, hi) = ports
        .split_once('-')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .ok_or_else(|| IngressError::Ports {
            path: file.to_path_buf(),
            class: name,
            ports: ports.to_string(),
        })?;
    Ok((c, lo, hi))
}

/// Datagrams the generator sent to ports `lo..=hi` (`flows[].dst`'s port,
/// `flows[].sent`).
pub fn sent_to(gen_report: &Value, lo: u16, hi: u16) -> u64 {
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

/// The fraction of `sent` not `received` (0 when nothing was sent; more
/// received than sent is no loss).
pub fn loss(sent: u64, received: u64) -> f64 {
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

/// A sink class's figure `key`.
fn figure(c: &Value, key: &'static str, file: &Path) -> Result<f64, IngressError> {
    c.get(key)
        .and_then(Value::as_f64)
        .ok_or_else(|| IngressError::ClassFigure {
            path: file.to_path_buf(),
            class: c
                .get("class")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string(),
            key,
        })
}

/// One point directory as a row.
pub fn read_point(dir: &Path) -> Result<Row, IngressError> {
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
    let got = |c: &Value, k: &'static str| figure(c, k, &sf);
    let (rt_received, be_received) = (got(rt, "received")? as u64, got(be, "received")? as u64);
    // A class that received nothing has no latency (`null` in the sink's
    // report): NaN here, left out of the charts; else the figure is needed.
    let latency = |c: &Value, received: u64, k: &'static str| match c.get(k) {
        Some(Value::Null) if received == 0 => Ok(f64::NAN),
        _ => got(c, k),
    };
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
        rt_p50_us: latency(rt, rt_received, "latency_p50_us")?,
        rt_p99_us: latency(rt, rt_received, "latency_p99_us")?,
        rt_p999_us: latency(rt, rt_received, "latency_p999_us")?,
        be_p50_us: latency(be, be_received, "latency_p50_us")?,
        be_p99_us: latency(be, be_received, "latency_p99_us")?,
        be_p999_us: latency(be, be_received, "latency_p999_us")?,
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
/// and share; a point that cannot be read is left out, in
/// [`Points::left_out`] with why. No readable point is an error that
/// holds the points left out.
pub fn read_points(results: &Path) -> Result<Points, IngressError> {
    let dir = results.join("points");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(IngressError::io(dir.clone()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .take(MAX_POINTS + 1)
        .collect();
    if dirs.len() > MAX_POINTS {
        return Err(IngressError::TooManyPoints {
            path: dir,
            max: MAX_POINTS,
        });
    }
    dirs.sort();
    let (mut rows, mut left_out) = (Vec::new(), Vec::new());
    for d in dirs {
        match read_point(&d) {
            Ok(r) => rows.push(r),
            Err(error) => left_out.push(LeftOut { dir: d, error }),
        }
    }
    if rows.is_empty() {
        return Err(IngressError::NoPoints {
            path: dir,
            left_out,
        });
    }
    rows.sort_by(|a, b| {
        (&a.strategy, &a.sweep)
            .cmp(&(&b.strategy, &b.sweep))
            .then(a.load_pps.total_cmp(&b.load_pps))
            .then(a.rt_share.total_cmp(&b.rt_share))
    });
    Ok(Points { rows, left_out })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, v: Value) {
        std::fs::write(dir.join(name), v.to_string()).expect("write");
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
        write(&p, "sink.json", no_p99.clone());
        let e = format!("{:#}", read_point(&p).expect_err("no p99"));
        // A class that received nothing reports null latencies: no figure
        // (NaN, left out of the charts), not an error; null with datagrams
        // received is still one.
        let mut empty_be = no_p99.clone();
        for k in ["latency_p50_us", "latency_p99_us", "latency_p999_us"] {
            empty_be["classes"][1][k] = serde_json::Value::Null;
        }
        write(&p, "sink.json", empty_be.clone());
        assert!(read_point(&p).is_err(), "null p99 with 10 received");
        empty_be["classes"][1]["received"] = 0.into();
        write(&p, "sink.json", empty_be);
        let row = read_point(&p).expect("an empty class reads");
        assert!(row.be_p99_us.is_nan() && row.rt_p99_us == 2.0, "{row:?}");
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

    #[test]
    fn loss_is_the_fraction_not_received() {
        assert_eq!(loss(1000, 999), 0.001);
        assert_eq!(loss(4, 0), 1.0);
        assert_eq!(loss(0, 0), 0.0, "nothing sent, nothing lost");
        assert_eq!(loss(10, 12), 0.0, "duplicates are no negative loss");
    }

    #[test]
    fn sent_counts_the_flows_to_the_class_ports() {
        let g = serde_json::json!({"flows": [
            {"dst": "10.0.0.2:5001", "sent": 7},
            {"dst": "[fd00::2]:5003", "sent": 5},
            {"dst": "10.0.0.2:6000", "sent": 100},
            {"dst": "nowhere", "sent": 1000},
            {"dst": "10.0.0.2:5002"}
        ]});
        assert_eq!(sent_to(&g, 5001, 5001), 7);
        assert_eq!(sent_to(&g, 5002, 5009), 5);
        assert_eq!(sent_to(&serde_json::json!({}), 1, 65535), 0);
    }

    /// A point left out is shown with its directory and every cause.
    #[test]
    fn a_left_out_point_shows_the_error_and_its_cause() {
        let source = serde_json::from_str::<Value>("x").expect_err("not JSON");
        let l = LeftOut {
            dir: PathBuf::from("r/points/p"),
            error: IngressError::Json {
                path: PathBuf::from("r/points/p/router.json"),
                source,
            },
        };
        assert_eq!(
            l.to_string(),
            "r/points/p: r/points/p/router.json: not JSON: expected value at line 1 column 1"
        );
    }
}
