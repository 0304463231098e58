use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::interp::{Skb, ingress, run};
use super::*;
use crate::classify::{Classifier, ClassifyConfigError, IpPrefix, Match, PortRange, Rule};
use crate::frame::{UdpSpec, build_udp};

fn skb(bytes: &[u8]) -> Skb<'_> {
    Skb {
        bytes,
        net: 14,
        data: 14,
        protocol: 0x0800,
        vlan: None,
    }
}

#[test]
fn labels_resolve_forward_and_the_program_runs() {
    let mut a = Asm::new();
    let (yes, no) = (a.label(), a.label());
    a.ld_net(op::B, 1);
    a.jeq(7, yes, no);
    a.bind(no);
    a.ret(1);
    a.bind(yes);
    a.ret(2);
    let p = a.finish().expect("valid");
    assert_eq!(p.len(), 4);
    assert_eq!(p.insns()[1].jt, 1);
    assert_eq!(p.insns()[1].jf, 0);
    let mut frame = vec![0u8; 20];
    assert_eq!(run(&p, &skb(&frame)), 1);
    frame[15] = 7;
    assert_eq!(run(&p, &skb(&frame)), 2);
    // A load past the end ends the program with 0, as in the kernel.
    assert_eq!(run(&p, &skb(&frame[..15])), 0);
}

#[test]
fn far_conditional_jumps_are_widened_and_still_go_where_they_should() {
    for filler in [10usize, 254, 255, 256, 1000] {
        let mut a = Asm::new();
        let far = a.label();
        a.ld_net(op::B, 0);
        a.jeq(1, far, NEXT);
        a.jeq(2, NEXT, far);
        for _ in 0..filler {
            a.alu(op::ADD, 0);
        }
        a.ret(10);
        a.bind(far);
        a.ret(20);
        let p = a.finish().expect("valid");
        // Each jump that is too far for 8 bits grows by two.
        let widened = usize::from(filler + 2 > 255) + usize::from(filler + 1 > 255);
        assert_eq!(p.len(), filler + 5 + 2 * widened, "{filler}");
        let frame = |b: u8| {
            let mut f = vec![0u8; 15];
            f[14] = b;
            f
        };
        assert_eq!(run(&p, &skb(&frame(1))), 20, "{filler}");
        assert_eq!(run(&p, &skb(&frame(2))), 10, "{filler}");
        assert_eq!(run(&p, &skb(&frame(3))), 20, "{filler}");
    }
}

#[test]
fn assembler_errors_name_the_label() {
    let mut a = Asm::new();
    let l = a.label();
    a.ja(l);
    a.ret(0);
    assert_eq!(a.finish(), Err(AsmError::Unbound(0)));
    let mut a = Asm::new();
    let l = a.label();
    a.bind(l);
    a.ld_imm(0);
    a.ja(l);
    a.ret(0);
    assert_eq!(a.finish(), Err(AsmError::Backward(0)));
    let mut a = Asm::new();
    let l = a.label();
    a.bind(l);
    a.bind(l);
    a.ret(0);
    assert_eq!(a.finish(), Err(AsmError::Rebound(0)));
}

