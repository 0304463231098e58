//! The DOT subset's grammar: the `digraph` header, statements (graph
//! attributes, nodes with attributes, edge chains) and the node limit.

use std::collections::HashMap;

use super::lex::{Tok, syntax, tokenize};
use crate::policy::limits::MAX_NODES;
use crate::policy::spec::{LineIndex, Loc, PolicyError};

/// One attribute as written: key, value, whether it was quoted, where.
pub(super) type Attr = (String, String, bool, Loc);

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
pub(super) struct DotNode {
    pub(super) name: String,
    pub(super) loc: Loc,
    pub(super) attrs: Vec<Attr>,
    pub(super) parent: Option<(String, Loc)>,
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
pub(super) fn parse(src: &str) -> Result<(Vec<Attr>, Vec<DotNode>), PolicyError> {
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
