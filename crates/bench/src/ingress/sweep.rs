//! The files of `pktsched calc ingress --sweep DIR`: the simulated load
//! sweep (`pktsched_sim::ingress::sweep`) as `ingress-sweep.csv` and three
//! charts against the offered load, a line per strategy and class:
//! `ingress-p99.svg` (RT and BE p99), `ingress-loss.svg` (RT and BE loss)
//! and `ingress-rt-p99.svg` (RT p99 only).

use std::path::{Path, PathBuf};

use pktsched_core::ingress::Strategy;
use pktsched_sim::ingress::SweepPoint;

use super::IngressError;
use crate::svg::Chart;

/// Both classes, with their names in the charts' legends.
const BOTH: &[(usize, &str)] = &[(0, "RT"), (1, "BE")];
/// The charts' x axis.
const LOAD_X: &str = "offered load (fraction of 1/x)";

/// One line per strategy (in [`Strategy::ALL`]'s order) and class of
/// `classes` (number, name): `(load, value(point))`, named
/// `"<strategy> <class name>"`.
pub fn series(
    points: &[SweepPoint],
    value: fn(&SweepPoint) -> f64,
    classes: &[(usize, &str)],
) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut s = Vec::new();
    for st in Strategy::ALL {
        for &(class, name) in classes {
            let p: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.strategy == st.name() && p.class == class)
                .map(|p| (p.load, value(p)))
                .collect();
            s.push((format!("{st} {name}"), p));
        }
    }
    s
}

/// Creates `dir` and writes the sweep's CSV and charts there; `rt_share`
/// and `x` (the service time as shown) go in the titles. Returns the
/// CSV's path.
pub fn write(
    points: &[SweepPoint],
    rt_share: f64,
    x: &str,
    dir: &Path,
) -> Result<PathBuf, IngressError> {
    std::fs::create_dir_all(dir).map_err(IngressError::doing("creating", dir.to_path_buf()))?;
    let csv = dir.join("ingress-sweep.csv");
    let f = std::fs::File::create(&csv).map_err(IngressError::doing("creating", csv.clone()))?;
    pktsched_sim::ingress::sweep_csv(points, std::io::BufWriter::new(f))
        .map_err(IngressError::doing("writing", csv.clone()))?;
    let title = |what: &str| format!("{what} vs offered load ({}% RT, x = {x})", rt_share * 100.0);
    let charts = [
        (
            "ingress-p99.svg",
            Chart {
                title: title("p99 latency"),
                x_desc: LOAD_X,
                y_desc: "p99 latency (us)",
                log_x: false,
                series: series(points, |p| p.p99_us, BOTH),
            },
        ),
        (
            "ingress-loss.svg",
            Chart {
                title: title("loss"),
                x_desc: LOAD_X,
                y_desc: "loss (fraction)",
                log_x: false,
                series: series(points, |p| p.loss, BOTH),
            },
        ),
        (
            "ingress-rt-p99.svg",
            Chart {
                title: title("RT p99 latency"),
                x_desc: LOAD_X,
                y_desc: "RT p99 latency (us)",
                log_x: false,
                series: series(points, |p| p.p99_us, &[(0, "RT")]),
            },
        ),
    ];
    for (file, chart) in &charts {
        super::draw(chart, &dir.join(file))?;
    }
    Ok(csv)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(strategy: &str, load: f64, class: usize, p99_us: f64) -> SweepPoint {
        SweepPoint {
            strategy: strategy.into(),
            load,
            class,
            p50_us: p99_us / 2.0,
            p99_us,
            max_us: p99_us * 2.0,
            loss: load / 10.0,
            throughput_pps: 1e5,
        }
    }

    #[test]
    fn a_line_per_strategy_and_class_in_strategy_order() {
        let (sq, wfq) = (Strategy::ALL[0].name(), Strategy::ALL[3].name());
        let pts = vec![
            point(wfq, 0.2, 0, 3.0),
            point(sq, 0.2, 1, 9.0),
            point(sq, 0.4, 1, 11.0),
            point(sq, 0.2, 0, 5.0),
        ];
        let s = series(&pts, |p| p.p99_us, BOTH);
        assert_eq!(s.len(), 2 * Strategy::ALL.len());
        assert_eq!(s[0], (format!("{} RT", Strategy::ALL[0]), vec![(0.2, 5.0)]));
        assert_eq!(s[1].1, vec![(0.2, 9.0), (0.4, 11.0)]);
        assert_eq!(s[6], (format!("{} RT", Strategy::ALL[3]), vec![(0.2, 3.0)]));
        assert!(s[7].1.is_empty(), "{s:?}");
        let rt = series(&pts, |p| p.loss, &[(0, "RT")]);
        assert_eq!(rt.len(), Strategy::ALL.len());
        assert_eq!(rt[0].1, vec![(0.2, 0.02)]);
    }

    #[test]
    fn the_csv_and_the_three_charts_are_written() {
        let dir = std::env::temp_dir().join(format!("ig-sweep-{}", std::process::id()));
        let pts = vec![point(Strategy::ALL[0].name(), 0.2, 0, 5.0)];
        let csv = write(&pts, 0.3, "1.000us", &dir).expect("write");
        let text = std::fs::read_to_string(&csv).expect("csv");
        let svg = std::fs::read_to_string(dir.join("ingress-rt-p99.svg")).expect("svg");
        let files = ["ingress-p99.svg", "ingress-loss.svg"].map(|f| dir.join(f).is_file());
        std::fs::remove_dir_all(&dir).expect("clean");
        assert!(text.starts_with("strategy,load,class,"), "{text}");
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(
            svg.contains("RT p99 latency vs offered load (30% RT, x = 1.000us)"),
            "{svg}"
        );
        assert_eq!(files, [true, true]);
        let e = write(&pts, 0.3, "1us", Path::new("/proc/no/such")).expect_err("no dir");
        assert!(format!("{e}").starts_with("creating /proc/no/such"), "{e}");
    }
}
