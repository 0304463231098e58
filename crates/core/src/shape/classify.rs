//! Hashed destination classification and EWMA rate estimation (FlowBundler's
//! userspace front end).

use crate::flow::FlowId;
use crate::units::{Nanos, Rate};

/// Maps a destination key (address, port, …) to a flow through an
/// open-addressing hash table of a fixed power-of-two size. Unlike the
/// public userspace MLTW (512 buckets, no collision handling), colliding
/// keys probe linearly, so two destinations never share a flow by accident.
#[derive(Clone, Debug)]
pub struct DestClassifier {
    keys: Vec<Option<(u64, FlowId)>>,
    mask: usize,
    len: usize,
}

impl DestClassifier {
    /// A table of `buckets` (rounded up to a power of two, at least 2).
    pub fn new(buckets: usize) -> DestClassifier {
        let n = buckets.max(2).next_power_of_two();
        DestClassifier {
            keys: vec![None; n],
            mask: n - 1,
            len: 0,
        }
    }

    #[inline]
    fn hash(key: u64) -> usize {
        // SplitMix64 finaliser.
        let mut z = key.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) as usize
    }

    /// The flow of `key`, if known.
    pub fn get(&self, key: u64) -> Option<FlowId> {
        let mut i = Self::hash(key) & self.mask;
        for _ in 0..=self.mask {
            match self.keys[i] {
                Some((k, f)) if k == key => return Some(f),
                None => return None,
                _ => i = (i + 1) & self.mask,
            }
        }
        None
    }

    /// Binds `key` to `flow`; `Err(flow)` if the table is full (keep it at
    /// most ¾ full for short probes).
    pub fn insert(&mut self, key: u64, flow: FlowId) -> Result<(), FlowId> {
        let mut i = Self::hash(key) & self.mask;
        for _ in 0..=self.mask {
            match self.keys[i] {
                Some((k, _)) if k == key => {
                    self.keys[i] = Some((key, flow));
                    return Ok(());
                }
                None => {
                    self.keys[i] = Some((key, flow));
                    self.len += 1;
                    return Ok(());
                }
                _ => i = (i + 1) & self.mask,
            }
        }
        Err(flow)
    }

    /// Keys bound.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if no key is bound.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// EWMA estimate of an aggregate's rate over fixed intervals:
/// `est ← est + (sample − est) / 4` (α = ¼, FlowBundler's value) at the end
/// of every `interval`, integer arithmetic only. Starts at `initial`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateEstimator {
    est_bps: u64,
    interval: u64,
    start: u64,
    bytes: u64,
}

impl RateEstimator {
    /// An estimator over `interval` (at least 1 ns) starting at `initial`.
    pub fn new(initial: Rate, interval: Nanos) -> RateEstimator {
        RateEstimator {
            est_bps: initial.as_bps(),
            interval: interval.0.max(1),
            start: 0,
            bytes: 0,
        }
    }

    fn roll(&mut self, now: Nanos) {
        while now.0 >= self.start + self.interval {
            let sample =
                (u128::from(self.bytes) * 8 * 1_000_000_000 / u128::from(self.interval)) as i128;
            let est = i128::from(self.est_bps);
            let next = est + (sample - est) / 4;
            self.est_bps = u64::try_from(next.max(1)).unwrap_or(u64::MAX);
            self.bytes = 0;
            self.start += self.interval;
            if now.0 >= self.start + 64 * self.interval {
                // Long idle: decay in one step per interval would be slow;
                // jump (each empty interval multiplies by ¾).
                let skipped = (now.0 - self.start) / self.interval;
                for _ in 0..skipped.min(200) {
                    self.est_bps = (self.est_bps - self.est_bps / 4).max(1);
                }
                self.start += skipped * self.interval;
            }
        }
    }

    /// Accounts a packet of `len` bytes seen at `now`.
    pub fn observe(&mut self, len: u32, now: Nanos) {
        self.roll(now);
        self.bytes += u64::from(len);
    }

    /// The estimate at `now`.
    pub fn rate(&mut self, now: Nanos) -> Rate {
        self.roll(now);
        Rate::from_bps(self.est_bps).unwrap_or(Rate::bps(1))
    }
}
