//! ICMPv4 "time exceeded in transit" (type 11, code 0, RFC 792) for a
//! frame whose TTL ran out, sent back out of the interface it came in on
//! from that interface's configured address (`router.ingress_address`,
//! `router.egress_address`); for IPv6 an ICMPv6 "time exceeded, hop limit
//! exceeded in transit" (type 3, code 0, RFC 4443) from
//! `router.ingress_address6` / `router.egress_address6`, quoting as much
//! of the expired packet as keeps the reply within the IPv6 minimum MTU,
//! its checksum over the IPv6 pseudo-header. Only for untagged frames;
//! at most [`MAX_PER_SECOND`] of both kinds together are built per second
//! (a flood of expiring frames must not become a flood of replies). The
//! expired frame itself is counted as `ttl_expired` either way.
//!
//! None is sent where RFC 1812 §4.3.2.7 and RFC 4443 §2.4(e) forbid one
//! ([`answerable`]): for an ICMP error (IPv4 types 3, 4, 5, 11, 12;
//! ICMPv6 types below 128), for a source that is not one host (IPv4
//! 0.0.0.0/8, 127.0.0.0/8, 224.0.0.0/4 and above; IPv6 `::`, `::1`,
//! ff00::/8) and for a multicast or broadcast destination (IPv4
//! 224.0.0.0/4 and above, IPv6 ff00::/8).

use std::net::{Ipv4Addr, Ipv6Addr};

use pktsched_core::route::forward::{ipv4_checksum, is_martian_v4};
use pktsched_io::frame::internet_checksum;

/// Most time-exceeded messages per second.
pub const MAX_PER_SECOND: u32 = 1000;

/// Bytes of the offending datagram quoted after its IP header (RFC 792).
const QUOTED_DATA: usize = 8;

/// A token bucket of [`MAX_PER_SECOND`] per second, as deep.
#[derive(Debug, Clone)]
pub struct RateLimit {
    tokens: u32,
    last_ns: u64,
}

impl RateLimit {
    /// Full.
    pub fn new(now_ns: u64) -> RateLimit {
        RateLimit {
            tokens: MAX_PER_SECOND,
            last_ns: now_ns,
        }
    }

