use super::*;

const GOOD: &str = r#"
[link]
ingress = "d0"
egress = "d1"
rate = "100mbit"
overhead = 24
mpu = 84

[scheduler]
algorithm = "drr"

[[class]]
name = "voip"
weight = 10
limit = 200
match = [{ proto = "udp", dport = "5000-5010" }, { dscp = "ef" }]

[[class]]
name = "web"
weight = 3
match = [{ proto = "tcp", sport = 443, src = "10.0.0.0/8" }]

[[class]]
name = "bulk"
default = true
"#;

fn parse_ok(src: &str) -> RunConfig {
    match parse(src, "t.toml", None) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn a_good_config_parses_with_defaults_filled_in() {
    let c = parse_ok(GOOD);
    assert_eq!(c.link.rate, Rate::mbit(100));
    assert_eq!(c.link.wire_len(60), 84);
    assert_eq!(c.link.wire_len(1500), 1524);
    assert_eq!(c.link.max_frame, 1514);
    assert_eq!(c.link.burst, 1538, "one maximum frame on the wire");
    assert_eq!(c.link.engine, Engine::RunToCompletion);
    assert_eq!(c.classes.len(), 3);
    assert_eq!(c.default_class(), 2);
    let voip = c.class("voip").expect("voip");
    assert_eq!((voip.weight, voip.limit, voip.rules.len()), (10, 200, 2));
    assert_eq!(voip.rules[0].proto, Some(17));
    assert_eq!(voip.rules[1].dscp, Some(46));
    assert_eq!(c.class("bulk").map(|b| b.limit), Some(1024));
    assert_eq!(
        c.control.socket,
        std::path::PathBuf::from("/run/pktsched-d1.sock")
    );
}

#[test]
fn the_normalised_form_parses_back_to_itself() {
    let once = parse_ok(GOOD).to_string();
    let twice = parse_ok(&once).to_string();
    assert_eq!(once, twice);
    assert!(once.contains("match = [{ proto = 17, dport = \"5000-5010\" }, { dscp = 46 }]"));
    assert!(once.contains("engine = \"run-to-completion\"\n"), "{once}");
    let pspat = GOOD.replace("mpu = 84", "mpu = 84\nengine = \"pspat\"");
    let c = parse_ok(&pspat);
    assert_eq!(c.link.engine, Engine::Pspat);
    assert!(c.to_string().contains("engine = \"pspat\"\n"));
    assert_eq!(parse_ok(&c.to_string()).link.engine, Engine::Pspat);
}

/// Names as people write them (a combining accent, a zero-width joiner,
/// a quote, a backslash, a soft hyphen in a path) print as TOML strings
/// that parse back to the same names: Rust's `{:?}` escapes (`\u{301}`)
/// are not TOML.
#[test]
fn the_normalised_form_keeps_unusual_names() {
    let names = [
        ("d1\u{301}", "e\u{301}t\u{e9}", "/tmp/a\u{ad}b.sock"),
        ("d\"1", "a\u{200d}b", "/tmp/back\\slash.sock"),
        ("d1", "cl\u{e4}ss", "/tmp/quote\"d.sock"),
    ];
    for (egress, class, socket) in names {
        let esc = |s: &str| {
            s.replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\t', "\\t")
        };
        let src = GOOD
            .replace("egress = \"d1\"", &format!("egress = \"{}\"", esc(egress)))
            .replace("name = \"web\"", &format!("name = \"{}\"", esc(class)))
            + &format!("\n[control]\nsocket = \"{}\"\n", esc(socket));
        let cfg = parse(&src, "t.toml", None).unwrap_or_else(|e| panic!("{e}"));
        let once = cfg.to_string();
        let again = parse(&once, "n.toml", None).unwrap_or_else(|e| panic!("{e}\n{once}"));
        assert_eq!(again.link.egress, egress);
        assert_eq!(again.classes[1].name, class);
        assert_eq!(again.control.socket, std::path::PathBuf::from(socket));
        assert_eq!(again.to_string(), once);
    }
    // A TOML `\u0301` escape reads as the accent and prints as itself.
    let cfg = parse_ok(&GOOD.replace("name = \"web\"", "name = \"e\\u0301\""));
    assert!(cfg.to_string().contains("name = \"e\u{301}\"\n"), "{cfg}");
}

/// A class weight the algorithm does not use is noted (not refused).
#[test]
fn a_weight_the_algorithm_ignores_is_noted() {
    for (alg, noted) in [
        ("fifo", true),
        ("prio", true),
        ("rr", true),
        ("drr", false),
        ("qfq", false),
    ] {
        let c = parse_ok(&GOOD.replace("algorithm = \"drr\"", &format!("algorithm = \"{alg}\"")));
        let notes = c.unused_settings();
        if noted {
            // voip has weight 10 and web 3; bulk keeps the default 1.
            assert_eq!(notes.len(), 2, "{alg}: {notes:?}");
            assert!(notes[0].contains("class \"voip\": weight = 10 is not used by algorithm"));
            assert!(
                notes[1].contains(&format!("algorithm = \"{alg}\"")),
                "{notes:?}"
            );
        } else {
            assert!(notes.is_empty(), "{alg}: {notes:?}");
        }
    }
}

#[test]
fn cpu_and_sched_default_to_any_and_other_and_read_back() {
    let c = parse_ok(GOOD);
    assert_eq!((c.link.cpu, c.link.sched), (None, ThreadSched::Other));
    assert!(!c.to_string().contains("cpu ="));
    let pinned = GOOD.replace("mpu = 84", "mpu = 84\ncpu = 1\nsched = \"fifo:50\"");
    let c = parse_ok(&pinned);
    assert_eq!((c.link.cpu, c.link.sched), (Some(1), ThreadSched::Fifo(50)));
    let text = c.to_string();
    assert!(text.contains("cpu = 1\nsched = \"fifo:50\"\n"), "{text}");
    let again = parse_ok(&text);
    assert_eq!(
        (again.link.cpu, again.link.sched),
        (Some(1), ThreadSched::Fifo(50))
    );
}

#[test]
fn class_rates_follow_htb_ceil_defaults_to_rate_and_ceil_alone_is_a_limit() {
    let src = GOOD
        .replace(
            "weight = 10\n",
            "weight = 10\nrate = \"2mbit\"\nceil = \"10mbit\"\n",
        )
        .replace("weight = 3\n", "weight = 3\nrate = \"30mbit\"\n")
        .replace("default = true\n", "default = true\nceil = \"50mbit\"\n");
    let c = parse_ok(&src);
    assert!(c.has_class_rates());
    let got: Vec<_> = c
        .classes
        .iter()
        .map(|k| (k.rate, k.ceil, k.ceiling()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                Some(Rate::mbit(2)),
                Some(Rate::mbit(10)),
                Some(Rate::mbit(10))
            ),
            (Some(Rate::mbit(30)), None, Some(Rate::mbit(30))),
            (None, Some(Rate::mbit(50)), Some(Rate::mbit(50))),
        ]
    );
    let once = c.to_string();
    assert!(
        once.contains("rate = \"2mbit\"\nceil = \"10mbit\"\n"),
        "{once}"
    );
    assert_eq!(parse_ok(&once).to_string(), once);
    assert!(!parse_ok(GOOD).has_class_rates());
}

