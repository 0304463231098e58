//! The policy language: node specifications, TOML parsing and validation.

use crate::units::{Nanos, Rate};

/// Where something was written in a policy file: 1-based line and column.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Loc {
    /// Line, from 1.
    pub line: u32,
    /// Column (characters), from 1.
    pub col: u32,
}

impl Loc {
    /// The location of byte `offset` in `src` (an offset past the end is
    /// the end; one inside a character counts that character as before
    /// it). Linear in `offset`: for many positions in one text use a
    /// line index (as the parsers do).
    pub fn of(src: &str, offset: usize) -> Loc {
        let before = &src.as_bytes()[..offset.min(src.len())];
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let line = before.iter().filter(|&&b| b == b'\n').count() as u32 + 1;
        let col = chars_in(&before[line_start..]) as u32 + 1;
        Loc { line, col }
    }
}

/// Characters in UTF-8 bytes (bytes that do not continue a character).
fn chars_in(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b & 0xC0 != 0x80).count()
}

/// Line and column of many byte offsets in one text, without rescanning
/// it: the line starts (binary search) and the character count at every
/// [`LineIndex::BLOCK`]-th byte. Built in one pass; a lookup costs
/// `O(log lines + BLOCK)`.
#[derive(Debug)]
pub(crate) struct LineIndex<'a> {
    src: &'a [u8],
    /// Byte offset of each line's first byte.
    starts: Vec<usize>,
    /// Characters before byte `k · BLOCK`.
    chars: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    const BLOCK: usize = 64;

    pub(crate) fn new(src: &'a str) -> LineIndex<'a> {
        let src = src.as_bytes();
        let mut starts = vec![0];
        let mut chars = Vec::with_capacity(src.len() / Self::BLOCK + 1);
        let mut n = 0;
        for (i, &b) in src.iter().enumerate() {
            if i.is_multiple_of(Self::BLOCK) {
                chars.push(n);
            }
            if b & 0xC0 != 0x80 {
                n += 1;
            }
            if b == b'\n' {
                starts.push(i + 1);
            }
        }
        // A boundary at the very end (`i == len`) has its entry too.
        if src.len().is_multiple_of(Self::BLOCK) {
            chars.push(n);
        }
        LineIndex { src, starts, chars }
    }

    /// Characters before byte `i` (`i <= len`).
    fn chars_before(&self, i: usize) -> usize {
        let k = i / Self::BLOCK;
        self.chars[k] + chars_in(&self.src[k * Self::BLOCK..i])
    }

    /// The location of byte `offset` (clamped to the end of the text).
    pub(crate) fn loc(&self, offset: usize) -> Loc {
        let i = offset.min(self.src.len());
        let l = self.starts.partition_point(|&s| s <= i) - 1;
        let col = self.chars_before(i) - self.chars_before(self.starts[l]);
        Loc {
            line: l as u32 + 1,
            col: col as u32 + 1,
        }
    }
}

impl core::fmt::Display for Loc {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "line {}, column {}", self.line, self.col)
    }
}

fn at(loc: &Option<Loc>) -> String {
    match loc {
        Some(l) => format!(" ({l})"),
        None => String::new(),
    }
}

