//! Bad scenario files: line, column, field, value and allowed range.
#![allow(clippy::unwrap_used)]

fn err(src: &str) -> String {
    pktsched_sim::scenario::parse(src, "s.toml", None)
        .unwrap_err()
        .to_string()
}

const HEAD: &str = "link = \"1gbit\"\nalgorithm = \"qfq\"\nduration = \"1ms\"\n";

#[test]
fn weight_out_of_range_names_line_col_value_and_range() {
    let e = err(&format!("{HEAD}[[flows]]\nweight = 0\n"));
    assert_eq!(
        e,
        "s.toml:5:10: flows[0].weight = 0 is out of range: allowed 1..=65536"
    );
    let e = err(&format!("{HEAD}[[flows]]\nweight = 100000\n"));
    assert!(
        e.starts_with("s.toml:5:10: flows[0].weight = 100000"),
        "{e}"
    );
}

#[test]
fn algorithm_limits_are_reported_at_the_flow() {
    // QFQ: weight sum at most 2^20.
    let e = err(&format!("{HEAD}[[flows]]\ncount = 20\nweight = 65536\n"));
    assert!(e.starts_with("s.toml:"), "{e}");
    assert!(e.contains("sum of weights") && e.contains("1048576"), "{e}");
    // Packet too large for the fluid reference.
    let e = err(&format!("{HEAD}[[flows]]\nsize = 70000\n"));
    assert_eq!(
        e,
        "s.toml:5:8: flows[0].size = 70000 is out of range: allowed 1..=65536"
    );
}

#[test]
fn syntax_and_type_errors_have_positions() {
    let e = err("link = \"1gbit\"\nalgorithm = \n");
    assert!(e.starts_with("s.toml:2:"), "{e}");
    let e = err(&format!("{HEAD}[[flows]]\nweigth = 2\n"));
    assert!(e.starts_with("s.toml:5:1:") && e.contains("weigth"), "{e}");
    let e = err(&format!("{HEAD}[[flows]]\nsize = {{ mix = 3 }}\n"));
    // At the value that has the wrong type, named with its path.
    assert!(
        e.starts_with("s.toml:5:16: `flows[0].size.mix`: the value is a whole number")
            && e.contains("mix = [[64, 7]"),
        "{e}"
    );
    let e = err(&format!(
        "{HEAD}[[flows]]\nsource = {{ type = \"warp\" }}\n"
    ));
    assert!(e.starts_with("s.toml:5:") && e.contains("warp"), "{e}");
}

#[test]
fn units_and_values() {
    let e = err("link = \"1gbps\"\nalgorithm = \"qfq\"\nduration = \"1ms\"\n[[flows]]\n");
    assert!(
        e.starts_with("s.toml:1:8: link:") && e.contains("ambiguous"),
        "{e}"
    );
    let e = err("link = \"1gbit\"\nalgorithm = \"wfq\"\nduration = \"1ms\"\n[[flows]]\n");
    assert!(
        e.starts_with("s.toml:2:13: algorithm:") && e.contains("allowed: fifo"),
        "{e}"
    );
    let e = err("link = \"1gbit\"\nalgorithm = \"qfq\"\nduration = \"10\"\n[[flows]]\n");
    assert!(
        e.starts_with("s.toml:3:12: duration:") && e.contains("no unit"),
        "{e}"
    );
    let e = err(&format!(
        "{HEAD}[[flows]]\nsource = {{ type = \"cbr\", rate = \"0bit\" }}\n"
    ));
    assert!(e.starts_with("s.toml:5:10: flows[0].source.rate:"), "{e}");
    let e = err(&format!(
        "{HEAD}[[flows]]\nsize = {{ min = 1500, max = 64 }}\n"
    ));
    assert!(e.contains("min = 1500 is above max = 64"), "{e}");
    let e = err(&format!(
        "{HEAD}[[flows]]\nsource = {{ type = \"trace\" }}\n"
    ));
    assert!(e.contains("needs a top-level `trace"), "{e}");
    let e = err(HEAD);
    assert!(e.contains("`flows` is missing; allowed `[[flows]]`"), "{e}");
}

#[test]
fn pspat_durations_are_checked() {
    let c = pktsched_sim::scenario::parse(
        &format!("{HEAD}[pspat]\narbiter = \"1us\"\ndispatcher = \"2us\"\n[[flows]]\n"),
        "s.toml",
        None,
    )
    .unwrap();
    assert_eq!(
        c.pspat.map(|p| (p.arbiter_ps, p.dispatcher_ps)),
        Some((1_000_000, 2_000_000))
    );
    let e = err(&format!(
        "{HEAD}[pspat]\narbiter = \"0us\"\ndispatcher = \"2us\"\n[[flows]]\n"
    ));
    assert!(e.starts_with("s.toml:5:11: pspat.arbiter = 0"), "{e}");
}

