//! A node's queue over its children ([`NodeQ`]: one of the `pq` queues)
//! and the node's scheduling state.

use super::spec::{Kind, QueueKind};
use crate::pq::{BinaryHeapPq, BucketConfig, IntPq, Rank, SmallPq};
use crate::pq::{ExactCffs, ExactHier, Filed};

/// Queued children an automatic node keeps in its `SmallPq` before moving
/// to its kind's bucketed queue.
pub(super) const SMALL_MAX: usize = 16;

/// A node's queue over its children. A cFFS keeps the ranks outside its
/// window, a HierFfs those outside its fixed range, in an exact spill
/// ([`ExactCffs`], [`ExactHier`]), so every kind serves in exact
/// `(rank, entry order)`.
///
/// One per node, read in place on every pop: the cFFS variant is larger
/// than the others (its spill heap), but boxing it would add a pointer
/// chase to the hot path for a few hundred bytes per node.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub(super) enum NodeQ {
    Cffs(ExactCffs<u32>),
    Hier(ExactHier<u32>),
    Heap(BinaryHeapPq<u32>),
    Small(SmallPq<u32>),
}

/// `$e` on the queue inside `$q`; the arm of the queues with a spill
/// (cFFS, HierFfs) is `$c` if given (their handles are [`Filed`], the
/// others' plain handles).
macro_rules! each {
    ($q:expr, $x:ident => $e:expr) => {
        each!($q, $x => $e, spill => $e)
    };
    ($q:expr, $x:ident => $e:expr, spill => $c:expr) => {
        match $q {
            NodeQ::Cffs($x) => $c,
            NodeQ::Hier($x) => $c,
            NodeQ::Heap($x) => $e,
            NodeQ::Small($x) => $e,
        }
    };
}

impl NodeQ {
    pub(super) fn new(kind: QueueKind, buckets: usize) -> NodeQ {
        let cfg = BucketConfig::new(buckets.max(1));
        // Bucket counts were validated (1..=MAX_BUCKETS), so construction
        // succeeds (except a 1-bucket Cffs);
        // fall back to an exact heap rather than panic.
        match kind {
            QueueKind::Cffs => ExactCffs::new(cfg, true)
                .map_or_else(|_| NodeQ::Heap(BinaryHeapPq::new(0)), NodeQ::Cffs),
            QueueKind::HierFfs => {
                ExactHier::new(cfg).map_or_else(|_| NodeQ::Heap(BinaryHeapPq::new(0)), NodeQ::Hier)
            }
            QueueKind::Heap => NodeQ::Heap(BinaryHeapPq::new(0)),
            QueueKind::Small => NodeQ::Small(SmallPq::new()),
            // `PolicySched::new` starts automatic nodes as `Small`; exact
            // if it ever is not.
            QueueKind::Auto => NodeQ::Heap(BinaryHeapPq::new(0)),
        }
    }
    #[inline]
    pub(super) fn push(&mut self, rank: Rank, r: u32) -> Filed {
        match each!(self, q => q.push(rank, r).map(Filed::elsewhere), spill => q.push(rank, r)) {
            Ok(filed) => filed,
            // Both sides spill, so only `Full` (2^32 elements) can
            // fail, and a queue never holds more than the 2^31 members of a
            // tree.
            Err(_) => unreachable!("a node queue holds fewer than 2^31 members"),
        }
    }
    #[inline]
    pub(super) fn pop(&mut self) -> Option<u32> {
        each!(self, q => q.pop_min()).map(|(_, r)| r)
    }
    #[inline]
    pub(super) fn remove(&mut self, filed: Filed) -> Option<u32> {
        each!(self, q => q.remove(filed.handle()), spill => q.remove(filed))
    }
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        each!(self, q => q.is_empty())
    }
    #[inline]
    pub(super) fn len(&self) -> usize {
        each!(self, q => q.len())
    }
    pub(super) fn pop_ranked(&mut self) -> Option<(Rank, u32)> {
        each!(self, q => q.pop_min())
    }
    /// Ranks a cFFS or HierFfs filed in its exact spill (outside its
    /// range).
    pub(super) fn spilled(&self) -> u64 {
        match self {
            NodeQ::Cffs(q) => q.spilled(),
            NodeQ::Hier(q) => q.spilled(),
            NodeQ::Heap(_) | NodeQ::Small(_) => 0,
        }
    }
    pub(super) fn memory_bytes(&self) -> usize {
        each!(self, q => q.memory_bytes())
    }
}

#[derive(Clone, Debug)]
pub(super) struct NodeState {
    pub(super) kind: Kind,
    pub(super) q: NodeQ,
    /// `queue = "auto"`: the queue (and buckets) to move into once more
    /// than [`SMALL_MAX`] children are queued; `None` once moved or if the
    /// queue was chosen explicitly.
    pub(super) grow: Option<(QueueKind, usize)>,
    /// hclock: reservation tags (exact ns).
    pub(super) res: Option<BinaryHeapPq<u32>>,
    /// Virtual time (STFQ / hclock shares).
    pub(super) vt: u64,
}
