use super::*;
use crate::frame::{UdpSpec, build_udp};
use proptest::prelude::*;

fn spec(src: &str, dst: &str, sport: u16, dport: u16, dscp: u8, vlan: Option<u16>) -> UdpSpec {
    UdpSpec {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        vlan,
        src_ip: src.parse().expect("src"),
        dst_ip: dst.parse().expect("dst"),
        sport,
        dport,
        dscp,
        ttl: 64,
        payload: vec![0; 32],
    }
}

fn frame(s: &UdpSpec) -> Vec<u8> {
    let mut buf = vec![0u8; 256];
    let n = build_udp(&mut buf, s).expect("fits");
    buf.truncate(n);
    buf
}

fn rule(class: u16, m: Match) -> Rule {
    Rule { class, matches: m }
}

fn classifier() -> Classifier {
    let voice = Match {
        proto: Some(17),
        dport: Some("5000-5010".parse().expect("range")),
        ..Match::default()
    };
    let ef = Match {
        dscp: Some(46),
        ..Match::default()
    };
    let lan = Match {
        src: Some("10.0.0.0/8".parse().expect("prefix")),
        ..Match::default()
    };
    let v6 = Match {
        dst: Some("2001:db8::/32".parse().expect("prefix")),
        sport: Some("53".parse().expect("port")),
        ..Match::default()
    };
    let tagged = Match {
        vlan: Some(100),
        ..Match::default()
    };
    Classifier::new(
        vec![
            rule(1, voice),
            rule(2, ef),
            rule(3, lan),
            rule(4, v6),
            rule(5, tagged),
        ],
        0,
    )
    .expect("valid")
}

#[test]
fn first_matching_rule_wins_and_the_rest_go_to_the_default() {
    let c = classifier();
    let cases = [
        (spec("198.18.0.1", "198.18.0.2", 1, 5005, 46, None), 1),
        (spec("198.18.0.1", "198.18.0.2", 1, 6000, 46, None), 2),
        (spec("10.1.2.3", "198.18.0.2", 1, 6000, 0, None), 3),
        (spec("2001:db9::1", "2001:db8::9", 53, 1, 0, None), 4),
        (spec("2001:db9::1", "2001:db7::9", 53, 1, 0, None), 0),
        (spec("198.18.0.1", "198.18.0.2", 1, 6000, 0, Some(100)), 5),
        (spec("198.18.0.1", "198.18.0.2", 1, 6000, 0, Some(101)), 0),
        (spec("198.18.0.1", "198.18.0.2", 1, 5011, 0, None), 0),
    ];
    for (s, want) in cases {
        let got = c.classify(&frame(&s));
        assert_eq!(
            got,
            Classified {
                class: want,
                note: None
            },
            "{s:?}"
        );
    }
}

#[test]
fn odd_frames_follow_the_documented_rule() {
    let c = classifier();
    let good = frame(&spec("10.0.0.1", "198.18.0.2", 1, 5000, 0, None));
    // Runt.
    assert_eq!(c.classify(&good[..13]).note, Some(Anomaly::Runt));
    assert_eq!(c.classify(&[]).class, 0);
    // ARP: not IP.
    let mut arp = good.clone();
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(
        c.classify(&arp),
        Classified {
            class: 0,
            note: Some(Anomaly::NonIp)
        }
    );
    // Truncated IPv4 header: no fields, default class.
    assert_eq!(c.classify(&good[..30]).note, Some(Anomaly::Truncated));
    // Truncated UDP header: addresses still match (rule 3 on src), no ports.
    let cut = c.classify(&good[..36]);
    assert_eq!(
        cut,
        Classified {
            class: 3,
            note: Some(Anomaly::Truncated)
        }
    );
    // Bad version.
    let mut bad = good.clone();
    bad[14] = 0x65;
    assert_eq!(c.classify(&bad).note, Some(Anomaly::BadIpHeader));
    // A later fragment has no ports: the port rule does not match it, the
    // address rule still does.
    let mut frag = good.clone();
    frag[20..22].copy_from_slice(&0x0010u16.to_be_bytes());
    assert_eq!(
        c.classify(&frag),
        Classified {
            class: 3,
            note: Some(Anomaly::Fragment)
        }
    );
    // The first fragment carries ports.
    let mut first = frame(&spec("198.18.0.1", "198.18.0.2", 1, 5000, 0, None));
    first[20..22].copy_from_slice(&0x2000u16.to_be_bytes());
    assert_eq!(
        c.classify(&first),
        Classified {
            class: 1,
            note: Some(Anomaly::Fragment)
        }
    );
}

