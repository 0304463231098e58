//! The event loop: [`Engine`] holds the state of one run, picks the next
//! event and hands it to its handler (in `packet_path`), and turns the
//! final state into an [`Outcome`].

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use hdrhistogram::Histogram;
use pktsched_core::Scheduler;

use super::arrivals::ArrivalQueue;
use super::fluid_stream::FluidStream;
use super::options::{HIST_FLOWS, Options, SimError};
use super::pspat::PspatModel;
use super::state::{FlowState, FluidBookkeeping, LinkState, NO_TIME, PacketRecords, RunTotals};
use crate::fluid::Fluid;
use crate::model::SimConfig;
use crate::outcome::{BINS, Outcome};

/// One run of the engine on a scheduler whose flows were added.
pub(super) struct Engine<'c> {
    pub(super) cfg: &'c SimConfig,
    pub(super) opt: Options,
    /// Sum of the flows' weights.
    pub(super) wsum: u64,
    pub(super) flows: FlowState,
    pub(super) records: PacketRecords,
    pub(super) link: LinkState,
    /// Timed sources' next arrivals.
    pub(super) arrivals: ArrivalQueue,
    pub(super) totals: RunTotals,
    pub(super) fluid: FluidBookkeeping,
    pub(super) pspat: Option<PspatModel>,
}

/// When each kind of event is next due ([`NO_TIME`]: not pending), in
/// the order they are handled when they fall on the same picosecond
/// (a wake-up of an idle link first: it only retries the scheduler).
#[derive(Copy, Clone, Debug)]
struct EventTimes {
    wake: u64,
    fluid_departure: u64,
    transmission_end: u64,
    source_arrival: u64,
    arbiter_round: u64,
    dispatch: u64,
    /// The idle link would take a packet from the scheduler once this
    /// instant's events are done.
    link_may_start: bool,
}

impl EventTimes {
    #[inline(always)]
    fn earliest(&self) -> u64 {
        self.source_arrival
            .min(self.transmission_end)
            .min(self.arbiter_round)
            .min(self.dispatch)
            .min(self.wake)
            .min(self.fluid_departure)
    }
}

