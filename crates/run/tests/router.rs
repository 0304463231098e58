//! `pktsched route` on real veths in namespaces of its own (prefix `rt`):
//! a generator in one namespace sends to the router in the middle, whose
//! per-packet cost (a 200 µs busy loop) makes its CPU the bottleneck on
//! purpose, and a sink in the third counts what arrives per class. With
//! 20 % RT traffic at 1.5 times the router's capacity, LL-WFQ loses
//! (almost) no RT frame, keeps RT's p99 wait for BE (in BE frames
//! forwarded ahead of it) below SQ's and still serves BE; SQ loses RT
//! frames like BE ones. A run in which other work on the machine
//! stretched the router's measured service time so far that RT alone no
//! longer fits is measured again and, failing that, says on stderr what
//! went untested.
//! Every class's frames are conserved in the router's counters. Needs
//! root (CI runs as root); skipped with a message otherwise. The
//! namespaces are removed even when a test fails (the topology's Drop).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::WireCounters;
use common::skipped;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pktsched_io::clock::monotonic_ns;
use pktsched_io::frame::{UdpSpec, build_udp};
use pktsched_io::netns::{Topology, in_namespace, is_root};
use pktsched_io::packet::{FrameRing, PacketSocket, Role};
use pktsched_io::{BufPool, PacketBuf, PacketIo};
use pktsched_run::router::{self, RouteOptions, RouterSnapshot};

const RT_PORT: u16 = 5000;
const BE_PORT: u16 = 6000;
/// Bursts of 3 RT + 12 BE frames every 2 ms: 7.5 kpps offered, 1.5 times
/// what a 200 µs per-packet cost lets the router serve. RT is 20 % of
/// the frames rather than the paper's 30 %: RT alone is then 1.5 kpps
/// (ρ_RT = 0.3), which still fits when other work on a shared machine
/// stretches the service time threefold (seen with a load average of 6
/// on two cores). The assertions compare loss fractions between classes.
const BURSTS: usize = 500;
const BURST_GAP: Duration = Duration::from_millis(2);
const RT_PER_BURST: usize = 3;
const BE_PER_BURST: usize = 12;

/// One run at a time: on two cores, concurrent routers and generators
/// would slow each other down.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn mac_text(m: [u8; 6]) -> String {
    m.map(|b| format!("{b:02x}")).join(":")
}

fn config(strategy: &str, backend: &str, t: &Topology, dir: &std::path::Path) -> String {
    let g0 = Topology::mac(&t.gen_ns, "g0").expect("g0 mac");
    let s0 = Topology::mac(&t.sink_ns, "s0").expect("s0 mac");
    format!(
        r#"[router]
ingress = "d0"
egress = "d1"
backend = "{backend}"
strategy = "{strategy}"
ring_frames = 64
pool_frames = 4096
cost = "200us"

[[class]]
name = "rt"
budget = 60
match = [{{ proto = "udp", dport = {RT_PORT} }}]

[[class]]
name = "be"
budget = 4

[[route]]
prefix = "198.18.0.2/32"
dev = "d1"

[[route]]
prefix = "198.18.0.1/32"
dev = "d0"

[[neighbour]]
ip = "198.18.0.2"
mac = "{}"

[[neighbour]]
ip = "198.18.0.1"
mac = "{}"

[control]
socket = "{}/ctl.sock"
"#,
        mac_text(s0),
        mac_text(g0),
        dir.display()
    )
}

/// A frame to `dport` whose payload starts with its send time
/// (CLOCK_MONOTONIC ns, shared by every namespace), so the sink can time
/// it.
fn frame(dport: u16, dst_mac: [u8; 6]) -> Vec<u8> {
    let mut payload = vec![0; 18];
    payload[..8].copy_from_slice(&monotonic_ns().to_be_bytes());
    let spec = UdpSpec {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac,
        vlan: None,
        src_ip: "198.18.0.1".parse().expect("ip"),
        dst_ip: "198.18.0.2".parse().expect("ip"),
        sport: 1234,
        dport,
        dscp: 0,
        ttl: 64,
        payload,
    };
    let mut buf = vec![0u8; 256];
    let n = build_udp(&mut buf, &spec).expect("fits");
    buf.truncate(n);
    buf
}

