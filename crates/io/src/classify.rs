//! The frame classifier: Ethernet (up to two VLAN tags), IPv4 / IPv6,
//! TCP / UDP / SCTP ports; rules match on prefixes, protocol, port ranges,
//! DSCP and VLAN id; the first matching rule wins, else the default class.
//!
//! # Odd frames (never a panic; each is counted by its [`Anomaly`])
//!
//! | frame | rule |
//! | --- | --- |
//! | shorter than an Ethernet header (`runt`) | default class |
//! | not IPv4/IPv6 (ARP, LLDP, ...: `non_ip`) | only `vlan` can match |
//! | a header cut short (`truncated`) | the fields before the cut can match |
//! | IPv4 version ≠ 4 or IHL < 5 (`bad_ip_header`) | only `vlan` can match |
//! | IPv4 options (`ip_options`) | ports read after the options |
//! | fragments (`fragment`) | the first carries ports; later ones have none, so a rule with a port never matches them |
//! | more than four IPv6 extension headers (`ext_headers`) | no ports |
//! | IPv6 AH, ESP, or any other next header | the walk stops there: `proto` is that header, no ports |
//!
//! IPv6 extension headers followed: hop-by-hop (0), routing (43),
//! destination options (60), each `8 + 8 × len` bytes, and fragment (44, 8
//! bytes; a non-first fragment ends the walk with `proto` = its next header
//! and no ports, the first one keeps its ports and notes `fragment`).
//!
//! Frames longer than the device's buffers never get here (the device
//! drops and counts them); a frame longer than a class allows is the
//! scheduler's `too_large` drop. The hot path reads fixed offsets and
//! allocates nothing.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An address prefix: `10.0.0.0/8`, `2001:db8::/32`; a bare address is a
/// /32 or /128.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct IpPrefix {
    /// The network address (host bits zero).
    pub addr: IpAddr,
    /// Prefix length.
    pub len: u8,
}

/// Why a prefix or port range did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Not an address.
    #[error("not an IPv4 or IPv6 address")]
    Address,
    /// Prefix length out of range.
    #[error("prefix length {len} is out of range: allowed 0..={max}")]
    PrefixLen {
        /// Given.
        len: String,
        /// Largest for the family.
        max: u8,
    },
    /// Host bits set below the prefix.
    #[error("host bits are set below the /{len} (the network is {network})")]
    HostBits {
        /// Prefix length.
        len: u8,
        /// What was probably meant.
        network: String,
    },
    /// Not a port.
    #[error("not a port: allowed 0..=65535")]
    Port,
    /// A range whose ends are reversed.
    #[error("range {lo}-{hi} is empty: LO <= HI is needed")]
    Reversed {
        /// Low end.
        lo: u16,
        /// High end.
        hi: u16,
    },
}

fn mask_v4(a: Ipv4Addr, len: u8) -> Ipv4Addr {
    let m = if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    };
    Ipv4Addr::from(u32::from(a) & m)
}

fn mask_v6(a: Ipv6Addr, len: u8) -> Ipv6Addr {
    let m = if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    };
    Ipv6Addr::from(u128::from(a) & m)
}

impl IpPrefix {
    /// Does `a` lie in the prefix? (An address of the other family never
    /// does.)
    #[inline]
    pub fn contains(&self, a: IpAddr) -> bool {
        match (self.addr, a) {
            (IpAddr::V4(net), IpAddr::V4(x)) => mask_v4(x, self.len) == net,
            (IpAddr::V6(net), IpAddr::V6(x)) => mask_v6(x, self.len) == net,
            _ => false,
        }
    }
}

