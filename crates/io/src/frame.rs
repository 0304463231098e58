//! Building Ethernet/IP/UDP frames (tests, fuzzing seeds, generators),
//! finding the UDP payload again ([`udp_payload`]), and the payload
//! [`Stamp`] a generator writes and a sink reads to measure loss,
//! reordering and one-way latency.

use std::net::IpAddr;

/// A UDP frame to build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UdpSpec {
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// An 802.1Q tag with this VLAN id.
    pub vlan: Option<u16>,
    /// Source address (the family of both addresses must agree).
    pub src_ip: IpAddr,
    /// Destination address.
    pub dst_ip: IpAddr,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// DSCP.
    pub dscp: u8,
    /// TTL / hop limit.
    pub ttl: u8,
    /// UDP payload.
    pub payload: Vec<u8>,
}

/// The Internet checksum of `data` added to `sum`, folded and inverted.
pub fn internet_checksum(data: &[u8], mut sum: u32) -> u16 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Builds the frame into `buf`; returns its length, or `None` if it does
/// not fit or the address families differ.
pub fn build_udp(buf: &mut [u8], s: &UdpSpec) -> Option<usize> {
    let l3 = 14 + if s.vlan.is_some() { 4 } else { 0 };
    let udp_len = 8 + s.payload.len();
    let (ip_len, ethertype) = match (s.src_ip, s.dst_ip) {
        (IpAddr::V4(_), IpAddr::V4(_)) => (20, 0x0800u16),
        (IpAddr::V6(_), IpAddr::V6(_)) => (40, 0x86DD),
        _ => return None,
    };
    let total = l3 + ip_len + udp_len;
    let out = buf.get_mut(..total)?;
    out[0..6].copy_from_slice(&s.dst_mac);
    out[6..12].copy_from_slice(&s.src_mac);
    if let Some(v) = s.vlan {
        out[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        out[14..16].copy_from_slice(&(v & 0x0fff).to_be_bytes());
    }
    out[l3 - 2..l3].copy_from_slice(&ethertype.to_be_bytes());
    let l4 = l3 + ip_len;
    // UDP header; checksum below.
    out[l4..l4 + 2].copy_from_slice(&s.sport.to_be_bytes());
    out[l4 + 2..l4 + 4].copy_from_slice(&s.dport.to_be_bytes());
    out[l4 + 4..l4 + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    out[l4 + 6..l4 + 8].copy_from_slice(&[0, 0]);
    out[l4 + 8..].copy_from_slice(&s.payload);
    match (s.src_ip, s.dst_ip) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            let h = &mut out[l3..l4];
            h[0] = 0x45;
            h[1] = s.dscp << 2;
            h[2..4].copy_from_slice(&((20 + udp_len) as u16).to_be_bytes());
            h[4..8].copy_from_slice(&[0, 0, 0x40, 0]); // id 0, DF
            h[8] = s.ttl;
            h[9] = 17;
            h[10..12].copy_from_slice(&[0, 0]);
            h[12..16].copy_from_slice(&src.octets());
            h[16..20].copy_from_slice(&dst.octets());
            let c = internet_checksum(h, 0);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            // UDP checksum 0: none (allowed for IPv4).
        }
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            let tclass = u32::from(s.dscp) << 2;
            let first = (6u32 << 28) | (tclass << 20);
            let h = &mut out[l3..l4];
            h[0..4].copy_from_slice(&first.to_be_bytes());
            h[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            h[6] = 17;
            h[7] = s.ttl;
            h[8..24].copy_from_slice(&src.octets());
            h[24..40].copy_from_slice(&dst.octets());
            // Pseudo-header: addresses, length, next header.
            let mut sum = 0u32;
            for chunk in src.octets().chunks(2).chain(dst.octets().chunks(2)) {
                sum += u32::from(u16::from_be_bytes([chunk[0], chunk[1]]));
            }
            sum += udp_len as u32 + 17;
            let c = match internet_checksum(&out[l4..], sum) {
                0 => 0xffff,
                c => c,
            };
            out[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
        }
        _ => return None,
    }
    Some(total)
}

/// The UDP payload of an Ethernet frame built like [`build_udp`]'s: up
/// to two VLAN tags, IPv4 (options skipped by IHL, not a later fragment)
/// or IPv6 with UDP as the next header (no extension headers), clamped to
/// the UDP length. `None` for anything else. A slow-path helper for sinks
/// and tests (the classifier is the hot path's parser).
pub fn udp_payload(frame: &[u8]) -> Option<&[u8]> {
    let be16 = |at: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]))
    };
    let mut l3 = 14;
    let mut ethertype = be16(12)?;
    for _ in 0..2 {
        if ethertype == 0x8100 || ethertype == 0x88a8 {
            ethertype = be16(l3 + 2)?;
            l3 += 4;
        }
    }
    let l4 = match ethertype {
        0x0800 => {
            let h = frame.get(l3..l3 + 20)?;
            let ihl = usize::from(h[0] & 0x0f) * 4;
            let later_fragment = u16::from_be_bytes([h[6], h[7]]) & 0x1fff != 0;
            if h[0] >> 4 != 4 || ihl < 20 || h[9] != 17 || later_fragment {
                return None;
            }
            l3 + ihl
        }
        0x86dd => {
            let h = frame.get(l3..l3 + 40)?;
            if h[0] >> 4 != 6 || h[6] != 17 {
                return None;
            }
            l3 + 40
        }
        _ => return None,
    };
    let udp_len = usize::from(be16(l4 + 4)?);
    let end = (l4 + udp_len.max(8)).min(frame.len());
    frame.get(l4 + 8..end)
}

