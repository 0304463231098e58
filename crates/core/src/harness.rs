//! The closed-loop scheduler harness behind `pktsched bench sched`.
//!
//! Same semantics as FreeBSD dummynet's userspace `test` program, so the
//! figures can be set side by side:
//!
//! - the loop runs `n` iterations; each is one enqueue (in the filling
//!   phase) or one dequeue (in the draining phase);
//! - the phase flips to draining when the total backlog reaches `qmax` and
//!   back to filling when it falls to `qmin` (hysteresis);
//! - each new packet goes to the flow with the shortest backlog (flows are
//!   kept in lists by backlog, capped at 30, and the lowest non-empty list is
//!   found with one find-first-set, as dummynet does);
//! - a packet's length is its flowset's length;
//! - the figure reported by the caller is wall time ÷ enqueues, i.e. the cost
//!   of one enqueue+dequeue pair plus the harness.
//!
//! Nothing here reads a clock: the caller times [`Harness::run`].
//!
//! # Flowset syntax
//!
//! A comma-separated list of `weight:len:flows`. `weight` and `len` may be
//! ranges `min-max[-steps]` (steps default to 2 when min ≠ max), which expand
//! into one flowset per (weight, len) step, as in dummynet. Empty fields take
//! the defaults weight 1, len 1000, flows 1. Numbers accept the suffixes
//! `K` (×1000), `M` (×10^6), `k` (×1024) and `m` (×2^20). Examples:
//! `1::512,8::64`, `1::32768,2::4096,4::2048,8::1024,128::16,1024::1`,
//! `1-8-4:64-1500-3:16`.

use crate::flow::{FlowConfig, FlowId, Pkt};
use crate::sched::{ConfigError, Scheduler};
use crate::units::Nanos;

/// One expanded flowset: `flows` flows of weight `weight` sending packets of
/// `len` bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Flowset {
    /// Weight of each flow.
    pub weight: u32,
    /// Packet length in bytes.
    pub len: u32,
    /// Number of flows.
    pub flows: u32,
}

/// A flowset string that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "flowset `{spec}`: {what}; expected `weight:len:flows` (weight and len may be ranges `min-max[-steps]`, flows a count), e.g. `1::512,8::64`"
)]
pub struct FlowsetError {
    /// The offending flowset.
    pub spec: String,
    /// What was wrong.
    pub what: String,
}

/// Parses a harness number: digits with an optional suffix `K` (×1000),
/// `M` (×10^6), `G` (×10^9), `k` (×1024), `m` (×2^20).
pub fn parse_count(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, mult) = match s.as_bytes().last() {
        Some(b'K') => (&s[..s.len() - 1], 1_000),
        Some(b'M') => (&s[..s.len() - 1], 1_000_000),
        Some(b'G') => (&s[..s.len() - 1], 1_000_000_000),
        Some(b'k') => (&s[..s.len() - 1], 1 << 10),
        Some(b'm') => (&s[..s.len() - 1], 1 << 20),
        _ => (s, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(format!(
            "`{s}` is not a count; write digits with an optional suffix K (×1000), M (×10^6), G (×10^9), k (×1024) or m (×2^20)"
        ));
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|v| v.checked_mul(mult))
        .ok_or_else(|| format!("`{s}` is too large (maximum {})", u64::MAX))
}

/// A backlog bound: an absolute packet count, or a count per flow (suffix
/// `n`, as in dummynet: `4n` = 4 × number of flows).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum QBound {
    /// Packets in total.
    Abs(u64),
    /// Packets per flow.
    PerFlow(u64),
}

impl QBound {
    /// Parses `30`, `30n`, `1K`...
    pub fn parse(s: &str) -> Result<QBound, String> {
        match s.trim().strip_suffix('n') {
            Some(p) => parse_count(p).map(QBound::PerFlow),
            None => parse_count(s).map(QBound::Abs),
        }
    }
    /// The bound for `flows` flows.
    pub fn resolve(self, flows: u64) -> u64 {
        match self {
            QBound::Abs(v) => v,
            QBound::PerFlow(v) => v.saturating_mul(flows),
        }
    }
}

impl core::fmt::Display for QBound {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            QBound::Abs(v) => write!(f, "{v}"),
            QBound::PerFlow(v) => write!(f, "{v}n"),
        }
    }
}