#[test]
fn the_kernel_checks_are_applied() {
    let ret = Insn::stmt(op::RET | op::K, 0);
    let cases: Vec<(Vec<Insn>, ProgramError)> = vec![
        (vec![], ProgramError::Length(0)),
        (
            vec![ret; MAX_INSNS + 1],
            ProgramError::Length(MAX_INSNS + 1),
        ),
        (
            vec![Insn::stmt(0xff, 0), ret],
            ProgramError::Opcode { at: 0, code: 0xff },
        ),
        (
            vec![Insn::stmt(op::JMP | op::JA, 1), ret],
            ProgramError::JumpRange {
                at: 0,
                target: 2,
                len: 2,
            },
        ),
        (
            vec![Insn::stmt(op::ST, 16), ret],
            ProgramError::MemIndex { at: 0, k: 16 },
        ),
        (
            vec![Insn::stmt(op::LD | op::MEM, 3), ret],
            ProgramError::MemUnset { at: 0, k: 3 },
        ),
        (
            vec![Insn::stmt(op::ALU | op::DIV | op::K, 0), ret],
            ProgramError::BadConstant { at: 0, k: 0 },
        ),
        (
            vec![Insn::stmt(op::ALU | op::LSH | op::K, 32), ret],
            ProgramError::BadConstant { at: 0, k: 32 },
        ),
        (
            vec![
                Insn::stmt(op::LD | op::ABS, (SKF_AD_OFF as u32).wrapping_add(64)),
                ret,
            ],
            ProgramError::Ancillary { at: 0, offset: 64 },
        ),
        (
            vec![ret, Insn::stmt(op::LD | op::IMM, 0)],
            ProgramError::NoReturn,
        ),
    ];
    for (insns, want) in cases {
        assert_eq!(Program::new(insns), Err(want.clone()), "{want}");
    }
    // A word stored on one path only may not be read where they join.
    let mut a = Asm::new();
    let (skip, join) = (a.label(), a.label());
    a.ld_len();
    a.jeq(0, skip, NEXT);
    a.st(5);
    a.bind(skip);
    a.ja(join);
    a.bind(join);
    a.ld_mem(5);
    a.stmt(op::RET | op::A, 0);
    assert!(matches!(
        a.finish(),
        Err(AsmError::Program(ProgramError::MemUnset { k: 5, .. }))
    ));
}

#[test]
fn the_interpreter_resolves_offsets_and_ancillary_data_as_the_kernel() {
    let bytes: Vec<u8> = (0u8..40).collect();
    let s = Skb {
        bytes: &bytes,
        net: 18,
        data: 14,
        protocol: 0x86dd,
        vlan: Some((0x88a8, 0x2064)),
    };
    let one = |code: u16, k: u32| {
        Program::new(vec![Insn::stmt(code, k), Insn::stmt(op::RET | op::A, 0)]).expect("valid")
    };
    let net = SKF_NET_OFF as u32;
    let ll = SKF_LL_OFF as u32;
    let ad = SKF_AD_OFF as u32;
    assert_eq!(run(&one(op::LD | op::B | op::ABS, 0), &s), 14);
    assert_eq!(
        run(&one(op::LD | op::H | op::ABS, net + 1), &s),
        19 << 8 | 20
    );
    assert_eq!(run(&one(op::LD | op::W | op::ABS, ll), &s), 0x0001_0203);
    assert_eq!(run(&one(op::LD | op::W | op::LEN, 0), &s), 26);
    assert_eq!(run(&one(op::LD | op::ABS, ad + anc::PROTOCOL), &s), 0x86dd);
    assert_eq!(run(&one(op::LD | op::ABS, ad + anc::VLAN_TAG), &s), 0x2064);
    assert_eq!(run(&one(op::LD | op::ABS, ad + anc::VLAN_TPID), &s), 0x88a8);
    assert_eq!(
        run(&one(op::LD | op::ABS, ad + anc::VLAN_TAG_PRESENT), &s),
        1
    );
    assert_eq!(
        run(&one(op::LD | op::W | op::ABS, net + 19), &s),
        0,
        "past the end"
    );
    assert_eq!(run(&one(op::LDX | op::B | op::MSH, 0), &s), 0);
}

#[test]
fn the_ingress_model_moves_the_outer_tag_into_the_metadata() {
    let mut f = vec![0u8; 30];
    f[12..14].copy_from_slice(&[0x81, 0x00]);
    f[14..16].copy_from_slice(&[0x20, 0x64]);
    f[16..18].copy_from_slice(&[0x86, 0xdd]);
    f[18] = 0x60;
    let g = ingress(&f).expect("arrives");
    let s = g.skb();
    assert_eq!(s.vlan, Some((0x8100, 0x2064)));
    assert_eq!(s.protocol, 0x86dd);
    assert_eq!(s.bytes.len(), 26);
    assert_eq!(
        s.bytes[14], 0x60,
        "the network header follows the MAC header"
    );
    assert_eq!(ingress(&f[..19]), None, "too short to untag");
    assert_eq!(ingress(&f[..13]), None, "runt");
    // An 802.3 length field: the kernel's 802.2 protocol, not the length.
    let mut l = vec![0u8; 60];
    l[12..14].copy_from_slice(&46u16.to_be_bytes());
    assert_eq!(ingress(&l).expect("arrives").skb().protocol, 0x0004);
}

