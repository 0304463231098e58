//! The token-bucket baseline (Linux `tbf` / an HTB class without borrowing).

use std::collections::VecDeque;

use super::ShapeConfigError;
use crate::units::{Bytes, Nanos, Rate};

/// Nanoseconds per second: tokens are counted in bit·ns/s units, so that
/// `rate × elapsed_ns` is exact.
const NS: u128 = 1_000_000_000;

/// A token bucket of `burst` bytes filled at `rate`, exact in integers:
/// tokens are kept in units of `1/10⁹` bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenBucket {
    rate: Rate,
    cap: u128,
    tokens: u128,
    last: Nanos,
}

impl TokenBucket {
    /// A full bucket of `burst` bytes at `rate`. `burst` must hold at least
    /// one packet of `max_len` bytes.
    pub fn new(rate: Rate, burst: Bytes, max_len: Bytes) -> Result<TokenBucket, ShapeConfigError> {
        if burst < max_len || burst == 0 {
            return Err(ShapeConfigError::new(
                "tbf",
                "burst",
                format!("{burst} bytes"),
                format!(
                    "{}..=2^32−1 bytes (at least one max_len packet)",
                    max_len.max(1)
                ),
            ));
        }
        let cap = u128::from(burst) * 8 * NS;
        Ok(TokenBucket {
            rate,
            cap,
            tokens: cap,
            last: Nanos::ZERO,
        })
    }

    fn refill(&mut self, now: Nanos) {
        if now > self.last {
            let dt = u128::from(now.0 - self.last.0);
            self.tokens = (self.tokens + dt * u128::from(self.rate.as_bps())).min(self.cap);
            self.last = now;
        }
    }

    /// Takes `len` bytes' worth of tokens if available at `now`; otherwise
    /// returns the earliest time they will be.
    #[inline]
    pub fn take(&mut self, len: Bytes, now: Nanos) -> Result<(), Nanos> {
        self.refill(now);
        let cost = u128::from(len) * 8 * NS;
        if self.tokens >= cost {
            self.tokens -= cost;
            Ok(())
        } else {
            Err(self.ready_at(len))
        }
    }

    /// Earliest time `len` bytes' worth of tokens are there (no refill).
    pub fn ready_at(&self, len: Bytes) -> Nanos {
        let cost = u128::from(len) * 8 * NS;
        let missing = cost.saturating_sub(self.tokens);
        let dt = missing.div_ceil(u128::from(self.rate.as_bps()));
        Nanos(
            self.last
                .0
                .saturating_add(u64::try_from(dt).unwrap_or(u64::MAX)),
        )
    }

    /// Changes the rate (tokens already in the bucket are kept).
    pub fn set_rate(&mut self, rate: Rate, now: Nanos) {
        self.refill(now);
        self.rate = rate;
    }
}

/// A TBF qdisc: one FIFO of at most `limit` packets drained through one
/// token bucket. Packets leave when the bucket holds their length in
/// tokens: up to `burst` bytes back to back, then at `rate`.
#[derive(Debug)]
pub struct Tbf<T> {
    bucket: TokenBucket,
    q: VecDeque<(Bytes, T)>,
    limit: usize,
    /// Times `dequeue` found a packet but not enough tokens.
    pub overlimits: u64,
}

impl<T> Tbf<T> {
    /// A TBF at `rate` with a `burst`-byte bucket and a `limit`-packet
    /// queue for packets of up to `max_len` bytes.
    pub fn new(
        rate: Rate,
        burst: Bytes,
        limit: usize,
        max_len: Bytes,
    ) -> Result<Tbf<T>, ShapeConfigError> {
        if limit == 0 {
            return Err(ShapeConfigError::new("tbf", "limit", 0, "1..=2^32 packets"));
        }
        Ok(Tbf {
            bucket: TokenBucket::new(rate, burst, max_len)?,
            q: VecDeque::new(),
            limit,
            overlimits: 0,
        })
    }

    /// Queues a packet; it comes back if the queue is full.
    pub fn enqueue(&mut self, len: Bytes, item: T) -> Result<(), T> {
        if self.q.len() >= self.limit {
            return Err(item);
        }
        self.q.push_back((len, item));
        Ok(())
    }

    /// The head packet, if the bucket allows it at `now`.
    pub fn dequeue(&mut self, now: Nanos) -> Option<(Bytes, T)> {
        let &(len, _) = self.q.front()?;
        match self.bucket.take(len, now) {
            Ok(()) => self.q.pop_front(),
            Err(_) => {
                self.overlimits += 1;
                None
            }
        }
    }

    /// When the head packet may leave (`None` if empty).
    pub fn next_ready(&self, now: Nanos) -> Option<Nanos> {
        let &(len, _) = self.q.front()?;
        let mut b = self.bucket;
        b.refill(now);
        Some(b.ready_at(len).max(now))
    }

    /// Packets queued.
    pub fn len(&self) -> usize {
        self.q.len()
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
}
