//! Scenario files of `pktsched sim`: positions, fields, values, ranges and
//! types.

use crate::table::{RUST_TYPE_WORDS, Row, row, run_table};

/// Scenario files: position, field, value, allowed range; caps on what a
/// file can make the simulator allocate or compute.
#[test]
fn sim_scenarios() {
    run_table(&[
        row(
            &["sim", "examples/scenarios/bench-qfq-10k.toml", "--seed=-1"],
            2,
            &[
                "'-1'",
                "--seed",
                "allowed a whole number 0..=18446744073709551615",
            ],
        ),
        row(
            &[
                "sim",
                concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../../examples/scenarios/drr-worst-case.toml"
                ),
                "--departures",
                "/proc/no/such/d.csv",
            ],
            2,
            &["--departures", "/proc/no/such/d.csv", "No such file"],
        ),
        row(
            &[
                "sim",
                concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../../examples/scenarios/drr-worst-case.toml"
                ),
                "--plot",
                "/proc/no/such/p",
            ],
            2,
            &[
                "--plot /proc/no/such/p",
                "is not a directory",
                "PREFIX-rate.svg",
            ],
        ),
        row(
            &["sim", "/nonexistent/s.toml"],
            2,
            &["cannot read scenario"],
        ),
        row(
            &["sim", "/dev/zero"],
            2,
            &["scenario `/dev/zero`", "a device, not a regular file"],
        ),
        Row {
            files: &[(
                "s.toml",
                "link = \"1gbit\"\nalgorithm = \"qfq\"\nduration = \"1ms\"\n[[flows]]\nname = \"a\"\n[[flows]]\nname = \"a\"\n",
            )],
            ..row(
                &["sim", "{dir}/s.toml"],
                2,
                &["s.toml:7:8", "must be unique"],
            )
        },
        Row {
            files: &[(
                "s.toml",
                "link = \"18446744073709551615bit\"\nalgorithm = \"qfq\"\nduration = \"1ms\"\n[[flows]]\n",
            )],
            ..row(
                &["sim", "{dir}/s.toml"],
                2,
                &["s.toml:1:8", "allowed 1bit..=1tbit"],
            )
        },
        Row {
            files: &[(
                "s.toml",
                "link = \"1gbit\"\nalgorithm = \"qfq\"\nduration = \"-1ms\"\n[[flows]]\n",
            )],
            ..row(&["sim", "{dir}/s.toml"], 2, &["s.toml:3:12", "negative"])
        },
        Row {
            files: &[(
                "s.toml",
                "link = \"1gbit\"\nalgorithm = \"qfq\"\nduration = \"1ms\"\ntrace = \"/dev/zero\"\n[[flows]]\nsource = { type = \"trace\" }\n",
            )],
            ..row(
                &["sim", "{dir}/s.toml"],
                2,
                &["trace `/dev/zero`: it is a device, not a regular file"],
            )
        },
        Row {
            files: &[(
                "s.toml",
                "link = \"1gbit\"\nalgorithm = \"policy\"\npolicy = \"/dev/zero\"\nduration = \"1ms\"\n[[flows]]\n",
            )],
            ..row(
                &["sim", "{dir}/s.toml"],
                2,
                &["policy `/dev/zero`: it is a device, not a regular file"],
            )
        },
    ]);
}

/// The head of a scenario that is right up to its flows.
macro_rules! scenario {
    ($rest:literal) => {
        concat!(
            "link = \"1gbit\"\nalgorithm = \"qfq\"\nduration = \"1ms\"\n",
            $rest
        )
    };
}

