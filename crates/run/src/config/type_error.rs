//! A TOML syntax or type error from the deserializer, said in the config's
//! words: serde names the Rust type it wanted (`i64`, an untagged enum's
//! list) but neither the field nor the type of the value it found. The
//! message here names the field as a dotted path (`link.rate`,
//! `class.match.dport`), the value as written, what kind of value that is
//! (a whole number, a string, a table, ...) and the forms the field
//! accepts.

use pktsched_core::toml_error::{
    allowed, field_head, first_key, found_kind, header_name, is_single_table_for_list, key_before,
    line_at, missing_field_name, section_before, single_table_message, split_type_error,
    unknown_field_message, unknown_table_message, value_of,
};

/// The forms a string field of a run or route config takes, by its
/// dotted name (`link.backend`) or, failing that, its key.
fn string_forms(field: &str, key: &str) -> Option<String> {
    let fixed = match field {
        "link.backend" | "router.backend" => "\"auto\", \"xdp\" or \"packet\"",
        "link.engine" => "\"run-to-completion\" or \"pspat\"",
        "link.sched" => "\"other\" or \"fifo:N\" with N in 1..=99",
        "router.strategy" => "\"sq\", \"rr\", \"ll-rr\" or \"ll-wfq\"",
        "router.cost" => crate::router::cost::COST_FORMS,
        "scheduler.algorithm" | "egress.algorithm" => {
            let names: Vec<&str> = pktsched_core::Algorithm::ALL
                .iter()
                .map(|a| a.name())
                .collect();
            return Some(format!("one of {} in quotes", names.join(", ")));
        }
        "scheduler.policy" => "the policy file's path in quotes, e.g. `policy = \"tree.policy\"`",
        "control.socket" => "a path of 1 to 100 bytes, e.g. `socket = \"/run/pktsched.sock\"`",
        "control.prometheus" => "ADDRESS:PORT in quotes, e.g. `prometheus = \"127.0.0.1:9100\"`",
        "route.prefix" | "class.match.src" | "class.match.dst" => {
            "ADDRESS/LEN in quotes, e.g. \"10.0.0.0/8\""
        }
        "route.via" | "neighbour.ip" => "an IP address in quotes, e.g. \"198.18.0.1\"",
        "neighbour.mac" => "a MAC address in quotes, e.g. \"02:00:00:00:00:01\"",
        "router.ingress_address" | "router.egress_address" => {
            "an IPv4 address in quotes, e.g. \"198.18.0.254\""
        }
        "router.ingress_address6" | "router.egress_address6" => {
            "a unicast IPv6 address in quotes, e.g. \"2001:db8::1\""
        }
        _ => match key {
            "ingress" | "egress" | "dev" => "an interface name in quotes, e.g. \"eth0\"",
            "name" => "a class name in quotes, e.g. `name = \"rt\"`",
            _ => return None,
        },
    };
    Some(fixed.to_string())
}

/// The forms of a field that takes a number or a string, by its key.
fn num_or_text_forms(key: &str) -> Option<String> {
    let forms = match key {
        "sport" | "dport" => "a port or a range, e.g. `KEY = 80` or `KEY = \"1000-2000\"`",
        "dscp" => "a DSCP value or name, e.g. `dscp = 46` or `dscp = \"ef\"`",
        "proto" => "a protocol number or name, e.g. `proto = 17` or `proto = \"udp\"`",
        "burst" | "cburst" => "bytes, e.g. `KEY = 15360` or `KEY = \"15k\"`",
        _ => return None,
    };
    Some(forms.replace("KEY", key))
}

/// What a field accepts, from serde's `expected ...` (Rust type names are
/// said as TOML forms, with an example using the field's key; string and
/// number-or-string fields of the run and route configs by their own
/// forms).
fn accepted(expected: &str, field: &str, key: &str) -> String {
    let e = expected.trim();
    let whole = [
        "i8", "i16", "i32", "i64", "i128", "u8", "u16", "u32", "u64", "u128", "usize",
    ];
    if whole.contains(&e) {
        format!("a whole number, e.g. `{key} = 64`")
    } else if e == "a string" {
        string_forms(field, key)
            .unwrap_or_else(|| format!("a string in quotes, e.g. `{key} = \"...\"`"))
    } else if e == super::raw::NUM_OR_TEXT_EXPECTED {
        num_or_text_forms(key).unwrap_or_else(|| e.to_string())
    } else if e == "a boolean" {
        format!("true or false, e.g. `{key} = true`")
    } else if e.starts_with("a sequence") {
        format!("an array, e.g. `{key} = [...]`")
    } else if e.starts_with("struct ") || e == "a map" {
        format!("a table, e.g. `[{key}]` or `{key} = {{ ... }}`")
    } else {
        e.to_string()
    }
}