#[test]
fn ipv4_options_move_the_ports() {
    // IHL 6: four bytes of options (NOPs) before UDP.
    let plain = frame(&spec("198.18.0.1", "198.18.0.2", 1, 5003, 0, None));
    let mut with = plain[..34].to_vec();
    with[14] = 0x46;
    with.extend_from_slice(&[1, 1, 1, 1]);
    with.extend_from_slice(&plain[34..]);
    let (f, note) = fields(&with);
    assert_eq!(note, Some(Anomaly::IpOptions));
    assert_eq!((f.sport, f.dport), (Some(1), Some(5003)));
    assert_eq!(classifier().classify(&with).class, 1);
}

#[test]
fn ipv6_extension_headers_are_followed_up_to_a_bound() {
    let plain = frame(&spec("2001:db9::1", "2001:db8::9", 53, 7, 0, None));
    let with_hops = |n: usize| {
        let mut f = plain[..54].to_vec();
        f[20] = 0; // next header: hop-by-hop
        let udp = plain[54..].to_vec();
        for i in 0..n {
            let next = if i + 1 == n { 17 } else { 60 };
            f.extend_from_slice(&[next, 0, 0, 0, 0, 0, 0, 0]);
        }
        f.extend_from_slice(&udp);
        f
    };
    let (f, note) = fields(&with_hops(2));
    assert_eq!((note, f.proto, f.sport), (None, Some(17), Some(53)));
    let (f, note) = fields(&with_hops(MAX_EXT_HEADERS + 1));
    assert_eq!((note, f.sport), (Some(Anomaly::ExtHeaders), None));
}

#[test]
fn a_rule_covers_the_narrower_ones() {
    let m = |src: Option<&str>, dport: Option<&str>, proto: Option<u8>| Match {
        src: src.map(|s| s.parse().expect("prefix")),
        dport: dport.map(|p| p.parse().expect("ports")),
        proto,
        ..Match::default()
    };
    let wide = m(Some("10.0.0.0/8"), Some("1000-2000"), None);
    assert!(wide.covers(&m(Some("10.1.0.0/16"), Some("1500"), Some(17))));
    assert!(!wide.covers(&m(Some("10.1.0.0/16"), Some("900-1500"), None)));
    assert!(!wide.covers(&m(Some("11.0.0.0/8"), Some("1500"), None)));
    assert!(
        !wide.covers(&m(None, Some("1500"), None)),
        "any source is wider"
    );
    assert!(!wide.covers(&m(Some("2001:db8::/32"), Some("1500"), None)));
    assert!(Match::default().covers(&wide));
    assert!(!m(None, None, Some(6)).covers(&m(None, None, Some(17))));
}

#[test]
fn prefixes_and_ranges_parse_strictly() {
    let p: IpPrefix = "10.1.0.0/16".parse().expect("ok");
    assert!(p.contains("10.1.200.3".parse().expect("ip")));
    assert!(!p.contains("10.2.0.1".parse().expect("ip")));
    assert!(!p.contains("::1".parse().expect("ip")));
    assert_eq!("1.2.3.4".parse::<IpPrefix>().map(|p| p.len), Ok(32));
    assert_eq!(
        "::/0".parse::<IpPrefix>().map(|p| p.to_string()),
        Ok("::/0".into())
    );
    assert!(matches!(
        "10.1.0.1/16".parse::<IpPrefix>(),
        Err(ParseError::HostBits { .. })
    ));
    assert!(matches!(
        "10.0.0.0/33".parse::<IpPrefix>(),
        Err(ParseError::PrefixLen { .. })
    ));
    assert_eq!("x".parse::<IpPrefix>(), Err(ParseError::Address));
    assert_eq!(
        "10-20".parse::<PortRange>(),
        Ok(PortRange { lo: 10, hi: 20 })
    );
    assert_eq!(
        "20-10".parse::<PortRange>(),
        Err(ParseError::Reversed { lo: 20, hi: 10 })
    );
    assert_eq!("65536".parse::<PortRange>(), Err(ParseError::Port));
    let bad = Match {
        src: Some("10.0.0.0/8".parse().expect("p")),
        dst: Some("::/0".parse().expect("p")),
        ..Match::default()
    };
    assert!(matches!(
        Classifier::new(vec![rule(1, bad)], 0),
        Err(ClassifyConfigError::MixedFamilies { .. })
    ));
}

