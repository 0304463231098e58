//! A TOML or type error from the scenario's deserializer, said in the
//! scenario's words: serde names the Rust type it wanted (`u64`, an
//! internally tagged enum `RawSource`) but not the field, nor the kind of
//! value it found. The message here names the field (`seed`,
//! `flows[1].source`), the value as written, its kind and the forms the
//! field accepts.

use pktsched_core::toml_error::{
    allowed, bracketed_name, field_head, first_key, found_kind, header_name,
    is_single_table_for_list, key_before, line_at, missing_field_name, single_table_message,
    split_type_error, unknown_field, unknown_table_message, value_of,
};

/// The kind serde's `expected ...` wants, in TOML's words (None for a
/// scenario type, whose forms say it).
fn wanted_kind(expected: &str) -> Option<&'static str> {
    match expected.trim() {
        "a string" => Some("a string"),
        "a boolean" => Some("a boolean"),
        "i64" | "u64" | "u32" => Some("a whole number"),
        _ => None,
    }
}

const SOURCE_FORMS: &str = "`{ type = \"greedy\" }`, `{ type = \"cbr\", rate = \"10mbit\" }`, \
     `{ type = \"poisson\", rate = \"10mbit\" }`, `{ type = \"onoff\", rate = \"10mbit\", \
     on = \"1ms\", off = \"1ms\" }` (optionally `fixed = true`) or `{ type = \"trace\" }`";

const SIZE_FORMS: &str = "a length in bytes (`size = 1500`), `{ min = 64, max = 1500 }` or \
     `{ mix = [[64, 7], [1500, 3]] }` (lengths 1..=65536, weights ≥ 1)";

/// The forms a scenario field accepts, by its name without flow index
/// (`flows.source.rate`); None for a name that is not a field.
fn forms(field: &str) -> Option<String> {
    let fixed = match field {
        "link" | "flows.source.rate" => "a rate with its unit in quotes, e.g. \"10gbit\"",
        "algorithm" => {
            let names: Vec<&str> = pktsched_core::Algorithm::ALL
                .iter()
                .map(|a| a.name())
                .collect();
            return Some(format!(
                "one of {} in quotes, or \"policy\" with `policy = \"file.toml\"`",
                names.join(", ")
            ));
        }
        "duration" | "pspat.arbiter" | "pspat.dispatcher" | "flows.max_delay"
        | "flows.source.on" | "flows.source.off" => {
            "a duration with its unit in quotes, e.g. \"20ms\" (ns, us, ms, s)"
        }
        "seed" => "a whole number from 0, e.g. `seed = 1`",
        "drain" => "true or false, e.g. `drain = true`",
        "flows.source.fixed" => "true or false, e.g. `fixed = true`",
        "name" | "flows.name" => "a name in quotes, e.g. `name = \"victim\"`",
        "flows.node" => "a policy node's name in quotes, e.g. `node = \"gold.web\"`",
        "trace" => "the trace file's path in quotes, e.g. `trace = \"trace.csv\"`",
        "policy" => "the policy file's path in quotes, e.g. `policy = \"tree.toml\"`",
        "pspat" => "a table: `[pspat]` with `arbiter = \"1us\"` and `dispatcher = \"1us\"`",
        "flows" => "`[[flows]]` before each flow group",
        "flows.count" | "flows.weight" | "flows.limit" | "flows.prio" => {
            return Some(format!(
                "a whole number, e.g. `{} = 1`",
                field.trim_start_matches("flows.")
            ));
        }
        "flows.size" | "flows.size.min" | "flows.size.max" | "flows.size.mix" => SIZE_FORMS,
        "flows.source" | "flows.source.type" => SOURCE_FORMS,
        _ => return None,
    };
    Some(fixed.to_string())
}

/// serde's `missing field `X`` for a table (the whole file, a `[pspat]`
/// or `[[flows]]` entry): the field that is missing and its forms.
fn missing_field(src: &str, line_start: usize, line: &str, msg: &str) -> Option<String> {
    let name = missing_field_name(msg)?;
    let value = value_of(line);
    if value.starts_with('{') {
        return None;
    }
    let section = if line.trim_start().starts_with('[') {
        section_at(src, line_start + line.len())
    } else {
        section_at(src, line_start)
    };
    let (shown, generic) = match section {
        Some((s, Some(i))) => (format!("{s}[{i}].{name}"), format!("{s}.{name}")),
        Some((s, None)) => (format!("{s}.{name}"), format!("{s}.{name}")),
        None => (name.to_string(), name.to_string()),
    };
    Some(format!("`{shown}` is missing{}", allowed(forms(&generic))))
}

/// The section the line starting at byte `line_start` is in: `pspat`, or
/// `flows` with its index (the number of `[[flows]]` headers before, less
/// one); None at the top level.
fn section_at(src: &str, line_start: usize) -> Option<(String, Option<usize>)> {
    let before = &src[..line_start];
    let name = before.lines().rev().find_map(header_name)?.to_string();
    let index = (name == "flows").then(|| {
        let n = before
            .lines()
            .filter(|l| l.trim().starts_with("[[") && header_name(l) == Some("flows"))
            .count();
        n.saturating_sub(1)
    });
    Some((name, index))
}

