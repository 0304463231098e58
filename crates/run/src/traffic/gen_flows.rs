//! The generator's flows, from the command line (`--flow
//! "dport=5000,rate=10mbit,size=200,dscp=ef"`) or from TOML (`[[flow]]`
//! tables with the same keys); both go through [`FlowSpec::set`], so they
//! accept the same values and give the same errors.

use std::net::IpAddr;

use pktsched_core::Rate;

use crate::config::MAX_FRAME;

/// Smallest frame: Ethernet + IPv4 + UDP headers and a [`super::Stamp`].
pub const MIN_SIZE: u32 = 60;
/// Most flows of one generator.
pub const MAX_FLOWS: usize = 1024;
/// Fastest rate of one flow.
pub const MAX_FLOW_RATE: Rate = Rate::gbit(100);

/// When datagrams leave.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Constant bit rate: evenly spaced.
    Cbr,
    /// Poisson arrivals at the same mean rate.
    Poisson,
}

/// Frame sizes of a flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sizes {
    /// Every frame the same size.
    Fixed(u32),
    /// A mix `size:weight,...` (e.g. `64:7,576:4,1500:1`, the simple IMIX).
    Mix(Vec<(u32, u32)>),
}

impl Sizes {
    /// Mean frame size.
    pub fn mean(&self) -> f64 {
        match self {
            Sizes::Fixed(s) => f64::from(*s),
            Sizes::Mix(m) => {
                let w: u64 = m.iter().map(|&(_, w)| u64::from(w)).sum();
                let s: u64 = m.iter().map(|&(s, w)| u64::from(s) * u64::from(w)).sum();
                s as f64 / w.max(1) as f64
            }
        }
    }
}

/// One flow (or `count` identical flows with consecutive ports).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    /// Destination address.
    pub dst: IpAddr,
    /// Destination UDP port.
    pub dport: u16,
    /// Source UDP port (0: any).
    pub sport: u16,
    /// Frame rate in bits/s of whole frames (without FCS).
    pub rate: Rate,
    /// Frame sizes (Ethernet frame without FCS, as `tc` and `trafgen`
    /// count them): the UDP payload is `size − 42` for IPv4, `size − 62`
    /// for IPv6.
    pub sizes: Sizes,
    /// Spacing.
    pub pattern: Pattern,
    /// DSCP code point.
    pub dscp: u8,
    /// Identical flows (destination ports `dport..dport+count`).
    pub count: u32,
}

/// The keys [`FlowSpec::set`] accepts.
pub const KEYS: &str = "dst, dport, sport, rate, size, pattern, dscp, count";

impl FlowSpec {
    /// A 1 Mbit/s CBR flow of 1000-byte frames to `dst:5000`.
    pub fn new(dst: IpAddr) -> FlowSpec {
        FlowSpec {
            dst,
            dport: 5000,
            sport: 0,
            rate: Rate::mbit(1),
            sizes: Sizes::Fixed(1000),
            pattern: Pattern::Cbr,
            dscp: 0,
            count: 1,
        }
    }

    /// Smallest frame of this flow's address family.
    pub fn min_size(&self) -> u32 {
        if self.dst.is_ipv4() {
            MIN_SIZE
        } else {
            MIN_SIZE + 20
        }
    }