/// Frames the sink saw per class, and those with a wrong TTL or MAC.
#[derive(Default)]
struct Seen {
    rt: u64,
    be: u64,
    malformed: u64,
    /// Each RT frame's time from the generator to the sink (ns).
    rt_latency: Vec<u64>,
    /// When the sink got each frame of either class, in order (ns), and
    /// how many BE frames it had got by then (that one included).
    arrivals: Vec<(u64, u64)>,
    /// Each RT frame's send time and its index in `arrivals`.
    rt_sent_at: Vec<(u64, usize)>,
}

impl std::fmt::Debug for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Seen {{ rt: {}, be: {}, malformed: {}, RT latency p99 {} ns, BE frames ahead of \
             an RT frame p99 {} }}",
            self.rt,
            self.be,
            self.malformed,
            p99(self.rt_latency.clone()),
            self.be_ahead_of_rt_p99()
        )
    }
}

/// The 99th percentile of `v` (0 when empty).
fn p99(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get((v.len() * 99 / 100).min(v.len().saturating_sub(1)))
        .copied()
        .unwrap_or(0)
}

impl Seen {
    /// The 99th percentile, over RT frames, of the BE frames the sink got
    /// between an RT frame's sending and its own arrival: how long RT
    /// waits for BE, counted in BE frames the router forwarded first. A
    /// machine that stretches the router's service time or stops it
    /// changes how long that takes, not how many frames it is.
    fn be_ahead_of_rt_p99(&self) -> u64 {
        let ahead = self.rt_sent_at.iter().map(|&(sent, at)| {
            let first_after = self.arrivals[..at].partition_point(|&(t, _)| t <= sent);
            let be_by = |i: usize| i.checked_sub(1).map_or(0, |i| self.arrivals[i].1);
            be_by(at) - be_by(first_after)
        });
        p99(ahead.collect())
    }
}

fn sink(mut s: PacketSocket, d1: [u8; 6], stop: &AtomicBool) -> Seen {
    let pool = BufPool::new(1024, 2048).expect("pool");
    let mut got: Vec<PacketBuf> = Vec::new();
    let mut seen = Seen::default();
    // Once told to stop, it reads on until a receive finds the ring empty
    // (the router has stopped: nothing more is on its way but what the
    // ring holds).
    loop {
        let stopping = stop.load(Ordering::Acquire);
        let _ = s.wait(Duration::from_millis(5));
        let n = s.recv_batch(&pool, &mut got, 256).expect("sink receive");
        if stopping && n == 0 {
            break;
        }
        for b in got.drain(..) {
            let f = b.as_slice();
            if f.len() >= 38 && f[12..14] == [0x08, 0x00] {
                let dport = u16::from_be_bytes([f[36], f[37]]);
                let ok = f[14 + 8] == 63 && f[6..12] == d1;
                let now = monotonic_ns();
                match (dport, ok) {
                    (_, false) => seen.malformed += 1,
                    (RT_PORT, true) => {
                        seen.rt += 1;
                        // UDP payload at 14 + 20 + 8.
                        let sent = u64::from_be_bytes(f[42..50].try_into().expect("8 bytes"));
                        seen.rt_latency.push(now.saturating_sub(sent));
                        seen.rt_sent_at.push((sent, seen.arrivals.len()));
                        seen.arrivals.push((now, seen.be));
                    }
                    (BE_PORT, true) => {
                        seen.be += 1;
                        seen.arrivals.push((now, seen.be));
                    }
                    _ => {}
                }
            }
            pool.put(b);
        }
    }
    seen
}