/// The stamp at the start of a generated UDP payload: flow, sequence
/// number and send time (CLOCK_MONOTONIC ns, see
/// [`crate::clock::monotonic_ns`]), so a sink in another namespace
/// computes loss, reordering and one-way latency.
///
/// Wire format, [`Stamp::LEN`] = 18 bytes, little endian: the magic
/// `"P1"`, flow (u16), sequence number (48 bits), send time (u64). The
/// same as `pktsched gen` / `pktsched sink` use, and short enough that a
/// minimal 60-byte IPv4 frame (14 + 20 + 8 + 18) carries one; hence the
/// 16-bit flow and 48-bit sequence number (8.9 years at 1 M frames/s).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Stamp {
    /// The generator's flow number.
    pub flow: u16,
    /// Sequence number within the flow, from 0 (only the low 48 bits are
    /// carried).
    pub seq: u64,
    /// Send time, CLOCK_MONOTONIC ns.
    pub tx_ns: u64,
}

impl Stamp {
    /// The first two bytes of a stamp.
    pub const MAGIC: [u8; 2] = *b"P1";
    /// Encoded length.
    pub const LEN: usize = 18;
    /// Largest sequence number carried.
    pub const MAX_SEQ: u64 = (1 << 48) - 1;

    /// Writes the stamp at the start of `payload`; `false` (nothing
    /// written) if it is shorter than [`Stamp::LEN`].
    pub fn write(&self, payload: &mut [u8]) -> bool {
        let Some(out) = payload.get_mut(..Self::LEN) else {
            return false;
        };
        let seq = (self.seq & Self::MAX_SEQ).to_le_bytes();
        out[0..2].copy_from_slice(&Self::MAGIC);
        out[2..4].copy_from_slice(&self.flow.to_le_bytes());
        out[4..10].copy_from_slice(&seq[..6]);
        out[10..18].copy_from_slice(&self.tx_ns.to_le_bytes());
        true
    }

