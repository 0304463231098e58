//! AF_XDP class groups on a real wire (veths in namespaces of their own,
//! named `xg-grp-*`): one socket per class sharing one UMEM, the XDP
//! classifier steering each frame into its class's socket. Frames of
//! three classes arrive in their own class and nowhere else; a class
//! flooded past its RX ring loses frames counted as its `rx_ring_full`
//! while a low-rate class on the same queue loses none; every frame sent
//! is received or counted; bad arguments are refused with the value and
//! what is allowed. Needs root (CI runs as root); skipped with the reason
//! otherwise.

use std::time::{Duration, Instant};

use pktsched_io::bpf::action;
use pktsched_io::bpf::classify::{Steer, class_of_output, load};
use pktsched_io::bpf::sys::AttachMode;
use pktsched_io::bpf::sys::Map;
use pktsched_io::classify::{Classifier, Match, Rule};
use pktsched_io::frame::{Stamp, build_udp, udp_payload};
use pktsched_io::netns::{Topology, in_namespace, namespaces, remove_stale};
use pktsched_io::packet::{FrameRing, PacketSocket, Role};
use pktsched_io::xdp::{self, AttachPref, BindMode, BusyPoll, XdpClassGroup, XdpConfig, XdpTx};
use pktsched_io::{BufPool, ClassRx, PacketBuf, PacketIo};

mod common;
use common::{line_udp, skip};

const PREFIX: &str = "xg-grp-";

/// Class 1: DSCP 10 (AF11); class 2: UDP destination port 6000;
/// default class 0.
fn rules() -> Vec<Rule> {
    vec![
        Rule {
            class: 1,
            matches: Match {
                dscp: Some(10),
                ..Match::default()
            },
        },
        Rule {
            class: 2,
            matches: Match {
                dport: Some("6000".parse().expect("port")),
                ..Match::default()
            },
        },
    ]
}

/// A frame of `class` (under [`rules`]) carrying `seq` in its stamp.
fn frame(class: usize, seq: u64, out: &mut [u8]) -> usize {
    let mut payload = vec![0u8; Stamp::LEN + (seq as usize * 37) % 400];
    assert!(
        Stamp {
            flow: class as u16,
            seq,
            tx_ns: 0
        }
        .write(&mut payload)
    );
    let spec = line_udp(
        if class == 2 { 6000 } else { 5000 },
        if class == 1 { 10 } else { 0 },
        payload,
    );
    build_udp(out, &spec).expect("fits")
}

/// (flow, seq) of a test frame.
fn stamp_of(b: &[u8]) -> Option<(usize, u64)> {
    udp_payload(b)
        .and_then(Stamp::read)
        .map(|s| (usize::from(s.flow), s.seq))
}

/// The topology, the generator on g0 and a class group on d0.
struct Rig {
    topo: Topology,
    gen_tx: PacketSocket,
    group: XdpClassGroup,
    tx: XdpTx,
    pool: BufPool,
}

impl Rig {
    fn new(cfg: XdpConfig, rings: &[u32]) -> Rig {
        let _ = remove_stale(PREFIX);
        let topo = Topology::line(PREFIX).expect("topology");
        topo.quiet().expect("quiet");
        let gen_tx = in_namespace(&topo.gen_ns, || {
            PacketSocket::open("g0", Role::Tx(FrameRing::default()), false)
        })
        .expect("namespace")
        .expect("g0 tx");
        let (group, tx, info) = in_namespace(&topo.dut_ns, || {
            xdp::open_class_group("d0", &cfg, &rules(), 0, rings)
        })
        .expect("namespace")
        .expect("d0 class group");
        assert!(!info.zero_copy, "veth offers copy mode only: {info:?}");
        Rig {
            topo,
            gen_tx,
            group,
            tx,
            pool: BufPool::new(2048, 2048).expect("pool"),
        }
    }

    /// Sends one frame per entry of `classes`, `seqs[class]` counting.
    fn send(&mut self, classes: &[usize], seqs: &mut [u64; 3]) {
        let mut batch = Vec::with_capacity(classes.len());
        for &c in classes {
            let mut b = self.pool.get().expect("generator buffer");
            let n = frame(c, seqs[c], b.spare());
            b.set_len(n);
            seqs[c] += 1;
            batch.push(b);
        }
        let n = batch.len();
        assert_eq!(
            self.gen_tx.send_batch(&mut batch, &self.pool).expect("g0"),
            n
        );
    }

