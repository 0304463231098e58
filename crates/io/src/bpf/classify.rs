//! The frame classifier of [`crate::classify`] compiled to an XDP program:
//! the same fields read the same way, the same rule for odd frames, the
//! first matching rule's class (else the default). The class is written
//! into 4 bytes of XDP metadata in front of the frame (host byte order)
//! and the frame is redirected into the XSKMAP under the key [`Steer`]
//! names; with no socket under that key it goes on to the kernel's stack
//! (`XDP_PASS`).
//!
//! # How the fields are read
//!
//! Every header is read in place (direct packet access: no helper call)
//! at an offset computed as the userspace walk computes it, after a check
//! that the read ends within the frame (`data + offset + len ≤
//! data_end`, the check the verifier asks for); a read that would pass
//! the frame's end is not made, which is the userspace `truncated` rule
//! (the fields read so far still match). The program is loaded without
//! multi-buffer support, so the frame it sees is all in `data ..
//! data_end`. The IP header is copied to the program's stack, where the
//! rules read the addresses. Field
//! slots start "absent" (`u32::MAX`, which no VLAN id, protocol, DSCP or
//! port equals; address family 0), so a rule naming a field the frame
//! lacks never matches, as in userspace.
//!
//! | frame | here |
//! | --- | --- |
//! | under 14 bytes (`runt`) | default class (the kernel never hands XDP one) |
//! | up to two VLAN tags (0x8100, 0x88a8) | the outer VLAN id kept |
//! | IPv4 version ≠ 4 or IHL < 5 | only `vlan` can match |
//! | IPv4 fragment offset ≠ 0 | addresses, protocol, DSCP; no ports |
//! | IPv4 options | ports read after them (at IHL × 4) |
//! | IPv6 extension headers | the same bounded walk: hop-by-hop, routing, destination options, fragment; five headers looked at, then no protocol and no ports |
//! | ports | TCP, UDP, SCTP: both ports or none |
//!
//! Supported: every [`Match`] field. Limit: [`MAX_RULES`] rules (the
//! verifier's and the jumps' reach); more are refused by count.
//!
//! Registers: R6 the context, R7 the offset being read, R8 the ethertype
//! or next header, R9 the class; while the headers are read (no helper is
//! called then) R4 holds `data` and R5 `data_end`.

use super::insn::{Alu, Asm, Cond, Insn, Reg, Size};
use super::sys::{Map, Program};
use super::{BpfError, action, helper, xdp_md};
use crate::classify::{Classifier, IpPrefix, Match, PortRange, Rule};
use std::net::IpAddr;

/// Most rules compiled into one program.
pub const MAX_RULES: usize = 256;

/// Which XSKMAP key a classified frame is redirected to.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Steer {
    /// The class: one socket per class.
    ByClass,
    /// The class, for frames of this receive queue only (the sockets of
    /// a class group are bound to one queue, and the kernel drops a frame
    /// redirected to a socket of another queue); frames of the other
    /// queues go on to the kernel's stack unclassified.
    ByClassOnQueue(u32),
    /// The receive queue: one socket per queue, the class in the metadata.
    ByQueue,
}

// Stack slots (offsets from R10).
const FAM: i16 = -4;
const VLAN: i16 = -8;
const PROTO: i16 = -12;
const DSCP: i16 = -16;
const SPORT: i16 = -20;
const DPORT: i16 = -24;
/// 40 bytes: the IP header.
const HDR: i16 = -64;
/// 8 bytes: the receive stamp.
const STAMP: i16 = -72;
/// Bytes of metadata: the class, then the stamp.
pub const META_LEN: usize = 12;
const ABSENT: i32 = -1; // u32::MAX

/// The program's parts that need labels.
struct Gen {
    a: Asm,
    /// Rule evaluation starts here (with whatever fields were read).
    rules: super::insn::Label,
    /// The default class, without rules (runts).
    default: super::insn::Label,
}

