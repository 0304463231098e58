//! A classic BPF interpreter with the kernel's semantics for socket
//! programs, and a model of what the kernel's receive path hands a
//! fanout program ([`ingress`]), for testing compiled programs without a
//! kernel.
//!
//! Semantics: loads are big endian; a plain load `[k]` (and `[X + k]`)
//! counts from `skb->data`, `SKF_NET_OFF + n` from the network header,
//! `SKF_LL_OFF + n` from the MAC header; a load reaching outside the
//! packet ends the program with 0 (as the kernel does); division or
//! modulo by X = 0 returns 0; shifts by X use the low five bits.

use super::{Insn, Program, SKF_AD_OFF, SKF_LL_OFF, SKF_NET_OFF, anc, op};

/// A packet as a socket program sees it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Skb<'a> {
    /// The bytes from the MAC header to the end.
    pub bytes: &'a [u8],
    /// Offset of the network header in `bytes`.
    pub net: usize,
    /// Offset of `skb->data` in `bytes` (where plain loads and the length
    /// count from).
    pub data: usize,
    /// `skb->protocol` (host order).
    pub protocol: u16,
    /// A VLAN tag held in the metadata: (TPID, TCI).
    pub vlan: Option<(u16, u16)>,
}

/// A frame after the kernel's receive path (`eth_type_trans`,
/// `skb_vlan_untag`): the outer tag, if any, moved out of the bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IngressFrame {
    bytes: Vec<u8>,
    protocol: u16,
    vlan: Option<(u16, u16)>,
}

impl IngressFrame {
    /// The view a fanout program gets: data at the network header.
    pub fn skb(&self) -> Skb<'_> {
        Skb {
            bytes: &self.bytes,
            net: 14,
            data: 14,
            protocol: self.protocol,
            vlan: self.vlan,
        }
    }
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// `skb->protocol` for an EtherType field `et` followed by `next` (the
/// next two bytes): below 0x600 it is a length, and the kernel says
/// 802.3 (raw IPX, `0xffff` follows) or 802.2.
fn protocol_of(et: u16, next: Option<u16>) -> u16 {
    if et >= 0x600 {
        et
    } else if next == Some(0xffff) {
        0x0001
    } else {
        0x0004
    }
}

/// What the kernel hands a packet socket's fanout program for `frame`
/// received on an Ethernet device, or `None` if it never reaches one:
/// shorter than an Ethernet header, or tagged (0x8100 / 0x88a8) and too
/// short for `skb_vlan_untag` (which needs the tag and two more bytes).
pub fn ingress(frame: &[u8]) -> Option<IngressFrame> {
    let et = be16(frame, 12)?;
    if et == 0x8100 || et == 0x88a8 {
        let tci = be16(frame, 14)?;
        let inner = be16(frame, 16)?;
        be16(frame, 18)?;
        let mut bytes = Vec::with_capacity(frame.len() - 4);
        bytes.extend_from_slice(&frame[..12]);
        bytes.extend_from_slice(&frame[16..]);
        return Some(IngressFrame {
            protocol: protocol_of(inner, be16(frame, 18)),
            vlan: Some((et, tci)),
            bytes,
        });
    }
    Some(IngressFrame {
        protocol: protocol_of(et, be16(frame, 14)),
        vlan: None,
        bytes: frame.to_vec(),
    })
}

/// Reads `size` bytes at `offset` as the kernel resolves it (see the
/// module docs); `None` outside the packet.
fn load(skb: &Skb<'_>, offset: i32, size: usize) -> Option<u32> {
    let at = if offset >= 0 {
        skb.data.checked_add(offset as usize)?
    } else if offset >= SKF_NET_OFF {
        skb.net.checked_add((offset - SKF_NET_OFF) as usize)?
    } else if offset >= SKF_LL_OFF {
        (offset - SKF_LL_OFF) as usize
    } else {
        return None;
    };
    let b = skb.bytes.get(at..at.checked_add(size)?)?;
    Some(b.iter().fold(0u32, |v, &x| (v << 8) | u32::from(x)))
}

