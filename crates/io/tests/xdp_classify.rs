//! The classifier compiled to XDP against the userspace `Classifier`:
//! random rule sets, thousands of random and mutated frames (VLAN stacks,
//! IPv4 options and fragments, IPv6 extension header chains, odd
//! versions, truncations, flipped bytes), each run through the loaded
//! program with `BPF_PROG_TEST_RUN`; the class the program wrote into the
//! frame's metadata must be the one the userspace classifier gives.
//! Seeded (ChaCha8); `PKTSCHED_FUZZ_CASES` sets the number of frames
//! (default 6000). Needs root for `bpf(2)`; skipped with the reason
//! otherwise.

#[path = "common/untested.rs"]
mod untested;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use untested::skipped;

use pktsched_io::bpf::action;
use pktsched_io::bpf::classify::{MAX_RULES, META_LEN, Steer, class_of_output, compile, load};
use pktsched_io::bpf::redirect::redirect_by_queue;
use pktsched_io::bpf::stamp::rx_ns_of_output;
use pktsched_io::bpf::sys::{Map, Program, STRICT_ALIGNMENT};
use pktsched_io::classify::{Classifier, IpPrefix, Match, PortRange, Rule};
use pktsched_io::frame::{UdpSpec, build_udp};
use pktsched_io::netns::is_root;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const RULE_SETS: u64 = 24;

fn cases() -> u64 {
    std::env::var("PKTSCHED_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6000)
}

const V4: [[u8; 4]; 4] = [
    [10, 0, 0, 1],
    [10, 1, 2, 3],
    [192, 168, 7, 9],
    [198, 18, 0, 2],
];
const PORTS: [u16; 6] = [0, 53, 80, 443, 5000, 65535];

fn v6(i: usize) -> Ipv6Addr {
    [
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
        Ipv6Addr::new(0x2001, 0xdb8, 0x8000, 0, 0, 0, 0, 2),
        Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0x99),
        Ipv6Addr::new(0x2001, 0xdb9, 0, 0, 0xffff, 0, 0, 3),
    ][i % 4]
}

fn addr(rng: &mut ChaCha8Rng, v4: bool) -> IpAddr {
    let i = rng.random_range(0..4);
    if v4 {
        IpAddr::V4(Ipv4Addr::from(V4[i]))
    } else {
        IpAddr::V6(v6(i))
    }
}

fn prefix(rng: &mut ChaCha8Rng, v4: bool) -> IpPrefix {
    let a = addr(rng, v4);
    let max = if v4 { 32 } else { 128 };
    let len = match rng.random_range(0..4) {
        0 => 0,
        1 => max,
        _ => rng.random_range(0..=max),
    };
    let addr = match a {
        IpAddr::V4(x) => {
            let m = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            IpAddr::V4(Ipv4Addr::from(u32::from(x) & m))
        }
        IpAddr::V6(x) => {
            let m = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            IpAddr::V6(Ipv6Addr::from(u128::from(x) & m))
        }
    };
    IpPrefix {
        addr,
        len: len as u8,
    }
}

fn port_range(rng: &mut ChaCha8Rng) -> PortRange {
    let a = PORTS[rng.random_range(0..PORTS.len())];
    let b = if rng.random_bool(0.5) {
        a
    } else {
        rng.random()
    };
    PortRange {
        lo: a.min(b),
        hi: a.max(b),
    }
}

fn random_match(rng: &mut ChaCha8Rng) -> Match {
    let v4 = rng.random_bool(0.6);
    let mut m = Match::default();
    let p = 0.3;
    if rng.random_bool(p) {
        m.src = Some(prefix(rng, v4));
    }
    if rng.random_bool(p) {
        m.dst = Some(prefix(rng, v4));
    }
    if rng.random_bool(p) {
        m.proto = Some([6, 17, 132, 1, 59][rng.random_range(0..5)]);
    }
    if rng.random_bool(p) {
        m.sport = Some(port_range(rng));
    }
    if rng.random_bool(p) {
        m.dport = Some(port_range(rng));
    }
    if rng.random_bool(0.2) {
        m.dscp = Some([0, 46, 10, 63][rng.random_range(0..4)]);
    }
    if rng.random_bool(0.2) {
        m.vlan = Some([0, 100, 4095, 7][rng.random_range(0..4)]);
    }
    m
}