impl Gen {
    /// `R1 = data + R7`, then to `fail` unless `len` bytes from R1 are in
    /// the frame (`R1 + len ≤ data_end`; R3 scratch). After it, R1 + 0 ..
    /// len can be read.
    fn check(&mut self, len: i32, fail: super::insn::Label) {
        self.a
            .mov64_reg(Reg::R1, Reg::R4)
            .alu64_reg(Alu::Add, Reg::R1, Reg::R7)
            .mov64_reg(Reg::R3, Reg::R1)
            .alu64_imm(Alu::Add, Reg::R3, len)
            .jmp_reg(Cond::Gt, Reg::R3, Reg::R5, fail);
    }

    /// `reg = be16 at R10 + at`.
    fn be16(&mut self, reg: Reg, at: i16) {
        self.a.ldx(Size::H, reg, Reg::R10, at).be(reg, 16);
    }

    /// `reg = be16 at R1 + at` (in the frame, after [`Gen::check`]).
    fn be16_pkt(&mut self, reg: Reg, at: i16) {
        self.a.ldx(Size::H, reg, Reg::R1, at).be(reg, 16);
    }

    /// Copies `len` bytes (a multiple of 4) from the frame at R1 (after
    /// [`Gen::check`]) to the stack at `dst` (8-aligned); R2 scratch.
    ///
    /// Four bytes at a time: the IP header starts at 14, 18 or 22, which
    /// with the 2 bytes of `NET_IP_ALIGN` the verifier assumes on a kernel
    /// that checks packet alignment (one without efficient unaligned
    /// access) is 4-aligned but not 8-aligned; 8-byte reads would get the
    /// program refused there.
    fn copy_to_stack(&mut self, dst: i16, len: i16) {
        for at in (0..len).step_by(4) {
            self.a
                .ldx(Size::W, Reg::R2, Reg::R1, at)
                .stx(Size::W, Reg::R10, dst + at, Reg::R2);
        }
    }

    fn init(&mut self) {
        self.a
            .mov64_reg(Reg::R6, Reg::R1)
            .call(helper::KTIME_GET_NS)
            .stx(Size::DW, Reg::R10, STAMP, Reg::R0);
        for slot in [VLAN, PROTO, DSCP, SPORT, DPORT] {
            self.a.st_imm(Size::W, Reg::R10, slot, ABSENT);
        }
        self.a.st_imm(Size::W, Reg::R10, FAM, 0);
        for i in 0..5 {
            self.a.st_imm(Size::DW, Reg::R10, HDR + 8 * i, 0);
        }
        self.a.ldx(Size::W, Reg::R4, Reg::R6, xdp_md::DATA).ldx(
            Size::W,
            Reg::R5,
            Reg::R6,
            xdp_md::DATA_END,
        );
    }

    /// Ethernet and up to two VLAN tags; leaves R7 at the L3 header and
    /// R8 the ethertype, then dispatches.
    fn ethernet(&mut self) {
        let (rules, default) = (self.rules, self.default);
        self.a.mov64_imm(Reg::R7, 12);
        self.check(2, default);
        self.be16_pkt(Reg::R8, 0);
        self.a.mov64_imm(Reg::R7, 14);
        let l3 = self.a.label();
        for tag in 0..2 {
            let is_tag = self.a.label();
            self.a.jmp_imm(Cond::Eq, Reg::R8, 0x8100, is_tag).jmp_imm(
                Cond::Ne,
                Reg::R8,
                0x88a8,
                l3,
            );
            self.a.bind(is_tag);
            self.check(4, rules);
            if tag == 0 {
                self.be16_pkt(Reg::R2, 0);
                self.a
                    .alu64_imm(Alu::And, Reg::R2, 0x0fff)
                    .stx(Size::W, Reg::R10, VLAN, Reg::R2);
            }
            self.be16_pkt(Reg::R8, 2);
            self.a.alu64_imm(Alu::Add, Reg::R7, 4);
        }
        self.a.bind(l3);
        let (v4, v6) = (self.a.label(), self.a.label());
        self.a
            .jmp_imm(Cond::Eq, Reg::R8, 0x0800, v4)
            .jmp_imm(Cond::Eq, Reg::R8, 0x86dd, v6)
            .ja(rules);
        self.a.bind(v4);
        self.ipv4();
        self.a.bind(v6);
        self.ipv6();
    }

