//! The classifier's rules compiled to a classic BPF program that returns
//! the class index (layout and what it assumes: see [`crate::cbpf`]).

use std::net::IpAddr;

use super::{Asm, AsmError, Label, NEXT, Program, ProgramError, anc, op};
use crate::classify::{Classifier, ClassifyConfigError, IpPrefix, PortRange, Rule};

/// Why rules could not be compiled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// The rules are not a valid classifier.
    #[error(transparent)]
    Rules(#[from] ClassifyConfigError),
    /// The program would be longer than the kernel allows.
    #[error(
        "rule {rule} ({text}) makes the program {len} instructions long: allowed 4096 \
         (1 to 33 instructions a rule after ~290 of parsing; merge rules or use shorter \
         prefixes)"
    )]
    TooLong {
        /// The first rule that did not fit.
        rule: usize,
        /// The rule.
        text: String,
        /// Instructions with it.
        len: usize,
    },
    /// The assembler refused the result (a bug in the compiler).
    #[error("the compiled program is invalid: {0}")]
    Asm(#[from] AsmError),
}

/// Scratch memory words of the parse section.
const M_VLAN: u32 = 0;
const M_FAM: u32 = 1;
const M_DSCP: u32 = 2;
const M_PROTO: u32 = 3;
const M_SPORT: u32 = 4;
const M_DPORT: u32 = 5;
const M_L3: u32 = 6;
const M_TAGS: u32 = 7;
const M_NH: u32 = 8;
const M_TMP: u32 = 9;
/// "The frame has no such field": equal to no value a rule tests.
const NONE: u32 = u32::MAX;

/// Compiles `rules` (first match wins) and the `default` class into a
/// program for a fanout group's `PACKET_FANOUT_DATA`, returning the class
/// index of each frame. The rules are checked as
/// [`Classifier::new`] checks them.
pub fn compile(rules: &[Rule], default: u16) -> Result<Program, CompileError> {
    Classifier::new(rules.to_vec(), default)?;
    let mut a = Asm::new();
    let parsed = a.label();
    parse(&mut a, parsed);
    a.bind(parsed);
    let mut ends = Vec::with_capacity(rules.len());
    for (n, r) in rules.iter().enumerate() {
        rule(&mut a, r);
        ends.push(a.len());
        if a.len() + 1 > super::MAX_INSNS {
            // Already too long before any widening: stop building.
            return Err(CompileError::TooLong {
                rule: n,
                text: r.to_string(),
                len: a.len() + 1,
            });
        }
    }
    a.ret(u32::from(default));
    let unwidened = a.len();
    match a.finish() {
        Ok(p) => Ok(p),
        Err(AsmError::Program(ProgramError::Length(len))) => {
            // Far jumps are widened in the parse section only (rules jump
            // within themselves), so the growth is the same for every rule.
            let growth = len.saturating_sub(unwidened);
            let n = ends
                .iter()
                .position(|&end| end + growth + 1 > super::MAX_INSNS)
                .unwrap_or(rules.len().saturating_sub(1));
            Err(CompileError::TooLong {
                rule: n,
                text: rules.get(n).map(|r| r.to_string()).unwrap_or_default(),
                len,
            })
        }
        Err(e) => Err(e.into()),
    }
}

/// The parse section: fills `M[]` and ends at `parsed` (see the module
/// docs of [`crate::cbpf`]).
fn parse(a: &mut Asm, parsed: Label) {
    a.ld_imm(NONE);
    for m in [M_VLAN, M_DSCP, M_PROTO, M_SPORT, M_DPORT] {
        a.st(m);
    }
    a.ld_imm(0);
    for m in [M_FAM, M_L3, M_TAGS, M_NH, M_TMP] {
        a.st(m);
    }
    let untagged = a.label();
    a.ld_anc(anc::VLAN_TAG_PRESENT);
    a.jeq(0, untagged, NEXT);
    a.ld_anc(anc::VLAN_TAG);
    a.alu(op::AND, 0x0fff);
    a.st(M_VLAN);
    a.ld_imm(1);
    a.st(M_TAGS);
    a.bind(untagged);
    a.ld_anc(anc::PROTOCOL);
    let ip = a.label();
    tags(a, ip, parsed);
    a.bind(ip);
    a.stx(M_L3);
    let (v4, v6) = (a.label(), a.label());
    a.jeq(0x0800, v4, NEXT);
    a.jeq(0x86dd, v6, parsed);
    let ports = a.label();
    a.bind(v4);
    ipv4(a, ports, parsed);
    a.bind(v6);
    ipv6(a, ports, parsed);
    a.bind(ports);
    transport(a, parsed);
}