    /// Frames of each class the kernel has handled: waiting in the ring,
    /// taken by us (`got`) or dropped by the kernel.
    fn handled(&mut self, got: &[u64; 3]) -> [u64; 3] {
        let stats = self.group.class_stats();
        let mut h = [0u64; 3];
        for c in 0..3 {
            h[c] = got[c]
                + self.group.waiting(c).expect("AF_XDP tells") as u64
                + stats[c].rx_kernel_drops;
        }
        h
    }

    /// Waits until the kernel has handled every frame sent (`sent`),
    /// through the group's `wait` (a poll over every class's socket).
    fn settle(&mut self, sent: &[u64; 3], got: &[u64; 3]) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.handled(got) != *sent && Instant::now() < deadline {
            self.group.wait(Duration::from_millis(1)).expect("wait");
            std::thread::sleep(Duration::from_micros(100));
        }
        let h = self.handled(got);
        assert_eq!(
            h,
            *sent,
            "frames handled per class ({:?})",
            self.group.class_stats()
        );
    }

    /// Receives everything waiting in class `class`, checking each frame
    /// belongs there and comes in order; returns how many.
    fn drain(&mut self, class: usize, next_seq: &mut u64) -> u64 {
        let userspace = Classifier::new(rules(), 0).expect("rules");
        let mut bufs: Vec<PacketBuf> = Vec::new();
        let mut n = 0;
        loop {
            let got = self
                .group
                .recv_class(class, &self.pool, &mut bufs, 64)
                .expect("recv");
            if got == 0 {
                return n;
            }
            for b in bufs.drain(..) {
                let (flow, seq) = stamp_of(b.as_slice()).expect("a test frame");
                assert_eq!(flow, class, "a frame of class {flow} in class {class}");
                assert_eq!(usize::from(userspace.classify(b.as_slice()).class), class);
                assert!(seq >= *next_seq, "class {class}: {seq} after {next_seq}");
                *next_seq = seq + 1;
                n += 1;
                self.pool.put(b);
            }
        }
    }
}

#[test]
fn frames_of_three_classes_arrive_in_their_own_socket_only() {
    if skip() {
        return;
    }
    three_classes(XdpConfig {
        rx_frames: 1024,
        ..XdpConfig::default()
    });
}

#[test]
fn generic_xdp_and_busy_polling_on_every_socket_deliver_the_same() {
    if skip() {
        return;
    }
    three_classes(XdpConfig {
        rx_frames: 1024,
        bind: BindMode::Copy,
        attach: AttachPref::Only(AttachMode::Generic),
        need_wakeup: false,
        busy_poll: Some(BusyPoll {
            usecs: 50,
            budget: 64,
        }),
        ..XdpConfig::default()
    });
}

/// Sends 200 frames of each of three classes to a group opened with
/// `cfg` and checks each arrives in its own class, in order, and nowhere
/// else; the namespaces are gone afterwards.
fn three_classes(cfg: XdpConfig) {
    let names;
    {
        let mut rig = Rig::new(cfg, &[256, 256, 256]);
        names = [rig.topo.gen_ns.clone(), rig.topo.dut_ns.clone()];
        assert_eq!(rig.group.classes(), 3);
        let (mut sent, mut got, mut next) = ([0u64; 3], [0u64; 3], [0u64; 3]);
        // 600 frames, interleaved 0, 1, 2, 0, ...; 200 of each fit each
        // ring without reading.
        for _ in 0..10 {
            let classes: Vec<usize> = (0..60).map(|i| i % 3).collect();
            rig.send(&classes, &mut sent);
            rig.settle(&sent, &got);
        }
        for c in 0..3 {
            assert_eq!(rig.group.waiting(c), Some(200), "class {c}");
        }
        assert_eq!(rig.group.waiting(3), None, "no class 3");
        for c in 0..3 {
            got[c] = rig.drain(c, &mut next[c]);
            assert_eq!(rig.group.waiting(c), Some(0), "class {c}");
        }
        assert_eq!(got, [200, 200, 200]);
        assert_eq!(next, [200, 200, 200], "the last frame of each class came");
        let stats = rig.group.class_stats();
        for (c, s) in stats.iter().enumerate() {
            assert_eq!(
                (
                    s.rx_packets,
                    s.rx_kernel_drops,
                    s.rx_no_buffer,
                    s.rx_oversize
                ),
                (200, 0, 0, 0),
                "class {c}: {s:?}"
            );
        }
        let mut none = Vec::new();
        let n = rig
            .group
            .recv_class(3, &rig.pool, &mut none, 64)
            .expect("recv");
        assert_eq!((n, none.len()), (0, 0), "a class past the last is empty");
        assert_eq!(rig.pool.stats().free, 2048, "every buffer is back");
    }
    let left = namespaces().expect("list");
    for n in names {
        assert!(!left.contains(&n), "{n} was not removed");
    }
}

