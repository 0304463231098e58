//! The Eiffel shaper: one [`Cffs`] over departure times.

use super::{Entry, ShapeConfigError, TimeQueue};
use crate::pq::{BucketConfig, Handle};
use crate::pq::{ExactCffs, Filed};
use crate::units::Nanos;

/// An EDT shaper on Eiffel's circular hierarchical FFS queue: bucket width
/// `granularity` ns, `buckets` buckets per half (horizon `buckets ×
/// granularity`, the second half is the look-ahead buffer).
///
/// An entry is ranked by its *ceil slot time* (the first multiple of the
/// granularity at or after its EDT) and leaves once `now` reaches that
/// time: never early, late by at most `granularity − 1` ns. One entry per
/// pop (no batching beyond what the caller asks for).
///
/// The queue's window moves forward in whole halves and can start later
/// than `now` (an empty queue jumps to its first entry's half, a filing
/// beyond the buffer swaps halves): an entry below the window goes to an
/// exact heap that is served first (everything in it is ranked below the
/// window, which never moves back), so the bound holds for it too. (The
/// cFFS and that heap are the policy tree's `ExactCffs`, beyond-window
/// entries refused.)
#[derive(Clone, Debug)]
pub struct CffsShaper {
    /// Entries by ceil slot time; those below the window in its exact heap.
    q: ExactCffs<Entry>,
    g: u64,
    buckets: usize,
    /// The released batch; `ready[ready_pos..]` is still to be taken.
    ready: Vec<Entry>,
    ready_pos: usize,
}

impl CffsShaper {
    /// Largest memory by default: 64 MiB.
    pub const DEFAULT_MAX_MEMORY: usize = 64 << 20;

    /// Bytes the bucket tables and bitmaps of a cFFS shaper with this
    /// granularity and horizon take: `2 · n · 8 + 2 · n/8 · 64/63` with
    /// `n = horizon / granularity` (not counting the queued entries).
    pub fn fixed_memory(granularity: u64, horizon: Nanos) -> u128 {
        let n = u128::from(horizon.0.div_ceil(granularity.max(1)));
        2 * n * 8 + 2 * (n / 8) * 64 / 63
    }

    /// A shaper whose first half covers `horizon` ns in buckets of
    /// `granularity` ns; refused if its tables would exceed `max_memory`.
    pub fn new(
        granularity: u64,
        horizon: Nanos,
        max_memory: usize,
    ) -> Result<CffsShaper, ShapeConfigError> {
        if granularity == 0 {
            return Err(ShapeConfigError::new(
                "cffs",
                "granularity",
                "0 ns",
                "1..=2^40 ns",
            ));
        }
        let mem = Self::fixed_memory(granularity, horizon);
        if mem > max_memory as u128 {
            return Err(ShapeConfigError::new(
                "cffs",
                "memory",
                format!(
                    "{mem} bytes ({} ns horizon / {granularity} ns buckets × 2 halves)",
                    horizon.0
                ),
                format!("at most max_memory = {max_memory} bytes"),
            ));
        }
        let buckets = usize::try_from(horizon.0.div_ceil(granularity).max(1)).unwrap_or(usize::MAX);
        let cfg = BucketConfig::new(buckets).granularity(granularity);
        let q = ExactCffs::new(cfg, false)
            .map_err(|e| ShapeConfigError::new("cffs", "buckets", buckets, e.to_string()))?;
        Ok(CffsShaper {
            q,
            g: granularity,
            buckets,
            ready: Vec::new(),
            ready_pos: 0,
        })
    }
}

/// Moves every entry of `q` ranked `<= now` to `out`, in rank order.
fn pop_due(q: &mut ExactCffs<Entry>, now: Nanos, out: &mut Vec<Entry>) {
    while let Some((_, e)) = q.pop_at_most(now.0) {
        out.push(e);
    }
}

impl TimeQueue for CffsShaper {
    fn name(&self) -> &'static str {
        "cffs"
    }

    fn level_for(&self, _spacing: Nanos) -> u8 {
        0
    }

    fn granularity(&self, _level: u8) -> Nanos {
        Nanos(self.g)
    }

    fn min_spacing(&self) -> Nanos {
        Nanos(self.g)
    }

    fn horizon(&self) -> Nanos {
        Nanos(self.g.saturating_mul(self.buckets as u64))
    }

    /// The entry is filed at once; cancelling removes it again. `true`:
    /// filed in the heap below the window.
    type Ticket = (Handle, bool);

    #[inline]
    fn reserve(&mut self, e: Entry, _level: u8) -> Option<(Handle, bool)> {
        let t = e.edt.div_ceil(self.g).saturating_mul(self.g);
        self.q.push(t, e).ok().map(Filed::into_parts)
    }

    #[inline]
    fn commit(&mut self, _t: (Handle, bool)) {}

    fn cancel(&mut self, (h, below): (Handle, bool)) {
        self.q.remove(Filed::from_parts(h, below));
    }

    fn release_to(&mut self, now: Nanos, out: &mut Vec<Entry>) -> usize {
        let before = out.len();
        out.extend_from_slice(&self.ready[self.ready_pos..]);
        self.ready.clear();
        self.ready_pos = 0;
        pop_due(&mut self.q, now, out);
        out.len() - before
    }

    fn release_ready(&mut self, now: Nanos) -> bool {
        if self.ready_pos == self.ready.len() {
            self.ready.clear();
            self.ready_pos = 0;
        }
        pop_due(&mut self.q, now, &mut self.ready);
        self.ready_pos < self.ready.len()
    }

    #[inline]
    fn pop_ready(&mut self) -> Option<Entry> {
        let e = *self.ready.get(self.ready_pos)?;
        self.ready_pos += 1;
        Some(e)
    }

    fn has_ready(&self) -> bool {
        self.ready_pos < self.ready.len()
    }

    fn next_due(&self) -> Option<Nanos> {
        self.q.peek_min_rank().map(Nanos)
    }

    /// Nothing to do: the window moves forward by itself once what is
    /// before `now` has left (a filing beyond it swaps the halves when the
    /// first is empty, jumps when both are), so with nothing due by `now`
    /// an entry beyond the window lies beyond `now` + the horizon.
    fn catch_up(&mut self, _now: Nanos) {}

    /// Pops every entry: the empty window jumps to the next one filed.
    #[cold]
    fn reset(&mut self, _now: Nanos) {
        while self.q.pop_min().is_some() {}
        self.ready.clear();
        self.ready_pos = 0;
    }

    fn len(&self) -> usize {
        self.q.len() + (self.ready.len() - self.ready_pos)
    }

    fn memory_bytes(&self) -> usize {
        self.q.memory_bytes() + self.ready.capacity() * core::mem::size_of::<Entry>()
    }
}
