//! Validation of a [`PolicySpec`] into a [`Policy`].

use std::collections::HashMap;

use super::spec::{Attach, Kind, Loc, NodeSpec, PolicyError, PolicySpec, QueueKind};

/// A validated policy tree, ready to instantiate with
/// [`PolicySched::new`](super::PolicySched::new).
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    pub(crate) nodes: Vec<NodeSpec>,
    /// Parent index per node (`None` for the root).
    pub(crate) parent: Vec<Option<usize>>,
    pub(crate) root: usize,
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

    /// Validates a policy: unique names, one root, known parents, no
    /// cycles, ranks and rates in range. Resolves default bucket counts.
    pub fn compile(mut spec: PolicySpec) -> Result<Policy, PolicyError> {
        let mut index: HashMap<String, usize> = HashMap::new();
        for (i, n) in spec.nodes.iter().enumerate() {
            if let Some(&j) = index.get(n.name.as_str()) {
                return Err(PolicyError::DuplicateNode {
                    node: n.name.clone(),
                    loc: n.loc,
                    first: spec.nodes[j].loc,
                });
            }
            index.insert(n.name.clone(), i);
        }
        let mut parent = Vec::with_capacity(spec.nodes.len());
        for n in &spec.nodes {
            parent.push(match &n.parent {
                None => None,
                Some(p) => {
                    Some(
                        *index
                            .get(p.as_str())
                            .ok_or_else(|| PolicyError::UnknownParent {
                                node: n.name.clone(),
                                parent: p.clone(),
                                loc: n.parent_loc.or(n.loc),
                            })?,
                    )
                }
            });
        }
        // Cycles: a walk up from any node must end at a parentless node
        // within `len` steps.
        for start in 0..spec.nodes.len() {
            let mut seen = vec![start];
            let mut at = start;
            while let Some(p) = parent[at] {
                if let Some(pos) = seen.iter().position(|&s| s == p) {
                    let mut path: Vec<String> = seen[pos..]
                        .iter()
                        .map(|&i| spec.nodes[i].name.clone())
                        .collect();
                    path.push(spec.nodes[p].name.clone());
                    return Err(PolicyError::Cycle {
                        node: spec.nodes[p].name.clone(),
                        path,
                        loc: spec.nodes[p].loc,
                    });
                }
                seen.push(p);
                at = p;
            }
        }
        let roots: Vec<usize> = (0..spec.nodes.len())
            .filter(|&i| parent[i].is_none())
            .collect();
        if roots.len() != 1 {
            return Err(PolicyError::Roots {
                roots: roots.iter().map(|&i| spec.nodes[i].name.clone()).collect(),
            });
        }
        let root = roots[0];
        let horizon = spec
            .shaper_unit
            .saturating_mul(spec.shaper_buckets as u64 - 2);
        let max_len = u64::from(spec.max_len);
        let check_rate = |n: &NodeSpec, field: &'static str, r: Option<crate::Rate>| {
            if let Some(r) = r {
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
            Ok(())
        };
        for (i, n) in spec.nodes.iter().enumerate() {
            check_rate(n, "rate", n.rate)?;
            check_rate(n, "flow_rate", n.flow_rate)?;
            let pk = parent[i].map(|p| spec.nodes[p].kind);
            match pk {
                Some(Kind::Prio { levels }) if n.prio >= levels => {
                    return Err(PolicyError::OutOfRange {
                        node: n.name.clone(),
                        field: "prio",
                        value: n.prio.to_string(),
                        allowed: format!(
                            "0..={} (levels of parent `{}`)",
                            levels - 1,
                            spec.nodes[parent[i].unwrap_or(root)].name
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
        }
        for n in &mut spec.nodes {
            let spread = |scale: u64| (max_len * scale + 2).next_power_of_two().max(64) as usize;
            if n.buckets == 0 {
                n.buckets = match n.kind {
                    Kind::Rr => 1,
                    Kind::Prio { levels } => levels as usize,
                    Kind::Wfq { scale } | Kind::Hclock { scale } => spread(scale),
                    Kind::Pfabric { .. } => 1 << 12,
                    Kind::Edf { .. } | Kind::Lstf { .. } => 1 << 14,
                };
            }
            if let (Kind::Prio { levels }, QueueKind::HierFfs | QueueKind::Auto) = (n.kind, n.queue)
                && n.buckets < levels as usize
            {
                {
                    return Err(PolicyError::OutOfRange {
                        node: n.name.clone(),
                        field: "buckets",
                        value: n.buckets.to_string(),
                        allowed: format!("at least levels = {levels}"),
                        loc: n.loc,
                    });
                }
            }
        }
        let mut has_child = vec![false; spec.nodes.len()];
        for p in parent.iter().flatten() {
            has_child[*p] = true;
        }
        let leaves: Vec<usize> = (0..spec.nodes.len()).filter(|&i| !has_child[i]).collect();
        let attach = match &spec.attach {
            Attach::RoundRobin => None,
            Attach::Node(name) => {
                Some(
                    *index
                        .get(name.as_str())
                        .ok_or_else(|| PolicyError::Invalid {
                            node: name.clone(),
                            msg: "policy.attach names a node that does not exist".to_string(),
                            loc: None::<Loc>,
                        })?,
                )
            }
        };
        Ok(Policy {
            parent,
            root,
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

    /// Depth of the tree: 1 for a lone root.
    pub fn depth(&self) -> usize {
        (0..self.nodes.len())
            .map(|mut i| {
                let mut d = 1;
                while let Some(p) = self.parent[i] {
                    d += 1;
                    i = p;
                }
                d
            })
            .max()
            .unwrap_or(0)
    }
}