/// VLAN tags left in the data (a second one; or both where the kernel
/// did not strip the outer one): at most two in all, as the userspace
/// classifier. Entered with A = EtherType; leaves for `ip` with X = the
/// IP header's offset from the network header.
fn tags(a: &mut Asm, ip: Label, parsed: Label) {
    for i in 0..2u32 {
        let (tag, not) = (a.label(), a.label());
        a.jeq(0x8100, tag, NEXT);
        a.jeq(0x88a8, tag, not);
        a.bind(not);
        a.ldx_imm(4 * i);
        a.ja(ip);
        a.bind(tag);
        a.ld_mem(M_TAGS);
        a.jeq(2, parsed, NEXT);
        a.alu(op::ADD, 1);
        a.st(M_TAGS);
        a.ld_len();
        a.jge(4 * i + 4, NEXT, parsed);
        let keep = a.label();
        a.ld_mem(M_VLAN);
        a.jeq(NONE, NEXT, keep);
        a.ld_net(op::H, 4 * i);
        a.alu(op::AND, 0x0fff);
        a.st(M_VLAN);
        a.bind(keep);
        a.ld_net(op::H, 4 * i + 2);
    }
    // A third tag: not IP.
    a.jeq(0x8100, parsed, NEXT);
    a.jeq(0x88a8, parsed, NEXT);
    a.ldx_imm(8);
}

/// IPv4 at X: the fields, then X = the transport header (or `parsed`).
fn ipv4(a: &mut Asm, ports: Label, parsed: Label) {
    a.ld_len();
    a.alu_x(op::SUB);
    a.jge(20, NEXT, parsed);
    a.ld_net_ind(op::B, 0);
    a.alu(op::RSH, 4);
    a.jeq(4, NEXT, parsed);
    a.ld_net_ind(op::B, 0);
    a.alu(op::AND, 0x0f);
    a.jge(5, NEXT, parsed);
    a.ld_imm(4);
    a.st(M_FAM);
    a.ld_net_ind(op::B, 1);
    a.alu(op::RSH, 2);
    a.st(M_DSCP);
    a.ld_net_ind(op::B, 9);
    a.st(M_PROTO);
    // A later fragment carries no ports.
    a.ld_net_ind(op::H, 6);
    a.jset(0x1fff, parsed, NEXT);
    a.ld_net_ind(op::B, 0);
    a.alu(op::AND, 0x0f);
    a.alu(op::LSH, 2);
    a.alu_x(op::ADD);
    a.tax();
    a.ja(ports);
}

/// IPv6 at X: the fields, the extension header walk, then X = the
/// transport header and M[proto] set (or `parsed`).
fn ipv6(a: &mut Asm, ports: Label, parsed: Label) {
    a.ld_len();
    a.alu_x(op::SUB);
    a.jge(40, NEXT, parsed);
    a.ld_net_ind(op::B, 0);
    a.alu(op::RSH, 4);
    a.jeq(6, NEXT, parsed);
    a.ld_imm(6);
    a.st(M_FAM);
    a.ld_net_ind(op::H, 0);
    a.alu(op::RSH, 6);
    a.alu(op::AND, 0x3f);
    a.st(M_DSCP);
    a.ld_net_ind(op::B, 6);
    a.st(M_NH);
    a.txa();
    a.alu(op::ADD, 40);
    a.tax();
    a.ld_mem(M_NH);
    let last = a.label();
    // Four extension headers are followed; a fifth ends the walk.
    for _ in 0..5 {
        let (hop, frag, later, next) = (a.label(), a.label(), a.label(), a.label());
        a.jeq(0, hop, NEXT);
        a.jeq(43, hop, NEXT);
        a.jeq(60, hop, NEXT);
        a.jeq(44, frag, last);
        a.bind(hop);
        room(a, 2, parsed);
        a.ld_net_ind(op::B, 1);
        a.alu(op::LSH, 3);
        a.alu(op::ADD, 8);
        a.alu_x(op::ADD);
        a.st(M_TMP);
        a.ld_net_ind(op::B, 0);
        a.st(M_NH);
        a.ldx_mem(M_TMP);
        a.ld_mem(M_NH);
        a.ja(next);
        a.bind(frag);
        room(a, 4, parsed);
        a.ld_net_ind(op::B, 0);
        a.st(M_NH);
        a.ld_net_ind(op::H, 2);
        a.jset(0xfff8, later, NEXT);
        a.txa();
        a.alu(op::ADD, 8);
        a.tax();
        a.ld_mem(M_NH);
        a.ja(next);
        a.bind(later);
        a.ld_mem(M_NH);
        a.st(M_PROTO);
        a.ja(parsed);
        a.bind(next);
    }
    a.ja(parsed);
    a.bind(last);
    a.st(M_PROTO);
    a.ja(ports);
}

