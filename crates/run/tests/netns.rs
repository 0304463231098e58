//! The shaper on real veths in namespaces of its own: `gen` in one
//! namespace, the pipeline on AF_PACKET in the middle, `sink` in the third.
//! Needs root (CI runs as root); skipped with a message otherwise. The
//! namespaces are removed even when a test fails (the topology's Drop).

mod common;
use common::skipped;
#[macro_use]
mod engines;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use common::WireCounters;
use pktsched_io::netns::{Topology, in_namespace, is_root};
use pktsched_run::config::{Engine, parse};
use pktsched_run::devices::open_packet_devices;
use pktsched_run::engine::{Final, Pipeline};
use pktsched_run::stats::Snapshot;
use pktsched_run::traffic::gen_flows::FlowSpec;
use pktsched_run::traffic::generator::{GenBackend, GenReport, generate_with};
use pktsched_run::traffic::ring_out::RingTarget;
use pktsched_run::traffic::sink::{Sink, SinkReport};

/// What a run saw: the generator, the sink, the daemon at the end, the
/// daemon's counters 1 s and 3 s into the run (the steady state, before
/// the generator stops and the queues drain), and the kernel's counters
/// along the line.
struct Run {
    sent: GenReport,
    received: SinkReport,
    fin: Final,
    at_1s: Snapshot,
    at_3s: Snapshot,
    wire: WireCounters,
}

/// One real-wire run at a time: on two cores, concurrent generators and
/// shapers would measure each other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `flows` from the generator namespace through a pipeline with
/// `config` (on `engine`) to a sink on ports `ports` for `seconds` (at
/// least 4).
fn through_pipeline(
    config: &str,
    engine: Engine,
    flows: &[&str],
    ports: &[u16],
    seconds: u64,
) -> Run {
    through_pipeline_with(config, engine, &GenBackend::Socket, flows, ports, seconds)
}

/// [`through_pipeline`] with the generator's frames sent by `backend`.
fn through_pipeline_with(
    config: &str,
    engine: Engine,
    backend: &GenBackend,
    flows: &[&str],
    ports: &[u16],
    seconds: u64,
) -> Run {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let topo = Topology::line("pst-run-").expect("topology");
    let config = config.replacen(
        "[link]\n",
        &format!("[link]\nengine = \"{}\"\n", engine.name()),
        1,
    );
    let cfg = parse(&config, "test.toml", None).expect("config");
    assert_eq!(cfg.link.engine, engine);
    let (devices, pool, _) = in_namespace(&topo.dut_ns, || open_packet_devices(&cfg.link))
        .expect("namespace")
        .expect("devices");
    let pipeline = Pipeline::start(cfg, devices, pool).expect("start");
    let sink = in_namespace(&topo.sink_ns, || {
        Sink::bind("198.18.0.2".parse().expect("ip"), ports)
    })
    .expect("namespace")
    .expect("bind");
    let base = FlowSpec::new("198.18.0.2".parse().expect("ip"));
    let specs: Vec<FlowSpec> = flows
        .iter()
        .map(|f| FlowSpec::parse_cli(f, &base).expect("flow"))
        .collect();
    let never = AtomicBool::new(false);
    let (gen_report, sink_report, at_1s, at_3s) = std::thread::scope(|s| {
        let receiving = s.spawn(|| sink.run(None, Duration::from_secs(2), &never));
        let sampling = s.spawn(|| {
            // Sampling points, not timing goals.
            std::thread::sleep(Duration::from_secs(1));
            let a = pipeline.snapshot().expect("snapshot");
            std::thread::sleep(Duration::from_secs(2));
            (a, pipeline.snapshot().expect("snapshot"))
        });
        let sent = in_namespace(&topo.gen_ns, || {
            generate_with(
                backend,
                &specs,
                Duration::from_secs(seconds),
                7,
                &never,
                &mut |_| {},
            )
        })
        .expect("namespace")
        .expect("generate");
        let (a, b) = sampling.join().expect("sampling thread");
        (sent, receiving.join().expect("sink thread"), a, b)
    });
    let fin = pipeline.stop().expect("stop");
    Run {
        sent: gen_report,
        received: sink_report,
        fin,
        at_1s,
        at_3s,
        wire: WireCounters::read(&topo),
    }
}

