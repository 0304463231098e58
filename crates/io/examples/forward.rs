//! AF_PACKET forwarding between veths: packets/s and forwarder CPU time
//! per packet.
//!
//! ```text
//! cargo run --release -p pktsched-io --example forward -- [SECONDS] [FRAME_BYTES] [v3|v2|xdp] [napi]
//! ```
//!
//! Builds `gen:g0 ↔ d0 dut d1 ↔ s0:sink` (removed at the end). A generator
//! thread in `gen` (pinned to CPU 0) sends UDP frames as fast as its
//! AF_PACKET TX ring goes; a forwarder thread in `dut` (pinned to CPU 1)
//! moves them d0 → d1 through a receive ring (`v3`: TPACKET_V3 blocks,
//! the default; `v2`: frame slots) and a TX ring with qdisc bypass (`xdp`:
//! an AF_XDP socket on each, copy mode, the XDP program attached natively); the
//! sink's kernel drops them early (foreign MAC). `napi` puts d0 and s0
//! into veth's NAPI mode (see `Topology::napi`). Printed: offered and
//! forwarded packets/s, the forwarder thread's CPU time per packet
//! (CLOCK_THREAD_CPUTIME_ID), drops by reason, and what s0 counted. Needs
//! root.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pktsched_io::frame::{Stamp, UdpSpec, build_udp};
use pktsched_io::netns::{Topology, in_namespace, missing_privileges};
use pktsched_io::packet::{FrameRing, PacketSocket, Role, RxRing};
use pktsched_io::xdp::{self, XdpConfig};
use pktsched_io::{BufPool, IoStats, PacketIo};

fn pin(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below CPU_SETSIZE on any machine this runs on; the
    // macro writes inside `set`.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is valid for the call; 0 is the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        eprintln!(
            "note: cannot pin to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        );
    }
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn sink_rx_packets(ns: &str) -> u64 {
    std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "cat",
            "/sys/class/net/s0/statistics/rx_packets",
        ])
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(0)
}

/// The command line: `[SECONDS] [FRAME_BYTES] [v3|v2|xdp] [napi]`.
struct Args {
    secs: f64,
    frame_len: usize,
    v2: bool,
    xdp: bool,
    napi: bool,
}

fn parse_args() -> Result<Args, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let secs = match args.first() {
        None => 3.0,
        Some(s) => s
            .parse::<f64>()
            .ok()
            .filter(|v| (0.1..=3600.0).contains(v))
            .ok_or(format!(
                "SECONDS {s:?}: allowed a number of seconds in 0.1..=3600"
            ))?,
    };
    let frame_len = match args.get(1) {
        None => 60,
        Some(s) => s
            .parse::<usize>()
            .ok()
            .filter(|v| (60..=1514).contains(v))
            .ok_or(format!("FRAME_BYTES {s:?}: allowed 60..=1514"))?,
    };
    let mut out = Args {
        secs,
        frame_len,
        v2: false,
        xdp: false,
        napi: false,
    };
    for word in args.iter().skip(2) {
        match word.as_str() {
            "v3" => {}
            "v2" => out.v2 = true,
            "xdp" => out.xdp = true,
            "napi" => out.napi = true,
            other => return Err(format!("{other:?}: allowed v3, v2, xdp or napi")),
        }
    }
    Ok(out)
}

/// The forwarder's receive and transmit devices in the DUT namespace.
fn open_devices(topo: &Topology, a: &Args) -> (Box<dyn PacketIo>, Box<dyn PacketIo>) {
    let rx_role = if a.v2 {
        Role::RxFrames(FrameRing {
            frame_size: 2048,
            frame_count: 4096,
        })
    } else {
        Role::Rx(RxRing::default())
    };
    let xdp = a.xdp;
    in_namespace(
        &topo.dut_ns,
        || -> (Box<dyn PacketIo>, Box<dyn PacketIo>) {
            if xdp {
                // The unused halves can go: the socket and its program stay
                // while one half lives.
                let (rx, _, info) = xdp::open("d0", &XdpConfig::default()).expect("d0 AF_XDP");
                let (_, tx, _) = xdp::open("d1", &XdpConfig::default()).expect("d1 AF_XDP");
                eprintln!("AF_XDP: {info:?}");
                (Box::new(rx), Box::new(tx))
            } else {
                (
                    Box::new(PacketSocket::open("d0", rx_role, true).expect("d0")),
                    Box::new(
                        PacketSocket::open("d1", Role::Tx(FrameRing::default()), false)
                            .expect("d1"),
                    ),
                )
            }
        },
    )
    .expect("namespace")
}

/// The generator thread on CPU 0: UDP frames as fast as g0's TX ring goes.
fn spawn_generator(
    stop: Arc<AtomicBool>,
    mut gen_tx: PacketSocket,
    payload_len: usize,
) -> std::thread::JoinHandle<IoStats> {
    std::thread::spawn(move || -> IoStats {
        pin(0);
        let pool = BufPool::new(512, 2048).expect("pool");
        let mut template = [0u8; 2048];
        let spec = UdpSpec {
            src_mac: [2, 0xee, 0, 0, 0, 1],
            dst_mac: [2, 0xee, 0, 0, 0, 2],
            vlan: None,
            src_ip: "198.18.0.1".parse().expect("ip"),
            dst_ip: "198.18.0.2".parse().expect("ip"),
            sport: 40000,
            dport: 6000,
            dscp: 0,
            ttl: 64,
            payload: vec![0; payload_len],
        };
        let n = build_udp(&mut template, &spec).expect("fits");
        let mut batch = Vec::with_capacity(256);
        while !stop.load(Ordering::Relaxed) {
            while batch.len() < 256 {
                let Some(mut b) = pool.get() else { break };
                b.fill(&template[..n]);
                batch.push(b);
            }
            let _ = gen_tx.send_batch(&mut batch, &pool);
        }
        gen_tx.stats()
    })
}