    /// Sets one key from its text; the error names key, value and what is
    /// allowed.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let bad = |allowed: &str| format!("{key} = {}: allowed {allowed}", quoted(value));
        let int = |lo: u64, hi: u64| -> Result<u64, String> {
            value
                .parse::<u64>()
                .ok()
                .filter(|v| (lo..=hi).contains(v))
                .ok_or_else(|| bad(&format!("{lo}..={hi}")))
        };
        match key {
            "dst" => self.dst = value.parse().map_err(|_| bad("an IPv4 or IPv6 address"))?,
            "dport" => self.dport = int(1, 65535)? as u16,
            "sport" => self.sport = int(0, 65535)? as u16,
            "count" => self.count = int(1, MAX_FLOWS as u64)? as u32,
            "rate" => {
                let r = Rate::parse(value).map_err(|e| format!("{key} = {}: {e}", quoted(value)))?;
                if r > MAX_FLOW_RATE {
                    return Err(bad(&format!("at most {MAX_FLOW_RATE}")));
                }
                self.rate = r;
            }
            "size" => self.sizes = parse_sizes(value).ok_or_else(|| {
                bad(&format!(
                    "a frame size {MIN_SIZE}..={MAX_FRAME} or a mix SIZE:WEIGHT,... (weights 1..=1000)"
                ))
            })?,
            "pattern" => {
                self.pattern = match value {
                    "cbr" => Pattern::Cbr,
                    "poisson" => Pattern::Poisson,
                    _ => return Err(bad("cbr or poisson")),
                }
            }
            "dscp" => {
                self.dscp = value
                    .parse::<u8>()
                    .ok()
                    .filter(|&d| d <= 63)
                    .or_else(|| crate::config::dscp_by_name(value))
                    .ok_or_else(|| bad("0..=63 or a name (ef, cs0..cs7, af11..af43)"))?;
            }
            _ => return Err(format!("unknown key {}: allowed {KEYS}", quoted(key))),
        }
        Ok(())
    }

    /// Checks what depends on several keys (sizes against the family).
    pub fn validate(&self) -> Result<(), String> {
        let min = self.min_size();
        let sizes: Vec<u32> = match &self.sizes {
            Sizes::Fixed(s) => vec![*s],
            Sizes::Mix(m) => m.iter().map(|&(s, _)| s).collect(),
        };
        if let Some(s) = sizes.iter().find(|&&s| s < min) {
            return Err(format!(
                "size = {s}: an {} frame with a stamp needs at least {min} bytes",
                if self.dst.is_ipv4() { "IPv4" } else { "IPv6" }
            ));
        }
        if u64::from(self.dport) + u64::from(self.count) - 1 > 65535 {
            return Err(format!(
                "dport = {} with count = {} runs past port 65535",
                self.dport, self.count
            ));
        }
        Ok(())
    }

    /// Parses `key=value,key=value` over `base`.
    pub fn parse_cli(text: &str, base: &FlowSpec) -> Result<FlowSpec, String> {
        let mut f = base.clone();
        let mut seen: Vec<&str> = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((k, v)) = part.split_once('=') else {
                return Err(format!(
                    "{} is not KEY=VALUE: keys are {KEYS}",
                    quoted(part)
                ));
            };
            let k = k.trim();
            if seen.contains(&k) {
                return Err(format!(
                    "{} is given twice: allowed each key once per flow",
                    quoted(k)
                ));
            }
            seen.push(k);
            f.set(k, v.trim())?;
        }
        f.validate()?;
        Ok(f)
    }
}

