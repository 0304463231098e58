//! The closed-loop EDT shaping benchmark (`pktsched bench shape`): the
//! MLTW, the single timing wheel and the cFFS side by side, each driven by
//! core's [`ClosedLoop`].

use std::io::{self, Write};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Result, anyhow, bail};
use pktsched_core::shape::{CffsShaper, ClosedLoop, Shaper, TimeQueue, WheelConfig, Wheels};
use pktsched_core::{FlowConfig, Nanos, Rate, Scheduler};
use serde::Serialize;

use crate::limits::{self, Range};
use crate::stats::{median, thread_cpu_ns};

/// Flows per row (`--flows`).
pub const FLOWS: Range<u64> = Range::new("--flows", 1, 1_000_000);
/// Packets per row (`-n`).
pub const PKTS: Range<u64> = Range::new("-n", 1, 100_000_000);
/// Packets queued per flow (`--outstanding`).
pub const OUTSTANDING: Range<u64> = Range::new("--outstanding", 1, 1024);
/// Most packets queued at once (flows × outstanding).
pub const MAX_QUEUED: u64 = 16_000_000;
/// Packet length (`--len`).
pub const LEN: Range<u64> = Range::new("--len", 1, 65_535);
/// Slot widths (`--gran`, `--mltw-gran`), ns.
pub const GRAN: Range<u64> = Range::new("--gran", 1, 1 << 30);
/// Finest slot of the MLTW (`--mltw-gran`), ns.
pub const MLTW_GRAN: Range<u64> = Range::new("--mltw-gran", 1, 1 << 30);
/// Table memory cap per structure (`--max-memory`), bytes.
pub const MAX_MEMORY: Range<u64> = Range::new("--max-memory", 4096, 8 << 30);
/// Per-flow rates (`--rate`), bits/s.
pub const RATE: Range<u64> = Range::new("--rate", 1_000, 1_000_000_000_000);
/// Most values in a list (`--flows`, `--rate`).
pub const MAX_LIST: usize = 64;

/// A shaping structure.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Structure {
    /// The multi-level timing wheel.
    Mltw,
    /// One timing wheel.
    Wheel,
    /// The cFFS.
    Cffs,
}

impl Structure {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Structure::Mltw => "mltw",
            Structure::Wheel => "wheel",
            Structure::Cffs => "cffs",
        }
    }
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct ShapeOptions {
    /// Numbers of flows, one row set each.
    pub flows: Vec<u64>,
    /// Per-flow rates (bits/s), cycled over the flows.
    pub rates: Vec<u64>,
    /// The rates as given (for plot titles).
    pub rate_text: String,
    /// Packet length, bytes.
    pub len: u32,
    /// Packets released per row.
    pub pkts: u64,
    /// Packets each flow keeps queued.
    pub outstanding: u64,
    /// Slot width of the wheel and the cFFS, ns.
    pub gran: u64,
    /// Finest slot of the MLTW, ns.
    pub mltw_gran: u64,
    /// Table memory cap per structure, bytes.
    pub max_memory: u64,
    /// Start flows at staggered phases.
    pub stagger: bool,
    /// Structures, one row each per number of flows.
    pub structs: Vec<Structure>,
}

/// `--flows`: comma-separated counts in [`FLOWS`].
pub fn parse_flows(s: &str) -> Result<Vec<u64>> {
    limits::list("--flows", s, MAX_LIST, |x| FLOWS.parse(x))
}

/// `--rate`: comma-separated rates in [`RATE`].
pub fn parse_rates(s: &str) -> Result<Vec<u64>> {
    limits::list("--rate", s, MAX_LIST, |x| RATE.rate(x).map(|r| r.as_bps()))
}

