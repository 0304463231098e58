//! Bad policies refused with the node and position (TOML and specs built
//! in code), the line index, and mutated or random policy text that must
//! never panic.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::flow::FlowConfig;
use crate::sched::Scheduler;

pub(super) fn err(src: &str) -> PolicyError {
    match Policy::from_toml(src) {
        Ok(_) => panic!("accepted:\n{src}"),
        Err(e) => e,
    }
}

#[test]
fn bad_policies_are_rejected_with_the_node_and_position() {
    let e = err(
        "[[node]]\nname = \"r\"\nkind = \"wfq\"\n[[node]]\nname = \"r\"\nparent = \"r\"\nkind = \"rr\"\n",
    );
    assert!(
        matches!(&e, PolicyError::DuplicateNode { node, loc: Some(Loc { line: 5, .. }), .. } if node == "r"),
        "{e}"
    );
    let e = err(
        "[[node]]\nname = \"r\"\nkind = \"wfq\"\n[[node]]\nname = \"x\"\nparent = \"nope\"\nkind = \"rr\"\n",
    );
    assert!(
        matches!(&e, PolicyError::UnknownParent { node, parent, loc: Some(Loc { line: 6, col: 10 }) } if node == "x" && parent == "nope"),
        "{e}"
    );
    assert!(e.to_string().contains("line 6, column 10"), "{e}");
    let e = err(
        "[[node]]\nname = \"r\"\nkind = \"wfq\"\n[[node]]\nname = \"a\"\nparent = \"b\"\nkind = \"rr\"\n[[node]]\nname = \"b\"\nparent = \"a\"\nkind = \"rr\"\n",
    );
    assert!(
        matches!(&e, PolicyError::Cycle { path, .. } if path.len() == 3),
        "{e}"
    );
    let e = err("[[node]]\nname = \"a\"\nkind = \"wfq\"\n[[node]]\nname = \"b\"\nkind = \"rr\"\n");
    assert!(
        matches!(&e, PolicyError::Roots { roots } if roots.len() == 2),
        "{e}"
    );
    let e = err("[[node]]\nname = \"r\"\nkind = \"lstf\"\n");
    assert!(
        matches!(&e, PolicyError::MissingRate { node, field: "link_rate", .. } if node == "r"),
        "{e}"
    );
    let e = err(
        "[[node]]\nname = \"r\"\nkind = \"prio\"\nlevels = 4\n[[node]]\nname = \"hi\"\nparent = \"r\"\nkind = \"rr\"\nprio = 4\n",
    );
    assert!(
        matches!(&e, PolicyError::OutOfRange { node, field: "prio", .. } if node == "hi"),
        "{e}"
    );
    let e = err("[[node]]\nname = \"r\"\nkind = \"prio\"\nlevels = 0\n");
    assert!(
        matches!(&e, PolicyError::OutOfRange { node, field: "levels", loc: Some(Loc { line: 4, .. }), .. } if node == "r"),
        "{e}"
    );
    let e = err("[[node]]\nname = \"r\"\nkind = \"wfq\"\nrate = \"1kbit\"\n");
    assert!(
        matches!(&e, PolicyError::OutOfRange { node, field: "rate", .. } if node == "r"),
        "{e}"
    );
    let e = err("[[node]]\nname = \"r\"\nkind = \"wfq\"\nrate = \"10mbps\"\n");
    assert!(
        matches!(&e, PolicyError::Invalid { node, .. } if node == "r"),
        "{e}"
    );
    let e = err(
        "[[node]]\nname = \"r\"\nkind = \"edf\"\n[[node]]\nname = \"c\"\nparent = \"r\"\nkind = \"rr\"\n",
    );
    assert!(
        matches!(&e, PolicyError::Invalid { node, .. } if node == "c"),
        "{e}"
    );
    let e = err(
        "[[node]]\nname = \"r\"\nkind = \"wfq\"\n[[node]]\nname = \"c\"\nparent = \"r\"\nkind = \"rr\"\nreservation = \"1mbit\"\n",
    );
    assert!(
        matches!(&e, PolicyError::Invalid { node, .. } if node == "c"),
        "{e}"
    );
    let e = err("[[node]]\nname = \"r\"\nkind = \"magic\"\n");
    assert!(
        matches!(
            &e,
            PolicyError::Invalid {
                loc: Some(Loc { line: 3, col: 8 }),
                ..
            }
        ),
        "{e}"
    );
    let e = err("[[node]]\nname = \"r\"\nkind = \"wfq\"\ncolour = 3\n");
    assert!(
        matches!(
            &e,
            PolicyError::Syntax {
                loc: Some(Loc { line: 4, .. }),
                ..
            }
        ),
        "{e}"
    );
    let e = err("[[node]]\nname = \"r\"\nkind = \"wfq\"\nweight = \"x\"\n");
    assert!(
        matches!(&e, PolicyError::Syntax { loc: Some(_), .. }),
        "{e}"
    );
    // A flow whose prio is beyond its prio node's levels is refused.
    let p = Policy::builtin("prio").expect("prio");
    let mut s: PolicySched<u64> = PolicySched::new(&p);
    assert!(s.add_flow(FlowConfig::default().with_prio(8)).is_err());
    assert!(s.add_flow(FlowConfig::default().with_prio(7)).is_ok());
    assert!(Policy::builtin("nope").is_err());
}