impl FromStr for IpPrefix {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a.trim().parse().map_err(|_| ParseError::Address)?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match l {
            None => max,
            Some(l) => l
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&n| n <= max)
                .ok_or_else(|| ParseError::PrefixLen {
                    len: l.to_string(),
                    max,
                })?,
        };
        let network = match addr {
            IpAddr::V4(v) => IpAddr::V4(mask_v4(v, len)),
            IpAddr::V6(v) => IpAddr::V6(mask_v6(v, len)),
        };
        if network != addr {
            return Err(ParseError::HostBits {
                len,
                network: format!("{network}/{len}"),
            });
        }
        Ok(IpPrefix { addr, len })
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// An inclusive port range: `80` or `1000-2000`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct PortRange {
    /// Lowest port.
    pub lo: u16,
    /// Highest port.
    pub hi: u16,
}

impl PortRange {
    /// Is `p` in the range?
    #[inline]
    pub fn contains(&self, p: u16) -> bool {
        self.lo <= p && p <= self.hi
    }
}

impl FromStr for PortRange {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let port = |t: &str| t.trim().parse::<u16>().map_err(|_| ParseError::Port);
        let (lo, hi) = match s.split_once('-') {
            Some((a, b)) => (port(a)?, port(b)?),
            None => {
                let p = port(s)?;
                (p, p)
            }
        };
        if lo > hi {
            return Err(ParseError::Reversed { lo, hi });
        }
        Ok(PortRange { lo, hi })
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
        }
    }
}

/// What a rule requires; every field given must match (none: every frame).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Match {
    /// Source prefix.
    pub src: Option<IpPrefix>,
    /// Destination prefix.
    pub dst: Option<IpPrefix>,
    /// IP protocol (IPv6: the last next-header).
    pub proto: Option<u8>,
    /// Source port range.
    pub sport: Option<PortRange>,
    /// Destination port range.
    pub dport: Option<PortRange>,
    /// DSCP (0..=63).
    pub dscp: Option<u8>,
    /// Outer VLAN id (0..=4095).
    pub vlan: Option<u16>,
}

impl fmt::Display for Match {
    /// Normalised: the fields given, in a fixed order, as
    /// `src 10.0.0.0/8 dst ... proto 17 sport 53 dport 1000-2000 dscp 46
    /// vlan 100`; `any` when none is.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if let Some(p) = self.src {
            parts.push(format!("src {p}"));
        }
        if let Some(p) = self.dst {
            parts.push(format!("dst {p}"));
        }
        if let Some(p) = self.proto {
            parts.push(format!("proto {p}"));
        }
        if let Some(r) = self.sport {
            parts.push(format!("sport {r}"));
        }
        if let Some(r) = self.dport {
            parts.push(format!("dport {r}"));
        }
        if let Some(d) = self.dscp {
            parts.push(format!("dscp {d}"));
        }
        if let Some(v) = self.vlan {
            parts.push(format!("vlan {v}"));
        }
        if parts.is_empty() {
            f.write_str("any")
        } else {
            f.write_str(&parts.join(" "))
        }
    }
}

impl fmt::Display for Rule {
    /// `class 3: dport 5000`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "class {}: {}", self.class, self.matches)
    }
}

/// A rule: frames it matches go to `class`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The class index.
    pub class: u16,
    /// What it matches.
    pub matches: Match,
}

/// Odd frames, counted by kind (see the module docs for the rule of each).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Anomaly {
    /// Shorter than an Ethernet header.
    Runt,
    /// Neither IPv4 nor IPv6.
    NonIp,
    /// A VLAN, IP or transport header cut short.
    Truncated,
    /// IPv4 with version ≠ 4 or IHL < 5, IPv6 with version ≠ 6.
    BadIpHeader,
    /// IPv4 with options.
    IpOptions,
    /// An IP fragment.
    Fragment,
    /// More IPv6 extension headers than are followed.
    ExtHeaders,
}

impl Anomaly {
    /// Every kind, in counter order.
    pub const ALL: [Anomaly; 7] = [
        Anomaly::Runt,
        Anomaly::NonIp,
        Anomaly::Truncated,
        Anomaly::BadIpHeader,
        Anomaly::IpOptions,
        Anomaly::Fragment,
        Anomaly::ExtHeaders,
    ];

