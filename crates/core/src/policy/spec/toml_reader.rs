//! The policy file's TOML reader: [`PolicySpec::from_toml`], every
//! field checked against its range and named with its line and column.

use super::*;

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
        use crate::policy::limits::MAX_NODES;
        // Positions from one pass over the text, not a rescan per node.
        let lines = LineIndex::new(src);
        let f: file::File = toml::from_str(src).map_err(|e| PolicyError::Syntax {
            loc: e.span().map(|s| lines.loc(s.start)),
            msg: crate::policy::toml_error::describe(
                src,
                e.span().map_or(0, |s| s.start),
                e.message(),
            ),
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
        use crate::policy::limits::{MAX_PACKET_LEN, MAX_SHAPER_BUCKETS, MAX_SHAPER_UNIT_NS};
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
        use crate::policy::limits::{MAX_BUCKETS, MAX_FLOW_TIME_NS, MAX_WEIGHT};
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
        use crate::policy::limits::{MAX_LEVELS, MAX_SCALE, MAX_UNIT};
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