/// `--structs`: mltw, wheel, cffs, each at most once.
pub fn parse_structs(s: &str) -> Result<Vec<Structure>> {
    let structs = limits::list("--structs", s, 3, |x| match x {
        "mltw" => Ok(Structure::Mltw),
        "wheel" => Ok(Structure::Wheel),
        "cffs" => Ok(Structure::Cffs),
        other => Err(anyhow!(
            "unknown structure `{other}`; allowed: mltw, wheel, cffs"
        )),
    })?;
    for (i, st) in structs.iter().enumerate() {
        if structs[..i].contains(st) {
            bail!(
                "--structs {s}: a structure is given twice; allowed each of mltw, wheel, cffs once"
            );
        }
    }
    Ok(structs)
}

/// One row's measurement.
#[derive(Debug, Serialize)]
pub struct Res {
    /// The structure.
    pub structure: &'static str,
    /// Flows.
    pub flows: usize,
    /// Packets released.
    pub pkts: u64,
    /// Wall ns per packet.
    pub ns_per_pkt: f64,
    /// Thread CPU ns per packet.
    pub cpu_ns_per_pkt: Option<f64>,
    /// Largest relative rate error of a flow.
    pub rate_err_max: f64,
    /// Median relative rate error.
    pub rate_err_median: f64,
    /// Largest burst of a flow, bytes.
    pub max_burst_bytes: u64,
    /// Wake-ups of the shaper.
    pub wakeups: u64,
    /// Wake-ups per second of virtual time.
    pub wakeups_per_sec: f64,
    /// Most packets released by one wake-up.
    pub max_batch: u64,
    /// Histogram of batch sizes, log2 buckets.
    pub batches_log2: Vec<u64>,
    /// Largest lateness, ns.
    pub max_lateness_ns: u64,
    /// Table memory, bytes.
    pub memory_bytes: usize,
}

/// A row that could not be measured, and why.
#[derive(Debug, Serialize)]
pub struct Failed {
    /// The structure.
    pub structure: &'static str,
    /// Flows.
    pub flows: usize,
    /// Why.
    pub error: String,
}

/// A row of the report.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Row {
    /// Measured.
    Ok(Res),
    /// Refused by the structure (or the shaper).
    Failed(Failed),
}

/// What `run` measured.
#[derive(Debug)]
pub struct ShapeReport {
    /// One per (flows, structure) reached, in order.
    pub rows: Vec<Row>,
    /// Stopped early by the stop flag.
    pub partial: bool,
}

impl ShapeReport {
    /// The measured rows.
    pub fn measured(&self) -> impl Iterator<Item = &Res> {
        self.rows.iter().filter_map(|r| match r {
            Row::Ok(r) => Some(r),
            Row::Failed(_) => None,
        })
    }

    /// The rows that failed.
    pub fn failed(&self) -> impl Iterator<Item = &Failed> {
        self.rows.iter().filter_map(|r| match r {
            Row::Failed(f) => Some(f),
            Row::Ok(_) => None,
        })
    }
}