/// Goes to `parsed` unless `n` bytes are left at X.
fn room(a: &mut Asm, n: u32, parsed: Label) {
    a.ld_len();
    a.jge_x(NEXT, parsed);
    a.alu_x(op::SUB);
    a.jge(n, NEXT, parsed);
}

/// The ports at X of a protocol that has them.
fn transport(a: &mut Asm, parsed: Label) {
    let has = a.label();
    a.ld_mem(M_PROTO);
    a.jeq(6, has, NEXT);
    a.jeq(17, has, NEXT);
    a.jeq(132, has, parsed);
    a.bind(has);
    room(a, 4, parsed);
    a.ld_net_ind(op::H, 0);
    a.st(M_SPORT);
    a.ld_net_ind(op::H, 2);
    a.st(M_DPORT);
}

/// One rule: its tests, each jumping past the rule on a mismatch, then
/// the return of its class.
fn rule(a: &mut Asm, r: &Rule) {
    let miss = a.label();
    let m = &r.matches;
    for (slot, want) in [
        (M_VLAN, m.vlan.map(u32::from)),
        (M_PROTO, m.proto.map(u32::from)),
        (M_DSCP, m.dscp.map(u32::from)),
    ] {
        if let Some(v) = want {
            a.ld_mem(slot);
            a.jeq(v, NEXT, miss);
        }
    }
    for (slot, range) in [(M_SPORT, m.sport), (M_DPORT, m.dport)] {
        if let Some(PortRange { lo, hi }) = range {
            a.ld_mem(slot);
            if lo > 0 {
                a.jge(u32::from(lo), NEXT, miss);
            }
            // Also refuses NONE (no ports), which is above every port.
            a.jgt(u32::from(hi), miss, NEXT);
        }
    }
    if let Some(family) = m.src.or(m.dst) {
        let (fam, src_at, dst_at) = match family.addr {
            IpAddr::V4(_) => (4, 12, 16),
            IpAddr::V6(_) => (6, 8, 24),
        };
        a.ld_mem(M_FAM);
        a.jeq(fam, NEXT, miss);
        a.ldx_mem(M_L3);
        for (prefix, at) in [(m.src, src_at), (m.dst, dst_at)] {
            if let Some(p) = prefix {
                prefix_words(a, &p, at, miss);
            }
        }
    }
    a.ret(u32::from(r.class));
    a.bind(miss);
}

/// Compares the address at X + `at` word by word under `p`'s mask.
fn prefix_words(a: &mut Asm, p: &IpPrefix, at: u32, miss: Label) {
    let (words, bits): (Vec<u32>, u32) = match p.addr {
        IpAddr::V4(v) => (vec![u32::from(v)], 32),
        IpAddr::V6(v) => {
            let o = v.octets();
            let w = (0..4)
                .map(|i| u32::from_be_bytes([o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]]))
                .collect();
            (w, 128)
        }
    };
    let len = u32::from(p.len).min(bits);
    for (i, &word) in words.iter().enumerate() {
        let covered = len.saturating_sub(32 * i as u32).min(32);
        if covered == 0 {
            break;
        }
        let mask = u32::MAX << (32 - covered);
        a.ld_net_ind(op::W, at + 4 * i as u32);
        if mask != u32::MAX {
            a.alu(op::AND, mask);
        }
        a.jeq(word & mask, NEXT, miss);
    }
}
