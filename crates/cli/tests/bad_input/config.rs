//! Odd config files for `check`, `run` and `route --check`: wrong types
//! name the dotted field, the value's kind and the accepted forms; empty,
//! binary, huge, negative, unknown and duplicated values and files that
//! are not files are named; nothing prints a position of 0:0. And class
//! names in a route config.

use crate::table::{RUN_LINK, Row, row, run_table};

/// A config with `extra` under `[link]` and one default class.
fn link_with(extra: &str) -> &'static [(&'static str, &'static str)] {
    let text = format!("{RUN_LINK}{extra}\n[[class]]\nname = \"a\"\ndefault = true\n");
    Box::leak(Box::new([("c.toml", &*Box::leak(text.into_boxed_str()))]))
}

/// A `check` row on `c.toml` (in `files`) whose message holds `words`.
fn check(files: &'static [(&'static str, &'static str)], words: &'static [&'static str]) -> Row {
    Row {
        files,
        ..row(&["check", "{dir}/c.toml"], 2, words)
    }
}

/// A `route --check` row on `r.toml` holding `content`.
fn route(content: &'static str, words: &'static [&'static str]) -> Row {
    Row {
        files: Box::leak(Box::new([("r.toml", content)])),
        ..row(&["route", "--check", "{dir}/r.toml"], 2, words)
    }
}

/// Wrong types, missing values and values out of range, named with the
/// dotted field and the forms allowed.
#[test]
fn odd_config_values() {
    run_table(&[
        check(
            &[(
                "c.toml",
                "# no rate\n[link]\ningress = \"d0\"\negress = \"d1\"\n",
            )],
            &[
                "c.toml:2:1",
                "`link.rate` is missing",
                "a rate with its unit in quotes",
            ],
        ),
        check(
            &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = 10\n",
            )],
            &[
                "c.toml:4:8",
                "`link.rate = 10`: the value is a whole number",
                "a rate with its unit",
                "\"100mbit\"",
            ],
        ),
        check(
            link_with("busy_poll = \"yes\""),
            &[
                "c.toml:5:13",
                "`link.busy_poll = \"yes\"`: the value is a string",
                "allowed true, false or a whole number",
            ],
        ),
        // Non-ASCII text before a syntax error: the position and no panic.
        check(link_with("egress = \"é=1\" x"), &["c.toml:5:"]),
        check(
            link_with("burst = 1.5"),
            &[
                "`link.burst = 1.5`: the value is a fractional number",
                "allowed a whole number",
            ],
        ),
        check(
            link_with("backend = { x = 1 }"),
            &[
                "`link.backend = { x = 1 }`: the value is a table",
                "allowed \"auto\", \"xdp\" or \"packet\"",
            ],
        ),
        check(
            link_with("sched = 5"),
            &[
                "c.toml:5:9",
                "`link.sched = 5`: the value is a whole number",
                "allowed \"other\" or \"fifo:N\" with N in 1..=99",
            ],
        ),
        check(
            link_with("[scheduler]\nalgorithm = 5"),
            &[
                "c.toml:6:13",
                "`scheduler.algorithm = 5`",
                "allowed one of fifo, prio, rr, drr, wf2q, qfq in quotes",
            ],
        ),
        check(
            &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[class]\nname = \"a\"\n",
            )],
            &[
                "c.toml:5:1",
                "`[class]` is a single table, but class is a list: allowed `[[class]]`",
            ],
        ),
        check(
            &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nburst = 1.5\n",
            )],
            &[
                "c.toml:8:9",
                "`class.burst = 1.5`: the value is a fractional number",
                "allowed bytes, e.g. `burst = 15360` or `burst = \"15k\"`",
            ],
        ),
    ]);
}

/// Unknown, duplicated and oversized keys; empty, comment-only and binary
/// files.
#[test]
fn odd_config_keys_and_contents() {
    run_table(&[
        check(
            link_with("promiscuous = \"no\""),
            &["`link.promiscuous = \"no\"`", "allowed true or false"],
        ),
        check(
            link_with("buffers = 99999999999999999999"),
            &["link.buffers", "a whole number too large"],
        ),
        check(
            link_with("overhead = -1"),
            &["c.toml:5:12", "link.overhead = -1", "0..=256"],
        ),
        check(
            link_with("rate = \"2gbit\""),
            &["c.toml:5:1", "`link.rate = \"2gbit\"`: duplicate key"],
        ),
        check(
            &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\n[[class]]\nname = \"a\"\n",
            )],
            &[
                "c.toml:9:8",
                "class \"a\" is defined twice (first at line 6)",
            ],
        ),
        check(
            link_with("colour = \"red\""),
            &["c.toml:5:1", "unknown field `colour`", "`ingress`"],
        ),
        // An unknown key inside an inline table is named through it, and
        // an unknown table by its header.
        check(
            &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nmatch = [{ dprt = 5 }]\n",
            )],
            &[
                "c.toml:8:",
                "`class.match.dprt`: unknown field `dprt`; allowed `src`, `dst`",
                "`dscp` or `vlan`",
            ],
        ),
        check(
            &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[classes]\nname = \"a\"\n",
            )],
            &[
                "`[classes]`: unknown table `classes`; allowed `link`",
                "`class`",
            ],
        ),
        check(
            &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nmatch = [{ dport = 1.5 }]\n",
            )],
            &[
                "c.toml:8:20",
                "`class.match.dport",
                "a fractional number",
                "allowed a port or a range, e.g. `dport = 80` or `dport = \"1000-2000\"`",
            ],
        ),
        check(
            &[("c.toml", "")],
            &["c.toml: the file holds no settings", "[link]", "[[class]]"],
        ),
        check(
            &[("c.toml", "# only a comment\n\n")],
            &["holds no settings"],
        ),
        check(
            &[("c.toml", "\u{1}\u{2}\u{3}garbage\u{7f}")],
            &["c.toml:1:1"],
        ),
    ]);
}