    /// Takes a token if there is one.
    pub fn allow(&mut self, now_ns: u64) -> bool {
        let per = 1_000_000_000 / u64::from(MAX_PER_SECOND);
        let earned = now_ns.saturating_sub(self.last_ns) / per;
        if earned > 0 {
            self.tokens = (u64::from(self.tokens) + earned).min(u64::from(MAX_PER_SECOND)) as u32;
            self.last_ns += earned * per;
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

/// ICMPv4 error types (RFC 1812 §4.3.2.7 names them): destination
/// unreachable, source quench, redirect, time exceeded, parameter problem.
const ICMP_ERRORS: [u8; 5] = [3, 4, 5, 11, 12];

/// May an ICMP (ICMPv6) error answer this untagged IPv4 (IPv6) frame?
/// Not for an ICMP error, a source that is not one host, or a multicast
/// or broadcast destination (see the module docs); not for anything else
/// or a frame too short to tell.
pub fn answerable(frame: &[u8]) -> bool {
    match frame.get(12..14) {
        Some([0x08, 0x00]) => answerable_v4(frame.get(14..).unwrap_or(&[])).unwrap_or(false),
        Some([0x86, 0xDD]) => answerable_v6(frame.get(14..).unwrap_or(&[])).unwrap_or(false),
        _ => false,
    }
}

fn answerable_v4(ip: &[u8]) -> Option<bool> {
    let hl = usize::from(*ip.first()? & 0x0F) * 4;
    let addr = |at: usize| Some(u32::from_be_bytes(ip.get(at..at + 4)?.try_into().ok()?));
    // Not one host either way: 0/8, 127/8, 224.0.0.0 and above.
    if is_martian_v4(addr(12)?) || is_martian_v4(addr(16)?) {
        return Some(false);
    }
    if ip[9] == 1 {
        return Some(!ICMP_ERRORS.contains(ip.get(hl)?));
    }
    Some(true)
}

/// The IPv6 address at byte `at` of the header `ip`, if it is there.
fn ipv6_at(ip: &[u8], at: usize) -> Option<Ipv6Addr> {
    let b: [u8; 16] = ip.get(at..at + 16)?.try_into().ok()?;
    Some(Ipv6Addr::from(b))
}

fn answerable_v6(ip: &[u8]) -> Option<bool> {
    let (src, dst) = (ipv6_at(ip, 8)?, ipv6_at(ip, 24)?);
    if src.is_unspecified() || src.is_loopback() || src.is_multicast() || dst.is_multicast() {
        return Some(false);
    }
    if ip[6] == 58 {
        return Some(*ip.get(40)? >= 128);
    }
    Some(true)
}

/// Writes the time-exceeded frame for the expired `frame` into `out`
/// (from `mac`/`addr`, to the frame's sender); returns its length, or
/// `None` when none is due (not untagged IPv4, not [`answerable`], or
/// `out` too small). The quote is the header and 8 bytes of data, within
/// the datagram's total length (not the Ethernet padding after it).
pub fn time_exceeded(frame: &[u8], mac: [u8; 6], addr: Ipv4Addr, out: &mut [u8]) -> Option<usize> {
    if frame.get(12..14)? != [0x08, 0x00] || !answerable(frame) {
        return None;
    }
    let ip = &frame[14..];
    let hl = usize::from(*ip.first()? & 0x0F) * 4;
    let declared = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
    let quoted = ip.get(..(hl + QUOTED_DATA).min(declared).min(ip.len()))?;
    let total = 20 + 8 + quoted.len();
    let len = 14 + total;
    let o = out.get_mut(..len)?;
    o[0..6].copy_from_slice(&frame[6..12]);
    o[6..12].copy_from_slice(&mac);
    o[12..14].copy_from_slice(&[0x08, 0x00]);
    let h = &mut o[14..34];
    h.fill(0);
    h[0] = 0x45;
    h[1] = 0xC0; // DSCP CS6, network control
    h[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    h[8] = 64;
    h[9] = 1; // ICMP
    h[12..16].copy_from_slice(&addr.octets());
    h[16..20].copy_from_slice(ip.get(12..16)?);
    let c = ipv4_checksum(h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    let icmp = &mut o[34..];
    icmp[..8].fill(0);
    icmp[0] = 11;
    icmp[8..].copy_from_slice(quoted);
    let c = internet_checksum(icmp, 0);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    Some(len)
}

/// The IPv6 minimum MTU (RFC 8200): an ICMPv6 error is no larger.
const IPV6_MIN_MTU: usize = 1280;

/// The ICMPv6 checksum of `msg` (its checksum field zero) from `src` to
/// `dst`: the Internet checksum over the pseudo-header (source,
/// destination, upper-layer length, next header 58) and the message.
pub fn icmpv6_checksum(src: &Ipv6Addr, dst: &Ipv6Addr, msg: &[u8]) -> u16 {
    let mut sum = 0u32;
    for a in [src, dst] {
        for w in a.segments() {
            sum += u32::from(w);
        }
    }
    let len = msg.len() as u32;
    sum += (len >> 16) + (len & 0xFFFF) + 58;
    internet_checksum(msg, sum)
}

/// Writes the ICMPv6 time-exceeded frame for the expired IPv6 `frame`
/// into `out` (from `mac`/`addr`, to the frame's sender); returns its
/// length, or `None` when none is due (not untagged IPv6, truncated, not
/// [`answerable`], or `out` too small).
pub fn time_exceeded6(frame: &[u8], mac: [u8; 6], addr: Ipv6Addr, out: &mut [u8]) -> Option<usize> {
    if frame.get(12..14)? != [0x86, 0xDD] {
        return None;
    }
    let ip = frame.get(14..)?;
    let src = ipv6_at(ip, 8)?;
    if !answerable(frame) {
        return None;
    }
    let declared = 40 + usize::from(u16::from_be_bytes([ip[4], ip[5]]));
    let quoted = &ip[..declared.min(ip.len()).min(IPV6_MIN_MTU - 40 - 8)];
    let payload = 8 + quoted.len();
    let len = 14 + 40 + payload;
    let o = out.get_mut(..len)?;
    o[0..6].copy_from_slice(&frame[6..12]);
    o[6..12].copy_from_slice(&mac);
    o[12..14].copy_from_slice(&[0x86, 0xDD]);
    let h = &mut o[14..54];
    h[0..4].copy_from_slice(&[0x6C, 0x00, 0x00, 0x00]); // traffic class CS6
    h[4..6].copy_from_slice(&(payload as u16).to_be_bytes());
    h[6] = 58; // ICMPv6
    h[7] = 64;
    h[8..24].copy_from_slice(&addr.octets());
    h[24..40].copy_from_slice(&src.octets());
    let icmp = &mut o[54..];
    icmp[..8].fill(0);
    icmp[0] = 3;
    icmp[8..].copy_from_slice(quoted);
    let c = icmpv6_checksum(&addr, &src, icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    Some(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_limit_refills_at_its_rate_and_no_deeper() {
        let mut r = RateLimit::new(0);
        let granted = (0..2 * MAX_PER_SECOND).filter(|_| r.allow(0)).count();
        assert_eq!(granted, MAX_PER_SECOND as usize);
        assert!(!r.allow(500_000), "half a token is none");
        assert!(r.allow(1_000_000));
        assert!(!r.allow(1_000_000));
        let later = (0..2 * MAX_PER_SECOND)
            .filter(|_| r.allow(10_000_000_000))
            .count();
        assert_eq!(later, MAX_PER_SECOND as usize);
    }

    /// An IPv6 UDP frame from 2001:db8:1::2 to `dst`, hop limit 1, with
    /// `data` bytes of payload.
    fn v6_frame(dst: Ipv6Addr, data: usize) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 40 + 8 + data];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 1, 1]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 1, 2]);
        f[12..14].copy_from_slice(&[0x86, 0xDD]);
        f[14] = 0x60;
        f[18..20].copy_from_slice(&((8 + data) as u16).to_be_bytes());
        f[20] = 17;
        f[21] = 1;
        let src: Ipv6Addr = "2001:db8:1::2".parse().expect("addr");
        f[22..38].copy_from_slice(&src.octets());
        f[38..54].copy_from_slice(&dst.octets());
        for (i, b) in f[54..].iter_mut().enumerate() {
            *b = i as u8;
        }
        f
    }

    /// The one's-complement sum written out from its definition (RFC
    /// 1071), byte by byte, over pseudo-header and message.
    fn checksum_from_scratch(src: &[u8], dst: &[u8], msg: &[u8]) -> u16 {
        let mut all = Vec::new();
        all.extend_from_slice(src);
        all.extend_from_slice(dst);
        all.extend_from_slice(&(msg.len() as u32).to_be_bytes());
        all.extend_from_slice(&[0, 0, 0, 58]);
        all.extend_from_slice(msg);
        if all.len() % 2 == 1 {
            all.push(0);
        }
        let mut sum: u64 = all
            .chunks(2)
            .map(|c| (u64::from(c[0]) << 8) | u64::from(c[1]))
            .sum();
        while sum > 0xFFFF {
            sum = (sum & 0xFFFF) + (sum >> 16);
        }
        !(sum as u16)
    }

    #[test]
    fn an_icmpv6_time_exceeded_has_the_pseudo_header_checksum() {
        let router: Ipv6Addr = "2001:db8:1::1".parse().expect("addr");
        let expired = v6_frame("2001:db8:2::2".parse().expect("addr"), 21);
        let mut out = [0u8; 2048];
        let len = time_exceeded6(&expired, [2, 0, 0, 0, 0, 9], router, &mut out).expect("due");
        let f = &out[..len];
        assert_eq!(len, 14 + 40 + 8 + (expired.len() - 14));
        assert_eq!(f[0..6], expired[6..12], "to the sender's MAC");
        assert_eq!(f[6..12], [2, 0, 0, 0, 0, 9]);
        assert_eq!(f[12..14], [0x86, 0xDD]);
        let ip = &f[14..54];
        assert_eq!(ip[0] >> 4, 6);
        assert_eq!(usize::from(u16::from_be_bytes([ip[4], ip[5]])), len - 54);
        assert_eq!((ip[6], ip[7]), (58, 64));
        assert_eq!(ip[8..24], router.octets());
        assert_eq!(ip[24..40], expired[22..38], "back to the source");
        let icmp = &f[54..];
        assert_eq!((icmp[0], icmp[1]), (3, 0), "hop limit exceeded in transit");
        assert_eq!(icmp[4..8], [0; 4], "unused");
        assert_eq!(&icmp[8..], &expired[14..], "the whole packet quoted");
        let mut zeroed = icmp.to_vec();
        zeroed[2..4].fill(0);
        let want = checksum_from_scratch(&ip[8..24], &ip[24..40], &zeroed);
        assert_eq!(u16::from_be_bytes([icmp[2], icmp[3]]), want);
        let mut wrong = zeroed.clone();
        wrong[2..4].copy_from_slice(&want.to_be_bytes());
        wrong[9] ^= 1;
        assert_ne!(checksum_from_scratch(&ip[8..24], &ip[24..40], &wrong), 0);
    }

    #[test]
    fn an_icmpv6_reply_stays_within_the_minimum_mtu() {
        let router: Ipv6Addr = "2001:db8:1::1".parse().expect("addr");
        let expired = v6_frame("2001:db8:2::2".parse().expect("addr"), 1400);
        let mut out = [0u8; 2048];
        let len = time_exceeded6(&expired, [2; 6], router, &mut out).expect("due");
        assert_eq!(len - 14, IPV6_MIN_MTU);
        let icmp = &out[54..len];
        let mut zeroed = icmp.to_vec();
        zeroed[2..4].fill(0);
        let want = checksum_from_scratch(&out[22..38], &out[38..54], &zeroed);
        assert_eq!(u16::from_be_bytes([icmp[2], icmp[3]]), want);
        assert_eq!(&icmp[8..], &expired[14..14 + IPV6_MIN_MTU - 48]);
    }

    #[test]
    fn no_icmpv6_for_multicast_or_a_small_buffer() {
        let router: Ipv6Addr = "2001:db8:1::1".parse().expect("addr");
        let mut out = [0u8; 2048];
        let to_group = v6_frame("ff02::1".parse().expect("addr"), 8);
        assert_eq!(time_exceeded6(&to_group, [2; 6], router, &mut out), None);
        let mut from_none = v6_frame("2001:db8:2::2".parse().expect("addr"), 8);
        from_none[22..38].fill(0);
        assert_eq!(time_exceeded6(&from_none, [2; 6], router, &mut out), None);
        let ok = v6_frame("2001:db8:2::2".parse().expect("addr"), 8);
        assert_eq!(time_exceeded6(&ok, [2; 6], router, &mut out[..60]), None);
        assert_eq!(time_exceeded6(&ok[..40], [2; 6], router, &mut out), None);
        let v4 = [0u8; 80];
        assert_eq!(time_exceeded6(&v4, [2; 6], router, &mut out), None);
    }

    /// An untagged IPv4 frame, protocol `proto`, whose data is `data`,
    /// padded with `pad` zero bytes after the datagram (Ethernet padding).
    fn v4_frame(src: [u8; 4], dst: [u8; 4], proto: u8, data: &[u8], pad: usize) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 1, 1]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 1, 2]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&((20 + data.len()) as u16).to_be_bytes());
        f[22] = 1;
        f[23] = proto;
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        let c = ipv4_checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(data);
        f.extend(std::iter::repeat_n(0, pad));
        f
    }

    const HOST: [u8; 4] = [10, 1, 0, 2];
    const FAR: [u8; 4] = [10, 2, 0, 2];

    #[test]
    fn no_icmp_error_answers_an_icmp_error() {
        let mut out = [0u8; 256];
        let router = Ipv4Addr::new(10, 1, 0, 1);
        let icmp = |ty: u8| v4_frame(HOST, FAR, 1, &[ty, 0, 0, 0, 0, 0, 0, 0], 0);
        for ty in [3, 4, 5, 11, 12] {
            assert!(!answerable(&icmp(ty)), "type {ty}");
            assert_eq!(time_exceeded(&icmp(ty), [2; 6], router, &mut out), None);
        }
        for ty in [0, 8, 13, 14] {
            assert!(answerable(&icmp(ty)), "type {ty} is no error");
            assert!(time_exceeded(&icmp(ty), [2; 6], router, &mut out).is_some());
        }
        let no_type = v4_frame(HOST, FAR, 1, &[], 0);
        assert!(!answerable(&no_type), "an ICMP message too short to tell");
        assert!(answerable(&v4_frame(HOST, FAR, 17, &[11; 8], 0)), "UDP");
        let v6_icmp = |ty: u8| {
            let mut f = v6_frame("2001:db8:2::2".parse().expect("addr"), 0);
            f[20] = 58;
            f[54] = ty;
            f
        };
        let r6: Ipv6Addr = "2001:db8:1::1".parse().expect("addr");
        for ty in [1, 2, 3, 4, 100, 127] {
            assert!(!answerable(&v6_icmp(ty)), "ICMPv6 type {ty}");
            assert_eq!(time_exceeded6(&v6_icmp(ty), [2; 6], r6, &mut out), None);
        }
        for ty in [128, 129, 200] {
            assert!(answerable(&v6_icmp(ty)), "ICMPv6 type {ty} is no error");
        }
    }

    #[test]
    fn no_icmp_to_a_source_or_for_a_destination_that_is_not_one_host() {
        let mut out = [0u8; 256];
        let router = Ipv4Addr::new(10, 1, 0, 1);
        let udp = |src, dst| v4_frame(src, dst, 17, &[0; 8], 0);
        for src in [
            [0, 0, 0, 0],
            [0, 9, 9, 9],
            [127, 0, 0, 1],
            [224, 0, 0, 1],
            [239, 1, 1, 1],
            [240, 0, 0, 1],
            [255, 255, 255, 255],
        ] {
            assert!(!answerable(&udp(src, FAR)), "source {src:?}");
            assert_eq!(
                time_exceeded(&udp(src, FAR), [2; 6], router, &mut out),
                None
            );
        }
        for dst in [[224, 0, 0, 5], [239, 255, 255, 250], [255, 255, 255, 255]] {
            assert!(!answerable(&udp(HOST, dst)), "destination {dst:?}");
        }
        assert!(answerable(&udp([223, 255, 255, 255], [1, 0, 0, 0])));
        let mut from_loopback = v6_frame("2001:db8:2::2".parse().expect("addr"), 8);
        from_loopback[22..38].copy_from_slice(&Ipv6Addr::LOCALHOST.octets());
        assert!(!answerable(&from_loopback));
        let mut from_group = from_loopback.clone();
        from_group[22] = 0xff;
        assert!(!answerable(&from_group));
    }

    #[test]
    fn the_ipv4_quote_ends_at_the_total_length_not_the_padding() {
        let mut out = [0u8; 256];
        let router = Ipv4Addr::new(10, 1, 0, 1);
        // 4 bytes of data, padded to Ethernet's 60-byte minimum.
        let f = v4_frame(HOST, FAR, 17, &[9, 9, 9, 9], 60 - 38);
        assert_eq!(f.len(), 60);
        let len = time_exceeded(&f, [2; 6], router, &mut out).expect("due");
        assert_eq!(len, 14 + 20 + 8 + 24, "the 24-byte datagram, no padding");
        assert_eq!(&out[42..len], &f[14..38]);
        assert_eq!(u16::from_be_bytes([out[16], out[17]]), 20 + 8 + 24);
        assert_eq!(internet_checksum(&out[34..len], 0), 0);
    }

    #[test]
    fn only_untagged_ipv4_gets_a_reply() {
        let mut out = [0u8; 256];
        let mut v6 = [0u8; 80];
        v6[12..14].copy_from_slice(&[0x86, 0xDD]);
        assert_eq!(
            time_exceeded(&v6, [2; 6], Ipv4Addr::LOCALHOST, &mut out),
            None
        );
        assert_eq!(
            time_exceeded(&[0u8; 5], [2; 6], Ipv4Addr::LOCALHOST, &mut out),
            None
        );
    }
}
