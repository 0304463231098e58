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

use super::limits::MAX_NODES;
use super::spec::{LineIndex, Loc, PolicyError, PolicySpec};

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

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Id(String),
    Quoted(String),
    Punct(&'static str),
}

fn syntax(loc: Loc, msg: impl Into<String>) -> PolicyError {
    PolicyError::Syntax {
        loc: Some(loc),
        msg: msg.into(),
    }
}

fn tokenize(src: &str) -> Result<Vec<(Tok, Loc)>, PolicyError> {
    let mut out = Vec::new();
    let b = src.as_bytes();
    // Positions without rescanning the line for every token.
    let lines = LineIndex::new(src);
    let mut i = 0;
    let mut line_start = true;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'#' && line_start {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        line_start = false;
        let loc = lines.loc(i);
        if src[i..].starts_with("//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if src[i..].starts_with("/*") {
            match src[i + 2..].find("*/") {
                Some(end) => i += 2 + end + 2,
                None => return Err(syntax(loc, "comment `/*` is never closed")),
            }
            continue;
        }
        if let Some(p) = ["->", "--"].into_iter().find(|p| src[i..].starts_with(p)) {
            out.push((Tok::Punct(p), loc));
            i += 2;
            continue;
        }
        match c {
            b'{' | b'}' | b'[' | b']' | b'=' | b';' | b',' => {
                let p = match c {
                    b'{' => "{",
                    b'}' => "}",
                    b'[' => "[",
                    b']' => "]",
                    b'=' => "=",
                    b';' => ";",
                    _ => ",",
                };
                out.push((Tok::Punct(p), loc));
                i += 1;
            }
            b'"' => {
                let mut s = String::new();
                let mut j = i + 1;
                let mut closed = false;
                let mut chars = src[j..].char_indices();
                while let Some((k, ch)) = chars.next() {
                    match ch {
                        '"' => {
                            j += k + 1;
                            closed = true;
                            break;
                        }
                        '\\' => match chars.next() {
                            Some((_, '"')) => s.push('"'),
                            Some((_, '\n')) => {}
                            Some((_, other)) => {
                                s.push('\\');
                                s.push(other);
                            }
                            None => break,
                        },
                        _ => s.push(ch),
                    }
                }
                if !closed {
                    return Err(syntax(loc, "string is never closed (missing `\"`)"));
                }
                out.push((Tok::Quoted(s), loc));
                i = j;
            }
            _ if c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c >= 0x80 => {
                let start = i;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric()
                        || b[i] == b'_'
                        || b[i] == b'.'
                        || b[i] >= 0x80)
                {
                    i += 1;
                }
                out.push((Tok::Id(src[start..i].to_string()), loc));
            }
            _ => {
                let ch = src[i..].chars().next().unwrap_or('?');
                return Err(syntax(
                    loc,
                    format!(
                        "unexpected character `{ch}` (DOT identifiers are letters, digits, `_` and `.`; quote anything else)"
                    ),
                ));
            }
        }
    }
    Ok(out)
}

/// One attribute as written: key, value, whether it was quoted, where.
type Attr = (String, String, bool, Loc);

struct Parser {
    toks: Vec<(Tok, Loc)>,
    pos: usize,
    end: Loc,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }
    fn loc(&self) -> Loc {
        self.toks.get(self.pos).map_or(self.end, |t| t.1)
    }
    fn next(&mut self) -> Option<(Tok, Loc)> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }
    fn eat(&mut self, p: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Punct(x)) if *x == p) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, p: &'static str, what: &str) -> Result<(), PolicyError> {
        if self.eat(p) {
            Ok(())
        } else {
            Err(syntax(self.loc(), format!("expected `{p}` {what}")))
        }
    }
    /// An identifier or quoted string: (text, quoted, loc).
    fn id(&mut self, what: &str) -> Result<(String, bool, Loc), PolicyError> {
        let loc = self.loc();
        match self.next() {
            Some((Tok::Id(s), l)) => Ok((s, false, l)),
            Some((Tok::Quoted(s), l)) => Ok((s, true, l)),
            _ => Err(syntax(loc, format!("expected {what}"))),
        }
    }
    /// `[k = v, ...]` lists, possibly several in a row.
    fn attrs(&mut self) -> Result<Vec<Attr>, PolicyError> {
        let mut v = Vec::new();
        while self.eat("[") {
            loop {
                if self.eat("]") {
                    break;
                }
                let (k, _, kl) = self.id("an attribute name or `]`")?;
                self.expect("=", &format!("after attribute `{k}`"))?;
                let (val, q, _) = self.id(&format!("a value for attribute `{k}`"))?;
                v.push((k, val, q, kl));
                let _ = self.eat(",") || self.eat(";");
            }
        }
        Ok(v)
    }
}

/// A node as collected from the DOT file.
struct DotNode {
    name: String,
    loc: Loc,
    attrs: Vec<Attr>,
    parent: Option<(String, Loc)>,
}

/// `[strict] digraph [name] {`: everything before the statements.
fn header(p: &mut Parser) -> Result<(), PolicyError> {
    if matches!(p.peek(), Some(Tok::Id(s)) if s.eq_ignore_ascii_case("strict")) {
        p.pos += 1;
    }
    let (kw, _, kl) = p.id("`digraph`")?;
    if kw.eq_ignore_ascii_case("graph") {
        return Err(syntax(
            kl,
            "an undirected `graph` cannot give parents: write `digraph` with `parent -> child` edges",
        ));
    }
    if !kw.eq_ignore_ascii_case("digraph") {
        return Err(syntax(kl, format!("expected `digraph`, found `{kw}`")));
    }
    if !matches!(p.peek(), Some(Tok::Punct("{"))) {
        p.id("a graph name or `{`")?;
    }
    p.expect("{", "to open the graph")
}