    /// Reads the ports at R7 if the protocol in R2 has them.
    fn ports(&mut self, at: super::insn::Label) {
        let rules = self.rules;
        let read = self.a.label();
        self.a.bind(at);
        self.a
            .jmp_imm(Cond::Eq, Reg::R2, 6, read)
            .jmp_imm(Cond::Eq, Reg::R2, 17, read)
            .jmp_imm(Cond::Ne, Reg::R2, 132, rules);
        self.a.bind(read);
        self.check(4, rules);
        self.be16_pkt(Reg::R2, 0);
        self.a.stx(Size::W, Reg::R10, SPORT, Reg::R2);
        self.be16_pkt(Reg::R2, 2);
        self.a.stx(Size::W, Reg::R10, DPORT, Reg::R2).ja(rules);
    }

    fn ipv4(&mut self) {
        let rules = self.rules;
        self.check(20, rules);
        self.copy_to_stack(HDR, 20);
        self.a
            .ldx(Size::B, Reg::R1, Reg::R10, HDR)
            .mov64_reg(Reg::R2, Reg::R1)
            .alu64_imm(Alu::Rsh, Reg::R2, 4)
            .jmp_imm(Cond::Ne, Reg::R2, 4, rules)
            .alu64_imm(Alu::And, Reg::R1, 0xf)
            .jmp_imm(Cond::Lt, Reg::R1, 5, rules)
            .mov64_reg(Reg::R8, Reg::R1)
            .alu64_imm(Alu::Lsh, Reg::R8, 2)
            .ldx(Size::B, Reg::R2, Reg::R10, HDR + 1)
            .alu64_imm(Alu::Rsh, Reg::R2, 2)
            .stx(Size::W, Reg::R10, DSCP, Reg::R2)
            .ldx(Size::B, Reg::R2, Reg::R10, HDR + 9)
            .stx(Size::W, Reg::R10, PROTO, Reg::R2)
            .st_imm(Size::W, Reg::R10, FAM, 4);
        self.be16(Reg::R2, HDR + 6);
        self.a
            .alu64_imm(Alu::And, Reg::R2, 0x1fff)
            .jmp_imm(Cond::Ne, Reg::R2, 0, rules)
            .alu64_reg(Alu::Add, Reg::R7, Reg::R8)
            .ldx(Size::B, Reg::R2, Reg::R10, HDR + 9);
        let ports = self.a.label();
        self.a.ja(ports);
        self.ports(ports);
    }

    fn ipv6(&mut self) {
        let rules = self.rules;
        self.check(40, rules);
        self.copy_to_stack(HDR, 40);
        self.a
            .ldx(Size::B, Reg::R1, Reg::R10, HDR)
            .mov64_reg(Reg::R2, Reg::R1)
            .alu64_imm(Alu::Rsh, Reg::R2, 4)
            .jmp_imm(Cond::Ne, Reg::R2, 6, rules)
            .alu64_imm(Alu::And, Reg::R1, 0xf)
            .alu64_imm(Alu::Lsh, Reg::R1, 2)
            .ldx(Size::B, Reg::R2, Reg::R10, HDR + 1)
            .alu64_imm(Alu::Rsh, Reg::R2, 6)
            .alu64_reg(Alu::Or, Reg::R1, Reg::R2)
            .stx(Size::W, Reg::R10, DSCP, Reg::R1)
            .st_imm(Size::W, Reg::R10, FAM, 6)
            .ldx(Size::B, Reg::R8, Reg::R10, HDR + 6)
            .alu64_imm(Alu::Add, Reg::R7, 40);
        let ports = self.a.label();
        // The userspace walk looks at five headers (0..=MAX_EXT_HEADERS).
        for _ in 0..5 {
            let (ext, frag, next, last) = (
                self.a.label(),
                self.a.label(),
                self.a.label(),
                self.a.label(),
            );
            self.a
                .jmp_imm(Cond::Eq, Reg::R8, 0, ext)
                .jmp_imm(Cond::Eq, Reg::R8, 43, ext)
                .jmp_imm(Cond::Eq, Reg::R8, 60, ext)
                .jmp_imm(Cond::Eq, Reg::R8, 44, frag)
                .ja(last);
            self.a.bind(ext);
            self.check(2, rules);
            self.a
                .ldx(Size::B, Reg::R8, Reg::R1, 0)
                .ldx(Size::B, Reg::R2, Reg::R1, 1)
                .alu64_imm(Alu::Lsh, Reg::R2, 3)
                .alu64_imm(Alu::Add, Reg::R2, 8)
                .alu64_reg(Alu::Add, Reg::R7, Reg::R2)
                .ja(next);
            self.a.bind(frag);
            self.check(4, rules);
            self.a.ldx(Size::B, Reg::R8, Reg::R1, 0);
            self.be16_pkt(Reg::R2, 2);
            self.a
                .alu64_imm(Alu::Add, Reg::R7, 8)
                .alu64_imm(Alu::And, Reg::R2, 0xfff8)
                .jmp_imm(Cond::Eq, Reg::R2, 0, next)
                .stx(Size::W, Reg::R10, PROTO, Reg::R8)
                .ja(rules);
            // Any other header ends the walk: it is the protocol.
            self.a.bind(last);
            self.a
                .stx(Size::W, Reg::R10, PROTO, Reg::R8)
                .mov64_reg(Reg::R2, Reg::R8)
                .ja(ports);
            self.a.bind(next);
        }
        // Too many extension headers: no protocol, no ports.
        self.a.ja(rules);
        self.ports(ports);
    }

