#![allow(clippy::unwrap_used)]

use proptest::prelude::{prop_assert, prop_assert_eq, proptest};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::acl::{Acl, Action, Addr, Prefix, Rule};
use super::forward::{
    DropReason, Router, Verdict, checksum_update, ipv4_checksum, is_martian_v4, ones_sum,
};
use super::lpm::{Key, Lpm, RouteError};

/// The naive reference: every route in a list, the longest match wins.
fn reference<K: Key>(routes: &[(K, u8, u32)], addr: K) -> Option<(u32, u8)> {
    routes
        .iter()
        .filter(|r| addr.masked(r.1) == r.0)
        .max_by_key(|r| r.1)
        .map(|r| (r.2, r.1))
}

/// The first `len` bits of `hi`, the rest of `lo`.
fn mix<K: Key>(hi: K, lo: K, len: u8) -> K {
    K::from_u128(hi.masked(len).to_u128() | (lo.to_u128() & !lo.masked(len).to_u128()))
}

fn random<K: Key>(rng: &mut ChaCha8Rng) -> K {
    K::from_u128(rng.random())
}

/// A random table (with replacements and removals) against the reference.
fn lpm_matches_reference<K: Key>(seed: u64, n: usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t: Lpm<K, u32> = Lpm::new();
    let mut list: Vec<(K, u8, u32)> = Vec::new();
    // One shared top nibble so that prefixes nest and overlap.
    let base: K = random(&mut rng);
    for i in 0..n as u32 {
        let len = rng.random_range(0..=K::BITS);
        let p = mix(base, random(&mut rng), len.min(4)).masked(len);
        let old = t.insert(p, len, i).unwrap();
        let pos = list.iter().position(|r| r.0 == p && r.1 == len);
        assert_eq!(old, pos.map(|j| list[j].2));
        match pos {
            Some(j) => list[j].2 = i,
            None => list.push((p, len, i)),
        }
        if rng.random_ratio(1, 8) {
            let j = rng.random_range(0..list.len());
            let (p, l, v) = list.swap_remove(j);
            assert_eq!(t.remove(p, l).unwrap(), Some(v));
            assert_eq!(t.remove(p, l).unwrap(), None);
        }
    }
    assert_eq!(t.len(), list.len());
    assert!(t.memory_bytes() <= 12 * (1 + n * usize::from(K::BITS)) + n * 64);
    for _ in 0..2000 {
        let a = if rng.random_bool(0.5) && !list.is_empty() {
            let r = list[rng.random_range(0..list.len())];
            mix(r.0, random(&mut rng), r.1)
        } else {
            mix(base, random(&mut rng), 4)
        };
        assert_eq!(t.lookup(a), reference(&list, a), "addr {a:?}");
    }
    // Emptied in random order, the trie shrinks back to its root and
    // still answers like the reference on the way.
    while !list.is_empty() {
        let (p, l, v) = list.swap_remove(rng.random_range(0..list.len()));
        assert_eq!(t.remove(p, l).unwrap(), Some(v));
        let a = mix(p, random(&mut rng), l);
        assert_eq!(t.lookup(a), reference(&list, a), "addr {a:?}");
    }
    assert_eq!((t.len(), t.trie_nodes()), (0, 1));
}

/// Routes added and removed without end (a daemon reloading its table)
/// reuse the pruned nodes: the table never fills and stays small.
#[test]
fn route_churn_reuses_trie_nodes() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut t: Lpm<u128, u32> = Lpm::new();
    let mut high_water = 0;
    for i in 0..20_000u32 {
        let p: u128 = rng.random();
        t.insert(p, 128, i).unwrap();
        high_water = high_water.max(t.trie_nodes());
        assert_eq!(t.remove(p, 128).unwrap(), Some(i));
    }
    assert_eq!((t.len(), t.trie_nodes()), (0, 1));
    assert_eq!(high_water, 129);
    assert!(t.memory_bytes() < 129 * 16 + 64, "{}", t.memory_bytes());
}