fn rule(class: u16, m: Match) -> Rule {
    Rule { class, matches: m }
}

fn udp(src: &str, dst: &str, dport: u16, dscp: u8, vlan: Option<u16>) -> Vec<u8> {
    let s = UdpSpec {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        vlan,
        src_ip: src.parse().expect("src"),
        dst_ip: dst.parse().expect("dst"),
        sport: 1234,
        dport,
        dscp,
        ttl: 64,
        payload: vec![0; 18],
    };
    let mut buf = vec![0u8; 200];
    let n = build_udp(&mut buf, &s).expect("fits");
    buf.truncate(n);
    buf
}

fn class_of(p: &Program, frame: &[u8]) -> u32 {
    run(p, &ingress(frame).expect("arrives").skb())
}

#[test]
fn compiled_rules_pick_the_class_of_each_frame() {
    let rules = vec![
        rule(
            1,
            Match {
                proto: Some(17),
                dport: Some("5000-5010".parse().expect("range")),
                ..Match::default()
            },
        ),
        rule(
            2,
            Match {
                dscp: Some(46),
                ..Match::default()
            },
        ),
        rule(
            3,
            Match {
                src: Some("10.0.0.0/8".parse().expect("prefix")),
                ..Match::default()
            },
        ),
        rule(
            4,
            Match {
                dst: Some("2001:db8::/33".parse().expect("prefix")),
                ..Match::default()
            },
        ),
        rule(
            5,
            Match {
                vlan: Some(100),
                ..Match::default()
            },
        ),
    ];
    let p = compile(&rules, 7).expect("compiles");
    let c = Classifier::new(rules, 7).expect("valid");
    let cases = [
        (udp("198.18.0.1", "198.18.0.2", 5005, 0, None), 1),
        (udp("198.18.0.1", "198.18.0.2", 6000, 46, None), 2),
        (udp("10.9.9.9", "198.18.0.2", 6000, 0, None), 3),
        (udp("2001:db9::1", "2001:db8::9", 6000, 0, None), 4),
        (udp("2001:db9::1", "2001:db8:8000::9", 6000, 0, None), 7),
        (udp("198.18.0.1", "198.18.0.2", 6000, 0, Some(100)), 5),
        (udp("198.18.0.1", "198.18.0.2", 5001, 0, Some(100)), 1),
        (udp("198.18.0.1", "198.18.0.2", 6000, 0, Some(101)), 7),
        (udp("198.18.0.1", "198.18.0.2", 6000, 0, None), 7),
    ];
    for (f, want) in cases {
        assert_eq!(class_of(&p, &f), want, "{f:02x?}");
        assert_eq!(u32::from(c.classify(&f).class), want);
    }
}

#[test]
fn compile_refuses_what_the_classifier_refuses_and_what_does_not_fit() {
    let mixed = rule(
        0,
        Match {
            src: Some("10.0.0.0/8".parse().expect("prefix")),
            dst: Some("2001:db8::/32".parse().expect("prefix")),
            ..Match::default()
        },
    );
    assert!(matches!(
        compile(&[mixed], 0),
        Err(CompileError::Rules(ClassifyConfigError::MixedFamilies {
            rule: 0,
            ..
        }))
    ));
    let big = rule(
        3,
        Match {
            src: Some("2001:db8::1/128".parse().expect("prefix")),
            dst: Some("2001:db8::2/128".parse().expect("prefix")),
            dport: Some("1-2".parse().expect("range")),
            ..Match::default()
        },
    );
    let many = vec![big.clone(); 200];
    let e = compile(&many, 0).expect_err("too long");
    let CompileError::TooLong { rule, len, .. } = &e else {
        panic!("{e}")
    };
    assert!(*rule > 50 && *rule < 200 && *len > MAX_INSNS, "{e}");
    assert!(e.to_string().contains("dst 2001:db8::2/128"), "{e}");
    // Just below the limit it compiles.
    assert!(compile(&many[..*rule], 0).is_ok());
}

