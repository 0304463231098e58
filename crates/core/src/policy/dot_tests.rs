//! Policies read from Graphviz DOT: the example equals the TOML hpfq,
//! the accepted forms, refusals with positions, and random text.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::flow::FlowConfig;
use crate::sched::Scheduler;

/// The parts of a policy that matter for scheduling (positions differ
/// between a DOT and a TOML file).
fn shape(p: &Policy) -> Vec<String> {
    p.nodes()
        .iter()
        .map(|n| {
            format!(
                "{} parent={:?} {:?} {:?} b={} w={} prio={} rate={:?}",
                n.name, n.parent, n.kind, n.queue, n.buckets, n.weight, n.prio, n.rate
            )
        })
        .collect()
}

#[test]
fn dot_example_is_the_toml_hpfq() {
    let dot = include_str!("../../policies/hpfq.dot");
    let from_dot = Policy::from_dot(dot).expect("dot");
    let from_toml = Policy::builtin("hpfq").expect("toml");
    assert_eq!(shape(&from_dot), shape(&from_toml));
    assert_eq!(from_dot.depth(), 3);
    // Positions point into the DOT text: `gold.bulk` is declared on line 13.
    let gb = &from_dot.nodes()[from_dot.node("gold.bulk").expect("node")];
    assert_eq!(gb.loc.map(|l| l.line), Some(13));
}

#[test]
fn dot_forms_chains_comments_and_numbers() {
    let src = "/* a block\n comment */\n# a line comment\nstrict digraph {\n  graph [max_len = 9000]\n  r [kind=prio levels=4]; a [kind=rr, prio=2] b [kind = \"rr\"][prio = 1]\n  r -> a\n  r -> b // two statements\n  a [label=\"drawn only\"]\n}\n";
    let p = Policy::from_dot(src).expect("policy");
    let names: Vec<&str> = p.nodes().iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["r", "a", "b"]);
    assert_eq!(p.nodes()[1].prio, 2);
    assert_eq!(p.nodes()[2].prio, 1);
    assert_eq!(p.nodes()[0].kind, super::Kind::Prio { levels: 4 });
    let mut s: PolicySched<u8> = PolicySched::new(&p);
    assert_eq!(
        Scheduler::<u8>::limits(&s).max_len,
        9000,
        "graph attributes are the [policy] globals"
    );
    // A chain: r -> x -> y gives y the parent x.
    let p = Policy::from_dot("digraph { r [kind=wfq] x [kind=wfq] y [kind=wfq] r -> x -> y }")
        .expect("chain");
    assert_eq!(p.depth(), 3);
    let _ = s.add_flow(FlowConfig::default());
}

#[test]
fn bad_dot_is_refused_with_position_and_node() {
    let e = |src: &str| Policy::from_dot(src).expect_err(src).to_string();
    let cases: [(&str, &[&str]); 12] = [
        ("graph { a [kind=rr] }", &["line 1, column 1", "digraph"]),
        (
            "digraph {\n a [kind=rr]\n b [kind=rr]\n c [kind=rr]\n a -> c\n b -> c\n}",
            &["node `c`", "two parents", "line 6"],
        ),
        (
            "digraph {\n r [kind=wfq]\n r -> x\n}",
            &["node `x`", "line 3, column 7", "kind"],
        ),
        (
            "digraph {\n a [kind=rr] b [kind=rr]\n a -> b [weight=2]\n}",
            &["line 3, column 10", "edge"],
        ),
        ("digraph { subgraph s { } }", &["subgraph"]),
        ("digraph { node [kind=rr] }", &["default attributes"]),
        ("digraph { a [kind=\"rr] }", &["never closed"]),
        (
            "digraph {\n a [kind=rr,\n   colour=red]\n}",
            &["line 3, column 4", "colour"],
        ),
        (
            "digraph {\n a [kind=wfq]\n b [kind=wfq]\n a -> b -> a\n}",
            &["cycle"],
        ),
        (
            "digraph {\n r [kind=wfq]\n b [kind=wfq, weight=heavy]\n r -> b\n}",
            &["line 3", "weight"],
        ),
        ("digraph { a [kind=rr] } extra", &["after the closing"]),
        ("digraph { a [kind=rr] a -- b }", &["undirected"]),
    ];
    for (src, want) in cases {
        let msg = e(src);
        for w in want {
            assert!(msg.contains(w), "{src:?}: {msg:?} lacks {w:?}");
        }
    }
    // Out-of-range values keep the node name and the DOT position.
    let msg = e("digraph {\n r [kind=prio, levels=0]\n}");
    assert!(msg.contains("node `r`") && msg.contains("line 2"), "{msg}");
}

/// Random text made of DOT's own characters (and some multi-byte ones)
/// never panics the DOT reader: it is either a policy or an error.
#[test]
fn dot_reader_never_panics_on_random_text() {
    let alphabet: Vec<char> = "digraph{}[]=;,->-- \n\t\"\\/*#abkindwfqrate1gbit.é→_0"
        .chars()
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(77);
    let mut ok = 0;
    for _ in 0..20_000 {
        let n = rng.random_range(0..60);
        let mut s: String = (0..n)
            .map(|_| alphabet[rng.random_range(0..alphabet.len())])
            .collect();
        if rng.random_bool(0.5) {
            s = format!("digraph {{ {s} }}");
        }
        if Policy::from_dot(&s).is_ok() {
            ok += 1;
        }
    }
    // Almost all random texts are refused; the point is that none panics.
    assert!(ok < 20_000);
    // And a well-formed one among random neighbours still parses.
    assert!(Policy::from_dot("digraph { a [kind=rr] }").is_ok());
}
