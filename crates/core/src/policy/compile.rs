//! Validation of a [`PolicySpec`] into a [`Policy`].

use std::collections::HashMap;

use super::limits::{
    MAX_BUCKETS, MAX_DEPTH, MAX_FLOW_TIME_NS, MAX_LEVELS, MAX_NODES, MAX_PACKET_LEN, MAX_SCALE,
    MAX_SHAPER_BUCKETS, MAX_SHAPER_UNIT_NS, MAX_TREE_BUCKETS, MAX_UNIT, MAX_WEIGHT,
};
use super::spec::{Attach, Kind, Loc, NodeSpec, PolicyError, PolicySpec, QueueKind, check_name};

/// A validated policy tree, ready to instantiate with
/// [`PolicySched::new`](super::PolicySched::new).
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    pub(crate) nodes: Vec<NodeSpec>,
    /// Parent index per node (`None` for the root).
    pub(crate) parent: Vec<Option<usize>>,
    pub(crate) root: usize,
    /// Levels from the root to the deepest node (1 for a lone root).
    pub(crate) depth: usize,
    /// Nodes without node children, in definition order.
    pub(crate) leaves: Vec<usize>,
    pub(crate) attach: Option<usize>,
    pub(crate) shaper_unit: u64,
    pub(crate) shaper_buckets: usize,
    pub(crate) max_len: u32,
}

impl Policy {
    /// Parses and validates a TOML policy.
    pub fn from_toml(src: &str) -> Result<Policy, PolicyError> {
        Policy::compile(PolicySpec::from_toml(src)?)
    }

    /// Parses and validates the policy text of a file called `name`: DOT
    /// if the name ends in `.dot` or `.gv`, TOML otherwise.
    pub fn from_named(name: &str, text: &str) -> Result<Policy, PolicyError> {
        if name.ends_with(".dot") || name.ends_with(".gv") {
            Policy::from_dot(text)
        } else {
            Policy::from_toml(text)
        }
    }

    /// Parses and validates a policy written in DOT (see
    /// [`super::dot`]).
    pub fn from_dot(src: &str) -> Result<Policy, PolicyError> {
        Policy::compile(PolicySpec::from_dot(src)?)
    }

    /// Validates a policy: sizes within [`super::limits`], unique names,
    /// one root, known parents, no cycles, ranks and rates in range.
    /// Resolves default bucket counts. Linear in the number of nodes (one
    /// hash map from names, one walk up the parent links that visits every
    /// node once), and never recursive.
    pub fn compile(mut spec: PolicySpec) -> Result<Policy, PolicyError> {
        if let Some(n) = spec.nodes.get(MAX_NODES) {
            return Err(PolicyError::Limit {
                node: "policy".to_string(),
                field: "nodes",
                value: spec.nodes.len() as u64,
                max: MAX_NODES as u64,
                limit: "MAX_NODES",
                loc: n.loc,
            });
        }
        check_globals(&spec)?;
        for n in &spec.nodes {
            check_name(&n.name, n.loc)?;
            check_fields(n)?;
        }
        let (parent, attach) = resolve_names(&spec)?;
        let (root, max_depth) = root_and_depth(&spec.nodes, &parent)?;
        for (i, n) in spec.nodes.iter().enumerate() {
            check_rates(&spec, n)?;
            check_placement(&spec.nodes, &parent, root, i)?;
        }
        resolve_buckets(&mut spec)?;
        let mut has_child = vec![false; spec.nodes.len()];
        for p in parent.iter().flatten() {
            has_child[*p] = true;
        }
        let leaves: Vec<usize> = (0..spec.nodes.len()).filter(|&i| !has_child[i]).collect();
        let attach = attach?;
        Ok(Policy {
            parent,
            root,
            depth: max_depth,
            leaves,
            attach,
            shaper_unit: spec.shaper_unit,
            shaper_buckets: spec.shaper_buckets,
            max_len: spec.max_len,
            nodes: spec.nodes,
        })
    }