#[test]
fn class_bursts_read_units_default_cburst_to_burst_and_print_back_as_bytes() {
    let src = GOOD
        .replace(
            "weight = 10\n",
            "weight = 10\nrate = \"2mbit\"\nceil = \"10mbit\"\nburst = \"15k\"\ncburst = \"1kb\"\n",
        )
        .replace(
            "weight = 3\n",
            "weight = 3\nrate = \"30mbit\"\nburst = 4500\n",
        )
        .replace(
            "default = true\n",
            "default = true\nceil = \"50mbit\"\ncburst = \"1m\"\n",
        );
    let c = parse_ok(&src);
    let got: Vec<_> = c
        .classes
        .iter()
        .map(|k| (k.burst, k.cburst, k.ceiling_burst()))
        .collect();
    assert_eq!(
        got,
        vec![
            (Some(15 * 1024), Some(1024), Some(1024)),
            (Some(4500), None, Some(4500)),
            (None, Some(1 << 20), Some(1 << 20)),
        ]
    );
    let once = c.to_string();
    assert!(once.contains("burst = 15360\ncburst = 1024\n"), "{once}");
    assert_eq!(parse_ok(&once).to_string(), once);
    // Without the fields: no credit beyond the default, nothing printed.
    let plain = parse_ok(GOOD);
    assert!(plain.classes.iter().all(|k| k.ceiling_burst().is_none()));
    assert!(!plain.to_string().contains("cburst"));
    for (text, bytes) in [
        ("1500", 1500),
        ("1500b", 1500),
        ("2KiB", 2048),
        (" 3mb ", 3 << 20),
    ] {
        assert_eq!(parse_size(text), Ok(bytes), "{text}");
    }
}

