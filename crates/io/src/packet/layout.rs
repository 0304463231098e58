//! The TPACKET ring layouts, read as byte slices: block and frame headers
//! (TPACKET_V3 receive blocks, TPACKET_V2 slots) and the copy of a frame
//! out of them. Pure and safe: every read is bounds-checked against the
//! block or slot, so a malformed header can never reach outside it.
#![forbid(unsafe_code)]

use crate::PacketBuf;

/// Offsets in `struct tpacket_block_desc` (version, offset_to_priv, then
/// `tpacket_hdr_v1`: block_status, num_pkts, offset_to_first_pkt, ...).
pub(super) const BLOCK_STATUS: usize = 8;
pub(super) const BLOCK_NUM_PKTS: usize = 12;
pub(super) const BLOCK_FIRST: usize = 16;
pub(super) const BLOCK_HEADER_LEN: usize = 48;
/// Offsets in `struct tpacket3_hdr`.
pub(super) const PKT_NEXT: usize = 0;
pub(super) const PKT_SEC: usize = 4;
pub(super) const PKT_NSEC: usize = 8;
pub(super) const PKT_SNAPLEN: usize = 12;
pub(super) const PKT_LEN: usize = 16;
pub(super) const PKT_STATUS: usize = 20;
pub(super) const PKT_MAC: usize = 24;
pub(super) const PKT_VLAN_TCI: usize = 32;
pub(super) const PKT_VLAN_TPID: usize = 36;
pub(super) const PKT_HEADER_LEN: usize = 48;
/// `struct tpacket2_hdr`: status, len, snaplen at 0, 4, 8; the frame
/// follows the aligned header.
pub(super) const TX_STATUS: usize = 0;
pub(super) const TX_LEN: usize = 4;
pub(super) const TX_SNAPLEN: usize = 8;
pub(super) const TX_DATA: usize = libc::TPACKET2_HDRLEN - std::mem::size_of::<libc::sockaddr_ll>();
/// Kicks retried on EAGAIN before a batch gives up.
pub(super) const TX_RETRIES: u32 = 2000;

pub(super) fn rd32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

pub(super) fn rd16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

/// A handed-over block's frame count and the offset of its first frame.
pub fn block_header(block: &[u8]) -> Option<(u32, usize)> {
    if block.len() < BLOCK_HEADER_LEN {
        return None;
    }
    Some((
        rd32(block, BLOCK_NUM_PKTS)?,
        rd32(block, BLOCK_FIRST)? as usize,
    ))
}

/// One frame of a block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RxFrame {
    /// Where the frame's bytes are in the block.
    pub data: std::ops::Range<usize>,
    /// The VLAN tag the kernel took out of the frame (TPID, TCI), if any.
    pub vlan: Option<(u16, u16)>,
    /// The frame on the wire was longer than the bytes the ring kept
    /// (`tp_len > tp_snaplen`: a GRO'd or oversize frame cut to the slot).
    pub truncated: bool,
    /// Offset of the next frame (0: none).
    pub next: usize,
    /// The kernel's receive time of the frame from the ring header
    /// (`tp_sec`, `tp_nsec`: CLOCK_REALTIME, the socket's default), in
    /// nanoseconds; 0 if the header has none.
    pub rx_real_ns: u64,
}

/// Nanoseconds of a ring header's `sec`, `nsec` pair.
pub(super) fn header_ns(h: &[u8], sec: usize, nsec: usize) -> u64 {
    let (s, n) = (rd32(h, sec).unwrap_or(0), rd32(h, nsec).unwrap_or(0));
    u64::from(s) * 1_000_000_000 + u64::from(n)
}

/// CLOCK_MONOTONIC minus CLOCK_REALTIME now, in nanoseconds: added to a
/// ring header's (realtime) receive time it gives the monotonic time of
/// [`crate::clock::monotonic_ns`]. Sampled once per receive call, so a
/// step of the wall clock (NTP, `date -s`) mis-times the frames that were
/// already in the ring when it happened (up to the ring's size), not
/// later ones; a stamp that would land after the read is clamped by the
/// router.
pub fn realtime_to_monotonic() -> i64 {
    let mono = crate::clock::monotonic_ns() as i64;
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0);
    mono - real
}

