//! The input-independent parts of saying a TOML deserializer's error in
//! a file format's words: where the error is (its line, the section it
//! is in, the key before it), what kind of value serde found, the
//! `` `field = value` `` head of a message and the "single table where a
//! list is wanted" header message. Each input (policy files, scenarios,
//! run configs) keeps its own table of which fields take which forms and
//! builds its message from these pieces. Text only, no I/O; every byte
//! index is first moved down to a character boundary, so any position
//! is safe.

/// The kind of value in serde's `invalid type: KIND, expected ...`, in
/// TOML's words (`integer `5`` → "a whole number").
pub fn found_kind(serde_kind: &str) -> &'static str {
    let table = [
        ("integer", "a whole number"),
        ("floating point", "a fractional number"),
        ("string", "a string"),
        ("boolean", "a boolean"),
        ("map", "a table"),
        ("sequence", "an array"),
        ("unit", "nothing"),
        ("date", "a date"),
    ];
    let k = serde_kind.trim();
    table
        .iter()
        .find(|(prefix, _)| k.starts_with(prefix))
        .map_or("a value of another type", |(_, said)| said)
}

/// Splits serde's `invalid type: KIND, expected WANT` (also `invalid
/// value:`) into the kind of value found and what was expected.
pub fn split_type_error(msg: &str) -> Option<(&str, &str)> {
    let rest = msg
        .strip_prefix("invalid type: ")
        .or_else(|| msg.strip_prefix("invalid value: "))?;
    rest.split_once(", expected ")
}

/// The field serde's `missing field `NAME`` names.
pub fn missing_field_name(msg: &str) -> Option<&str> {
    msg.trim()
        .strip_prefix("missing field `")?
        .strip_suffix('`')
}

/// serde's `unknown field `NAME`, expected ...`: the name and the
/// fields the table has, in the house's words (`` `a`, `b` or `c` ``, or
/// "no fields").
pub fn unknown_field(msg: &str) -> Option<(&str, String)> {
    let rest = msg.trim().strip_prefix("unknown field `")?;
    let (name, expected) = rest.split_once('`')?;
    let expected = expected.trim_start_matches(',').trim();
    let fields = if let Some(list) = expected.strip_prefix("expected one of ") {
        let names: Vec<&str> = list.split(", ").collect();
        match names.split_last() {
            Some((last, head)) if !head.is_empty() => format!("{} or {last}", head.join(", ")),
            _ => list.to_string(),
        }
    } else if let Some(list) = expected.strip_prefix("expected ") {
        list.to_string()
    } else if expected.starts_with("there are no fields") {
        "no fields".to_string()
    } else {
        return None;
    };
    Some((name, fields))
}

/// The message for serde's unknown-field error on a line whose first key
/// is `first`, written `path` in the message (`link.rate`,
/// `flows[2].rate`): the unknown field as a dotted path
/// (`class.match.dprt` when it is inside `first`'s inline table), the
/// value when it is the line's own key, and the fields allowed. `None`
/// for any other message.
pub fn unknown_field_message(
    path: &str,
    first: &str,
    line_value: &str,
    msg: &str,
) -> Option<String> {
    let (name, fields) = unknown_field(msg)?;
    let head = if name == first {
        field_head(path, line_value)
    } else {
        format!("`{path}.{name}`")
    };
    Some(format!("{head}: unknown field `{name}`; allowed {fields}"))
}

/// serde's unknown-field error on a header line (`[bogus]`): the table
/// and the tables (fields) allowed where it stands. `None` for any other
/// message.
pub fn unknown_table_message(line: &str, msg: &str) -> Option<String> {
    if !line.trim_start().starts_with('[') {
        return None;
    }
    let (name, fields) = unknown_field(msg)?;
    let shown = bracketed_name(line);
    let shown = if shown.is_empty() { name } else { shown };
    Some(format!(
        "`[{shown}]`: unknown table `{name}`; allowed {fields}"
    ))
}

/// 1-based line and column of byte offset `pos` in `src` (moved down to
/// a character boundary first).
pub fn line_col(src: &str, pos: usize) -> (usize, usize) {
    let pos = floor_boundary(src, pos);
    let before = &src[..pos];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(pos, |i| pos - i - 1) + 1;
    (line, col)
}