proptest! {
    #[test]
    fn ipv4_lpm_matches_linear_reference(seed: u64, n in 0usize..300) {
        lpm_matches_reference::<u32>(seed, n);
    }

    #[test]
    fn ipv6_lpm_matches_linear_reference(seed: u64, n in 0usize..300) {
        lpm_matches_reference::<u128>(seed, n);
    }

    /// TTL decrement with the RFC 1624 update equals a full recomputation,
    /// on random headers with random options.
    #[test]
    fn incremental_checksum_equals_recomputation(seed: u64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut r: Router<u8> = Router::new();
        r.v4.insert(0, 0, 7).unwrap();
        for _ in 0..64 {
            let ihl = rng.random_range(5..=15usize);
            let mut f = vec![0u8; 14 + ihl * 4 + 8];
            f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            let ip = &mut f[14..];
            rng.fill(&mut ip[..ihl * 4]);
            ip[0] = 0x40 | ihl as u8;
            // A random destination or source may be martian (dropped, not
            // forwarded).
            if is_martian_v4(u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]])) {
                ip[16] = 10;
            }
            if is_martian_v4(u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]])) {
                ip[12] = 10;
            }
            let total = (ihl * 4 + 8) as u16;
            ip[2..4].copy_from_slice(&total.to_be_bytes());
            ip[6] &= 0x80; // no MF, offset 0 (reserved bit random)
            ip[7] = 0;
            ip[8] = rng.random_range(2..=255);
            let c = ipv4_checksum(&ip[..ihl * 4]);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            prop_assert_eq!(ones_sum(&ip[..ihl * 4]), 0xFFFF);
            let ttl = ip[8];
            prop_assert_eq!(r.forward(&mut f), Verdict::Forward(7));
            let ip = &f[14..];
            prop_assert_eq!(ip[8], ttl - 1);
            let stored = u16::from_be_bytes([ip[10], ip[11]]);
            prop_assert_eq!(stored, ipv4_checksum(&ip[..ihl * 4]));
            prop_assert!(ones_sum(&ip[..ihl * 4]) == 0xFFFF);
        }
    }
}

#[test]
fn rfc1624_example() {
    // RFC 1624 section 4: HC = 0xDD2F, m = 0x5555 → m' = 0x3285: HC' = 0x0000.
    assert_eq!(checksum_update(0xDD2F, 0x5555, 0x3285), 0x0000);
}

#[test]
fn route_errors_name_the_value_and_the_range() {
    let mut t: Lpm<u32, u8> = Lpm::new();
    assert_eq!(
        t.insert(0, 33, 1).unwrap_err(),
        RouteError::Length { len: 33, max: 32 }
    );
    let e = t.insert(0x0A00_0001, 8, 1).unwrap_err().to_string();
    assert_eq!(
        e,
        "prefix 167772161/8 has bits set after the first 8; write 167772160/8"
    );
    assert!(t.is_empty());
    assert_eq!(t.lookup(1), None);
    t.insert(0, 0, 9).unwrap();
    assert_eq!(t.lookup(u32::MAX), Some((9, 0)));
    t.insert(u32::MAX, 32, 3).unwrap();
    assert_eq!(t.lookup(u32::MAX), Some((3, 32)));
    assert_eq!(t.lookup(u32::MAX - 1), Some((9, 0)));
}

fn v4_frame(ttl: u8, dst: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 6];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&26u16.to_be_bytes());
    ip[8] = ttl;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[192, 168, 0, 1]);
    ip[16..20].copy_from_slice(&dst);
    let c = ipv4_checksum(&ip[..20]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f
}

fn v6_frame(hop: u8, next: u8, dst: u128) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 40 + 8];
    f[12..14].copy_from_slice(&0x86DDu16.to_be_bytes());
    let ip = &mut f[14..];
    ip[0] = 0x60;
    ip[4..6].copy_from_slice(&8u16.to_be_bytes());
    ip[6] = next;
    ip[7] = hop;
    ip[8..24].copy_from_slice(&(0x2001_0db8_u128 << 96 | 1).to_be_bytes());
    ip[24..40].copy_from_slice(&dst.to_be_bytes());
    f
}