// ---- the differential test: compiled program vs the userspace classifier

fn fuzz_cases() -> u32 {
    std::env::var("PKTSCHED_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

const V4: [[u8; 4]; 5] = [
    [10, 0, 0, 1],
    [10, 1, 2, 3],
    [198, 18, 0, 1],
    [198, 18, 0, 2],
    [192, 168, 1, 1],
];
const V6: [u128; 4] = [
    0x2001_0db8_0000_0000_0000_0000_0000_0001,
    0x2001_0db8_0000_0000_0000_0000_0000_0002,
    0x2001_0db8_0001_0000_0000_0000_0000_0001,
    0xfe80_0000_0000_0000_0000_0000_0000_0001,
];
const PORTS: [u16; 6] = [53, 80, 5000, 5005, 6000, 0];
const PROTOS: [u8; 5] = [6, 17, 132, 1, 58];
const DSCPS: [u8; 4] = [0, 10, 46, 63];
const VLANS: [u16; 4] = [0, 1, 100, 4095];

fn pick<T: Copy>(r: &mut ChaCha8Rng, from: &[T]) -> T {
    from[r.random_range(0..from.len())]
}

fn v4_addr(r: &mut ChaCha8Rng) -> [u8; 4] {
    if r.random_ratio(1, 6) {
        r.random()
    } else {
        pick(r, &V4)
    }
}

fn v6_addr(r: &mut ChaCha8Rng) -> u128 {
    if r.random_ratio(1, 6) {
        r.random()
    } else {
        pick(r, &V6)
    }
}

fn port(r: &mut ChaCha8Rng) -> u16 {
    if r.random_ratio(1, 6) {
        r.random()
    } else {
        pick(r, &PORTS)
    }
}

fn transport(r: &mut ChaCha8Rng, f: &mut Vec<u8>) {
    f.extend_from_slice(&port(r).to_be_bytes());
    f.extend_from_slice(&port(r).to_be_bytes());
    let extra = r.random_range(0..24);
    f.extend((0..extra).map(|_| r.random::<u8>()));
}

fn ipv4(r: &mut ChaCha8Rng, f: &mut Vec<u8>) -> u8 {
    let version = if r.random_ratio(1, 20) {
        r.random_range(0..16)
    } else {
        4
    };
    let ihl: u8 = if r.random_ratio(1, 5) {
        r.random_range(0..16)
    } else {
        5
    };
    let proto = pick(r, &PROTOS);
    f.push(version << 4 | ihl);
    f.push(pick(r, &DSCPS) << 2 | r.random_range(0..4));
    f.extend_from_slice(&[0, 60, 0, 1]);
    let frag: u16 = match r.random_range(0..6) {
        0 => 0x2000,
        1 => r.random_range(1..0x2000),
        2 => 0x2000 | r.random_range(0..0x2000),
        _ => 0x4000,
    };
    f.extend_from_slice(&frag.to_be_bytes());
    f.extend_from_slice(&[64, proto, 0, 0]);
    f.extend_from_slice(&v4_addr(r));
    f.extend_from_slice(&v4_addr(r));
    for _ in 5..ihl.max(5) {
        f.extend_from_slice(&[1, 1, 1, 1]);
    }
    proto
}

fn ipv6(r: &mut ChaCha8Rng, f: &mut Vec<u8>) {
    let version: u32 = if r.random_ratio(1, 20) {
        r.random_range(0..16)
    } else {
        6
    };
    let tclass = u32::from(pick(r, &DSCPS)) << 2 | r.random_range(0..4);
    let first = version << 28 | tclass << 20 | r.random_range(0..1 << 20);
    f.extend_from_slice(&first.to_be_bytes());
    f.extend_from_slice(&[0, 40]);
    let nh_at = f.len();
    f.extend_from_slice(&[0, 64]);
    f.extend_from_slice(&v6_addr(r).to_be_bytes());
    f.extend_from_slice(&v6_addr(r).to_be_bytes());
    let mut nh_at = nh_at;
    for _ in 0..r.random_range(0..7) {
        let kind = pick(r, &[0u8, 43, 60, 44]);
        f[nh_at] = kind;
        nh_at = f.len();
        if kind == 44 {
            let off: u16 = if r.random_ratio(1, 3) {
                r.random_range(0..0x10000) as u16
            } else {
                0
            };
            f.extend_from_slice(&[0, 0]);
            f.extend_from_slice(&off.to_be_bytes());
            f.extend_from_slice(&[0, 0, 0, 1]);
        } else {
            let len = r.random_range(0..3u8);
            f.extend_from_slice(&[0, len]);
            f.extend(std::iter::repeat_n(0u8, 6 + 8 * usize::from(len)));
        }
    }
    f[nh_at] = pick(r, &PROTOS);
}

/// A frame with the header stacks the classifier walks, odd ones often.
pub(crate) fn random_frame(r: &mut ChaCha8Rng) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    for _ in 0..pick(r, &[0usize, 0, 1, 1, 2, 3]) {
        f.extend_from_slice(&pick(r, &[0x8100u16, 0x88a8]).to_be_bytes());
        let tci = pick(r, &VLANS) | (r.random_range(0..16u16) << 12);
        f.extend_from_slice(&tci.to_be_bytes());
    }
    let et: u16 = pick(r, &[0x0800, 0x0800, 0x86dd, 0x86dd, 0x0806, 0x0100, 0x8100]);
    f.extend_from_slice(&et.to_be_bytes());
    match et {
        0x0800 => {
            ipv4(r, &mut f);
            transport(r, &mut f);
        }
        0x86dd => {
            ipv6(r, &mut f);
            transport(r, &mut f);
        }
        _ => f.extend((0..r.random_range(0..40)).map(|_| r.random::<u8>())),
    }
    if r.random_ratio(1, 3) {
        for _ in 0..r.random_range(1..5) {
            let at = r.random_range(0..f.len());
            f[at] = r.random();
        }
    }
    if r.random_ratio(1, 3) {
        f.truncate(r.random_range(0..=f.len()));
    }
    f
}

fn prefix(r: &mut ChaCha8Rng, v6: bool) -> IpPrefix {
    if v6 {
        let len = r.random_range(0..=128u8);
        let mask = if len == 0 {
            0
        } else {
            u128::MAX << (128 - u32::from(len))
        };
        IpPrefix {
            addr: IpAddr::V6(Ipv6Addr::from(v6_addr(r) & mask)),
            len,
        }
    } else {
        let len = r.random_range(0..=32u8);
        let mask = if len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(len))
        };
        IpPrefix {
            addr: IpAddr::V4(Ipv4Addr::from(u32::from_be_bytes(v4_addr(r)) & mask)),
            len,
        }
    }
}

