//! Programmable scheduling policies after Eiffel (Saeed et al., NSDI'19):
//! a tree of nodes, each ranking its children, with one shared shaper.
//!
//! # Model
//!
//! A policy is a tree of named **nodes**; flows ([`FlowId`](crate::FlowId))
//! hang below nodes (a node may hold nodes, flows or both). Each node keeps
//! its backlogged children — one entry per child, never per packet — in an
//! integer priority queue from [`crate::pq`] with PIFO semantics: lower rank
//! first, equal ranks in the order they entered. Packets stay in per-flow
//! FIFOs (the [`FlowTable`](crate::FlowTable)); a dequeue pops the root's
//! first child, that child's first child, and so on down to a flow, sends
//! its head packet, then walks back up re-ranking every child on the path
//! that still has work. This is a PIFO tree with **per-flow ranking**: a
//! child's rank is computed when it enters its parent's queue — when it
//! becomes backlogged, after each of its services (**on-dequeue ranking**),
//! and for pFabric also on every arrival in its subtree (**on-enqueue
//! re-ranking**, O(1) via the queue's handle removal). Because ranks within
//! one flow never decrease for the built-in rank functions, ranking a flow
//! by its head packet gives the same order as ranking each packet.
//!
//! | `kind` | rank of a child | queue by default |
//! | --- | --- | --- |
//! | `rr` | 0 (round robin) | HierFfs, 1 bucket |
//! | `prio` | `prio` (flows: `FlowConfig::prio`), `0..levels` | HierFfs, `levels` buckets |
//! | `wfq` (`stfq`) | STFQ start tag `S = max(V, F)`; on service `V = S`, `F = S + ceil(len·scale/weight)` | Cffs |
//! | `pfabric` | remaining size / `unit` bytes | HierFfs, 4096 buckets |
//! | `edf` | (head arrival + deadline) / `unit` ns | Cffs |
//! | `lstf` | (head arrival + slack − tx time at `link_rate`) / `unit` ns | Cffs |
//! | `hclock` | reservation tag `R` if due (`R ≤ now`), else share tag `P` (STFQ) | Cffs + exact heap for `R` |
//!
//! # The shaper
//!
//! Any node or flow can carry a rate limit (`rate`, or `flow_rate` for the
//! flows of a node). All limits are enforced by **one** time-indexed queue,
//! a [`Cffs`](crate::pq::Cffs) over release times in units of
//! `shaper_unit_ns`, as in Eiffel's Figures 6–7: each limited member keeps
//! a virtual clock `T` (after sending `len` bytes at `now`,
//! `T = max(T, now − max_len/rate) + len/rate`: strict pacing, except that
//! a member the busy link served late keeps up to one maximum packet of
//! credit, so its long-run rate is its limit although releases fall on
//! packet boundaries — at most one extra packet back to back); a member with work whose `T`
//! lies in the future is **parked** in the shaper instead of entering its
//! parent's queue, and a dequeue at or after `ceil(T/unit)·unit` moves it
//! back into the work-conserving tree (re-activating ancestors that had
//! gone idle). A release is never early; it may be late by less than one
//! unit. A flow's credit can be set with
//! [`FlowParams::cburst`] (bytes ahead of its limit, HTB's `cburst`:
//! after idling it sends that much plus one packet back to back, and over
//! any interval `t` between two of its sends at most `rate·t + cburst`
//! bytes before the last) and [`FlowParams::burst`] (bytes ahead of its
//! hclock reservation: its reservation clock starts up to that much
//! before `now` when it becomes backlogged; without it, at `now`).
//! Both are at most [`limits::MAX_BURST`]. Everything else is work conserving: a node whose descendants are
//! all parked is not in its parent's queue, so siblings are served.
//! [`Scheduler::next_ready`](crate::Scheduler::next_ready) returns the next
//! release when nothing is eligible. A limit on the root shapes the whole
//! link. Rates must fit the shaper's horizon
//! (`shaper_unit_ns × (shaper_buckets − 2)` ≥ one `max_len` packet).
//!
//! # Ranges
//!
//! Node queues use granularity 1 (each rank function quantises with its
//! own `unit`/`scale`). A Cffs keeps ranks outside its moving window in an
//! exact spill heap (counted in [`PolicyStats::node_spilled`]): below the
//! window (an old head packet after a long shaper hold under `edf`, a short
//! deadline entering after the window jumped for a long one) and beyond
//! it, so a Cffs node serves in the exact `(rank, entry order)` order of a
//! `heap` node. A HierFfs (`hffs`) does the same for ranks outside its
//! fixed range (a pFabric remaining size beyond `buckets × unit`, counted
//! in `node_spilled` too). `wfq`/`hclock` size their Cffs from
//! `max_len × scale` so start tags never leave the window (nothing
//! spilled).
//!
//! # Policies in TOML
//!
//! ```toml
//! [policy]                 # all optional
//! shaper_unit_ns = 1000
//! shaper_buckets = 16384
//! max_len = 1514           # largest packet; flows with a larger max_len are refused
//! attach = "round_robin"   # or a node name: where Scheduler::add_flow puts flows
//!
//! [[node]]
//! name = "root"
//! kind = "wfq"             # rr | prio | wfq | stfq | pfabric | edf | lstf | hclock
//! rate = "1gbit"           # optional rate limit (shaper)
//!
//! [[node]]
//! name = "bulk"
//! parent = "root"
//! kind = "wfq"
//! weight = 3               # in a wfq/hclock parent; `prio` in a prio parent
//! rate = "300mbit"
//! ```
//!
//! The default queue (`queue = "auto"`) is a [`SmallPq`](crate::pq::SmallPq)
//! (exact, a linear scan) while the node has at most 16 queued children;
//! the first time it has more, they move in order into the table's queue
//! for good ([`PolicySched::queue_of`] tells which a node uses).
//!
//! Node keys: `name`, `parent`, `kind`, `queue` (`cffs`, `hffs`, `heap`,
//! `small`, `auto`),
//! `buckets`, `weight`, `prio`, `levels` (prio), `scale` (wfq, hclock),
//! `unit` (pfabric bytes, edf/lstf ns), `link_rate` (lstf), `rate`,
//! `reservation` (child of hclock), and defaults for the flows attached to
//! the node: `flow_rate`, `flow_reservation`, `flow_deadline_ns`,
//! `flow_slack_ns` ([`PolicySched::set_flow_params`] changes them per flow).
//! Bad policies — syntax, unknown keys, duplicate names, unknown parents,
//! cycles, no or several roots, ranks (`prio`, `levels`, `buckets`) out of
//! range, missing rates (`link_rate` for lstf), rates below the shaper
//! horizon, reservations without an hclock parent — are refused with a
//! [`PolicyError`] naming the node and, from TOML, the line and column.
//! Built-ins (the files in `crates/core/policies/`): [`Policy::builtin`].
//!
//! # Policies in DOT
//!
//! [`Policy::from_dot`] reads the same nodes and keys from a Graphviz
//! `digraph` whose `parent -> child` edges give the tree (see [`dot`]), so
//! a policy can be drawn with `dot -Tsvg` and loaded unchanged.

