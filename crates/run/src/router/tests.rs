//! The route config (parsing, errors with positions, normalised output)
//! and the forwarding worker on in-memory devices: every frame taken from
//! a ring is forwarded with TTL − 1, a valid checksum and rewritten MACs,
//! or dropped with its reason; the poller's budgets decide the order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use pktsched_core::ingress::{Poller, Strategy};
use pktsched_core::route::forward::ipv4_checksum;
use pktsched_io::classify::Classifier;
use pktsched_io::frame::{UdpSpec, build_udp};
use pktsched_io::mem::{MemDevice, MemWire};
use pktsched_io::{BufPool, ClassRx, IoError, IoStats, PacketBuf, PacketIo};

use super::config::parse;
use super::cost::Cost;
use super::stats::{ClassSnapshot, REASONS};
use super::table::Table;
use super::worker::{RouterPorts, Worker};

const EXAMPLE: &str = include_str!("../../../../examples/route.toml");

fn err(src: &str) -> String {
    parse(src, "r.toml")
        .expect_err("must be refused")
        .to_string()
}

const BASE: &str = "[router]\ningress = \"a0\"\negress = \"a1\"\n";
const ROUTE: &str = "[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n";

#[test]
fn the_example_parses_and_its_normalised_form_is_the_same_config() {
    let cfg = parse(EXAMPLE, "route.toml").expect("example");
    assert_eq!(cfg.router.strategy, Strategy::LlWfq);
    assert_eq!(cfg.classes.len(), 2);
    assert_eq!(cfg.default_class, 1);
    assert_eq!(cfg.plan().budgets(), &[60, 4]);
    let text = cfg.to_string();
    let again = parse(&text, "normalised.toml").expect("normalised parses");
    assert_eq!(again.to_string(), text);
    assert_eq!(again.routes, cfg.routes);
    assert_eq!(again.classes, cfg.classes);
    assert_eq!(again.router, cfg.router);
}

#[test]
fn defaults_fill_in_and_sq_ignores_budgets() {
    let src = format!(
        "{BASE}strategy = \"sq\"\n[[class]]\nname = \"rt\"\nbudget = 50\nmatch = [{{ dscp = \"ef\" }}]\n[[class]]\nname = \"be\"\n{ROUTE}"
    );
    let cfg = parse(&src, "r.toml").expect("config");
    assert_eq!(cfg.router.device_budget, 64);
    assert_eq!(cfg.router.ring_frames, 256);
    assert_eq!(cfg.router.cost, Cost::None);
    let plan = cfg.plan();
    assert_eq!(plan.rings(), 1);
    assert_eq!(plan.ring_of(1), 0);
    assert_eq!(
        cfg.classes[1].budget, 32,
        "default: device budget / classes"
    );
}