    /// `if (u32)(slot & mask) != value goto miss`.
    fn word(&mut self, slot: i16, mask: u32, value: u32, miss: super::insn::Label) {
        self.a.ldx(Size::W, Reg::R1, Reg::R10, slot);
        if mask != u32::MAX {
            self.a.alu32_imm(Alu::And, Reg::R1, mask as i32);
        }
        self.a.jmp32_imm(Cond::Ne, Reg::R1, value as i32, miss);
    }

    /// Address prefix `p` against the source (`src`) or destination.
    fn prefix(&mut self, p: &IpPrefix, src: bool, miss: super::insn::Label) {
        let (net, family, at): (Vec<u8>, i32, i16) = match p.addr {
            IpAddr::V4(a) => (
                a.octets().to_vec(),
                4,
                if src { HDR + 12 } else { HDR + 16 },
            ),
            IpAddr::V6(a) => (a.octets().to_vec(), 6, if src { HDR + 8 } else { HDR + 24 }),
        };
        self.word(FAM, u32::MAX, family as u32, miss);
        let bits = usize::from(p.len);
        for (w, chunk) in net.chunks(4).enumerate() {
            let covered = bits.saturating_sub(w * 32).min(32);
            if covered == 0 {
                break;
            }
            let mut mask = [0u8; 4];
            for (i, m) in mask.iter_mut().enumerate() {
                let left = covered.saturating_sub(i * 8).min(8);
                *m = if left == 0 { 0 } else { 0xffu8 << (8 - left) };
            }
            let value = u32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]])
                & u32::from_ne_bytes(mask);
            self.word(at + 4 * w as i16, u32::from_ne_bytes(mask), value, miss);
        }
    }

    fn range(&mut self, slot: i16, r: &PortRange, miss: super::insn::Label) {
        self.a
            .ldx(Size::W, Reg::R1, Reg::R10, slot)
            .jmp32_imm(Cond::Lt, Reg::R1, i32::from(r.lo), miss)
            .jmp32_imm(Cond::Gt, Reg::R1, i32::from(r.hi), miss);
    }

    /// One rule: on a match, R9 = its class and on to `done`.
    fn rule(&mut self, class: u16, m: &Match, done: super::insn::Label) {
        let miss = self.a.label();
        if let Some(v) = m.vlan {
            self.word(VLAN, u32::MAX, u32::from(v), miss);
        }
        if let Some(p) = m.proto {
            self.word(PROTO, u32::MAX, u32::from(p), miss);
        }
        if let Some(d) = m.dscp {
            self.word(DSCP, u32::MAX, u32::from(d), miss);
        }
        if let Some(p) = &m.src {
            self.prefix(p, true, miss);
        }
        if let Some(p) = &m.dst {
            self.prefix(p, false, miss);
        }
        if let Some(r) = &m.sport {
            self.range(SPORT, r, miss);
        }
        if let Some(r) = &m.dport {
            self.range(DPORT, r, miss);
        }
        self.a.mov64_imm(Reg::R9, i32::from(class)).ja(done);
        self.a.bind(miss);
    }

    /// Writes the stamp and R9 into the metadata (if there is room) and
    /// redirects.
    fn finish(&mut self, map: &Map, steer: Steer) {
        let redirect = self.a.label();
        self.a.ldx(Size::DW, Reg::R7, Reg::R10, STAMP);
        super::stamp::reserve_and_stamp(&mut self.a, Reg::R6, Reg::R7, META_LEN as i32, redirect);
        super::stamp::store_halves(&mut self.a, Reg::R3, 0, Reg::R9, 4);
        self.a.bind(redirect);
        match steer {
            Steer::ByClass | Steer::ByClassOnQueue(_) => self.a.mov64_reg(Reg::R2, Reg::R9),
            Steer::ByQueue => self
                .a
                .ldx(Size::W, Reg::R2, Reg::R6, xdp_md::RX_QUEUE_INDEX),
        };
        self.a
            .ld_map_fd(Reg::R1, map.fd())
            .mov64_imm(Reg::R3, action::PASS as i32)
            .call(helper::REDIRECT_MAP)
            .exit();
    }
}

