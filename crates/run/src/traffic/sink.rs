//! `pktsched sink`: receives stamped datagrams on one or more UDP ports and
//! reports, per flow (sender address and stamp flow number), throughput,
//! loss, reordering and one-way latency percentiles, and per class (a named
//! port group, [`super::sink_class`]) the same with a latency histogram.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::Stamp;
use super::sink_class::{ClassAcc, SinkClass, SinkClassReport};
use crate::sys::monotonic_ns;
use pktsched_io::packet::{realtime_to_monotonic, rx_monotonic_ns};

/// Most flows tracked (further ones are counted as `untracked`).
pub const MAX_SINK_FLOWS: usize = 65536;

/// One flow as received.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SinkFlowReport {
    /// `sender-address/flow`.
    pub flow: String,
    /// The UDP port it arrived on.
    pub port: u16,
    /// Datagrams received.
    pub received: u64,
    /// UDP payload bytes received.
    pub payload_bytes: u64,
    /// Datagrams missing: highest sequence + 1 − received (never negative).
    pub lost: u64,
    /// Datagrams that arrived after a higher sequence number.
    pub reordered: u64,
    /// Payload throughput from the first to the last datagram, bits/s.
    pub throughput_bps: u64,
    /// One-way latency percentiles, µs: send stamp → the kernel's
    /// receive at the sink (`SO_TIMESTAMPNS`, else the sink's read).
    pub latency_p50_us: f64,
    /// 99th percentile.
    pub latency_p99_us: f64,
    /// 99.9th percentile.
    pub latency_p999_us: f64,
    /// Largest.
    pub latency_max_us: f64,
    /// Send stamp → the sink's read, 99th percentile, µs.
    pub read_latency_p99_us: f64,
    /// Datagrams with the kernel's receive time.
    pub rx_stamped: u64,
}

/// What the sink saw.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SinkReport {
    /// Per flow, sorted by name.
    pub flows: Vec<SinkFlowReport>,
    /// Per class, in the order given (empty without classes).
    pub classes: Vec<SinkClassReport>,
    /// Datagrams without a stamp (not from `pktsched gen`).
    pub unstamped: u64,
    /// Stamped datagrams beyond [`MAX_SINK_FLOWS`] flows.
    pub untracked: u64,
    /// Stopped by a signal.
    pub partial: bool,
}

struct FlowAcc {
    port: u16,
    received: u64,
    bytes: u64,
    max_seq: Option<u64>,
    reordered: u64,
    first_ns: u64,
    last_ns: u64,
    latency: Histogram<u64>,
    read_latency: Histogram<u64>,
    rx_stamped: u64,
}

impl FlowAcc {
    fn new(port: u16, now: u64) -> Option<FlowAcc> {
        Some(FlowAcc {
            port,
            received: 0,
            bytes: 0,
            max_seq: None,
            reordered: 0,
            first_ns: now,
            last_ns: now,
            latency: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).ok()?,
            read_latency: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).ok()?,
            rx_stamped: 0,
        })
    }

    /// A datagram read at `now` that the kernel received at `rx_ns`
    /// (CLOCK_MONOTONIC, 0 if unknown: then timed at `now`).
    fn add(&mut self, s: &Stamp, len: usize, now: u64, rx_ns: u64) {
        self.received += 1;
        self.bytes += len as u64;
        self.last_ns = now;
        match self.max_seq {
            Some(m) if s.seq < m => self.reordered += 1,
            _ => self.max_seq = Some(s.seq),
        }
        let arrived = if rx_ns == 0 { now } else { rx_ns.min(now) };
        self.rx_stamped += u64::from(rx_ns != 0);
        let _ = self.latency.record(arrived.saturating_sub(s.tx_ns).max(1));
        let _ = self.read_latency.record(now.saturating_sub(s.tx_ns).max(1));
    }

    fn report(&self, flow: String) -> SinkFlowReport {
        let expected = self.max_seq.map_or(0, |m| m + 1);
        let span = (self.last_ns - self.first_ns) as f64 / 1e9;
        let q = |x: f64| self.latency.value_at_quantile(x) as f64 / 1e3;
        SinkFlowReport {
            flow,
            port: self.port,
            received: self.received,
            payload_bytes: self.bytes,
            lost: expected.saturating_sub(self.received),
            reordered: self.reordered,
            throughput_bps: if span > 0.0 {
                (self.bytes as f64 * 8.0 / span) as u64
            } else {
                0
            },
            latency_p50_us: q(0.5),
            latency_p99_us: q(0.99),
            latency_p999_us: q(0.999),
            latency_max_us: self.latency.max() as f64 / 1e3,
            read_latency_p99_us: self.read_latency.value_at_quantile(0.99) as f64 / 1e3,
            rx_stamped: self.rx_stamped,
        }
    }
}