/// Specs built in code skip the TOML reader's range checks: `compile`
/// refuses them itself instead of dividing by zero or underflowing later.
#[test]
fn compile_refuses_out_of_range_specs_built_in_code() {
    type Edit<'a> = &'a dyn Fn(&mut PolicySpec);
    let one = |kind: Kind, edit: Edit<'_>| {
        let mut spec = PolicySpec::new(vec![NodeSpec::new("r", None, kind)]);
        edit(&mut spec);
        Policy::compile(spec).expect_err("out of range").to_string()
    };
    let cases: [(Kind, Edit<'_>, &str); 10] = [
        (Kind::Prio { levels: 0 }, &|_| {}, "levels = 0"),
        (Kind::Pfabric { unit: 0 }, &|_| {}, "unit = 0"),
        (Kind::Edf { unit: 0 }, &|_| {}, "unit = 0"),
        (Kind::Wfq { scale: 0 }, &|_| {}, "scale = 0"),
        (
            Kind::Hclock { scale: u64::MAX },
            &|_| {},
            "scale = 18446744073709551615",
        ),
        (Kind::Rr, &|s| s.shaper_buckets = 0, "shaper_buckets = 0"),
        (Kind::Rr, &|s| s.shaper_unit = 0, "shaper_unit_ns = 0"),
        (Kind::Rr, &|s| s.max_len = 0, "max_len = 0"),
        (Kind::Rr, &|s| s.nodes[0].weight = 0, "weight = 0"),
        (Kind::Rr, &|s| s.nodes[0].buckets = usize::MAX, "buckets"),
    ];
    for (kind, edit, want) in cases {
        let msg = one(kind, edit);
        assert!(msg.contains(want), "{msg:?} lacks {want:?}");
    }
    // Duplicate names and unknown parents from code too.
    let dup = PolicySpec::new(vec![
        NodeSpec::new("r", None, Kind::Rr),
        NodeSpec::new("r", Some("r"), Kind::Rr),
    ]);
    assert!(matches!(
        Policy::compile(dup),
        Err(PolicyError::DuplicateNode { .. })
    ));
    let orphan = PolicySpec::new(vec![
        NodeSpec::new("r", None, Kind::Rr),
        NodeSpec::new("a", Some("zz"), Kind::Rr),
    ]);
    assert!(matches!(
        Policy::compile(orphan),
        Err(PolicyError::UnknownParent { .. })
    ));
}

/// The one-pass line index agrees with the direct count everywhere, also
/// at offsets inside multi-byte characters and past the end.
#[test]
fn line_index_matches_direct_positions() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let alphabet: Vec<char> = "ab \n\té→€😀".chars().collect();
    for _ in 0..200 {
        let n = rng.random_range(0..300);
        let s: String = (0..n)
            .map(|_| alphabet[rng.random_range(0..alphabet.len())])
            .collect();
        let idx = super::spec::LineIndex::new(&s);
        for off in 0..=s.len() + 2 {
            assert_eq!(idx.loc(off), Loc::of(&s, off), "{s:?} at {off}");
        }
    }
    assert_eq!(Loc::of("a\nbé", 5), Loc { line: 2, col: 3 });
}

mod hostile {
    use proptest::prelude::*;

    use super::super::*;
    use crate::flow::{FlowConfig, Pkt};
    use crate::sched::Scheduler;
    use crate::units::Nanos;

    /// A policy that parsed must also build and carry a packet.
    fn exercise(p: &Policy) {
        let mut s: PolicySched<u32> = PolicySched::new(p);
        if let Ok(f) = s.add_flow(FlowConfig::default().with_max_len(p.max_len)) {
            let _ = s.enqueue(Pkt::new(f, 64, Nanos(0), 1), Nanos(0));
            let mut now = 0;
            while let Some(t) = s.next_ready(Nanos(now)) {
                now = t.0;
                let _ = s.dequeue(Nanos(now));
            }
        }
    }

    /// Applies `(position, operation, character)` edits to `base`.
    fn mutate(base: &str, edits: &[(usize, u8, char)]) -> String {
        let mut v: Vec<char> = base.chars().collect();
        for &(at, op, c) in edits {
            let i = at % (v.len() + 1);
            match op % 4 {
                0 => v.insert(i, c),
                1 if i < v.len() => v[i] = c,
                2 if i < v.len() => {
                    v.remove(i);
                }
                // Duplicates a short run (lines, keys, brackets).
                _ => {
                    let end = (i + usize::from(op) % 40).min(v.len());
                    let run: Vec<char> = v[i..end].to_vec();
                    v.splice(i..i, run);
                }
            }
        }
        v.into_iter().collect()
    }

    const CHARS: &str = "[]{}=\"\\#\n ,;->0123456789abcdefghiknoprstuwxyzé_.\u{0}";

    fn edit() -> impl Strategy<Value = (usize, u8, char)> {
        let chars: Vec<char> = CHARS.chars().collect();
        (any::<usize>(), any::<u8>(), prop::sample::select(chars))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Mutated built-in policies (TOML) and the DOT example never panic
        /// the parser, the validator or the scheduler they build.
        #[test]
        fn mutated_policies_never_panic(
            which in 0..BUILTINS.len(),
            edits in prop::collection::vec(edit(), 0..12),
        ) {
            let src = mutate(BUILTINS[which].1, &edits);
            if let Ok(p) = Policy::from_toml(&src) {
                exercise(&p);
            }
            let dot = mutate(include_str!("../../policies/hpfq.dot"), &edits);
            if let Ok(p) = Policy::from_dot(&dot) {
                exercise(&p);
            }
        }

        /// Short random text from the policy languages' characters.
        #[test]
        fn random_policy_text_never_panics(s in "[\\[\\]{}=\"#\n ,;>a-z0-9é-]{0,80}") {
            for src in [s.clone(), format!("[[node]]\n{s}"), format!("digraph {{ {s} }}")] {
                if let Ok(p) = Policy::from_toml(&src) {
                    exercise(&p);
                }
                if let Ok(p) = Policy::from_dot(&src) {
                    exercise(&p);
                }
            }
        }
    }
}
