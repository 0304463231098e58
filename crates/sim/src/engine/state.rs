//! The engine's state, one struct per concern: per-flow state
//! ([`FlowState`], with its packed [`FlowHotPath`]), packet records
//! ([`PacketRecords`]), the link ([`LinkState`]), the measurements that are
//! not per flow ([`RunTotals`]) and the fluid reference's bookkeeping
//! ([`FluidBookkeeping`]).

use hdrhistogram::Histogram;

use super::fluid_stream::{FluidStream, NO_PACKET};
use crate::PS_PER_SEC;
use crate::fluid::Fluid;
use crate::metrics::FlowStat;
use crate::model::{SimConfig, SourceSpec};
use crate::outcome::Departure;
use crate::source::{Ahead, Gen};

/// "No time": an event that has not happened (a departure, a fluid
/// finish) or is not pending.
pub(super) const NO_TIME: u64 = u64::MAX;

/// Per-flow constants of the packet path, packed (16 bytes a flow; the
/// scenario's `FlowSpec`s are far larger).
#[derive(Copy, Clone, Debug)]
pub(super) struct FlowHotPath {
    /// ps of queued bytes per 1/φ: 8e12·Σw/(w·R).
    pub(super) ps_per_byte_phi: f64,
    pub(super) weight: u32,
    pub(super) limit: u32,
    pub(super) greedy: bool,
}

/// Everything the engine keeps per flow, indexed by flow id.
pub(super) struct FlowState {
    /// What the packet path reads of each flow's configuration.
    pub(super) hot: Vec<FlowHotPath>,
    /// The flows' seeded traffic sources.
    pub(super) gens: Vec<Gen>,
    /// Greedy flows' next lengths (32 bytes a flow).
    pub(super) ahead: Vec<Ahead>,
    /// The flows' measurements.
    pub(super) stats: Vec<FlowStat>,
}

impl FlowState {
    /// The flows of `cfg` on a link of `bps` bit/s (`wsum`: sum of the
    /// weights), with rate bins and per-flow histograms as asked.
    pub(super) fn new(
        cfg: &SimConfig,
        bps: u64,
        wsum: u64,
        bins: usize,
        hist_per_flow: bool,
    ) -> FlowState {
        FlowState {
            hot: cfg
                .flows
                .iter()
                .map(|f| FlowHotPath {
                    ps_per_byte_phi: 8.0 * PS_PER_SEC as f64 * wsum as f64
                        / (f64::from(f.weight) * bps as f64),
                    weight: f.weight,
                    limit: f.limit,
                    greedy: matches!(f.source, SourceSpec::Greedy),
                })
                .collect(),
            gens: cfg
                .flows
                .iter()
                .enumerate()
                .map(|(i, f)| Gen::new(cfg.seed, i as u32, &f.size, &f.source))
                .collect(),
            ahead: vec![Ahead::new(); cfg.flows.len()],
            stats: (0..cfg.flows.len())
                .map(|_| FlowStat::new(bins, hist_per_flow))
                .collect(),
        }
    }
}

/// One packet in flight (times in ps, [`NO_TIME`] until they happen).
#[derive(Copy, Clone, Debug)]
pub(super) struct PacketRecord {
    pub(super) arrival: u64,
    /// End of its transmission on the link.
    pub(super) departure: u64,
    /// Its GPS fluid finish.
    pub(super) fluid_finish: u64,
    /// The T-WFI allowance: the delay its flow's share of the link would
    /// give it, ps.
    pub(super) allowance: f64,
    pub(super) len: u32,
    pub(super) flow: u32,
    /// Next packet of the flow in the fluid system (fluid thread only).
    pub(super) fluid_next: u32,
}

impl PacketRecord {
    /// A packet of `flow` arriving at `arrival`.
    #[inline]
    pub(super) fn arriving(flow: u32, len: u32, arrival: u64, allowance: f64) -> PacketRecord {
        PacketRecord {
            arrival,
            departure: NO_TIME,
            fluid_finish: NO_TIME,
            allowance,
            len,
            flow,
            fluid_next: NO_PACKET,
        }
    }
}