/// What the forwarder thread measured.
struct Forwarded {
    rx: IoStats,
    tx: IoStats,
    frames: u64,
    cpu_ns_per_frame: u64,
    not_sent: u64,
}

/// The forwarder thread on CPU 1: d0 → d1, batch by batch.
fn spawn_forwarder(
    stop: Arc<AtomicBool>,
    mut rx: Box<dyn PacketIo>,
    mut tx: Box<dyn PacketIo>,
) -> std::thread::JoinHandle<Forwarded> {
    std::thread::spawn(move || -> Forwarded {
        pin(1);
        let pool = BufPool::new(4096, 2048).expect("pool");
        let mut bufs = Vec::with_capacity(256);
        let cpu0 = thread_cpu_ns();
        let (mut frames, mut not_sent) = (0u64, 0u64);
        while !stop.load(Ordering::Relaxed) {
            if rx.recv_batch(&pool, &mut bufs, 256).unwrap_or(0) == 0 {
                let _ = rx.wait(Duration::from_millis(5));
                continue;
            }
            frames += tx.send_batch(&mut bufs, &pool).unwrap_or(0) as u64;
            not_sent += bufs.len() as u64;
            for b in bufs.drain(..) {
                pool.put(b);
            }
        }
        let cpu = thread_cpu_ns() - cpu0;
        Forwarded {
            rx: rx.stats(),
            tx: tx.stats(),
            frames,
            cpu_ns_per_frame: cpu / frames.max(1),
            not_sent,
        }
    })
}

fn main() {
    if let Some(why) = missing_privileges() {
        eprintln!("forward: {why}");
        std::process::exit(2);
    }
    let a = parse_args().unwrap_or_else(|e| {
        eprintln!("forward: {e}; usage: forward [SECONDS] [FRAME_BYTES] [v3|v2|xdp] [napi]");
        std::process::exit(2);
    });
    let payload_len = a.frame_len.saturating_sub(14 + 20 + 8).max(Stamp::LEN);
    let topo = Topology::line("pst-fwd-").expect("topology");
    if a.napi {
        topo.napi(true).expect("NAPI mode");
    }
    let (rx, tx) = open_devices(&topo, &a);
    let gen_tx = in_namespace(&topo.gen_ns, || {
        PacketSocket::open(
            "g0",
            Role::Tx(FrameRing {
                frame_size: 2048,
                frame_count: 4096,
            }),
            false,
        )
    })
    .expect("namespace")
    .expect("g0");

    let stop = Arc::new(AtomicBool::new(false));
    let sink_before = sink_rx_packets(&topo.sink_ns);
    let generator = spawn_generator(stop.clone(), gen_tx, payload_len);
    let forwarder = spawn_forwarder(stop.clone(), rx, tx);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(a.secs));
    stop.store(true, Ordering::Relaxed);
    let g = generator.join().expect("generator");
    let f = forwarder.join().expect("forwarder");
    let elapsed = t0.elapsed().as_secs_f64();
    let sink = sink_rx_packets(&topo.sink_ns) - sink_before;
    report(&topo, &a, elapsed, &g, &f, sink);
}

fn report(topo: &Topology, a: &Args, elapsed: f64, g: &IoStats, f: &Forwarded, sink: u64) {
    let c = |ns: &str, dev: &str, name: &str| Topology::counter(ns, dev, name).unwrap_or(0);
    let kernel = format!(
        "kernel: d0 rx_dropped {}, d1 tx_dropped {}, s0 rx_dropped {}",
        c(&topo.dut_ns, "d0", "rx_dropped"),
        c(&topo.dut_ns, "d1", "tx_dropped"),
        c(&topo.sink_ns, "s0", "rx_dropped")
    );
    println!(
        "{}-byte frames, {:.1} s, RX ring {}",
        a.frame_len,
        elapsed,
        if a.xdp {
            "AF_XDP (d0 RX, d1 TX)"
        } else if a.v2 {
            "TPACKET_V2 slots"
        } else {
            "TPACKET_V3 blocks"
        }
    );
    println!(
        "offered   {:>9.0} pkt/s  (g0 TX ring; EAGAIN/ring-full retries {})",
        g.tx_packets as f64 / elapsed,
        g.tx_busy
    );
    println!(
        "forwarded {:>9.0} pkt/s  forwarder CPU {} ns/pkt",
        f.frames as f64 / elapsed,
        f.cpu_ns_per_frame
    );
    let (r, t) = (&f.rx, &f.tx);
    println!(
        "d0 drops: kernel (ring full) {}, freezes {}, no buffer {}, oversize {}; \
         d1 tx_busy {} not sent {}; s0 rx {}",
        r.rx_kernel_drops, r.rx_freezes, r.rx_no_buffer, r.rx_oversize, t.tx_busy, f.not_sent, sink
    );
    if a.xdp {
        println!(
            "AF_XDP: d0 rx_ring_full {}, fill ring found empty {}; d1 tx invalid {}",
            r.rx_ring_full, r.rx_fill_empty, t.tx_invalid
        );
    }
    println!("{kernel}");
}