/// A policy that was refused, with the node (and file position) at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The TOML itself could not be read (syntax, wrong type, unknown key).
    #[error("policy file{}: {msg}", at(.loc))]
    Syntax {
        /// Position of the error, if the parser gave one.
        loc: Option<Loc>,
        /// The parser's message; a value of the wrong type or a missing
        /// field named with the forms it accepts.
        msg: String,
    },
    /// Two nodes have the same name.
    #[error("node `{node}`{}: duplicate name (first defined{})", at(.loc), at(.first))]
    DuplicateNode {
        /// The name.
        node: String,
        /// The second definition.
        loc: Option<Loc>,
        /// The first definition.
        first: Option<Loc>,
    },
    /// A node names a parent that does not exist.
    #[error("node `{node}`{}: parent `{parent}` is not a node of this policy", at(.loc))]
    UnknownParent {
        /// The node.
        node: String,
        /// The missing parent.
        parent: String,
        /// Where the parent was named.
        loc: Option<Loc>,
    },
    /// Following parents from a node comes back to it.
    #[error("node `{node}`{}: parent links form a cycle: {}", at(.loc), .path.join(" -> "))]
    Cycle {
        /// A node on the cycle.
        node: String,
        /// The cycle, as node names.
        path: Vec<String>,
        /// Where the node is defined.
        loc: Option<Loc>,
    },
    /// No node without a parent, or more than one.
    #[error("a policy needs exactly one root (a node without `parent`); found {}", if .roots.is_empty() { "none".to_string() } else { .roots.join(", ") })]
    Roots {
        /// The parentless nodes.
        roots: Vec<String>,
    },
    /// A required rate is missing.
    #[error("node `{node}`{}: `{field}` is required {why}", at(.loc))]
    MissingRate {
        /// The node.
        node: String,
        /// The missing field.
        field: &'static str,
        /// When it is required.
        why: &'static str,
        /// Where the node is defined.
        loc: Option<Loc>,
    },
    /// A numeric field (a rank, a level, a size) is outside its range.
    #[error("node `{node}`{}: {field} = {value} is out of range: allowed {allowed}", at(.loc))]
    OutOfRange {
        /// The node (or `policy` for global settings).
        node: String,
        /// The field.
        field: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        allowed: String,
        /// Where the node is defined.
        loc: Option<Loc>,
    },
    /// The policy is larger than a stated limit (see [`super::limits`]):
    /// too many nodes, too deep, a name too long, too many buckets.
    #[error("node `{node}`{}: {field} = {value} is over the limit {limit} = {max}: allowed at most {max}", at(.loc))]
    Limit {
        /// The node at fault (or `policy` for the whole tree).
        node: String,
        /// What is counted (`nodes`, `depth`, `name length`, ...).
        field: &'static str,
        /// The count found.
        value: u64,
        /// The largest count allowed.
        max: u64,
        /// The name of the limit's constant in [`super::limits`].
        limit: &'static str,
        /// Where the node is defined.
        loc: Option<Loc>,
    },
    /// A field that makes no sense for this node.
    #[error("node `{node}`{}: {msg}", at(.loc))]
    Invalid {
        /// The node.
        node: String,
        /// What is wrong.
        msg: String,
        /// Where the node is defined.
        loc: Option<Loc>,
    },
}

/// How a node ranks its children (lower rank leaves first; equal ranks in
/// the order the children entered the node's queue).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Round robin: every child has rank 0, a served child goes to the back.
    Rr,
    /// Strict priority: rank = the child's `prio` (flows: `FlowConfig::prio`),
    /// `0..levels`; round robin within a level.
    Prio {
        /// Number of levels (1..=4096).
        levels: u32,
    },
    /// Start-time fair queueing (STFQ, Goyal et al.): rank = the child's
    /// start tag `S = max(V, F)`; on service `V = S`, `F = S + ceil(len·scale/w)`.
    Wfq {
        /// Virtual-time units per byte at weight 1.
        scale: u64,
    },
    /// pFabric: rank = remaining size / `unit` (remaining = declared flow
    /// size − bytes sent, else the bytes queued in the child's subtree);
    /// re-ranked on every enqueue and dequeue in the child's subtree.
    Pfabric {
        /// Bytes per rank.
        unit: u64,
    },
    /// Earliest deadline first: rank = (head arrival + deadline) / `unit`.
    /// Children must be flows.
    Edf {
        /// Nanoseconds per rank.
        unit: u64,
    },
    /// Least slack time first: rank = (head arrival + slack − head
    /// transmission time at `link`) / `unit`. Children must be flows.
    Lstf {
        /// Nanoseconds per rank.
        unit: u64,
        /// Link rate used for the transmission time.
        link: Rate,
    },
    /// hClock (Billaud & Gulati): a child whose reservation tag `R` is due
    /// (`R ≤ now`) is served first, lowest `R`; otherwise the lowest share
    /// tag `P` (STFQ over weights). `R += len/reservation` on every service;
    /// `P` advances only on share service. Limits go to the shaper.
    Hclock {
        /// Share-tag units per byte at weight 1.
        scale: u64,
    },
}