const LINK: &str = r#"
[link]
ingress = "d0"
egress = "d1"
rate = "RATE"

[scheduler]
algorithm = "drr"

[control]
socket = "/tmp/unused.sock"

[[class]]
name = "a"
weight = 6
limit = 2000
match = [{ dport = 5000 }]

[[class]]
name = "b"
weight = 3
limit = 2000
match = [{ dport = 5001 }]

[[class]]
name = "c"
weight = 1
limit = 2000
default = true
"#;

fn frame_rate_bps(r: &SinkReport, flow: usize) -> f64 {
    // Payload throughput → frame throughput (1500-byte frames carry 1458).
    r.flows[flow].throughput_bps as f64 * 1500.0 / 1458.0
}

fn a_single_overloading_flow_gets_the_configured_rate(engine: Engine) {
    if !is_root() {
        skipped("needs root to create network namespaces");
        return;
    }
    let Run {
        sent: g,
        received: s,
        fin,
        ..
    } = through_pipeline(
        &LINK.replace("RATE", "100mbit"),
        engine,
        &["dport=5000,rate=150mbit,size=1500"],
        &[5000],
        4,
    );
    assert_eq!(s.flows.len(), 1, "{}", s.text());
    let got = frame_rate_bps(&s, 0);
    let err = (got - 100e6).abs() / 100e6;
    assert!(
        err < 0.01,
        "received {got:.0} bit/s, {:.2} % off 100 Mbit/s\n{}\n{}",
        err * 100.0,
        s.text(),
        fin.after_stop.text()
    );
    // Conservation through the daemon.
    let a = &fin.after_stop.classes[0];
    assert_eq!(
        a.received,
        a.packets + a.drops + a.qlen,
        "{}",
        fin.after_stop.text()
    );
    assert!(a.drops > 0, "the overload was dropped at the queue limit");
    assert!(g.flows[0].sent >= a.received);
}

fn weighted_shares_follow_the_weights_under_overload(engine: Engine) {
    if !is_root() {
        skipped("needs root to create network namespaces");
        return;
    }
    let run = through_pipeline(
        &LINK.replace("RATE", "60mbit"),
        engine,
        &[
            "dport=5000,rate=60mbit,size=1500",
            "dport=5001,rate=60mbit,size=1500",
            "dport=5002,rate=60mbit,size=1500",
        ],
        &[5000, 5001, 5002],
        4,
    );
    // Departures per class between the two samples (all three backlogged).
    let sent = |snap: &Snapshot, i: usize| snap.classes[i].packets as f64;
    let delta: Vec<f64> = (0..3)
        .map(|i| sent(&run.at_3s, i) - sent(&run.at_1s, i))
        .collect();
    let total: f64 = delta.iter().sum();
    for (i, want) in [0.6, 0.3, 0.1].into_iter().enumerate() {
        let share = delta[i] / total;
        assert!(
            (share - want).abs() < 0.02,
            "class {i}: share {share:.3}, configured {want}\n{}",
            run.at_3s.text()
        );
    }
    // And the frames did arrive: every class reached the sink.
    assert_eq!(run.received.flows.len(), 3, "{}", run.received.text());
}