fn random_rules(rng: &mut ChaCha8Rng) -> Vec<Rule> {
    (0..rng.random_range(1..10))
        .map(|i| Rule {
            class: 1 + (i as u16 * 3 + rng.random_range(0..3)) % 20,
            matches: random_match(rng),
        })
        .collect()
}

/// A valid UDP frame of random fields from the pools above.
fn base_frame(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let v4 = rng.random_bool(0.6);
    let spec = UdpSpec {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        vlan: rng
            .random_bool(0.3)
            .then(|| [0, 100, 4095, 7][rng.random_range(0..4)]),
        src_ip: addr(rng, v4),
        dst_ip: addr(rng, v4),
        sport: PORTS[rng.random_range(0..PORTS.len())],
        dport: if rng.random_bool(0.3) {
            rng.random()
        } else {
            PORTS[rng.random_range(0..PORTS.len())]
        },
        dscp: [0, 46, 10, 63][rng.random_range(0..4)],
        ttl: 64,
        payload: vec![0xab; rng.random_range(0..64)],
    };
    let mut buf = vec![0u8; 2048];
    let n = build_udp(&mut buf, &spec).expect("fits");
    buf.truncate(n);
    buf
}

/// Where the IP header starts (after the VLAN tags), and its ethertype.
fn l3(f: &[u8]) -> (usize, u16) {
    let mut at = 12;
    loop {
        let et = u16::from_be_bytes([f[at], f[at + 1]]);
        if (et == 0x8100 || et == 0x88a8) && f.len() >= at + 6 {
            at += 4;
        } else {
            return (at + 2, et);
        }
    }
}

/// One random change that the classifier has a rule for.
fn mutate(rng: &mut ChaCha8Rng, f: &mut Vec<u8>) {
    let (l3, et) = l3(f);
    match rng.random_range(0..10) {
        // Another VLAN tag (802.1ad or 802.1Q) in front.
        0 => {
            let tpid: u16 = if rng.random_bool(0.5) { 0x88a8 } else { 0x8100 };
            let tci: u16 = rng.random();
            let tag = [tpid.to_be_bytes(), tci.to_be_bytes()].concat();
            f.splice(12..12, tag);
        }
        // Another protocol.
        1 if et == 0x0800 && f.len() > l3 + 9 => {
            f[l3 + 9] = [6, 17, 132, 1, 0][rng.random_range(0..5)]
        }
        1 if et == 0x86dd && f.len() > l3 + 6 => {
            f[l3 + 6] = [6, 17, 132, 58, 59][rng.random_range(0..5)]
        }
        // Fragments: more-fragments flag, offsets.
        2 if et == 0x0800 && f.len() > l3 + 7 => {
            let v: u16 = [0x2000, 0x0001, 0x2010, 0x4000, rng.random()][rng.random_range(0..5)];
            f[l3 + 6..l3 + 8].copy_from_slice(&v.to_be_bytes());
        }
        // IPv4 options (IHL > 5, the bytes inserted) or a bad IHL / version.
        3 if et == 0x0800 && f.len() > l3 + 20 => {
            if rng.random_bool(0.7) {
                let words = rng.random_range(1..=10usize);
                f[l3] = 0x40 | (5 + words as u8);
                f.splice(l3 + 20..l3 + 20, vec![1u8; words * 4]);
            } else {
                f[l3] = rng.random();
            }
        }
        // IPv6 extension headers in front of the transport header.
        4 if et == 0x86dd && f.len() >= l3 + 40 => {
            let count = rng.random_range(1..=7);
            let mut next = f[l3 + 6];
            let mut chain = Vec::new();
            for _ in 0..count {
                let kind = [0u8, 43, 60, 44][rng.random_range(0..4)];
                let mut h = vec![0u8; 8];
                h[0] = next;
                if kind == 44 {
                    let off: u16 = if rng.random_bool(0.5) {
                        0
                    } else {
                        rng.random_range(1..100) << 3
                    };
                    let m = u16::from(rng.random_bool(0.5));
                    h[2..4].copy_from_slice(&(off | m).to_be_bytes());
                } else {
                    let len = rng.random_range(0..3);
                    h[1] = len;
                    h.resize(8 + usize::from(len) * 8, 0);
                }
                next = kind;
                chain.splice(0..0, h);
            }
            f[l3 + 6] = next;
            f.splice(l3 + 40..l3 + 40, chain);
        }
        5 if et == 0x86dd && f.len() > l3 => f[l3] = rng.random(),
        // Cut short anywhere past the Ethernet header.
        6 => {
            let n = rng.random_range(14..=f.len());
            f.truncate(n);
        }
        // A few flipped bytes in the headers.
        7 => {
            for _ in 0..rng.random_range(1..4) {
                let i = rng.random_range(0..f.len().min(90));
                f[i] ^= 1 << rng.random_range(0..8);
            }
        }
        // Another ethertype entirely (ARP, LLDP, random).
        8 => {
            let et: u16 = [0x0806, 0x88cc, rng.random()][rng.random_range(0..3)];
            f[l3 - 2..l3].copy_from_slice(&et.to_be_bytes());
        }
        _ => {}
    }
}