fn range_field(
    spec: &str,
    field: &str,
    name: &str,
    default: u64,
) -> Result<Vec<u64>, FlowsetError> {
    let err = |what: String| FlowsetError {
        spec: spec.to_string(),
        what,
    };
    if field.trim().is_empty() {
        return Ok(vec![default]);
    }
    let parts: Vec<&str> = field.split('-').collect();
    if parts.len() > 3 {
        return Err(err(format!("{name} `{field}` has more than min-max-steps")));
    }
    let num = |s: &str| parse_count(s).map_err(|e| err(format!("{name}: {e}")));
    let lo = num(parts[0])?;
    let hi = if parts.len() > 1 { num(parts[1])? } else { lo };
    let steps = if parts.len() > 2 {
        num(parts[2])?
    } else if hi == lo {
        1
    } else {
        2
    };
    if lo == 0 {
        return Err(err(format!("{name} must be at least 1")));
    }
    if hi < lo {
        return Err(err(format!("{name} range {lo}-{hi} goes down")));
    }
    if steps == 0 || steps > 1 << 16 {
        return Err(err(format!("{name} steps {steps} must be in 1..=65536")));
    }
    // u128: (hi − lo) × i cannot overflow; the result lies in lo..=hi.
    let (lo128, span, div) = (
        u128::from(lo),
        u128::from(hi - lo),
        u128::from((steps - 1).max(1)),
    );
    Ok((0..steps)
        .map(|i| (lo128 + span * u128::from(i) / div) as u64)
        .collect())
}

/// Most flows a flowset list may describe in all.
pub const MAX_FLOWS: u64 = 1 << 24;

/// Parses a comma-separated flowset list into expanded flowsets.
pub fn parse_flowsets(s: &str) -> Result<Vec<Flowset>, FlowsetError> {
    let mut out = Vec::new();
    for spec in s.split(',') {
        let spec = spec.trim();
        let err = |what: &str| FlowsetError {
            spec: spec.to_string(),
            what: what.to_string(),
        };
        if spec.is_empty() {
            return Err(err("empty flowset"));
        }
        let fields: Vec<&str> = spec.split(':').collect();
        if fields.len() > 3 {
            return Err(err("more than three `:`-separated fields"));
        }
        let weights = range_field(spec, fields[0], "weight", 1)?;
        let lens = range_field(spec, fields.get(1).copied().unwrap_or(""), "len", 1000)?;
        let flows = match fields.get(2).map(|f| f.trim()) {
            None | Some("") => 1,
            Some(f) => parse_count(f).map_err(|e| err(&format!("flows: {e}")))?,
        };
        if flows == 0 {
            return Err(err("flows must be at least 1"));
        }
        // Check the size before expanding (a short string can ask for 2^32
        // flowsets).
        let planned = out
            .iter()
            .map(|f: &Flowset| u128::from(f.flows))
            .sum::<u128>()
            + weights.len() as u128 * lens.len() as u128 * u128::from(flows);
        if planned > MAX_FLOWS as u128 {
            return Err(err(&format!("{planned} flows in all, above {MAX_FLOWS}")));
        }
        let to32 = |v: u64, name: &str| {
            u32::try_from(v).map_err(|_| err(&format!("{name} {v} does not fit in 32 bits")))
        };
        for &w in &weights {
            for &l in &lens {
                out.push(Flowset {
                    weight: to32(w, "weight")?,
                    len: to32(l, "len")?,
                    flows: to32(flows, "flows")?,
                });
            }
        }
    }
    let total: u64 = out.iter().map(|f| u64::from(f.flows)).sum();
    if total > MAX_FLOWS {
        return Err(FlowsetError {
            spec: s.to_string(),
            what: format!("{total} flows in all, above 16777216"),
        });
    }
    Ok(out)
}

/// Results of one harness run.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct RunStats {
    /// Loop iterations.
    pub loops: u64,
    /// Packets offered.
    pub enqueues: u64,
    /// Packets refused by the scheduler.
    pub drops: u64,
    /// Packets dequeued.
    pub dequeues: u64,
    /// Completed fill/drain cycles (the backlog went up to `qmax` and back
    /// down to `qmin`). A run with fewer than two did not reach the steady
    /// state: use a larger `n`.
    pub cycles: u64,
    /// Worst per-flow byte-WFI seen (bytes), if tracked.
    pub worst_wfi_bytes: Option<f64>,
    /// Flow with the worst WFI.
    pub worst_wfi_flow: Option<u32>,
}

