//! Output that cannot be written, and rates and durations on the command
//! line.

use crate::table::{Row, Stdout, row, run_table};

/// Output that cannot be written: a full disk is an error, a closed pipe
/// ends the program quietly with 141 (128 + SIGPIPE, as a shell reports a
/// C tool in the same place).
#[test]
fn output_errors() {
    run_table(&[
        Row {
            stdout: Stdout::Full,
            ..row(
                &["rate", "10gbit"],
                2,
                &["cannot write to standard output", "No space left on device"],
            )
        },
        Row {
            stdout: Stdout::Full,
            ..row(&["algorithms"], 2, &["No space left on device"])
        },
        Row {
            stdout: Stdout::Full,
            ..row(&["algorithms", "--json"], 2, &["No space left on device"])
        },
        Row {
            stdout: Stdout::Closed,
            ..row(&["algorithms"], 141, &[])
        },
    ]);
}

/// Rates and durations: the value, what is wrong and what is allowed.
#[test]
fn units() {
    run_table(&[
        row(&["rate", "100mbps"], 2, &["ambiguous", "100mbit"]),
        row(&["rate", "--", "-1gbit"], 2, &["negative"]),
        row(&["rate", "-1gbit"], 2, &["unexpected argument", "--"]),
        row(&["rate", "12"], 2, &["no unit", "kbit"]),
        row(&["rate", ""], 2, &["empty rate"]),
        row(&["rate", "1e99999999999bit"], 2, &["too large"]),
        row(&["rate", "10gbit", "--len", "x"], 2, &["--len", "x"]),
        row(
            &["rate", "10gbit", "--len", "0"],
            2,
            &["--len", "0", "1..=1000000"],
        ),
    ]);
}
