//! Classic BPF (`struct sock_filter` programs): an assembler with labels,
//! the kernel's load-time checks, an interpreter ([`interp`]) and a
//! compiler from the classifier's rules to a program that returns the
//! class index ([`compile()`]). Pure code, no `unsafe`; the socket side is
//! in [`crate::fanout`].
//!
//! # What a fanout program sees
//!
//! A `PACKET_FANOUT_CBPF` program runs in `packet_rcv_fanout`
//! (net/packet/af_packet.c, `fanout_demux_bpf`), before the chosen
//! socket's `tpacket_rcv` pushes the MAC header back. On ingress the
//! packet is then as `__netif_receive_skb_core` left it:
//!
//! * `skb->data` is at the **network header** (`eth_type_trans` pulled the
//!   14-byte MAC header; the core resets the network header to
//!   `skb->data`), so a plain absolute load `[k]` reads the byte `k` bytes
//!   into the IP header, and the packet length (`BPF_LEN`) counts from
//!   there;
//! * an outer VLAN tag (802.1Q or 802.1ad) is **not in the data**: the
//!   core moved it into the metadata (`skb_vlan_untag`), readable as
//!   `SKF_AD_VLAN_TAG_PRESENT` / `SKF_AD_VLAN_TAG` / `SKF_AD_VLAN_TPID`;
//!   a second tag stays in the data, at the network header;
//! * the EtherType after the outer tag is `SKF_AD_PROTOCOL` (for a
//!   length field below 0x600 the kernel's 802.2/802.3 value: not IP).
//!
//! The compiled program therefore loads the EtherType with
//! `SKF_AD_OFF + SKF_AD_PROTOCOL`, header fields at `SKF_NET_OFF + n`,
//! and checks lengths against `BPF_LEN` taken as counted from the network
//! header (true on ingress). It is an ingress program: the fanout group
//! is opened with `PACKET_FANOUT_FLAG_IGNORE_OUTGOING`, so it never sees
//! outgoing frames (whose data starts at the MAC header). A load past
//! the end makes a classic program return 0; the compiler checks every
//! length first, so it never relies on that.
//!
//! # The compiled program
//!
//! A parse section fills scratch memory (`M[]`) with the fields the rules
//! test — outer VLAN id, IP family, DSCP, protocol, ports, the offset of
//! the IP header — following the userspace classifier's walk exactly (up
//! to two tags, IPv4 options, fragments, up to four IPv6 extension
//! headers; see [`crate::classify`] for the rules on odd frames); a field
//! a frame does not have holds a value no rule can equal (`u32::MAX`).
//! Then each rule is a run of tests that jumps to the next rule on the
//! first mismatch and otherwise returns the rule's class; the end returns
//! the default class. Addresses are compared word by word under the
//! prefix mask, loaded from the IP header. Program size: about 290
//! instructions of parsing (the six IPv6 header steps are unrolled:
//! classic BPF has no loops), then 1 to 33 per rule (3 for one
//! field, 10 for a source /8 and a port, 33 with every field and two
//! IPv6 /128s): within the kernel's 4096, 115 rules of the largest kind,
//! over a thousand of one field each.
//!
//! Frames the kernel never hands to a packet socket (shorter than an
//! Ethernet header; tagged and too short for `skb_vlan_untag`, under 20
//! bytes) have no counterpart; every other frame gets the class
//! [`crate::classify::Classifier::classify`] gives it, which the tests
//! check on random and mutated frames with [`interp::ingress`], a model
//! of the kernel's receive path, and [`interp::run`].
//!
//! # The assembler
//!
//! [`Asm`] takes instructions and jumps to [`Label`]s; [`Asm::finish`]
//! resolves them. Classic jumps go forward only; a conditional jump's
//! offsets are 8 bits, so one whose target is further than 255
//! instructions is rewritten as `jcc 0,1; ja T; ja F` (the unconditional
//! `ja` has 32 bits), repeated until every jump fits. [`Program::new`]
//! applies the kernel's `bpf_check_classic` checks: 1..=4096
//! instructions, known opcodes, jumps inside the program, scratch memory
//! indices below 16 and written on every path before being read, no
//! constant division by zero or shift by 32 or more, known ancillary
//! loads, a return at the end.

use std::fmt;