fn range(r: &mut ChaCha8Rng) -> PortRange {
    let p = port(r);
    let (lo, hi) = match r.random_range(0..3) {
        0 => (p, p),
        1 => (p.saturating_sub(r.random_range(0..10)), p),
        _ => (p, p.saturating_add(r.random_range(0..1000))),
    };
    PortRange { lo, hi }
}

pub(crate) fn random_rules(r: &mut ChaCha8Rng) -> Vec<Rule> {
    (0..r.random_range(1..7))
        .map(|_| {
            let v6 = r.random();
            let mut m = Match::default();
            let maybe = |r: &mut ChaCha8Rng| r.random_ratio(1, 3);
            if maybe(r) {
                m.src = Some(prefix(r, v6));
            }
            if maybe(r) {
                m.dst = Some(prefix(r, v6));
            }
            if maybe(r) {
                m.proto = Some(pick(r, &PROTOS));
            }
            if maybe(r) {
                m.sport = Some(range(r));
            }
            if maybe(r) {
                m.dport = Some(range(r));
            }
            if maybe(r) {
                m.dscp = Some(pick(r, &DSCPS));
            }
            if maybe(r) {
                m.vlan = Some(pick(r, &VLANS));
            }
            rule(r.random_range(0..8), m)
        })
        .collect()
}

