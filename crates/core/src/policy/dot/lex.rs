//! The DOT subset's tokens: identifiers, quoted strings and punctuation,
//! each with its position; comments skipped.

use crate::policy::spec::{LineIndex, Loc, PolicyError};

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
    Id(String),
    Quoted(String),
    Punct(&'static str),
}

pub(super) fn syntax(loc: Loc, msg: impl Into<String>) -> PolicyError {
    PolicyError::Syntax {
        loc: Some(loc),
        msg: msg.into(),
    }
}

pub(super) fn tokenize(src: &str) -> Result<Vec<(Tok, Loc)>, PolicyError> {
    let mut out = Vec::new();
    let b = src.as_bytes();
    // Positions without rescanning the line for every token.
    let lines = LineIndex::new(src);
    let mut i = 0;
    let mut line_start = true;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'#' && line_start {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        line_start = false;
        let loc = lines.loc(i);
        if src[i..].starts_with("//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if src[i..].starts_with("/*") {
            match src[i + 2..].find("*/") {
                Some(end) => i += 2 + end + 2,
                None => return Err(syntax(loc, "comment `/*` is never closed")),
            }
            continue;
        }
        if let Some(p) = ["->", "--"].into_iter().find(|p| src[i..].starts_with(p)) {
            out.push((Tok::Punct(p), loc));
            i += 2;
            continue;
        }
        match c {
            b'{' | b'}' | b'[' | b']' | b'=' | b';' | b',' => {
                let p = match c {
                    b'{' => "{",
                    b'}' => "}",
                    b'[' => "[",
                    b']' => "]",
                    b'=' => "=",
                    b';' => ";",
                    _ => ",",
                };
                out.push((Tok::Punct(p), loc));
                i += 1;
            }
            b'"' => {
                let mut s = String::new();
                let mut j = i + 1;
                let mut closed = false;
                let mut chars = src[j..].char_indices();
                while let Some((k, ch)) = chars.next() {
                    match ch {
                        '"' => {
                            j += k + 1;
                            closed = true;
                            break;
                        }
                        '\\' => match chars.next() {
                            Some((_, '"')) => s.push('"'),
                            Some((_, '\n')) => {}
                            Some((_, other)) => {
                                s.push('\\');
                                s.push(other);
                            }
                            None => break,
                        },
                        _ => s.push(ch),
                    }
                }
                if !closed {
                    return Err(syntax(loc, "string is never closed (missing `\"`)"));
                }
                out.push((Tok::Quoted(s), loc));
                i = j;
            }
            _ if c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c >= 0x80 => {
                let start = i;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric()
                        || b[i] == b'_'
                        || b[i] == b'.'
                        || b[i] >= 0x80)
                {
                    i += 1;
                }
                out.push((Tok::Id(src[start..i].to_string()), loc));
            }
            _ => {
                let ch = src[i..].chars().next().unwrap_or('?');
                return Err(syntax(
                    loc,
                    format!(
                        "unexpected character `{ch}` (DOT identifiers are letters, digits, `_` and `.`; quote anything else)"
                    ),
                ));
            }
        }
    }
    Ok(out)
}
