//! What a run computes ([`Options`]) and why it may not run
//! ([`SimError`]).

use pktsched_core::sched::ConfigError;

use crate::model::SimConfig;

/// Per-flow delay histograms are kept up to this many flows (others get
/// min/mean/max; the overall histogram is always kept).
pub const HIST_FLOWS: usize = 256;

/// A simulation that could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// The algorithm refused a flow.
    #[error("flow {flow}: {err}")]
    Config {
        /// Flow index.
        flow: usize,
        /// The scheduler's reason.
        err: ConfigError,
    },
    /// The algorithm is not available in this build.
    #[error("{0}")]
    Unsupported(String),
    /// The fluid reference left its proven fixed-point range.
    #[error(
        "the fluid reference left its fixed-point range (packet > 64 KiB or weight sum > 2^32?)"
    )]
    FluidRange,
}

/// What to compute besides the scheduler itself (for cost breakdowns).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Run the GPS fluid reference (lag; greedy flows then also stay
    /// backlogged in the fluid system).
    pub fluid: bool,
    /// Keep delay histograms, WFI, rate bins.
    pub metrics: bool,
    /// Keep one row per packet (flow, len, arrival, departure, fluid).
    pub departures: bool,
    /// Record the ends of busy periods of the link and the fluid system.
    pub busy_ends: bool,
    /// Run the fluid reference on a second thread when the scenario allows
    /// it; the results are the same either way.
    pub fluid_thread: bool,
}

impl Options {
    /// The defaults for `cfg`: everything, except the fluid reference for a
    /// policy tree (flat GPS over the flows' weights is not what a tree
    /// promises, so its lag would mislead).
    pub fn for_cfg(cfg: &SimConfig) -> Options {
        Options {
            fluid: cfg.policy.is_none(),
            ..Options::default()
        }
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            fluid: true,
            metrics: true,
            departures: false,
            busy_ends: false,
            fluid_thread: true,
        }
    }
}