fn ancillary(skb: &Skb<'_>, which: u32) -> u32 {
    match which {
        anc::PROTOCOL => u32::from(skb.protocol),
        anc::VLAN_TAG => skb.vlan.map_or(0, |(_, tci)| u32::from(tci)),
        anc::VLAN_TAG_PRESENT => u32::from(skb.vlan.is_some()),
        anc::VLAN_TPID => skb.vlan.map_or(0, |(tpid, _)| u32::from(tpid)),
        _ => 0,
    }
}

fn size_of(code: u16) -> usize {
    match code & 0x18 {
        op::H => 2,
        op::B => 1,
        _ => 4,
    }
}

fn alu(o: u16, a: u32, v: u32) -> Option<u32> {
    Some(match o {
        op::ADD => a.wrapping_add(v),
        op::SUB => a.wrapping_sub(v),
        op::MUL => a.wrapping_mul(v),
        op::DIV => a.checked_div(v)?,
        op::MOD => a.checked_rem(v)?,
        op::OR => a | v,
        op::AND => a & v,
        op::LSH => a.wrapping_shl(v),
        op::RSH => a.wrapping_shr(v),
        op::XOR => a ^ v,
        _ => a.wrapping_neg(),
    })
}

/// Runs `prog` on `skb` and returns its result. A validated program
/// jumps forward only, so this takes at most `prog.len()` steps.
pub fn run(prog: &Program, skb: &Skb<'_>) -> u32 {
    let insns: &[Insn] = prog.insns();
    let (mut a, mut x) = (0u32, 0u32);
    let mut mem = [0u32; super::MEM_WORDS as usize];
    let mut pc = 0;
    while let Some(i) = insns.get(pc) {
        pc += 1;
        let k = i.k;
        let operand = if i.code & op::X != 0 { x } else { k };
        match i.code & 0x07 {
            op::LD => {
                a = match i.code & 0xe0 {
                    op::IMM => k,
                    op::MEM => mem[k as usize % mem.len()],
                    op::LEN => skb.bytes.len().saturating_sub(skb.data) as u32,
                    op::ABS if (k as i32) < 0 && k as i32 >= SKF_AD_OFF => {
                        ancillary(skb, k.wrapping_sub(SKF_AD_OFF as u32))
                    }
                    op::ABS => match load(skb, k as i32, size_of(i.code)) {
                        Some(v) => v,
                        None => return 0,
                    },
                    _ => match load(skb, x.wrapping_add(k) as i32, size_of(i.code)) {
                        Some(v) => v,
                        None => return 0,
                    },
                }
            }
            op::LDX => {
                x = match i.code & 0xe0 {
                    op::IMM => k,
                    op::MEM => mem[k as usize % mem.len()],
                    op::LEN => skb.bytes.len().saturating_sub(skb.data) as u32,
                    _ => match load(skb, k as i32, 1) {
                        Some(v) => 4 * (v & 0xf),
                        None => return 0,
                    },
                }
            }
            op::ST => mem[k as usize % mem.len()] = a,
            op::STX => mem[k as usize % mem.len()] = x,
            op::ALU => match alu(i.code & 0xf0, a, operand) {
                Some(v) => a = v,
                None => return 0,
            },
            op::JMP => {
                let taken = match i.code & 0xf0 {
                    op::JA => {
                        pc += k as usize;
                        continue;
                    }
                    op::JEQ => a == operand,
                    op::JGT => a > operand,
                    op::JGE => a >= operand,
                    _ => a & operand != 0,
                };
                pc += usize::from(if taken { i.jt } else { i.jf });
            }
            op::RET => return if i.code & op::A != 0 { a } else { k },
            _ => {
                if i.code & op::TXA != 0 {
                    a = x;
                } else {
                    x = a;
                }
            }
        }
    }
    0
}