mod asm;
pub mod compile;
pub mod interp;

pub use asm::{Asm, AsmError, Label, NEXT, Target};
pub use compile::{CompileError, compile};

/// Opcode parts (linux/filter.h / linux/bpf_common.h).
pub mod op {
    /// Load into A.
    pub const LD: u16 = 0x00;
    /// Load into X.
    pub const LDX: u16 = 0x01;
    /// Store A into `M[k]`.
    pub const ST: u16 = 0x02;
    /// Store X into `M[k]`.
    pub const STX: u16 = 0x03;
    /// Arithmetic on A.
    pub const ALU: u16 = 0x04;
    /// Jumps.
    pub const JMP: u16 = 0x05;
    /// Return.
    pub const RET: u16 = 0x06;
    /// TAX / TXA.
    pub const MISC: u16 = 0x07;
    /// 32-bit load.
    pub const W: u16 = 0x00;
    /// 16-bit load.
    pub const H: u16 = 0x08;
    /// 8-bit load.
    pub const B: u16 = 0x10;
    /// Constant.
    pub const IMM: u16 = 0x00;
    /// Packet at k.
    pub const ABS: u16 = 0x20;
    /// Packet at X + k.
    pub const IND: u16 = 0x40;
    /// Scratch memory `M[k]`.
    pub const MEM: u16 = 0x60;
    /// Packet length.
    pub const LEN: u16 = 0x80;
    /// `4 * (P[k] & 0xf)` into X.
    pub const MSH: u16 = 0xa0;
    /// A + operand.
    pub const ADD: u16 = 0x00;
    /// A - operand.
    pub const SUB: u16 = 0x10;
    /// A * operand.
    pub const MUL: u16 = 0x20;
    /// A / operand.
    pub const DIV: u16 = 0x30;
    /// A | operand.
    pub const OR: u16 = 0x40;
    /// A & operand.
    pub const AND: u16 = 0x50;
    /// A << operand.
    pub const LSH: u16 = 0x60;
    /// A >> operand.
    pub const RSH: u16 = 0x70;
    /// -A.
    pub const NEG: u16 = 0x80;
    /// A % operand.
    pub const MOD: u16 = 0x90;
    /// A ^ operand.
    pub const XOR: u16 = 0xa0;
    /// Unconditional jump by k.
    pub const JA: u16 = 0x00;
    /// Jump if A == operand.
    pub const JEQ: u16 = 0x10;
    /// Jump if A > operand.
    pub const JGT: u16 = 0x20;
    /// Jump if A >= operand.
    pub const JGE: u16 = 0x30;
    /// Jump if A & operand != 0.
    pub const JSET: u16 = 0x40;
    /// Operand k.
    pub const K: u16 = 0x00;
    /// Operand X.
    pub const X: u16 = 0x08;
    /// Return A.
    pub const A: u16 = 0x10;
    /// X = A.
    pub const TAX: u16 = 0x00;
    /// A = X.
    pub const TXA: u16 = 0x80;
}

/// `SKF_AD_OFF`: ancillary loads are at `SKF_AD_OFF + SKF_AD_*`.
pub const SKF_AD_OFF: i32 = -0x1000;
/// `SKF_NET_OFF`: loads at `SKF_NET_OFF + n` read n bytes into the
/// network header.
pub const SKF_NET_OFF: i32 = -0x10_0000;
/// `SKF_LL_OFF`: loads at `SKF_LL_OFF + n` read n bytes into the MAC
/// header.
pub const SKF_LL_OFF: i32 = -0x20_0000;