#[test]
fn a_flooded_class_overflows_its_own_ring_and_the_others_lose_nothing() {
    if skip() {
        return;
    }
    let cfg = XdpConfig {
        rx_frames: 512,
        ..XdpConfig::default()
    };
    const RING: u64 = 64;
    let mut rig = Rig::new(cfg, &[RING as u32; 3]);
    let (mut sent, got, mut next) = ([0u64; 3], [0u64; 3], [0u64; 3]);
    // 2932 frames of class 2 with nobody reading, and 34 of class 1 and
    // of class 0 among them: class 2 holds its 64 frames, the other 448
    // receive frames stay for the others.
    for round in 0..100 {
        let mut classes = vec![2usize; 30];
        if round % 3 == 0 {
            classes[10] = 1;
            classes[20] = 0;
        }
        rig.send(&classes, &mut sent);
        rig.settle(&sent, &got);
    }
    let stats = rig.group.class_stats();
    assert_eq!(sent, [34, 34, 2932]);
    assert_eq!(
        rig.group.waiting(2),
        Some(RING as usize),
        "class 2's ring is full"
    );
    assert_eq!(stats[2].rx_ring_full, sent[2] - RING, "{stats:?}");
    assert_eq!(stats[2].rx_kernel_drops, sent[2] - RING, "{stats:?}");
    for c in 0..2 {
        assert_eq!(
            (
                stats[c].rx_kernel_drops,
                stats[c].rx_ring_full,
                stats[c].rx_fill_empty
            ),
            (0, 0, 0),
            "class {c} lost nothing: {stats:?}"
        );
    }
    let received: Vec<u64> = (0..3).map(|c| rig.drain(c, &mut next[c])).collect();
    assert_eq!(received, [sent[0], sent[1], RING]);
    let stats = rig.group.class_stats();
    for c in 0..3 {
        assert_eq!(
            stats[c].rx_packets + stats[c].rx_kernel_drops,
            sent[c],
            "class {c}: sent = received + dropped ({stats:?})"
        );
    }
    // Once read, the flooded class receives again.
    rig.send(&[2, 2, 2], &mut sent);
    rig.settle(&sent, &[sent[0], sent[1], RING]);
    assert_eq!(rig.drain(2, &mut next[2]), 3);
    assert_eq!(next[2], sent[2], "the newest frames came");
}

#[test]
fn frames_that_find_the_shared_pool_empty_are_counted_in_their_class() {
    if skip() {
        return;
    }
    // Two full rings of 64 hold the whole pool of 128 receive frames:
    // frames of class 0 then find the fill ring empty (the kernel checks
    // for a free frame before it looks at the class's ring).
    let cfg = XdpConfig {
        rx_frames: 128,
        ..XdpConfig::default()
    };
    let mut rig = Rig::new(cfg, &[64, 64, 64]);
    let (mut sent, got, mut next) = ([0u64; 3], [0u64; 3], [0u64; 3]);
    for _ in 0..4 {
        rig.send(&[1; 16], &mut sent);
        rig.send(&[2; 16], &mut sent);
        rig.settle(&sent, &got);
    }
    let stats = rig.group.class_stats();
    assert_eq!(stats.iter().map(|s| s.rx_kernel_drops).sum::<u64>(), 0);
    rig.send(&[0; 10], &mut sent);
    rig.settle(&sent, &got);
    let stats = rig.group.class_stats();
    assert_eq!(rig.group.waiting(0), Some(0), "{stats:?}");
    assert_eq!(
        (
            stats[0].rx_kernel_drops,
            stats[0].rx_ring_full,
            stats[0].rx_fill_empty
        ),
        (10, 0, 10),
        "{stats:?}"
    );
    for c in 1..3 {
        assert_eq!(rig.group.waiting(c), Some(64));
        assert_eq!(
            (stats[c].rx_kernel_drops, stats[c].rx_fill_empty),
            (0, 0),
            "class {c}: the shared count is on class 0 only ({stats:?})"
        );
    }
    // Reading returns the frames to the fill ring: class 0 receives again.
    for (c, next) in next.iter_mut().enumerate().skip(1) {
        assert_eq!(rig.drain(c, next), 64);
    }
    rig.send(&[0; 10], &mut sent);
    rig.settle(&sent, &[0, 64, 64]);
    assert_eq!(rig.drain(0, &mut next[0]), 10);
    let stats = rig.group.class_stats();
    for c in 0..3 {
        assert_eq!(
            stats[c].rx_packets + stats[c].rx_kernel_drops,
            sent[c],
            "class {c}: sent = received + dropped ({stats:?})"
        );
    }
}

