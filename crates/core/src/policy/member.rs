//! A tree member (flow or node) as its parent sees it: where it is queued,
//! its share and reservation tags, its rate-limit clock and the per-flow
//! parameters.

use crate::pq::Filed;
use crate::pq::Handle;
use crate::units::Rate;

/// Marks a member reference as a node (otherwise it is a flow id).
pub(super) const NODE: u32 = 1 << 31;
pub(super) const NO_PARENT: u32 = u32::MAX;

/// Where a member (flow or node) is with respect to its parent.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Slot {
    /// Not queued anywhere: nothing to send, or being served.
    Idle,
    /// In its parent's queue.
    Queued(Filed),
    /// In the shaper until its rate limit allows it.
    Parked(Filed),
}

/// Per-flow parameters beyond [`FlowConfig`](crate::FlowConfig); defaults come from the node
/// the flow attaches to (`flow_deadline_ns`, `flow_rate`, ...).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowParams {
    /// Declared flow size in bytes (pFabric: remaining = size − bytes sent).
    /// `None`: remaining = bytes queued.
    pub size: Option<u64>,
    /// Relative deadline in ns (EDF).
    pub deadline: u64,
    /// Slack in ns (LSTF).
    pub slack: u64,
    /// Rate limit (enforced by the shaper).
    pub rate: Option<Rate>,
    /// Reservation (hclock parent).
    pub reservation: Option<Rate>,
    /// Bytes the flow may send ahead of its reservation (HTB's `burst`):
    /// when it becomes backlogged its reservation clock starts up to this
    /// much before `now`. `None`: it starts at `now` (no credit).
    pub burst: Option<u64>,
    /// Bytes the flow may send ahead of its rate limit (HTB's `cburst`):
    /// the credit its limiter keeps. `None`: one `max_len` packet.
    pub cburst: Option<u64>,
}

/// A flow or node as a child of its parent node.
#[derive(Clone, Debug)]
pub(super) struct Member {
    pub(super) parent: u32,
    pub(super) slot: Slot,
    /// Handle in an hclock parent's reservation queue.
    pub(super) res_h: Option<Handle>,
    pub(super) weight: u32,
    pub(super) prio: u32,
    /// STFQ / hclock share tags.
    pub(super) start: u64,
    pub(super) finish: u64,
    /// hclock reservation tag (ns, rounded up).
    pub(super) rtag: u64,
    /// What rounding `rtag` up added, in 1/reservation ns.
    pub(super) rtag_ahead: u64,
    pub(super) by_res: bool,
    pub(super) limit: Option<Rate>,
    pub(super) reservation: Option<Rate>,
    /// `FlowParams::burst` / `cburst` as given (bytes).
    pub(super) burst: Option<u64>,
    pub(super) cburst: Option<u64>,
    /// The reservation's credit (ns at `reservation`, rounded down); 0 when
    /// `burst` is `None`.
    pub(super) res_credit: u64,
    /// The limiter's credit (ns at `limit`, rounded down), if `cburst` is
    /// given; otherwise one `max_len` packet (rounded up).
    pub(super) limit_credit: Option<u64>,
    /// Earliest time the rate limit lets it send (virtual clock, ns,
    /// rounded up).
    pub(super) next_tx: u64,
    /// What rounding `next_tx` up added, in 1/limit ns (see [`next_tx`]).
    pub(super) next_tx_ahead: u64,
    /// Bytes queued in its subtree.
    pub(super) bytes: u64,
    /// Bytes sent.
    pub(super) sent: u64,
    pub(super) size: Option<u64>,
    pub(super) deadline: u64,
    pub(super) slack: u64,
}

impl Member {
    pub(super) fn new(parent: u32) -> Member {
        Member {
            parent,
            slot: Slot::Idle,
            res_h: None,
            weight: 1,
            prio: 0,
            start: 0,
            finish: 0,
            rtag: 0,
            rtag_ahead: 0,
            by_res: false,
            limit: None,
            reservation: None,
            burst: None,
            cburst: None,
            res_credit: 0,
            limit_credit: None,
            next_tx: 0,
            next_tx_ahead: 0,
            bytes: 0,
            sent: 0,
            size: None,
            deadline: 0,
            slack: 0,
        }
    }
}

impl Member {
    /// The limiter's credit in ns (see [`next_tx`]).
    #[inline]
    pub(super) fn limit_credit(&self, rate: Rate, max_len: u64) -> u64 {
        match self.limit_credit {
            Some(c) => c,
            None => rate.tx_time(max_len).as_u64(),
        }
    }
}