/// The program classifying by `rules` (first match wins, else `default`)
/// and redirecting into `map` as `steer` says. The rules are checked as
/// [`Classifier::new`] checks them.
pub fn compile(
    rules: &[Rule],
    default: u16,
    map: &Map,
    steer: Steer,
) -> Result<Vec<Insn>, BpfError> {
    Classifier::new(rules.to_vec(), default).map_err(|e| BpfError::Invalid(e.to_string()))?;
    if rules.len() > MAX_RULES {
        return Err(BpfError::Invalid(format!(
            "{} rules: the XDP classifier compiles at most {MAX_RULES}; classify in user space \
             (the AF_XDP queue redirect) instead",
            rules.len()
        )));
    }
    let mut a = Asm::new();
    let (rules_l, default_l, done) = (a.label(), a.label(), a.label());
    let mut g = Gen {
        a,
        rules: rules_l,
        default: default_l,
    };
    let other_queue = other_queue_guard(&mut g, steer);
    g.init();
    g.ethernet();
    g.a.bind(rules_l);
    for r in rules {
        g.rule(r.class, &r.matches, done);
        if r.matches == Match::default() {
            // It matches every frame: the rules after it are dead code,
            // which the verifier refuses.
            break;
        }
    }
    g.a.bind(default_l);
    g.a.mov64_imm(Reg::R9, i32::from(default));
    g.a.bind(done);
    g.finish(map, steer);
    if let Some(pass) = other_queue {
        g.a.bind(pass);
        g.a.mov64_imm(Reg::R0, action::PASS as i32).exit();
    }
    Ok(g.a.finish()?)
}

/// For [`Steer::ByClassOnQueue`]: a jump past everything for frames of
/// another queue, to the label returned (bound by the caller to `XDP_PASS`).
fn other_queue_guard(g: &mut Gen, steer: Steer) -> Option<super::insn::Label> {
    let Steer::ByClassOnQueue(queue) = steer else {
        return None;
    };
    let pass = g.a.label();
    g.a.ldx(Size::W, Reg::R2, Reg::R1, xdp_md::RX_QUEUE_INDEX)
        .jmp_imm(Cond::Ne, Reg::R2, queue as i32, pass);
    Some(pass)
}

/// Compiles and loads the classifier program.
pub fn load(rules: &[Rule], default: u16, map: &Map, steer: Steer) -> Result<Program, BpfError> {
    Program::load_xdp(
        "pst_classify",
        &compile(rules, default, map, steer)?,
        "Dual MIT/GPL",
    )
}

/// The class a classifier program wrote in front of a frame, from a test
/// run's output (`None` if it wrote none).
pub fn class_of_output(out: &[u8], frame_len: usize) -> Option<u16> {
    if out.len() != frame_len + META_LEN {
        return None;
    }
    Some(u32::from_ne_bytes([out[0], out[1], out[2], out[3]]) as u16)
}
