//! What the PSPAT runtime reports: the arbiter's counters
//! ([`ArbiterStats`]), a running runtime's snapshot ([`Stats`], serialisable
//! to JSON with serde like [`ClientStats`]) and the final [`Report`] of where
//! every packet went, readable in the style of `tc -s qdisc`
//! ([`Report::tc_style`]).

use pktsched_core::{Counters, DropReason, Pkt};
use serde::Serialize;

use crate::client::ClientStats;

/// The arbiter's own counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ArbiterStats {
    /// Rounds (`do_scan` calls).
    pub loops: u64,
    /// Rounds that moved at least one packet.
    pub busy_loops: u64,
    /// Packets drained from client mailboxes.
    pub drained: u64,
    /// Scheduling decisions: packets released to the link.
    pub decisions: u64,
    /// Bytes released.
    pub bytes: u64,
    /// Packets the scheduler refused (by reason: see the final report).
    pub dropped: u64,
    /// Mailbox reads (one per client per round it was read).
    pub mailbox_reads: u64,
    /// Sum and maximum of the busy rounds' duration, ns (threaded runs).
    /// A round that starts at once after the last reuses that round's end
    /// as its start, so the time between two such rounds (the policy, the
    /// stop check, the lock) counts as busy too.
    pub busy_loop_ns: u64,
    /// See `busy_loop_ns`.
    pub max_loop_ns: u64,
    /// Busy rounds by duration: entry `i` counts rounds of `[2^i, 2^(i+1))`
    /// ns (threaded runs).
    pub loop_ns_log2: [u64; 32],
    /// Settles (heavy barriers before trimming idle clients).
    pub settles: u64,
    /// Times the arbiter went to sleep.
    pub sleeps: u64,
    /// Of `sleeps`, naps: sleeps with packets queued for a busy link and
    /// empty mailboxes (see `Config::nap_cover`).
    pub naps: u64,
    /// Times the nap gate opened (`Config::nap_when_waiting`: the arbiter
    /// thread waited for a core for a quarter of a window); 0 without it.
    pub nap_gate_opened: u64,
    /// Times a TX mailbox was full (the packet waited in the arbiter).
    pub tx_full: u64,
    /// Rounds run by a client because the arbiter was late (counted in
    /// `loops` too; see `handoff`).
    pub assisted_rounds: u64,
    /// Mailbox reads put off because the client's mailbox was read less
    /// than `read_interval` before.
    pub deferred_reads: u64,
    /// Times the arbiter thread waited on the CPU between rounds by
    /// yielding it (`Config::yield_when_idle`) ...
    pub yields: u64,
    /// ... or by a spin-loop hint.
    pub spins: u64,
    /// Times the arbiter thread found a client running a round and waited
    /// for it.
    pub held_waits: u64,
    /// CPU time of the arbiter thread so far, ns (threaded runs, Linux;
    /// as of the last publication): against wall time, how much of it the
    /// thread got a core.
    pub cpu_ns: u64,
    /// Times the arbiter thread stepped aside (clients ran the rounds; see
    /// `Config::step_aside`), of them kept (away served more than 0.95×
    /// the present window's decisions per second), and the time it was
    /// away, ns.
    pub away_periods: u64,
    /// See `away_periods`.
    pub away_kept: u64,
    /// See `away_periods`.
    pub away_ns: u64,
    /// Client-transmit only: released packets with no client to hand them
    /// to (put into the scheduler past the mailboxes, through
    /// `Arbiter::scheduler`): dropped, and counted here.
    pub unowned_dropped: u64,
}

/// What the driver's arbiter thread counts of itself (see the fields of
/// the same names in [`ArbiterStats`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ThreadCounts {
    pub(crate) yields: u64,
    pub(crate) spins: u64,
    pub(crate) held_waits: u64,
    pub(crate) naps: u64,
    pub(crate) nap_gate_opened: u64,
    pub(crate) cpu_ns: u64,
    pub(crate) away_periods: u64,
    pub(crate) away_kept: u64,
    pub(crate) away_ns: u64,
}

impl ThreadCounts {
    /// Writes these counters into `s`.
    pub(crate) fn fill(&self, s: &mut ArbiterStats) {
        s.yields = self.yields;
        s.spins = self.spins;
        s.held_waits = self.held_waits;
        s.naps = self.naps;
        s.nap_gate_opened = self.nap_gate_opened;
        s.cpu_ns = self.cpu_ns;
        s.away_periods = self.away_periods;
        s.away_kept = self.away_kept;
        s.away_ns = self.away_ns;
    }
}

impl ArbiterStats {
    /// Mean packets released per busy round.
    pub fn pkts_per_loop(&self) -> f64 {
        self.decisions as f64 / self.busy_loops.max(1) as f64
    }
    /// Upper bound of the `q` quantile (0..=1) of the busy rounds'
    /// duration, ns (a power of two: the histogram's resolution).
    pub fn loop_ns_quantile(&self, q: f64) -> u64 {
        let total: u64 = self.loop_ns_log2.iter().sum();
        if total == 0 {
            return 0;
        }
        let want = (q.clamp(0.0, 1.0) * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &n) in self.loop_ns_log2.iter().enumerate() {
            seen += n;
            if seen >= want {
                return 1u64 << (i + 1).min(63);
            }
        }
        u64::MAX
    }
    /// Mean duration of a busy round, ns.
    pub fn avg_loop_ns(&self) -> f64 {
        self.busy_loop_ns as f64 / self.busy_loops.max(1) as f64
    }
    /// Counts a busy round that took `ns` nanoseconds (threaded runs).
    pub(crate) fn record_busy_round(&mut self, ns: u64) {
        self.busy_loop_ns += ns;
        self.max_loop_ns = self.max_loop_ns.max(ns);
        let b = (63 - ns.max(1).leading_zeros()) as usize;
        self.loop_ns_log2[b.min(31)] += 1;
    }
}