impl Kind {
    /// Name as written in a policy.
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Rr => "rr",
            Kind::Prio { .. } => "prio",
            Kind::Wfq { .. } => "wfq",
            Kind::Pfabric { .. } => "pfabric",
            Kind::Edf { .. } => "edf",
            Kind::Lstf { .. } => "lstf",
            Kind::Hclock { .. } => "hclock",
        }
    }
}

/// Which integer priority queue a node keeps its children in.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum QueueKind {
    /// [`Cffs`](crate::pq::Cffs): moving range (virtual times, deadlines).
    Cffs,
    /// [`HierFfs`](crate::pq::HierFfs): fixed range (levels, sizes).
    HierFfs,
    /// [`BinaryHeapPq`](crate::pq::BinaryHeapPq): exact, O(log n), any rank.
    Heap,
    /// [`SmallPq`](crate::pq::SmallPq): exact, a linear scan; for a node
    /// over a handful of children.
    Small,
    /// The default: a `Small` queue while the node has at most 16 queued
    /// children; the first time it has more, they move (in order) into the
    /// kind's own queue for good — HierFfs for rr, prio, pfabric; Cffs for
    /// wfq, edf, lstf, hclock.
    Auto,
}

/// One node of a policy tree.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSpec {
    /// Unique name.
    pub name: String,
    /// Parent node (`None` for the root).
    pub parent: Option<String>,
    /// How the node ranks its children.
    pub kind: Kind,
    /// The node's queue over its children.
    pub queue: QueueKind,
    /// Buckets of that queue (per half for Cffs).
    pub buckets: usize,
    /// Weight of this node in a `wfq`/`hclock` parent.
    pub weight: u32,
    /// Priority of this node in a `prio` parent.
    pub prio: u32,
    /// Rate limit of this node (enforced by the shared shaper).
    pub rate: Option<Rate>,
    /// Reservation of this node in an `hclock` parent.
    pub reservation: Option<Rate>,
    /// Rate limit given to every flow attached to this node.
    pub flow_rate: Option<Rate>,
    /// Reservation given to every flow attached to this node (hclock).
    pub flow_reservation: Option<Rate>,
    /// Relative deadline (ns) of flows attached to this node (EDF).
    pub flow_deadline: u64,
    /// Slack (ns) of flows attached to this node (LSTF).
    pub flow_slack: u64,
    /// Where the node was defined.
    pub loc: Option<Loc>,
    /// Where its parent was named.
    pub parent_loc: Option<Loc>,
}

impl NodeSpec {
    /// A node with defaults: weight 1, prio 0, no rates, its kind's default
    /// queue and `buckets` 0 (= chosen by the kind when compiled).
    pub fn new(name: &str, parent: Option<&str>, kind: Kind) -> NodeSpec {
        NodeSpec {
            name: name.to_string(),
            parent: parent.map(str::to_string),
            kind,
            queue: QueueKind::Auto,
            buckets: 0,
            weight: 1,
            prio: 0,
            rate: None,
            reservation: None,
            flow_rate: None,
            flow_reservation: None,
            flow_deadline: 0,
            flow_slack: 0,
            loc: None,
            parent_loc: None,
        }
    }
}

/// The queue a node of `kind` uses over many children.
pub(crate) fn default_queue(kind: Kind) -> QueueKind {
    match kind {
        Kind::Rr | Kind::Prio { .. } | Kind::Pfabric { .. } => QueueKind::HierFfs,
        Kind::Wfq { .. } | Kind::Edf { .. } | Kind::Lstf { .. } | Kind::Hclock { .. } => {
            QueueKind::Cffs
        }
    }
}

/// How `Scheduler::add_flow` chooses the node a new flow attaches to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attach {
    /// Always this node.
    Node(String),
    /// Flow `k` (in order of addition) goes to leaf `k mod leaves`, leaves
    /// being the nodes without node children, in definition order.
    RoundRobin,
}

