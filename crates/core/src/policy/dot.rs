//! Policies written as Graphviz DOT: the same nodes and keys as the TOML
//! format, with the tree drawn as `parent -> child` edges.
//!
//! ```dot
//! digraph hpfq {
//!     shaper_unit_ns = 1000;            // [policy] keys as graph attributes
//!     root   [kind = wfq, rate = "1gbit"];
//!     gold   [kind = wfq, weight = 3];
//!     silver [kind = wfq, rate = "200mbit"];
//!     root -> gold;
//!     root -> silver;
//! }
//! ```
//!
//! Supported: `digraph` (optionally `strict`, optionally named), node
//! statements with attribute lists (repeated statements merge), edge
//! chains `a -> b -> c`, graph attributes as `key = value` or
//! `graph [key = value]`, quoted strings, `//`, `/* */` and `#` comments.
//! Graphviz display attributes (`label`, `shape`, `color`, `style`,
//! `fillcolor`, `fontname`, `fontsize`, `rankdir`, `xlabel`, `tooltip`)
//! are ignored so the same file can be drawn with `dot -Tsvg`. Anything
//! else — undirected graphs, subgraphs, `node [...]`/`edge [...]`
//! defaults, attributes on edges, a node with two parents, a node without
//! `kind` — is refused with the line and column. Values that look like
//! integers are numbers; everything else is a string (so `rate = 1gbit` and
//! `rate = "1gbit"` are the same). Validation is the TOML path's: every
//! error names the node and its position in the DOT file.

use std::collections::HashMap;

use super::spec::{Loc, PolicyError, PolicySpec};
use lex::syntax;
use parse::{Attr, parse};

mod lex;
mod parse;

/// Graphviz attributes that only affect drawing.
const DISPLAY: [&str; 10] = [
    "label",
    "shape",
    "color",
    "style",
    "fillcolor",
    "fontname",
    "fontsize",
    "rankdir",
    "xlabel",
    "tooltip",
];

/// Keys whose values are always strings.
const STRING_KEYS: [&str; 8] = [
    "kind",
    "queue",
    "link_rate",
    "rate",
    "reservation",
    "flow_rate",
    "flow_reservation",
    "attach",
];

/// Writes one `key = value` TOML line and remembers where it came from.
fn line(
    toml: &mut String,
    map: &mut Vec<(Loc, String)>,
    key: &str,
    val: &str,
    quoted: bool,
    loc: Loc,
) {
    let as_int = !quoted && !STRING_KEYS.contains(&key) && val.parse::<u64>().is_ok();
    let qkey = toml::Value::String(key.to_string()).to_string();
    let val = if as_int {
        val.to_string()
    } else {
        toml::Value::String(val.to_string()).to_string()
    };
    toml.push_str(&format!("{qkey} = {val}\n"));
    map.push((loc, key.to_string()));
}

/// Puts a DOT position on an error found in the generated TOML.
fn remap(e: PolicyError, map: &[(Loc, String)]) -> PolicyError {
    let at = |l: Loc| map.get((l.line as usize).wrapping_sub(1));
    let m = |l: Option<Loc>| l.map(|l| at(l).map_or(l, |x| x.0));
    match e {
        PolicyError::Syntax { loc, msg } => {
            // Name the attribute: TOML's own message only names the type.
            let msg = match loc.and_then(at) {
                Some((_, key)) if !key.is_empty() => format!("attribute `{key}`: {msg}"),
                _ => msg,
            };
            PolicyError::Syntax { loc: m(loc), msg }
        }
        PolicyError::DuplicateNode { node, loc, first } => PolicyError::DuplicateNode {
            node,
            loc: m(loc),
            first: m(first),
        },
        PolicyError::UnknownParent { node, parent, loc } => PolicyError::UnknownParent {
            node,
            parent,
            loc: m(loc),
        },
        PolicyError::Cycle { node, path, loc } => PolicyError::Cycle {
            node,
            path,
            loc: m(loc),
        },
        PolicyError::Roots { roots } => PolicyError::Roots { roots },
        PolicyError::MissingRate {
            node,
            field,
            why,
            loc,
        } => PolicyError::MissingRate {
            node,
            field,
            why,
            loc: m(loc),
        },
        PolicyError::OutOfRange {
            node,
            field,
            value,
            allowed,
            loc,
        } => PolicyError::OutOfRange {
            node,
            field,
            value,
            allowed,
            loc: m(loc),
        },
        PolicyError::Invalid { node, msg, loc } => PolicyError::Invalid {
            node,
            msg,
            loc: m(loc),
        },
        PolicyError::Limit {
            node,
            field,
            value,
            max,
            limit,
            loc,
        } => PolicyError::Limit {
            node,
            field,
            value,
            max,
            limit,
            loc: m(loc),
        },
    }
}

impl PolicySpec {
    /// Parses a policy written in DOT (see [`super::dot`]'s docs); errors
    /// carry the line and column in the DOT text.
    pub fn from_dot(src: &str) -> Result<PolicySpec, PolicyError> {
        let (globals, nodes) = parse(src)?;
        let mut toml = String::new();
        // `map[i]`: the DOT position of generated line i + 1.
        let mut map = Vec::new();
        let start = Loc { line: 1, col: 1 };
        let globals: Vec<&Attr> = globals
            .iter()
            .filter(|a| !DISPLAY.contains(&a.0.as_str()))
            .collect();
        if !globals.is_empty() {
            toml.push_str("[policy]\n");
            map.push((globals[0].3, String::new()));
            for (k, v, q, l) in globals {
                line(&mut toml, &mut map, k, v, *q, *l);
            }
        }
        for n in &nodes {
            if !n.attrs.iter().any(|a| a.0 == "kind") {
                return Err(PolicyError::Invalid {
                    node: n.name.clone(),
                    msg: "no `kind` attribute (rr, prio, wfq, pfabric, edf, lstf, hclock)"
                        .to_string(),
                    loc: Some(n.loc),
                });
            }
            toml.push_str("[[node]]\n");
            map.push((n.loc, String::new()));
            line(&mut toml, &mut map, "name", &n.name, true, n.loc);
            if let Some((p, pl)) = &n.parent {
                line(&mut toml, &mut map, "parent", p, true, *pl);
            }
            let mut seen: HashMap<&str, usize> = HashMap::new();
            let mut attrs: Vec<&Attr> = Vec::new();
            for a in n.attrs.iter().filter(|a| !DISPLAY.contains(&a.0.as_str())) {
                if a.0 == "name" || a.0 == "parent" {
                    return Err(syntax(
                        a.3,
                        format!(
                            "attribute `{}`: the node's name is its DOT id and its parent comes from `parent -> {}`",
                            a.0, n.name
                        ),
                    ));
                }
                // A repeated key: the later statement wins, as in DOT.
                match seen.get(a.0.as_str()) {
                    Some(&i) => attrs[i] = a,
                    None => {
                        seen.insert(a.0.as_str(), attrs.len());
                        attrs.push(a);
                    }
                }
            }
            for (k, v, q, l) in attrs {
                line(&mut toml, &mut map, k, v, *q, *l);
            }
        }
        if nodes.is_empty() {
            map.push((start, String::new()));
        }
        let mut spec = PolicySpec::from_toml(&toml).map_err(|e| remap(e, &map))?;
        // Positions of the validated spec point into the DOT text too.
        for (s, n) in spec.nodes.iter_mut().zip(&nodes) {
            s.loc = Some(n.loc);
            s.parent_loc = n.parent.as_ref().map(|p| p.1);
        }
        Ok(spec)
    }
}
