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

// ---------------------------------------------------------------- TOML

mod file {
    use serde::Deserialize;
    use toml::Spanned;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct File {
        #[serde(default)]
        pub(super) policy: Globals,
        #[serde(default)]
        pub(super) node: Vec<Node>,
    }

    #[derive(Deserialize, Default)]
    #[serde(deny_unknown_fields)]
    pub(super) struct Globals {
        pub(super) shaper_unit_ns: Option<Spanned<u64>>,
        pub(super) shaper_buckets: Option<Spanned<u64>>,
        pub(super) max_len: Option<Spanned<u64>>,
        pub(super) attach: Option<Spanned<String>>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct Node {
        pub(super) name: Spanned<String>,
        pub(super) parent: Option<Spanned<String>>,
        pub(super) kind: Spanned<String>,
        pub(super) queue: Option<Spanned<String>>,
        pub(super) buckets: Option<Spanned<u64>>,
        pub(super) weight: Option<Spanned<u64>>,
        pub(super) prio: Option<Spanned<u64>>,
        pub(super) levels: Option<Spanned<u64>>,
        pub(super) scale: Option<Spanned<u64>>,
        pub(super) unit: Option<Spanned<u64>>,
        pub(super) link_rate: Option<Spanned<String>>,
        pub(super) rate: Option<Spanned<String>>,
        pub(super) reservation: Option<Spanned<String>>,
        pub(super) flow_rate: Option<Spanned<String>>,
        pub(super) flow_reservation: Option<Spanned<String>>,
        pub(super) flow_deadline_ns: Option<Spanned<u64>>,
        pub(super) flow_slack_ns: Option<Spanned<u64>>,
    }
}

impl PolicySpec {
    /// Parses a policy written in TOML (see the module docs for the
    /// format). Errors carry the line and column of the offending key.
    pub fn from_toml(src: &str) -> Result<PolicySpec, PolicyError> {
        use super::limits::MAX_NODES;
        // Positions from one pass over the text, not a rescan per node.
        let lines = LineIndex::new(src);
        let f: file::File = toml::from_str(src).map_err(|e| PolicyError::Syntax {
            loc: e.span().map(|s| lines.loc(s.start)),
            msg: super::toml_error::describe(src, e.span().map_or(0, |s| s.start), e.message()),
        })?;
        let cx = TomlCx { lines: &lines };
        if let Some(n) = f.node.get(MAX_NODES) {
            return Err(PolicyError::Limit {
                node: "policy".to_string(),
                field: "nodes",
                value: f.node.len() as u64,
                max: MAX_NODES as u64,
                limit: "MAX_NODES",
                loc: cx.loc_of(n.name.span()),
            });
        }
        let mut spec = PolicySpec::new(Vec::new());
        cx.read_globals(&f.policy, &mut spec)?;
        for n in &f.node {
            spec.nodes.push(cx.node(n)?);
        }
        Ok(spec)
    }
}

/// Positions and range checks for the TOML reader.
struct TomlCx<'a> {
    lines: &'a LineIndex<'a>,
}