/// A ring header's realtime receive stamp as CLOCK_MONOTONIC, with the
/// offset of [`realtime_to_monotonic`]; 0 stays 0 (unknown), and so does
/// a stamp that would fall before the clock's start.
pub fn rx_monotonic_ns(rx_real_ns: u64, offset: i64) -> u64 {
    if rx_real_ns == 0 {
        return 0;
    }
    u64::try_from(rx_real_ns as i64 + offset).unwrap_or(0)
}

/// The frame whose header is at `at` in `block`, or `None` if the header
/// or the frame would reach outside the block.
pub fn frame_at(block: &[u8], at: usize) -> Option<RxFrame> {
    let h = block.get(at..at.checked_add(PKT_HEADER_LEN)?)?;
    let snaplen = rd32(h, PKT_SNAPLEN)? as usize;
    let wire_len = rd32(h, PKT_LEN)? as usize;
    let mac = usize::from(rd16(h, PKT_MAC)?);
    let status = rd32(h, PKT_STATUS)?;
    let start = at.checked_add(mac)?;
    let end = start.checked_add(snaplen)?;
    if end > block.len() {
        return None;
    }
    let vlan = (status & libc::TP_STATUS_VLAN_VALID != 0).then(|| {
        let tci = rd32(h, PKT_VLAN_TCI).unwrap_or(0) as u16;
        let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
            rd16(h, PKT_VLAN_TPID).unwrap_or(0x8100)
        } else {
            0x8100
        };
        (tpid, tci)
    });
    let next = rd32(h, PKT_NEXT)? as usize;
    Some(RxFrame {
        data: start..end,
        vlan,
        truncated: wire_len > snaplen,
        next: if next == 0 { 0 } else { at.checked_add(next)? },
        rx_real_ns: header_ns(h, PKT_SEC, PKT_NSEC),
    })
}

/// Offsets in `struct tpacket2_hdr` (receive side).
pub(super) const V2_MAC: usize = 12;
pub(super) const V2_STATUS: usize = 0;
pub(super) const V2_SEC: usize = 16;
pub(super) const V2_NSEC: usize = 20;
pub(super) const V2_VLAN_TCI: usize = 24;
pub(super) const V2_VLAN_TPID: usize = 26;
pub(super) const V2_HEADER_LEN: usize = 32;

/// The frame in a TPACKET_V2 receive slot, or `None` if its header points
/// outside the slot.
pub fn slot_frame(slot: &[u8]) -> Option<RxFrame> {
    let h = slot.get(..V2_HEADER_LEN)?;
    let snaplen = rd32(h, TX_SNAPLEN)? as usize;
    let wire_len = rd32(h, TX_LEN)? as usize;
    let start = usize::from(rd16(h, V2_MAC)?);
    let end = start.checked_add(snaplen)?;
    if end > slot.len() || start < V2_HEADER_LEN {
        return None;
    }
    let status = rd32(h, V2_STATUS)?;
    let vlan = (status & libc::TP_STATUS_VLAN_VALID != 0).then(|| {
        let tci = rd16(h, V2_VLAN_TCI).unwrap_or(0);
        let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
            rd16(h, V2_VLAN_TPID).unwrap_or(0x8100)
        } else {
            0x8100
        };
        (tpid, tci)
    });
    Some(RxFrame {
        data: start..end,
        vlan,
        truncated: wire_len > snaplen,
        next: 0,
        rx_real_ns: header_ns(h, V2_SEC, V2_NSEC),
    })
}

/// Copies `frame` into `buf`, putting a stripped VLAN tag back after the
/// MAC addresses. `false` if it does not fit.
pub fn copy_frame(bytes: &[u8], vlan: Option<(u16, u16)>, buf: &mut PacketBuf) -> bool {
    let Some((tpid, tci)) = vlan.filter(|_| bytes.len() >= 12) else {
        return buf.fill(bytes);
    };
    let total = bytes.len() + 4;
    let out = buf.spare();
    if out.len() < total {
        return false;
    }
    out[..12].copy_from_slice(&bytes[..12]);
    out[12..14].copy_from_slice(&tpid.to_be_bytes());
    out[14..16].copy_from_slice(&tci.to_be_bytes());
    out[16..total].copy_from_slice(&bytes[12..]);
    buf.set_len(total);
    true
}