#[test]
fn errors_name_the_field_the_value_and_what_is_allowed() {
    let class = "[[class]]\nname = \"be\"\n";
    let cases: Vec<(String, &[&str])> = vec![
        (
            format!("{BASE}strategy = \"wfq\"\n{class}{ROUTE}"),
            &["r.toml:4:12", "wfq", "sq, rr, ll-rr, ll-wfq"],
        ),
        (
            format!("{BASE}cost = \"2uss\"\n{class}{ROUTE}"),
            &["router.cost = \"2uss\"", "acl:N"],
        ),
        (
            format!(
                "{BASE}backend = \"xdp\"\n[[class]]\nname = \"v\"\nmatch = [{{ vlan = 7 }}]\n{class}{ROUTE}"
            ),
            &[
                "router.backend = \"xdp\" with class \"v\" matching on vlan",
                "\"packet\"",
            ],
        ),
        (
            format!("{BASE}[[class]]\nname = \"be\"\nbudget = 0\n{ROUTE}"),
            &["budget = 0", "1..=64"],
        ),
        (
            format!("{BASE}{class}{class}{ROUTE}"),
            &["class \"be\" is defined twice (first at line", "unique"],
        ),
        (
            format!("{BASE}[[class]]\nname = \"x\"\nmatch = [{{ dscp = 1 }}]\n{ROUTE}"),
            &["every class has `match`"],
        ),
        (
            format!("{BASE}{class}[[class]]\nname = \"y\"\n{ROUTE}"),
            &["no `match`", "exactly one"],
        ),
        (
            format!("{BASE}{class}[[route]]\nprefix = \"10.0.0.1/8\"\ndev = \"a1\"\n"),
            &["route.prefix = \"10.0.0.1/8\"", "host bits"],
        ),
        (
            format!(
                "{BASE}{class}[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"10.0.0.9\"\ndev = \"a1\"\n"
            ),
            &["via = 10.0.0.9 is not a [[neighbour]]"],
        ),
        (
            format!("{BASE}{class}[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"eth9\"\n"),
            &["route.dev = \"eth9\"", "\"a0\" or \"a1\""],
        ),
        (format!("{BASE}{class}"), &["0 [[route]] entries"]),
        (
            format!("[router]\ningress = \"a0\"\negress = \"a0\"\n{class}{ROUTE}"),
            &["give two interfaces"],
        ),
        (
            format!(
                "{BASE}strategy = \"ll-rr\"\n[[class]]\nname = \"a\"\nbudget = 8\nmatch = [{{ dport = 1 }}]\n[[class]]\nname = \"b\"\nbudget = 4\n{ROUTE}"
            ),
            &["ll-rr gives every ring the same budget"],
        ),
        (
            format!(
                "{BASE}{class}{ROUTE}[[neighbour]]\nip = \"10.0.0.1\"\nmac = \"02:00:00:00:00\"\n"
            ),
            &["neighbour.mac", "aa:bb:cc:dd:ee:ff"],
        ),
        (
            format!(
                "{BASE}{class}{ROUTE}[[neighbour]]\nip = \"10.0.0.1\"\nmac = \"ff:ff:ff:ff:ff:ff\"\n"
            ),
            &["neighbour.mac = \"ff:ff:ff:ff:ff:ff\"", "unicast"],
        ),
        (
            format!(
                "{BASE}{class}{ROUTE}[[neighbour]]\nip = \"10.0.0.1\"\nmac = \"01:00:5e:00:00:01\"\n"
            ),
            &["neighbour.mac = \"01:00:5e:00:00:01\"", "first byte even"],
        ),
        (
            format!("{BASE}ingress_address = \"255.255.255.255\"\n{class}{ROUTE}"),
            &[
                "router.ingress_address = \"255.255.255.255\"",
                "unicast IPv4",
            ],
        ),
        (
            format!("{BASE}egress_address = \"224.0.0.1\"\n{class}{ROUTE}"),
            &["router.egress_address = \"224.0.0.1\"", "224.0.0.0/4"],
        ),
        (
            format!("{BASE}egress_address = \"0.0.0.0\"\n{class}{ROUTE}"),
            &["router.egress_address = \"0.0.0.0\"", "not 0.0.0.0"],
        ),
        (
            format!("{BASE}egress_address = \"10.0.0\"\n{class}{ROUTE}"),
            &["router.egress_address = \"10.0.0\"", "unicast IPv4"],
        ),
        (
            format!(
                "{BASE}{class}{ROUTE}[[neighbour]]\nip = \"10.0.0.1\"\nmac = \"00:00:00:00:00:00\"\n"
            ),
            &["neighbour.mac", "not all zeros"],
        ),
        (
            format!(
                "{BASE}{class}{ROUTE}[egress]\nrate = \"10mbit\"\n[[egress.class]]\nname = \"voip\"\n"
            ),
            &["egress.class name \"voip\"", "allowed \"be\""],
        ),
        (
            format!("{BASE}{class}{ROUTE}[egress]\nrate = \"0mbit\"\n"),
            &["r.toml:10:8", "egress.rate", "0mbit", "at least 1bit"],
        ),
        (
            format!("{BASE}{class}{ROUTE}[egress]\nrate = \"10mbps\"\n"),
            &["egress.rate", "10mbps"],
        ),
        (
            format!("{BASE}{class}{ROUTE}[egress]\nrate = \"10mbit\"\nalgorithm = \"cbq\"\n"),
            &["egress.algorithm", "cbq", "fifo, prio, rr, drr, wf2q, qfq"],
        ),
        (
            format!(
                "{BASE}{class}{ROUTE}[egress]\nrate = \"10mbit\"\n[[egress.class]]\nname = \"be\"\nlimit = 0\n"
            ),
            &["class \"be\": limit = 0", "1..="],
        ),
        (
            format!("{BASE}{class}{ROUTE}[egress]\nrate = \"10mbit\"\noverhead = 999\n"),
            &["egress.overhead = 999", "0..=256"],
        ),
        (
            format!(
                "{BASE}{class}{ROUTE}[egress]\nrate = \"10mbit\"\n[[egress.class]]\nname = \"be\"\nceil = \"20mbit\"\n"
            ),
            &["class \"be\": ceil = 20mbit", "up to egress.rate = 10mbit"],
        ),
        (
            // A 2048-byte frame needs 1.001 Mbit/s to fit the shaper's
            // horizon: no class rate fits a 1 Mbit/s egress.
            format!(
                "{BASE}{class}{ROUTE}[egress]\nrate = \"1mbit\"\n[[egress.class]]\nname = \"be\"\nceil = \"1mbit\"\n"
            ),
            &[
                "no class rate fits this link",
                "above egress.rate = 1mbit",
                "allowed: a faster egress.rate",
            ],
        ),
        (
            format!(
                "{BASE}{class}{ROUTE}[egress]\nrate = \"10mbit\"\n[[egress.class]]\nname = \"be\"\nmatch = [{{ dport = 1 }}]\n"
            ),
            &["egress.class \"be\": `match` is not allowed here"],
        ),
        (
            format!(
                "{BASE}{class}{ROUTE}[egress]\nrate = \"10mbit\"\n[[egress.class]]\nname = \"be\"\n[[egress.class]]\nname = \"be\"\n"
            ),
            &["given twice"],
        ),
        (
            format!(
                "{BASE}pool_frames = 2048\n{class}[[class]]\nname = \"rt\"\nmatch = [{{ dport = 1 }}]\n{ROUTE}[egress]\nrate = \"10mbit\"\n"
            ),
            &[
                "r.toml:13:1",
                "limits add up to 2048",
                "router.pool_frames = 2048",
                "below pool_frames",
            ],
        ),
    ];
    for (src, words) in cases {
        let e = err(&src);
        for w in words {
            assert!(e.contains(w), "error {e:?} lacks {w:?} for\n{src}");
        }
    }
}