impl TomlCx<'_> {
    fn loc_of(&self, span: core::ops::Range<usize>) -> Option<Loc> {
        Some(self.lines.loc(span.start))
    }

    /// `field = v` of `node` outside `allowed`, at `span`.
    fn bad(
        &self,
        node: &str,
        field: &'static str,
        v: &dyn ToString,
        allowed: &str,
        span: core::ops::Range<usize>,
    ) -> PolicyError {
        PolicyError::OutOfRange {
            node: node.to_string(),
            field,
            value: v.to_string(),
            allowed: allowed.to_string(),
            loc: self.loc_of(span),
        }
    }

    /// A whole number of node `node` within `lo..=hi`, `default` if absent.
    fn int(
        &self,
        node: &str,
        v: &Option<toml::Spanned<u64>>,
        field: &'static str,
        (lo, hi): (u64, u64),
        default: u64,
    ) -> Result<u64, PolicyError> {
        match v {
            None => Ok(default),
            Some(s) if (lo..=hi).contains(s.get_ref()) => Ok(*s.get_ref()),
            Some(s) => Err(self.bad(node, field, s.get_ref(), &format!("{lo}..={hi}"), s.span())),
        }
    }

    /// A rate of node `node` (`Rate::parse` syntax), if given.
    fn rate(
        &self,
        node: &str,
        v: &Option<toml::Spanned<String>>,
        field: &'static str,
    ) -> Result<Option<Rate>, PolicyError> {
        match v {
            None => Ok(None),
            Some(s) => Rate::parse(s.get_ref())
                .map(Some)
                .map_err(|e| PolicyError::Invalid {
                    node: node.to_string(),
                    msg: format!("{field} = \"{}\": {e}", s.get_ref()),
                    loc: self.loc_of(s.span()),
                }),
        }
    }

    /// The `[policy]` table into `spec`: shaper unit and buckets, max_len,
    /// attach.
    fn read_globals(&self, g: &file::Globals, spec: &mut PolicySpec) -> Result<(), PolicyError> {
        use super::limits::{MAX_PACKET_LEN, MAX_SHAPER_BUCKETS, MAX_SHAPER_UNIT_NS};
        if let Some(u) = &g.shaper_unit_ns {
            if *u.get_ref() == 0 || *u.get_ref() > MAX_SHAPER_UNIT_NS {
                return Err(self.bad(
                    "policy",
                    "shaper_unit_ns",
                    u.get_ref(),
                    &format!("1..={MAX_SHAPER_UNIT_NS}"),
                    u.span(),
                ));
            }
            spec.shaper_unit = *u.get_ref();
        }
        if let Some(b) = &g.shaper_buckets {
            if *b.get_ref() < 2 || *b.get_ref() > MAX_SHAPER_BUCKETS as u64 {
                return Err(self.bad(
                    "policy",
                    "shaper_buckets",
                    b.get_ref(),
                    &format!("2..={MAX_SHAPER_BUCKETS}"),
                    b.span(),
                ));
            }
            spec.shaper_buckets = *b.get_ref() as usize;
        }
        if let Some(m) = &g.max_len {
            if *m.get_ref() == 0 || *m.get_ref() > u64::from(MAX_PACKET_LEN) {
                return Err(self.bad(
                    "policy",
                    "max_len",
                    m.get_ref(),
                    &format!("1..={MAX_PACKET_LEN}"),
                    m.span(),
                ));
            }
            spec.max_len = *m.get_ref() as u32;
        }
        if let Some(a) = &g.attach {
            spec.attach = match a.get_ref().as_str() {
                "round_robin" => Attach::RoundRobin,
                n => Attach::Node(n.to_string()),
            };
        }
        Ok(())
    }

    /// One `[[node]]` entry: its name, kind, queue and fields in range.
    fn node(&self, n: &file::Node) -> Result<NodeSpec, PolicyError> {
        use super::limits::{MAX_BUCKETS, MAX_FLOW_TIME_NS, MAX_WEIGHT};
        let name = n.name.get_ref().as_str();
        let loc = self.loc_of(n.name.span());
        check_name(name, loc)?;
        let kind = self.node_kind(n)?;
        let mut s = NodeSpec::new(name, n.parent.as_ref().map(|p| p.get_ref().as_str()), kind);
        s.loc = loc;
        s.parent_loc = n.parent.as_ref().and_then(|p| self.loc_of(p.span()));
        if let Some(q) = &n.queue {
            s.queue = self.queue_kind(name, q)?;
        }
        let int = |v, field, range, default| self.int(name, v, field, range, default);
        let rate = |v, field| self.rate(name, v, field);
        s.buckets = int(&n.buckets, "buckets", (1, MAX_BUCKETS as u64), 0)? as usize;
        s.weight = int(&n.weight, "weight", (1, u64::from(MAX_WEIGHT)), 1)? as u32;
        s.prio = int(&n.prio, "prio", (0, u64::from(u32::MAX)), 0)? as u32;
        s.rate = rate(&n.rate, "rate")?;
        s.reservation = rate(&n.reservation, "reservation")?;
        s.flow_rate = rate(&n.flow_rate, "flow_rate")?;
        s.flow_reservation = rate(&n.flow_reservation, "flow_reservation")?;
        s.flow_deadline = int(
            &n.flow_deadline_ns,
            "flow_deadline_ns",
            (0, MAX_FLOW_TIME_NS),
            0,
        )?;
        s.flow_slack = int(&n.flow_slack_ns, "flow_slack_ns", (0, MAX_FLOW_TIME_NS), 0)?;
        Ok(s)
    }

    /// A node's `kind` with the fields that kind reads (levels, scale,
    /// unit, link_rate), defaults filled in.
    fn node_kind(&self, n: &file::Node) -> Result<Kind, PolicyError> {
        use super::limits::{MAX_LEVELS, MAX_SCALE, MAX_UNIT};
        let name = n.name.get_ref().as_str();
        let int = |v, field, range, default| self.int(name, v, field, range, default);
        Ok(match n.kind.get_ref().as_str() {
            "rr" | "fifo" => Kind::Rr,
            "prio" | "strict" => Kind::Prio {
                levels: int(&n.levels, "levels", (1, u64::from(MAX_LEVELS)), 8)? as u32,
            },
            "wfq" | "stfq" => Kind::Wfq {
                scale: int(&n.scale, "scale", (1, MAX_SCALE), 4)?,
            },
            "pfabric" => Kind::Pfabric {
                unit: int(&n.unit, "unit", (1, MAX_UNIT), 1)?,
            },
            "edf" => Kind::Edf {
                unit: int(&n.unit, "unit", (1, MAX_UNIT), 1000)?,
            },
            "lstf" => Kind::Lstf {
                unit: int(&n.unit, "unit", (1, MAX_UNIT), 1000)?,
                link: self.rate(name, &n.link_rate, "link_rate")?.ok_or_else(|| {
                    PolicyError::MissingRate {
                        node: name.to_string(),
                        field: "link_rate",
                        why: "for kind = \"lstf\" (slack subtracts the transmission time)",
                        loc: self.loc_of(n.name.span()),
                    }
                })?,
            },
            "hclock" => Kind::Hclock {
                scale: int(&n.scale, "scale", (1, MAX_SCALE), 4)?,
            },
            other => {
                return Err(PolicyError::Invalid {
                    node: name.to_string(),
                    msg: format!(
                        "unknown kind `{other}`; allowed: rr, prio, wfq (stfq), pfabric, edf, lstf, hclock"
                    ),
                    loc: self.loc_of(n.kind.span()),
                });
            }
        })
    }

    /// A node's `queue`.
    fn queue_kind(&self, node: &str, q: &toml::Spanned<String>) -> Result<QueueKind, PolicyError> {
        Ok(match q.get_ref().as_str() {
            "cffs" => QueueKind::Cffs,
            "hffs" | "hierffs" => QueueKind::HierFfs,
            "heap" => QueueKind::Heap,
            "small" => QueueKind::Small,
            "auto" => QueueKind::Auto,
            other => {
                return Err(PolicyError::Invalid {
                    node: node.to_string(),
                    msg: format!("unknown queue `{other}`; allowed: cffs, hffs, heap, small, auto"),
                    loc: self.loc_of(q.span()),
                });
            }
        })
    }
}

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