fn frame(rng: &mut ChaCha8Rng) -> Vec<u8> {
    if rng.random_bool(0.05) {
        let n = rng.random_range(14..120);
        return (0..n).map(|_| rng.random()).collect();
    }
    let mut f = base_frame(rng);
    for _ in 0..rng.random_range(0..4) {
        mutate(rng, &mut f);
    }
    f
}

#[test]
fn the_compiled_classifier_agrees_with_the_userspace_one() {
    if !is_root() {
        skipped("bpf(2) needs root (CAP_BPF, CAP_NET_ADMIN)");
        return;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_0001);
    let map = Map::xsk(64, "pst_diff").expect("XSKMAP");
    let per_set = cases().div_ceil(RULE_SETS);
    let (mut checked, mut not_default) = (0u64, 0u64);
    let mut out = vec![0u8; 4096];
    for set in 0..RULE_SETS {
        let rules = random_rules(&mut rng);
        let default = rng.random_range(0..3);
        let userspace = Classifier::new(rules.clone(), default).expect("rules");
        let steer = if set % 2 == 0 {
            Steer::ByClass
        } else {
            Steer::ByQueue
        };
        let prog = load(&rules, default, &map, steer)
            .unwrap_or_else(|e| panic!("rule set {set} {rules:?}: {e}"));
        for case in 0..per_set {
            let f = frame(&mut rng);
            let want = userspace.classify(&f).class;
            let before = pktsched_io::clock::monotonic_ns();
            let run = prog.test_run(&f, &mut out).expect("test run");
            let after = pktsched_io::clock::monotonic_ns();
            assert_eq!(
                run.retval,
                action::PASS,
                "no socket in the map: the frame passes"
            );
            let got = class_of_output(&out[..run.out_len], f.len());
            assert_eq!(
                got,
                Some(want),
                "rule set {set} case {case}: rules {:#?} default {default}\nframe {f:02x?}\nuserspace {:?}",
                rules.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
                pktsched_io::classify::fields(&f)
            );
            assert_eq!(
                &out[META_LEN..run.out_len],
                &f[..],
                "the frame itself is untouched"
            );
            let rx = rx_ns_of_output(&out[..run.out_len], f.len(), META_LEN);
            assert!(
                rx.is_some_and(|t| before <= t && t <= after),
                "the receive stamp {rx:?} is the run's time ({before}..={after})"
            );
            checked += 1;
            not_default += u64::from(want != default);
        }
    }
    assert_eq!(checked, per_set * RULE_SETS);
    assert!(
        not_default * 10 > checked,
        "the rules matched too rarely to test much ({not_default} of {checked})"
    );
}