/// tdc-style: each row is a config change and words its error must hold.
#[test]
fn bad_configs_are_refused_with_field_value_and_what_is_allowed() {
    let link = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n";
    let class = "[[class]]\nname = \"a\"\ndefault = true\n";
    let rows: &[(String, &[&str])] = &[
        (class.to_string(), &["`link` is missing", "[link]` table"]),
        (link.to_string(), &["no [[class]]"]),
        (
            link.replace("1gbit", "0bit") + class,
            &["link.rate", "zero"],
        ),
        (link.replace("\"1gbit\"", "\"10\"") + class, &["link.rate"]),
        (
            link.replace("\"1gbit\"", "10") + class,
            &[
                "`link.rate = 10`",
                "a rate with its unit",
                "\"100mbit\"",
                "ambiguous",
            ],
        ),
        (link.replace("1gbit", "1gbps") + class, &["link.rate"]),
        (
            link.replace("1gbit", "999tbit") + class,
            &["too fast", "400gbit"],
        ),
        (link.replace("\"d1\"", "\"d0\"") + class, &["must differ"]),
        (
            link.replace("\"d1\"", "\"a-very-long-interface\"") + class,
            &["link.egress", "1 to 15 bytes"],
        ),
        (link.replace("\"d0\"", "\"\"") + class, &["link.ingress"]),
        (
            format!("{link}overhead = -1\n{class}"),
            &["link.overhead = -1", "0..=256"],
        ),
        (
            format!("{link}mpu = 9999\n{class}"),
            &["link.mpu = 9999", "0..=256"],
        ),
        (
            format!("{link}max_frame = 20\n{class}"),
            &["link.max_frame = 20", "60..=9216"],
        ),
        (
            format!("{link}buffers = 0\n{class}"),
            &["link.buffers = 0", "64..=1048576"],
        ),
        (
            format!("{link}burst = -1\n{class}"),
            &["link.burst = -1", "0..=1048576"],
        ),
        (
            format!("{link}prio_burst = -1\n{class}"),
            &["t.toml:5:14", "link.prio_burst = -1", "0..=1048576"],
        ),
        (
            // The default scheduler (drr) has no strict priority.
            format!("{link}prio_burst = 1538\n{class}"),
            &[
                "t.toml:5:14",
                "link.prio_burst = 1538 has no class to serve",
                "algorithm = \"prio\"",
                "two prio levels",
                "else 0",
            ],
        ),
        (
            // One prio level: no class is more urgent than another.
            format!("{link}prio_burst = 1538\n[scheduler]\nalgorithm = \"prio\"\n{class}"),
            &["link.prio_burst = 1538 has no class to serve"],
        ),
        (
            format!("{link}backend = \"dpdk\"\n{class}"),
            &["link.backend", "auto, xdp, packet"],
        ),
        (
            // AF_XDP never sees a tag held in metadata: the rule could not match.
            format!("{link}backend = \"xdp\"\n{class}match = [{{ vlan = 7 }}]\n"),
            &[
                "link.backend = \"xdp\" with class",
                "matching on vlan",
                "allowed backend = \"packet\" or \"auto\"",
            ],
        ),
        (
            format!("{link}engine = \"threads\"\n{class}"),
            &["link.engine", "\"threads\"", "run-to-completion, pspat"],
        ),
        (
            format!("{link}engine = 2\n{class}"),
            &[
                "t.toml:5:10",
                "`link.engine = 2`",
                "the value is a whole number",
                "allowed \"run-to-completion\" or \"pspat\"",
            ],
        ),
        (
            format!("{link}cpu = 1024\n{class}"),
            &["link.cpu = 1024", "0..=1023"],
        ),
        (
            format!("{link}cpu = -1\n{class}"),
            &["link.cpu = -1", "0..=1023"],
        ),
        (
            format!("{link}sched = \"fifo:0\"\n{class}"),
            &["link.sched", "\"fifo:0\"", "1..=99"],
        ),
        (
            format!("{link}sched = \"fifo:100\"\n{class}"),
            &["t.toml:5:9", "link.sched", "1..=99"],
        ),
        (
            format!("{link}sched = \"rr:10\"\n{class}"),
            &["link.sched", "\"rr:10\"", "\"other\" or \"fifo:N\""],
        ),
        (
            format!("{link}sched = 50\n{class}"),
            &[
                "t.toml:5",
                "`link.sched = 50`",
                "allowed \"other\" or \"fifo:N\"",
            ],
        ),
        (
            format!("{link}bogus = 1\n{class}"),
            &["unknown field `bogus`"],
        ),
        (
            format!("{link}[scheduler]\nalgorithm = \"sfq\"\n{class}"),
            &["scheduler.algorithm", "unknown algorithm", "allowed"],
        ),
        (
            format!("{link}[scheduler]\nalgorithm = \"drr\"\npolicy = \"hpfq\"\n{class}"),
            &["both given"],
        ),
        (
            format!("{link}[scheduler]\npolicy = \"nosuch\"\n{class}"),
            &["scheduler.policy", "no built-in policy"],
        ),
        (
            format!("{link}[scheduler]\npolicy = \"/nonexistent/p.toml\"\n{class}"),
            &["cannot read policy"],
        ),
        (
            format!("{link}[scheduler]\npolicy = \"/dev/zero.toml\"\n{class}"),
            &["policy"],
        ),
        (
            format!("{link}[control]\nprometheus = \"localhost\"\n{class}"),
            &["control.prometheus", "ADDRESS:PORT"],
        ),
        (
            format!("{link}[control]\nsocket = \"\"\n{class}"),
            &["control.socket", "1 to 100 bytes"],
        ),
        (
            format!("{link}[[class]]\nname = \"b\"\n"),
            &["no class has default = true"],
        ),
        (
            format!("{link}{class}{class}"),
            &["defined twice (first at line", "unique"],
        ),
        (
            format!("{link}{class}[[class]]\nname = \"b\"\ndefault = true\n"),
            &["both have default = true"],
        ),
        (
            format!("{link}{class}weight = 0\n"),
            &["weight = 0", "1..=65536"],
        ),
        (
            format!("{link}{class}weight = 70000\n"),
            &["weight = 70000", "1..=65536"],
        ),
        (
            format!("{link}{class}limit = 0\n"),
            &["limit = 0", "1..=1048576"],
        ),
        (format!("{link}{class}prio = -2\n"), &["prio = -2"]),
        (
            format!("{link}{class}node = \"x\"\n"),
            &["needs scheduler.policy"],
        ),
        (
            format!("{link}[scheduler]\npolicy = \"hpfq\"\n{class}node = \"x\"\n"),
            &["node \"x\" is not in policy"],
        ),
        (
            format!("{link}{class}name2 = 1\n"),
            &["unknown field `name2`"],
        ),
        (
            format!("{link}[[class]]\nname = \"has space\"\ndefault = true\n"),
            &["class name", "without whitespace"],
        ),
        (
            format!("{link}[[class]]\nname = \"a\\\"b\"\ndefault = true\n"),
            &["class name \"a\\\"b\" (3 bytes)", "`\"` or `\\`"],
        ),
        (
            format!(
                "{link}[[class]]\nname = \"{}\"\ndefault = true\n",
                "n".repeat(300)
            ),
            &["(300 bytes)", "allowed 1 to 64 bytes"],
        ),
        (
            format!("{link}{class}match = [{{ dport = \"70000\" }}]\n"),
            &["match.dport = \"70000\": not a port: allowed a port 0..=65535 or a range"],
        ),
        (
            format!("{link}{class}match = [{{ dport = \"20-10\" }}]\n"),
            &["match.dport", "LO <= HI"],
        ),
        (
            format!("{link}{class}match = [{{ sport = -1 }}]\n"),
            &["match.sport"],
        ),
        (
            format!("{link}{class}match = [{{ src = \"10.0.0.1/8\" }}]\n"),
            &["match.src", "10.0.0.1/8"],
        ),
        (
            format!("{link}{class}match = [{{ dst = \"10.0.0.0/33\" }}]\n"),
            &["match.dst = \"10.0.0.0/33\": prefix length 33 is out of range: allowed 0..=32"],
        ),
        (
            format!("{link}{class}match = [{{ dst = \"ten.0.0.0\" }}]\n"),
            &["not an IPv4 or IPv6 address: allowed an address or ADDRESS/LEN"],
        ),
        (
            format!("{link}{class}match = [{{ src = \"10.0.0.0/8\", dst = \"2001:db8::/32\" }}]\n"),
            &["different IP versions"],
        ),
        (
            format!("{link}{class}match = [{{ proto = \"gre\" }}]\n"),
            &["match.proto", "0..=255", "udp"],
        ),
        (
            format!("{link}{class}match = [{{ proto = 300 }}]\n"),
            &["match.proto = 300"],
        ),
        (
            format!("{link}{class}match = [{{ proto = \"icmp\", dport = 80 }}]\n"),
            &["can never match"],
        ),
        (
            format!("{link}{class}match = [{{ dscp = 64 }}]\n"),
            &["match.dscp = 64", "0..=63"],
        ),
        (
            format!("{link}{class}match = [{{ dscp = \"af51\" }}]\n"),
            &["match.dscp", "af11..af43"],
        ),
        (
            format!("{link}{class}match = [{{ vlan = 4096 }}]\n"),
            &["match.vlan = 4096", "0..=4095"],
        ),
        (
            format!("{link}{class}match = [{{ port = 80 }}]\n"),
            &["unknown field `port`"],
        ),
        (
            format!(
                "{link}[[class]]\nname = \"web\"\nmatch = [{{ proto = \"tcp\" }}]\n\
                 [[class]]\nname = \"https\"\nmatch = [{{ proto = \"tcp\", dport = 443 }}]\n{class}"
            ),
            &[
                "class \"https\": match rule 1 can never match",
                "class \"web\"'s rule 1",
            ],
        ),
        (
            format!("{link}{class}[[class]]\nname = \"spare\"\nweight = 3\n"),
            &[
                "class \"spare\" has no match rules",
                "not the default class (\"a\")",
                "no frame can reach it",
            ],
        ),
        (
            format!("{link}{class}[[class]]\nname = \"all\"\nmatch = [{{ dport = 80 }}, {{}}]\n"),
            &[
                "class \"all\": match rule 2 names no field",
                "\"a\" gets none",
                "src, dst, proto",
            ],
        ),
        (
            format!(
                "{link}[scheduler]\nalgorithm = \"drr\"\n{class}rate = \"20mbit\"\nceil = \"10mbit\"\n"
            ),
            &["class \"a\": ceil", "below rate", "allowed ceil >= rate"],
        ),
        (
            format!("{link}[scheduler]\nalgorithm = \"drr\"\n{class}rate = \"2gbit\"\n"),
            &["class \"a\": rate", "up to link.rate"],
        ),
        (
            format!("{link}[scheduler]\nalgorithm = \"drr\"\n{class}ceil = \"100kbit\"\n"),
            &[
                "class \"a\": ceil",
                "allowed 1mbit (the floor for a class rate",
            ],
        ),
        (
            format!("{link}[scheduler]\nalgorithm = \"drr\"\n{class}ceil = 1.5\n"),
            &[
                "`class.ceil = 1.5`",
                "a fractional number",
                "a rate with its unit",
            ],
        ),
        (
            // A 9024-byte wire frame takes 72 ms at 1 Mbit/s, beyond the
            // shaper's 16.4 ms horizon: 9024 · 8 / 16.382 ms = 4.407 Mbit/s.
            format!(
                "{link}max_frame = 9000\noverhead = 24\n[scheduler]\nalgorithm = \"drr\"\n{class}rate = \"1mbit\"\n"
            ),
            &[
                "class \"a\": rate = 1mbit",
                "allowed 4.407mbit",
                "9024 bytes on the wire, fits the shaper's 16 ms horizon",
            ],
        ),
        (
            // 1514-byte frames fit the horizon from 740 kbit/s; the floor
            // for a class rate is 1 Mbit/s, and the message says both.
            format!("{link}[scheduler]\nalgorithm = \"drr\"\n{class}rate = \"500kbit\"\n"),
            &[
                "class \"a\": rate = 500kbit",
                "allowed 1mbit (the floor for a class rate",
                "1514 bytes on the wire",
                "horizon from 740kbit",
            ],
        ),
        (
            format!(
                "{}max_frame = 9000\n[scheduler]\nalgorithm = \"drr\"\n{class}rate = \"2mbit\"\n",
                link.replace("1gbit", "2mbit")
            ),
            &[
                "class \"a\": rate = 2mbit",
                "no class rate fits this link",
                "4.396mbit",
                "link.max_frame",
            ],
        ),
        (
            format!("{link}[scheduler]\nalgorithm = \"drr\"\n{class}rate = \"10mbps\"\n"),
            &["class \"a\": rate"],
        ),
        (
            format!("{link}[scheduler]\nalgorithm = \"drr\"\n{class}rate = 10\n"),
            &[
                "t.toml:10:8",
                "`class.rate = 10`: the value is a whole number",
                "allowed a rate with its unit",
            ],
        ),
        (
            format!("{link}[scheduler]\nalgorithm = \"prio\"\n{class}rate = \"10mbit\"\n"),
            &[
                "rate (a guarantee)",
                "weighted algorithm",
                "ceil alone is allowed",
            ],
        ),
        (
            format!("{link}[scheduler]\nalgorithm = \"prio\"\n{class}prio = 8\n"),
            &[
                "t.toml:10:8",
                "class \"a\": prio = 8",
                "allowed 0..=7 (0..=1023 when a class has a rate or ceil)",
            ],
        ),
        (
            format!("{link}[scheduler]\nalgorithm = \"fifo\"\n{class}ceil = \"10mbit\"\n"),
            &["fifo", "drr, wf2q, qfq, rr"],
        ),
        (
            format!("{link}[scheduler]\npolicy = \"hclock\"\n{class}ceil = \"10mbit\"\n"),
            &["scheduler.algorithm", "reservation"],
        ),
        (
            format!("{link}[scheduler]\nalgorithm = \"drr\"\n{class}burst = 3000\n"),
            &["class \"a\": burst = 3000", "burst needs rate"],
        ),
        (
            format!(
                "{link}[scheduler]\nalgorithm = \"drr\"\n{class}ceil = \"10mbit\"\nburst = 3000\n"
            ),
            &["burst needs rate", "cburst"],
        ),
        (
            format!(
                "{link}[scheduler]\nalgorithm = \"drr\"\n{class}rate = \"10mbit\"\ncburst = 3000\n"
            ),
            &[
                "class \"a\": cburst = 3000",
                "cburst needs ceil",
                "burst sets its credit",
            ],
        ),
        (
            format!(
                "{link}[scheduler]\nalgorithm = \"drr\"\n{class}rate = \"10mbit\"\nburst = 0\n"
            ),
            &["t.toml:11:9", "burst = 0", "1..=1048576 bytes"],
        ),
        (
            format!(
                "{link}[scheduler]\nalgorithm = \"drr\"\n{class}rate = \"10mbit\"\nburst = -5\n"
            ),
            &["burst = -5 is out of range", "1..=1048576 bytes"],
        ),
        (
            format!(
                "{link}[scheduler]\nalgorithm = \"drr\"\n{class}rate = \"10mbit\"\nburst = \"2m\"\n"
            ),
            &["burst = \"2m\" (2097152 bytes)", "1..=1048576 bytes"],
        ),
        (
            format!(
                "{link}[scheduler]\nalgorithm = \"drr\"\n{class}rate = \"10mbit\"\nceil = \"20mbit\"\ncburst = 1048577\n"
            ),
            &["cburst = 1048577", "1..=1048576"],
        ),
        (
            format!(
                "{link}[scheduler]\nalgorithm = \"drr\"\n{class}rate = \"10mbit\"\nburst = \"15kbit\"\n"
            ),
            &["burst = \"15kbit\"", "is a rate, not a size", "\"15k\""],
        ),
        (
            format!(
                "{link}[scheduler]\nalgorithm = \"drr\"\n{class}rate = \"10mbit\"\nburst = \"10ms\"\n"
            ),
            &["is a time, not a size"],
        ),
        (
            format!(
                "{link}[scheduler]\nalgorithm = \"drr\"\n{class}rate = \"10mbit\"\nburst = \"15q\"\n"
            ),
            &["\"15q\" is not a size", "k, kb, kib"],
        ),
        (
            format!(
                "{link}[scheduler]\nalgorithm = \"drr\"\n{class}rate = \"10mbit\"\nburst = \"1.5k\"\n"
            ),
            &["\"1.5k\" is not a size", "whole number"],
        ),
        (
            format!(
                "{link}[scheduler]\nalgorithm = \"drr\"\n{class}rate = \"10mbit\"\nburst = \"k\"\n"
            ),
            &["\"k\" is not a size"],
        ),
        (
            format!(
                "{link}[scheduler]\nalgorithm = \"drr\"\n{class}rate = \"10mbit\"\nburst = \"99999999999999999999k\"\n"
            ),
            &["is not a size"],
        ),
        (
            format!(
                "{link}[scheduler]\nalgorithm = \"drr\"\n{class}rate = \"10mbit\"\nburst = 1.5\n"
            ),
            &[
                "`class.burst = 1.5`: the value is a fractional number",
                "allowed bytes, e.g. `burst = 15360`",
                "`burst = \"15k\"`",
            ],
        ),
        ("not toml [".to_string(), &["t.toml:1:"]),
    ];
    for (src, words) in rows {
        let err = match parse(src, "t.toml", None) {
            Ok(_) => panic!("accepted:\n{src}"),
            Err(e) => e.to_string(),
        };
        assert!(err.starts_with("t.toml:"), "no position in {err:?}");
        for w in *words {
            assert!(err.contains(w), "{err:?} lacks {w:?} for\n{src}");
        }
    }
}

