//! Limits on policy size and hostile input: deep chains and wide trees are
//! validated in linear work, and every limit error names field, value and
//! range.

use super::spec_tests::err;
use super::*;
use crate::flow::{FlowConfig, Pkt};
use crate::sched::Scheduler;
use crate::units::Nanos;

/// A chain `n0 <- n1 <- ... <- n{len-1}` of wfq nodes, as TOML.
fn chain_toml(len: usize) -> String {
    let mut s = String::from("[[node]]\nname = \"n0\"\nkind = \"wfq\"\n");
    for i in 1..len {
        s += &format!(
            "[[node]]\nname = \"n{i}\"\nparent = \"n{}\"\nkind = \"wfq\"\n",
            i - 1
        );
    }
    s
}

/// A root with `len − 1` rr leaves, as TOML.
fn wide_toml(len: usize) -> String {
    let mut s = String::from("[[node]]\nname = \"root\"\nkind = \"wfq\"\n");
    for i in 1..len {
        s += &format!("[[node]]\nname = \"n{i}\"\nparent = \"root\"\nkind = \"rr\"\n");
    }
    s
}

/// Validates `src`, returning the result and the steps of the cycle/depth
/// walk it took.
fn counted(src: &str) -> (Result<Policy, PolicyError>, u64) {
    let _ = super::compile::steps::take();
    let r = Policy::from_toml(src);
    (r, super::compile::steps::take())
}