const BACKLOG: usize = 30;
/// Backlog lists 0..=BACKLOG in use; the arrays have one entry per bit of
/// the 64-bit mask, so the list a find-first-set returns needs no bounds
/// check.
const LISTS: usize = 64;

/// The closed-loop harness. Generic over the scheduler so the loop is
/// monomorphised (no virtual calls in the timed path).
#[derive(Debug)]
pub struct Harness<S> {
    sched: S,
    /// Per flow: list links, backlog and packet length, in one record so
    /// one cache line serves the whole per-packet update.
    fl: Vec<HFlow>,
    weight: Vec<u32>,
    heads: [u32; LISTS],
    tails: [u32; LISTS],
    mask: u64,
    qmin: u64,
    qmax: u64,
    pending: u64,
    filling: bool,
    stats: RunStats,
    wfi: Option<Wfi>,
}

/// Byte-WFI tracking against each flow's guaranteed share, as dummynet's
/// harness and the published bounds define it: over each backlogged period
/// of flow i, it was owed `(S − S0_i) × w_i / W` bytes, where `S` counts the
/// bytes the whole scheduler sent and `W` is the sum of the weights of all
/// flows; WFI is that minus what it got, sampled just before each of its
/// departures (where the difference peaks).
#[derive(Debug)]
struct Wfi {
    s: u64,
    wsum: u64,
    s0: Vec<u64>,
    got: Vec<u64>,
    worst: f64,
    worst_flow: u32,
}

const NIL: u32 = u32::MAX;

/// Harness state of one flow. Flows sit in intrusive lists by backlog
/// (index = min(queued, 30)).
#[derive(Copy, Clone, Debug)]
struct HFlow {
    next: u32,
    prev: u32,
    queued: u32,
    len: u32,
}

impl<S: Scheduler<u64>> Harness<S> {
    /// Builds the harness: adds every flow of `flowsets` to `sched` with the
    /// flowset's weight, `max_len = len` and a queue limit of at least
    /// `qmax` (so drops only come from the scheduler's own limits).
    pub fn new(
        sched: S,
        flowsets: &[Flowset],
        qmin: QBound,
        qmax: QBound,
    ) -> Result<Harness<S>, HarnessError> {
        let nflows: u64 = flowsets.iter().map(|f| u64::from(f.flows)).sum();
        let qmin = qmin.resolve(nflows);
        let qmax = qmax.resolve(nflows);
        if qmax <= qmin {
            return Err(HarnessError::Bounds { qmin, qmax });
        }
        // Shortest-backlog placement keeps flows near the average of
        // qmax / flows packets; refuse a qmax whose average alone would not
        // fit the algorithm's per-flow limit.
        let max_limit = sched.limits().max_limit;
        let per_flow = qmax.div_ceil(nflows.max(1)).saturating_add(1);
        if per_flow > max_limit {
            return Err(HarnessError::QmaxTooLarge {
                qmax,
                per_flow,
                max_limit,
            });
        }
        let limit = u32::try_from(qmax.saturating_add(1).min(max_limit))
            .unwrap_or(u32::MAX)
            .max(FlowConfig::DEFAULT_LIMIT.min(max_limit as u32));
        let mut h = Harness {
            sched,
            fl: Vec::new(),
            weight: Vec::new(),
            heads: [NIL; LISTS],
            tails: [NIL; LISTS],
            mask: 0,
            qmin,
            qmax,
            pending: 0,
            filling: true,
            stats: RunStats::default(),
            wfi: None,
        };
        for (i, fs) in flowsets.iter().enumerate() {
            let cfg = FlowConfig {
                weight: fs.weight,
                max_len: fs.len,
                limit: limit.min(h.sched.limits().max_limit as u32),
                ..FlowConfig::default()
            };
            for _ in 0..fs.flows {
                let id = h
                    .sched
                    .add_flow(cfg)
                    .map_err(|e| HarnessError::Flow { flowset: i, err: e })?;
                debug_assert_eq!(id.index(), h.fl.len());
                h.fl.push(HFlow {
                    next: NIL,
                    prev: NIL,
                    queued: 0,
                    len: fs.len,
                });
                h.weight.push(fs.weight);
                let f = h.fl.len() as u32 - 1;
                h.link(0, f);
            }
        }
        Ok(h)
    }