    /// Position in [`Anomaly::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The counter's name.
    pub fn name(self) -> &'static str {
        match self {
            Anomaly::Runt => "runt",
            Anomaly::NonIp => "non_ip",
            Anomaly::Truncated => "truncated",
            Anomaly::BadIpHeader => "bad_ip_header",
            Anomaly::IpOptions => "ip_options",
            Anomaly::Fragment => "fragment",
            Anomaly::ExtHeaders => "ext_headers",
        }
    }
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Odd frames counted by [`Anomaly`] kind, for callers that count where
/// they classify (one per thread; [`ClassifyStats::merge`] adds them up).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassifyStats {
    counts: [u64; Anomaly::ALL.len()],
}

impl ClassifyStats {
    /// Counts a verdict's note (nothing for a frame with none).
    #[inline]
    pub fn record(&mut self, note: Option<Anomaly>) {
        if let Some(a) = note {
            self.counts[a.index()] += 1;
        }
    }

    /// The count of one kind.
    pub fn get(&self, kind: Anomaly) -> u64 {
        self.counts[kind.index()]
    }

    /// Every kind with its count, in [`Anomaly::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (Anomaly, u64)> + '_ {
        Anomaly::ALL.iter().map(|&a| (a, self.get(a)))
    }

    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &ClassifyStats) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts) {
            *mine += theirs;
        }
    }
}

impl fmt::Display for ClassifyStats {
    /// `runt 0 non_ip 3 ...`, every kind.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (a, n)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{a} {n}")?;
        }
        Ok(())
    }
}

/// The fields a frame offers to the rules.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    /// Outer VLAN id.
    pub vlan: Option<u16>,
    /// Source address.
    pub src: Option<IpAddr>,
    /// Destination address.
    pub dst: Option<IpAddr>,
    /// IP protocol.
    pub proto: Option<u8>,
    /// DSCP.
    pub dscp: Option<u8>,
    /// Source port.
    pub sport: Option<u16>,
    /// Destination port.
    pub dport: Option<u16>,
}

/// The verdict on one frame.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Classified {
    /// The class.
    pub class: u16,
    /// What was odd about the frame, if anything.
    pub note: Option<Anomaly>,
}

/// Why a classifier could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClassifyConfigError {
    /// A rule's source and destination are of different families.
    #[error(
        "rule {rule}: src {src} and dst {dst} are of different IP versions: no frame can match"
    )]
    MixedFamilies {
        /// Rule index.
        rule: usize,
        /// Source prefix.
        src: IpPrefix,
        /// Destination prefix.
        dst: IpPrefix,
    },
    /// A DSCP or VLAN id out of range.
    #[error("rule {rule}: {field} = {value} is out of range: allowed 0..={max}")]
    OutOfRange {
        /// Rule index.
        rule: usize,
        /// The field.
        field: &'static str,
        /// Given.
        value: u16,
        /// Largest.
        max: u16,
    },
    /// Too many rules.
    #[error("{0} rules: allowed at most 65536")]
    TooMany(usize),
}

/// Rules in order and the default class.
#[derive(Clone, Debug)]
pub struct Classifier {
    rules: Vec<Rule>,
    default: u16,
}

const ETH_HLEN: usize = 14;
const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86DD;
const ETH_P_8021Q: u16 = 0x8100;
const ETH_P_8021AD: u16 = 0x88A8;
/// IPv6 extension headers followed before giving up on the ports.
const MAX_EXT_HEADERS: usize = 4;

#[inline]
fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// The ports at `l4` of a protocol that has them.
fn ports(frame: &[u8], l4: usize, proto: u8, f: &mut Fields) -> Option<Anomaly> {
    if !matches!(proto, 6 | 17 | 132) {
        return None;
    }
    match (be16(frame, l4), be16(frame, l4 + 2)) {
        (Some(s), Some(d)) => {
            f.sport = Some(s);
            f.dport = Some(d);
            None
        }
        _ => Some(Anomaly::Truncated),
    }
}