/// A fixed, well-mixed hash of `x` (SplitMix64's finaliser): the flows'
/// start phases, reproducible without a random-number dependency.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn run_one<Q: TimeQueue>(q: Q, o: &ShapeOptions, n: usize, stop: &AtomicBool) -> Result<Res> {
    let rate_of = |i: usize| o.rates[i % o.rates.len()];
    // The packets carry their flow's record index as a `NonZeroU32`: the
    // flow table's pool slot is then 32 bytes, two to a cache line.
    let mut sh: Shaper<Q, NonZeroU32> = Shaper::new(q, Rate::gbit(1));
    let cfg = FlowConfig::default().with_max_len(o.len.max(64));
    let flows = (0..n)
        .map(|i| sh.add_flow_bps(cfg, rate_of(i)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("{e}"))?;
    let per_flow = (o.pkts / n as u64).max(o.outstanding + 2);
    // Start times: all 0, or (--stagger) a fixed pseudo-random phase
    // within each flow's first packet gap.
    let starts: Vec<Nanos> = (0..n)
        .map(|i| {
            let gap = Rate::bps(rate_of(i)).tx_time(u64::from(o.len)).0;
            Nanos(if o.stagger {
                splitmix64(i as u64) % gap.max(1)
            } else {
                0
            })
        })
        .collect();
    let mut cl = ClosedLoop::fill(&mut sh, &flows, &starts, o.outstanding, o.len, per_flow)?;
    let cpu0 = thread_cpu_ns();
    let t0 = Instant::now();
    cl.run(&mut sh, |_, _, _, _| {}, || stop.load(Ordering::Relaxed))?;
    let wall = t0.elapsed().as_nanos() as f64;
    let cpu = thread_cpu_ns().zip(cpu0).map(|(b, a)| (b - a) as f64);
    if stop.load(Ordering::Relaxed) {
        bail!("stopped");
    }
    let errs: Vec<f64> = cl
        .records()
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.rate_err(rate_of(i)))
        .collect();
    let released = cl.released();
    let st = sh.shape_stats();
    let hist_len = st.batches.iter().rposition(|&b| b > 0).map_or(0, |p| p + 1);
    Ok(Res {
        structure: sh.name(),
        flows: n,
        pkts: released,
        ns_per_pkt: wall / released.max(1) as f64,
        cpu_ns_per_pkt: cpu.map(|c| c / released.max(1) as f64),
        rate_err_max: errs.iter().copied().fold(0.0, f64::max),
        rate_err_median: median(&errs).unwrap_or(0.0),
        max_burst_bytes: cl.max_burst(),
        wakeups: st.wakeups,
        wakeups_per_sec: st.wakeups as f64 * 1e9 / cl.now().0.max(1) as f64,
        max_batch: st.max_batch,
        batches_log2: st.batches[..hist_len].to_vec(),
        max_lateness_ns: st.max_lateness,
        memory_bytes: sh.memory_bytes(),
    })
}

fn check(o: &ShapeOptions) -> Result<()> {
    let n = o.flows.iter().copied().max().unwrap_or(1);
    if n.saturating_mul(o.outstanding) > MAX_QUEUED {
        bail!(
            "--flows {n} with --outstanding {}: {} packets queued at once; allowed at most {MAX_QUEUED} (flows × outstanding)",
            o.outstanding,
            n.saturating_mul(o.outstanding)
        );
    }
    if o.rates.is_empty() || o.flows.is_empty() || o.structs.is_empty() {
        bail!("--flows, --rate and --structs need at least one value each");
    }
    Ok(())
}

/// Measures every (flows, structure) row in order, checking `stop`
/// between instants of the loop; a row a structure refuses is a
/// [`Row::Failed`] with the reason.
pub fn run(o: &ShapeOptions, stop: &AtomicBool) -> Result<ShapeReport> {
    check(o)?;
    let slowest = o.rates.iter().copied().min().unwrap_or(1);
    // Horizon: the outstanding packets of the slowest flow, twice over.
    let spacing = Rate::bps(slowest).tx_time(u64::from(o.len)).0;
    let horizon = Nanos(spacing.saturating_mul(2 * (o.outstanding + 1)));
    // The MLTW needs a wheel whose slot matches the slowest flow's
    // MTU/rate (FlowBundler's level choice); with only the levels the
    // horizon asks for, slow flows would all land on the top (too fine)
    // wheel and nothing would batch. Its own wheel then reaches 1024
    // packets of that flow ahead.
    let mltw_horizon = Nanos(horizon.0.max(spacing.saturating_mul(1024)));
    let mem = usize::try_from(o.max_memory).unwrap_or(usize::MAX);
    let mut rows = Vec::new();
    for &n in &o.flows {
        let n = n as usize;
        for &s in &o.structs {
            if stop.load(Ordering::Relaxed) {
                return Ok(ShapeReport {
                    rows,
                    partial: true,
                });
            }
            let r = match s {
                Structure::Mltw => {
                    Wheels::new(WheelConfig::mltw(o.mltw_gran, 1024, mltw_horizon).max_memory(mem))
                        .map_err(|e| anyhow!("{e}"))
                        .and_then(|q| run_one(q, o, n, stop))
                }
                Structure::Wheel => {
                    Wheels::new(WheelConfig::single(o.gran, horizon).max_memory(mem))
                        .map_err(|e| anyhow!("{e}"))
                        .and_then(|q| run_one(q, o, n, stop))
                }
                Structure::Cffs => CffsShaper::new(o.gran, horizon, mem)
                    .map_err(|e| anyhow!("{e}"))
                    .and_then(|q| run_one(q, o, n, stop)),
            };
            if stop.load(Ordering::Relaxed) {
                return Ok(ShapeReport {
                    rows,
                    partial: true,
                });
            }
            rows.push(match r {
                Ok(r) => Row::Ok(r),
                Err(e) => Row::Failed(Failed {
                    structure: s.name(),
                    flows: n,
                    error: format!("{e:#}"),
                }),
            });
        }
    }
    Ok(ShapeReport {
        rows,
        partial: false,
    })
}