/// The egress leaves the pool a device poll's batch and two output
/// batches beyond the class limits: 1024 + 64 + 16 frames is the least a
/// pool may have with one class at the default limit.
#[test]
fn the_egress_leaves_the_pool_a_receive_batch_and_the_output_batches() {
    let egress = "[egress]\nrate = \"10mbit\"\n";
    let with = |pool: u32, budget: u32| {
        format!(
            "{BASE}pool_frames = {pool}\ndevice_budget = {budget}\n[[class]]\nname = \"be\"\n{ROUTE}{egress}"
        )
    };
    assert_eq!(super::egress_config::pool_reserve(64), 64 + 16);
    for (pool, budget) in [(1025, 64), (1103, 64), (1104, 65), (1300, 512)] {
        let e = err(&with(pool, budget));
        for w in [
            "limits add up to 1024".to_string(),
            format!("router.pool_frames = {pool}"),
            format!("at least {}", budget + 16),
            format!("router.device_budget = {budget}"),
            format!("at most {}", pool - budget - 16),
        ] {
            assert!(e.contains(&w), "error {e:?} lacks {w:?}");
        }
    }
    for (pool, budget) in [(1104, 64), (1105, 65), (1552, 512)] {
        parse(&with(pool, budget), "r.toml").expect("enough buffers");
    }
}

/// `[[egress.class]] prio` is checked against the algorithm's levels at
/// its line, as `pktsched run` checks `[[class]] prio`.
#[test]
fn an_egress_class_prio_beyond_the_algorithms_levels_is_refused_at_its_line() {
    let with = |algorithm: &str, prio: u32| {
        format!(
            "{BASE}[[class]]\nname = \"rt\"\nmatch = [{{ dport = 1 }}]\n[[class]]\nname = \"be\"\n{ROUTE}\
             [egress]\nrate = \"1gbit\"\nalgorithm = \"{algorithm}\"\n\
             [[egress.class]]\nname = \"be\"\nprio = 1\n\
             [[egress.class]]\nname = \"rt\"\nprio = {prio}\n"
        )
    };
    let line = with("prio", 9)
        .lines()
        .position(|l| l == "prio = 9")
        .expect("line")
        + 1;
    for prio in [9, 8, 1023] {
        let e = err(&with("prio", prio));
        for w in [
            format!("r.toml:{line}:8"),
            "egress.class \"rt\"".to_string(),
            format!("prio = {prio}"),
            "allowed 0..=7".to_string(),
        ] {
            assert!(e.contains(&w), "error {e:?} lacks {w:?}");
        }
    }
    let cfg = parse(&with("prio", 7), "r.toml").expect("prio 7 is a level");
    let egress = cfg.egress.as_ref().expect("egress");
    assert_eq!((egress.classes[0].prio, egress.classes[1].prio), (7, 1));
    super::egress::Egress::new(egress).expect("the scheduler takes it");
    parse(&with("drr", 9), "r.toml").expect("drr has no levels");
}

/// Per-class rings made of in-memory devices.
struct MemClasses(Vec<MemDevice>);

