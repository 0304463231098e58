//! `pktsched gen` and `pktsched sink`: thin shells over
//! `pktsched_run::traffic`.

use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use pktsched_run::traffic::gen_flows::{self, FlowSpec, KEYS, MAX_FLOWS};
use pktsched_run::traffic::generator::GenBackend;
use pktsched_run::traffic::ring_out::{RingTarget, parse_mac};
use pktsched_run::traffic::sink_class::SinkClass;
use pktsched_run::traffic::workload::{Load, Workload};
use pktsched_run::traffic::{generator, sink};

use crate::output::Stdout;

/// Longest run of `gen` or `sink`.
const MAX_RUN: Duration = Duration::from_secs(24 * 3600);

/// `pktsched gen`.
#[derive(Debug, Args)]
pub(crate) struct GenArgs {
    /// Destination address of every flow (a flow's `dst=` overrides it).
    /// Required: a generator should never pick where traffic goes.
    #[arg(long)]
    dst: IpAddr,
    /// A flow: `KEY=VALUE,...` with keys dst, dport, sport, rate, size
    /// (frame bytes without FCS, or a mix `64:7+576:4+1500:1`), pattern
    /// (cbr|poisson), dscp (0..=63 or ef, af41, cs1...), count. Repeat for
    /// more flows. Default: one 1 Mbit/s flow of 1000-byte frames to port
    /// 5000.
    #[arg(long = "flow", value_name = "SPEC")]
    flows: Vec<String>,
    /// Flows from a TOML file (`[[flow]]` tables with the same keys).
    #[arg(long, value_name = "FILE")]
    flows_file: Option<PathBuf>,
    /// How long to send (e.g. `10s`).
    #[arg(long, default_value = "5s")]
    duration: String,
    /// Seed of the Poisson gaps and size mixes.
    #[arg(long, default_value_t = 1, value_parser = crate::output::parse_seed)]
    seed: u64,
    /// JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// How frames leave: `socket` (a UDP socket per flow), `gso` (a UDP
    /// socket per flow, up to 64 equal-size datagrams of a flow per send,
    /// segmented by the kernel: UDP GSO, Linux >= 4.18; a size mix sends
    /// each run of equal sizes together) or `packet` (whole frames through
    /// an AF_PACKET transmit ring on --device, 64 per kick; needs
    /// CAP_NET_RAW).
    #[arg(long, default_value = "socket", value_name = "socket|gso|packet")]
    backend: String,
    /// The interface the packet backend sends on.
    #[arg(long, value_name = "IFACE")]
    device: Option<String>,
    /// The packet backend's destination MAC (default: the ARP entry of
    /// each flow's destination on --device, resolved first).
    #[arg(long, value_name = "MAC")]
    dst_mac: Option<String>,
    #[command(flatten)]
    workload: WorkloadArgs,
}

/// The ingress experiment's workload (`--load`), instead of `--flow`s.
#[derive(Debug, Args)]
pub(crate) struct WorkloadArgs {
    /// Total offered load, all flows Poisson: bits/s of frames (`200mbit`)
    /// or packets/s (`200kpps`, `1.5mpps`). Split into RT and BE flows by
    /// --rt-share; replaces --flow.
    #[arg(long, value_name = "RATE|PPS", conflicts_with_all = ["flows", "flows_file"])]
    load: Option<String>,
    /// Fraction of the load that is real-time (0..=1).
    #[arg(long, default_value_t = 0.3, requires = "load")]
    rt_share: f64,
    /// DSCP of the RT flows (0..=63 or a name: ef, af41, cs5...).
    #[arg(long, default_value = "ef", requires = "load")]
    rt_dscp: String,
    /// DSCP of the BE flows.
    #[arg(long, default_value = "0", requires = "load")]
    be_dscp: String,
    /// RT flows (destination ports from --rt-port on).
    #[arg(long, default_value_t = 1, requires = "load")]
    rt_flows: u32,
    /// BE flows (destination ports from --be-port on).
    #[arg(long, default_value_t = 8, requires = "load")]
    be_flows: u32,
    /// First RT destination port.
    #[arg(long, default_value_t = 5001, requires = "load")]
    rt_port: u16,
    /// First BE destination port.
    #[arg(long, default_value_t = 5002, requires = "load")]
    be_port: u16,
    /// Arrivals of the RT flows: poisson, or cbr (periodic: the envelope
    /// the RT latency bound assumes). BE flows are Poisson.
    #[arg(long, default_value = "poisson", requires = "load")]
    rt_pattern: String,
    /// Frame size of every flow (bytes without FCS) or a mix `64:7+576:4+1500:1`.
    #[arg(long, default_value = "64", requires = "load")]
    size: String,
}

