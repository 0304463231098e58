//! SVG plots (plotters, SVG backend only: no font libraries needed).
//!
//! - `PREFIX-rate.svg`: mean rate per flow of each `[[flows]]` group over
//!   time (100 bins over `duration`).
//! - `PREFIX-delay-cdf.svg`: delay CDF of each group (needs per-flow
//!   histograms, i.e. at most `HIST_FLOWS` flows; else of all packets).
//! - `PREFIX-wfi.svg`: measured T-WFI (or B-WFI for WF2Q+) of every flow
//!   next to its bound.

use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;
use plotters::prelude::*;

use crate::model::SimConfig;
use crate::outcome::{BINS, Outcome};
use crate::report::Report;

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn path_with(prefix: &Path, suffix: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Turns an error of drawing `file` into a message that names the file
/// (plotters' own says only "backend error").
fn drawing_error<E: std::fmt::Display>(file: &Path) -> impl Fn(E) -> String + '_ {
    move |x| format!("plot `{}`: {x}", file.display())
}

/// Writes the three plots; returns the files written.
pub fn write_all(
    prefix: &Path,
    cfg: &SimConfig,
    out: &Outcome,
    rep: &Report,
) -> Result<Vec<PathBuf>, String> {
    let files = vec![
        path_with(prefix, "-rate.svg"),
        path_with(prefix, "-delay-cdf.svg"),
        path_with(prefix, "-wfi.svg"),
    ];
    rate_plot(&files[0], cfg, out)?;
    cdf_plot(&files[1], cfg, out)?;
    wfi_plot(&files[2], cfg, rep)?;
    Ok(files)
}

