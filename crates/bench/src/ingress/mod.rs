//! The ingress router's experiment, measured and simulated: what `pktsched
//! plot ingress` and `pktsched calc ingress --sweep` compute, without the
//! command line.
//!
//! - [`point`]: one point directory of `scripts/ingress-qos.sh`
//!   (`RESULTS/points/*/{point,gen,sink,route,router}.json`) read as a
//!   [`Row`]: sent and received per class, loss, latency, the router's
//!   measured per-packet time `x` and the analytic RT bound;
//! - [`report`]: the rows as CSV, JSON, SVG charts and the bound table;
//! - [`targets`]: the targets per strategy (loss-free throughput
//!   and its interpolated crossing, overload RT p99 and loss against SQ,
//!   RT p99 within the bound) and their verdicts as Markdown;
//! - [`sweep`]: the files of `calc ingress --sweep` (the simulated load
//!   sweep's CSV and charts).
//!
//! Bad input (a missing or unreadable file, JSON without a field the point
//! needs) is an [`IngressError`] naming the file and the field.

use std::path::PathBuf;

pub mod point;
pub mod report;
pub mod sweep;
pub mod targets;

pub use point::{LeftOut, Points, Row, find_number, loss, read_point, read_points};

/// Why a results directory, a point or an output file could not be used.
/// Each names the file; the I/O and JSON causes are its
/// [`source`](std::error::Error::source).
#[derive(Debug, thiserror::Error)]
pub enum IngressError {
    /// A file could not be read: missing, not a regular file, over the
    /// size cap or not UTF-8 (the message names the file and why).
    #[error("{0}")]
    Read(String),
    /// A file is not JSON.
    #[error("{}: not JSON", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// A point's `point.json` lacks a number.
    #[error("{}: no number {key:?}", path.display())]
    NoNumber { path: PathBuf, key: &'static str },
    /// The sink's report has no class of that name.
    #[error("{}: no class {class:?}", path.display())]
    NoClass { path: PathBuf, class: &'static str },
    /// A sink class's `ports` is not `LO-HI`.
    #[error("{}: class {class} ports {ports:?}", path.display())]
    Ports {
        path: PathBuf,
        class: &'static str,
        ports: String,
    },
    /// A sink class lacks a figure.
    #[error("{}: class {class:?} has no number {key:?}", path.display())]
    ClassFigure {
        path: PathBuf,
        class: String,
        key: &'static str,
    },
    /// More point directories than [`point::MAX_POINTS`].
    #[error("{}: more than {max} points", path.display())]
    TooManyPoints { path: PathBuf, max: usize },
    /// No point directory could be read: each left out, and why.
    #[error("{}: no readable points (point.json, gen.json, sink.json)", path.display())]
    NoPoints {
        path: PathBuf,
        left_out: Vec<point::LeftOut>,
    },
    /// A directory could not be listed or created, or a file written.
    #[error("{}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The same, with what was being done (`creating`, `writing`).
    #[error("{doing} {}", path.display())]
    IoDoing {
        doing: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A chart could not be drawn (the message names the file).
    #[error("{0}")]
    Chart(String),
    /// The rows could not be serialised as JSON.
    #[error(transparent)]
    Serialise(#[from] serde_json::Error),
}

impl IngressError {
    fn io(path: PathBuf) -> impl FnOnce(std::io::Error) -> Self {
        move |source| Self::Io { path, source }
    }

    fn doing(doing: &'static str, path: PathBuf) -> impl FnOnce(std::io::Error) -> Self {
        move |source| Self::IoDoing {
            doing,
            path,
            source,
        }
    }
}

/// Draws `chart` to `file`.
fn draw(chart: &crate::svg::Chart<'_>, file: &std::path::Path) -> Result<(), IngressError> {
    chart
        .draw(file)
        .map_err(|e| IngressError::Chart(format!("{e:#}")))
}