fn a_strict_priority_class_takes_the_link_under_overload(engine: Engine) {
    if !is_root() {
        skipped("needs root to create network namespaces");
        return;
    }
    let config = LINK
        .replace("RATE", "50mbit")
        .replace("algorithm = \"drr\"", "algorithm = \"prio\"")
        .replace("name = \"a\"\nweight = 6", "name = \"a\"\nprio = 0")
        .replace("name = \"b\"\nweight = 3", "name = \"b\"\nprio = 1")
        .replace("name = \"c\"\nweight = 1", "name = \"c\"\nprio = 2");
    let run = through_pipeline(
        &config,
        engine,
        &[
            "dport=5000,rate=60mbit,size=1500",
            "dport=5001,rate=60mbit,size=1500",
        ],
        &[5000, 5001],
        4,
    );
    let sent = |snap: &Snapshot, i: usize| snap.classes[i].packets as f64;
    let hi = sent(&run.at_3s, 0) - sent(&run.at_1s, 0);
    let lo = sent(&run.at_3s, 1) - sent(&run.at_1s, 1);
    let share = hi / (hi + lo);
    assert!(
        share > 0.95,
        "priority class got {share:.3}\n{}",
        run.at_3s.text()
    );
}

/// The 1 Gbit/s test's steady-state window (between the 1 s and 3 s
/// samples): what the shaper sent and what was offered to it.
struct GigabitWindow {
    /// The shaper's departures, bit/s of 1500-byte frames.
    sent_bps: f64,
    /// Frames that reached pktsched's ingress socket (read, or dropped by
    /// its ring for want of reading: pktsched's loss), as bit/s.
    offered_bps: f64,
}

impl GigabitWindow {
    fn of(run: &Run) -> GigabitWindow {
        let dt = run.at_3s.uptime_s - run.at_1s.uptime_s;
        let bytes = |s: &Snapshot| s.classes[0].bytes as f64;
        let at_socket = |s: &Snapshot| {
            s.devices
                .iter()
                .find(|d| d.role == "rx")
                .map_or(0, |d| d.rx_packets + d.rx_kernel_drops + d.rx_no_buffer) as f64
        };
        GigabitWindow {
            sent_bps: (bytes(&run.at_3s) - bytes(&run.at_1s)) * 8.0 / dt,
            offered_bps: (at_socket(&run.at_3s) - at_socket(&run.at_1s)) * 1500.0 * 8.0 / dt,
        }
    }

    /// Where the frames went, hop by hop, for a failure message.
    fn text(&self, run: &Run) -> String {
        format!(
            "shaper sent {:.0} bit/s with {:.0} bit/s offered at its socket between the \
             samples ({}; class queue {} then {} frames, {} dropped); the generator sent {} bit/s \
             ({} frames, {} send errors); the sink received {} frames\n{}\n{}",
            self.sent_bps,
            self.offered_bps,
            if self.sent_bps < 0.98 * self.offered_bps.min(1e9) {
                "pktsched fell behind what was offered"
            } else {
                "pktsched kept up with what was offered"
            },
            run.at_1s.classes[0].qlen,
            run.at_3s.classes[0].qlen,
            run.at_3s.classes[0].drops - run.at_1s.classes[0].drops,
            run.sent.sent_bps,
            run.sent.flows[0].sent,
            run.sent.flows[0].errors,
            run.received.flows.first().map_or(0, |f| f.received),
            run.wire.text(),
            run.at_3s.text()
        )
    }
}

/// Attempts at a window in which the offered load overloads the class.
const GIGABIT_ATTEMPTS: usize = 4;

/// Set (to anything) to fail, rather than pass with a note on stderr,
/// when no attempt got the 1.02 Gbit/s overload to pktsched: for an idle
/// machine, where a short offered load is a finding.
const REQUIRE_OVERLOAD: &str = "PKTSCHED_REQUIRE_GIGABIT_OVERLOAD";