/// `pktsched sink`.
#[derive(Debug, Args)]
pub(crate) struct SinkArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    addr: IpAddr,
    /// UDP ports: `5000` or `5000-5003` (default: the classes' ports,
    /// else 5000).
    #[arg(long)]
    ports: Option<String>,
    /// A class: `NAME=PORT` or `NAME=LO-HI` (e.g. `rt=5001`,
    /// `be=5002-5009`), reported with its flows together (received, lost,
    /// latency percentiles and histogram). Classes go by destination port
    /// (a router may re-mark DSCP; ports pass unchanged). Repeat for more.
    #[arg(long = "class", value_name = "NAME=PORTS")]
    classes: Vec<String>,
    /// Stop after this long (default: when traffic stops, see --idle).
    #[arg(long)]
    duration: Option<String>,
    /// Stop when nothing arrived for this long after the first datagram.
    #[arg(long, default_value = "2s")]
    idle: String,
    /// JSON instead of a table.
    #[arg(long)]
    json: bool,
}

fn duration(flag: &str, text: &str) -> Result<Duration> {
    let ns = pktsched_core::units::parse_duration(text)
        .map_err(|e| anyhow::anyhow!("{flag} {text:?}: {e}"))?
        .0;
    let d = Duration::from_nanos(ns);
    if d.is_zero() || d > MAX_RUN {
        bail!("{flag} {text:?}: allowed above 0 and at most 24h");
    }
    Ok(d)
}

