//! The sink's traffic classes: named groups of destination ports
//! (`pktsched sink --class rt=5001 --class be=5002-5009`), each reported
//! with its flows together — received, lost, throughput and one latency
//! histogram (percentiles and log₂ buckets).
//!
//! Classes go by port, not by the DSCP in the IP header: ports survive any
//! path unchanged (a router or a shaper may re-mark DSCP), need no ancillary
//! data on every receive (IP_RECVTOS), and the generator's workload
//! (`gen --load`) gives each class its own ports.

use hdrhistogram::Histogram;
use pktsched_io::classify::PortRange;
use serde::Serialize;

/// Most classes of one sink.
pub const MAX_CLASSES: usize = 16;
/// Longest class name.
pub const MAX_NAME: usize = 32;
/// The first histogram bucket's upper edge, ns (later ones double).
const FIRST_BUCKET_NS: u64 = 1_000;

/// A class: a name and its destination ports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SinkClass {
    /// Name (letters, digits, `_`, `-`).
    pub name: String,
    /// Destination ports.
    pub ports: PortRange,
}

impl SinkClass {
    /// Parses `NAME=PORT` or `NAME=LO-HI`.
    pub fn parse(text: &str) -> Result<SinkClass, String> {
        let Some((name, ports)) = text.split_once('=') else {
            return Err(format!(
                "{text:?}: allowed NAME=PORT or NAME=LO-HI (e.g. rt=5001)"
            ));
        };
        let name = name.trim();
        let ok = (1..=MAX_NAME).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !ok {
            return Err(format!(
                "class name {name:?}: allowed 1 to {MAX_NAME} letters, digits, '_' or '-'"
            ));
        }
        let ports: PortRange = ports
            .trim()
            .parse()
            .map_err(|e| format!("class {name} ports {ports:?}: {e}"))?;
        Ok(SinkClass {
            name: name.to_string(),
            ports,
        })
    }

    /// Checks a set of classes: at most [`MAX_CLASSES`], distinct names,
    /// no port in two classes.
    pub fn check_set(classes: &[SinkClass]) -> Result<(), String> {
        if classes.len() > MAX_CLASSES {
            return Err(format!(
                "{} classes: allowed at most {MAX_CLASSES}",
                classes.len()
            ));
        }
        for (i, a) in classes.iter().enumerate() {
            for b in &classes[..i] {
                if a.name == b.name {
                    return Err(format!("class {:?} given twice", a.name));
                }
                if a.ports.lo <= b.ports.hi && b.ports.lo <= a.ports.hi {
                    return Err(format!(
                        "classes {} ({}-{}) and {} ({}-{}) share ports: a port belongs to one class",
                        b.name, b.ports.lo, b.ports.hi, a.name, a.ports.lo, a.ports.hi
                    ));
                }
            }
        }
        Ok(())
    }
}

/// One histogram bucket: datagrams with latency in (previous edge, `le_us`].
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Bucket {
    /// Upper edge, µs.
    pub le_us: f64,
    /// Datagrams in the bucket.
    pub count: u64,
}

/// Datagrams a flow or class received that its figures leave out or
/// cannot vouch for (see [`super::sink::SinkFlowReport`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Irregular {
    /// Copies of a sequence number already seen.
    pub(super) duplicates: u64,
    /// Too far behind the newest to be checked for duplicates.
    pub(super) beyond_window: u64,
    /// Stamped after they arrived.
    pub(super) clock_skewed: u64,
}

