//! A TOML or type error from a policy file's deserializer, said in the
//! policy format's words: serde names the Rust type it wanted (`u64`, a
//! sequence) but not the field, nor the kind of value it found. The
//! message here names the field (`node.weight`, `policy.max_len`), the
//! value as written, its kind and the forms the field accepts.

/// The kind of value in serde's `invalid type: KIND, expected ...`, in
/// TOML's words.
fn found_kind(serde_kind: &str) -> &'static str {
    let table = [
        ("integer `-", "a negative whole number"),
        ("integer", "a whole number"),
        ("floating point", "a fractional number"),
        ("string", "a string"),
        ("boolean", "a boolean"),
        ("map", "a table"),
        ("sequence", "an array"),
        ("date", "a date"),
    ];
    let k = serde_kind.trim();
    table
        .iter()
        .find(|(prefix, _)| k.starts_with(prefix))
        .map_or("a value of another type", |(_, said)| said)
}

/// The forms a policy field accepts, by `section.key`; None for a name
/// that is not a field.
fn forms(field: &str) -> Option<String> {
    let key = field.rsplit('.').next().unwrap_or(field);
    let fixed = match field {
        "node.name" | "node.parent" => "a node name in quotes, e.g. `name = \"root\"`",
        "node.kind" => {
            "one of \"rr\", \"prio\", \"wfq\" (\"stfq\"), \"pfabric\", \"edf\", \"lstf\", \
             \"hclock\""
        }
        "node.queue" => "one of \"cffs\", \"hffs\", \"heap\", \"small\", \"auto\"",
        "node.link_rate"
        | "node.rate"
        | "node.reservation"
        | "node.flow_rate"
        | "node.flow_reservation" => "a rate with its unit in quotes, e.g. \"10mbit\"",
        "policy.attach" => "\"round_robin\" or a node's name in quotes",
        "node.buckets"
        | "node.weight"
        | "node.prio"
        | "node.levels"
        | "node.scale"
        | "node.unit"
        | "node.flow_deadline_ns"
        | "node.flow_slack_ns"
        | "policy.shaper_unit_ns"
        | "policy.shaper_buckets"
        | "policy.max_len" => {
            return Some(format!("a whole number from 0, e.g. `{key} = 1`"));
        }
        "node" => "`[[node]]` before each node",
        "policy" => "a table: `[policy]` with its settings",
        _ => return None,
    };
    Some(fixed.to_string())
}

/// The section (`[policy]` → `policy`, `[[node]]` → `node`) of the text
/// before byte `end`.
fn section_before(src: &str, end: usize) -> Option<&str> {
    src[..end].lines().rev().find_map(|l| {
        let l = l.trim().strip_prefix('[')?;
        let l = l.strip_prefix('[').unwrap_or(l);
        l.split(']').next().map(str::trim)
    })
}

/// `section.key`, or the key alone at the top level.
fn dotted(section: Option<&str>, key: &str) -> String {
    section.map_or(key.to_string(), |s| format!("{s}.{key}"))
}

/// `; allowed FORMS` for the field, or nothing.
fn allowed(field: &str) -> String {
    forms(field).map_or(String::new(), |f| format!("; allowed {f}"))
}

/// The message for a header line: `[node]` where `[[node]]` is meant, a
/// missing field of the table it opens, else serde's words.
fn header_message(src: &str, line_end: usize, line: &str, msg: &str) -> String {
    let name = line.trim().trim_start_matches('[').split(']').next();
    let name = name.unwrap_or("").trim();
    let msg = msg.trim();
    if let Some(f) = msg
        .strip_prefix("missing field `")
        .and_then(|m| m.strip_suffix('`'))
    {
        let field = dotted(section_before(src, line_end), f);
        return format!("`{field}` is missing{}", allowed(&field));
    }
    if !line.trim().starts_with("[[") && msg.starts_with("invalid type: map, expected a sequence") {
        return format!(
            "`[{name}]` is a single table, but {name} is a list: allowed `[[{name}]]` before \
             each node"
        );
    }
    msg.to_string()
}

/// The message for a deserializer error at byte `pos` of `src` whose
/// serde text is `msg`.
pub(crate) fn describe(src: &str, pos: usize, msg: &str) -> String {
    let mut pos = pos.min(src.len());
    while !src.is_char_boundary(pos) {
        pos -= 1;
    }
    let line_start = src[..pos].rfind('\n').map_or(0, |i| i + 1);
    let line = src[line_start..].lines().next().unwrap_or("");
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim().trim_matches('"'))
        .filter(|k| !k.is_empty() && !k.starts_with('['));
    let Some(key) = key else {
        return header_message(src, line_start + line.len(), line, msg);
    };
    let field = dotted(section_before(src, line_start), key);
    let value = line.split_once('=').map_or("", |(_, v)| v.trim());
    let head = if value.len() <= 60 {
        format!("`{field} = {value}`")
    } else {
        format!("`{field}`")
    };
    let m = msg.trim();
    let kind = m
        .strip_prefix("invalid type: ")
        .or_else(|| m.strip_prefix("invalid value: "))
        .and_then(|r| r.split_once(", expected "));
    match kind {
        Some((kind, _)) => format!(
            "{head}: the value is {}{}",
            found_kind(kind),
            allowed(&field)
        ),
        None => format!("{head}: {m}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_type_error_names_field_value_kind_and_forms() {
        let src = "[[node]]\nname = \"r\"\nkind = \"wfq\"\nweight = \"x\"\n";
        let m = describe(
            src,
            src.find("\"x\"").expect("value"),
            "invalid type: string \"x\", expected u64",
        );
        assert_eq!(
            m,
            "`node.weight = \"x\"`: the value is a string; allowed a whole number from 0, e.g. \
             `weight = 1`"
        );
        let src = "[policy]\nmax_len = -1\n";
        let m = describe(src, 19, "invalid value: integer `-1`, expected u64");
        assert!(
            m.starts_with("`policy.max_len = -1`: the value is a negative whole number"),
            "{m}"
        );
        let src = "[[node]]\nkind = 5\n";
        let m = describe(src, 16, "invalid type: integer `5`, expected a string");
        assert!(m.contains("a whole number; allowed one of \"rr\""), "{m}");
        // An unknown field: serde's list, no forms.
        let src = "[[node]]\nwieght = 1\n";
        let m = describe(src, 9, "unknown field `wieght`, expected one of `name`");
        assert_eq!(
            m,
            "`node.wieght = 1`: unknown field `wieght`, expected one of `name`"
        );
    }

    #[test]
    fn headers_say_which_brackets_and_what_is_missing() {
        let src = "[node]\nname = \"r\"\n";
        let m = describe(src, 0, "invalid type: map, expected a sequence");
        assert!(m.contains("allowed `[[node]]`"), "{m}");
        let src = "[[node]]\nname = \"r\"\n";
        let m = describe(src, 0, "missing field `kind`");
        assert!(
            m.starts_with("`node.kind` is missing; allowed one of \"rr\""),
            "{m}"
        );
        assert_eq!(describe("[x\n", 0, "expected `]`"), "expected `]`");
    }

    /// Non-ASCII text: no slicing inside a character, at any position.
    #[test]
    fn non_ascii_text_never_splits_a_character() {
        let src = "[[node]]\nname = \"é=1\" ü=2\n";
        for pos in 0..=src.len() + 2 {
            let m = describe(src, pos, "invalid type: integer `1`, expected a string");
            assert!(
                m.contains("allowed") || m == "invalid type: integer `1`, expected a string",
                "{pos}: {m}"
            );
        }
    }
}
