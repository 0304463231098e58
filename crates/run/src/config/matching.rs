//! A class's `match` rules: from TOML fields to the classifier's [`Match`].

use pktsched_io::classify::{IpPrefix, Match, ParseError, PortRange};
use toml::Spanned;

use super::ConfigError;
use super::parse::Ctx;
use super::raw::{NumOrText, RawMatch};

/// Protocol names accepted besides numbers.
const PROTOCOLS: [(&str, u8); 5] = [
    ("icmp", 1),
    ("tcp", 6),
    ("udp", 17),
    ("icmpv6", 58),
    ("sctp", 132),
];

/// The DSCP code point of a name: `ef`, `va`, `le`, `cs0`..`cs7`,
/// `af11`..`af43` (RFC 2474, 2597, 3246, 5865, 8622).
pub fn dscp_by_name(name: &str) -> Option<u8> {
    let n = name.to_ascii_lowercase();
    match n.as_str() {
        "ef" => return Some(46),
        "va" => return Some(44),
        "le" => return Some(1),
        "be" | "df" => return Some(0),
        _ => {}
    }
    let digits: Vec<u8> = n
        .bytes()
        .filter(u8::is_ascii_digit)
        .map(|b| b - b'0')
        .collect();
    if let Some(rest) = n.strip_prefix("cs")
        && rest.len() == 1
        && digits.len() == 1
        && digits[0] <= 7
    {
        return Some(digits[0] * 8);
    }
    if let Some(rest) = n.strip_prefix("af")
        && rest.len() == 2
        && digits.len() == 2
        && (1..=4).contains(&digits[0])
        && (1..=3).contains(&digits[1])
    {
        return Some(digits[0] * 8 + digits[1] * 2);
    }
    None
}

/// Converts one `{ src = .., dport = .. }` table.
pub(crate) fn match_rule(
    cx: &Ctx<'_>,
    m: &Spanned<RawMatch>,
    class: &str,
) -> Result<Match, ConfigError> {
    let raw = m.get_ref();
    let what = |f: &str| format!("class {class:?}: match.{f}");
    let prefix = |v: &Option<Spanned<String>>, f: &str| -> Result<Option<IpPrefix>, ConfigError> {
        v.as_ref()
            .map(|s| {
                s.get_ref().parse::<IpPrefix>().map_err(|e| {
                    let why = match e {
                        ParseError::Address => {
                            format!("{e}: allowed an address or ADDRESS/LEN, IPv4 or IPv6")
                        }
                        e => e.to_string(),
                    };
                    cx.err(s.span(), format!("{} = {:?}: {why}", what(f), s.get_ref()))
                })
            })
            .transpose()
    };
    let ports =
        |v: &Option<Spanned<NumOrText>>, f: &str| -> Result<Option<PortRange>, ConfigError> {
            let Some(v) = v else { return Ok(None) };
            let text = match v.get_ref() {
                NumOrText::Num(n) => n.to_string(),
                NumOrText::Text(s) => s.clone(),
            };
            text.parse::<PortRange>().map(Some).map_err(|e| {
                let why = match e {
                    ParseError::Port => "not a port: allowed a port 0..=65535 or a range \
                                         \"LO-HI\" with LO <= HI"
                        .to_string(),
                    e => e.to_string(),
                };
                cx.err(v.span(), format!("{} = {}: {why}", what(f), v.get_ref()))
            })
        };
    let src = prefix(&raw.src, "src")?;
    let dst = prefix(&raw.dst, "dst")?;
    if let (Some(s), Some(d)) = (&src, &dst)
        && s.addr.is_ipv4() != d.addr.is_ipv4()
    {
        return Err(cx.err(
            m.span(),
            format!(
                "class {class:?}: match src = {s} and dst = {d} are of different IP versions: \
                 no frame can match"
            ),
        ));
    }
    let proto = raw
        .proto
        .as_ref()
        .map(|p| protocol(cx, p, &what("proto")))
        .transpose()?;
    let sport = ports(&raw.sport, "sport")?;
    let dport = ports(&raw.dport, "dport")?;
    if (sport.is_some() || dport.is_some()) && !matches!(proto, None | Some(6 | 17 | 132)) {
        return Err(cx.err(
            m.span(),
            format!(
                "class {class:?}: a port match with proto = {} can never match: ports exist \
                 for tcp, udp and sctp",
                proto.unwrap_or(0)
            ),
        ));
    }
    let dscp = raw
        .dscp
        .as_ref()
        .map(|d| dscp(cx, d, &what("dscp")))
        .transpose()?;
    let vlan = match &raw.vlan {
        Some(v) => Some(cx.range(v, &what("vlan"), 0, 4095)? as u16),
        None => None,
    };
    Ok(Match {
        src,
        dst,
        proto,
        sport,
        dport,
        dscp,
        vlan,
    })
}