/// serde's words without the scenario's Rust type names.
fn plain(msg: &str) -> String {
    let msg = msg.trim();
    if msg.contains("did not match any variant") {
        return "the value has none of the forms".to_string();
    }
    match msg.split_once(", expected ") {
        Some((head, want)) if want.contains("Raw") || want.starts_with("struct") => {
            head.to_string()
        }
        _ => msg.to_string(),
    }
}

/// The message for a header line (`[flows]` where `[[flows]]` is meant).
fn header_message(line: &str, msg: &str) -> String {
    let name = bracketed_name(line);
    if is_single_table_for_list(line, msg) {
        return single_table_message(name, "before each flow group");
    }
    if line.trim().starts_with("[[") && msg.contains("expected struct") {
        return format!(
            "`[[{name}]]` is a list of tables, but {name} is one table: allowed `[{name}]`"
        );
    }
    unknown_table_message(line, msg).unwrap_or_else(|| plain(msg))
}

/// The `key = value` of the inline table `table` (`{ a = 1, b = "x" }`,
/// as written) whose value is the one serde's `kind` quotes (`string
/// "x"`, ``integer `5` ``, `boolean true`), if exactly one has it: an
/// internally tagged table's type error names neither the field nor the
/// value.
fn field_with_value<'a>(table: &'a str, kind: &str) -> Option<&'a str> {
    let (_, found) = kind.trim().split_once(' ')?;
    let found = found.trim_matches('`');
    let inner = table.trim().strip_prefix('{')?.strip_suffix('}')?;
    let mut matching = split_outside_quotes(inner)
        .filter(|part| part.split_once('=').is_some_and(|(_, v)| v.trim() == found));
    let first = matching.next()?.trim();
    matching.next().is_none().then_some(first)
}

/// `text` split at the commas that are not inside a quoted string.
fn split_outside_quotes(text: &str) -> impl Iterator<Item = &str> {
    let mut parts = Vec::new();
    let (mut start, mut quote, mut escaped) = (0, None, false);
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some('"'), '\\') if !escaped => {
                escaped = true;
                continue;
            }
            (Some(q), c) if c == q && !escaped => quote = None,
            (None, '"' | '\'') => quote = Some(c),
            (None, ',') => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        escaped = false;
    }
    parts.push(&text[start..]);
    parts.into_iter()
}

