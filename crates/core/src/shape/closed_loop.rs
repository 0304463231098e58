//! The closed-loop shaping driver shared by the shaper's tests and
//! `pktsched bench shape`.
//!
//! Every flow keeps `outstanding` packets queued in a [`Shaper`]: each
//! packet released is replaced by a new one stamped at the release time,
//! until the flow has sent `per_flow` packets. Virtual time jumps from one
//! [`Scheduler::next_ready`] to the next, so the loop costs only the
//! shaper's work and this module's per-flow bookkeeping ([`FlowRecord`],
//! one cache line per flow).

use core::num::NonZeroU32;

use crate::flow::{FlowId, Pkt, Rejected};
use crate::sched::Scheduler;
use crate::shape::{Shaper, TimeQueue};
use crate::units::Nanos;

/// What one flow did in a closed loop: one 64-byte line, aligned, so a
/// release updates one line of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(align(64))]
pub struct FlowRecord {
    /// Packets handed to the shaper.
    pub sent: u64,
    /// Packets released.
    pub released: u64,
    /// Release time of the first packet, ns.
    pub first: u64,
    /// Release time of the last packet, ns.
    pub last: u64,
    /// Bytes released after the first packet (the rate's numerator).
    pub bytes_after_first: u64,
    /// Bytes of the burst in progress: released at `last`.
    burst: u64,
    /// Largest number of bytes released at one instant.
    pub max_burst: u64,
}

// One line per record (56 bytes of fields): two more would take two lines.
const _: () = assert!(core::mem::size_of::<FlowRecord>() == 64);

impl FlowRecord {
    /// Relative error of the achieved rate (bytes after the first packet
    /// over the time from the first to the last release) against `bps`;
    /// `None` when the flow released fewer than two packets at distinct
    /// times (no rate to measure).
    pub fn rate_err(&self, bps: u64) -> Option<f64> {
        if self.last <= self.first {
            return None;
        }
        let achieved = self.bytes_after_first as f64 * 8e9 / (self.last - self.first) as f64;
        Some((achieved - bps as f64).abs() / bps as f64)
    }

    #[inline]
    fn record(&mut self, now: u64, len: u32) {
        let len = u64::from(len);
        if self.released == 0 {
            self.first = now;
            self.burst = len;
        } else {
            self.bytes_after_first += len;
            // The burst in progress is the one released at `last`.
            if self.last == now {
                self.burst += len;
            } else {
                self.burst = len;
            }
        }
        self.released += 1;
        self.last = now;
        self.max_burst = self.max_burst.max(self.burst);
    }
}

/// A closed loop over the flows of one shaper, filled and ready to run.
///
/// [`ClosedLoop::fill`] queues the first `outstanding` packets of every
/// flow (at its start time); [`ClosedLoop::run`] releases everything,
/// refilling as it goes. A caller timing the shaper times `run` alone.
#[derive(Debug)]
pub struct ClosedLoop {
    records: Vec<FlowRecord>,
    per_flow: u64,
    len: u32,
    now: Nanos,
}

/// Why a closed loop could not run to the end.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoopError {
    /// The shaper refused a packet.
    #[error("flow {flow}: enqueue refused: {reason}")]
    Refused {
        /// Index of the flow in the loop's list.
        flow: usize,
        /// The shaper's reason.
        reason: String,
    },
    /// More flows than the loop's item type can number.
    #[error("{flows} flows: the loop's packet item numbers at most {max}")]
    TooManyFlows {
        /// Flows given.
        flows: usize,
        /// Most the item type can number.
        max: usize,
    },
    /// A released packet's item names no record of the loop's (a packet
    /// the loop did not make).
    #[error("a released packet's item names record place {place}, which the loop does not have")]
    UnknownItem {
        /// `1 +` the record index the item carried.
        place: usize,
    },
    /// The shaper's next release time was before the current time.
    #[error("next_ready went back in time: {next:?} < now {now:?}")]
    Backwards {
        /// The current time.
        now: Nanos,
        /// What `next_ready` returned.
        next: Nanos,
    },
}

