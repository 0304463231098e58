//! Building Ethernet/IP/UDP frames (tests, fuzzing seeds, generators).

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

#[cfg(test)]
mod tests {
    use super::*;

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