fn flows_from_file(path: &std::path::Path, base: &FlowSpec) -> Result<Vec<FlowSpec>> {
    let text = pktsched_run::config::read_capped(path, "flows", 1 << 20)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    gen_flows::flows_from_toml(&path.display().to_string(), &text, base)
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// The workload's flows, with the frames per second they offer.
fn workload_flows(a: &WorkloadArgs, dst: IpAddr, load: &str) -> Result<(Vec<FlowSpec>, f64)> {
    let load_text = load;
    let load = Load::parse(load).map_err(|e| anyhow::anyhow!("--load {load:?}: {e}"))?;
    let dscp = |flag: &str, v: &str| {
        let mut f = FlowSpec::new(dst);
        f.set("dscp", v)
            .map(|()| f.dscp)
            .map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
    };
    let mut size = FlowSpec::new(dst);
    size.set("size", &a.size)
        .map_err(|e| anyhow::anyhow!("--size: {e}"))?;
    let mut w = Workload::new(dst, load, a.rt_share);
    w.rt_dscp = dscp("rt-dscp", &a.rt_dscp)?;
    w.be_dscp = dscp("be-dscp", &a.be_dscp)?;
    w.rt_flows = a.rt_flows;
    w.be_flows = a.be_flows;
    w.rt_port = a.rt_port;
    w.be_port = a.be_port;
    w.sizes = size.sizes;
    let mut pattern = FlowSpec::new(dst);
    pattern
        .set("pattern", &a.rt_pattern)
        .map_err(|e| anyhow::anyhow!("--rt-pattern: {e}"))?;
    w.rt_pattern = pattern.pattern;
    if !(0.0..=1.0).contains(&a.rt_share) {
        bail!(
            "--rt-share {}: allowed 0..=1 (a fraction of the load)",
            a.rt_share
        );
    }
    let flows = w
        .flows()
        .map_err(|e| anyhow::anyhow!("the workload (--load {load_text:?}): {e}"))?;
    let pps = load.bits_per_s(w.sizes.mean()) / (8.0 * w.sizes.mean());
    Ok((flows.into_iter().map(|(_, f)| f).collect(), pps))
}

/// A load the socket backend cannot offer (one system call per datagram).
const MAX_SOCKET_PPS: f64 = 2e6;

pub(crate) fn generate(a: &GenArgs, out: &mut Stdout) -> Result<()> {
    if let Some(load) = &a.workload.load {
        let (flows, pps) = workload_flows(&a.workload, a.dst, load)?;
        if a.backend == "socket" && pps > MAX_SOCKET_PPS {
            bail!(
                "--load {load:?} is {:.0} packets/s: the socket backend offers at most {MAX_SOCKET_PPS} \
                 (one send per datagram); use --backend gso (UDP GSO batches) or --backend packet \
                 --device IFACE",
                pps
            );
        }
        return run_flows(a, flows, out);
    }
    let base = FlowSpec::new(a.dst);
    let mut flows = Vec::new();
    for spec in &a.flows {
        flows.push(FlowSpec::parse_cli(spec, &base).map_err(|e| {
            anyhow::anyhow!(
                "--flow {}: {e}",
                pktsched_run::traffic::gen_flows::quoted(spec)
            )
        })?);
    }
    if let Some(file) = &a.flows_file {
        flows.extend(flows_from_file(file, &base)?);
    }
    if flows.is_empty() {
        flows.push(base);
    }
    let total: u64 = flows.iter().map(|f| u64::from(f.count)).sum();
    if total > MAX_FLOWS as u64 {
        bail!("{total} flows in all (counting `count`): allowed at most {MAX_FLOWS}; keys: {KEYS}");
    }
    run_flows(a, flows, out)
}

fn run_flows(a: &GenArgs, flows: Vec<FlowSpec>, out: &mut Stdout) -> Result<()> {
    let d = duration("--duration", &a.duration)?;
    let backend = gen_backend(a)?;
    crate::stop::stop_flag()?;
    let bar = crate::progress::bar(d);
    let r = generator::generate_with(
        &backend,
        &flows,
        d,
        a.seed,
        pktsched_runtime::signal::stop_flag(),
        &mut |f| bar.set_position((f * 1000.0) as u64),
    )?;
    bar.finish_and_clear();
    if !r.load_met() && !r.partial {
        eprintln!(
            "pktsched gen: the offered load was not met: {:.3} Mbit/s of {:.3} Mbit/s left \
             (below {:.0} %); the results describe a lower load",
            r.sent_bps as f64 / 1e6,
            r.offered_bps as f64 / 1e6,
            generator::MET_FRACTION * 100.0
        );
    }
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&r)?)?;
    } else {
        write!(out, "{}", r.text())?;
    }
    exit_if_signalled(out)
}

/// `--backend`, `--device` and `--dst-mac` as a backend.
fn gen_backend(a: &GenArgs) -> Result<GenBackend> {
    let dst_mac = a
        .dst_mac
        .as_deref()
        .map(|m| {
            parse_mac(m).ok_or_else(|| {
                anyhow::anyhow!("--dst-mac {m:?}: allowed six hex bytes like 02:00:00:00:00:01")
            })
        })
        .transpose()?;
    match (a.backend.as_str(), &a.device) {
        ("socket", None) if dst_mac.is_none() => Ok(GenBackend::Socket),
        ("gso", None) if dst_mac.is_none() => Ok(GenBackend::Gso),
        (b @ ("socket" | "gso"), _) => {
            bail!("--device and --dst-mac go with --backend packet (not {b})")
        }
        ("packet", Some(device)) => {
            let ok = !device.is_empty() && device.len() <= 15 && !device.contains(['/', ' ']);
            if !ok {
                bail!("--device {device:?}: allowed an interface name of 1 to 15 bytes");
            }
            Ok(GenBackend::Packet(RingTarget {
                device: device.clone(),
                dst_mac,
            }))
        }
        ("packet", None) => {
            bail!("--backend packet needs --device IFACE (the interface to send on)")
        }
        (other, _) => {
            bail!("--backend {other:?}: allowed socket, gso (UDP GSO batches) or packet")
        }
    }
}