/// Packet records, indexed by packet id (the scheduler's item); ids are
/// reused once a packet has both left the link and finished in the fluid
/// system.
#[derive(Default)]
pub(super) struct PacketRecords {
    pub(super) recs: Vec<PacketRecord>,
    pub(super) free: Vec<u32>,
}

impl PacketRecords {
    /// Stores `r`, returning its id.
    #[inline]
    pub(super) fn alloc(&mut self, r: PacketRecord) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.recs[i as usize] = r;
                i
            }
            None => {
                self.recs.push(r);
                (self.recs.len() - 1) as u32
            }
        }
    }

    /// Frees the record `id`.
    #[inline]
    pub(super) fn release(&mut self, id: u32) {
        self.free.push(id);
    }

    /// Ids of packets that left the link and whose records are still held
    /// (waiting for a fluid finish), in id order.
    pub(super) fn departed_unfinished(&self) -> Vec<u32> {
        let mut freed = vec![false; self.recs.len()];
        for &i in &self.free {
            freed[i as usize] = true;
        }
        freed
            .iter()
            .enumerate()
            .filter(|&(i, &f)| !f && self.recs[i].departure != NO_TIME)
            .map(|(i, _)| i as u32)
            .collect()
    }
}

/// The packet on the wire.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct OnWire {
    pub(super) id: u32,
    pub(super) flow: u32,
    /// End of its transmission, ps.
    pub(super) done: u64,
}

/// The link and the scheduler's backlog.
pub(super) struct LinkState {
    /// Link rate, bit/s.
    pub(super) bps: u64,
    /// Packets in the scheduler.
    pub(super) sched_queued: u64,
    pub(super) wire: Option<OnWire>,
    /// When a shaped scheduler that held its packets back lets the next
    /// one go (ps).
    pub(super) wake: Option<u64>,
    /// Busy period: ps so far (floor) and remainder (in 1/R units).
    pub(super) busy_ps: u64,
    pub(super) busy_rem: u64,
    /// End of the last transmission.
    pub(super) last_done: u64,
}

impl LinkState {
    pub(super) fn new(bps: u64) -> LinkState {
        LinkState {
            bps,
            sched_queued: 0,
            wire: None,
            wake: None,
            busy_ps: 0,
            busy_rem: 0,
            last_done: NO_TIME,
        }
    }

    /// When a packet of `len` bytes the link starts at `now` has been sent:
    /// `start + ⌈bits_so_far·10^12/R⌉` within a busy period, with an exact
    /// remainder.
    #[inline]
    pub(super) fn transmission_end(&mut self, now: u64, len: u32) -> u64 {
        if now != self.last_done {
            // A new busy period.
            self.busy_ps = now;
            self.busy_rem = 0;
        }
        let num = u64::from(len) * 8 * PS_PER_SEC;
        self.busy_ps += num / self.bps;
        self.busy_rem += num % self.bps;
        if self.busy_rem >= self.bps {
            self.busy_ps += 1;
            self.busy_rem -= self.bps;
        }
        self.busy_ps + u64::from(self.busy_rem > 0)
    }
}

/// Measurements of the whole run (the per-flow ones are in
/// [`FlowState::stats`]).
pub(super) struct RunTotals {
    /// Delay histogram of all packets (ns).
    pub(super) hist: Histogram<u64>,
    /// Bytes the link has sent.
    pub(super) served: u64,
    /// Packets the link has sent.
    pub(super) packets: u64,
    /// Width of a rate bin, ps.
    pub(super) bin_ps: u64,
    pub(super) departures: Vec<Departure>,
    pub(super) link_busy_ends: Vec<u64>,
}

/// The GPS fluid reference: run here ([`Fluid`]) or on its own thread
/// ([`FluidStream`]).
pub(super) struct FluidBookkeeping {
    /// The fluid system when the engine runs it (a placeholder otherwise).
    pub(super) fluid: Fluid,
    /// The stream when the fluid reference runs on its own thread.
    pub(super) stream: Option<FluidStream>,
    /// The fluid system left its fixed-point range.
    pub(super) overflow: bool,
    pub(super) busy_ends: Vec<u64>,
}