#[test]
fn errors_point_at_the_line_of_the_bad_value() {
    let src = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n\n[[class]]\nname = \"a\"\ndefault = true\nweight = 0\n";
    let e = parse(src, "t.toml", None).expect_err("weight 0");
    assert_eq!((e.line, e.col), (9, 10), "{e}");
}

#[test]
fn the_example_configs_check() {
    for (name, src) in [
        (
            "three-classes",
            include_str!("../../../../examples/run/three-classes.toml"),
        ),
        (
            "htb-classes",
            include_str!("../../../../examples/run/htb-classes.toml"),
        ),
    ] {
        let c = parse(src, name, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(parse_ok(&c.to_string()).to_string(), c.to_string());
    }
    let htb = parse_ok(include_str!("../../../../examples/run/htb-classes.toml"));
    let video = htb.class("video").expect("video");
    assert_eq!(
        (video.burst, video.ceiling_burst()),
        (Some(65536), Some(65536))
    );
}

/// `link.prio_burst`: one maximum frame on the wire by default when strict
/// priority puts classes on two levels or more, 0 otherwise; printed by
/// `check` and read back; 0 is always accepted.
#[test]
fn prio_burst_defaults_to_one_frame_for_strict_priority_classes() {
    let prio = GOOD.replace("algorithm = \"drr\"", "algorithm = \"prio\"");
    let two_levels = prio
        .replace("limit = 200", "limit = 200\nprio = 0")
        .replace("name = \"bulk\"", "name = \"bulk\"\nprio = 1");
    let c = parse_ok(&two_levels);
    assert_eq!(c.urgent_level(), Some(0));
    assert_eq!(c.link.prio_burst, 1538, "one maximum frame on the wire");
    let once = c.to_string();
    assert!(once.contains("burst = 1538\nprio_burst = 1538\n"), "{once}");
    assert_eq!(parse_ok(&once).to_string(), once);
    // Every class on level 0 (prio's default): nothing is more urgent.
    let flat = parse_ok(&prio);
    assert_eq!((flat.urgent_level(), flat.link.prio_burst), (None, 0));
    // A weighted algorithm: no strict priority.
    assert_eq!(parse_ok(GOOD).link.prio_burst, 0);
    assert!(parse_ok(GOOD).to_string().contains("prio_burst = 0\n"));
    // Written out: any size in range, and 0 turns the credit off.
    for (line, want) in [("prio_burst = 9000", 9000), ("prio_burst = 0", 0)] {
        let src = two_levels.replace("mpu = 84", &format!("mpu = 84\n{line}"));
        assert_eq!(parse_ok(&src).link.prio_burst, want, "{line}");
    }
    let drr_off = GOOD.replace("mpu = 84", "mpu = 84\nprio_burst = 0");
    assert_eq!(parse_ok(&drr_off).link.prio_burst, 0);
    // Class rates take the credit away (a shaped class may be held back).
    let rated = two_levels.replace("name = \"web\"", "name = \"web\"\nceil = \"10mbit\"");
    assert_eq!(parse_ok(&rated).urgent_level(), None);
}