/// A snapshot of a running runtime.
#[derive(Clone, Debug, Serialize)]
pub struct Stats {
    /// The arbiter's counters (published about every millisecond).
    pub arbiter: ArbiterStats,
    /// Each client's counters (drop fields are filled in the final report).
    pub clients: Vec<ClientStats>,
}

/// Where every packet went. For each client:
/// `sent = drained` and `drained = scheduler enqueued + dropped`; overall
/// `scheduler enqueued = decisions + flushed + returned − returned_cleared`.
/// In client-transmit mode the cleared packets are in the clients' return
/// mailboxes, except the `returned_cleared` ones.
#[derive(Debug)]
pub struct Report<T, O> {
    /// The arbiter's counters.
    pub arbiter: ArbiterStats,
    /// Per client.
    pub clients: Vec<ClientStats>,
    /// The scheduler's `tc -s` counters.
    pub sched: Counters,
    /// Packets transmitted during stop, ignoring the link
    /// ([`StopMode::Drain`](crate::config::StopMode::Drain)).
    pub flushed: u64,
    /// Packets handed back: still queued in the scheduler
    /// ([`StopMode::Return`](crate::config::StopMode::Return)), then, in
    /// client-transmit mode, cleared packets whose client's return mailbox
    /// had no room.
    pub returned: Vec<Pkt<T>>,
    /// How many of `returned` had already been cleared (counted in
    /// `arbiter.decisions` or `flushed`).
    pub returned_cleared: u64,
    /// The outputs (one per dispatcher, or the arbiter's).
    pub outputs: Vec<O>,
}

impl<T, O> Report<T, O> {
    /// The report in the style of `tc -s qdisc`: what was sent at the link's
    /// rate, dropped (by reason), held back and still held, what stop
    /// flushed or handed back, then the arbiter's own counters and one line
    /// per client.
    pub fn tc_style(&self, alg: &str) -> String {
        use std::fmt::Write as _;
        let c = &self.sched;
        let a = &self.arbiter;
        let mut s = String::new();
        let d = c.dropped_total();
        let _ = write!(
            s,
            "qdisc {alg} (pspat arbiter)\n Sent {} bytes {} pkt (dropped {}",
            a.bytes, a.decisions, d.pkts
        );
        for r in DropReason::ALL {
            let n = c.dropped(r).pkts;
            if n > 0 {
                let _ = write!(s, ", {} {n}", r.name());
            }
        }
        let _ = writeln!(
            s,
            ", overlimits {})\n backlog {}b {}p  flushed at stop {}p  returned at stop {}p",
            c.overlimits,
            c.backlog.bytes,
            c.backlog.pkts,
            self.flushed,
            self.returned.len()
        );
        let _ = writeln!(
            s,
            " arbiter: {} decisions, {} rounds ({} busy, {:.1} pkts/busy round, \
             avg {:.0} ns, max {} ns), {} mailbox reads ({} put off), {} settles, \
             {} sleeps ({} naps, nap gate opened {} times), {} yields, {} spins, {} waits for a client's round, \
             {} tx-full, {} rounds run by clients, {:.1} ms CPU, \
             stepped aside {} times ({} kept, {:.1} ms)",
            a.decisions,
            a.loops,
            a.busy_loops,
            a.pkts_per_loop(),
            a.avg_loop_ns(),
            a.max_loop_ns,
            a.mailbox_reads,
            a.deferred_reads,
            a.settles,
            a.sleeps,
            a.naps,
            a.nap_gate_opened,
            a.yields,
            a.spins,
            a.held_waits,
            a.tx_full,
            a.assisted_rounds,
            a.cpu_ns as f64 / 1e6,
            a.away_periods,
            a.away_kept,
            a.away_ns as f64 / 1e6
        );
        for (i, cl) in self.clients.iter().enumerate() {
            let _ = writeln!(
                s,
                " client {i}: sent {} (mailbox full {}, backpressure {}, refused at stop {}) \
                 drained {} dropped queue_full {} too_large {} unknown_flow {}",
                cl.sent,
                cl.mailbox_full,
                cl.backpressure_events,
                cl.refused_stopped,
                cl.drained,
                cl.dropped_queue_full,
                cl.dropped_too_large,
                cl.dropped_unknown_flow
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::ArbiterStats;

    #[test]
    fn busy_rounds_fill_the_log2_histogram() {
        let mut a = ArbiterStats::default();
        for ns in [0, 1, 3, 900, 1000, 1500] {
            a.record_busy_round(ns);
        }
        a.busy_loops = 6;
        assert_eq!(a.busy_loop_ns, 3404);
        assert_eq!(a.max_loop_ns, 1500);
        // 0 and 1 → [1, 2); 3 → [2, 4); 900, 1000 → [512, 1024); 1500 → [1024, 2048).
        assert_eq!(a.loop_ns_log2[..11], [2, 1, 0, 0, 0, 0, 0, 0, 0, 2, 1]);
        assert_eq!(a.loop_ns_quantile(0.5), 4);
        assert_eq!(a.loop_ns_quantile(1.0), 2048);
        assert_eq!(ArbiterStats::default().loop_ns_quantile(0.5), 0);
    }
}
