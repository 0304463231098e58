//! The live demo (`pktsched demo` as root): three namespaces of its own,
//! the shaper between them with a built-in config, `gen` traffic through
//! it, the per-class rates converging to the configured shares and the
//! latency of a high-weight voice flow; everything removed afterwards (the
//! topology's `Drop`, also on an error or a signal).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pktsched_io::netns::{Topology, in_namespace, remove_stale};

use crate::config::parse;
use crate::devices::open_packet_devices;
use crate::engine::Pipeline;
use crate::stats::Snapshot;
use crate::traffic::gen_flows::FlowSpec;
use crate::traffic::generator::generate;
use crate::traffic::sink::{Sink, SinkReport};

/// The built-in config: 100 Mbit/s, four classes by destination port.
pub const DEMO_CONFIG: &str = r#"
[link]
ingress = "d0"
egress = "d1"
rate = "100mbit"
overhead = 24
mpu = 84

[scheduler]
algorithm = "qfq"

[control]
socket = "/run/pktsched-demo.sock"

[[class]]
name = "voice"
weight = 10
match = [{ dport = 5000 }]

[[class]]
name = "video"
weight = 6
match = [{ dport = 5001 }]

[[class]]
name = "web"
weight = 3
match = [{ dport = 5002 }]

[[class]]
name = "bulk"
weight = 1
default = true
"#;

/// The traffic: a 2 Mbit/s voice flow of 200-byte frames (Poisson) and
/// three greedy 60 Mbit/s flows of 1500-byte frames: 182 Mbit/s offered.
pub const DEMO_FLOWS: [&str; 4] = [
    "dport=5000,rate=2mbit,size=200,pattern=poisson",
    "dport=5001,rate=60mbit,size=1500",
    "dport=5002,rate=60mbit,size=1500",
    "dport=5003,rate=60mbit,size=1500",
];

/// The demo's namespaces: `<prefix><pid>-<n>-gen` and so on.
const DEMO_PREFIX: &str = "pktsched-demo-";

/// What the demo saw.
#[derive(Debug)]
pub struct DemoReport {
    /// The shaper's counters once a second.
    pub samples: Vec<Snapshot>,
    /// What arrived at the sink.
    pub sink: SinkReport,
}

/// Runs the live demo for `seconds`, calling `each_second` with the
/// shaper's counters; stops early when `stop` is set.
pub fn live(
    seconds: u64,
    stop: &AtomicBool,
    each_second: &(dyn Fn(&Snapshot) + Sync),
) -> Result<DemoReport, String> {
    // A demo killed before it could clean up left its namespaces (named
    // after its pid): those of demos no longer running go first.
    remove_stale(DEMO_PREFIX).map_err(|e| format!("removing stale demo namespaces: {e}"))?;
    let topo = Topology::line(DEMO_PREFIX).map_err(|e| format!("topology: {e}"))?;
    let cfg = parse(DEMO_CONFIG, "built-in demo config", None).map_err(|e| e.to_string())?;
    let (devices, pool, _) = in_namespace(&topo.dut_ns, || open_packet_devices(&cfg.link))
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let pipeline = Pipeline::start(cfg, devices, pool).map_err(|e| e.to_string())?;
    let sink = in_namespace(&topo.sink_ns, || {
        Sink::bind(
            "198.18.0.2".parse().expect("literal address"),
            &[5000, 5001, 5002, 5003],
        )
    })
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())?;
    let base = FlowSpec::new("198.18.0.2".parse().expect("literal address"));
    let specs: Vec<FlowSpec> = DEMO_FLOWS
        .iter()
        .map(|f| FlowSpec::parse_cli(f, &base))
        .collect::<Result<_, _>>()?;
    let done = AtomicBool::new(false);
    let (samples, sink_report, sent) = std::thread::scope(|s| {
        let receiving = s.spawn(|| sink.run(None, Duration::from_secs(1), stop));
        let sampling = s.spawn(|| {
            let mut samples = Vec::new();
            while !done.load(Ordering::Acquire) && !stop.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_secs(1));
                if let Ok(snap) = pipeline.snapshot() {
                    each_second(&snap);
                    samples.push(snap);
                }
            }
            samples
        });
        let sent = in_namespace(&topo.gen_ns, || {
            generate(&specs, Duration::from_secs(seconds), 1, stop, &mut |_| {})
        });
        done.store(true, Ordering::Release);
        (
            sampling.join().unwrap_or_default(),
            receiving.join().ok(),
            sent,
        )
    });
    sent.map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    pipeline.stop().map_err(|e| e.to_string())?;
    drop(topo);
    Ok(DemoReport {
        samples,
        sink: sink_report.ok_or("the sink thread failed")?,
    })
}