/// The sink's sockets, bound before the traffic starts.
#[derive(Debug)]
pub struct Sink {
    sockets: Vec<(u16, UdpSocket)>,
    classes: Vec<SinkClass>,
}

/// Most ports one sink listens on.
pub const MAX_SINK_PORTS: usize = 1024;

impl Sink {
    /// Binds `ports` on `addr`.
    pub fn bind(addr: std::net::IpAddr, ports: &[u16]) -> std::io::Result<Sink> {
        if ports.is_empty() || ports.len() > MAX_SINK_PORTS {
            return Err(std::io::Error::other(format!(
                "{} ports: allowed 1..={MAX_SINK_PORTS}",
                ports.len()
            )));
        }
        let mut sockets = Vec::with_capacity(ports.len());
        for &p in ports {
            let s = UdpSocket::bind(SocketAddr::new(addr, p))
                .map_err(|e| std::io::Error::new(e.kind(), format!("bind {addr} port {p}: {e}")))?;
            s.set_nonblocking(true)?;
            super::rx_sys::grow_receive_buffer(s.as_fd(), super::rx_sys::RCVBUF);
            super::rx_sys::enable_rx_timestamps(s.as_fd());
            sockets.push((p, s));
        }
        Ok(Sink {
            sockets,
            classes: Vec::new(),
        })
    }

    /// Reports these classes too; every class port must be one the sink
    /// listens on.
    pub fn with_classes(mut self, classes: Vec<SinkClass>) -> Result<Sink, String> {
        SinkClass::check_set(&classes)?;
        for c in &classes {
            for p in c.ports.lo..=c.ports.hi {
                if !self.sockets.iter().any(|(q, _)| *q == p) {
                    return Err(format!(
                        "class {} port {p}: not among the ports the sink listens on",
                        c.name
                    ));
                }
            }
        }
        self.classes = classes;
        Ok(self)
    }

    /// Receives until `duration` has passed, or `idle` passes without a
    /// datagram after the first one, or `stop` is set.
    pub fn run(self, duration: Option<Duration>, idle: Duration, stop: &AtomicBool) -> SinkReport {
        receive(&self.sockets, &self.classes, duration, idle, stop)
    }
}

/// The classes' reports from the flows' accumulators.
fn class_reports(
    classes: &[SinkClass],
    flows: &HashMap<(SocketAddr, u16), FlowAcc>,
) -> Vec<SinkClassReport> {
    let mut out = Vec::with_capacity(classes.len());
    for c in classes {
        let Some(mut acc) = ClassAcc::new() else {
            continue;
        };
        for ((from, flow), f) in flows.iter().filter(|(_, f)| c.ports.contains(f.port)) {
            let r = f.report(format!("{from}/{flow}"));
            acc.add_flow(
                r.received,
                r.lost,
                r.payload_bytes,
                r.throughput_bps,
                &f.latency,
                &f.read_latency,
                f.rx_stamped,
            );
        }
        out.push(acc.report(c));
    }
    out
}