/// Thousands of rule sets, each on random, mutated and cut frames (and
/// random bytes): the compiled program run on the kernel's view of the
/// frame returns the userspace classifier's class, always.
#[test]
fn compiled_program_agrees_with_the_classifier_on_random_frames() {
    let mut r = ChaCha8Rng::seed_from_u64(0x0cbf_f00d);
    let (mut checked, mut never_arrive, mut unstripped_checked) = (0u64, 0u64, 0u64);
    let mut classes = [0u64; 8];
    for _ in 0..fuzz_cases() {
        let rules = random_rules(&mut r);
        let default = r.random_range(0..8);
        let prog = compile(&rules, default).expect("compiles");
        let c = Classifier::new(rules.clone(), default).expect("valid");
        for n in 0..24 {
            let frame = if n == 0 {
                (0..r.random_range(0..80)).map(|_| r.random()).collect()
            } else {
                random_frame(&mut r)
            };
            let Some(seen) = ingress(&frame) else {
                never_arrive += 1;
                continue;
            };
            let want = c.classify(&frame).class;
            let got = run(&prog, &seen.skb());
            // The same frame with its tags left in the data (no metadata
            // tag): the program's path for a kernel that did not strip.
            {
                let unstripped = Skb {
                    bytes: &frame,
                    net: 14,
                    data: 14,
                    protocol: u16::from_be_bytes([frame[12], frame[13]]),
                    vlan: None,
                };
                if matches!(unstripped.protocol, 0x8100 | 0x88a8) {
                    assert_eq!(
                        run(&prog, &unstripped),
                        u32::from(want),
                        "unstripped {frame:02x?}"
                    );
                    unstripped_checked += 1;
                }
            }
            assert_eq!(
                got,
                u32::from(want),
                "frame {frame:02x?}\nrules {rules:?} default {default}\n{prog}"
            );
            classes[usize::from(want)] += 1;
            checked += 1;
        }
    }
    eprintln!(
        "checked {checked} frames ({never_arrive} would not reach a socket; \
         {unstripped_checked} also with their tags left in the data); classes {classes:?}"
    );
    // The generator must reach rules, not only defaults.
    let non_default = classes.iter().filter(|&&n| n > 0).count();
    assert!(non_default == 8 && checked > 10 * u64::from(fuzz_cases()));
    assert!(unstripped_checked > u64::from(fuzz_cases()));
}

#[test]
fn program_size_is_as_documented() {
    let empty = compile(&[], 0).expect("compiles").len();
    let full = Match {
        src: Some("2001:db8::1/128".parse().expect("prefix")),
        dst: Some("2001:db8::2/127".parse().expect("prefix")),
        proto: Some(17),
        sport: Some("1-2".parse().expect("range")),
        dport: Some("3-4".parse().expect("range")),
        dscp: Some(1),
        vlan: Some(2),
    };
    let one = compile(&[rule(1, full.clone())], 0)
        .expect("compiles")
        .len();
    let v4 = Match {
        src: Some("10.0.0.0/8".parse().expect("prefix")),
        dport: Some("5000".parse().expect("port")),
        ..Match::default()
    };
    let small = compile(&[rule(1, v4)], 0).expect("compiles").len();
    eprintln!(
        "parse + default: {empty}; the largest rule: {}; src /8 + dport: {}",
        one - empty,
        small - empty
    );
    assert!(empty <= 300, "{empty}");
    assert!(one - empty <= 33, "{}", one - empty);
    assert!(small - empty <= 10, "{}", small - empty);
}
