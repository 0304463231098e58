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
use super::sink_class::{ClassAcc, Irregular, SinkClass, SinkClassReport};
use crate::sys::monotonic_ns;
use pktsched_io::packet::{realtime_to_monotonic, rx_monotonic_ns};

/// Most flows tracked (further ones are counted as `untracked`). A flow's
/// two latency histograms take ~160 KiB while its latencies stay under
/// 100 ms and grow past that up to [`MAX_LATENCY_NS`] (~300 KiB at an
/// hour; a longer latency is recorded as an hour), so the cap keeps the
/// sink under ~1.3 GiB whatever arrives (65 536 flows of fixed one-hour
/// histograms could have asked for 32 GiB).
pub const MAX_SINK_FLOWS: usize = 4096;

/// The longest latency recorded, ns (an hour): a stamp older than that
/// comes from another clock (another host's, or forged) and is counted
/// as `clock_skewed`, so the histograms stop growing there.
pub const MAX_LATENCY_NS: u64 = 3_600_000_000_000;

/// A latency histogram in ns with `sigfig` significant digits: sized for
/// 1 ns .. 100 ms and growing when a longer latency is recorded.
pub(crate) fn latency_histogram(sigfig: u8) -> Option<Histogram<u64>> {
    let mut h = Histogram::new_with_bounds(1, 100_000_000, sigfig).ok()?;
    h.auto(true);
    Some(h)
}

/// Sequence numbers a flow remembers behind its newest one, to tell a
/// duplicate from a late datagram (one bit each: 512 bytes per flow).
pub const SEQ_WINDOW: u64 = 4096;

/// One flow as received. A flow exists from its first datagram, so its
/// latencies always have at least one sample.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SinkFlowReport {
    /// `sender-address/flow`.
    pub flow: String,
    /// The UDP port it arrived on.
    pub port: u16,
    /// Datagrams received, each sequence number once (duplicates not
    /// counted).
    pub received: u64,
    /// UDP payload bytes received (duplicates not counted).
    pub payload_bytes: u64,
    /// Lowest sequence number received: the generator numbers from 0, but
    /// a sink started late sees a later one first.
    pub first_seq: u64,
    /// Highest sequence number received.
    pub last_seq: u64,
    /// Datagrams missing between `first_seq` and `last_seq`:
    /// `last_seq − first_seq + 1 − received` (never negative). Losses
    /// before the first or after the last datagram seen are not visible.
    pub lost: u64,
    /// Datagrams that arrived after a higher sequence number (duplicates
    /// not counted).
    pub reordered: u64,
    /// Second and later copies of a sequence number seen within
    /// [`SEQ_WINDOW`] of the newest one; excluded from every other figure.
    pub duplicates: u64,
    /// Datagrams more than [`SEQ_WINDOW`] behind the newest (and not below
    /// `first_seq`): they cannot be checked for duplicates, so they count
    /// as received and reordered (a duplicate among them hides a loss).
    pub beyond_window: u64,
    /// Datagrams stamped after they arrived (the sender's clock ahead of
    /// the sink's, e.g. another host), recorded as 1 ns, or more than an
    /// hour before ([`MAX_LATENCY_NS`]), recorded as an hour. Non-zero: the
    /// latencies are not comparable.
    pub clock_skewed: u64,
    /// Payload throughput, bits/s: the bytes after the first datagram over
    /// the time from the first arrival to the last (a CBR flow's rate
    /// exactly, however short); 0 with fewer than two datagrams.
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

/// How a datagram's sequence number relates to those seen before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arrival {
    /// Higher than any before (or the flow's first).
    Newest,
    /// New, but after a higher one.
    Late,
    /// Seen before.
    Duplicate,
    /// More than [`SEQ_WINDOW`] behind the newest: not checkable.
    BeyondWindow,
}

/// The sequence numbers seen in (newest − [`SEQ_WINDOW`], newest], one bit
/// each at `seq % SEQ_WINDOW`, and the lowest one ever seen.
struct SeqWindow {
    bits: Vec<u64>,
    /// Highest and lowest sequence numbers seen; `None` before the first.
    range: Option<(u64, u64)>,
}