#[test]
fn anomalies_are_counted_by_kind_and_rules_print_normalised() {
    let c = classifier();
    let good = frame(&spec("10.0.0.1", "198.18.0.2", 1, 5000, 0, None));
    let mut stats = ClassifyStats::default();
    for f in [&good[..], &good[..5], &good[..30], &good[..], &[0u8; 3][..]] {
        stats.record(c.classify(f).note);
    }
    assert_eq!(stats.get(Anomaly::Runt), 2);
    assert_eq!(stats.get(Anomaly::Truncated), 1);
    assert_eq!(stats.iter().map(|(_, n)| n).sum::<u64>(), 3);
    let mut total = stats;
    total.merge(&stats);
    assert_eq!(total.get(Anomaly::Runt), 4);
    assert_eq!(
        stats.to_string(),
        "runt 2 non_ip 0 truncated 1 bad_ip_header 0 ip_options 0 fragment 0 ext_headers 0"
    );
    let m = Match {
        dst: Some("2001:db8::/32".parse().expect("prefix")),
        proto: Some(17),
        dport: Some("1000-2000".parse().expect("range")),
        vlan: Some(7),
        ..Match::default()
    };
    assert_eq!(
        rule(3, m).to_string(),
        "class 3: dst 2001:db8::/32 proto 17 dport 1000-2000 vlan 7"
    );
    assert_eq!(Match::default().to_string(), "any");
}

