//! A checker of the Prometheus text exposition format as node_exporter
//! writes it (families, types, label syntax and escapes, histogram
//! buckets), used by the run's and the router's tests only.

use std::collections::{HashMap, HashSet};

/// The family a sample named `sample` belongs to, given the declared
/// `types` (a histogram's `_bucket`/`_sum`/`_count`, a summary's
/// `_sum`/`_count`).
fn family_of<'a>(sample: &'a str, types: &HashMap<String, String>) -> &'a str {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = sample.strip_suffix(suffix)
            && let Some(t) = types.get(base)
            && (t == "histogram" || (t == "summary" && suffix != "_bucket"))
        {
            return base;
        }
    }
    sample
}

/// What is wrong with a sample's `{…}` label set (`labels` without the
/// braces), if anything: each label `name="value"` with a name of
/// `[a-zA-Z_][a-zA-Z0-9_]*`, a value whose only escapes are `\\`, `\"`
/// and `\n`, separated by commas.
fn label_problem(labels: &str) -> Option<String> {
    let mut rest = labels;
    while !rest.is_empty() {
        let Some((name, after)) = rest.split_once("=\"") else {
            return Some(format!("{rest:?} is not name=\"value\""));
        };
        let mut chars = name.chars();
        let name_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !name_ok {
            return Some(format!("label name {name:?}"));
        }
        let mut end = None;
        let mut escaped = false;
        for (i, c) in after.char_indices() {
            match (escaped, c) {
                (true, '\\' | '"' | 'n') => escaped = false,
                (true, other) => return Some(format!("escape \\{other} in label {name}")),
                (false, '\\') => escaped = true,
                (false, '"') => {
                    end = Some(i);
                    break;
                }
                (false, '\n') => return Some(format!("line feed in label {name}")),
                _ => {}
            }
        }
        let Some(end) = end else {
            return Some(format!("label {name}'s value not closed"));
        };
        rest = &after[end + 1..];
        if let Some(next) = rest.strip_prefix(',') {
            rest = next;
        } else if !rest.is_empty() {
            return Some(format!("{rest:?} after label {name}"));
        }
    }
    None
}

/// What is wrong with `text`: a family without `# HELP` or `# TYPE`
/// before its samples, a family's samples not together, a counter not
/// named `…_total`, a name in other than base units (`_ns`, `_us`,
/// `_ms`, `_bps`), a series twice, a value that is not a number, labels
/// that do not parse (see [`label_problem`]).
pub(crate) fn problems(text: &str) -> Vec<String> {
    let mut bad = Vec::new();
    let (mut helped, mut types) = (HashSet::new(), HashMap::new());
    let (mut series, mut done) = (HashSet::new(), HashSet::new());
    let mut current: Option<String> = None;
    for line in text.lines() {
        let words: Vec<&str> = line.splitn(4, ' ').collect();
        match words.as_slice() {
            ["#", "HELP", name, _] => {
                helped.insert(name.to_string());
            }
            ["#", "TYPE", name, t] => {
                if types.insert(name.to_string(), t.to_string()).is_some() {
                    bad.push(format!("{name}: TYPE twice"));
                }
                if *t == "counter" && !name.ends_with("_total") {
                    bad.push(format!("{name}: a counter not named _total"));
                }
                for unit in ["_ns", "_us", "_ms", "_bps"] {
                    if name.contains(&format!("{unit}_")) || name.ends_with(unit) {
                        bad.push(format!("{name}: not in base units ({unit})"));
                    }
                }
            }
            _ if line.starts_with('#') || line.is_empty() => {}
            _ => {
                let Some((id, value)) = line.rsplit_once(' ') else {
                    bad.push(format!("{line:?}: no value"));
                    continue;
                };
                if value.parse::<f64>().is_err() {
                    bad.push(format!("{line:?}: value not a number"));
                }
                if !series.insert(id.to_string()) {
                    bad.push(format!("{id}: twice"));
                }
                let name = id.split('{').next().unwrap_or(id);
                if let Some(labels) = id.strip_prefix(name).filter(|l| !l.is_empty()) {
                    let inner = labels.strip_prefix('{').and_then(|l| l.strip_suffix('}'));
                    if let Some(p) = inner.map_or(Some("no closing brace".into()), label_problem) {
                        bad.push(format!("{line:?}: labels: {p}"));
                    }
                }
                let family = family_of(name, &types).to_string();
                if !helped.contains(&family) || !types.contains_key(&family) {
                    bad.push(format!("{family}: a sample before its HELP and TYPE"));
                }
                if current.as_deref() != Some(&family) {
                    if let Some(previous) = current.replace(family.clone()) {
                        done.insert(previous);
                    }
                    if done.contains(&family) {
                        bad.push(format!("{family}: its samples are not together"));
                    }
                }
            }
        }
    }
    bad
}

/// The checker finds what it is meant to find.
#[test]
fn the_checker_finds_each_fault() {
    let good = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\"} 1\n\
                # HELP h_seconds H.\n# TYPE h_seconds histogram\n\
                h_seconds_bucket{le=\"+Inf\"} 1\nh_seconds_sum 0.5\nh_seconds_count 1\n\
                # HELP b B.\n# TYPE b gauge\nb{d=\"q\\\"\\\\\\n\",e=\"\"} 1\n";
    assert_eq!(problems(good), Vec::<String>::new());
    for (text, fault) in [
        ("# TYPE a_total counter\na_total 1\n", "before its HELP"),
        ("# HELP a_total A.\na_total 1\n", "before its HELP"),
        ("# HELP a A.\n# TYPE a counter\na 1\n", "not named _total"),
        ("# HELP l_ns L.\n# TYPE l_ns gauge\nl_ns 1\n", "base units"),
        (
            "# HELP a_total A.\n# TYPE a_total counter\na_total 1\na_total 2\n",
            "twice",
        ),
        (
            "# HELP a_total A.\n# TYPE a_total counter\n# HELP b B.\n# TYPE b gauge\n\
             a_total{x=\"1\"} 1\nb 1\na_total{x=\"2\"} 1\n",
            "not together",
        ),
        ("# HELP b B.\n# TYPE b gauge\nb one\n", "not a number"),
        ("# HELP b B.\n# TYPE b gauge\nb{d=\"a\"b\"} 1\n", "labels"),
        ("# HELP b B.\n# TYPE b gauge\nb{d=\"a\\x\"} 1\n", "labels"),
        ("# HELP b B.\n# TYPE b gauge\nb{1d=\"a\"} 1\n", "labels"),
        ("# HELP b B.\n# TYPE b gauge\nb{d=\"a} 1\n", "labels"),
        ("# HELP b B.\n# TYPE b gauge\nb{d=\"a\" 1\n", "labels"),
        ("# HELP b B.\n# TYPE b gauge\nb{d} 1\n", "labels"),
    ] {
        let found = problems(text);
        assert!(
            found.iter().any(|p| p.contains(fault)),
            "{fault}: {found:?}"
        );
    }
}