fn generate(mut tx: PacketSocket, d0: [u8; 6]) {
    let pool = BufPool::new(256, 2048).expect("pool");
    let mut batch: Vec<PacketBuf> = Vec::new();
    let start = Instant::now();
    for i in 0..BURSTS {
        let (rt, be) = (frame(RT_PORT, d0), frame(BE_PORT, d0));
        // Interleaved so a burst is not all RT first.
        for k in 0..RT_PER_BURST + BE_PER_BURST {
            let bytes = if k % 3 == 0 && k / 3 < RT_PER_BURST {
                &rt
            } else {
                &be
            };
            let mut b = pool.get().expect("buffer");
            assert!(b.fill(bytes));
            batch.push(b);
        }
        while !batch.is_empty() {
            tx.send_batch(&mut batch, &pool).expect("gen send");
        }
        let next = start + BURST_GAP * (i as u32 + 1);
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
}

/// Removes a scratch directory, also when a test fails.
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A topology with the router's config written, and the sink's and the
/// generator's sockets open (the scratch directory goes with it).
struct Rig {
    t: Topology,
    dir: std::path::PathBuf,
    _dir: RemoveOnDrop,
    d0: [u8; 6],
    d1: [u8; 6],
    rx: PacketSocket,
    tx: PacketSocket,
}

/// Builds the namespaces with `prefix` and writes `config(topology, dir)`
/// as the router's config.
fn rig(prefix: &str, config: impl FnOnce(&Topology, &std::path::Path) -> String) -> Rig {
    let t = Topology::line(prefix).expect("topology");
    t.quiet().expect("ipv6 off");
    let dir = std::env::temp_dir().join(format!("{}-route", t.dut_ns));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("route.toml"), config(&t, &dir)).expect("config");
    let d0 = Topology::mac(&t.dut_ns, "d0").expect("d0 mac");
    let d1 = Topology::mac(&t.dut_ns, "d1").expect("d1 mac");
    let ring = FrameRing {
        frame_size: 2048,
        frame_count: 8192,
    };
    let rx = in_namespace(&t.sink_ns, || {
        PacketSocket::open("s0", Role::RxFrames(ring), false)
    })
    .expect("ns")
    .expect("sink socket");
    let tx_ring = FrameRing {
        frame_size: 2048,
        frame_count: 1024,
    };
    let tx = in_namespace(&t.gen_ns, || {
        PacketSocket::open("g0", Role::Tx(tx_ring), false)
    })
    .expect("ns")
    .expect("gen socket");
    Rig {
        _dir: RemoveOnDrop(dir.clone()),
        t,
        dir,
        d0,
        d1,
        rx,
        tx,
    }
}