/// What the statements collect: graph attributes, and the nodes in order
/// of first mention.
#[derive(Default)]
struct Graph {
    globals: Vec<Attr>,
    nodes: Vec<DotNode>,
    index: HashMap<String, usize>,
}

impl Graph {
    /// The node called `name`, created (at `loc`) on first mention.
    fn touch(&mut self, name: &str, loc: Loc) -> usize {
        let nodes = &mut self.nodes;
        *self.index.entry(name.to_string()).or_insert_with(|| {
            nodes.push(DotNode {
                name: name.to_string(),
                loc,
                attrs: Vec::new(),
                parent: None,
            });
            nodes.len() - 1
        })
    }

    /// One statement: `graph [...]`, `key = value`, a node with its
    /// attributes, or an edge chain.
    fn statement(&mut self, p: &mut Parser) -> Result<(), PolicyError> {
        let loc = p.loc();
        let (first, quoted, fl) = p.id("a node, an edge, `key = value` or `}`")?;
        if !quoted {
            match first.to_ascii_lowercase().as_str() {
                "graph" if matches!(p.peek(), Some(Tok::Punct("["))) => {
                    self.globals.extend(p.attrs()?);
                    return Ok(());
                }
                "node" | "edge" if matches!(p.peek(), Some(Tok::Punct("["))) => {
                    return Err(syntax(
                        loc,
                        format!(
                            "default attributes (`{first} [...]`) are not supported: give each node its own attributes"
                        ),
                    ));
                }
                "subgraph" => {
                    return Err(syntax(
                        loc,
                        "subgraphs are not supported: the tree is given by `parent -> child` edges",
                    ));
                }
                _ => {}
            }
        }
        if p.eat("=") {
            let (v, q, _) = p.id(&format!("a value for `{first}`"))?;
            self.globals.push((first, v, q, fl));
            return Ok(());
        }
        if matches!(p.peek(), Some(Tok::Punct("--"))) {
            return Err(syntax(
                p.loc(),
                "undirected edge `--`: write `parent -> child`",
            ));
        }
        let mut chain = vec![(first, fl)];
        while p.eat("->") {
            let (n, _, l) = p.id("a node after `->`")?;
            chain.push((n, l));
        }
        let attrs = p.attrs()?;
        if chain.len() == 1 {
            let (name, l) = &chain[0];
            let i = self.touch(name, *l);
            self.nodes[i].attrs.extend(attrs);
            return Ok(());
        }
        if let Some(a) = attrs.first() {
            return Err(syntax(
                a.3,
                format!(
                    "attribute `{}` on an edge: put node keys on the child node",
                    a.0
                ),
            ));
        }
        self.edges(&chain)
    }

    /// `a -> b -> c`: each node the parent of the next; a node's own
    /// parent or a second parent is refused (a policy is a tree).
    fn edges(&mut self, chain: &[(String, Loc)]) -> Result<(), PolicyError> {
        let ids: Vec<usize> = chain.iter().map(|(name, l)| self.touch(name, *l)).collect();
        for (k, w) in chain.windows(2).enumerate() {
            let (parent, pl) = &w[0];
            let (child, cl) = &w[1];
            if parent == child {
                return Err(PolicyError::Invalid {
                    node: child.clone(),
                    msg: format!(
                        "edge `{child} -> {child}` ({pl}) makes the node its own parent; a policy is a tree"
                    ),
                    loc: Some(*cl),
                });
            }
            let i = ids[k + 1];
            if let Some((old, ol)) = &self.nodes[i].parent
                && old != parent
            {
                return Err(PolicyError::Invalid {
                    node: child.clone(),
                    msg: format!(
                        "two parents: `{old}` ({ol}) and `{parent}` ({pl}); a policy is a tree"
                    ),
                    loc: Some(*cl),
                });
            }
            self.nodes[i].parent = Some((parent.clone(), *pl));
        }
        Ok(())
    }
}

/// Parses the DOT subset into globals and nodes (in order of first
/// mention).
fn parse(src: &str) -> Result<(Vec<Attr>, Vec<DotNode>), PolicyError> {
    let mut p = Parser {
        toks: tokenize(src)?,
        pos: 0,
        end: LineIndex::new(src).loc(src.len()),
    };
    header(&mut p)?;
    let mut graph = Graph::default();
    loop {
        if p.eat("}") {
            break;
        }
        if p.eat(";") {
            continue;
        }
        graph.statement(&mut p)?;
    }
    if p.pos < p.toks.len() {
        return Err(syntax(p.loc(), "text after the closing `}` of the graph"));
    }
    if let Some(n) = graph.nodes.get(MAX_NODES) {
        return Err(PolicyError::Limit {
            node: "policy".to_string(),
            field: "nodes",
            value: graph.nodes.len() as u64,
            max: MAX_NODES as u64,
            limit: "MAX_NODES",
            loc: Some(n.loc),
        });
    }
    Ok((graph.globals, graph.nodes))
}

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