/// A scenario row: `s.toml` holds `text`; the message must hold `words`
/// and no Rust type name.
fn sim_row(text: &'static str, words: &'static [&'static str]) -> Row {
    Row {
        files: vec![("s.toml", text)].leak(),
        absent: RUST_TYPE_WORDS,
        ..row(&["sim", "{dir}/s.toml"], 2, words)
    }
}

/// The start of what a scenario's `source` allows.
const SOURCE_FORMS: &str =
    "allowed `{ type = \"greedy\" }`, `{ type = \"cbr\", rate = \"10mbit\" }`";

/// A value of the wrong type, a missing field or a wrong header in a
/// scenario: the field, the value, its kind and the forms allowed, never
/// serde's Rust type names.
#[test]
fn sim_scenario_types() {
    let rows = [
        // Unknown keys in a source or a size table are refused, not
        // ignored (an internally tagged unit variant and an untagged
        // enum's struct variants would let them through).
        sim_row(
            scenario!("[[flows]]\nsource = { type = \"greedy\", rate = \"1mbit\" }\n"),
            &["s.toml:5:10", "unknown field `rate`", SOURCE_FORMS],
        ),
        sim_row(
            scenario!("[[flows]]\nsize = { min = 64, mx = 1500 }\n"),
            &[
                "`flows[0].size = { min = 64, mx = 1500 }`: unknown field `mx`",
                "`{ min = 64, max = 1500 }`",
            ],
        ),
        // A size table names what is missing or clashing.
        sim_row(
            scenario!("[[flows]]\nsize = { min = 64 }\n"),
            &["`flows[0].size = { min = 64 }`: missing field `max`"],
        ),
        sim_row(
            scenario!("[[flows]]\nsize = {}\n"),
            &[
                "`flows[0].size = {}`: an empty table",
                "`{ mix = [[64, 7], [1500, 3]] }`",
            ],
        ),
        sim_row(
            scenario!("[[flows]]\nsize = { min = 64, max = 100, mix = [[64, 1]] }\n"),
            &["`mix` with `min` or `max`: give `{ min, max }` or `{ mix }`, not both"],
        ),
        sim_row(
            scenario!("[[flows]]\nsize = 9999999999999999999\n"),
            &[
                "9999999999999999999 is above every length allowed",
                "lengths 1..=65536",
            ],
        ),
        sim_row(
            scenario!("sed = 2\n[[flows]]\n"),
            &[
                "`sed = 2`: unknown field `sed`; allowed `name`, `link`",
                "or `flows`",
            ],
        ),
        sim_row(
            scenario!("[[flows]]\nsource = 5\n"),
            &[
                "s.toml:5:10",
                "`flows[0].source = 5`: the value is a whole number",
                SOURCE_FORMS,
            ],
        ),
        sim_row(
            scenario!("[flows]\nname = \"a\"\n"),
            &[
                "s.toml:4:1",
                "`[flows]` is a single table, but flows is a list: allowed `[[flows]]`",
            ],
        ),
        sim_row(
            "link = 5\nalgorithm = \"qfq\"\nduration = \"1ms\"\n[[flows]]\n",
            &[
                "s.toml:1:8",
                "`link = 5`: the value is a whole number; allowed a rate with its unit",
            ],
        ),
        sim_row(
            scenario!("seed = \"x\"\n[[flows]]\n"),
            &[
                "s.toml:4:8",
                "`seed = \"x\"`: the value is a string; allowed a whole number from 0",
            ],
        ),
        sim_row(
            scenario!("drain = 1\n[[flows]]\n"),
            &["`drain = 1`: the value is a whole number; allowed true or false"],
        ),
        sim_row(
            scenario!("pspat = 5\n[[flows]]\n"),
            &["`pspat = 5`: the value is a whole number; allowed a table: `[pspat]`"],
        ),
        sim_row(
            scenario!("[pspat]\narbiter = 1\ndispatcher = \"1us\"\n[[flows]]\n"),
            &[
                "s.toml:5:11",
                "`pspat.arbiter = 1`",
                "a duration with its unit",
            ],
        ),
        sim_row(
            scenario!("[pspat]\narbiter = \"1us\"\n[[flows]]\n"),
            &["`pspat.dispatcher` is missing; allowed a duration"],
        ),
        sim_row(
            "algorithm = \"qfq\"\nduration = \"1ms\"\n[[flows]]\n",
            &["`link` is missing; allowed a rate with its unit"],
        ),
        sim_row(
            scenario!(""),
            &["`flows` is missing; allowed `[[flows]]` before each flow group"],
        ),
        sim_row(
            scenario!("flows = 5\n"),
            &["`flows = 5`: the value is a whole number; allowed `[[flows]]`"],
        ),
        sim_row(
            scenario!("[[flows]]\n[[flows]]\ncount = \"x\"\n"),
            &[
                "s.toml:6:9",
                "`flows[1].count = \"x\"`: the value is a string; allowed a whole number",
            ],
        ),
        sim_row(
            scenario!("[[flows]]\nmax_delay = 5\n"),
            &["`flows[0].max_delay = 5`", "a duration with its unit"],
        ),
        sim_row(
            scenario!("[[flows]]\nsize = \"big\"\n"),
            &[
                "`flows[0].size = \"big\"`: the value is a string",
                "`{ min = 64, max = 1500 }`",
            ],
        ),
        sim_row(
            scenario!("[[flows]]\nsource = { type = \"cbr\", rate = 5 }\n"),
            &[
                "a field in it is a whole number where a string is wanted",
                SOURCE_FORMS,
            ],
        ),
        sim_row(
            scenario!("[[flows]]\nsource = { type = \"warp\" }\n"),
            &[
                "`flows[0].source.type`: unknown variant `warp`",
                SOURCE_FORMS,
            ],
        ),
        sim_row(
            scenario!("[[flows]]\nsource = { rate = \"1mbit\" }\n"),
            &["missing field `type`", SOURCE_FORMS],
        ),
    ];
    run_table(&rows);
}