    /// Turns on byte-WFI tracking (costs a division per dequeue).
    pub fn track_wfi(&mut self) {
        let n = self.fl.len();
        self.wfi = Some(Wfi {
            s: 0,
            wsum: self
                .weight
                .iter()
                .map(|&w| u64::from(w))
                .sum::<u64>()
                .max(1),
            s0: vec![0; n],
            got: vec![0; n],
            worst: 0.0,
            worst_flow: 0,
        });
    }

    /// The scheduler under test.
    pub fn sched(&self) -> &S {
        &self.sched
    }

    /// Results so far.
    pub fn stats(&self) -> RunStats {
        let mut s = self.stats.clone();
        if let Some(w) = &self.wfi {
            s.worst_wfi_bytes = Some(w.worst);
            s.worst_wfi_flow = Some(w.worst_flow);
        }
        s
    }

    /// Appends flow `f` to backlog list `list` (set-up only; the loop
    /// moves flows with [`Harness::set_queued`]).
    fn link(&mut self, list: usize, f: u32) {
        let t = self.tails[list];
        let r = &mut self.fl[f as usize];
        r.prev = t;
        r.next = NIL;
        if t == NIL {
            self.heads[list] = f;
        } else {
            self.fl[t as usize].next = f;
        }
        self.tails[list] = f;
        self.mask |= 1 << list;
    }

    /// Sets flow `f`'s count from `from` to `to` packets and, when its
    /// backlog list changes, moves it from the old list to the tail of the
    /// new one. `f`'s own record is looked up once; list indices are below
    /// 31, so the list arrays need no bounds checks.
    #[inline(always)]
    fn set_queued(&mut self, f: u32, from: u32, to: u32) {
        let (a, b) = ((from as usize).min(BACKLOG), (to as usize).min(BACKLOG));
        let fl = &mut self.fl[..];
        let Some(r) = fl.get_mut(f as usize) else {
            return;
        };
        r.queued = to;
        if a == b {
            return;
        }
        let (p, n) = (r.prev, r.next);
        let t = self.tails[b];
        r.prev = t;
        r.next = NIL;
        // Out of list `a` (`p` and `n` are in `a`, `t` in `b`: all differ
        // from `f` and from each other's roles).
        match fl.get_mut(p as usize) {
            Some(x) => x.next = n,
            None => self.heads[a] = n,
        }
        match fl.get_mut(n as usize) {
            Some(x) => x.prev = p,
            None => self.tails[a] = p,
        }
        if self.heads[a] == NIL {
            self.mask &= !(1 << a);
        }
        // Onto the tail of list `b`.
        match fl.get_mut(t as usize) {
            Some(x) => x.next = f,
            None => self.heads[b] = f,
        }
        self.tails[b] = f;
        self.mask |= 1 << b;
    }

    /// Runs `loops` iterations. May be called repeatedly (for progress
    /// reporting); the state carries over.
    pub fn run(&mut self, loops: u64) {
        if self.wfi.is_some() {
            self.run_inner::<true>(loops)
        } else {
            self.run_inner::<false>(loops)
        }
    }

    #[inline(always)]
    fn run_inner<const WFI: bool>(&mut self, loops: u64) {
        let now = Nanos::ZERO;
        for _ in 0..loops {
            if self.filling && self.pending >= self.qmax {
                self.filling = false;
            } else if !self.filling && self.pending <= self.qmin {
                self.filling = true;
                self.stats.cycles += 1;
            }
            if self.filling && self.mask != 0 {
                let list = self.mask.trailing_zeros() as usize;
                let f = self.heads[list];
                let HFlow { queued: q, len, .. } = self.fl[f as usize];
                let pkt = Pkt {
                    flow: FlowId(f),
                    len,
                    ts: now,
                    // The packet's id is its arrival number.
                    item: self.stats.enqueues,
                };
                self.stats.enqueues += 1;
                match self.sched.enqueue(pkt, now) {
                    Ok(()) => {
                        self.pending += 1;
                        self.set_queued(f, q, q + 1);
                        if WFI && q == 0 {
                            self.wfi_start(f);
                        }
                    }
                    Err(_) => self.stats.drops += 1,
                }
            } else if let Some(p) = self.sched.dequeue(now) {
                self.stats.dequeues += 1;
                self.pending -= 1;
                let f = p.flow.0;
                let q = self.fl[f as usize].queued;
                self.set_queued(f, q, q - 1);
                if WFI {
                    self.wfi_depart(f, p.len);
                }
            } else {
                // Nothing queued and nothing to send: flip to filling.
                self.filling = true;
            }
        }
        // Every iteration is one loop (counted once, outside the loop).
        self.stats.loops += loops;
    }