impl ClassRx for MemClasses {
    fn classes(&self) -> usize {
        self.0.len()
    }
    fn recv_class(
        &mut self,
        class: usize,
        pool: &BufPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> Result<usize, IoError> {
        match self.0.get_mut(class) {
            Some(d) => d.recv_batch(pool, out, max),
            None => Ok(0),
        }
    }
    fn wait(&mut self, _: Duration) -> Result<(), IoError> {
        Ok(())
    }
    fn class_stats(&mut self) -> Vec<IoStats> {
        self.0.iter().map(|d| d.stats()).collect()
    }
}

const ROUTER: &str = r#"
[router]
ingress = "in0"
egress = "out0"
strategy = "ll-wfq"
cost = "acl:10"

[[class]]
name = "rt"
budget = 3
match = [{ proto = "udp", dport = 5000 }]

[[class]]
name = "be"
budget = 1

[[route]]
prefix = "10.2.0.0/24"
dev = "out0"

[[route]]
prefix = "10.1.0.0/24"
dev = "in0"

[[route]]
prefix = "10.9.0.0/16"
via = "10.2.0.7"
dev = "out0"

[[neighbour]]
ip = "10.2.0.2"
mac = "02:00:00:00:02:02"

[[neighbour]]
ip = "10.2.0.7"
mac = "02:00:00:00:02:07"

[[neighbour]]
ip = "10.1.0.2"
mac = "02:00:00:00:01:02"
"#;

const IN_MAC: [u8; 6] = [2, 0xaa, 0, 0, 0, 1];
const OUT_MAC: [u8; 6] = [2, 0xbb, 0, 0, 0, 1];

fn udp(dst: &str, dport: u16, ttl: u8) -> Vec<u8> {
    udp_of(dst, dport, ttl, 18)
}

/// A UDP frame from 10.1.0.2 to `dst` with `payload` bytes of payload.
fn udp_of(dst: &str, dport: u16, ttl: u8, payload: usize) -> Vec<u8> {
    let spec = UdpSpec {
        src_mac: [2, 0, 0, 0, 1, 2],
        dst_mac: IN_MAC,
        vlan: None,
        src_ip: "10.1.0.2".parse().expect("ip"),
        dst_ip: dst.parse().expect("ip"),
        sport: 1000,
        dport,
        dscp: 0,
        ttl,
        payload: vec![0; payload],
    };
    let mut buf = vec![0u8; payload + 128];
    let n = build_udp(&mut buf, &spec).expect("fits");
    buf.truncate(n);
    buf
}

struct Rig {
    worker: Worker<MemClasses, MemDevice>,
    pool: &'static BufPool,
    poller: Poller,
    rings: Vec<MemWire>,
    reverse: MemWire,
    to_ingress: MemWire,
    to_egress: MemWire,
}

fn rig() -> Rig {
    rig_with(ROUTER)
}

fn rig_with(config: &str) -> Rig {
    let cfg = parse(config, "r.toml").expect("config");
    let plan = cfg.plan();
    let (mut devs, mut rings) = (Vec::new(), Vec::new());
    for _ in 0..plan.rings() {
        let (d, w) = MemDevice::new();
        devs.push(d);
        rings.push(w);
    }
    let (reverse_rx, reverse) = MemDevice::new();
    let (ingress_tx, to_ingress) = MemDevice::new();
    let (egress_tx, to_egress) = MemDevice::new();
    let ports = RouterPorts {
        rx: MemClasses(devs),
        reverse_rx,
        ingress_tx,
        egress_tx,
    };
    let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(256, 2048).expect("pool")));
    let classifier = Classifier::new(cfg.rules(), cfg.default_class as u16).expect("rules");
    let table = Table::build(&cfg).expect("table");
    let worker = Worker::new(
        ports,
        pool,
        table,
        cfg.router.cost,
        &plan,
        classifier,
        [IN_MAC, OUT_MAC],
    )
    .with_icmp(cfg.router.addresses)
    .with_icmp6(cfg.router.addresses6);
    let worker = match &cfg.egress {
        Some(e) => worker.with_egress(super::egress::Egress::new(e).expect("egress")),
        None => worker,
    };
    Rig {
        worker,
        pool,
        poller: Poller::from_plan(plan),
        rings,
        reverse,
        to_ingress,
        to_egress,
    }
}

impl Rig {
    /// One poll round of the ingress rings and its end (the sends).
    fn round(&mut self) -> usize {
        let n = self.poller.poll(&mut self.worker, &mut Vec::new());
        self.worker.end_round();
        n
    }
}

fn push(w: &MemWire, f: Vec<u8>) {
    w.lock().expect("wire").inbound.push_back(f);
}

fn class(rig: &Rig, i: usize) -> ClassSnapshot {
    rig.worker.acc[i].snapshot("c")
}

#[test]
fn forwarded_frames_have_ttl_minus_one_a_valid_checksum_and_new_macs() {
    let mut r = rig();
    push(&r.rings[0], udp("10.2.0.2", 5000, 64));
    push(&r.rings[1], udp("10.9.3.4", 80, 2));
    let mut back = udp("10.1.0.2", 80, 9);
    back[0..6].copy_from_slice(&OUT_MAC);
    push(&r.reverse, back);
    assert_eq!(r.round(), 2);
    assert_eq!(r.worker.serve_reverse(64), 1);
    r.worker.end_round();
    let out = r.to_egress.lock().expect("wire").sent.clone();
    assert_eq!(out.len(), 2);
    assert_eq!(
        out[0][0..6],
        [2, 0, 0, 0, 2, 2],
        "on-link: the destination's MAC"
    );
    assert_eq!(out[1][0..6], [2, 0, 0, 0, 2, 7], "via: the next hop's MAC");
    for (f, ttl) in out.iter().zip([63, 1]) {
        assert_eq!(f[6..12], OUT_MAC);
        let ip = &f[14..34];
        assert_eq!(ip[8], ttl);
        assert_eq!(u16::from_be_bytes([ip[10], ip[11]]), ipv4_checksum(ip));
    }
    let back = r.to_ingress.lock().expect("wire").sent.clone();
    assert_eq!(back.len(), 1);
    assert_eq!(back[0][6..12], IN_MAC);
    assert_eq!(back[0][14 + 8], 8);
    assert_eq!(
        r.worker.table_rules_checked(),
        30,
        "the acl:10 cost, 3 frames"
    );
}

