//! One forwarding step on an Ethernet frame, in place.
//!
//! The rule for every frame, in this order (the first that applies
//! decides, and each outcome is counted in [`ForwardStats`]):
//!
//! 1. Ethernet II, at most one 802.1Q tag; an EtherType other than IPv4
//!    or IPv6 → `NotIp`. A frame too short for its headers → `Truncated`.
//! 2. IPv4: version ≠ 4 → `BadVersion`; IHL < 5 → `BadIhl`; header
//!    longer than the frame → `Truncated`; header checksum wrong →
//!    `BadChecksum`; total length < header length or longer than the
//!    frame → `BadTotalLength` (bytes after it are Ethernet padding, left
//!    alone); a fragment (MF set or offset ≠ 0) → `Fragment` (fragments
//!    are not forwarded: an ACL could not see their ports). Options are
//!    forwarded as they are.
//! 3. IPv6: version ≠ 6 → `BadVersion`; payload longer than the frame →
//!    `BadTotalLength`; a next header that is an extension header
//!    (hop-by-hop, routing, fragment, destination options, AH, mobility,
//!    HIP, shim6, experimental) → `Ipv6ExtHeader`.
//! 4. The access list denies → `AclDenied`; no route → `NoRoute` (every
//!    frame that passes the checks costs its access-list rules, whatever
//!    its TTL: a flood of expiring frames costs what any other does).
//! 5. A martian destination or source → `Martian`: IPv4 0.0.0.0/8,
//!    127.0.0.0/8, and 224.0.0.0 and above (multicast, class E, the
//!    limited broadcast: not one host); IPv6 `::`, `::1`, fe80::/10
//!    (link-local) and ff00::/8 (multicast). A router forwards none of them, even with a default
//!    route (RFC 1812 §5.3.7, RFC 4291 §2.5.6); they are looked at only
//!    once a route was found, so an unrouted one stays `NoRoute`.
//! 6. TTL / hop limit ≤ 1 → [`Verdict::TimeExceeded`] (the caller may
//!    answer with ICMP; nothing here builds one). The ACL and the route
//!    come first, as in Linux: an expiring frame to an unrouted
//!    destination is `NoRoute`, not time exceeded.
//! 7. Otherwise the TTL (hop limit) is decremented — for IPv4 with the
//!    checksum updated incrementally (RFC 1624, eqn. 3) — and the verdict
//!    is [`Verdict::Forward`] with the route's value.

use super::acl::{Acl, Action, Addr};
use super::lpm::{Ipv4Lpm, Ipv6Lpm};

/// Why a frame was not forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Shorter than its headers.
    Truncated,
    /// Not IPv4 or IPv6.
    NotIp,
    /// IP version field disagrees with the EtherType.
    BadVersion,
    /// IPv4 IHL below 5.
    BadIhl,
    /// IPv4 total length or IPv6 payload length inconsistent with the frame.
    BadTotalLength,
    /// IPv4 header checksum wrong.
    BadChecksum,
    /// An IPv4 fragment.
    Fragment,
    /// An IPv6 extension header.
    Ipv6ExtHeader,
    /// Denied by the access list.
    AclDenied,
    /// No route to the destination.
    NoRoute,
    /// A destination or source no router forwards to or from (loopback,
    /// multicast, broadcast, class E, unspecified, IPv6 link-local).
    Martian,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 11] = [
        DropReason::Truncated,
        DropReason::NotIp,
        DropReason::BadVersion,
        DropReason::BadIhl,
        DropReason::BadTotalLength,
        DropReason::BadChecksum,
        DropReason::Fragment,
        DropReason::Ipv6ExtHeader,
        DropReason::AclDenied,
        DropReason::NoRoute,
        DropReason::Martian,
    ];
}

/// What to do with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict<V> {
    /// Send it on: the route's value (next hop, port…); the TTL or hop
    /// limit is already decremented.
    Forward(V),
    /// TTL or hop limit was ≤ 1: not forwarded; ICMP time exceeded due.
    TimeExceeded,
    /// Dropped for a reason.
    Drop(DropReason),
}

/// Counters of [`Router::forward`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForwardStats {
    /// Frames forwarded.
    pub forwarded: u64,
    /// Frames with TTL / hop limit ≤ 1.
    pub time_exceeded: u64,
    /// Drops by reason, indexed like [`DropReason::ALL`].
    pub drops: [u64; DropReason::ALL.len()],
    /// Access-list rules checked, all frames together.
    pub acl_rules_checked: u64,
}

impl ForwardStats {
    /// Drops for one reason.
    pub fn dropped(&self, r: DropReason) -> u64 {
        self.drops[r as usize]
    }
}

const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86DD;
const ETH_VLAN: u16 = 0x8100;

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Ones' complement sum of 16-bit words, folded.
pub fn ones_sum(bytes: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in bytes.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    s as u16
}

