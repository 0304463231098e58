//! The ingress on one receive ring per class (an AF_PACKET fanout group or
//! AF_XDP sockets sharing one UMEM), on real
//! veths in namespaces of its own (prefix `vc-`): a victim class next to
//! an overload. Needs root (CI runs as root); skipped with a message
//! otherwise. The namespaces are removed even when a test fails.

mod common;
use common::skipped;
#[macro_use]
mod engines;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use common::WireCounters;
use pktsched_io::netns::{Topology, in_namespace, is_root};
use pktsched_run::config::{Engine, parse};
use pktsched_run::devices::open_devices;
use pktsched_run::engine::{Final, Pipeline};
use pktsched_run::traffic::gen_flows::FlowSpec;
use pktsched_run::traffic::generator::{GenBackend, GenReport, generate_with};
use pktsched_run::traffic::sink::{Sink, SinkReport};

/// One real-wire run at a time in this binary.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// What one run saw: the ingress's rings (in words), the generator, the
/// sink, the daemon's final counters and the kernel's along the line.
struct Run {
    rings: String,
    sent: GenReport,
    received: SinkReport,
    fin: Final,
    wire: WireCounters,
}

/// Runs `flows` through the pipeline on `engine`.
fn run(engine: Engine, backend: &str, flows: &[&str], ports: &[u16]) -> Run {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let topo = Topology::line("vc-rings-").expect("topology");
    let engine_line = format!("engine = \"{}\"\n", engine.name());
    let src = common::prio_line_config(backend, &engine_line, common::BULK_AND_VICTIM);
    let cfg = parse(&src, "test.toml", None).expect("config");
    let (devices, pool, choice) = in_namespace(&topo.dut_ns, || open_devices(&cfg))
        .expect("namespace")
        .expect("devices");
    let pipeline = Pipeline::start(cfg, devices, pool)
        .expect("start")
        .with_ring_board(choice.ring_board);
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
    let (sent, received) = std::thread::scope(|s| {
        let receiving = s.spawn(|| sink.run(None, Duration::from_secs(2), &never));
        let sent = in_namespace(&topo.gen_ns, || {
            generate_with(
                &GenBackend::Socket,
                &specs,
                Duration::from_secs(3),
                7,
                &never,
                &mut |_| {},
            )
        })
        .expect("namespace")
        .expect("generate");
        (sent, receiving.join().expect("sink thread"))
    });
    let fin = pipeline.stop().expect("stop");
    Run {
        rings: choice.rings,
        sent,
        received,
        fin,
        wire: WireCounters::read(&topo),
    }
}

/// Runs that may be measured again because a victim frame was lost
/// outside pktsched or the bulk did not overload its class.
const ATTEMPTS: usize = 3;

/// `backend` and how the daemon names its class rings. pktsched's own
/// failures (a victim frame dropped by its class or its ring, rings and
/// classes that disagree, frames not conserved) fail the run at once. A
/// run whose shortfall lies outside pktsched (the generator short of
/// overloading the bulk class, a victim frame lost at g0's transmit or
/// after d1) is measured again, up to [`ATTEMPTS`] runs; if none is clean
/// the test fails naming those hops.
fn victim_next_to_an_overload(engine: Engine, backend: &str, rings_are: &str) {
    if !is_root() {
        skipped("needs root to create network namespaces");
        return;
    }
    let mut outside = Vec::new();
    for attempt in 1..=ATTEMPTS {
        let run = run(
            engine,
            backend,
            &[
                "dport=5000,rate=1mbit,size=200",
                "dport=6000,rate=80mbit,size=1500",
                "dport=6001,rate=80mbit,size=1500",
            ],
            &[5000, 6000, 6001],
        );
        match pktsched_keeps_the_victim(engine, rings_are, &run) {
            Ok(()) => return,
            Err(why) => {
                eprintln!("attempt {attempt}, measuring again: {why}");
                outside.push(format!("attempt {attempt}: {why}"));
            }
        }
    }
    panic!(
        "not pktsched's, but no clean run in {ATTEMPTS}: the shortfall was outside it \
         each time:\n{}",
        outside.join("\n")
    );
}