fn protocol(cx: &Ctx<'_>, p: &Spanned<NumOrText>, what: &str) -> Result<u8, ConfigError> {
    let found = match p.get_ref() {
        NumOrText::Num(n) => u8::try_from(*n).ok(),
        NumOrText::Text(s) => PROTOCOLS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(s))
            .map(|&(_, n)| n),
    };
    found.ok_or_else(|| {
        cx.err(
            p.span(),
            format!(
                "{what} = {}: allowed a number 0..=255 or one of {}",
                p.get_ref(),
                PROTOCOLS.map(|p| p.0).join(", ")
            ),
        )
    })
}

fn dscp(cx: &Ctx<'_>, d: &Spanned<NumOrText>, what: &str) -> Result<u8, ConfigError> {
    let found = match d.get_ref() {
        NumOrText::Num(n) => u8::try_from(*n).ok().filter(|&n| n <= 63),
        NumOrText::Text(s) => dscp_by_name(s),
    };
    found.ok_or_else(|| {
        cx.err(
            d.span(),
            format!(
                "{what} = {}: allowed 0..=63 or a name (ef, va, le, cs0..cs7, af11..af43)",
                d.get_ref()
            ),
        )
    })
}

/// Why `name` cannot name a class, if it cannot: 1 to 64 bytes without
/// whitespace, control characters, `"` or `\` (names go into text lines,
/// JSON and Prometheus labels as they are). The message names the value
/// (cut when long) and what is allowed.
pub(crate) fn class_name_problem(name: &str) -> Option<String> {
    let bad = |c: char| c.is_whitespace() || c.is_control() || c == '"' || c == '\\';
    if !name.is_empty() && name.len() <= 64 && !name.contains(bad) {
        return None;
    }
    // `quoted` gives a long name back cut, with its length already.
    use crate::traffic::gen_flows::{QUOTED_MAX, quoted};
    let shown = if name.len() > QUOTED_MAX {
        quoted(name)
    } else {
        format!("{} ({} bytes)", quoted(name), name.len())
    };
    Some(format!(
        "class name {shown}: allowed 1 to 64 bytes without whitespace, control characters, \
         `\"` or `\\`"
    ))
}

/// The first of `classes` (name, rules) with a rule on a VLAN id: AF_XDP
/// cannot see tags held in metadata, so such a config takes AF_PACKET.
pub(crate) fn first_vlan_class<'a>(
    classes: impl IntoIterator<Item = (&'a str, &'a [Match])>,
) -> Option<&'a str> {
    classes
        .into_iter()
        .find(|(_, rules)| rules.iter().any(|r| r.vlan.is_some()))
        .map(|(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::dscp_by_name;

    #[test]
    fn dscp_names_are_the_rfc_code_points() {
        assert_eq!(dscp_by_name("EF"), Some(46));
        assert_eq!(dscp_by_name("cs0"), Some(0));
        assert_eq!(dscp_by_name("cs7"), Some(56));
        assert_eq!(dscp_by_name("af11"), Some(10));
        assert_eq!(dscp_by_name("af43"), Some(38));
        assert_eq!(dscp_by_name("af44"), None);
        assert_eq!(dscp_by_name("af5"), None);
        assert_eq!(dscp_by_name("cs8"), None);
        assert_eq!(dscp_by_name("x"), None);
    }
}
