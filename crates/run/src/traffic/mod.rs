//! A traffic generator and sink of pktsched's own (`pktsched gen`,
//! `pktsched sink`): UDP flows over ordinary sockets, each datagram
//! carrying a [`Stamp`] (flow, sequence number, send time on
//! CLOCK_MONOTONIC), so the sink measures per-flow throughput, loss,
//! reordering and one-way latency — every network namespace of a machine
//! shares that clock.
//!
//! The kernel has no pktgen here and trafgen aborts when a veth pushes
//! back; a UDP socket simply blocks, so the generator's rate is what left.

pub mod gen_flows;
pub mod generator;
#[allow(unsafe_code)]
mod ifmac;
pub mod ring_out;
pub mod sink;

/// The stamp at the start of every generated datagram: 18 bytes, so a
/// minimal 60-byte IPv4 frame (14 + 20 + 8 + 18) still carries one.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// The generator's flow number.
    pub flow: u16,
    /// Sequence number within the flow, from 0 (48 bits: 8.9 years at
    /// 1 M datagrams/s).
    pub seq: u64,
    /// When it was sent, CLOCK_MONOTONIC ns.
    pub tx_ns: u64,
}

impl Stamp {
    /// Marks a pktsched datagram.
    pub const MAGIC: [u8; 2] = *b"P1";
    /// Encoded length.
    pub const LEN: usize = 18;
    /// Largest sequence number.
    pub const MAX_SEQ: u64 = (1 << 48) - 1;

    /// Writes the stamp at the start of `buf` (at least [`Stamp::LEN`]).
    pub fn write(&self, buf: &mut [u8]) -> bool {
        let Some(b) = buf.get_mut(..Self::LEN) else {
            return false;
        };
        b[..2].copy_from_slice(&Self::MAGIC);
        b[2..4].copy_from_slice(&self.flow.to_le_bytes());
        b[4..10].copy_from_slice(&(self.seq & Self::MAX_SEQ).to_le_bytes()[..6]);
        b[10..18].copy_from_slice(&self.tx_ns.to_le_bytes());
        true
    }

    /// Reads a stamp, if `buf` starts with one.
    pub fn read(buf: &[u8]) -> Option<Stamp> {
        let b = buf.get(..Self::LEN)?;
        if b[..2] != Self::MAGIC {
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
    use super::Stamp;

    #[test]
    fn stamps_round_trip_and_foreign_data_is_not_one() {
        let s = Stamp {
            flow: 7,
            seq: Stamp::MAX_SEQ - 3,
            tx_ns: 123_456_789_012,
        };
        let mut buf = [0u8; 64];
        assert!(s.write(&mut buf));
        assert_eq!(Stamp::read(&buf), Some(s));
        assert_eq!(Stamp::read(&buf[..Stamp::LEN - 1]), None);
        buf[0] = b'X';
        assert_eq!(Stamp::read(&buf), None);
        assert!(!s.write(&mut [0u8; 8]));
    }
}
