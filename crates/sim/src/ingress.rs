//! The ingress polling model: per-class receive rings served by the core
//! [`Poller`] with budgets, in virtual time (picoseconds).
//!
//! Each class has its own arrivals (Poisson or periodic, from a seeded
//! ChaCha stream per class) and the classifier puts its packets in the
//! class's ring (SQ: the one shared ring). A ring that is full drops the
//! arriving packet, counted against its class. The poller visits rings as
//! [`Poller::step`] says; a visit takes its packets at once and then
//! spends `x` on each (constant, or uniform in `[x(1−jitter), x]`), so
//! the next visit starts when the batch is done; visiting an empty ring
//! costs nothing. When every ring is empty the poller sleeps until the
//! next arrival. A packet's latency is from its arrival to the end of its
//! service. Next to the measured RT (class 0) latency the result holds
//! the analytic bound ([`pktsched_core::ingress::bound`]) and whether the
//! run met the bound's assumptions.
//!
//! [`sweep`] runs SQ, RR, LL-RR and LL-WFQ over a range of offered loads.

use std::collections::VecDeque;

use hdrhistogram::Histogram;
use pktsched_core::ingress::bound::{self, Bound};
use pktsched_core::ingress::{
    IngressConfig, IngressError, Poller, RingStats, Rings, Step, Strategy,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

pub use crate::ingress_sweep::{SweepPoint, sweep, sweep_config, sweep_csv};

/// Largest number of arrivals one run may simulate.
pub const MAX_PACKETS: u64 = 100_000_000;
/// Largest ring capacity.
pub const MAX_RING: usize = 1 << 20;

/// How a class's packets arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// Exponential gaps.
    Poisson,
    /// Evenly spaced, with a random phase (meets the bound's envelope).
    Periodic,
}

/// One class's traffic.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClassLoad {
    /// Offered load as a fraction of the poller's capacity `1/x`.
    pub load: f64,
    /// How packets arrive.
    pub arrivals: Arrivals,
    /// Capacity of the class's ring (packets).
    pub ring: usize,
}

/// A run of the model.
#[derive(Debug, Clone, PartialEq)]
pub struct IngressSim {
    /// Poller configuration (class 0 is RT).
    pub poller: IngressConfig,
    /// Longest per-packet service time, ps.
    pub x_ps: u64,
    /// Service time spread: uniform in `[x(1−jitter), x]`, `0 ≤ jitter < 1`.
    pub jitter: f64,
    /// Traffic per class (as many as the poller has classes).
    pub classes: Vec<ClassLoad>,
    /// Arrivals to simulate (all classes together).
    pub packets: u64,
    /// Seed of the arrival and service streams.
    pub seed: u64,
}

/// What is wrong with a run's parameters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IngressSimError {
    /// The poller configuration.
    #[error(transparent)]
    Config(#[from] IngressError),
    /// A parameter out of range.
    #[error("{field} = {value}: allowed {allowed}")]
    Range {
        /// The parameter.
        field: IngressParam,
        /// Its value.
        value: String,
        /// What is allowed.
        allowed: String,
    },
}

/// A parameter of an ingress run, as range errors name it (a front end
/// maps it to its own flag or field without parsing the message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IngressParam {
    /// The number of classes (the poller's).
    Classes,
    /// The per-packet service time.
    X,
    /// The service time's jitter.
    Jitter,
    /// Packets to simulate.
    Packets,
    /// The offered load of class `i`.
    Load(usize),
    /// The ring capacity of class `i`.
    Ring(usize),
    /// The RT share of the offered load in a sweep.
    RtShare,
    /// The latency histogram's precision.
    Histogram,
}

impl core::fmt::Display for IngressParam {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Classes => f.write_str("classes"),
            Self::X => f.write_str("x"),
            Self::Jitter => f.write_str("jitter"),
            Self::Packets => f.write_str("packets"),
            Self::Load(i) => write!(f, "load of class {i}"),
            Self::Ring(i) => write!(f, "ring of class {i}"),
            Self::RtShare => f.write_str("rt_share"),
            Self::Histogram => f.write_str("histogram"),
        }
    }
}

fn range(field: IngressParam, value: impl ToString, allowed: impl Into<String>) -> IngressSimError {
    IngressSimError::Range {
        field,
        value: value.to_string(),
        allowed: allowed.into(),
    }
}