    /// Index of the node called `name`.
    pub fn node(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// The first node with a rate limit (`rate` or `flow_rate`), if any:
    /// such a policy is not work conserving and needs a clock that moves.
    pub fn shaped_node(&self) -> Option<&str> {
        self.nodes
            .iter()
            .find(|n| n.rate.is_some() || n.flow_rate.is_some())
            .map(|n| n.name.as_str())
    }

    /// The nodes, in definition order (indices as in [`Policy::node`]).
    pub fn nodes(&self) -> &[NodeSpec] {
        &self.nodes
    }

    /// Depth of the tree: 1 for a lone root (at most
    /// [`MAX_DEPTH`](super::limits::MAX_DEPTH)).
    pub fn depth(&self) -> usize {
        self.depth
    }
}

/// Parent index per node, and the node `policy.attach` names (or why it
/// cannot be).
type ResolvedNames = (Vec<Option<usize>>, Result<Option<usize>, PolicyError>);

/// The parent index of every node (names unique, parents known), and the
/// node `policy.attach` names: resolved while the names are indexed, but
/// given back as a result of its own, to be refused (as before) only
/// after the tree itself checks out.
fn resolve_names(spec: &PolicySpec) -> Result<ResolvedNames, PolicyError> {
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(spec.nodes.len());
    for (i, n) in spec.nodes.iter().enumerate() {
        if let Some(&j) = index.get(n.name.as_str()) {
            return Err(PolicyError::DuplicateNode {
                node: n.name.clone(),
                loc: n.loc,
                first: spec.nodes[j].loc,
            });
        }
        index.insert(n.name.as_str(), i);
    }
    let mut parent = Vec::with_capacity(spec.nodes.len());
    for n in &spec.nodes {
        parent.push(match &n.parent {
            None => None,
            Some(p) => Some(
                *index
                    .get(p.as_str())
                    .ok_or_else(|| PolicyError::UnknownParent {
                        node: n.name.clone(),
                        parent: p.clone(),
                        loc: n.parent_loc.or(n.loc),
                    })?,
            ),
        });
    }
    let attach = match &spec.attach {
        Attach::RoundRobin => Ok(None),
        Attach::Node(name) => match index.get(name.as_str()) {
            Some(&i) => Ok(Some(i)),
            None => Err(PolicyError::Invalid {
                node: name.clone(),
                msg: "policy.attach names a node that does not exist".to_string(),
                loc: None::<Loc>,
            }),
        },
    };
    Ok((parent, attach))
}

/// The one root and the depth of the tree (no cycles, at most
/// [`MAX_DEPTH`] levels; the error names the first deepest node).
fn root_and_depth(
    nodes: &[NodeSpec],
    parent: &[Option<usize>],
) -> Result<(usize, usize), PolicyError> {
    let depth = depths(nodes, parent)?;
    let roots: Vec<usize> = (0..nodes.len()).filter(|&i| parent[i].is_none()).collect();
    if roots.len() != 1 {
        return Err(PolicyError::Roots {
            roots: roots.iter().map(|&i| nodes[i].name.clone()).collect(),
        });
    }
    let root = roots[0];
    // The deepest node (the first one, in definition order).
    let (deepest, max_depth) = depth
        .iter()
        .enumerate()
        .fold((root, 0), |b, (i, &d)| if d > b.1 { (i, d) } else { b });
    if max_depth > MAX_DEPTH {
        return Err(PolicyError::Limit {
            node: nodes[deepest].name.clone(),
            field: "depth",
            value: max_depth as u64,
            max: MAX_DEPTH as u64,
            limit: "MAX_DEPTH",
            loc: nodes[deepest].loc,
        });
    }
    Ok((root, max_depth))
}

/// A node's `rate` and `flow_rate`: slow enough that a largest packet
/// fits the shaper's horizon.
fn check_rates(spec: &PolicySpec, n: &NodeSpec) -> Result<(), PolicyError> {
    let horizon = super::spec::shaper_horizon(spec.shaper_unit, spec.shaper_buckets).as_u64();
    let max_len = u64::from(spec.max_len);
    for (field, rate) in [("rate", n.rate), ("flow_rate", n.flow_rate)] {
        if let Some(r) = rate {
            let t = r.tx_time(max_len).as_u64();
            if t > horizon {
                return Err(PolicyError::OutOfRange {
                    node: n.name.clone(),
                    field,
                    value: r.to_string(),
                    allowed: format!(
                        "a rate at which a {max_len}-byte packet takes at most the shaper horizon of {horizon} ns (this one takes {t} ns); raise policy.shaper_buckets or shaper_unit_ns"
                    ),
                    loc: n.loc,
                });
            }
        }
    }
    Ok(())
}

/// Node `i` where its parent's kind allows it: a prio below a prio
/// parent's levels, no node under an EDF or LSTF parent, a `reservation`
/// only under an hclock parent, a `flow_reservation` only on an hclock
/// node.
fn check_placement(
    nodes: &[NodeSpec],
    parent: &[Option<usize>],
    root: usize,
    i: usize,
) -> Result<(), PolicyError> {
    let n = &nodes[i];
    let pk = parent[i].map(|p| nodes[p].kind);
    match pk {
        Some(Kind::Prio { levels }) if n.prio >= levels => {
            return Err(PolicyError::OutOfRange {
                node: n.name.clone(),
                field: "prio",
                value: n.prio.to_string(),
                allowed: format!(
                    "0..={} (levels of parent `{}`)",
                    levels - 1,
                    nodes[parent[i].unwrap_or(root)].name
                ),
                loc: n.loc,
            });
        }
        Some(Kind::Edf { .. } | Kind::Lstf { .. }) => {
            return Err(PolicyError::Invalid {
                node: n.name.clone(),
                msg: format!(
                    "its parent `{}` ranks by head-packet deadlines and can only hold flows, not nodes",
                    n.parent.as_deref().unwrap_or("")
                ),
                loc: n.loc,
            });
        }
        _ => {}
    }
    if n.reservation.is_some() && !matches!(pk, Some(Kind::Hclock { .. })) {
        return Err(PolicyError::Invalid {
            node: n.name.clone(),
            msg: "`reservation` needs an hclock parent".to_string(),
            loc: n.loc,
        });
    }
    if n.flow_reservation.is_some() && !matches!(n.kind, Kind::Hclock { .. }) {
        return Err(PolicyError::Invalid {
            node: n.name.clone(),
            msg: "`flow_reservation` needs kind = \"hclock\"".to_string(),
            loc: n.loc,
        });
    }
    Ok(())
}

/// Sets every node's default bucket count (`buckets = 0`) from its kind,
/// and checks the counts: a prio node's hierarchical queue holds its
/// levels, and the queues allocated when the scheduler is built stay
/// within [`MAX_TREE_BUCKETS`] in all.
fn resolve_buckets(spec: &mut PolicySpec) -> Result<(), PolicyError> {
    let max_len = u64::from(spec.max_len);
    let mut eager: u64 = 0;
    for n in &mut spec.nodes {
        if n.buckets == 0 {
            n.buckets = default_buckets(n, max_len)?;
        }
        if let (Kind::Prio { levels }, QueueKind::HierFfs | QueueKind::Auto) = (n.kind, n.queue)
            && n.buckets < levels as usize
        {
            return Err(PolicyError::OutOfRange {
                node: n.name.clone(),
                field: "buckets",
                value: n.buckets.to_string(),
                allowed: format!("at least levels = {levels}"),
                loc: n.loc,
            });
        }
        // Queues chosen explicitly are allocated when the scheduler is
        // built; automatic ones only once they hold many children.
        eager += match n.queue {
            QueueKind::Cffs => 2 * n.buckets as u64,
            QueueKind::HierFfs => n.buckets as u64,
            QueueKind::Heap | QueueKind::Small | QueueKind::Auto => 0,
        };
        if eager > MAX_TREE_BUCKETS {
            return Err(PolicyError::Limit {
                node: n.name.clone(),
                field: "buckets of explicit cffs/hffs queues (cffs counts twice), summed up to this node",
                value: eager,
                max: MAX_TREE_BUCKETS,
                limit: "MAX_TREE_BUCKETS",
                loc: n.loc,
            });
        }
    }
    Ok(())
}

/// The bucket count of a node that gives none, by its kind; a WFQ or
/// hclock node spreads `max_len × scale` ranks (at most [`MAX_BUCKETS`]).
fn default_buckets(n: &NodeSpec, max_len: u64) -> Result<usize, PolicyError> {
    // `max_len` and `scale` are validated, so this cannot overflow.
    let spread = |scale: u64| (max_len * scale + 2).next_power_of_two().max(64) as usize;
    Ok(match n.kind {
        Kind::Rr => 1,
        Kind::Prio { levels } => levels as usize,
        Kind::Wfq { scale } | Kind::Hclock { scale } => {
            let b = spread(scale);
            if b > MAX_BUCKETS {
                return Err(PolicyError::OutOfRange {
                    node: n.name.clone(),
                    field: "scale",
                    value: scale.to_string(),
                    allowed: format!(
                        "1..={} with max_len = {max_len}: the default queue of {b} buckets (max_len × scale + 2, rounded up to a power of two) is over the limit MAX_BUCKETS = {MAX_BUCKETS}; lower scale or give `buckets`",
                        (MAX_BUCKETS as u64 - 2) / max_len
                    ),
                    loc: n.loc,
                });
            }
            b
        }
        Kind::Pfabric { .. } => 1 << 12,
        Kind::Edf { .. } | Kind::Lstf { .. } => 1 << 14,
    })
}

/// `field = value` outside `lo..=hi` as an error of node `node`.
fn range(
    node: &str,
    field: &'static str,
    value: u64,
    lo: u64,
    hi: u64,
    loc: Option<Loc>,
) -> Result<(), PolicyError> {
    if (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(PolicyError::OutOfRange {
            node: node.to_string(),
            field,
            value: value.to_string(),
            allowed: format!("{lo}..={hi}"),
            loc,
        })
    }
}

/// The global settings within their ranges (the TOML reader checks them
/// too, with their own positions; this covers specs built in code).
fn check_globals(spec: &PolicySpec) -> Result<(), PolicyError> {
    range(
        "policy",
        "shaper_unit_ns",
        spec.shaper_unit,
        1,
        MAX_SHAPER_UNIT_NS,
        None,
    )?;
    range(
        "policy",
        "shaper_buckets",
        spec.shaper_buckets as u64,
        2,
        MAX_SHAPER_BUCKETS as u64,
        None,
    )?;
    range(
        "policy",
        "max_len",
        u64::from(spec.max_len),
        1,
        u64::from(MAX_PACKET_LEN),
        None,
    )
}

/// A node's numeric fields within their ranges (as for the globals: the
/// TOML reader has checked them already).
fn check_fields(n: &NodeSpec) -> Result<(), PolicyError> {
    let r = |field, value, lo, hi| range(&n.name, field, value, lo, hi, n.loc);
    match n.kind {
        Kind::Rr => {}
        Kind::Prio { levels } => r("levels", u64::from(levels), 1, u64::from(MAX_LEVELS))?,
        Kind::Wfq { scale } | Kind::Hclock { scale } => r("scale", scale, 1, MAX_SCALE)?,
        Kind::Pfabric { unit } | Kind::Edf { unit } | Kind::Lstf { unit, .. } => {
            r("unit", unit, 1, MAX_UNIT)?
        }
    }
    // 0: chosen by the kind when compiled.
    r("buckets", n.buckets as u64, 0, MAX_BUCKETS as u64)?;
    r("weight", u64::from(n.weight), 1, u64::from(MAX_WEIGHT))?;
    r("flow_deadline_ns", n.flow_deadline, 0, MAX_FLOW_TIME_NS)?;
    r("flow_slack_ns", n.flow_slack, 0, MAX_FLOW_TIME_NS)
}

/// Depth of every node (1 for a root), refusing cycles: each node is
/// climbed from once — a walk up the parent links stops at a root, at a
/// node whose depth is known (then the walk's nodes get theirs on the way
/// back) or at a node of the same walk (a cycle). Linear and iterative.
fn depths(nodes: &[NodeSpec], parent: &[Option<usize>]) -> Result<Vec<usize>, PolicyError> {
    const OFF: usize = usize::MAX;
    // 0: not known yet.
    let mut depth = vec![0usize; nodes.len()];
    // Position of a node on the current walk, OFF when not on it.
    let mut on_walk = vec![OFF; nodes.len()];
    let mut walk: Vec<usize> = Vec::new();
    for start in 0..nodes.len() {
        if depth[start] != 0 {
            continue;
        }
        walk.clear();
        let mut at = start;
        let base = loop {
            #[cfg(test)]
            steps::add(1);
            if depth[at] != 0 {
                break depth[at];
            }
            if on_walk[at] != OFF {
                let mut path: Vec<String> = walk[on_walk[at]..]
                    .iter()
                    .map(|&i| nodes[i].name.clone())
                    .collect();
                path.push(nodes[at].name.clone());
                return Err(PolicyError::Cycle {
                    node: nodes[at].name.clone(),
                    path,
                    loc: nodes[at].loc,
                });
            }
            on_walk[at] = walk.len();
            walk.push(at);
            match parent[at] {
                Some(p) => at = p,
                None => break 0,
            }
        };
        for (k, &i) in walk.iter().rev().enumerate() {
            depth[i] = base + k + 1;
            on_walk[i] = OFF;
        }
    }
    Ok(depth)
}

/// Steps taken by the cycle and depth walk on this thread (tests show it
/// is linear by counting, not timing).
#[cfg(test)]
pub(crate) mod steps {
    use std::cell::Cell;

    thread_local! {
        static STEPS: Cell<u64> = const { Cell::new(0) };
    }

    pub(crate) fn add(n: u64) {
        STEPS.with(|s| s.set(s.get() + n));
    }

    /// Steps so far, and resets the count.
    pub(crate) fn take() -> u64 {
        STEPS.with(|s| s.replace(0))
    }
}