/// One class as received. Figures that need a datagram (`loss_ratio`,
/// the latencies) are `null` when the class received none.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SinkClassReport {
    /// Name.
    pub class: String,
    /// Destination ports, `lo-hi`.
    pub ports: String,
    /// Flows seen.
    pub flows: u64,
    /// Datagrams received (duplicates not counted).
    pub received: u64,
    /// Datagrams missing by sequence number (per flow: between its lowest
    /// and highest sequence numbers received; datagrams lost before a
    /// flow's first or after its last arrival are not seen).
    pub lost: u64,
    /// `lost / (received + lost)`; `null` with nothing received.
    pub loss_ratio: Option<f64>,
    /// The flows' duplicates (excluded from every other figure).
    pub duplicates: u64,
    /// The flows' datagrams too far behind their newest to be checked for
    /// duplicates (counted as received).
    pub beyond_window: u64,
    /// The flows' datagrams stamped after they arrived or more than an
    /// hour before (the sender's clock is not the sink's); non-zero: the
    /// latencies are not comparable.
    pub clock_skewed: u64,
    /// UDP payload bytes received.
    pub payload_bytes: u64,
    /// Sum of the flows' payload throughputs, bits/s.
    pub throughput_bps: u64,
    /// One-way latency percentiles, µs: the generator's send stamp → the
    /// kernel's receive of the datagram at the sink (`SO_TIMESTAMPNS`;
    /// the sink's read time where the kernel gave none), so the sink's
    /// own scheduling delay does not count. `null` with nothing received.
    pub latency_p50_us: Option<f64>,
    /// 90th percentile.
    pub latency_p90_us: Option<f64>,
    /// 99th percentile.
    pub latency_p99_us: Option<f64>,
    /// 99.9th percentile.
    pub latency_p999_us: Option<f64>,
    /// Largest.
    pub latency_max_us: Option<f64>,
    /// Latency histogram: buckets doubling from 1 µs, up to the largest.
    pub histogram: Vec<Bucket>,
    /// Send stamp → the sink's read of the datagram, 99th percentile, µs
    /// (the latency above plus the sink's scheduling delay).
    pub read_latency_p99_us: Option<f64>,
    /// Datagrams that came with the kernel's receive time.
    pub rx_stamped: u64,
}

/// Adds the flows of one class, one flow at a time.
pub(super) struct ClassAcc {
    flows: u64,
    received: u64,
    lost: u64,
    bytes: u64,
    throughput: u64,
    irregular: Irregular,
    latency: Histogram<u64>,
    read_latency: Histogram<u64>,
    rx_stamped: u64,
}

impl ClassAcc {
    pub(super) fn new() -> Option<ClassAcc> {
        Some(ClassAcc {
            flows: 0,
            received: 0,
            lost: 0,
            bytes: 0,
            throughput: 0,
            irregular: Irregular::default(),
            latency: super::sink::latency_histogram(3)?,
            read_latency: super::sink::latency_histogram(2)?,
            rx_stamped: 0,
        })
    }

