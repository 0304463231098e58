//! ICMPv4 "time exceeded in transit" (type 11, code 0, RFC 792) for a
//! frame whose TTL ran out, sent back out of the interface it came in on
//! from that interface's configured address (`router.ingress_address`,
//! `router.egress_address`). Only for untagged IPv4 frames; at most
//! [`MAX_PER_SECOND`] are built per second (a flood of expiring frames
//! must not become a flood of replies). IPv6 hop-limit expiry sends
//! nothing. The expired frame itself is counted as `ttl_expired` either
//! way.

use std::net::Ipv4Addr;

use pktsched_core::route::forward::ipv4_checksum;
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

/// Writes the time-exceeded frame for the expired `frame` into `out`
/// (from `mac`/`addr`, to the frame's sender); returns its length, or
/// `None` when none is due (not untagged IPv4, or `out` too small).
pub fn time_exceeded(frame: &[u8], mac: [u8; 6], addr: Ipv4Addr, out: &mut [u8]) -> Option<usize> {
    if frame.get(12..14)? != [0x08, 0x00] {
        return None;
    }
    let ip = &frame[14..];
    let hl = usize::from(*ip.first()? & 0x0F) * 4;
    let quoted = &ip.get(..(hl + QUOTED_DATA).min(ip.len()))?;
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