fn ipv4(frame: &[u8], l3: usize, f: &mut Fields) -> Option<Anomaly> {
    let Some(h) = frame.get(l3..l3 + 20) else {
        return Some(Anomaly::Truncated);
    };
    let (version, ihl) = (h[0] >> 4, usize::from(h[0] & 0xf));
    if version != 4 || ihl < 5 {
        return Some(Anomaly::BadIpHeader);
    }
    f.dscp = Some(h[1] >> 2);
    f.proto = Some(h[9]);
    f.src = Some(IpAddr::V4(Ipv4Addr::new(h[12], h[13], h[14], h[15])));
    f.dst = Some(IpAddr::V4(Ipv4Addr::new(h[16], h[17], h[18], h[19])));
    let frag = u16::from_be_bytes([h[6], h[7]]);
    let (more, offset) = (frag & 0x2000 != 0, frag & 0x1fff);
    if offset != 0 {
        return Some(Anomaly::Fragment);
    }
    let l4 = l3 + ihl * 4;
    if l4 > frame.len() {
        return Some(Anomaly::Truncated);
    }
    let port_note = ports(frame, l4, h[9], f);
    port_note
        .or(more.then_some(Anomaly::Fragment))
        .or((ihl > 5).then_some(Anomaly::IpOptions))
}

fn ipv6(frame: &[u8], l3: usize, f: &mut Fields) -> Option<Anomaly> {
    let Some(h) = frame.get(l3..l3 + 40) else {
        return Some(Anomaly::Truncated);
    };
    if h[0] >> 4 != 6 {
        return Some(Anomaly::BadIpHeader);
    }
    let tclass = (h[0] << 4) | (h[1] >> 4);
    f.dscp = Some(tclass >> 2);
    let addr = |at: usize| {
        let mut a = [0u8; 16];
        a.copy_from_slice(&h[at..at + 16]);
        IpAddr::V6(Ipv6Addr::from(a))
    };
    f.src = Some(addr(8));
    f.dst = Some(addr(24));
    let mut next = h[6];
    let mut at = l3 + 40;
    let mut fragment = false;
    for _ in 0..=MAX_EXT_HEADERS {
        match next {
            0 | 43 | 60 => {
                let (Some(&nh), Some(&len)) = (frame.get(at), frame.get(at + 1)) else {
                    return Some(Anomaly::Truncated);
                };
                next = nh;
                at += 8 + usize::from(len) * 8;
            }
            44 => {
                let (Some(&nh), Some(off)) = (frame.get(at), be16(frame, at + 2)) else {
                    return Some(Anomaly::Truncated);
                };
                next = nh;
                at += 8;
                fragment = true;
                if off & 0xfff8 != 0 {
                    f.proto = Some(next);
                    return Some(Anomaly::Fragment);
                }
            }
            proto => {
                f.proto = Some(proto);
                return ports(frame, at, proto, f).or(fragment.then_some(Anomaly::Fragment));
            }
        }
    }
    Some(Anomaly::ExtHeaders)
}

/// The fields of `frame` and what was odd about it.
pub fn fields(frame: &[u8]) -> (Fields, Option<Anomaly>) {
    let mut f = Fields::default();
    let Some(mut ethertype) = be16(frame, 12) else {
        return (f, Some(Anomaly::Runt));
    };
    let mut l3 = ETH_HLEN;
    for _ in 0..2 {
        if ethertype != ETH_P_8021Q && ethertype != ETH_P_8021AD {
            break;
        }
        let (Some(tci), Some(inner)) = (be16(frame, l3), be16(frame, l3 + 2)) else {
            return (f, Some(Anomaly::Truncated));
        };
        f.vlan.get_or_insert(tci & 0x0fff);
        ethertype = inner;
        l3 += 4;
    }
    let note = match ethertype {
        ETH_P_IP => ipv4(frame, l3, &mut f),
        ETH_P_IPV6 => ipv6(frame, l3, &mut f),
        _ => Some(Anomaly::NonIp),
    };
    (f, note)
}

