//! The poller: which ring to visit next and how many packets to take.
//!
//! Rings are visited in cyclic order (0, 1, …, n−1, 0, …). A visit takes
//! at most the ring's budget, and at most what is left of the device
//! budget in the current round. A round ends after one visit (RR), after
//! every ring was visited once, or when the device budget is used up; the
//! next round resumes at the ring after the last one visited, so the
//! cyclic order — and with it the latency bound — holds across rounds.
//!
//! A driver whose round boundary is expensive (a system call to the
//! kernel, a transmit flush) polls a *device* at a time
//! ([`Poller::poll_device`]): rounds follow each other until the device
//! budget is spent or a round finds nothing, as the kernel's NAPI polls a
//! device again while it reports its budget used. With RR a round is one
//! visit, so there the device poll ends only when every ring in turn was
//! found empty ([`RingPlan::rings`] empty rounds in a row): one empty ring
//! does not end it while the others are backlogged. Each round still visits
//! the rings in cyclic order with their budgets, so between two visits of
//! a ring the others take at most their budgets ([`RingPlan::others_per_cycle`]):
//! the bound is unchanged, but a ring with a small budget no longer pays
//! a device round per few packets when the others are idle.

use super::config::{IngressConfig, IngressError, RingPlan};

/// Receive rings as the poller sees them: a daemon implements this over
/// its real rings, the simulator over its model, tests over counters.
pub trait Rings {
    /// Packets waiting in ring `ring`.
    fn waiting(&self, ring: usize) -> usize;
    /// Takes (receives and processes, or hands on) up to `max` packets
    /// from ring `ring`, oldest first; returns how many it took (≤ `max`).
    fn take(&mut self, ring: usize, max: usize) -> usize;
}

/// One visit of a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Take {
    /// The ring visited.
    pub ring: usize,
    /// The most this visit could take (budget capped by the round).
    pub quota: usize,
    /// Packets taken.
    pub packets: usize,
}

/// What one [`Poller::step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Visited a ring.
    Visit(Take),
    /// The round ended; `packets` were taken in it. The next step starts
    /// a new round.
    RoundEnd {
        /// Packets taken in the round.
        packets: usize,
    },
}

/// Counters of one ring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Visits, empty or not.
    pub visits: u64,
    /// Visits that found packets.
    pub polls: u64,
    /// Packets taken.
    pub packets: u64,
    /// Visits that took their whole quota (the kernel's "budget
    /// exhausted": more may be waiting).
    pub budget_exhausted: u64,
}

impl RingStats {
    /// Mean packets per non-empty visit (0 when never polled).
    pub fn packets_per_poll(&self) -> f64 {
        if self.polls == 0 {
            0.0
        } else {
            self.packets as f64 / self.polls as f64
        }
    }
}

/// The polling state machine (deterministic, no I/O).
#[derive(Debug, Clone)]
pub struct Poller {
    plan: RingPlan,
    cursor: usize,
    round_visits: usize,
    round_packets: usize,
    /// The most a round may take: the device budget, or what a device
    /// poll has left of it.
    round_cap: usize,
    rounds: u64,
    stats: Vec<RingStats>,
}

impl Poller {
    /// A poller for a validated configuration.
    pub fn new(cfg: &IngressConfig) -> Result<Poller, IngressError> {
        Ok(Poller::from_plan(cfg.plan()?))
    }

    /// A poller for a plan.
    pub fn from_plan(plan: RingPlan) -> Poller {
        let stats = vec![RingStats::default(); plan.rings()];
        let round_cap = plan.device_budget() as usize;
        Poller {
            plan,
            round_cap,
            cursor: 0,
            round_visits: 0,
            round_packets: 0,
            rounds: 0,
            stats,
        }
    }

    /// The plan (rings, budgets, class → ring).
    pub fn plan(&self) -> &RingPlan {
        &self.plan
    }

    /// Per-ring counters, indexed by ring.
    pub fn stats(&self) -> &[RingStats] {
        &self.stats
    }

    /// Rounds completed.
    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    /// The ring the next visit goes to.
    pub fn next_ring(&self) -> usize {
        self.cursor
    }

    /// Does the next thing: visits one ring, or ends the round. A driver
    /// that models time calls this and lets time pass between visits.
    pub fn step<R: Rings + ?Sized>(&mut self, rings: &mut R) -> Step {
        let max_visits = if self.plan.one_ring_per_round() {
            1
        } else {
            self.plan.rings()
        };
        let device = self.round_cap;
        if self.round_visits >= max_visits || self.round_packets >= device {
            let packets = self.round_packets;
            self.round_visits = 0;
            self.round_packets = 0;
            self.rounds += 1;
            return Step::RoundEnd { packets };
        }
        let ring = self.cursor;
        let quota = (self.plan.budget(ring) as usize).min(device - self.round_packets);
        let packets = if rings.waiting(ring) == 0 {
            0
        } else {
            rings.take(ring, quota).min(quota)
        };
        let s = &mut self.stats[ring];
        s.visits += 1;
        if packets > 0 {
            s.polls += 1;
            s.packets += packets as u64;
        }
        if packets == quota {
            s.budget_exhausted += 1;
        }
        self.round_visits += 1;
        self.round_packets += packets;
        self.cursor = (ring + 1) % self.plan.rings();
        Step::Visit(Take {
            ring,
            quota,
            packets,
        })
    }

    /// One whole round: the visits in order are appended to `visits`
    /// (cleared first); returns the packets taken.
    pub fn poll<R: Rings + ?Sized>(&mut self, rings: &mut R, visits: &mut Vec<Take>) -> usize {
        visits.clear();
        loop {
            match self.step(rings) {
                Step::Visit(t) => visits.push(t),
                Step::RoundEnd { packets } => return packets,
            }
        }
    }

    /// One device poll: rounds until the device budget is spent or a
    /// round takes nothing (with one ring per round, RR: until
    /// [`RingPlan::rings`] rounds in a row took nothing, every ring found
    /// empty once). Every visit is appended to `visits` (cleared first);
    /// returns the packets taken (at most the device budget).
    pub fn poll_device<R: Rings + ?Sized>(
        &mut self,
        rings: &mut R,
        visits: &mut Vec<Take>,
    ) -> usize {
        visits.clear();
        let device = self.plan.device_budget() as usize;
        let empty_to_stop = if self.plan.one_ring_per_round() {
            self.plan.rings()
        } else {
            1
        };
        let (mut total, mut empty) = (0, 0);
        while total < device {
            self.round_cap = device - total;
            let got = loop {
                match self.step(rings) {
                    Step::Visit(t) => visits.push(t),
                    Step::RoundEnd { packets } => break packets,
                }
            };
            total += got;
            empty = if got == 0 { empty + 1 } else { 0 };
            if empty >= empty_to_stop {
                break;
            }
        }
        self.round_cap = device;
        total
    }
}