#[test]
fn the_transmit_half_sends_out_of_the_ingress_device() {
    if skip() {
        return;
    }
    let mut rig = Rig::new(XdpConfig::default(), &[64, 64, 64]);
    let mut sink = in_namespace(&rig.topo.gen_ns, || {
        PacketSocket::open("g0", Role::RxFrames(FrameRing::default()), true)
    })
    .expect("namespace")
    .expect("g0 rx");
    const N: u64 = 300;
    let mut batch = Vec::new();
    for seq in 0..N {
        let mut b = rig.pool.get().expect("buffer");
        let n = frame(1, seq, b.spare());
        b.set_len(n);
        batch.push(b);
    }
    let sent = rig.tx.send_batch(&mut batch, &rig.pool).expect("d0 tx");
    assert_eq!(sent as u64, N);
    let (mut arrived, mut got) = (Vec::new(), 0u64);
    let deadline = Instant::now() + Duration::from_secs(10);
    while got < N && Instant::now() < deadline {
        sink.wait(Duration::from_millis(2)).expect("wait");
        sink.recv_batch(&rig.pool, &mut arrived, 256).expect("g0");
        for b in arrived.drain(..) {
            if let Some((1, seq)) = stamp_of(b.as_slice()) {
                assert_eq!(seq, got, "in order");
                got += 1;
            }
            rig.pool.put(b);
        }
    }
    assert_eq!(got, N, "every frame left d0 ({:?})", rig.tx.stats());
    assert_eq!(rig.tx.stats().tx_packets, N);
}

#[test]
fn bad_arguments_are_refused_with_the_value_and_what_is_allowed() {
    let cfg = XdpConfig::default();
    let refused = |rings: &[u32], default: u16, rules: &[Rule]| match xdp::open_class_group(
        "xg-none0", &cfg, rules, default, rings,
    ) {
        Ok(_) => panic!("{rings:?} default {default} accepted"),
        Err(e) => e.to_string(),
    };
    let e = refused(&[], 0, &[]);
    assert!(
        e.contains("xg-none0") && e.contains("0 classes") && e.contains("1..=64"),
        "{e}"
    );
    let e = refused(&[64, 96], 0, &[]);
    assert!(
        e.contains("class 1 RX ring of 96 frames") && e.contains("2..=2048"),
        "{e}"
    );
    let e = refused(&[4096], 0, &[]);
    assert!(
        e.contains("4096 frames") && e.contains("below rx_frames 4096"),
        "{e}"
    );
    let e = refused(&[64, 64], 2, &[]);
    assert!(e.contains("default class 2") && e.contains("0..=1"), "{e}");
    let e = refused(&[64, 64], 0, &rules());
    assert!(e.contains("rule 1 class 2") && e.contains("0..=1"), "{e}");
    let bad_cfg = XdpConfig {
        frame_size: 1000,
        ..XdpConfig::default()
    };
    let e = match xdp::open_class_group("xg-none0", &bad_cfg, &[], 0, &[64]) {
        Ok(_) => panic!("frame size 1000 accepted"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("frame_size 1000") && e.contains("2048 or 4096"),
        "{e}"
    );
    if skip() {
        return;
    }
    // Valid arguments on a device that does not exist: the device named.
    let e = refused(&[64], 0, &[]);
    assert!(e.contains("xg-none0"), "{e}");
}

#[test]
fn the_queue_guard_passes_frames_of_other_queues_unclassified() {
    if skip() {
        return;
    }
    // BPF_PROG_TEST_RUN runs on queue 0.
    let map = Map::xsk(3, "xg_guard").expect("map");
    let mut f = [0u8; 256];
    let len = frame(2, 0, &mut f);
    let mut out = [0u8; 512];
    let mine = load(&rules(), 0, &map, Steer::ByClassOnQueue(0)).expect("load");
    let run = mine.test_run(&f[..len], &mut out).expect("run");
    assert_eq!(run.retval, action::PASS, "no socket in the map: passed on");
    assert_eq!(
        class_of_output(&out[..run.out_len], len),
        Some(2),
        "classified"
    );
    let other = load(&rules(), 0, &map, Steer::ByClassOnQueue(1)).expect("load");
    let run = other.test_run(&f[..len], &mut out).expect("run");
    assert_eq!(run.retval, action::PASS);
    assert_eq!(
        &out[..run.out_len],
        &f[..len],
        "untouched: no class written"
    );
}