    /// One flow's totals and latencies (to the kernel's receive, to the
    /// sink's read) and how many datagrams had a receive time.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn add_flow(
        &mut self,
        received: u64,
        lost: u64,
        bytes: u64,
        throughput: u64,
        latency: &Histogram<u64>,
        read_latency: &Histogram<u64>,
        rx_stamped: u64,
    ) {
        self.rx_stamped += rx_stamped;
        let _ = self.read_latency.add(read_latency);
        self.flows += 1;
        self.received += received;
        self.lost += lost;
        self.bytes += bytes;
        self.throughput += throughput;
        // The class histogram auto-resizes like the flow's (and a flow's
        // latencies stop at an hour), so adding does not fail.
        let _ = self.latency.add(latency);
    }

    /// One flow's datagrams left out of its figures or not checkable.
    pub(super) fn add_irregular(&mut self, i: Irregular) {
        self.irregular.duplicates += i.duplicates;
        self.irregular.beyond_window += i.beyond_window;
        self.irregular.clock_skewed += i.clock_skewed;
    }

    pub(super) fn report(&self, class: &SinkClass) -> SinkClassReport {
        let h = &self.latency;
        let q = |x: f64| (!h.is_empty()).then(|| h.value_at_quantile(x) as f64 / 1e3);
        let mut histogram = Vec::new();
        if !h.is_empty() {
            // The iterator's edges are the buckets' highest equivalent
            // values (999 ns for 1 µs); the nominal edges are reported.
            let mut edge = FIRST_BUCKET_NS as f64;
            for v in h.iter_log(FIRST_BUCKET_NS, 2.0) {
                histogram.push(Bucket {
                    le_us: edge / 1e3,
                    count: v.count_since_last_iteration(),
                });
                edge *= 2.0;
            }
        }
        let seen = self.received + self.lost;
        SinkClassReport {
            class: class.name.clone(),
            ports: format!("{}-{}", class.ports.lo, class.ports.hi),
            flows: self.flows,
            received: self.received,
            lost: self.lost,
            loss_ratio: (self.received > 0).then(|| self.lost as f64 / seen as f64),
            duplicates: self.irregular.duplicates,
            beyond_window: self.irregular.beyond_window,
            clock_skewed: self.irregular.clock_skewed,
            payload_bytes: self.bytes,
            throughput_bps: self.throughput,
            latency_p50_us: q(0.5),
            latency_p90_us: q(0.9),
            latency_p99_us: q(0.99),
            latency_p999_us: q(0.999),
            latency_max_us: (!h.is_empty()).then(|| h.max() as f64 / 1e3),
            histogram,
            read_latency_p99_us: (!self.read_latency.is_empty())
                .then(|| self.read_latency.value_at_quantile(0.99) as f64 / 1e3),
            rx_stamped: self.rx_stamped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_parse_and_sets_are_checked() {
        let rt = SinkClass::parse("rt=5001").expect("rt");
        assert_eq!(rt.ports, PortRange { lo: 5001, hi: 5001 });
        let be = SinkClass::parse("be=5002-5009").expect("be");
        assert_eq!(be.ports, PortRange { lo: 5002, hi: 5009 });
        assert!(SinkClass::check_set(&[rt.clone(), be.clone()]).is_ok());
        for (bad, words) in [
            ("rt", "NAME=PORT"),
            ("=5001", "class name"),
            ("r t=5001", "class name"),
            ("rt=0-x", "class rt ports"),
        ] {
            let e = SinkClass::parse(bad).expect_err(bad);
            assert!(e.contains(words), "{e:?} lacks {words:?}");
        }
        let overlap = SinkClass::parse("x=5009-5010").expect("x");
        let e = SinkClass::check_set(&[be.clone(), overlap]).expect_err("overlap");
        assert!(e.contains("share ports"), "{e}");
        let e = SinkClass::check_set(&[rt.clone(), rt]).expect_err("twice");
        assert!(e.contains("twice"), "{e}");
    }

    #[test]
    fn a_class_adds_its_flows_and_buckets_hold_every_datagram() {
        let mut a = ClassAcc::new().expect("acc");
        let mut h1 = Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("h");
        let mut h2 = h1.clone();
        for ns in [500, 1_500, 3_000, 3_000] {
            h1.record(ns).expect("record");
        }
        h2.record(100_000).expect("record");
        let mut read = h1.clone();
        read.reset();
        read.record(200_000).expect("record");
        a.add_flow(4, 1, 400, 1000, &h1, &read, 4);
        a.add_flow(1, 0, 100, 500, &h2, &read, 0);
        let class = SinkClass::parse("rt=1-2").expect("class");
        let r = a.report(&class);
        assert_eq!(
            (r.flows, r.received, r.lost, r.payload_bytes),
            (2, 5, 1, 500)
        );
        assert_eq!(r.throughput_bps, 1500);
        let v = |x: Option<f64>| x.expect("a class that received has every figure");
        assert!((v(r.loss_ratio) - 1.0 / 6.0).abs() < 1e-12);
        assert_eq!(r.histogram.iter().map(|b| b.count).sum::<u64>(), 5);
        assert_eq!(
            r.histogram[0],
            Bucket {
                le_us: 1.0,
                count: 1
            }
        );
        assert!((v(r.latency_max_us) - 100.0).abs() < 0.1, "{r:?}");
        assert!(r.latency_p50_us <= r.latency_p90_us && r.latency_p90_us <= r.latency_p99_us);
        assert!((v(r.latency_p50_us) - 3.0).abs() < 0.01, "{r:?}");
        // Two significant digits for the read latency: within 1 %.
        assert!((v(r.read_latency_p99_us) - 200.0).abs() < 2.0, "{r:?}");
        assert_eq!(r.rx_stamped, 4);
    }
}
