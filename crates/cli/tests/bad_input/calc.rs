//! `calc ingress`: the value, what is wrong and what is allowed.

use crate::table::{Row, Stdout, row, run_table};

/// The arguments, as given (keeps the rows short).
const fn c(rest: &'static [&'static str]) -> &'static [&'static str] {
    rest
}

/// `calc ingress`: each value, its range, and the simulation's sizes.
#[test]
fn calc_ingress_values() {
    run_table(&[
        row(
            c(&["calc", "ingress", "--x", "1us", "--rho-rt", "1", "--m", "8"]),
            2,
            &["rho_rt = 1", "0 <= rho_rt < 1"],
        ),
        row(
            c(&["calc", "ingress", "--x", "1us", "--rho-rt=-0.5", "--b", "4"]),
            2,
            &["rho_rt = -0.5"],
        ),
        row(
            c(&["calc", "ingress", "--x", "1us", "--rho-rt", "x", "--b", "4"]),
            2,
            &["--rho-rt", "'x'"],
        ),
        row(
            c(&["calc", "ingress", "--x", "0us", "--b", "4"]),
            2,
            &["--x = 0us", "positive"],
        ),
        row(
            c(&["calc", "ingress", "--x", "1", "--b", "4"]),
            2,
            &["--x", "`1` has no unit"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "340282366920938463463374607.999999999999s",
                "--b",
                "4",
            ]),
            2,
            &[
                "--x",
                "340282366920938463463374607.999999999999s",
                "too long",
            ],
        ),
        row(
            c(&["calc", "ingress", "--x", "1us", "--target", "5parsecs"]),
            2,
            &["--target", "unknown unit"],
        ),
        row(
            c(&["calc", "ingress", "--x", "1us", "--rho-rt", "0.3"]),
            2,
            &["give one of --m", "--target", "--b"],
        ),
        row(
            c(&[
                "calc", "ingress", "--x", "1us", "--rho-rt", "0.3", "--m", "1.5",
            ]),
            2,
            &["b = 1 needs m >= 1.857"],
        ),
        row(
            c(&["calc", "ingress", "--x", "1us", "--m", "0"]),
            2,
            &["m = 0", "> 0"],
        ),
        row(
            c(&["calc", "ingress", "--x", "1us", "--b", "0"]),
            2,
            &["b = 0", "allowed 1..="],
        ),
        row(
            c(&["calc", "ingress", "--x", "1us", "--m", "8", "--b", "4"]),
            2,
            &["cannot be used with"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--rho-rt",
                "0.3",
                "--b",
                "4",
                "--simulate",
                "--packets",
                "0",
            ]),
            2,
            &["packets = 0", "1..=100000000"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--rho-rt",
                "0.3",
                "--b",
                "4",
                "--simulate",
                "--jitter",
                "1",
            ]),
            2,
            &["jitter = 1", "0 <= jitter < 1"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--rho-rt",
                "0.3",
                "--b",
                "70000",
                "--simulate",
            ]),
            2,
            &["b = 70000", "largest device budget 65536"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--rho-rt",
                "0",
                "--b",
                "4",
                "--simulate",
            ]),
            2,
            &["--rho-rt > 0"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--sweep",
                "{dir}/s",
                "--rt-share",
                "1",
            ]),
            2,
            &["--rt-share = 1", "0 < rt_share < 1"],
        ),
    ]);
}

/// `calc ingress`: a flag that would be ignored is refused, naming what it
/// needs; a sweep directory that cannot be made is named.
#[test]
fn calc_ingress_flags_that_would_be_ignored() {
    run_table(&[
        // A flag that would be ignored is refused, naming what it needs.
        row(
            c(&["calc", "ingress", "--x", "1us", "--b", "4", "--ring", "0"]),
            2,
            &["--simulate", "--sweep"],
        ),
        row(
            c(&["calc", "ingress", "--x", "1us", "--b", "4", "--seed", "3"]),
            2,
            &["--simulate", "--sweep"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--b",
                "4",
                "--be-load",
                "0.5",
            ]),
            2,
            &["--simulate"],
        ),
        row(
            c(&[
                "calc", "ingress", "--x", "1us", "--b", "4", "--jitter", "0.5",
            ]),
            2,
            &["--simulate"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--b",
                "4",
                "--rt-share",
                "0.5",
            ]),
            2,
            &["--rt-share = 0.5", "needs --sweep"],
        ),
        row(
            c(&[
                "calc", "ingress", "--x", "1us", "--sweep", "{dir}/s", "--m", "3",
            ]),
            2,
            &["--sweep", "cannot be used with", "--m"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--sweep",
                "{dir}/s",
                "--simulate",
            ]),
            2,
            &["--sweep", "cannot be used with", "--simulate"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--rho-rt",
                "0.3",
                "--b",
                "4",
                "--simulate",
                "--be-load=-1",
            ]),
            2,
            &["--be-load = -1", "0 < load <= 100"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--rho-rt",
                "0.3",
                "--b",
                "4",
                "--simulate",
                "--ring",
                "0",
            ]),
            2,
            &["--ring = 0", "1..="],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--rho-rt",
                "0.3",
                "--b",
                "4",
                "--simulate",
                "--rt-arrivals",
                "bursty",
            ]),
            2,
            &["bursty", "periodic", "poisson"],
        ),
        row(
            c(&[
                "calc",
                "ingress",
                "--x",
                "1us",
                "--sweep",
                "/proc/no/such",
                "--packets",
                "10",
            ]),
            2,
            &["/proc/no/such"],
        ),
        Row {
            stdout: Stdout::Full,
            ..row(
                c(&["calc", "ingress", "--x", "1us", "--b", "4"]),
                2,
                &["No space left on device"],
            )
        },
    ]);
}