/// The IPv4 header checksum of `hdr` computed from scratch (the
/// checksum field, bytes 10..12, counted as zero).
pub fn ipv4_checksum(hdr: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for (i, c) in hdr.chunks(2).enumerate() {
        if i != 5 {
            s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
    }
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    !(s as u16)
}

/// RFC 1624 eqn. 3: the checksum after a 16-bit word changes from `old`
/// to `new`: `HC' = ~(~HC + ~m + m')`.
pub fn checksum_update(hc: u16, old: u16, new: u16) -> u16 {
    let mut s = u32::from(!hc) + u32::from(!old) + u32::from(new);
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    !(s as u16)
}

fn is_ipv6_ext(nh: u8) -> bool {
    matches!(nh, 0 | 43 | 44 | 51 | 60 | 135 | 139 | 140 | 253 | 254)
}

/// An IPv4 address no router forwards to or from (not one host, RFC 1812
/// §5.3.7): 0.0.0.0/8 ("this network"), 127.0.0.0/8 (loopback), and
/// 224.0.0.0 and above (multicast, class E, the limited broadcast).
pub fn is_martian_v4(addr: u32) -> bool {
    let top = addr >> 24;
    top == 0 || top == 127 || top >= 224
}

/// An IPv6 destination no router forwards to: `::` (unspecified), `::1`
/// (loopback), fe80::/10 (link-local) and ff00::/8 (multicast).
pub fn is_martian_v6(dst: u128) -> bool {
    dst <= 1 || (dst >> 118) == 0x3FA || (dst >> 120) == 0xFF
}

/// Routes for both families, an access list and counters.
#[derive(Debug, Clone, Default)]
pub struct Router<V: Copy> {
    /// IPv4 routes.
    pub v4: Ipv4Lpm<V>,
    /// IPv6 routes.
    pub v6: Ipv6Lpm<V>,
    /// The access list checked for every frame that passes the checks.
    pub acl: Acl,
    stats: ForwardStats,
}

impl<V: Copy> Router<V> {
    /// No routes, an empty access list.
    pub fn new() -> Self {
        Router {
            v4: Ipv4Lpm::new(),
            v6: Ipv6Lpm::new(),
            acl: Acl::new(),
            stats: ForwardStats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> &ForwardStats {
        &self.stats
    }

    /// Forwards one frame in place (see the module docs for the rule).
    pub fn forward(&mut self, frame: &mut [u8]) -> Verdict<V> {
        let v = self.decide(frame);
        match v {
            Verdict::Forward(_) => self.stats.forwarded += 1,
            Verdict::TimeExceeded => self.stats.time_exceeded += 1,
            Verdict::Drop(r) => self.stats.drops[r as usize] += 1,
        }
        v
    }

    fn decide(&mut self, frame: &mut [u8]) -> Verdict<V> {
        use DropReason::*;
        if frame.len() < 14 {
            return Verdict::Drop(Truncated);
        }
        let (mut ty, mut l3) = (be16(frame, 12), 14);
        if ty == ETH_VLAN {
            if frame.len() < 18 {
                return Verdict::Drop(Truncated);
            }
            (ty, l3) = (be16(frame, 16), 18);
        }
        match ty {
            ETH_IPV4 => self.ipv4(&mut frame[l3..]),
            ETH_IPV6 => self.ipv6(&mut frame[l3..]),
            _ => Verdict::Drop(NotIp),
        }
    }

    fn acl_denies(&mut self, src: Addr, dst: Addr) -> bool {
        let (action, checked) = self.acl.check(src, dst);
        self.stats.acl_rules_checked += checked as u64;
        action == Action::Deny
    }

    fn ipv4(&mut self, p: &mut [u8]) -> Verdict<V> {
        use DropReason::*;
        if p.len() < 20 {
            return Verdict::Drop(Truncated);
        }
        if p[0] >> 4 != 4 {
            return Verdict::Drop(BadVersion);
        }
        let hl = usize::from(p[0] & 0x0F) * 4;
        if hl < 20 {
            return Verdict::Drop(BadIhl);
        }
        if hl > p.len() {
            return Verdict::Drop(Truncated);
        }
        if ones_sum(&p[..hl]) != 0xFFFF {
            return Verdict::Drop(BadChecksum);
        }
        let total = usize::from(be16(p, 2));
        if total < hl || total > p.len() {
            return Verdict::Drop(BadTotalLength);
        }
        if be16(p, 6) & 0x3FFF != 0 {
            return Verdict::Drop(Fragment);
        }
        let src = u32::from_be_bytes([p[12], p[13], p[14], p[15]]);
        let dst = u32::from_be_bytes([p[16], p[17], p[18], p[19]]);
        if self.acl_denies(Addr::V4(src), Addr::V4(dst)) {
            return Verdict::Drop(AclDenied);
        }
        let Some((route, _)) = self.v4.lookup(dst) else {
            return Verdict::Drop(NoRoute);
        };
        if is_martian_v4(dst) || is_martian_v4(src) {
            return Verdict::Drop(Martian);
        }
        if p[8] <= 1 {
            return Verdict::TimeExceeded;
        }
        let old = be16(p, 8);
        p[8] -= 1;
        let hc = checksum_update(be16(p, 10), old, be16(p, 8));
        p[10..12].copy_from_slice(&hc.to_be_bytes());
        Verdict::Forward(route)
    }

    fn ipv6(&mut self, p: &mut [u8]) -> Verdict<V> {
        use DropReason::*;
        if p.len() < 40 {
            return Verdict::Drop(Truncated);
        }
        if p[0] >> 4 != 6 {
            return Verdict::Drop(BadVersion);
        }
        if 40 + usize::from(be16(p, 4)) > p.len() {
            return Verdict::Drop(BadTotalLength);
        }
        if is_ipv6_ext(p[6]) {
            return Verdict::Drop(Ipv6ExtHeader);
        }
        let addr = |at: usize| {
            let mut b = [0u8; 16];
            b.copy_from_slice(&p[at..at + 16]);
            u128::from_be_bytes(b)
        };
        let (src, dst) = (addr(8), addr(24));
        if self.acl_denies(Addr::V6(src), Addr::V6(dst)) {
            return Verdict::Drop(AclDenied);
        }
        let Some((route, _)) = self.v6.lookup(dst) else {
            return Verdict::Drop(NoRoute);
        };
        if is_martian_v6(dst) || is_martian_v6(src) {
            return Verdict::Drop(Martian);
        }
        if p[7] <= 1 {
            return Verdict::TimeExceeded;
        }
        p[7] -= 1;
        Verdict::Forward(route)
    }
}