#[test]
fn every_frame_is_forwarded_or_dropped_with_its_reason() {
    let mut r = rig();
    let mut bad_sum = udp("10.2.0.2", 80, 64);
    bad_sum[14 + 10] ^= 0xff;
    let mut runt = vec![0u8; 12];
    runt[0..6].copy_from_slice(&IN_MAC);
    let mut broadcast = udp("10.2.0.2", 80, 64);
    broadcast[0..6].copy_from_slice(&[0xff; 6]);
    for f in [
        udp("10.2.0.2", 80, 1),
        udp("192.0.2.1", 80, 64),
        udp("10.2.0.3", 80, 64),
        bad_sum,
        runt,
        broadcast,
        udp("10.2.0.2", 80, 64),
    ] {
        push(&r.rings[1], f);
    }
    while r.round() > 0 {}
    let be = class(&r, 1);
    let want = [
        ("ttl_expired", 1),
        ("no_route", 1),
        ("no_neighbour", 1),
        ("bad_checksum", 1),
        ("truncated", 1),
        ("other_host", 1),
    ];
    for (reason, n) in want {
        assert!(REASONS.contains(&reason));
        assert_eq!(be.dropped.get(reason), Some(&n), "{reason}: {be:?}");
    }
    assert_eq!((be.received, be.forwarded, be.queued), (7, 1, 0));
    assert!(be.conserved());
}

#[test]
fn ll_wfq_budgets_decide_the_order_and_a_full_peer_is_counted() {
    let mut r = rig();
    for _ in 0..6 {
        push(&r.rings[0], udp("10.2.0.2", 5000, 64));
        push(&r.rings[1], udp("10.2.0.2", 80, 64));
    }
    r.to_egress.lock().expect("wire").send_capacity = Some(10);
    assert_eq!(r.round(), 4, "RT 3 + BE 1");
    let sent = r.to_egress.lock().expect("wire").sent.clone();
    let ports: Vec<u16> = sent
        .iter()
        .map(|f| u16::from_be_bytes([f[36], f[37]]))
        .collect();
    assert_eq!(ports, [5000, 5000, 5000, 80]);
    assert_eq!(
        r.worker.tx_calls(),
        2,
        "RT's visit is sent at once (urgent ring), BE's at the round's end"
    );
    while r.round() > 0 {}
    let (rt, be) = (class(&r, 0), class(&r, 1));
    assert_eq!(rt.received + be.received, 12);
    assert_eq!(rt.forwarded + be.forwarded, 10);
    assert_eq!(rt.dropped_total() + be.dropped_total(), 2);
    assert_eq!(be.dropped.get("tx_failed"), Some(&2), "BE is served last");
    assert!(rt.conserved() && be.conserved());
    assert_eq!(r.poller.stats()[0].packets, 6);
}