fn rate_plot(file: &Path, cfg: &SimConfig, out: &Outcome) -> Result<(), String> {
    let bin_ps = cfg.duration_ps.div_ceil(BINS as u64).max(1);
    let bin_s = bin_ps as f64 / 1e12;
    let mut series = Vec::new();
    let mut ymax: f64 = 1e-9;
    for g in &cfg.groups {
        let r = g.first as usize..(g.first + g.count) as usize;
        let pts: Vec<(f64, f64)> = (0..BINS)
            .map(|b| {
                let bytes: u64 = out.flows[r.clone()]
                    .iter()
                    .map(|f| f.bins.get(b).copied().unwrap_or(0))
                    .sum();
                let mbps = bytes as f64 * 8.0 / bin_s / 1e6 / f64::from(g.count.max(1));
                ymax = ymax.max(mbps);
                ((b as f64 + 0.5) * bin_s * 1e3, mbps)
            })
            .collect();
        series.push((g.name.clone(), pts));
    }
    let root = SVGBackend::new(file, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(drawing_error(file))?;
    let mut ch = ChartBuilder::on(&root)
        .caption(
            format!("{}: rate per flow ({})", cfg.name, cfg.algorithm),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..cfg.duration_ps as f64 / 1e9, 0.0..ymax * 1.1)
        .map_err(drawing_error(file))?;
    ch.configure_mesh()
        .x_desc("time (ms)")
        .y_desc("Mbit/s per flow")
        .draw()
        .map_err(drawing_error(file))?;
    for (i, (name, pts)) in series.into_iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        ch.draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(drawing_error(file))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    ch.configure_series_labels()
        .background_style(WHITE)
        .border_style(BLACK)
        .draw()
        .map_err(drawing_error(file))?;
    root.present().map_err(drawing_error(file))
}

fn cdf_points(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    let n = h.len().max(1) as f64;
    let mut acc = 0u64;
    let mut v = Vec::new();
    for it in h.iter_recorded() {
        acc += it.count_at_value();
        v.push((
            h.highest_equivalent(it.value_iterated_to()) as f64 / 1e3,
            acc as f64 / n,
        ));
    }
    v
}

fn cdf_plot(file: &Path, cfg: &SimConfig, out: &Outcome) -> Result<(), String> {
    let mut series = Vec::new();
    for g in &cfg.groups {
        let r = g.first as usize..(g.first + g.count) as usize;
        let mut acc: Option<Histogram<u64>> = None;
        for f in &out.flows[r] {
            if let Some(h) = f.hist.as_deref() {
                match &mut acc {
                    Some(a) => {
                        let _ = a.add(h);
                    }
                    None => acc = Some(h.clone()),
                }
            }
        }
        if let Some(h) = acc.filter(|h| !h.is_empty()) {
            series.push((g.name.clone(), cdf_points(&h)));
        }
    }
    if series.is_empty() && !out.hist.is_empty() {
        series.push(("all packets".to_string(), cdf_points(&out.hist)));
    }
    let xmax = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .fold(1e-3, f64::max);
    let root = SVGBackend::new(file, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(drawing_error(file))?;
    let mut ch = ChartBuilder::on(&root)
        .caption(
            format!("{}: delay CDF ({})", cfg.name, cfg.algorithm),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..xmax * 1.05, 0.0..1.0)
        .map_err(drawing_error(file))?;
    ch.configure_mesh()
        .x_desc("delay (us)")
        .y_desc("fraction of packets")
        .draw()
        .map_err(drawing_error(file))?;
    for (i, (name, pts)) in series.into_iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        // Step function.
        let mut steps = vec![(0.0, 0.0)];
        for (x, y) in pts {
            let prev = steps.last().map_or(0.0, |p| p.1);
            steps.push((x, prev));
            steps.push((x, y));
        }
        ch.draw_series(LineSeries::new(steps, c.stroke_width(2)))
            .map_err(drawing_error(file))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    ch.configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE)
        .border_style(BLACK)
        .draw()
        .map_err(drawing_error(file))?;
    root.present().map_err(drawing_error(file))
}

fn wfi_plot(file: &Path, cfg: &SimConfig, rep: &Report) -> Result<(), String> {
    // Time-based bound if the algorithm has one, else bytes.
    let time = rep.flows.iter().any(|f| f.twfi_bound_ns.is_some())
        || rep.flows.iter().all(|f| f.bwfi_bound_bytes.is_none());
    type Pts = Vec<(f64, f64)>;
    let (unit, meas, bound): (&str, Pts, Pts) = if time {
        (
            "T-WFI (us)",
            rep.flows
                .iter()
                .map(|f| (f64::from(f.flow), f.twfi_ns.unwrap_or(0.0) / 1e3))
                .collect(),
            rep.flows
                .iter()
                .filter_map(|f| f.twfi_bound_ns.map(|b| (f64::from(f.flow), b / 1e3)))
                .collect(),
        )
    } else {
        (
            "B-WFI (bytes)",
            rep.flows
                .iter()
                .map(|f| (f64::from(f.flow), f.bwfi_bytes))
                .collect(),
            rep.flows
                .iter()
                .filter_map(|f| f.bwfi_bound_bytes.map(|b| (f64::from(f.flow), b)))
                .collect(),
        )
    };
    let ymax = meas.iter().chain(&bound).map(|p| p.1).fold(1e-9, f64::max);
    let ymin = meas.iter().map(|p| p.1).fold(0.0, f64::min);
    let n = rep.flows.len().max(2) as f64;
    let root = SVGBackend::new(file, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(drawing_error(file))?;
    let mut ch = ChartBuilder::on(&root)
        .caption(
            format!("{}: measured vs bound ({})", cfg.name, cfg.algorithm),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..n - 0.5, ymin * 1.1..ymax * 1.1)
        .map_err(drawing_error(file))?;
    ch.configure_mesh()
        .x_desc("flow")
        .y_desc(unit)
        .draw()
        .map_err(drawing_error(file))?;
    let red = RGBColor(214, 39, 40);
    let blue = RGBColor(31, 119, 180);
    if !bound.is_empty() {
        ch.draw_series(LineSeries::new(bound, red.stroke_width(2)))
            .map_err(drawing_error(file))?
            .label("bound")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], red.stroke_width(2)));
    }
    ch.draw_series(
        meas.iter()
            .map(|&(x, y)| Circle::new((x, y), 3, blue.filled())),
    )
    .map_err(drawing_error(file))?
    .label("measured")
    .legend(move |(x, y)| Circle::new((x + 10, y), 3, blue.filled()));
    ch.configure_series_labels()
        .background_style(WHITE)
        .border_style(BLACK)
        .draw()
        .map_err(drawing_error(file))?;
    root.present().map_err(drawing_error(file))
}
