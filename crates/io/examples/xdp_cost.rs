//! The XDP programs' own cost per frame, as the kernel measures it
//! (`BPF_PROG_TEST_RUN`: its clock around a loop of runs, the mean per
//! run in nanoseconds).
//!
//! ```text
//! cargo run --release -p pktsched-io --example xdp_cost -- [ROUNDS] [REPEAT]
//! ```
//!
//! Programs: the queue redirect (`redirect`), the classifier with the
//! rules of `scripts/compare-htb.sh` (`dport 6008` → class 1, else 0) as
//! the AF_XDP port loads it (`classify/queue`: the queue as key) and as a
//! class group loads it (`classify/class@0`). Frames: UDP over
//! IPv4 (60 bytes, the minimum Ethernet frame without its FCS) to the bulk port (the saturation run's), to 6008, the same with
//! an 802.1Q tag, and UDP over IPv6. Two timings for each: `loop`, one
//! test run of REPEAT runs (the runs share one buffer, so once the
//! reserved metadata reaches the kernel's limit the reservation fails and
//! the stamp's store is skipped: most runs take that path), and
//! `single`, the median of the kernel's durations of REPEAT / 1000 test
//! runs of one run each (every run reserves and stamps, plus the timer's
//! own cost). Medians over ROUNDS (default 5). The class each program
//! wrote is printed too. Needs root.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use pktsched_io::bpf::classify::{self, Steer};
use pktsched_io::bpf::redirect::load_redirect_by_queue;
use pktsched_io::bpf::sys::{Map, Program};
use pktsched_io::classify::{Match, PortRange, Rule};
use pktsched_io::frame::{UdpSpec, build_udp};

fn frame(vlan: Option<u16>, v6: bool, dport: u16) -> Vec<u8> {
    let (src_ip, dst_ip) = if v6 {
        (
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)),
        )
    } else {
        (
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(10, 0, 1, 2)),
        )
    };
    let spec = UdpSpec {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        vlan,
        src_ip,
        dst_ip,
        sport: 40000,
        dport,
        dscp: 0,
        ttl: 64,
        payload: vec![0; if v6 { 2 } else { 18 }],
    };
    let mut buf = vec![0u8; 256];
    let n = build_udp(&mut buf, &spec).expect("fits");
    buf.truncate(n.max(60));
    buf
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn cost(prog: &Program, f: &[u8], rounds: usize, repeat: u32) -> (f64, f64, Option<u16>) {
    let mut out = [0u8; 512];
    let mut looped = Vec::new();
    let mut single = Vec::new();
    for _ in 0..rounds {
        let (_, ns) = prog
            .test_run_repeated(f, &mut out, repeat)
            .expect("test run");
        looped.push(f64::from(ns));
        let mut each: Vec<f64> = (0..(repeat / 1000).max(1))
            .map(|_| {
                let (_, ns) = prog.test_run_repeated(f, &mut out, 1).expect("test run");
                f64::from(ns)
            })
            .collect();
        single.push(median(std::mem::take(&mut each)));
    }
    let run = prog.test_run(f, &mut out).expect("test run");
    let class = classify::class_of_output(&out[..run.out_len], f.len());
    (median(looped), median(single), class)
}

/// Argument `index` as a whole number in `allowed`, or `default` when it
/// is absent; anything else ends the program with a message naming it.
fn arg(index: usize, name: &str, allowed: std::ops::RangeInclusive<u32>, default: u32) -> u32 {
    let Some(text) = std::env::args().nth(index) else {
        return default;
    };
    match text.parse::<u32>() {
        Ok(n) if allowed.contains(&n) => n,
        _ => {
            eprintln!(
                "xdp_cost: {name} `{text}`: allowed a whole number {}..={}",
                allowed.start(),
                allowed.end()
            );
            std::process::exit(2);
        }
    }
}

fn main() {
    let rounds = arg(1, "ROUNDS", 1..=1000, 5) as usize;
    let repeat = arg(
        2,
        "REPEAT",
        1..=pktsched_io::bpf::sys::MAX_TEST_REPEAT,
        1_000_000,
    );
    let map = Map::xsk(4, "pst_cost").expect("XSKMAP (needs root)");
    let rules = vec![Rule {
        class: 1,
        matches: Match {
            dport: Some(PortRange { lo: 6008, hi: 6008 }),
            ..Match::default()
        },
    }];
    let programs = [
        ("redirect", load_redirect_by_queue(&map).expect("load")),
        (
            "classify/queue",
            classify::load(&rules, 0, &map, Steer::ByQueue).expect("load"),
        ),
        (
            "classify/class@0",
            classify::load(&rules, 0, &map, Steer::ByClassOnQueue(0)).expect("load"),
        ),
    ];
    let frames = [
        ("v4 udp bulk", frame(None, false, 5000)),
        ("v4 udp 6008", frame(None, false, 6008)),
        ("vlan v4 udp", frame(Some(100), false, 5000)),
        ("v6 udp", frame(None, true, 5000)),
    ];
    println!("program            frame          loop ns  single ns  class");
    for (pname, prog) in &programs {
        for (fname, f) in &frames {
            let (looped, single, class) = cost(prog, f, rounds, repeat);
            println!(
                "{pname:<18} {fname:<14} {looped:>7.1} {single:>10.1}  {}",
                class.map_or("-".to_string(), |c| c.to_string())
            );
        }
    }
}