fn receive(
    sockets: &[(u16, UdpSocket)],
    classes: &[SinkClass],
    duration: Option<Duration>,
    idle: Duration,
    stop: &AtomicBool,
) -> SinkReport {
    let start = monotonic_ns();
    let end = duration.map(|d| start.saturating_add(d.as_nanos() as u64));
    let mut flows: HashMap<(SocketAddr, u16), FlowAcc> = HashMap::new();
    let (mut unstamped, mut untracked, mut partial) = (0u64, 0u64, false);
    let mut last_rx: Option<u64> = None;
    let mut buf = vec![0u8; 65536];
    loop {
        let mut got = false;
        // The kernel's receive stamps are CLOCK_REALTIME, the generator's
        // CLOCK_MONOTONIC: converted with an offset sampled each pass.
        let clock_offset = realtime_to_monotonic();
        for (port, s) in sockets {
            // Up to 64 datagrams per socket per pass.
            for _ in 0..64 {
                let Some(d) = super::rx_sys::recv_stamped(s.as_fd(), &mut buf) else {
                    break;
                };
                let (len, from) = (d.len, d.from);
                let rx_ns = rx_monotonic_ns(d.rx_real_ns, clock_offset);
                got = true;
                let now = monotonic_ns();
                last_rx = Some(now);
                let Some(stamp) = Stamp::read(&buf[..len]) else {
                    unstamped += 1;
                    continue;
                };
                let key = (from, stamp.flow);
                if !flows.contains_key(&key) {
                    if flows.len() >= MAX_SINK_FLOWS {
                        untracked += 1;
                        continue;
                    }
                    if let Some(acc) = FlowAcc::new(*port, now) {
                        flows.insert(key, acc);
                    }
                }
                if let Some(acc) = flows.get_mut(&key) {
                    acc.add(&stamp, len, now, rx_ns);
                }
            }
        }
        let now = monotonic_ns();
        if stop.load(Ordering::Relaxed) {
            partial = true;
            break;
        }
        if end.is_some_and(|e| now >= e) {
            break;
        }
        if last_rx.is_some_and(|t| now.saturating_sub(t) >= idle.as_nanos() as u64) {
            break;
        }
        if !got {
            // Wakes on the next datagram; the timeout bounds how late a
            // stop, the end or the idle limit is noticed.
            let fds: Vec<_> = sockets.iter().map(|(_, s)| s.as_fd()).collect();
            super::rx_sys::readable(&fds, Duration::from_millis(10));
        }
    }
    let mut out: Vec<SinkFlowReport> = flows
        .iter()
        .map(|((from, flow), acc)| acc.report(format!("{from}/{flow}")))
        .collect();
    out.sort_by(|a, b| a.flow.cmp(&b.flow));
    SinkReport {
        classes: class_reports(classes, &flows),
        flows: out,
        unstamped,
        untracked,
        partial,
    }
}

