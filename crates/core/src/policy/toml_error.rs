//! A TOML or type error from a policy file's deserializer, said in the
//! policy format's words: serde names the Rust type it wanted (`u64`, a
//! sequence) but not the field, nor the kind of value it found. The
//! message here names the field (`node.weight`, `policy.max_len`), the
//! value as written, its kind and the forms the field accepts.

use crate::toml_error::{
    allowed, bracketed_name, field_head, first_key, found_kind, is_single_table_for_list, line_at,
    missing_field_name, section_before, single_table_message, split_type_error,
    unknown_field_message, unknown_table_message, value_of,
};

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

/// `section.key`, or the key alone at the top level.
fn dotted(section: Option<&str>, key: &str) -> String {
    section.map_or(key.to_string(), |s| format!("{s}.{key}"))
}

/// The message for a header line: `[node]` where `[[node]]` is meant, a
/// missing field of the table it opens, else serde's words.
fn header_message(src: &str, line_end: usize, line: &str, msg: &str) -> String {
    let msg = msg.trim();
    if let Some(f) = missing_field_name(msg) {
        let field = dotted(section_before(src, line_end), f);
        return format!("`{field}` is missing{}", allowed(forms(&field)));
    }
    if is_single_table_for_list(line, msg) {
        return single_table_message(bracketed_name(line), "before each node");
    }
    unknown_table_message(line, msg).unwrap_or_else(|| msg.to_string())
}

/// The message for a deserializer error at byte `pos` of `src` whose
/// serde text is `msg`.
pub(crate) fn describe(src: &str, pos: usize, msg: &str) -> String {
    let (_, line_start, line) = line_at(src, pos);
    let Some(key) = first_key(line) else {
        return header_message(src, line_start + line.len(), line, msg);
    };
    let field = dotted(section_before(src, line_start), key);
    if let Some(m) = unknown_field_message(&field, key, value_of(line), msg) {
        return m;
    }
    let head = field_head(&field, value_of(line));
    let m = msg.trim();
    match split_type_error(m) {
        Some((kind, _)) if kind.trim().starts_with("integer `-") => format!(
            "{head}: the value is a negative whole number{}",
            allowed(forms(&field))
        ),
        Some((kind, _)) => format!(
            "{head}: the value is {}{}",
            found_kind(kind),
            allowed(forms(&field))
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
        // An unknown field: the fields serde lists, in the house's words.
        let src = "[[node]]\nwieght = 1\n";
        let m = describe(src, 9, "unknown field `wieght`, expected one of `name`");
        assert_eq!(
            m,
            "`node.wieght = 1`: unknown field `wieght`; allowed `name`"
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