#[test]
fn a_ten_thousand_level_chain_is_refused_by_the_depth_limit_in_linear_work() {
    let n = 10_000;
    let (r, steps) = counted(&chain_toml(n));
    let e = r.expect_err("a 10 000-level chain");
    assert!(
        matches!(&e, PolicyError::Limit { node, field: "depth", value: 10_000, max: 64, limit: "MAX_DEPTH", loc: Some(_) } if node == "n9999"),
        "{e}"
    );
    let msg = e.to_string();
    for w in ["depth = 10000", "MAX_DEPTH = 64", "node `n9999`", "line "] {
        assert!(msg.contains(w), "{msg:?} lacks {w:?}");
    }
    // Each node is climbed from once and its parent looked at once.
    assert!(steps <= 2 * n as u64, "{steps} steps for {n} nodes");
    // The same chain defined leaf first: still one visit per node.
    let mut rev = String::new();
    for i in (1..n).rev() {
        rev += &format!(
            "[[node]]\nname = \"n{i}\"\nparent = \"n{}\"\nkind = \"wfq\"\n",
            i - 1
        );
    }
    rev += "[[node]]\nname = \"n0\"\nkind = \"wfq\"\n";
    let (r, steps) = counted(&rev);
    assert!(matches!(r, Err(PolicyError::Limit { value: 10_000, .. })));
    assert!(steps <= 2 * n as u64, "{steps} steps for {n} nodes");
    // At the limit a chain validates and runs; one more level does not.
    let p = Policy::from_toml(&chain_toml(limits::MAX_DEPTH)).expect("MAX_DEPTH levels");
    assert_eq!(p.depth(), limits::MAX_DEPTH);
    let mut s: PolicySched<u64> = PolicySched::new(&p);
    let f = s.add_flow(FlowConfig::default()).expect("flow");
    assert_eq!(s.flow_node(f), Some(limits::MAX_DEPTH - 1));
    s.enqueue(Pkt::new(f, 100, Nanos(0), 1), Nanos(0))
        .expect("enqueue");
    assert_eq!(s.dequeue(Nanos(0)).map(|p| p.item), Some(1));
    let e = err(&chain_toml(limits::MAX_DEPTH + 1));
    assert!(
        matches!(
            e,
            PolicyError::Limit {
                value: 65,
                field: "depth",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn wide_trees_validate_up_to_the_node_limit_in_linear_work() {
    let n = 30_000;
    let (r, steps) = counted(&wide_toml(n));
    let p = r.expect("30 000 nodes are within MAX_NODES");
    assert_eq!((p.nodes().len(), p.depth()), (n, 2));
    assert!(steps <= 2 * n as u64, "{steps} steps for {n} nodes");
    // The largest policy allowed validates and builds a scheduler.
    let (r, steps) = counted(&wide_toml(limits::MAX_NODES));
    let p = r.expect("MAX_NODES nodes");
    assert!(steps <= 2 * limits::MAX_NODES as u64);
    let mut s: PolicySched<u64> = PolicySched::new(&p);
    let f = s.add_flow(FlowConfig::default()).expect("flow");
    s.enqueue(Pkt::new(f, 100, Nanos(0), 7), Nanos(0))
        .expect("enqueue");
    assert_eq!(s.dequeue(Nanos(0)).map(|p| p.item), Some(7));
    // One more node is refused, naming the limit, the count and where the
    // first node over it is.
    let e = err(&wide_toml(limits::MAX_NODES + 1));
    assert!(
        matches!(
            &e,
            PolicyError::Limit {
                field: "nodes",
                value: 65_537,
                max: 65_536,
                limit: "MAX_NODES",
                loc: Some(Loc { line: 262_145, .. }),
                ..
            }
        ),
        "{e}"
    );
    // The same in code and in DOT.
    let mut nodes = vec![NodeSpec::new("r", None, Kind::Rr)];
    for i in 1..=limits::MAX_NODES {
        nodes.push(NodeSpec::new(&format!("n{i}"), Some("r"), Kind::Rr));
    }
    let e = Policy::compile(PolicySpec::new(nodes)).expect_err("too many nodes");
    assert!(
        matches!(e, PolicyError::Limit { field: "nodes", .. }),
        "{e}"
    );
    let mut dot = String::from("digraph {\n r [kind=rr]\n");
    for i in 1..=limits::MAX_NODES {
        dot += &format!(" n{i} [kind=rr] r -> n{i}\n");
    }
    dot += "}\n";
    let e = Policy::from_dot(&dot).expect_err("too many nodes");
    assert!(
        matches!(
            &e,
            PolicyError::Limit {
                field: "nodes",
                loc: Some(Loc {
                    line: 65_538,
                    col: 2
                }),
                ..
            }
        ),
        "{e}"
    );
}

/// Every new refusal, from text: the words its message must hold.
#[test]
fn limit_and_hostile_input_errors_name_field_value_and_range() {
    let long = "x".repeat(300);
    let cases: Vec<(String, bool, Vec<&str>)> = vec![
        // Depth, in TOML and DOT.
        (
            chain_toml(65),
            false,
            vec!["node `n64`", "depth = 65", "MAX_DEPTH = 64", "line 257"],
        ),
        (
            {
                let mut s = String::from("digraph {\n");
                for i in 0..65 {
                    s += &format!(" n{i} [kind=wfq]\n");
                }
                for i in 1..65 {
                    s += &format!(" n{} -> n{i}\n", i - 1);
                }
                s + "}\n"
            },
            true,
            vec!["node `n64`", "depth = 65", "MAX_DEPTH", "line 66, column 2"],
        ),
        // Control characters in a name (a terminal escape, a line break).
        (
            "[[node]]\nname = \"a\\u001b[31mb\"\nkind = \"rr\"\n".to_string(),
            false,
            vec!["name", "\"a\\u{1b}[31mb\"", "without control characters"],
        ),
        (
            "digraph {\n \"a\u{1b}[31mb\" [kind=rr]\n}".to_string(),
            true,
            vec!["name", "without control characters"],
        ),
        // Name length and empty names.
        (
            format!("[[node]]\nname = \"{long}\"\nkind = \"rr\"\n"),
            false,
            vec!["name length", "= 300", "MAX_NAME_LEN = 256", "line 2, column 8"],
        ),
        (
            format!("digraph {{\n \"{long}\" [kind=rr]\n}}"),
            true,
            vec!["name length", "= 300", "MAX_NAME_LEN", "line 2"],
        ),
        (
            "[[node]]\nname = \"\"\nkind = \"rr\"\n".to_string(),
            false,
            vec!["name = \"\"", "1..=256", "line 2"],
        ),
        // Buckets: per node, and over the tree's explicit queues.
        (
            "[[node]]\nname = \"r\"\nkind = \"rr\"\nbuckets = 8388609\n".to_string(),
            false,
            vec!["node `r`", "buckets = 8388609", "1..=8388608", "line 4"],
        ),
        (
            "[[node]]\nname = \"r\"\nkind = \"rr\"\nqueue = \"cffs\"\nbuckets = 8388608\n[[node]]\nname = \"b\"\nparent = \"r\"\nkind = \"rr\"\nqueue = \"hffs\"\nbuckets = 1\n".to_string(),
            false,
            vec!["node `b`", "= 16777217", "MAX_TREE_BUCKETS = 16777216", "line 7"],
        ),
        // A wfq default queue from a large max_len × scale.
        (
            "[policy]\nmax_len = 1048576\n[[node]]\nname = \"r\"\nkind = \"wfq\"\nscale = 16\n".to_string(),
            false,
            vec!["node `r`", "scale = 16", "1..=7", "MAX_BUCKETS", "line 4"],
        ),
        // A node that is its own parent, in TOML and in DOT.
        (
            "[[node]]\nname = \"r\"\nkind = \"rr\"\n[[node]]\nname = \"a\"\nparent = \"a\"\nkind = \"rr\"\n".to_string(),
            false,
            vec!["node `a`", "cycle", "a -> a", "line 5"],
        ),
        (
            "digraph {\n r [kind=rr]\n a [kind=rr]\n r -> a\n a -> a\n}".to_string(),
            true,
            vec!["node `a`", "own parent", "line 5, column 7"],
        ),
        // Empty policies.
        ("".to_string(), false, vec!["exactly one root", "none"]),
        ("digraph { }".to_string(), true, vec!["exactly one root"]),
        // Huge integers: out of range or not a TOML integer at all.
        (
            "[[node]]\nname = \"r\"\nkind = \"prio\"\nlevels = 4097\n".to_string(),
            false,
            vec!["levels = 4097", "1..=4096"],
        ),
        (
            "[[node]]\nname = \"r\"\nkind = \"rr\"\nweight = 99999999999999999999999\n".to_string(),
            false,
            vec!["line 4"],
        ),
        (
            "digraph {\n r [kind=wfq, weight=99999999999999999999999]\n}".to_string(),
            true,
            vec!["weight", "line 2"],
        ),
        (
            "[policy]\nshaper_buckets = 16777217\n[[node]]\nname = \"r\"\nkind = \"rr\"\n".to_string(),
            false,
            vec!["shaper_buckets = 16777217", "2..=16777216", "line 2"],
        ),
        // Positions after multi-byte characters count characters.
        (
            "# é→é\n[[node]]\nname = \"é\"\nkind = \"prio\"\nlevels = 0\n".to_string(),
            false,
            vec!["node `é`", "levels = 0", "line 5, column 10"],
        ),
    ];
    for (src, dot, want) in &cases {
        let msg = if *dot {
            Policy::from_dot(src).expect_err(src).to_string()
        } else {
            err(src).to_string()
        };
        for w in want {
            assert!(msg.contains(w), "{src:.200?}: {msg:?} lacks {w:?}");
        }
    }
}