/// The flows of a `--flows-file`: `[[flow]]` tables with the keys of
/// [`KEYS`], each over `base`. An error names `file:line:col`, the flow
/// (`flow[1]`), the key, the value and what is allowed; at most
/// [`MAX_FLOWS`] tables.
pub fn flows_from_toml(file: &str, text: &str, base: &FlowSpec) -> Result<Vec<FlowSpec>, String> {
    use pktsched_core::toml_error::{line_col, single_table_message};
    use toml::de::{DeTable, DeValue};
    let at = |pos: usize| {
        let (line, col) = line_col(text, pos);
        format!("{file}:{line}:{col}")
    };
    let doc = DeTable::parse(text).map_err(|e| format!("{file}: {e}"))?;
    let mut flows = None;
    for (key, value) in doc.get_ref() {
        if key.get_ref().as_ref() != "flow" {
            return Err(format!(
                "{}: unknown table or key {}: allowed only `[[flow]]` tables with keys {KEYS}",
                at(key.span().start),
                quoted(key.get_ref())
            ));
        }
        flows = Some(value);
    }
    let Some(flows) = flows else {
        return Err(format!(
            "{file}: no `[[flow]]` tables: allowed one `[[flow]]` table per flow with keys {KEYS}"
        ));
    };
    let list = match flows.get_ref() {
        DeValue::Array(list) => list,
        DeValue::Table(_) => {
            let msg = single_table_message("flow", "for each flow");
            return Err(format!("{}: {msg}", at(flows.span().start)));
        }
        _ => {
            return Err(format!(
                "{}: `flow` is a value: allowed `[[flow]]` tables",
                at(flows.span().start)
            ));
        }
    };
    if list.is_empty() {
        return Err(format!(
            "{}: `flow` is empty: allowed one `[[flow]]` table per flow with keys {KEYS}",
            at(flows.span().start)
        ));
    }
    if list.len() > MAX_FLOWS {
        return Err(format!(
            "{file}: {} `[[flow]]` tables: allowed at most {MAX_FLOWS}",
            list.len()
        ));
    }
    let mut out = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let DeValue::Table(table) = item.get_ref() else {
            return Err(format!(
                "{}: flow[{i}] is not a table",
                at(item.span().start)
            ));
        };
        let mut flow = base.clone();
        for (key, value) in table {
            let value_text = match value.get_ref() {
                DeValue::String(s) => s.to_string(),
                // As its number: `5_000` and `0x1388` are 5000.
                DeValue::Integer(n) => i64::from_str_radix(n.as_str(), n.radix())
                    .map_or_else(|_| text[value.span()].to_string(), |v| v.to_string()),
                other => {
                    let kind = match other {
                        DeValue::Float(_) => "a fractional number",
                        DeValue::Boolean(_) => "a boolean",
                        DeValue::Array(_) => "an array",
                        DeValue::Table(_) => "a table",
                        _ => "a date",
                    };
                    let raw = &text[value.span()];
                    let shown = if raw.len() <= QUOTED_MAX {
                        raw.to_string()
                    } else {
                        quoted(raw)
                    };
                    return Err(format!(
                        "{}: flow[{i}].{} = {shown}: the value is {kind}; allowed a string or a \
                         whole number",
                        at(value.span().start),
                        key.get_ref(),
                    ));
                }
            };
            // An unknown key is pointed at itself, a bad value at the value.
            let known = KEYS.split(", ").any(|k| k == key.get_ref().as_ref());
            let pos = if known {
                value.span().start
            } else {
                key.span().start
            };
            flow.set(key.get_ref(), &value_text)
                .map_err(|e| format!("{}: flow[{i}]: {e}", at(pos)))?;
        }
        flow.validate()
            .map_err(|e| format!("{}: flow[{i}]: {e}", at(item.span().start)))?;
        out.push(flow);
    }
    Ok(out)
}

/// Longest piece of a user's text an error message repeats.
pub(crate) const QUOTED_MAX: usize = 64;

/// `text` quoted for an error message, cut after `QUOTED_MAX` bytes
/// (at a character boundary) with its length said, so a megabyte of
/// input does not come back as a megabyte of message.
pub fn quoted(text: &str) -> String {
    if text.len() <= QUOTED_MAX {
        return format!("{text:?}");
    }
    let mut end = QUOTED_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}… ({} bytes)", &text[..end], text.len())
}