/// Starts the router and `sink` (on the sink's socket, until told to
/// stop), runs `drive` (the generator's socket, the control socket) once
/// the router answers, then stops the router and the sink; returns the
/// router's final counters, what the sink saw, what `drive` returned and
/// the kernel's counters along the line.
fn run_router<S: Send + 'static, D>(
    rig: Rig,
    sink: impl FnOnce(PacketSocket, &AtomicBool) -> S + Send + 'static,
    drive: impl FnOnce(PacketSocket, &std::path::Path) -> D,
) -> (RouterSnapshot, S, D, WireCounters) {
    let stop_router = Arc::new(AtomicBool::new(false));
    let stop_sink = Arc::new(AtomicBool::new(false));
    let opts = RouteOptions {
        config: rig.dir.join("route.toml"),
        duration: None,
        control: None,
        keep_privileges: true,
    };
    let (ns, flag) = (rig.t.dut_ns.clone(), stop_router.clone());
    let router = std::thread::spawn(move || {
        in_namespace(&ns, || {
            router::run(&opts, &flag, &mut |l| eprintln!("router: {l}"))
        })
    });
    let (flag, rx) = (stop_sink.clone(), rig.rx);
    let sink = std::thread::spawn(move || sink(rx, &flag));
    // The router is up once its control socket answers.
    let sock = rig.dir.join("ctl.sock");
    let up = Instant::now();
    while !sock.exists() && up.elapsed() < Duration::from_secs(10) && !router.is_finished() {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(sock.exists(), "the router did not start");
    let driven = drive(rig.tx, &sock);
    stop_router.store(true, Ordering::Release);
    let snap = router
        .join()
        .expect("router thread")
        .expect("namespace")
        .expect("router run");
    std::thread::sleep(Duration::from_millis(100));
    stop_sink.store(true, Ordering::Release);
    let seen = sink.join().expect("sink thread");
    (snap, seen, driven, WireCounters::read(&rig.t))
}

/// Runs the router with `strategy` on `backend`; returns the router's final counters
/// and what the sink saw.
fn run(strategy: &str, backend: &str) -> Option<(RouterSnapshot, Seen, WireCounters)> {
    if !is_root() {
        skipped("needs root for network namespaces (CI runs as root)");
        return None;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let rig = rig("rt", |t, dir| config(strategy, backend, t, dir));
    let (d0, d1) = (rig.d0, rig.d1);
    let (snap, seen, (), wire) = run_router(
        rig,
        move |rx, stop| sink(rx, d1, stop),
        |tx, sock| {
            generate(tx, d0);
            std::thread::sleep(Duration::from_millis(500));
            let live =
                pktsched_run::control::request(sock, pktsched_run::control::Request::StatsJson)
                    .expect("stats over the control socket");
            assert!(live.contains("\"service_ns\""), "{live}");
        },
    );
    eprintln!(
        "{strategy} on {backend}:\n{}sink: {seen:?}\n{}",
        snap.text(),
        wire.text()
    );
    assert_eq!(snap.backend, backend);
    Some((snap, seen, wire))
}

/// Every frame sent is forwarded to the sink or dropped with a counted
/// reason: by pktsched's rings, or by veth at g0's transmit (d0's receive
/// backlog full: the kernel's, before pktsched; seen on AF_XDP with the
/// router stalled by other work).
fn check_conservation(s: &RouterSnapshot, seen: &Seen, wire: &WireCounters) {
    for c in &s.classes {
        assert!(c.conserved(), "class {} not conserved: {c:?}", c.name);
        assert_eq!(c.queued, 0, "class {}: frames left queued", c.name);
    }
    let fwd = |name: &str| {
        s.classes
            .iter()
            .find(|c| c.name == name)
            .expect(name)
            .forwarded
    };
    assert_eq!(
        seen.malformed, 0,
        "frames without TTL 63 or the router's MAC"
    );
    assert_eq!(seen.rt, fwd("rt"), "the sink saw every RT frame forwarded");
    assert_eq!(seen.be, fwd("be"), "the sink saw every BE frame forwarded");
    let ring_rx: u64 = s.rings.iter().map(|r| r.received).sum();
    let class_rx: u64 = s.classes[..2].iter().map(|c| c.received).sum();
    assert_eq!(ring_rx, class_rx, "every frame received is some class's");
    let offered = (BURSTS * (RT_PER_BURST + BE_PER_BURST)) as u64;
    let drops: u64 = s.rings.iter().map(|r| r.dropped_ring_full).sum();
    assert_eq!(
        ring_rx + drops + wire.g0_tx_dropped,
        offered,
        "received + ring drops + veth drops before pktsched = sent; {}",
        wire.text()
    );
    assert!(
        s.service_ns >= 200_000.0,
        "x = {} ns below the 200 µs cost",
        s.service_ns
    );
}

/// RT frames per second the generator offers.
const RT_PER_S: f64 = RT_PER_BURST as f64 / 0.002;
/// Highest share of the router's measured capacity (1 / its mean service
/// time x) RT alone may need for a run to test that LL-WFQ keeps RT
/// frames: 0.3 with x at the 200 µs cost, about 0.35 idle here. A mean
/// hides stalls, so a run whose x other work stretched by half again
/// leaves RT's losses to the machine, not the strategy (seen at x =
/// 458 µs: RT lost 31 %, its ring overflowing).
const RT_FITS_BELOW: f64 = 0.45;
/// Runs of LL-WFQ tried for one in which RT fits the router's capacity.
const LL_WFQ_ATTEMPTS: usize = 3;

/// On AF_PACKET, SQ then LL-WFQ under the same overload: SQ loses RT
/// frames like BE ones; LL-WFQ keeps them, still serves BE, and an RT
/// frame waits for fewer BE frames than under SQ (under SQ behind the
/// BE frames of the whole shared ring; under LL-WFQ behind at most a BE
/// budget per round, stalled or not). The wait is counted in BE frames
/// forwarded first, not in time, so a machine that stretches the
/// router's 200 µs cost does not decide it.
#[test]
fn ll_wfq_keeps_rt_frames_below_sqs_latency_and_still_serves_be() {
    let Some(sq_ahead) = sq_case() else {
        return;
    };
    let Some(ll_wfq_ahead) = ll_wfq_case("packet") else {
        return;
    };
    eprintln!("BE frames ahead of an RT frame, p99: sq {sq_ahead}, ll-wfq {ll_wfq_ahead}");
    // Measured: LL-WFQ 8-12 and SQ 93-110 on a quiet machine, LL-WFQ up
    // to 55 while the rest of the test suite ran (an RT frame's kernel
    // ring wait then spans more BE departures); SQ never under 90.
    assert!(
        ll_wfq_ahead < sq_ahead,
        "an RT frame's wait for BE (p99, in BE frames forwarded before it): ll-wfq \
         {ll_wfq_ahead}, sq {sq_ahead}; ll-wfq should be under sq's"
    );
}

#[test]
fn ll_wfq_on_af_xdp_keeps_rt_frames_and_still_serves_be() {
    ll_wfq_case("xdp");
}

/// Fractions of RT and BE frames lost between the generator and the sink.
fn losses(seen: &Seen) -> (f64, f64) {
    let rt_sent = (BURSTS * RT_PER_BURST) as f64;
    let be_sent = (BURSTS * BE_PER_BURST) as f64;
    (
        1.0 - seen.rt as f64 / rt_sent,
        1.0 - seen.be as f64 / be_sent,
    )
}

/// LL-WFQ's checks, on up to [`LL_WFQ_ATTEMPTS`] runs until one in which
/// RT alone fits the router's measured capacity; returns the BE frames
/// ahead of an RT frame (p99) of the last run, `None` when skipped. The
/// checks that hold at any capacity are made on every run; when no run
/// had the capacity, stderr says that RT's losses went unjudged.
fn ll_wfq_case(backend: &str) -> Option<u64> {
    let mut ahead = 0;
    for attempt in 1..=LL_WFQ_ATTEMPTS {
        let (s, seen, wire) = run("ll-wfq", backend)?;
        check_conservation(&s, &seen, &wire);
        ahead = seen.be_ahead_of_rt_p99();
        let (rt, be) = losses(&seen);
        assert!(
            be > 0.2,
            "the router was not the bottleneck: BE lost {be:.3}"
        );
        // At any capacity RT is served first with the larger budget, so an
        // RT frame gets through more often than a BE frame (under SQ
        // equally often).
        assert!(
            1.0 - rt >= 1.5 * (1.0 - be),
            "ll-wfq should favour RT: RT lost {rt:.3}, BE lost {be:.3}"
        );
        // No starvation, whatever the machine's load does to x: with
        // budgets RT 60 / BE 4 and BE backlogged, BE gets at least 4 of
        // every 64 frames served (less a round's worth at the edges).
        let served = (seen.rt + seen.be) as f64;
        assert!(
            seen.be as f64 >= served * 4.0 / 64.0 - 64.0,
            "ll-wfq starved BE: {} of {served} frames served were BE (BE lost {be:.3})",
            seen.be
        );
        assert_eq!(seen.rt_latency.len() as u64, seen.rt);
        let rho_rt = RT_PER_S * s.service_ns / 1e9;
        if rho_rt > RT_FITS_BELOW {
            eprintln!(
                "attempt {attempt}: the router's service time was x = {:.0} ns (cost 200 µs), \
                 so RT alone needed {rho_rt:.2} of it (above {RT_FITS_BELOW}): whether LL-WFQ \
                 keeps RT frames is not measurable on this run (RT lost {rt:.3}, BE {be:.3})",
                s.service_ns
            );
            continue;
        }
        assert!(
            rt <= 0.2 * be,
            "ll-wfq should keep RT frames: RT lost {rt:.3}, BE lost {be:.3} with RT needing \
             {rho_rt:.2} of the router (x = {:.0} ns)",
            s.service_ns
        );
        return Some(ahead);
    }
    common::untested(
        "ll_wfq_case",
        &format!(
            "in {LL_WFQ_ATTEMPTS} runs RT alone never fitted {RT_FITS_BELOW} of the router's \
             measured capacity (other work stretched its service time), so that LL-WFQ keeps RT \
             frames went unmeasured"
        ),
    );
    Some(ahead)
}

/// SQ's checks; returns the BE frames ahead of an RT frame (p99), `None`
/// when skipped.
fn sq_case() -> Option<u64> {
    let (s, seen, wire) = run("sq", "packet")?;
    check_conservation(&s, &seen, &wire);
    let (rt, be) = losses(&seen);
    assert!(
        be > 0.2,
        "the router was not the bottleneck: BE lost {be:.3}"
    );
    assert!(
        rt >= 0.5 * be,
        "sq has one ring: RT should lose like BE; RT lost {rt:.3}, BE lost {be:.3}"
    );
    assert_eq!(s.rings.len(), 1, "sq is one ring");
    Some(seen.be_ahead_of_rt_p99())
}

/// The egress scenario: `[egress] rate` below the offered load, DRR with
/// RT weight 3 and BE weight 1, both classes offered more than their
/// share (prefix `eg`).
const EGRESS_RATE_BPS: u64 = 20_000_000;
/// Frames of this many bytes; each class offers 5 per 2 ms (20 Mbit/s
/// each, 40 in all: twice the egress rate).
const EGRESS_FRAME: usize = 1000;
const EGRESS_BURSTS: usize = 1000;
const EGRESS_PER_CLASS: usize = 5;

fn egress_config(t: &Topology, dir: &std::path::Path) -> String {
    let base = config("ll-wfq", "packet", t, dir).replace("cost = \"200us\"\n", "");
    format!(
        "{base}\n[egress]\nrate = \"{EGRESS_RATE_BPS}bit\"\nalgorithm = \"drr\"\n\n\
         [[egress.class]]\nname = \"rt\"\nweight = 3\nlimit = 64\n\n\
         [[egress.class]]\nname = \"be\"\nweight = 1\nlimit = 64\n"
    )
}

/// A frame of [`EGRESS_FRAME`] bytes to `dport`.
fn big_frame(dport: u16, dst_mac: [u8; 6]) -> Vec<u8> {
    let mut f = frame(dport, dst_mac);
    let extra = EGRESS_FRAME - f.len();
    f.extend(std::iter::repeat_n(0u8, extra));
    // IPv4 total length and UDP length grow with the frame; the IPv4
    // checksum is redone.
    let ip_len = (EGRESS_FRAME - 14) as u16;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f[40..42].copy_from_slice(&[0, 0]);
    f[24..26].copy_from_slice(&[0, 0]);
    let sum = pktsched_core::route::forward::ipv4_checksum(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f
}

/// Each frame the sink saw: arrival (monotonic ns), destination port,
/// length.
fn egress_sink(mut s: PacketSocket, stop: &AtomicBool) -> Vec<(u64, u16, usize)> {
    let pool = BufPool::new(1024, 2048).expect("pool");
    let mut got: Vec<PacketBuf> = Vec::new();
    let mut seen = Vec::new();
    // Reads until a receive finds the ring empty after the stop (as
    // [`sink`]).
    loop {
        let stopping = stop.load(Ordering::Acquire);
        let _ = s.wait(Duration::from_millis(5));
        let n = s.recv_batch(&pool, &mut got, 256).expect("sink receive");
        if stopping && n == 0 {
            break;
        }
        let now = monotonic_ns();
        for b in got.drain(..) {
            let f = b.as_slice();
            if f.len() >= 38 && f[12..14] == [0x08, 0x00] {
                seen.push((now, u16::from_be_bytes([f[36], f[37]]), f.len()));
            }
            pool.put(b);
        }
    }
    seen
}

/// Sends [`EGRESS_BURSTS`] bursts 2 ms apart; returns when the last left
/// (monotonic ns).
fn egress_generate(mut tx: PacketSocket, d0: [u8; 6]) -> u64 {
    let pool = BufPool::new(256, 2048).expect("pool");
    let mut batch: Vec<PacketBuf> = Vec::new();
    let (rt, be) = (big_frame(RT_PORT, d0), big_frame(BE_PORT, d0));
    let start = Instant::now();
    for i in 0..EGRESS_BURSTS {
        for k in 0..2 * EGRESS_PER_CLASS {
            let mut b = pool.get().expect("buffer");
            assert!(b.fill(if k % 2 == 0 { &rt } else { &be }));
            batch.push(b);
        }
        while !batch.is_empty() {
            tx.send_batch(&mut batch, &pool).expect("gen send");
        }
        let next = start + BURST_GAP * (i as u32 + 1);
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    monotonic_ns()
}

/// With `[egress]` the sink receives the egress rate (± 2 %) while the
/// offered load is twice that, RT and BE share it 3 : 1 (± 5 %), and
/// every class is conserved with its queue_full drops counted.
#[test]
fn the_egress_policy_sends_at_its_rate_and_the_weights_share_it() {
    if !is_root() {
        skipped("needs root for network namespaces (CI runs as root)");
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let rig = rig("eg", egress_config);
    let d0 = rig.d0;
    let (snap, seen, gen_end, _) = run_router(rig, egress_sink, |tx, sock| {
        let gen_end = egress_generate(tx, d0);
        std::thread::sleep(Duration::from_millis(500));
        let prom = pktsched_run::control::request(sock, pktsched_run::control::Request::Prometheus)
            .expect("stats over the control socket");
        // Each series names the device it is about: the egress, d1, here.
        assert!(
            prom.contains("pktsched_route_egress_backlog_packets{device=\"d1\",class=\"rt\"} 0"),
            "{prom}"
        );
        gen_end
    });
    eprintln!("egress:\n{}sink: {} frames", snap.text(), seen.len());
    check_egress(&snap, &seen, gen_end);
}

fn check_egress(s: &RouterSnapshot, seen: &[(u64, u16, usize)], gen_end: u64) {
    for c in &s.classes {
        assert!(c.conserved(), "class {} not conserved: {c:?}", c.name);
        assert_eq!(c.queued, 0, "class {}: frames left queued", c.name);
    }
    let e = s.egress.as_ref().expect("egress counters");
    for (c, e) in s.classes.iter().zip(&e.classes) {
        assert_eq!(
            c.dropped.get("queue_full").copied().unwrap_or(0),
            e.dropped_queue_full
        );
        assert!(
            e.dropped_queue_full > 0,
            "class {} was not over its share",
            c.name
        );
    }
    // While the generator ran, both classes were backlogged: the link's
    // rate and the weights show.
    let during: Vec<_> = seen.iter().filter(|f| f.0 <= gen_end).collect();
    assert!(during.len() > 1000, "too few frames: {}", during.len());
    let (first, last) = (during[0].0, during[during.len() - 1].0);
    let bits: usize = during[1..].iter().map(|f| f.2 * 8).sum();
    let rate = bits as f64 * 1e9 / (last - first) as f64;
    let want = EGRESS_RATE_BPS as f64;
    assert!(
        (rate - want).abs() <= 0.02 * want,
        "received {rate:.0} bit/s, configured {want}"
    );
    let rt = during.iter().filter(|f| f.1 == RT_PORT).count() as f64;
    let share = rt / during.len() as f64;
    assert!(
        (share - 0.75).abs() <= 0.05 * 0.75,
        "RT share {share:.3}, weights 3 : 1"
    );
    eprintln!("egress received {rate:.0} bit/s (configured {want}), RT share {share:.3}");
}
