//! The limits a policy must stay within, enforced when it is parsed and
//! validated ([`Policy::from_toml`](super::Policy::from_toml),
//! [`Policy::from_dot`](super::Policy::from_dot),
//! [`Policy::compile`](super::Policy::compile)).
//!
//! They bound the work and memory a policy file can ask for: validation is
//! linear in the size of the file, and building a
//! [`PolicySched`](super::PolicySched) allocates at most
//! [`MAX_NODES`] node states, node queues of at most [`MAX_TREE_BUCKETS`]
//! buckets in all (for queues chosen with `queue = "cffs"`/`"hffs"`) and a
//! shaper of at most [`MAX_SHAPER_BUCKETS`] buckets per half. A node with
//! the default `queue = "auto"` allocates its kind's queue (at most
//! [`MAX_BUCKETS`] buckets) only when it first has more than 16 queued
//! children. A policy over a limit is refused with
//! [`PolicyError::Limit`](super::PolicyError::Limit) (structural limits)
//! or [`PolicyError::OutOfRange`](super::PolicyError::OutOfRange) (a
//! field's value), naming the field, the value, the allowed range and,
//! where known, the line and column.

/// Most nodes in one policy. Validation and building the scheduler are
/// linear in the node count; at this size both take a few milliseconds and
/// a few MiB. Real hierarchies have tens to thousands of nodes.
pub const MAX_NODES: usize = 1 << 16;

/// Most levels from the root to the deepest node (a lone root has depth
/// 1). Every packet walks its path to the root on enqueue and dequeue, so
/// depth is per-packet work; real hierarchies have 2 to 5 levels.
pub const MAX_DEPTH: usize = 64;

/// Longest node name, in bytes (names must also be non-empty).
pub const MAX_NAME_LEN: usize = 256;

/// Most priority levels of a `prio` node (`levels`): its queue has one
/// bucket per level.
pub const MAX_LEVELS: u32 = 4096;

/// Most buckets in one node's queue (`buckets`, per half for `cffs`), given
/// or chosen by default. For `wfq`/`hclock` the default is the next power
/// of two at or above `max_len × scale + 2`, so `scale` may be at most
/// `(MAX_BUCKETS − 2) / max_len` unless `buckets` is given (the default
/// scale 4 fits every `max_len` up to [`MAX_PACKET_LEN`]). One bucket costs
/// 8 bytes (16 for `cffs`), so a node queue takes at most 128 MiB.
pub const MAX_BUCKETS: usize = 1 << 23;

/// Most buckets over all node queues allocated when the scheduler is built
/// (nodes with an explicit `queue = "cffs"` count twice their `buckets`,
/// `queue = "hffs"` once; `auto`, `heap` and `small` queues none): at most
/// 128 MiB of bucket lists.
pub const MAX_TREE_BUCKETS: u64 = 1 << 24;

/// Largest `weight` of a node in a `wfq`/`hclock` parent.
pub const MAX_WEIGHT: u32 = 1 << 20;

/// Largest `scale` of a `wfq`/`hclock` node (virtual-time units per byte).
pub const MAX_SCALE: u64 = 1 << 16;

/// Largest `unit` of a `pfabric` (bytes), `edf` or `lstf` (ns) node.
pub const MAX_UNIT: u64 = 1 << 30;

/// Largest `flow_deadline_ns` / `flow_slack_ns` (about 13 days).
pub const MAX_FLOW_TIME_NS: u64 = 1 << 50;

/// Largest `policy.shaper_unit_ns` (one second).
pub const MAX_SHAPER_UNIT_NS: u64 = 1_000_000_000;

/// Most `policy.shaper_buckets` (per half of the shaper's Cffs; at least
/// 2): the shaper takes at most 256 MiB.
pub const MAX_SHAPER_BUCKETS: usize = 1 << 24;

/// Largest `policy.max_len` (bytes).
pub const MAX_PACKET_LEN: u32 = 1 << 20;

/// Largest `burst`/`cburst` of a flow (bytes,
/// [`FlowParams`](super::FlowParams)): 1 GiB, a second of credit at
/// 8.6 Gbit/s.
pub const MAX_BURST: u64 = 1 << 30;