impl SinkReport {
    /// A table.
    pub fn text(&self) -> String {
        let mut s = format!(
            "{:<28} {:>5} {:>10} {:>8} {:>8} {:>12} {:>9} {:>9} {:>9} {:>9}\n",
            "flow",
            "port",
            "received",
            "lost",
            "reorder",
            "throughput",
            "p50 us",
            "p99 us",
            "p999 us",
            "max us"
        );
        for f in &self.flows {
            s += &format!(
                "{:<28} {:>5} {:>10} {:>8} {:>8} {:>12} {:>9.1} {:>9.1} {:>9.1} {:>9.1}\n",
                f.flow,
                f.port,
                f.received,
                f.lost,
                f.reordered,
                format!("{:.3}Mbit", f.throughput_bps as f64 / 1e6),
                f.latency_p50_us,
                f.latency_p99_us,
                f.latency_p999_us,
                f.latency_max_us
            );
        }
        if !self.classes.is_empty() {
            s += &format!(
                "{:<12} {:>11} {:>5} {:>10} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
                "class",
                "ports",
                "flows",
                "received",
                "lost",
                "loss %",
                "p50 us",
                "p90 us",
                "p99 us",
                "p999 us",
                "max us"
            );
        }
        for c in &self.classes {
            s += &format!(
                "{:<12} {:>11} {:>5} {:>10} {:>8} {:>7.2} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}\n",
                c.class,
                c.ports,
                c.flows,
                c.received,
                c.lost,
                c.loss_ratio * 100.0,
                c.latency_p50_us,
                c.latency_p90_us,
                c.latency_p99_us,
                c.latency_p999_us,
                c.latency_max_us
            );
        }
        s += &format!(
            "unstamped {} untracked {}{}\n",
            self.unstamped,
            self.untracked,
            if self.partial {
                " (partial: stopped by a signal)"
            } else {
                ""
            }
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::super::gen_flows::FlowSpec;
    use super::super::generator::generate;
    use super::*;

    /// Loopback: the generator's flow arrives whole at the sink, in order,
    /// and the number of datagrams is the schedule's (send times are
    /// virtual: a late generator catches up, so the count does not depend
    /// on the machine's load).
    #[test]
    fn generator_and_sink_agree_on_loopback() {
        let port = 40000 + (std::process::id() % 20000) as u16;
        let stop = AtomicBool::new(false);
        let bound = Sink::bind("127.0.0.1".parse().expect("addr"), &[port]).expect("bind");
        let sink_thread = std::thread::spawn(move || {
            let never = AtomicBool::new(false);
            bound.run(
                Some(Duration::from_secs(10)),
                Duration::from_millis(500),
                &never,
            )
        });
        let mut spec = FlowSpec::parse_cli(
            &format!("dst=127.0.0.1,dport={port},rate=2mbit,size=250"),
            &FlowSpec::new("127.0.0.1".parse().expect("addr")),
        )
        .expect("spec");
        spec.count = 1;
        let g =
            generate(&[spec], Duration::from_millis(400), 1, &stop, &mut |_| {}).expect("generate");
        let r = sink_thread.join().expect("join");
        assert_eq!(r.flows.len(), 1, "{r:?}");
        let f = &r.flows[0];
        assert_eq!(f.received, g.flows[0].sent);
        assert_eq!((f.lost, f.reordered, r.unstamped), (0, 0, 0));
        // 2 Mbit/s of 250-byte frames: one every 1 ms, so at most 400 in
        // 0.4 s (never ahead of the pace; a loaded machine may send fewer,
        // which the exact received count above still checks).
        assert!((1..=400).contains(&g.flows[0].sent), "{g:?}");
        assert_eq!(f.payload_bytes, f.received * (250 - 42));
        assert!(f.flow.starts_with("127.0.0.1:"), "the sender: {}", f.flow);
        // Latency to the kernel's receive: every datagram stamped, each no
        // later than its read, and on the generator's clock (a realtime
        // stamp left unconverted would be decades off).
        assert_eq!(f.rx_stamped, f.received, "{f:?}");
        assert!(f.latency_p99_us <= f.read_latency_p99_us, "{f:?}");
        assert!(f.latency_max_us > 0.0 && f.latency_max_us < 1e6, "{f:?}");
    }

    /// Loopback, the ingress workload: every class holds exactly its own
    /// flows' datagrams (the generator's counts per port), loses none, and
    /// its histogram buckets hold every datagram it received.
    #[test]
    fn classes_gather_their_flows_on_loopback() {
        use super::super::workload::{Class, Load, Workload};
        let base = 20000 + (std::process::id() % 2000) as u16 * 10;
        let lo: std::net::IpAddr = "127.0.0.1".parse().expect("addr");
        let mut w = Workload::new(lo, Load::Packets(3000.0), 0.3);
        (w.rt_port, w.rt_flows, w.be_port, w.be_flows) = (base, 2, base + 2, 5);
        w.sizes = super::super::gen_flows::Sizes::Fixed(100);
        let flows = w.flows().expect("flows");
        let classes = vec![
            SinkClass::parse(&format!("rt={}", w.port_range(Class::Rt))).expect("rt"),
            SinkClass::parse(&format!("be={}", w.port_range(Class::Be))).expect("be"),
        ];
        let ports: Vec<u16> = (base..base + 7).collect();
        let bound = Sink::bind(lo, &ports)
            .expect("bind")
            .with_classes(classes)
            .expect("classes");
        let sink_thread = std::thread::spawn(move || {
            let never = AtomicBool::new(false);
            bound.run(
                Some(Duration::from_secs(10)),
                Duration::from_millis(500),
                &never,
            )
        });
        let specs: Vec<FlowSpec> = flows.iter().map(|(_, f)| f.clone()).collect();
        let stop = AtomicBool::new(false);
        let g = generate(&specs, Duration::from_millis(500), 7, &stop, &mut |_| {}).expect("gen");
        let r = sink_thread.join().expect("join");
        let sent = |range: std::ops::Range<u16>| -> u64 {
            g.flows
                .iter()
                .filter(|f| range.clone().any(|p| f.dst.ends_with(&format!(":{p}"))))
                .map(|f| f.sent)
                .sum()
        };
        let (rt, be) = (&r.classes[0], &r.classes[1]);
        assert_eq!((rt.class.as_str(), be.class.as_str()), ("rt", "be"));
        assert_eq!(rt.received, sent(base..base + 2), "{r:?}");
        assert_eq!(be.received, sent(base + 2..base + 7), "{r:?}");
        assert!(rt.received > 0 && be.received > rt.received, "{g:?}");
        assert_eq!((rt.flows, be.flows), (2, 5));
        for c in [rt, be] {
            assert_eq!(c.lost, 0);
            assert_eq!(c.histogram.iter().map(|b| b.count).sum::<u64>(), c.received);
            assert_eq!(c.payload_bytes, c.received * (100 - 42));
        }
        let total: u64 = r.flows.iter().map(|f| f.received).sum();
        assert_eq!(total, rt.received + be.received);
    }
}