/// Ancillary data (`SKF_AD_*`, added to [`SKF_AD_OFF`]).
pub mod anc {
    /// `skb->protocol`: the EtherType after a stripped outer tag.
    pub const PROTOCOL: u32 = 0;
    /// Packet type (host, broadcast, other host, ...).
    pub const PKTTYPE: u32 = 4;
    /// Receiving interface index.
    pub const IFINDEX: u32 = 8;
    /// `skb->mark`.
    pub const MARK: u32 = 20;
    /// Receive queue.
    pub const QUEUE: u32 = 24;
    /// Device type.
    pub const HATYPE: u32 = 28;
    /// Receive hash.
    pub const RXHASH: u32 = 32;
    /// Current CPU.
    pub const CPU: u32 = 36;
    /// The stripped VLAN tag's TCI (priority, DEI, id).
    pub const VLAN_TAG: u32 = 44;
    /// 1 if a VLAN tag was stripped into the metadata.
    pub const VLAN_TAG_PRESENT: u32 = 48;
    /// Payload offset (flow dissector).
    pub const PAY_OFFSET: u32 = 52;
    /// A random number.
    pub const RANDOM: u32 = 56;
    /// The stripped VLAN tag's TPID.
    pub const VLAN_TPID: u32 = 60;
    /// Those this module accepts (loads of others are refused).
    pub const KNOWN: [u32; 13] = [
        PROTOCOL,
        PKTTYPE,
        IFINDEX,
        MARK,
        QUEUE,
        HATYPE,
        RXHASH,
        CPU,
        VLAN_TAG,
        VLAN_TAG_PRESENT,
        PAY_OFFSET,
        RANDOM,
        VLAN_TPID,
    ];
}

/// Most instructions in a program (`BPF_MAXINSNS`).
pub const MAX_INSNS: usize = 4096;
/// Scratch memory words (`BPF_MEMWORDS`).
pub const MEM_WORDS: u32 = 16;

/// One instruction, laid out as `struct sock_filter`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Insn {
    /// Opcode.
    pub code: u16,
    /// Jump offset if true (conditional jumps).
    pub jt: u8,
    /// Jump offset if false.
    pub jf: u8,
    /// Operand.
    pub k: u32,
}

impl Insn {
    /// A non-jump instruction.
    pub const fn stmt(code: u16, k: u32) -> Insn {
        Insn {
            code,
            jt: 0,
            jf: 0,
            k,
        }
    }
}

/// Why a program is not valid (the kernel would refuse it with EINVAL).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProgramError {
    /// Empty or longer than [`MAX_INSNS`].
    #[error("{0} instructions: allowed 1..=4096")]
    Length(usize),
    /// An opcode classic BPF does not have.
    #[error("instruction {at}: unknown opcode {code:#06x}")]
    Opcode {
        /// Index.
        at: usize,
        /// Opcode.
        code: u16,
    },
    /// A jump past the end.
    #[error("instruction {at}: jump target {target} is past the end ({len} instructions)")]
    JumpRange {
        /// Index.
        at: usize,
        /// Where it would go.
        target: usize,
        /// Program length.
        len: usize,
    },
    /// A scratch memory index of 16 or more.
    #[error("instruction {at}: scratch memory M[{k}]: allowed M[0]..M[15]")]
    MemIndex {
        /// Index.
        at: usize,
        /// Operand.
        k: u32,
    },
    /// A scratch word read on some path before anything was stored in it.
    #[error("instruction {at}: M[{k}] may be read before it is written")]
    MemUnset {
        /// Index.
        at: usize,
        /// Word.
        k: u32,
    },
    /// Division or modulo by the constant 0, or a shift by 32 or more.
    #[error("instruction {at}: constant operand {k} is not allowed for this operation")]
    BadConstant {
        /// Index.
        at: usize,
        /// Operand.
        k: u32,
    },
    /// An ancillary load this module does not know.
    #[error("instruction {at}: unknown ancillary load SKF_AD_OFF + {offset}")]
    Ancillary {
        /// Index.
        at: usize,
        /// Offset after SKF_AD_OFF.
        offset: u32,
    },
    /// The last instruction is not a return.
    #[error("the last instruction must be a return")]
    NoReturn,
}

/// A validated program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    insns: Vec<Insn>,
}

fn opcode_known(code: u16) -> bool {
    use op::*;
    match code & 0x07 {
        LD => matches!(
            code & !0x07,
            c if c == W | ABS || c == H | ABS || c == B | ABS
                || c == W | IND || c == H | IND || c == B | IND
                || c == W | LEN || c == W | IMM || c == W | MEM
        ),
        LDX => {
            matches!(code & !0x07, c if c == W | IMM || c == W | MEM || c == W | LEN || c == B | MSH)
        }
        ST | STX => code & !0x07 == 0,
        ALU => {
            let (o, src) = (code & 0xf0, code & 0x08);
            let extra = code & !0xff;
            extra == 0
                && match o {
                    NEG => src == 0,
                    ADD | SUB | MUL | DIV | OR | AND | LSH | RSH | MOD | XOR => true,
                    _ => false,
                }
        }
        JMP => {
            let (o, src) = (code & 0xf0, code & 0x08);
            code & !0xff == 0
                && match o {
                    JA => src == 0,
                    JEQ | JGT | JGE | JSET => true,
                    _ => false,
                }
        }
        RET => code == RET | K || code == RET | A,
        _ => code == MISC | TAX || code == MISC | TXA,
    }
}

