//! `pktsched route`: configs and flags.

use crate::table::{Row, row, run_table};

/// The `[router]` head of the route rows, on interfaces that do not exist.
const RT_HEAD: &str = "[router]\ningress = \"rtnosuch0\"\negress = \"rtnosuch1\"\n";

/// One class, `be`.
const CLASS: &str = "[[class]]\nname = \"be\"\n";
/// One route, to `rtnosuch1`.
const ROUTE: &str = "[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"rtnosuch1\"\n";

/// A `route --check` row on `r.toml` whose message holds `words`.
fn check(words: &'static [&'static str]) -> Row {
    row(&["route", "--check", "{dir}/r.toml"], 2, words)
}

/// `r.toml` holding `content`.
fn file(content: &'static str) -> &'static [(&'static str, &'static str)] {
    Box::leak(Box::new([("r.toml", content)]))
}

/// `parts` joined.
fn cat(parts: &[&str]) -> &'static str {
    Box::leak(parts.concat().into_boxed_str())
}

/// `pktsched route`: its flags and a config that cannot be read.
#[test]
fn route_flags() {
    run_table(&[
        row(
            &["route", "--check", "/nonexistent/r.toml"],
            2,
            &["cannot read config"],
        ),
        row(&["route"], 2, &["--config FILE", "--check FILE"]),
        row(
            &["route", "--config", "a.toml", "--check", "b.toml"],
            2,
            &["cannot be used with"],
        ),
        Row {
            files: file(cat(&[RT_HEAD, "backend = \"packet\"\n", CLASS, ROUTE])),
            ..row(
                &[
                    "route",
                    "--config",
                    "{dir}/r.toml",
                    "--control",
                    "{dir}/c.sock",
                ],
                2,
                &["rtnosuch0", "no such interface"],
            )
        },
        Row {
            files: file(cat(&[RT_HEAD, CLASS, ROUTE])),
            ..row(
                &["route", "--config", "{dir}/r.toml", "--duration", "soon"],
                2,
                &["--duration \"soon\""],
            )
        },
    ]);
}

/// `route --check`: the `[router]` section, classes and routes.
#[test]
fn route_config_router_section() {
    run_table(&[
        Row {
            files: file(cat(&[RT_HEAD, "strategy = \"wfq\"\n", CLASS, ROUTE])),
            ..check(&["r.toml:4:12", "`wfq`", "sq, rr, ll-rr, ll-wfq"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                "backend = \"xdp\"\n",
                "[[class]]\nname = \"v\"\nmatch = [{ vlan = 7 }]\n",
                CLASS,
                ROUTE,
            ])),
            ..check(&[
                "r.toml:4:11",
                "class \"v\" matching on vlan",
                "backend = \"packet\"",
            ])
        },
        Row {
            files: file(cat(&[RT_HEAD, CLASS, "budget = 0\n", ROUTE])),
            ..check(&["r.toml:6:10", "budget = 0", "1..=64"])
        },
        Row {
            files: file(cat(&[RT_HEAD, "device_budget = 0\n", CLASS, ROUTE])),
            ..check(&["router.device_budget = 0", "1..=65536"])
        },
        Row {
            files: file(cat(&[RT_HEAD, "cost = \"20uss\"\n", CLASS, ROUTE])),
            ..check(&["router.cost = \"20uss\"", "\"none\"", "acl:N"])
        },
        Row {
            files: file(cat(&[RT_HEAD, "cost = \"acl:0\"\n", CLASS, ROUTE])),
            ..check(&["acl rule count", "1..=1048576"])
        },
        Row {
            files: file(cat(&[RT_HEAD, CLASS, CLASS, ROUTE])),
            ..check(&["class \"be\" is defined twice", "unique"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                CLASS,
                "[[route]]\nprefix = \"10.0.0.0/33\"\ndev = \"rtnosuch1\"\n",
            ])),
            ..check(&["route.prefix = \"10.0.0.0/33\"", "ADDRESS/LEN"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                CLASS,
                "[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"10.0.0.1\"\ndev = \"rtnosuch1\"\n",
            ])),
            ..check(&["via = 10.0.0.1 is not a [[neighbour]]"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                CLASS,
                "[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"eth7\"\n",
            ])),
            ..check(&["route.dev = \"eth7\"", "router's interfaces"])
        },
        Row {
            files: file(cat(&[RT_HEAD, CLASS])),
            ..check(&["[[route]] entries", "1..=65536"])
        },
        Row {
            files: file(cat(&["[router]\ningress = \"rtnosuch0\"\n", CLASS, ROUTE])),
            ..check(&["`router.egress` is missing", "an interface name"])
        },
        Row {
            files: file(cat(&[RT_HEAD, "ring_frames = 3\n", CLASS, ROUTE])),
            ..check(&["router.ring_frames = 3", "16..=65536"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                "[[class]]\nname = \"rt\"\nmatch = [{ dscp = \"xf\" }]\n",
                ROUTE,
            ])),
            ..check(&["match.dscp", "ef"])
        },
        Row {
            files: file(cat(&[RT_HEAD, "busy_poll = -1\n", CLASS, ROUTE])),
            ..check(&["router.busy_poll = -1", "0..=10000"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                "ingress_address6 = \"10.1.0.1\"\n",
                CLASS,
                ROUTE,
            ])),
            ..check(&["router.ingress_address6 = \"10.1.0.1\"", "unicast IPv6"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                "egress_address6 = \"ff02::1\"\n",
                CLASS,
                ROUTE,
            ])),
            ..check(&["router.egress_address6 = \"ff02::1\"", "unicast IPv6"])
        },
    ]);
}