/// The largest char boundary of `s` at or below byte `i`.
pub fn floor_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The error's position moved to a char boundary, the byte where its
/// line starts and the line's text (without its newline).
pub fn line_at(src: &str, pos: usize) -> (usize, usize, &str) {
    let pos = floor_boundary(src, pos);
    let line_start = src[..pos].rfind('\n').map_or(0, |i| i + 1);
    let line = src[line_start..].lines().next().unwrap_or("");
    (pos, line_start, line)
}

/// The first key of a `key = value` line, without quotes; None on a
/// header line or a line without `=`.
pub fn first_key(line: &str) -> Option<&str> {
    let is_key_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '"');
    line.split_once('=')
        .map(|(k, _)| k.trim())
        // A continuation line of a multi-line inline array or table
        // (`  { dport = 5 },`) has no key of its own.
        .filter(|k| {
            let quoted = k.len() >= 2 && k.starts_with('"') && k.ends_with('"');
            quoted || (!k.is_empty() && k.chars().all(is_key_char))
        })
        .map(|k| k.trim_matches('"'))
        .filter(|k| !k.is_empty())
}

/// The value of a `key = value` line as written, trimmed ("" without `=`).
pub fn value_of(line: &str) -> &str {
    line.split_once('=').map_or("", |(_, v)| v.trim())
}

/// The key of `key = value` nearest before byte `col` of `line` (the
/// inner key of an inline table), without quotes.
pub fn key_before(line: &str, col: usize) -> Option<&str> {
    let s = &line[..floor_boundary(line, col)];
    let head = s[..s.rfind('=')?].trim_end();
    let start = head
        .char_indices()
        .rev()
        .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '"'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let k = head[start..].trim_matches('"');
    (!k.is_empty()).then_some(k)
}

/// The name a header line opens (`[link]` → `link`, `[[egress.class]]`
/// → `egress.class`); None for any other line.
pub fn header_name(line: &str) -> Option<&str> {
    let l = line.trim();
    let inner = l.strip_prefix("[[").and_then(|s| s.split_once("]]"));
    let inner = inner.or_else(|| l.strip_prefix('[').and_then(|s| s.split_once(']')));
    inner.map(|(name, _)| name.trim())
}

/// The section of the text before byte `end` of `src`: the name of the
/// last header there; None at the top level.
pub fn section_before(src: &str, end: usize) -> Option<&str> {
    src[..floor_boundary(src, end)]
        .lines()
        .rev()
        .find_map(header_name)
}

/// The name between a header line's brackets, however many (`[x]`,
/// `[[x]]`), or "" when there is none.
pub fn bracketed_name(line: &str) -> &str {
    let name = line.trim().trim_start_matches('[').split(']').next();
    name.unwrap_or("").trim()
}

/// Whether `line` is a `[name]` header and serde found a table where it
/// wanted a sequence: a single table where a list of tables is wanted.
pub fn is_single_table_for_list(line: &str, msg: &str) -> bool {
    !line.trim().starts_with("[[") && msg.starts_with("invalid type: map, expected a sequence")
}

/// The message for `[name]` where `[[name]]` is wanted; `each` says what
/// each `[[name]]` opens ("before each node", "for each entry").
pub fn single_table_message(name: &str, each: &str) -> String {
    format!("`[{name}]` is a single table, but {name} is a list: allowed `[[{name}]]` {each}")
}

/// A message's head: `` `field = value` ``, or `` `field` `` alone when
/// the value is longer than 60 bytes.
pub fn field_head(field: &str, value: &str) -> String {
    if value.len() <= 60 {
        format!("`{field} = {value}`")
    } else {
        format!("`{field}`")
    }
}