fn reseal(f: &mut [u8]) {
    let hl = usize::from(f[14] & 0x0F) * 4;
    let hl = hl.clamp(20, f.len() - 14);
    let c = ipv4_checksum(&f[14..14 + hl]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
}

/// Every malformed case gets its documented verdict and its counter.
#[test]
fn malformed_frames_are_counted_by_reason() {
    use DropReason::*;
    let mut r: Router<u8> = Router::new();
    r.v4.insert(0x0A00_0000, 8, 1).unwrap();
    r.v6.insert(0x2001_0db8 << 96, 32, 2).unwrap();
    let good = v4_frame(64, [10, 0, 0, 1]);
    let edit = |f: fn(&mut Vec<u8>)| {
        let mut g = good.clone();
        f(&mut g);
        g
    };
    let v6 = 0x2001_0db8_0000_0000_0000_0000_0000_0001u128;
    let cases: Vec<(Vec<u8>, Verdict<u8>)> = vec![
        (good.clone(), Verdict::Forward(1)),
        (good[..10].to_vec(), Verdict::Drop(Truncated)),
        (good[..30].to_vec(), Verdict::Drop(Truncated)),
        (
            edit(|f| f[12] = 0x08_u8.wrapping_add(1)),
            Verdict::Drop(NotIp),
        ),
        (
            edit(|f| {
                f[14] = 0x35;
                reseal(f)
            }),
            Verdict::Drop(BadVersion),
        ),
        (
            edit(|f| {
                f[14] = 0x44;
                reseal(f)
            }),
            Verdict::Drop(BadIhl),
        ),
        (
            edit(|f| {
                f[14] = 0x4F;
            }),
            Verdict::Drop(Truncated),
        ),
        (edit(|f| f[30] ^= 1), Verdict::Drop(BadChecksum)),
        (
            edit(|f| {
                f[16..18].copy_from_slice(&19u16.to_be_bytes());
                reseal(f)
            }),
            Verdict::Drop(BadTotalLength),
        ),
        (
            edit(|f| {
                f[16..18].copy_from_slice(&27u16.to_be_bytes());
                reseal(f)
            }),
            Verdict::Drop(BadTotalLength),
        ),
        (
            edit(|f| {
                f[20] = 0x20;
                reseal(f)
            }),
            Verdict::Drop(Fragment),
        ),
        (
            edit(|f| {
                f[21] = 1;
                reseal(f)
            }),
            Verdict::Drop(Fragment),
        ),
        (v4_frame(1, [10, 0, 0, 1]), Verdict::TimeExceeded),
        (v4_frame(0, [10, 0, 0, 1]), Verdict::TimeExceeded),
        (v4_frame(64, [11, 0, 0, 1]), Verdict::Drop(NoRoute)),
        (v6_frame(64, 17, v6), Verdict::Forward(2)),
        (v6_frame(1, 17, v6), Verdict::TimeExceeded),
        (v6_frame(64, 0, v6), Verdict::Drop(Ipv6ExtHeader)),
        (v6_frame(64, 44, v6), Verdict::Drop(Ipv6ExtHeader)),
        (v6_frame(64, 17, 1), Verdict::Drop(NoRoute)),
        (
            v6_frame(64, 17, v6)[..50].to_vec(),
            Verdict::Drop(Truncated),
        ),
        (
            v6_frame(64, 17, v6)[..60].to_vec(),
            Verdict::Drop(BadTotalLength),
        ),
        (
            {
                let mut f = v6_frame(64, 17, v6);
                f[14] = 0x40;
                f
            },
            Verdict::Drop(BadVersion),
        ),
    ];
    for (i, (mut f, want)) in cases.into_iter().enumerate() {
        assert_eq!(r.forward(&mut f), want, "case {i}");
    }
    let s = r.stats();
    assert_eq!((s.forwarded, s.time_exceeded), (2, 3));
    let want = [
        (Truncated, 4),
        (NotIp, 1),
        (BadVersion, 2),
        (BadIhl, 1),
        (BadChecksum, 1),
        (BadTotalLength, 3),
        (Fragment, 2),
        (Ipv6ExtHeader, 2),
        (NoRoute, 2),
        (AclDenied, 0),
    ];
    for (reason, n) in want {
        assert_eq!(s.dropped(reason), n, "{reason:?}");
    }
}

#[test]
fn vlan_tag_and_hop_limit() {
    let mut r: Router<u8> = Router::new();
    r.v6.insert(0, 0, 5).unwrap();
    let mut f = v6_frame(9, 6, 77);
    f.splice(12..12, [0x81, 0x00, 0x00, 0x07]);
    assert_eq!(r.forward(&mut f), Verdict::Forward(5));
    assert_eq!(f[18 + 7], 8);
}

/// The access list: first match wins, no match permits, and every rule
/// checked is counted (the per-packet cost).
#[test]
fn acl_first_match_and_cost() {
    let mut r: Router<u8> = Router::new();
    r.v4.insert(0, 0, 1).unwrap();
    for i in 0..100u32 {
        r.acl
            .push(Rule {
                src: None,
                dst: Some(Prefix::V4((20 + i) << 24, 8)),
                action: Action::Deny,
            })
            .unwrap();
    }
    r.acl
        .push(Rule {
            src: Some(Prefix::V4(0xC0A8_0000, 16)),
            dst: Some(Prefix::V4(0x0A00_0000, 8)),
            action: Action::Deny,
        })
        .unwrap();
    assert_eq!(
        r.forward(&mut v4_frame(64, [10, 0, 0, 1])),
        Verdict::Drop(DropReason::AclDenied)
    );
    assert_eq!(r.stats().acl_rules_checked, 101);
    assert_eq!(
        r.forward(&mut v4_frame(64, [21, 0, 0, 1])),
        Verdict::Drop(DropReason::AclDenied)
    );
    assert_eq!(r.stats().acl_rules_checked, 103);
    assert_eq!(
        r.forward(&mut v4_frame(64, [9, 0, 0, 1])),
        Verdict::Forward(1)
    );
    assert_eq!(r.stats().acl_rules_checked, 204);
    let mut a = Acl::new();
    let e = a
        .push(Rule {
            src: Some(Prefix::V6(1, 64)),
            dst: None,
            action: Action::Permit,
        })
        .unwrap_err();
    assert!(
        e.to_string().contains("has bits set after the first 64"),
        "{e}"
    );
    assert!(
        a.push(Rule {
            src: None,
            dst: Some(Prefix::V4(0, 40)),
            action: Action::Deny
        })
        .is_err()
    );
    assert!(!Prefix::V4(0, 0).contains(Addr::V6(1)));
}

/// The access list and the route come before the TTL (as in Linux): an
/// expiring frame to an unrouted destination is `NoRoute`, one the list
/// denies is `AclDenied`, and every expiring frame costs its rules.
#[test]
fn acl_and_route_are_decided_before_the_ttl() {
    use DropReason::*;
    let mut r: Router<u8> = Router::new();
    r.v4.insert(0x0A00_0000, 8, 1).unwrap();
    r.v6.insert(0x2001_0db8 << 96, 32, 2).unwrap();
    for i in 0..5u32 {
        r.acl
            .push(Rule {
                src: None,
                dst: Some(Prefix::V4((20 + i) << 24, 8)),
                action: Action::Deny,
            })
            .unwrap();
    }
    let v6 = 0x2001_0db8_0000_0000_0000_0000_0000_0001u128;
    assert_eq!(
        r.forward(&mut v4_frame(1, [11, 0, 0, 1])),
        Verdict::Drop(NoRoute)
    );
    assert_eq!(r.forward(&mut v6_frame(1, 17, 7)), Verdict::Drop(NoRoute));
    assert_eq!(
        r.forward(&mut v4_frame(1, [20, 0, 0, 1])),
        Verdict::Drop(AclDenied)
    );
    let checked = r.stats().acl_rules_checked;
    assert_eq!(checked, 5 + 5 + 1, "the expiring frames paid their rules");
    assert_eq!(
        r.forward(&mut v4_frame(1, [10, 0, 0, 1])),
        Verdict::TimeExceeded
    );
    assert_eq!(r.forward(&mut v6_frame(1, 17, v6)), Verdict::TimeExceeded);
    assert_eq!(r.stats().acl_rules_checked, checked + 5 + 5);
    assert_eq!(r.stats().time_exceeded, 2);
    assert_eq!(
        (r.stats().dropped(NoRoute), r.stats().dropped(AclDenied)),
        (2, 1)
    );
}

/// With default routes, frames from martian sources are dropped as
/// `Martian`, their neighbours forwarded.
#[test]
fn martian_sources_are_not_forwarded_even_with_a_default_route() {
    let mut r: Router<u8> = Router::new();
    r.v4.insert(0, 0, 1).unwrap();
    r.v6.insert(0, 0, 2).unwrap();
    let martian = Verdict::Drop(DropReason::Martian);
    let from = |src: [u8; 4]| {
        let mut f = v4_frame(64, [10, 0, 0, 1]);
        f[14 + 12..14 + 16].copy_from_slice(&src);
        reseal(&mut f);
        f
    };
    for src in [
        [0, 0, 0, 0],
        [127, 0, 0, 1],
        [224, 0, 0, 5],
        [240, 0, 0, 1],
        [255; 4],
    ] {
        assert_eq!(r.forward(&mut from(src)), martian, "{src:?}");
    }
    for src in [[1, 0, 0, 1], [126, 255, 255, 255], [223, 255, 255, 255]] {
        assert_eq!(r.forward(&mut from(src)), Verdict::Forward(1), "{src:?}");
    }
    for (src, want) in [
        (0u128, martian),
        (1, martian),
        (0xfe80 << 112 | 9, martian),
        (0xff02 << 112 | 1, martian),
        (0x2001_0db8 << 96 | 7, Verdict::Forward(2)),
    ] {
        let mut f = v6_frame(64, 17, 0x2001_0db8_0002 << 80 | 1);
        f[14 + 8..14 + 24].copy_from_slice(&src.to_be_bytes());
        assert_eq!(r.forward(&mut f), want, "{src:x}");
    }
    assert_eq!(r.stats().dropped(DropReason::Martian), 5 + 4);
}

/// With default routes, martian destinations are dropped as `Martian`
/// (TTL 1 or not), their neighbours forwarded.
#[test]
fn martian_destinations_are_not_forwarded_even_with_a_default_route() {
    let mut r: Router<u8> = Router::new();
    r.v4.insert(0, 0, 1).unwrap();
    r.v6.insert(0, 0, 2).unwrap();
    let martian = Verdict::Drop(DropReason::Martian);
    for dst in [
        [255, 255, 255, 255],
        [224, 0, 0, 1],
        [239, 255, 255, 250],
        [127, 0, 0, 1],
        [127, 200, 1, 1],
        [0, 0, 0, 0],
        [0, 1, 2, 3],
        [240, 0, 0, 1],
        [255, 255, 255, 254],
    ] {
        for ttl in [64, 1] {
            assert_eq!(r.forward(&mut v4_frame(ttl, dst)), martian, "{dst:?}");
        }
    }
    let v6: [u128; 6] = [
        0,
        1,
        0xfe80 << 112,
        (0xfebf << 112) | 5,
        0xff02 << 112 | 1,
        0xff0e << 112 | 0x101,
    ];
    for dst in v6 {
        for hop in [64, 1] {
            assert_eq!(r.forward(&mut v6_frame(hop, 17, dst)), martian, "{dst:x}");
        }
    }
    assert_eq!(r.stats().dropped(DropReason::Martian), 2 * (9 + 6));
    for dst in [
        [223, 255, 255, 255],
        [126, 0, 0, 1],
        [128, 0, 0, 1],
        [1, 0, 0, 0],
    ] {
        assert_eq!(
            r.forward(&mut v4_frame(64, dst)),
            Verdict::Forward(1),
            "{dst:?}"
        );
    }
    for dst in [
        2u128,
        0xfec0 << 112,
        0xfe7f << 112,
        0xfeff << 112 | 1,
        0x2001 << 112,
    ] {
        assert_eq!(
            r.forward(&mut v6_frame(64, 17, dst)),
            Verdict::Forward(2),
            "{dst:x}"
        );
    }
}