/// One class's results (times in ps).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassResult {
    /// The class.
    pub class: usize,
    /// Packets that arrived.
    pub arrivals: u64,
    /// Packets served.
    pub served: u64,
    /// Packets dropped at a full ring.
    pub dropped: u64,
    /// `dropped / arrivals`.
    pub loss: f64,
    /// Served packets per second.
    pub throughput_pps: f64,
    /// Latency percentiles (ps; hdrhistogram, 3 significant digits).
    pub p50_ps: u64,
    /// 99th percentile.
    pub p99_ps: u64,
    /// 99.9th percentile.
    pub p999_ps: u64,
    /// Exact largest latency, ps.
    pub max_ps: u64,
}

/// The RT bound next to what was measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BoundCheck {
    /// `b`: other-ring packets per cycle.
    pub b: u64,
    /// RT load `ρ` (class 0's load).
    pub rho: f64,
    /// Bound on the RT response time `(b+ρ)x/(1−ρ) + x`, ps.
    pub response_ps: f64,
    /// Bound on the RT wait `(b+ρ)x/(1−ρ)`, ps.
    pub wait_ps: f64,
    /// Smallest RT budget for the bound.
    pub min_rt_budget: u64,
    /// Whether the run met the assumptions (periodic RT arrivals, RT
    /// budget ≥ `min_rt_budget`, budgets summing to ≤ the device budget).
    pub assumptions_hold: bool,
    /// Measured RT maximum, ps.
    pub rt_max_ps: u64,
    /// Measured RT 99th percentile, ps.
    pub rt_p99_ps: u64,
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IngressOutcome {
    /// The strategy.
    pub strategy: String,
    /// Virtual time from 0 to the last departure, ps.
    pub duration_ps: u64,
    /// Per class.
    pub classes: Vec<ClassResult>,
    /// Per ring: visits, polls, packets, budget exhausted.
    pub rings: Vec<RingResult>,
    /// The RT bound (none for SQ, or when `ρ ≥ 1`).
    pub bound: Option<BoundCheck>,
}

/// One ring's poller counters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RingResult {
    /// Visits.
    pub visits: u64,
    /// Non-empty visits.
    pub polls: u64,
    /// Packets taken.
    pub packets: u64,
    /// Visits that took their whole quota.
    pub budget_exhausted: u64,
    /// Mean packets per non-empty visit.
    pub packets_per_poll: f64,
}

impl From<&RingStats> for RingResult {
    fn from(s: &RingStats) -> Self {
        RingResult {
            visits: s.visits,
            polls: s.polls,
            packets: s.packets,
            budget_exhausted: s.budget_exhausted,
            packets_per_poll: s.packets_per_poll(),
        }
    }
}

impl IngressSim {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<Poller, IngressSimError> {
        let poller = Poller::new(&self.poller)?;
        if self.classes.len() != self.poller.classes {
            return Err(range(
                IngressParam::Classes,
                self.classes.len(),
                format!("{} (the poller's classes)", self.poller.classes),
            ));
        }
        if self.x_ps == 0 {
            return Err(range(IngressParam::X, "0", "a positive duration"));
        }
        if !(0.0..1.0).contains(&self.jitter) {
            return Err(range(IngressParam::Jitter, self.jitter, "0 <= jitter < 1"));
        }
        if self.packets == 0 || self.packets > MAX_PACKETS {
            return Err(range(
                IngressParam::Packets,
                self.packets,
                format!("1..={MAX_PACKETS}"),
            ));
        }
        for (i, c) in self.classes.iter().enumerate() {
            if !(c.load.is_finite() && c.load > 0.0 && c.load <= 100.0) {
                return Err(range(
                    IngressParam::Load(i),
                    c.load,
                    "0 < load <= 100 (fraction of 1/x)",
                ));
            }
            if c.ring == 0 || c.ring > MAX_RING {
                return Err(range(
                    IngressParam::Ring(i),
                    c.ring,
                    format!("1..={MAX_RING}"),
                ));
            }
        }
        Ok(poller)
    }