/// After a signal: the report above is partial; the exit status says so.
fn exit_if_signalled(out: &mut Stdout) -> Result<()> {
    out.flush()?;
    crate::stop::interrupted(true)
}

/// The ports to listen on: `--ports`, else the classes' ports, else 5000.
fn sink_ports(a: &SinkArgs, classes: &[SinkClass]) -> Result<Vec<u16>> {
    let ports: Vec<u16> = match &a.ports {
        Some(text) => {
            use pktsched_io::classify::{ParseError, PortRange};
            let range: PortRange = text.parse().map_err(|e| match e {
                // The classifier's ports include 0; a sink's do not.
                ParseError::Port => anyhow::anyhow!(
                    "--ports {text:?}: not a port: allowed a port 1..=65535 or a range LO-HI"
                ),
                e => anyhow::anyhow!("--ports {text:?}: {e}"),
            })?;
            (range.lo..=range.hi).collect()
        }
        None if !classes.is_empty() => {
            let mut p: Vec<u16> = classes
                .iter()
                .flat_map(|c| c.ports.lo..=c.ports.hi)
                .collect();
            p.sort_unstable();
            p.dedup();
            p
        }
        None => vec![5000],
    };
    if ports.contains(&0) {
        // Port 0 binds a port the kernel picks: no generator can aim at it.
        let what = match (&a.ports, classes.iter().find(|c| c.ports.lo == 0)) {
            (Some(text), _) => format!("--ports {text:?}"),
            (None, Some(c)) => format!("--class {}={}", c.name, c.ports),
            (None, None) => "the ports".to_string(),
        };
        bail!("{what}: port 0 is not a port a flow can be sent to: allowed 1..=65535");
    }
    if ports.len() > sink::MAX_SINK_PORTS {
        bail!(
            "--ports {:?}: {} ports, allowed at most {}",
            a.ports.as_deref().unwrap_or("(the classes' ports)"),
            ports.len(),
            sink::MAX_SINK_PORTS
        );
    }
    Ok(ports)
}

pub(crate) fn sink(a: &SinkArgs, out: &mut Stdout) -> Result<()> {
    let classes = a
        .classes
        .iter()
        .map(|c| SinkClass::parse(c).map_err(|e| anyhow::anyhow!("--class: {e}")))
        .collect::<Result<Vec<_>>>()?;
    SinkClass::check_set(&classes).map_err(|e| anyhow::anyhow!("--class: {e}"))?;
    let ports = sink_ports(a, &classes)?;
    let d = a
        .duration
        .as_deref()
        .map(|t| duration("--duration", t))
        .transpose()?;
    let idle = duration("--idle", &a.idle)?;
    crate::stop::stop_flag()?;
    let bound = sink::Sink::bind(a.addr, &ports)?
        .with_classes(classes)
        .map_err(|e| {
            anyhow::anyhow!(
                "--class: {e} (--ports {:?})",
                a.ports.as_deref().unwrap_or("")
            )
        })?;
    eprintln!(
        "pktsched sink: listening on {} ports {}-{}",
        a.addr,
        ports.first().copied().unwrap_or(0),
        ports.last().copied().unwrap_or(0)
    );
    let r = bound.run(d, idle, pktsched_runtime::signal::stop_flag());
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&r)?)?;
    } else {
        write!(out, "{}", r.text())?;
    }
    exit_if_signalled(out)
}