impl SeqWindow {
    fn new() -> SeqWindow {
        SeqWindow {
            bits: vec![0; (SEQ_WINDOW / 64) as usize],
            range: None,
        }
    }

    fn slot(seq: u64) -> (usize, u64) {
        let i = seq % SEQ_WINDOW;
        ((i / 64) as usize, 1 << (i % 64))
    }

    fn set(&mut self, seq: u64) {
        let (w, b) = Self::slot(seq);
        self.bits[w] |= b;
    }

    fn is_set(&self, seq: u64) -> bool {
        let (w, b) = Self::slot(seq);
        self.bits[w] & b != 0
    }

    /// Records `seq` and says how it arrived.
    fn observe(&mut self, seq: u64) -> Arrival {
        let Some((lowest, newest)) = self.range else {
            self.range = Some((seq, seq));
            self.set(seq);
            return Arrival::Newest;
        };
        if seq > newest {
            // The slots of newest+1..=seq held sequence numbers now out of
            // the window: cleared before `seq` is marked.
            if seq - newest >= SEQ_WINDOW {
                self.bits.fill(0);
            } else {
                for s in newest + 1..seq {
                    let (w, b) = Self::slot(s);
                    self.bits[w] &= !b;
                }
                let (w, b) = Self::slot(seq);
                self.bits[w] &= !b;
            }
            self.set(seq);
            self.range = Some((lowest, seq));
            return Arrival::Newest;
        }
        let in_window = newest - seq < SEQ_WINDOW;
        if seq < lowest {
            // Below everything seen: new, wherever it is.
            self.range = Some((seq, newest));
            if in_window {
                self.set(seq);
            }
            return Arrival::Late;
        }
        if !in_window {
            return Arrival::BeyondWindow;
        }
        if self.is_set(seq) {
            return Arrival::Duplicate;
        }
        self.set(seq);
        Arrival::Late
    }
}

/// One flow's accounting: fed datagrams (sequence number, send stamp,
/// arrival and read times), it reports [`SinkFlowReport`].
struct FlowAcc {
    port: u16,
    received: u64,
    bytes: u64,
    /// Payload bytes of the first datagram (not part of the throughput).
    first_bytes: u64,
    seqs: SeqWindow,
    reordered: u64,
    irregular: Irregular,
    /// First and last arrival, CLOCK_MONOTONIC ns.
    first_ns: u64,
    last_ns: u64,
    latency: Histogram<u64>,
    read_latency: Histogram<u64>,
    rx_stamped: u64,
}

impl FlowAcc {
    fn new(port: u16) -> Option<FlowAcc> {
        Some(FlowAcc {
            port,
            received: 0,
            bytes: 0,
            first_bytes: 0,
            seqs: SeqWindow::new(),
            reordered: 0,
            irregular: Irregular::default(),
            first_ns: 0,
            last_ns: 0,
            latency: latency_histogram(3)?,
            // Only its p99 is reported, as a diagnostic: 1 % steps do.
            read_latency: latency_histogram(2)?,
            rx_stamped: 0,
        })
    }

    /// A datagram read at `now` that the kernel received at `rx_ns`
    /// (CLOCK_MONOTONIC, 0 if unknown: then timed at `now`).
    fn add(&mut self, s: &Stamp, len: usize, now: u64, rx_ns: u64) {
        match self.seqs.observe(s.seq) {
            Arrival::Duplicate => {
                self.irregular.duplicates += 1;
                return;
            }
            Arrival::BeyondWindow => {
                self.irregular.beyond_window += 1;
                self.reordered += 1;
            }
            Arrival::Late => self.reordered += 1,
            Arrival::Newest => {}
        }
        let arrived = if rx_ns == 0 { now } else { rx_ns.min(now) };
        if self.received == 0 {
            self.first_ns = arrived;
            self.first_bytes = len as u64;
        }
        self.received += 1;
        self.bytes += len as u64;
        self.last_ns = self.last_ns.max(arrived);
        self.rx_stamped += u64::from(rx_ns != 0);
        let latency = arrived.saturating_sub(s.tx_ns);
        self.irregular.clock_skewed += u64::from(arrived < s.tx_ns || latency > MAX_LATENCY_NS);
        let recorded = |ns: u64| ns.clamp(1, MAX_LATENCY_NS);
        let _ = self.latency.record(recorded(latency));
        let _ = self
            .read_latency
            .record(recorded(now.saturating_sub(s.tx_ns)));
    }