/// The message for a deserializer error at byte `pos` of `src` whose
/// serde text is `msg`.
pub(crate) fn describe(src: &str, pos: usize, msg: &str) -> String {
    let (pos, line_start, line) = line_at(src, pos);
    if let Some(m) = missing_field(src, line_start, line, msg) {
        return m;
    }
    let Some(first) = first_key(line) else {
        return header_message(line, msg);
    };
    let section = section_at(src, line_start);
    let (mut shown, mut generic) = match &section {
        Some((name, Some(i))) => (format!("{name}[{i}].{first}"), format!("{name}.{first}")),
        Some((name, None)) => (format!("{name}.{first}"), format!("{name}.{first}")),
        None => (first.to_string(), first.to_string()),
    };
    let inner = key_before(line, pos - line_start).filter(|k| *k != first);
    if let Some(k) = inner {
        shown = format!("{shown}.{k}");
        generic = format!("{generic}.{k}");
    }
    let value = value_of(line);
    let head = match inner {
        None => field_head(&shown, value),
        Some(_) => format!("`{shown}`"),
    };
    if let Some((name, fields)) = unknown_field(msg) {
        // The field's own forms when it has some (an unknown key inside
        // `source = { ... }`), else the table's fields.
        let forms = forms(&generic).unwrap_or(fields);
        return format!("{head}: unknown field `{name}`; allowed {forms}");
    }
    let what = match split_type_error(msg.trim()) {
        Some((kind, expected)) => {
            let nested =
                inner.is_none() && value.starts_with('{') && !kind.trim_start().starts_with("map");
            match (nested, wanted_kind(expected)) {
                (true, Some(want)) => format!(
                    "a field in it is {} where {want} is wanted{}",
                    found_kind(kind),
                    field_with_value(value, kind).map_or_else(String::new, |f| format!(": `{f}`"))
                ),
                (true, None) => format!("a field in it is {}", found_kind(kind)),
                (false, _) if kind.contains("integer `-") && expected.trim() == "u64" => {
                    "the value is a negative whole number".to_string()
                }
                (false, _) => format!("the value is {}", found_kind(kind)),
            }
        }
        None => plain(msg),
    };
    format!("{head}: {what}{}", allowed(forms(&generic)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrong_field_in_an_inline_table_is_named_with_its_value() {
        let src = "[[flows]]\nsource = { type = \"cbr\", rate = 5 }\n";
        let m = describe(
            src,
            src.find('{').expect("value"),
            "invalid type: integer `5`, expected a string",
        );
        assert!(
            m.contains("a string is wanted: `rate = 5`; allowed `{ type"),
            "{m}"
        );
        let src = "[[flows]]\nsource = { type = \"onoff\", rate = \"1, x\", on = \"1ms\", off = \"1ms\", fixed = \"yes\" }\n";
        let m = describe(
            src,
            src.find('{').expect("value"),
            "invalid type: string \"yes\", expected a boolean",
        );
        assert!(m.contains("a boolean is wanted: `fixed = \"yes\"`"), "{m}");
        // Two fields with that value: neither is named.
        assert_eq!(field_with_value("{ a = 5, b = 5 }", "integer `5`"), None);
        assert_eq!(
            field_with_value("{ a = 'x,y', b = 5 }", "integer `5`"),
            Some("b = 5")
        );
    }

    #[test]
    fn a_type_error_names_field_value_kind_and_forms() {
        let src = "seed = \"x\"\nlink = \"1gbit\"\n";
        let m = describe(src, 7, "invalid type: string \"x\", expected u64");
        assert_eq!(
            m,
            "`seed = \"x\"`: the value is a string; allowed a whole number from 0, e.g. \
             `seed = 1`"
        );
        let src = "link = \"1gbit\"\n[[flows]]\n[[flows]]\nsource = 5\n";
        let m = describe(
            src,
            src.find('5').expect("value"),
            "invalid type: integer `5`, expected internally tagged enum RawSource",
        );
        assert!(
            m.starts_with("`flows[1].source = 5`: the value is a whole number; allowed `{ type")
                && !m.contains("RawSource"),
            "{m}"
        );
        let src = "[[flows]]\nsource = { type = \"cbr\", rate = 5 }\n";
        let m = describe(
            src,
            src.find('{').expect("value"),
            "invalid type: integer `5`, expected a string",
        );
        assert!(
            m.contains("a field in it is a whole number where a string is wanted"),
            "{m}"
        );
        let src = "[[flows]]\nsource = { type = \"warp\" }\n";
        let m = describe(
            src,
            src.find("\"warp").expect("value"),
            "unknown variant `warp`, expected one of `greedy`, `cbr`",
        );
        assert!(
            m.starts_with("`flows[0].source.type`: unknown variant `warp`"),
            "{m}"
        );
    }

    #[test]
    fn a_missing_field_is_named_with_its_forms() {
        let src = "algorithm = \"qfq\"\n[[flows]]\n";
        let m = describe(src, 0, "missing field `link`");
        assert!(
            m.starts_with("`link` is missing; allowed a rate with its unit"),
            "{m}"
        );
        let src = "link = \"1gbit\"\n[pspat]\narbiter = \"1us\"\n";
        let m = describe(
            src,
            src.find("[pspat]").expect("header"),
            "missing field `dispatcher`",
        );
        assert!(
            m.starts_with("`pspat.dispatcher` is missing; allowed a duration"),
            "{m}"
        );
        // Inside an inline table: the table's field and its forms.
        let src = "[[flows]]\nsource = { rate = \"1mbit\" }\n";
        let m = describe(src, src.find('{').expect("value"), "missing field `type`");
        assert!(
            m.starts_with(
                "`flows[0].source = { rate = \"1mbit\" }`: missing field `type`; allowed `{ type"
            ),
            "{m}"
        );
        // An unknown field: the fields serde lists, in the house's words.
        let src = "foo = 1\n";
        let m = describe(
            src,
            0,
            "unknown field `foo`, expected one of `name`, `link`",
        );
        assert_eq!(
            m,
            "`foo = 1`: unknown field `foo`; allowed `name` or `link`"
        );
    }

    #[test]
    fn headers_say_which_brackets() {
        let src = "link = \"1gbit\"\n[flows]\nname = \"a\"\n";
        let m = describe(
            src,
            src.find("[flows]").expect("header"),
            "invalid type: map, expected a sequence",
        );
        assert!(m.contains("allowed `[[flows]]`"), "{m}");
        let src = "[[pspat]]\narbiter = \"1us\"\n";
        let m = describe(src, 0, "invalid type: sequence, expected struct RawPspat");
        assert!(m.contains("allowed `[pspat]`") && !m.contains("Raw"), "{m}");
        // Another error on a header line: serde's words as they are.
        assert_eq!(describe("[x\n", 0, "expected `]`"), "expected `]`");
    }

    /// Non-ASCII text: no slicing inside a character, at any position.
    #[test]
    fn non_ascii_text_never_splits_a_character() {
        let src = "name = \"é=1\" ü=2\n[[flows]]\nnode = \"ñ\"\n";
        for pos in 0..=src.len() + 2 {
            let m = describe(src, pos, "invalid type: integer `1`, expected a string");
            // On a key's line the field's forms; on the header serde's words.
            assert!(
                m.contains("allowed") || m == "invalid type: integer `1`, expected a string",
                "{pos}: {m}"
            );
        }
    }
}