/// Panics on pktsched's own failures; `Err` names a shortfall outside
/// pktsched, hop by hop.
fn pktsched_keeps_the_victim(engine: Engine, rings_are: &str, run: &Run) -> Result<(), String> {
    let snap = &run.fin.after_stop;
    let text = format!(
        "{}\n{}\n{}\n{}",
        run.rings,
        run.received.text(),
        run.wire.text(),
        snap.text()
    );
    rings_agree_with_classes(engine, rings_are, &run.rings, snap, &text);
    let victim = &snap.classes[1];
    let bulk = &snap.classes[0];
    let ring = |class: &str| {
        snap.devices
            .iter()
            .find(|d| d.role == format!("rx ring {class}"))
            .map_or(0, |d| d.rx_kernel_drops + d.rx_no_buffer)
    };
    // pktsched's part: the victim's class and its own ring lost nothing.
    assert_eq!(victim.drops, 0, "the victim's class dropped: {text}");
    assert_eq!(ring("victim"), 0, "the victim's ring dropped: {text}");
    let gen_sent = |port: u16| {
        run.sent
            .flows
            .iter()
            .filter(|f| f.dst.ends_with(&format!(":{port}")))
            .map(|f| f.sent)
            .sum::<u64>()
    };
    let bulk_lost = bulk.drops + ring("bulk");
    if bulk_lost == 0 {
        let why = format!(
            "the bulk class lost nothing (the generator sent {} + {} bulk frames, \
             {} bit/s in all; 160 Mbit/s into 100 is needed): {text}",
            gen_sent(6000),
            gen_sent(6001),
            run.sent.sent_bps
        );
        // With 150 Mbit/s offered into a 100 Mbit/s link, a run without a
        // bulk drop means pktsched did not hold the limit: not retried.
        assert!(run.sent.sent_bps < 150_000_000, "pktsched's: {why}");
        return Err(why);
    }
    let sunk = run
        .received
        .flows
        .iter()
        .find(|f| f.port == 5000)
        .map_or(0, |f| f.received);
    let before = gen_sent(5000).saturating_sub(victim.received);
    let after = victim.packets.saturating_sub(sunk);
    // A loss is the host's only where the wire's counters can hold it:
    // g0's transmit drops before pktsched; d1's drops, frames d1 sent that
    // s0 never received, and the sink's full socket buffer after it.
    let wire = &run.wire;
    let lost_after_d1 = wire.d1_tx_dropped
        + wire.d1_tx_packets.saturating_sub(wire.s0_rx_packets)
        + wire.sink_rcvbuf_errors;
    assert!(
        before <= wire.g0_tx_dropped && after <= lost_after_d1,
        "pktsched's: {before} victim frames lost before it with {} dropped at g0, {after} \
         after it with {lost_after_d1} lost after d1: {text}",
        wire.g0_tx_dropped
    );
    if before > 0 || after > 0 || victim.received < 1000 {
        return Err(format!(
            "victim frames: the generator sent {}, pktsched received {} and sent {}, the \
             sink received {}: {before} lost before pktsched (g0's transmit), {after} after \
             it (d1 → sink): {text}",
            gen_sent(5000),
            victim.received,
            victim.packets,
            sunk
        ));
    }
    let v = run.received.flows.iter().find(|f| f.port == 5000);
    assert_eq!(v.map_or(1, |v| v.lost), 0, "{text}");
    Ok(())
}

/// The kernel's classifier and the daemon's agree; every class conserves
/// its frames; the forwarder's trace matches (pktsched's part).
fn rings_agree_with_classes(
    engine: Engine,
    rings_are: &str,
    rings: &str,
    snap: &pktsched_run::stats::Snapshot,
    text: &str,
) {
    assert!(
        rings.starts_with(&format!("one receive ring per class ({rings_are})"))
            && rings.contains("victim (budget 64"),
        "{text}"
    );
    // Each class ring delivered the frames the daemon put in that class.
    // The one allowed difference is a frame that is not IP (an ARP or IPv6 neighbour
    // frame of the namespaces' own): the daemon counts it as an anomaly
    // and gives it the default class; the kernel once put one in ring 0
    // (CI, AF_PACKET, run-to-completion: victim ring 1876 vs class 1875,
    // bulk 40006 vs 40007, non_ip 1) — noted as an open question.
    let non_ip = snap
        .classify_anomalies
        .iter()
        .filter(|(what, _)| what == "non_ip")
        .map(|(_, n)| *n)
        .sum::<u64>();
    let mut ring_total = 0;
    let mut mismatched = 0;
    for class in &snap.classes {
        let role = format!("rx ring {}", class.class);
        let ring = snap
            .devices
            .iter()
            .find(|d| d.role == role)
            .unwrap_or_else(|| panic!("no {role}: {text}"));
        ring_total += ring.rx_packets;
        mismatched += ring.rx_packets.abs_diff(class.received);
        // Conservation per class.
        assert_eq!(
            class.received,
            class.packets + class.drops + class.qlen + class.moved,
            "{}: {text}",
            class.class
        );
    }
    let class_total: u64 = snap.classes.iter().map(|c| c.received).sum();
    assert_eq!(ring_total, class_total, "{text}");
    // The run-to-completion forwarder's pass trace saw every frame it
    // classified, and its kicks sent no more than the egress sent.
    match (engine, &snap.forwarder) {
        (Engine::RunToCompletion, Some(f)) => {
            assert_eq!(f.frames_received, class_total, "{f:?}");
            assert!(
                f.passes >= f.passes_with_rx && f.passes_with_rx > 0,
                "{f:?}"
            );
            let sent: u64 = snap.classes.iter().map(|c| c.packets).sum();
            assert!(f.tx_kicks > 0 && f.tx_kick_frames <= sent, "{f:?}");
        }
        (Engine::Pspat, None) => {}
        (_, f) => panic!("{engine:?} with forwarder trace {f:?}"),
    }
    assert!(
        mismatched <= 2 * non_ip,
        "rings and classes disagree beyond {non_ip} non-IP frames: {text}"
    );
}

fn a_victim_on_its_own_af_packet_ring_loses_nothing_next_to_an_overload(engine: Engine) {
    victim_next_to_an_overload(engine, "packet", "AF_PACKET fanout");
}

fn a_victim_on_its_own_af_xdp_socket_loses_nothing_next_to_an_overload(engine: Engine) {
    victim_next_to_an_overload(engine, "xdp", "AF_XDP shared UMEM");
}

for_both_engines!(
    a_victim_on_its_own_af_packet_ring_loses_nothing_next_to_an_overload,
    a_victim_on_its_own_af_xdp_socket_loses_nothing_next_to_an_overload,
);