    fn report(&self, flow: String) -> SinkFlowReport {
        let (first_seq, last_seq) = self.seqs.range.unwrap_or((0, 0));
        let expected = if self.received == 0 {
            0
        } else {
            (last_seq - first_seq).saturating_add(1)
        };
        let span = self.last_ns.saturating_sub(self.first_ns) as f64 / 1e9;
        let after_first = self.bytes - self.first_bytes;
        let q = |x: f64| self.latency.value_at_quantile(x) as f64 / 1e3;
        SinkFlowReport {
            flow,
            port: self.port,
            received: self.received,
            payload_bytes: self.bytes,
            first_seq,
            last_seq,
            lost: expected.saturating_sub(self.received),
            reordered: self.reordered,
            duplicates: self.irregular.duplicates,
            beyond_window: self.irregular.beyond_window,
            clock_skewed: self.irregular.clock_skewed,
            throughput_bps: if span > 0.0 {
                (after_first as f64 * 8.0 / span) as u64
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
    /// Binds `ports` on `addr`; a port 0 is one the kernel picks (see
    /// [`Sink::ports`]).
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
            let bound = s.local_addr()?.port();
            sockets.push((bound, s));
        }
        Ok(Sink {
            sockets,
            classes: Vec::new(),
        })
    }

    /// The ports the sink listens on, in the order given (a port 0 given
    /// is the one the kernel picked).
    pub fn ports(&self) -> Vec<u16> {
        self.sockets.iter().map(|(p, _)| *p).collect()
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
fn class_reports(classes: &[SinkClass], flows: &FlowTable) -> Vec<SinkClassReport> {
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
            acc.add_irregular(f.irregular);
        }
        out.push(acc.report(c));
    }
    out
}

/// Flows by sender address and stamp flow number.
type FlowTable = HashMap<(SocketAddr, u16), FlowAcc>;

/// The accumulator of flow `key` (received on `port`), new if the table
/// has room for it ([`MAX_SINK_FLOWS`]); `None`, counted in `untracked`,
/// for a new flow when it is full.
fn tracked_flow<'a>(
    flows: &'a mut FlowTable,
    key: (SocketAddr, u16),
    port: u16,
    untracked: &mut u64,
) -> Option<&'a mut FlowAcc> {
    use std::collections::hash_map::Entry;
    let room = flows.len() < MAX_SINK_FLOWS;
    match flows.entry(key) {
        Entry::Occupied(e) => Some(e.into_mut()),
        Entry::Vacant(e) if room => FlowAcc::new(port).map(|acc| e.insert(acc)),
        Entry::Vacant(_) => {
            *untracked += 1;
            None
        }
    }
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
    let mut flows = FlowTable::new();
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
                if let Some(acc) =
                    tracked_flow(&mut flows, (from, stamp.flow), *port, &mut untracked)
                {
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

/// A figure with `decimals`, or "—" where there is none (nothing
/// received), right-aligned in `width`.
fn cell(v: Option<f64>, width: usize, decimals: usize) -> String {
    match v {
        Some(v) => format!("{v:>width$.decimals$}"),
        None => format!("{:>width$}", "—"),
    }
}

impl SinkReport {
    /// A table.
    pub fn text(&self) -> String {
        let mut s = format!(
            "{:<28} {:>5} {:>10} {:>8} {:>8} {:>6} {:>12} {:>9} {:>9} {:>9} {:>9}\n",
            "flow",
            "port",
            "received",
            "lost",
            "reorder",
            "dup",
            "throughput",
            "p50 us",
            "p99 us",
            "p999 us",
            "max us"
        );
        for f in &self.flows {
            s += &format!(
                "{:<28} {:>5} {:>10} {:>8} {:>8} {:>6} {:>12} {:>9.1} {:>9.1} {:>9.1} {:>9.1}\n",
                f.flow,
                f.port,
                f.received,
                f.lost,
                f.reordered,
                f.duplicates,
                format!("{:.3}Mbit", f.throughput_bps as f64 / 1e6),
                f.latency_p50_us,
                f.latency_p99_us,
                f.latency_p999_us,
                f.latency_max_us
            );
        }
        if !self.classes.is_empty() {
            s += &format!(
                "{:<12} {:>11} {:>5} {:>10} {:>8} {:>7} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
                "class",
                "ports",
                "flows",
                "received",
                "lost",
                "loss %",
                "dup",
                "p50 us",
                "p90 us",
                "p99 us",
                "p999 us",
                "max us"
            );
        }
        for c in &self.classes {
            let lost = (c.received > 0).then_some(c.lost as f64);
            s += &format!(
                "{:<12} {:>11} {:>5} {:>10} {} {} {:>6} {} {} {} {} {}\n",
                c.class,
                c.ports,
                c.flows,
                c.received,
                cell(lost, 8, 0),
                cell(c.loss_ratio.map(|r| r * 100.0), 7, 2),
                c.duplicates,
                cell(c.latency_p50_us, 9, 1),
                cell(c.latency_p90_us, 9, 1),
                cell(c.latency_p99_us, 9, 1),
                cell(c.latency_p999_us, 9, 1),
                cell(c.latency_max_us, 9, 1),
            );
        }
        s += &self.footer();
        s
    }

    /// The table's last lines: datagrams outside the flows, and warnings.
    fn footer(&self) -> String {
        let sum = |f: fn(&SinkFlowReport) -> u64| self.flows.iter().map(f).sum::<u64>();
        let (beyond, skewed) = (sum(|f| f.beyond_window), sum(|f| f.clock_skewed));
        let mut s = format!(
            "unstamped {} untracked {} duplicates {}{}\n",
            self.unstamped,
            self.untracked,
            sum(|f| f.duplicates),
            if self.partial {
                " (partial: stopped by a signal)"
            } else {
                ""
            }
        );
        if beyond > 0 {
            s += &format!(
                "beyond_window {beyond}: datagrams more than {SEQ_WINDOW} behind their flow's \
                 newest, not checked for duplicates (counted as received)\n"
            );
        }
        if skewed > 0 {
            s += &format!(
                "clock_skewed {skewed}: datagrams stamped after they arrived or more than an hour \
                 before (the sender's clock is not the sink's): the latencies are not comparable\n"
            );
        }
        s
    }
}

/// The accounting alone, fed synthetic datagrams on a virtual clock.
#[cfg(test)]
mod accounting_tests {
    use super::*;

    /// The sink's histograms start sized for 100 ms (about half the memory
    /// of a fixed 1 ns .. 1 h histogram) and still record longer latencies.
    #[test]
    fn latency_histograms_start_small_and_grow_past_100_ms() {
        let fixed = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("h");
        let mut h = latency_histogram(3).expect("h");
        assert!(
            5 * h.distinct_values() <= 3 * fixed.distinct_values(),
            "{} against {}",
            h.distinct_values(),
            fixed.distinct_values()
        );
        h.record(50_000).expect("50 µs");
        h.record(5_000_000_000).expect("5 s, past the first size");
        assert_eq!(h.len(), 2);
        assert!((h.max() as f64 - 5e9).abs() / 5e9 < 1e-3, "{}", h.max());
        assert!(latency_histogram(2).expect("h").distinct_values() < h.distinct_values());
    }

    const MS: u64 = 1_000_000;
    /// Every test datagram's payload, bytes.
    const LEN: usize = 1000;

    /// `seqs` arriving 1 ms apart from t = 1 s, each sent 10 µs earlier,
    /// with the kernel's receive time 2 µs before the read.
    fn feed(acc: &mut FlowAcc, seqs: &[u64]) {
        for (i, &seq) in seqs.iter().enumerate() {
            let read = 1_000 * MS + i as u64 * MS;
            let stamp = Stamp {
                flow: 0,
                seq,
                tx_ns: read - 10_000,
            };
            acc.add(&stamp, LEN, read, read - 2_000);
        }
    }

    fn flow(seqs: &[u64]) -> (FlowAcc, SinkFlowReport) {
        let mut acc = FlowAcc::new(5000).expect("acc");
        feed(&mut acc, seqs);
        let r = acc.report("f".into());
        (acc, r)
    }

    #[test]
    fn loss_counts_from_the_first_sequence_number_seen() {
        // A sink started after the generator: 100 datagrams before it.
        let seqs: Vec<u64> = (100..110).filter(|&s| s != 105).collect();
        let (_, r) = flow(&seqs);
        assert_eq!((r.first_seq, r.last_seq), (100, 109));
        assert_eq!((r.received, r.lost, r.reordered), (9, 1, 0), "{r:?}");
        // One from before the first arrives late: the range grows.
        let (_, r) = flow(&[100, 101, 98]);
        assert_eq!((r.first_seq, r.last_seq), (98, 101));
        assert_eq!((r.received, r.lost, r.reordered), (3, 1, 1), "{r:?}");
    }

    #[test]
    fn duplicates_are_counted_and_left_out_of_every_other_figure() {
        // 1 twice (of the newest), 0 twice (an older one); 2 is lost.
        let (acc, r) = flow(&[0, 1, 1, 3, 0]);
        assert_eq!((r.received, r.lost, r.reordered), (3, 1, 0), "{r:?}");
        assert_eq!((r.duplicates, r.beyond_window), (2, 0));
        assert_eq!(r.payload_bytes, 3 * LEN as u64);
        assert_eq!((acc.latency.len(), acc.read_latency.len()), (3, 3));
        // The third datagram (t = 1.002 s) was a duplicate: the span ends
        // at the fourth's arrival, 3 ms after the first, and carries two
        // datagrams' bytes after the first.
        assert_eq!(r.throughput_bps, 2 * LEN as u64 * 8 * 1000 / 3);
    }

    #[test]
    fn the_window_tells_duplicates_within_it_and_passes_older_ones_unchecked() {
        let mut w = SeqWindow::new();
        assert_eq!(w.observe(5), Arrival::Newest);
        // Same slot as 5: the stale bit is cleared before it is marked.
        assert_eq!(w.observe(5 + SEQ_WINDOW), Arrival::Newest);
        assert_eq!(w.observe(5 + SEQ_WINDOW), Arrival::Duplicate);
        // 5 is now SEQ_WINDOW behind: out of the window, not checkable.
        assert_eq!(w.observe(5), Arrival::BeyondWindow);
        // 6 is the window's oldest; never seen.
        assert_eq!(w.observe(6), Arrival::Late);
        assert_eq!(w.observe(6), Arrival::Duplicate);
        // Below the lowest ever seen: new even out of the window.
        assert_eq!(w.observe(1), Arrival::Late);
        // A jump beyond the window forgets everything in it.
        assert_eq!(w.observe(10 * SEQ_WINDOW), Arrival::Newest);
        assert_eq!(w.observe(10 * SEQ_WINDOW - 1), Arrival::Late);
        // In a flow: the unchecked one (here a copy of 0) counts as
        // received and reordered, and hides one of the SEQ_WINDOW - 1 lost.
        let (_, r) = flow(&[0, SEQ_WINDOW, 0]);
        assert_eq!((r.received, r.reordered, r.beyond_window), (3, 1, 1));
        assert_eq!((r.duplicates, r.lost), (0, SEQ_WINDOW - 2));
    }

    /// Seeded random sequences with gaps, reordering and duplicates: the
    /// window agrees with a set of every number seen wherever it can tell.
    #[test]
    fn the_window_agrees_with_a_set_of_every_number_seen() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(13);
        let mut w = SeqWindow::new();
        let mut seen = std::collections::HashSet::new();
        let (mut newest, mut lowest) = (None::<u64>, u64::MAX);
        let mut kinds = [0u64; 4];
        for _ in 0..200_000 {
            let top = newest.unwrap_or(10_000);
            let seq = match rng.random_range(0..100) {
                0..=69 => top + rng.random_range(1..3),
                70..=89 => top.saturating_sub(rng.random_range(0..64)),
                90..=96 => top.saturating_sub(rng.random_range(0..SEQ_WINDOW)),
                97 | 98 => top.saturating_sub(rng.random_range(SEQ_WINDOW..3 * SEQ_WINDOW)),
                _ => top + rng.random_range(SEQ_WINDOW..2 * SEQ_WINDOW),
            };
            let expect = match newest {
                None => Arrival::Newest,
                Some(n) if seq > n => Arrival::Newest,
                Some(_) if seq < lowest => Arrival::Late,
                Some(n) if n - seq >= SEQ_WINDOW => Arrival::BeyondWindow,
                Some(_) if seen.contains(&seq) => Arrival::Duplicate,
                Some(_) => Arrival::Late,
            };
            assert_eq!(w.observe(seq), expect, "seq {seq} newest {newest:?}");
            kinds[expect as usize] += 1;
            seen.insert(seq);
            newest = Some(newest.map_or(seq, |n| n.max(seq)));
            lowest = lowest.min(seq);
        }
        assert!(
            kinds.iter().all(|&k| k > 1000),
            "every kind drawn: {kinds:?}"
        );
    }

    #[test]
    fn throughput_is_the_bytes_after_the_first_over_the_span() {
        // Two datagrams 1 ms apart: one datagram's bytes per ms.
        let (_, r) = flow(&[0, 1]);
        assert_eq!(r.throughput_bps, LEN as u64 * 8 * 1000);
        // A long CBR flow reads the same rate exactly.
        let (_, r) = flow(&(0..2000).collect::<Vec<_>>());
        assert_eq!(r.throughput_bps, LEN as u64 * 8 * 1000);
        // One datagram has no rate.
        let (_, r) = flow(&[7]);
        assert_eq!((r.throughput_bps, r.received, r.lost), (0, 1, 0));
    }

    /// The names scripts and `plot ingress` read stay; the new ones are
    /// there.
    #[test]
    fn the_json_keeps_the_names_its_readers_use() {
        let (_, r) = flow(&[0, 1, 1]);
        let json = serde_json::to_value(&r).expect("json");
        for key in [
            "flow",
            "port",
            "received",
            "lost",
            "throughput_bps",
            "latency_p50_us",
            "latency_p99_us",
            "first_seq",
            "last_seq",
            "duplicates",
            "beyond_window",
            "clock_skewed",
        ] {
            assert!(json.get(key).is_some(), "{key} missing: {json}");
        }
        assert_eq!(json["duplicates"], 1);
    }

    #[test]
    fn a_sender_clock_ahead_is_counted_and_flagged() {
        let mut acc = FlowAcc::new(5000).expect("acc");
        feed(&mut acc, &[0, 1]);
        // Stamped 5 µs after the kernel received it.
        let stamp = Stamp {
            flow: 0,
            seq: 2,
            tx_ns: 2_000 * MS + 5_000,
        };
        acc.add(&stamp, LEN, 2_000 * MS + 1_000, 2_000 * MS);
        let r = acc.report("f".into());
        assert_eq!((r.clock_skewed, r.received), (1, 3), "{r:?}");
        assert_eq!(acc.latency.min(), 1, "recorded as 1 ns");
        let mut report = SinkReport {
            flows: vec![r],
            classes: Vec::new(),
            unstamped: 0,
            untracked: 0,
            partial: false,
        };
        assert!(
            report.text().contains("clock_skewed 1:"),
            "{}",
            report.text()
        );
        assert!(report.text().contains("not comparable"));
        report.flows[0].clock_skewed = 0;
        assert!(!report.text().contains("clock_skewed"), "{}", report.text());
    }

    /// A stamp from a day before (another host's clock, or forged) is
    /// counted as skewed and recorded as an hour: the histograms stay at
    /// most the one-hour size, whatever the stamps say.
    #[test]
    fn a_stamp_older_than_an_hour_is_skewed_and_bounded() {
        let mut acc = FlowAcc::new(5000).expect("acc");
        let day = 86_400_000_000_000u64;
        let hour_sized = |sigfig| {
            let mut h = latency_histogram(sigfig).expect("h");
            h.record(MAX_LATENCY_NS).expect("an hour");
            h.distinct_values()
        };
        acc.add(
            &Stamp {
                flow: 0,
                seq: 0,
                tx_ns: 5,
            },
            LEN,
            day + 10,
            day,
        );
        let r = acc.report("f".into());
        assert_eq!((r.clock_skewed, r.received), (1, 1), "{r:?}");
        assert_eq!(acc.latency.len(), 1);
        assert!(
            acc.latency.max() <= MAX_LATENCY_NS + MAX_LATENCY_NS / 100,
            "{}",
            acc.latency.max()
        );
        assert!(acc.latency.distinct_values() <= hour_sized(3));
        assert!(acc.read_latency.distinct_values() <= hour_sized(2));
        // An hour exactly is still a latency, not a skew.
        let mut acc = FlowAcc::new(5000).expect("acc");
        acc.add(
            &Stamp {
                flow: 0,
                seq: 0,
                tx_ns: day - MAX_LATENCY_NS,
            },
            LEN,
            day,
            day,
        );
        assert_eq!(acc.report("f".into()).clock_skewed, 0);
    }

    /// At most [`MAX_SINK_FLOWS`] flows are tracked: the next new one is
    /// counted as untracked, a flow already in the table still counts.
    #[test]
    fn flows_past_the_cap_are_untracked() {
        let mut flows = FlowTable::new();
        let mut untracked = 0;
        let from: SocketAddr = "127.0.0.1:9".parse().expect("addr");
        for flow in 0..=MAX_SINK_FLOWS as u16 {
            let _ = tracked_flow(&mut flows, (from, flow), 5000, &mut untracked);
        }
        assert_eq!((flows.len(), untracked), (MAX_SINK_FLOWS, 1));
        assert!(tracked_flow(&mut flows, (from, 0), 5000, &mut untracked).is_some());
        let other: SocketAddr = "127.0.0.2:9".parse().expect("addr");
        assert!(tracked_flow(&mut flows, (other, 0), 5000, &mut untracked).is_none());
        assert_eq!((flows.len(), untracked), (MAX_SINK_FLOWS, 2));
    }

    #[test]
    fn a_class_without_datagrams_has_no_loss_or_latency_figures() {
        let rt = SinkClass::parse("rt=5000").expect("rt");
        let be = SinkClass::parse("be=6000").expect("be");
        let mut flows = HashMap::new();
        let mut acc = FlowAcc::new(5000).expect("acc");
        feed(&mut acc, &[0, 0, 2]);
        flows.insert(("127.0.0.1:9".parse().expect("addr"), 3), acc);
        let classes = class_reports(&[rt, be], &flows);
        let (rt, be) = (&classes[0], &classes[1]);
        assert_eq!((rt.received, rt.lost, rt.duplicates), (2, 1, 1), "{rt:?}");
        assert_eq!(rt.loss_ratio, Some(1.0 / 3.0));
        assert!(rt.latency_p99_us.is_some_and(|v| v > 0.0), "{rt:?}");
        assert_eq!((be.flows, be.received, be.lost), (0, 0, 0));
        assert_eq!(be.loss_ratio, None);
        let none = [
            be.latency_p50_us,
            be.latency_p90_us,
            be.latency_p99_us,
            be.latency_p999_us,
            be.latency_max_us,
            be.read_latency_p99_us,
        ];
        assert!(none.iter().all(Option::is_none), "{be:?}");
        let json = serde_json::to_value(be).expect("json");
        assert!(json["latency_p99_us"].is_null() && json["loss_ratio"].is_null());
        let report = SinkReport {
            flows: Vec::new(),
            classes: classes.clone(),
            unstamped: 0,
            untracked: 0,
            partial: false,
        };
        let text = report.text();
        let be_line = text
            .lines()
            .find(|l| l.starts_with("be "))
            .expect("be line");
        assert_eq!(be_line.matches('—').count(), 7, "{text}");
        let rt_line = text
            .lines()
            .find(|l| l.starts_with("rt "))
            .expect("rt line");
        assert!(
            !rt_line.contains('—') && rt_line.contains("33.33"),
            "{text}"
        );
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
        // A port the kernel picks: free, and no other test's.
        let stop = AtomicBool::new(false);
        let bound = Sink::bind("127.0.0.1".parse().expect("addr"), &[0]).expect("bind");
        let port = bound.ports()[0];
        assert_ne!(port, 0, "the port the kernel picked");
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
        // Seven ports in a row (the classes are port ranges, so not port
        // 0): below the kernel's default ephemeral range (32768 on), where
        // no socket bound to port 0 lands.
        let base = 20000 + (std::process::id() % 1270) as u16 * 10;
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