    /// Runs the model.
    pub fn run(&self) -> Result<IngressOutcome, IngressSimError> {
        let mut poller = self.validate()?;
        let mut state = State::new(self, &poller)?;
        state.run(self, &mut poller);
        Ok(state.finish(self, &poller))
    }

    /// The analytic bound for this run (none for SQ or `ρ ≥ 1`).
    pub fn bound(&self, poller: &Poller) -> Option<(Bound, bool)> {
        let plan = poller.plan();
        if plan.strategy() == Strategy::Sq {
            return None;
        }
        let rt = plan.ring_of(0);
        let b = plan.others_per_cycle(rt);
        let rho = self.classes[0].load;
        let bd = bound::bound(b, self.x_ps, rho).ok()?;
        let sum: u64 = plan.budgets().iter().map(|&x| u64::from(x)).sum();
        let holds = self.classes[0].arrivals == Arrivals::Periodic
            && u64::from(plan.budget(rt)) >= bd.min_rt_budget
            && (plan.one_ring_per_round() || sum <= u64::from(plan.device_budget()));
        Some((bd, holds))
    }
}

/// A packet in a ring: class and arrival time.
type Queued = (usize, u64);

/// Rings of queued packets; a visit moves its packets into `batch`.
struct SimRings {
    rings: Vec<VecDeque<Queued>>,
    caps: Vec<usize>,
    batch: Vec<Queued>,
}

impl Rings for SimRings {
    fn waiting(&self, r: usize) -> usize {
        self.rings[r].len()
    }
    fn take(&mut self, r: usize, max: usize) -> usize {
        let k = self.rings[r].len().min(max);
        self.batch.clear();
        self.batch.extend(self.rings[r].drain(..k));
        k
    }
}

/// One class's arrival stream.
struct Source {
    rng: ChaCha8Rng,
    arrivals: Arrivals,
    mean_gap_ps: f64,
    next_f: f64,
}

impl Source {
    fn new(seed: u64, class: usize, c: &ClassLoad, x_ps: u64) -> Source {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(class as u64 + 1);
        let mean_gap_ps = x_ps as f64 / c.load;
        let first = match c.arrivals {
            Arrivals::Periodic => rng.random::<f64>() * mean_gap_ps,
            Arrivals::Poisson => exp_gap(&mut rng, mean_gap_ps),
        };
        Source {
            rng,
            arrivals: c.arrivals,
            mean_gap_ps,
            next_f: first,
        }
    }
    fn next_ps(&self) -> u64 {
        self.next_f as u64
    }
    fn advance(&mut self) {
        self.next_f += match self.arrivals {
            Arrivals::Periodic => self.mean_gap_ps,
            Arrivals::Poisson => exp_gap(&mut self.rng, self.mean_gap_ps),
        };
    }
}

fn exp_gap(rng: &mut ChaCha8Rng, mean: f64) -> f64 {
    let u: f64 = 1.0 - rng.random::<f64>(); // (0, 1]
    -u.ln() * mean
}

struct PerClass {
    arrivals: u64,
    served: u64,
    dropped: u64,
    max_ps: u64,
    hist: Histogram<u64>,
}

struct State {
    now: u64,
    sources: Vec<Source>,
    generated: u64,
    rings: SimRings,
    ring_of: Vec<usize>,
    classes: Vec<PerClass>,
    service_rng: ChaCha8Rng,
}

impl State {
    fn new(sim: &IngressSim, poller: &Poller) -> Result<State, IngressSimError> {
        let plan = poller.plan();
        let ring_of: Vec<usize> = (0..plan.classes()).map(|c| plan.ring_of(c)).collect();
        let mut caps = vec![0usize; plan.rings()];
        for (c, load) in sim.classes.iter().enumerate() {
            caps[ring_of[c]] = caps[ring_of[c]].saturating_add(load.ring);
        }
        let mut classes = Vec::with_capacity(sim.classes.len());
        for _ in &sim.classes {
            let hist = Histogram::new(3)
                .map_err(|e| range(IngressParam::Histogram, e, "3 significant digits"))?;
            classes.push(PerClass {
                arrivals: 0,
                served: 0,
                dropped: 0,
                max_ps: 0,
                hist,
            });
        }
        let mut service_rng = ChaCha8Rng::seed_from_u64(sim.seed);
        service_rng.set_stream(0);
        Ok(State {
            now: 0,
            sources: sim
                .classes
                .iter()
                .enumerate()
                .map(|(i, c)| Source::new(sim.seed, i, c, sim.x_ps))
                .collect(),
            generated: 0,
            rings: SimRings {
                rings: vec![VecDeque::new(); plan.rings()],
                caps,
                batch: Vec::new(),
            },
            ring_of,
            classes,
            service_rng,
        })
    }