#[test]
fn scenarios_that_could_overflow_the_clock_are_refused() {
    // 1 bit/s link: draining 2000 packets of 1500 bytes takes ~277 days.
    let src = "link = \"1bit\"\nalgorithm = \"qfq\"\nduration = \"8640000s\"\n[[flows]]\nsize = 1500\nlimit = 2000\nsource = { type = \"cbr\", rate = \"1kbit\" }\n";
    let e = err(src);
    assert!(
        e.starts_with("s.toml:3:12:") && e.contains("virtual clock"),
        "{e}"
    );
    // The same flows on a fast link are fine.
    let ok = src
        .replace("\"1bit\"", "\"1gbit\"")
        .replace("8640000s", "1s");
    assert!(pktsched_sim::scenario::parse(&ok, "s.toml", None).is_ok());
}

#[test]
fn drr_quanta_out_of_range_name_the_real_value() {
    let src = "link = \"1gbit\"\nalgorithm = \"drr\"\nduration = \"1ms\"\n[[flows]]\nweight = 1\nsize = 65536\n[[flows]]\nweight = 1048576\nsize = 65536\n";
    let e = err(src);
    assert!(
        e.contains("quantum (largest packet × weight / smallest weight) = 68719476736"),
        "{e}"
    );
    assert!(e.contains("allowed 1..=1073741824"), "{e}");
}

#[test]
fn policy_mistakes_are_named() {
    let head = "link = \"1gbit\"\nduration = \"1ms\"\n";
    // A policy file without algorithm = "policy", and the reverse.
    let e = err(&format!(
        "{head}algorithm = \"qfq\"\npolicy = \"x.toml\"\n[[flows]]\n"
    ));
    assert!(
        e.starts_with("s.toml:4:10:") && e.contains("only used with"),
        "{e}"
    );
    let e = err(&format!("{head}algorithm = \"policy\"\n[[flows]]\n"));
    assert!(
        e.starts_with("s.toml:3:13:") && e.contains("needs a top-level `policy"),
        "{e}"
    );
    // Unknown algorithm names say that `policy` exists.
    let e = err(&format!("{head}algorithm = \"htb\"\n[[flows]]\n"));
    assert!(e.contains("policy"), "{e}");
    // A node or prio without a policy.
    let e = err(&format!(
        "{head}algorithm = \"qfq\"\n[[flows]]\nnode = \"gold\"\n"
    ));
    assert!(
        e.starts_with("s.toml:5:8:") && e.contains("flows[0].node"),
        "{e}"
    );
    let e = err(&format!("{head}algorithm = \"qfq\"\n[[flows]]\nprio = 1\n"));
    assert!(
        e.starts_with("s.toml:5:8:") && e.contains("flows[0].prio"),
        "{e}"
    );
    // A missing policy file.
    let e = err(&format!(
        "{head}algorithm = \"policy\"\npolicy = \"/nonexistent/p.toml\"\n[[flows]]\n"
    ));
    assert!(
        e.starts_with("s.toml:4:10:") && e.contains("cannot read"),
        "{e}"
    );
}

