//! Line charts in SVG for the benchmarks (plotters, no system fonts).

use std::path::Path;

use anyhow::{Result, anyhow};

/// A line chart of named series of `(x, y)` points; `log_x` puts x on a
/// log scale (x must then be ≥ 1).
#[derive(Debug)]
pub struct Chart<'a> {
    pub title: String,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    pub log_x: bool,
    pub series: Vec<(String, Vec<(f64, f64)>)>,
}

const COLORS: [(u8, u8, u8); 8] = [
    (31, 119, 180),
    (214, 39, 40),
    (127, 127, 127),
    (44, 160, 44),
    (255, 127, 14),
    (148, 103, 189),
    (140, 86, 75),
    (23, 190, 207),
];

impl Chart<'_> {
    /// Draws the chart into `file` (900 × 500 SVG).
    pub fn draw(&self, file: &Path) -> Result<()> {
        use plotters::prelude::*;
        let e = |x: &dyn std::fmt::Display| anyhow!("plot {}: {x}", file.display());
        let pts = self.series.iter().flat_map(|s| s.1.iter());
        let xmax = pts.clone().map(|p| p.0).fold(1.0, f64::max).max(2.0);
        let ymax = pts.map(|p| p.1).fold(0.0, f64::max).max(1e-9);
        let root = SVGBackend::new(file, (900, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let mut b = ChartBuilder::on(&root);
        b.caption(&self.title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(70);
        macro_rules! body {
            ($ch:expr) => {{
                let mut ch = $ch.map_err(|x| e(&x))?;
                ch.configure_mesh()
                    .x_desc(self.x_desc)
                    .y_desc(self.y_desc)
                    .x_label_formatter(&|v| compact(*v))
                    .y_label_formatter(&|v| compact(*v))
                    .draw()
                    .map_err(|x| e(&x))?;
                for (i, (name, p)) in self.series.iter().enumerate() {
                    let (r, g, bl) = COLORS[i % COLORS.len()];
                    let c = RGBColor(r, g, bl);
                    ch.draw_series(LineSeries::new(p.iter().copied(), c.stroke_width(2)))
                        .map_err(|x| e(&x))?
                        .label(name.as_str())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                        });
                    ch.draw_series(p.iter().map(|&(x, y)| Circle::new((x, y), 3, c.filled())))
                        .map_err(|x| e(&x))?;
                }
                ch.configure_series_labels()
                    .background_style(WHITE)
                    .border_style(BLACK)
                    .draw()
                    .map_err(|x| e(&x))?;
            }};
        }
        if self.log_x {
            body!(b.build_cartesian_2d((1.0..xmax).log_scale(), 0.0..ymax * 1.15));
        } else {
            body!(b.build_cartesian_2d(0.0..xmax, 0.0..ymax * 1.15));
        }
        root.present().map_err(|x| e(&x))
    }
}

/// `1.5M`, `20k`, `12`, `0.25`: short axis labels.
fn compact(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 10.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::compact;

    #[test]
    fn compact_labels() {
        assert_eq!(compact(16_000_000.0), "16.0M");
        assert_eq!(compact(20_000.0), "20k");
        assert_eq!(compact(100.0), "100");
        assert_eq!(compact(1.0), "1");
        assert_eq!(compact(0.25), "0.25");
        assert_eq!(compact(2.5e9), "2.5G");
    }
}
