//! Policy files (TOML and DOT), read by `bench sched --alg policy:FILE`
//! and by a scenario's `policy`.

use crate::table::{RUST_TYPE_WORDS, Row, row, run_table};

/// Policy files named on the command line are read with the same cap as
/// scenario files.
#[test]
fn policy_files() {
    run_table(&[row(
        &[
            "bench",
            "sched",
            "--alg",
            "policy:/nonexistent/p.toml",
            "-n",
            "10",
        ],
        2,
        &["cannot read policy"],
    )]);
}

/// A policy row: `p.toml` (or `p.dot`) holds `text`, read by `bench
/// sched --alg policy:FILE` and by a scenario's `policy = "FILE"`; both
/// messages must hold `words` and no Rust type name.
fn policy_rows(file: &'static str, text: &'static str, words: &'static [&'static str]) -> [Row; 2] {
    let alg: &'static str = format!("policy:{{dir}}/{file}").leak();
    let scenario: &'static str = format!(
        "link = \"1gbit\"\nalgorithm = \"policy\"\npolicy = \"{file}\"\nduration = \"1ms\"\n[[flows]]\n"
    )
    .leak();
    let files: &'static [(&'static str, &'static str)] =
        vec![(file, text), ("s.toml", scenario)].leak();
    let bench: &'static [&'static str] = vec!["bench", "sched", "--alg", alg, "-n", "10"].leak();
    [
        Row {
            files,
            absent: RUST_TYPE_WORDS,
            ..row(bench, 2, words)
        },
        Row {
            files,
            absent: RUST_TYPE_WORDS,
            ..row(&["sim", "{dir}/s.toml"], 2, words)
        },
    ]
}

/// A value of the wrong type, a missing field or a wrong header in a
/// policy file: the field, the value, its kind and the forms allowed.
#[test]
fn policy_file_types() {
    let rows = [
        policy_rows(
            "p.toml",
            "[[node]]\nname = \"r\"\nkind = \"wfq\"\nwieght = 3\n",
            &["`node.wieght = 3`: unknown field `wieght`; allowed `name`, `parent`"],
        ),
        policy_rows(
            "p.toml",
            "[polcy]\n[[node]]\nname = \"r\"\nkind = \"wfq\"\n",
            &["`[polcy]`: unknown table `polcy`; allowed `policy` or `node`"],
        ),
        policy_rows(
            "p.toml",
            "[[node]]\nname = \"r\"\nkind = \"wfq\"\nweight = \"x\"\n",
            &[
                "line 4, column 10",
                "`node.weight = \"x\"`: the value is a string; allowed a whole number from 0",
            ],
        ),
        policy_rows(
            "p.toml",
            "[node]\nname = \"r\"\nkind = \"wfq\"\n",
            &["`[node]` is a single table, but node is a list: allowed `[[node]]`"],
        ),
        policy_rows(
            "p.toml",
            "[policy]\nmax_len = -1\n[[node]]\nname = \"r\"\nkind = \"wfq\"\n",
            &["`policy.max_len = -1`: the value is a negative whole number"],
        ),
        policy_rows(
            "p.toml",
            "[[node]]\nname = \"r\"\nkind = 5\n",
            &["`node.kind = 5`: the value is a whole number; allowed one of \"rr\""],
        ),
        policy_rows(
            "p.toml",
            "[[node]]\nname = \"r\"\n",
            &["`node.kind` is missing; allowed one of \"rr\""],
        ),
        policy_rows(
            "p.toml",
            "[[node]]\nname = \"r\"\nkind = \"wfq\"\nqueue = 5\n",
            &["`node.queue = 5`", "\"cffs\", \"hffs\""],
        ),
        policy_rows(
            "p.dot",
            "digraph { r [kind=wfq, weight=\"x\"] }\n",
            &[
                "attribute `weight`",
                "the value is a string; allowed a whole number from 0",
            ],
        ),
    ];
    run_table(&rows.into_iter().flatten().collect::<Vec<_>>());
}