#[test]
fn policy_nodes_and_bad_policy_files_are_named() {
    let dir = std::env::temp_dir().join(format!("pktsched-bad-policy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _cleanup = RemoveOnDrop(dir.clone());
    std::fs::write(
        dir.join("p.toml"),
        "[[node]]\nname = \"root\"\nkind = \"wfq\"\n[[node]]\nname = \"a\"\nparent = \"root\"\nkind = \"prio\"\nlevels = 2\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("bad.dot"),
        "digraph {\n r [kind=wfq]\n r -> x\n}\n",
    )
    .unwrap();
    let parse = |src: &str| {
        pktsched_sim::scenario::parse(src, "s.toml", Some(&dir))
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let head = "link = \"1gbit\"\nduration = \"1ms\"\nalgorithm = \"policy\"\n";
    assert_eq!(
        parse(&format!(
            "{head}policy = \"p.toml\"\n[[flows]]\nnode = \"a\"\nprio = 1\n"
        )),
        Ok(())
    );
    let e = parse(&format!(
        "{head}policy = \"p.toml\"\n[[flows]]\nnode = \"b\"\n"
    ))
    .unwrap_err();
    assert!(
        e.starts_with("s.toml:6:8:") && e.contains("\"b\" is not a node") && e.contains("root, a"),
        "{e}"
    );
    // prio beyond the node's levels: refused by the policy itself.
    let e = parse(&format!(
        "{head}policy = \"p.toml\"\n[[flows]]\nnode = \"a\"\nprio = 2\n"
    ))
    .unwrap_err();
    assert!(e.contains("flow 0") && e.contains("prio"), "{e}");
    // A bad DOT policy: the scenario position, then the DOT position.
    let e = parse(&format!("{head}policy = \"bad.dot\"\n[[flows]]\n")).unwrap_err();
    assert!(
        e.starts_with("s.toml:4:10:") && e.contains("node `x`") && e.contains("line 3"),
        "{e}"
    );
    // PSPAT needs a work-conserving algorithm.
    let e = parse(&format!(
        "{head}policy = \"p.toml\"\n[pspat]\narbiter = \"1us\"\ndispatcher = \"1us\"\n[[flows]]\n"
    ))
    .unwrap_err();
    assert!(e.contains("work-conserving"), "{e}");
}

#[test]
fn max_delay_is_a_duration() {
    let c = pktsched_sim::scenario::parse(
        &format!("{HEAD}[[flows]]\nmax_delay = \"250us\"\n"),
        "s.toml",
        None,
    )
    .unwrap();
    assert_eq!(c.groups[0].max_delay_ps, Some(250_000_000));
    let e = err(&format!("{HEAD}[[flows]]\nmax_delay = \"soon\"\n"));
    assert!(e.starts_with("s.toml:5:13: flows[0].max_delay: "), "{e}");
    let e = err(&format!("{HEAD}[[flows]]\nmax_delay = 5\n"));
    assert!(e.starts_with("s.toml:5:13: "), "{e}");
}

#[test]
fn duplicate_group_names_are_refused() {
    let e = err(&format!(
        "{HEAD}[[flows]]\nname = \"a\"\n[[flows]]\nname = \"a\"\n"
    ));
    assert!(
        e.starts_with("s.toml:7:8:")
            && e.contains("flows[1].name = \"a\"")
            && e.contains("flows[0]"),
        "{e}"
    );
    // An unnamed group is g<index>: naming another group so clashes too.
    let e = err(&format!("{HEAD}[[flows]]\n[[flows]]\nname = \"g0\"\n"));
    assert!(e.contains("must be unique"), "{e}");
}

#[test]
fn rates_beyond_picosecond_resolution_are_refused() {
    let e = err("link = \"2tbit\"\nalgorithm = \"qfq\"\nduration = \"1ms\"\n[[flows]]\n");
    assert!(
        e.starts_with("s.toml:1:8:") && e.contains("allowed 1bit..=1tbit"),
        "{e}"
    );
    let e = err(&format!(
        "{HEAD}[[flows]]\nsource = {{ type = \"cbr\", rate = \"18446744073709551615bit\" }}\n"
    ));
    assert!(
        e.contains("flows[0].source.rate") && e.contains("allowed 1bit..=1tbit"),
        "{e}"
    );
}

#[test]
fn endless_trace_files_are_refused_as_devices() {
    let e = err(&format!(
        "{HEAD}trace = \"/dev/zero\"\n[[flows]]\nsource = {{ type = \"trace\" }}\n"
    ));
    assert!(
        e.contains("trace `/dev/zero`: it is a device, not a regular file")
            && e.contains("allowed a regular file of at most"),
        "{e}"
    );
}

#[test]
fn queue_limits_out_of_range_name_the_value_and_range() {
    let e = err(&format!("{HEAD}[[flows]]\nlimit = 0\n"));
    assert_eq!(
        e,
        "s.toml:5:9: flows[0].limit = 0 is out of range: allowed 1..=16777216"
    );
    let e = err(&format!("{HEAD}[[flows]]\n[[flows]]\nlimit = 16777217\n"));
    assert_eq!(
        e,
        "s.toml:6:9: flows[1].limit = 16777217 is out of range: allowed 1..=16777216"
    );
}

#[test]
fn onoff_periods_are_positive_durations() {
    let onoff = |on: &str, off: &str, fixed: &str| {
        err(&format!(
            "{HEAD}[[flows]]\nsource = {{ type = \"onoff\", rate = \"1mbit\", on = {on}, off = {off}{fixed} }}\n"
        ))
    };
    let e = onoff("\"0us\"", "\"1ms\"", "");
    assert_eq!(
        e,
        "s.toml:5:10: flows[0].source.on = 0us is out of range: must be > 0"
    );
    let e = onoff("\"1ms\"", "\"0s\"", "");
    assert_eq!(
        e,
        "s.toml:5:10: flows[0].source.off = 0s is out of range: must be > 0"
    );
    let e = onoff("\"soon\"", "\"1ms\"", "");
    assert!(
        e.starts_with("s.toml:5:10: flows[0].source.on: ") && e.contains("soon"),
        "{e}"
    );
    let e = onoff("\"1ms\"", "\"-2ms\"", "");
    assert!(
        e.starts_with("s.toml:5:10: flows[0].source.off: ") && e.contains("negative"),
        "{e}"
    );
    // A number where a duration string belongs, and a string for `fixed`:
    // the field and its value, and the forms of a source.
    let forms = "allowed `{ type = \"greedy\" }`";
    let e = onoff("5", "\"1ms\"", "");
    assert!(
        e.starts_with("s.toml:5:10: `flows[0].source = {")
            && e.contains(": a field in it is a whole number where a string is wanted: `on = 5`; ")
            && e.contains(forms),
        "{e}"
    );
    let e = onoff("\"1ms\"", "\"1ms\"", ", fixed = \"yes\"");
    assert!(
        e.starts_with("s.toml:5:10: `flows[0].source`: ")
            && e.contains(
                ": a field in it is a string where a boolean is wanted: `fixed = \"yes\"`; "
            )
            && e.contains(forms)
            && e.contains("(optionally `fixed = true`)"),
        "{e}"
    );
    let ok = format!(
        "{HEAD}[[flows]]\nsource = {{ type = \"onoff\", rate = \"1mbit\", on = \"1ms\", off = \"2ms\", fixed = true }}\n"
    );
    let cfg = pktsched_sim::scenario::parse(&ok, "s.toml", None).unwrap();
    assert!(
        matches!(
            cfg.flows[0].source,
            pktsched_sim::SourceSpec::OnOff {
                on_ps: 1_000_000_000,
                off_ps: 2_000_000_000,
                exponential: false,
                ..
            }
        ),
        "{:?}",
        cfg.flows[0].source
    );
}

#[test]
fn group_names_are_one_to_64_bytes_without_blanks_or_control_characters() {
    let named = |name: &str| err(&format!("{HEAD}[[flows]]\nname = {name}\n"));
    let allowed = "allowed 1 to 64 bytes without whitespace, control characters, `\"` or `\\`";
    for (toml_value, shown) in [
        ("\"\"", "\"\" (0 bytes)"),
        ("\"a b\"", "\"a b\" (3 bytes)"),
        ("\"a\\nb\"", "\"a\\nb\" (3 bytes)"),
        ("\"\\u001b[31mred\"", "\"\\u{1b}[31mred\" (8 bytes)"),
        ("\"tab\\there\"", "\"tab\\there\" (8 bytes)"),
        ("'say\"hi'", "\"say\\\"hi\" (6 bytes)"),
    ] {
        let e = named(toml_value);
        assert_eq!(e, format!("s.toml:5:8: flows[0].name = {shown}: {allowed}"));
    }
    // Too long: the value is cut, its length said.
    let long = "x".repeat(65);
    let e = named(&format!("\"{long}\""));
    assert_eq!(
        e,
        format!(
            "s.toml:5:8: flows[0].name = \"{}\"… (65 bytes): {allowed}",
            "x".repeat(64)
        )
    );
    // The scenario's own name (the table's first line) too.
    let e = err(&format!("name = \"x\\u0007y\"\n{HEAD}[[flows]]\n"));
    assert_eq!(
        e,
        format!("s.toml:1:8: name = \"x\\u{{7}}y\" (3 bytes): {allowed}")
    );
    // 64 bytes, UTF-8 and punctuation are fine.
    for ok in ["x".repeat(64), "gold.web".into(), "débit-1_/:".into()] {
        let src = format!("{HEAD}[[flows]]\nname = \"{ok}\"\n");
        let cfg = pktsched_sim::scenario::parse(&src, "s.toml", None).unwrap();
        assert_eq!(cfg.groups[0].name, ok);
    }
}

#[test]
fn a_plot_that_cannot_be_written_names_its_file() {
    let cfg =
        pktsched_sim::scenario::parse(&format!("{HEAD}[[flows]]\ncount = 2\n"), "s.toml", None)
            .unwrap();
    let sim = pktsched_sim::session::simulate(
        &cfg,
        pktsched_sim::engine::Options::for_cfg(&cfg),
        None,
        None,
    )
    .unwrap();
    let prefix = std::path::Path::new("/nonexistent-pktsched-dir/p");
    let e = pktsched_sim::plot::write_all(prefix, &cfg, &sim.outcome, &sim.report).unwrap_err();
    assert!(
        e.starts_with("plot `/nonexistent-pktsched-dir/p-rate.svg`: ")
            && e.contains("No such file or directory"),
        "{e}"
    );
}

/// Removes a scratch directory when dropped, also when the test fails.
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