/// The shaper's departures over a window in which at least 1.02 Gbit/s
/// reached its ingress socket: with more offered than the rate, the class
/// queue cannot run dry, so a rate more than 1 % off is the shaper's
/// (ingress, scheduler or egress). Every window, overloaded or not, must
/// stay under 1 Gbit/s + 1 %: the limit holds at any offered load. A
/// window with less offered says nothing about reaching the rate: it is
/// measured again (up to [`GIGABIT_ATTEMPTS`] runs). When no run
/// overloads the class (on two vCPUs shared with a build the generator
/// offers 0.2–0.5 Gbit/s), stderr says the lower bound went untested with
/// every attempt's hop-by-hop counts, and the test fails only with
/// [`REQUIRE_OVERLOAD`] set.
fn a_gigabit_limit_is_kept_within_one_percent(engine: Engine) {
    if !is_root() {
        skipped("needs root to create network namespaces");
        return;
    }
    let mut short = Vec::new();
    for attempt in 1..=GIGABIT_ATTEMPTS {
        // The socket generator, as in every CI run this test passed: the
        // ring generator reaches 1.3 Gbit/s on fewer cycles, but with it
        // the forwarder fell behind in a CI run (0.93 Gbit/s sent with its
        // queue full) while a build shared the machine; not yet measured
        // idle.
        let run = through_pipeline(
            &LINK.replace("RATE", "1gbit"),
            engine,
            &["dport=5000,rate=1300mbit,size=1500"],
            &[5000],
            4,
        );
        let window = GigabitWindow::of(&run);
        // Every attempt's window on stderr (a passing run too), so runs can
        // be compared (`--nocapture`).
        eprintln!(
            "{engine:?} attempt {attempt}: the shaper sent {:.4} Gbit/s with {:.4} Gbit/s \
             offered",
            window.sent_bps / 1e9,
            window.offered_bps / 1e9
        );
        assert!(
            window.sent_bps < 1.01e9,
            "the shaper sent {:.2} % above 1 Gbit/s (attempt {attempt}): {}",
            (window.sent_bps / 1e9 - 1.0) * 100.0,
            window.text(&run)
        );
        if window.offered_bps < 1.02e9 {
            let why = format!("attempt {attempt}: {}", window.text(&run));
            eprintln!("offered load short, measuring again: {why}");
            short.push(why);
            continue;
        }
        let err = (window.sent_bps - 1e9).abs() / 1e9;
        assert!(
            err < 0.01,
            "the shaper's shortfall: {:.2} % off 1 Gbit/s with the class overloaded \
             (attempt {attempt}): {}",
            err * 100.0,
            window.text(&run)
        );
        // And it crossed the wire. The sink is one UDP socket on two
        // cores, which drops part of 83 kpps itself, so this only checks
        // that most of it arrived; the shaper's own departures are the
        // measure.
        assert!(
            frame_rate_bps(&run.received, 0) > 0.5e9,
            "the sink received under half of what the shaper sent: {}\n{}",
            window.text(&run),
            run.received.text()
        );
        return;
    }
    let untested = format!(
        "that the 1 Gbit/s limit is reached within 1 %: in {GIGABIT_ATTEMPTS} runs the \
         generator never got 1.02 Gbit/s to pktsched's socket (it offers 1.3), so the class was \
         never overloaded; each run stayed under the limit + 1 % (each attempt says whether \
         pktsched kept up with what was offered):\n{}",
        short.join("\n")
    );
    assert!(std::env::var_os(REQUIRE_OVERLOAD).is_none(), "{untested}");
    common::untested(
        "a_gigabit_limit_is_kept_within_one_percent",
        &format!("{untested}\n(set {REQUIRE_OVERLOAD}=1 to fail instead)"),
    );
}

fn the_ring_generator_s_frames_cross_the_shaper_stamped(engine: Engine) {
    if !is_root() {
        skipped("needs root to create network namespaces");
        return;
    }
    // Two flows well under the link: every frame the ring sent arrives,
    // in order, with its stamp (the neighbour's MAC found through ARP
    // across the shaper's reverse direction).
    let ring = GenBackend::Packet(RingTarget {
        device: "g0".into(),
        dst_mac: None,
    });
    let run = through_pipeline_with(
        &LINK.replace("RATE", "100mbit"),
        engine,
        &ring,
        &[
            "dport=5000,rate=2mbit,size=64",
            "dport=5001,rate=5mbit,size=1500,pattern=poisson",
        ],
        &[5000, 5001],
        4,
    );
    let text = format!("{}\n{}", run.received.text(), run.fin.after_stop.text());
    assert_eq!(run.received.flows.len(), 2, "{text}");
    for g in &run.sent.flows {
        assert!(g.sent > 1000 && g.errors == 0, "{g:?}");
        let s = run
            .received
            .flows
            .iter()
            .find(|s| g.dst.ends_with(&format!(":{}", s.port)))
            .unwrap_or_else(|| panic!("flow {} did not arrive: {text}", g.dst));
        assert_eq!(s.received, g.sent, "flow {}: {text}", g.flow);
        assert_eq!(s.reordered, 0, "{text}");
    }
    assert!(run.received.unstamped == 0, "{text}");
}