/// The successors of instruction `at` (none for a return).
fn successors(at: usize, i: &Insn) -> [Option<usize>; 2] {
    let next = at + 1;
    match i.code & 0x07 {
        op::RET => [None, None],
        op::JMP if i.code & 0xf0 == op::JA => [Some(next + i.k as usize), None],
        op::JMP => [
            Some(next + usize::from(i.jt)),
            Some(next + usize::from(i.jf)),
        ],
        _ => [Some(next), None],
    }
}

fn check_insn(at: usize, i: &Insn, len: usize) -> Result<(), ProgramError> {
    if !opcode_known(i.code) {
        return Err(ProgramError::Opcode { at, code: i.code });
    }
    let class = i.code & 0x07;
    let mode = i.code & 0xe0;
    let mem = (class == op::LD || class == op::LDX) && mode == op::MEM
        || class == op::ST
        || class == op::STX;
    if mem && i.k >= MEM_WORDS {
        return Err(ProgramError::MemIndex { at, k: i.k });
    }
    if class == op::ALU && i.code & op::X == 0 {
        let o = i.code & 0xf0;
        if (matches!(o, op::DIV | op::MOD) && i.k == 0)
            || (matches!(o, op::LSH | op::RSH) && i.k >= 32)
        {
            return Err(ProgramError::BadConstant { at, k: i.k });
        }
    }
    if class == op::LD && mode == op::ABS && i.k as i32 >= SKF_AD_OFF && (i.k as i32) < 0 {
        let offset = i.k.wrapping_sub(SKF_AD_OFF as u32);
        if !anc::KNOWN.contains(&offset) {
            return Err(ProgramError::Ancillary { at, offset });
        }
    }
    for target in successors(at, i).into_iter().flatten() {
        if target >= len {
            return Err(ProgramError::JumpRange { at, target, len });
        }
    }
    Ok(())
}

impl Program {
    /// Checks `insns` as the kernel would (see the module docs).
    pub fn new(insns: Vec<Insn>) -> Result<Program, ProgramError> {
        let len = insns.len();
        if len == 0 || len > MAX_INSNS {
            return Err(ProgramError::Length(len));
        }
        if insns[len - 1].code & 0x07 != op::RET {
            return Err(ProgramError::NoReturn);
        }
        for (at, i) in insns.iter().enumerate() {
            check_insn(at, i, len)?;
        }
        check_memory(&insns)?;
        Ok(Program { insns })
    }

    /// The instructions.
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    /// Never true (a program has a return at least).
    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }
}

/// Every read of `M[k]` must follow a store to `M[k]` on every path to it.
/// Jumps go forward, so one pass in order sees every predecessor first.
fn check_memory(insns: &[Insn]) -> Result<(), ProgramError> {
    // Words surely written on entry to each instruction; all ones until a
    // predecessor is seen (an unreachable instruction is not checked).
    let mut valid = vec![u16::MAX; insns.len()];
    valid[0] = 0;
    for (at, i) in insns.iter().enumerate() {
        let mut now = valid[at];
        let class = i.code & 0x07;
        let reads = (class == op::LD || class == op::LDX) && i.code & 0xe0 == op::MEM;
        if reads && now & (1 << i.k) == 0 {
            return Err(ProgramError::MemUnset { at, k: i.k });
        }
        if class == op::ST || class == op::STX {
            now |= 1 << i.k;
        }
        for s in successors(at, i).into_iter().flatten() {
            valid[s] &= now;
        }
    }
    Ok(())
}

impl fmt::Display for Program {
    /// One instruction a line: `index: code jt jf k`, in hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, i) in self.insns.iter().enumerate() {
            writeln!(
                f,
                "{n:4}: {:#06x} {:3} {:3} {:#010x}",
                i.code, i.jt, i.jf, i.k
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests;
