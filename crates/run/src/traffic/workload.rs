//! The ingress experiment's workload in one set of values (`pktsched gen
//! --load 200kpps --rt-share 0.3`): a total offered load split into
//! real-time (RT) flows and best-effort (BE) flows, with Poisson arrivals
//! (RT flows may be periodic instead: the RT bound's envelope holds for
//! periodic arrivals, not for Poisson ones). RT flows carry the RT DSCP and destination ports from
//! `rt_port` on; BE flows carry the BE DSCP and ports from `be_port` on,
//! so a sink can tell the classes apart by port and a router by DSCP or
//! port.
//!
//! The split is exact in bits/s: the RT flows together get
//! `round(load × share)`, the BE flows the rest, and within a class every
//! flow gets the same rate, the remainder of the division going one bit/s
//! at a time to the first flows. A load in packets/s becomes bits/s with
//! the mean frame size (of a mix, weighted).

use std::net::IpAddr;

use pktsched_core::Rate;

use super::gen_flows::{FlowSpec, MAX_FLOW_RATE, MAX_FLOWS, Pattern, Sizes};

/// Highest total load in packets/s (of either backend; what the machine
/// achieves is reported by the generator, see [`super::generator`]).
pub const MAX_LOAD_PPS: f64 = 100e6;

/// The offered load as given: bits/s of whole frames, or packets/s.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Load {
    /// Frame bits per second (without FCS).
    Bits(Rate),
    /// Frames per second.
    Packets(f64),
}

impl Load {
    /// Parses `200mbit`, `1gbit` (any [`Rate`] text) or `200kpps`,
    /// `1.5mpps`, `50000pps`.
    pub fn parse(text: &str) -> Result<Load, String> {
        let t = text.trim();
        let lower = t.to_ascii_lowercase();
        let pps = [("mpps", 1e6), ("kpps", 1e3), ("pps", 1.0)]
            .into_iter()
            .find_map(|(u, m)| lower.strip_suffix(u).map(|n| (n.trim().to_string(), m)));
        let Some((num, mult)) = pps else {
            return Rate::parse(t)
                .map(Load::Bits)
                .map_err(|e| format!("{e}; or packets/s like 200kpps, 1.5mpps"));
        };
        let v: f64 = num
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v > 0.0)
            .ok_or_else(|| format!("{t:?}: a positive number before pps/kpps/mpps"))?;
        let p = v * mult;
        if p > MAX_LOAD_PPS {
            return Err(format!("{t:?}: at most {}mpps", MAX_LOAD_PPS / 1e6));
        }
        Ok(Load::Packets(p))
    }

    /// Frame bits per second for frames of mean size `mean_bytes`.
    pub fn bits_per_s(self, mean_bytes: f64) -> f64 {
        match self {
            Load::Bits(r) => r.as_bps() as f64,
            Load::Packets(p) => p * mean_bytes * 8.0,
        }
    }
}

/// The workload: load, RT share, flows per class, marks and ports.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// Destination of every flow.
    pub dst: IpAddr,
    /// Total offered load.
    pub load: Load,
    /// Fraction of the load (in bits, so in packets for one frame size)
    /// that is RT, in `[0, 1]`.
    pub rt_share: f64,
    /// RT flows (used when `rt_share > 0`).
    pub rt_flows: u32,
    /// BE flows (used when `rt_share < 1`).
    pub be_flows: u32,
    /// DSCP of RT flows.
    pub rt_dscp: u8,
    /// DSCP of BE flows.
    pub be_dscp: u8,
    /// First RT destination port.
    pub rt_port: u16,
    /// First BE destination port.
    pub be_port: u16,
    /// Frame sizes of every flow.
    pub sizes: Sizes,
    /// Arrivals of the RT flows (BE flows are always Poisson).
    pub rt_pattern: Pattern,
}

/// The class of a workload flow.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Class {
    /// Real-time.
    Rt,
    /// Best-effort.
    Be,
}

impl Workload {
    /// The paper's defaults: one RT flow at port 5001 marked EF, eight BE
    /// flows at ports 5002.. unmarked, 64-byte frames.
    pub fn new(dst: IpAddr, load: Load, rt_share: f64) -> Workload {
        Workload {
            dst,
            load,
            rt_share,
            rt_flows: 1,
            be_flows: 8,
            rt_dscp: 46,
            be_dscp: 0,
            rt_port: 5001,
            be_port: 5002,
            sizes: Sizes::Fixed(64),
            rt_pattern: Pattern::Poisson,
        }
    }

    fn ports(&self, class: Class) -> (u16, u32) {
        match class {
            Class::Rt => (self.rt_port, self.rt_flows),
            Class::Be => (self.be_port, self.be_flows),
        }
    }

    /// The port range `lo-hi` of a class (for `pktsched sink --class`).
    pub fn port_range(&self, class: Class) -> String {
        let (lo, n) = self.ports(class);
        format!("{lo}-{}", u32::from(lo) + n.max(1) - 1)
    }