    /// The stamp at the start of `payload`, if there is one.
    pub fn read(payload: &[u8]) -> Option<Stamp> {
        let b = payload.get(..Self::LEN)?;
        if b[0..2] != Self::MAGIC {
            return None;
        }
        let mut seq = [0u8; 8];
        seq[..6].copy_from_slice(&b[4..10]);
        let mut tx = [0u8; 8];
        tx.copy_from_slice(&b[10..18]);
        Some(Stamp {
            flow: u16::from_le_bytes([b[2], b[3]]),
            seq: u64::from_le_bytes(seq),
            tx_ns: u64::from_le_bytes(tx),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(src: &str, dst: &str, vlan: Option<u16>, payload: Vec<u8>) -> UdpSpec {
        UdpSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            vlan,
            src_ip: src.parse().expect("ip"),
            dst_ip: dst.parse().expect("ip"),
            sport: 1000,
            dport: 5000,
            dscp: 46,
            ttl: 64,
            payload,
        }
    }

    #[test]
    fn ipv6_udp_checksum_agrees_with_etherparse() {
        for len in [0usize, 1, 17, 18, 200] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let s = spec("2001:db8::1", "2001:db8:ffff::2", Some(7), payload.clone());
            let mut buf = [0u8; 512];
            let n = build_udp(&mut buf, &s).expect("fits");
            assert_eq!(n, 18 + 40 + 8 + len);
            let p = etherparse::SlicedPacket::from_ethernet(&buf[..n]).expect("parses");
            let Some(etherparse::NetSlice::Ipv6(ip)) = &p.net else {
                panic!("not IPv6")
            };
            let Some(etherparse::TransportSlice::Udp(udp)) = &p.transport else {
                panic!("not UDP")
            };
            assert_eq!(udp.payload(), &payload[..]);
            let want = udp
                .to_header()
                .calc_checksum_ipv6(&ip.header().to_header(), udp.payload())
                .expect("small");
            assert_eq!(udp.checksum(), want, "payload length {len}");
            assert_eq!(ip.header().traffic_class() >> 2, 46);
            assert_eq!(udp_payload(&buf[..n]), Some(&payload[..]));
        }
        let mixed = spec("2001:db8::1", "198.18.0.1", None, vec![]);
        assert!(build_udp(&mut [0u8; 128], &mixed).is_none());
    }

    #[test]
    fn stamps_round_trip_inside_a_frame() {
        let stamp = Stamp {
            flow: 3,
            seq: Stamp::MAX_SEQ,
            tx_ns: 987_654_321_000,
        };
        let mut payload = vec![0u8; Stamp::LEN];
        assert!(stamp.write(&mut payload));
        assert!(!stamp.write(&mut [0u8; Stamp::LEN - 1]));
        let s = spec("198.18.0.1", "198.18.0.2", None, payload);
        let mut buf = [0u8; 128];
        let n = build_udp(&mut buf, &s).expect("fits");
        assert_eq!(n, 60, "a minimal frame carries a stamp");
        let got = udp_payload(&buf[..n]).and_then(Stamp::read);
        assert_eq!(got, Some(stamp));
        // Padding after the datagram (a 60-byte minimum) is not payload.
        let short = spec("198.18.0.1", "198.18.0.2", None, vec![1, 2]);
        let mut pad = [0u8; 60];
        build_udp(&mut pad, &short).expect("fits");
        assert_eq!(udp_payload(&pad), Some(&[1u8, 2][..]));
        // Sequence numbers wrap at 48 bits; foreign payloads are no stamp.
        let wide = Stamp {
            seq: Stamp::MAX_SEQ + 5,
            ..stamp
        };
        let mut p = [0u8; 32];
        assert!(wide.write(&mut p));
        assert_eq!(Stamp::read(&p).map(|s| s.seq), Some(4));
        p[1] = b'2';
        assert_eq!(Stamp::read(&p), None);
        assert_eq!(Stamp::read(&p[..5]), None);
        assert_eq!(udp_payload(&buf[..20]), None);
        assert_eq!(udp_payload(&[]), None);
    }

    #[test]
    fn ipv4_header_checksum_verifies_to_zero() {
        let spec = UdpSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            vlan: None,
            src_ip: "198.18.0.1".parse().expect("ip"),
            dst_ip: "198.18.0.2".parse().expect("ip"),
            sport: 1000,
            dport: 5000,
            dscp: 46,
            ttl: 64,
            payload: vec![7; 18],
        };
        let mut buf = [0u8; 128];
        let n = build_udp(&mut buf, &spec).expect("fits");
        assert_eq!(n, 60);
        assert_eq!(internet_checksum(&buf[14..34], 0), 0);
        assert!(build_udp(&mut [0u8; 59], &spec).is_none());
    }
}
