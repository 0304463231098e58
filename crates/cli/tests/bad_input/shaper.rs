//! `check`, `run`, `stats` and `reload` of the shaper: config files with
//! positions, devices that do not exist, flags.

use crate::table::{RUN_LINK, Row, row, run_table};

/// `check`: a config that cannot be read, and link and class values named
/// with their position.
#[test]
fn check_config_links_and_classes() {
    run_table(&[
        row(
            &["check", "/nonexistent/c.toml"],
            2,
            &["cannot read config"],
        ),
        row(
            &["check", "/dev/zero"],
            2,
            &[
                "config `/dev/zero`: it is a device, not a regular file",
                "allowed a regular file of at most 16777216 bytes",
            ],
        ),
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbps\"\n",
            )],
            ..row(&["check", "{dir}/c.toml"], 2, &["c.toml:4:8", "ambiguous"])
        },
        Row {
            files: &[("c.toml", RUN_LINK)],
            ..row(&["check", "{dir}/c.toml"], 2, &["no [[class]]"])
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\nbackend = \"xdp\"\n[[class]]\nname = \"a\"\ndefault = true\nmatch = [{ vlan = 7 }]\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:5:11", "matching on vlan", "backend = \"packet\""],
            )
        },
        // The `prio` algorithm has 8 levels: 8 is the first refused.
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[scheduler]\nalgorithm = \"prio\"\n[[class]]\nname = \"a\"\ndefault = true\nprio = 8\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:10:8", "class \"a\": prio = 8", "allowed 0..=7"],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nweight = 0\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:8:10", "weight = 0", "1..=65536"],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nmatch = [{ dport = \"9-1\" }]\n",
            )],
            ..row(&["check", "{dir}/c.toml"], 2, &["match.dport", "LO <= HI"])
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nburst = 3000\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &[
                    "c.toml:8:9",
                    "class \"a\": burst = 3000",
                    "burst needs rate",
                ],
            )
        },
    ]);
}

/// `check`: class rates, ceilings and bursts: the value and what is
/// allowed.
#[test]
fn check_class_rates_and_bursts() {
    run_table(&[
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\nmax_frame = 9000\n[[class]]\nname = \"a\"\ndefault = true\nrate = \"1mbit\"\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:9:8", "rate = 1mbit", "allowed 4.396mbit", "horizon"],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nceil = 100\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &[
                    "c.toml:8:8",
                    "`class.ceil = 100`",
                    "a rate with its unit",
                    "ambiguous",
                ],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nrate = \"10mbit\"\ncburst = \"3k\"\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:9:10", "cburst needs ceil"],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nrate = \"10mbit\"\nburst = 0\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:9:9", "burst = 0", "1..=1048576 bytes"],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nrate = \"10mbit\"\nburst = \"4m\"\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["burst = \"4m\" (4194304 bytes)", "1..=1048576 bytes"],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nrate = \"10mbit\"\nburst = \"15kbit\"\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["\"15kbit\" is a rate, not a size", "\"15k\""],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nrate = \"10mbit\"\nburst = \"15 kilo\"\n",
            )],
            ..row(
                &["run", "--config", "{dir}/c.toml"],
                2,
                &["c.toml:9:9", "\"15 kilo\" is not a size", "k, kb, kib"],
            )
        },
    ]);
}

/// `run` on devices that do not exist and with users it cannot become;
/// `stats` and `reload` on sockets that do not exist.
#[test]
fn run_devices_users_and_sockets() {
    run_table(&[
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"nosuch0\"\negress = \"nosuch1\"\nrate = \"1gbit\"\n[control]\nsocket = \"{dir}/s.sock\"\n[[class]]\nname = \"a\"\ndefault = true\n",
            )],
            ..row(
                &["run", "--config", "{dir}/c.toml"],
                2,
                &["nosuch0", "no such interface"],
            )
        },
        Row {
            files: &[("c.toml", RUN_LINK)],
            ..row(
                &[
                    "run",
                    "--config",
                    "{dir}/c.toml",
                    "--user",
                    "no-such-user-vc",
                ],
                2,
                &["--user", "\"no-such-user-vc\"", "no such user"],
            )
        },
        row(
            &["run", "--config", "/nonexistent/c.toml", "--user", ""],
            2,
            &["--user \"\"", "1..=256"],
        ),
        row(
            &[
                "run",
                "--config",
                "c.toml",
                "--user",
                "nobody",
                "--keep-privileges",
            ],
            2,
            &["--user", "--keep-privileges", "cannot be used with"],
        ),
        row(&["stats"], 2, &["--socket PATH or --config FILE"]),
        row(
            &["stats", "--socket", "/nonexistent/s.sock"],
            2,
            &["cannot reach pktsched"],
        ),
        row(
            &["reload", "--socket", "/nonexistent/s.sock"],
            2,
            &["cannot reach pktsched"],
        ),
    ]);
}