mod compile;
pub mod dot;
pub mod limits;
mod member;
mod node_queue;
mod sched;
mod scheduler_trait;
mod shaper;
mod share_tags;
mod spec;
mod toml_error;
mod tree;

#[cfg(test)]
mod burst_tests;
#[cfg(test)]
mod dot_tests;
#[cfg(test)]
mod limits_tests;
#[cfg(test)]
mod node_queue_tests;
#[cfg(test)]
mod reference;
#[cfg(test)]
mod shaper_tests;
#[cfg(test)]
mod spec_tests;
#[cfg(test)]
mod tree_tests;

pub use compile::Policy;
pub use member::FlowParams;
pub use sched::{PolicySched, PolicyStats};
pub use spec::{
    Attach, DEFAULT_SHAPER_BUCKETS, DEFAULT_SHAPER_UNIT_NS, Kind, Loc, NodeSpec, PolicyError,
    PolicySpec, QueueKind, shaper_horizon, slowest_shaped_rate,
};

/// The built-in policies, by name, as TOML.
pub const BUILTINS: [(&str, &str); 7] = [
    ("prio", include_str!("../../policies/prio.toml")),
    ("wfq", include_str!("../../policies/wfq.toml")),
    ("hpfq", include_str!("../../policies/hpfq.toml")),
    ("pfabric", include_str!("../../policies/pfabric.toml")),
    ("edf", include_str!("../../policies/edf.toml")),
    ("lstf", include_str!("../../policies/lstf.toml")),
    ("hclock", include_str!("../../policies/hclock.toml")),
];

impl Policy {
    /// A built-in policy: `prio`, `wfq` (alias `stfq`), `hpfq`, `pfabric`,
    /// `edf`, `lstf`, `hclock`.
    pub fn builtin(name: &str) -> Result<Policy, PolicyError> {
        let name = if name == "stfq" { "wfq" } else { name };
        match BUILTINS.iter().find(|(n, _)| *n == name) {
            Some((_, src)) => Policy::from_toml(src),
            None => Err(PolicyError::Invalid {
                node: name.to_string(),
                msg: format!(
                    "no built-in policy of this name; allowed: {}",
                    BUILTINS.map(|b| b.0).join(", ")
                ),
                loc: None,
            }),
        }
    }
}