fn parse_sizes(v: &str) -> Option<Sizes> {
    let in_range = |s: u32| (MIN_SIZE..=MAX_FRAME).contains(&s);
    if !v.contains(':') {
        let s = v.parse().ok().filter(|&s| in_range(s))?;
        return Some(Sizes::Fixed(s));
    }
    let mut mix = Vec::new();
    for item in v.split(['+', ';']) {
        let (s, w) = item.split_once(':')?;
        let s: u32 = s.trim().parse().ok().filter(|&s| in_range(s))?;
        let w: u32 = w.trim().parse().ok().filter(|w| (1..=1000).contains(w))?;
        mix.push((s, w));
    }
    (!mix.is_empty() && mix.len() <= 64).then_some(Sizes::Mix(mix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> FlowSpec {
        FlowSpec::new("198.18.0.2".parse().expect("addr"))
    }

    #[test]
    fn cli_specs_set_each_key() {
        let f = FlowSpec::parse_cli(
            "dport=6000, rate=10mbit, size=64:7+576:4+1500:1, pattern=poisson, dscp=ef, count=4",
            &base(),
        )
        .expect("valid");
        assert_eq!(f.dport, 6000);
        assert_eq!(f.rate, Rate::mbit(10));
        assert_eq!(f.sizes, Sizes::Mix(vec![(64, 7), (576, 4), (1500, 1)]));
        assert!((f.sizes.mean() - (64.0 * 7.0 + 576.0 * 4.0 + 1500.0) / 12.0).abs() < 1e-9);
        assert_eq!((f.pattern, f.dscp, f.count), (Pattern::Poisson, 46, 4));
    }

    #[test]
    fn bad_specs_name_key_value_and_what_is_allowed() {
        for (spec, words) in [
            ("rate=0bit", &["rate", "zero"][..]),
            ("rate=1tbit", &["at most 100gbit"]),
            ("size=59", &["size = \"59\"", "60..=9216"]),
            ("size=64:0", &["weights 1..=1000"]),
            ("dport=0", &["dport = \"0\"", "1..=65535"]),
            ("dscp=64", &["0..=63"]),
            ("pattern=burst", &["cbr or poisson"]),
            ("color=red", &["unknown key \"color\"", "dport"]),
            ("rate", &["not KEY=VALUE"]),
            ("dst=::1,size=60", &["IPv6", "at least 80"]),
            ("dport=65535,count=2", &["past port 65535"]),
            ("count=99999", &["1..=1024"]),
            (
                "rate=1mbit,rate=2mbit",
                &["\"rate\" is given twice", "once per flow"],
            ),
            ("dport=1,sport=2,dport=1", &["\"dport\" is given twice"]),
        ] {
            let e = FlowSpec::parse_cli(spec, &base()).expect_err(spec);
            for w in words {
                assert!(e.contains(w), "{e:?} lacks {w:?} ({spec})");
            }
        }
    }

    #[test]
    fn a_flows_file_sets_each_key_over_the_base() {
        let text = "[[flow]]\nrate = \"2mbit\"\ndport = 5_000\nsize = \"64:7+1500:1\"\n\
                    [[flow]]\nrate = \"1mbit\"\ndport = 0x1389\ncount = 3\ndscp = \"ef\"\n";
        let flows = flows_from_toml("g.toml", text, &base()).expect("valid file");
        assert_eq!(flows.len(), 2);
        assert_eq!((flows[0].rate, flows[0].dport), (Rate::mbit(2), 5000));
        assert_eq!(flows[0].sizes, Sizes::Mix(vec![(64, 7), (1500, 1)]));
        assert_eq!(
            (flows[1].dport, flows[1].count, flows[1].dscp),
            (5001, 3, 46)
        );
        assert_eq!(
            flows[1].sizes,
            base().sizes,
            "an unset key keeps the base's value"
        );
        let err = flows_from_toml("g.toml", "flow = []\n", &base()).expect_err("no flow");
        assert!(err.contains("g.toml:1:8: `flow` is empty"), "{err}");
    }

    #[test]
    fn long_values_come_back_cut_with_their_length() {
        // One ASCII byte first: byte 64 falls inside an "é", so the cut
        // must step back to a character boundary.
        let long = format!("x{}", "é".repeat(3000));
        let e = FlowSpec::parse_cli(&format!("dst={long}"), &base()).expect_err("long");
        assert!(e.contains("(6001 bytes)") && e.len() < 200, "{e}");
        assert!(quoted(&long).starts_with(&format!("\"x{}\"…", "é".repeat(31))));
        assert_eq!(quoted("ab"), "\"ab\"");
    }
}