    fn wfi_start(&mut self, f: u32) {
        let Some(w) = self.wfi.as_mut() else { return };
        w.s0[f as usize] = w.s;
        w.got[f as usize] = 0;
    }

    fn wfi_depart(&mut self, f: u32, len: u32) {
        let Some(w) = self.wfi.as_mut() else { return };
        let fi = f as usize;
        let owed = u128::from(self.weight[fi]) * u128::from(w.s - w.s0[fi]);
        let lag = owed as f64 / w.wsum as f64 - w.got[fi] as f64;
        if lag > w.worst {
            w.worst = lag;
            w.worst_flow = f;
        }
        w.got[fi] += u64::from(len);
        w.s += u64::from(len);
    }
}

/// Why the harness could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HarnessError {
    /// `qmax` must be above `qmin`.
    #[error("qmax ({qmax} packets) must be greater than qmin ({qmin} packets)")]
    Bounds {
        /// Resolved qmin.
        qmin: u64,
        /// Resolved qmax.
        qmax: u64,
    },
    /// `qmax` needs per-flow queues longer than the algorithm allows.
    #[error(
        "qmax ({qmax} packets) needs up to {per_flow} packets per flow, above the algorithm's queue limit of {max_limit}; use a smaller --qmax or more flows"
    )]
    QmaxTooLarge {
        /// Resolved qmax.
        qmax: u64,
        /// Packets per flow it needs.
        per_flow: u64,
        /// The algorithm's per-flow limit.
        max_limit: u64,
    },
    /// The scheduler refused a flow.
    #[error("flowset #{}: {err}", flowset + 1)]
    Flow {
        /// Index of the flowset (0-based).
        flowset: usize,
        /// The scheduler's reason.
        err: ConfigError,
    },
}

/// The harness's baseline "no scheduler": one plain FIFO of packets, no
/// per-flow state or counters (dummynet's `none`).
#[derive(Debug, Default)]
pub struct NoSched {
    q: std::collections::VecDeque<Pkt<u64>>,
    stats: crate::flow::Counters,
    flows: u32,
}