/// What each class of [`DEMO_CONFIG`] should get under [`DEMO_FLOWS`], in
/// Mbit/s on the wire (frames plus the link's overhead), class by class in
/// file order: the link shared by weight, max-min fair (water-filling): a
/// class offered less than its weighted share of what is left keeps what
/// it is offered, the others split the rest by weight.
pub fn expected_shares() -> Result<Vec<(String, f64)>, String> {
    let cfg = parse(DEMO_CONFIG, "demo config", None).map_err(|e| e.to_string())?;
    let base = FlowSpec::new(std::net::IpAddr::from([198, 18, 0, 2]));
    let mut offered = vec![0.0f64; cfg.classes.len()];
    for text in DEMO_FLOWS {
        let f = FlowSpec::parse_cli(text, &base)?;
        let class = cfg
            .classes
            .iter()
            .position(|c| {
                c.rules
                    .iter()
                    .any(|m| m.dport.is_some_and(|r| r.contains(f.dport)))
            })
            .unwrap_or(cfg.default_class());
        let size = f.sizes.mean();
        let wire = f64::from(cfg.link.wire_len(size.round() as u32));
        offered[class] += f.rate.as_bps() as f64 * wire / size / 1e6;
    }
    let mut left = cfg.link.rate.as_bps() as f64 / 1e6;
    let mut share = vec![None; offered.len()];
    // Each pass settles the classes offered under their weighted share of
    // what is left; when none is, the rest split it by weight.
    loop {
        let open: Vec<usize> = (0..offered.len()).filter(|&i| share[i].is_none()).collect();
        let weights: f64 = open.iter().map(|&i| f64::from(cfg.classes[i].weight)).sum();
        if open.is_empty() || weights == 0.0 {
            break;
        }
        let under: Vec<usize> = open
            .iter()
            .copied()
            .filter(|&i| offered[i] <= left * f64::from(cfg.classes[i].weight) / weights)
            .collect();
        if under.is_empty() {
            for i in open {
                share[i] = Some(left * f64::from(cfg.classes[i].weight) / weights);
            }
            break;
        }
        for i in under {
            share[i] = Some(offered[i]);
            left -= offered[i];
        }
    }
    Ok(cfg
        .classes
        .iter()
        .zip(share)
        .map(|(c, s)| (c.name.clone(), s.unwrap_or(0.0)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::expected_shares;

    /// Voice keeps its offered 2 Mbit/s of 200-byte frames (2.24 on the
    /// wire with 24 bytes of overhead); the three greedy classes split the
    /// remaining 97.76 by their weights 6 : 3 : 1.
    #[test]
    fn the_demo_s_expected_shares_follow_its_config_and_flows() {
        let shares = expected_shares().expect("shares");
        let names: Vec<&str> = shares.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["voice", "video", "web", "bulk"]);
        let want = [2.24, 97.76 * 0.6, 97.76 * 0.3, 97.76 * 0.1];
        for ((name, got), want) in shares.iter().zip(want) {
            assert!((got - want).abs() < 1e-9, "{name}: {got} against {want}");
        }
    }
}
