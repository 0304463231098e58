//! The load sweep: per-class latency and loss against offered load for
//! SQ, RR, LL-RR and LL-WFQ, two classes (RT = class 0, BE = class 1)
//! with a fixed RT share of the offered load, Poisson arrivals.

use std::io::Write;

use pktsched_core::ingress::{IngressConfig, Strategy};
use serde::Serialize;

use crate::ingress::{Arrivals, ClassLoad, IngressParam, IngressSim, IngressSimError};

/// One strategy at one offered load, one class.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepPoint {
    /// The strategy.
    pub strategy: String,
    /// Offered load of both classes together (fraction of `1/x`).
    pub load: f64,
    /// The class (0 = RT, 1 = BE).
    pub class: usize,
    /// Median latency, µs.
    pub p50_us: f64,
    /// 99th percentile latency, µs.
    pub p99_us: f64,
    /// Largest latency, µs.
    pub max_us: f64,
    /// Fraction dropped.
    pub loss: f64,
    /// Served packets per second.
    pub throughput_pps: f64,
}

/// The poller configuration the sweep uses for `strategy`: SQ and RR
/// with the device budget 64, LL-RR with 8 per ring, LL-WFQ with RT 60
/// and BE 4.
pub fn sweep_config(strategy: Strategy) -> IngressConfig {
    match strategy {
        Strategy::Sq => IngressConfig::sq(2),
        Strategy::Rr => IngressConfig::rr(2),
        Strategy::LlRr => IngressConfig::ll_rr(2, 8),
        Strategy::LlWfq => IngressConfig::ll_wfq(&[60, 4]),
    }
}

/// Runs every strategy at every load in `loads`, RT share `rt_share`,
/// `packets` arrivals per point, rings of `ring` packets per class.
pub fn sweep(
    x_ps: u64,
    loads: &[f64],
    rt_share: f64,
    packets: u64,
    ring: usize,
    seed: u64,
) -> Result<Vec<SweepPoint>, IngressSimError> {
    if !(rt_share > 0.0 && rt_share < 1.0) {
        return Err(IngressSimError::Range {
            field: IngressParam::RtShare,
            value: rt_share.to_string(),
            allowed: "0 < rt_share < 1".into(),
        });
    }
    let mut out = Vec::new();
    for st in Strategy::ALL {
        for &load in loads {
            let class = |l: f64| ClassLoad {
                load: l,
                arrivals: Arrivals::Poisson,
                ring,
            };
            let sim = IngressSim {
                poller: sweep_config(st),
                x_ps,
                jitter: 0.0,
                classes: vec![class(load * rt_share), class(load * (1.0 - rt_share))],
                packets,
                seed,
            };
            let o = sim.run()?;
            for c in &o.classes {
                let us = |ps: u64| ps as f64 / 1e6;
                out.push(SweepPoint {
                    strategy: st.to_string(),
                    load,
                    class: c.class,
                    p50_us: us(c.p50_ps),
                    p99_us: us(c.p99_ps),
                    max_us: us(c.max_ps),
                    loss: c.loss,
                    throughput_pps: c.throughput_pps,
                });
            }
        }
    }
    Ok(out)
}

/// Writes the points as CSV with a header line.
pub fn sweep_csv(points: &[SweepPoint], mut w: impl Write) -> std::io::Result<()> {
    writeln!(
        w,
        "strategy,load,class,p50_us,p99_us,max_us,loss,throughput_pps"
    )?;
    for p in points {
        writeln!(
            w,
            "{},{},{},{:.3},{:.3},{:.3},{:.6},{:.0}",
            p.strategy, p.load, p.class, p.p50_us, p.p99_us, p.max_us, p.loss, p.throughput_pps
        )?;
    }
    Ok(())
}