/// Nanoseconds per shaper bucket unless a policy sets `shaper_unit_ns`.
pub const DEFAULT_SHAPER_UNIT_NS: u64 = 1000;

/// Shaper buckets per half unless a policy sets `shaper_buckets`.
pub const DEFAULT_SHAPER_BUCKETS: usize = 1 << 14;

/// How far ahead the shaper files a blocked child: `unit × (buckets − 2)`
/// ns. A rate at which one `max_len` packet takes longer is refused.
pub fn shaper_horizon(shaper_unit: u64, shaper_buckets: usize) -> Nanos {
    Nanos(shaper_unit.saturating_mul(shaper_buckets.saturating_sub(2) as u64))
}

/// The slowest rate a policy with this shaper accepts for packets of up
/// to `max_len` bytes (one such packet fits the horizon); with the
/// defaults and 1538 wire bytes, 0.751 Mbit/s. `None` when no rate does
/// (a horizon of zero: `shaper_buckets = 2`).
pub fn slowest_shaped_rate(max_len: u32, shaper_unit: u64, shaper_buckets: usize) -> Option<Rate> {
    Rate::slowest_for(
        u64::from(max_len),
        shaper_horizon(shaper_unit, shaper_buckets),
    )
}

/// A whole policy, before validation.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicySpec {
    /// The nodes, in definition order.
    pub nodes: Vec<NodeSpec>,
    /// Nanoseconds per shaper bucket. A blocked child is released at the
    /// first dequeue at or after `ceil(T / unit) · unit`, never before its
    /// eligibility time `T`.
    pub shaper_unit: u64,
    /// Buckets per half of the shaper's Cffs (its horizon is `unit × buckets`).
    pub shaper_buckets: usize,
    /// Largest packet (bytes) any flow may send; sizes the queues.
    pub max_len: u32,
    /// Where `add_flow` attaches flows.
    pub attach: Attach,
}

impl PolicySpec {
    /// A policy of these nodes with the default globals: shaper unit 1 µs,
    /// 16384 shaper buckets, max_len 1514, flows attached round robin.
    pub fn new(nodes: Vec<NodeSpec>) -> PolicySpec {
        PolicySpec {
            nodes,
            shaper_unit: DEFAULT_SHAPER_UNIT_NS,
            shaper_buckets: DEFAULT_SHAPER_BUCKETS,
            max_len: 1514,
            attach: Attach::RoundRobin,
        }
    }
}

// The TOML reader (`PolicySpec::from_toml`).
mod toml_reader;

/// Refuses an empty name or one longer than [`MAX_NAME_LEN`](super::limits::MAX_NAME_LEN) bytes.
pub(crate) fn check_name(name: &str, loc: Option<Loc>) -> Result<(), PolicyError> {
    use super::limits::MAX_NAME_LEN;
    if name.is_empty() {
        return Err(PolicyError::OutOfRange {
            node: String::new(),
            field: "name",
            value: "\"\"".to_string(),
            allowed: format!("a name of 1..={MAX_NAME_LEN} bytes"),
            loc,
        });
    }
    if name.len() > MAX_NAME_LEN {
        // Only the start of a long name, on a character boundary.
        let cut = (0..=64)
            .rev()
            .find(|&i| name.is_char_boundary(i))
            .unwrap_or(0);
        return Err(PolicyError::Limit {
            node: format!("{}...", &name[..cut]),
            field: "name length (bytes)",
            value: name.len() as u64,
            max: MAX_NAME_LEN as u64,
            limit: "MAX_NAME_LEN",
            loc,
        });
    }
    if name.chars().any(char::is_control) {
        // Names reach tables and terminals: no escape sequences, no
        // line breaks.
        return Err(PolicyError::OutOfRange {
            node: String::new(),
            field: "name",
            value: format!("{name:?}"),
            allowed: "a name without control characters (tabs, line breaks, escapes)".into(),
            loc,
        });
    }
    Ok(())
}