/// Paths that are not config files, route configs with nothing or the
/// wrong things in them, and flags that exclude each other.
#[test]
fn odd_config_paths_and_route_files() {
    run_table(&[
        row(
            &["check", "/bin/true"],
            2,
            &["/bin/true: config", "is not UTF-8 text"],
        ),
        row(
            &["check", "/tmp"],
            2,
            &[
                "/tmp: cannot read config",
                "a directory, not a regular file",
            ],
        ),
        row(&["check", ""], 2, &["a value is required", "<CONFIG>"]),
        route(
            "",
            &[
                "r.toml: the file holds no settings",
                "[router]",
                "[[route]]",
            ],
        ),
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\nbusy_poll = true\n",
            &[
                "`router.busy_poll = true`: the value is a boolean",
                "allowed a whole number",
            ],
        ),
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\nstrategy = 5\n",
            &[
                "r.toml:4:12",
                "`router.strategy = 5`: the value is a whole number",
                "allowed \"sq\", \"rr\", \"ll-rr\" or \"ll-wfq\"",
            ],
        ),
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\n[[class]]\nname = \"be\"\n[route]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n",
            &[
                "r.toml:6:1",
                "`[route]` is a single table, but route is a list: allowed `[[route]]`",
            ],
        ),
        row(
            &["route", "--check", "/tmp"],
            2,
            &["a directory, not a regular file"],
        ),
        Row {
            files: Box::leak(Box::new([(
                "r.toml",
                "[router]\ningress = \"a0\"\negress = \"a1\"\n[[class]]\nname = \"be\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n",
            )])),
            ..row(
                &["check", "{dir}/r.toml"],
                2,
                &[
                    "r.toml: a `pktsched route` config",
                    "pktsched route --check",
                ],
            )
        },
        row(
            &["stats", "--socket", "/nonexistent/s", "--config", "c.toml"],
            2,
            &["--config", "cannot be used with", "--socket"],
        ),
    ]);
}

/// Class names in a route config: too long, defined twice, with a
/// control character, or `reverse` (taken by the egress → ingress
/// counters) are named with what is allowed; a class, route, neighbour
/// or egress class given twice names the first one's line too.
#[test]
fn route_class_names() {
    run_table(&[
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\n[[class]]\nname = \"ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n",
            &["r.toml:5:8", "(87 bytes): allowed 1 to 64 bytes"],
        ),
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\n[[class]]\nname = \"be\"\n[[class]]\nname = \"be\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n",
            &[
                "r.toml:7:8",
                "class \"be\" is defined twice (first at line 5)",
            ],
        ),
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\n[[class]]\nname = \"be\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n",
            &[
                "r.toml:10:10",
                "route.prefix = \"10.0.0.0/8\" is given twice (first at line 7)",
            ],
        ),
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\n[[class]]\nname = \"be\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n[[neighbour]]\nip = \"10.0.0.1\"\nmac = \"02:00:00:00:00:01\"\n[[neighbour]]\nip = \"10.0.0.1\"\nmac = \"02:00:00:00:00:02\"\n",
            &[
                "r.toml:13:6",
                "neighbour.ip = 10.0.0.1 is given twice (first at line 10)",
            ],
        ),
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\n[[class]]\nname = \"be\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n[egress]\nrate = \"10mbit\"\n[[egress.class]]\nname = \"be\"\n[[egress.class]]\nname = \"be\"\n",
            &[
                "r.toml:14:8",
                "egress.class \"be\" is given twice (first at line 12)",
            ],
        ),
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\n[[class]]\nname = \"a\\nb\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n",
            &["class name \"a\\nb\"", "control characters"],
        ),
        route(
            "[router]\ningress = \"a0\"\negress = \"a1\"\n[[class]]\nname = \"reverse\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n",
            &["r.toml:5:8", "\"reverse\": reserved"],
        ),
    ]);
}