/// `run` and `check`: the engine, real-time priority, busy polling, pinned
/// cores and the link's scheduling class.
#[test]
fn run_engine_cpu_and_busy_poll() {
    run_table(&[
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\nengine = \"threads\"\n[[class]]\nname = \"a\"\ndefault = true\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:5:10", "link.engine", "run-to-completion, pspat"],
            )
        },
        row(
            &[
                "run",
                "--config",
                "/nonexistent/c.toml",
                "--rt-priority",
                "0",
            ],
            2,
            &["--rt-priority", "priority 0", "1..=99"],
        ),
        row(
            &[
                "run",
                "--config",
                "/nonexistent/c.toml",
                "--rt-priority",
                "100",
            ],
            2,
            &["--rt-priority", "priority 100", "1..=99"],
        ),
        row(
            &[
                "run",
                "--config",
                "/nonexistent/c.toml",
                "--rt-priority",
                "x",
            ],
            2,
            &["--rt-priority", "'x'"],
        ),
        row(
            &["run", "--config", "/nonexistent/c.toml", "--busy-poll", "0"],
            2,
            &["--busy-poll", "budget 0", "1..=1024"],
        ),
        row(
            &["run", "--config", "/nonexistent/c.toml", "--busy-poll=x"],
            2,
            &["--busy-poll \"x\" is not a number", "1..=1024"],
        ),
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\nbusy_poll = 5000\n[[class]]\nname = \"a\"\ndefault = true\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:5:13", "link.busy_poll = 5000", "1..=1024"],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"fwnodev0\"\negress = \"fwnodev1\"\nrate = \"1gbit\"\nbusy_poll = true\n[[class]]\nname = \"a\"\ndefault = true\n",
            )],
            ..row(
                &["run", "--config", "{dir}/c.toml"],
                2,
                &["link.busy_poll needs a pinned core", "link.cpu", "--cpu"],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"fwnodev0\"\negress = \"fwnodev1\"\nrate = \"1gbit\"\nengine = \"pspat\"\n[[class]]\nname = \"a\"\ndefault = true\n",
            )],
            ..row(
                &[
                    "run",
                    "--config",
                    "{dir}/c.toml",
                    "--busy-poll",
                    "--cpu",
                    "0",
                ],
                2,
                &[
                    "--busy-poll needs link.engine = \"run-to-completion\"",
                    "\"pspat\"",
                ],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\nengine = \"pspat\"\ncpu = 0\nbusy_poll = true\n[[class]]\nname = \"a\"\ndefault = true\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &[
                    "c.toml:7",
                    "link.busy_poll needs link.engine = \"run-to-completion\"",
                    "\"pspat\"",
                ],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"fwnodev0\"\negress = \"fwnodev1\"\nrate = \"1gbit\"\ncpu = 0\nbusy_poll = true\n[[class]]\nname = \"a\"\ndefault = true\n",
            )],
            ..row(
                &["run", "--config", "{dir}/c.toml", "--user", "nobody"],
                2,
                &["busy polling with --user nobody", "CAP_NET_ADMIN"],
            )
        },
        row(
            &["run", "--config", "/nonexistent/c.toml", "--cpu", "5000"],
            2,
            &["--cpu 5000", "0..=1023"],
        ),
        row(
            &["run", "--config", "/nonexistent/c.toml", "--cpu=-1"],
            2,
            &["--cpu", "'-1'"],
        ),
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\nsched = \"fifo:0\"\ncpu = 9999\n[[class]]\nname = \"a\"\ndefault = true\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:6:7", "link.cpu = 9999", "0..=1023"],
            )
        },
        Row {
            files: &[(
                "c.toml",
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\nsched = \"fifo\"\n[[class]]\nname = \"a\"\ndefault = true\n",
            )],
            ..row(
                &["check", "{dir}/c.toml"],
                2,
                &["c.toml:5:9", "link.sched", "\"fifo\" is unknown", "fifo:N"],
            )
        },
    ]);
}