/// Every class overloaded 3×: per class, frames received = sent +
/// dropped by reason + queued, just before the stop and after it (when
/// the queues have been sent), and the egress sent what the classes did.
fn every_class_conserves_its_frames_under_overload(engine: Engine) {
    if !is_root() {
        skipped("needs root to create network namespaces");
        return;
    }
    let run = through_pipeline(
        &LINK.replace("RATE", "30mbit"),
        engine,
        &[
            "dport=5000,rate=30mbit,size=1500",
            "dport=5001,rate=30mbit,size=1500",
            "dport=5002,rate=30mbit,size=1500",
        ],
        &[5000, 5001, 5002],
        4,
    );
    let fin = &run.fin;
    for (when, snap) in [
        ("before stop", &fin.before_stop),
        ("after stop", &fin.after_stop),
    ] {
        let text = snap.text();
        for c in &snap.classes {
            let dropped: u64 = c.drops_by_reason.iter().sum();
            assert_eq!(c.drops, dropped, "{when}, class {}: {text}", c.class);
            assert_eq!(
                c.received,
                c.packets + dropped + c.qlen + c.moved,
                "{when}, class {}: received = sent + dropped + queued + moved\n{text}",
                c.class
            );
            assert!(
                c.drops_by_reason[0] > 0,
                "{when}, class {} was overloaded: {text}",
                c.class
            );
        }
    }
    let after = &fin.after_stop;
    assert!(
        after.classes.iter().all(|c| c.qlen == 0),
        "{}",
        after.text()
    );
    let sent: u64 = after.classes.iter().map(|c| c.packets).sum();
    let egress = after
        .devices
        .iter()
        .find(|d| d.device == "d1" && d.role == "tx")
        .unwrap_or_else(|| panic!("no d1 tx device: {}", after.text()));
    assert_eq!(egress.tx_packets, sent, "{}", after.text());
}

for_both_engines!(
    every_class_conserves_its_frames_under_overload,
    the_ring_generator_s_frames_cross_the_shaper_stamped,
    a_single_overloading_flow_gets_the_configured_rate,
    weighted_shares_follow_the_weights_under_overload,
    a_strict_priority_class_takes_the_link_under_overload,
);

/// 1 Gbit/s of 1500-byte frames offered at 1.3 Gbit/s, once per engine.
#[test]
fn a_gigabit_limit_is_kept_within_one_percent_run_to_completion() {
    a_gigabit_limit_is_kept_within_one_percent(Engine::RunToCompletion);
}

/// The pspat engine's three threads, the generator and the sink share
/// this project's 2 vCPUs. On a quiet machine (2026-11-27 11:30, load
/// 1–3, as CI runs it: test binaries one after another, these tests one
/// at a time) it kept 1 Gbit/s within 1 % in 5 of 5 runs interleaved with
/// the run-to-completion test (5 of 5 too), and 6 of 6 before and after
/// `ArbiterLoop::catch_up` in an A/B. Under other load both engines fall
/// short (at load 6–8: this one 2 of 5 within 1 % with the catch-up, 0 of
/// 5 without; run-to-completion 1 of 5): the arbiter off its core let the
/// class queue run dry while frames waited in the mailbox (the catch-up
/// now runs the missed rounds), and the receive thread off its core
/// leaves nothing upstream (perf log "pspat gigabit"). Its stderr shows
/// every attempt's window.
#[test]
fn a_gigabit_limit_is_kept_within_one_percent_pspat() {
    a_gigabit_limit_is_kept_within_one_percent(Engine::Pspat);
}