/// The `bench shape` table of the measured rows.
pub fn write_table(out: &mut dyn Write, rows: &[Row]) -> io::Result<()> {
    writeln!(
        out,
        "{:<6} {:>7} {:>9} {:>8} {:>8} {:>9} {:>9} {:>7} {:>10} {:>9} {:>6} {:>8} {:>11}",
        "struct",
        "flows",
        "pkts",
        "ns/pkt",
        "cpu ns",
        "err max",
        "err med",
        "burst",
        "wakeups",
        "wake/s",
        "batch",
        "late ns",
        "memory"
    )?;
    for r in rows {
        let Row::Ok(r) = r else { continue };
        writeln!(
            out,
            "{:<6} {:>7} {:>9} {:>8.1} {:>8.1} {:>8.4}% {:>8.4}% {:>7} {:>10} {:>9.0} {:>6} {:>8} {:>11}",
            r.structure,
            r.flows,
            r.pkts,
            r.ns_per_pkt,
            r.cpu_ns_per_pkt.unwrap_or(f64::NAN),
            r.rate_err_max * 100.0,
            r.rate_err_median * 100.0,
            r.max_burst_bytes,
            r.wakeups,
            r.wakeups_per_sec,
            r.max_batch,
            r.max_lateness_ns,
            r.memory_bytes
        )?;
    }
    Ok(())
}

/// One figure of a row, for a plot.
type Metric = fn(&Res) -> f64;

/// The two SVGs of `--plot`: ns per packet and wake-ups per second against
/// the number of flows, one line per structure; returns the files written.
pub fn plot(prefix: &str, o: &ShapeOptions, rep: &ShapeReport) -> Result<Vec<String>> {
    let mut structs: Vec<&str> = Vec::new();
    for r in rep.measured() {
        if !structs.contains(&r.structure) {
            structs.push(r.structure);
        }
    }
    let series = |y: &dyn Fn(&Res) -> f64| -> Vec<(String, Vec<(f64, f64)>)> {
        structs
            .iter()
            .map(|s| {
                let pts = rep
                    .measured()
                    .filter(|r| r.structure == *s)
                    .map(|r| (r.flows as f64, y(r)))
                    .collect();
                (s.to_string(), pts)
            })
            .collect()
    };
    let how = format!(
        "{} B packets at {}{}",
        o.len,
        o.rate_text,
        if o.stagger {
            ", staggered"
        } else {
            ", in phase"
        }
    );
    let charts: [(&str, String, &str, Metric); 2] = [
        (
            "ns",
            format!("shaping cost per packet ({how})"),
            "ns per packet (enqueue + dequeue)",
            |r| r.ns_per_pkt,
        ),
        (
            "wakeups",
            format!("wake-ups per second of virtual time ({how})"),
            "wake-ups / s",
            |r| r.wakeups_per_sec,
        ),
    ];
    let mut files = Vec::new();
    for (suffix, title, y_desc, y) in charts {
        let file = format!("{prefix}-{suffix}.svg");
        crate::svg::Chart {
            title,
            x_desc: "flows",
            y_desc,
            log_x: true,
            series: series(&y),
        }
        .draw(std::path::Path::new(&file))?;
        files.push(file);
    }
    Ok(files)
}