/// What a closed loop's packets carry as their item: the place of their
/// flow's record, `1 + ` its index (the loop keeps an unused record in
/// front, so the item indexes the records with no subtraction). `u64` is
/// the plain choice; `NonZeroU32` lets the flow table's pool slot hold the
/// packet in 32 bytes (its `Option` uses the zero niche), two slots per
/// cache line.
pub trait LoopItem: Sized {
    /// Most records the type can number.
    const MAX: usize;
    /// The item for record `i` (`i < MAX`).
    fn for_record(i: usize) -> Self;
    /// `1 +` the record index the item carries.
    fn place(&self) -> usize;
}

impl LoopItem for u64 {
    const MAX: usize = usize::MAX - 1;
    #[inline(always)]
    fn for_record(i: usize) -> u64 {
        i as u64 + 1
    }
    #[inline(always)]
    fn place(&self) -> usize {
        *self as usize
    }
}

impl LoopItem for NonZeroU32 {
    const MAX: usize = u32::MAX as usize - 1;
    #[inline(always)]
    fn for_record(i: usize) -> NonZeroU32 {
        u32::try_from(i + 1)
            .ok()
            .and_then(NonZeroU32::new)
            .unwrap_or(NonZeroU32::MAX)
    }
    #[inline(always)]
    fn place(&self) -> usize {
        self.get() as usize
    }
}

fn refused<T>(flow: usize, r: &Rejected<T>) -> LoopError {
    LoopError::Refused {
        flow,
        reason: r.reason.to_string(),
    }
}

impl ClosedLoop {
    /// Queues `outstanding.min(per_flow)` packets of `len` bytes for each
    /// of `flows`, flow `i` at `starts[i]` (or 0 when `starts` is empty),
    /// in time order. The packets carry the flow's index as their item
    /// (refused with [`LoopError::TooManyFlows`] beyond what `I` numbers).
    pub fn fill<Q: TimeQueue, I: LoopItem>(
        sh: &mut Shaper<Q, I>,
        flows: &[FlowId],
        starts: &[Nanos],
        outstanding: u64,
        len: u32,
        per_flow: u64,
    ) -> Result<ClosedLoop, LoopError> {
        if flows.len() > I::MAX {
            return Err(LoopError::TooManyFlows {
                flows: flows.len(),
                max: I::MAX,
            });
        }
        let mut order: Vec<(Nanos, usize)> = (0..flows.len())
            .map(|i| (starts.get(i).copied().unwrap_or(Nanos::ZERO), i))
            .collect();
        order.sort_unstable();
        // Record `i` is at `1 + i` (see [`LoopItem`]).
        let mut records = vec![FlowRecord::default(); flows.len() + 1];
        for &(t, i) in &order {
            for _ in 0..outstanding.min(per_flow) {
                sh.enqueue(Pkt::new(flows[i], len, t, I::for_record(i)), t)
                    .map_err(|r| refused(i, &r))?;
                records[i + 1].sent += 1;
            }
        }
        Ok(ClosedLoop {
            records,
            per_flow,
            len,
            now: order.last().map_or(Nanos::ZERO, |s| s.0),
        })
    }