/// A `[name]` header where an array of tables is wanted (serde: a map
/// where it expected a sequence): the header to write instead.
fn header_error(line: &str, msg: &str) -> Option<String> {
    let name = line.trim().strip_prefix('[')?.split_once(']')?.0.trim();
    if name.starts_with('[') || !is_single_table_for_list(line, msg) {
        return None;
    }
    Some(single_table_message(name, "for each entry"))
}

/// The top-level tables a run or route config must have.
const REQUIRED_TABLES: [&str; 3] = ["link", "scheduler", "router"];

/// The forms of a required field that has no entry in [`string_forms`].
fn required_forms(field: &str) -> Option<&'static str> {
    Some(match field {
        "link" => "a `[link]` table with `ingress`, `egress` and `rate`",
        "scheduler" => "a `[scheduler]` table with `algorithm` or `policy`",
        "router" => "a `[router]` table with `ingress`, `egress` and `strategy`",
        "link.rate" | "egress.rate" => "a rate with its unit in quotes, e.g. `rate = \"100mbit\"`",
        _ => return None,
    })
}

/// serde's `missing field `NAME``, placed at the header of the table that
/// lacks it (or at the file's start for a top-level table): the field as
/// a dotted path and what it takes.
fn missing_field(src: &str, pos: usize, msg: &str) -> Option<String> {
    let name = missing_field_name(msg)?;
    let (_, _, line) = line_at(src, pos);
    let field = match header_name(line).filter(|h| !h.is_empty()) {
        Some(h) if !(pos == 0 && REQUIRED_TABLES.contains(&name)) => format!("{h}.{name}"),
        _ => name.to_string(),
    };
    let forms = string_forms(&field, name)
        .or_else(|| required_forms(&field).map(str::to_string))
        .or_else(|| num_or_text_forms(name));
    Some(format!("`{field}` is missing{}", allowed(forms)))
}