/// `; allowed FORMS`, or nothing without forms.
pub fn allowed(forms: Option<String>) -> String {
    forms.map_or(String::new(), |f| format!("; allowed {f}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_said_in_toml_words() {
        assert_eq!(found_kind("integer `5`"), "a whole number");
        assert_eq!(found_kind(" floating point `1.5`"), "a fractional number");
        assert_eq!(found_kind("map"), "a table");
        assert_eq!(found_kind("char"), "a value of another type");
        assert_eq!(
            split_type_error("invalid value: integer `-1`, expected u64"),
            Some(("integer `-1`", "u64"))
        );
        assert_eq!(split_type_error("duplicate key"), None);
        assert_eq!(missing_field_name("missing field `kind`"), Some("kind"));
        assert_eq!(missing_field_name("unknown field `kind`"), None);
    }

    #[test]
    fn unknown_fields_are_named_with_their_path_and_the_fields_allowed() {
        let many = "unknown field `dprt`, expected one of `src`, `dst`, `dport`";
        assert_eq!(
            unknown_field(many),
            Some(("dprt", "`src`, `dst` or `dport`".to_string()))
        );
        let two = "unknown field `x`, expected `a` or `b`";
        assert_eq!(unknown_field(two), Some(("x", "`a` or `b`".to_string())));
        let none = "unknown field `x`, there are no fields";
        assert_eq!(unknown_field(none), Some(("x", "no fields".to_string())));
        assert_eq!(unknown_field("missing field `x`"), None);
        // Inside an inline table: the path goes through the line's key.
        assert_eq!(
            unknown_field_message("class.match", "match", "[{ dprt = 5 }]", many).as_deref(),
            Some("`class.match.dprt`: unknown field `dprt`; allowed `src`, `dst` or `dport`")
        );
        // The line's own key: its value is shown.
        assert_eq!(
            unknown_field_message("x", "x", "3", two).as_deref(),
            Some("`x = 3`: unknown field `x`; allowed `a` or `b`")
        );
        assert_eq!(unknown_field_message("x", "x", "3", "duplicate key"), None);
        assert_eq!(
            unknown_table_message("[bogus]", "unknown field `bogus`, expected `link`").as_deref(),
            Some("`[bogus]`: unknown table `bogus`; allowed `link`")
        );
    }

    #[test]
    fn lines_sections_and_keys_are_found() {
        let src = "top = 1\n[link]\nrate = { a = 1, b = \"x\" }\n[[class]]\n";
        let at = src.find("\"x\"").expect("value");
        let (pos, start, line) = line_at(src, at);
        assert_eq!((pos, line), (at, "rate = { a = 1, b = \"x\" }"));
        assert_eq!(first_key(line), Some("rate"));
        assert_eq!(key_before(line, pos - start), Some("b"));
        assert_eq!(value_of(line), "{ a = 1, b = \"x\" }");
        assert_eq!(section_before(src, start), Some("link"));
        assert_eq!(section_before(src, 3), None);
        assert_eq!(section_before(src, src.len()), Some("class"));
        assert_eq!(header_name("[[egress.class]]"), Some("egress.class"));
        assert_eq!(first_key("[x]"), None);
        assert_eq!(first_key("\"a b\" = 1"), Some("a b"));
        assert_eq!(first_key("a.b = 1"), Some("a.b"));
        // A continuation line of a multi-line inline array has no key.
        assert_eq!(first_key("  { dport = 5, dprt = 6 },"), None);
        assert_eq!(
            unknown_table_message("  { dprt = 6 },", "unknown field `dprt`, expected `a`"),
            None
        );
        assert_eq!(bracketed_name("[[x"), "x");
    }

    #[test]
    fn heads_and_header_messages_have_their_shape() {
        assert_eq!(field_head("a.b", "1"), "`a.b = 1`");
        assert_eq!(field_head("a", &"9".repeat(61)), "`a`");
        assert!(is_single_table_for_list(
            "[x]",
            "invalid type: map, expected a sequence"
        ));
        assert!(!is_single_table_for_list(
            "[[x]]",
            "invalid type: map, expected a sequence"
        ));
        assert_eq!(
            single_table_message("x", "for each entry"),
            "`[x]` is a single table, but x is a list: allowed `[[x]]` for each entry"
        );
        assert_eq!(allowed(Some("1".into())), "; allowed 1");
        assert_eq!(allowed(None), "");
    }

    /// Non-ASCII text: no slicing inside a character, at any position.
    #[test]
    fn any_position_is_safe() {
        let src = "[é]\nname = \"é=1\" ü=2\n";
        for pos in 0..=src.len() + 2 {
            let (p, start, line) = line_at(src, pos);
            assert!(src.is_char_boundary(p) && p >= start, "{pos}");
            let _ = key_before(line, p - start);
            let _ = section_before(src, pos);
        }
        assert_eq!(key_before("x = \"é=1", 99), None);
        assert_eq!(key_before("é_key = 1", 99), Some("_key"));
    }
}
