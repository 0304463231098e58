//! The simulation's data model: what a scenario describes (link, algorithm
//! or policy tree, flows with their sizes and sources, the PSPAT model's
//! parameters). Built by [`crate::scenario`] from TOML or directly by
//! tests and benchmarks; read by every other module. Imports nothing from
//! the crate.

use std::sync::Arc;

use pktsched_core::Rate;
use pktsched_core::policy::Policy;
use pktsched_core::sched::Algorithm;

/// Packets a greedy flow keeps queued in each system (the scheduler and
/// the fluid reference).
pub const GREEDY_DEPTH: u32 = 2;

/// Packet size distribution of a flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SizeDist {
    /// Every packet has this length.
    Fixed(u32),
    /// Uniform over `min..=max` bytes.
    Uniform(u32, u32),
    /// `(length, weight)` pairs, e.g. the bimodal 64/1500 mix.
    Mix(Vec<(u32, u32)>),
}

impl SizeDist {
    /// Largest length this distribution can produce (the flow's `max_len`).
    pub fn max(&self) -> u32 {
        match self {
            SizeDist::Fixed(l) => *l,
            SizeDist::Uniform(_, b) => *b,
            SizeDist::Mix(v) => v.iter().map(|x| x.0).max().unwrap_or(1),
        }
    }
    /// Mean length in bytes.
    pub fn mean(&self) -> f64 {
        match self {
            SizeDist::Fixed(l) => f64::from(*l),
            SizeDist::Uniform(a, b) => (f64::from(*a) + f64::from(*b)) / 2.0,
            SizeDist::Mix(v) => {
                let w: f64 = v.iter().map(|x| f64::from(x.1)).sum();
                v.iter()
                    .map(|x| f64::from(x.0) * f64::from(x.1))
                    .sum::<f64>()
                    / w
            }
        }
    }
}

/// Traffic source of one flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceSpec {
    /// Always backlogged: the flow keeps [`GREEDY_DEPTH`] packets
    /// queued both in the packet system and in the fluid reference.
    Greedy,
    /// Constant bit rate: the next packet comes one packet time (at `rate`)
    /// after the previous one.
    Cbr {
        /// Sending rate.
        rate: Rate,
    },
    /// Poisson arrivals with mean rate `rate` (exponential gaps).
    Poisson {
        /// Mean rate.
        rate: Rate,
    },
    /// Bursts: CBR at `rate` during ON periods, silent during OFF periods.
    OnOff {
        /// Peak rate during ON.
        rate: Rate,
        /// Mean (or fixed) ON length, ps.
        on_ps: u64,
        /// Mean (or fixed) OFF length, ps.
        off_ps: u64,
        /// Exponentially distributed periods (else fixed).
        exponential: bool,
    },
    /// Replay of `(time_ps, len)` rows, in time order.
    Trace(Vec<(u64, u32)>),
}

/// One simulated flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    /// Index of its `[[flows]]` entry.
    pub group: u32,
    /// Weight (φ = weight / Σ weights).
    pub weight: u32,
    /// Packet sizes.
    pub size: SizeDist,
    /// Traffic source.
    pub source: SourceSpec,
    /// Per-flow queue limit in packets.
    pub limit: u32,
}

/// A `[[flows]]` entry: `count` consecutive flows with one name.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Group {
    /// Name.
    pub name: String,
    /// First flow index.
    pub first: u32,
    /// Number of flows.
    pub count: u32,
    /// A delay target (`max_delay` in the scenario, ps): a packet of these
    /// flows waiting longer is reported as a violation, like a bound.
    pub max_delay_ps: Option<u64>,
}

/// PSPAT arbiter/dispatcher model parameters (also exported as
/// `pktsched_sim::Pspat`, its former name).
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PspatParams {
    /// Δ_A: the arbiter sees arrivals only every `arbiter_ps`.
    pub arbiter_ps: u64,
    /// Δ_D: dispatchers are served every `dispatcher_ps`.
    pub dispatcher_ps: u64,
}

/// A whole simulation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimConfig {
    /// Scenario name.
    pub name: String,
    /// Link rate.
    pub rate: Rate,
    /// Scheduling algorithm.
    pub algorithm: Algorithm,
    /// Arrivals stop at this time (ps).
    pub duration_ps: u64,
    /// Seed of the ChaCha streams.
    pub seed: u64,
    /// After `duration`, serve everything still queued (both systems), so
    /// every packet gets a departure and a fluid finish time.
    pub drain: bool,
    /// Optional PSPAT model.
    pub pspat: Option<PspatParams>,
    /// A policy tree to run instead of `algorithm` (`algorithm =
    /// "policy"` in a scenario).
    pub policy: Option<SimPolicy>,
    /// Flows, indexed by flow id.
    pub flows: Vec<FlowSpec>,
    /// The `[[flows]]` entries.
    pub groups: Vec<Group>,
}

impl SimConfig {
    /// `n` flows of one group, all with the same spec (for tests and
    /// benchmarks).
    pub fn uniform(
        name: &str,
        rate: Rate,
        algorithm: Algorithm,
        duration_ps: u64,
        flows: Vec<FlowSpec>,
    ) -> SimConfig {
        let mut groups: Vec<Group> = Vec::new();
        for (i, f) in flows.iter().enumerate() {
            match groups.last_mut() {
                Some(g) if g.name == format!("g{}", f.group) => g.count += 1,
                _ => groups.push(Group {
                    name: format!("g{}", f.group),
                    first: i as u32,
                    count: 1,
                    max_delay_ps: None,
                }),
            }
        }
        SimConfig {
            name: name.to_string(),
            rate,
            algorithm,
            duration_ps,
            seed: 1,
            drain: true,
            pspat: None,
            policy: None,
            flows,
            groups,
        }
    }

    /// What schedules the link, as reports name it: the algorithm, or
    /// `policy <file>`.
    pub fn scheduler_name(&self) -> String {
        match &self.policy {
            Some(p) => format!("policy {}", p.file),
            None => self.algorithm.to_string(),
        }
    }
}

/// A policy tree in a scenario: the validated policy and, per flow, the
/// node it attaches to and its priority (for `prio` nodes).
#[derive(Clone, Debug)]
pub struct SimPolicy {
    /// The policy file as the scenario names it.
    pub file: String,
    /// The validated tree.
    pub policy: Arc<Policy>,
    /// Per flow: node index ([`Policy::node`]), or `None` for the policy's
    /// own attachment rule (round robin over leaves, or `attach`).
    pub node: Vec<Option<usize>>,
    /// Per flow: `FlowConfig::prio`.
    pub prio: Vec<u32>,
}

impl PartialEq for SimPolicy {
    fn eq(&self, o: &SimPolicy) -> bool {
        self.file == o.file && self.policy == o.policy && self.node == o.node && self.prio == o.prio
    }
}

// A policy holds no floating-point values, so equality is reflexive.
impl Eq for SimPolicy {}