    /// Releases every packet, calling `on_release(shaper, packet, edt,
    /// now)` for each before it is replaced; stops early (between two
    /// instants) once `stop()` says so. Fails if the shaper refuses a
    /// packet or its next release time goes back in time.
    pub fn run<Q: TimeQueue, I: LoopItem>(
        &mut self,
        sh: &mut Shaper<Q, I>,
        mut on_release: impl FnMut(&Shaper<Q, I>, &Pkt<I>, Nanos, Nanos),
        stop: impl Fn() -> bool,
    ) -> Result<(), LoopError> {
        while let Some(t) = sh.next_ready(self.now) {
            if t < self.now {
                return Err(LoopError::Backwards {
                    now: self.now,
                    next: t,
                });
            }
            if stop() {
                break;
            }
            self.now = t;
            let now = t;
            let (records, per_flow, len) = (&mut self.records, self.per_flow, self.len);
            sh.release_each(now, |sh, p, edt| {
                on_release(sh, &p, edt, now);
                let at = p.item.place();
                // Place 0 is the spare record no packet of the loop names.
                let Some(r) = records.get_mut(at).filter(|_| at != 0) else {
                    return Err(LoopError::UnknownItem { place: at });
                };
                r.record(now.0, p.len);
                if r.sent >= per_flow {
                    return Ok(());
                }
                // Counted before the enqueue, so the record is not kept
                // across it; a refusal ends the loop (and uncounts it).
                r.sent += 1;
                let refill = Pkt { len, ts: now, ..p };
                match sh.enqueue(refill, now) {
                    Ok(()) => Ok(()),
                    Err(e) => Err(Self::refused_at(records, at, e)),
                }
            })?;
        }
        Ok(())
    }

    /// A refill the shaper refused: uncounted in its record, reported.
    #[cold]
    #[inline(never)]
    fn refused_at<T>(records: &mut [FlowRecord], at: usize, e: Rejected<T>) -> LoopError {
        if let Some(r) = records.get_mut(at) {
            r.sent -= 1;
        }
        refused(at - 1, &e)
    }

    /// The time of the last release (or of the last start, before `run`).
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Per-flow records, in the order of the flows given to `fill`.
    pub fn records(&self) -> &[FlowRecord] {
        self.records.get(1..).unwrap_or_default()
    }

    /// Packets released in all.
    pub fn released(&self) -> u64 {
        self.records().iter().map(|r| r.released).sum()
    }

    /// Largest burst of any flow, bytes.
    pub fn max_burst(&self) -> u64 {
        self.records()
            .iter()
            .map(|r| r.max_burst)
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `NonZeroU32` item keeps an optional packet in 24 bytes (the
    /// zero niche holds `None`), so the flow table's pool slot (packet,
    /// next index, next length) is 32 bytes: two slots per cache line.
    #[test]
    fn nonzero_item_packs_an_optional_packet_in_24_bytes() {
        assert_eq!(core::mem::size_of::<Option<Pkt<NonZeroU32>>>(), 24);
        assert_eq!(core::mem::size_of::<Option<Pkt<u64>>>(), 32);
        for i in [0usize, 1, 999, <NonZeroU32 as LoopItem>::MAX - 1] {
            assert_eq!(NonZeroU32::for_record(i).place(), i + 1);
        }
        assert_eq!(<u64 as LoopItem>::for_record(7).place(), 8);
    }

    /// A refill the shaper refuses ends the run with the flow and the
    /// reason, and is not counted as sent: the record's `sent` is what the
    /// shaper took (here the refills are made too large for the flow).
    #[test]
    fn a_refused_refill_ends_the_run_uncounted() {
        use crate::shape::{WheelConfig, Wheels};
        use crate::{FlowConfig, Rate};
        let q = Wheels::new(WheelConfig::mltw(1024, 1024, Nanos(1 << 30))).expect("mltw");
        let mut sh: Shaper<Wheels, u64> = Shaper::new(q, Rate::gbit(1));
        let cfg = FlowConfig::default().with_max_len(1000);
        let f = sh.add_flow_bps(cfg, 1_000_000_000).expect("flow");
        let mut cl = ClosedLoop::fill(&mut sh, &[f], &[], 2, 1000, 10).expect("fill");
        cl.len = 1001;
        let err = cl.run(&mut sh, |_, _, _, _| {}, || false);
        assert_eq!(
            err,
            Err(LoopError::Refused {
                flow: 0,
                reason: "too_large".to_string(),
            })
        );
        let r = cl.records()[0];
        assert_eq!((r.sent, r.released), (2, 1));
    }
}