    /// Checks every value; the error names the value and what is allowed.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.rt_share) {
            return Err(format!(
                "RT share {}: allowed 0..=1 (a fraction of the load)",
                self.rt_share
            ));
        }
        for (name, n) in [("RT", self.rt_flows), ("BE", self.be_flows)] {
            if n == 0 || n as usize > MAX_FLOWS / 2 {
                return Err(format!("{name} flows {n}: allowed 1..={}", MAX_FLOWS / 2));
            }
        }
        for (name, d) in [("RT", self.rt_dscp), ("BE", self.be_dscp)] {
            if d > 63 {
                return Err(format!("{name} DSCP {d}: allowed 0..=63"));
            }
        }
        let span = |c| {
            let (lo, n) = self.ports(c);
            (u32::from(lo), u32::from(lo) + n - 1)
        };
        let (rt, be) = (span(Class::Rt), span(Class::Be));
        for (name, (lo, hi)) in [("RT", rt), ("BE", be)] {
            if lo == 0 || hi > 65535 {
                return Err(format!("{name} ports {lo}-{hi}: allowed within 1..=65535"));
            }
        }
        if rt.0 <= be.1 && be.0 <= rt.1 {
            return Err(format!(
                "RT ports {}-{} and BE ports {}-{} overlap: the sink tells the classes apart by port",
                rt.0, rt.1, be.0, be.1
            ));
        }
        Ok(())
    }

    /// The flows: RT first, then BE, each with its rate; their rates sum
    /// to the load exactly (in bits/s).
    pub fn flows(&self) -> Result<Vec<(Class, FlowSpec)>, String> {
        self.validate()?;
        let total = self.load.bits_per_s(self.sizes.mean()).round();
        let max_total = MAX_FLOW_RATE.as_bps() as f64 * f64::from(self.rt_flows + self.be_flows);
        if !(1.0..=max_total).contains(&total) {
            return Err(format!(
                "load {total} bit/s: allowed 1 bit/s up to {} per flow",
                MAX_FLOW_RATE
            ));
        }
        let total = total as u64;
        let rt_bps = (total as f64 * self.rt_share).round() as u64;
        let mut out = Vec::new();
        for (class, bps) in [(Class::Rt, rt_bps), (Class::Be, total - rt_bps)] {
            if bps == 0 {
                continue;
            }
            let (port, n) = self.ports(class);
            let (each, extra) = (bps / u64::from(n), bps % u64::from(n));
            if each == 0 {
                return Err(format!(
                    "{class:?} load {bps} bit/s over {n} flows: below 1 bit/s per flow"
                ));
            }
            for i in 0..n {
                let rate = each + u64::from(u64::from(i) < extra);
                let mut f = FlowSpec::new(self.dst);
                f.dport = port + i as u16;
                f.rate = Rate::try_from(rate).map_err(|e| format!("{e}"))?;
                f.sizes = self.sizes.clone();
                f.pattern = match class {
                    Class::Rt => self.rt_pattern,
                    Class::Be => Pattern::Poisson,
                };
                f.dscp = match class {
                    Class::Rt => self.rt_dscp,
                    Class::Be => self.be_dscp,
                };
                f.validate()?;
                out.push((class, f));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dst() -> IpAddr {
        "198.18.1.2".parse().expect("addr")
    }

    fn sum(flows: &[(Class, FlowSpec)], c: Option<Class>) -> u64 {
        flows
            .iter()
            .filter(|(k, _)| c.is_none_or(|c| *k == c))
            .map(|(_, f)| f.rate.as_bps())
            .sum()
    }

    #[test]
    fn loads_parse_in_bits_and_packets() {
        assert_eq!(Load::parse("200kpps"), Ok(Load::Packets(200_000.0)));
        assert_eq!(Load::parse("1.5Mpps"), Ok(Load::Packets(1_500_000.0)));
        assert_eq!(Load::parse("10mbit"), Ok(Load::Bits(Rate::mbit(10))));
        for bad in ["0pps", "-1kpps", "xkpps", "200mpps", "10", "nanpps"] {
            assert!(Load::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rates_sum_to_the_load_and_shares_are_exact() {
        // Odd numbers so the division leaves remainders.
        let mut w = Workload::new(
            dst(),
            Load::Bits(Rate::try_from(10_000_007).expect("r")),
            0.3,
        );
        w.rt_flows = 3;
        w.be_flows = 7;
        w.be_port = 5004;
        let f = w.flows().expect("flows");
        assert_eq!(f.len(), 10);
        assert_eq!(sum(&f, None), 10_000_007);
        assert_eq!(sum(&f, Some(Class::Rt)), 3_000_002); // round(3_000_002.1)
        assert_eq!(sum(&f, Some(Class::Be)), 7_000_005);
        // Within a class, rates differ by at most 1 bit/s.
        for c in [Class::Rt, Class::Be] {
            let r: Vec<u64> = f
                .iter()
                .filter(|x| x.0 == c)
                .map(|x| x.1.rate.as_bps())
                .collect();
            let (lo, hi) = (r.iter().min().expect("min"), r.iter().max().expect("max"));
            assert!(hi - lo <= 1, "{r:?}");
        }
        // Marks, ports and arrivals.
        for (c, spec) in &f {
            assert_eq!(spec.pattern, Pattern::Poisson);
            let (dscp, ports) = match c {
                Class::Rt => (46, 5001..=5003),
                Class::Be => (0, 5004..=5010),
            };
            assert_eq!(spec.dscp, dscp);
            assert!(ports.contains(&spec.dport), "{spec:?}");
        }
    }

    /// Random workloads from a seeded generator: the split is exact every
    /// time (sum, RT part, spread within a class).
    #[test]
    fn random_workloads_split_exactly() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
        for _ in 0..2000 {
            let bps: u64 = rng.random_range(10_000..=40_000_000_000);
            let share: f64 = rng.random_range(0.0..=1.0);
            let mut w = Workload::new(dst(), Load::Bits(Rate::try_from(bps).expect("r")), share);
            w.rt_flows = rng.random_range(1..=16);
            w.be_flows = rng.random_range(1..=64);
            w.be_port = w.rt_port + w.rt_flows as u16;
            let f = w.flows().expect("flows");
            let rt = (bps as f64 * share).round() as u64;
            assert_eq!(sum(&f, None), bps, "{w:?}");
            assert_eq!(sum(&f, Some(Class::Rt)), rt, "{w:?}");
            for c in [Class::Rt, Class::Be] {
                let r: Vec<u64> = f
                    .iter()
                    .filter(|x| x.0 == c)
                    .map(|x| x.1.rate.as_bps())
                    .collect();
                if let (Some(lo), Some(hi)) = (r.iter().min(), r.iter().max()) {
                    assert!(hi - lo <= 1, "{w:?}: {r:?}");
                }
            }
        }
    }

    #[test]
    fn a_packet_load_uses_the_mean_frame_size() {
        let mut w = Workload::new(dst(), Load::Packets(100_000.0), 0.25);
        w.sizes = Sizes::Mix(vec![(64, 1), (1500, 1)]);
        w.be_port = 6000;
        let f = w.flows().expect("flows");
        // 100 kpps × 782 bytes × 8 = 625.6 Mbit/s.
        assert_eq!(sum(&f, None), 625_600_000);
        assert_eq!(sum(&f, Some(Class::Rt)), 156_400_000);
    }

    #[test]
    fn rt_flows_may_be_periodic() {
        let mut w = Workload::new(dst(), Load::Packets(1000.0), 0.5);
        w.rt_pattern = Pattern::Cbr;
        let f = w.flows().expect("flows");
        for (c, spec) in &f {
            let want = if *c == Class::Rt {
                Pattern::Cbr
            } else {
                Pattern::Poisson
            };
            assert_eq!(spec.pattern, want);
        }
    }

    #[test]
    fn shares_at_the_ends_drop_a_class() {
        let w = Workload::new(dst(), Load::Packets(1000.0), 0.0);
        let f = w.flows().expect("flows");
        assert!(f.iter().all(|x| x.0 == Class::Be) && f.len() == 8);
        let w = Workload::new(dst(), Load::Packets(1000.0), 1.0);
        let f = w.flows().expect("flows");
        assert!(f.iter().all(|x| x.0 == Class::Rt) && f.len() == 1);
        assert_eq!(sum(&f, None), 1000 * 64 * 8);
    }

    #[test]
    fn bad_workloads_say_what_is_wrong() {
        let ok = Workload::new(dst(), Load::Packets(1000.0), 0.3);
        let cases: Vec<(Workload, &str)> = vec![
            (
                Workload {
                    rt_share: 1.5,
                    ..ok.clone()
                },
                "allowed 0..=1",
            ),
            (
                Workload {
                    rt_share: f64::NAN,
                    ..ok.clone()
                },
                "allowed 0..=1",
            ),
            (
                Workload {
                    be_flows: 0,
                    ..ok.clone()
                },
                "BE flows 0",
            ),
            (
                Workload {
                    rt_port: 5003,
                    ..ok.clone()
                },
                "overlap",
            ),
            (
                Workload {
                    be_port: 65530,
                    ..ok.clone()
                },
                "BE ports 65530-65537",
            ),
            (
                Workload {
                    load: Load::Bits(Rate::try_from(5).expect("r")),
                    ..ok.clone()
                },
                "below 1 bit/s per flow",
            ),
        ];
        for (w, words) in cases {
            let e = w.flows().expect_err(words);
            assert!(e.contains(words), "{e:?} lacks {words:?}");
        }
    }
}