/// The message for a deserializer error at byte `pos` of `src` whose
/// serde text is `msg`.
pub(crate) fn describe(src: &str, pos: usize, msg: &str) -> String {
    if let Some(m) = missing_field(src, pos, msg) {
        return m;
    }
    let (pos, line_start, line) = line_at(src, pos);
    let (first, inner) = (first_key(line), key_before(line, pos - line_start));
    let Some(first) = first.filter(|_| !line.trim_start().starts_with('[')) else {
        return header_error(line, msg)
            .or_else(|| unknown_table_message(line, msg))
            .unwrap_or_else(|| msg.to_string());
    };
    let mut field = section_before(src, line_start).map_or(String::new(), |s| format!("{s}."));
    field.push_str(first);
    if let Some(m) = unknown_field_message(&field, first, value_of(line), msg) {
        return m;
    }
    let key = match inner {
        Some(k) if k != first => {
            field.push('.');
            field.push_str(k);
            k
        }
        _ => first,
    };
    let shown = field_head(&field, value_of(line));
    match split_type_error(msg) {
        Some((kind, expected)) => {
            let big = if kind.contains(" as i128") || kind.contains(" as u128") {
                " too large for any setting"
            } else {
                ""
            };
            format!(
                "{shown}: the value is {}{big}; allowed {}",
                found_kind(kind),
                accepted(expected, &field, key)
            )
        }
        None => format!("{shown}: {msg}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_field_is_named_with_its_table_and_forms() {
        let src = "# c\n[scheduler]\nalgorithm = \"drr\"\n[link]\ningress = \"d0\"\n";
        let at = src.find("[link]").expect("header");
        assert_eq!(
            describe(src, at, "missing field `rate`"),
            "`link.rate` is missing; allowed a rate with its unit in quotes, e.g. \
             `rate = \"100mbit\"`"
        );
        assert_eq!(
            describe(src, at, "missing field `egress`"),
            "`link.egress` is missing; allowed an interface name in quotes, e.g. \"eth0\""
        );
        // A top-level table is reported at the file's start, whatever its
        // first line is.
        let src = "[scheduler]\nalgorithm = \"drr\"\n";
        assert_eq!(
            describe(src, 0, "missing field `link`"),
            "`link` is missing; allowed a `[link]` table with `ingress`, `egress` and `rate`"
        );
        // A field with no known forms is still named with its table.
        let src = "[[class]]\nprio = 1\n";
        assert_eq!(
            describe(src, 0, "missing field `zzz`"),
            "`class.zzz` is missing"
        );
    }

    #[test]
    fn a_type_error_names_field_value_kind_and_forms() {
        let src = "[link]\ningress = \"d0\"\nrate = 10\n";
        let at = src.find("10").expect("value");
        let m = describe(
            src,
            at,
            "invalid type: integer `10`, expected a rate with its unit, e.g. \"10mbit\"",
        );
        assert_eq!(
            m,
            "`link.rate = 10`: the value is a whole number; allowed a rate with its unit, e.g. \
             \"10mbit\""
        );
        let src = "[[class]]\nname = \"a\"\nmatch = [{ dport = 1.5 }]\n";
        let at = src.find("1.5").expect("value");
        let m = describe(src, at, "invalid type: floating point `1.5`, expected i64");
        assert!(
            m.starts_with("`class.match.dport = [{ dport = 1.5 }]`")
                && m.contains("a fractional number")
                && m.contains("`dport = 64`"),
            "{m}"
        );
        let src = "[link]\nbuffers = 99999999999999999999\n";
        let at = src.find("999").expect("value");
        let m = describe(
            src,
            at,
            "invalid type: integer `99999999999999999999` as i128, expected i64",
        );
        assert!(
            m.contains("whole number too large") && m.contains("link.buffers"),
            "{m}"
        );
        // Not on a key = value line (a header): serde's message as it is.
        assert_eq!(describe("[link\n", 0, "expected `]`"), "expected `]`");
        // Not a type error: the field and serde's message.
        let src = "[link]\nrate = \"1gbit\"\nrate = \"2gbit\"\n";
        let at = src.rfind("rate").expect("key");
        assert_eq!(
            describe(src, at, "duplicate key"),
            "`link.rate = \"2gbit\"`: duplicate key"
        );
    }

    /// String and number-or-string fields name their own forms; a header
    /// where a list of tables is wanted says to double its brackets.
    #[test]
    fn fields_name_their_own_forms_and_headers_their_brackets() {
        let cases = [
            (
                "[link]\nsched = 5\n",
                "5",
                "expected a string",
                "\"fifo:N\"",
            ),
            (
                "[router]\nstrategy = 5\n",
                "5",
                "expected a string",
                "\"ll-wfq\"",
            ),
            (
                "[scheduler]\nalgorithm = 5\n",
                "5",
                "expected a string",
                "wf2q, qfq",
            ),
            ("[egress]\nalgorithm = 5\n", "5", "expected a string", "drr"),
            (
                "[[route]]\nvia = 5\n",
                "5",
                "expected a string",
                "an IP address",
            ),
            (
                "[[class]]\nname = 5\n",
                "5",
                "expected a string",
                "`name = \"rt\"`",
            ),
            (
                "[control]\nx = 5\n",
                "5",
                "expected a string",
                "`x = \"...\"`",
            ),
        ];
        for (src, at, want, words) in cases {
            let m = describe(
                src,
                src.rfind(at).expect("value"),
                &format!("invalid type: integer `5`, {want}"),
            );
            assert!(m.contains(words), "{src:?}: {m}");
        }
        let nt = format!("expected {}", super::super::raw::NUM_OR_TEXT_EXPECTED);
        for (key, words) in [
            ("dport", "`dport = \"1000-2000\"`"),
            ("dscp", "\"ef\""),
            ("cburst", "`cburst = \"15k\"`"),
        ] {
            let src = format!("[[class]]\n{key} = 1.5\n");
            let m = describe(
                &src,
                src.find("1.5").expect("value"),
                &format!("invalid type: floating point `1.5`, {nt}"),
            );
            assert!(m.contains(words) && !m.contains("ports:"), "{key}: {m}");
        }
        let src = "[link]\nrate = \"1gbit\"\n[class]\nname = \"a\"\n";
        let m = describe(
            src,
            src.find("[class]").expect("header"),
            "invalid type: map, expected a sequence",
        );
        assert_eq!(
            m,
            "`[class]` is a single table, but class is a list: allowed `[[class]]` for each entry"
        );
        // Another error on a header line: serde's message as it is.
        assert_eq!(describe("[link]\n", 0, "duplicate key"), "duplicate key");
    }

    /// Non-ASCII text before the error: no slicing inside a character,
    /// at every byte position of the line (a panic fails the test).
    #[test]
    fn non_ascii_text_never_splits_a_character() {
        let src = "[link]\nrate = \"é=1\" x ü=2 ñ\n";
        for pos in 0..=src.len() + 2 {
            let m = describe(src, pos, "expected newline");
            assert!(m.contains("expected newline"), "{pos}: {m}");
        }
        // A key ends at the character before it, whatever its width.
        assert_eq!(key_before("x = \"é=1", 99), None);
        assert_eq!(key_before("é_key = 1", 99), Some("_key"));
    }
}