impl Scheduler<u64> for NoSched {
    fn name(&self) -> &'static str {
        "none"
    }
    fn limits(&self) -> crate::sched::Limits {
        crate::sched::Limits::generic("none")
    }
    fn add_flow(&mut self, _cfg: FlowConfig) -> Result<FlowId, ConfigError> {
        self.flows += 1;
        Ok(FlowId(self.flows - 1))
    }
    fn change_flow(&mut self, _: FlowId, _: FlowConfig, _: Nanos) -> Result<(), ConfigError> {
        Ok(())
    }
    fn remove_flow(&mut self, _: FlowId) -> Result<Vec<Pkt<u64>>, ConfigError> {
        Ok(Vec::new())
    }
    #[inline]
    fn enqueue(&mut self, pkt: Pkt<u64>, _now: Nanos) -> Result<(), crate::flow::Rejected<u64>> {
        self.q.push_back(pkt);
        Ok(())
    }
    #[inline]
    fn dequeue(&mut self, _now: Nanos) -> Option<Pkt<u64>> {
        self.q.pop_front()
    }
    fn next_ready(&self, now: Nanos) -> Option<Nanos> {
        (!self.q.is_empty()).then_some(now)
    }
    fn backlog(&self) -> crate::sched::Backlog {
        crate::sched::Backlog {
            pkts: self.q.len() as u64,
            bytes: self.q.iter().map(|p| u64::from(p.len)).sum(),
        }
    }
    fn stats(&self) -> crate::flow::Counters {
        self.stats
    }
    fn flow_stats(&self, _: FlowId) -> Option<crate::flow::Counters> {
        None
    }
    fn flow_config(&self, _: FlowId) -> Option<&FlowConfig> {
        None
    }
    fn flow_ids(&self) -> Vec<FlowId> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::{Drr, FlowSched, Rr};

    #[test]
    fn parses_flowsets() {
        assert_eq!(
            parse_flowsets("1::512,8::64").unwrap(),
            vec![
                Flowset {
                    weight: 1,
                    len: 1000,
                    flows: 512
                },
                Flowset {
                    weight: 8,
                    len: 1000,
                    flows: 64
                }
            ]
        );
        let mix = parse_flowsets("1::32768,2::4096,4::2048,8::1024,128::16,1024::1").unwrap();
        assert_eq!(
            mix.iter().map(|f| f.flows).sum::<u32>(),
            32768 + 4096 + 2048 + 1024 + 16 + 1
        );
        assert_eq!(
            parse_flowsets("1-8-4:64:2")
                .unwrap()
                .iter()
                .map(|f| f.weight)
                .collect::<Vec<_>>(),
            vec![1, 3, 5, 8]
        );
        assert_eq!(
            parse_flowsets("2:1500-64:1").unwrap_err().what,
            "len range 1500-64 goes down"
        );
        assert_eq!(parse_flowsets("1::4k").unwrap()[0].flows, 4096);
        assert_eq!(
            parse_flowsets("3").unwrap(),
            vec![Flowset {
                weight: 3,
                len: 1000,
                flows: 1
            }]
        );
        for bad in [
            "",
            "1::0",
            "0::1",
            "x::1",
            "1:2:3:4",
            "1::1,,2::2",
            "1-2-3-4::1",
            "1::99999999999",
        ] {
            assert!(parse_flowsets(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn parses_counts_and_bounds() {
        assert_eq!(parse_count("50M").unwrap(), 50_000_000);
        assert_eq!(parse_count("4k").unwrap(), 4096);
        assert_eq!(QBound::parse("30n").unwrap().resolve(10), 300);
        assert_eq!(QBound::parse("7").unwrap().resolve(10), 7);
        assert!(parse_count("1.5M").is_err());
        assert!(parse_count("99999999999999999999").is_err());
        assert!(QBound::parse("n").is_err());
    }

    #[test]
    fn rejects_bad_bounds_and_flows() {
        let fs = parse_flowsets("1::4").unwrap();
        let s = FlowSched::<_, u64>::new(Rr::new());
        let e = Harness::new(s, &fs, QBound::PerFlow(30), QBound::PerFlow(4)).unwrap_err();
        assert_eq!(
            e,
            HarnessError::Bounds {
                qmin: 120,
                qmax: 16
            }
        );
        let fs = parse_flowsets("1::4,99999999::1").unwrap();
        let s = FlowSched::<_, u64>::new(Drr::new(1000));
        let e = Harness::new(s, &fs, QBound::PerFlow(4), QBound::PerFlow(30)).unwrap_err();
        assert!(
            e.to_string()
                .contains("flowset #2: weight = 99999999 is out of range"),
            "{e}"
        );
    }

    #[test]
    fn closed_loop_keeps_backlog_between_bounds_and_balances_flows() {
        let fs = parse_flowsets("1::8").unwrap();
        let s = FlowSched::<_, u64>::new(Rr::new());
        let mut h = Harness::new(s, &fs, QBound::PerFlow(4), QBound::PerFlow(30)).unwrap();
        h.track_wfi();
        let mut max_pending = 0;
        for _ in 0..10_000 {
            h.run(1);
            max_pending = max_pending.max(h.pending);
            assert!(h.pending <= 240);
            let (lo, hi) = (
                h.fl.iter().map(|f| f.queued).min().unwrap(),
                h.fl.iter().map(|f| f.queued).max().unwrap(),
            );
            assert!(
                hi - lo <= 30,
                "shortest-backlog placement keeps flows even: {lo}..{hi}"
            );
        }
        assert_eq!(max_pending, 240);
        let st = h.stats();
        assert_eq!(st.loops, 10_000);
        assert_eq!(st.enqueues, st.dequeues + h.pending);
        assert_eq!(st.drops, 0);
        assert!(h.sched().stats().conserved());
        // RR with equal sizes and weights: lag below one round of packets.
        let wfi = st.worst_wfi_bytes.unwrap();
        assert!(wfi > 0.0 && wfi <= 8.0 * 1000.0, "wfi {wfi}");
    }

    #[test]
    fn none_baseline_runs() {
        let fs = parse_flowsets("1::1").unwrap();
        let fs = [
            fs[0],
            Flowset {
                weight: 1,
                len: 64,
                flows: 3,
            },
        ];
        let mut h = Harness::new(
            NoSched::default(),
            &fs,
            QBound::PerFlow(4),
            QBound::PerFlow(30),
        )
        .unwrap();
        h.run(1_000);
        let st = h.stats();
        assert_eq!(st.enqueues + st.dequeues, 1_000);
        assert_eq!(st.drops, 0);
    }
}