fn cases() -> u32 {
    std::env::var("PKTSCHED_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

fn arb_spec() -> impl Strategy<Value = UdpSpec> {
    (
        any::<bool>(),
        any::<[u8; 16]>(),
        any::<[u8; 16]>(),
        any::<u16>(),
        any::<u16>(),
        0u8..64,
        proptest::option::of(0u16..4096),
        0usize..64,
    )
        .prop_map(|(v6, a, b, sport, dport, dscp, vlan, len)| {
            let (src, dst): (IpAddr, IpAddr) = if v6 {
                (Ipv6Addr::from(a).into(), Ipv6Addr::from(b).into())
            } else {
                (
                    Ipv4Addr::new(a[0], a[1], a[2], a[3]).into(),
                    Ipv4Addr::new(b[0], b[1], b[2], b[3]).into(),
                )
            };
            UdpSpec {
                src_mac: [2, 0, 0, 0, 0, 1],
                dst_mac: [2, 0, 0, 0, 0, 2],
                vlan,
                src_ip: src,
                dst_ip: dst,
                sport,
                dport,
                dscp,
                ttl: 64,
                payload: vec![0xab; len],
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Any bytes: no panic, and the class is a configured one.
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let v = classifier().classify(&bytes);
        prop_assert!(v.class <= 5);
    }

    /// Valid frames with bytes flipped, cut or extended: no panic.
    #[test]
    fn mutated_frames_never_panic(
        s in arb_spec(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
        cut in any::<usize>(),
    ) {
        let mut f = frame(&s);
        for (at, byte) in flips {
            let n = f.len();
            f[at % n] = byte;
        }
        let keep = cut % (f.len() + 1);
        let v = classifier().classify(&f[..keep]);
        prop_assert!(v.class <= 5);
    }

    /// Differential: on valid frames the classifier reads the same fields
    /// as etherparse.
    #[test]
    fn fields_agree_with_etherparse(s in arb_spec()) {
        let f = frame(&s);
        let (got, note) = fields(&f);
        prop_assert_eq!(note, None);
        let p = etherparse::SlicedPacket::from_ethernet(&f).expect("etherparse parses it");
        let (src, dst, dscp): (IpAddr, IpAddr, u8) = match &p.net {
            Some(etherparse::NetSlice::Ipv4(ip)) => (
                ip.header().source_addr().into(),
                ip.header().destination_addr().into(),
                ip.header().dcp().value(),
            ),
            Some(etherparse::NetSlice::Ipv6(ip)) => (
                ip.header().source_addr().into(),
                ip.header().destination_addr().into(),
                ip.header().traffic_class() >> 2,
            ),
            _ => return Err(TestCaseError::fail("no IP layer")),
        };
        let (sport, dport) = match &p.transport {
            Some(etherparse::TransportSlice::Udp(u)) => (u.source_port(), u.destination_port()),
            _ => return Err(TestCaseError::fail("no UDP")),
        };
        let vlan = p.vlan().map(|v| match v {
            etherparse::VlanSlice::SingleVlan(s) => s.vlan_identifier().value(),
            // The frames built here carry at most one tag.
            etherparse::VlanSlice::DoubleVlan(_) => u16::MAX,
        });
        prop_assert_eq!(got.src, Some(src));
        prop_assert_eq!(got.dst, Some(dst));
        prop_assert_eq!(got.dscp, Some(dscp));
        prop_assert_eq!(got.proto, Some(17));
        prop_assert_eq!((got.sport, got.dport), (Some(sport), Some(dport)));
        prop_assert_eq!(got.vlan, vlan);
    }
}

/// A frame with the header stacks the classifier must walk, laid out by
/// hand (not by [`build_udp`]), for the differential against etherparse:
/// up to two VLAN tags (0x8100 / 0x88a8), IPv4 with 0..=40 bytes of
/// options or IPv6 behind hop-by-hop / destination-options / routing /
/// atomic-fragment headers (in RFC 8200 order), then TCP or UDP.
#[derive(Clone, Debug)]
struct Stack {
    vlans: Vec<(bool, u16)>,
    v6: bool,
    option_words: usize,
    ext: [Option<u8>; 3],
    fragment: bool,
    tcp: bool,
    src: [u8; 16],
    dst: [u8; 16],
    sport: u16,
    dport: u16,
    dscp: u8,
    payload: usize,
}

fn arb_stack() -> impl Strategy<Value = Stack> {
    (
        proptest::collection::vec((any::<bool>(), 0u16..4096), 0..=2),
        any::<bool>(),
        0usize..=10,
        proptest::array::uniform3(proptest::option::of(0u8..4)),
        any::<bool>(),
        any::<bool>(),
        (any::<[u8; 16]>(), any::<[u8; 16]>()),
        (any::<u16>(), any::<u16>(), 0u8..64, 0usize..40),
    )
        .prop_map(
            |(
                vlans,
                v6,
                option_words,
                ext,
                fragment,
                tcp,
                (src, dst),
                (sport, dport, dscp, payload),
            )| {
                Stack {
                    vlans,
                    v6,
                    option_words,
                    ext,
                    fragment,
                    tcp,
                    src,
                    dst,
                    sport,
                    dport,
                    dscp,
                    payload,
                }
            },
        )
}

fn stack_frame(s: &Stack) -> Vec<u8> {
    let proto = if s.tcp { 6u8 } else { 17 };
    let mut l4 = Vec::new();
    l4.extend_from_slice(&s.sport.to_be_bytes());
    l4.extend_from_slice(&s.dport.to_be_bytes());
    if s.tcp {
        l4.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
    } else {
        l4.extend_from_slice(&((8 + s.payload) as u16).to_be_bytes());
        l4.extend_from_slice(&[0, 0]);
    }
    l4.extend(std::iter::repeat_n(0x5a, s.payload));

    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    for &(ad, vid) in &s.vlans {
        f.extend_from_slice(&(if ad { 0x88a8u16 } else { 0x8100 }).to_be_bytes());
        f.extend_from_slice(&vid.to_be_bytes());
    }
    if s.v6 {
        // Extension headers, each naming the next.
        let mut chain: Vec<(u8, Vec<u8>)> = Vec::new();
        for (kind, len) in [0u8, 60, 43].into_iter().zip(s.ext) {
            if let Some(len) = len {
                let mut body = vec![0u8; 8 + 8 * usize::from(len)];
                body[1] = len;
                if kind == 43 {
                    body[2] = 0; // routing type 0 with segments left 0
                } else {
                    body[2] = 1; // a PadN option filling the header
                    body[3] = (body.len() - 4) as u8;
                }
                chain.push((kind, body));
            }
        }
        if s.fragment {
            chain.push((44, vec![0, 0, 0, 0, 0, 0, 0, 7]));
        }
        let mut ext = Vec::new();
        for i in 0..chain.len() {
            let next = chain.get(i + 1).map_or(proto, |c| c.0);
            let mut body = chain[i].1.clone();
            body[0] = next;
            ext.extend_from_slice(&body);
        }
        let first = chain.first().map_or(proto, |c| c.0);
        f.extend_from_slice(&0x86ddu16.to_be_bytes());
        let tc = u32::from(s.dscp) << 2;
        f.extend_from_slice(&((6u32 << 28) | (tc << 20)).to_be_bytes());
        f.extend_from_slice(&((ext.len() + l4.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[first, 64]);
        f.extend_from_slice(&s.src);
        f.extend_from_slice(&s.dst);
        f.extend_from_slice(&ext);
    } else {
        let ihl = 5 + s.option_words;
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        let mut h = vec![0u8; ihl * 4];
        h[0] = 0x40 | ihl as u8;
        h[1] = s.dscp << 2;
        h[2..4].copy_from_slice(&((ihl * 4 + l4.len()) as u16).to_be_bytes());
        h[6] = 0x40;
        h[8] = 64;
        h[9] = proto;
        h[12..16].copy_from_slice(&s.src[..4]);
        h[16..20].copy_from_slice(&s.dst[..4]);
        for b in &mut h[20..] {
            *b = 1; // NOP options
        }
        let c = crate::frame::internet_checksum(&h, 0);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&h);
    }
    f.extend_from_slice(&l4);
    f
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Differential on header stacks laid out by hand: what etherparse
    /// reads, the classifier reads (outer VLAN id, addresses, DSCP, the
    /// protocol after the extension headers, ports); the note is the
    /// documented one.
    #[test]
    fn stacked_headers_agree_with_etherparse(s in arb_stack()) {
        let f = stack_frame(&s);
        let (got, note) = fields(&f);
        let p = etherparse::SlicedPacket::from_ethernet(&f)
            .map_err(|e| TestCaseError::fail(format!("etherparse: {e:?}")))?;
        let outer = p.link_exts.iter().find_map(|e| match e {
            etherparse::LinkExtSlice::Vlan(v) => Some(v.vlan_identifier().value()),
            _ => None,
        });
        prop_assert_eq!(got.vlan, outer);
        let (src, dst, dscp, proto): (IpAddr, IpAddr, u8, u8) = match &p.net {
            Some(etherparse::NetSlice::Ipv4(ip)) => (
                ip.header().source_addr().into(),
                ip.header().destination_addr().into(),
                ip.header().dcp().value(),
                ip.header().protocol().0,
            ),
            Some(etherparse::NetSlice::Ipv6(ip)) => (
                ip.header().source_addr().into(),
                ip.header().destination_addr().into(),
                ip.header().traffic_class() >> 2,
                ip.payload().ip_number.0,
            ),
            _ => return Err(TestCaseError::fail("no IP layer")),
        };
        let ports = match &p.transport {
            Some(etherparse::TransportSlice::Udp(u)) => (u.source_port(), u.destination_port()),
            Some(etherparse::TransportSlice::Tcp(t)) => (t.source_port(), t.destination_port()),
            _ => return Err(TestCaseError::fail("no transport")),
        };
        prop_assert_eq!((got.src, got.dst), (Some(src), Some(dst)));
        prop_assert_eq!(got.dscp, Some(dscp));
        prop_assert_eq!(got.proto, Some(proto));
        prop_assert_eq!((got.sport, got.dport), (Some(ports.0), Some(ports.1)));
        let want = if s.v6 && s.fragment {
            Some(Anomaly::Fragment)
        } else if !s.v6 && s.option_words > 0 {
            Some(Anomaly::IpOptions)
        } else {
            None
        };
        prop_assert_eq!(note, want);
    }
}