impl IpPrefix {
    /// Does this prefix contain all of `other`?
    pub fn covers(&self, other: &IpPrefix) -> bool {
        self.addr.is_ipv4() == other.addr.is_ipv4()
            && self.len <= other.len
            && self.contains(other.addr)
    }
}

impl Match {
    /// Does every frame `other` matches also match `self`? (Then a rule
    /// with `other` placed after one with `self` can never win.)
    pub fn covers(&self, other: &Match) -> bool {
        fn field<T>(mine: &Option<T>, theirs: &Option<T>, wider: impl Fn(&T, &T) -> bool) -> bool {
            match (mine, theirs) {
                (None, _) => true,
                (Some(_), None) => false,
                (Some(m), Some(t)) => wider(m, t),
            }
        }
        field(&self.src, &other.src, IpPrefix::covers)
            && field(&self.dst, &other.dst, IpPrefix::covers)
            && field(&self.proto, &other.proto, |a, b| a == b)
            && field(&self.dscp, &other.dscp, |a, b| a == b)
            && field(&self.vlan, &other.vlan, |a, b| a == b)
            && field(&self.sport, &other.sport, |a, b| {
                a.lo <= b.lo && b.hi <= a.hi
            })
            && field(&self.dport, &other.dport, |a, b| {
                a.lo <= b.lo && b.hi <= a.hi
            })
    }

    /// Does a frame with `f` match?
    #[inline]
    pub fn matches(&self, f: &Fields) -> bool {
        fn opt<T: Copy, U>(want: &Option<U>, have: Option<T>, ok: impl Fn(&U, T) -> bool) -> bool {
            match want {
                None => true,
                Some(w) => have.is_some_and(|h| ok(w, h)),
            }
        }
        opt(&self.vlan, f.vlan, |w, h| *w == h)
            && opt(&self.proto, f.proto, |w, h| *w == h)
            && opt(&self.dscp, f.dscp, |w, h| *w == h)
            && opt(&self.src, f.src, IpPrefix::contains)
            && opt(&self.dst, f.dst, IpPrefix::contains)
            && opt(&self.sport, f.sport, PortRange::contains)
            && opt(&self.dport, f.dport, PortRange::contains)
    }
}

impl Classifier {
    /// Rules in priority order (first match wins) and the class of frames
    /// no rule matches.
    pub fn new(rules: Vec<Rule>, default: u16) -> Result<Classifier, ClassifyConfigError> {
        if rules.len() > 65536 {
            return Err(ClassifyConfigError::TooMany(rules.len()));
        }
        for (i, r) in rules.iter().enumerate() {
            let m = &r.matches;
            if let (Some(s), Some(d)) = (m.src, m.dst)
                && s.addr.is_ipv4() != d.addr.is_ipv4()
            {
                return Err(ClassifyConfigError::MixedFamilies {
                    rule: i,
                    src: s,
                    dst: d,
                });
            }
            for (field, v, max) in [("dscp", m.dscp.map(u16::from), 63), ("vlan", m.vlan, 4095)] {
                if let Some(v) = v.filter(|&v| v > max) {
                    return Err(ClassifyConfigError::OutOfRange {
                        rule: i,
                        field,
                        value: v,
                        max,
                    });
                }
            }
        }
        Ok(Classifier { rules, default })
    }

    /// The default class.
    pub fn default_class(&self) -> u16 {
        self.default
    }

    /// The class of `frame` (first matching rule, else the default).
    #[inline]
    pub fn classify(&self, frame: &[u8]) -> Classified {
        let (f, note) = fields(frame);
        let class = if note == Some(Anomaly::Runt) {
            self.default
        } else {
            self.rules
                .iter()
                .find(|r| r.matches.matches(&f))
                .map_or(self.default, |r| r.class)
        };
        Classified { class, note }
    }
}

#[cfg(test)]
mod tests;