impl<'c> Engine<'c> {
    /// The initial state of `cfg` (on a second thread's fluid reference if
    /// `threaded` and that thread starts).
    pub(super) fn new(
        cfg: &'c SimConfig,
        opt: Options,
        threaded: bool,
    ) -> Result<Engine<'c>, SimError> {
        let n = cfg.flows.len();
        let bps = cfg.rate.as_bps();
        let wsum: u64 = cfg.flows.iter().map(|f| u64::from(f.weight)).sum();
        let weights: Vec<u32> = cfg.flows.iter().map(|f| f.weight).collect();
        let hist_per_flow = opt.metrics && n <= HIST_FLOWS;
        let bins = if opt.metrics { BINS } else { 0 };
        let flows = FlowState::new(cfg, bps, wsum, bins, hist_per_flow);
        let stream = if threaded {
            FluidStream::start(bps, &weights, &flows.gens, cfg.duration_ps)
        } else {
            None
        };
        let in_engine = opt.fluid && stream.is_none();
        Ok(Engine {
            cfg,
            opt,
            wsum,
            flows,
            records: PacketRecords::default(),
            link: LinkState::new(bps),
            arrivals: ArrivalQueue::default(),
            totals: RunTotals {
                hist: Histogram::new(3).map_err(|e| SimError::Unsupported(e.to_string()))?,
                served: 0,
                packets: 0,
                bin_ps: cfg.duration_ps.div_ceil(BINS as u64).max(1),
                departures: Vec::new(),
                link_busy_ends: Vec::new(),
            },
            fluid: FluidBookkeeping {
                fluid: Fluid::new(
                    if in_engine { bps } else { 1 },
                    if in_engine { &weights } else { &[] },
                ),
                stream,
                overflow: false,
                busy_ends: Vec::new(),
            },
            pspat: cfg.pspat.map(|p| PspatModel::new(p, n)),
        })
    }

    /// Runs to the end (`None`: the fluid thread's premise failed),
    /// storing the virtual time reached in `progress` now and then.
    pub(super) fn run<S: Scheduler<u32> + ?Sized>(
        mut self,
        s: &mut S,
        progress: &AtomicU64,
    ) -> Result<Option<Outcome>, SimError> {
        self.seed_sources(s);
        let mut now = 0u64;
        let mut events = 0u32;
        let mut stopped = false;
        loop {
            events = events.wrapping_add(1);
            // Publish the virtual time; a watcher asks for a stop by
            // leaving `STOP_REQUEST` there (between two events: a safe point).
            if events.is_multiple_of(4096) && progress.swap(now, Relaxed) == super::STOP_REQUEST {
                stopped = true;
                break;
            }
            if self.fluid.stream.as_ref().is_some_and(|p| p.broken) {
                // Dropping the stream and the counts' sender ends the thread.
                return Ok(None);
            }
            let ev = self.next_events(now);
            let t = ev.earliest();
            if ev.link_may_start && t > now {
                self.start_transmission(s, now);
                continue;
            }
            if t == NO_TIME || (!self.cfg.drain && t > self.cfg.duration_ps) {
                break;
            }
            now = t;
            self.handle(s, &ev, t);
        }
        progress.store(now, Relaxed);
        let outcome = self.into_outcome(s, now, stopped)?;
        Ok(outcome.map(|o| Outcome { stopped, ..o }))
    }

    /// First arrivals of the timed sources; greedy flows fill up.
    fn seed_sources<S: Scheduler<u32> + ?Sized>(&mut self, s: &mut S) {
        let n = self.cfg.flows.len();
        for i in 0..n {
            if let Some((t, len)) = self.flows.gens[i].first()
                && t < self.cfg.duration_ps
            {
                self.arrivals.push(t, i as u32, len);
            }
        }
        for i in 0..n {
            self.refill(s, i as u32, 0);
        }
    }

    /// When each kind of event is next due at `now`.
    #[inline(always)]
    fn next_events(&mut self, now: u64) -> EventTimes {
        let link = &self.link;
        let (arbiter_round, dispatch) = match &self.pspat {
            Some(p) => (p.next_round(now, link.sched_queued), p.next_dispatch()),
            None => (NO_TIME, NO_TIME),
        };
        let mut ev = EventTimes {
            wake: link.wake.unwrap_or(NO_TIME),
            fluid_departure: NO_TIME,
            transmission_end: link.wire.map_or(NO_TIME, |w| w.done),
            source_arrival: self.arrivals.next_time().unwrap_or(NO_TIME),
            arbiter_round,
            dispatch,
            link_may_start: self.pspat.is_none()
                && link.wire.is_none()
                && link.sched_queued > 0
                && link.wake.is_none(),
        };
        let other = ev.earliest();
        ev.fluid_departure = if let Some(p) = &mut self.fluid.stream {
            // Only whether a departure comes first matters (at `now` when
            // the idle link is about to take a packet).
            p.peek(if ev.link_may_start { now } else { other })
        } else if self.opt.fluid {
            self.fluid.fluid.next_time().unwrap_or(NO_TIME)
        } else {
            NO_TIME
        };
        ev
    }

    /// Handles the event due at `t` (one per call, in [`EventTimes`]
    /// order).
    #[inline(always)]
    fn handle<S: Scheduler<u32> + ?Sized>(&mut self, s: &mut S, ev: &EventTimes, t: u64) {
        if ev.wake == t {
            // The idle link tries the scheduler again once this instant's
            // other events are done.
            self.link.wake = None;
        } else if ev.fluid_departure == t {
            if self.fluid.stream.is_some() {
                self.stream_departure(s);
            } else {
                self.fluid_departure(s);
            }
        } else if ev.transmission_end == t {
            self.transmission_done(t);
        } else if ev.source_arrival == t
            && let Some(a) = self.arrivals.pop()
        {
            self.arrive(s, a.flow, a.len, a.t_ps, false);
            if let Some((t2, l2)) = self.flows.gens[a.flow as usize].next(a.t_ps, a.len)
                && t2 < self.cfg.duration_ps
            {
                self.arrivals.push(t2, a.flow, l2);
            }
        } else if ev.arbiter_round == t {
            self.arbiter_round(s, t);
        } else if ev.dispatch == t {
            self.dispatch(t);
        }
    }

    /// Ends the fluid thread (checking its premise) and collects what the
    /// run measured, at `end_ps` (`None`: run again on one thread).
    fn into_outcome<S: Scheduler<u32> + ?Sized>(
        mut self,
        s: &mut S,
        end_ps: u64,
        stopped: bool,
    ) -> Result<Option<Outcome>, SimError> {
        let threaded = self.fluid.stream.is_some();
        // The fluid thread's per-flow backlog at the end and its CPU time.
        let mut stream_queued = Vec::new();
        let mut fluid_cpu = None;
        if let Some(stream) = self.fluid.stream.take() {
            let refused: u64 = self
                .flows
                .stats
                .iter()
                .map(|f| f.dropped.iter().sum::<u64>())
                .sum();
            // A stopped run did not drain: the fluid thread's totals are
            // not expected to match the link's.
            let Some(end) = stream.finish(refused, self.cfg.drain && !stopped) else {
                return Ok(None);
            };
            self.fluid.overflow |= end.overflow;
            self.fluid.fluid.bytes_in = end.bytes_in;
            self.fluid.fluid.bytes_out = end.bytes_out;
            stream_queued = end.queued;
            fluid_cpu = end.cpu_ns;
        }
        if self.fluid.overflow || self.fluid.fluid.overflowed() {
            return Err(SimError::FluidRange);
        }
        // Packets that left the link but that the fluid system had not
        // finished when the run stopped (drain = false): report them
        // without a fluid time.
        if self.opt.fluid {
            for id in self.records.departed_unfinished() {
                self.retire_packet(id);
            }
        }
        // B-WFI of periods still open at the end.
        for f in 0..self.cfg.flows.len() {
            if self.flows.stats[f].q_pkts > 0 {
                let gap = self.share_gap_scaled(f);
                let fs = &mut self.flows.stats[f];
                fs.bwfi_scaled = fs.bwfi_scaled.max(gap - fs.min_g);
            }
        }
        let fluid_pending = if threaded {
            stream_queued.iter().map(|&q| u64::from(q)).sum()
        } else if self.opt.fluid {
            (0..self.cfg.flows.len())
                .map(|f| self.fluid.fluid.queued(f as u32) as u64)
                .sum()
        } else {
            0
        };
        let on_wire = u64::from(self.link.wire.is_some());
        let mailbox_end = self.pspat.as_ref().map_or(0, |p| p.in_mailboxes());
        let released_end = self
            .pspat
            .as_ref()
            .map_or(0, |p| p.released_or_in_nic() - on_wire);
        let mut departures = self.totals.departures;
        departures.sort_by_key(|d| (d.departure, d.flow));
        Ok(Some(Outcome {
            flows: self.flows.stats,
            hist: self.totals.hist,
            departures,
            end_ps,
            queued_end: self.link.sched_queued + mailbox_end + released_end,
            mailbox_end,
            released_end,
            on_wire_end: on_wire,
            fluid_pending,
            counters: s.stats(),
            link_busy_ends: self.totals.link_busy_ends,
            fluid_busy_ends: self.fluid.busy_ends,
            fluid_bytes: (self.fluid.fluid.bytes_in, self.fluid.fluid.bytes_out),
            packets: self.totals.packets,
            fluid_threaded: threaded,
            fluid_thread_cpu_ns: fluid_cpu,
            stopped: false,
        }))
    }
}