/// `route --check`: the `[egress]` section and the frame pool.
#[test]
fn route_config_egress_section() {
    run_table(&[
        Row {
            files: file(cat(&[
                RT_HEAD,
                CLASS,
                ROUTE,
                "[egress]\nrate = \"10mbit\"\n[[egress.class]]\nname = \"voip\"\n",
            ])),
            ..check(&[
                "r.toml:12:8",
                "egress.class name \"voip\"",
                "allowed \"be\"",
            ])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                CLASS,
                ROUTE,
                "[egress]\nrate = \"0kbit\"\n",
            ])),
            ..check(&["r.toml:10:8", "egress.rate", "`0kbit` is zero"])
        },
        Row {
            files: file(cat(&[RT_HEAD, CLASS, ROUTE, "[egress]\nrate = \"10MB\"\n"])),
            ..check(&["egress.rate", "10MB"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                CLASS,
                ROUTE,
                "[egress]\nrate = \"10mbit\"\nalgorithm = \"htb\"\n",
            ])),
            ..check(&[
                "egress.algorithm",
                "`htb`",
                "fifo, prio, rr, drr, wf2q, qfq",
            ])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                CLASS,
                ROUTE,
                "[egress]\nrate = \"10mbit\"\n[[egress.class]]\nname = \"be\"\nlimit = 0\n",
            ])),
            ..check(&["class \"be\": limit = 0", "1..=1048576"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                CLASS,
                ROUTE,
                "[egress]\nrate = \"1gbit\"\nalgorithm = \"prio\"\n",
                "[[egress.class]]\nname = \"be\"\nprio = 9\n",
            ])),
            ..check(&["r.toml:14:8", "prio = 9", "allowed 0..=7"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                CLASS,
                ROUTE,
                "[egress]\nrate = \"1gbit\"\nalgorithm = \"prio\"\n",
                "[[egress.class]]\nname = \"be\"\nprio = 8\n",
            ])),
            ..check(&["r.toml:14:8", "prio = 8", "allowed 0..=7"])
        },
        Row {
            files: file(cat(&[
                RT_HEAD,
                "pool_frames = 1025\n",
                CLASS,
                ROUTE,
                "[egress]\nrate = \"10mbit\"\n",
            ])),
            ..check(&[
                "r.toml:10:1",
                "router.pool_frames = 1025",
                "at least 80",
                "at most 945",
            ])
        },
    ]);
}