    /// The class with the earliest next arrival, if any remain.
    fn next_arrival(&self, total: u64) -> Option<(usize, u64)> {
        if self.generated >= total {
            return None;
        }
        self.sources
            .iter()
            .enumerate()
            .map(|(i, s)| (i, s.next_ps()))
            .min_by_key(|&(i, t)| (t, i))
    }

    /// Puts every arrival up to `self.now` into its ring (or drops it).
    fn admit(&mut self, total: u64) {
        while let Some((c, t)) = self.next_arrival(total) {
            if t > self.now {
                break;
            }
            self.sources[c].advance();
            self.generated += 1;
            let pc = &mut self.classes[c];
            pc.arrivals += 1;
            let r = self.ring_of[c];
            if self.rings.rings[r].len() >= self.rings.caps[r] {
                pc.dropped += 1;
            } else {
                self.rings.rings[r].push_back((c, t));
            }
        }
    }

    fn service_ps(&mut self, sim: &IngressSim) -> u64 {
        if sim.jitter == 0.0 {
            return sim.x_ps;
        }
        let f = 1.0 - sim.jitter * self.service_rng.random::<f64>();
        ((sim.x_ps as f64 * f) as u64).clamp(1, sim.x_ps)
    }

    fn run(&mut self, sim: &IngressSim, poller: &mut Poller) {
        loop {
            self.admit(sim.packets);
            match poller.step(&mut self.rings) {
                Step::Visit(t) if t.packets > 0 => {
                    for i in 0..self.rings.batch.len() {
                        let (c, arrived) = self.rings.batch[i];
                        self.now += self.service_ps(sim);
                        let lat = self.now - arrived;
                        let pc = &mut self.classes[c];
                        pc.served += 1;
                        pc.max_ps = pc.max_ps.max(lat);
                        // Auto-resizing; a value it cannot hold is clamped.
                        if pc.hist.record(lat).is_err() {
                            pc.hist.saturating_record(lat);
                        }
                    }
                }
                Step::Visit(_) => {}
                Step::RoundEnd { .. } => {
                    if self.rings.rings.iter().all(VecDeque::is_empty) {
                        match self.next_arrival(sim.packets) {
                            Some((_, t)) => self.now = self.now.max(t),
                            None => return,
                        }
                    }
                }
            }
        }
    }

    fn finish(&self, sim: &IngressSim, poller: &Poller) -> IngressOutcome {
        let secs = self.now.max(1) as f64 / crate::PS_PER_SEC as f64;
        let classes: Vec<ClassResult> = self
            .classes
            .iter()
            .enumerate()
            .map(|(class, p)| {
                let q = |f: f64| {
                    if p.served == 0 {
                        0
                    } else {
                        p.hist.value_at_quantile(f)
                    }
                };
                ClassResult {
                    class,
                    arrivals: p.arrivals,
                    served: p.served,
                    dropped: p.dropped,
                    loss: if p.arrivals == 0 {
                        0.0
                    } else {
                        p.dropped as f64 / p.arrivals as f64
                    },
                    throughput_pps: p.served as f64 / secs,
                    p50_ps: q(0.5),
                    p99_ps: q(0.99),
                    p999_ps: q(0.999),
                    max_ps: p.max_ps,
                }
            })
            .collect();
        let bound = sim.bound(poller).map(|(b, holds)| BoundCheck {
            b: b.b,
            rho: b.rho,
            response_ps: b.response_ps,
            wait_ps: b.wait_ps,
            min_rt_budget: b.min_rt_budget,
            assumptions_hold: holds,
            rt_max_ps: classes[0].max_ps,
            rt_p99_ps: classes[0].p99_ps,
        });
        IngressOutcome {
            strategy: poller.plan().strategy().to_string(),
            duration_ps: self.now,
            classes,
            rings: poller.stats().iter().map(RingResult::from).collect(),
            bound,
        }
    }
}