#[test]
fn every_field_of_a_rule_compiles_and_too_many_rules_are_refused_by_count() {
    if !is_root() {
        skipped("bpf(2) needs root");
        return;
    }
    let map = Map::xsk(64, "pst_diff").expect("XSKMAP");
    let full = Match {
        src: Some("2001:db8::/33".parse().expect("prefix")),
        dst: Some("2001:db8:8000::/127".parse().expect("prefix")),
        proto: Some(17),
        sport: Some("1-65535".parse().expect("range")),
        dport: Some("5000".parse().expect("range")),
        dscp: Some(46),
        vlan: Some(100),
    };
    let many: Vec<Rule> = (0..MAX_RULES)
        .map(|i| Rule {
            class: (i % 60) as u16,
            matches: full.clone(),
        })
        .collect();
    load(&many, 0, &map, Steer::ByClass).expect("the largest rule set loads");
    let mut more = many.clone();
    more.push(more[0].clone());
    let e = compile(&more, 0, &map, Steer::ByClass)
        .expect_err("too many")
        .to_string();
    assert!(
        e.contains(&format!("{} rules", MAX_RULES + 1)) && e.contains(&MAX_RULES.to_string()),
        "{e}"
    );
    let mixed = Rule {
        class: 1,
        matches: Match {
            src: Some("10.0.0.0/8".parse().expect("prefix")),
            dst: Some("2001:db8::/32".parse().expect("prefix")),
            ..Match::default()
        },
    };
    let e = compile(&[mixed], 0, &map, Steer::ByClass)
        .expect_err("mixed")
        .to_string();
    assert!(
        e.contains("rule 0") && e.contains("different IP versions"),
        "{e}"
    );
}

/// The classifier and the redirect program load where the verifier checks
/// packet alignment (a kernel without efficient unaligned access, e.g.
/// some riscv64 builds; asked for here with `BPF_F_STRICT_ALIGNMENT`):
/// every header read is aligned to its width for the IP header at 14, 18
/// or 22 bytes, with both address families and every steering, and the
/// class and the stamp in front of the frame are stored two bytes at a
/// time.
#[test]
fn the_xdp_programs_load_under_strict_alignment() {
    if !is_root() {
        skipped("bpf(2) needs root");
        return;
    }
    let map = Map::xsk(64, "pst_align").expect("XSKMAP");
    let rule = |src: &str, dst: &str| Rule {
        class: 1,
        matches: Match {
            src: Some(src.parse().expect("prefix")),
            dst: Some(dst.parse().expect("prefix")),
            proto: Some(17),
            dport: Some("5000".parse().expect("range")),
            dscp: Some(46),
            vlan: Some(100),
            ..Match::default()
        },
    };
    let rules = [
        rule("10.0.0.0/8", "198.18.0.0/15"),
        rule("2001:db8::/33", "2001:db8:8000::/127"),
    ];
    let redirect = redirect_by_queue(&map).expect("assembles");
    if let Err(e) =
        Program::load_xdp_flags("pst_align", &redirect, "Dual MIT/GPL", STRICT_ALIGNMENT)
    {
        panic!("redirect: refused under strict alignment: {e:?}");
    }
    for steer in [Steer::ByClass, Steer::ByQueue, Steer::ByClassOnQueue(0)] {
        let insns = compile(&rules, 0, &map, steer).expect("compiles");
        if let Err(e) =
            Program::load_xdp_flags("pst_align", &insns, "Dual MIT/GPL", STRICT_ALIGNMENT)
        {
            panic!("{steer:?}: refused under strict alignment: {e:?}");
        }
    }
}
