//! The kernel against the model: random rule sets compiled and installed
//! on a real fanout group, random and mutated frames (the generator of
//! the cBPF differential test) sent through a veth; each frame must come
//! out of the socket of the class the userspace classifier gives it, and
//! the interpreter run on the ingress model must say the same. Needs root
//! (CI runs as root); skipped with the reason otherwise.

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::FanoutGroup;
use crate::cbpf::interp::{ingress, run};
use crate::cbpf::tests::{random_frame, random_rules};
use crate::classify::Classifier;
use crate::netns::{Topology, in_namespace, missing_privileges, remove_stale};
use crate::packet::{FrameRing, PacketSocket, Role};
use crate::{BufPool, PacketIo};

const CLASSES: usize = 8;
const PREFIX: &str = "pst-fk-";

/// A random frame the kernel will hand to the group: sendable through a
/// TX ring (14..=1514 bytes) and arriving (see [`ingress`]).
fn sendable(r: &mut ChaCha8Rng) -> Vec<u8> {
    loop {
        let f = random_frame(r);
        if (14..=1514).contains(&f.len()) && ingress(&f).is_some() {
            return f;
        }
    }
}

/// Reads every class until nothing came for `quiet`.
fn drain(group: &mut FanoutGroup, pool: &BufPool, got: &mut [Vec<Vec<u8>>], quiet: Duration) {
    let mut bufs = Vec::new();
    let mut last = Instant::now();
    while last.elapsed() < quiet {
        group.wait(Duration::from_millis(1)).expect("wait");
        for (class, seen) in got.iter_mut().enumerate() {
            while group.recv_class(class, pool, &mut bufs, 64).expect("recv") > 0 {
                last = Instant::now();
                for b in bufs.drain(..) {
                    seen.push(b.as_slice().to_vec());
                    pool.put(b);
                }
            }
        }
    }
}

#[test]
fn the_kernel_runs_compiled_rules_as_the_classifier_says() {
    if let Some(why) = missing_privileges() {
        crate::untested::skipped(&why);
        return;
    }
    let _ = remove_stale(PREFIX);
    let topo = Topology::line(PREFIX).expect("topology");
    topo.quiet().expect("IPv6 off");
    let mut tx = in_namespace(&topo.gen_ns, || {
        PacketSocket::open("g0", Role::Tx(FrameRing::default()), false)
    })
    .expect("namespace")
    .expect("g0");
    let pool = BufPool::new(1024, 2048).expect("pool");
    let mut r = ChaCha8Rng::seed_from_u64(0x00fa_0e17);
    let mut per_class = [0u64; CLASSES];
    for set in 0..4 {
        let rules = random_rules(&mut r);
        let default = r.random_range(0..CLASSES as u16);
        let reference = Classifier::new(rules.clone(), default).expect("valid");
        let program = crate::cbpf::compile(&rules, default).expect("compiles");
        let rings = [Role::RxFrames(FrameRing {
            frame_size: 2048,
            frame_count: 512,
        }); CLASSES];
        let mut group = in_namespace(&topo.dut_ns, || {
            FanoutGroup::open("d0", &rings, &program, true)
        })
        .expect("namespace")
        .expect("group");
        let mut want: Vec<Vec<Vec<u8>>> = vec![Vec::new(); CLASSES];
        let mut got: Vec<Vec<Vec<u8>>> = vec![Vec::new(); CLASSES];
        for _ in 0..20 {
            let mut bufs = Vec::new();
            for _ in 0..50 {
                let f = sendable(&mut r);
                let class = usize::from(reference.classify(&f).class);
                let seen = ingress(&f).expect("arrives");
                assert_eq!(run(&program, &seen.skb()), class as u32, "model: {f:02x?}");
                let mut b = pool.get().expect("buffer");
                assert!(b.fill(&f));
                bufs.push(b);
                want[class].push(f);
                per_class[class] += 1;
            }
            assert_eq!(tx.send_batch(&mut bufs, &pool).expect("send"), 50);
            drain(&mut group, &pool, &mut got, Duration::from_millis(3));
        }
        drain(&mut group, &pool, &mut got, Duration::from_millis(50));
        for class in 0..CLASSES {
            assert_eq!(
                got[class].len(),
                want[class].len(),
                "rule set {set}: class {class}: {rules:?} default {default}"
            );
            for (g, w) in got[class].iter().zip(&want[class]) {
                assert_eq!(
                    g, w,
                    "rule set {set}: class {class}, in order, byte for byte"
                );
            }
        }
        let stats = group.refresh_stats();
        assert!(stats.iter().all(|s| s.rx_kernel_drops == 0));
    }
    eprintln!("frames per class over four rule sets: {per_class:?}");
    assert!(per_class.iter().filter(|&&n| n > 0).count() >= CLASSES / 2);
    assert_eq!(pool.stats().free, 1024);
}