#[test]
fn counters_print_as_text_json_and_prometheus() {
    let mut r = rig();
    push(&r.rings[0], udp("10.2.0.2", 5000, 64));
    push(&r.rings[1], udp("192.0.2.1", 80, 64));
    r.round();
    let (rt, be) = (
        r.worker.acc[0].snapshot("rt"),
        r.worker.acc[1].snapshot("be"),
    );
    let mut snap = super::stats::RouterSnapshot {
        strategy: "ll-wfq".into(),
        classes: vec![rt, be],
        ..Default::default()
    };
    let text = snap.text();
    assert!(
        text.contains("class rt: received 1 = forwarded 1 + dropped 0"),
        "{text}"
    );
    assert!(
        text.contains("class be: received 1 = forwarded 0 + dropped 1 [no_route 1]"),
        "{text}"
    );
    assert!(!text.contains("NOT CONSERVED"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&snap.json()).expect("json");
    assert_eq!(json["classes"][1]["dropped"]["no_route"], 1);
    let prom = snap.prometheus();
    assert!(
        prom.contains("pktsched_route_class_drops_total{class=\"be\",reason=\"no_route\"} 1"),
        "{prom}"
    );
    snap.classes[0].received += 1;
    assert!(snap.text().contains("NOT CONSERVED"));
}

#[test]
fn an_expired_ipv4_frame_gets_a_time_exceeded_from_its_interface() {
    let cfg = ROUTER.replace("cost = \"acl:10\"", "ingress_address = \"10.1.0.1\"");
    let mut r = rig_with(&cfg);
    let expired = udp("10.2.0.2", 80, 1);
    push(&r.rings[1], expired.clone());
    while r.round() > 0 {}
    assert!(r.to_egress.lock().expect("wire").sent.is_empty());
    let back = r.to_ingress.lock().expect("wire").sent.clone();
    assert_eq!(back.len(), 1);
    let f = &back[0];
    assert_eq!(f[0..6], expired[6..12], "to the sender's MAC");
    assert_eq!(f[6..12], IN_MAC);
    let ip = &f[14..34];
    assert_eq!(u16::from_be_bytes([ip[10], ip[11]]), ipv4_checksum(ip));
    assert_eq!(
        (ip[9], &ip[12..16], &ip[16..20]),
        (1, &[10, 1, 0, 1][..], &expired[26..30])
    );
    let icmp = &f[34..];
    assert_eq!((icmp[0], icmp[1]), (11, 0), "time exceeded in transit");
    assert_eq!(
        pktsched_io::frame::internet_checksum(icmp, 0),
        0,
        "ICMP checksum"
    );
    assert_eq!(
        &icmp[8..],
        &expired[14..14 + 28],
        "the header and 8 bytes quoted"
    );
    let be = class(&r, 1);
    assert_eq!(be.dropped.get("ttl_expired"), Some(&1));
    assert!(be.conserved());
    assert_eq!((r.worker.icmp_sent, r.worker.icmp_not_sent), (1, 0));
}

#[test]
fn expired_frames_beyond_the_icmp_rate_keep_every_buffer_and_are_counted() {
    let cfg = ROUTER.replace("cost = \"acl:10\"", "ingress_address = \"10.1.0.1\"");
    let mut r = rig_with(&cfg);
    // A limiter whose clock never advances: exactly its depth of tokens.
    r.worker.icmp_limit = super::icmp::RateLimit::new(u64::MAX);
    let depth = super::icmp::MAX_PER_SECOND as u64;
    let extra = 300;
    assert!(
        extra > r.pool.stats().capacity,
        "more refusals than buffers"
    );
    for _ in 0..depth + extra {
        push(&r.rings[1], udp("10.2.0.2", 80, 1));
        // Keep the wire short of the pool: frames are taken as they come.
        if r.rings[1].lock().expect("wire").inbound.len() >= 64 {
            while r.round() > 0 {}
        }
    }
    while r.round() > 0 {}
    assert_eq!((r.worker.icmp_sent, r.worker.icmp_not_sent), (depth, extra));
    assert_eq!(r.to_ingress.lock().expect("wire").sent.len() as u64, depth);
    let be = class(&r, 1);
    assert_eq!(be.dropped.get("ttl_expired"), Some(&(depth + extra)));
    assert!(be.conserved());
    let pool = r.pool.stats();
    assert_eq!(pool.free, pool.capacity, "every buffer is back: {pool:?}");
}

#[test]
fn an_expired_ipv6_frame_gets_an_icmpv6_time_exceeded_and_v4_is_unaffected() {
    // The route first, then the hop limit: the expiring frame needs a route.
    let cfg = ROUTER.replace("cost = \"acl:10\"", "ingress_address6 = \"2001:db8:1::1\"")
        + "\n[[route]]\nprefix = \"2001:db8:2::/64\"\ndev = \"out0\"\n";
    let mut r = rig_with(&cfg);
    let mut expired = udp("10.2.0.2", 80, 1);
    let spec = UdpSpec {
        src_mac: [2, 0, 0, 0, 1, 2],
        dst_mac: IN_MAC,
        vlan: None,
        src_ip: "2001:db8:1::2".parse().expect("ip"),
        dst_ip: "2001:db8:2::2".parse().expect("ip"),
        sport: 1000,
        dport: 80,
        dscp: 0,
        ttl: 1,
        payload: vec![7; 18],
    };
    let mut buf = vec![0u8; 256];
    let n = build_udp(&mut buf, &spec).expect("fits");
    buf.truncate(n);
    push(&r.rings[1], buf.clone());
    push(&r.rings[1], std::mem::take(&mut expired));
    while r.round() > 0 {}
    let back = r.to_ingress.lock().expect("wire").sent.clone();
    assert_eq!(
        back.len(),
        1,
        "one ICMPv6, none for IPv4 (no ingress_address)"
    );
    let f = &back[0];
    assert_eq!((f[12], f[13], f[20], f[54]), (0x86, 0xDD, 58, 3));
    let (src, dst): ([u8; 16], [u8; 16]) = (
        f[22..38].try_into().expect("16"),
        f[38..54].try_into().expect("16"),
    );
    assert_eq!(dst[..], buf[22..38], "back to the sender");
    let sum = super::icmp::icmpv6_checksum(&src.into(), &dst.into(), &f[54..]);
    assert_eq!(sum, 0, "the checksum verifies");
    let be = class(&r, 1);
    assert_eq!(be.dropped.get("ttl_expired"), Some(&2));
    assert!(be.conserved());
    assert_eq!((r.worker.icmp_sent, r.worker.icmp_not_sent), (1, 0));
}

/// Rewrites an IPv4 frame's source and protocol (the header checksum
/// resealed) and its first data byte (an ICMP type when `proto` is 1).
fn rewrite_v4(mut f: Vec<u8>, src: [u8; 4], proto: u8, first: u8) -> Vec<u8> {
    f[26..30].copy_from_slice(&src);
    f[23] = proto;
    f[34] = first;
    f[24..26].fill(0);
    let c = ipv4_checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
}

#[test]
fn expiring_icmp_errors_and_sources_that_are_not_one_host_get_no_reply() {
    let cfg = ROUTER.replace("cost = \"acl:10\"", "ingress_address = \"10.1.0.1\"");
    let mut r = rig_with(&cfg);
    // A limiter whose clock never advances: one token.
    r.worker.icmp_limit = super::icmp::RateLimit::new(u64::MAX);
    for _ in 1..super::icmp::MAX_PER_SECOND {
        assert!(r.worker.icmp_limit.allow(u64::MAX));
    }
    let expiring = udp("10.2.0.2", 80, 1);
    for f in [
        rewrite_v4(expiring.clone(), [10, 1, 0, 2], 1, 11),
        rewrite_v4(expiring.clone(), [10, 1, 0, 2], 1, 3),
        rewrite_v4(expiring.clone(), [0, 0, 0, 0], 17, 0),
        rewrite_v4(expiring.clone(), [127, 0, 0, 1], 17, 0),
        rewrite_v4(expiring.clone(), [224, 0, 0, 1], 17, 0),
        rewrite_v4(expiring.clone(), [255, 255, 255, 255], 17, 0),
        rewrite_v4(expiring.clone(), [10, 1, 0, 2], 1, 8),
    ] {
        push(&r.rings[1], f);
    }
    while r.round() > 0 {}
    let back = r.to_ingress.lock().expect("wire").sent.clone();
    assert_eq!(back.len(), 1, "only the echo request is answered");
    assert_eq!(
        (back[0][34], back[0][34 + 8 + 20]),
        (11, 8),
        "{:?}",
        back[0]
    );
    // Sources that are not one host are martian (dropped before the TTL
    // is looked at); the two expiring ICMP errors get no answer.
    assert_eq!(
        (r.worker.icmp_sent, r.worker.icmp_not_sent),
        (1, 2),
        "the forbidden ones took no token from the echo request"
    );
    let be = class(&r, 1);
    assert_eq!(be.dropped.get("ttl_expired"), Some(&3));
    assert_eq!(be.dropped.get("martian"), Some(&4));
    assert!(be.conserved());
}

/// With default routes a martian destination (to the router's MAC) is
/// dropped as `martian`, whatever its TTL, and no ICMP answers it.
#[test]
fn martian_destinations_are_dropped_and_counted_with_default_routes() {
    let cfg = ROUTER.replace("cost = \"acl:10\"", "ingress_address = \"10.1.0.1\"")
        + "\n[[route]]\nprefix = \"0.0.0.0/0\"\nvia = \"10.2.0.7\"\ndev = \"out0\"\n";
    let mut r = rig_with(&cfg);
    for dst in ["255.255.255.255", "224.0.0.1", "127.0.0.1", "0.0.0.0"] {
        push(&r.rings[1], udp(dst, 80, 64));
        push(&r.rings[1], udp(dst, 80, 1));
    }
    push(&r.rings[1], udp("192.0.2.1", 80, 64));
    while r.round() > 0 {}
    assert_eq!(r.to_egress.lock().expect("wire").sent.len(), 1);
    assert!(r.to_ingress.lock().expect("wire").sent.is_empty());
    let be = class(&r, 1);
    assert_eq!(be.dropped.get("martian"), Some(&8), "{be:?}");
    assert_eq!((be.received, be.forwarded), (9, 1));
    assert!(be.conserved());
    let snap = super::stats::RouterSnapshot {
        classes: vec![class(&r, 0), be],
        ..Default::default()
    };
    assert!(snap.text().contains("martian 8"), "{}", snap.text());
    let json: serde_json::Value = serde_json::from_str(&snap.json()).expect("json");
    assert_eq!(json["classes"][1]["dropped"]["martian"], 8);
    assert_eq!(json["classes"][1]["drops_by_reason"]["martian"], 8);
    assert!(
        snap.prometheus()
            .contains("pktsched_route_class_drops_total{class=\"c\",reason=\"martian\"} 8"),
        "{}",
        snap.prometheus()
    );
}

const EGRESS: &str = "\n[egress]\nrate = \"100bit\"\nalgorithm = \"prio\"\n\
    [[egress.class]]\nname = \"rt\"\nprio = 0\n\
    [[egress.class]]\nname = \"be\"\nprio = 1\nlimit = 2\n";

#[test]
fn with_egress_the_classes_frames_wait_and_every_class_stays_conserved() {
    // 100 bit/s: a frame takes seconds, so after the first only the
    // scheduler's order and limits show within the test.
    let mut r = rig_with(&format!("{ROUTER}{EGRESS}"));
    for _ in 0..4 {
        push(&r.rings[1], udp("10.2.0.2", 80, 64));
    }
    push(&r.rings[0], udp("10.2.0.2", 5000, 64));
    let mut back = udp("10.1.0.2", 80, 9);
    back[0..6].copy_from_slice(&OUT_MAC);
    push(&r.reverse, back);
    while r.round() > 0 {}
    assert_eq!(r.worker.serve_reverse(64), 1);
    r.worker.end_round();
    let out = r.to_egress.lock().expect("wire").sent.clone();
    assert_eq!(out.len(), 1, "the idle link took one frame, the rest wait");
    assert_eq!(
        u16::from_be_bytes([out[0][36], out[0][37]]),
        5000,
        "RT's ring is served first"
    );
    assert_eq!(
        r.to_ingress.lock().expect("wire").sent.len(),
        1,
        "the reverse direction is not scheduled"
    );
    let (rt, be) = (class(&r, 0), class(&r, 1));
    assert!(rt.conserved() && be.conserved(), "{rt:?} {be:?}");
    assert_eq!(
        be.dropped.get("queue_full"),
        Some(&2),
        "BE's limit is 2: {be:?}"
    );
    assert_eq!((rt.received, rt.forwarded, rt.queued), (1, 1, 0));
    assert_eq!((be.received, be.forwarded, be.queued), (4, 0, 2));
    let due = r.worker.egress_due(crate::sys::monotonic_ns());
    assert!(due.is_some(), "a departure is due while frames wait");
    let names = ["rt".to_string(), "be".to_string()];
    let snap = r.worker.egress_snapshot(&names).expect("egress");
    let backlog: u64 = snap.classes.iter().map(|c| c.backlog_packets).sum();
    assert_eq!(backlog, 2);
    let stats = super::stats::RouterSnapshot {
        classes: vec![rt, be],
        egress: Some(snap),
        ..Default::default()
    };
    let text = stats.text();
    assert!(text.contains("egress: prio at 100 bit/s"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&stats.json()).expect("json");
    assert_eq!(json["egress"]["classes"][1]["dropped_queue_full"], 2);
}

#[test]
fn the_egress_section_normalises_to_the_same_config() {
    let cfg = parse(&format!("{ROUTER}{EGRESS}"), "r.toml").expect("config");
    let text = cfg.to_string();
    assert!(text.contains("[egress]\nrate = \"100bit\""), "{text}");
    assert!(
        text.contains("name = \"be\"\nweight = 1\nprio = 1\nlimit = 2"),
        "{text}"
    );
    let again = parse(&text, "n.toml").expect("normalised parses");
    assert_eq!(again.egress, cfg.egress);
    assert_eq!(again.to_string(), text);
    let plain = parse(ROUTER, "r.toml").expect("config");
    assert!(plain.egress.is_none() && !plain.to_string().contains("[egress]"));
}

/// The example's commented `[egress]` section, uncommented, is a valid
/// config.
#[test]
fn the_examples_commented_egress_section_parses() {
    let mut text = String::new();
    let mut inside = false;
    for line in EXAMPLE.lines() {
        inside = (inside && line.starts_with('#')) || line == "# [egress]";
        let body = line.strip_prefix("# ").filter(|_| inside).unwrap_or("");
        let is_toml = (body.starts_with('[') && body.ends_with(']'))
            || body.split_once(" = ").is_some_and(|(k, _)| {
                !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
        text.push_str(if is_toml { body } else { line });
        text.push('\n');
    }
    let cfg = parse(&text, "route.toml").expect("the uncommented example");
    let e = cfg.egress.expect("[egress]");
    assert_eq!((e.overhead, e.mpu, e.classes[0].weight), (24, 84, 3));
    assert_eq!(e.classes[0].limit, 256);
    assert_eq!(e.classes[1].limit, 1024, "run's default");
}

/// While frames wait in the egress and the next departure is sooner than
/// the rings' 1 ms wait, an idle round does not sleep.
#[test]
fn an_idle_round_does_not_sleep_past_the_next_egress_departure() {
    use super::daemon::idle_wait_for;
    let cfg = format!("{ROUTER}\n[egress]\nrate = \"8mbit\"\n");
    let mut r = rig_with(&cfg);
    // 50 frames hold the 8 Mbit/s egress for 3 ms: frames still wait after
    // the rounds even when this thread loses its core meanwhile (with 3,
    // a 0.2 ms preemption let all of them leave: CI, 19:46).
    for _ in 0..50 {
        push(&r.rings[1], udp("10.2.0.2", 80, 64));
    }
    while r.round() > 0 {}
    let now = crate::sys::monotonic_ns();
    let due = r.worker.egress_due(now).expect("frames wait");
    assert!(due < now + 1_000_000, "a 60-byte frame takes 60 µs");
    assert_eq!(idle_wait_for(now, Some(due)), None, "no sleep");
    assert_eq!(
        idle_wait_for(now, Some(now + 5_000_000)),
        Some(Duration::from_millis(1))
    );
    assert_eq!(idle_wait_for(now, None), Some(Duration::from_millis(1)));
}

#[test]
fn a_frame_the_device_leaves_mid_batch_is_counted_for_its_own_class() {
    // One ring (sq), so RT and BE frames share an output batch.
    let mut r = rig_with(&ROUTER.replace("strategy = \"ll-wfq\"", "strategy = \"sq\""));
    assert_eq!(r.rings.len(), 1);
    // Devices whose transmit slots hold 500 bytes.
    for w in [&r.reverse, &r.to_ingress, &r.to_egress] {
        w.lock().expect("wire").send_max_len = Some(500);
    }
    // RT, a long BE frame, RT: the device leaves the middle one.
    let long = udp_of("10.2.0.2", 80, 64, 1000);
    for f in [udp("10.2.0.2", 5000, 64), long, udp("10.2.0.2", 5000, 64)] {
        push(&r.rings[0], f);
    }
    while r.round() > 0 {}
    assert_eq!(r.to_egress.lock().expect("wire").sent.len(), 2);
    let (rt, be) = (class(&r, 0), class(&r, 1));
    assert_eq!((rt.forwarded, rt.dropped_total()), (2, 0), "{rt:?}");
    assert_eq!(be.dropped.get("tx_failed"), Some(&1), "{be:?}");
    assert_eq!(be.forwarded, 0);
    assert!(rt.conserved() && be.conserved());
    let p = r.pool.stats();
    assert_eq!(p.free, p.capacity, "every buffer is back: {p:?}");
}
